// Headless Chromium driven over the DevTools protocol, shared by the browser
// checks (no npm packages: Node's built-in fetch and WebSocket). `launch`
// starts a fresh profile and returns the helpers every check uses.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// JSON with sorted keys: the same value, whatever order its keys came in.
export const canon = (v) => JSON.stringify(v, (_, x) => (x && typeof x === "object" && !Array.isArray(x)
  ? Object.fromEntries(Object.keys(x).sort().map((k) => [k, x[k]])) : x));

/// The page's marked sentences (a narration guard's or a safety check's
/// replacement): each one's row, table, tooltip and text, in order.
export const replacedMarks = (ev) => ev(`[...document.querySelectorAll('[data-testid=replaced]')].map((n) => ({
  row: n.dataset.row, table: n.dataset.table, title: n.getAttribute('title'), text: n.textContent }))`);

/// Starts Chromium (profile `turnstile-NAME-*`), gives up after `timeoutMs`.
export async function launch(name, timeoutMs) {
  const CHROMIUM = process.env.TURNSTILE_CHROMIUM || "chromium";
  const profile = mkdtempSync(join(tmpdir(), `turnstile-${name}-`));
  const chrome = spawn(CHROMIUM, [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    // Port 0: Chromium binds a free port itself and writes it to
    // DevToolsActivePort in its profile. A port picked here and bound later
    // could be taken meanwhile by another test's Chromium, whose tab this
    // script would then drive.
    "--remote-debugging-port=0", `--user-data-dir=${profile}`, "about:blank",
  ], { stdio: "ignore" });
  let failed = false;
  const check = (ok, what) => { console.log(`${ok ? "ok  " : "FAIL"} ${what}`); if (!ok) failed = true; };
  const finish = async (code) => {
    chrome.kill();
    await new Promise((r) => { chrome.once("exit", r); setTimeout(r, 2000); });
    try { rmSync(profile, { recursive: true, force: true }); } catch { /* a leftover temp dir is harmless */ }
    process.exit(code);
  };
  setTimeout(() => { console.log("FAIL timed out"); finish(1); }, timeoutMs);

  let targets;
  let port;
  for (let i = 0; i < 100 && !targets; i++) {
    try {
      port ??= Number(readFileSync(join(profile, "DevToolsActivePort"), "utf8").split("\n")[0]) || undefined;
      if (port) targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
      else await sleep(200);
    } catch { await sleep(200); }
  }
  if (!targets) { console.log("FAIL chromium did not start"); await finish(1); }
  const page = targets.find((t) => t.type === "page");
  const ws = new WebSocket(page.webSocketDebuggerUrl);
  await new Promise((r) => ws.addEventListener("open", r));
  let nid = 0;
  const pending = new Map();
  const errors = [];
  // `on(method, fn)`: fn(params) for each event of the page's session.
  const listeners = new Map();
  const on = (method, fn) => { listeners.set(method, [...(listeners.get(method) || []), fn]); };
  ws.addEventListener("message", (m) => {
    const d = JSON.parse(m.data);
    if (d.id && pending.has(d.id)) { pending.get(d.id)(d); pending.delete(d.id); }
    if (d.method === "Runtime.exceptionThrown") errors.push(JSON.stringify(d.params.exceptionDetails).slice(0, 300));
    for (const fn of listeners.get(d.method) || []) fn(d.params);
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
  // Waits for `expr` to hold in the page; a check fails if it never does.
  const until = async (expr, what, ms = 20_000) => {
    for (let i = 0; i < ms / 100; i++) {
      if (await ev(expr)) return true;
      await sleep(100);
    }
    check(false, `${what} (waited for ${expr})`);
    return false;
  };
  // Another tab of the same browser (one a link opened): its own session,
  // found by the start of its URL.
  const tab = async (prefix, ms = 20_000) => {
    for (let i = 0; i < ms / 100; i++) {
      const all = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
      const t = all.find((x) => x.type === "page" && x.url.startsWith(prefix));
      if (t) {
        const sock = new WebSocket(t.webSocketDebuggerUrl);
        await new Promise((r) => sock.addEventListener("open", r));
        let n = 0;
        const waiting = new Map();
        sock.addEventListener("message", (m) => {
          const d = JSON.parse(m.data);
          if (d.id && waiting.has(d.id)) { waiting.get(d.id)(d); waiting.delete(d.id); }
        });
        const tcmd = (method, params = {}) => new Promise((r) => { const id = ++n; waiting.set(id, r); sock.send(JSON.stringify({ id, method, params })); });
        const tev = async (expr) => (await tcmd("Runtime.evaluate", { expression: expr, awaitPromise: true, returnByValue: true })).result.result?.value;
        return { cmd: tcmd, ev: tev };
      }
      await sleep(100);
    }
    throw new Error(`no tab at ${prefix}`);
  };
  return { cmd, ev, idle, say, until, check, finish, errors, on, tab, failed: () => failed };
}
