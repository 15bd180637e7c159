// A front end's example page (tests/frontends/NAME: the AI SDK's `useChat`
// page, or the AG-UI `HttpAgent` page; bundled with esbuild) against the real
// server in headless Chromium, driven over the DevTools protocol (cdp.mjs):
// a search shows its card with the grade; an approval card is approved (with
// `addToolApprovalResponse`, or by a run with `resume`) and the answer says
// it is done; an export ends at the download link code delivered. Both pages
// use the same test ids. Screenshots go to SHOT_DIR as NAME-STEP.png.
// Usage: node --experimental-websocket frontend.mjs NAME BASE_URL SHOT_DIR
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { launch, sleep } from "./cdp.mjs";

const NAME = process.argv[2];
const BASE = process.argv[3];
const SHOTS = process.argv[4];
const { cmd, ev, until, check, finish, errors, failed } = await launch(NAME, 80_000);

const ready = `document.querySelector('[data-testid=chat]')?.dataset.status === 'ready'`;
const shot = async (name) => {
  const r = await cmd("Page.captureScreenshot", { format: "png" });
  writeFileSync(join(SHOTS, `${NAME}-${name}.png`), Buffer.from(r.result.data, "base64"));
};
const ask = async (text) => {
  await ev(`document.querySelector('[data-testid=input]').focus()`);
  await cmd("Input.insertText", { text });
  await ev(`document.querySelector('[data-testid=send]').click()`);
  await sleep(200);
  await until(ready, `the answer to "${text}" ends`);
};
const texts = () => ev(`[...document.querySelectorAll('[data-testid=text]')].map((p) => p.textContent).join(' ')`);

await cmd("Page.enable");
await cmd("Runtime.enable");
await cmd("Emulation.setDeviceMetricsOverride", { width: 900, height: 1100, deviceScaleFactor: 1, mobile: false });
await cmd("Page.navigate", { url: BASE });
await until(ready, "the page loads and creates its thread");

// A search: the card with its grade, the answer's text.
await ask("show safety issues on floor 3");
const card = await ev(`document.querySelector('[data-testid=card]')?.textContent ?? ''`);
check(card.includes("LOWER_BOUND"), `the card keeps its grade: ${card}`);
check((await texts()).length > 0, "the answer is shown");
await shot("search");

// An approval: the server's interrupt as a tool-approval-request.
await ask("reserve seat 31 at 15:00");
await until(`!!document.querySelector('[data-testid=approve]')`, "an approval card");
const summary = await ev(`document.querySelector('[data-testid=card-summary]')?.textContent ?? ''`);
check(summary.length > 0, `the card's question: ${summary}`);
await shot("approval");
await ev(`document.querySelector('[data-testid=approve]').click()`);
await sleep(300);
await until(`!document.querySelector('[data-testid=approve]')`, "the card is decided");
await until(ready, "the resumed stream ends");
await until(`[...document.querySelectorAll('[data-testid=text]')].some((p) => /approved/i.test(p.textContent))`, "the answer says it was approved");
await shot("approved");

// An export: the link code delivered, as the typed part.
await ask("download all my lecture files");
await until(`!!document.querySelector('[data-testid=download]')`, "a download link");
const href = await ev(`document.querySelector('[data-testid=download]')?.getAttribute('href') ?? ''`);
check(href.includes("/download"), `the delivered link: ${href}`);
await shot("export");

const alerts = await ev(`document.querySelector('[data-testid=error]')?.textContent ?? ''`);
check(alerts === "", `no error shown: ${alerts}`);
check(errors.length === 0, `no page errors: ${errors.join(" | ")}`);
await finish(failed() ? 1 : 0);
