// Human approval in headless Chromium, driven over the DevTools protocol
// (cdp.mjs): "reserve seat 12 at 15:00" stops at an approval card; one click
// on Approve runs confirm_action once and the answer says it is done; the
// card cannot be decided again, in the page or through the API, and a reload
// shows it decided.
// Usage: node --experimental-websocket approval.mjs BASE_URL
// Exits 0 when every check passed; prints what it saw either way.
import { launch, sleep } from "./cdp.mjs";

const BASE = process.argv[2];
const { cmd, ev, idle, say, check, finish, errors, failed } = await launch("approval", 60_000);
// The page's session cookie: the thread belongs to the browser's session
// (tables/ownership.ron), so the script's own requests carry it.
const session = async () => {
  const r = await cmd("Network.getCookies", { urls: [String(BASE)] });
  return { cookie: ((r.result && r.result.cookies) || []).map((c) => `${c.name}=${c.value}`).join("; ") };
};


const card = () => ev(`(() => {
  const c = document.querySelector('[data-testid=interrupt]');
  if (!c) return null;
  return {
    id: c.dataset.interruptId, state: c.dataset.state,
    summary: c.querySelector('[data-testid=interrupt-summary]').textContent,
    detail: c.querySelector('[data-testid=interrupt-detail]').textContent,
    call: c.querySelector('[data-testid=interrupt-call]').textContent,
    action: c.querySelector('[data-testid=interrupt-action]').textContent,
    approveDisabled: c.querySelector('[data-testid=approve]').disabled,
    denyDisabled: c.querySelector('[data-testid=deny]').disabled,
    outcome: c.querySelector('[data-testid=interrupt-outcome]').textContent,
  };
})()`);
const blocks = () => ev(`[...document.querySelectorAll('.asst')].map((b) => ({
  sub: b.querySelector('.sub') ? b.querySelector('.sub').textContent : null,
  tools: [...b.querySelectorAll('[data-testid=tool]')].map((n) => n.textContent),
  answer: b.querySelector('.answer').textContent,
  problems: b.querySelectorAll('[data-testid=violation], [data-testid=error]').length,
}))`);
const thread = () => ev(`new URL(location.href).searchParams.get("thread")`);

try {
  await cmd("Runtime.enable");
  await cmd("Page.enable");
  await cmd("Page.navigate", { url: BASE });
  await idle();
  await say("reserve seat 12 at 15:00");
  let c = await card();
  console.log(`     card: ${JSON.stringify(c)}`);
  check(!!c && c.state === "Awaiting" && c.call.startsWith("confirm_action ") && c.action.startsWith("prepare_seat_reservation ")
    && !c.approveDisabled && !c.denyDisabled, "the turn stops at an approval card that names the call it will run");
  // Issue 33 §5: the card asks in the user's terms; the tool names are the
  // line under the question.
  check(!!c && c.summary === "Reserve seat 12 at 15:00?", `the card asks in the user's terms: ${JSON.stringify(c && c.summary)}`);
  check(!!c && c.detail.includes("prepare_seat_reservation") && c.detail.includes("confirm_action")
    && !c.summary.includes("prepare_seat_reservation"), `the tool names are on the detail line: ${JSON.stringify(c && c.detail)}`);

  // One click; a second click on the now locked button does nothing.
  await ev(`document.querySelector('[data-testid=approve]').click()`);
  await ev(`document.querySelector('[data-testid=approve]').click()`);
  await sleep(100);
  await idle();
  for (let i = 0; i < 100 && (await card()).state === "Awaiting"; i++) await sleep(50);
  c = await card();
  const after = await blocks();
  console.log(`     after: ${JSON.stringify({ card: c, blocks: after })}`);
  check(c.state === "Completed" && c.approveDisabled && c.denyDisabled, `the card is decided and locked: ${c.state} ${c.outcome}`);
  const resumed = after.at(-1);
  check(after.length === 2 && resumed.sub === "After approval", "the resumed turn is one block below the card");
  const confirms = resumed.tools.filter((t) => t.includes("confirm_action"));
  check(confirms.length === 1 && confirms[0].includes("— ok"), `confirm_action ran once: ${JSON.stringify(resumed.tools)}`);
  check(resumed.answer.trim() === "You approved it, and it is done.", `the answer says it is done: ${JSON.stringify(resumed.answer)}`);
  check(after.every((b) => b.problems === 0), "no violation and no error");

  // The server sent it once, and refuses a second approve by its row.
  const id = await thread();
  const t = await (await fetch(new URL(`/v1/threads/${id}`, BASE), { headers: await session() })).json();
  const sent = t.messages.filter((m) => m.body.kind === "call" && m.body.tool === "confirm_action");
  check(sent.length === 1, `the stored thread holds one confirm_action call: ${sent.length}`);
  const again = await fetch(new URL(`/v1/threads/${id}/resume`, BASE), {
    method: "POST", headers: { "content-type": "application/json", ...(await session()) },
    body: JSON.stringify({ interrupt_id: c.id, decision: "approve" }),
  });
  const refusal = await again.json();
  check(again.status === 409 && refusal.table === "approval" && refusal.row_id === "second-approve-after-completion",
    `a second approve is refused: ${again.status} ${JSON.stringify(refusal)}`);

  await cmd("Page.reload");
  await sleep(300);
  await idle();
  c = await card();
  const stored = await blocks();
  check(c.state === "Completed" && c.approveDisabled && c.denyDisabled, `after a reload the card is shown decided: ${c.state}`);
  check(c.summary === "Reserve seat 12 at 15:00?" && c.detail.includes("confirm_action"),
    `after a reload the card asks the same: ${JSON.stringify([c.summary, c.detail])}`);
  check(stored.length === 2 && stored[1].answer === resumed.answer
    && stored[1].tools.filter((x) => x.includes("confirm_action")).length === 1,
    `after a reload the resumed turn is shown as it streamed: ${JSON.stringify(stored.at(-1))}`);
  check(errors.length === 0, `no script errors: ${errors.join("; ")}`);
} catch (e) {
  check(false, `driver error: ${e.message}`);
}
finish(failed() ? 1 : 0);
