//! The approval protocol inside a turn (`tables/approval.ron`, issue 17):
//! a prepare result with a positive action id holds the action and
//! suspends the turn at its interrupt; a decision resumes it with the
//! confirm (or the cancel) as the step's next call, which only a decision
//! can queue. A model's call to a confirm tool is refused by the table.

use serde_json::{Map, Value};

use super::admit::Refusal;
use super::approvals::{Action, ActionKind, DecisionCall, Held};
use super::{Outcome, Stop, Turn};
use crate::agent::records::Record;
use crate::judge::anchors::ActionOutcome;
use crate::judge::approval::{self, ActionId, ToolRole};
use crate::judge::Anchor;
use crate::judge::{card, lang};
use crate::llm::PlannedCall;
use crate::mcp::ToolOutput;
use crate::protocols::approval::{Approval, ApprovalEffect, ApprovalEvent};
use crate::protocols::turn::TurnEvent;
use crate::protocols::{telemetry, Names, Typed, TypedStep};
use crate::wire;

impl Turn<'_> {
    /// After a plan is read: the approval driver orders its calls.
    pub(super) fn order_plan(&mut self) {
        (self.approvals).on_plan(&mut self.cursor.pending, &self.agent.roles);
    }

    /// Takes the next pending call, noting whether a decision queued it.
    pub(super) fn next_pending(&mut self) -> Option<PlannedCall> {
        self.approvals.take_next(&mut self.cursor.pending)
    }

    /// A model's call to a confirm tool: the approval table's refusal.
    pub(super) fn refuse_confirm(&self, call: &PlannedCall) -> Option<Box<Refusal>> {
        let table = &self.agent.tables.approval;
        let v = (self.approvals).on_model_call(table, &self.agent.roles, &call.tool)?;
        telemetry::violation(&v);
        let (row_id, why) = (v.row_id.clone(), v.why.clone());
        // Refused, never "failed": it did not leave turnstile.
        let anchor = Anchor::Refused {
            tool: call.tool.clone(),
            table: "approval".into(),
            row_id: row_id.clone(),
        };
        Some(Box::new(Refusal {
            table: "approval",
            row_id,
            detail: why,
            anchor,
        }))
    }

    /// After a call: a decision's call settles the held action; a prepare
    /// result with a positive id holds one and suspends the turn.
    pub(super) async fn classify_approval(
        &mut self,
        call: &PlannedCall,
        outcome: &Outcome,
    ) -> Result<Option<TurnEvent>, Stop> {
        if let Some(kind) = self.approvals.running.take() {
            self.settle(kind, outcome).await?;
            return Ok(None);
        }
        let Some(ToolRole::Prepare(role)) = self.agent.roles.get(&call.tool).cloned() else {
            return Ok(None);
        };
        let Outcome::Returned { first, .. } = outcome else {
            return Ok(None);
        };
        let id = approval::action_id(first, &role.action_id);
        let mut machine = self.agent.tables.approval.machine();
        let step = machine.fire(id.event()).map_err(Stop::Violation)?;
        if id == ActionId::Missing {
            // The tool answered, and not with the field its configuration
            // names: no card can be shown, and the operator must know why.
            let key = "approval.prepare.action_id";
            self.field_not_found(&call.tool, key, &role.action_id);
        }
        self.tell_what_was_not_held(&call.tool, first, step.effect);
        let (ActionId::Positive(action_id), Some(ApprovalEffect::Suspend)) = (id, step.effect)
        else {
            return Ok(None);
        };
        self.hold_prepared(call, &role, first, action_id, machine);
        Ok(Some(TurnEvent::ApprovalNeeded))
    }

    /// What the user is told of a prepare that holds nothing is the row's
    /// effect. (A failed call is told by its own anchor.)
    fn tell_what_was_not_held(
        &mut self,
        tool: &str,
        first: &ToolOutput,
        effect: Option<ApprovalEffect>,
    ) {
        let told = match effect {
            Some(ApprovalEffect::TellNothingPrepared) => Some(ActionOutcome::NothingPrepared),
            Some(ApprovalEffect::TellUnread) => Some(ActionOutcome::PrepareUnread),
            _ => None,
        };
        let (Some(outcome), false) = (told, first.is_error) else {
            return;
        };
        self.anchor(Anchor::Action {
            tool: tool.to_string(),
            outcome,
        });
        // Why nothing was prepared, in the server's words ("seat taken"),
        // when it says.
        if let Some(reason) = approval::told_reason(first) {
            let tool = tool.to_string();
            self.anchor(Anchor::ServerReason { tool, reason });
        }
    }

    /// Holds a prepared action at a new interrupt: its card, the confirm,
    /// cancel and status calls a decision will send, and its machine.
    fn hold_prepared(
        &mut self,
        call: &PlannedCall,
        role: &approval::Prepare,
        first: &ToolOutput,
        action_id: u64,
        machine: Typed<Approval>,
    ) {
        let interrupt_id = uuid::Uuid::new_v4().to_string();
        let mut base = Map::new();
        base.insert(role.id_arg().to_string(), Value::from(action_id));
        let mut confirm_args = base.clone();
        if let Some(key) = self.idempotency_param(&role.confirm) {
            // The interrupt id is the confirm's idempotency key.
            confirm_args.insert(key, Value::String(interrupt_id.clone()));
        }
        let expires_at = crate::store::now_unix_ms() + self.agent.limits.approval_ttl_ms();
        // The card asks in the user's terms, from what was prepared; the
        // tool names are its detail line (issue 33 §5).
        let prepared = approval::fields(first)
            .map(|f| card::prepared_fields(&f, &role.action_id))
            .unwrap_or_default();
        let card = card::prepared_card(
            &self.agent.cards,
            lang::detect(&self.user_text),
            &card::PreparedAction {
                prepare: &call.tool,
                args: &call.args,
                prepared: &prepared,
                action_id,
                confirm: &role.confirm,
                cancel: &role.cancel,
            },
        );
        let interrupt = wire::Interrupt {
            interrupt_id: interrupt_id.clone(),
            tool: role.confirm.clone(),
            args: confirm_args.clone(),
            action: wire::ActionPreview {
                tool: call.tool.clone(),
                args: call.args.clone(),
                action_id: Some(action_id),
                prepared,
            },
            summary: card.summary,
            detail: card.detail,
            choices: vec!["approve".into(), "deny".into()],
            expires_at,
            input: None,
        };
        self.approvals.held = Some(Held {
            interrupt_id,
            machine,
            stored: None,
            action: Action {
                kind: ActionKind::Prepared,
                user_text: self.user_text.clone(),
                prepare: call.tool.clone(),
                prepare_args: call.args.clone(),
                action_id,
                confirm: role.confirm.clone(),
                confirm_args,
                cancel: role.cancel.clone(),
                cancel_args: base.clone(),
                status: role.status.clone(),
                status_args: base,
                calls_before: 0,
                step: self.cursor.step,
                interrupt,
                input: None,
            },
        });
    }

    /// A configured result field (`key` = `path`) that `tool`'s answer did
    /// not hold: logged and listed on its server in `GET /readyz`.
    pub(super) fn field_not_found(&self, tool: &str, key: &str, path: &str) {
        let server = self.agent.tools.server_of(tool).unwrap_or_default();
        self.agent.problems.not_found(&server, tool, key, path);
    }

    /// The parameter of `tool` that takes an idempotency key, if its input
    /// schema has one.
    fn idempotency_param(&self, tool: &str) -> Option<String> {
        let info = self
            .agent
            .tools
            .list()
            .into_iter()
            .find(|t| t.name == tool)?;
        let props = info.input_schema.get("properties")?.as_object()?;
        ["idempotencyKey", "idempotency_key"]
            .into_iter()
            .find(|k| props.contains_key(*k))
            .map(str::to_string)
    }

    /// The `suspend` effect: the interrupt is committed with every machine
    /// and the pending approval in one transaction, then sent; the stream
    /// ends with `done` and the turn waits.
    pub(super) async fn suspend(&mut self) -> Result<(), Stop> {
        let shown = self.approvals.on_shown(self.cursor.calls);
        let Some(interrupt) = shown.map_err(Stop::Violation)? else {
            return Err(Stop::NoCallPending);
        };
        tracing::info!(tool = %interrupt.tool, "turn suspended for approval");
        let record = Record::Interrupt(&interrupt).message();
        // Committed with `done` below, nothing waited on between.
        self.stage(wire::Frame::Interrupt(interrupt.clone()), vec![record])
            .await?;
        let awaiting = Record::Awaiting {
            interrupt_id: &interrupt.interrupt_id,
        }
        .message();
        let done = wire::Frame::Done(wire::Done {
            turn_id: self.turn_id.clone(),
        });
        self.step(done, vec![awaiting]).await
    }

    /// A decision's call returned: the approval table on what it says, the
    /// new state stored, the anchor the responder gets, and a status call
    /// queued while the backend has not said how it ended.
    async fn settle(&mut self, kind: DecisionCall, outcome: &Outcome) -> Result<(), Stop> {
        let out = match outcome {
            Outcome::Returned { first, .. } => Some(first.as_ref()),
            _ => None,
        };
        let mut ask_status = false;
        if let Some(event) = self.approvals.on_outcome(kind, outcome) {
            let step = self.advance_held(event).await?;
            ask_status = step.is_some_and(|s| s.effect == Some(ApprovalEffect::AskStatus));
        }
        let (Some(told), Some(held)) = (self.approvals.told(), self.approvals.held.as_ref()) else {
            return Ok(());
        };
        let status = held.action.status.clone();
        let status_args = held.action.status_args.clone();
        let tool = held.action.prepare.clone();
        self.tell_how_it_ended(tool, told, out);
        // The row says whether to ask again (`ask-status`); the limits say
        // how often and how far apart.
        let poll = (self.approvals).poll_due(ask_status, self.agent.limits.status.per_turn);
        if let (true, Some(status)) = (poll, status) {
            if kind == DecisionCall::Status {
                // Nothing held waits out the gap (ADR 0031).
                self.flush().await?;
                tokio::time::sleep(self.agent.limits.status.gap).await;
            }
            self.queue_decision(DecisionCall::Status, status, status_args);
        }
        Ok(())
    }

    /// Fires `event` on the held action's machine and swaps its stored
    /// state to the new one (one compare-and-swap). `None`: nothing is held.
    pub(super) async fn advance_held(
        &mut self,
        event: ApprovalEvent,
    ) -> Result<Option<TypedStep<Approval>>, Stop> {
        let Some(swap) = self.approvals.fire_held(event).map_err(Stop::Violation)? else {
            return Ok(None);
        };
        self.agent
            .store
            .swap_approval(
                &swap.interrupt_id,
                swap.from,
                swap.to.name(),
                &swap.snapshot,
            )
            .await?;
        self.approvals.stored_as(swap.to);
        Ok(Some(swap.step))
    }

    /// One outcome per action: the latest replaces what was said before
    /// (each settle replaces the one before, so there is at most one). A
    /// failure is told with the server's reason, when it gave one ("seat
    /// taken"): the user reads why, not only that it failed.
    fn tell_how_it_ended(&mut self, tool: String, told: ActionOutcome, out: Option<&ToolOutput>) {
        while let Some(i) = self
            .evidence
            .anchors
            .iter()
            .position(|a| matches!(a, Anchor::Action { .. } | Anchor::ServerReason { .. }))
        {
            self.evidence.anchors.remove(i);
            self.evidence.origins.remove(i);
        }
        self.anchor(Anchor::Action {
            tool: tool.clone(),
            outcome: told,
        });
        let failed = matches!(
            told,
            ActionOutcome::Failed | ActionOutcome::CallFailed | ActionOutcome::AnswerFailed
        );
        if let Some(reason) = out.filter(|_| failed).and_then(approval::told_reason) {
            self.anchor(Anchor::ServerReason { tool, reason });
        }
    }
}
