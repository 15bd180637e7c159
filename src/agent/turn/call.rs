//! The `call` effect: run the step's next planned call (and, for a
//! stitchable listing, its further pages) and classify the outcome.

use serde_json::{Map, Value};

use super::{Outcome, Stop, Turn};
use crate::judge::admission::{self, Proposal};
use crate::judge::contracts::Contract;
use crate::judge::digest::Digest;
use crate::judge::narrowing::{Conflict, Gate, PageMark, Scope};
use crate::judge::page;
use crate::judge::result::Reading;
use crate::judge::stitch::Stitcher;
use crate::judge::Anchor;
use crate::llm::PlannedCall;
use crate::mcp::{ToolClient, ToolOutput};
use crate::protocols::admission::{AdmissionEffect, AdmissionEvent};
use crate::protocols::narrowing::{NarrowingEffect, NarrowingEvent};
use crate::protocols::telemetry;
use crate::protocols::turn::TurnEvent;
use crate::wire;

impl Turn<'_> {
    /// Runs the step's next call (and, for a stitchable listing, its further
    /// pages) and classifies the outcome.
    pub(super) async fn call(&mut self) -> Result<TurnEvent, Stop> {
        let Some(call) = self.cursor.pending.pop_front() else {
            // The table asked for a call the plan does not have.
            return Err(Stop::NoCallPending);
        };
        self.cursor.planned_calls += 1;
        self.cursor.calls_this_step += 1;
        let outcome = self.run_call(&call).await?;
        let event = match &outcome {
            Outcome::Returned { .. } => TurnEvent::CallOk,
            Outcome::Refused { .. } | Outcome::Failed { .. } => TurnEvent::CallFailed,
        };
        self.cursor.outcome = Some(outcome);
        Ok(event)
    }

    /// One planned call: its narrowing scope, its admission, then its pages.
    async fn run_call(&mut self, call: &PlannedCall) -> Result<Outcome, Stop> {
        // One narrowing machine per listing. The scope is applied only if
        // the table's `narrow` row says so (effect `apply-scope`).
        let mut gate = Gate::new(&self.agent.tables.narrowing);
        let (scoped, stale) = self.scope_for(call, &mut gate)?;
        let server = self.agent.tools.client_for(&call.tool).cloned();
        let (args, conflict) = match &scoped {
            Some(s) => s.apply(&call.args),
            None => (call.args.clone(), None),
        };
        let offered = server.is_some();
        let admitted =
            match self.admit(call, offered, stale.as_deref(), scoped.is_some(), &mut gate) {
                Ok(row) => row,
                Err(refusal) => return self.refuse(call, args, refusal).await,
            };
        if let Some(conflict) = &conflict {
            return self.refuse_conflict(call, &args, conflict, gate).await;
        }
        let Some(server) = server else {
            // Admission refuses a tool nobody offers; a table edited to
            // admit one still runs nothing.
            let refusal = Box::new(Refusal {
                table: "admission",
                row_id: admitted,
                detail: "unknown tool".into(),
                anchor: Anchor::ToolFailed {
                    tool: call.tool.clone(),
                },
            });
            return self.refuse(call, args, refusal).await;
        };
        self.fetch(call, &server, args, scoped, gate).await
    }

    /// The scope this call runs under, if it narrows, and why the
    /// narrowing machine that judged the population cannot be restored.
    fn scope_for(
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
        match gate.narrow().map_err(Stop::Violation)? {
            Some(NarrowingEffect::ApplyScope) => Ok((Some(scope), stale)),
            _ => Ok((None, stale)),
        }
    }

    /// Whether the call may run: the `admission` table on what code found,
    /// then the narrowing table on a follow-up that narrows with another
    /// tool than the one that showed the population.
    fn admit(
        &mut self,
        call: &PlannedCall,
        offered: bool,
        stale: Option<&str>,
        scoped: bool,
        gate: &mut Gate,
    ) -> Result<String, Box<Refusal>> {
        let proposal = Proposal {
            offered,
            invalid_args: call.invalid_args.as_deref(),
            stale,
            call_in_step: self.cursor.calls_this_step,
            max_calls_per_step: self.agent.limits.max_calls_per_step,
        };
        let event = admission::classify(&proposal);
        let mut machine = self.agent.tables.admission.machine();
        let fired = machine.fire(event);
        telemetry::record(machine.snapshot());
        let anchor = match event {
            AdmissionEvent::NarrowingStale => Anchor::NarrowingStale,
            _ => Anchor::ToolFailed {
                tool: call.tool.clone(),
            },
        };
        let row = match fired {
            Ok(step) if step.effect == Some(AdmissionEffect::Run) => {
                machine.row_id(step.row).to_string()
            }
            Ok(step) => {
                return Err(Box::new(Refusal {
                    table: "admission",
                    row_id: machine.row_id(step.row).to_string(),
                    detail: admission::detail(event, &proposal),
                    anchor,
                }))
            }
            Err(v) => {
                telemetry::violation(&v);
                return Err(Box::new(Refusal {
                    table: "admission",
                    row_id: v.row_id.clone(),
                    detail: admission::detail(event, &proposal),
                    anchor,
                }));
            }
        };
        let other_tool = self.thread.scope.is_some()
            && !scoped
            && self.thread.scope_step == Some(self.cursor.step);
        if !other_tool {
            return Ok(row);
        }
        match gate.verdict(NarrowingEvent::NarrowOtherTool) {
            Ok(_) => Ok(row),
            Err(v) => {
                telemetry::violation(&v);
                Err(Box::new(Refusal {
                    table: "narrowing",
                    row_id: v.row_id.clone(),
                    detail:
                        "a narrowing follow-up must use the tool that showed the previous results"
                            .into(),
                    anchor,
                }))
            }
        }
    }

    /// A call that is not run: a structured tool error naming the table's
    /// row, shown and stored like any result.
    async fn refuse(
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
        let call_id = self.next_call_id();
        self.emit_call(&call_id, &call.tool, None, &args).await?;
        let digest = Digest::failed(&call.tool, &summary);
        let frame = wire::ToolResult {
            call_id,
            tool: call.tool.clone(),
            ok: false,
            summary,
            shape: None,
            conflict: None,
        };
        self.emit_result(frame, &args, None, Some(&digest)).await?;
        Ok(Outcome::Refused {
            call: self.record_for(call.id.as_deref(), &call.tool, args, digest),
            anchor: Some(refusal.anchor),
            gate: None,
        })
    }

    /// Runs an admitted call: its first page, and for a stitched listing
    /// (or a continuation of an earlier turn's) the pages the paging table
    /// lets follow.
    async fn fetch(
        &mut self,
        call: &PlannedCall,
        server: &ToolClient,
        args: Map<String, Value>,
        scoped: Option<Scope>,
        gate: Gate,
    ) -> Result<Outcome, Stop> {
        let agent = self.agent;
        let contract = agent.contracts.get(&call.tool).cloned();
        let follow = contract.as_ref().is_some_and(|c| c.stitch);
        let id_field = contract.as_ref().map_or("id", |c| c.shape.id_field());
        let mut stitcher =
            Stitcher::new(&agent.tables.paging, agent.limits.page_cap).with_id_field(id_field);
        // A cursor carried over from an earlier turn continues the listing
        // that turn showed: its page is checked as that listing's page 2.
        let continued = self.continuation(&call.tool, &args);
        if let Some(mark) = &continued {
            tracing::info!(tool = %call.tool, "continuing an earlier turn's listing");
            stitcher
                .resume(mark.accounting.clone(), mark.ids.iter().cloned())
                .map_err(Stop::Violation)?;
        }
        let stitching = follow || continued.is_some();
        let mut page_args = args.clone();
        let mut first: Option<(ToolOutput, Reading)> = None;
        loop {
            let page = self
                .fetch_page(call, server, &page_args, contract.as_ref(), first.is_none())
                .await?;
            let (out, reading) = match page {
                Page::Answer(out, reading) => (out, reading),
                Page::Failed(failure) => {
                    return Ok(Outcome::Failed {
                        call: self.record_for(call.id.as_deref(), &call.tool, args, failure.0),
                        anchor: failure.1,
                    })
                }
                // No page at all: the first page stands alone.
                Page::Gone(kind) => {
                    stitcher.page_failed(kind).map_err(Stop::Violation)?;
                    break;
                }
            };
            if !stitching {
                first = Some((out, reading));
                break;
            }
            let next = stitcher.push(&reading).map_err(Stop::Violation)?;
            first.get_or_insert((out, reading));
            match next {
                Some(cursor) if follow => {
                    page_args.insert("cursor".into(), Value::String(cursor));
                }
                // A continuation of a tool that is not stitched is one page.
                Some(_) => {
                    stitcher.stop_here().map_err(Stop::Violation)?;
                    break;
                }
                None => break,
            }
        }
        let (first, reading) = first.unwrap_or_else(|| {
            let out = ToolOutput::default();
            let reading = Reading::of(&out, contract.as_ref());
            (out, reading)
        });
        let stitched = stitching.then(|| {
            let n = self.next_listing();
            self.ledger
                .dirty
                .push((format!("paging#{n}"), stitcher.snapshot()));
            telemetry::record(stitcher.snapshot());
            stitcher.finish()
        });
        let digest = Digest::failed(&call.tool, "not judged yet");
        Ok(Outcome::Returned {
            call: self.record_for(call.id.as_deref(), &call.tool, args, digest),
            scoped: scoped.map(Box::new),
            gate,
            first: Box::new(first),
            reading: Box::new(reading),
            stitched,
        })
    }

    /// One page: the call and its result frame, and what the page is.
    async fn fetch_page(
        &mut self,
        call: &PlannedCall,
        server: &ToolClient,
        args: &Map<String, Value>,
        contract: Option<&Contract>,
        first_page: bool,
    ) -> Result<Page, Stop> {
        let tool = &call.tool;
        let call_id = self.next_call_id();
        self.emit_call(&call_id, tool, Some(server.name()), args)
            .await?;
        let out = match server.call(tool, args.clone()).await {
            Ok(out) => out,
            Err(e) => {
                tracing::warn!(tool = %tool, kind = e.kind(), "tool call failed");
                let digest = Digest::failed(tool, e.kind());
                let frame = wire::ToolResult {
                    call_id,
                    tool: tool.clone(),
                    ok: false,
                    summary: e.kind().to_string(),
                    shape: None,
                    conflict: None,
                };
                self.emit_result(frame, args, None, Some(&digest)).await?;
                return Ok(match first_page {
                    true => Page::Failed((digest, Anchor::ToolFailed { tool: tool.clone() })),
                    // A later page whose call failed (a rejected cursor may
                    // come as a JSON-RPC error) is no page: the paging
                    // table's `page_failed`.
                    false => Page::Gone(e.kind()),
                });
            }
        };
        let shape = out.shape();
        // Logs carry the result's shape — block count, kinds, _meta key
        // names — never its text.
        tracing::info!(tool = %tool, shape = %shape, "tool result");
        let reading = Reading::of(&out, contract);
        let failure = page::failure(tool, contract, &reading, &out);
        let ok = failure.is_none();
        let summary = match &failure {
            Some(f) => f.summary.clone(),
            None => page::summary(&reading, &out),
        };
        // A first page that is not a real answer fails the call; a later
        // one is the paging table's to classify (an untrusted page).
        let failed = failure.filter(|_| first_page);
        let digest = failed.as_ref().map(|f| Digest::failed(tool, f.note));
        let frame = wire::ToolResult {
            call_id,
            tool: tool.clone(),
            ok,
            summary,
            shape: Some(shape.to_string()),
            conflict: None,
        };
        // A result still to be judged has no digest yet: the judged one is
        // stored with its card.
        self.emit_result(frame, args, Some(&out), digest.as_ref())
            .await?;
        Ok(match (failed, digest) {
            (Some(f), Some(d)) => {
                if let Anchor::InBandFailure { .. } = f.anchor {
                    tracing::warn!(tool = %tool, shape = %shape, "in-band failure: no marks of a real answer");
                }
                Page::Failed((d, f.anchor))
            }
            _ => Page::Answer(out, reading),
        })
    }

    /// The page mark of the earlier turn's listing that `args` continue: a
    /// call to the same tool with a cursor.
    pub(super) fn continuation(&self, tool: &str, args: &Map<String, Value>) -> Option<PageMark> {
        let cursor = args.get("cursor").and_then(Value::as_str)?;
        if cursor.is_empty() {
            return None;
        }
        let (scope, _) = self.thread.previous.as_ref()?;
        (scope.tool == tool).then(|| scope.page.clone()).flatten()
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
        let call_id = self.next_call_id();
        self.emit_call(&call_id, &call.tool, None, args).await?;
        let digest = Digest::failed(&call.tool, &summary);
        let frame = wire::ToolResult {
            call_id,
            tool: call.tool.clone(),
            ok: false,
            summary,
            shape: None,
            conflict: serde_json::to_value(conflict).ok(),
        };
        self.emit_result_released(frame, args, None, Some(&digest), released)
            .await?;
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

/// A call the tables do not let run.
pub(super) struct Refusal {
    table: &'static str,
    row_id: String,
    /// What code found, in the words the model reads back.
    detail: String,
    anchor: Anchor,
}

/// One fetched page.
enum Page {
    Answer(ToolOutput, Reading),
    /// The listing's first page failed: the call's digest and anchor.
    Failed((Digest, Anchor)),
    /// A later page's call failed: no page, of this kind.
    Gone(&'static str),
}
