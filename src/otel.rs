//! OpenTelemetry trace export for `turnstile serve` and `turnstile demo`
//! (issue 39 §1, ADR 0040): the turn's `tracing` spans (`agent::spans`)
//! and the table rows taken in them, sent over OTLP/HTTP (protobuf) to a
//! collector (Arize Phoenix, Langfuse, Grafana's, an OpenTelemetry
//! Collector). Off unless an endpoint is given: `[telemetry]
//! otlp_endpoint`, `--otlp-endpoint`, or the standard
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT`.
//!
//! What is exported is what the layer's filter lets through: turnstile's
//! own spans and events at `info` and the table rows (`rows` at `trace`),
//! never a library's (a client library's event may print a URL whole).

use anyhow::Context;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::KeyValue;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use turnstile::config::TelemetryConfig;

/// The standard variables that turn export on without a configured
/// endpoint; the exporter reads them itself.
const ENDPOINT_VARS: &[&str] = &[
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];

/// What the exporter's layer lets through: the turn's spans and events and
/// the table rows. The model adapter's and the MCP client's own events
/// are left out (a provider's error body may echo a prompt); their
/// requests are spans of `agent`, so usage still lands on them.
pub const FILTER: &str = "off,turnstile=info,turnstile::llm=off,turnstile::mcp=off,rows=trace";

/// A running exporter. [`Exporter::shutdown`] flushes what is queued.
pub struct Exporter {
    provider: SdkTracerProvider,
}

impl Exporter {
    /// Starts the exporter `cfg` (with the environment) asks for; `None`
    /// when no endpoint is set anywhere, or for a command that runs no
    /// server (`cfg` is `None`).
    pub fn start(cfg: Option<&TelemetryConfig>) -> anyhow::Result<Option<(Exporter, SdkTracer)>> {
        let Some(cfg) = cfg else {
            return Ok(None);
        };
        let from_env = ENDPOINT_VARS
            .iter()
            .any(|v| std::env::var(v).is_ok_and(|s| !s.trim().is_empty()));
        if cfg.otlp_endpoint.is_none() && !from_env {
            return Ok(None);
        }
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary);
        if let Some(endpoint) = &cfg.otlp_endpoint {
            exporter = exporter.with_endpoint(endpoint.clone());
        }
        let exporter = exporter
            .build()
            .context("cannot build the OTLP trace exporter")?;
        let mut resource = Resource::builder();
        // `OTEL_SERVICE_NAME` and `service.name` in
        // `OTEL_RESOURCE_ATTRIBUTES` (read by the default detectors) win
        // over the config, which wins over the default.
        let from_env = std::env::var("OTEL_SERVICE_NAME").is_ok()
            || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|a| a.contains("service.name="));
        if !from_env {
            let name = cfg.service_name.as_deref().unwrap_or("turnstile");
            resource = resource.with_service_name(name.to_string());
        }
        if let Some(project) = &cfg.project {
            resource = resource
                .with_attribute(KeyValue::new("openinference.project.name", project.clone()));
        }
        let provider = SdkTracerProvider::builder()
            .with_resource(resource.build())
            .with_batch_exporter(exporter)
            .build();
        // `traceparent` on model requests and in MCP calls' `_meta`
        // (mcp::trace_context).
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        let tracer = provider.tracer("turnstile");
        Ok(Some((Exporter { provider }, tracer)))
    }

    /// Sends what is queued and stops the exporter's thread (blocks up to
    /// 5 s). Called when the process is about to exit.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            eprintln!("turnstile: the trace exporter did not flush: {e}");
        }
    }
}
