// The minimal host page of docs/embedding.md, as the document writes it,
// served from an origin of its own (a real host's shape: the panel is
// another origin in its frame), in headless Chromium over the DevTools
// protocol: the server's frame-ancestors let it frame the panel; the panel
// takes the host's project and floor (a floor changed in the host scopes
// the next search); a click dispatches the routing part only (the page says
// it has no viewer) to the host's `dispatchCitation`, and the host shows it.
// Usage: node --experimental-websocket embed_doc.mjs HOST_URL SERVER_URL
import { canon, launch, sleep } from "./cdp.mjs";

const HOST = process.argv[2];
const SERVER = new URL(process.argv[3]);
const { cmd, ev, until, check, finish, errors, on, failed } = await launch("embed-doc", 60_000);

// The panel's own document lives in its frame's execution context.
const contexts = new Map();
on("Runtime.executionContextCreated", (p) => {
  if (p.context.origin === SERVER.origin && p.context.auxData && p.context.auxData.isDefault) contexts.set("panel", p.context.id);
});
const inPanel = async (expr) => {
  const r = await cmd("Runtime.evaluate", { expression: expr, contextId: contexts.get("panel"), awaitPromise: true, returnByValue: true });
  return r.result && r.result.result ? r.result.result.value : undefined;
};
const untilPanel = async (expr, what, ms = 20_000) => {
  for (let i = 0; i < ms / 100; i++) {
    if (contexts.has("panel") && (await inPanel(expr))) return true;
    await sleep(100);
  }
  check(false, `${what} (waited for ${expr})`);
  return false;
};
const ask = async (text) => {
  await inPanel(`(() => { document.querySelector('[data-testid=input]').value = ${JSON.stringify(text)};
    document.getElementById('composer').requestSubmit(); })()`);
  await sleep(200);
  await untilPanel(`!document.querySelector('[data-testid=send]').disabled && document.body.dataset.panelState === 'Delivered'`, `"${text}" is answered`, 30_000);
};

try {
  await cmd("Runtime.enable");
  await cmd("Page.enable");
  await cmd("Page.navigate", { url: HOST });
  await untilPanel(`!document.getElementById('host-context').hidden && document.getElementById('thread-id').textContent !== '…'`,
    "the documented host page mounts the panel from another origin");
  const context = await inPanel(`document.getElementById('host-context').textContent`);
  check(/facility demo-site/.test(context) && /project tower-a/.test(context) && /floor 3/.test(context),
    `the panel reads the host's names and floor: ${JSON.stringify(context)}`);

  await ev(`(() => { const s = document.getElementById('floor'); s.value = '4'; s.dispatchEvent(new Event('change')); })()`);
  await untilPanel(`/floor 4/.test(document.getElementById('host-context').textContent)`, "the host's new floor reaches the panel");
  await ask("show safety issues on this floor");
  const thread = await inPanel(`document.getElementById('thread-id').textContent`);
  const cookies = await cmd("Network.getCookies", { urls: [SERVER.href] });
  const cookie = ((cookies.result && cookies.result.cookies) || []).map((c) => `${c.name}=${c.value}`).join("; ");
  const t = await (await fetch(new URL(`/v1/threads/${thread}`, SERVER), { headers: { cookie } })).json();
  const calls = t.messages.map((m) => m.body).filter((b) => b.kind === "call" && b.tool === "search_photos");
  check(calls.length === 1 && calls[0].args.floor === 4, `the search ran on the host's floor: ${JSON.stringify(calls.map((c) => c.args))}`);
  const card = t.messages.map((m) => m.body).filter((b) => b.kind === "card").at(-1).citation;

  await ev(`window.__doc = 1`);
  await inPanel(`document.querySelector('[data-testid=cite-go]').click()`);
  await until(`document.getElementById('last').textContent !== 'none'`, "the host's dispatchCitation is called");
  const shown = JSON.parse(await ev(`document.getElementById('last').textContent`));
  check(canon(shown) === canon({ scope: card.links[0].scope, item: card.items[0].id }),
    `the host got the routing part of the first item's link: ${JSON.stringify(shown)}`);
  check(await ev(`window.__doc === 1 && location.href === ${JSON.stringify(HOST)}`), "the host page did not navigate or reload");
  check(errors.length === 0, `no script errors: ${JSON.stringify(errors)}`);
} catch (e) {
  check(false, `the run broke: ${e.stack || e}`);
}
await finish(failed() ? 1 : 0);
