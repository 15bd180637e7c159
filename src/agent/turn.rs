//! One turn as the `turn` table runs it. Code classifies what happened (the
//! model planned calls, a call returned, the step limit was reached, …) into
//! an event and fires it; the row's effect is what the agent does next:
//! plan, call, judge, respond, finish, fail. Nothing here decides the order.
//!
//! Everything a frame shows is committed before the frame is sent: the
//! step's records and the turn's machine states go to the store in one
//! transaction, then the frame is written (ADR 0006, ADR 0010).

use std::collections::VecDeque;
use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use serde::Deserialize;
use serde_json::{Map, Value};
use tracing::Instrument;

use super::context::{BoundedContext, ContextLimits, RawContext};
use super::frames::{event_of, EmitError, FrameWriter, OutFrame};
use super::records::{self, Record};
use super::tools::ToolBelt;
use crate::fsm::{Snapshot, Violation};
use crate::guard::check::{Guard, Piece};
use crate::guard::licence::{Licences, TurnFacts};
use crate::guard::vocab::{self, Lang};
use crate::judge::contracts::AccountingMode;
use crate::judge::digest::{Digest, DigestLimits};
use crate::judge::in_band::{self, Verdict};
use crate::judge::listing::{self, Judgement};
use crate::judge::narrowing::{Conflict, Gate, PageMark, Scope};
use crate::judge::result::Reading;
use crate::judge::stitch::{Stitched, Stitcher};
use crate::judge::{Anchor, Contracts};
use crate::llm::prompt::{PLANNER_FIXED, RESPONDER_FIXED};
use crate::llm::{
    CallRecord, HistoryTurn, Model, PlanRequest, PlannedCall, Prompt, RespondRequest,
};
use crate::mcp::ToolOutput;
use crate::protocols::frame::{Frame, FrameEffect, FrameEvent};
use crate::protocols::narrowing::{Narrowing, NarrowingEffect, NarrowingEvent};
use crate::protocols::paging::Paging;
use crate::protocols::turn::{Turn as TurnTable, TurnEffect, TurnEvent};
use crate::protocols::{telemetry, Bound, Typed};
use crate::store::{NewMessage, Store};
use crate::wire;

/// Bounds and external contracts that come from configuration.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The upstream query cap (`LIMIT 3000`): an external contract, not ours.
    pub limit_sentinel: u64,
    /// Most pages stitched into one listing.
    pub page_cap: usize,
    pub context: ContextLimits,
    /// Most planning rounds that may call tools in one turn.
    pub max_steps: u32,
    /// How much of each result the models see.
    pub digest: DigestLimits,
    /// Bytes of earlier turns the planner sees (oldest dropped first).
    pub history_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            limit_sentinel: 3000,
            page_cap: 5,
            context: ContextLimits::default(),
            max_steps: 6,
            digest: DigestLimits::default(),
            history_bytes: 4096,
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
    pub turn: Bound<TurnTable>,
    pub narration: Bound<crate::protocols::narration::Narration>,
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
    /// A table forbade what the turn reached: reported with its row id.
    #[error("{0}")]
    Violation(Box<Violation>),
    /// The turn table asked for a call the plan does not have.
    #[error("the turn table asked for a call with none pending")]
    NoCallPending,
}

/// How a turn's task ended.
enum Ending {
    Ran,
    Gone,
    LeaseLost,
}

/// One call's outcome, waiting to be judged.
enum Outcome {
    /// Not run (unknown tool, bad arguments, a narrowing refusal): its
    /// result frame is out already.
    Refused {
        call: CallRecord,
        anchor: Option<Anchor>,
        /// A disjoint narrowing: zero inside the scope, decided by the table.
        gate: Option<Gate>,
    },
    /// The call failed or its answer is not trusted.
    Failed { call: CallRecord, anchor: Anchor },
    /// A result to judge.
    Returned {
        call: CallRecord,
        scoped: Option<Box<Scope>>,
        gate: Gate,
        first: Box<ToolOutput>,
        /// The first page as read with the tool's contract.
        reading: Box<Reading>,
        stitched: Option<Stitched>,
    },
}

struct Turn<'a> {
    agent: &'a Agent,
    thread_id: String,
    turn_id: String,
    frames: FrameWriter,
    machine: Typed<TurnTable>,
    /// Listing machines (`narrowing#N`, `paging#N`) to persist with the
    /// next step, and every one run so far (for the metrics).
    dirty: Vec<(String, Snapshot)>,
    listing_machines: usize,
    calls: usize,
    step: u32,
    user_text: String,
    context: Option<BoundedContext>,
    history: Vec<HistoryTurn>,
    anchors: Vec<Anchor>,
    digests: Vec<Digest>,
    steps: Vec<Vec<CallRecord>>,
    current: Vec<CallRecord>,
    pending: VecDeque<PlannedCall>,
    /// The previous answer's population and the narrowing machine that
    /// judged it, as stored.
    previous: Option<(Scope, Option<Snapshot>)>,
    /// This step's narrowing scope (only on the step that narrows).
    scope: Option<Scope>,
    population: Option<(Scope, Snapshot)>,
    released: bool,
    outcome: Option<Outcome>,
    failure: Option<wire::Error>,
    answer: String,
    /// The thread's lease; released right before the terminal frame is
    /// sent, so a client that read `done` may start the next turn at once.
    claim: Option<super::claims::Claim>,
    /// The step that first narrowed (the scope applies to the population's
    /// tool in this and every later step of the turn).
    scope_step: Option<u32>,
    /// Where each anchor came from ("step 1, call 2"), for the responder.
    origins: Vec<String>,
    /// The last row the turn machine took.
    last_row: String,
    /// Calls run in the current step.
    calls_this_step: usize,
    /// Planned calls taken so far in this turn.
    planned_calls: usize,
    /// Each citation card shown: whether it was the whole population.
    cards: Vec<bool>,
}

/// Most calls one planning round may make; the rest are refused.
const MAX_CALLS_PER_STEP: usize = 8;

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
        claim: Option<super::claims::Claim>,
    ) {
        let span = tracing::info_span!("turn", thread_id = %thread_id, turn_id = %turn_id);
        let closed = tx.clone();
        let mut turn = Turn {
            agent: self,
            thread_id: thread_id.to_string(),
            turn_id: turn_id.to_string(),
            frames: FrameWriter::new(&self.tables.frame, tx),
            machine: self.tables.turn.machine(),
            dirty: Vec::new(),
            listing_machines: 0,
            calls: 0,
            step: 0,
            user_text: req.text.clone(),
            context: None,
            history: Vec::new(),
            anchors: Vec::new(),
            digests: Vec::new(),
            steps: Vec::new(),
            current: Vec::new(),
            pending: VecDeque::new(),
            previous: None,
            scope: None,
            population: None,
            released: false,
            outcome: None,
            failure: None,
            answer: String::new(),
            claim: None,
            scope_step: None,
            origins: Vec::new(),
            last_row: String::new(),
            calls_this_step: 0,
            planned_calls: 0,
            cards: Vec::new(),
        };
        let lost = claim.as_ref().map(|c| c.lost_signal());
        turn.claim = claim;
        let work = async {
            let lost = async move {
                match lost {
                    Some(l) => l.await,
                    None => std::future::pending().await,
                }
            };
            let ending = tokio::select! {
                biased;
                _ = closed.closed() => Ending::Gone,
                () = lost => Ending::LeaseLost,
                r = turn.run(req) => match r {
                    Err(Stop::Emit(EmitError::Disconnected)) => Ending::Gone,
                    Err(e) => {
                        tracing::warn!(error = %e, "turn stopped early");
                        turn.report(&e).await;
                        Ending::Ran
                    }
                    Ok(()) => Ending::Ran,
                },
            };
            match ending {
                Ending::Ran => {
                    if let Err(e) = turn.frames.close().await {
                        tracing::warn!(error = %e, "closing the stream");
                    }
                }
                Ending::Gone => {
                    tracing::info!("client disconnected; turn cancelled");
                    turn.cancelled().await;
                }
                Ending::LeaseLost => {
                    // Another turn may own the thread now: nothing more is
                    // stored; the client is told, from what it saw.
                    tracing::warn!("the turn lost its lease on the thread; turn cancelled");
                    turn.lease_lost().await;
                }
            }
            if let Some(c) = turn.claim.take() {
                c.release().await;
            }
            telemetry::record(turn.machine.snapshot());
            telemetry::record(turn.frames.snapshot());
        };
        work.instrument(span).await
    }
}

impl Turn<'_> {
    /// Runs the turn; a forbidden row of any table it runs ends it with an
    /// error frame naming the table and the row.
    async fn run(&mut self, req: TurnRequest) -> Result<(), Stop> {
        match self.drive(req).await {
            Err(Stop::Violation(v)) | Err(Stop::Emit(EmitError::Violation(v))) => {
                self.violation(&v).await
            }
            Err(Stop::NoCallPending) => {
                let row = self.last_row.clone();
                self.internal(format!(
                    "the turn table's row `{row}` asked for a call, but none is pending"
                ))
                .await
            }
            other => other,
        }
    }

    async fn drive(&mut self, req: TurnRequest) -> Result<(), Stop> {
        let limits = self.agent.limits;
        // Holding the thread's lease, no other turn runs on it: one a dead
        // process left unfinished is closed as cut before this one starts,
        // so the thread reads in order (ADR 0014).
        if self.claim.is_some() {
            let tables = &self.agent.tables;
            if let Err(e) = super::recovery::close_leftovers(
                &self.agent.store,
                tables,
                &self.thread_id,
                &self.turn_id,
            )
            .await
            {
                tracing::warn!(error = %e, "closing the thread's unfinished turns");
            }
        }
        self.context = req
            .context
            .map(|c| BoundedContext::bound(c, limits.context));
        let truncated = self
            .context
            .as_ref()
            .map(|c| c.truncated.clone())
            .unwrap_or_default();
        for field in truncated {
            self.anchor(Anchor::ContextTruncated { field });
        }
        let start = wire::Frame::Start(wire::Start {
            turn_id: self.turn_id.clone(),
            thread_id: self.thread_id.clone(),
        });
        let context = self
            .context
            .as_ref()
            .and_then(|c| serde_json::to_value(c).ok());
        let user = Record::User {
            text: &req.text,
            context,
        }
        .message();
        self.step(start, vec![user]).await?;

        // The thread so far, read after the first frame is out so a long
        // thread does not delay it.
        let stored = self.agent.store.messages(&self.thread_id).await?;
        self.history = super::history::build(&stored, &self.turn_id, limits.history_bytes);
        let bodies: Vec<Value> = stored.into_iter().map(|m| m.body).collect();
        self.previous = records::last_population(&bodies);

        // The table's initial state is Planning: its effect is to plan.
        // However a table is edited, the loop is bounded: each step takes at
        // most a plan, its calls and their judgements.
        let budget = (self.agent.limits.max_steps as usize + 1) * (2 * MAX_CALLS_PER_STEP + 4);
        let mut effect = TurnEffect::Plan;
        for _ in 0..budget {
            // A table that loops without awaiting must not starve the
            // runtime: the client's leaving is noticed between effects.
            tokio::task::yield_now().await;
            let event = match effect {
                TurnEffect::Plan => self.plan().await?,
                TurnEffect::Call => self.call().await?,
                TurnEffect::Judge => self.judge().await?,
                TurnEffect::Respond => self.respond().await?,
                TurnEffect::Finish => return self.finish().await,
                TurnEffect::Fail => return self.fail().await,
                TurnEffect::Cancel => return Ok(()),
                // No tool of this build prepares an action or returns a
                // terminal result; a table that routes here is reported.
                TurnEffect::Suspend | TurnEffect::Deliver => {
                    self.failure = Some(wire::Error {
                        message: format!(
                            "internal error: the turn table asked for `{}`, which no tool of this build can provide",
                            crate::protocols::Names::name(effect)
                        ),
                        table: Some("turn".into()),
                        ..wire::Error::default()
                    });
                    return self.fail().await;
                }
            };
            match self.machine.fire(event) {
                Ok(step) => {
                    self.last_row = self.machine.row_id(step.row).to_string();
                    match step.effect {
                        Some(e) => effect = e,
                        None => {
                            let row = self.last_row.clone();
                            return self
                                .internal(format!(
                                    "the turn table's row `{row}` names no effect, so the turn cannot go on"
                                ))
                                .await;
                        }
                    }
                }
                Err(v) => return Err(Stop::Violation(v)),
            }
        }
        let row = self.last_row.clone();
        self.internal(format!(
            "the turn table kept the loop going past {budget} effects (last row `{row}`)"
        ))
        .await
    }

    /// Keeps an anchor for the responder with where it came from, so two
    /// calls of one tool in different steps never read as one.
    fn anchor(&mut self, a: Anchor) {
        let origin = match (self.step, self.planned_calls) {
            (0, _) => "host context".to_string(),
            (s, 0) => format!("step {s}"),
            (s, c) => format!("step {s}, call {c}"),
        };
        self.anchors.push(a);
        self.origins.push(origin);
    }

    /// Ends the turn on a table that asks for something code cannot do,
    /// naming the row that led there.
    async fn internal(&mut self, message: String) -> Result<(), Stop> {
        tracing::error!(row_id = %self.last_row, %message, "turn table led nowhere");
        self.failure = Some(wire::Error {
            message: format!("internal error: {message}"),
            table: Some("turn".into()),
            row_id: Some(self.last_row.clone()),
            ..wire::Error::default()
        });
        self.fail().await
    }

    /// A forbidden row of the turn table: the turn ends with an error frame
    /// naming the table and the row, stored like any other frame.
    async fn violation(&mut self, v: &Violation) -> Result<(), Stop> {
        tracing::error!(table = %v.table, row_id = %v.row_id, state = %v.state, event = %v.event, "turn table forbids this step");
        telemetry::violation(v);
        if !self.frames.allows(FrameEvent::Error) {
            return Ok(());
        }
        self.failure = Some(wire::Error {
            message: format!("the turn stopped: {} ({} on {})", v.why, v.event, v.state),
            table: Some(v.table.clone()),
            row_id: Some(v.row_id.clone()),
            ..wire::Error::default()
        });
        self.fail().await
    }

    fn machines(&mut self) -> Vec<(String, Value)> {
        let snap = |s: Snapshot| serde_json::to_value(s).unwrap_or(Value::Null);
        let mut out = vec![
            ("frame".to_string(), snap(self.frames.snapshot())),
            ("turn".to_string(), snap(self.machine.snapshot())),
        ];
        for (name, s) in self.dirty.drain(..) {
            out.push((name, snap(s)));
        }
        out
    }

    async fn persist(&mut self, messages: Vec<NewMessage>) -> Result<(), Stop> {
        // Moved, not cloned: every commit carries the machines' JSON.
        let mut machines = self.machines();
        let refs: Vec<(&str, Value)> = machines
            .iter_mut()
            .map(|(n, v)| (n.as_str(), std::mem::take(v)))
            .collect();
        self.agent
            .store
            .step(&self.thread_id, &self.turn_id, &messages, &refs)
            .await?;
        Ok(())
    }

    /// Tells the client why the turn stopped, from the frame state the client
    /// actually saw. Nothing is persisted here: the store may be what failed.
    async fn report(&mut self, stop: &Stop) {
        let Stop::Store(_) = stop else { return };
        if self.frames.allows(FrameEvent::Start) {
            let start = wire::Frame::Start(wire::Start {
                turn_id: self.turn_id.clone(),
                thread_id: self.thread_id.clone(),
            });
            let _ = self.frames.emit(start).await;
        }
        if self.frames.allows(FrameEvent::Error) {
            let e = wire::Frame::Error(wire::Error {
                message: "storage is unavailable; this turn was not saved".into(),
                ..wire::Error::default()
            });
            let _ = self.frames.emit(e).await;
        }
    }

    /// The lease on the thread was lost mid-turn (it expired, and another
    /// turn may own the thread now): nothing more is stored, and the client
    /// is told, in the frame order it saw.
    async fn lease_lost(&mut self) {
        self.claim = None;
        if self.frames.allows(FrameEvent::Error) {
            let e = wire::Frame::Error(wire::Error {
                message: "this turn lost its claim on the thread and was stopped; nothing after this point was saved".into(),
                ..wire::Error::default()
            });
            let _ = self.frames.emit(e).await;
        }
        let _ = self.frames.close().await;
    }

    /// The client went away: the table moves the turn to Cancelled, and the
    /// cut is recorded (best effort: the process may be going away too).
    async fn cancelled(&mut self) {
        if let Err(v) = self.machine.fire(TurnEvent::ClientGone) {
            tracing::error!(row_id = %v.row_id, "turn table refused the client's leaving");
        }
        let cut = Record::Cut.message();
        let save = self.persist(vec![cut]);
        match tokio::time::timeout(std::time::Duration::from_secs(5), save).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "recording the cut"),
            Err(_) => tracing::warn!("recording the cut timed out"),
        }
    }

    /// A frame whose step is durable before the client sees it: the
    /// machine moves, the records and the machine states are written in one
    /// transaction, then the frame is sent.
    async fn step(&mut self, frame: wire::Frame, messages: Vec<NewMessage>) -> Result<(), Stop> {
        let before = self.frames.checkpoint();
        let effect = self.frames.fire(event_of(&frame)).await?;
        if let Err(e) = self.persist(messages).await {
            // The frame was never sent: the machine goes back to what the
            // client saw, so the failure can still be reported in order.
            self.frames.restore(before);
            return Err(e);
        }
        // The frame table's terminal frame is committed: the thread is free
        // before the client hears the turn ended, so its next message is
        // never a 409.
        if effect == Some(FrameEffect::EmitFinal) {
            if let Some(c) = self.claim.take() {
                c.release().await;
            }
        }
        self.frames.send(frame).await?;
        Ok(())
    }

    // ---- effects -------------------------------------------------------

    /// Asks the planner, with the thread's history and this turn's digests,
    /// and classifies its answer.
    async fn plan(&mut self) -> Result<TurnEvent, Stop> {
        self.step += 1;
        let mut prompt = Prompt::new(PLANNER_FIXED);
        if let Some(c) = self.context.as_ref().filter(|c| !c.is_empty()) {
            prompt = prompt.block("Host context", c.prompt_text());
        }
        let req = PlanRequest {
            prompt,
            user_text: self.user_text.clone(),
            tools: self.agent.tools.tools().to_vec(),
            context: self
                .context
                .as_ref()
                .and_then(|c| serde_json::to_value(c).ok()),
            history: self.history.clone(),
            steps: self.steps.clone(),
        };
        let plan = match self.agent.model.plan(&req).await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "planner failed");
                self.failure = Some(wire::Error {
                    message: format!("the model could not plan this turn: {e}"),
                    ..wire::Error::default()
                });
                return Ok(TurnEvent::PlannerFailed);
            }
        };
        if plan.calls.is_empty() {
            return Ok(match self.step {
                1 => TurnEvent::PlanEmpty,
                _ => TurnEvent::Answered,
            });
        }
        // The scope of a narrowing follow-up comes from stored turn state,
        // never from the model. Once a step narrows, the population's tool
        // stays scoped for the rest of the turn: a later step cannot widen
        // it by searching again.
        self.calls_this_step = 0;
        let mut plan = plan;
        // What the request refers to without saying it ("this floor",
        // "those") comes from the host context and stored turn state, never
        // from the model; when the turn has no such thing, nothing runs and
        // the user is asked (the turn table's `reference_missing` row).
        if let Err(missing) = self.resolve_references(&mut plan) {
            self.anchor(missing);
            return Ok(TurnEvent::ReferenceMissing);
        }
        let steps = plan
            .calls
            .iter()
            .map(|c| wire::PlanStep {
                tool: c.tool.clone(),
                args: effective_args(self.scope.as_ref(), c),
            })
            .collect();
        let frame = wire::Plan {
            step: self.step,
            steps,
            note: plan.note.clone(),
            // What the call is held to; where an earlier listing stopped is
            // internal and not shown.
            scope: self.scope.as_ref().and_then(|s| {
                serde_json::to_value(Scope {
                    page: None,
                    ..s.clone()
                })
                .ok()
            }),
        };
        let record = Record::Plan(&frame).message();
        self.step(wire::Frame::Plan(frame), vec![record]).await?;
        self.pending = plan.calls.into();
        Ok(TurnEvent::Planned)
    }

    /// Fills the host-context fields the plan refers to into its calls and
    /// takes a narrowing's scope from the thread's earlier results. The
    /// anchor of the first reference the turn cannot resolve is the error.
    fn resolve_references(&mut self, plan: &mut crate::llm::Plan) -> Result<(), Anchor> {
        for field in &plan.from_context {
            let value = self.context.as_ref().and_then(|c| c.field(field));
            let Some(value) = value else {
                return Err(Anchor::ContextMissing {
                    field: field.clone(),
                });
            };
            let tools = self.agent.tools.tools();
            for call in &mut plan.calls {
                let takes_it = tools
                    .iter()
                    .find(|t| t.name == call.tool)
                    .is_some_and(|t| t.input_schema["properties"].get(field).is_some());
                if takes_it {
                    call.args.insert(field.clone(), value.clone());
                }
            }
        }
        // Once a step narrows, the population's tool stays scoped for the
        // rest of the turn: a later step cannot widen it by searching again.
        if plan.narrows_previous && self.scope_step.is_none() {
            let Some((scope, _)) = self.previous.clone() else {
                return Err(Anchor::NothingToNarrow);
            };
            self.scope = Some(scope);
            self.scope_step = Some(self.step);
        }
        Ok(())
    }

    /// Runs the step's next call (and, for a stitchable listing, its further
    /// pages) and classifies the outcome.
    async fn call(&mut self) -> Result<TurnEvent, Stop> {
        let Some(call) = self.pending.pop_front() else {
            // The table asked for a call the plan does not have.
            return Err(Stop::NoCallPending);
        };
        self.planned_calls += 1;
        self.calls_this_step += 1;
        let outcome = self.run_call(&call).await?;
        let event = match &outcome {
            Outcome::Returned { .. } => TurnEvent::CallOk,
            Outcome::Refused { .. } | Outcome::Failed { .. } => TurnEvent::CallFailed,
        };
        self.outcome = Some(outcome);
        Ok(event)
    }

    async fn run_call(&mut self, call: &PlannedCall) -> Result<Outcome, Stop> {
        let agent = self.agent;
        let too_many = self.calls_this_step > MAX_CALLS_PER_STEP;
        let server = agent.tools.client_for(&call.tool).cloned();
        // One narrowing machine per listing. The scope is applied only if
        // the table's `narrow` row says so (effect `apply-scope`).
        let mut gate = Gate::new(&agent.tables.narrowing);
        let mut stale: Option<String> = None;
        let scoped = match self.scope.clone().filter(|s| s.tool == call.tool) {
            Some(s) => {
                // The population was judged by a narrowing machine that was
                // stored with it: restore it, so a table edited since is
                // reported, never reinterpreted.
                if let Some((_, Some(snap))) = &self.previous {
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
            _ if self.scope.is_some() && scoped.is_none() && self.scope_step == Some(self.step) => {
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
            self.dirty
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
    fn continuation(&self, tool: &str, args: &Map<String, Value>) -> Option<PageMark> {
        let cursor = args.get("cursor").and_then(Value::as_str)?;
        if cursor.is_empty() {
            return None;
        }
        let (scope, _) = self.previous.as_ref()?;
        (scope.tool == tool).then(|| scope.page.clone()).flatten()
    }

    /// Judges the last outcome (the judge decides; this only shows and
    /// records what it decided) and classifies where the step stands.
    async fn judge(&mut self) -> Result<TurnEvent, Stop> {
        match self.outcome.take() {
            Some(Outcome::Refused { call, anchor, gate }) => {
                if let Some(a) = anchor {
                    self.anchor(a);
                }
                if let Some(gate) = gate {
                    self.listing_gate(gate);
                    self.release();
                }
                self.current.push(call);
            }
            Some(Outcome::Failed { call, anchor }) => {
                self.anchor(anchor);
                self.digests.push(call.digest.clone());
                self.current.push(call);
            }
            Some(Outcome::Returned {
                mut call,
                scoped,
                mut gate,
                first,
                reading,
                stitched,
            }) => {
                let contract = self.agent.contracts.get(&call.tool);
                let ids_param = self.agent.tools.ids_param(&call.tool, contract);
                let input = listing::Input {
                    tool: &call.tool,
                    contract,
                    args: &call.args,
                    first: &first,
                    reading: &reading,
                    ids_param: ids_param.as_deref(),
                    stitched: stitched.as_ref(),
                    scope: scoped.as_deref(),
                    limit_sentinel: self.agent.limits.limit_sentinel,
                    digest: self.agent.limits.digest,
                };
                let mut j = listing::judge(input, &mut gate);
                let snap = self.listing_gate(gate);
                if let Some(v) = j.violation.take() {
                    return Err(Stop::Violation(v));
                }
                call.digest = j.digest.clone();
                self.show(j, snap).await?;
                self.current.push(call);
            }
            None => {}
        }
        if !self.pending.is_empty() {
            return Ok(TurnEvent::NextCall);
        }
        self.steps.push(std::mem::take(&mut self.current));
        if self.step >= self.agent.limits.max_steps {
            self.anchor(Anchor::StepLimit { steps: self.step });
            return Ok(TurnEvent::StepLimit);
        }
        Ok(TurnEvent::StepDone)
    }

    /// Shows a judgement: its anchors go to the responder, its card to the
    /// client (committed first, with the population it showed).
    async fn show(&mut self, j: Judgement, gate: Snapshot) -> Result<(), Stop> {
        if let Some(row) = &j.refused_row {
            tracing::warn!(row_id = %row, "narrowing table refused the page");
            telemetry::forbidden("narrowing", row);
        }
        for a in j.anchors {
            self.anchor(a);
        }
        self.digests.push(j.digest.clone());
        if j.release {
            self.release();
        }
        if let (Some(p), false) = (&j.population, self.released) {
            self.population = Some((p.clone(), gate.clone()));
        }
        if let Some(card) = j.card {
            self.cards.push(card.complete);
            let population = j.population.as_ref().filter(|_| !self.released);
            let record = Record::Card {
                citation: &card,
                population,
                narrowing: population.map(|_| &gate),
                scope_released: j.release,
                digest: &j.digest,
            }
            .message();
            self.step(wire::Frame::Citation(card), vec![record]).await?;
        }
        if let Some(figure) = j.figure {
            let record = Record::Figure {
                figure: &figure,
                digest: &j.digest,
            }
            .message();
            self.step(wire::Frame::Figure(figure), vec![record]).await?;
        }
        Ok(())
    }

    fn release(&mut self) {
        self.released = true;
        self.population = None;
        self.scope = None;
    }

    fn listing_gate(&mut self, gate: Gate) -> Snapshot {
        let n = self.next_listing();
        let snap = gate.snapshot();
        self.dirty.push((format!("narrowing#{n}"), snap.clone()));
        telemetry::record(snap.clone());
        snap
    }

    fn next_listing(&mut self) -> usize {
        self.listing_machines += 1;
        self.listing_machines
    }

    /// Streams the answer. Deltas are committed in batches before they are
    /// sent: whatever is ready when the previous batch is out forms the next
    /// one (ADR 0010), so a fast model costs one commit and a slow one never
    /// waits on a timer.
    async fn respond(&mut self) -> Result<TurnEvent, Stop> {
        let mut prompt = Prompt::new(RESPONDER_FIXED);
        if !self.anchors.is_empty() {
            let lines: Vec<String> = self
                .anchors
                .iter()
                .zip(&self.origins)
                .map(|(a, o)| format!("- ({o}) {}", a.text()))
                .collect();
            prompt = prompt.block("Directives", lines.join("\n"));
        }
        if !self.digests.is_empty() {
            let lines: Vec<String> = self
                .digests
                .iter()
                .map(|d| format!("- {}", d.render()))
                .collect();
            prompt = prompt.block(
                "What the tools returned (digests; counts come only from the directives)",
                lines.join("\n"),
            );
        }
        let req = RespondRequest {
            prompt,
            user_text: self.user_text.clone(),
            anchors: self.anchors.clone(),
            digests: self.digests.clone(),
        };
        // Fused: a batch may have seen the stream end, and an ended stream
        // (an `unfold`, say) must not be polled again.
        let mut stream = match self.agent.model.respond(&req).await {
            Ok(s) => s.fuse(),
            Err(e) => {
                self.failure = Some(wire::Error {
                    message: format!("the model could not answer: {e}"),
                    ..wire::Error::default()
                });
                return Ok(TurnEvent::ResponderFailed);
            }
        };
        let mut broken = None;
        // Sentence by sentence through the narration guard: a sentence's
        // deltas are held until it ends.
        let mut guard = self.guard();
        let mut ended = false;
        while let Some(first) = stream.next().await {
            let mut batch = String::new();
            let mut item = Some(first);
            // Everything that is ready now joins this batch.
            while let Some(next) = item.take() {
                match next {
                    Ok(d) => batch += &d,
                    Err(e) => {
                        broken = Some(e);
                        break;
                    }
                }
                item = match stream.next().now_or_never() {
                    Some(None) => {
                        ended = true;
                        None
                    }
                    ready => ready.flatten(),
                };
            }
            let mut pieces = guard.push(&batch);
            // The stream's end is in this batch: its last sentence goes
            // with it.
            if ended && broken.is_none() {
                pieces.extend(guard.finish());
            }
            self.say(pieces).await?;
            if ended || broken.is_some() {
                break;
            }
        }
        // A stream that broke mid-sentence leaves that sentence unchecked:
        // it is not shown.
        if !ended && broken.is_none() {
            let pieces = guard.finish();
            self.say(pieces).await?;
        }
        if let Some(e) = broken {
            self.failure = Some(wire::Error {
                message: format!("the model stream broke: {e}"),
                ..wire::Error::default()
            });
            return Ok(TurnEvent::ResponderFailed);
        }
        if self.answer.is_empty() {
            self.failure = Some(wire::Error {
                message: "the model returned no answer".into(),
                ..wire::Error::default()
            });
            return Ok(TurnEvent::ResponderFailed);
        }
        Ok(TurnEvent::ResponderFinished)
    }

    /// The narration guard for this turn's answer: what the judge decided,
    /// the cards shown, the items the model was shown, and what the user and
    /// the tool arguments named.
    fn guard(&self) -> Guard {
        let lang = vocab::detect(&self.user_text);
        let facts = TurnFacts {
            anchors: &self.anchors,
            digests: &self.digests,
            cards: &self.cards,
            user_text: &self.user_text,
            args: self
                .steps
                .iter()
                .flatten()
                .chain(&self.current)
                .map(|c| &c.args)
                .collect(),
        };
        let l = Licences::of_turn(facts, vocab::vocab(lang));
        let korean = lang == Lang::Ko;
        let replacement = crate::guard::check::primary_anchor(&self.anchors)
            .map(|a| crate::judge::sentences::sentence(a, korean))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| match korean {
                true => "위 카드에 표시된 내용만 말씀드릴 수 있습니다.".into(),
                false => "I can only tell you what the card above shows.".into(),
            });
        Guard::new(&self.agent.tables.narration, l, lang, replacement)
    }

    /// Writes judged pieces of the answer: sentences that passed in one
    /// delta, each replacement in its own, marked.
    async fn say(&mut self, pieces: Vec<Piece>) -> Result<(), Stop> {
        let mut passed = String::new();
        for piece in pieces {
            match piece.replaced {
                None => passed += &piece.text,
                Some(r) => {
                    self.delta(std::mem::take(&mut passed), None).await?;
                    // The row, not the sentence: the model's words stay out
                    // of the log as they stay out of the store.
                    tracing::warn!(row_id = %r.row_id, claim = r.claim, "narration guard replaced a sentence");
                    telemetry::forbidden("narration", &r.row_id);
                    let note = wire::Replaced {
                        row_id: r.row_id,
                        why: r.why,
                        claim: r.claim.to_string(),
                    };
                    self.delta(piece.text, Some(note)).await?;
                }
            }
        }
        self.delta(passed, None).await
    }

    async fn delta(&mut self, text: String, replaced: Option<wire::Replaced>) -> Result<(), Stop> {
        if text.is_empty() && replaced.is_none() {
            return Ok(());
        }
        let record = Record::Text {
            text: &text,
            replaced: replaced.as_ref(),
        }
        .message();
        self.answer += &text;
        self.step(
            wire::Frame::Delta(wire::Delta { text, replaced }),
            vec![record],
        )
        .await
    }

    async fn finish(&mut self) -> Result<(), Stop> {
        let population = self.population.as_ref().map(|(p, _)| p);
        let narrowing = self.population.as_ref().map(|(_, s)| s);
        let answer = Record::Answer {
            text: &self.answer,
            anchors: &self.anchors,
            population,
            narrowing,
            scope_released: self.released,
        }
        .message();
        let done = wire::Frame::Done(wire::Done {
            turn_id: self.turn_id.clone(),
        });
        self.step(done, vec![answer]).await
    }

    /// Ends the turn with an error frame and records it.
    async fn fail(&mut self) -> Result<(), Stop> {
        let error = self.failure.take().unwrap_or_else(|| wire::Error {
            message: "internal error: the turn failed without a reason".into(),
            ..wire::Error::default()
        });
        let record = Record::Error(&error).message();
        self.step(wire::Frame::Error(error), vec![record]).await
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

    fn record_for(
        &self,
        model_id: Option<&str>,
        tool: &str,
        args: Map<String, Value>,
        digest: Digest,
    ) -> CallRecord {
        CallRecord {
            id: model_id
                .map(str::to_string)
                .unwrap_or_else(|| format!("{}-{}", self.turn_id, self.calls)),
            tool: tool.to_string(),
            args,
            digest,
        }
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
        let frame = wire::ToolCall {
            call_id: call_id.to_string(),
            tool: tool.to_string(),
            server: server.map(str::to_string),
            args: args.clone(),
        };
        let record = Record::Call(&frame).message();
        self.step(wire::Frame::ToolCall(frame), vec![record]).await
    }

    async fn emit_result(
        &mut self,
        frame: wire::ToolResult,
        args: &Map<String, Value>,
        out: Option<&ToolOutput>,
        digest: Option<&Digest>,
    ) -> Result<(), Stop> {
        self.emit_result_released(frame, args, out, digest, false)
            .await
    }

    async fn emit_result_released(
        &mut self,
        frame: wire::ToolResult,
        args: &Map<String, Value>,
        out: Option<&ToolOutput>,
        digest: Option<&Digest>,
        scope_released: bool,
    ) -> Result<(), Stop> {
        let record = Record::Result {
            frame: &frame,
            args,
            result: out,
            digest,
            scope_released,
        }
        .message();
        self.step(wire::Frame::ToolResult(frame), vec![record])
            .await
    }
}

/// The arguments that go out: the model's, with the scope spread last.
fn effective_args(scope: Option<&Scope>, call: &PlannedCall) -> Map<String, Value> {
    match scope
        .filter(|s| s.tool == call.tool)
        .map(|s| s.apply(&call.args))
    {
        Some((args, None)) => args,
        // A conflicting call is not run; it is shown as the model asked it,
        // never with the scope's values under the model's label.
        Some((_, Some(_))) | None => call.args.clone(),
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
