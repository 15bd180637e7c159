//! The demo's two host apps (issue 38 §6), served by `turnstile demo` at
//! `/demo/host` (a fake site viewer: floor selector, camera readout, a log
//! of every dispatched citation) and `/demo/console` (a management console
//! that sends names only and turns a citation into a route). Each mounts
//! the chat page in an `<iframe>` and speaks panel/1 through the server's
//! `/embed/host.js`. Their own policy: scripts and styles from this origin
//! only, and only this origin in a frame.

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

const VIEWER: &str = include_str!("host/viewer.html");
const CONSOLE: &str = include_str!("host/console.html");
const SCRIPT: &str = include_str!("host/host.js");
const STYLE: &str = include_str!("host/host.css");

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; frame-src 'self'; \
    connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The routes of both hosts, to merge into the chat server's router.
pub fn routes() -> Router {
    Router::new()
        .route("/demo/host", get(|| page(VIEWER)))
        .route("/demo/console", get(|| page(CONSOLE)))
        .route(
            "/demo/host.js",
            get(|| file("text/javascript; charset=utf-8", SCRIPT)),
        )
        .route(
            "/demo/host.css",
            get(|| file("text/css; charset=utf-8", STYLE)),
        )
}

async fn page(html: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        html,
    )
}

async fn file(kind: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
}
