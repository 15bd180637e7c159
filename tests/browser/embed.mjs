// The chat page as a panel in its host apps (issue 38), in headless Chromium
// over the DevTools protocol (cdp.mjs), against a real `turnstile demo`:
// - the site viewer (/demo/host) mounts the panel; the floor the viewer
//   shows is the next answer's scope, changed in the host, never in the
//   conversation; a send while an answer streams is refused by its panel row;
// - a click on a cited item dispatches the exact deep-link payload to the
//   host (scope, axes, camera), with no navigation and no reload of either
//   document; screenshots before and after the click;
// - a message from a foreign origin (a popup served by this script) is
//   ignored, and the scope stays the host's;
// - the console (/demo/console) sends names only and gets the routing part;
// - a connection cut mid-answer (a proxy of this script drops it) is
//   reconnected, and the answer is shown once, whole, as stored;
// - every forbidden row of tables/panel.ron through the page's own runner.
// Usage: node --experimental-websocket embed.mjs BASE_URL SHOT_DIR
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createServer as createHttp } from "node:http";
import { createServer as createTcp, connect } from "node:net";
import { canon, launch, sleep } from "./cdp.mjs";

const BASE = new URL(process.argv[2]);
const SHOTS = process.argv[3];
const { cmd, ev, until, check, finish, errors, failed } = await launch("embed", 150_000);

const t0 = Date.now();
const mark = (what) => console.log(`     ${((Date.now() - t0) / 1000).toFixed(1)} s: ${what}`);
const shot = async (name) => {
  await cmd("Page.bringToFront");
  const r = await cmd("Page.captureScreenshot", { format: "png" });
  writeFileSync(join(SHOTS, `${name}.png`), Buffer.from(r.result.data, "base64"));
};
// The panel's document inside the host page (same origin as the host).
const P = `document.getElementById('panel').contentDocument`;
const PW = `document.getElementById('panel').contentWindow`;
const panelReady = `(() => { const d = ${P}; const b = d && d.querySelector('[data-testid=send]');
  return !!b && !b.disabled && d.getElementById('thread-id').textContent !== '…'; })()`;
const panelIdle = `(() => { const d = ${P}; const b = d.querySelector('[data-testid=send]'); return !b.disabled && !d.querySelector('.asst.streaming'); })()`;
const askIn = async (doc, text) => {
  await ev(`(() => { const d = ${doc}; d.querySelector('[data-testid=input]').value = ${JSON.stringify(text)};
    d.getElementById('composer').requestSubmit(); })()`);
  await sleep(150);
};
const threadOf = (doc) => ev(`${doc}.getElementById('thread-id').textContent`);
const stored = async (thread) => (await fetch(new URL(`/v1/threads/${thread}`, BASE), { headers: { cookie: await cookies() } })).json();
const cookies = async () => {
  const r = await cmd("Network.getCookies", { urls: [String(BASE)] });
  return ((r.result && r.result.cookies) || []).map((c) => `${c.name}=${c.value}`).join("; ");
};
const searchCalls = (t) => t.messages.map((m) => m.body).filter((b) => b.kind === "call" && b.tool === "search_photos");
const cards = (t) => t.messages.map((m) => m.body).filter((b) => b.kind === "card").map((b) => b.citation);
const problems = (doc) => ev(`${doc}.querySelectorAll('[data-testid=violation], [data-testid=error]').length`);

// A page of another origin that writes to the panel: a popup the host
// opens, whose script posts panel/1 messages to its opener's panel frame.
const foreign = createHttp((req, res) => {
  res.setHeader("content-type", "text/html");
  res.end(`<!doctype html><title>foreign</title><script>
    const m = (x) => Object.assign({ turnstile: "panel/1" }, x);
    const panel = window.opener && window.opener.frames[0];
    panel.postMessage(m({ kind: "hello", implements: ["dispatchCitation"], capabilities: { viewer: true } }), "*");
    panel.postMessage(m({ kind: "event", name: "viewerState", value: { project: "tower-a", floor: 9, visible: [] } }), "*");
    panel.postMessage(m({ kind: "event", name: "authToken", value: "stolen-token" }), "*");
    document.title = "sent";
    setTimeout(() => window.close(), 300);
  </script>`);
});
await new Promise((r) => foreign.listen(0, "127.0.0.1", r));
const FOREIGN = `http://127.0.0.1:${foreign.address().port}/`;

// A proxy in front of the demo that can drop every open connection.
const sockets = new Set();
const proxy = createTcp((client) => {
  const up = connect(Number(BASE.port), BASE.hostname);
  for (const s of [client, up]) { sockets.add(s); s.on("close", () => sockets.delete(s)); s.on("error", () => {}); }
  client.pipe(up); up.pipe(client);
});
// At `localhost`: its own cookie jar, so the page there has its own session.
await new Promise((r) => proxy.listen(0, r));
const PROXY = `http://localhost:${proxy.address().port}/`;
const cut = () => { for (const s of sockets) s.destroy(); };

try {
  await cmd("Runtime.enable");
  await cmd("Page.enable");
  await cmd("Network.enable");
  await cmd("Emulation.setDeviceMetricsOverride", { width: 1280, height: 860, deviceScaleFactor: 1, mobile: false });

  // ---- the site viewer -----------------------------------------------------
  await cmd("Page.navigate", { url: new URL("/demo/host", BASE).href });
  await until(panelReady, "the host page mounts the panel");
  await until(`!${P}.getElementById('host-context').hidden`, "the panel shows what the host sent");
  const context = await ev(`${P}.getElementById('host-context').textContent`);
  check(/facility demo-site/.test(context) && /floor 3/.test(context) && /6 in view/.test(context),
    `the panel reads the viewer's screen: ${JSON.stringify(context)}`);

  // The floor is the host's: change it there, ask about "this floor".
  await ev(`(() => { const s = document.getElementById('floor'); s.value = '4'; s.dispatchEvent(new Event('change')); })()`);
  await until(`/floor 4/.test(${P}.getElementById('host-context').textContent)`, "the viewer's new floor reaches the panel");
  await askIn(P, "show safety issues on this floor");
  // While it streams, another send is the panel table's to refuse.
  await until(`${P}.body.dataset.panelState === 'Streaming' || ${P}.body.dataset.panelState === 'ToolRunning'`, "the answer streams", 10_000);
  await askIn(P, "and on floor 9?");
  const refused = await ev(`(() => { const r = ${P}.querySelector('[data-testid=panel-refused]');
    return r && { row: r.dataset.row, text: r.textContent, kept: ${P}.querySelector('[data-testid=input]').value }; })()`);
  check(!!refused && /^send-while-(streaming|a-call-runs)$/.test(refused.row) && refused.kept === "and on floor 9?",
    `a send while the answer streams is refused by its row and the text is kept: ${JSON.stringify(refused)}`);
  await until(panelIdle, "the answer ends");
  await ev(`${P}.querySelector('[data-testid=input]').value = ''`);
  const viewerThread = await threadOf(P);
  let t = await stored(viewerThread);
  let calls = searchCalls(t);
  check(calls.length === 1 && calls[0].args.floor === 4, `the search ran on the host's floor 4: ${JSON.stringify(calls.map((c) => c.args))}`);
  const cardItems = cards(t).at(-1).items;
  check(cardItems.length > 0 && cardItems.every((i) => i.floor === 4), "every cited item is on floor 4");

  await ev(`(() => { const s = document.getElementById('floor'); s.value = '7'; s.dispatchEvent(new Event('change')); })()`);
  await until(`/floor 7/.test(${P}.getElementById('host-context').textContent)`, "floor 7 reaches the panel");
  await askIn(P, "show safety issues on this floor");
  await until(panelIdle, "the second answer ends");
  t = await stored(viewerThread);
  calls = searchCalls(t);
  check(calls.length === 2 && calls[1].args.floor === 7, `the next answer's scope is the host's new floor: ${JSON.stringify(calls.map((c) => c.args))}`);

  // A list at the bound is announced as possibly truncated.
  await ev(`(() => { const s = document.getElementById('crowd'); s.value = '80'; s.dispatchEvent(new Event('change')); })()`);
  await until(`/possibly truncated/.test(${P}.getElementById('host-context').textContent)`, "80 annotations in view are announced as possibly truncated");

  mark('a citation click');
  // ---- a citation click is an app-state transition --------------------------
  await ev(`window.__doc = Math.random(); ${PW}.__doc = Math.random(); window.__before = [location.href, ${PW}.location.href, window.__doc, ${PW}.__doc]`);
  await shot("host-before-click");
  const card = cards(t).at(-1);
  const link = card.links[0], item = card.items[0];
  const expected = { scope: link.scope, item: item.id, axes: link.axes, camera: link.camera };
  check(!!link.camera && !!link.scope.panorama, `the stored card carries the item's link: ${JSON.stringify(link)}`);
  const buttons = await ev(`[...${P}.querySelectorAll('[data-testid=citation]')].at(-1).querySelectorAll('[data-testid=cite-go]').length`);
  check(buttons === card.items.length, `each cited item of the last card has its button: ${buttons} for ${card.items.length}`);
  await ev(`(() => { const cs = ${P}.querySelectorAll('[data-testid=citation]'); cs[cs.length - 1].querySelector('[data-testid=cite-go]').click(); })()`);
  await until(`document.querySelectorAll('[data-testid=dispatched]').length === 1`, "the host logs one dispatched citation");
  const got = JSON.parse(await ev(`document.querySelector('[data-testid=dispatched]').textContent`));
  check(canon(got) === canon(expected), `the exact payload reached the host:\n       got      ${canon(got)}\n       expected ${canon(expected)}`);
  const same = await ev(`(() => { const b = window.__before; return [location.href, ${PW}.location.href, window.__doc, ${PW}.__doc].every((x, i) => x === b[i]); })()`);
  check(same, "no navigation and no reload: both documents and both URLs are the ones before the click");
  const readout = await ev(`({ pano: document.querySelector('[data-testid=host-panorama]').textContent,
    pos: document.querySelector('[data-testid=host-camera-position]').textContent, floor: document.getElementById('floor').value })`);
  check(readout.pano === link.scope.panorama && readout.pos === JSON.stringify(link.camera.position) && readout.floor === "7",
    `the viewer moved to the cited place: ${JSON.stringify(readout)}`);
  await sleep(300);
  await shot("host-after-click");

  mark('a foreign origin');
  // ---- a foreign origin is ignored -----------------------------------------
  const before = await ev(`Number(${P}.body.dataset.ignoredMessages || 0)`);
  await cmd("Runtime.evaluate", { expression: `window.open(${JSON.stringify(FOREIGN)}, "foreign")`, userGesture: true });
  await until(`Number(${P}.body.dataset.ignoredMessages || 0) >= ${before + 3}`, "the three foreign messages are counted as ignored", 10_000);
  const after = await ev(`${P}.getElementById('host-context').textContent`);
  check(/floor 7/.test(after) && !/floor 9/.test(after), `the foreign viewer state changed nothing: ${JSON.stringify(after)}`);
  await askIn(P, "show safety issues on this floor");
  await until(panelIdle, "the answer after the foreign messages ends");
  t = await stored(viewerThread);
  calls = searchCalls(t);
  check(calls.at(-1).args.floor === 7, `the scope is still the host's floor 7: ${JSON.stringify(calls.at(-1).args)}`);
  check(await problems(P) === 0, "no violation and no error in the viewer's panel");

  mark('the console');
  // ---- the console sends names only ------------------------------------------
  await cmd("Page.navigate", { url: new URL("/demo/console", BASE).href });
  await until(panelReady, "the console mounts the panel");
  await until(`!${P}.getElementById('host-context').hidden`, "the console's names reach the panel");
  const names = await ev(`${P}.getElementById('host-context').textContent`);
  check(/project tower-a/.test(names) && !/floor/.test(names), `the console sends names only: ${JSON.stringify(names)}`);
  await askIn(P, "show safety issues on floor 3");
  await until(panelIdle, "the console's answer ends");
  await ev(`window.__doc = Math.random(); ${PW}.__doc = Math.random(); window.__before = [${PW}.location.href, window.__doc, ${PW}.__doc]`);
  const consoleThread = await threadOf(P);
  const ccard = cards(await stored(consoleThread)).at(-1);
  await ev(`${P}.querySelector('[data-testid=cite-go]').click()`);
  await until(`document.querySelectorAll('[data-testid=dispatched]').length === 1`, "the console logs one dispatched citation");
  const routed = JSON.parse(await ev(`document.querySelector('[data-testid=dispatched]').textContent`));
  check(canon(routed) === canon({ scope: ccard.links[0].scope, item: ccard.items[0].id }),
    `the console gets the routing part only (no axes, no camera): ${JSON.stringify(routed)}`);
  const route = await ev(`({ route: document.querySelector('[data-testid=host-route]').textContent, url: location.search,
    same: (() => { const b = window.__before; return [${PW}.location.href, window.__doc, ${PW}.__doc].every((x, i) => x === b[i]); })() })`);
  check(route.route === `/projects/tower-a/floors/3/panoramas/${ccard.items[0].id}` && route.url.includes("route=") && route.same,
    `the console routed without a reload: ${JSON.stringify(route)}`);
  await shot("console-after-click");

  mark('a connection cut');
  // ---- a connection cut mid-answer ----------------------------------------------
  await cmd("Page.navigate", { url: PROXY });
  const D = "document";
  await until(`!!document.querySelector('[data-testid=send]') && !document.querySelector('[data-testid=send]').disabled`, "the page loads through the proxy");
  await askIn(D, "show safety issues on floor 3");
  const midway = await until(`(() => { const a = document.querySelectorAll('.answer'); return a.length > 0 && a[a.length - 1].textContent.length > 0
    && document.body.dataset.panelState === 'Streaming'; })()`, "the answer starts streaming", 20_000);
  const shownAtCut = await ev(`document.querySelectorAll('.answer')[document.querySelectorAll('.answer').length - 1].textContent`);
  cut();
  await until(`!!document.querySelector('[data-testid=reconnected]')`, "the page reconnects", 20_000);
  await until(`document.body.dataset.panelState === 'Delivered'`, "the answer is delivered after the reconnect", 30_000);
  const whole = await ev(`document.querySelectorAll('.answer')[document.querySelectorAll('.answer').length - 1].textContent`);
  const proxThread = await ev(`document.getElementById('thread-id').textContent`);
  const st = await (await fetch(new URL(`/v1/threads/${proxThread}`, PROXY), { headers: { cookie: (await (async () => {
    const r = await cmd("Network.getCookies", { urls: [PROXY] }); return ((r.result && r.result.cookies) || []).map((c) => `${c.name}=${c.value}`).join("; ");
  })()) } })).json();
  const storedAnswer = st.messages.map((m) => m.body).filter((b) => b.kind === "answer").map((b) => b.text).at(-1);
  check(midway && shownAtCut.length > 0 && shownAtCut.length < whole.length, `the cut came mid-answer (${shownAtCut.length} of ${whole.length} characters shown)`);
  check(whole === storedAnswer, `the answer is shown once, whole, as stored:\n       shown  ${JSON.stringify(whole)}\n       stored ${JSON.stringify(storedAnswer)}`);
  check(await ev(`document.querySelectorAll('[data-testid=citation]').length`) === 1, "the card is shown once");
  check(await problems(D) === 0, "no violation and no error after the reconnect");

  mark('every forbidden row');
  // ---- every forbidden row of the panel table, through the page's runner ----
  const table = await (await fetch(new URL("/v1/tables/panel", BASE))).json();
  const verdict = await ev(`(() => {
    const t = ${JSON.stringify(table)};
    // The shortest legal path to each state, from the initial one.
    const paths = new Map([[t.initial, []]]), queue = [t.initial];
    while (queue.length) {
      const s = queue.shift();
      for (const r of t.rows) if (r.legal && r.from === s && !paths.has(r.to)) { paths.set(r.to, [...paths.get(s), r.on]); queue.push(r.to); }
    }
    const wrong = [];
    let n = 0;
    for (const r of t.rows.filter((r) => !r.legal)) {
      const m = window.turnstile.runner("panel");
      const path = paths.get(r.from);
      if (!path) { wrong.push(r.id + ": unreachable"); continue; }
      for (const e of path) if (!m.fire(e).ok) wrong.push(r.id + ": path refused at " + e);
      const step = m.fire(r.on);
      if (step.ok || !step.row || step.row.id !== r.id || m.state !== r.from) wrong.push(r.id + ": " + JSON.stringify({ ok: step.ok, row: step.row && step.row.id }));
      n += 1;
    }
    return { n, forbidden: t.rows.filter((r) => !r.legal).length, wrong };
  })()`);
  check(verdict.n === verdict.forbidden && verdict.n > 100 && verdict.wrong.length === 0,
    `the page's runner refuses each of the ${verdict.forbidden} forbidden panel rows by its own id: ${JSON.stringify(verdict.wrong.slice(0, 5))}`);

  check(errors.length === 0, `no script errors: ${JSON.stringify(errors)}`);
} catch (e) {
  check(false, `the run broke: ${e.stack || e}`);
}
foreign.close();
proxy.close();
await finish(failed() ? 1 : 0);
