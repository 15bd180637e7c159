//! The approval protocol's driver (issue 36 §2): the action the turn holds
//! and the calls a decision queued, and what a call came back with turned
//! into `tables/approval.ron`'s events. It sends nothing, stores nothing
//! and says nothing: `approve.rs`, `ask.rs`, `hold_call.rs` and `resume.rs`
//! perform the effects (a card, a store swap, an anchor, a status poll)
//! with what it hands back. It imports nothing of the turn but its state.

use std::collections::VecDeque;

use serde_json::{Map, Value};

use super::approvals::{ActionKind, Approvals, DecisionCall};
use super::state::Outcome;
use crate::fsm::Violation;
use crate::judge::anchors::ActionOutcome;
use crate::judge::approval::{self, Roles, ToolRole};
use crate::judge::Anchor;
use crate::llm::PlannedCall;
use crate::protocols::approval::{Approval, ApprovalEvent, ApprovalState};
use crate::protocols::{Bound, Names, TypedStep};
use crate::store::NewApproval;
use crate::wire;

/// A fired event's new state, to be swapped in the store (one
/// compare-and-swap from the state it was stored in).
pub(super) struct Swap {
    pub(super) step: TypedStep<Approval>,
    pub(super) interrupt_id: String,
    /// The state as stored before (`""`: not stored yet).
    pub(super) from: &'static str,
    pub(super) to: ApprovalState,
    pub(super) snapshot: Value,
}

/// What a decided question's call carries out, and where it goes.
pub(super) struct DecidedAnswer {
    pub(super) answer: crate::mcp::InputRound,
    /// 2025-11-25: the call is open in this process, under this interrupt.
    pub(super) nested: Option<String>,
}

impl Approvals {
    /// A plan was read: whether its step prepares, and its calls to a
    /// confirm tool first, so that their refusals are shown before a
    /// prepare suspends the turn (they are never run either way). A new
    /// plan queues no decision's call.
    pub(super) fn on_plan(&mut self, pending: &mut VecDeque<PlannedCall>, roles: &Roles) {
        self.step_prepares = pending
            .iter()
            .any(|c| matches!(roles.get(&c.tool), Some(ToolRole::Prepare(_))));
        let (confirms, rest): (Vec<_>, Vec<_>) =
            pending.drain(..).partition(|c| roles.is_confirm(&c.tool));
        *pending = confirms.into_iter().chain(rest).collect();
        self.queued.clear();
    }

    /// The next pending call, noting whether a decision queued it.
    pub(super) fn take_next(&mut self, pending: &mut VecDeque<PlannedCall>) -> Option<PlannedCall> {
        let call = pending.pop_front()?;
        self.running = self.queued.pop_front();
        Some(call)
    }

    /// A model's call to `tool`: the approval table's refusal when it is a
    /// confirm (which only a decision may send). `None`: not a confirm, or
    /// a decision queued it.
    pub(super) fn on_model_call(
        &self,
        table: &Bound<Approval>,
        roles: &Roles,
        tool: &str,
    ) -> Option<Box<Violation>> {
        if self.running.is_some() || !roles.is_confirm(tool) {
            return None;
        }
        let event = match self.step_prepares {
            true => ApprovalEvent::ModelConfirmSameStep,
            false => ApprovalEvent::ModelConfirm,
        };
        let Err(v) = table.machine().fire(event) else {
            unreachable!(
                "the approval binding forbids the model's confirm in every state (checked at load)"
            )
        };
        Some(v)
    }

    /// What a decision's call came back with, as an approval event: its
    /// confirm's or status tool's answer. `None` for a cancel (the action's
    /// state does not wait on its answer), or when nothing is held.
    pub(super) fn on_outcome(
        &self,
        kind: DecisionCall,
        outcome: &Outcome,
    ) -> Option<ApprovalEvent> {
        let held = self.held.as_ref()?.action.kind;
        decision_event(kind, held, outcome)
    }

    /// Fires `event` on the held action's machine. The caller swaps the
    /// stored state and then calls [`Approvals::stored_as`]. `None`:
    /// nothing is held.
    pub(super) fn fire_held(
        &mut self,
        event: ApprovalEvent,
    ) -> Result<Option<Swap>, Box<Violation>> {
        let Some(held) = self.held.as_mut() else {
            return Ok(None);
        };
        let step = held.machine.fire(event)?;
        Ok(Some(Swap {
            step,
            interrupt_id: held.interrupt_id.clone(),
            from: held.stored.map_or("", Names::name),
            to: held.machine.state(),
            snapshot: serde_json::to_value(held.machine.snapshot()).unwrap_or(Value::Null),
        }))
    }

    /// The swap won: the held action is stored in `state`.
    pub(super) fn stored_as(&mut self, state: ApprovalState) {
        if let Some(held) = self.held.as_mut() {
            held.stored = Some(state);
        }
    }

    /// How the held action ended, in the words code tells it, by the state
    /// its machine reached.
    pub(super) fn told(&self) -> Option<ActionOutcome> {
        let held = self.held.as_ref()?;
        let connect = (held.action.input.as_ref()).is_some_and(|i| i.is_connect());
        if connect {
            let accepted = self.connect_answer.as_deref() == Some("accept");
            return Some(told_connect(held.machine.state(), accepted));
        }
        Some(told_outcome(held.action.kind, held.machine.state()))
    }

    /// Whether the row's `ask-status` is followed by one more status call:
    /// the limits say how many a turn may make. Counts it if so.
    pub(super) fn poll_due(&mut self, ask_status: bool, per_turn: u32) -> bool {
        let due = ask_status && self.polls < per_turn;
        self.polls += u32::from(due);
        due
    }

    /// The held action is shown (`interrupt_shown`): its machine fired, its
    /// state and the pending approval to insert with the next step noted.
    /// The interrupt, or `None` when nothing is held.
    pub(super) fn on_shown(
        &mut self,
        calls_before: usize,
    ) -> Result<Option<wire::Interrupt>, Box<Violation>> {
        let Some(held) = self.held.as_mut() else {
            return Ok(None);
        };
        held.machine.fire(ApprovalEvent::InterruptShown)?;
        held.action.calls_before = calls_before;
        let state = held.machine.state();
        held.stored = Some(state);
        let interrupt = held.action.interrupt.clone();
        self.write = Some(NewApproval {
            interrupt_id: held.interrupt_id.clone(),
            state: state.name().to_string(),
            machine: serde_json::to_value(held.machine.snapshot()).unwrap_or(Value::Null),
            action: serde_json::to_value(&held.action).unwrap_or(Value::Null),
            expires_at: interrupt.expires_at,
        });
        Ok(Some(interrupt))
    }

    /// The held question whose decided call is `tool` with `args` — the
    /// question's exact call, queued by the decision — and the answer it
    /// carries (taken: it goes out once). `None`: the call goes out fresh,
    /// never with an answer meant for another.
    pub(super) fn answer_for(
        &mut self,
        tool: &str,
        args: &Map<String, Value>,
    ) -> Option<DecidedAnswer> {
        let decided = self.running == Some(DecisionCall::Confirm);
        let held = self.held.as_ref().filter(|h| {
            decided
                && h.action.kind == ActionKind::Input
                && h.action.confirm == tool
                && &h.action.confirm_args == args
        })?;
        let nested = (held.action.input.as_ref())
            .is_some_and(|i| i.nested)
            .then(|| held.interrupt_id.clone());
        let answer = self.answer.take()?;
        let connect = crate::agent::connections::CONNECT_KEY;
        self.connect_answer = (answer.responses.get(connect))
            .and_then(|r| r.get("action"))
            .and_then(Value::as_str)
            .map(str::to_string);
        Some(DecidedAnswer { answer, nested })
    }

    /// A question asked while an approved action's confirm is out: the
    /// table's refusal (`second-question-while-confirming`). `None`: the
    /// asking call is not such a confirm.
    pub(super) fn on_question_beside_action(&self) -> Option<Box<Violation>> {
        let decided = self.running == Some(DecisionCall::Confirm);
        let held =
            (self.held.as_ref()).filter(|h| decided && h.action.kind == ActionKind::Prepared)?;
        let Err(v) = held.machine.clone().fire(ApprovalEvent::InputRequired) else {
            unreachable!("the approval binding forbids a question beside an approved action (checked at load)")
        };
        Some(v)
    }

    /// A decided call asked again: it is no longer running, and the held
    /// question settles as a call that returned (`held_call_returned`).
    /// How many answers it had been given; `None` when the call that asks
    /// is not the decided one.
    pub(super) fn on_asked_again(&mut self) -> Option<u32> {
        if self.running != Some(DecisionCall::Confirm) {
            return None;
        }
        self.running = None;
        let held = self.held.as_ref()?;
        Some(held.action.input.as_ref().map_or(0, |i| i.rounds))
    }

    /// The held call a decision runs: exactly the held call (whatever the
    /// queued slot carries), the row that decided, and the kind of the
    /// decision's call, and the held interrupt's id. `None` when no held
    /// call is being decided.
    pub(super) fn decided_call(&self) -> Option<(DecisionCall, String, PlannedCall, String)> {
        let kind = self.running?;
        let held = (self.held.as_ref())
            .filter(|h| matches!(h.action.kind, ActionKind::Call | ActionKind::Input))?;
        let call = PlannedCall {
            id: None,
            tool: held.action.confirm.clone(),
            args: held.action.confirm_args.clone(),
            invalid_args: None,
        };
        let row_id = (held.machine.untyped().trace_ids().last())
            .unwrap_or_default()
            .to_string();
        Some((kind, held.interrupt_id.clone(), call, row_id))
    }
}

/// What a decision's call came back with, as an approval event.
fn decision_event(
    kind: DecisionCall,
    held: ActionKind,
    outcome: &Outcome,
) -> Option<ApprovalEvent> {
    let out = match outcome {
        Outcome::Returned { first, .. } => Some(first.as_ref()),
        _ => None,
    };
    let unanswered = matches!(
        outcome,
        Outcome::Failed {
            anchor: Anchor::OutcomeUnknown { .. },
            ..
        }
    );
    Some(match (kind, out) {
        (DecisionCall::Cancel, _) => return None,
        // A held call (or an answered question's call) is its own confirm:
        // it ran, or it did not.
        (DecisionCall::Confirm, Some(_)) if held != ActionKind::Prepared => {
            ApprovalEvent::HeldCallReturned
        }
        // It went out and no answer came back: not a failure.
        (DecisionCall::Confirm, None) if held != ActionKind::Prepared && unanswered => {
            ApprovalEvent::HeldCallUnanswered
        }
        (DecisionCall::Confirm, None) if held != ActionKind::Prepared => {
            ApprovalEvent::HeldCallFailed
        }
        (DecisionCall::Confirm, Some(out)) => approval::confirm_event(out),
        (DecisionCall::Confirm, None) => ApprovalEvent::ConfirmFailed,
        (DecisionCall::Status, Some(out)) => approval::status_event(out),
        // A status call that failed says nothing of how the action ended.
        (DecisionCall::Status, None) => ApprovalEvent::StatusUnsaid,
    })
}

/// How an action of this kind ended, in the words code tells it, by the
/// state its machine reached.
fn told_outcome(kind: ActionKind, state: ApprovalState) -> ActionOutcome {
    match (kind, state) {
        (ActionKind::Input, state) => settled_question(state),
        (ActionKind::Call, ApprovalState::Completed) => ActionOutcome::Ran,
        (ActionKind::Call, ApprovalState::Denied) => ActionOutcome::NotSent,
        (ActionKind::Call, ApprovalState::Expired) => ActionOutcome::NotSentExpired,
        (ActionKind::Call, ApprovalState::Failed) => ActionOutcome::CallFailed,
        (_, ApprovalState::Accepted) => ActionOutcome::Accepted,
        (_, ApprovalState::Completed) => ActionOutcome::Completed,
        (_, ApprovalState::Failed) => ActionOutcome::Failed,
        (_, ApprovalState::Denied) => ActionOutcome::Cancelled,
        (_, ApprovalState::Expired) => ActionOutcome::Expired,
        _ => ActionOutcome::Unknown,
    }
}

/// How a call held at a Connect card ended: `accepted` is whether the
/// card was answered `accept` (the sign-in's callback, or the user).
fn told_connect(state: ApprovalState, accepted: bool) -> ActionOutcome {
    match state {
        ApprovalState::Completed => ActionOutcome::Connected,
        ApprovalState::Failed if accepted => ActionOutcome::ConnectCallFailed,
        ApprovalState::Failed => ActionOutcome::ConnectDeclined,
        ApprovalState::Expired => ActionOutcome::ConnectExpired,
        ApprovalState::Denied | ApprovalState::Withdrawn => ActionOutcome::QuestionWithdrawn,
        _ => ActionOutcome::Unknown,
    }
}

/// The outcome a settled question's anchor names.
pub(super) fn settled_question(state: ApprovalState) -> ActionOutcome {
    match state {
        ApprovalState::Completed => ActionOutcome::Answered,
        ApprovalState::Failed => ActionOutcome::AnswerFailed,
        ApprovalState::Denied | ApprovalState::Withdrawn => ActionOutcome::QuestionWithdrawn,
        ApprovalState::Expired => ActionOutcome::QuestionExpired,
        _ => ActionOutcome::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::approval::Prepare;
    use crate::protocols::TableSet;

    fn call(tool: &str) -> PlannedCall {
        PlannedCall {
            id: None,
            tool: tool.into(),
            args: Map::new(),
            invalid_args: None,
        }
    }

    fn failed(tool: &str, anchor: Anchor) -> Outcome {
        Outcome::Failed {
            call: crate::llm::CallRecord {
                id: "c1".into(),
                tool: tool.into(),
                args: Map::new(),
                digest: crate::judge::digest::Digest::failed(tool, "down"),
            },
            anchor,
        }
    }

    /// The approval driver decides by its table and the configured roles
    /// alone: no store, no anchor, no I/O.
    #[test]
    fn the_approval_driver_decides_by_its_table_alone() {
        let table: Bound<Approval> = TableSet::builtin().unwrap().bound().unwrap();
        let mut roles = Roles::default();
        let prepare = Prepare {
            action_id: "actionId".into(),
            confirm: "confirm_seat".into(),
            cancel: "cancel_seat".into(),
            status: Some("seat_status".into()),
        };
        roles.prepare("reserve_seat", prepare);
        let mut approvals = Approvals::default();
        approvals.queued.push_back(DecisionCall::Status);

        // A model's plan: its confirm goes first (to be refused before the
        // prepare suspends), the step prepares, nothing a decision queued
        // survives a new plan.
        let mut pending: VecDeque<PlannedCall> =
            [call("reserve_seat"), call("confirm_seat")].into();
        approvals.on_plan(&mut pending, &roles);
        let order: Vec<&str> = pending.iter().map(|c| c.tool.as_str()).collect();
        assert_eq!(order, ["confirm_seat", "reserve_seat"]);
        assert!(approvals.step_prepares && approvals.queued.is_empty());

        // The model's confirm is refused by the same-step row; its prepare
        // is not the driver's to refuse.
        let next = approvals.take_next(&mut pending).unwrap();
        assert_eq!(approvals.running, None);
        let v = approvals.on_model_call(&table, &roles, &next.tool).unwrap();
        assert_eq!(
            (v.table.as_str(), v.event.as_str()),
            ("approval", "model_confirm_same_step")
        );
        assert!(approvals
            .on_model_call(&table, &roles, "reserve_seat")
            .is_none());

        // Nothing held: no event, nothing told, nothing to show.
        let unknown = Anchor::OutcomeUnknown {
            tool: "confirm_seat".into(),
        };
        let out = failed("confirm_seat", unknown);
        assert_eq!(approvals.on_outcome(DecisionCall::Confirm, &out), None);
        assert!(approvals.told().is_none());
        assert!(approvals.on_shown(3).unwrap().is_none());

        // Status polls: the row asks, the limit counts.
        assert!(approvals.poll_due(true, 2) && approvals.poll_due(true, 2));
        assert!(!approvals.poll_due(true, 2) && !approvals.poll_due(false, 9));
    }

    /// Each decision's call maps to one approval event, by what came back:
    /// a cancel's answer is waited on by nothing; a status call that failed
    /// says nothing (`status_unsaid`), never "still accepted".
    #[test]
    fn a_decision_calls_outcome_is_one_event() {
        let unknown = || Anchor::OutcomeUnknown { tool: "t".into() };
        let failed_call = || Anchor::ToolFailed { tool: "t".into() };
        let cases = [
            (DecisionCall::Cancel, ActionKind::Prepared, unknown(), None),
            (
                DecisionCall::Status,
                ActionKind::Prepared,
                failed_call(),
                Some(ApprovalEvent::StatusUnsaid),
            ),
            (
                DecisionCall::Confirm,
                ActionKind::Prepared,
                failed_call(),
                Some(ApprovalEvent::ConfirmFailed),
            ),
            (
                DecisionCall::Confirm,
                ActionKind::Call,
                unknown(),
                Some(ApprovalEvent::HeldCallUnanswered),
            ),
            (
                DecisionCall::Confirm,
                ActionKind::Input,
                failed_call(),
                Some(ApprovalEvent::HeldCallFailed),
            ),
        ];
        for (kind, held, anchor, want) in cases {
            assert_eq!(
                decision_event(kind, held, &failed("t", anchor)),
                want,
                "{kind:?} on {held:?}"
            );
        }
        assert_eq!(
            told_outcome(ActionKind::Call, ApprovalState::Denied),
            ActionOutcome::NotSent
        );
        assert_eq!(
            told_outcome(ActionKind::Input, ApprovalState::Expired),
            ActionOutcome::QuestionExpired
        );
    }
}
