//! Embedding the panel in a host app (issue 38 §1, ADR 0037): the page is
//! mounted in an `<iframe>` and speaks a versioned `postMessage` contract
//! with its host. This module serves what both sides need from the server:
//! `GET /v1/embedding` (the contract's version and the host origins the
//! panel may listen to, the same list as the CSP's `frame-ancestors`) and
//! `GET /embed/host.js` (the host's side of the contract: it calls the
//! host's adapter of nine methods). The server never branches per app:
//! what a host can do is the host's declaration, read by the page.

use axum::http::header;
use axum::response::IntoResponse;
use axum::Json;
use serde_json::json;

use super::state::HttpConfig;

/// The contract's name and version, in every message of both directions.
pub const CONTRACT: &str = "panel/1";

const HOST_JS: &str = include_str!("page/host.js");

/// What `GET /v1/embedding` says, computed once when the router is built.
#[derive(Clone)]
pub struct Embedding {
    body: serde_json::Value,
}

impl Embedding {
    pub fn new(cfg: &HttpConfig) -> Embedding {
        Embedding {
            body: json!({
                "contract": CONTRACT,
                // A message from any other origin is ignored by the page;
                // empty: the page may not be framed, and listens to nobody.
                "host_origins": cfg.frame_ancestors,
                "reconnect_grace_secs": cfg.reconnect_grace.as_secs(),
            }),
        }
    }
}

pub async fn describe(e: Embedding) -> impl IntoResponse {
    Json(e.body)
}

pub async fn host_js() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        HOST_JS,
    )
}
