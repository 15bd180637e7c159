//! The HTTP layer (axum): parses requests, feeds the agent, writes frames.
//!
//! **Architecture invariant:** `http` makes no protocol decision. Frame order
//! is decided by the `frame` table inside the agent's frame writer; this
//! module only turns requests into turns and frames into SSE.

mod agui;
mod connections;
mod drain;
mod embed;
mod error;
mod headers;
mod identity;
mod limits;
mod live;
mod oidc;
mod relay;
mod routes;
mod serve;
mod state;
mod ui_stream;
mod verifier;

use axum::extract::DefaultBodyLimit;
use axum::middleware::{from_fn, from_fn_with_state};
use axum::routing::{get, post};
use axum::Router;

pub use error::ApiError;
pub use identity::{
    bearer, presented, session_cookie, AuthConfig, Identity, Mode, Presented, API_KEY_HEADER,
    SESSION_COOKIE, SUBJECT_HEADER, TIERS_HEADER,
};
pub use oidc::{OidcConfig, ASYMMETRIC as OIDC_ALGORITHMS};
pub use state::{AdminKey, AppState, HttpConfig, MAX_BODY, MAX_JSON_DEPTH, MAX_TEXT};
pub use verifier::{Verified, Verifier, VerifierConfig};

pub use drain::Drain;
pub use headers::csp;
pub use limits::{scan, Scan};

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
    let mut state = state;
    state.live = std::sync::Arc::new(live::Live::new(cfg.reconnect_grace));
    state.drain.set_window(cfg.drain);
    state.drain.set_stopping(state.agent.stopping.clone());
    state.admin_key = cfg.admin_key.clone();
    let embedding = embed::Embedding::new(cfg);
    let app = Router::new()
        .route("/", get(routes::page))
        .route("/healthz", get(routes::healthz))
        .route("/readyz", get(routes::readyz))
        .route(
            "/v1/threads",
            post(routes::create_thread).get(routes::list_threads),
        )
        .route("/v1/threads/{id}", get(routes::get_thread))
        .route("/v1/threads/{id}/messages", post(routes::post_message))
        .route("/v1/threads/{id}/resume", post(routes::resume))
        .route("/v1/threads/{id}/stream", get(routes::reattach))
        .route(
            "/v1/embedding",
            get(move || embed::describe(embedding.clone())),
        )
        .route("/embed/host.js", get(embed::host_js))
        .route("/v1/threads/{id}/ui-message-stream", post(ui_stream::post))
        .route("/v1/threads/{id}/agui", post(agui::post))
        .route("/v1/tables", get(routes::list_tables))
        .route("/v1/tables/{name}", get(routes::get_table))
        .route("/v1/metrics", get(routes::metrics))
        .route("/v1/admin/drain", post(routes::drain))
        .route("/v1/connections", get(connections::list))
        .route("/v1/connections/callback", get(connections::callback))
        .route("/v1/connections/start", get(connections::start))
        .route(
            crate::agent::connections::CLIENT_METADATA_PATH,
            get(connections::client_metadata),
        )
        .route(
            "/v1/connections/flows/{id}/ticket",
            post(connections::ticket),
        )
        .route(
            "/v1/connections/{server}",
            axum::routing::delete(connections::revoke),
        )
        .fallback(routes::not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(from_fn_with_state(limits, limits::read_body))
        .with_state(state);
    // The layers below wrap the router whole, not each route (as
    // `Router::layer` does): a route adds its 405's `Allow` header outside
    // its own layers, where only these see it.
    Router::new()
        .fallback_service(app)
        .layer(from_fn(limits::json_errors))
        .layer(from_fn_with_state(limits, limits::head_limit))
        .layer(from_fn(routes::request_span))
        .layer(from_fn_with_state(headers, headers::security))
}

/// Serves `app` (the [`router_with`] of `cfg`, with routes of the
/// embedding program merged in: the demo's host pages) until `shutdown`
/// resolves; then waits for open requests to end.
pub async fn serve_app(
    listener: tokio::net::TcpListener,
    app: Router,
    cfg: &HttpConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve::run(listener, app, cfg, shutdown).await
}

/// Serves `app` until SIGTERM, Ctrl-C or `POST /v1/admin/drain`, then
/// drains (`drain.rs`): no new turns, the open ones run to their end for
/// up to `cfg.drain`; a turn still running then is stopped as a client's
/// leaving stops it, its client told to send again; then the server stops.
pub async fn serve_draining(
    listener: tokio::net::TcpListener,
    app: Router,
    cfg: &HttpConfig,
    drain: std::sync::Arc<Drain>,
) -> std::io::Result<()> {
    let d = drain.clone();
    let shutdown = async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = terminate() => {}
            () = d.requested() => {}
        }
        d.begin();
        let left = d.settled().await;
        if left > 0 {
            tracing::warn!(
                open_turns = left,
                "the drain window ended with turns still open: each is stopped as a client's leaving stops it"
            );
            let stuck = d.stop_open_turns(STOP_GRACE).await;
            if stuck > 0 {
                tracing::warn!(
                    open_turns = stuck,
                    "turns did not stop in time: the next start closes them as cut"
                );
            }
        }
    };
    let deadline = async {
        drain.requested().await;
        tokio::time::sleep(drain.window() + STOP_GRACE + std::time::Duration::from_secs(2)).await;
    };
    tokio::select! {
        served = serve::run(listener, app, cfg, shutdown) => served,
        () = deadline => Ok(()),
    }
}

/// How long stopped turns get to store their cut and release their leases.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// SIGTERM (a rolling deploy's stop); never on a platform without it.
async fn terminate() {
    #[cfg(unix)]
    if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        s.recv().await;
        return;
    }
    std::future::pending().await
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
