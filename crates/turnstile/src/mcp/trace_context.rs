//! W3C trace context for what leaves turnstile inside a turn's span: a
//! model request's `traceparent` header, a tool call's
//! `_meta.traceparent` (the GenAI conventions' MCP propagation), so a
//! model gateway's or a tool server's spans join the turn's trace. Empty
//! when no exporter is installed (the span has no OpenTelemetry context).

use opentelemetry::trace::TraceContextExt;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The current span's `traceparent` (and a non-empty `tracestate`), as
/// (key, value) pairs, by the process's propagator (W3C trace context,
/// installed with the exporter); none when the span has no OpenTelemetry
/// context.
pub fn current() -> Vec<(String, String)> {
    let cx = tracing::Span::current().context();
    if !cx.span().span_context().is_valid() {
        return Vec::new();
    }
    let mut carrier = std::collections::HashMap::new();
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&cx, &mut carrier));
    let mut out: Vec<(String, String)> =
        carrier.into_iter().filter(|(_, v)| !v.is_empty()).collect();
    out.sort();
    out
}
