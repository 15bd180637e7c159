//! One turn: start → plan → tool calls and results → citations → narration
//! → done. Each step's messages and the turn's machine states are written to
//! the store in one transaction before the step's frame is sent, so a
//! dropped connection loses nothing that was already said.

use std::sync::Arc;

use futures::StreamExt;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tracing::Instrument;

use super::context::{BoundedContext, ContextLimits, RawContext};
use super::frames::{EmitError, FrameWriter, OutFrame};
use super::tools::ToolBelt;
use crate::judge::emptiness::{read_result_emptiness, AbsenceCause, Emptiness};
use crate::judge::in_band::{self, Verdict};
use crate::judge::narrowing::{self, Conflict, Gate, Scope};
use crate::judge::stitch::{StitchEnd, Stitcher};
use crate::judge::{self, result, Anchor, Contracts};
use crate::llm::prompt::{PLANNER_FIXED, RESPONDER_FIXED};
use crate::llm::{Model, PlanRequest, PlannedCall, Prompt, RespondRequest};
use crate::mcp::ToolOutput;
use crate::protocols::frame::{Frame, FrameEvent};
use crate::protocols::narrowing::{Narrowing, NarrowingEffect, NarrowingEvent};
use crate::protocols::paging::Paging;
use crate::protocols::Bound;
use crate::store::{NewMessage, Role, Store};

/// Bounds and external contracts that come from configuration.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The upstream query cap (`LIMIT 3000`): an external contract, not ours.
    pub limit_sentinel: u64,
    /// Most pages stitched into one listing.
    pub page_cap: usize,
    pub context: ContextLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            limit_sentinel: 3000,
            page_cap: 5,
            context: ContextLimits::default(),
        }
    }
}

/// A user message as the HTTP layer received it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnRequest {
    pub text: String,
    #[serde(default)]
    pub context: Option<RawContext>,
}

/// The tables a turn runs on, bound to their protocols.
#[derive(Clone)]
pub struct TurnTables {
    pub frame: Bound<Frame>,
    pub narrowing: Bound<Narrowing>,
    pub paging: Bound<Paging>,
}

pub struct Agent {
    pub model: Arc<dyn Model>,
    pub tools: ToolBelt,
    pub store: Store,
    pub tables: TurnTables,
    pub contracts: Contracts,
    pub limits: Limits,
    pub claims: Arc<super::claims::ThreadClaims>,
}

/// Why a turn stopped early. Every variant has already been reported to the
/// client where the connection allowed it.
#[derive(Debug, thiserror::Error)]
enum Stop {
    #[error(transparent)]
    Emit(#[from] EmitError),
    #[error("store: {0}")]
    Store(#[from] crate::store::StoreError),
}

struct Turn<'a> {
    agent: &'a Agent,
    thread_id: String,
    turn_id: String,
    frames: FrameWriter,
    /// The narrowing machine of the latest listing, persisted with each step.
    narrowing: Option<crate::fsm::Snapshot>,
    calls: usize,
}

/// One call's listing as the judge sees it: the tool, the scope it ran in
/// (if the narrowing table applied one), that listing's narrowing machine,
/// and the arguments that went out.
struct Listing<'a> {
    tool: &'a str,
    scope: Option<&'a Scope>,
    gate: Gate,
    args: &'a Map<String, Value>,
}

impl Findings {
    /// Nothing inside the scope: say so, and clear the thread's population
    /// so the next follow-up has no scope.
    fn release(&mut self) {
        self.released = true;
        self.population = None;
        self.anchors.push(Anchor::Absent {
            cause: AbsenceCause::ZeroAfterNarrowing,
        });
        self.anchors.push(Anchor::NarrowingReleased);
    }
}

/// What the judged results of a turn leave behind.
#[derive(Default)]
struct Findings {
    anchors: Vec<Anchor>,
    citations: Vec<Value>,
    /// The population this turn showed, for a later narrowing follow-up.
    population: Option<Scope>,
    /// A listing released its scope: the thread's population is cleared.
    released: bool,
}

impl Agent {
    /// Runs one turn, writing frames into `tx`. Returns when the turn is
    /// over or the client went away (the receiver was dropped), whichever
    /// comes first; nothing keeps running after it returns.
    pub async fn run_turn(
        &self,
        thread_id: &str,
        turn_id: &str,
        req: TurnRequest,
        tx: tokio::sync::mpsc::Sender<OutFrame>,
    ) {
        let span = tracing::info_span!("turn", thread_id = %thread_id, turn_id = %turn_id);
        let closed = tx.clone();
        let mut turn = Turn {
            agent: self,
            thread_id: thread_id.to_string(),
            turn_id: turn_id.to_string(),
            frames: FrameWriter::new(&self.tables.frame, tx),
            narrowing: None,
            calls: 0,
        };
        let work = async {
            tokio::select! {
                r = turn.run(req) => {
                    if let Err(e) = r {
                        tracing::warn!(error = %e, "turn stopped early");
                        turn.report(&e).await;
                    }
                    if let Err(e) = turn.frames.close().await {
                        tracing::warn!(error = %e, "closing the stream");
                    }
                }
                _ = closed.closed() => tracing::info!("client disconnected; turn cancelled"),
            }
        };
        work.instrument(span).await
    }
}

impl Turn<'_> {
    async fn persist(&self, messages: Vec<NewMessage>) -> Result<(), Stop> {
        let snap = |s: crate::fsm::Snapshot| serde_json::to_value(s).unwrap_or(Value::Null);
        let mut machines = vec![("frame", snap(self.frames.snapshot()))];
        if let Some(n) = &self.narrowing {
            machines.push(("narrowing", snap(n.clone())));
        }
        self.agent
            .store
            .step(&self.thread_id, &self.turn_id, &messages, &machines)
            .await?;
        Ok(())
    }

    /// Tells the client why the turn stopped, from the frame state the client
    /// actually saw. Nothing is persisted here: the store may be what failed.
    async fn report(&mut self, stop: &Stop) {
        let Stop::Store(_) = stop else { return };
        let data = json!({"message": "storage is unavailable; this turn was not saved"});
        if self.frames.allows(FrameEvent::Start) {
            let start = json!({"turn_id": self.turn_id, "thread_id": self.thread_id});
            let _ = self.frames.emit(FrameEvent::Start, start).await;
        }
        if self.frames.allows(FrameEvent::Error) {
            let _ = self.frames.emit(FrameEvent::Error, data).await;
        }
    }

    /// A frame whose step is durable before the client sees it: the
    /// machine moves, the messages and the machine states are written in one
    /// transaction, then the frame is sent.
    async fn step(
        &mut self,
        event: FrameEvent,
        data: Value,
        messages: Vec<NewMessage>,
    ) -> Result<(), Stop> {
        let before = self.frames.checkpoint();
        self.frames.fire(event).await?;
        if let Err(e) = self.persist(messages).await {
            // The frame was never sent: the machine goes back to what the
            // client saw, so the failure can still be reported in order.
            self.frames.restore(before);
            return Err(e);
        }
        self.frames.send(event, data).await?;
        Ok(())
    }

    /// Ends the turn with an error frame and records it.
    async fn fail(&mut self, message: String, tool: Option<&str>) -> Result<(), Stop> {
        let mut data = json!({"message": message});
        if let Some(t) = tool {
            data["tool"] = json!(t);
        }
        let body = json!({"error": data});
        self.step(
            FrameEvent::Error,
            data,
            vec![NewMessage {
                role: Role::Assistant,
                body,
            }],
        )
        .await
    }

    /// The population the thread's last answer showed, if it still stands.
    async fn previous_population(&self) -> Result<Option<Scope>, Stop> {
        let messages = self.agent.store.messages(&self.thread_id).await?;
        let last = messages
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant && m.body.get("error").is_none());
        Ok(last
            .filter(|m| m.body.get("scope_released") != Some(&Value::Bool(true)))
            .and_then(|m| m.body.get("population"))
            .and_then(|p| serde_json::from_value(p.clone()).ok()))
    }

    async fn run(&mut self, req: TurnRequest) -> Result<(), Stop> {
        let limits = self.agent.limits;
        let context = req
            .context
            .map(|c| BoundedContext::bound(c, limits.context));
        let start = json!({"turn_id": self.turn_id, "thread_id": self.thread_id});
        let user = NewMessage {
            role: Role::User,
            body: json!({"text": req.text, "context": context}),
        };
        self.step(FrameEvent::Start, start, vec![user]).await?;

        let mut findings = Findings::default();
        let mut planner = Prompt::new(PLANNER_FIXED);
        if let Some(c) = context.as_ref().filter(|c| !c.is_empty()) {
            planner = planner.block("Host context", c.prompt_text());
            for field in &c.truncated {
                findings.anchors.push(Anchor::ContextTruncated {
                    field: field.clone(),
                });
            }
        }
        let plan_req = PlanRequest {
            prompt: planner,
            user_text: req.text.clone(),
            tools: self.agent.tools.tools().to_vec(),
            context: context.as_ref().and_then(|c| serde_json::to_value(c).ok()),
        };
        let plan = match self.agent.model.plan(&plan_req).await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "planner failed");
                return self
                    .fail(format!("the model could not plan this turn: {e}"), None)
                    .await;
            }
        };

        // The scope of a narrowing follow-up comes from turn state, never
        // from the model.
        let scope = match plan.narrows_previous {
            true => self.previous_population().await?,
            false => None,
        };
        if plan.narrows_previous && scope.is_none() {
            findings.anchors.push(Anchor::NothingToNarrow);
        }
        if !plan.calls.is_empty() {
            let steps: Vec<Value> = plan
                .calls
                .iter()
                .map(|c| json!({"tool": c.tool, "args": effective_args(scope.as_ref(), c)}))
                .collect();
            let mut data = json!({"steps": steps, "note": plan.note});
            if let Some(s) = &scope {
                data["scope"] = json!(s);
            }
            self.frames.emit(FrameEvent::Plan, data).await?;
        }

        for call in &plan.calls {
            if !self.run_call(call, scope.as_ref(), &mut findings).await? {
                return Ok(());
            }
        }

        let mut responder = Prompt::new(RESPONDER_FIXED);
        if !findings.anchors.is_empty() {
            let lines: Vec<String> = findings
                .anchors
                .iter()
                .map(|a| format!("- {}", a.text()))
                .collect();
            responder = responder.block("Directives", lines.join("\n"));
        }
        let respond_req = RespondRequest {
            prompt: responder,
            user_text: req.text.clone(),
            anchors: findings.anchors.clone(),
        };
        let mut text = String::new();
        let mut stream = match self.agent.model.respond(&respond_req).await {
            Ok(s) => s,
            Err(e) => {
                return self
                    .fail(format!("the model could not answer: {e}"), None)
                    .await
            }
        };
        while let Some(delta) = stream.next().await {
            match delta {
                Ok(d) if d.is_empty() => {}
                Ok(d) => {
                    self.frames
                        .emit(FrameEvent::Delta, json!({"text": d}))
                        .await?;
                    text += &d;
                }
                Err(e) => {
                    return self
                        .fail(format!("the model stream broke: {e}"), None)
                        .await
                }
            }
        }
        if text.is_empty() {
            return self.fail("the model returned no answer".into(), None).await;
        }
        let assistant = NewMessage {
            role: Role::Assistant,
            body: json!({
                "text": text,
                "citations": findings.citations,
                "anchors": findings.anchors,
                "population": findings.population,
                "scope_released": findings.released,
            }),
        };
        let done = json!({"turn_id": self.turn_id});
        self.step(FrameEvent::Done, done, vec![assistant]).await
    }

    /// Calls one tool (and, for a stitchable listing, its further pages),
    /// then judges what came back. Returns `false` when the turn has ended.
    async fn run_call(
        &mut self,
        call: &PlannedCall,
        scope: Option<&Scope>,
        findings: &mut Findings,
    ) -> Result<bool, Stop> {
        let server = self.agent.tools.client_for(&call.tool).cloned();
        // One narrowing machine per listing. The scope is applied only if
        // the table's `narrow` row says so (effect `apply-scope`).
        let mut gate = Gate::new(&self.agent.tables.narrowing);
        let scoped = match scope.filter(|s| s.tool == call.tool) {
            Some(s) => match gate.narrow() {
                Ok(Some(NarrowingEffect::ApplyScope)) => Some(s),
                Ok(_) => None,
                Err(v) => {
                    tracing::error!(row_id = %v.row_id, "narrowing table refused the scope");
                    None
                }
            },
            None => None,
        };
        // A model that names a tool nobody offers, sends arguments that are
        // not an object, or narrows with another tool than the one that
        // showed the population, gets a structured tool error; nothing runs.
        let refusal = match (&server, &call.invalid_args) {
            (None, _) => Some("unknown tool".to_string()),
            (Some(_), Some(why)) => Some(format!("invalid arguments: {why}")),
            _ if scope.is_some() && scoped.is_none() => Some(
                "a narrowing follow-up must use the tool that showed the previous results".into(),
            ),
            _ => None,
        };
        let (args, conflict) = match scoped {
            Some(s) => s.apply(&call.args),
            None => (call.args.clone(), None),
        };
        if let (Some(conflict), None) = (&conflict, &refusal) {
            return self
                .refuse_conflict(call, &args, conflict, gate, findings)
                .await;
        }
        let (Some(server), None) = (server, refusal.as_ref()) else {
            let summary = refusal.unwrap_or_default();
            let call_id = self.next_call_id();
            self.emit_call(&call_id, &call.tool, None, &args).await?;
            let data =
                json!({"call_id": call_id, "tool": call.tool, "ok": false, "summary": summary});
            let msg = tool_message(&call_id, &call.tool, &args, None, Some(&summary));
            self.step(FrameEvent::ToolResult, data, vec![msg]).await?;
            findings.anchors.push(Anchor::ToolFailed {
                tool: call.tool.clone(),
            });
            return Ok(true);
        };
        let contract = self.agent.contracts.get(&call.tool).cloned();
        let stitching = contract.as_ref().is_some_and(|c| c.stitch);
        let mut stitcher = Stitcher::new(&self.agent.tables.paging, self.agent.limits.page_cap);
        let mut page_args = args.clone();
        let mut first: Option<ToolOutput> = None;
        loop {
            let call_id = self.next_call_id();
            self.emit_call(&call_id, &call.tool, Some(server.name()), &page_args)
                .await?;
            let out = match server.call(&call.tool, page_args.clone()).await {
                Ok(out) => out,
                Err(e) => {
                    tracing::warn!(tool = %call.tool, kind = e.kind(), "tool call failed");
                    let data = json!({"call_id": call_id, "tool": call.tool, "ok": false, "summary": e.kind()});
                    let msg = tool_message(&call_id, &call.tool, &page_args, None, Some(e.kind()));
                    self.step(FrameEvent::ToolResult, data, vec![msg]).await?;
                    if first.is_none() {
                        let message = format!("the tool {} failed: {}", call.tool, e.kind());
                        self.fail(message, Some(&call.tool)).await?;
                        return Ok(false);
                    }
                    // A later page that failed (a rejected cursor may come
                    // as a JSON-RPC error) is an untrusted page: the stitch
                    // is abandoned and the first page stands alone.
                    if let Err(v) = stitcher.push(&ToolOutput::default()) {
                        tracing::error!(row_id = %v.row_id, "paging table refused a page (server bug)");
                    }
                    break;
                }
            };
            let shape = out.shape();
            // Logs carry the result's shape — block count, kinds, _meta key
            // names — never its text.
            tracing::info!(tool = %call.tool, shape = %shape, "tool result");
            let (verdict, _) = in_band::judge(contract.as_ref(), &out);
            let ok = !out.is_error && verdict != Verdict::InBandFailure;
            let summary = match (out.is_error, verdict) {
                (true, _) => "the tool reported an error".to_string(),
                (false, Verdict::InBandFailure) => {
                    "no accounting and no result structure: treated as a failed data source".into()
                }
                _ => summary(&out),
            };
            let data = json!({"call_id": call_id, "tool": call.tool, "ok": ok, "summary": summary, "shape": shape.to_string()});
            let msg = tool_message(&call_id, &call.tool, &page_args, Some(&out), None);
            self.step(FrameEvent::ToolResult, data, vec![msg]).await?;

            if first.is_none() {
                if out.is_error {
                    findings.anchors.push(Anchor::ToolFailed {
                        tool: call.tool.clone(),
                    });
                    return Ok(true);
                }
                if verdict == Verdict::InBandFailure {
                    tracing::warn!(tool = %call.tool, shape = %shape, "in-band failure: no marks of a real answer");
                    findings.anchors.push(Anchor::InBandFailure {
                        tool: call.tool.clone(),
                    });
                    return Ok(true);
                }
            }
            if !stitching {
                first = Some(out);
                break;
            }
            let next = match stitcher.push(&out) {
                Ok(next) => next,
                Err(v) => {
                    tracing::error!(row_id = %v.row_id, "paging table refused a page (server bug)");
                    None
                }
            };
            first.get_or_insert(out);
            match next {
                Some(cursor) => {
                    page_args.insert("cursor".into(), json!(cursor));
                }
                None => break,
            }
        }
        let Some(first) = first else { return Ok(true) };
        let stitched = stitching.then(|| stitcher.finish());
        let listing = Listing {
            tool: &call.tool,
            scope: scoped,
            gate,
            args: &args,
        };
        self.judge_results(listing, &first, stitched, findings)
            .await?;
        Ok(true)
    }

    async fn judge_results(
        &mut self,
        listing: Listing<'_>,
        first: &ToolOutput,
        stitched: Option<judge::stitch::Stitched>,
        findings: &mut Findings,
    ) -> Result<(), Stop> {
        let Listing {
            tool,
            scope,
            mut gate,
            args,
        } = listing;
        let tool = tool.to_string();
        let contract = self.agent.contracts.get(&tool);
        // A single-value aggregate is exact and needs no card.
        if let Some((column, value)) = result::aggregate(first) {
            let anchor = match value {
                // NULL says neither "none" nor a number (MAX over no rows, or
                // over empty values): nothing is claimed either way.
                Value::Null => Anchor::NoValue {
                    source: tool.clone(),
                },
                v => Anchor::Aggregate {
                    source: tool,
                    column,
                    value: v
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| v.to_string()),
                },
            };
            findings.anchors.push(anchor);
            return Ok(());
        }
        let (items, accounting) = match &stitched {
            Some(s) => {
                match s.end {
                    StitchEnd::Abandoned => findings.anchors.push(Anchor::StitchAbandoned {
                        anomaly: s.anomaly.as_ref().map(|a| a.describe()).unwrap_or_default(),
                    }),
                    StitchEnd::Capped => findings
                        .anchors
                        .push(Anchor::StitchCapped { pages: s.pages }),
                    StitchEnd::Complete => {}
                }
                (Some(s.items.clone()), s.accounting.clone())
            }
            None => (result::items(first), judge::accounting::read(first)),
        };
        let displayed = items
            .as_ref()
            .map(|v| v.len() as u64)
            .or(accounting.as_ref().map(|a| a.returned))
            .unwrap_or(0);
        let mut count = judge::grade(
            accounting.as_ref(),
            displayed,
            self.agent.limits.limit_sentinel,
        );
        let items = items.unwrap_or_default();

        // The listing's narrowing verdict, decided by the table.
        let emptiness = read_result_emptiness(contract, first);
        let page = narrowing::classify(
            scope,
            &items,
            &count,
            emptiness,
            self.agent.limits.limit_sentinel,
        );
        let verdict = gate.verdict(page);
        self.narrowing = Some(gate.snapshot());
        let effect = match verdict {
            Ok(effect) => effect,
            Err(v) => {
                // The table refused the page. The only page code can
                // classify into a forbidden row is one outside the scope:
                // another population, discarded, never shown as the answer.
                tracing::warn!(row_id = %v.row_id, "narrowing table refused the page");
                findings
                    .anchors
                    .push(Anchor::OutsideScope { tool: tool.clone() });
                return Ok(());
            }
        };
        let released = effect == Some(NarrowingEffect::ReleaseScope);
        match effect {
            Some(NarrowingEffect::UpgradeExact) => narrowing::upgrade(&mut count),
            Some(NarrowingEffect::ReleaseScope) => findings.release(),
            _ => {}
        }
        if !released {
            match (emptiness, count.displayed) {
                (Emptiness::Empty, _) => findings.anchors.push(Anchor::Absent {
                    cause: AbsenceCause::ZeroFromStart,
                }),
                (Emptiness::Unknown, 0) => findings.anchors.push(Anchor::CountUnknown {
                    source: tool.clone(),
                }),
                _ => findings.anchors.push(Anchor::for_count(&tool, &count)),
            }
            if !findings.released {
                findings.population = Some(Scope::new(&tool, args));
            }
        }
        let mut citation = json!({
            "source": tool,
            "items": items,
            "displayed": count.displayed,
            "total": count.total,
            "total_is_lower_bound": count.total_is_lower_bound,
            "has_more": count.has_more,
            "grade": count.grade,
            "complete": count.complete,
            "narrowed": scope.is_some(),
        });
        if let Some(s) = &stitched {
            citation["stitch"] = json!({"end": s.end, "pages": s.pages, "anomaly": s.anomaly});
        }
        self.frames
            .emit(FrameEvent::Citation, citation.clone())
            .await?;
        findings.citations.push(citation);
        Ok(())
    }

    /// A narrowing follow-up whose own arguments disagree with its scope is
    /// not run with the scope's values under the model's label. A disjoint
    /// filter (floor 5 inside floor 3) is an empty intersection: zero after
    /// narrowing, through the table. A new search term is not expressible
    /// as a subset: refused, the scope kept.
    async fn refuse_conflict(
        &mut self,
        call: &PlannedCall,
        args: &Map<String, Value>,
        conflict: &Conflict,
        mut gate: Gate,
        findings: &mut Findings,
    ) -> Result<bool, Stop> {
        let summary = match conflict {
            Conflict::Disjoint { key, scope, asked } => {
                format!("not run: {key} {asked} lies outside the previous results ({key} {scope})")
            }
            Conflict::Unsupported { key } => {
                format!("not run: the previous results cannot be narrowed by another {key}")
            }
        };
        let call_id = self.next_call_id();
        self.emit_call(&call_id, &call.tool, None, args).await?;
        let data = json!({"call_id": call_id, "tool": call.tool, "ok": false, "summary": summary, "conflict": conflict});
        let msg = tool_message(&call_id, &call.tool, args, None, Some(&summary));
        self.step(FrameEvent::ToolResult, data, vec![msg]).await?;
        match conflict {
            Conflict::Unsupported { key } => findings
                .anchors
                .push(Anchor::NarrowingUnsupported { key: key.clone() }),
            Conflict::Disjoint { .. } => {
                let verdict = gate.verdict(NarrowingEvent::PageEmpty);
                self.narrowing = Some(gate.snapshot());
                if let Ok(Some(NarrowingEffect::ReleaseScope)) = verdict {
                    findings.release();
                }
            }
        }
        Ok(true)
    }

    fn next_call_id(&mut self) -> String {
        self.calls += 1;
        format!("{}-{}", self.turn_id, self.calls)
    }

    async fn emit_call(
        &mut self,
        call_id: &str,
        tool: &str,
        server: Option<&str>,
        args: &Map<String, Value>,
    ) -> Result<(), Stop> {
        let data = json!({"call_id": call_id, "tool": tool, "server": server, "args": args});
        self.frames.emit(FrameEvent::ToolCall, data).await?;
        Ok(())
    }
}

/// The arguments that go out: the model's, with the scope spread last.
fn effective_args(scope: Option<&Scope>, call: &PlannedCall) -> Map<String, Value> {
    match scope.filter(|s| s.tool == call.tool) {
        Some(s) => s.apply(&call.args).0,
        None => call.args.clone(),
    }
}

fn tool_message(
    call_id: &str,
    tool: &str,
    args: &Map<String, Value>,
    out: Option<&ToolOutput>,
    error: Option<&str>,
) -> NewMessage {
    NewMessage {
        role: Role::Tool,
        body: json!({"call_id": call_id, "tool": tool, "args": args, "result": out, "error": error}),
    }
}

/// A one-line, text-free description for the tool_result frame.
fn summary(out: &ToolOutput) -> String {
    match result::items(out) {
        Some(items) => format!("{} items", items.len()),
        None => format!("{} content blocks", out.blocks.len()),
    }
}
