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
        let router = axum::Router::new().nest_service("/mcp", service);
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
        // A wildcard bind is reachable on loopback; advertise that.
        let url_addr = match local.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => {
                SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), local.port())
            }
            IpAddr::V6(ip) if ip.is_unspecified() => {
                SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), local.port())
            }
            _ => local,
        };
        let url = format!("http://{url_addr}/mcp");
        tracing::info!(%url, faults = ?state_faults(&state), session_ttl = ?session_ttl(&sessions), "demo MCP server listening");
        Ok(DemoServer {
            url,
            addr: local,
            state,
            sessions,
            cancel,
            task,
        })
    }

    /// The bound socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
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
