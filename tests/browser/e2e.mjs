// End-to-end check of the chat page in headless Chromium, driven over the
// DevTools protocol (no npm packages: Node's built-in fetch and WebSocket).
// Usage: node --experimental-websocket e2e.mjs BASE_URL [SCREENSHOT.png]
// With a screenshot path, the two-step turns are captured too, next to it:
// SCREENSHOT-two-step-en.png and SCREENSHOT-two-step-ko.png.
// Exits 0 when every check passed; prints what it saw either way.
import { writeFileSync } from "node:fs";
import { launch, sleep } from "./cdp.mjs";

const BASE = process.argv[2];
const SHOT = process.argv[3];
const { cmd, ev, idle, say, check, finish, errors, failed } = await launch("e2e", 80_000);
const texts = (testid) => ev(`[...document.querySelectorAll('[data-testid=${testid}]')].map(n => n.textContent)`);
const shoot = async (path) => {
  if (!path) return;
  const r = await cmd("Page.captureScreenshot", { format: "png" });
  writeFileSync(path, Buffer.from(r.result.data, "base64"));
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
// What the newest assistant block shows, in document order.
const lastTurn = () => ev(`(() => {
  const all = document.querySelectorAll('.asst'), b = all[all.length - 1];
  if (!b) return null;
  const answer = b.querySelector('.answer');
  const cards = [...b.querySelectorAll('[data-testid=citation]')];
  return {
    order: [...b.querySelectorAll('[data-testid=plan], [data-testid=tool], [data-testid=citation], .answer')]
      .map((n) => (n === answer ? 'answer' : n.dataset.testid)),
    plans: [...b.querySelectorAll('[data-testid=plan]')].map((n) => n.textContent),
    tools: [...b.querySelectorAll('[data-testid=tool]')].map((n) => n.textContent),
    cards: cards.map((c) => {
      const rec = c.querySelector('[data-testid=record]');
      return {
        source: c.querySelector('.cite-src').textContent,
        grade: c.querySelector('[data-grade]').dataset.grade,
        count: c.querySelector('[data-testid=count]').textContent,
        layout: c.dataset.layout,
        items: c.querySelectorAll('ul.items li').length,
        title: rec ? rec.querySelector('.rec-title').textContent : null,
        fields: rec ? Object.fromEntries([...rec.querySelectorAll('dt')].map((dt) => [dt.textContent, dt.nextElementSibling.textContent])) : null,
        annotations: [...c.querySelectorAll('[data-testid=annotation]')].map((a) => a.textContent),
      };
    }),
    answer: answer.textContent,
    cardsAboveAnswer: cards.length > 0 && cards.every((c) => c.getBoundingClientRect().bottom <= answer.getBoundingClientRect().top),
    violations: b.querySelectorAll('[data-testid=violation]').length,
    errors: b.querySelectorAll('[data-testid=error]').length,
  };
})()`);

// The two-step turn: plan (step 1) → search_photos → a sampled card, plan
// (step 2) → get_panorama → a one-record detail card, then the answer.
// `when` says whether it streamed or was rendered from the stored thread.
const checkTwoStep = (t, lang, when, said) => {
  const at = `${lang}, ${when}`;
  console.log(`     ${at}: ${JSON.stringify(t)}`);
  if (!t) { check(false, `${at}: an assistant block is shown`); return; }
  check(JSON.stringify(t.order) === JSON.stringify(["plan", "tool", "citation", "plan", "tool", "citation", "answer"]),
    `${at}: each step's plan, tool line and card in order, then the answer: ${JSON.stringify(t.order)}`);
  check(t.plans.length === 2 && t.plans[0].startsWith("Step 1: search_photos") && t.plans[1].startsWith("Step 2: get_panorama"),
    `${at}: both plans are shown, numbered by step: ${JSON.stringify(t.plans)}`);
  check(t.tools.length === 2 && t.tools[0].endsWith("search_photos on demo — ok: 3 items")
    && t.tools[1].endsWith("get_panorama on demo — ok: one record"),
    `${at}: both tool lines: ${JSON.stringify(t.tools)}`);
  const [list, detail] = t.cards;
  // The page's own words on the cards follow the prompt's language (issue 34).
  const words = lang === "Korean"
    ? { list: "3개 표시 (전체 최소 189개)", detail: "1개 표시", floor: "층", captured: "촬영일", description: "설명" }
    : { list: "3 shown of at least 189", detail: "1 shown", floor: "Floor", captured: "Captured", description: "Description" };
  check(t.cards.length === 2 && list.source === "search_photos" && list.grade === "LOWER_BOUND"
    && list.count === words.list && list.layout === "list" && list.items === 3,
    `${at}: the search card: ${words.list}`);
  check(!!detail && detail.source === "get_panorama" && detail.grade === "SHOWN" && detail.count === words.detail
    && detail.layout === "detail" && detail.items === 0,
    `${at}: the one-record card is a detail card that claims no total`);
  check(!!detail && detail.title === "PANO-003-0611" && !!detail.fields && detail.fields[words.floor] === "3"
    && detail.fields[words.captured] === "2026-08-28" && /unprotected floor edge/.test(detail.fields[words.description] ?? "")
    && detail.annotations.includes("safety: unprotected floor edge (safety-plus)")
    && detail.annotations.includes("safety: blocked fire exit (safety-plus)"),
    `${at}: the detail card shows the record's fields and annotations`);
  check(said.every((x) => t.answer.includes(x)), `${at}: the answer says ${JSON.stringify(said)}`);
  check(t.cardsAboveAnswer, `${at}: both cards are above the answer`);
  check(t.violations === 0 && t.errors === 0, `${at}: no violation and no error`);
};
const twoStep = async (lang, prompt, said, shot) => {
  await newThread();
  await say(prompt);
  const live = await lastTurn();
  checkTwoStep(live, lang, "streamed", said);
  await cmd("Page.reload");
  await sleep(300);
  await idle();
  const stored = await lastTurn();
  checkTwoStep(stored, lang, "after a reload", said);
  check(JSON.stringify(stored) === JSON.stringify(live), `${lang}: a reload renders the turn exactly as it streamed`);
  const user = await ev(`[...document.querySelectorAll('.user')].map((n) => n.textContent)`);
  check(JSON.stringify(user) === JSON.stringify([prompt]), `${lang}: the stored thread holds the one prompt: ${JSON.stringify(user)}`);
  await shoot(shot);
};

try {
  await cmd("Runtime.enable");
  await cmd("Page.enable");
  await cmd("Emulation.setDeviceMetricsOverride", { width: 1100, height: 1300, deviceScaleFactor: 1, mobile: false });
  await cmd("Page.navigate", { url: BASE });
  await idle();
  check((await ev("location.search")).includes("thread="), "the page created a thread and put it in the URL");

  // An empty thread offers prompts to start with; they go once a turn runs.
  const examples = await texts("example");
  check(examples.length >= 3 && examples.includes("show safety issues on floor 3"),
    `the empty page offers example prompts: ${JSON.stringify(examples)}`);

  await say("show safety issues on floor 3");
  check(await ev(`document.getElementById('examples').hidden`), "the examples are gone once the thread has a turn");
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

  await shoot(SHOT);

  // A single value is carried by a figure, with its grade: exact from a tool
  // held to accounting, "as the server reports it" from the archive (no
  // accounting, like the reference SQLite server). A reload shows the same.
  const figures = () => ev(`[...document.querySelectorAll('[data-testid=figure]')].map((f) => ({
    grade: f.querySelector('[data-grade]').dataset.grade, value: f.querySelector('[data-testid=figure-value]').textContent }))`);
  await newThread();
  await say("how many photos are on floor 3?");
  await say("how many photos are on floor 3 in the archive?");
  const live = await figures();
  check(live.length === 2 && live[0].grade === "EXACT" && live[0].value === "count: Exactly 613"
    && live[1].grade === "SHOWN" && /613 — as the server reports it, not accounted/.test(live[1].value),
    `each count is a figure with its grade: ${JSON.stringify(live)}`);
  check((await texts("citation")).length === 0, "a single value has no citation card");
  await cmd("Page.reload");
  await sleep(300);
  await idle();
  check(JSON.stringify(await figures()) === JSON.stringify(live), "a reload renders the figures as they streamed");

  // "This floor" is the host context's: the floor picker sends it; without
  // it the page gets a counter-question and nothing is searched.
  await newThread();
  await ev(`(() => { const f = document.getElementById('floor'); f.value = '4'; return f.value; })()`);
  await say("show quality issues on this floor");
  let t = await lastTurn();
  const planArgs = await ev(`[...document.querySelectorAll('.asst')].at(-1).querySelector('[data-testid=plan]').title`);
  check(t.plans.length === 1 && planArgs.includes('"floor":4') && t.cards.length === 1,
    `the picked floor is what "this floor" searches: ${JSON.stringify(planArgs)}`);
  await ev(`(() => { document.getElementById('floor').value = ''; return true; })()`);
  await say("show quality issues on this floor");
  t = await lastTurn();
  check(t.plans.length === 0 && t.tools.length === 0 && t.answer.startsWith("Which floor do you mean?"),
    `without a floor, a counter-question and no search: ${JSON.stringify(t)}`);

  // An example prompt runs as a turn when clicked.
  await newThread();
  await ev(`document.querySelector('[data-testid=example]').click()`);
  await sleep(100);
  await idle();
  t = await lastTurn();
  check(t && t.cards.length === 1 && t.cards[0].count === "10 shown of at least 189",
    `a clicked example runs its prompt: ${JSON.stringify(t && t.cards)}`);

  const shot = (suffix) => (SHOT ? SHOT.replace(/(\.png)?$/, `-${suffix}.png`) : null);
  await twoStep("English", "show the newest safety issue on floor 3 in detail",
    ["At least 189", "These 3", "PANO-003-0611", "in detail", "unprotected floor edge", "blocked fire exit"], shot("two-step-en"));
  await twoStep("Korean", "3층 최신 안전 지적사항 자세히 보여줘",
    ["최소 189건", "이 3건", "PANO-003-0611", "자세히", "unprotected floor edge", "blocked fire exit"], shot("two-step-ko"));
  check(errors.length === 0, `no script errors after the two-step turns: ${errors.join("; ")}`);
} catch (e) {
  check(false, `driver error: ${e.message}`);
}
finish(failed() ? 1 : 0);
