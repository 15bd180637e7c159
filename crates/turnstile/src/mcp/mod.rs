//! MCP client side: connect to tool servers and normalise what they return.
//!
//! * [`ToolClient`] — one server (streamable HTTP or stdio) for the life of
//!   the process: `list_tools` (follows pagination) and `call` (with a
//!   timeout). Its connection is a machine of `tables/connection.ron`:
//!   expired sessions are re-initialised, broken transports reconnected,
//!   exited stdio children restarted, down servers retried with backoff —
//!   each a row of the table, logged. A call is re-sent only when the
//!   server said it did not process it (HTTP 404 for our session id on the
//!   call's own POST: once, on the new session, ADR 0029), and on a
//!   stateless server a read-only or `retry_safe` one whose answer was
//!   lost, once. A call whose answer was lost is otherwise never re-sent.
//! * [`session`] — one connection (one `initialize`) and how its failures
//!   look on the wire (an expired session is HTTP 404).
//! * [`spec`] — what a server is ([`ServerSpec`], [`Transport`]) and what it
//!   says about itself ([`ServerInfo`], [`ToolInfo`]); both the client and
//!   the session use it, and neither imports the other's types.
//! * [`ToolOutput`], [`normalize`], [`pyliteral`], [`url`], [`ToolTrust`] —
//!   re-exported from the leaf crate `turnstile-output` (the one
//!   normalisation seam, the Python-literal reader, the URL scanner, what a
//!   tool declares), which the judge reads without this client.
//! * [`McpError`] — failures below the tool. A tool that ran and failed comes
//!   back as `Ok(ToolOutput { is_error: true, .. })` instead; treat both as
//!   failures.
//!
//! Protocol decisions: `docs/adr/0003-mcp-protocol-version.md` (we ask for
//! `2025-11-25`, not rmcp's default), `docs/adr/0004-no-silent-mcp-reinit.md`
//! (an expired HTTP session is never silently re-initialised by the
//! transport) and `docs/adr/0011-mcp-reconnect.md` (the connection table
//! re-initialises it instead, explicitly).
//!
//! **Explicit sessions** (issue 20, the tool server's "ADR-0098"): over
//! streamable HTTP every `tools/call` names the session it means in
//! `_meta["turnstile/session"]` ([`SESSION_META`]) — the `Mcp-Session-Id`
//! of the session it is sent on, so a reconnect's calls name the new one. A
//! server that resolves sessions exactly refuses a call whose named session
//! is not live (`INVALID_SESSION`) or not the one it arrived on
//! (`SESSION_MISMATCH`) instead of falling back to another.

pub mod answer;
pub mod client;
pub mod error;
pub mod input;
pub mod oauth;
pub mod session;
pub mod spec;
pub mod task;
pub mod trace_context;

pub use answer::{Answer, InputAsk, Nested};
pub use client::{
    builtin_connection_table, builtin_task_table, ClientOptions, ServerStatus, ToolClient,
    DEFAULT_BACKOFF_INITIAL, DEFAULT_BACKOFF_MAX, DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_INPUT_WAIT, DEFAULT_PROBE_AFTER, DEFAULT_TASK_WAIT,
};
pub use error::McpError;
pub use input::{Asked, InputRound, RequestState};
pub use session::SESSION_META;
pub use spec::{
    Revision, ServerInfo, ServerSpec, ToolInfo, ToolPolicy, Transport, PROTOCOL_VERSION,
    STATELESS_VERSION,
};
pub use task::{Follow, Next, Progress, Settled, TaskId, TaskPoll, TaskPoller, TaskTicket};
pub use turnstile_output::{normalize, pyliteral, url};
pub use turnstile_output::{Block, Hints, JsonMap, ShapeSummary, ToolOutput, ToolTrust};
