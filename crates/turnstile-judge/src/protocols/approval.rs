//! `tables/approval.ron`: one action that needs a human decision, from the
//! prepare result that names it to its settled outcome.

use super::Protocol;
use crate::fsm::Invariant;

crate::names! {
    pub enum ApprovalState {
        Idle = "Idle",
        Prepared = "Prepared",
        Awaiting = "Awaiting",
        Confirming = "Confirming",
        Accepted = "Accepted",
        Completed = "Completed",
        Failed = "Failed",
        Denied = "Denied",
        Expired = "Expired",
        Unknown = "Unknown",
        /// A new message withdrew the pending interrupt; its cancel was
        /// sent. Nobody denied it.
        Withdrawn = "Withdrawn",
        /// The server no longer holds the prepared action under its id:
        /// nothing was sent for it.
        Voided = "Voided",
    }
}

crate::names! {
    /// What code found about the action; the table decides.
    pub enum ApprovalEvent {
        /// A prepare result in the current user turn names a positive id.
        Prepared = "prepared",
        /// A prepare result names id 0 or none: nothing to decide.
        PrepareNoop = "prepare_noop",
        /// A prepare answered, but not with the field its configuration
        /// names: whether anything waits is unknown (issue 33).
        PrepareUnread = "prepare_unread",
        /// The interrupt is committed and sent.
        InterruptShown = "interrupt_shown",
        Approve = "approve",
        Deny = "deny",
        /// A decision on an interrupt of an earlier user turn.
        ApproveStale = "approve_stale",
        /// The interrupt's expiry passed before a decision.
        Expired = "expired",
        /// The user sent a new message while the interrupt was pending.
        NewUserTurn = "new_user_turn",
        ConfirmAccepted = "confirm_accepted",
        ConfirmFailed = "confirm_failed",
        /// The status tool says the backend's worker completed the action.
        WorkerSucceeded = "worker_succeeded",
        WorkerFailed = "worker_failed",
        /// Start-up found the confirm sent and no answer stored.
        RestartInFlight = "restart_in_flight",
        /// The model planned the confirm tool.
        ModelConfirm = "model_confirm",
        /// The model planned the confirm tool in the step that prepares.
        ModelConfirmSameStep = "model_confirm_same_step",
        /// A planned call needs the user's approval of itself (a
        /// `before-call` tool, a destructive one, or an unannotated tool of
        /// an untrusted server); nothing was sent.
        CallHeld = "call_held",
        /// The approved held call was sent and answered.
        HeldCallReturned = "held_call_returned",
        /// The approved held call was sent and failed (or was refused).
        HeldCallFailed = "held_call_failed",
        /// It (or an answered question's call) went out and no answer came
        /// back: outcome unknown.
        HeldCallUnanswered = "held_call_unanswered",
        /// A tool's server asked the user something before it would
        /// answer (an `InputRequiredResult`, or an `elicitation/create`
        /// inside the open call).
        InputRequired = "input_required",
        /// The user answered the question: accept (with the answers),
        /// decline or cancel.
        Answered = "answered",
        /// A 2025-11-25 question whose open call died with the process.
        InputLost = "input_lost",
        /// An approve whose status check, before the confirm, finds that
        /// the id no longer names the action prepared: other arguments, or
        /// no longer pending (issue 34).
        ApproveChanged = "approve_changed",
        /// An answer to a 2025-11-25 question whose open call another live
        /// process holds (issue 34 item 10): only that process can send it.
        AnsweredElsewhere = "answered_elsewhere",
        /// The status tool says the action still runs (ACCEPTED, RUNNING…).
        StatusPending = "status_pending",
        /// The status tool's answer says nothing of how the action ended:
        /// the call failed, a tool error, or a word it does not know.
        StatusUnsaid = "status_unsaid",
    }
}

crate::names! {
    pub enum ApprovalEffect {
        /// Hold the action and suspend the turn at its interrupt.
        Suspend = "suspend",
        /// Send the confirm tool, once, with the previewed arguments.
        Confirm = "confirm",
        /// Send the cancel tool, so the backend action can never be confirmed.
        Cancel = "cancel",
        /// Ask the status tool, if one is configured.
        AskStatus = "ask-status",
        /// Tell the user nothing was prepared (the server's sentinel).
        TellNothingPrepared = "tell-nothing-prepared",
        /// Tell the user the prepare's answer could not be read: nothing
        /// was put to them, and whether anything waits is unknown.
        TellUnread = "tell-unread",
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Approval;

impl Protocol for Approval {
    const NAME: &'static str = "approval";
    type State = ApprovalState;
    type Event = ApprovalEvent;
    type Effect = ApprovalEffect;
    const INVARIANTS: &'static [Invariant<'static>] = &[
        Invariant::Forbid {
            event: "model_confirm",
            from: &[],
            why: "only a human's decision sends a confirm, never the model's own call",
        },
        Invariant::Forbid {
            event: "model_confirm_same_step",
            from: &[],
            why: "only a human's decision sends a confirm, never the model's own call",
        },
        Invariant::LegalOnlyWith {
            event: "approve",
            effect: "confirm",
            why: "an approve sends the confirm, never a cancel",
        },
        Invariant::LegalOnlyWith {
            event: "answered",
            effect: "confirm",
            why: "an answer is sent as the user gave it, once",
        },
        Invariant::LegalOnlyWith {
            event: "deny",
            effect: "cancel",
            why: "a deny sends the cancel, never the confirm",
        },
        Invariant::LegalOnlyWith {
            event: "call_held",
            effect: "suspend",
            why: "a call that needs approval is sent only after it: holding it suspends the turn",
        },
        Invariant::LegalOnlyWith {
            event: "input_required",
            effect: "suspend",
            why: "a question is answered only by the user: holding it suspends the turn at its interrupt",
        },
        Invariant::Forbid {
            event: "status_unsaid",
            from: &["Unknown"],
            why: "an answer that says nothing of the action never tells an unknown outcome as accepted or done",
        },
        Invariant::Forbid {
            event: "answered_elsewhere",
            from: &[],
            why: "only the process that holds a question's open call can send its answer",
        },
        Invariant::Forbid {
            event: "input_required",
            from: &["Confirming", "Accepted"],
            why: "an approved action's confirm that asks a question is not held: the decision was for the action, not for an answer",
        },
    ];
}
