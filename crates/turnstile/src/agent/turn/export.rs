//! The export protocol inside a turn (`tables/export.ron`, issue 18, seeds
//! 000/001): a preview tool's answer starts an export machine; its confirm
//! may run only in a later loop step, after the model has seen the preview;
//! a confirm's answer that `judge::capability` accepts is delivered by code
//! (the `deliver` effect of both the export and the turn table) and the turn
//! ends with no model call after it. Anything the validator refuses takes
//! the normal error path. A follow-up that asks for the link again is
//! answered from the stored delivery while it lives.

use serde_json::Value;

use super::admit::Refusal;
use super::export_driver::LinkAgain;
use super::{Outcome, Stop, Turn};
use crate::agent::records::Record;
use crate::judge::approval;
use crate::judge::Anchor;
use crate::llm::PlannedCall;
use crate::mcp::ToolOutput;
use crate::protocols::telemetry;
use crate::protocols::turn::TurnEvent;
use crate::wire;

impl Turn<'_> {
    /// A model call is about to be made: the export driver's machine is
    /// told; one that forbids it stops the turn.
    pub(super) fn export_model_call(&mut self) -> Result<(), Stop> {
        self.exports.on_model_call().map_err(Stop::Violation)
    }

    /// After a plan is read: the export driver orders the step's calls.
    pub(super) fn order_exports(&mut self) {
        let terminals = &self.agent.terminals;
        self.exports.on_plan(terminals, &mut self.cursor.pending);
    }

    /// A planned call to a terminal flow's confirm: the export table
    /// decides whether it is sent. A refusal is a structured
    /// `INVALID_TOOL_SEQUENCE` result naming the row; nothing is sent.
    pub(super) fn refuse_export(&mut self, call: &PlannedCall) -> Option<Box<Refusal>> {
        self.agent.terminals.confirmed_by(&call.tool)?;
        let table = &self.agent.tables.export;
        let v = self.exports.on_confirm_planned(table, &call.tool).err()?;
        telemetry::violation(&v);
        // Refused, never "failed": it did not leave turnstile.
        let anchor = Anchor::Refused {
            tool: call.tool.clone(),
            table: "export".into(),
            row_id: v.row_id.clone(),
        };
        Some(Box::new(Refusal {
            table: "export",
            row_id: v.row_id.clone(),
            detail: format!("INVALID_TOOL_SEQUENCE: {}", v.why),
            anchor,
        }))
    }

    /// A confirm's answer, before its result frame is written: the
    /// validator's verdict, kept by the export driver. A refused capability
    /// is the page's failure (its frame says `ok: false`); the rule that
    /// refused it is logged, never the URL.
    pub(super) fn capability_failure(
        &mut self,
        tool: &str,
        out: &ToolOutput,
    ) -> Option<crate::judge::page::Failure> {
        let flow = self.agent.terminals.confirmed_by(tool)?;
        let verdict = self.exports.on_confirm_answer(flow, tool, out)?;
        let failure = verdict.as_ref().err().map(|r| {
            tracing::warn!(tool = %tool, why = r.why(), "capability refused: the normal error path");
            crate::judge::page::Failure {
                summary: format!("not a download link this server may deliver: {}", r.why()),
                note: "its answer is not a download link this server may deliver",
                anchor: Anchor::ToolFailed {
                    tool: tool.to_string(),
                },
            }
        });
        let answer = Value::Object(approval::fields(out).unwrap_or_default());
        if flow.rule.url_field_missing(&answer) {
            let key = "terminal.capability.url_field";
            self.field_not_found(tool, key, flow.rule.url_field());
        }
        failure
    }

    /// After a call: the export driver's event for the turn (a capability
    /// the table delivers is `terminal_result`), its machines stored with
    /// the next step. A refused capability, or a confirm that failed, is a
    /// failed call already (the normal error path).
    pub(super) fn classify_export(
        &mut self,
        call: &PlannedCall,
        outcome: &Outcome,
    ) -> Result<Option<TurnEvent>, Stop> {
        let (table, terminals) = (&self.agent.tables.export, &self.agent.terminals);
        let (event, dirty) = (self.exports)
            .on_outcome(table, terminals, call, outcome)
            .map_err(Stop::Violation)?;
        self.ledger.dirty.extend(dirty);
        Ok(event)
    }

    /// A plan that asks for the delivered link again: `stored_delivery`, or
    /// `reference_missing` with the anchor that says why there is nothing
    /// to show.
    pub(super) fn link_requested(&mut self) -> Result<TurnEvent, Stop> {
        let now = crate::store::now_unix_ms();
        let table = &self.agent.tables.export;
        let (answer, stored) = self.exports.on_link_requested(table, now);
        self.ledger.dirty.push(stored);
        Ok(match answer {
            LinkAgain::Redeliver => TurnEvent::StoredDelivery,
            LinkAgain::Unavailable { expired } => {
                self.anchor(Anchor::LinkUnavailable { expired });
                TurnEvent::ReferenceMissing
            }
        })
    }

    /// The turn table's `deliver`: the code's sentence (through the same
    /// guard as the model's), then the link in a delta committed with the
    /// delivery record and the export machine, then `done`. No model is
    /// asked for any of it.
    pub(super) async fn deliver(&mut self) -> Result<(), Stop> {
        let Some(d) = self.exports.delivery.take() else {
            return self
                .internal("the turn table asked to deliver, but no capability was accepted".into())
                .await;
        };
        // What is delivered is checked again by the one validator, under
        // the flow as configured now: a stored link whose flow changed
        // since (another trusted origin, another path) is the table's
        // `unvalidated-delivery-*` refusal, never a button.
        let flow = self
            .agent
            .terminals
            .confirmed_by(&d.tool)
            .filter(|f| f.rule.validate_url(&d.url).is_ok());
        let Some(flow) = flow else {
            let table = &self.agent.tables.export;
            return match self.exports.on_unvalidated_delivery(table) {
                Err(v) => Err(Stop::Violation(v)),
                Ok(()) => {
                    self.internal(
                        "the export table let an unvalidated capability through; it was not delivered".into(),
                    )
                    .await
                }
            };
        };
        self.anchor(d.anchor());
        let korean = crate::guard::vocab::detect(&self.user_text) == crate::guard::vocab::Lang::Ko;
        let sentence = crate::judge::sentences::sentence(&d.anchor(), korean);
        let mut guard = self.guard();
        let mut pieces = guard.push(&sentence);
        pieces.extend(guard.finish());
        let label = flow.label_for(korean).to_string();
        self.say(pieces).await?;
        let link = wire::CapabilityLink {
            url: d.url.clone(),
            label: label.clone(),
            expires_at: d.expires_at.clone(),
        };
        let text = format!("\n\n[{label}]({})", d.url);
        let machine = self.exports.live.as_ref().map(|l| l.machine.snapshot());
        let records = vec![
            Record::Text {
                text: &text,
                replaced: None,
                capabilities: std::slice::from_ref(&link),
                links: &[],
            }
            .message(),
            Record::Delivery {
                delivery: &d,
                machine: machine.as_ref(),
            }
            .message(),
        ];
        self.evidence.answer += &text;
        let frame = wire::Frame::Delta(wire::Delta {
            text,
            replaced: None,
            capabilities: vec![link],
            links: Vec::new(),
        });
        self.step(frame, records).await?;
        self.finish().await
    }
}
