//! The export protocol's driver (issue 36 §2): the turn's export machines
//! and their bookkeeping, and what happened turned into `tables/export.ron`'s
//! events. It sends nothing and says nothing; `export.rs` performs the
//! effects (a refusal, a delivery, an anchor) and the turn stores the
//! machines it hands back. It imports nothing of the turn but its state.

use std::collections::VecDeque;

use serde_json::{Map, Value};

use super::state::Outcome;
use crate::agent::records::Delivery;
use crate::fsm::{Snapshot, Violation};
use crate::judge::approval;
use crate::judge::capability::{self, Capability, TerminalFlow, Terminals};
use crate::judge::Anchor;
use crate::llm::PlannedCall;
use crate::mcp::ToolOutput;
use crate::protocols::export::{Export, ExportEffect, ExportEvent};
use crate::protocols::turn::TurnEvent;
use crate::protocols::{telemetry, Bound, Typed};

/// The export this turn previewed and may confirm.
pub(super) struct Live {
    /// The name it is stored under (`export#N`), one per export.
    pub(super) name: String,
    /// The confirm tool of its flow.
    pub(super) confirm: String,
    pub(super) machine: Typed<Export>,
    /// The preview's answer, for the formatter's file count and size.
    pub(super) preview: Map<String, Value>,
}

/// The turn's part in the export protocol.
#[derive(Default)]
pub(crate) struct Exports {
    pub(super) live: Option<Live>,
    /// Confirm tools whose preview the current step plans.
    pub(super) step_previews: Vec<String>,
    /// Export machines this turn ran (`export#N`).
    pub(super) machines: usize,
    /// The capability the table's `deliver` row let through.
    pub(super) delivery: Option<Delivery>,
    /// The validator's verdict on the confirm's answer, read when its
    /// result frame was written (so the frame says whether it failed).
    pub(super) verdict: Option<Result<Capability, capability::Rejection>>,
    /// The confirm tool the export table let out (`send-confirm`), until
    /// its answer is classified.
    pub(super) confirm_out: Option<String>,
    /// The thread's last delivery and the machine that delivered it.
    pub(crate) stored: Option<(Delivery, Snapshot)>,
}

/// Machines to store with the next step, by name.
type Dirty = Vec<(String, Snapshot)>;

/// What the stored delivery's machine says of a request to show its link
/// again.
pub(super) enum LinkAgain {
    /// Shown again (`show-link-again`).
    Redeliver,
    /// Nothing to show: the link expired, or none was delivered (the row
    /// that refused, if one did).
    Unavailable { expired: bool },
}

/// The export protocol's driver (issue 36 §2): it holds the turn's export
/// machines and their bookkeeping, and turns what happened into the
/// export table's events. It sends nothing and says nothing; the turn
/// performs the effects (a refusal, a delivery, an anchor) and stores the
/// machines it hands back.
impl Exports {
    /// A model call is about to be made: the live machine is told
    /// (`model-sees-preview`); one that forbids it stops the turn.
    pub(super) fn on_model_call(&mut self) -> Result<(), Box<Violation>> {
        match self.live.as_mut().filter(|l| !l.machine.is_terminal()) {
            Some(live) => live.machine.fire(ExportEvent::ModelCall).map(drop),
            None => Ok(()),
        }
    }

    /// A plan was read: which confirms share their step with their preview
    /// (`confirm_same_step`), and those confirms first, so that each is
    /// refused before its preview runs, whatever order the model wrote
    /// them in (they are never sent either way).
    pub(super) fn on_plan(&mut self, terminals: &Terminals, pending: &mut VecDeque<PlannedCall>) {
        self.step_previews = (pending.iter())
            .flat_map(|c| terminals.previewed_by(&c.tool))
            .map(str::to_string)
            .collect();
        let previews = &self.step_previews;
        let (first, rest): (Vec<_>, Vec<_>) =
            pending.drain(..).partition(|c| previews.contains(&c.tool));
        pending.extend(first.into_iter().chain(rest));
    }

    /// A planned call to a flow's confirm: the table's row sends it (every
    /// legal row does, the binding's invariant) or refuses it.
    pub(super) fn on_confirm_planned(
        &mut self,
        table: &Bound<Export>,
        tool: &str,
    ) -> Result<(), Box<Violation>> {
        let event = match self.step_previews.iter().any(|t| t == tool) {
            true => ExportEvent::ConfirmSameStep,
            false => ExportEvent::ConfirmPlanned,
        };
        let live = (self.live.as_mut()).filter(|l| l.confirm == tool && !l.machine.is_terminal());
        let mut fresh = table.machine();
        let machine = match live {
            Some(l) => &mut l.machine,
            None => &mut fresh,
        };
        machine.fire(event)?;
        self.confirm_out = Some(tool.to_string());
        Ok(())
    }

    /// The answer of a confirm the table let out, read by the validator
    /// before its result frame is written; `None` for any other answer.
    pub(super) fn on_confirm_answer(
        &mut self,
        flow: &TerminalFlow,
        tool: &str,
        out: &ToolOutput,
    ) -> Option<&Result<Capability, capability::Rejection>> {
        if self.confirm_out.as_deref() != Some(tool) || out.is_error {
            return None;
        }
        let answer = Value::Object(approval::fields(out).unwrap_or_default());
        self.verdict = Some(flow.rule.validate_answer(&answer));
        self.verdict.as_ref()
    }

    /// After a call: a preview's answer starts an export machine; the
    /// answer of a confirm the table let out is the validator's verdict's
    /// event, and a capability the `deliver` row lets through is the
    /// turn's `terminal_result`. The machines to store, by name.
    pub(super) fn on_outcome(
        &mut self,
        table: &Bound<Export>,
        terminals: &Terminals,
        call: &PlannedCall,
        outcome: &Outcome,
    ) -> Result<(Option<TurnEvent>, Dirty), Box<Violation>> {
        let mut dirty = Vec::new();
        if let Some(confirm) = terminals.previewed_by(&call.tool).next() {
            dirty.extend(self.snapshot());
            let (event, preview) = match outcome {
                Outcome::Returned { first, .. } if !first.is_error => (
                    ExportEvent::PreviewOk,
                    approval::fields(first).unwrap_or_default(),
                ),
                _ => (ExportEvent::PreviewFailed, Map::new()),
            };
            let mut machine = table.machine();
            machine.fire(event)?;
            self.live = Some(Live {
                name: self.next_name(),
                confirm: confirm.to_string(),
                machine,
                preview,
            });
            dirty.extend(self.snapshot());
            return Ok((None, dirty));
        }
        let Some(flow) = terminals.confirmed_by(&call.tool) else {
            return Ok((None, dirty));
        };
        // Only a confirm the table let out (`send-confirm`) has an answer
        // to read: one refused before it was sent (by this table or
        // another) is its refusal.
        let sent = self.confirm_out.take().as_deref() == Some(call.tool.as_str());
        let refused = matches!(outcome, Outcome::Refused { .. });
        let Some(live) =
            (self.live.as_mut()).filter(|l| l.confirm == call.tool && sent && !refused)
        else {
            return Ok((None, dirty));
        };
        let verdict = self.verdict.take();
        let event = match &verdict {
            Some(Ok(_)) if matches!(outcome, Outcome::Returned { .. }) => {
                ExportEvent::CapabilityValid
            }
            Some(Err(_)) => ExportEvent::CapabilityInvalid,
            _ => ExportEvent::ConfirmFailed,
        };
        let step = live.machine.fire(event)?;
        let preview = live.preview.clone();
        dirty.extend(self.snapshot());
        Ok(match verdict {
            Some(Ok(cap)) if step.effect == Some(ExportEffect::Deliver) => {
                self.delivery = Some(delivery(&call.tool, &flow.label, cap, &preview));
                (Some(TurnEvent::TerminalResult), dirty)
            }
            _ => (None, dirty),
        })
    }

    /// "Show me the link again": the stored delivery's machine decides
    /// (`show-link-again`, `link-expired`, `no-link-yet`). The machine to
    /// store, by name.
    pub(super) fn on_link_requested(
        &mut self,
        table: &Bound<Export>,
        now: i64,
    ) -> (LinkAgain, (String, Snapshot)) {
        let (mut machine, delivery) = match self.stored.clone() {
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
        let name = self.next_name();
        let stored = (name.clone(), machine.snapshot());
        let answer = match (fired, delivery) {
            (Ok(step), Some(d)) if step.effect == Some(ExportEffect::Redeliver) => {
                self.delivery = Some(d);
                self.live = Some(Live {
                    name,
                    confirm: String::new(),
                    machine,
                    preview: Map::new(),
                });
                LinkAgain::Redeliver
            }
            (Err(v), _) => {
                telemetry::violation(&v);
                tracing::info!(row_id = %v.row_id, "no stored link to show again");
                LinkAgain::Unavailable { expired: false }
            }
            _ => LinkAgain::Unavailable { expired: true },
        };
        (answer, stored)
    }

    /// A capability the table let through is to be delivered, but the
    /// validator no longer accepts it: the table's `deliver_unvalidated`
    /// row, on the live machine (or a fresh one).
    pub(super) fn on_unvalidated_delivery(
        &mut self,
        table: &Bound<Export>,
    ) -> Result<(), Box<Violation>> {
        let mut fresh = table.machine();
        let machine = match self.live.as_mut() {
            Some(l) => &mut l.machine,
            None => &mut fresh,
        };
        machine.fire(ExportEvent::DeliverUnvalidated).map(drop)
    }

    /// The live machine, under its own name: a later snapshot of the same
    /// export replaces the earlier one.
    fn snapshot(&self) -> Option<(String, Snapshot)> {
        (self.live.as_ref()).map(|l| (l.name.clone(), l.machine.snapshot()))
    }

    fn next_name(&mut self) -> String {
        self.machines += 1;
        format!("export#{}", self.machines)
    }
}

impl Delivery {
    /// Whether it has expired at `now` (Unix ms). One whose expiry is not
    /// known is shown again: the capability's server still decides.
    pub(super) fn expired(&self, now: i64) -> bool {
        self.expires_at
            .as_deref()
            .and_then(capability::instant_ms)
            .is_some_and(|at| at <= now)
    }

    pub(super) fn anchor(&self) -> Anchor {
        Anchor::Delivered {
            tool: self.tool.clone(),
            files: self.files,
            bytes: self.bytes,
            expires_at: self.expires_at.clone(),
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::capability::CapabilityRule;
    use crate::protocols::TableSet;

    fn call(tool: &str) -> PlannedCall {
        PlannedCall {
            id: None,
            tool: tool.into(),
            args: Map::new(),
            invalid_args: None,
        }
    }

    fn refused(tool: &str) -> Outcome {
        Outcome::Refused {
            call: crate::llm::CallRecord {
                id: "c1".into(),
                tool: tool.into(),
                args: Map::new(),
                digest: crate::judge::digest::Digest::failed(tool, "refused"),
            },
            anchor: None,
            gate: None,
        }
    }

    /// The export driver runs its protocol without the turn: no I/O, no
    /// anchors, only the table's rows and the machines it hands back.
    #[test]
    fn the_export_driver_decides_by_its_table_alone() {
        let table: Bound<Export> = TableSet::builtin().unwrap().bound().unwrap();
        let mut terminals = Terminals::default();
        let rule = CapabilityRule::new("http://127.0.0.1:9", "/e/{jobId}/d", "token").unwrap();
        let flow = TerminalFlow {
            preview: "preview".into(),
            rule,
            label: "Get".into(),
            label_ko: None,
        };
        terminals.insert("confirm", flow);
        let mut exports = Exports::default();

        // A plan with the confirm after its preview: the confirm goes
        // first, and is refused by the same-step row; nothing is let out.
        let mut pending: VecDeque<PlannedCall> = [call("preview"), call("confirm")].into();
        exports.on_plan(&terminals, &mut pending);
        let order: Vec<&str> = pending.iter().map(|c| c.tool.as_str()).collect();
        assert_eq!(order, ["confirm", "preview"]);
        let v = exports.on_confirm_planned(&table, "confirm").unwrap_err();
        assert_eq!(v.table, "export");
        assert!(exports.confirm_out.is_none());

        // The preview did not answer: a live machine (preview failed), stored under
        // its own name, whose confirm is still not let out this step.
        let failed = refused("preview");
        let (event, dirty) =
            (exports.on_outcome(&table, &terminals, &call("preview"), &failed)).unwrap();
        assert_eq!(event, None);
        assert_eq!(dirty.last().map(|d| d.0.as_str()), Some("export#1"));
        assert!(exports.live.is_some());

        // A confirm the table never let out has no answer to read, and no
        // terminal result comes of it.
        let (event, _) =
            (exports.on_outcome(&table, &terminals, &call("confirm"), &refused("confirm")))
                .unwrap();
        assert_eq!(event, None);
        assert!(exports.delivery.is_none());

        // "Show me the link again" with nothing delivered: unavailable.
        let (again, stored) = exports.on_link_requested(&table, 0);
        assert!(matches!(again, LinkAgain::Unavailable { expired: false }));
        assert_eq!(stored.0, "export#2");
    }
}
