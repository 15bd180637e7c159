//! A call held for the user's approval of itself (issue 17): a tool
//! configured `approval = "before-call"`, one that declares
//! `destructiveHint: true`, or an unannotated tool of an untrusted server
//! (`judge::approval::hold_reason`). Nothing is sent: the approval table's
//! `call_held` row suspends the turn at an interrupt that shows the exact
//! tool and arguments. Approve sends that exact call once, through the
//! normal result path; deny sends nothing.

use serde_json::{Map, Value};

use super::admit::Refusal;
use super::held::{Action, ActionKind, DecisionCall, Held};
use super::{Outcome, Stop, Turn};
use crate::judge::anchors::ActionOutcome;
use crate::judge::approval;
use crate::judge::narrowing::Gate;
use crate::judge::Anchor;
use crate::llm::PlannedCall;
use crate::protocols::approval::{ApprovalEffect, ApprovalEvent};
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
    ) -> Result<bool, Stop> {
        if self.approvals.running.is_some() {
            return Ok(false);
        }
        let trust = self.agent.tools.trust(&call.tool);
        let Some(reason) = approval::hold_reason(self.agent.roles.get(&call.tool), &trust) else {
            return Ok(false);
        };
        let mut machine = self.agent.tables.approval.machine();
        let step = machine
            .fire(ApprovalEvent::CallHeld)
            .map_err(Stop::Violation)?;
        telemetry::record(machine.snapshot());
        if step.effect != Some(ApprovalEffect::Suspend) {
            return Ok(false);
        }
        tracing::info!(tool = %call.tool, reason = ?reason, "call held for approval");
        let interrupt_id = uuid::Uuid::new_v4().to_string();
        let expires_at = crate::store::now_unix_ms() + self.agent.limits.approval_ttl_ms();
        let interrupt = wire::Interrupt {
            interrupt_id: interrupt_id.clone(),
            tool: call.tool.clone(),
            args: args.clone(),
            action: wire::ActionPreview {
                tool: call.tool.clone(),
                args: args.clone(),
                action_id: None,
            },
            summary: format!(
                "Approve {}: nothing has been sent; on approval it runs once with the arguments shown ({}).",
                call.tool,
                reason.why()
            ),
            choices: vec!["approve".into(), "deny".into()],
            expires_at,
        };
        self.approvals.held = Some(Held {
            interrupt_id,
            machine,
            stored: None,
            action: Action {
                kind: ActionKind::Call,
                user_text: self.user_text.clone(),
                prepare: call.tool.clone(),
                prepare_args: args.clone(),
                action_id: 0,
                // The call is its own confirm; a denial queues it as the
                // "cancel", which sends nothing (`run_decided_call`).
                confirm: call.tool.clone(),
                confirm_args: args.clone(),
                cancel: call.tool.clone(),
                cancel_args: args.clone(),
                status: None,
                status_args: Map::new(),
                calls_before: 0,
                step: self.cursor.step,
                interrupt,
            },
        });
        Ok(true)
    }

    /// A decision's call on a held call: approve sends exactly the held
    /// call, once, and its result is judged like any other; deny sends
    /// nothing and says so in a structured result naming the row.
    /// `None` for every other call.
    pub(super) async fn run_decided_call(
        &mut self,
        call: &PlannedCall,
    ) -> Result<Option<Outcome>, Stop> {
        let Some(kind) = self.approvals.running else {
            return Ok(None);
        };
        let Some(held) = self
            .approvals
            .held
            .as_ref()
            .filter(|h| h.action.kind == ActionKind::Call)
        else {
            return Ok(None);
        };
        let args = held.action.confirm_args.clone();
        if kind == DecisionCall::Confirm {
            let server = self.agent.tools.server_of(&call.tool).unwrap_or_default();
            let gate = Gate::new(&self.agent.tables.narrowing);
            return self.fetch(call, &server, args, None, gate).await.map(Some);
        }
        let machine = held.machine.untyped();
        let row_id = machine.trace_ids().last().unwrap_or_default().to_string();
        let refusal = Box::new(Refusal {
            table: "approval",
            row_id,
            detail: "the call was not approved, so it was never sent".into(),
            anchor: Anchor::Action {
                tool: call.tool.clone(),
                outcome: ActionOutcome::NotSent,
            },
        });
        self.refuse(call, args, refusal).await.map(Some)
    }
}
