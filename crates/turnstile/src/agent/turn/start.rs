//! The task around the loop: one turn runs until it is over, the client
//! leaves, or its lease on the thread is lost, whichever comes first;
//! nothing keeps running after it returns.

use tracing::Instrument;

use super::approvals::Decided;
use super::{Agent, Cursor, Evidence, Ledger, Opening, Stop, ThreadScope, Turn, TurnRequest};
use crate::agent::frames::{EmitError, FrameWriter, OutFrame};
use crate::agent::thread_lease::ThreadLease;
use crate::judge::tiers::Access;
use crate::protocols::telemetry;
use crate::protocols::turn::Turn as TurnTable;
use crate::protocols::Typed;

/// How a turn's task ended.
enum Ending {
    Ran,
    Gone,
    LeaseLost,
    /// The process stops (a drain's window ended).
    Stopping,
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
        claim: Option<ThreadLease>,
    ) {
        let span = crate::agent::spans::invoke_agent(thread_id, turn_id, false);
        let access = (req.access.clone()).unwrap_or_else(|| self.licences.anonymous());
        let mut turn = Turn::new(self, thread_id, turn_id, &req.text, tx)
            .with_machine(self.tables.turn.machine(), "frame".into());
        turn.licence = super::licence_gate::LicenceGate::new(access);
        self.run_task(turn, Opening::Message(Box::new(req)), claim, span)
            .await
    }

    /// Resumes the turn a decision was made on: its turn machine restored
    /// from the store (table hash checked), in a new stream that starts
    /// with the decision and goes on with the decision's effect.
    pub async fn resume_turn(
        &self,
        thread_id: &str,
        decided: Decided,
        access: Option<Access>,
        tx: tokio::sync::mpsc::Sender<OutFrame>,
        claim: Option<ThreadLease>,
    ) {
        let turn_id = decided.approval.turn_id.clone();
        let span = crate::agent::spans::invoke_agent(thread_id, &turn_id, true);
        let machine = match self
            .store
            .machine(thread_id, &turn_id, "turn")
            .await
            .ok()
            .flatten()
            .and_then(|v| serde_json::from_value(v).ok())
            .map(|snap| self.tables.turn.restore(&snap))
        {
            Some(Ok(m)) => m,
            // A turn stored under another table or not at all: the loop
            // starts from a fresh machine, whose first event is refused by
            // name and reported.
            _ => self.tables.turn.machine(),
        };
        let resumes = self
            .store
            .approvals(thread_id)
            .await
            .map(|a| {
                a.iter()
                    .filter(|x| x.turn_id == turn_id && x.state != "Awaiting")
                    .count()
            })
            .unwrap_or(1);
        let user_text = decided.action.user_text.clone();
        let mut turn = Turn::new(self, thread_id, &turn_id, &user_text, tx)
            .with_machine(machine, format!("frame@resume-{resumes}"));
        turn.licence = super::licence_gate::LicenceGate::new(
            access.unwrap_or_else(|| self.licences.anonymous()),
        );
        self.run_task(turn, Opening::Decision(Box::new(decided)), claim, span)
            .await
    }

    async fn run_task(
        &self,
        mut turn: Turn<'_>,
        opening: Opening,
        claim: Option<ThreadLease>,
        span: tracing::Span,
    ) {
        let closed = turn.frames.sender();
        let lost = claim.as_ref().map(|c| c.lost_signal());
        turn.claim = claim;
        let work = async {
            let lost = async move {
                match lost {
                    Some(l) => l.await,
                    None => std::future::pending().await,
                }
            };
            let stopping = self.stopping.clone();
            let ending = tokio::select! {
                biased;
                _ = closed.closed() => Ending::Gone,
                () = lost => Ending::LeaseLost,
                () = stopping.fired() => Ending::Stopping,
                r = turn.run(opening) => match r {
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
                Ending::Stopping => {
                    // As a client's leaving: the turn table's row decides
                    // (the cut is stored); then the client is told, in
                    // order, to send again.
                    tracing::warn!("the process stops; turn cancelled");
                    turn.cancelled().await;
                    turn.stopped_for_restart().await;
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
            telemetry::turn_ran();
        };
        work.instrument(span).await
    }
}

impl<'a> Turn<'a> {
    /// A turn of `thread_id` with empty parts, its frames written into `tx`.
    fn new(
        agent: &'a Agent,
        thread_id: &str,
        turn_id: &str,
        user_text: &str,
        tx: tokio::sync::mpsc::Sender<OutFrame>,
    ) -> Self {
        Turn {
            agent,
            thread_id: thread_id.to_string(),
            turn_id: turn_id.to_string(),
            user_text: user_text.to_string(),
            frames: FrameWriter::new(&agent.tables.frame, tx),
            machine: agent.tables.turn.machine(),
            last_row: String::new(),
            claim: None,
            evidence: Evidence::default(),
            cursor: Cursor::default(),
            ledger: Ledger::default(),
            thread: ThreadScope::default(),
            approvals: Default::default(),
            exports: Default::default(),
            frame_name: "frame".into(),
            licence: super::licence_gate::LicenceGate::default(),
            show_more: Default::default(),
            guardrail: agent.tables.guardrail.machine(),
            refused: None,
            checks_down: Vec::new(),
        }
    }

    /// The turn machine it runs (fresh, or restored at a decision) and the
    /// name its stream's frame machine is stored under.
    fn with_machine(mut self, machine: Typed<TurnTable>, frame_name: String) -> Self {
        self.machine = machine;
        self.frame_name = frame_name;
        self
    }
}
