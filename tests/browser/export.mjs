// The export → confirm → capability flow and the page's link allowlist in
// headless Chromium, driven over the DevTools protocol (cdp.mjs).
// Usage: node --experimental-websocket export.mjs MODE BASE_URL [SCREENSHOT.png]
//   export  the demo's "download all my lecture files" (English and Korean)
//           ends at a download button whose link serves a ZIP; a reload
//           renders the same button; a typed javascript: link stays text.
//           With a screenshot path, the delivered turn is captured there.
//   lying   the lying model's made-up link is never a download button; its
//           batched confirm is refused and the export still delivers, and
//           "show me the link again" shows the delivered button again.
//   links   hand-made streams (a stub answers the message route): only a
//           URL its frame lists in `capabilities` is a button; other http(s)
//           links are plain anchors, other schemes text; an expired
//           capability is "link expired".
// Exits 0 when every check passed; prints what it saw either way.
import { writeFileSync } from "node:fs";
import { launch, sleep } from "./cdp.mjs";

const [MODE, BASE, SHOT] = process.argv.slice(2);
const { cmd, ev, idle, say, check, finish, errors, failed } = await launch(`export-${MODE}`, 80_000);
// The page's session cookie: the thread belongs to the browser's session
// (tables/ownership.ron), so the script's own requests carry it.
const session = async () => {
  const r = await cmd("Network.getCookies", { urls: [String(BASE)] });
  return { cookie: ((r.result && r.result.cookies) || []).map((c) => `${c.name}=${c.value}`).join("; ") };
};


// A fresh page on a new thread (the page makes one when the URL names none).
const newThread = async () => {
  const before = await ev("location.search");
  await cmd("Page.navigate", { url: BASE });
  for (let i = 0; i < 200; i++) {
    await sleep(50);
    const now = await ev("location.search");
    if (now && now.includes("thread=") && now !== before) break;
  }
  await idle();
};
const reload = async () => {
  await cmd("Page.reload");
  await sleep(300);
  await idle();
};
const threadId = () => ev(`new URL(location.href).searchParams.get("thread")`);

// What the newest assistant block's answer shows: its text, every anchor and
// download-like node in it, replaced sentences, and the block's problems.
const lastAnswer = () => ev(`(() => {
  const all = document.querySelectorAll('.asst'), b = all[all.length - 1];
  if (!b) return null;
  const answer = b.querySelector('.answer');
  return {
    text: answer.textContent,
    visible: answer.innerText,
    anchors: [...answer.querySelectorAll('a')].map((a) => ({
      testid: a.dataset.testid ?? null, href: a.getAttribute('href'), text: a.textContent,
      rel: a.getAttribute('rel'), target: a.getAttribute('target') })),
    downloads: b.querySelectorAll('[data-testid=download]').length,
    inert: [...answer.querySelectorAll('[data-testid=inert-url]')].map((n) => n.textContent),
    expired: [...b.querySelectorAll('[data-testid=download-expired]')].map((n) => ({
      tag: n.tagName, text: n.textContent, href: n.getAttribute('href'), disabled: n.getAttribute('aria-disabled') })),
    replaced: [...answer.querySelectorAll('[data-testid=replaced]')].map((n) => ({ row: n.dataset.row, text: n.textContent })),
    tools: [...b.querySelectorAll('[data-testid=tool]')].map((n) => n.textContent),
    violations: b.querySelectorAll('[data-testid=violation]').length,
    errors: b.querySelectorAll('[data-testid=error]').length,
  };
})()`);

// The accessible name and role Chromium computes for the node `selector`
// picks among the newest assistant block's nodes (index `i`).
const accessible = async (selector, i = 0) => {
  const marked = await ev(`(() => {
    for (const n of document.querySelectorAll('[data-probe]')) n.removeAttribute('data-probe');
    const all = document.querySelectorAll('.asst'), b = all[all.length - 1];
    const n = b && b.querySelectorAll(${JSON.stringify(selector)})[${i}];
    if (!n) return false;
    n.setAttribute('data-probe', '1');
    return true;
  })()`);
  if (!marked) return null;
  const doc = await cmd("DOM.getDocument", { depth: 0 });
  const q = await cmd("DOM.querySelector", { nodeId: doc.result.root.nodeId, selector: "[data-probe]" });
  const ax = await cmd("Accessibility.getPartialAXTree", { nodeId: q.result.nodeId, fetchRelatives: false });
  const node = (ax.result && ax.result.nodes || []).find((n) => !n.ignored) ?? {};
  return { name: node.name ? node.name.value : null, role: node.role ? node.role.value : null };
};

// The stored thread, as the server has it (the page's own origin).
const stored = async (thread) => (await fetch(new URL(`/v1/threads/${thread}`, BASE), { headers: await session() })).json();
const storedCapabilities = (t) => t.messages.map((m) => m.body).filter((b) => b.kind === "text" && Array.isArray(b.capabilities))
  .flatMap((b) => b.capabilities);

// Fetches a download link as a browser's new tab would, following the page
// the tool server serves while the export is BUILDING: retried until it is a
// ZIP, for up to 15 s.
const download = async (href) => {
  const until = Date.now() + 15_000;
  let last = "";
  for (;;) {
    const r = await fetch(href, { redirect: "follow" });
    const type = r.headers.get("content-type") ?? "";
    const body = Buffer.from(await r.arrayBuffer());
    if (r.ok && type.startsWith("application/zip")) return { status: r.status, type, body };
    last = `${r.status} ${type} (${body.length} bytes)`;
    if (Date.now() > until) return { status: r.status, type, body, last };
    await sleep(500);
  }
};

// Captures the newest turn (the user's message and the answer) to `path`.
const shootTurn = async (path) => {
  if (!path) return;
  const rect = await ev(`(() => {
    const all = document.querySelectorAll('.turn'), t = all[all.length - 1];
    t.scrollIntoView({ block: "center" });
    const r = t.getBoundingClientRect();
    return { x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height };
  })()`);
  await sleep(200);
  const pad = 12;
  const r = await cmd("Page.captureScreenshot", { format: "png", captureBeyondViewport: true,
    clip: { x: Math.max(rect.x - pad, 0), y: Math.max(rect.y - pad, 0), width: rect.width + 2 * pad, height: rect.height + 2 * pad, scale: 1 } });
  writeFileSync(path, Buffer.from(r.result.data, "base64"));
};

// Every anchor opens a new browsing context without a handle on this page and
// without a referrer.
const anchorsSafe = (a, at) => check(a.anchors.every((x) => x.rel === "noopener noreferrer" && x.target === "_blank"),
  `${at}: every anchor has target=_blank rel="noopener noreferrer": ${JSON.stringify(a.anchors.map((x) => [x.rel, x.target]))}`);

// The delivered answer: one button, named by the capability's label, to the
// stored capability's exact URL; no token on screen.
const checkDelivered = async (at, said, label) => {
  const a = await lastAnswer();
  console.log(`     ${at}: ${JSON.stringify({ ...a, text: undefined })}`);
  if (!a) { check(false, `${at}: an assistant block is shown`); return null; }
  check(a.text.startsWith(said), `${at}: the code's sentence comes first: ${JSON.stringify(a.text)}`);
  const buttons = a.anchors.filter((x) => x.testid === "download");
  check(a.downloads === 1 && buttons.length === 1, `${at}: exactly one download button in the answer`);
  const b = buttons[0] ?? {};
  check(b.text === label, `${at}: the button says the capability's label: ${JSON.stringify(b.text)}`);
  check(/^https?:\/\/[^/]+\/api\/lms\/exports\/[^/]+\/download\?token=/.test(b.href ?? ""), `${at}: the button links to the export's download`);
  check(!a.visible.includes("token") && !a.text.includes("token") && !a.visible.includes("http"),
    `${at}: neither the URL nor its token is on screen: ${JSON.stringify(a.visible)}`);
  check(b.rel === "noopener noreferrer" && b.target === "_blank", `${at}: the button opens a new tab, noopener noreferrer`);
  const ax = await accessible("[data-testid=download]");
  check(!!ax && ax.role === "link" && ax.name === label, `${at}: its accessible name is the label: ${JSON.stringify(ax)}`);
  check(a.anchors.length === 1, `${at}: no other anchor in the answer: ${JSON.stringify(a.anchors.map((x) => x.text))}`);
  check(a.violations === 0 && a.errors === 0, `${at}: no violation and no error`);
  return b.href;
};

const exportFlow = async (lang, prompt, said, label, shot) => {
  await newThread();
  await say(prompt);
  const thread = await threadId();
  const href = await checkDelivered(`${lang}, streamed`, said, label);
  const tools = (await lastAnswer()).tools;
  check(tools.length === 2 && tools[0].includes("export_all_lms_materials") && tools[1].includes("confirm_lms_material_export")
    && tools.every((t) => t.includes("— ok")), `${lang}: preview, then confirm, both ok: ${JSON.stringify(tools)}`);
  const caps = storedCapabilities(await stored(thread));
  check(caps.length === 1 && caps[0].url === href && caps[0].label === label,
    `${lang}: the button is the stored capability, exactly: ${JSON.stringify(caps.map((c) => c.label))}`);
  await shootTurn(shot);
  if (href) {
    const d = await download(href);
    const magic = d.body.subarray(0, 4).toString("latin1");
    check(d.type.startsWith("application/zip") && magic === "PK\x03\x04",
      `${lang}: the button's link serves a ZIP (${d.status} ${d.type}, ${d.body.length} bytes${d.last ? `; last: ${d.last}` : ""})`);
  }
  await reload();
  const again = await checkDelivered(`${lang}, after a reload`, said, label);
  check(again === href, `${lang}: a reload renders the same button to the same link`);
};

const exportMode = async () => {
  await exportFlow("English", "download all my lecture files", "Your export is ready: 14 files", "Download lecture files", SHOT);
  await exportFlow("Korean", "수강 중인 모든 강의 파일 받아줘", "내보내기가 준비되었습니다", "강의 파일 받기", null);

  // What a user types is never a link, whatever it says.
  await newThread();
  const typed = "try javascript:alert(1) and [x](javascript:alert(1)) and [y](https://example.com/?token=T) https://example.org/p";
  await ev(`window.__alerted = 0; window.alert = () => { window.__alerted++; }; true`);
  await say(typed);
  const user = async () => ev(`(() => { const u = [...document.querySelectorAll('.user')].at(-1);
    return { text: u.textContent, anchors: u.querySelectorAll('a').length, elements: u.querySelectorAll('*').length }; })()`);
  let u = await user();
  check(u.text === typed && u.anchors === 0 && u.elements === 0, `the user's message is text only: ${JSON.stringify(u)}`);
  check((await ev("window.__alerted")) === 0, "nothing the user typed ran");
  await reload();
  u = await user();
  check(u.text === typed && u.anchors === 0 && u.elements === 0, `after a reload too: ${JSON.stringify(u)}`);
};

const lyingMode = async () => {
  // A thread with no delivery: the model makes a link up.
  await newThread();
  await say("show me the link again");
  let a = await lastAnswer();
  console.log(`     no delivery: ${JSON.stringify(a)}`);
  check(a.downloads === 0 && a.anchors.every((x) => x.testid !== "download"), "a made-up link is never a download button");
  check(a.anchors.every((x) => !x.text.includes("token") && !x.text.includes("guessed")), "no anchor shows a token");
  check(!a.anchors.some((x) => (x.href ?? "").includes("lms.example.com")), "the made-up link is no anchor");
  check(!a.text.includes("token=guessed"), "the made-up link's token is not on screen");
  check(a.violations === 0, "no violation");
  anchorsSafe(a, "no delivery");

  // The lying model batches export and confirm: the confirm is refused and
  // never sent; the next step's confirm delivers.
  await newThread();
  await say("download all my lecture files");
  const href = await checkDelivered("lying, delivered", "Your export is ready: 14 files", "Download lecture files");
  const tools = (await lastAnswer()).tools;
  console.log(`     tools: ${JSON.stringify(tools)}`);
  check(tools.some((t) => t.includes("confirm_lms_material_export") && t.includes("not sent") && !t.includes("failed")),
    `the batched confirm is shown refused: ${JSON.stringify(tools)}`);

  // Asked again, the stored delivery answers: the same button.
  await say("show me the link again");
  a = await lastAnswer();
  console.log(`     again: ${JSON.stringify({ ...a, text: undefined })}`);
  const buttons = a.anchors.filter((x) => x.testid === "download");
  check(buttons.length === 1 && buttons[0].href === href && buttons[0].text === "Download lecture files",
    `"show me the link again" shows the delivered button again: ${JSON.stringify(buttons.map((x) => x.text))}`);
  check(a.anchors.every((x) => x.testid === "download" || !(x.href ?? "").includes("/download")),
    "no other download link is offered");
  anchorsSafe(a, "again");
};

const linksMode = async () => {
  await newThread();
  await say("links");
  const a = await lastAnswer();
  console.log(`     ${JSON.stringify(a)}`);
  const by = (href) => a.anchors.filter((x) => x.href === href);
  const one = (href, testid, text, what) => {
    const found = by(href);
    check(found.length === 1 && found[0].testid === testid && found[0].text === text,
      `${what}: ${JSON.stringify(found)}`);
  };
  one("https://docs.example.com/guide?token=SECRET1", "link", "the guide", "a Markdown link its frame lists in `links` is a plain anchor named by its text");
  one("https://files.example/api/lms/exports/J9/download?token=abc", "download", "Download lecture files",
    "the URL its frame lists is the download button, named by the label");
  one("https://soon.example/api/lms/exports/J7/download?token=y", "download", "강의 파일 받기",
    "a capability that has not expired yet is a button");
  // Every URL no frame lists is inert text (issue 33): a model's own link is
  // never one click away, however it is shaped.
  for (const [href, what] of [
    ["https://example.org/a/b?token=SECRET2", "a bare URL no frame lists"],
    ["https://lms.example.com/api/lms/exports/EXP-1/download?token=guessed", "a download-shaped link no frame lists"],
    ["https://files.example/api/lms/exports/J3/download?token=other", "a URL other than the one its frame lists"],
    ["https://split.example.com/path?token=T", "a URL split across deltas"],
    ["https://files.example/api/lms/exports/J8/download?token=x", "a listed URL split across deltas"],
  ]) {
    check(by(href).length === 0, `${what} is no anchor: ${JSON.stringify(by(href))}`);
  }
  check(a.inert.some((t) => t === "example.org/a/b…" || t === "https://example.org/a/b…"),
    `a bare URL no frame lists is inert text without its query: ${JSON.stringify(a.inert)}`);
  check(a.inert.some((t) => t.startsWith("Download lecture files (https://lms.example.com/api/lms/exports/EXP-1/download")),
    `a Markdown link no frame lists is inert text, its name and its URL without the query: ${JSON.stringify(a.inert)}`);
  check(a.inert.length === 5, `five inert URLs: ${JSON.stringify(a.inert)}`);
  check(a.anchors.every((x) => /^https?:\/\//.test(x.href ?? "")), `only http(s) URLs are anchors: ${JSON.stringify(a.anchors.map((x) => x.href))}`);
  check(a.anchors.length === 3, `three anchors: ${a.anchors.length}`);
  for (const inert of ["javascript:alert(1)", "[x](javascript:alert(1))", "[d](data:text/html,hi)", "[v](vbscript:msgbox)",
    "[f](file:///etc/passwd)", "[r](/relative)", "[u](HTTPS:no-slashes"]) {
    check(a.text.includes(inert), `stays text: ${inert}`);
  }
  check(!a.text.includes("token"), "no token is on screen");
  check(a.expired.length === 1 && a.expired[0].text === "link expired" && a.expired[0].href === null
    && a.expired[0].tag !== "A" && a.expired[0].disabled === "true",
    `an expired capability is disabled text "link expired", with no link: ${JSON.stringify(a.expired)}`);
  check(!a.anchors.some((x) => x.href === "https://old.example/api/lms/exports/J4/download?token=z"), "the expired link is no anchor");
  check(a.replaced.length === 1 && a.replaced[0].row === "stub-row" && a.replaced[0].text === "The code's own sentence. ",
    `a replaced sentence keeps its marker: ${JSON.stringify(a.replaced)}`);
  anchorsSafe(a, "links");
  const ax = await accessible("[data-testid=download]", 1);
  check(!!ax && ax.name === "강의 파일 받기" && ax.role === "link", `the Korean button's accessible name is its label: ${JSON.stringify(ax)}`);
  const plain = await accessible("[data-testid=link]", 0);
  check(!!plain && plain.name === "the guide", `a listed link's accessible name is its text: ${JSON.stringify(plain)}`);
  check(a.violations === 0 && a.errors === 0, "no violation and no error");

  // The capability that expires a few seconds after the stream turns into
  // "link expired" on screen.
  let later;
  for (let i = 0; i < 60; i++) {
    later = await lastAnswer();
    if (later.expired.length === 2) break;
    await sleep(250);
  }
  check(later.expired.length === 2 && later.downloads === 1
    && !later.anchors.some((x) => x.href === "https://soon.example/api/lms/exports/J7/download?token=y"),
    `once it expires, the button is "link expired": ${JSON.stringify(later.expired)}`);
};

try {
  await cmd("Runtime.enable");
  await cmd("Page.enable");
  await cmd("DOM.enable");
  await cmd("Accessibility.enable");
  await cmd("Emulation.setDeviceMetricsOverride", { width: 900, height: 1100, deviceScaleFactor: 1, mobile: false });
  if (MODE === "export") await exportMode();
  else if (MODE === "lying") await lyingMode();
  else if (MODE === "links") await linksMode();
  else check(false, `unknown mode ${MODE}`);
  check(errors.length === 0, `no script errors: ${errors.join("; ")}`);
} catch (e) {
  check(false, `driver error: ${e.message}`);
}
finish(failed() ? 1 : 0);
