//! `tables/connection.ron`: the life of one MCP server connection
//! (ADR 0011). The MCP client (`mcp::client`) classifies what happened on the
//! wire into one of these events and performs the effect of the row it took.

use super::Protocol;
use crate::fsm::Invariant;

crate::names! {
    pub enum ConnectionState {
        /// The first transport, `initialize` and `tools/list` are out.
        Connecting = "Connecting",
        /// A session is open and its tools are published.
        Ready = "Ready",
        /// A 2026-07-28 server is discovered and its tools are published;
        /// there is no session.
        Stateless = "Stateless",
        /// The server forgot the session (HTTP 404); a new `initialize`
        /// without a session id is out.
        Expired = "Expired",
        /// The transport broke or the stdio child exited; a new connection is
        /// being opened.
        Reconnecting = "Reconnecting",
        /// The last attempt failed; the next waits for its backoff. Calls
        /// fail at once.
        Down = "Down",
        Closed = "Closed",
    }
}

crate::names! {
    /// What the client classified; the table decides what follows.
    pub enum ConnectionEvent {
        /// A tool call wants a session. Only peeked, never fired: its row's
        /// effect says whether the call is sent, waits or fails.
        CallAsked = "call_asked",
        /// The first connection opened: transport, `initialize`, `tools/list`.
        ConnectOk = "connect_ok",
        /// The first connection to a 2026-07-28 server: `server/discover`
        /// and `tools/list` answered.
        Discovered = "discovered",
        /// The first connection could not be opened.
        ConnectFailed = "connect_failed",
        /// A request on the current session was answered (a result, an
        /// `isError` result, a JSON-RPC error, or a `ping`).
        CallOk = "call_ok",
        /// HTTP 404 for our session id answering a request that is not a
        /// `tools/call` (a `ping`, `tools/list`, `tasks/get`): there is no
        /// call to re-send.
        SessionExpired = "session_expired",
        /// HTTP 404 for our session id answering the `tools/call` POST
        /// itself: the transport's word that the server did not process it
        /// (ADR 0029), whatever the tool.
        SessionExpiredOnCall = "session_expired_on_call",
        /// A stateless call went out and its response stream broke before
        /// the answer: its outcome is unknown; nothing is re-sent.
        StreamBroken = "stream_broken",
        /// The same for a read-only or `retry_safe` tool: re-sent once.
        StreamBrokenRetrySafe = "stream_broken_retry_safe",
        /// The request could not be delivered or its answer was lost.
        TransportError = "transport_error",
        /// The stdio server's process ended.
        ChildExited = "child_exited",
        /// A new connection (after an expiry, a transport error, a child exit
        /// or a backoff) opened.
        ReconnectOk = "reconnect_ok",
        /// A new connection discovered a 2026-07-28 server.
        Rediscovered = "rediscovered",
        ReconnectFailed = "reconnect_failed",
        Shutdown = "shutdown",
    }
}

crate::names! {
    /// What the client does after the row.
    pub enum ConnectionEffect {
        /// Make the new session current and its tools visible.
        PublishTools = "publish-tools",
        /// Try again after the next backoff delay.
        RetryWithBackoff = "retry-with-backoff",
        /// Open a new session: `initialize` without a session id.
        Reinitialize = "reinitialize",
        /// Open a new session, then re-send once the call whose own POST was
        /// answered 404 (it was not processed).
        ReinitializeAndResend = "reinitialize-and-resend",
        /// Wait for the new session under way, then re-send the call once.
        Resend = "resend",
        /// Open a new connection.
        Reconnect = "reconnect",
        /// Start the stdio server again (with backoff if it keeps exiting).
        RestartChild = "restart-child",
        /// Close the session and stop every retry.
        Close = "close",
        /// Send the call on the current session.
        Send = "send",
        /// Wait for the session under way (up to the connect timeout).
        Wait = "wait",
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Connection;

impl Protocol for Connection {
    const NAME: &'static str = "connection";
    type State = ConnectionState;
    type Event = ConnectionEvent;
    type Effect = ConnectionEffect;
    const INVARIANTS: &'static [Invariant<'static>] = &[
        // `call_asked` is peeked, never fired: the state it is asked in is
        // the one that must hold a session.
        Invariant::EffectOnlyFrom {
            effect: "send",
            from: &["Ready", "Stateless"],
            why: "a call is sent only where a session (or a discovered stateless server) is open; an expired or broken one still held would be the wrong session",
        },
        Invariant::EffectEndsIn {
            effect: "send",
            to: &["Ready", "Stateless"],
            why: "asking to send a call changes nothing: a `send` row stays where it is",
        },
    ];
}
