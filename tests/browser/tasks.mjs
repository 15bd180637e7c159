// A long call its server makes a task (issue 22 §4), in headless Chromium
// driven over the DevTools protocol (cdp.mjs), against the real server and
// the demo tools: "compile the site report for tower-a" is one
// compile_site_report call, which the demo server makes a task of four
// steps, a status message each.
// Usage: node --experimental-websocket tasks.mjs MODE BASE_URL
//   live  the page is watched every 50 ms while the call runs: one progress
//         line, right under the call's row, shows the tool, its status, the
//         elapsed time and the server's message quoted as its words; later
//         frames update the same line ("step 1 of 4", then later steps);
//         the call's result replaces it, and the answer follows. The stored
//         thread holds the progress records and the settled task; a reload
//         shows the result, and no progress line.
//   left  the client leaves the turn after its first progress frame (a
//         request of the script's, in the page's session): a reload shows
//         the call's last report marked as still running when the turn
//         ended; once the task has ended on its own, a reload shows a line
//         under the call's row with the tool and code's sentence on how it
//         ended.
//   stub  a hand-made stream (the message route is a stub's), paced like a
//         task: each status in the page's words, the server's message kept
//         as text (markup, a Markdown link), no line for a call that has
//         its result, and a stream that ends before the task did leaves
//         the last report marked so.
// Exits 0 when every check passed; prints what it saw either way.
import { launch, sleep } from "./cdp.mjs";

const [MODE, BASE] = process.argv.slice(2);
const { cmd, ev, idle, check, finish, errors, on, failed } = await launch(`tasks-${MODE}`, 60_000);
// What the page wrote to its console as an error (exceptions are `errors`).
const consoleErrors = [];
on("Runtime.consoleAPICalled", (p) => {
  if (p.type === "error") consoleErrors.push(p.args.map((a) => a.value ?? a.description).join(" "));
});
// The browser's own request for /favicon.ico (the page names none) is no error of the page's.
on("Log.entryAdded", (p) => {
  const e = p.entry;
  if (e.level === "error" && !String(e.url ?? "").endsWith("/favicon.ico")) consoleErrors.push(`${e.source}: ${e.text} ${e.url ?? ""}`);
});
const ASK = "compile the site report for tower-a";
const TOOL = "compile_site_report";

// The page as the checks see it.
const page = () => ev(`(() => {
  const text = (n) => (n ? n.textContent : null);
  const send = document.querySelector('[data-testid=send]');
  // Right under the row of the call it names.
  const under = (li) => {
    const prev = li.previousElementSibling;
    return !!prev && prev.dataset.testid === 'tool' && prev.querySelector('code').textContent === li.querySelector('code').textContent;
  };
  return {
    busy: !send || send.disabled,
    user: [...document.querySelectorAll('.user')].map((n) => n.textContent),
    rows: [...document.querySelectorAll('[data-testid=tool]')].map((r) => ({ text: r.textContent, state: r.className })),
    lines: [...document.querySelectorAll('[data-testid=progress]')].map((li) => {
      const m = li.querySelector('[data-testid=progress-message]');
      return {
        text: li.textContent, state: li.dataset.state, status: li.dataset.status, callId: li.dataset.callId,
        message: text(m), messageElements: m ? m.children.length : null,
        elapsed: text(li.querySelector('[data-testid=progress-elapsed]')),
        underRow: under(li),
      };
    }),
    settled: [...document.querySelectorAll('[data-testid=task-settled]')].map((li) => {
      return { text: li.textContent, state: li.dataset.state, callId: li.dataset.callId,
        underRow: under(li) };
    }),
    answers: [...document.querySelectorAll('.answer')].map((n) => n.textContent).filter((t) => t !== ''),
    cards: [...document.querySelectorAll('[data-testid=citation]')].map((c) => c.querySelector('.cite-src').textContent),
    violations: [...document.querySelectorAll('[data-testid=violation]')].map((n) => n.textContent),
    errors: [...document.querySelectorAll('[data-testid=error]')].map((n) => n.textContent),
    junk: ['null', 'undefined', 'NaN', '[object'].some((w) => document.getElementById('log').textContent.includes(w)),
  };
})()`);
const thread = () => ev(`new URL(location.href).searchParams.get("thread")`);
// The stored thread, read in the page's session (tables/ownership.ron).
const stored = async () => ev(`fetch("/v1/threads/" + encodeURIComponent(${JSON.stringify(await thread())}),
  { headers: { accept: "application/json" } }).then((r) => r.json())`);
const reload = async () => {
  await cmd("Page.reload");
  await sleep(300);
  await idle();
};
const stepOf = (m) => { const x = /^step (\d) of 4\b/.exec(m ?? ""); return x ? Number(x[1]) : null; };
const SECONDS = /^\d+\.\d s$/;

// Sends `text` as say() does, without waiting for the turn: the page is
// sampled every 50 ms until the turn has ended.
async function watch(text) {
  await ev(`document.querySelector('[data-testid=input]').focus()`);
  await cmd("Input.insertText", { text });
  await cmd("Input.dispatchKeyEvent", { type: "keyDown", key: "Enter", code: "Enter", windowsVirtualKeyCode: 13, text: "\r" });
  await cmd("Input.dispatchKeyEvent", { type: "keyUp", key: "Enter", code: "Enter", windowsVirtualKeyCode: 13 });
  const samples = [];
  for (let i = 0; i < 400; i++) {
    const p = await page();
    samples.push(p);
    if (!p.busy && p.user.length === 1) break;
    await sleep(50);
  }
  return samples;
}

async function live() {
  await cmd("Page.navigate", { url: BASE });
  await idle();
  const samples = await watch(ASK);
  const end = samples.at(-1);
  check(!end.busy, `the turn finished while watched (${samples.length} samples)`);
  const during = samples.filter((p) => p.lines.length > 0);
  const lines = during.flatMap((p) => p.lines);
  // Each distinct message, in the order first seen.
  const messages = [...new Set(lines.map((l) => l.message))];
  console.log(`     ${samples.length} samples, ${during.length} with a progress line; messages: ${JSON.stringify(messages)}`);
  console.log(`     a line: ${JSON.stringify(lines.at(-1))}`);
  check(messages.length >= 2 && stepOf(messages[0]) === 1 && messages.slice(1).some((m) => stepOf(m) > 1),
    `at least two of the server's messages were shown while the call ran, "step 1 of 4" first: ${JSON.stringify(messages)}`);
  const steps = messages.map(stepOf);
  check(steps.every((n, i) => n != null && (i === 0 || n > steps[i - 1])), `they came in the server's order: ${JSON.stringify(steps)}`);
  check(during.every((p) => p.lines.length === 1), "one progress line for the call, updated in place: never two");
  check(new Set(lines.map((l) => l.callId)).size === 1 && lines[0].callId !== "", `all of it for one call id: ${lines[0] && lines[0].callId}`);
  check(lines.every((l) => l.underRow), "the line is right under the call's row");
  check(lines.every((l) => l.state === "live" && l.status === "working" && l.text.includes(`${TOOL} — working, `)),
    "it names the tool and its status: working");
  check(lines.every((l) => l.messageElements === 0 && l.text.includes(`server demo says: “${l.message}”`)),
    "the server's message is quoted as its words, as text");
  check(lines.every((l) => SECONDS.test(l.elapsed) && l.text.includes(l.elapsed)), `it shows the elapsed seconds: ${lines.map((l) => l.elapsed).join(" ")}`);
  const secs = lines.map((l) => parseFloat(l.elapsed));
  check(secs.every((x, i) => i === 0 || x >= secs[i - 1]) && secs.at(-1) > secs[0], `the elapsed time goes on: ${secs[0]} → ${secs.at(-1)}`);
  check(during.every((p) => p.rows.length === 1 && p.rows[0].state === "running"), "while the line is shown, the call is running");
  const after = samples.filter((p) => p.rows.some((r) => r.state !== "running"));
  check(after.length > 0 && after.every((p) => p.lines.length === 0), "once the call's result arrived, no progress line is left");

  console.log(`     after: ${JSON.stringify(end)}`);
  check(end.rows.length === 1 && end.rows[0].state === "ok" && end.rows[0].text.includes(`${TOOL} on demo — ok`),
    `the call's row says it ended: ${JSON.stringify(end.rows)}`);
  check(JSON.stringify(end.answers) === JSON.stringify(["The site report for tower-a is compiled; it is shown above."]),
    `the answer: ${JSON.stringify(end.answers)}`);
  check(JSON.stringify(end.cards) === JSON.stringify([TOOL]), `the report's card: ${JSON.stringify(end.cards)}`);
  check(end.settled.length === 0, "no line says it ended after its turn");
  check(end.violations.length === 0 && end.errors.length === 0, `no frame violation and no error: ${JSON.stringify([...end.violations, ...end.errors])}`);
  check(samples.every((p) => p.violations.length === 0 && !p.junk), "at no time a violation, or a stray null, undefined or NaN");

  // The stored thread: the progress the page was sent, and the task settled.
  const t = await stored();
  const progress = t.messages.filter((m) => m.body.kind === "progress").map((m) => m.body.message);
  check(progress.length >= 2 && messages.every((m) => progress.includes(m)), `the thread stored the progress shown: ${JSON.stringify(progress)}`);
  const tasks = t.tasks ?? [];
  check(tasks.length === 1 && tasks[0].tool === TOOL && tasks[0].state === "Completed" && tasks[0].outcome.state === "Completed",
    `the thread's task completed: ${JSON.stringify(tasks)}`);

  await reload();
  const again = await page();
  console.log(`     reloaded: ${JSON.stringify(again)}`);
  check(JSON.stringify(again.rows) === JSON.stringify(end.rows), `after a reload the call's row is as it was: ${JSON.stringify(again.rows)}`);
  check(JSON.stringify(again.answers) === JSON.stringify(end.answers) && JSON.stringify(again.cards) === JSON.stringify(end.cards),
    "after a reload the answer and the report's card are shown");
  check(again.lines.length === 0 && again.settled.length === 0, "after a reload no progress line is left");
  check(again.violations.length === 0 && again.errors.length === 0 && !again.junk, "after a reload no violation and no error");
}

async function left() {
  await cmd("Page.navigate", { url: BASE });
  await idle();
  const id = await thread();
  // The client goes away after the first progress frame: the turn stops,
  // the task goes on without it.
  const sent = await ev(`(async () => {
    const stop = new AbortController();
    const r = await fetch("/v1/threads/" + encodeURIComponent(${JSON.stringify(id)}) + "/messages", {
      method: "POST", headers: { "content-type": "application/json", accept: "text/event-stream" },
      body: JSON.stringify({ text: ${JSON.stringify(ASK)} }), signal: stop.signal });
    const reader = r.body.getReader(), dec = new TextDecoder();
    let seen = "";
    while (!seen.includes("event: progress")) {
      const { done, value } = await reader.read();
      if (done) break;
      seen += dec.decode(value, { stream: true });
    }
    stop.abort();
    return seen.includes("event: progress");
  })()`);
  check(sent === true, "the client left after the first progress frame");

  // The task runs about 2.4 s: reloaded now, its last report stays.
  await reload();
  let t = await stored();
  const running = (t.tasks ?? []).some((x) => x.state === "Working");
  let p = await page();
  console.log(`     left: ${JSON.stringify(p)} tasks ${JSON.stringify(t.tasks)}`);
  if (running) {
    check(p.lines.length === 1 && p.lines[0].state === "stopped" && p.lines[0].underRow && stepOf(p.lines[0].message) != null
      && p.lines[0].text.includes("still running when this turn ended") && p.lines[0].text.includes(`server demo said: “${p.lines[0].message}”`),
    `the last report stays, marked as still running when the turn ended: ${JSON.stringify(p.lines)}`);
  } else console.log("     (the task had ended before the reload: its last report is not checked)");
  check(p.rows.length === 1 && p.rows[0].state === "lost", `the call's row has no result: ${JSON.stringify(p.rows)}`);

  // The task ends on its own, and its turn is told.
  for (let i = 0; i < 100 && !t.messages.some((m) => m.body.kind === "task_settled"); i++) {
    await sleep(100);
    t = await stored();
  }
  const record = t.messages.find((m) => m.body.kind === "task_settled");
  check(!!record && record.body.state === "Completed" && record.body.text === "the task ended, and the tool returned a result",
    `the thread holds how the task ended: ${JSON.stringify(record && record.body)}`);
  await reload();
  p = await page();
  console.log(`     settled: ${JSON.stringify(p)}`);
  check(p.settled.length === 1 && p.settled[0].underRow && p.settled[0].state === "Completed"
    && p.settled[0].text.endsWith(`${TOOL} (ended after its turn): the task ended, and the tool returned a result`),
  `a line under the call's row says how the task ended: ${JSON.stringify(p.settled)}`);
  check(p.lines.length === 0, "no progress line is left");
  check(p.violations.length === 0 && p.errors.length === 1 && p.errors[0].includes("cut off") && !p.junk,
    `the turn says it was cut off; nothing else went wrong: ${JSON.stringify(p.errors)}`);
}

async function stub() {
  await cmd("Page.navigate", { url: BASE });
  await idle();
  // Whether anything of the server's words ever became an element.
  await ev(`(() => {
    window.__made = [];
    new MutationObserver(() => {
      for (const n of document.querySelectorAll('[data-pwned], img, a[href*="evil.example"]')) window.__made.push(n.outerHTML);
    }).observe(document.getElementById('log'), { childList: true, subtree: true });
    return true;
  })()`);
  const samples = await watch("long call");
  const end = samples.at(-1);
  const lines = samples.flatMap((p) => p.lines);
  const by = (status) => lines.filter((l) => l.status === status && l.state === "live");
  const [working, asking, cancelling] = ["working", "input_required", "cancelling"].map(by);
  console.log(`     seen: ${JSON.stringify([working[0], asking[0], cancelling[0]])}`);
  console.log(`     end: ${JSON.stringify(end)}`);
  const HOSTILE = "<img src=x data-pwned=1> step [1](https://evil.example/) of 2";
  check(working.length > 0 && working.every((l) => l.message === HOSTILE && l.messageElements === 0
    && l.text.includes(`long_tool — working, `) && l.text.includes(`server stub-server says: “${HOSTILE}”`)),
  "working: the server's words as text, markup and Markdown included");
  check(asking.length > 0 && asking.every((l) => l.message === "Waiting for the site office"
    && l.text.includes("long_tool — waiting: its server asks for input, ")), "input_required: in the page's words, with the server's message");
  check(cancelling.length > 0 && cancelling.every((l) => l.message === null && l.text.includes("long_tool — being cancelled, ") && !l.text.includes("says")),
    "cancelling: in the page's words; no message, no quote");
  check(samples.every((p) => p.lines.length <= 1) && lines.every((l) => l.callId === "stub-turn-2" && l.underRow),
    "one line, under the long call's row only: none for the call that had its result");
  check(!lines.some((l) => l.text.includes("LATE-REPORT")), "a report after a call's result is not shown");
  const made = await ev("window.__made");
  check(made.length === 0 && (await ev(`document.querySelectorAll('[data-pwned], a[href*="evil.example"]').length`)) === 0,
    `nothing in the server's words became an element: ${JSON.stringify(made)}`);
  const last = end.lines[0];
  check(end.lines.length === 1 && last.state === "stopped" && last.status === "cancelling" && last.elapsed === "1.5 s"
    && last.text.includes("long_tool — still running when this turn ended (last report at 1.5 s)"),
  `the stream ended before the task: its last report stays, marked: ${JSON.stringify(last)}`);
  check(JSON.stringify(end.rows.map((r) => r.state)) === JSON.stringify(["ok", "lost"]), `the long call has no result: ${JSON.stringify(end.rows)}`);
  check(end.errors.length === 1 && end.errors[0].includes("the stub stops here") && end.violations.length === 0 && !end.junk,
    `the stream's error is shown; no violation: ${JSON.stringify(end.errors)}`);
}

try {
  await cmd("Runtime.enable");
  await cmd("Page.enable");
  await cmd("Log.enable");
  // Every report of the page's Content-Security-Policy (csp.mjs): the
  // progress lines break no rule of it.
  await cmd("Page.addScriptToEvaluateOnNewDocument", {
    source: `window.__csp = [];
      document.addEventListener("securitypolicyviolation", (e) => window.__csp.push(e.effectiveDirective + " " + e.blockedURI));`,
  });
  if (MODE === "live") await live();
  else if (MODE === "left") await left();
  else if (MODE === "stub") await stub();
  else check(false, `unknown mode ${MODE}`);
  const csp = await ev("window.__csp");
  check(Array.isArray(csp) && csp.length === 0, `no CSP violation: ${JSON.stringify(csp)}`);
  check(errors.length === 0, `no script errors: ${errors.join("; ")}`);
  check(consoleErrors.length === 0, `no console errors: ${consoleErrors.join("; ")}`);
} catch (e) {
  check(false, `driver error: ${e.message}\n${e.stack}`);
}
finish(failed() ? 1 : 0);
