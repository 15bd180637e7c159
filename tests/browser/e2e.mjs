// End-to-end check of the chat page in headless Chromium, driven over the
// DevTools protocol (no npm packages: Node's built-in fetch and WebSocket).
// Usage: node --experimental-websocket e2e.mjs BASE_URL [SCREENSHOT.png]
// Exits 0 when every check passed; prints what it saw either way.
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer } from "node:net";

const BASE = process.argv[2];
const SHOT = process.argv[3];
const CHROMIUM = process.env.TURNSTILE_CHROMIUM || "chromium";
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const freePort = () => new Promise((resolve) => {
  const s = createServer();
  s.listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => resolve(p)); });
});

const port = await freePort();
const profile = mkdtempSync(join(tmpdir(), "turnstile-e2e-"));
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
const texts = (testid) => ev(`[...document.querySelectorAll('[data-testid=${testid}]')].map(n => n.textContent)`);
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

try {
  await cmd("Runtime.enable");
  await cmd("Page.enable");
  await cmd("Emulation.setDeviceMetricsOverride", { width: 1100, height: 1300, deviceScaleFactor: 1, mobile: false });
  await cmd("Page.navigate", { url: BASE });
  await idle();
  check((await ev("location.search")).includes("thread="), "the page created a thread and put it in the URL");

  await say("show safety issues on floor 3");
  const counts = await texts("count");
  check(counts.at(-1) === "10 shown of at least 189", `the card shows the honest count: ${JSON.stringify(counts)}`);
  const answer = await ev(`document.querySelector('[data-testid=answer]').textContent`);
  check(answer.includes("At least 189") && answer.includes("These 10"), `the answer separates the subjects: ${JSON.stringify(answer)}`);
  const tools = await texts("tool");
  check(tools.length === 1 && tools[0].endsWith("search_photos on demo — ok: 10 items"),
    `the tool line shows the tool, its server and the result's summary: ${JSON.stringify(tools)}`);
  const [cardBottom, answerTop] = await ev(`[document.querySelector('[data-testid=citation]').getBoundingClientRect().bottom,
    document.querySelector('[data-testid=answer]').getBoundingClientRect().top]`);
  check(cardBottom <= answerTop && answer.includes("in the card above"), "the card is above the answer, and the answer says so");

  await say("only those from April");
  const narrowed = (await texts("count")).at(-1);
  check(narrowed === "All 25 — complete list", `narrowing turns the sample into a complete card: ${JSON.stringify(narrowed)}`);

  check((await texts("violation")).length === 0, "no frame order violation was shown");
  check(errors.length === 0, `no script errors: ${errors.join("; ")}`);

  const liveTools = await texts("tool");

  // The thread survives a reload: the stored messages are rendered.
  await cmd("Page.reload");
  await sleep(300);
  await idle();
  const after = await texts("count");
  check(after.includes("10 shown of at least 189"), `a reload renders the stored thread: ${JSON.stringify(after)}`);
  const storedTools = await texts("tool");
  check(JSON.stringify(storedTools) === JSON.stringify(liveTools) && !storedTools.some((t) => /null|undefined/.test(t)),
    `a reload renders the tool lines as they streamed, with no absent field printed: ${JSON.stringify(storedTools)}`);

  if (SHOT) {
    const r = await cmd("Page.captureScreenshot", { format: "png" });
    writeFileSync(SHOT, Buffer.from(r.result.data, "base64"));
  }
} catch (e) {
  check(false, `driver error: ${e.message}`);
}
finish(failed ? 1 : 0);
