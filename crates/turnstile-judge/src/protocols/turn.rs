//! `tables/turn.ron`: the agent loop of one turn.

use super::Protocol;
use crate::fsm::Invariant;

crate::names! {
    pub enum TurnState {
        Starting = "Starting",
        Planning = "Planning",
        Calling = "Calling",
        Judging = "Judging",
        Responding = "Responding",
        Suspended = "Suspended",
        Delivered = "Delivered",
        Done = "Done",
        Failed = "Failed",
        Cancelled = "Cancelled",
    }
}

crate::names! {
    /// What code classified; the table decides what follows.
    pub enum TurnEvent {
        /// The user's message is stored and the start frame sent: fired
        /// once, so the table names the turn's first effect.
        Begin = "begin",
        /// The model planned one or more calls.
        Planned = "planned",
        /// The model answered without calls after looking at results.
        Answered = "answered",
        /// The model planned nothing on the first step.
        PlanEmpty = "plan_empty",
        /// The planning round answered in text: that text is the answer,
        /// streaming (issue 19 §5).
        Answering = "answering",
        /// The plan refers to something the turn does not have: "this
        /// floor" with no floor in the host context, "those" with no
        /// earlier results. Nothing is called; the user is asked.
        ReferenceMissing = "reference_missing",
        PlannerFailed = "planner_failed",
        /// The step has another planned call.
        NextCall = "next_call",
        CallOk = "call_ok",
        CallFailed = "call_failed",
        /// The step's last result was judged.
        StepDone = "step_done",
        /// The step's last result was judged and `max_steps` were taken.
        StepLimit = "step_limit",
        ApprovalNeeded = "approval_needed",
        Approved = "approved",
        Denied = "denied",
        TerminalResult = "terminal_result",
        /// The plan asks for a link an earlier turn delivered, and the
        /// export table lets it be shown again.
        StoredDelivery = "stored_delivery",
        ResponderFinished = "responder_finished",
        ResponderFailed = "responder_failed",
        /// The model asked for tools after its answer began.
        CallsAfterText = "calls_after_text",
        /// The licence gate refused a call of the round before it was sent
        /// (`tables/licence.ron`): the answer is code's.
        CallUnlicensed = "call_unlicensed",
        ClientGone = "client_gone",
        /// The planning round after a "show more" continuation: its page
        /// was judged (issue 36: what follows is the table's row).
        Continued = "continued",
        /// A safety check refused the user's message before anything saw
        /// it (`tables/guardrail.ron`).
        InputBlocked = "input_blocked",
    }
}

crate::names! {
    /// What the agent does after the row.
    pub enum TurnEffect {
        /// Ask the planner (again), with history and digests.
        Plan = "plan",
        /// Run the step's next call.
        Call = "call",
        /// Judge the call's result and classify where the step stands.
        Judge = "judge",
        /// Stream the responder's answer.
        Respond = "respond",
        /// Stream the answer the planning round began.
        Stream = "stream",
        /// Say code's own sentence for the anchors, through the narration
        /// guard; no model request.
        Explain = "explain",
        /// Send the interrupt and end the stream; the turn waits.
        Suspend = "suspend",
        /// Format the terminal result by code and end the turn.
        Deliver = "deliver",
        /// Write the done frame.
        Finish = "finish",
        /// Write the error frame.
        Fail = "fail",
        /// Stop; the client is gone.
        Cancel = "cancel",
        /// Say code's sentence for a refused message, with the guardrail's
        /// row; no model request.
        Refuse = "refuse",
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Turn;

impl Protocol for Turn {
    const NAME: &'static str = "turn";
    type State = TurnState;
    type Event = TurnEvent;
    type Effect = TurnEffect;
    const INVARIANTS: &'static [Invariant<'static>] = &[
        Invariant::Ranked {
            events: &["approval_needed", "terminal_result", "call_ok", "call_failed"],
            why: "one call's outcome can be a held action, a terminal result and a result at once; the table says which is acted on",
        },
        Invariant::Precedes {
            first: "approval_needed",
            then: &["call_ok", "call_failed"],
            why: "a prepared action waits for the human: its outcome is the approval's to tell, never answered as a plain result",
        },
        Invariant::Precedes {
            first: "terminal_result",
            then: &["call_ok", "call_failed"],
            why: "a terminal result, or its failed confirm, is told by code's formatter; the model never narrates a capability",
        },
    ];
}
