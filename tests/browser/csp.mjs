// The Content-Security-Policy in headless Chromium: the page's own script
// and style run under it (a turn renders, the stylesheet applies, nothing is
// reported), and script injected into the page does not run: an inline
// <script> element added to the document and an inline event handler in
// injected markup are both blocked, and the browser reports each.
// Usage: node --experimental-websocket csp.mjs BASE_URL
// Exits 0 when every check passed; prints what it saw either way.
import { launch, sleep } from "./cdp.mjs";

const BASE = process.argv[2];
const { cmd, ev, idle, say, check, finish, errors, failed } = await launch("csp", 60_000);

try {
  const head = await fetch(BASE);
  const policy = head.headers.get("content-security-policy") ?? "";
  check(/script-src 'sha256-[^']+'/.test(policy) && !policy.includes("unsafe-inline"),
    `the page is served with a hash-based policy: ${policy}`);

  await cmd("Runtime.enable");
  await cmd("Page.enable");
  // Installed before the page's own script, outside the page's policy (the
  // DevTools protocol is not subject to it): collects every CSP report.
  await cmd("Page.addScriptToEvaluateOnNewDocument", {
    source: `window.__csp = [];
      document.addEventListener("securitypolicyviolation", (e) =>
        window.__csp.push({ directive: e.effectiveDirective, blocked: e.blockedURI, sample: e.sample }));`,
  });
  await cmd("Page.navigate", { url: BASE });
  await idle();
  check((await ev("location.search")).includes("thread="), "the page's script ran: it created a thread");
  check(await ev(`getComputedStyle(document.body).backgroundColor`) === "rgb(246, 246, 243)",
    "the page's stylesheet applies");
  await say("show safety issues on floor 3");
  const counts = await ev(`[...document.querySelectorAll('[data-testid=count]')].map((n) => n.textContent)`);
  check(counts.at(-1) === "10 shown of at least 189", `a turn renders its card under the policy: ${JSON.stringify(counts)}`);
  check((await ev(`document.querySelectorAll('[data-testid=violation]').length`)) === 0, "no frame violation");
  check(JSON.stringify(await ev("window.__csp")) === "[]",
    `the page itself breaks no rule of its policy: ${JSON.stringify(await ev("window.__csp"))}`);

  // What an injection looks like once it is in the document: an inline
  // script element, and markup with an inline event handler.
  await ev(`(() => {
    const s = document.createElement("script");
    s.textContent = "window.__pwned = 1";
    document.body.appendChild(s);
    const d = document.createElement("div");
    d.innerHTML = '<img src="/healthz" onerror="window.__pwned2 = 1">';
    document.body.appendChild(d);
  })()`);
  await sleep(500);
  check(await ev("window.__pwned === undefined"), "an injected inline <script> does not run");
  check(await ev("window.__pwned2 === undefined"), "an injected inline event handler does not run");
  const seen = await ev("window.__csp");
  check(seen.some((v) => v.directive === "script-src-elem"), `the blocked script was reported: ${JSON.stringify(seen)}`);
  check(seen.some((v) => v.directive === "script-src-attr"), `the blocked handler was reported: ${JSON.stringify(seen)}`);
  check(errors.length === 0, `no script errors: ${errors.join("; ")}`);
} catch (e) {
  check(false, `driver error: ${e.message}`);
}
finish(failed() ? 1 : 0);
