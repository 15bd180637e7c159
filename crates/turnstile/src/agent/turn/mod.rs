//! One turn as the `turn` table runs it. Code classifies what happened (the
//! model planned calls, a call returned, the step limit was reached, …) into
//! an event and fires it; the row's effect is what the agent does next:
//! plan, call, judge, respond, finish, fail. Nothing here decides the order.
//!
//! Everything a frame shows is committed before the frame is sent: the
//! step's records and the turn's machine states go to the store in one
//! transaction, then the frame is written (ADR 0006, ADR 0010).

use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use super::context::{BoundedContext, RawContext};
use super::frames::{EmitError, FrameWriter};
use super::records::{self, Record};
use super::tools::Tools;
use crate::fsm::Violation;
use crate::judge::approval::Roles;
use crate::judge::tiers::{Access, LicenceMap};
use crate::judge::{Anchor, Contracts};
use crate::llm::Model;
use crate::protocols::turn::{Turn as TurnTable, TurnEffect, TurnEvent};
use crate::protocols::{Names, Typed};
use crate::store::Store;
use crate::wire;

mod admit;
mod approval_driver;
mod approvals;
mod approve;
mod ask;
mod call;
mod decide;
mod emit;
mod export;
mod export_driver;
mod guardrail;
mod hold_call;
mod in_flight;
mod judge;
mod licence;
mod licence_gate;
mod limits;
mod plan;
mod respond;
mod resume;
mod show_more;
mod start;
mod state;
mod task;

pub use super::records::CancelSent;
use approvals::Approvals;
pub use approvals::{Action as HeldAction, Decided, UserDecision};
pub use decide::{DecideError, Withdrawal};
use export_driver::Exports;
pub use limits::{Limits, StatusPolls};
use state::{Cursor, Evidence, Ledger, Outcome, ThreadScope};

pub use super::tables::TurnTables;

/// A user message as the HTTP layer received it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnRequest {
    pub text: String,
    #[serde(default)]
    pub context: Option<RawContext>,
    /// "Show more" as a structured marker (the page's button, `turnstile
    /// chat --more`): continue the listing the thread showed last, from its
    /// stored cursor. No model is asked what the user meant.
    #[serde(default)]
    pub more: bool,
    /// A principal a client put in the body is discarded (issue 20): who
    /// the caller is comes from the HTTP edge's verification only.
    #[serde(default, rename = "principal")]
    pub discarded_principal: Option<serde::de::IgnoredAny>,
    /// The tiers the HTTP edge established for the caller; `None`: the
    /// anonymous tiers (`licence.anonymous_tiers`).
    #[serde(skip)]
    pub access: Option<Access>,
}

pub struct Agent {
    pub model: Arc<dyn Model>,
    pub tools: Arc<dyn Tools>,
    pub store: Store,
    pub tables: TurnTables,
    pub contracts: Contracts,
    /// Which tools prepare, confirm, cancel or report on actions.
    pub roles: Roles,
    /// The export flows whose confirm's capability code delivers.
    pub terminals: crate::judge::capability::Terminals,
    /// How each tool's approval card asks, in the user's terms
    /// (`tools.<tool>.summary`); a tool without one gets the default.
    pub cards: crate::judge::card::Cards,
    /// The deployment's description of its assistant (`[model]
    /// instructions`), first in every prompt, before code's rules.
    pub instructions: crate::llm::prompt::Instructions,
    pub limits: Limits,
    pub leases: Arc<super::thread_lease::ThreadLeases>,
    /// The one tool → required-tier map: the catalogue filter and the
    /// licence gate before each call read it (`tables/licence.ron`).
    pub licences: LicenceMap,
    /// 2025-11-25 calls open in memory while their question waits.
    pub parked: Arc<super::tools::Parked>,
    /// Configured result fields the tools' answers did not have
    /// (`GET /readyz` lists them per server).
    pub problems: super::problems::FieldProblems,
    /// The process stops: running turns end as if their client left.
    pub stopping: Arc<super::stopping::Stopping>,
    /// The safety checks on the user's message and on each sentence of the
    /// answer (`[[guardrails]]`, tables/guardrail.ron).
    pub guardrails: super::guardrails::Guardrails,
}

/// How a turn's stream opens: a user message, or a decision on the
/// interrupt it is suspended at.
enum Opening {
    Message(Box<TurnRequest>),
    Decision(Box<Decided>),
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
    /// A table's row asked for what the step cannot do: reported with the
    /// table and the row.
    #[error("{message}")]
    Internal {
        table: &'static str,
        row: String,
        message: String,
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
    claim: Option<super::thread_lease::ThreadLease>,
    evidence: Evidence,
    cursor: Cursor,
    ledger: Ledger,
    thread: ThreadScope,
    approvals: Approvals,
    exports: Exports,
    /// The name the frame machine is stored under: `frame`, or
    /// `frame@resume-N` for the stream a decision resumes.
    frame_name: String,
    /// The licence gate's driver: the tiers the caller holds.
    licence: licence_gate::LicenceGate,
    /// The "show more" driver: the listing this turn continues.
    show_more: show_more::ShowMore,
    /// The safety checks' machine (tables/guardrail.ron).
    guardrail: Typed<crate::protocols::guardrail::Guardrail>,
    /// Code's sentence for a message a check refused, said by `refuse`.
    /// (the sentence, its note).
    refused: Option<(String, wire::Replaced)>,
    /// The external checks that could not answer in this turn: not asked
    /// again before it ends.
    checks_down: Vec<String>,
}

impl Turn<'_> {
    /// Runs the turn; a forbidden row of any table it runs ends it with an
    /// error frame naming the table and the row.
    async fn run(&mut self, opening: Opening) -> Result<(), Stop> {
        let driven = match opening {
            Opening::Message(req) => self.drive(*req).await,
            Opening::Decision(d) => {
                // The message was checked when the turn began.
                let resumed = crate::protocols::guardrail::GuardrailEvent::Resumed;
                match self.guardrail.fire(resumed) {
                    Err(v) => Err(Stop::Violation(v)),
                    Ok(_) => match self.open_decision(*d).await {
                        Ok(event) => self.drive_from(event).await,
                        Err(e) => Err(e),
                    },
                }
            }
        };
        self.answer_checked();
        match driven {
            Err(Stop::Violation(v)) | Err(Stop::Emit(EmitError::Violation(v))) => {
                self.violation(&v).await
            }
            Err(Stop::Internal {
                table,
                row,
                message,
            }) => self.internal_at(table, row, message).await,
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
    /// A message a safety check refuses is stored as a placeholder and
    /// answered by code: the table's `input_blocked` row, not `begin`.
    async fn drive(&mut self, mut req: TurnRequest) -> Result<(), Stop> {
        match self.check_input(&mut req).await {
            Ok(refused) => self.refused = refused,
            Err(e) => {
                // The check did not finish (its table forbade the verdict):
                // the message is stored withheld and the stream opened, so
                // the error frame that names the row can follow `start`.
                req.text = "[message withheld: its safety check did not finish]".into();
                self.user_text = req.text.clone();
                self.open(req).await?;
                return Err(e);
            }
        }
        self.open(req).await?;
        let first = match self.refused.is_some() {
            true => TurnEvent::InputBlocked,
            false => TurnEvent::Begin,
        };
        self.drive_from(first).await
    }

    /// The loop from `event` on.
    async fn drive_from(&mut self, mut event: TurnEvent) -> Result<(), Stop> {
        // However a table is edited, the loop is bounded: each step takes at
        // most a plan, its calls and their judgements.
        let limits = self.agent.limits;
        let budget = (limits.max_steps as usize + 2) * (2 * limits.max_calls_per_step + 4);
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
                // The effect ended the stream (an error frame) though the
                // table's state is not terminal: nothing more can be said.
                None if self.frames.is_terminal() => return Ok(()),
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
            TurnEffect::Stream => self.stream_begun().await?,
            TurnEffect::Explain => self.explain().await?,
            TurnEffect::Refuse => self.refuse_input().await?,
            TurnEffect::Finish => {
                self.finish().await?;
                return Ok(None);
            }
            TurnEffect::Fail => {
                self.fail().await?;
                return Ok(None);
            }
            TurnEffect::Cancel => return Ok(None),
            TurnEffect::Suspend => {
                self.suspend().await?;
                return Ok(None);
            }
            TurnEffect::Deliver => {
                self.deliver().await?;
                return Ok(None);
            }
        }))
    }

    /// Before the loop: close what a dead process left on the thread, bound
    /// the host context, store the user's message with the start frame,
    /// then read the thread so far.
    async fn open(&mut self, req: TurnRequest) -> Result<(), Stop> {
        let limits = self.agent.limits;
        let mut withdrawn = Vec::new();
        // Holding the thread's lease, no other turn runs on it: one a dead
        // process left unfinished is closed as cut before this one starts,
        // so the thread reads in order (ADR 0014).
        if self.claim.is_some() {
            let tables = &self.agent.tables;
            let store = &self.agent.store;
            let closed =
                super::recovery::close_leftovers(store, tables, &self.thread_id, &self.turn_id);
            // Only the latest earlier turn is looked at (recovery.rs): if
            // closing it fails, this turn does not go on past it.
            closed.await?;
            // A new user turn supersedes an interrupt still pending: it is
            // withdrawn and its action cancelled, never approvable later. A
            // message a safety check refused supersedes nothing: it sends
            // nothing anywhere, a cancel included.
            if self.refused.is_none() {
                match self.agent.supersede_pending(&self.thread_id).await {
                    Ok(w) => withdrawn = w,
                    Err(e) => {
                        tracing::warn!(error = %e, "superseding the thread's pending interrupts")
                    }
                }
            }
        }
        let context = req
            .context
            .map(|c| BoundedContext::bound(c, limits.context));
        for field in context.iter().flat_map(|c| c.truncated.clone()) {
            self.anchor(Anchor::ContextTruncated { field });
        }
        self.thread.context = context;
        self.show_more = show_more::ShowMore::new(req.more);
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
        // What this message withdrew is stored with it, and told first.
        let mut records = vec![user];
        for w in &withdrawn {
            let record = Record::Withdrawn {
                interrupt_id: &w.interrupt_id,
                tool: &w.tool,
                state: w.state.name(),
                cancel: &w.cancel,
            };
            records.push(record.message());
            self.anchor(Anchor::Action {
                tool: w.tool.clone(),
                outcome: w.outcome(),
            });
        }
        self.step(start, records).await?;
        // The thread so far, read after the first frame is out: the history
        // newest first up to its budget, the population and the delivery
        // through the thread's pointers. Nothing here grows with the
        // thread's length (issue 19).
        let store = &self.agent.store;
        self.thread.history =
            super::history::read(store, &self.thread_id, &self.turn_id, limits.history_bytes)
                .await?;
        let marked = store.marked(&self.thread_id).await?;
        let body = |m: Option<crate::store::Message>| m.map(|m| m.body).into_iter().collect();
        let population: Vec<Value> = match marked.population_known {
            true => body(marked.population),
            // A thread from before the pointers: scanned, until its next
            // answer sets the pointer.
            false => (store.messages(&self.thread_id).await?)
                .into_iter()
                .map(|m| m.body)
                .collect(),
        };
        self.thread.previous = records::last_population(&population);
        self.exports.stored = records::last_delivery(&body(marked.delivery));
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
