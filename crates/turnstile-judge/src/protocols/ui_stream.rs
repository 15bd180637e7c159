//! `tables/ui_stream.ron`: the order of the AI SDK's UI message stream
//! (`ai` 7.0.x, `useChat`) as turnstile writes it (issue 37, ADR 0036).
//! Each chunk type is an event (`-` written `_`); `Data` is any `data-*`
//! part, `Done` the `[DONE]` line and `Close` the stream's end.

use super::Protocol;

crate::names! {
    pub enum UiStreamState {
        Idle = "Idle",
        Open = "Open",
        Stepping = "Stepping",
        Texting = "Texting",
        ToolInput = "ToolInput",
        ToolRunning = "ToolRunning",
        Approving = "Approving",
        Failed = "Failed",
        Finished = "Finished",
        Done = "Done",
    }
}

crate::names! {
    pub enum UiStreamEvent {
        Start = "start",
        StartStep = "start_step",
        FinishStep = "finish_step",
        TextStart = "text_start",
        TextDelta = "text_delta",
        TextEnd = "text_end",
        ToolInputStart = "tool_input_start",
        ToolInputAvailable = "tool_input_available",
        ToolOutputAvailable = "tool_output_available",
        ToolOutputError = "tool_output_error",
        ToolApprovalRequest = "tool_approval_request",
        Data = "data",
        Error = "error",
        Finish = "finish",
        Done = "done",
        Close = "close",
    }
}

crate::names! {
    pub enum UiStreamEffect {
        /// Write the chunk.
        Write = "write",
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UiStream;

impl Protocol for UiStream {
    const NAME: &'static str = "ui_stream";
    type State = UiStreamState;
    type Event = UiStreamEvent;
    type Effect = UiStreamEffect;
}
