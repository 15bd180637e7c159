//! `tables/panel.ron`'s binding: the chat panel's own states (issue 38 §4).
//! The server never runs this table; the page does, from
//! `/v1/tables/panel`. The binding pins the names the page fires, so a
//! table that renames one fails at load like any other.

use super::Protocol;

crate::names! {
    pub enum PanelState {
        Idle = "Idle",
        Sending = "Sending",
        Streaming = "Streaming",
        ToolRunning = "ToolRunning",
        AwaitingApproval = "AwaitingApproval",
        Delivered = "Delivered",
        Failed = "Failed",
        Cut = "Cut",
        Reconnecting = "Reconnecting",
        Unauthorised = "Unauthorised",
        Forbidden = "Forbidden",
        /// The page was closed (`pagehide`).
        Closed = "Closed",
    }
}

crate::names! {
    pub enum PanelEvent {
        /// The user sends a message (the composer, an example, "show more").
        Send = "send",
        /// The user decides a card (approve, deny, an answer).
        Decide = "decide",
        /// The host sent an auth token.
        Token = "token",
        /// The server answered the request with a stream.
        Opened = "opened",
        /// The server refused the request (not 401 or 403).
        Refused = "refused",
        /// 401: the credential was refused.
        Unauthorised = "unauthorised",
        /// 403: this caller may not do this here.
        Forbidden = "forbidden",
        /// `start`, `plan`, `citation`, `figure` or `progress`.
        Frame = "frame",
        /// `delta`.
        Text = "text",
        ToolCall = "tool_call",
        ToolResult = "tool_result",
        Interrupt = "interrupt",
        Done = "done",
        /// An `error` frame.
        Error = "error",
        /// The connection broke before a terminal frame.
        Lost = "lost",
        /// The reconnect route answered with the rest of the turn.
        Reattached = "reattached",
        /// The turn runs no more: the stored thread was shown instead.
        Restored = "restored",
        /// Every reconnect attempt failed.
        GaveUp = "gave_up",
        /// The page is closed.
        Close = "close",
    }
}

crate::names! {
    pub enum PanelEffect {
        /// Send the request the event stands for.
        Request = "request",
        /// Reconnect to the turn's stream from the last frame id shown.
        Reconnect = "reconnect",
        /// Show the stored thread in place of the live stream.
        ShowStored = "show-stored",
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Panel;

impl Protocol for Panel {
    const NAME: &'static str = "panel";
    type State = PanelState;
    type Event = PanelEvent;
    type Effect = PanelEffect;
}
