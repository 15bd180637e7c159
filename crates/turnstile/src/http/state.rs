//! What the routes share: the app's state, the server's settings and the
//! request bounds. Its own file, so that the router (`mod.rs`) and the
//! routes it wires depend on it and not on each other.

use std::sync::Arc;
use std::time::Duration;

use crate::agent::Agent;
use crate::protocols::TableSet;
use crate::store::Store;

/// Largest request body accepted; larger ones get 413.
pub const MAX_BODY: usize = 64 * 1024;
/// Longest user message, in characters; longer ones get 413.
pub const MAX_TEXT: usize = 8_000;
/// Deepest nesting of arrays and objects in a JSON body, anywhere in it
/// (known keys or not); deeper ones get 400 before any parsing.
pub const MAX_JSON_DEPTH: usize = 32;

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
    /// Origins whose URLs the assistant's text may carry as links
    /// (documentation); empty means none: only capabilities the server
    /// delivered are links (`http.link_origins`, issue 33).
    pub link_origins: Vec<String>,
    /// How long a turn whose client went away keeps running for that
    /// client to reconnect with `Last-Event-ID` (issue 38 §5); zero: the
    /// turn meets the disconnect at once (`http.reconnect_grace_secs`).
    pub reconnect_grace: Duration,
    /// How long a drain (SIGTERM, `POST /v1/admin/drain`) lets open turns
    /// run to their end (`http.drain_secs`).
    pub drain: Duration,
    /// The operator's key for `POST /v1/admin/drain` (read from the
    /// variable `http.admin_key_env` names); `None`: the route is off.
    pub admin_key: Option<AdminKey>,
}

/// An operator key: compared in constant time, never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct AdminKey(String);

impl AdminKey {
    pub fn new(key: impl Into<String>) -> AdminKey {
        AdminKey(key.into())
    }

    pub fn matches(&self, presented: &[u8]) -> bool {
        use subtle::ConstantTimeEq;
        self.0.as_bytes().ct_eq(presented).into()
    }
}

impl std::fmt::Debug for AdminKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminKey(…)")
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            link_origins: Vec::new(),
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_header_bytes: 16 * 1024,
            frame_ancestors: Vec::new(),
            cors_origins: Vec::new(),
            reconnect_grace: Duration::ZERO,
            drain: Duration::from_secs(30),
            admin_key: None,
        }
    }
}

#[derive(Clone)]
pub struct AppState {
    pub agent: Arc<Agent>,
    pub store: Store,
    pub tables: Arc<TableSet>,
    /// Who a request's caller is and which threads are theirs.
    pub identity: Arc<super::identity::Identity>,
    /// The AI SDK stream's order (`tables/ui_stream.ron`, issue 37).
    pub ui_stream: crate::protocols::Bound<crate::protocols::ui_stream::UiStream>,
    /// AG-UI's event order (`tables/agui.ron`, issue 37).
    pub agui: crate::protocols::Bound<crate::protocols::agui::Agui>,
    /// Each thread's running turn, for a client that reconnects (set from
    /// [`HttpConfig::reconnect_grace`] when the router is built).
    pub live: Arc<super::live::Live>,
    /// Whether the process drains, and its open turns.
    pub drain: Arc<super::drain::Drain>,
    /// The operator's key for the admin routes (set with the router).
    pub admin_key: Option<AdminKey>,
    /// The servers each user connects (`/v1/connections`), if any.
    pub connections: Option<Arc<crate::agent::connections::Connections>>,
}
