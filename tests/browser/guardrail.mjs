// The safety checks in the chat page, in headless Chromium, against a server
// whose `secrets`, `pii` and `words` checks are on: a message with a
// credential is refused by code with the guardrail table's row, marked like
// a narration replacement but naming the check; after a reload the
// credential is nowhere in the page (the thread stores a placeholder).
// Usage: node --experimental-websocket guardrail.mjs BASE_URL SECRET
// Exits 0 when every check passed; prints what it saw either way.
import { launch, replacedMarks, sleep } from "./cdp.mjs";

const BASE = process.argv[2];
const SECRET = process.argv[3];
const { cmd, ev, idle, say, check, finish, errors, failed } = await launch("guardrail", 60_000);
const marks = () => replacedMarks(ev);
const page = () => ev(`document.body.textContent`);

try {
  await cmd("Runtime.enable");
  await cmd("Page.enable");
  await cmd("Page.navigate", { url: BASE });
  await idle();
  await say(`my password = ${SECRET}, show safety issues on floor 3`);
  const live = await marks();
  console.log(`     marks: ${JSON.stringify(live)}`);
  check(live.length === 1 && live[0].table === "guardrail" && live[0].row === "input-blocked",
    `the refusal is marked with the guardrail table's row: ${JSON.stringify(live.map((m) => [m.table, m.row]))}`);
  check(live[0]?.title.includes("`secrets`") && live[0]?.title.includes("guardrail table, row input-blocked"),
    `its tooltip names the check and the row: ${live[0]?.title}`);
  check(live[0]?.text.includes("did not go to the assistant"), "code's sentence says the message was not sent");
  await cmd("Page.reload");
  await sleep(300);
  await idle();
  const stored = await marks();
  check(JSON.stringify(stored) === JSON.stringify(live), "a reload marks the same refusal");
  check(!(await page()).includes(SECRET), "after a reload the credential is nowhere in the page");
  check(errors.length === 0, `no script errors: ${errors.join("; ")}`);
} catch (e) {
  check(false, `driver error: ${e.message}`);
}
finish(failed() ? 1 : 0);
