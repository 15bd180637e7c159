//! The demo server: rmcp's streamable-HTTP service mounted at `/mcp` on an
//! axum router, bound to a loopback address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::SessionManager as _;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::actions::{ActionCounts, ActionView};
use super::asks::{Notification, PERMIT_PATH};
use super::auth::{DemoUser, VerifierFault, VERIFIER_PATH};
use super::tools::{DemoOptions, DemoState, DemoTools};

/// The browser origins the demo tool server accepts in an `Origin` header:
/// pages served from loopback, on any port. (rmcp leaves `Origin`
/// unchecked unless given a list; its `Host` allow-list is loopback by
/// default.) A request without `Origin` — every non-browser client — passes.
pub const LOOPBACK_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "http://127.0.0.1:*",
    "http://[::1]:*",
    "https://localhost:*",
    "https://127.0.0.1:*",
    "https://[::1]:*",
];

/// A wildcard bind is reachable on loopback; advertise that.
fn advertised(local: SocketAddr) -> SocketAddr {
    match local.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), local.port())
        }
        IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), local.port())
        }
        _ => local,
    }
}

#[derive(serde::Deserialize)]
struct TokenQuery {
    token: Option<String>,
}

/// `GET /api/lms/exports/{job_id}/download?token=…`: a page that polls
/// while the job is BUILDING, then the ZIP; 403 or 410 with no detail.
async fn download(
    axum::extract::State(state): axum::extract::State<Arc<DemoState>>,
    axum::extract::Path(job_id): axum::extract::Path<String>,
    axum::extract::Query(q): axum::extract::Query<TokenQuery>,
) -> axum::response::Response {
    use crate::exports::Download;
    use axum::http::{header, StatusCode};
    use axum::response::IntoResponse;
    let no_store = (header::CACHE_CONTROL, "no-store");
    match state.exports().download(&job_id, q.token.as_deref()) {
        Download::Building => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/html; charset=utf-8"), no_store],
            "<!doctype html><meta charset=utf-8><meta http-equiv=refresh content=1>\
             <title>Preparing your lecture files</title>\
             <p>Your lecture files are being prepared (BUILDING). This page checks again every second.</p>",
        )
            .into_response(),
        Download::Ready(zip) => (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, "application/zip"),
                (
                    header::CONTENT_DISPOSITION,
                    "attachment; filename=\"lecture-files.zip\"",
                ),
                no_store,
            ],
            zip,
        )
            .into_response(),
        Download::Forbidden => StatusCode::FORBIDDEN.into_response(),
        Download::Gone => StatusCode::GONE.into_response(),
    }
}

/// `GET /permits/{permit}`: the permit portal's page ([`crate::asks`]),
/// counted so tests can prove a client never fetched it on its own.
async fn permit_page(
    axum::extract::State(state): axum::extract::State<Arc<DemoState>>,
    axum::extract::Path(permit): axum::extract::Path<String>,
) -> axum::response::Response {
    use axum::http::{header, StatusCode};
    use axum::response::IntoResponse;
    state.asks().visit_permit();
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        crate::asks::permit_page(&permit),
    )
        .into_response()
}

/// `GET /api/auth/me`: the bearer verifier ([`crate::auth`]).
async fn me(
    axum::extract::State(state): axum::extract::State<Arc<DemoState>>,
    headers: axum::http::HeaderMap,
) -> axum::response::Response {
    super::auth::respond(state.identities(), &headers).await
}

/// A running demo MCP server.
pub struct DemoServer {
    /// Full MCP endpoint URL with the real port, e.g. `http://127.0.0.1:41234/mcp`.
    pub url: String,
    addr: SocketAddr,
    state: Arc<DemoState>,
    sessions: Arc<LocalSessionManager>,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for DemoServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DemoServer")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl DemoServer {
    /// Bind `addr` (port 0 picks a free port) and serve until [`shutdown`](Self::shutdown).
    ///
    /// DNS-rebinding protection, as the MCP spec asks of a local server:
    /// only loopback `Host` headers are accepted (rmcp's default allow-list),
    /// and a request with an `Origin` header is accepted only from a loopback
    /// origin ([`LOOPBACK_ORIGINS`]); anything else gets HTTP 403. Bind a
    /// loopback address.
    pub async fn start(addr: SocketAddr, opts: DemoOptions) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding demo MCP server to {addr}"))?;
        let local = listener.local_addr().context("reading bound address")?;
        let ttl = opts.session_ttl;
        let state = Arc::new(DemoState::new(opts));
        let mut manager = LocalSessionManager::default();
        if let Some(ttl) = ttl {
            // rmcp ends a session's worker after this long without traffic
            // (default `SessionConfig::DEFAULT_KEEP_ALIVE`, 300 s).
            manager.session_config.keep_alive = Some(ttl);
        }
        let sessions = Arc::new(manager);
        state.set_sessions(sessions.clone());
        let cancel = CancellationToken::new();
        let service = StreamableHttpService::new(
            {
                let state = state.clone();
                move || Ok(DemoTools::new(state.clone()))
            },
            sessions.clone(),
            StreamableHttpServerConfig::default()
                .with_allowed_origins(LOOPBACK_ORIGINS)
                .with_sse_keep_alive(None)
                .with_cancellation_token(cancel.child_token()),
        );
        let url_addr = advertised(local);
        state.exports().set_origin(&format!("http://{url_addr}"));
        state.asks().set_origin(&format!("http://{url_addr}"));
        let router = axum::Router::new()
            .nest_service("/mcp", service)
            .route(
                "/api/lms/exports/{job_id}/download",
                axum::routing::get(download),
            )
            .route(VERIFIER_PATH, axum::routing::get(me))
            .route(PERMIT_PATH, axum::routing::get(permit_page))
            .with_state(state.clone());
        let task = tokio::spawn({
            let cancel = cancel.clone();
            async move {
                let served = axum::serve(listener, router)
                    .with_graceful_shutdown(cancel.cancelled_owned())
                    .await;
                if let Err(e) = served {
                    tracing::warn!(error = %e, "demo MCP server stopped with an error");
                }
            }
        });
        let url = format!("http://{url_addr}/mcp");
        tracing::info!(%url, faults = ?state_faults(&state), verifier_fault = %state.identities().fault(), session_ttl = ?session_ttl(&sessions), "demo MCP server listening");
        Ok(DemoServer {
            url,
            addr: local,
            state,
            sessions,
            cancel,
            task,
        })
    }

    /// The lecture-file exports (for tests: confirms and downloads).
    pub fn exports(&self) -> &Arc<crate::exports::ExportStore> {
        self.state.exports()
    }

    /// The notifications `notify_site_contact` recorded, oldest first: one
    /// per accepted form, none for a decline, a cancel or a refused retry.
    pub fn notifications(&self) -> Vec<Notification> {
        self.state.asks().notifications()
    }

    /// How many times the permit portal's page (`GET /permits/{permit}`)
    /// was fetched, so tests can prove a client never opens it by itself.
    pub fn permit_visits(&self) -> u64 {
        self.state.asks().permit_visits()
    }

    /// `compile_site_report`'s tasks: how many runs of the work started,
    /// `tasks/get` and `tasks/cancel` requests reached the server, and
    /// tasks still running.
    pub fn reports(&self) -> &crate::reports::Reports {
        self.state.reports()
    }

    /// How many 2026-07-28 asks wait for their retry (their request states
    /// not yet answered).
    pub fn pending_asks(&self) -> usize {
        self.state.asks().pending()
    }

    /// The bound socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The demo users (ana: tiers `["basic"]`, bo: `["pro"]`) with their
    /// bearer tokens, new each start.
    pub fn demo_users(&self) -> Vec<DemoUser> {
        self.state.identities().users()
    }

    /// A token of ana's that has expired: the verifier always answers 401.
    pub fn expired_token(&self) -> String {
        self.state.identities().expired_token()
    }

    /// The bearer verifier's full URL, e.g.
    /// `http://127.0.0.1:41234/api/auth/me`.
    pub fn verifier_url(&self) -> String {
        let origin = self.url.strip_suffix("/mcp").unwrap_or(&self.url);
        format!("{origin}{VERIFIER_PATH}")
    }

    /// Switch how the verifier misbehaves, from its next request on.
    pub fn set_verifier_fault(&self, fault: VerifierFault) {
        self.state.identities().set_fault(fault);
    }

    /// How the verifier misbehaves now.
    pub fn verifier_fault(&self) -> VerifierFault {
        self.state.identities().fault()
    }

    /// How many requests reached the verifier (every fault included).
    pub fn verifier_requests(&self) -> u64 {
        self.state.identities().requests()
    }

    /// How many `tools/call` requests for `tool` reached the server's MCP
    /// handler, counted by the name asked for before anything else (its
    /// arguments, its session) is looked at; unlike [`calls`](Self::calls),
    /// a call refused for its session or its arguments counts. A call that
    /// never reached the server — blocked by a client — does not.
    pub fn tool_calls(&self, tool: &str) -> u64 {
        self.state.tool_calls(tool)
    }

    /// How many private-tool calls named their session explicitly in
    /// `_meta["turnstile/session"]` (refused or not), so tests can prove a
    /// client names it.
    pub fn explicit_session_calls(&self) -> u64 {
        self.state.explicit_session_calls()
    }

    /// The ids of the live MCP sessions (for tests that must name another
    /// live session).
    pub async fn live_sessions(&self) -> Vec<String> {
        let sessions = self.sessions.sessions.read().await;
        sessions.keys().map(|id| id.to_string()).collect()
    }

    /// How many `search_photos` calls reached the tool handler so far.
    pub fn search_calls(&self) -> u64 {
        self.state.search_calls()
    }

    /// How many `query_data` calls reached the tool handler so far.
    pub fn query_calls(&self) -> u64 {
        self.state.query_calls()
    }

    /// How many calls of `tool` reached its handler so far.
    pub fn calls(&self, tool: &str) -> u64 {
        self.state.calls(tool)
    }

    /// How many `confirm_action` and `cancel_action` calls named
    /// `action_id` so far (refused ones and unknown ids included), for
    /// tests that must prove what a client asked the server to do.
    pub fn action_counts(&self, action_id: u64) -> ActionCounts {
        self.state.actions().counts(action_id)
    }

    /// An action's status as `get_action` would read it (`PENDING`,
    /// `ACCEPTED`, `COMPLETED`, `FAILED`, `CANCELLED`, `EXPIRED`); `None`
    /// for an id never prepared.
    pub fn action_status(&self, action_id: u64) -> Option<String> {
        self.action(action_id)
            .map(|a| a.status.as_str().to_string())
    }

    /// An action as `get_action` would read it; `None` for an id never
    /// prepared.
    pub fn action(&self, action_id: u64) -> Option<ActionView> {
        self.state.actions().get(action_id).ok()
    }

    /// How long an idle MCP session lives before the server forgets it.
    pub fn session_ttl(&self) -> Option<Duration> {
        session_ttl(&self.sessions)
    }

    /// Forget every MCP session, as a restarted or load-balanced server
    /// would: the next request on an old session gets HTTP 404.
    pub async fn expire_sessions(&self) {
        let ids: Vec<_> = self
            .sessions
            .sessions
            .read()
            .await
            .keys()
            .cloned()
            .collect();
        for id in ids {
            if let Err(e) = self.sessions.close_session(&id).await {
                tracing::debug!(error = %e, "closing demo session");
            }
        }
    }

    /// Stop accepting requests, end open sessions, and wait (up to 5 s).
    pub async fn shutdown(self) {
        self.cancel.cancel();
        let mut task = self.task;
        if tokio::time::timeout(Duration::from_secs(5), &mut task)
            .await
            .is_err()
        {
            tracing::warn!("demo MCP server did not stop within 5 s; aborting it");
            task.abort();
        }
    }
}

fn session_ttl(sessions: &LocalSessionManager) -> Option<Duration> {
    sessions.session_config.keep_alive
}

fn state_faults(state: &DemoState) -> Vec<String> {
    state.faults().iter().map(|f| f.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Map, Value};
    use turnstile::mcp::{ServerSpec, ToolClient, ToolOutput};

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    async fn call(client: &ToolClient, tool: &str, v: Value) -> ToolOutput {
        client
            .call(tool, args(v))
            .await
            .unwrap_or_else(|e| panic!("{tool}: {e}"))
    }

    /// The reservation desk over the real MCP path, and what the handle
    /// reads of it.
    #[tokio::test]
    async fn reservation_over_mcp_and_the_handle_counts() {
        let opts = DemoOptions {
            action_worker_delay: Duration::from_millis(20),
            ..DemoOptions::default()
        };
        let server = DemoServer::start(SocketAddr::from(([127, 0, 0, 1], 0)), opts)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let client = ToolClient::connect(&ServerSpec::http("demo", server.url.clone()))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let tools = client.list_tools().await.unwrap_or_else(|e| panic!("{e}"));
        for name in [
            "prepare_seat_reservation",
            "confirm_action",
            "cancel_action",
            "get_action",
        ] {
            assert!(tools.iter().any(|t| t.name == name), "{name} listed");
        }
        let prepared = call(
            &client,
            "prepare_seat_reservation",
            json!({"seat": "12", "time": "15:00"}),
        )
        .await;
        assert_eq!(
            prepared.structured,
            Some(json!({"status": "OK", "actionId": 1, "seat": "12", "time": "15:00"}))
        );
        assert_eq!(server.action_status(1).as_deref(), Some("PENDING"));
        let confirmed = call(
            &client,
            "confirm_action",
            json!({"actionId": 1, "idempotencyKey": "k"}),
        )
        .await;
        assert_eq!(
            confirmed.structured,
            Some(json!({"status": "ACCEPTED", "actionId": 1}))
        );
        let refused = call(&client, "confirm_action", json!({"actionId": 1})).await;
        assert!(refused.is_error, "{}", refused.text());
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while server.action_status(1).as_deref() == Some("ACCEPTED")
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let read = call(&client, "get_action", json!({"actionId": 1})).await;
        assert_eq!(
            read.structured,
            Some(json!({"actionId": 1, "status": "COMPLETED", "seat": "12", "time": "15:00"}))
        );
        assert_eq!(
            server.action_counts(1),
            ActionCounts {
                confirms: 2,
                cancels: 0
            }
        );
        assert_eq!(server.action_status(2), None);
        assert_eq!(server.calls("confirm_action"), 2);
        client.close().await;
        server.shutdown().await;
    }
}
