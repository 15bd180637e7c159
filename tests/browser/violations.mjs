// The chat page's own frame-order check, in headless Chromium: the page is
// served streams that break the frame table and must name the broken row and
// render nothing of the stream after it. Driven over the DevTools protocol
// like e2e.mjs (no npm packages: Node's built-in fetch and WebSocket).
// Usage: node --experimental-websocket violations.mjs BASE_URL
// BASE_URL serves the real page, the real /v1/tables/frame and real threads,
// but answers POST /v1/threads/{id}/messages with a hand-made stream chosen
// by the message text (see the stub in tests/browser.rs).
// Exits 0 when every check passed; prints what it saw either way.
import { launch, sleep } from "./cdp.mjs";

const BASE = process.argv[2];
const { cmd, ev, idle, say, check, finish, errors, failed } = await launch("violations", 60_000);
// What the newest assistant block shows.
const lastBlock = () => ev(`(() => {
  const all = document.querySelectorAll('.asst'), b = all[all.length - 1];
  if (!b) return null;
  return {
    answer: b.querySelector('.answer').textContent,
    violations: [...b.querySelectorAll('[data-testid=violation]')].map((n) => n.textContent),
    citations: b.querySelectorAll('[data-testid=citation]').length,
    tools: b.querySelectorAll('[data-testid=tool]').length,
    last: b.lastElementChild.lastElementChild ? b.lastElementChild.lastElementChild.dataset.testid : null,
  };
})()`);
const pageText = () => ev(`document.body.textContent`);

// The rows the page must name, straight from the table the server serves.
const table = await (await fetch(new URL("/v1/tables/frame", BASE))).json();
const row = (id) => table.rows.find((r) => r.id === id);

// Each scenario is one message; the stub answers it with the stream named by
// the text. `shown` is what the page may render before the broken frame,
// `never` the texts that come at or after it.
const scenarios = [
  { text: "delta-before-start", row: "delta-before-start", shown: "", never: ["EARLY-DELTA-TEXT", "LATE-DELTA-TEXT"] },
  { text: "delta-after-done", row: "delta-after-terminal", shown: "Shown before done.", never: ["AFTER-DONE-TEXT"] },
  { text: "done-after-done", row: "duplicate-terminal", shown: "Answered once.", never: ["AFTER-SECOND-DONE-TEXT"] },
];

try {
  await cmd("Runtime.enable");
  await cmd("Page.enable");
  await cmd("Page.navigate", { url: BASE });
  await idle();
  check((await ev("location.search")).includes("thread="), "the page loaded the frame table and created a thread");

  for (const s of scenarios) {
    const r = row(s.row);
    check(!!r && r.legal === false, `${s.text}: the table has the forbidden row ${s.row}`);
    await say(s.text);
    const b = await lastBlock();
    console.log(`     ${s.text}: ${JSON.stringify(b)}`);
    check(b && b.violations.length === 1, `${s.text}: exactly one violation is shown`);
    const v = (b && b.violations[0]) || "";
    check(v.includes(`row ${s.row} `), `${s.text}: the violation names row ${s.row}`);
    check(!!r && v.includes(r.why), `${s.text}: the violation gives the row's reason from the table`);
    check(b && b.last === "violation", `${s.text}: the violation is the last thing in the block`);
    check(b && b.answer === s.shown, `${s.text}: the answer holds only the text before the broken frame: ${JSON.stringify(b && b.answer)}`);
    check(b && b.citations === 0 && b.tools === 0, `${s.text}: no card or tool line was rendered from the stream after it`);
    const all = await pageText();
    for (const t of s.never) check(!all.includes(t), `${s.text}: "${t}" is not on the page`);
  }
  check(errors.length === 0, `no script errors: ${errors.join("; ")}`);
} catch (e) {
  check(false, `driver error: ${e.message}`);
}
finish(failed() ? 1 : 0);
