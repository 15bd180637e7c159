// "Show more" in headless Chromium, driven over the DevTools protocol
// (cdp.mjs). "show photos of floor 3" shows a card of 10 of exactly 613 with
// a "show more" button.
// Usage: node --experimental-websocket show_more.mjs MODE BASE_URL
//   pages  each click sends "show more" with the structured marker, and the
//          next 10 rows go under the same card, whose count line follows;
//          one button stays, on that card. A reload renders the card with
//          every page, from the stored thread; a new listing then takes
//          the button.
//   drift  (the demo's CursorDrift fault) the continuation finds the data
//          changed: nothing is appended, the same card's count line and
//          grade are lowered, its button is gone; the same after a reload.
//          The browser asks for Korean, the thread is English: the page's
//          words follow the thread (issue 34), so the button reads "Show
//          more" (tests/browser/withdraw_ko.mjs has "더 보기" on a Korean
//          thread).
// Exits 0 when every check passed; prints what it saw either way.
import { launch, sleep } from "./cdp.mjs";

const [MODE, BASE] = process.argv.slice(2);
const { cmd, ev, idle, say, check, finish, errors, failed } = await launch(`show-more-${MODE}`, 60_000);
// The page's session cookie: the thread belongs to the browser's session
// (tables/ownership.ron), so the script's own requests carry it.
const session = async () => {
  const r = await cmd("Network.getCookies", { urls: [String(BASE)] });
  return { cookie: ((r.result && r.result.cookies) || []).map((c) => `${c.name}=${c.value}`).join("; ") };
};

// The page as the checks see it. `window.__card` is the first card's
// element, kept across clicks: "the same card" is the same node.
const page = () => ev(`(() => {
  const cards = [...document.querySelectorAll('[data-testid=citation]')];
  const first = cards[0];
  const ids = first ? [...first.querySelectorAll('ul.items li')].map((li) => li.dataset.id) : [];
  const buttons = [...document.querySelectorAll('[data-testid=show-more]')];
  return {
    cards: cards.length,
    same: !!first && first === window.__card,
    rows: ids.length,
    ids,
    count: first ? first.querySelector('[data-testid=count]').textContent : null,
    grade: first ? first.querySelector('[data-grade]').dataset.grade : null,
    buttons: buttons.length,
    buttonOnCard: buttons.length === 1 && !!first && first.contains(buttons[0]),
    buttonEnabled: buttons.length === 1 && !buttons[0].disabled,
    continued: [...document.querySelectorAll('[data-testid=continued]')].map((n) => n.textContent),
    user: [...document.querySelectorAll('.user')].map((n) => n.textContent),
    problems: document.querySelectorAll('[data-testid=violation], [data-testid=error]').length,
  };
})()`);
const unique = (ids) => ids.every((id) => id) && new Set(ids).size === ids.length;

const keepCard = () => ev(`(() => { window.__card = document.querySelector('[data-testid=citation]'); return true; })()`);
const reload = async () => {
  await cmd("Page.reload");
  await sleep(300);
  await idle();
  await keepCard();
};
// The first turn: one card, 10 of exactly 613, offering "show more".
const firstCard = async () => {
  await cmd("Page.navigate", { url: BASE });
  await idle();
  await say("show photos of floor 3");
  await keepCard();
  const p = await page();
  console.log(`     first: ${JSON.stringify({ ...p, ids: p.ids.length })}`);
  check(p.cards === 1 && p.rows === 10 && p.count === "10 shown of exactly 613" && p.grade === "EXACT",
    `the first card: 10 shown of exactly 613: ${p.count}, ${p.rows} rows`);
  check(p.buttons === 1 && p.buttonOnCard && p.buttonEnabled, "the card offers one enabled \"show more\" button");
  return p;
};
// Clicks "show more" and waits for its turn; whether the button and the
// composer were disabled as the turn started.
const clickMore = async () => {
  const locked = await ev(`(() => {
    const b = document.querySelector('[data-testid=show-more]');
    b.click();
    return b.disabled && document.querySelector('[data-testid=send]').disabled;
  })()`);
  await sleep(100);
  await idle();
  return locked;
};

async function pagesMode() {
  let p = await firstCard();
  const firstIds = p.ids;
  // What the page posts: kept by a wrapper around its fetch (the DevTools
  // protocol's evaluation is not under the page's CSP).
  await ev(`(() => {
    const real = window.fetch;
    window.__posted = [];
    window.fetch = (url, opts) => {
      if (opts && opts.method === "POST" && String(url).endsWith("/messages")) window.__posted.push(opts.body);
      return real(url, opts);
    };
    return true;
  })()`);

  for (const rows of [20, 30]) {
    // The click starts the turn at once: the button waits for it, like the composer.
    check(await clickMore(), `(${rows}) while the turn runs, "show more" and the composer are disabled`);
    p = await page();
    console.log(`     after a click: ${JSON.stringify({ ...p, ids: p.ids.length })}`);
    check(p.cards === 1 && p.same, `(${rows}) the rows went under the same card; no second card: ${p.cards} cards`);
    check(p.rows === rows && p.count === `${rows} shown of exactly 613` && p.grade === "EXACT",
      `(${rows}) the card has ${rows} rows and says so: ${p.count}, ${p.rows} rows`);
    check(JSON.stringify(p.ids.slice(0, 10)) === JSON.stringify(firstIds), `(${rows}) the first page's rows stay first, in order`);
    check(unique(p.ids), `(${rows}) no row id repeats`);
    check(p.buttons === 1 && p.buttonOnCard && p.buttonEnabled, `(${rows}) one enabled "show more" button, on the card: ${p.buttons}`);
    check(p.continued.at(-1) === `↳ items ${rows - 9}–${rows} added to the list above`,
      `(${rows}) the turn says what it added: ${JSON.stringify(p.continued)}`);
    check(p.problems === 0, `(${rows}) no violation and no error`);
  }
  const live = p;
  const posted = await ev("window.__posted");
  check(JSON.stringify(posted) === JSON.stringify(Array(2).fill(JSON.stringify({ text: "show more", more: true }))),
    `each click posts "show more" with the marker: ${JSON.stringify(posted)}`);
  check(JSON.stringify(live.user) === JSON.stringify(["show photos of floor 3", "show more", "show more"]),
    `each click is a user message "show more": ${JSON.stringify(live.user)}`);

  // Each click fetched one more page: a search_photos call each.
  const id = await ev(`new URL(location.href).searchParams.get("thread")`);
  const t = await (await fetch(new URL(`/v1/threads/${id}`, BASE), { headers: await session() })).json();
  const calls = t.messages.filter((m) => m.body.kind === "call" && m.body.tool === "search_photos");
  check(calls.length === 3, `the stored thread holds three search_photos calls: ${calls.length}`);

  await reload();
  p = await page();
  console.log(`     after a reload: ${JSON.stringify({ ...p, ids: p.ids.length })}`);
  check(p.cards === 1 && p.rows === 30 && p.count === "30 shown of exactly 613" && p.grade === "EXACT",
    `after a reload the card shows all 30 rows: ${p.count}, ${p.rows} rows, ${p.cards} cards`);
  check(JSON.stringify(p.ids) === JSON.stringify(live.ids), "after a reload the rows are those shown live, in order");
  check(p.buttons === 1 && p.buttonOnCard && p.buttonEnabled, `after a reload one "show more" button, on the card: ${p.buttons}`);
  check(JSON.stringify(p.continued) === JSON.stringify(live.continued) && JSON.stringify(p.user) === JSON.stringify(live.user),
    `after a reload the turns read as they did live: ${JSON.stringify(p.continued)}`);
  check(p.problems === 0, "after a reload no violation and no error");

  // A new listing takes the button: "show more" would continue it, not the
  // first card's.
  await say("show safety issues on floor 3");
  const after = await ev(`(() => {
    const cards = [...document.querySelectorAll('[data-testid=citation]')];
    const buttons = [...document.querySelectorAll('[data-testid=show-more]')];
    return { cards: cards.length, buttons: buttons.length, onNew: buttons.length === 1 && cards.length === 2 && cards[1].contains(buttons[0]),
      rows: cards.map((c) => c.querySelectorAll('ul.items li').length) };
  })()`);
  check(after.cards === 2 && after.buttons === 1 && after.onNew && JSON.stringify(after.rows) === "[30,10]",
    `a new listing is a card of its own, and only it offers "show more": ${JSON.stringify(after)}`);
}

// The data changed between turns (613 → 616): the continuation appends
// nothing, and the card the user saw no longer claims its exact total.
// The browser asks for Korean here, but the thread is English: the button
// and the message it sends follow the thread's language.
async function driftMode() {
  const ua = await ev("navigator.userAgent");
  await cmd("Network.setUserAgentOverride", { userAgent: ua, acceptLanguage: "ko-KR,ko" });
  let p = await firstCard();
  const firstIds = p.ids;
  const label = await ev(`document.querySelector('[data-testid=show-more]').textContent`);
  check(label === "Show more", `on an English thread the button reads Show more: ${JSON.stringify(label)}`);
  check(await clickMore(), "while the turn runs, \"show more\" and the composer are disabled");
  p = await page();
  check(JSON.stringify(p.user) === JSON.stringify(["show photos of floor 3", "show more"]),
    `the click is a user message "show more": ${JSON.stringify(p.user)}`);
  console.log(`     after a click: ${JSON.stringify({ ...p, ids: p.ids.length })}`);
  const lowered = (q) => q.cards === 1 && q.rows === 10 && JSON.stringify(q.ids) === JSON.stringify(firstIds)
    && q.grade !== "EXACT" && q.grade !== "LOWER_BOUND" && q.count.startsWith("10 shown") && !q.count.includes("exactly");
  check(p.same && lowered(p), `the same card keeps its 10 rows, and its count and grade are lowered: ${p.count} ${p.grade}, ${p.rows} rows`);
  check(p.buttons === 0, `no "show more" is offered: ${p.buttons}`);
  check(JSON.stringify(p.continued) === JSON.stringify(["↳ nothing was added to the list above: the total changed since it was shown (613 → 616)"]),
    `the turn says why nothing was added: ${JSON.stringify(p.continued)}`);
  check(p.problems === 0, "no violation and no error");
  const live = p;
  await reload();
  p = await page();
  console.log(`     after a reload: ${JSON.stringify({ ...p, ids: p.ids.length })}`);
  check(lowered(p) && p.count === live.count && p.grade === live.grade && p.buttons === 0,
    `after a reload the card is as it was left: ${p.count} ${p.grade}, ${p.rows} rows, ${p.buttons} buttons`);
  check(JSON.stringify(p.continued) === JSON.stringify(live.continued), "after a reload the turn says the same");
}

try {
  await cmd("Runtime.enable");
  await cmd("Page.enable");
  if (MODE === "pages") await pagesMode();
  else if (MODE === "drift") await driftMode();
  else check(false, `unknown mode ${MODE}`);
  check(errors.length === 0, `no script errors: ${errors.join("; ")}`);
} catch (e) {
  check(false, `driver error: ${e.message}`);
}
finish(failed() ? 1 : 0);
