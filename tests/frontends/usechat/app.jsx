// A minimal `useChat` page against turnstile (docs/ai-sdk.md): the AI SDK's
// own hook and transport, no adapter. Cards, figures and a delivered link
// are typed data parts; an approval is the server's interrupt, answered with
// `addToolApprovalResponse` and sent by `sendAutomaticallyWhen`.
// Bundled by tests/browser.rs with esbuild and driven in Chromium.
import React, { useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } from "ai";

function Part({ part, decide }) {
  if (part.type === "text") return <p data-testid="text">{part.text}</p>;
  if (part.type === "data-citation")
    return <small data-testid="card">{part.data.displayed} shown ({part.data.grade}){part.data.total != null ? ` of ${part.data.total_is_lower_bound ? "at least " : ""}${part.data.total}` : ""}</small>;
  if (part.type === "data-figure")
    return <small data-testid="figure">{part.data.label}: {String(part.data.value)} ({part.data.grade})</small>;
  if (part.type === "data-capability")
    return <a data-testid="download" href={part.data.url}>{part.data.label}</a>;
  if (part.type === "data-interrupt") return <p data-testid="card-summary">{part.data.summary}</p>;
  if (part.type.startsWith("tool-")) {
    if (part.state === "approval-requested")
      return (
        <span data-testid="approval">
          <button data-testid="approve" onClick={() => decide(part.approval.id, true)}>Approve</button>{" "}
          <button data-testid="deny" onClick={() => decide(part.approval.id, false)}>Deny</button>
        </span>
      );
    return <code data-testid="tool">{part.type.slice(5)}: {part.state}</code>;
  }
  return null;
}

function Chat({ threadId }) {
  const { messages, sendMessage, addToolApprovalResponse, status, error } = useChat({
    transport: new DefaultChatTransport({
      api: `/v1/threads/${threadId}/ui-message-stream`,
      // turnstile reads the last message only (the thread keeps its own
      // history): sending only it keeps a long chat under the body limit.
      prepareSendMessagesRequest: ({ messages }) => ({ body: { messages: messages.slice(-1) } }),
    }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  const [text, setText] = useState("");
  const busy = status === "submitted" || status === "streaming";
  const decide = (id, approved) => addToolApprovalResponse({ id, approved });
  return (
    <main data-testid="chat" data-status={status}>
      {messages.map((m) => (
        <section key={m.id} data-role={m.role}>
          {m.parts.map((p, i) => <Part key={i} part={p} decide={decide} />)}
        </section>
      ))}
      {error && <p role="alert" data-testid="error">{error.message}</p>}
      <form onSubmit={(e) => { e.preventDefault(); if (!text.trim()) return; sendMessage({ text }); setText(""); }}>
        <input data-testid="input" value={text} onChange={(e) => setText(e.target.value)} placeholder="show safety issues on floor 3" />
        <button data-testid="send" disabled={busy}>Send</button>
      </form>
    </main>
  );
}

function App() {
  const [thread, setThread] = useState(null);
  useEffect(() => {
    fetch("/v1/threads", { method: "POST", credentials: "include", headers: { "content-type": "application/json" }, body: "{}" })
      .then((r) => r.json())
      .then((v) => setThread(v.thread_id));
  }, []);
  return thread ? <Chat threadId={thread} /> : <p>…</p>;
}

createRoot(document.getElementById("root")).render(<App />);
