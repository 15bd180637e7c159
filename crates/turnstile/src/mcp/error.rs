//! Errors raised by [`ToolClient`](super::ToolClient).
//!
//! A tool *failing* is not always an error here: a server that answers a
//! `tools/call` with `isError: true` produced a valid result, and that result
//! comes back as `Ok(ToolOutput { is_error: true, .. })`. Only failures below
//! the tool — the connection, the JSON-RPC layer, our own timeout — are
//! [`McpError`]s. Callers must treat both as failures.

/// Why talking to an MCP server failed.
///
/// For errors that concern a request other than `tools/call` (for example
/// `tools/list`), the `tool` field carries the JSON-RPC method name instead of
/// a tool name.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpError {
    /// The transport could not be opened or the `initialize` handshake failed.
    #[error("cannot connect to MCP server '{server}': {reason}")]
    Connect { server: String, reason: String },

    /// The server answered with a JSON-RPC error object (e.g. `-32602`).
    #[error("MCP server '{server}' rejected '{tool}' with JSON-RPC error {code}: {message}")]
    Rpc {
        server: String,
        tool: String,
        code: i64,
        message: String,
    },

    /// The request could not be delivered or its response was lost
    /// (HTTP failure, expired session, closed pipe, ...).
    #[error("transport failure talking to MCP server '{server}' during '{tool}': {reason}")]
    Transport {
        server: String,
        tool: String,
        reason: String,
    },

    /// The request went out and no answer came back: the response stream
    /// broke (a revision without stream resumption, or a resumption that
    /// failed). Whether the tool ran is unknown; it was not sent again.
    #[error("MCP server '{server}' got '{tool}' and no answer came back ({reason}): whether it ran is unknown; it was not sent again")]
    Unanswered {
        server: String,
        tool: String,
        reason: String,
    },

    /// No response within the configured timeout. The request was abandoned
    /// and a `notifications/cancelled` was sent on a best-effort basis.
    #[error("MCP server '{server}' did not answer '{tool}' in time")]
    Timeout { server: String, tool: String },

    /// The server answered, but with something that is not a usable result
    /// (for example a task handle or an `input_required` round we do not drive).
    #[error("MCP server '{server}' sent an unusable answer to '{tool}': {reason}")]
    Protocol {
        server: String,
        tool: String,
        reason: String,
    },

    /// The server spec itself is unusable (empty command, bad URL, ...).
    #[error("invalid MCP server spec '{server}': {reason}")]
    InvalidSpec { server: String, reason: String },

    /// The server is down (its connection is `Down`, or a reconnect did not
    /// finish within the connect timeout): `tool` was not sent. The client
    /// keeps retrying in the background (`tables/connection.ron`).
    #[error("MCP server '{server}' is down, '{tool}' was not sent: {reason}")]
    Down {
        server: String,
        tool: String,
        reason: String,
    },
}

impl McpError {
    /// The configured name of the server this error concerns.
    pub fn server(&self) -> &str {
        match self {
            McpError::Connect { server, .. }
            | McpError::Rpc { server, .. }
            | McpError::Transport { server, .. }
            | McpError::Unanswered { server, .. }
            | McpError::Timeout { server, .. }
            | McpError::Protocol { server, .. }
            | McpError::InvalidSpec { server, .. }
            | McpError::Down { server, .. } => server,
        }
    }

    /// Short stable name of the variant, for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            McpError::Connect { .. } => "connect",
            McpError::Rpc { .. } => "rpc",
            McpError::Transport { .. } => "transport",
            McpError::Unanswered { .. } => "outcome_unknown",
            McpError::Timeout { .. } => "timeout",
            McpError::Protocol { .. } => "protocol",
            McpError::InvalidSpec { .. } => "invalid_spec",
            McpError::Down { .. } => "server_down",
        }
    }
}
