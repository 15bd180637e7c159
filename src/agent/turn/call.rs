//! The `call` effect: run the step's next planned call (and, for a
//! stitchable listing, its further pages) and classify the outcome.

use serde_json::{Map, Value};

use super::{Outcome, Stop, Turn, MAX_CALLS_PER_STEP};
use crate::judge::contracts::AccountingMode;
use crate::judge::digest::Digest;
use crate::judge::in_band::Verdict;
use crate::judge::narrowing::{Conflict, Gate, PageMark};
use crate::judge::result::Reading;
use crate::judge::stitch::Stitcher;
use crate::judge::{in_band, Anchor};
use crate::llm::PlannedCall;
use crate::mcp::ToolOutput;
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

    pub(super) async fn run_call(&mut self, call: &PlannedCall) -> Result<Outcome, Stop> {
        let agent = self.agent;
        let too_many = self.cursor.calls_this_step > MAX_CALLS_PER_STEP;
        let server = agent.tools.client_for(&call.tool).cloned();
        // One narrowing machine per listing. The scope is applied only if
        // the table's `narrow` row says so (effect `apply-scope`).
        let mut gate = Gate::new(&agent.tables.narrowing);
        let mut stale: Option<String> = None;
        let scoped = match self.thread.scope.clone().filter(|s| s.tool == call.tool) {
            Some(s) => {
                // The population was judged by a narrowing machine that was
                // stored with it: restore it, so a table edited since is
                // reported, never reinterpreted.
                if let Some((_, Some(snap))) = &self.thread.previous {
                    if let Err(e) = agent.tables.narrowing.restore(snap) {
                        stale = Some(e.to_string());
                    }
                }
                match gate.narrow() {
                    Ok(Some(NarrowingEffect::ApplyScope)) => Some(s),
                    Ok(_) => None,
                    Err(v) => return Err(Stop::Violation(v)),
                }
            }
            None => None,
        };
        // A model that names a tool nobody offers, sends arguments that are
        // not an object, or narrows with another tool than the one that
        // showed the population, gets a structured tool error; nothing runs.
        let refusal = match (&server, &call.invalid_args) {
            (None, _) => Some("unknown tool".to_string()),
            (Some(_), Some(why)) => Some(format!("invalid arguments: {why}")),
            _ if stale.is_some() => Some(format!(
                "not run: the previous results cannot be narrowed: {}",
                stale.clone().unwrap_or_default()
            )),
            _ if too_many => Some(format!(
                "not run: more than {MAX_CALLS_PER_STEP} calls in one planning round"
            )),
            _ if self.thread.scope.is_some()
                && scoped.is_none()
                && self.thread.scope_step == Some(self.cursor.step) =>
            {
                Some(
                    "a narrowing follow-up must use the tool that showed the previous results"
                        .into(),
                )
            }
            _ => None,
        };
        let (args, conflict) = match &scoped {
            Some(s) => s.apply(&call.args),
            None => (call.args.clone(), None),
        };
        if let (Some(conflict), None) = (&conflict, &refusal) {
            return self.refuse_conflict(call, &args, conflict, gate).await;
        }
        let (Some(server), None) = (server, refusal.as_ref()) else {
            let summary = refusal.unwrap_or_default();
            let call_id = self.next_call_id();
            self.emit_call(&call_id, &call.tool, None, &args).await?;
            let digest = Digest::failed(&call.tool, &summary);
            let frame = wire::ToolResult {
                call_id: call_id.clone(),
                tool: call.tool.clone(),
                ok: false,
                summary,
                shape: None,
                conflict: None,
            };
            self.emit_result(frame, &args, None, Some(&digest)).await?;
            let anchor = match stale {
                Some(_) => Anchor::NarrowingStale,
                None => Anchor::ToolFailed {
                    tool: call.tool.clone(),
                },
            };
            return Ok(Outcome::Refused {
                call: self.record_for(call.id.as_deref(), &call.tool, args, digest),
                anchor: Some(anchor),
                gate: None,
            });
        };
        let contract = agent.contracts.get(&call.tool).cloned();
        let follow = contract.as_ref().is_some_and(|c| c.stitch);
        let id_field = contract
            .as_ref()
            .map_or("id", |c| c.shape.id_field())
            .to_string();
        let mut stitcher =
            Stitcher::new(&agent.tables.paging, agent.limits.page_cap).with_id_field(&id_field);
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
            let call_id = self.next_call_id();
            self.emit_call(&call_id, &call.tool, Some(server.name()), &page_args)
                .await?;
            let out = match server.call(&call.tool, page_args.clone()).await {
                Ok(out) => out,
                Err(e) => {
                    tracing::warn!(tool = %call.tool, kind = e.kind(), "tool call failed");
                    let digest = Digest::failed(&call.tool, e.kind());
                    let frame = wire::ToolResult {
                        call_id,
                        tool: call.tool.clone(),
                        ok: false,
                        summary: e.kind().to_string(),
                        shape: None,
                        conflict: None,
                    };
                    self.emit_result(frame, &page_args, None, Some(&digest))
                        .await?;
                    if first.is_none() {
                        return Ok(Outcome::Failed {
                            call: self.record_for(call.id.as_deref(), &call.tool, args, digest),
                            anchor: Anchor::ToolFailed {
                                tool: call.tool.clone(),
                            },
                        });
                    }
                    // A later page that failed (a rejected cursor may come
                    // as a JSON-RPC error) is an untrusted page: the stitch
                    // is abandoned and the first page stands alone.
                    stitcher
                        .push(&Reading::of(&ToolOutput::default(), contract.as_ref()))
                        .map_err(Stop::Violation)?;
                    break;
                }
            };
            let shape = out.shape();
            // Logs carry the result's shape — block count, kinds, _meta key
            // names — never its text.
            tracing::info!(tool = %call.tool, shape = %shape, "tool result");
            let reading = Reading::of(&out, contract.as_ref());
            let (verdict, _) = in_band::judge(contract.as_ref(), &reading, &out);
            let ok = !out.is_error && verdict != Verdict::InBandFailure;
            let summary = match (out.is_error, verdict) {
                (true, _) => "the tool reported an error".to_string(),
                (false, Verdict::InBandFailure) => match contract.as_ref().map(|c| c.accounting) {
                    Some(AccountingMode::Absent) => {
                        "the answer did not parse as data: treated as a failed data source".into()
                    }
                    _ => "no accounting and no result structure: treated as a failed data source"
                        .into(),
                },
                _ => summary(&reading, &out),
            };
            let failed_first = first.is_none() && !ok;
            let digest = match (failed_first, out.is_error) {
                (true, true) => Digest::failed(&call.tool, "the tool reported an error"),
                (true, false) => Digest::failed(&call.tool, "in-band failure: not a real answer"),
                _ => Digest::failed(&call.tool, "page"),
            };
            let frame = wire::ToolResult {
                call_id,
                tool: call.tool.clone(),
                ok,
                summary,
                shape: Some(shape.to_string()),
                conflict: None,
            };
            // A result still to be judged has no digest yet: the judged one
            // is stored with its card.
            let shown_digest = failed_first.then_some(&digest);
            self.emit_result(frame, &page_args, Some(&out), shown_digest)
                .await?;
            if failed_first {
                let anchor = match out.is_error {
                    true => Anchor::ToolFailed {
                        tool: call.tool.clone(),
                    },
                    false => {
                        tracing::warn!(tool = %call.tool, shape = %shape, "in-band failure: no marks of a real answer");
                        Anchor::InBandFailure {
                            tool: call.tool.clone(),
                        }
                    }
                };
                return Ok(Outcome::Failed {
                    call: self.record_for(call.id.as_deref(), &call.tool, args, digest),
                    anchor,
                });
            }
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
        let summary = match conflict {
            Conflict::Disjoint { key, scope, asked } => {
                format!("not run: {key} {asked} lies outside the previous results ({key} {scope})")
            }
            Conflict::Unsupported { key } => {
                format!("not run: the previous results cannot be narrowed by another {key}")
            }
        };
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

/// A one-line, text-free description for the tool_result frame.
fn summary(reading: &Reading, out: &ToolOutput) -> String {
    match (&reading.aggregate, &reading.items, &reading.record) {
        (Some(_), _, _) => "one value".to_string(),
        (None, Some(items), _) => format!("{} items", items.len()),
        (None, None, Some(_)) => "one record".to_string(),
        (None, None, None) => format!("{} content blocks", out.blocks.len()),
    }
}
