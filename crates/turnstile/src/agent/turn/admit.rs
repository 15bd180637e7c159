//! Before a call runs: its narrowing scope, and whether the tables let it
//! run. A call that may not run is refused: a structured tool error naming
//! the table's row, shown and stored like any result.

use serde_json::{Map, Value};

use super::{Outcome, Stop, Turn};
use crate::judge::admission::{self, Proposal};
use crate::judge::digest::Digest;
use crate::judge::narrowing::{Conflict, Gate, Scope};
use crate::judge::Anchor;
use crate::llm::PlannedCall;
use crate::protocols::admission::{AdmissionEffect, AdmissionEvent};
use crate::protocols::narrowing::{NarrowingEffect, NarrowingEvent};
use crate::protocols::telemetry;
use crate::wire;

impl Turn<'_> {
    /// The turn's scope, if the narrowing table applies it in this step:
    /// asked of a fresh machine without firing (each call's gate fires it
    /// when the call is made).
    pub(super) fn scope_this_step(&self) -> Option<Scope> {
        let scope = self.thread.scope.clone()?;
        let gate = self.agent.tables.narrowing.machine();
        let event = match self.thread.scope_step == Some(self.cursor.step) {
            true => NarrowingEvent::Narrow,
            false => NarrowingEvent::NarrowHeld,
        };
        let step = gate.peek(event).ok()?;
        (step.effect == Some(NarrowingEffect::ApplyScope)).then_some(scope)
    }

    /// The scope this call runs under, if it narrows, and why the
    /// narrowing machine that judged the population cannot be restored.
    pub(super) fn scope_for(
        &self,
        call: &PlannedCall,
        gate: &mut Gate,
    ) -> Result<(Option<Scope>, Option<String>), Stop> {
        let Some(scope) = self.thread.scope.clone().filter(|s| s.tool == call.tool) else {
            return Ok((None, None));
        };
        // The population was judged by a narrowing machine that was stored
        // with it: restore it, so a table edited since is reported, never
        // reinterpreted.
        let stale = match &self.thread.previous {
            Some((_, Some(snap))) => self
                .agent
                .tables
                .narrowing
                .restore(snap)
                .err()
                .map(|e| e.to_string()),
            _ => None,
        };
        // The step that narrowed, or a later one of the turn: whether the
        // scope still holds then is the table's `narrow_held` row.
        let effect = match self.thread.scope_step == Some(self.cursor.step) {
            true => gate.narrow(),
            false => gate.narrow_held(),
        };
        match effect.map_err(Stop::Violation)? {
            Some(NarrowingEffect::ApplyScope) => Ok((Some(scope), stale)),
            _ => Ok((None, stale)),
        }
    }

    /// Whether the call may run: the `admission` table on what code found,
    /// then the narrowing table on a follow-up that narrows with another
    /// tool than the one that showed the population.
    pub(super) fn admit(
        &mut self,
        call: &PlannedCall,
        offered: bool,
        stale: Option<&str>,
    ) -> Result<(), Box<Refusal>> {
        let proposal = Proposal {
            offered,
            invalid_args: call.invalid_args.as_deref(),
            stale,
            call_in_step: self.cursor.calls_this_step,
            max_calls_per_step: self.agent.limits.max_calls_per_step,
        };
        let event = admission::classify(&proposal, &self.agent.tables.admission);
        let mut machine = self.agent.tables.admission.machine();
        let fired = machine.fire(event);
        // A call a table refuses never left turnstile: refused, not failed.
        let anchor = |table: &str, row_id: &str| match event {
            AdmissionEvent::NarrowingStale => Anchor::NarrowingStale,
            _ => Anchor::Refused {
                tool: call.tool.clone(),
                table: table.into(),
                row_id: row_id.into(),
            },
        };
        match fired {
            Ok(step) if step.effect == Some(AdmissionEffect::Run) => {}
            Ok(step) => {
                let row_id = machine.row_id(step.row).to_string();
                return Err(Box::new(Refusal {
                    table: "admission",
                    anchor: anchor("admission", &row_id),
                    row_id,
                    detail: admission::detail(event, &proposal),
                }));
            }
            Err(v) => {
                telemetry::violation(&v);
                return Err(Box::new(Refusal {
                    table: "admission",
                    row_id: v.row_id.clone(),
                    detail: admission::detail(event, &proposal),
                    anchor: anchor("admission", &v.row_id),
                }));
            }
        };
        let other_tool = self
            .thread
            .scope
            .as_ref()
            .is_some_and(|s| s.tool != call.tool)
            && self.thread.scope_step == Some(self.cursor.step);
        if let Some(refusal) = self.refuse_confirm(call) {
            return Err(refusal);
        }
        if let Some(refusal) = self.refuse_export(call) {
            return Err(refusal);
        }
        if !other_tool {
            return Ok(());
        }
        // Asked of a machine of its own: the call's gate judges its pages.
        let mut asked = Gate::new(&self.agent.tables.narrowing);
        match asked.verdict(NarrowingEvent::NarrowOtherTool) {
            Ok(_) => Ok(()),
            Err(v) => {
                telemetry::violation(&v);
                Err(Box::new(Refusal {
                    table: "narrowing",
                    anchor: anchor("narrowing", &v.row_id),
                    row_id: v.row_id.clone(),
                    detail:
                        "a narrowing follow-up must use the tool that showed the previous results"
                            .into(),
                }))
            }
        }
    }

    /// A call that is not run: a structured tool error naming the table's
    /// row, shown and stored like any result.
    pub(super) async fn refuse(
        &mut self,
        call: &PlannedCall,
        args: Map<String, Value>,
        refusal: Box<Refusal>,
    ) -> Result<Outcome, Stop> {
        tracing::warn!(tool = %call.tool, table = refusal.table, row_id = %refusal.row_id, "call refused");
        let summary = format!(
            "not run ({} row `{}`): {}",
            refusal.table, refusal.row_id, refusal.detail
        );
        let digest = self
            .not_run(call, &args, summary, NotRun::default())
            .await?;
        Ok(Outcome::Refused {
            call: self.record_for(call.id.as_deref(), &call.tool, args, digest),
            anchor: Some(refusal.anchor),
            gate: None,
        })
    }

    /// The call and result frames of a call that was not run (no server,
    /// `ok: false`, the refusal's words); the digest the models see of it.
    /// Shared by every refusal: the admission and narrowing tables' and the
    /// licence gate's.
    pub(super) async fn not_run(
        &mut self,
        call: &PlannedCall,
        args: &Map<String, Value>,
        summary: String,
        marks: NotRun,
    ) -> Result<Digest, Stop> {
        let NotRun {
            conflict,
            refusal,
            released,
        } = marks;
        let call_id = self.next_call_id();
        self.emit_call(&call_id, &call.tool, None, args).await?;
        let digest = Digest::failed(&call.tool, &summary);
        let frame = wire::ToolResult {
            call_id,
            tool: call.tool.clone(),
            ok: false,
            summary,
            shape: None,
            conflict,
            refusal,
        };
        self.emit_result_released(frame, args, None, Some(&digest), released)
            .await?;
        Ok(digest)
    }

    /// A narrowing follow-up whose own arguments disagree with its scope is
    /// not run with the scope's values under the model's label. A disjoint
    /// filter (floor 5 inside floor 3) is an empty intersection: zero after
    /// narrowing, through the table. A new search term is not expressible
    /// as a subset: refused, the scope kept.
    pub(super) async fn refuse_conflict(
        &mut self,
        call: &PlannedCall,
        args: &Map<String, Value>,
        conflict: &Conflict,
        mut gate: Gate,
    ) -> Result<Outcome, Stop> {
        let summary = conflict.describe();
        // A disjoint filter is zero inside the scope: the table's verdict
        // is decided before the result is shown, so a release is committed
        // with it.
        let released = match conflict {
            Conflict::Disjoint { .. } => {
                let verdict = gate
                    .verdict(NarrowingEvent::PageEmpty)
                    .map_err(Stop::Violation)?;
                verdict == Some(NarrowingEffect::ReleaseScope)
            }
            Conflict::Unsupported { .. } => false,
        };
        let shown = serde_json::to_value(conflict).ok();
        let marks = NotRun {
            conflict: shown,
            released,
            ..NotRun::default()
        };
        let digest = self.not_run(call, args, summary, marks).await?;
        let record = self.record_for(call.id.as_deref(), &call.tool, args.clone(), digest);
        Ok(match conflict {
            Conflict::Unsupported { key } => Outcome::Refused {
                call: record,
                anchor: Some(Anchor::NarrowingUnsupported { key: key.clone() }),
                gate: None,
            },
            Conflict::Disjoint { .. } => {
                let anchors_gate = released.then_some(gate);
                if released {
                    self.anchor(Anchor::Absent {
                        cause: crate::judge::emptiness::AbsenceCause::ZeroAfterNarrowing,
                    });
                    self.anchor(Anchor::NarrowingReleased);
                }
                Outcome::Refused {
                    call: record,
                    anchor: None,
                    gate: anchors_gate,
                }
            }
        })
    }
}

/// What a call that was not run shows besides its summary.
#[derive(Default)]
pub(super) struct NotRun {
    /// A narrowing conflict, as the frame shows it.
    pub(super) conflict: Option<Value>,
    /// The licence gate's structured refusal.
    pub(super) refusal: Option<Value>,
    /// The refusal released the narrowing scope (committed with it).
    pub(super) released: bool,
}

/// A call the tables do not let run.
pub(super) struct Refusal {
    pub(super) table: &'static str,
    pub(super) row_id: String,
    /// What code found, in the words the model reads back.
    pub(super) detail: String,
    pub(super) anchor: Anchor,
}
