//! A call held for the user's approval of itself (issue 17): which calls
//! wait is the approval policy, `tables/hold.ron` (a tool configured
//! `approval = "before-call"`, one that declares itself destructive, any
//! tool of an untrusted server, as shipped). Nothing is sent: the approval table's
//! `call_held` row suspends the turn at an interrupt that shows the exact
//! tool and arguments. Approve sends that exact call once, through the
//! normal result path; deny sends nothing.

use serde_json::{Map, Value};

use super::admit::Refusal;
use super::approvals::{Action, ActionKind, DecisionCall, Held};
use super::{Outcome, Stop, Turn};
use crate::judge::anchors::ActionOutcome;
use crate::judge::approval;
use crate::judge::narrowing::Gate;
use crate::judge::Anchor;
use crate::judge::{card, lang};
use crate::llm::PlannedCall;
use crate::protocols::approval::ApprovalEvent;
use crate::protocols::telemetry;
use crate::wire;

impl Turn<'_> {
    /// Holds `call` (with the arguments it would be sent with) when it
    /// needs approval of itself and the table's `call_held` row suspends;
    /// whether it was held. A decision's own call is never held again.
    pub(super) fn hold_call(
        &mut self,
        call: &PlannedCall,
        args: &Map<String, Value>,
    ) -> Result<Hold, Stop> {
        // Which calls wait is the approval policy's (`tables/hold.ron`): a
        // decision's own call and an export's confirm go out under their
        // own protocols (the hold binding requires them ranked first and
        // sent), the rest by configuration, trust and annotations.
        let reason = match self.hold_policy(&call.tool, true) {
            approval::HoldVerdict::Send | approval::HoldVerdict::SendOnce => return Ok(Hold::Send),
            approval::HoldVerdict::Hold(reason) => reason,
            approval::HoldVerdict::Refused(v) => {
                telemetry::violation(&v);
                return Ok(Hold::Refused(Box::new(Refusal {
                    table: "hold",
                    row_id: v.row_id.clone(),
                    detail: v.why.clone(),
                    anchor: Anchor::Refused {
                        tool: call.tool.clone(),
                        table: "hold".into(),
                        row_id: v.row_id.clone(),
                    },
                })));
            }
        };
        // An action this turn still settles is the machine asked: one
        // action is held at a time (`second-hold-while-…`). A settled one is
        // stored already; a new hold starts a machine of its own.
        let mut machine = match self.approvals.held.as_ref() {
            Some(h) if !h.machine.is_terminal() => h.machine.clone(),
            _ => self.agent.tables.approval.machine(),
        };
        // Every legal `call_held` row suspends (the approval binding's
        // invariant, checked when the table loads).
        let (row_id, why) = match machine.fire(ApprovalEvent::CallHeld) {
            Err(v) => {
                telemetry::violation(&v);
                (v.row_id.clone(), v.why.clone())
            }
            Ok(_) => {
                self.hold(call, args, reason, machine);
                return Ok(Hold::Held);
            }
        };
        Ok(Hold::Refused(Box::new(Refusal {
            table: "approval",
            row_id,
            detail: why,
            anchor: Anchor::Action {
                tool: call.tool.clone(),
                outcome: ActionOutcome::Withheld,
            },
        })))
    }

    /// What the approval policy (`tables/hold.ron`) says of a call of
    /// `tool` now, from the turn's facts: fired (`fire`: the call is being
    /// decided, its row counted) or only asked (it was let through already).
    pub(super) fn hold_policy(&self, tool: &str, fire: bool) -> approval::HoldVerdict {
        let trust = self.agent.tools.trust(tool);
        let facts = approval::HoldFacts {
            decision_call: self.approvals.running.is_some(),
            terminal_confirm: self.agent.terminals.confirmed_by(tool).is_some(),
            role: self.agent.roles.get(tool),
            trust: &trust,
        };
        let table = &self.agent.tables.hold;
        match fire {
            true => approval::hold_verdict(table, &facts),
            false => approval::would_hold(table, &facts),
        }
    }

    /// Holds `call` for the decision: its interrupt, and what settles it.
    fn hold(
        &mut self,
        call: &PlannedCall,
        args: &Map<String, Value>,
        reason: approval::HoldReason,
        machine: crate::protocols::Typed<crate::protocols::approval::Approval>,
    ) {
        tracing::info!(tool = %call.tool, reason = ?reason, "call held for approval");
        let interrupt_id = uuid::Uuid::new_v4().to_string();
        let expires_at = crate::store::now_unix_ms() + self.agent.limits.approval_ttl_ms();
        // The card asks in the user's terms, from the exact arguments; the
        // tool, and why it waits, are its detail line (issue 33 §5).
        let card = card::held_call_card(
            &self.agent.cards,
            lang::detect(&self.user_text),
            &call.tool,
            args,
            reason,
        );
        let mut interrupt = wire::Interrupt::of_call(
            &interrupt_id,
            &call.tool,
            args,
            card.summary,
            &["approve", "deny"],
            expires_at,
        );
        interrupt.detail = card.detail;
        self.approvals.held = Some(Held {
            interrupt_id,
            machine,
            stored: None,
            // A denial sends nothing (`run_decided_call` shows it not sent).
            action: Action::of_call(
                ActionKind::Call,
                &self.user_text,
                &call.tool,
                args,
                self.cursor.step,
                interrupt,
            ),
        });
    }

    /// A decision's call on a held call: approve sends exactly the held
    /// call, once, and its result is judged like any other; deny sends
    /// nothing and says so in a structured result naming the row. An
    /// answered question sends the call (or the open call's answer) once
    /// with the answer. `None` for every other call; `Some(None)`: the
    /// call asked again and is held at a new interrupt.
    pub(super) async fn run_decided_call(&mut self) -> Result<Option<Option<Outcome>>, Stop> {
        let Some((kind, interrupt_id, held_call, row_id)) = self.approvals.decided_call() else {
            return Ok(None);
        };
        let args = held_call.args.clone();
        let server = self.agent.tools.server_of(&held_call.tool);
        if !matches!((kind, &server), (DecisionCall::Confirm, Some(_))) {
            // The decided call is not sent: its answer goes nowhere, and a
            // question's open call is let go (its server is answered
            // `cancel`).
            self.approvals.answer = None;
            drop(self.agent.parked.take(&interrupt_id));
        }
        let (detail, outcome) = match (kind, server) {
            (DecisionCall::Confirm, Some(server)) => {
                let gate = Gate::new(&self.agent.tables.narrowing);
                return self
                    .fetch(&held_call, &server, args, None, gate)
                    .await
                    .map(Some);
            }
            (DecisionCall::Confirm, None) => (
                "approved, but no connected server offers the tool now, so it was not sent",
                ActionOutcome::CallFailed,
            ),
            _ => (
                "the call was not approved, so it was never sent",
                ActionOutcome::NotSent,
            ),
        };
        let refusal = Box::new(Refusal {
            table: "approval",
            row_id,
            detail: detail.into(),
            anchor: Anchor::Action {
                tool: held_call.tool.clone(),
                outcome,
            },
        });
        self.refuse(&held_call, args, refusal)
            .await
            .map(|o| Some(Some(o)))
    }
}

/// What becomes of a planned call that may need approval of itself.
pub(super) enum Hold {
    /// It needs none (or a decision queued it): send it.
    Send,
    /// Held at a new interrupt: nothing sent, the turn suspends.
    Held,
    /// The approval table refused to hold it (another action is held):
    /// nothing sent.
    Refused(Box<Refusal>),
}
