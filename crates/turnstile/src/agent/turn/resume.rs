//! The stream a decision resumes (issue 17): it starts with the decision's
//! record and goes on with its effect, the confirm or the cancel, queued as
//! the step's next call; only a decision can queue one.

use serde_json::{Map, Value};

use super::approvals::{Decided, DecisionCall, Held};
use super::{Stop, Turn};
use crate::agent::records::Record;
use crate::llm::PlannedCall;
use crate::protocols::approval::ApprovalEffect;
use crate::protocols::turn::TurnEvent;
use crate::protocols::Names;
use crate::wire;

impl Turn<'_> {
    /// Puts a decision's call at the front of the step.
    pub(super) fn queue_decision(
        &mut self,
        kind: DecisionCall,
        tool: String,
        args: Map<String, Value>,
    ) {
        self.cursor.pending.push_front(PlannedCall {
            id: None,
            tool,
            args,
            invalid_args: None,
        });
        self.approvals.queued.push_front(kind);
    }

    /// The stream a decision resumes: it starts with the decision's record
    /// and goes on with its effect, the confirm or the cancel, queued as
    /// the step's next call; the turn table's `approved` or `denied` row
    /// takes it from the suspended state.
    pub(super) async fn open_decision(&mut self, d: Decided) -> Result<TurnEvent, Stop> {
        self.ledger.committed = (0, self.machine.untyped().trace().len());
        let state = d.machine.state();
        let start = wire::Frame::Start(wire::Start {
            turn_id: self.turn_id.clone(),
            thread_id: self.thread_id.clone(),
        });
        let record = Record::Decision {
            interrupt_id: &d.approval.interrupt_id,
            decision: d.decision,
            state: state.name(),
        }
        .message();
        // Committed with the decision's call (its intent) or whatever the
        // turn shows next, before anything leaves (ADR 0031).
        self.stage(start, vec![record]).await?;
        let limits = self.agent.limits;
        let (store, thread) = (&self.agent.store, &self.thread_id);
        self.thread.history =
            crate::agent::history::read(store, thread, &self.turn_id, limits.history_bytes).await?;
        let action = d.action;
        self.approvals.answer = d.answer;
        self.cursor.calls = action.calls_before;
        self.cursor.step = action.step;
        let (kind, tool, args, event) = match d.effect {
            ApprovalEffect::Confirm => (
                DecisionCall::Confirm,
                action.confirm.clone(),
                action.confirm_args.clone(),
                TurnEvent::Approved,
            ),
            _ => (
                DecisionCall::Cancel,
                action.cancel.clone(),
                action.cancel_args.clone(),
                TurnEvent::Denied,
            ),
        };
        self.approvals.held = Some(Held {
            interrupt_id: d.approval.interrupt_id.clone(),
            machine: d.machine,
            stored: Some(state),
            action,
        });
        self.queue_decision(kind, tool, args);
        Ok(event)
    }
}
