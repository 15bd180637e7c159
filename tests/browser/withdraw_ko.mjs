// Issue 34 in headless Chromium (cdp.mjs), with a browser that asks for
// English and a user who writes Korean:
// - "12번 좌석 15시 예약해줘" stops at an approval card whose own words
//   (title, buttons, captions) are Korean, like the server's question;
// - a new message while the card waits marks it withdrawn at once, before
//   the server answers, so its buttons cannot be clicked into a 409; the
//   new turn's listing card speaks Korean too (count line, note, "더 보기"),
//   and a line under the message says what it withdrew and that its
//   cancel went through;
// - a question card ("PANO-003-0611 현장 담당자에게 알려줘") is Korean,
//   and a new message withdraws it: "withdrawn", never "denied";
// - a reload shows both cards withdrawn and each withdrawal's line under
//   the message that withdrew it.
// Usage: node --experimental-websocket withdraw_ko.mjs BASE_URL
// Exits 0 when every check passed; prints what it saw either way.
import { launch, sleep } from "./cdp.mjs";

const BASE = process.argv[2];
const { cmd, ev, idle, say, check, finish, errors, on, failed } = await launch("withdraw-ko", 80_000);
const resumes = [];
on("Network.requestWillBeSent", (p) => { if (p.request.method === "POST" && p.request.url.includes("/resume")) resumes.push(p.request.url); });

const approval = () => ev(`(() => {
  const c = document.querySelector('[data-testid=interrupt]');
  if (!c) return null;
  return {
    state: c.dataset.state, lang: c.getAttribute('lang'),
    title: c.querySelector('[data-testid=interrupt-title]') ? c.querySelector('[data-testid=interrupt-title]').textContent : c.querySelector('strong').textContent,
    summary: c.querySelector('[data-testid=interrupt-summary]').textContent,
    captions: [...c.querySelectorAll('dt')].map((n) => n.textContent),
    approve: c.querySelector('[data-testid=approve]').textContent,
    deny: c.querySelector('[data-testid=deny]').textContent,
    approveDisabled: c.querySelector('[data-testid=approve]').disabled,
    denyDisabled: c.querySelector('[data-testid=deny]').disabled,
    outcome: c.querySelector('[data-testid=interrupt-outcome]').textContent,
    error: c.querySelector('[data-testid=interrupt-error]') ? c.querySelector('[data-testid=interrupt-error]').textContent : null,
  };
})()`);
const question = () => ev(`(() => {
  const c = document.querySelector('[data-testid=question]');
  if (!c) return null;
  return {
    state: c.dataset.state,
    server: c.querySelector('[data-testid=question-server]').textContent,
    captions: [...c.querySelectorAll('dt')].map((n) => n.textContent),
    accept: c.querySelector('[data-testid=question-accept]').textContent,
    decline: c.querySelector('[data-testid=question-decline]').textContent,
    cancel: c.querySelector('[data-testid=question-cancel]').textContent,
    disabled: [...c.querySelectorAll('button.decide')].every((b) => b.disabled),
    outcome: c.querySelector('[data-testid=question-outcome]').textContent,
  };
})()`);
// Each turn: its message, the withdrawal lines under it, its cards' words.
const turns = () => ev(`[...document.querySelectorAll('article.turn')].map((t) => ({
  user: t.querySelector('.user') ? t.querySelector('.user').textContent : null,
  withdrawn: [...t.querySelectorAll('[data-testid=withdrawn]')].map((n) => ({ text: n.textContent, state: n.dataset.state, cancel: n.dataset.cancel })),
  counts: [...t.querySelectorAll('[data-testid=count]')].map((n) => n.textContent),
  notes: [...t.querySelectorAll('[data-testid=more-note]')].filter((n) => !n.hidden).map((n) => n.textContent),
  more: [...t.querySelectorAll('[data-testid=show-more]')].map((n) => n.textContent),
}))`);
// Types a message and sends it, without waiting for its turn: what the
// page shows before the server has answered is checked right after.
const send = async (text) => {
  await ev(`document.querySelector('[data-testid=input]').focus()`);
  await cmd("Input.insertText", { text });
  await cmd("Input.dispatchKeyEvent", { type: "keyDown", key: "Enter", code: "Enter", windowsVirtualKeyCode: 13, text: "\r" });
  await cmd("Input.dispatchKeyEvent", { type: "keyUp", key: "Enter", code: "Enter", windowsVirtualKeyCode: 13 });
};

try {
  await cmd("Runtime.enable");
  await cmd("Page.enable");
  await cmd("Network.enable");
  await cmd("Page.navigate", { url: BASE });
  await idle();
  check((await ev("navigator.language")).startsWith("en"), "the browser asks for English");

  // 1. The approval card, in the language of the message.
  await say("12번 좌석 15시 예약해줘");
  let a = await approval();
  console.log(`     approval card: ${JSON.stringify(a)}`);
  check(!!a && a.state === "Awaiting" && a.summary.includes("예약할까요"), "a Korean reservation stops at an approval card");
  check(!!a && a.title === "승인이 필요합니다" && a.approve === "승인" && a.deny === "거절",
    `the card's title and buttons are Korean: ${JSON.stringify(a && [a.title, a.approve, a.deny])}`);
  check(!!a && JSON.stringify(a.captions) === JSON.stringify(["승인하면 실행", "준비된 작업", "만료", "요청 ID"]),
    `the card's captions are Korean: ${JSON.stringify(a && a.captions)}`);

  // 2. A new message withdraws it: marked at once, before the turn is over.
  await send("3층 안전 지적사항 보여줘");
  a = await approval();
  console.log(`     at once: ${JSON.stringify(a)}`);
  check(a.state === "Withdrawn" && a.approveDisabled && a.denyDisabled,
    `the card is withdrawn as soon as the message is sent: ${a.state}, buttons ${a.approveDisabled}/${a.denyDisabled}`);
  await sleep(100);
  await idle();
  await ev(`document.querySelector('[data-testid=approve]').click()`);
  await sleep(300);
  const line = (x) => x.user === "3층 안전 지적사항 보여줘" && x.withdrawn.length > 0;
  for (let i = 0; i < 40 && !(await turns()).some(line); i++) await sleep(50);
  a = await approval();
  console.log(`     after the turn: ${JSON.stringify(a)}`);
  check(a.state === "Withdrawn" && a.approveDisabled && a.error == null && resumes.length === 0,
    `a click on the withdrawn card sends nothing: ${a.state}, ${resumes.length} resumes, ${JSON.stringify(a.error)}`);
  check(a.outcome.includes("새 메시지로 철회됨") && a.outcome.includes("취소 요청을 보냈습니다"),
    `the card says it was withdrawn and its cancel sent: ${JSON.stringify(a.outcome)}`);
  let t = await turns();
  console.log(`     turns: ${JSON.stringify(t)}`);
  const search = t.find((x) => x.user === "3층 안전 지적사항 보여줘");
  check(!!search && search.withdrawn.length === 1 && search.withdrawn[0].cancel === "cancelled"
    && search.withdrawn[0].text.includes("prepare_seat_reservation") && search.withdrawn[0].text.includes("cancel_action(으)로 취소했고"),
    `the new message's turn says what it withdrew and that it was cancelled: ${JSON.stringify(search && search.withdrawn)}`);
  check(!!search && JSON.stringify(search.counts) === JSON.stringify(["10개 표시 (전체 최소 189개)"])
    && JSON.stringify(search.notes) === JSON.stringify(["출처에 결과가 더 있습니다."])
    && JSON.stringify(search.more) === JSON.stringify(["더 보기"]),
    `the listing card speaks Korean: ${JSON.stringify(search && [search.counts, search.notes, search.more])}`);

  // 3. A question of a tool's server, in Korean, withdrawn the same way.
  await say("PANO-003-0611 현장 담당자에게 알려줘");
  let q = await question();
  console.log(`     question card: ${JSON.stringify(q)}`);
  check(!!q && q.state === "Awaiting" && q.accept === "제출" && q.decline === "거절" && q.cancel === "취소"
    && q.server.endsWith("의 질문:") && JSON.stringify(q.captions) === JSON.stringify(["질문한 호출", "만료", "요청 ID"]),
    `the question card's own words are Korean: ${JSON.stringify(q)}`);
  await send("1999년 사진 보여줘");
  q = await question();
  check(q.state === "Withdrawn" && q.disabled, `the question is withdrawn as soon as the message is sent: ${q.state}`);
  await sleep(100);
  await idle();
  q = await question();
  check(q.state === "Withdrawn" && q.outcome.includes("철회됨: 답하기 전에 새 메시지를 보냈습니다") && !q.outcome.includes("거절"),
    `the question says withdrawn, not denied: ${JSON.stringify(q.outcome)}`);
  // The line comes from the stored thread, read once the turn is over.
  const withdrawal = (x) => x.user === "1999년 사진 보여줘" && x.withdrawn.length > 0;
  for (let i = 0; i < 40 && !(await turns()).some(withdrawal); i++) await sleep(50);
  t = await turns();
  const none = t.find((x) => x.user === "1999년 사진 보여줘");
  check(!!none && JSON.stringify(none.counts) === JSON.stringify(["없음 — 출처가 정확히 0개로 집계했습니다"]),
    `an accounted zero is said in Korean: ${JSON.stringify(none && none.counts)}`);
  check(!!none && none.withdrawn.length === 1 && none.withdrawn[0].text.includes("질문"),
    `the message's turn says it withdrew the question: ${JSON.stringify(none && none.withdrawn)}`);

  // 4. A reload: the stored thread says the same.
  await cmd("Page.reload");
  await sleep(300);
  await idle();
  a = await approval();
  q = await question();
  t = await turns();
  console.log(`     after a reload: ${JSON.stringify({ a, q, t })}`);
  check(a.state === "Withdrawn" && a.approveDisabled && a.denyDisabled && a.outcome.includes("새 메시지로 철회됨")
    && a.title === "승인이 필요합니다" && a.approve === "승인",
    `after a reload the approval card is withdrawn, in Korean: ${JSON.stringify(a)}`);
  check(q.state === "Withdrawn" && q.outcome.includes("철회됨: 답하기 전에 새 메시지를 보냈습니다"),
    `after a reload the question is withdrawn: ${JSON.stringify(q.outcome)}`);
  const lines = t.map((x) => [x.user, x.withdrawn.map((w) => w.cancel)]);
  check(JSON.stringify(lines) === JSON.stringify([
    ["12번 좌석 15시 예약해줘", []], ["3층 안전 지적사항 보여줘", ["cancelled"]],
    ["PANO-003-0611 현장 담당자에게 알려줘", []], ["1999년 사진 보여줘", ["nothing"]]]),
    `after a reload each withdrawal is a line under the message that withdrew it: ${JSON.stringify(lines)}`);
  const stored = t.find((x) => x.user === "3층 안전 지적사항 보여줘");
  check(!!stored && stored.withdrawn[0].state === "Withdrawn" && stored.withdrawn[0].text === search.withdrawn[0].text,
    `the reloaded line says what the live one said: ${JSON.stringify(stored && stored.withdrawn)}`);
  check(errors.length === 0, `no script errors: ${errors.join("; ")}`);
} catch (e) {
  check(false, `driver error: ${e.message}`);
}
finish(failed() ? 1 : 0);
