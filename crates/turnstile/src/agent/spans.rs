//! The turn's spans, named as OpenTelemetry's GenAI semantic conventions
//! name them (issue 39 §1, ADR 0040), so an OTLP collector that reads
//! `gen_ai.*` (Phoenix, Langfuse, Grafana) shows a turn as an agent run:
//! `invoke_agent` → `chat {model}` and `execute_tool {tool}`. They are
//! `tracing` spans like any: with no exporter installed they cost what a
//! span costs, and the log lines keep their own fields.
//!
//! No attribute carries text a user or a model wrote, a capability or
//! bearer token, a session id or a subject: only names, ids turnstile
//! minted, counts and table rows.

use tracing::field::Empty;
use tracing::Span;

/// The agent's name in `invoke_agent {name}`.
pub const AGENT_NAME: &str = "turnstile";

/// One turn (or the stream a decision resumes).
pub fn invoke_agent(thread_id: &str, turn_id: &str, resumed: bool) -> Span {
    tracing::info_span!(
        "turn",
        thread_id = %thread_id,
        turn_id = %turn_id,
        resumed = resumed,
        otel.name = "invoke_agent turnstile",
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = AGENT_NAME,
        gen_ai.conversation.id = %thread_id,
    )
}

/// One model request of a turn: a planning round or the responder's.
pub fn chat(provider: &str, model: &str) -> Span {
    tracing::info_span!(
        "model_request",
        otel.name = %format!("chat {model}"),
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = %provider,
        gen_ai.request.model = %model,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
    )
}

/// One call of a tool, from the request to its answer (or its failure).
pub fn execute_tool(tool: &str, call_id: &str, server: &str) -> Span {
    tracing::info_span!(
        "tool_call",
        otel.name = %format!("execute_tool {tool}"),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %tool,
        gen_ai.tool.call.id = %call_id,
        gen_ai.tool.type = "extension",
        turnstile.mcp.server = %server,
    )
}

/// `stream` polled inside `span`: an answer streamed after its request
/// returned still counts to that request (its usage is recorded there).
pub fn in_span(mut stream: crate::llm::TextStream, span: Span) -> crate::llm::TextStream {
    Box::pin(futures::stream::poll_fn(move |cx| {
        let _entered = span.enter();
        stream.as_mut().poll_next(cx)
    }))
}
