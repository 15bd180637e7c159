//! `tables/frame.ron`: the order of SSE frames in one response stream.

use super::Protocol;

crate::names! {
    pub enum FrameState {
        Idle = "Idle",
        Open = "Open",
        Working = "Working",
        Narrating = "Narrating",
        Suspended = "Suspended",
        Finished = "Finished",
    }
}

crate::names! {
    /// Each frame kind is an event; `Close` is the stream ending.
    pub enum FrameEvent {
        Start = "start",
        Plan = "plan",
        ToolCall = "tool_call",
        ToolResult = "tool_result",
        Citation = "citation",
        Figure = "figure",
        Delta = "delta",
        Interrupt = "interrupt",
        Done = "done",
        Error = "error",
        Close = "close",
        /// A long call's task still runs (issue 22 §4).
        Progress = "progress",
    }
}

crate::names! {
    pub enum FrameEffect {
        /// Write the frame.
        Emit = "emit",
        /// Write the frame; nothing but the stream's end may follow.
        EmitFinal = "emit-final",
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Frame;

impl Protocol for Frame {
    const NAME: &'static str = "frame";
    type State = FrameState;
    type Event = FrameEvent;
    type Effect = FrameEffect;
}

impl FrameEvent {
    /// The SSE `event:` field for this frame kind.
    pub fn kind(self) -> &'static str {
        <Self as super::Names>::name(self)
    }
}
