//! MCP client side: connect to tool servers and normalise what they return.
//!
//! * [`ToolClient`] — one connected server (streamable HTTP or stdio), with
//!   `list_tools` (follows pagination) and `call` (with a timeout, never
//!   retried).
//! * [`ToolOutput`] — **the one normalisation seam**: every tool result,
//!   whatever its shape, is flattened into blocks + structured content +
//!   `_meta` here before anything judges it. See [`normalize`].
//! * [`McpError`] — failures below the tool. A tool that ran and failed comes
//!   back as `Ok(ToolOutput { is_error: true, .. })` instead; treat both as
//!   failures.
//!
//! Protocol decisions: `docs/adr/0003-mcp-protocol-version.md` (we ask for
//! `2025-11-25`, not rmcp's default) and `docs/adr/0004-no-silent-mcp-reinit.md`
//! (an expired HTTP session fails the call instead of silently re-sending it).

pub mod client;
pub mod error;
pub mod normalize;

pub use client::{
    ClientOptions, ServerSpec, ToolClient, ToolInfo, Transport, DEFAULT_CALL_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT, PROTOCOL_VERSION,
};
pub use error::McpError;
pub use normalize::{Block, JsonMap, ShapeSummary, ToolOutput};
