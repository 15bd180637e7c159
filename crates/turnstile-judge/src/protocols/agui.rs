//! `tables/agui.ron`: the order of AG-UI 1.0 events as turnstile writes
//! them (issue 37, ADR 0036). Each event type is an event (lower-cased);
//! `Close` is the stream's end.

use super::Protocol;

crate::names! {
    pub enum AguiState {
        Idle = "Idle",
        Running = "Running",
        Stepping = "Stepping",
        Texting = "Texting",
        ToolArgs = "ToolArgs",
        ToolPending = "ToolPending",
        Finished = "Finished",
        Failed = "Failed",
    }
}

crate::names! {
    pub enum AguiEvent {
        RunStarted = "run_started",
        StepStarted = "step_started",
        StepFinished = "step_finished",
        TextMessageStart = "text_message_start",
        TextMessageContent = "text_message_content",
        TextMessageEnd = "text_message_end",
        ToolCallStart = "tool_call_start",
        ToolCallArgs = "tool_call_args",
        ToolCallEnd = "tool_call_end",
        ToolCallResult = "tool_call_result",
        Custom = "custom",
        RunFinished = "run_finished",
        RunError = "run_error",
        Close = "close",
    }
}

crate::names! {
    pub enum AguiEffect {
        /// Write the event.
        Write = "write",
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Agui;

impl Protocol for Agui {
    const NAME: &'static str = "agui";
    type State = AguiState;
    type Event = AguiEvent;
    type Effect = AguiEffect;
}
