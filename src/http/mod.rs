//! The HTTP layer (axum): parses requests, feeds the agent, writes frames.
//!
//! **Architecture invariant:** `http` makes no protocol decision. Frame order
//! is decided by the `frame` table inside the agent's frame writer; this
//! module only turns requests into turns and frames into SSE.

mod error;
mod routes;

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
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

#[derive(Clone)]
pub struct AppState {
    pub agent: Arc<Agent>,
    pub store: Store,
    pub tables: Arc<TableSet>,
}

pub fn router(state: AppState) -> Router {
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
        .layer(axum::middleware::from_fn(routes::request_span))
        .with_state(state)
}

/// Serves until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt;
    // SSE frames are small and must leave at once: without TCP_NODELAY,
    // Nagle's algorithm and delayed ACKs hold them back ~40 ms.
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!(error = %e, "cannot set TCP_NODELAY");
        }
    });
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}
