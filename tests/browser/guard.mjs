// The narration guard in the chat page, in headless Chromium: the server's
// model lies on purpose (`turnstile demo --fault lying-model`); each lie is
// replaced by the code's own sentence, which the page marks discreetly with
// a tooltip naming the narration table's row and its reason. The lie itself
// never reaches the page, live or after a reload.
// Usage: node --experimental-websocket guard.mjs BASE_URL LIE...
// Exits 0 when every check passed; prints what it saw either way.
import { launch, replacedMarks, sleep } from "./cdp.mjs";

const BASE = process.argv[2];
const LIES = process.argv.slice(3);
const { cmd, ev, idle, say, check, finish, errors, failed } = await launch("guard", 60_000);
const marks = () => replacedMarks(ev);
const page = () => ev(`document.body.textContent`);

try {
  await cmd("Runtime.enable");
  await cmd("Page.enable");
  await cmd("Page.navigate", { url: BASE });
  await idle();
  await say("show safety issues on floor 3");
  const live = await marks();
  console.log(`     marks: ${JSON.stringify(live)}`);
  check(live.length >= 1 && live.every((m) => m.row && m.title.includes(`row ${m.row}`) && m.title.includes("narration guard")),
    `each replaced sentence is marked, with a tooltip naming its row: ${JSON.stringify(live.map((m) => m.row))}`);
  check(live.some((m) => m.text.includes("At least 189")), "the code's own sentence stands in the lie's place");
  const text = await page();
  check(LIES.every((l) => !text.includes(l)), "no lie reaches the page");
  await cmd("Page.reload");
  await sleep(300);
  await idle();
  const stored = await marks();
  check(JSON.stringify(stored) === JSON.stringify(live), "a reload marks the same sentences");
  check(LIES.every((l) => !(text.includes(l))), "no lie after a reload either");
  check(errors.length === 0, `no script errors: ${errors.join("; ")}`);
} catch (e) {
  check(false, `driver error: ${e.message}`);
}
finish(failed() ? 1 : 0);
