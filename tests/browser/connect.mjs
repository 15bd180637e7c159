// A Connect card in the chat page, in headless Chromium, against `turnstile
// serve` with a per-user MCP server (the Python SDK's, with auth) behind
// panva's oidc-provider: the card shows where the user signs in; its link
// opens the provider's login in a new tab, where the user signs in and
// consents; the provider sends that tab to turnstile's callback, which
// stores the token and sends the held call once; the page sees its card
// answered and shows the thread with the call's result and code's sentence
// of how it ended.
// Usage: node --experimental-websocket connect.mjs BASE_URL ISSUER SCREENSHOT
// Exits 0 when every check passed; prints what it saw either way.
import { writeFileSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { launch, sleep } from "./cdp.mjs";

const [BASE, ISSUER, SHOT] = process.argv.slice(2);
const { cmd, ev, idle, say, until, check, finish, errors, tab, failed } = await launch("connect", 80_000);

try {
  await cmd("Runtime.enable");
  await cmd("Page.enable");
  await cmd("Emulation.setDeviceMetricsOverride", { width: 900, height: 760, deviceScaleFactor: 1, mobile: false });
  await cmd("Page.navigate", { url: BASE });
  await idle();
  await say("show my notes");
  await until(`!!document.querySelector('[data-testid=connect]')`, "a Connect card is shown");
  const frameText = await ev(`document.body.innerHTML`);
  check(!frameText.includes(`${ISSUER}/auth`), "the page holds no authorization URL before the click");
  check((await ev(`document.querySelector('[data-testid=connect] [data-testid=question-accept]')?.hidden`)) === true,
    "the page offers no accept of its own: the sign-in answers the card");
  const title = await ev(`document.querySelector('[data-testid=connect] [data-testid=question-server]').textContent`);
  check(title === "Connect notes", `the card says what it is: ${title}`);
  await ev(`document.querySelector('[data-testid=connect]').scrollIntoView({ block: "center" })`);
  await sleep(200);
  const shot = await cmd("Page.captureScreenshot", { format: "png" });
  mkdirSync(dirname(SHOT), { recursive: true });
  writeFileSync(SHOT, Buffer.from(shot.result.data, "base64"));

  // The user clicks Connect: the page asks for a one-time sign-in link,
  // and the provider's login opens in a new tab through it.
  await ev(`document.querySelector('[data-testid=connect-link]').click()`);
  const login = await tab(`${ISSUER}/interaction/`);
  const started = await login.ev(`location.href`);
  console.log(`     login tab: ${started.slice(0, 60)}…`);
  for (let i = 0; i < 100 && !(await login.ev(`!!document.querySelector('input[name=login]')`)); i++) await sleep(100);
  await login.ev(`document.querySelector('input[name=login]').value = "ana"`);
  await login.ev(`document.querySelector('input[name=password]').value = "any"`);
  await login.ev(`document.querySelector('form').submit()`);
  // The consent page, then the redirect to turnstile's callback.
  let consented = false;
  for (let i = 0; i < 100 && !consented; i++) {
    await sleep(100);
    if (await login.ev(`document.querySelector('input[name=prompt]')?.value === "consent"`)) {
      await login.ev(`document.querySelector('form').submit()`);
      consented = true;
    }
  }
  check(consented, "the provider asked for consent, and it was given");
  let result = "";
  for (let i = 0; i < 150 && !result.includes("Connected"); i++) {
    await sleep(100);
    result = (await login.ev(`location.href.startsWith(${JSON.stringify(BASE)}) ? (document.querySelector('[data-testid=connect-result]')?.textContent ?? "") : ""`)) ?? "";
  }
  console.log(`     callback page: ${result}`);
  check(result.includes("Connected notes") && result.includes("is being sent, once"), "the callback stored the connection and sends the held call");

  // The chat tab: its card answered, then the thread with the call's answer.
  const shown = await until(`document.body.textContent.includes("list_notes on notes — ok")`, "the page shows the resumed call's result", 30_000);
  if (!shown) console.log(`     page: ${(await ev(`location.href + " | " + document.body.innerText.replace(/\\s+/g, " ")`)).slice(0, 3000)}`);
  check((await ev(`location.search.includes("thread=")`)) === true, "the page shows the stored thread");
  const told = await ev(`document.body.textContent`);
  check(told.includes("You connected your account, and the call was sent once."), "code tells how it ended");
  check(!told.includes("notes's words"), "the card's sentence is not passed off as the server's words");
  check((await ev(`document.querySelector('[data-testid=connect]')?.textContent.includes("you signed in")`)) === true,
    "the stored card says the user signed in");
  check(errors.length === 0, `no script errors: ${errors.join("; ")}`);
} catch (e) {
  check(false, `driver error: ${e.message}`);
}
finish(failed() ? 1 : 0);
