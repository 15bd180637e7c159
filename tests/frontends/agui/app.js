// A minimal AG-UI client against turnstile (docs/ag-ui.md): `@ag-ui/client`'s
// own HttpAgent with a subscriber, no adapter. Cards and a delivered link are
// turnstile's CUSTOM events; an approval ends the run with an `interrupt`
// outcome, and its buttons start the next run with `resume`.
// Bundled by tests/browser.rs with esbuild and driven in Chromium.
import { HttpAgent } from "@ag-ui/client";

const log = document.getElementById("log");
const form = document.getElementById("form");
const input = document.getElementById("input");
const el = (tag, attrs = {}, text = "") => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  e.textContent = text;
  return e;
};
const status = (s) => { log.dataset.status = s; };

const r = await fetch("/v1/threads", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
const { thread_id } = await r.json();
const agent = new HttpAgent({ url: `/v1/threads/${thread_id}/agui`, threadId: thread_id });
let runs = 0;

function interrupt(block, i) {
  const box = el("div", { "data-testid": "approval" });
  box.append(el("p", { "data-testid": "card-summary" }, i.message ?? i.reason));
  for (const word of ["approve", "deny"]) {
    const b = el("button", { "data-testid": word }, word);
    b.onclick = () => {
      box.remove();
      run({ resume: [{ interruptId: i.id, status: "resolved", payload: { decision: word } }] });
    };
    box.append(b);
  }
  block.append(box);
}

async function run(params) {
  status("streaming");
  const block = el("section");
  log.append(block);
  let text = null;
  try {
    await agent.runAgent({ runId: `run-${++runs}`, ...params }, {
      onTextMessageStartEvent() { text = el("p", { "data-testid": "text" }); block.append(text); },
      onTextMessageContentEvent({ event }) { text.textContent += event.delta; },
      onToolCallStartEvent({ event }) { block.append(el("code", { "data-testid": "tool" }, event.toolCallName)); },
      onCustomEvent({ event }) {
        const v = event.value;
        if (event.name === "turnstile.citation") block.append(el("small", { "data-testid": "card" }, `${v.displayed} shown (${v.grade})`));
        if (event.name === "turnstile.capability") block.append(el("a", { "data-testid": "download", href: v.url }, v.label));
      },
      onRunFinishedEvent({ event }) {
        if (event.outcome?.type === "interrupt") for (const i of event.outcome.interrupts) interrupt(block, i);
      },
      onRunErrorEvent({ event }) { block.append(el("p", { "data-testid": "error" }, event.message)); },
    });
  } catch (e) {
    block.append(el("p", { "data-testid": "error" }, String(e?.message ?? e)));
  }
  status("ready");
}

form.onsubmit = (e) => {
  e.preventDefault();
  if (!input.value.trim()) return;
  agent.addMessage({ id: crypto.randomUUID(), role: "user", content: input.value });
  input.value = "";
  run({});
};
status("ready");
