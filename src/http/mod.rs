//! The HTTP layer (axum): parses requests, feeds the agent, writes frames.
//!
//! **Architecture invariant:** `http` makes no protocol decision. Frame order
//! is decided by the `frame` table inside the agent's frame writer; this
//! module only turns requests into turns and frames into SSE.

mod error;
mod headers;
mod limits;
mod routes;
mod serve;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::middleware::{from_fn, from_fn_with_state};
use axum::routing::{get, post};
use axum::Router;

use crate::agent::Agent;
use crate::protocols::TableSet;
use crate::store::Store;

pub use error::ApiError;

/// Largest request body accepted; larger ones get 413.
pub const MAX_BODY: usize = 64 * 1024;
/// Longest user message, in characters; longer ones get 413.
pub const MAX_TEXT: usize = 8_000;
/// Deepest nesting of arrays and objects in a JSON body, anywhere in it
/// (known keys or not); deeper ones get 400 before any parsing.
pub const MAX_JSON_DEPTH: usize = 32;

pub use headers::csp;
pub use limits::too_deep;

/// The connection and browser settings of the server (`[http]` in the
/// config file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// Time from the first byte of a request head to its end; a slower
    /// head closes the connection (`http.header_read_timeout_secs`).
    pub header_read_timeout: Duration,
    /// Time to receive a whole request body; a slower one gets 408 and the
    /// connection is closed (`http.body_read_timeout_secs`).
    pub body_read_timeout: Duration,
    /// Time a connection may sit with no request in flight and no byte of
    /// a next one (`http.idle_timeout_secs`). A live SSE stream is a
    /// request in flight: it is never cut by this.
    pub idle_timeout: Duration,
    /// Largest request head (request line and headers), in bytes; larger
    /// ones get 431 (`http.max_header_bytes`).
    pub max_header_bytes: usize,
    /// Origins allowed to frame the page (CSP `frame-ancestors`); empty
    /// means none (`http.frame_ancestors`).
    pub frame_ancestors: Vec<String>,
    /// Origins whose scripts may read the API (CORS); empty means none
    /// (`http.cors_origins`).
    pub cors_origins: Vec<String>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_header_bytes: 16 * 1024,
            frame_ancestors: Vec::new(),
            cors_origins: Vec::new(),
        }
    }
}

#[derive(Clone)]
pub struct AppState {
    pub agent: Arc<Agent>,
    pub store: Store,
    pub tables: Arc<TableSet>,
}

/// The app with the default [`HttpConfig`].
pub fn router(state: AppState) -> Router {
    router_with(state, &HttpConfig::default())
}

/// The app: routes, request limits, JSON errors and browser headers.
pub fn router_with(state: AppState, cfg: &HttpConfig) -> Router {
    let limits = limits::Limits {
        max_header_bytes: cfg.max_header_bytes,
        body_read_timeout: cfg.body_read_timeout,
    };
    let headers = headers::Headers::new(routes::PAGE, &cfg.frame_ancestors, &cfg.cors_origins);
    Router::new()
        .route("/", get(routes::page))
        .route("/healthz", get(routes::healthz))
        .route("/readyz", get(routes::readyz))
        .route("/v1/threads", post(routes::create_thread))
        .route("/v1/threads/{id}", get(routes::get_thread))
        .route("/v1/threads/{id}/messages", post(routes::post_message))
        .route("/v1/threads/{id}/resume", post(routes::resume))
        .route("/v1/tables", get(routes::list_tables))
        .route("/v1/tables/{name}", get(routes::get_table))
        .route("/v1/metrics", get(routes::metrics))
        .fallback(routes::not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(from_fn_with_state(limits, limits::read_body))
        .layer(from_fn(limits::json_errors))
        .layer(from_fn_with_state(limits, limits::head_limit))
        .layer(from_fn(routes::request_span))
        .layer(from_fn_with_state(headers, headers::security))
        .with_state(state)
}

/// Serves until `shutdown` resolves, with the default [`HttpConfig`].
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, state, &HttpConfig::default(), shutdown).await
}

/// Serves until `shutdown` resolves, with these timeouts, limits and
/// headers; then waits for open requests to end.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    state: AppState,
    cfg: &HttpConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve::run(listener, router_with(state, cfg), cfg, shutdown).await
}
