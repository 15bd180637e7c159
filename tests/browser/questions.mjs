// A tool's server asks the user something (a form, a URL), in headless
// Chromium driven over the DevTools protocol (cdp.mjs).
// Usage: node --experimental-websocket questions.mjs MODE BASE_URL
//   demo  against the real server and the demo tools:
//         "notify the site contact about PANO-003-0611" stops at a question
//         card ("demo asks:", the server's words, a form by the schema's
//         types); Submit with nothing filled sends nothing and marks the
//         required fields; an email the browser takes and the server does
//         not ("ana@site") is refused (422) at the card, which keeps every
//         value; a good one is sent once, the resumed turn appears below
//         and the card is answered and locked; a second answer is 409 by
//         row; a reload shows it answered. Decline is answered as declined.
//         "open the permit portal for HW-12": the URL shown as text with
//         its domain highlighted, no link, nothing fetched from /permits
//         until "Open and agree", which opens it in a new tab and sends
//         accept once.
//   stub  a hand-made question (the message route is a stub's): every kind
//         of field by its type, the server's words kept as text (markup,
//         a Markdown link), a punycode URL warned about and never fetched;
//         the browser's own checks (bounds, lengths, counts) stop a bad
//         answer; the answer sent carries each value in its schema's type.
//         The stub answers the resume 422 naming a field, then 409.
//   stored  a stored thread (the stub's) whose questions ended every way
//         the approval table can end one: each card shows its state and
//         what the user answered, none can be answered, none has inputs.
// Exits 0 when every check passed; prints what it saw either way.
import { launch, sleep } from "./cdp.mjs";

const [MODE, BASE] = process.argv.slice(2);
const { cmd, ev, idle, say, check, finish, errors, on, failed } = await launch(`questions-${MODE}`, 80_000);
// The page's session cookie: the thread belongs to the browser's session
// (tables/ownership.ron), so the script's own requests carry it.
const session = async () => {
  const r = await cmd("Network.getCookies", { urls: [String(BASE)] });
  return { cookie: ((r.result && r.result.cookies) || []).map((c) => `${c.name}=${c.value}`).join("; ") };
};

// Every request the page sends, and every tab opened: a URL the page must
// not fetch before the click shows up in one of them.
const requests = [], targets = [];
on("Network.requestWillBeSent", (p) => requests.push({ url: p.request.url, method: p.request.method, body: p.request.postData ?? null }));
on("Target.targetCreated", (p) => targets.push(p.targetInfo.url));
on("Target.targetInfoChanged", (p) => targets.push(p.targetInfo.url));
const resumes = () => requests.filter((r) => r.method === "POST" && r.url.includes("/resume"));

// The newest question card as the checks see it.
const card = () => ev(`(() => {
  const all = document.querySelectorAll('[data-testid=question]');
  const c = all[all.length - 1];
  if (!c) return null;
  const field = (f) => {
    const input = f.querySelector('input, select');
    return {
      name: f.dataset.field, tag: f.tagName, type: input ? (input.tagName === 'SELECT' ? 'select' : input.type) : null,
      label: (f.querySelector('label, legend') || {}).textContent,
      required: !!f.querySelector('.req'),
      value: input && input.type !== 'checkbox' ? input.value : null,
      checked: [...f.querySelectorAll('input[type=checkbox]')].map((b) => b.checked),
      options: [...f.querySelectorAll('option')].map((o) => o.value + '=' + o.textContent),
      boxes: [...f.querySelectorAll('label.check')].map((l) => l.textContent),
      min: input ? input.getAttribute('min') : null, max: input ? input.getAttribute('max') : null,
      step: input ? input.getAttribute('step') : null,
      error: f.querySelector('[data-testid=field-error]').textContent,
      invalid: !!f.querySelector('[aria-invalid=true]') || f.getAttribute('aria-invalid') === 'true',
      disabled: input ? input.matches(':disabled') : null,
    };
  };
  return {
    count: all.length,
    id: c.dataset.interruptId, state: c.dataset.state, decision: c.dataset.decision ?? null,
    server: c.querySelector('[data-testid=question-server]').textContent,
    messages: [...c.querySelectorAll('[data-testid=question-message]')].map((m) => ({
      text: m.lastChild.textContent, elements: m.querySelectorAll('*').length })),
    fields: [...c.querySelectorAll('[data-testid=question-field]')].map(field),
    asked: [...c.querySelectorAll('[data-testid=question-asked] li')].map((n) => n.textContent),
    url: (c.querySelector('[data-testid=question-url]') || {}).textContent ?? null,
    domain: (c.querySelector('[data-testid=question-domain]') || {}).textContent ?? null,
    punycode: (c.querySelector('[data-testid=question-punycode]') || {}).textContent ?? null,
    links: c.querySelectorAll('a, [href], img, iframe, link, object, embed').length,
    accept: c.querySelector('[data-testid=question-accept]').textContent,
    buttons: ['accept', 'decline', 'cancel'].map((k) => c.querySelector('[data-testid=question-' + k + ']').disabled),
    outcome: c.querySelector('[data-testid=question-outcome]').textContent,
    error: (c.querySelector('[data-testid=question-error]') || {}).textContent ?? null,
    approvalCards: document.querySelectorAll('[data-testid=interrupt]').length,
    junk: ['null', 'undefined', 'NaN', '[object'].some((w) => c.textContent.includes(w)),
  };
})()`);
const blocks = () => ev(`[...document.querySelectorAll('.asst')].map((b) => ({
  sub: b.querySelector('.sub') ? b.querySelector('.sub').textContent : null,
  tools: [...b.querySelectorAll('[data-testid=tool]')].map((n) => n.textContent),
  answer: b.querySelector('.answer').textContent,
  problems: b.querySelectorAll('[data-testid=violation], [data-testid=error]').length,
}))`);
const thread = () => ev(`new URL(location.href).searchParams.get("thread")`);
// Types into a field of the newest card, replacing what it holds.
const type = async (name, text) => {
  await ev(`(() => { const c = [...document.querySelectorAll('[data-testid=question]')].at(-1);
    const i = c.querySelector('[data-testid=question-field][data-field="${name}"] input');
    i.focus(); i.select(); return true; })()`);
  await cmd("Input.insertText", { text });
};
// Sets a field's value as its picker would (a date or time input is not
// typed into character by character).
const pick = (name, value) => ev(`(() => { const c = [...document.querySelectorAll('[data-testid=question]')].at(-1);
  const i = c.querySelector('[data-testid=question-field][data-field="${name}"] input');
  i.value = ${JSON.stringify(value)}; i.dispatchEvent(new Event('input')); return i.value; })()`);
const select = (name, value) => ev(`(() => { const c = [...document.querySelectorAll('[data-testid=question]')].at(-1);
  const s = c.querySelector('[data-testid=question-field][data-field="${name}"] select');
  s.value = ${JSON.stringify(value)}; s.dispatchEvent(new Event('change')); return s.value; })()`);
const tick = (name, label) => ev(`(() => { const c = [...document.querySelectorAll('[data-testid=question]')].at(-1);
  const f = c.querySelector('[data-testid=question-field][data-field="${name}"]');
  const l = [...f.querySelectorAll('label.check')].find((x) => ${label == null ? "true" : `x.textContent === ${JSON.stringify(label)}`});
  l.querySelector('input').click(); return true; })()`);
const press = async (which) => {
  await ev(`[...document.querySelectorAll('[data-testid=question]')].at(-1).querySelector('[data-testid=question-${which}]').click()`);
  await sleep(100);
  await idle();
};
const settled = async (from = "Awaiting") => {
  for (let i = 0; i < 100 && (await card()).state === from; i++) await sleep(50);
  return card();
};

async function demo() {
  await cmd("Page.navigate", { url: BASE });
  await idle();
  await say("notify the site contact about PANO-003-0611");
  let c = await card();
  console.log(`     form: ${JSON.stringify(c)}`);
  check(!!c && c.count === 1 && c.approvalCards === 0 && c.state === "Awaiting", "the turn stops at a question card, not an approval card");
  check(c.server === "demo asks:", `it says who asks: ${c.server}`);
  check(c.messages.length === 1 && c.messages[0].text === "Who should be told about PANO-003-0611?",
    `the server's words, as text: ${JSON.stringify(c.messages)}`);
  const f = Object.fromEntries(c.fields.map((x) => [x.name, x]));
  check(f.name && f.name.type === "text" && f.name.required && f.name.label.startsWith("Name"), `name: a required text field: ${JSON.stringify(f.name)}`);
  check(f.email && f.email.type === "email" && f.email.required, `email: a required email field: ${JSON.stringify(f.email)}`);
  check(f.role && f.role.type === "select" && f.role.required
    && JSON.stringify(f.role.options.slice(1)) === JSON.stringify(["site manager=site manager", "safety officer=safety officer", "foreman=foreman"]),
  `role: a select of the three roles: ${JSON.stringify(f.role && f.role.options)}`);
  check(f.urgent && f.urgent.type === "checkbox" && !f.urgent.required && f.urgent.checked[0] === false,
    `urgent: a checkbox, its default (false) pre-filled: ${JSON.stringify(f.urgent)}`);
  check(c.accept === "Submit" && c.buttons.every((d) => !d), "Submit, Decline and Cancel are offered");
  check(!c.junk, "no stray null, undefined or NaN in the card");
  const first = await blocks();
  check(first.length === 1 && first[0].tools.length === 1 && first[0].tools[0].includes("its server asked you first"),
    `the call is shown as asking, not failed: ${JSON.stringify(first[0].tools)}`);

  // Nothing filled: nothing is sent, the required fields say so.
  await press("accept");
  c = await card();
  const marked = c.fields.filter((x) => x.error === "Required." && x.invalid).map((x) => x.name).sort();
  check(JSON.stringify(marked) === JSON.stringify(["email", "name", "role"]) && resumes().length === 0 && c.state === "Awaiting",
    `an empty form is not sent; its required fields are marked: ${JSON.stringify(marked)}, ${resumes().length} sent`);

  // An address the browser takes and the server does not: 422 at the card,
  // every value kept.
  await type("name", "Ana Kim");
  await type("email", "ana@site");
  await select("role", "safety officer");
  await tick("urgent");
  await press("accept");
  c = await card();
  console.log(`     refused: ${JSON.stringify(c)}`);
  const g = Object.fromEntries(c.fields.map((x) => [x.name, x]));
  check(resumes().length === 1 && c.state === "Awaiting" && c.error && c.error.includes("email"),
    `the server's refusal is shown at the card: ${c.error}`);
  check(g.email.invalid && g.email.error !== "", `the refused field is marked: ${g.email.error}`);
  check(g.name.value === "Ana Kim" && g.email.value === "ana@site" && g.role.value === "safety officer" && g.urgent.checked[0] === true,
    "every value typed is kept");
  check(c.buttons.every((d) => !d) && c.fields.every((x) => !x.disabled), "the card can be answered again");
  check((await blocks()).length === 1, "nothing was resumed");

  await type("email", "ana.kim@example.com");
  await press("accept");
  c = await settled();
  const after = await blocks();
  console.log(`     answered: ${JSON.stringify({ card: c, blocks: after })}`);
  const sent = JSON.parse(resumes().at(-1).body);
  check(JSON.stringify(sent.answers) === JSON.stringify({ [Object.keys(sent.answers)[0]]: { email: "ana.kim@example.com", name: "Ana Kim", role: "safety officer", urgent: true } })
    && Object.keys(sent.answers).length === 1 && sent.decision === "accept",
  `the answer sent: ${JSON.stringify(sent)}`);
  check(c.state === "Completed" && c.decision === "accept" && c.buttons.every((d) => d) && c.fields.every((x) => x.disabled),
    `the card is answered and locked: ${c.state} ${c.outcome}`);
  const resumed = after.at(-1);
  check(after.length === 2 && resumed.sub === "After your answer", "the resumed turn is one block below the card");
  check(resumed.tools.filter((t) => t.includes("notify_site_contact") && t.includes("— ok")).length === 1 && resumed.answer.trim() !== "",
    `the call ran once and the turn answered: ${JSON.stringify(resumed)}`);
  check(after.every((b) => b.problems === 0), "no violation and no error");

  // The server sent it once, and refuses a second answer by its row.
  const id = await thread();
  const again = await fetch(new URL(`/v1/threads/${id}/resume`, BASE), {
    method: "POST", headers: { "content-type": "application/json", ...(await session()) },
    body: JSON.stringify({ interrupt_id: c.id, decision: "accept", answers: sent.answers }),
  });
  const refusal = await again.json();
  check(again.status === 409 && refusal.table === "approval" && refusal.row_id === "second-answer-after-completion",
    `a second answer is refused: ${again.status} ${JSON.stringify(refusal)}`);

  await cmd("Page.reload");
  await sleep(300);
  await idle();
  c = await card();
  const stored = await blocks();
  console.log(`     reloaded: ${JSON.stringify({ card: c, blocks: stored })}`);
  check(c.state === "Completed" && c.decision === "accept" && c.buttons.every((d) => d) && c.fields.length === 0
    && c.asked.length === 4 && c.asked.includes("Email (required)"),
  `after a reload the card is answered, listing what it asked: ${c.outcome} ${JSON.stringify(c.asked)}`);
  check(stored.length === 2 && stored[1].sub === "After your answer" && stored[1].answer === resumed.answer,
    `after a reload the resumed turn is shown as it streamed: ${JSON.stringify(stored.at(-1))}`);

  // Decline: nothing filled, the server is told no.
  await say("notify the site contact about PANO-003-0611");
  await press("decline");
  c = await settled();
  const declined = (await blocks()).at(-1);
  check(c.count === 2 && c.state === "Completed" && c.decision === "decline" && c.outcome.includes("you declined"),
    `a declined question: ${c.state} ${c.outcome}`);
  check(declined.sub === "After you declined" && !("answers" in JSON.parse(resumes().at(-1).body)),
    `declined with no answers, resumed below: ${JSON.stringify(declined)}`);

  // A new message withdraws a question still waiting: its card says so.
  await say("notify the site contact about PANO-003-0611");
  c = await card();
  check(c.count === 3 && c.state === "Awaiting", "a third question waits");
  await say("show safety issues on floor 3");
  c = await settled();
  check(c.state === "Withdrawn" && c.outcome.includes("Withdrawn: a new message was sent before it was answered")
    && c.buttons.every((d) => d) && c.fields.every((x) => x.disabled),
    `a question a new message superseded is shown withdrawn: ${c.state} ${c.outcome}`);

  // The portal: shown, never fetched before the click.
  await cmd("Page.navigate", { url: BASE });
  await idle();
  await say("open the permit portal for HW-12");
  c = await card();
  console.log(`     url: ${JSON.stringify(c)}`);
  check(!!c && c.state === "Awaiting" && c.messages[0].text === "Sign hot-work permit HW-12 in the permit portal",
    `the server's words: ${JSON.stringify(c && c.messages)}`);
  const portal = new URL(c.url);
  check(portal.pathname === "/permits/HW-12" && portal.searchParams.has("ticket") && c.domain === portal.hostname,
    `the whole URL as text, its domain highlighted: ${c.url} [${c.domain}]`);
  check(c.links === 0 && c.accept === "Open and agree" && c.punycode === null, "no link, image or frame in the card; no punycode warning");
  check(!c.junk, "no stray null, undefined or NaN in the card");
  await sleep(800);
  const early = [...requests.map((r) => r.url), ...targets].filter((u) => u.includes("/permits/"));
  check(early.length === 0, `nothing fetched the portal before the click: ${JSON.stringify(early)}`);
  check(await ev(`document.querySelectorAll('a[href*="/permits/"], link[href*="/permits/"]').length`) === 0, "the page holds no link to it");

  await press("accept");
  c = await settled();
  let opened = [];
  for (let i = 0; i < 100; i++) {
    const t = await cmd("Target.getTargets");
    opened = t.result.targetInfos.filter((x) => x.type === "page" && x.url.includes("/permits/HW-12"));
    if (opened.length && opened.every((x) => x.title === "Permit HW-12")) break;
    await sleep(50);
  }
  check(opened.length === 1 && opened[0].title === "Permit HW-12", `the click opened the portal in a new tab: ${JSON.stringify(opened)}`);
  check(!requests.some((r) => r.url.includes("/permits/")), "the page itself never fetched it");
  const portalResume = JSON.parse(resumes().at(-1).body);
  check(portalResume.decision === "accept" && !("answers" in portalResume), `accept sent, with no answers: ${JSON.stringify(portalResume)}`);
  check(c.state === "Completed" && c.decision === "accept" && c.buttons.every((d) => d), `the card is answered: ${c.state} ${c.outcome}`);
  const opens = (await blocks()).at(-1);
  check(opens.sub === "After your answer" && opens.tools.some((t) => t.includes("open_permit_portal") && t.includes("— ok")),
    `the resumed turn: ${JSON.stringify(opens)}`);
}

async function stub() {
  await cmd("Page.navigate", { url: BASE });
  await idle();
  await say("ask everything");
  let c = await card();
  console.log(`     stub: ${JSON.stringify(c)}`);
  check(!!c && c.server === "stub-server <b>x</b> asks:", `the server's name as text: ${c && c.server}`);
  const words = c.messages.map((m) => m.text);
  check(words[0] === "Fill this in <img src=x data-pwned=1> and [click here](https://evil.example/) **now**"
    && c.messages.every((m) => m.elements === 1),
  `the server's words stay text, markup and Markdown included: ${JSON.stringify(c.messages)}`);
  check(await ev(`document.querySelectorAll('[data-pwned], a[href*="evil.example"], a[href*="xn--"]').length`) === 0,
    "nothing in them became an element or a link");
  const f = Object.fromEntries(c.fields.map((x) => [x.name, x]));
  const want = {
    nick: ["text", false], site: ["url", false], day: ["date", false], at: ["datetime-local", false],
    count: ["number", true], ratio: ["number", false], agree: ["checkbox", true], level: ["select", false],
    crew: ["select", false], tags: [undefined, false],
  };
  for (const [name, [t, req]] of Object.entries(want)) {
    check(!!f[name] && (t === undefined || f[name].type === t) && f[name].required === req, `${name}: ${JSON.stringify(f[name])}`);
  }
  check(f.count.min === "1" && f.count.max === "10" && f.count.step === "1" && f.ratio.step === "any", "number bounds and steps");
  check(f.nick.value === "crane" && f.day.value === "2026-12-03" && f.count.value === "2", "defaults are pre-filled");
  check(JSON.stringify(f.level.options) === JSON.stringify(["=(none)", "lo=Low", "hi=High"]), `enumNames label the options: ${f.level.options}`);
  check(JSON.stringify(f.crew.options) === JSON.stringify(["=(none)", "c1=Crew one", "c2=Crew two"]), `oneOf titles label the options: ${f.crew.options}`);
  check(f.tags.tag === "FIELDSET" && JSON.stringify(f.tags.boxes) === JSON.stringify(["North", "South", "East"])
    && JSON.stringify(f.tags.checked) === JSON.stringify([false, true, false]), `a multi-select is checkboxes: ${JSON.stringify(f.tags)}`);
  check(f.agree.label.startsWith("Agree") && f.nick.label.startsWith("Nickname"), "labels are the titles");
  check(f.ratio.label.startsWith("ratio"), "a field without a title is labelled by its name");
  check(c.url === "https://xn--pple-43d.example/login?next=/home" && c.domain === "xn--pple-43d.example",
    `the URL as text, the host highlighted: ${c.url} [${c.domain}]`);
  check(!!c.punycode && c.punycode.includes("punycode") && c.punycode.includes("imitate"), `a punycode host is warned about: ${c.punycode}`);
  check(c.links === 0 && c.accept === "Open and agree", "no link in the card; the URL is opened by the click only");
  check(!c.junk, "no stray null, undefined or NaN in the card");

  // The browser's own checks: bounds, lengths, counts; nothing is sent.
  await type("count", "11");
  await type("nick", "ab");
  await tick("tags", "North");
  await tick("tags", "East");
  await press("accept");
  c = await card();
  const errs = Object.fromEntries(c.fields.filter((x) => x.error).map((x) => [x.name, x.error]));
  check(errs.nick === "At least 3 characters." && errs.count === "At most 10." && errs.tags === "Choose at most 2." && Object.keys(errs).length === 3,
    `the browser marks what does not fit: ${JSON.stringify(errs)}`);
  check(resumes().length === 0, "and sends nothing");
  check(!(await cmd("Target.getTargets")).result.targetInfos.some((t) => t.url.includes("xn--")), "nor opens the URL");

  await type("count", "3");
  await type("nick", "crane-7");
  await tick("tags", "East");
  await type("ratio", "0.5");
  await pick("at", "2026-12-03T09:30");
  await select("level", "hi");
  await type("addEventListener", "x1");
  await type("__proto__", "x2");
  await press("accept");
  c = await card();
  const body = JSON.parse(resumes().at(-1).body);
  console.log(`     sent: ${JSON.stringify(body)}`);
  const a = body.answers && body.answers.form;
  const at = new Date("2026-12-03T09:30").toISOString();
  check(body.decision === "accept" && a && a.count === 3 && a.ratio === 0.5 && a.agree === false && a.nick === "crane-7"
    && a.day === "2026-12-03" && a.at === at && a.level === "hi" && !("crew" in a) && !("site" in a)
    && JSON.stringify(a.tags) === JSON.stringify(["North", "South"]) && Object.keys(body.answers).length === 1
    && a.addEventListener === "x1" && Object.prototype.hasOwnProperty.call(a, "__proto__") && a["__proto__"] === "x2",
  `each value in its schema's type, the empty optional ones left out, the URL request unanswered: ${JSON.stringify(body)}`);
  check(c.state === "Awaiting" && c.error && c.error.includes("count") && c.fields.find((x) => x.name === "count").invalid,
    `the stub's 422 names a field, which is marked: ${c.error}`);
  check(c.fields.find((x) => x.name === "nick").value === "crane-7", "the values stay");

  await press("cancel");
  // The card is repainted after the stream's end re-enables the composer.
  c = await settled("Awaiting");
  check(c.state === "Decided" && c.buttons.every((d) => d) && c.error.includes("409") && c.error.includes("second-answer"),
    `a 409 shows it decided, with its row: ${c.state} ${c.outcome} ${c.error}`);
  check(JSON.parse(resumes().at(-1).body).decision === "cancel" && resumes().length === 2, "cancel sent once");
  // The stub's URL was opened once, by the accept click: never before.
  const early = requests.filter((r) => r.url.includes("xn--"));
  check(early.length === 0, `the page never fetched the URL itself: ${JSON.stringify(early)}`);
}

async function stored() {
  await cmd("Page.navigate", { url: new URL("?thread=stub-thread", BASE).href });
  await idle();
  const cards = await ev(`[...document.querySelectorAll('[data-testid=question]')].map((c) => ({
    id: c.dataset.interruptId, state: c.dataset.state, decision: c.dataset.decision ?? null,
    outcome: c.querySelector('[data-testid=question-outcome]').textContent,
    inputs: c.querySelectorAll('input, select').length,
    enabled: [...c.querySelectorAll('button')].filter((b) => !b.disabled).length,
  }))`);
  console.log(`     stored: ${JSON.stringify(cards)}`);
  const by = Object.fromEntries(cards.map((c) => [c.id, c]));
  const want = {
    "q-unknown": [null, "Interrupted: whether it ran is unknown."],
    "q-expired": [null, "Expired: it was not answered in time."],
    "q-withdrawn": [null, "Withdrawn: a new message was sent before it was answered."],
    "q-voided": [null, "Voided: the server no longer holds this request under its number; nothing was sent."],
    "q-failed": ["accept", "Answered; the call then failed (you accepted)."],
    "q-cancelled": ["cancel", "Answered (you cancelled)."],
  };
  check(cards.length === 6, `six question cards: ${cards.length}`);
  for (const [id, [decision, outcome]] of Object.entries(want)) {
    const c = by[id];
    check(!!c && c.decision === decision && c.outcome.trim() === outcome && c.inputs === 0 && c.enabled === 0,
      `${id}: ${c && c.outcome}`);
  }
  const subs = await ev(`[...document.querySelectorAll('.asst .sub')].map((n) => n.textContent)`);
  check(JSON.stringify(subs) === JSON.stringify(["After your answer", "After you cancelled"]), `the blocks after answers are titled by them: ${JSON.stringify(subs)}`);
}

try {
  await cmd("Runtime.enable");
  await cmd("Page.enable");
  await cmd("Network.enable");
  await cmd("Target.setDiscoverTargets", { discover: true });
  // Every report of the page's Content-Security-Policy (csp.mjs): the cards
  // break no rule of it.
  await cmd("Page.addScriptToEvaluateOnNewDocument", {
    source: `window.__csp = [];
      document.addEventListener("securitypolicyviolation", (e) => window.__csp.push(e.effectiveDirective + " " + e.blockedURI));`,
  });
  if (MODE === "demo") await demo();
  else if (MODE === "stub") await stub();
  else if (MODE === "stored") await stored();
  else check(false, `unknown mode ${MODE}`);
  const csp = await ev("window.__csp");
  check(Array.isArray(csp) && csp.length === 0, `no CSP violation: ${JSON.stringify(csp)}`);
  check(errors.length === 0, `no script errors: ${errors.join("; ")}`);
} catch (e) {
  check(false, `driver error: ${e.message}\n${e.stack}`);
}
finish(failed() ? 1 : 0);
