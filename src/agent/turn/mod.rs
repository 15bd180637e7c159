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

use serde::Deserialize;
use serde_json::Value;
use tracing::Instrument;

use super::context::{BoundedContext, ContextLimits, RawContext};
use super::frames::{EmitError, FrameWriter, OutFrame};
use super::records::{self, Record};
use super::tools::ToolBelt;
use crate::fsm::{Snapshot, Violation};
use crate::judge::digest::{Digest, DigestLimits};
use crate::judge::narrowing::{Gate, Scope};
use crate::judge::result::Reading;
use crate::judge::stitch::Stitched;
use crate::judge::{Anchor, Contracts};
use crate::llm::{CallRecord, HistoryTurn, Model, PlannedCall};
use crate::mcp::ToolOutput;
use crate::protocols::turn::{Turn as TurnTable, TurnEffect, TurnEvent};
use crate::protocols::{telemetry, Typed};
use crate::store::Store;
use crate::wire;

mod call;
mod emit;
mod judge;
mod plan;
mod respond;

pub use super::tables::TurnTables;

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
    /// Most calls one planning round may make; the rest are refused by the
    /// `admission` table.
    pub max_calls_per_step: usize,
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
            max_calls_per_step: 8,
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

/// One turn: who it runs for, the machines it drives, and its state in
/// four named parts.
struct Turn<'a> {
    agent: &'a Agent,
    thread_id: String,
    turn_id: String,
    user_text: String,
    frames: FrameWriter,
    machine: Typed<TurnTable>,
    /// The last row the turn machine took.
    last_row: String,
    /// The thread's lease; released right before the terminal frame is
    /// sent, so a client that read `done` may start the next turn at once.
    claim: Option<super::claims::Claim>,
    evidence: Evidence,
    cursor: Cursor,
    ledger: Ledger,
    thread: ThreadScope,
}

/// What the turn found and will say: the judge's anchors and where each
/// came from, the digests the models see, the cards shown, the answer.
#[derive(Default)]
struct Evidence {
    anchors: Vec<Anchor>,
    /// Where each anchor came from ("step 1, call 2"), for the responder.
    origins: Vec<String>,
    digests: Vec<Digest>,
    /// Each citation card shown: whether it was the whole population.
    cards: Vec<bool>,
    answer: String,
    /// The error frame the turn ends with, when it fails.
    failure: Option<wire::Error>,
}

/// Where the loop stands: the planning round, its calls, the outcome
/// waiting to be judged.
#[derive(Default)]
struct Cursor {
    step: u32,
    /// Tool calls sent (pages included): the next call id.
    calls: usize,
    /// Calls run in the current step.
    calls_this_step: usize,
    /// Planned calls taken so far in this turn.
    planned_calls: usize,
    pending: VecDeque<PlannedCall>,
    outcome: Option<Outcome>,
}

/// What ran: each step's call records, and the listing machines
/// (`narrowing#N`, `paging#N`) to persist with the next step.
#[derive(Default)]
struct Ledger {
    steps: Vec<Vec<CallRecord>>,
    current: Vec<CallRecord>,
    dirty: Vec<(String, Snapshot)>,
    listing_machines: usize,
}

/// What the turn knows of its thread and the user's screen: the bounded
/// host context, the earlier turns, the population the previous answer
/// showed, and this turn's narrowing of it.
#[derive(Default)]
struct ThreadScope {
    context: Option<BoundedContext>,
    history: Vec<HistoryTurn>,
    /// The previous answer's population and the narrowing machine that
    /// judged it, as stored.
    previous: Option<(Scope, Option<Snapshot>)>,
    /// This step's narrowing scope (only on the step that narrows).
    scope: Option<Scope>,
    /// The step that first narrowed (the scope applies to the population's
    /// tool in this and every later step of the turn).
    scope_step: Option<u32>,
    population: Option<(Scope, Snapshot)>,
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
        claim: Option<super::claims::Claim>,
    ) {
        let span = tracing::info_span!("turn", thread_id = %thread_id, turn_id = %turn_id);
        let closed = tx.clone();
        let mut turn = Turn {
            agent: self,
            thread_id: thread_id.to_string(),
            turn_id: turn_id.to_string(),
            user_text: req.text.clone(),
            frames: FrameWriter::new(&self.tables.frame, tx),
            machine: self.tables.turn.machine(),
            last_row: String::new(),
            claim: None,
            evidence: Evidence::default(),
            cursor: Cursor::default(),
            ledger: Ledger::default(),
            thread: ThreadScope::default(),
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

    /// The loop: classify, fire, do. Code fires `begin` once; each row's
    /// effect is performed and classified into the next event, until the
    /// table's state is terminal.
    async fn drive(&mut self, req: TurnRequest) -> Result<(), Stop> {
        self.open(req).await?;
        // However a table is edited, the loop is bounded: each step takes at
        // most a plan, its calls and their judgements.
        let limits = self.agent.limits;
        let budget = (limits.max_steps as usize + 2) * (2 * limits.max_calls_per_step + 4);
        let mut event = TurnEvent::Begin;
        for _ in 0..budget {
            // A table that loops without awaiting must not starve the
            // runtime: the client's leaving is noticed between effects.
            tokio::task::yield_now().await;
            let effect = match self.fire(event)? {
                Some(effect) => effect,
                None => {
                    let row = self.last_row.clone();
                    return self
                        .internal(format!(
                            "the turn table's row `{row}` names no effect, so the turn cannot go on"
                        ))
                        .await;
                }
            };
            let next = self.perform(effect).await?;
            if self.machine.is_terminal() {
                return Ok(());
            }
            match next {
                Some(e) => event = e,
                None => {
                    let row = self.last_row.clone();
                    return self
                        .internal(format!(
                            "the turn table's row `{row}` ended the turn in a state that is not terminal"
                        ))
                        .await;
                }
            }
        }
        let row = self.last_row.clone();
        self.internal(format!(
            "the turn table kept the loop going past {budget} effects (last row `{row}`)"
        ))
        .await
    }

    /// Fires one event; the row's effect, or the violation.
    fn fire(&mut self, event: TurnEvent) -> Result<Option<TurnEffect>, Stop> {
        let step = self.machine.fire(event).map_err(Stop::Violation)?;
        self.last_row = self.machine.row_id(step.row).to_string();
        Ok(step.effect)
    }

    /// Does what a row's effect says; the event it classifies into, or
    /// `None` for an effect that ends the turn.
    async fn perform(&mut self, effect: TurnEffect) -> Result<Option<TurnEvent>, Stop> {
        Ok(Some(match effect {
            TurnEffect::Plan => self.plan().await?,
            TurnEffect::Call => self.call().await?,
            TurnEffect::Judge => self.judge().await?,
            TurnEffect::Respond => self.respond().await?,
            TurnEffect::Finish => {
                self.finish().await?;
                return Ok(None);
            }
            TurnEffect::Fail => {
                self.fail().await?;
                return Ok(None);
            }
            TurnEffect::Cancel => return Ok(None),
            // No tool of this build prepares an action or returns a
            // terminal result; a table that routes here is reported.
            TurnEffect::Suspend | TurnEffect::Deliver => {
                self.evidence.failure = Some(wire::Error {
                    message: format!(
                        "internal error: the turn table asked for `{}`, which no tool of this build can provide",
                        crate::protocols::Names::name(effect)
                    ),
                    table: Some("turn".into()),
                    ..wire::Error::default()
                });
                self.fail().await?;
                return Ok(None);
            }
        }))
    }

    /// Before the loop: close what a dead process left on the thread, bound
    /// the host context, store the user's message with the start frame,
    /// then read the thread so far.
    async fn open(&mut self, req: TurnRequest) -> Result<(), Stop> {
        let limits = self.agent.limits;
        // Holding the thread's lease, no other turn runs on it: one a dead
        // process left unfinished is closed as cut before this one starts,
        // so the thread reads in order (ADR 0014).
        if self.claim.is_some() {
            let tables = &self.agent.tables;
            let store = &self.agent.store;
            let closed =
                super::recovery::close_leftovers(store, tables, &self.thread_id, &self.turn_id);
            if let Err(e) = closed.await {
                tracing::warn!(error = %e, "closing the thread's unfinished turns");
            }
        }
        let context = req
            .context
            .map(|c| BoundedContext::bound(c, limits.context));
        for field in context.iter().flat_map(|c| c.truncated.clone()) {
            self.anchor(Anchor::ContextTruncated { field });
        }
        self.thread.context = context;
        let start = wire::Frame::Start(wire::Start {
            turn_id: self.turn_id.clone(),
            thread_id: self.thread_id.clone(),
        });
        let shown = self.thread.context.as_ref();
        let user = Record::User {
            text: &req.text,
            context: shown.and_then(|c| serde_json::to_value(c).ok()),
        }
        .message();
        self.step(start, vec![user]).await?;
        // The thread so far, read after the first frame is out so a long
        // thread does not delay it.
        let stored = self.agent.store.messages(&self.thread_id).await?;
        self.thread.history = super::history::build(&stored, &self.turn_id, limits.history_bytes);
        let bodies: Vec<Value> = stored.into_iter().map(|m| m.body).collect();
        self.thread.previous = records::last_population(&bodies);
        Ok(())
    }

    /// Keeps an anchor for the responder with where it came from, so two
    /// calls of one tool in different steps never read as one.
    fn anchor(&mut self, a: Anchor) {
        let origin = match (self.cursor.step, self.cursor.planned_calls) {
            (0, _) => "host context".to_string(),
            (s, 0) => format!("step {s}"),
            (s, c) => format!("step {s}, call {c}"),
        };
        self.evidence.anchors.push(a);
        self.evidence.origins.push(origin);
    }
}
