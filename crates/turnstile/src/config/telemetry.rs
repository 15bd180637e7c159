//! `[telemetry]`: OpenTelemetry trace export (issue 39 §1, ADR 0040). Off
//! unless an endpoint is set here or by the standard
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT`.

use serde::Deserialize;

use super::settings::Validator;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileTelemetry {
    otlp_endpoint: Option<String>,
    service_name: Option<String>,
    project: Option<String>,
}

/// Where and as what a process exports its traces.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TelemetryConfig {
    /// The OTLP/HTTP traces endpoint itself (`http://127.0.0.1:6006/v1/traces`),
    /// used as written. `None`: the `OTEL_*` variables decide, and with
    /// none of them nothing is exported.
    pub otlp_endpoint: Option<String>,
    /// `service.name` (default `turnstile`; `OTEL_SERVICE_NAME` wins).
    pub service_name: Option<String>,
    /// The resource attribute `openinference.project.name`: the project
    /// Phoenix files the spans under.
    pub project: Option<String>,
}

impl Validator {
    pub(super) fn telemetry(&mut self, file: &FileTelemetry) -> TelemetryConfig {
        let otlp_endpoint = (file.otlp_endpoint.as_deref())
            .and_then(|u| self.http_url("telemetry.otlp_endpoint", u))
            .map(|u| u.to_string());
        let named = |v: &Option<String>| {
            v.as_ref()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        };
        TelemetryConfig {
            otlp_endpoint,
            service_name: named(&file.service_name),
            project: named(&file.project),
        }
    }
}
