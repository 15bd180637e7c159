// The host's token through the panel (issue 38, panel/1 `getAuthToken`),
// in headless Chromium against `turnstile demo --auth`: the viewer claims
// the tiers basic and pro (`getLicenseTierSet`), and the server decides
// from the verified caller, never from the claim. Anonymous (tier free),
// "the newest safety issue on floor 3 in detail" never runs get_panorama
// (tier basic: not offered to the planner); signed in in the viewer as ana
// (basic), the panel carries her token and the same question opens the
// record. Her thread is hers: read with her token, hidden without it. The
// token is nowhere in either document or URL.
// Usage: node --experimental-websocket embed_auth.mjs BASE_URL TOKEN
import { launch, sleep } from "./cdp.mjs";

const BASE = new URL(process.argv[2]);
const TOKEN = process.argv[3];
const { cmd, ev, until, check, finish, errors, failed } = await launch("embed-auth", 90_000);
const P = `document.getElementById('panel').contentDocument`;
const PW = `document.getElementById('panel').contentWindow`;
const ready = `(() => { const d = ${P}; const b = d && d.querySelector('[data-testid=send]');
  return !!b && !b.disabled && d.getElementById('thread-id').textContent !== '…' && !d.getElementById('host-context').hidden; })()`;
const idle = `(() => { const d = ${P}; return !d.querySelector('[data-testid=send]').disabled && !d.querySelector('.asst.streaming')
  && ['Delivered', 'Failed'].includes(d.body.dataset.panelState); })()`;
const ask = async (text) => {
  await ev(`(() => { const d = ${P}; d.querySelector('[data-testid=input]').value = ${JSON.stringify(text)};
    d.getElementById('composer').requestSubmit(); })()`);
  await sleep(200);
  await until(idle, `the answer to "${text}" ends`, 30_000);
};
const panoramaRow = () => ev(`(() => { const r = [...${P}.querySelectorAll('[data-testid=tool]')].filter((li) => li.textContent.includes('get_panorama')).at(-1);
  return r ? { state: r.className, text: r.textContent } : null; })()`);
const ASK = "show the newest safety issue on floor 3 in detail";

try {
  await cmd("Runtime.enable");
  await cmd("Page.enable");
  await cmd("Page.navigate", { url: new URL("/demo/host", BASE).href });
  await until(ready, "the viewer mounts the panel");
  const claim = await ev(`${P}.getElementById('host-context').textContent`);
  check(/tiers \(the server decides\) basic, pro/.test(claim), `the host's tier claim is shown as its word: ${JSON.stringify(claim)}`);

  // Anonymous: the server holds the caller to tier free, whatever the host claims.
  await ask(ASK);
  let row = await panoramaRow();
  const anon = await ev(`({ tools: [...${P}.querySelectorAll('[data-testid=tool]')].map((li) => li.textContent),
    details: ${P}.querySelectorAll('[data-layout=detail]').length })`);
  check(row === null && anon.details === 0 && anon.tools.length === 1 && anon.tools[0].includes("search_photos"),
    `anonymous (tier free), get_panorama (tier basic) never runs, whatever the host claims: ${JSON.stringify(anon)}`);
  const anonThread = await ev(`${P}.getElementById('thread-id').textContent`);

  // Signed in in the host: the panel is mounted again and carries the token.
  await ev(`document.getElementById('token').value = ${JSON.stringify(TOKEN)}`);
  await ev(`document.getElementById('sign-in').click()`);
  await sleep(300);
  await until(`${ready} && ${P}.getElementById('thread-id').textContent !== ${JSON.stringify(anonThread)}`, "the panel comes back with the host's token and a thread of its own");
  await ask(ASK);
  row = await panoramaRow();
  check(!!row && row.state === "ok", `signed in as a basic user, the same question opens the record: ${JSON.stringify(row)}`);
  const thread = await ev(`${P}.getElementById('thread-id').textContent`);
  const mine = await fetch(new URL(`/v1/threads/${thread}`, BASE), { headers: { authorization: `Bearer ${TOKEN}` } });
  const nobody = await fetch(new URL(`/v1/threads/${thread}`, BASE));
  check(mine.status === 200 && nobody.status !== 200, `the thread is the token's subject's: ${mine.status} with it, ${nobody.status} without`);
  const leaks = await ev(`[${P}.documentElement.outerHTML, ${PW}.location.href, document.documentElement.outerHTML, location.href]
    .filter((s) => s.includes(${JSON.stringify(TOKEN)})).length`);
  check(leaks === 0, "the token is in neither document nor URL");
  check(errors.length === 0, `no script errors: ${JSON.stringify(errors)}`);
} catch (e) {
  check(false, `the run broke: ${e.stack || e}`);
}
await finish(failed() ? 1 : 0);
