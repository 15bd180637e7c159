// The chat page's own frame-order check, in headless Chromium: the page is
// served streams that break the frame table and must name the broken row and
// render nothing of the stream after it. Driven over the DevTools protocol
// like e2e.mjs (no npm packages: Node's built-in fetch and WebSocket).
// Usage: node --experimental-websocket violations.mjs BASE_URL
// BASE_URL serves the real page, the real /v1/tables/frame and real threads,
// but answers POST /v1/threads/{id}/messages with a hand-made stream chosen
// by the message text (see the stub in tests/browser.rs).
// Exits 0 when every check passed; prints what it saw either way.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer } from "node:net";

const BASE = process.argv[2];
const CHROMIUM = process.env.TURNSTILE_CHROMIUM || "chromium";
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const freePort = () => new Promise((resolve) => {
  const s = createServer();
  s.listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => resolve(p)); });
});

const port = await freePort();
const profile = mkdtempSync(join(tmpdir(), "turnstile-violations-"));
const chrome = spawn(CHROMIUM, [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
  `--remote-debugging-port=${port}`, `--user-data-dir=${profile}`, "about:blank",
], { stdio: "ignore" });
let failed = false;
const check = (ok, what) => { console.log(`${ok ? "ok  " : "FAIL"} ${what}`); if (!ok) failed = true; };
const finish = async (code) => {
  chrome.kill();
  await new Promise((r) => { chrome.once("exit", r); setTimeout(r, 2000); });
  try { rmSync(profile, { recursive: true, force: true }); } catch { /* a leftover temp dir is harmless */ }
  process.exit(code);
};
setTimeout(() => { console.log("FAIL timed out"); finish(1); }, 60_000);

let targets;
for (let i = 0; i < 100 && !targets; i++) {
  try { targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json(); } catch { await sleep(200); }
}
if (!targets) { console.log("FAIL chromium did not start"); finish(1); }
const page = targets.find((t) => t.type === "page");
const ws = new WebSocket(page.webSocketDebuggerUrl);
await new Promise((r) => ws.addEventListener("open", r));
let nid = 0;
const pending = new Map();
const errors = [];
ws.addEventListener("message", (m) => {
  const d = JSON.parse(m.data);
  if (d.id && pending.has(d.id)) { pending.get(d.id)(d); pending.delete(d.id); }
  if (d.method === "Runtime.exceptionThrown") errors.push(JSON.stringify(d.params.exceptionDetails).slice(0, 300));
});
const cmd = (method, params = {}) => new Promise((r) => { const id = ++nid; pending.set(id, r); ws.send(JSON.stringify({ id, method, params })); });
const ev = async (expr) => (await cmd("Runtime.evaluate", { expression: expr, awaitPromise: true, returnByValue: true })).result.result.value;
const idle = async () => {
  for (let i = 0; i < 200; i++) {
    await sleep(50);
    if (await ev(`!!document.querySelector('[data-testid=send]') && !document.querySelector('[data-testid=send]').disabled`)) return;
  }
  throw new Error("the page never became idle");
};
const say = async (text) => {
  await ev(`document.querySelector('[data-testid=input]').focus()`);
  await cmd("Input.insertText", { text });
  await cmd("Input.dispatchKeyEvent", { type: "keyDown", key: "Enter", code: "Enter", windowsVirtualKeyCode: 13, text: "\r" });
  await cmd("Input.dispatchKeyEvent", { type: "keyUp", key: "Enter", code: "Enter", windowsVirtualKeyCode: 13 });
  await sleep(100);
  await idle();
};
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
finish(failed ? 1 : 0);
