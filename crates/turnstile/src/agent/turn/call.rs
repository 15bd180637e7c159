//! The `call` effect: run the step's next planned call (and, for a
//! stitchable listing, its further pages) and classify the outcome.

use serde_json::{Map, Value};
use tracing::Instrument;

use super::{Outcome, Stop, Turn};
use crate::judge::approval::HoldVerdict;
use crate::judge::contracts::Contract;
use crate::judge::digest::Digest;
use crate::judge::narrowing::{Gate, Scope};
use crate::judge::page;
use crate::judge::result::Reading;
use crate::judge::stitch::Stitcher;
use crate::judge::Anchor;
use crate::llm::PlannedCall;
use crate::mcp::{Answer, InputAsk, McpError, ToolOutput};
use crate::protocols::telemetry;
use crate::protocols::turn::TurnEvent;
use crate::wire;

impl Turn<'_> {
    /// Runs the step's next call (and, for a stitchable listing, its further
    /// pages) and classifies the outcome.
    pub(super) async fn call(&mut self) -> Result<TurnEvent, Stop> {
        let Some(call) = self.next_pending() else {
            // The table asked for a call the plan does not have.
            return Err(Stop::NoCallPending);
        };
        self.cursor.planned_calls += 1;
        self.cursor.calls_this_step += 1;
        let Some(outcome) = self.run_call(&call).await? else {
            // Held for the user's approval of the exact call: nothing sent.
            return Ok(TurnEvent::ApprovalNeeded);
        };
        let suspend = self.classify_approval(&call, &outcome).await?;
        let terminal = self.classify_export(&call, &outcome)?;
        // Everything true of the outcome; which one is acted on is the
        // turn table's `precedence`.
        let found = [
            (suspend.is_some(), TurnEvent::ApprovalNeeded),
            (terminal.is_some(), TurnEvent::TerminalResult),
            (
                matches!(outcome, Outcome::Returned { .. }),
                TurnEvent::CallOk,
            ),
            (
                !matches!(outcome, Outcome::Returned { .. }),
                TurnEvent::CallFailed,
            ),
        ];
        let found: Vec<TurnEvent> = (found.into_iter())
            .filter_map(|(holds, e)| holds.then_some(e))
            .collect();
        let event = (self.agent.tables.turn.first_of(&found))
            .expect("an outcome is returned or not, so one event holds");
        self.cursor.outcome = Some(outcome);
        Ok(event)
    }

    /// One planned call: its narrowing scope, its admission, whether it
    /// waits for approval of itself (`None`: held, nothing sent), then its
    /// pages.
    async fn run_call(&mut self, call: &PlannedCall) -> Result<Option<Outcome>, Stop> {
        if let Some(ran) = self.run_decided_call().await? {
            return Ok(ran);
        }
        // One narrowing machine per listing. The scope is applied only if
        // the table's `narrow` row says so (effect `apply-scope`).
        let mut gate = Gate::new(&self.agent.tables.narrowing);
        let (scoped, stale) = self.scope_for(call, &mut gate)?;
        let server = self.agent.tools.server_of(&call.tool);
        let (args, conflict) = match &scoped {
            Some(s) => s.apply(&call.args),
            None => (call.args.clone(), None),
        };
        let offered = server.is_some();
        if let Err(refusal) = self.admit(call, offered, stale.as_deref()) {
            return self.refuse(call, args, refusal).await.map(Some);
        }
        if let Some(conflict) = &conflict {
            return self
                .refuse_conflict(call, &args, conflict, gate)
                .await
                .map(Some);
        }
        // A tool nobody offers is `unknown_tool`, which the admission
        // binding forbids in every state (checked at load).
        let Some(server) = server else {
            unreachable!("admission admitted a tool no server offers")
        };
        match self.hold_call(call, &args)? {
            super::hold_call::Hold::Send => {}
            super::hold_call::Hold::Held => return Ok(None),
            super::hold_call::Hold::Refused(r) => {
                return self.refuse(call, args, r).await.map(Some)
            }
        }
        self.fetch(call, &server, args, scoped, gate).await
    }

    /// Runs an admitted call: its first page, and for a stitched listing
    /// (or a continuation of an earlier turn's) the pages the paging table
    /// lets follow. `None`: the server asked the user something first, and
    /// the call is held at an interrupt.
    pub(super) async fn fetch(
        &mut self,
        call: &PlannedCall,
        server: &str,
        args: Map<String, Value>,
        scoped: Option<Scope>,
        gate: Gate,
    ) -> Result<Option<Outcome>, Stop> {
        let contract = self.agent.contracts.get(&call.tool).cloned();
        // A stitched listing follows its pages, unless the approval policy
        // sends this call once (`send-once`: a call a decision sends).
        let follow = contract.as_ref().is_some_and(|c| c.stitch)
            && self.hold_policy(&call.tool, false) != HoldVerdict::SendOnce;
        let (mut stitcher, cursor) = self.stitcher(call, contract.as_ref());
        let continued = cursor.is_some();
        let stitching = follow || continued;
        let mut page_args = with_cursor(&args, cursor);
        let mut first: Option<(ToolOutput, Reading)> = None;
        loop {
            // A continuation's page is a later page of its listing: what it
            // is, is the paging table's to say (a rejected cursor), not a
            // failed first call.
            let first_page = first.is_none() && !continued;
            let page = self
                .fetch_page(call, server, &page_args, contract.as_ref(), first_page)
                .await?;
            let (out, reading) = match page {
                Page::Answer(out, reading) => (out, reading),
                Page::Failed(failure) => return Ok(Some(self.failed_call(call, args, failure))),
                // The server asks the user: the paging table's `page_asks`
                // row holds the call (its first page, as shipped), or the
                // page is no page (a later or continued one).
                Page::Asks(ask) => {
                    if !stitcher.page_asks().map_err(Stop::Violation)? {
                        break;
                    }
                    return self.asked(call, server, args, *ask).await;
                }
                // No page at all: the paging table's `page_failed` row says
                // whether the call failed (its first page, as shipped) or
                // the first page stands alone.
                Page::Gone(kind, failure) => {
                    if stitcher.page_failed(kind).map_err(Stop::Violation)? {
                        return Ok(Some(self.failed_call(call, args, failure)));
                    }
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
        let stitched = stitching.then_some(stitcher);
        Ok(Some(self.returned(
            call,
            args,
            (scoped, gate),
            first,
            stitched,
            contract.as_ref(),
        )))
    }

    /// A call whose server asks the user first: held at an interrupt
    /// (`None`), or refused with the reason, as the call's failure.
    async fn asked(
        &mut self,
        call: &PlannedCall,
        server: &str,
        args: Map<String, Value>,
        ask: InputAsk,
    ) -> Result<Option<Outcome>, Stop> {
        Ok(match self.hold_input(call, server, &args, ask).await? {
            Ok(()) => None,
            Err(reason) => Some(self.refused_question(call, args, &reason)),
        })
    }

    /// A call whose first page failed: its digest and anchor.
    fn failed_call(
        &self,
        call: &PlannedCall,
        args: Map<String, Value>,
        (digest, anchor): (Digest, Anchor),
    ) -> Outcome {
        Outcome::Failed {
            call: self.record_for(call.id.as_deref(), &call.tool, args, digest),
            anchor,
        }
    }

    /// A call that returned: its first page (none, when a continued page
    /// never came: the stitch says so), its stitched listing and the
    /// narrowing it ran under, to be judged.
    fn returned(
        &mut self,
        call: &PlannedCall,
        args: Map<String, Value>,
        (scoped, gate): (Option<Scope>, Gate),
        first: Option<(ToolOutput, Reading)>,
        stitcher: Option<Stitcher>,
        contract: Option<&Contract>,
    ) -> Outcome {
        let (first, reading) = first.unwrap_or_else(|| {
            let out = ToolOutput::default();
            let reading = Reading::of(&out, contract);
            (out, reading)
        });
        let stitched = stitcher.map(|stitcher| {
            let n = self.next_listing();
            self.ledger
                .dirty
                .push((format!("paging#{n}"), stitcher.snapshot()));
            Box::new(stitcher.finish())
        });
        let digest = Digest::failed(&call.tool, "not judged yet");
        Outcome::Returned {
            call: self.record_for(call.id.as_deref(), &call.tool, args, digest),
            scoped: scoped.map(Box::new),
            gate,
            first: Box::new(first),
            reading: Box::new(reading),
            stitched,
        }
    }

    /// The paging machine of one listing and, when the call continues a
    /// listing an earlier turn showed ("show more"), the stored cursor it
    /// goes on from: that machine was resumed from the stored mark when
    /// the plan was made, so its page is checked against what was shown.
    fn stitcher(
        &mut self,
        call: &PlannedCall,
        contract: Option<&Contract>,
    ) -> (Stitcher, Option<String>) {
        if let Some(continued) = self.show_more.take_for(&call.tool) {
            return continued;
        }
        let limits = self.agent.limits;
        let id_field = contract.map_or("id", |c| c.shape.id_field());
        let stitcher =
            Stitcher::new(&self.agent.tables.paging, limits.page_cap).with_id_field(id_field);
        (stitcher, None)
    }

    /// One page: the call and its result frame, and what the page is.
    async fn fetch_page(
        &mut self,
        call: &PlannedCall,
        server: &str,
        args: &Map<String, Value>,
        contract: Option<&Contract>,
        first_page: bool,
    ) -> Result<Page, Stop> {
        let tool = &call.tool;
        let call_id = self.next_call_id();
        self.emit_call(&call_id, tool, Some(server), args).await?;
        let called = std::time::Instant::now();
        let sending = self.sending(tool, args);
        let tools = self.agent.tools.clone();
        let span = crate::agent::spans::execute_tool(tool, &call_id, server);
        let who = crate::agent::connections::OnBehalf {
            thread: self.thread_id.clone(),
            access: self.licence.access.clone(),
        };
        let answer = super::ask::send(tools.as_ref(), &who, tool, args.clone(), sending)
            .instrument(span.clone())
            .await;
        // A call the server made a task is followed here to its end: its
        // progress shown, its result (or how it ended) this page's.
        // Held until the result below is shown: a turn stopped before that
        // hands the telling on (`agent::tasks`).
        let mut following = None;
        let answer = match answer {
            Ok(Answer::Task(ticket)) => {
                let (out, f) = self
                    .follow_task(&call_id, tool, server, ticket, called)
                    .instrument(span)
                    .await?;
                following = Some(f);
                out.map(Answer::Output)
            }
            other => other,
        };
        telemetry::phase(telemetry::Phase::Mcp, called.elapsed());
        let page = match answer {
            Ok(Answer::Output(out)) => {
                let page = (call_id, tool.as_str(), args, contract);
                self.answered_page(page, out, first_page).await?
            }
            // Followed above: a task's answer is its output or an error.
            Ok(Answer::Task(_)) => unreachable!("a task is followed to its end above"),
            Ok(Answer::Asks(ask)) => {
                // No result: the server asks the user first (or turnstile
                // does: connect a per-user server). What it asks is the
                // interrupt's to show, not this frame's.
                let connect = (ask.requests.iter())
                    .any(|(_, a)| matches!(a, crate::mcp::Asked::Connect { .. }));
                let (summary, digest) = match connect {
                    true => (
                        "connect_required",
                        "waits for the user to connect their account; not sent",
                    ),
                    false => ("input_required", "asked the user for input"),
                };
                let digest = Digest::failed(tool, digest);
                self.emit_unanswered(call_id, tool, args, summary, &digest)
                    .await?;
                return Ok(Page::Asks(Box::new(ask)));
            }
            Err(e) => {
                tracing::warn!(tool = %tool, kind = e.kind(), "tool call failed");
                let digest = Digest::failed(tool, e.kind());
                self.emit_unanswered(call_id, tool, args, e.kind(), &digest)
                    .await?;
                // What that means (the call failed, or a later page is no
                // page: a rejected cursor may come as a JSON-RPC error) is
                // the paging table's `page_failed` row.
                let anchor = match e {
                    McpError::Unanswered { .. } => Anchor::OutcomeUnknown { tool: tool.clone() },
                    _ => Anchor::ToolFailed { tool: tool.clone() },
                };
                Page::Gone(e.kind(), (digest, anchor))
            }
        };
        following.iter_mut().for_each(|f| f.shown());
        Ok(page)
    }

    /// The result frame of a call that brought no output (it failed, or
    /// its server asks the user first), with its digest.
    async fn emit_unanswered(
        &mut self,
        call_id: String,
        tool: &str,
        args: &Map<String, Value>,
        summary: &str,
        digest: &Digest,
    ) -> Result<(), Stop> {
        let frame = wire::ToolResult {
            call_id,
            tool: tool.to_string(),
            ok: false,
            summary: summary.to_string(),
            shape: None,
            conflict: None,
            refusal: None,
        };
        self.emit_result(frame, args, None, Some(digest)).await
    }

    /// A page that came: read, checked for failure, shown. A first page
    /// that is not a real answer fails the call; a later one is the paging
    /// table's to classify (an untrusted page).
    async fn answered_page(
        &mut self,
        (call_id, tool, args, contract): (String, &str, &Map<String, Value>, Option<&Contract>),
        out: ToolOutput,
        first_page: bool,
    ) -> Result<Page, Stop> {
        let shape = out.shape();
        // Logs carry the result's shape — block count, kinds, _meta key
        // names — never its text.
        tracing::info!(tool = %tool, shape = %shape, "tool result");
        let reading = Reading::of(&out, contract);
        // A terminal flow's confirm: the capability validator's verdict is
        // part of whether this answer failed.
        let failure = page::failure(tool, contract, &reading, &out)
            .or_else(|| self.capability_failure(tool, &out));
        let ok = failure.is_none();
        let summary = match &failure {
            Some(f) => f.summary.clone(),
            None => page::summary(&reading, &out),
        };
        let failed = failure.filter(|_| first_page);
        let digest = failed.as_ref().map(|f| Digest::failed(tool, f.note));
        let frame = wire::ToolResult {
            call_id,
            tool: tool.to_string(),
            ok,
            summary,
            shape: Some(shape.to_string()),
            conflict: None,
            refusal: None,
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
}

/// The arguments a page goes out with: the call's, and the stored cursor
/// of a continued listing. The cursor goes on the call that is sent and
/// nowhere else: the call's record (what a model sees of it) keeps the
/// arguments without it.
fn with_cursor(args: &Map<String, Value>, cursor: Option<String>) -> Map<String, Value> {
    let mut page_args = args.clone();
    if let Some(cursor) = cursor {
        page_args.insert("cursor".into(), Value::String(cursor));
    }
    page_args
}

/// One fetched page.
enum Page {
    Answer(ToolOutput, Reading),
    /// The server asked the user something instead of answering.
    Asks(Box<InputAsk>),
    /// The first page is not a real answer (an in-band failure): the
    /// call's digest and anchor.
    Failed((Digest, Anchor)),
    /// The page's call failed, of this kind: no page. The call's digest
    /// and anchor, should that fail the call.
    Gone(&'static str, (Digest, Anchor)),
}
