//! `tables/task.ron`: one task a server made of a tool call (issue 22 §4,
//! MCP tasks extension). The follower (`mcp::task`) classifies each
//! `tasks/get` answer, a clock and a restart into one of these events and
//! performs the effect of the row it took.

use super::Protocol;
use crate::fsm::Invariant;

crate::names! {
    pub enum TaskState {
        Idle = "Idle",
        /// The server runs the task; it is polled at its interval.
        Working = "Working",
        /// Cancel was asked (the turn's wait ran out, or the task asked
        /// for input); polled until the server says how it ended.
        Cancelling = "Cancelling",
        Completed = "Completed",
        Failed = "Failed",
        Cancelled = "Cancelled",
        /// The server forgot the task, or it stayed unreachable: whether
        /// it ran is not claimed.
        Unknown = "Unknown",
    }
}

crate::names! {
    pub enum TaskEvent {
        /// The call was answered with a task.
        Created = "created",
        /// `tasks/get`: `working`.
        Working = "working",
        /// `tasks/get`: `input_required`.
        InputRequired = "input_required",
        /// `tasks/get`: `completed`, with the call's result.
        Completed = "completed",
        /// `tasks/get`: `failed`, with its error.
        Failed = "failed",
        /// `tasks/get`: `cancelled`.
        Cancelled = "cancelled",
        /// `tasks/get` itself failed (a transport error, a timeout).
        PollFailed = "poll_failed",
        /// `tasks/get` failed for longer than the poll budget.
        Unreachable = "unreachable",
        /// The server answered that it does not know the task.
        TaskUnknown = "task_unknown",
        /// The wait for the task ran out.
        Deadline = "deadline",
        /// A process restarted with this task stored as unsettled.
        Restart = "restart",
    }
}

crate::names! {
    pub enum TaskEffect {
        /// Wait the server's poll interval, then `tasks/get`.
        Poll = "poll",
        /// `tasks/cancel`, then poll.
        Cancel = "cancel",
        /// The task is over: tell the user what the state says.
        Settle = "settle",
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Task;

impl Protocol for Task {
    const NAME: &'static str = "task";
    type State = TaskState;
    type Event = TaskEvent;
    type Effect = TaskEffect;
    const INVARIANTS: &'static [Invariant<'static>] = &[Invariant::EffectEndsIn {
        effect: "settle",
        to: &["Completed", "Failed", "Cancelled", "Unknown"],
        why: "a settled task is told as completed, failed, cancelled or unknown, and nothing else can be shown",
    }];
}
