//! [`ToolClient`]: one connected MCP server (streamable HTTP or stdio).
//!
//! Two rmcp 3.x defaults are overridden here on purpose:
//!
//! * **Protocol version** (ADR 0003). rmcp's `ProtocolVersion::default()` is
//!   `LATEST` = `2026-07-28`, a revision without the `initialize` handshake
//!   that today's servers (TypeScript SDK 1.x, Python SDK, most adapters) do
//!   not speak. We pin `initialize` to [`PROTOCOL_VERSION`] (`2025-11-25`,
//!   `ProtocolVersion::V_2025_11_25`) and take whatever older revision a
//!   server negotiates down to.
//! * **Silent re-initialisation** (ADR 0004). rmcp's streamable-HTTP client
//!   defaults `reinit_on_expired_session` to `true`: on an HTTP 404 for an
//!   expired session it opens a new session and *re-sends the failed request
//!   once*. A `tools/call` may have side effects, so it must never run twice
//!   behind our back; we turn that off and surface the failure as
//!   [`McpError::Transport`].
//!
//! Also turned off: rmcp's client response cache, whose default
//! `serve_stale_on_error` would answer a failing `tools/list` with an old list.

use std::collections::HashSet;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation,
    PaginatedRequestParams, ProtocolVersion,
};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientCacheConfig, Peer, RoleClient, ServiceError, ServiceExt};
use serde_json::{Map, Value};
use tokio::io::AsyncBufReadExt;

use super::error::McpError;
use super::normalize::ToolOutput;

/// The protocol revision we ask for in `initialize` (see ADR 0003).
pub const PROTOCOL_VERSION: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// Default timeout for one `tools/call` (and for each `tools/list` page).
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Default timeout for opening the transport plus the `initialize` handshake.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Upper bound on `tools/list` pages, so a server that never stops paginating
/// cannot hang us.
const MAX_LIST_PAGES: usize = 1000;

/// How to reach an MCP server.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Transport {
    /// Streamable HTTP; `url` is the full MCP endpoint (e.g. `http://127.0.0.1:8080/mcp`).
    Http { url: String },
    /// A child process speaking MCP on stdin/stdout.
    Stdio {
        command: String,
        #[serde(default)]
        args: Vec<String>,
    },
}

/// A named MCP server.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ServerSpec {
    /// Our name for the server (used in errors and logs).
    pub name: String,
    pub transport: Transport,
}

impl ServerSpec {
    /// A streamable-HTTP server.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        ServerSpec {
            name: name.into(),
            transport: Transport::Http { url: url.into() },
        }
    }

    /// A stdio server started as `command args...`.
    pub fn stdio(
        name: impl Into<String>,
        command: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        ServerSpec {
            name: name.into(),
            transport: Transport::Stdio {
                command: command.into(),
                args: args.into_iter().map(Into::into).collect(),
            },
        }
    }
}

/// Knobs for [`ToolClient::connect_with`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientOptions {
    /// Timeout for one `tools/call` and for each `tools/list` page.
    pub call_timeout: Duration,
    /// Timeout for opening the transport and completing `initialize`.
    pub connect_timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            call_timeout: DEFAULT_CALL_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        }
    }
}

/// A tool as advertised by `tools/list`.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ToolInfo {
    pub name: String,
    /// Empty when the server gave none.
    pub description: String,
    /// The tool's `inputSchema` (a JSON Schema object).
    pub input_schema: Value,
}

/// One connected MCP server. `Send + Sync`; share it via `Arc`. Concurrent
/// calls are fine (they are multiplexed over the one connection).
pub struct ToolClient {
    name: String,
    peer: Peer<RoleClient>,
    running: RunningService<RoleClient, ClientConfig>,
    call_timeout: Duration,
    protocol_version: String,
}

impl std::fmt::Debug for ToolClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolClient")
            .field("name", &self.name)
            .field("protocol_version", &self.protocol_version)
            .field("call_timeout", &self.call_timeout)
            .finish_non_exhaustive()
    }
}

/// What we announce in `initialize`.
fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("turnstile", env!("CARGO_PKG_VERSION")),
    )
    // ADR 0003: never rmcp's default (`LATEST`, 2026-07-28).
    .with_protocol_version(PROTOCOL_VERSION)
}

impl ToolClient {
    /// Connect with [`ClientOptions::default`] (30 s call timeout).
    pub async fn connect(spec: &ServerSpec) -> Result<Self, McpError> {
        Self::connect_with(spec, ClientOptions::default()).await
    }

    /// Open the transport and run the `initialize` handshake.
    pub async fn connect_with(spec: &ServerSpec, options: ClientOptions) -> Result<Self, McpError> {
        let server = spec.name.clone();
        let connect_err = |reason: String| McpError::Connect {
            server: server.clone(),
            reason,
        };
        let handshake = async {
            match &spec.transport {
                Transport::Http { url } => {
                    if !(url.starts_with("http://") || url.starts_with("https://")) {
                        return Err(McpError::InvalidSpec {
                            server: server.clone(),
                            reason: format!("not an http(s) URL: {url}"),
                        });
                    }
                    let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                        // ADR 0004: a 404 "session expired" must fail the call,
                        // not silently re-initialise and re-send it.
                        .reinit_on_expired_session(false);
                    let transport = StreamableHttpClientTransport::from_config(config);
                    client_config()
                        .serve(transport)
                        .await
                        .map_err(|e| connect_err(error_chain(&e)))
                }
                Transport::Stdio { command, args } => {
                    if command.trim().is_empty() {
                        return Err(McpError::InvalidSpec {
                            server: server.clone(),
                            reason: "empty command".to_string(),
                        });
                    }
                    let mut cmd = tokio::process::Command::new(command);
                    cmd.args(args);
                    let (process, stderr) = TokioChildProcess::builder(cmd)
                        .stderr(Stdio::piped())
                        .spawn()
                        .map_err(|e| connect_err(format!("cannot spawn '{command}': {e}")))?;
                    if let Some(stderr) = stderr {
                        forward_stderr(server.clone(), stderr);
                    }
                    client_config()
                        .serve(process)
                        .await
                        .map_err(|e| connect_err(error_chain(&e)))
                }
            }
        };
        let running = match tokio::time::timeout(options.connect_timeout, handshake).await {
            Ok(result) => result?,
            Err(_) => {
                return Err(connect_err(format!(
                    "no initialize response within {:?}",
                    options.connect_timeout
                )))
            }
        };
        let peer = running.peer().clone();
        // A failing re-fetch must fail, not be answered from a stale cache.
        peer.set_response_cache_config(ClientCacheConfig::disabled())
            .await;
        let info = peer.peer_info();
        let protocol_version = info
            .as_ref()
            .map(|i| i.protocol_version.to_string())
            .unwrap_or_default();
        let (server_name, server_version) = info
            .as_ref()
            .and_then(|i| i.server_info.as_ref())
            .map(|s| (s.name.clone(), s.version.clone()))
            .unwrap_or_default();
        tracing::info!(
            server = %spec.name,
            transport = transport_kind(&spec.transport),
            protocol_version = %protocol_version,
            server_name = %server_name,
            server_version = %server_version,
            "mcp server connected"
        );
        Ok(ToolClient {
            name: spec.name.clone(),
            peer,
            running,
            call_timeout: options.call_timeout,
            protocol_version,
        })
    }

    /// Our name for this server.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The protocol revision the server agreed to in `initialize`.
    pub fn protocol_version(&self) -> &str {
        &self.protocol_version
    }

    /// The timeout applied to each call.
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout
    }

    /// Change the per-call timeout.
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// All tools, following `nextCursor` until the server stops sending one.
    pub async fn list_tools(&self) -> Result<Vec<ToolInfo>, McpError> {
        const METHOD: &str = "tools/list";
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen_cursors = HashSet::new();
        for page in 0..MAX_LIST_PAGES {
            let params = cursor
                .take()
                .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            let result =
                match tokio::time::timeout(self.call_timeout, self.peer.list_tools(params)).await {
                    Ok(Ok(result)) => result,
                    Ok(Err(e)) => return Err(self.service_error(METHOD, e)),
                    Err(_) => return Err(self.timeout(METHOD)),
                };
            tools.extend(result.tools.into_iter().map(|t| ToolInfo {
                name: t.name.into_owned(),
                description: t.description.map(|d| d.into_owned()).unwrap_or_default(),
                input_schema: Value::Object((*t.input_schema).clone()),
            }));
            match result.next_cursor {
                // An empty cursor is treated as "no more pages": sending "" back
                // would make some servers restart from the first page.
                None => {
                    tracing::debug!(server = %self.name, pages = page + 1, tools = tools.len(), "tools listed");
                    return Ok(tools);
                }
                Some(next) if next.is_empty() => return Ok(tools),
                Some(next) => {
                    if !seen_cursors.insert(next.clone()) {
                        return Err(self.protocol(METHOD, "server repeated a tools/list cursor"));
                    }
                    cursor = Some(next);
                }
            }
        }
        Err(self.protocol(
            METHOD,
            &format!("tools/list did not end within {MAX_LIST_PAGES} pages"),
        ))
    }

    /// Call `tool` once, with the configured timeout.
    ///
    /// * JSON-RPC error → `Err(McpError::Rpc)`.
    /// * `isError: true` → `Ok(ToolOutput { is_error: true, .. })` — also a failure.
    /// * No answer in time → `Err(McpError::Timeout)`; the request is
    ///   abandoned and `notifications/cancelled` is sent (best effort).
    ///
    /// Never retried, here or in the transport (ADR 0004).
    pub async fn call(&self, tool: &str, args: Map<String, Value>) -> Result<ToolOutput, McpError> {
        let started = Instant::now();
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
        // Dropping the future on timeout drops rmcp's abandoned-request guard,
        // which sends `notifications/cancelled` for this request id.
        let outcome = tokio::time::timeout(self.call_timeout, self.peer.call_tool(params)).await;
        let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let result = match outcome {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => {
                let err = self.service_error(tool, e);
                tracing::warn!(server = %self.name, tool, elapsed_ms, error_kind = err.kind(), "mcp tool call failed");
                return Err(err);
            }
            Err(_) => {
                tracing::warn!(server = %self.name, tool, elapsed_ms, "mcp tool call timed out");
                return Err(self.timeout(tool));
            }
        };
        let output = ToolOutput::from_call_result(result);
        tracing::info!(
            server = %self.name,
            tool,
            elapsed_ms,
            is_error = output.is_error,
            blocks = output.blocks.len(),
            "mcp tool call returned"
        );
        tracing::debug!(server = %self.name, tool, shape = %output.shape(), "mcp tool result shape");
        Ok(output)
    }

    /// Close the session (HTTP: `DELETE` the session; stdio: close stdin,
    /// then terminate the child if it does not exit).
    pub async fn close(self) {
        let mut running = self.running;
        match running.close_with_timeout(Duration::from_secs(5)).await {
            Ok(Some(reason)) => {
                tracing::debug!(server = %self.name, ?reason, "mcp server closed")
            }
            Ok(None) => tracing::warn!(server = %self.name, "mcp server close timed out"),
            Err(e) => tracing::warn!(server = %self.name, error = %e, "mcp server close failed"),
        }
    }

    fn timeout(&self, tool: &str) -> McpError {
        McpError::Timeout {
            server: self.name.clone(),
            tool: tool.to_string(),
        }
    }

    fn protocol(&self, tool: &str, reason: &str) -> McpError {
        McpError::Protocol {
            server: self.name.clone(),
            tool: tool.to_string(),
            reason: reason.to_string(),
        }
    }

    fn service_error(&self, tool: &str, e: ServiceError) -> McpError {
        let server = self.name.clone();
        let tool = tool.to_string();
        match e {
            ServiceError::McpError(data) => McpError::Rpc {
                server,
                tool,
                code: i64::from(data.code.0),
                message: data.message.into_owned(),
            },
            ServiceError::Timeout { .. } => McpError::Timeout { server, tool },
            ServiceError::UnexpectedResponse => McpError::Protocol {
                server,
                tool,
                reason: "unexpected response (task, input_required, or a result of the wrong kind)"
                    .to_string(),
            },
            ServiceError::TransportClosed => McpError::Transport {
                server,
                tool,
                reason: "transport closed".to_string(),
            },
            other => McpError::Transport {
                server,
                tool,
                reason: error_chain(&other),
            },
        }
    }
}

fn transport_kind(t: &Transport) -> &'static str {
    match t {
        Transport::Http { .. } => "http",
        Transport::Stdio { .. } => "stdio",
    }
}

/// `error: cause: cause...` — rmcp wraps the interesting part several levels deep.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}

/// A stdio server's stderr is its log; keep it out of our stdout/stderr and
/// out of info-level logs.
fn forward_stderr(server: String, stderr: tokio::process::ChildStderr) {
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::debug!(server = %server, line = %line, "mcp server stderr");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_client_is_send_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<ToolClient>();
    }

    #[test]
    fn initialize_pins_2025_11_25() {
        assert_eq!(client_config().protocol_version.as_str(), "2025-11-25");
        // The default we are avoiding: if rmcp ever changes it, re-read ADR 0003.
        assert_ne!(ProtocolVersion::default(), PROTOCOL_VERSION);
    }

    #[test]
    fn spec_serde_shape() {
        let spec = ServerSpec::stdio("everything", "node", ["index.js", "stdio"]);
        let v = serde_json::to_value(&spec).unwrap_or_default();
        assert_eq!(v["transport"]["type"], "stdio");
        let back: ServerSpec = serde_json::from_value(serde_json::json!({
            "name": "demo", "transport": {"type": "http", "url": "http://127.0.0.1:1/mcp"}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, ServerSpec::http("demo", "http://127.0.0.1:1/mcp"));
    }
}
