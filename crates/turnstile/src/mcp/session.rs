//! One connection to an MCP server: a transport, one `initialize`, the
//! requests sent on it, and what their failures were on the wire.
//!
//! A [`Session`] never retries and never reconnects; it only reports. The
//! connection machine in `mcp::client` (`tables/connection.ron`) decides
//! what happens next; this module does not import it (what both need, the
//! server's spec and what it says, is in [`super::spec`]).
//!
//! **How an expired session is recognised.** Over streamable HTTP every
//! request after `initialize` carries the `Mcp-Session-Id` header. A server
//! that no longer knows that id (it restarted, or dropped the session after
//! its idle timeout — rmcp's `LocalSessionManager` does after 300 s) answers
//! **HTTP 404**; the MCP spec then requires a new `initialize` without a
//! session id. With `reinit_on_expired_session(false)` (ADR 0004) rmcp
//! surfaces that 404 as `StreamableHttpError::SessionExpired` inside
//! `ServiceError::TransportSend`; [`Failure::Expired`] is exactly that error,
//! found by type in the error's source chain, never by its text.
//!
//! **Which session a call means.** An HTTP session learns its
//! `Mcp-Session-Id` from the `initialize` answer (a thin wrapper around the
//! HTTP client, [`SessionIdRecorder`], sees it go by), and every
//! `tools/call` names it in `_meta["turnstile/session"]` ([`SESSION_META`]),
//! so a tool server that resolves sessions exactly (issue 20) acts on the
//! session the call was sent on and nothing else. A reconnect is a new
//! [`Session`] with a new recorder: its calls name the new id.

use std::collections::{HashMap, HashSet};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::handler::client::ClientHandler;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotification,
    CancelledNotificationParam, ClientCapabilities, ClientConfig, ClientJsonRpcMessage,
    ClientRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
    ErrorData, ExtensionCapabilities, FormElicitationCapability, Implementation, JsonObject,
    PaginatedRequestParams, PingRequest, RequestId, RequestMetaObject, ServerResult,
    UrlElicitationCapability, TASKS_EXTENSION_ID,
};
use rmcp::service::{ClientInitializeError, ClientLifecycleMode, ClientServiceExt};
use rmcp::service::{InboundStreamOrigin, PeerRequestOptions, RequestContext};
use rmcp::transport::common::client_side_sse::{BoxedSseResponse, ExponentialBackoff};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientCacheConfig, Peer, RoleClient, ServiceError};
use serde_json::{Map, Value};
use tokio::io::AsyncBufReadExt;
use tokio_util::sync::CancellationToken;

use super::error::McpError;
use super::input::{Asked, Elicitation, InputRound, RequestState};
use super::spec::{
    Revision, ServerInfo, ServerSpec, ToolInfo, Transport, PROTOCOL_VERSION, STATELESS_VERSION,
};
use super::Hints;

/// The request `_meta` key under which every `tools/call` names the MCP
/// session it means: the `Mcp-Session-Id` of the session it is sent on.
pub const SESSION_META: &str = "turnstile/session";

/// Upper bound on `tools/list` pages, so a server that never stops paginating
/// cannot hang us.
const MAX_LIST_PAGES: usize = 1000;

/// How long closing a session may take before we stop waiting.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// A started service, how its expiries are recognised, and its session id.
type Started = (
    rmcp::service::RunningService<RoleClient, Asker>,
    Option<ExpiryCheck>,
    SessionIdCell,
);

/// Finds rmcp's "session expired (HTTP 404)" in an error's source chain.
type ExpiryCheck = fn(&(dyn std::error::Error + 'static)) -> bool;

/// How one request failed, as seen on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// HTTP 404 for our session id, answering the request's own POST: the
    /// server forgot the session and did not process the request. rmcp
    /// (with `reinit_on_expired_session(false)`) raises
    /// `StreamableHttpError::SessionExpired` only there — a POST that
    /// carried the session id, answered 404 before any body was read. A 404
    /// on the GET that resumes a broken response stream is a plain HTTP
    /// error ([`Failure::Transport`], sent): the request had been delivered.
    Expired(String),
    /// The request was not delivered or its answer was lost. `closed` is
    /// rmcp's "transport closed": for stdio, the child's pipe ended.
    /// `sent`: it may have reached the server (anything but a refused
    /// connection), so what it did there is unknown.
    Transport {
        reason: String,
        closed: bool,
        sent: bool,
    },
    /// A JSON-RPC error object: the server answered.
    Rpc { code: i64, message: String },
    /// No answer in time; the request was abandoned (`notifications/cancelled`).
    Timeout,
    /// An answer, but not a usable one.
    Protocol(String),
}

impl Failure {
    /// The error a caller of `tool` on `server` sees.
    pub(crate) fn into_error(self, server: &str, tool: &str) -> McpError {
        let (server, tool) = (server.to_string(), tool.to_string());
        match self {
            Failure::Expired(reason) => McpError::Transport {
                server,
                tool,
                reason,
            },
            Failure::Transport {
                reason, sent: true, ..
            } => McpError::Unanswered {
                server,
                tool,
                reason,
            },
            Failure::Transport { reason, .. } => McpError::Transport {
                server,
                tool,
                reason,
            },
            Failure::Rpc { code, message } => McpError::Rpc {
                server,
                tool,
                code,
                message,
            },
            Failure::Timeout => McpError::Timeout { server, tool },
            Failure::Protocol(reason) => McpError::Protocol {
                server,
                tool,
                reason,
            },
        }
    }
}

/// What `tools/list` said: the tools, which of them declared
/// `readOnlyHint: true`, and each annotated tool's hints.
#[derive(Debug, Clone, Default)]
pub(crate) struct Listing {
    pub tools: Vec<ToolInfo>,
    pub read_only: HashSet<String>,
    pub hints: HashMap<String, Hints>,
    /// Each tool's declared licence tier (`_meta`, [`TIER_META`]).
    pub tiers: HashMap<String, String>,
}

/// The `_meta` key of a tool in `tools/list` that declares the licence tier
/// its calls need (the judge's `tiers::LICENCE_TIER_META` reads the same).
pub const TIER_META: &str = "turnstile/licence_tier";

/// One open connection (one `initialize`). Dropping it does not close it;
/// call [`Session::close`], or cancel the parent token given to `open`.
pub(crate) struct Session {
    pub generation: u64,
    pub protocol_version: String,
    /// The negotiated revision has no session (2026-07-28): discovered,
    /// not initialised.
    pub stateless: bool,
    /// The server's `serverInfo` from `initialize` (`None`: it sent none).
    pub server_info: Option<ServerInfo>,
    pub opened: Instant,
    peer: Peer<RoleClient>,
    expiry: Option<ExpiryCheck>,
    stop: CancellationToken,
    /// Set by us before we stop the service, so its end is not reported.
    stopping: Arc<AtomicBool>,
    ended: tokio::sync::watch::Receiver<bool>,
    last_used: Mutex<Instant>,
    /// Calls out on this session now: a busy session shows its liveness
    /// by itself and is not pinged by the background watch.
    in_flight: Arc<std::sync::atomic::AtomicUsize>,
    /// Where an `elicitation/create` goes: the open call it arrived in.
    routes: Routes,
    /// How long a call may wait for the user's answer to a question its
    /// server asked inside it (2025-11-25).
    input_wait: Duration,
    /// The `Mcp-Session-Id` the server issued (HTTP; `None` for stdio).
    session_id: SessionIdCell,
}

/// Counts one call out on a session for as long as it lives (a call that
/// times out or is dropped is counted off too).
struct InFlight(Arc<std::sync::atomic::AtomicUsize>);

impl InFlight {
    fn new(n: &Arc<std::sync::atomic::AtomicUsize>) -> Self {
        n.fetch_add(1, Ordering::SeqCst);
        InFlight(n.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("generation", &self.generation)
            .field("protocol_version", &self.protocol_version)
            .finish_non_exhaustive()
    }
}

/// What we announce in `initialize`.
pub(crate) fn client_config() -> ClientConfig {
    // Elicitation, both modes, is the one server request a user can
    // answer here (issue 22 §3): it becomes an interrupt. No sampling, no
    // roots. Tasks (§4): a long call may come back as a task, followed by
    // `tasks/get` (`mcp::task`).
    let mut capabilities = ClientCapabilities::default();
    capabilities.elicitation = Some(
        ElicitationCapability::new()
            .with_form(FormElicitationCapability::new().with_schema_validation(true))
            .with_url(UrlElicitationCapability::new()),
    );
    let mut extensions = ExtensionCapabilities::new();
    extensions.insert(TASKS_EXTENSION_ID.to_string(), JsonObject::new());
    capabilities.extensions = Some(extensions);
    ClientConfig::new(
        capabilities,
        Implementation::new("turnstile", env!("CARGO_PKG_VERSION")),
    )
    // ADR 0003: never rmcp's default (`LATEST`, 2026-07-28).
    .with_protocol_version(PROTOCOL_VERSION)
}

/// How a connection starts for `revision` (ADR 0003): `initialize` for
/// 2025-11-25; `server/discover` for 2026-07-28 (a legacy server is a
/// failed connect); `auto` discovers and falls back to `initialize` with
/// 2025-11-25 when the server answers discovery as a legacy one.
pub(crate) fn lifecycle(revision: Revision) -> ClientLifecycleMode {
    match revision {
        Revision::Sessions => ClientLifecycleMode::Initialize,
        Revision::Stateless => ClientLifecycleMode::Discover {
            preferred_versions: vec![STATELESS_VERSION],
        },
        Revision::Auto => ClientLifecycleMode::Auto {
            preferred_versions: vec![STATELESS_VERSION],
            legacy_version: Some(PROTOCOL_VERSION),
        },
    }
}

/// Checks a spec before anything is opened: a bad one never connects, so it
/// is a configuration error, not a server that is down.
pub(crate) fn validate(spec: &ServerSpec) -> Result<(), McpError> {
    let invalid = |reason: String| McpError::InvalidSpec {
        server: spec.name.clone(),
        reason,
    };
    match &spec.transport {
        Transport::Http { url } if !(url.starts_with("http://") || url.starts_with("https://")) => {
            // Never the URL as written: it may carry a token.
            Err(invalid(format!(
                "not an http(s) URL: {}",
                spec.transport.shown()
            )))
        }
        Transport::Stdio { command, .. } if command.trim().is_empty() => {
            Err(invalid("empty command".to_string()))
        }
        _ => Ok(()),
    }
}

/// How often a broken SSE stream is resumed (`GET` with `Last-Event-ID`;
/// resuming re-sends nothing). rmcp's default retries for ever, so a call
/// whose server died would wait out its whole timeout; we give up after two
/// attempts (each waits at least the server's `retry:` hint), and the call
/// fails as a transport error the connection table reconnects from.
fn stream_resume_policy() -> ExponentialBackoff {
    let mut policy = ExponentialBackoff::default();
    policy.max_times = Some(2);
    policy.base_duration = Duration::from_millis(500);
    policy.max_delay = Some(Duration::from_secs(2));
    policy
}

fn expiry_check<C: StreamableHttpClient>(_: &StreamableHttpClientTransport<C>) -> ExpiryCheck {
    is_session_expired::<C::Error>
}

fn is_session_expired<E: std::error::Error + Send + Sync + 'static>(
    e: &(dyn std::error::Error + 'static),
) -> bool {
    matches!(
        e.downcast_ref::<StreamableHttpError<E>>(),
        Some(StreamableHttpError::SessionExpired)
    )
}

impl Session {
    /// Opens the transport and runs `initialize` (ADR 0003's version), all
    /// within `timeout`. `on_end` runs once if the connection ends by itself
    /// (the stdio child exited, the HTTP transport gave up) — not when it is
    /// closed by us or `parent` is cancelled.
    pub(crate) async fn open(
        spec: &ServerSpec,
        generation: u64,
        timeout: Duration,
        input_wait: Duration,
        parent: &CancellationToken,
        on_end: impl FnOnce(String) + Send + 'static,
    ) -> Result<Session, McpError> {
        validate(spec)?;
        let server = spec.name.clone();
        let connect_err = |reason: String| McpError::Connect {
            server: server.clone(),
            reason,
        };
        let handshake = async {
            let first = Self::start(spec, lifecycle(spec.protocol), input_wait).await?;
            match first {
                // rmcp's `auto` falls back only when discovery is answered
                // with a JSON-RPC error; a server that answers it with the
                // (older) revisions it supports is a legacy server as well.
                Err(ClientInitializeError::NoCompatibleProtocolVersion { .. })
                    if spec.protocol == Revision::Auto =>
                {
                    tracing::info!(server = %spec.name, "mcp server offers no 2026-07-28: falling back to initialize (2025-11-25)");
                    Self::start(spec, ClientLifecycleMode::Initialize, input_wait).await?
                }
                other => other,
            }
            .map_err(|e| connect_err(with_challenge(&e)))
        };
        let (running, expiry, session_id) = tokio::select! {
            result = tokio::time::timeout(timeout, handshake) => match result {
                Ok(result) => result?,
                Err(_) => {
                    return Err(connect_err(format!("no initialize response within {timeout:?}")))
                }
            },
            _ = parent.cancelled() => return Err(connect_err("shut down while connecting".into())),
        };
        let peer = running.peer().clone();
        let routes = running.service().routes.clone();
        // A failing re-fetch must fail, not be answered from a stale cache.
        peer.set_response_cache_config(ClientCacheConfig::disabled())
            .await;
        let info = peer.peer_info();
        let protocol_version = info
            .as_ref()
            .map(|i| i.protocol_version.to_string())
            .unwrap_or_default();
        let stateless = info
            .as_ref()
            .is_some_and(|i| !i.protocol_version.has_initialize());
        let server_info = info
            .as_ref()
            .and_then(|i| i.server_info.as_ref())
            .map(|s| ServerInfo {
                name: s.name.clone(),
                version: s.version.clone(),
            });
        let (server_name, server_version) = server_info
            .as_ref()
            .map(|s| (s.name.clone(), s.version.clone()))
            .unwrap_or_default();
        tracing::info!(
            server = %spec.name,
            transport = transport_kind(&spec.transport),
            generation,
            protocol_version = %protocol_version,
            server_name = %server_name,
            server_version = %server_version,
            "mcp server connected"
        );

        // The service runs in its own task; this task owns it, stops it when
        // asked, and reports an end nobody asked for.
        let stop = parent.child_token();
        let stopping = Arc::new(AtomicBool::new(false));
        let (ended_tx, ended) = tokio::sync::watch::channel(false);
        let service_stop = running.cancellation_token();
        tokio::spawn({
            let stop = stop.clone();
            let stopping = stopping.clone();
            let server = spec.name.clone();
            async move {
                let waiting = running.waiting();
                tokio::pin!(waiting);
                let reason = tokio::select! {
                    reason = &mut waiting => Some(reason),
                    _ = stop.cancelled() => {
                        stopping.store(true, Ordering::SeqCst);
                        service_stop.cancel();
                        if tokio::time::timeout(CLOSE_TIMEOUT, &mut waiting).await.is_err() {
                            tracing::warn!(server = %server, generation, "mcp session close timed out");
                        }
                        None
                    }
                };
                let _ = ended_tx.send(true);
                if let Some(reason) = reason {
                    if !stopping.load(Ordering::SeqCst) {
                        let reason = match reason {
                            Ok(r) => format!("connection ended ({r:?})"),
                            Err(e) => format!("connection task failed: {e}"),
                        };
                        on_end(reason);
                    }
                }
            }
        });
        Ok(Session {
            generation,
            protocol_version,
            stateless,
            server_info,
            opened: Instant::now(),
            peer,
            expiry,
            stop,
            stopping,
            ended,
            last_used: Mutex::new(Instant::now()),
            in_flight: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
            routes,
            input_wait,
            session_id,
        })
    }

    /// A new transport and its lifecycle's first exchange: `Err` outside
    /// is a transport that could not be made (a child that would not
    /// spawn), inside what the handshake said.
    async fn start(
        spec: &ServerSpec,
        mode: ClientLifecycleMode,
        input_wait: Duration,
    ) -> Result<Result<Started, ClientInitializeError>, McpError> {
        match &spec.transport {
            Transport::Http { url } => {
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    // ADR 0004: a 404 "session expired" must fail the
                    // request; the connection table decides what follows.
                    .reinit_on_expired_session(false);
                if let Some(token) = &spec.bearer {
                    config = config.auth_header(token.expose());
                }
                config.retry_config = Arc::new(stream_resume_policy());
                let recorder = SessionIdRecorder::new();
                let session_id = recorder.cell();
                let transport = StreamableHttpClientTransport::with_client(recorder, config);
                let check = expiry_check(&transport);
                Ok(Asker::new(input_wait, false)
                    .serve_with_lifecycle(transport, mode)
                    .await
                    .map(|running| (running, Some(check), session_id)))
            }
            Transport::Stdio { command, args } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args);
                let (process, stderr) = TokioChildProcess::builder(cmd)
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|e| McpError::Connect {
                        server: spec.name.clone(),
                        reason: format!("cannot spawn '{command}': {e}"),
                    })?;
                if let Some(stderr) = stderr {
                    forward_stderr(spec.name.clone(), stderr);
                }
                Ok(Asker::new(input_wait, true)
                    .serve_with_lifecycle(process, mode)
                    .await
                    .map(|running| (running, None, SessionIdCell::default())))
            }
        }
    }

    /// The `Mcp-Session-Id` the server issued this session (`None`: stdio,
    /// or a server that issued none).
    pub(crate) fn session_id(&self) -> Option<String> {
        self.session_id.get().map(|s| s.to_string())
    }

    /// Time since the last request on this session was sent or answered.
    pub(crate) fn idle(&self) -> Duration {
        self.last_used
            .lock()
            .map(|t| t.elapsed())
            .unwrap_or_default()
    }

    /// A call is out on this session.
    pub(crate) fn busy(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) > 0
    }

    fn touch(&self) {
        if let Ok(mut t) = self.last_used.lock() {
            *t = Instant::now();
        }
    }

    /// Stops the connection (HTTP: `DELETE` the session; stdio: close stdin,
    /// then terminate the child) and waits for it, up to 5 s. Its end is not
    /// reported.
    pub(crate) async fn close(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.stop.cancel();
        let mut ended = self.ended.clone();
        let waited = tokio::time::timeout(CLOSE_TIMEOUT + Duration::from_secs(1), async {
            while !*ended.borrow_and_update() {
                if ended.changed().await.is_err() {
                    break;
                }
            }
        })
        .await;
        match waited {
            Ok(()) => tracing::debug!(generation = self.generation, "mcp session closed"),
            Err(_) => tracing::warn!(generation = self.generation, "mcp session close timed out"),
        }
    }

    /// `tools/call`, once, within `timeout`: its result, a 2026-07-28
    /// `InputRequiredResult`, or (2025-11-25) an `elicitation/create` that
    /// arrived inside it, with the call left open to wait for the answer
    /// ([`Reply::Nested`]). `round` carries the answers of a 2026-07-28
    /// retry. A call that times out is abandoned with
    /// `notifications/cancelled`.
    pub(crate) async fn call(
        &self,
        tool: &str,
        args: Map<String, Value>,
        round: Option<InputRound>,
        timeout: Duration,
    ) -> Result<Reply, Failure> {
        let mut params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
        let mut meta = RequestMetaObject::new();
        if let Some(id) = self.session_id.get() {
            // The session this call means: the one it is sent on (issue 20).
            meta.insert(SESSION_META.to_string(), Value::String(id.to_string()));
        }
        // The turn's trace, for a tool server's own spans to join.
        for (key, value) in super::trace_context::current() {
            meta.insert(key, Value::String(value));
        }
        if !meta.is_empty() {
            params.meta = Some(meta);
        }
        if let Some(round) = round {
            params.input_responses = Some(round.responses);
            params.request_state = round.request_state.map(RequestState::into_inner);
        }
        if *self.ended.borrow() {
            // The connection ended before this call: it never left.
            return Err(Failure::Transport {
                reason: "the connection had ended; the call was not sent".to_string(),
                closed: true,
                sent: false,
            });
        }
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let out = InFlight::new(&self.in_flight);
        self.touch();
        // The request's own deadline leaves room for a user who is asked
        // something mid-call (2025-11-25); `wait` applies `timeout` to the
        // server's part.
        let options = PeerRequestOptions::with_timeout(timeout + self.input_wait);
        let handle = match self.peer.send_cancellable_request(request, options).await {
            Ok(h) => h,
            // The service took nothing: the request never left.
            Err(e) => {
                return Err(match classify(self.expiry, e) {
                    Failure::Transport { reason, closed, .. } => Failure::Transport {
                        reason,
                        closed,
                        sent: false,
                    },
                    other => other,
                })
            }
        };
        let id = handle.id.clone();
        let (asks_tx, asks) = tokio::sync::mpsc::channel(4);
        self.routes.insert(id.clone(), asks_tx);
        let (result_tx, result) = tokio::sync::oneshot::channel();
        let stop = CancellationToken::new();
        tokio::spawn({
            let (routes, expiry, stop) = (self.routes.clone(), self.expiry, stop.clone());
            let id = id.clone();
            async move {
                let _out = out;
                let answer = tokio::select! {
                    r = handle.await_response() => r,
                    _ = stop.cancelled() => return routes.remove(&id),
                };
                routes.remove(&id);
                let _ = result_tx.send(answer.map_err(|e| classify(expiry, e)));
            }
        });
        let open = OpenCall {
            id,
            result,
            asks,
            stop,
            peer: self.peer.clone(),
            generation: self.generation,
        };
        let reply = open.wait(timeout).await;
        self.touch();
        reply
    }

    /// `ping`: is the session still there? Used before a call on a session
    /// that has been idle, so an expiry costs a ping, not the call.
    pub(crate) async fn ping(&self, timeout: Duration) -> Result<(), Failure> {
        self.touch();
        let request = ClientRequest::PingRequest(PingRequest::default());
        let outcome = tokio::time::timeout(timeout, self.peer.send_request(request)).await;
        self.touch();
        match outcome {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(classify(self.expiry, e)),
            Err(_) => Err(Failure::Timeout),
        }
    }

    /// `tasks/get`: what the task `id` says now.
    pub(crate) async fn get_task(
        &self,
        id: &str,
        timeout: Duration,
    ) -> Result<rmcp::model::GetTaskResult, Failure> {
        self.touch();
        let params = rmcp::model::GetTaskParams::new(id);
        let outcome = tokio::time::timeout(timeout, self.peer.get_task(params)).await;
        self.touch();
        match outcome {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(classify(self.expiry, e)),
            Err(_) => Err(Failure::Timeout),
        }
    }

    /// `tasks/cancel`: asks the server to stop the task `id` (cooperative).
    pub(crate) async fn cancel_task(&self, id: &str, timeout: Duration) -> Result<(), Failure> {
        self.touch();
        let params = rmcp::model::CancelTaskParams::new(id);
        let outcome = tokio::time::timeout(timeout, self.peer.cancel_task(params)).await;
        self.touch();
        match outcome {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(classify(self.expiry, e)),
            Err(_) => Err(Failure::Timeout),
        }
    }

    /// All tools, following `nextCursor` until the server stops sending one;
    /// each page within `timeout`.
    pub(crate) async fn list_tools(&self, timeout: Duration) -> Result<Listing, Failure> {
        let mut listing = Listing::default();
        let mut cursor: Option<String> = None;
        let mut seen_cursors = HashSet::new();
        for page in 0..MAX_LIST_PAGES {
            let params = cursor
                .take()
                .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            self.touch();
            let outcome = tokio::time::timeout(timeout, self.peer.list_tools(params)).await;
            self.touch();
            let result = match outcome {
                Ok(Ok(result)) => result,
                Ok(Err(e)) => return Err(classify(self.expiry, e)),
                Err(_) => return Err(Failure::Timeout),
            };
            for t in result.tools {
                let name = t.name.into_owned();
                if let Some(a) = t.annotations.as_ref() {
                    if a.read_only_hint == Some(true) {
                        listing.read_only.insert(name.clone());
                    }
                    let hints = Hints {
                        read_only: a.read_only_hint,
                        destructive: a.destructive_hint,
                    };
                    listing.hints.insert(name.clone(), hints);
                }
                let declared = (t.meta.as_ref())
                    .and_then(|m| m.0.get(TIER_META))
                    .and_then(Value::as_str)
                    .map(str::trim)
                    .filter(|s| !s.is_empty() && s.len() <= 64);
                if let Some(tier) = declared {
                    listing.tiers.insert(name.clone(), tier.to_string());
                }
                listing.tools.push(ToolInfo {
                    name,
                    description: t.description.map(|d| d.into_owned()).unwrap_or_default(),
                    input_schema: std::sync::Arc::new(Value::Object((*t.input_schema).clone())),
                });
            }
            match result.next_cursor {
                // An empty cursor is treated as "no more pages": sending "" back
                // would make some servers restart from the first page.
                None => {
                    tracing::debug!(
                        pages = page + 1,
                        tools = listing.tools.len(),
                        "tools listed"
                    );
                    return Ok(listing);
                }
                Some(next) if next.is_empty() => return Ok(listing),
                Some(next) => {
                    if !seen_cursors.insert(next.clone()) {
                        return Err(Failure::Protocol(
                            "server repeated a tools/list cursor".into(),
                        ));
                    }
                    cursor = Some(next);
                }
            }
        }
        Err(Failure::Protocol(format!(
            "tools/list did not end within {MAX_LIST_PAGES} pages"
        )))
    }
}

/// A failed request as seen on the wire: an expiry (found by type with
/// `expiry`), a JSON-RPC error, a timeout, or a transport failure that may
/// or may not have left.
fn classify(expiry: Option<ExpiryCheck>, e: ServiceError) -> Failure {
    if let Some(check) = expiry {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        while let Some(err) = source {
            if check(err) {
                return Failure::Expired(
                    "session expired (HTTP 404 for our session id)".to_string(),
                );
            }
            source = err.source();
        }
    }
    match e {
        ServiceError::McpError(data) => Failure::Rpc {
            code: i64::from(data.code.0),
            message: data.message.into_owned(),
        },
        ServiceError::Timeout { .. } => Failure::Timeout,
        ServiceError::UnexpectedResponse => Failure::Protocol(
            "unexpected response (task, input_required, or a result of the wrong kind)".to_string(),
        ),
        ServiceError::TransportClosed => Failure::Transport {
            reason: "transport closed".to_string(),
            closed: true,
            sent: true,
        },
        other => Failure::Transport {
            sent: !refused(&other),
            reason: error_chain(&other),
            closed: false,
        },
    }
}

/// What a `tools/call` came back with.
#[derive(Debug)]
pub(crate) enum Reply {
    /// The tool's result.
    Result(CallToolResult),
    /// 2026-07-28: the server needs input first; the call is over.
    Input(rmcp::model::InputRequiredResult),
    /// 2025-11-25: the server asked inside the open call, which waits.
    Nested(Nested),
    /// The server made the call a task (`mcp::task`); the call is over.
    Task(rmcp::model::Task),
}

/// A `tools/call` still out (2025-11-25 may ask the user mid-call): its
/// result to come, and the `elicitation/create`s that arrive in it.
pub(crate) struct OpenCall {
    id: RequestId,
    result: tokio::sync::oneshot::Receiver<Result<ServerResult, Failure>>,
    asks: tokio::sync::mpsc::Receiver<Elicitation>,
    /// Abandons the call (its task stops waiting).
    stop: CancellationToken,
    peer: Peer<RoleClient>,
    pub(crate) generation: u64,
}

/// A call dropped while it is still out — its turn ended (the client left,
/// the lease was lost), or its question was let go — is abandoned: its task
/// stops waiting and the server is told (`notifications/cancelled`), as a
/// dropped `call_tool` future did.
impl Drop for OpenCall {
    fn drop(&mut self) {
        let out = matches!(
            self.result.try_recv(),
            Err(tokio::sync::oneshot::error::TryRecvError::Empty)
        );
        if !out || self.stop.is_cancelled() {
            return;
        }
        self.stop.cancel();
        let (peer, id) = (self.peer.clone(), self.id.clone());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let notification = CancelledNotification::new(CancelledNotificationParam::new(
                    Some(id),
                    Some("abandoned".to_string()),
                ));
                let _ = peer.send_notification(notification.into()).await;
            });
        }
    }
}

impl std::fmt::Debug for OpenCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenCall")
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl OpenCall {
    /// Waits up to `timeout` for the server: its answer, or a question it
    /// asks inside the call. A call that does neither in time is abandoned
    /// with `notifications/cancelled`.
    pub(crate) async fn wait(mut self, timeout: Duration) -> Result<Reply, Failure> {
        tokio::select! {
            answer = &mut self.result => match answer {
                Ok(Ok(ServerResult::CallToolResult(r))) => Ok(Reply::Result(r)),
                // A result without `content` decodes as an empty one.
                Ok(Ok(ServerResult::EmptyResult(_))) => Ok(Reply::Result(CallToolResult::default())),
                Ok(Ok(ServerResult::InputRequiredResult(r))) => Ok(Reply::Input(r)),
                Ok(Ok(ServerResult::CreateTaskResult(r))) => Ok(Reply::Task(r.task)),
                Ok(Ok(_)) => Err(Failure::Protocol("a result of the wrong kind".into())),
                Ok(Err(f)) => Err(f),
                Err(_) => Err(Failure::Transport {
                    reason: "the connection ended before the call was answered".into(),
                    closed: true,
                    sent: true,
                }),
            },
            Some(asked) = self.asks.recv() => Ok(Reply::Nested(Nested {
                asked: Asked::of_elicitation(&asked.params),
                reply: asked.reply,
                open: self,
            })),
            _ = tokio::time::sleep(timeout) => {
                self.abandon("request timeout").await;
                Err(Failure::Timeout)
            }
        }
    }

    /// Stops waiting and tells the server (`notifications/cancelled`).
    pub(crate) async fn abandon(&self, reason: &str) {
        self.stop.cancel();
        let notification = CancelledNotification::new(CancelledNotificationParam::new(
            Some(self.id.clone()),
            Some(reason.to_string()),
        ));
        let _ = self.peer.send_notification(notification.into()).await;
    }
}

/// A 2025-11-25 call that is open and waits for the user's answer to the
/// server's `elicitation/create`. Dropping it answers `cancel`.
pub struct Nested {
    /// What the server asks.
    pub asked: Asked,
    pub(crate) reply: tokio::sync::oneshot::Sender<rmcp::model::ElicitResult>,
    pub(crate) open: OpenCall,
}

impl Nested {
    /// Whether the server still waits for the answer.
    pub fn waiting(&self) -> bool {
        !self.reply.is_closed()
    }
}

impl std::fmt::Debug for Nested {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nested").finish_non_exhaustive()
    }
}

/// The calls open on one connection, by request id: where an
/// `elicitation/create` that arrives in one goes.
#[derive(Clone, Default)]
pub(crate) struct Routes {
    open: Arc<Mutex<HashMap<RequestId, tokio::sync::mpsc::Sender<Elicitation>>>>,
    /// One stream carries everything (stdio): a question with no origin
    /// belongs to the one call open, if there is exactly one.
    stdio: bool,
}

impl Routes {
    fn insert(&self, id: RequestId, tx: tokio::sync::mpsc::Sender<Elicitation>) {
        self.lock().insert(id, tx);
    }

    fn remove(&self, id: &RequestId) {
        self.lock().remove(id);
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<RequestId, tokio::sync::mpsc::Sender<Elicitation>>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The open call an elicitation belongs to: the one whose POST stream
    /// carried it (HTTP), or the only call open (stdio, one stream). A
    /// question on HTTP's standalone stream belongs to no call we can name:
    /// never to whichever call happens to be open.
    fn route(
        &self,
        origin: Option<&InboundStreamOrigin>,
    ) -> Option<tokio::sync::mpsc::Sender<Elicitation>> {
        let routes = self.lock();
        match origin {
            Some(InboundStreamOrigin::OutboundRequest(id)) => routes.get(id).cloned(),
            _ if self.stdio && routes.len() == 1 => routes.values().next().cloned(),
            _ => None,
        }
    }
}

/// turnstile's MCP client handler: what it announces, and the
/// `elicitation/create`s it routes to the call they arrived in. Nothing is
/// answered here: the turn shows the question and the user answers
/// (`mcp::input`). A question that cannot be routed, or is not answered
/// within the input wait, is answered `cancel`, and says so in the log.
pub(crate) struct Asker {
    config: ClientConfig,
    routes: Routes,
    wait: Duration,
}

impl Asker {
    fn new(wait: Duration, stdio: bool) -> Self {
        Asker {
            config: client_config(),
            routes: Routes {
                stdio,
                ..Routes::default()
            },
            wait,
        }
    }
}

impl ClientHandler for Asker {
    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let origin = context.extensions.get::<InboundStreamOrigin>();
        let Some(route) = self.routes.route(origin) else {
            tracing::warn!(
                "mcp elicitation/create outside any open call we can tell: answered cancel"
            );
            return Ok(ElicitResult::new(ElicitationAction::Cancel));
        };
        let (reply, answer) = tokio::sync::oneshot::channel();
        let asked = async {
            route.send(Elicitation { params, reply }).await.ok()?;
            tokio::select! {
                answer = answer => answer.ok(),
                // The server withdrew its own question.
                _ = context.ct.cancelled() => None,
            }
        };
        match tokio::time::timeout(self.wait, asked).await {
            Ok(Some(result)) => Ok(result),
            // Nobody answered in time, or the question was dropped (an
            // expiry, a new message, a restart): the call is cancelled.
            _ => {
                tracing::info!("mcp elicitation not answered: cancel sent to the server");
                Ok(ElicitResult::new(ElicitationAction::Cancel))
            }
        }
    }
}

/// Whether the request never left: the HTTP connection was refused (or
/// could not be opened), found by type in the error's source chain.
fn refused(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        // rmcp wraps the HTTP client's error without naming it as source.
        let wrapped = match err.downcast_ref::<HttpError>() {
            Some(StreamableHttpError::Client(r)) => Some(r),
            _ => err.downcast_ref::<reqwest::Error>(),
        };
        if wrapped.is_some_and(reqwest::Error::is_connect) {
            return true;
        }
        source = err.source();
    }
    false
}

/// Where a [`SessionIdRecorder`] keeps the session id it saw.
#[derive(Clone, Debug, Default)]
pub(crate) struct SessionIdCell(Arc<Mutex<Option<Arc<str>>>>);

impl SessionIdCell {
    pub(crate) fn get(&self) -> Option<Arc<str>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set(&self, id: Arc<str>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(id);
    }
}

/// rmcp's streamable-HTTP client (reqwest, built as rmcp builds its
/// default one), plus a note of the `Mcp-Session-Id` the server issued:
/// rmcp keeps it inside its transport worker and offers no way to read it,
/// and a `tools/call` has to name it (issue 20). Everything is passed
/// through unchanged.
#[derive(Clone, Debug)]
pub(crate) struct SessionIdRecorder {
    http: reqwest::Client,
    seen: SessionIdCell,
}

impl SessionIdRecorder {
    pub(crate) fn new() -> Self {
        SessionIdRecorder {
            http: default_http_client(),
            seen: SessionIdCell::default(),
        }
    }

    pub(crate) fn cell(&self) -> SessionIdCell {
        self.seen.clone()
    }

    fn note(&self, sent: Option<&Arc<str>>, response: &StreamableHttpPostResponse) {
        let issued = match response {
            StreamableHttpPostResponse::Json(_, Some(id))
            | StreamableHttpPostResponse::Sse(_, Some(id)) => Some(Arc::from(id.as_str())),
            _ => None,
        };
        // The id the server issued (the `initialize` answer); else the one
        // the transport sent, which is the session in use.
        if let Some(id) = issued.or_else(|| sent.cloned()) {
            if self.seen.get().as_deref() != Some(&*id) {
                self.seen.set(id);
            }
        }
    }
}

/// rmcp's default HTTP client for its streamable-HTTP transport
/// (`StreamableHttpClientTransport::from_config`): no idle connection
/// pooling, and only same-origin, body-preserving redirects (307, 308),
/// at most 10.
fn default_http_client() -> reqwest::Client {
    const MAX_REDIRECTS: usize = 10;
    let policy = reqwest::redirect::Policy::custom(|attempt| {
        let preserves_body = matches!(
            attempt.status(),
            reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
        );
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|original| original.origin() == attempt.url().origin());
        if !preserves_body || !same_origin {
            attempt.stop()
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("exceeded {MAX_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    });
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .redirect(policy)
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}

type HttpError = StreamableHttpError<reqwest::Error>;
type Headers = HashMap<reqwest::header::HeaderName, reqwest::header::HeaderValue>;

impl StreamableHttpClient for SessionIdRecorder {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let response = self
            .http
            .post_message(
                uri,
                message,
                session_id.clone(),
                auth_header,
                custom_headers,
            )
            .await?;
        self.note(session_id.as_ref(), &response);
        Ok(response)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let response = self
            .http
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id.clone(),
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await?;
        self.note(session_id.as_ref(), &response);
        Ok(response)
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let response = self
            .http
            .post_message_with_response_limits(
                uri,
                message,
                session_id.clone(),
                auth_header,
                custom_headers,
                limits,
            )
            .await?;
        self.note(session_id.as_ref(), &response);
        Ok(response)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> Result<(), HttpError> {
        self.http
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> Result<BoxedSseResponse, HttpError> {
        self.http
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: Headers,
        max_sse_event_size: usize,
    ) -> Result<BoxedSseResponse, HttpError> {
        self.http
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

pub(crate) fn transport_kind(t: &Transport) -> &'static str {
    match t {
        Transport::Http { .. } => "http",
        Transport::Stdio { .. } => "stdio",
    }
}

/// `error: cause: cause...` — rmcp wraps the interesting part several levels deep.
/// [`error_chain`] of a failed handshake, with the `WWW-Authenticate`
/// challenge of the 401 or 403 it met, worded as the transport words it
/// elsewhere (`oauth::challenge_in` reads it back for the step-up).
fn with_challenge(e: &ClientInitializeError) -> String {
    let mut out = error_chain(e);
    if let Some(header) = e.auth_challenge() {
        if !out.contains(header) {
            let what = match e.is_authorization_required() {
                true => "authorization required",
                false => "insufficient scope",
            };
            out.push_str(&format!(": {what}: {header}"));
        }
    }
    out
}

pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
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
    // The HTTP client quotes the URL it sent, query (a token) included.
    super::url::scrub_urls(&out)
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
    fn initialize_pins_2025_11_25() {
        assert_eq!(client_config().protocol_version.as_str(), "2025-11-25");
        // The default we are avoiding: if rmcp ever changes it, re-read ADR 0003.
        assert_ne!(rmcp::model::ProtocolVersion::default(), PROTOCOL_VERSION);
    }

    #[test]
    fn the_recorder_keeps_the_session_id_the_transport_uses() {
        let recorder = SessionIdRecorder::new();
        let cell = recorder.cell();
        recorder.note(None, &StreamableHttpPostResponse::Accepted);
        assert_eq!(cell.get(), None);
        let sent: Arc<str> = Arc::from("session-1");
        recorder.note(Some(&sent), &StreamableHttpPostResponse::Accepted);
        assert_eq!(cell.get().as_deref(), Some("session-1"));
        assert_eq!(SESSION_META, "turnstile/session");
    }

    #[test]
    fn bad_specs_are_refused_before_connecting() {
        let bad = ServerSpec::http("x", "ftp://example.com/mcp");
        assert_eq!(validate(&bad).map_err(|e| e.kind()), Err("invalid_spec"));
        let bad = ServerSpec::stdio("x", " ", Vec::<String>::new());
        assert_eq!(validate(&bad).map_err(|e| e.kind()), Err("invalid_spec"));
    }
}
