//! The export protocol inside a turn (`tables/export.ron`, issue 18, seeds
//! 000/001): a preview tool's answer starts an export machine; its confirm
//! may run only in a later loop step, after the model has seen the preview;
//! a confirm's answer that `judge::capability` accepts is delivered by code
//! (the `deliver` effect of both the export and the turn table) and the turn
//! ends with no model call after it. Anything the validator refuses takes
//! the normal error path. A follow-up that asks for the link again is
//! answered from the stored delivery while it lives.

use serde_json::{Map, Value};

use super::admit::Refusal;
use super::state::Live;
use super::{Outcome, Stop, Turn};
use crate::agent::records::{Delivery, Record};
use crate::judge::approval;
use crate::judge::capability::{self, Capability};
use crate::judge::Anchor;
use crate::llm::PlannedCall;
use crate::protocols::export::{ExportEffect, ExportEvent};
use crate::protocols::telemetry;
use crate::protocols::turn::TurnEvent;
use crate::wire;

impl Delivery {
    /// Whether it has expired at `now` (Unix ms). One whose expiry is not
    /// known is shown again: the capability's server still decides.
    pub(super) fn expired(&self, now: i64) -> bool {
        self.expires_at
            .as_deref()
            .and_then(capability::instant_ms)
            .is_some_and(|at| at <= now)
    }

    fn anchor(&self) -> Anchor {
        Anchor::Delivered {
            tool: self.tool.clone(),
            files: self.files,
            bytes: self.bytes,
            expires_at: self.expires_at.clone(),
        }
    }
}

impl Turn<'_> {
    /// A model call is about to be made: every live export machine is told
    /// (`model-sees-preview`); one that forbids it (`model-after-terminal-
    /// delivery`, `model-while-confirming`) stops the turn.
    pub(super) fn export_model_call(&mut self) -> Result<(), Stop> {
        let Some(live) = self.exports.live.as_mut() else {
            return Ok(());
        };
        if live.machine.is_terminal() {
            return Ok(());
        }
        live.machine
            .fire(ExportEvent::ModelCall)
            .map_err(Stop::Violation)?;
        Ok(())
    }

    /// After a plan is read: which confirms share their step with their
    /// preview (`confirm_same_step`), and those confirms first, so that
    /// each is refused before its preview runs, whatever order the model
    /// wrote them in (they are never sent either way).
    pub(super) fn order_exports(&mut self) {
        let terminals = &self.agent.terminals;
        self.exports.step_previews = self
            .cursor
            .pending
            .iter()
            .flat_map(|c| terminals.previewed_by(&c.tool))
            .map(str::to_string)
            .collect();
        let previews = &self.exports.step_previews;
        let (first, rest): (Vec<_>, Vec<_>) = self
            .cursor
            .pending
            .drain(..)
            .partition(|c| previews.contains(&c.tool));
        self.cursor.pending = first.into_iter().chain(rest).collect();
    }

    /// A planned call to a terminal flow's confirm: the export table
    /// decides whether it is sent. A refusal is a structured
    /// `INVALID_TOOL_SEQUENCE` result naming the row; nothing is sent.
    pub(super) fn refuse_export(&mut self, call: &PlannedCall) -> Option<Box<Refusal>> {
        self.agent.terminals.confirmed_by(&call.tool)?;
        let event = match self.exports.step_previews.contains(&call.tool) {
            true => ExportEvent::ConfirmSameStep,
            false => ExportEvent::ConfirmPlanned,
        };
        let live = self
            .exports
            .live
            .as_mut()
            .filter(|l| l.confirm == call.tool && !l.machine.is_terminal());
        let mut fresh = self.agent.tables.export.machine();
        let machine = match live {
            Some(l) => &mut l.machine,
            None => &mut fresh,
        };
        let (row_id, why) = match machine.fire(event) {
            // Every legal row of a planned confirm sends it (the export
            // binding's invariant, checked at load): this confirm's answer
            // is the one to validate.
            Ok(_) => {
                self.exports.confirm_out = Some(call.tool.clone());
                return None;
            }
            Err(v) => {
                telemetry::violation(&v);
                (v.row_id.clone(), v.why.clone())
            }
        };
        // Refused, never "failed": it did not leave turnstile.
        let anchor = Anchor::Refused {
            tool: call.tool.clone(),
            table: "export".into(),
            row_id: row_id.clone(),
        };
        Some(Box::new(Refusal {
            table: "export",
            row_id,
            detail: format!("INVALID_TOOL_SEQUENCE: {why}"),
            anchor,
        }))
    }

    /// A confirm's answer, before its result frame is written: the
    /// validator's verdict, kept for [`Turn::classify_export`]. A refused
    /// capability is the page's failure (its frame says `ok: false`); the
    /// rule that refused it is logged, never the URL.
    pub(super) fn capability_failure(
        &mut self,
        tool: &str,
        out: &crate::mcp::ToolOutput,
    ) -> Option<crate::judge::page::Failure> {
        let flow = self.agent.terminals.confirmed_by(tool)?;
        if self.exports.confirm_out.as_deref() != Some(tool) || out.is_error {
            return None;
        }
        let answer = Value::Object(approval::fields(out).unwrap_or_default());
        let verdict = flow.rule.validate_answer(&answer);
        if flow.rule.url_field_missing(&answer) {
            self.field_not_found(tool, "url_field", flow.rule.url_field());
        }
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
        self.exports.verdict = Some(verdict);
        failure
    }

    /// After a call: a preview's answer starts an export; a confirm's
    /// answer is classified by the validator's verdict. A capability it
    /// accepted makes the turn's `terminal_result`; one it refused is a
    /// failed call already (the normal error path), and so is a confirm
    /// that failed.
    pub(super) fn classify_export(
        &mut self,
        call: &PlannedCall,
        outcome: &Outcome,
    ) -> Result<Option<TurnEvent>, Stop> {
        let previews: Vec<String> = self
            .agent
            .terminals
            .previewed_by(&call.tool)
            .map(str::to_string)
            .collect();
        if let Some(confirm) = previews.first() {
            self.previewed(confirm.clone(), outcome)?;
            return Ok(None);
        }
        let Some(flow) = self.agent.terminals.confirmed_by(&call.tool).cloned() else {
            return Ok(None);
        };
        // Only a confirm the table let out (`send-confirm`) has an answer
        // to read: one refused before it was sent (by this table or
        // another) is its refusal.
        let sent = self.exports.confirm_out.take().as_deref() == Some(call.tool.as_str());
        let live = self
            .exports
            .live
            .as_mut()
            .filter(|l| l.confirm == call.tool);
        let Some(live) = live.filter(|_| sent && !matches!(outcome, Outcome::Refused { .. }))
        else {
            return Ok(None);
        };
        let verdict = self.exports.verdict.take();
        let event = match &verdict {
            Some(Ok(_)) if matches!(outcome, Outcome::Returned { .. }) => {
                ExportEvent::CapabilityValid
            }
            Some(Err(_)) => ExportEvent::CapabilityInvalid,
            _ => ExportEvent::ConfirmFailed,
        };
        let step = live.machine.fire(event).map_err(Stop::Violation)?;
        let preview = live.preview.clone();
        self.store_export_machine();
        match verdict {
            Some(Ok(cap)) if step.effect == Some(ExportEffect::Deliver) => {
                self.exports.delivery = Some(delivery(&call.tool, &flow.label, cap, &preview));
                Ok(Some(TurnEvent::TerminalResult))
            }
            _ => Ok(None),
        }
    }

    /// A preview tool answered: a new export machine (the previous one, if
    /// any, is stored as it stands).
    fn previewed(&mut self, confirm: String, outcome: &Outcome) -> Result<(), Stop> {
        self.store_export_machine();
        let mut machine = self.agent.tables.export.machine();
        let (event, preview) = match outcome {
            Outcome::Returned { first, .. } if !first.is_error => (
                ExportEvent::PreviewOk,
                approval::fields(first).unwrap_or_default(),
            ),
            _ => (ExportEvent::PreviewFailed, Map::new()),
        };
        machine.fire(event).map_err(Stop::Violation)?;
        self.exports.live = Some(Live {
            name: self.next_export_name(),
            confirm,
            machine,
            preview,
        });
        self.store_export_machine();
        Ok(())
    }

    /// The live export machine goes to the store with the next step.
    /// Under its own name: a later snapshot of the same export replaces
    /// the earlier one.
    fn store_export_machine(&mut self) {
        if let Some(live) = self.exports.live.as_ref() {
            let snap = live.machine.snapshot();
            self.ledger.dirty.push((live.name.clone(), snap));
        }
    }

    fn next_export_name(&mut self) -> String {
        self.exports.machines += 1;
        format!("export#{}", self.exports.machines)
    }

    /// A plan that asks for the delivered link again: the stored delivery's
    /// machine decides (`show-link-again`, `link-expired`, `no-link-yet`).
    /// The turn's event: `stored_delivery`, or `reference_missing` with the
    /// anchor that says why there is nothing to show.
    pub(super) fn link_requested(&mut self) -> Result<TurnEvent, Stop> {
        let now = crate::store::now_unix_ms();
        let table = &self.agent.tables.export;
        let stored = self.exports.stored.clone();
        let (mut machine, delivery) = match stored {
            Some((d, snap)) => match table.restore(&snap) {
                Ok(m) => (m, Some(d)),
                // Stored under a table that changed since: not shown again
                // on its word.
                Err(e) => {
                    tracing::warn!(error = %e, "a stored delivery's export machine does not restore");
                    (table.machine(), None)
                }
            },
            None => (table.machine(), None),
        };
        let expired = delivery.as_ref().is_some_and(|d| d.expired(now));
        let event = match expired {
            true => ExportEvent::LinkExpired,
            false => ExportEvent::LinkRequested,
        };
        let fired = machine.fire(event);
        let name = self.next_export_name();
        self.ledger.dirty.push((name.clone(), machine.snapshot()));
        match (fired, delivery) {
            (Ok(step), Some(d)) if step.effect == Some(ExportEffect::Redeliver) => {
                self.exports.delivery = Some(d);
                self.exports.live = Some(Live {
                    name,
                    confirm: String::new(),
                    machine,
                    preview: Map::new(),
                });
                Ok(TurnEvent::StoredDelivery)
            }
            (Err(v), _) => {
                telemetry::violation(&v);
                tracing::info!(row_id = %v.row_id, "no stored link to show again");
                self.anchor(Anchor::LinkUnavailable { expired: false });
                Ok(TurnEvent::ReferenceMissing)
            }
            _ => {
                self.anchor(Anchor::LinkUnavailable { expired: true });
                Ok(TurnEvent::ReferenceMissing)
            }
        }
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
            let mut fresh = self.agent.tables.export.machine();
            let machine = match self.exports.live.as_mut() {
                Some(l) => &mut l.machine,
                None => &mut fresh,
            };
            return match machine.fire(ExportEvent::DeliverUnvalidated) {
                Err(v) => Err(Stop::Violation(v)),
                Ok(_) => {
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

/// What the formatter says of a delivery: the capability, and the file
/// count and size the preview (or the confirm) gave.
fn delivery(tool: &str, label: &str, cap: Capability, preview: &Map<String, Value>) -> Delivery {
    // A preview in the seed's envelope keeps its counts under `data`.
    let wrapped = preview.get("data").and_then(Value::as_object);
    let count = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| {
                (preview.get(*k))
                    .or_else(|| wrapped.and_then(|d| d.get(*k)))
                    .or_else(|| cap.data.get(*k))
            })
            .and_then(Value::as_u64)
    };
    Delivery {
        tool: tool.to_string(),
        files: count(&["fileCount", "file_count", "files"]),
        bytes: count(&["estimatedBytes", "estimated_bytes", "sizeBytes", "bytes"]),
        url: cap.url,
        label: label.to_string(),
        expires_at: cap.expires_at,
    }
}
