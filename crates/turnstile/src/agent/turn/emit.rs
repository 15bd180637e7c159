//! Writing what the turn shows: every frame's step (records and machines in
//! one transaction) is committed before the frame is sent; so are endings.

use serde_json::{Map, Value};

use super::{Stop, Turn};
use crate::agent::frames::event_of;
use crate::agent::records::Record;
use crate::fsm::{Machine, Snapshot, Violation};
use crate::judge::digest::Digest;
use crate::llm::CallRecord;
use crate::mcp::ToolOutput;
use crate::protocols::frame::{FrameEffect, FrameEvent};
use crate::protocols::telemetry;
use crate::protocols::turn::{TurnEffect, TurnEvent};
use crate::store::NewMessage;
use crate::wire;

impl Turn<'_> {
    /// Ends the turn on a table that asks for something code cannot do,
    /// naming the row that led there.
    pub(super) async fn internal(&mut self, message: String) -> Result<(), Stop> {
        let row = self.last_row.clone();
        self.internal_at("turn", row, message).await
    }

    /// [`Self::internal`] for a row of another table the turn runs.
    pub(super) async fn internal_at(
        &mut self,
        table: &str,
        row: String,
        message: String,
    ) -> Result<(), Stop> {
        tracing::error!(table, row_id = %row, %message, "a table's row led nowhere");
        self.evidence.failure = Some(wire::Error {
            message: format!("internal error: {message}"),
            table: Some(table.into()),
            row_id: Some(row),
            ..wire::Error::default()
        });
        self.fail().await
    }

    /// A forbidden row of the turn table: the turn ends with an error frame
    /// naming the table and the row, stored like any other frame.
    pub(super) async fn violation(&mut self, v: &Violation) -> Result<(), Stop> {
        tracing::error!(table = %v.table, row_id = %v.row_id, state = %v.state, event = %v.event, "turn table forbids this step");
        telemetry::violation(v);
        if !self.frames.allows(FrameEvent::Error) {
            return Ok(());
        }
        self.evidence.failure = Some(wire::Error {
            message: format!("the turn stopped: {} ({} on {})", v.why, v.event, v.state),
            table: Some(v.table.clone()),
            row_id: Some(v.row_id.clone()),
            ..wire::Error::default()
        });
        self.fail().await
    }

    /// What a step stores of the machines: the frame and turn machines'
    /// state with only the rows taken since the last commit (the store
    /// appends them), and each listing machine finished since, whole.
    pub(super) fn machines(&mut self) -> Vec<(String, Value)> {
        let snap = |s: Snapshot| serde_json::to_value(s).unwrap_or(Value::Null);
        let (frame_from, turn_from) = self.ledger.committed;
        let mut out = vec![
            (
                self.frame_name.clone(),
                since(self.frames.machine(), frame_from),
            ),
            ("turn".to_string(), since(self.machine.untyped(), turn_from)),
        ];
        for (name, s) in self.ledger.dirty.drain(..) {
            out.push((name, snap(s)));
        }
        out
    }

    pub(super) async fn persist(&mut self, messages: Vec<NewMessage>) -> Result<(), Stop> {
        self.commit(messages, false).await
    }

    /// Stores the step: the held frames' records and `messages`, the
    /// machines' new rows, a pending interrupt; the lease renewed in the
    /// same transaction, or, for the turn's last step (`last`), released
    /// there.
    async fn commit(&mut self, messages: Vec<NewMessage>, last: bool) -> Result<(), Stop> {
        // Records of held frames go first, in the order the frames will be
        // sent: every commit carries all that was fired before it.
        let messages = match self.ledger.held_records.is_empty() {
            true => messages,
            false => {
                let mut all = std::mem::take(&mut self.ledger.held_records);
                all.extend(messages);
                all
            }
        };
        // Moved, not cloned: every commit carries the machines' JSON.
        let mut machines = self.machines();
        let refs: Vec<(&str, Value)> = machines
            .iter_mut()
            .map(|(n, v)| (n.as_str(), std::mem::take(v)))
            .collect();
        let a = self.approvals.write.take();
        let (store, thread, turn) = (&self.agent.store, &self.thread_id, &self.turn_id);
        let waited = std::time::Instant::now();
        match &self.claim {
            // The last step releases the lease in its own transaction.
            Some(claim) if last => {
                claim.stop_renewing();
                store
                    .step_releasing(thread, turn, &messages, &refs, a.as_ref(), claim.turn_id())
                    .await?;
                if let Some(c) = self.claim.take() {
                    c.released_by_commit();
                }
            }
            // The step renews the turn's lease in its own transaction.
            Some(claim) => {
                let started = tokio::time::Instant::now();
                let (_, renewed) = store
                    .step_leased(
                        thread,
                        turn,
                        &messages,
                        &refs,
                        a.as_ref(),
                        (claim.turn_id(), claim.ttl()),
                    )
                    .await?;
                if renewed {
                    claim.renewed(started);
                }
            }
            None => {
                store
                    .step_with(thread, turn, &messages, &refs, a.as_ref())
                    .await?;
            }
        }
        telemetry::phase(telemetry::Phase::Commit, waited.elapsed());
        // Held frames are durable now: a later failure does not take them
        // back; the next step sends them first.
        self.ledger.held_from = None;
        self.ledger.committed = (
            self.frames.machine().trace().len(),
            self.machine.untyped().trace().len(),
        );
        Ok(())
    }

    /// Tells the client why the turn stopped, from the frame state the client
    /// actually saw. Nothing is persisted here: the store may be what failed.
    pub(super) async fn report(&mut self, stop: &Stop) {
        // Its step was refused: another turn holds the thread now.
        if let Stop::Store(crate::store::StoreError::LeaseLost { .. }) = stop {
            self.lease_lost().await;
            return;
        }
        let Stop::Store(_) = stop else { return };
        self.error_in_order("storage is unavailable; this turn was not saved")
            .await;
    }

    /// Ends the stream with an error, in the order the client saw: the
    /// frame machine goes back to the last frame sent, a start goes first
    /// if the client has none (frame row `error-before-start`), then the
    /// error. Nothing is persisted here.
    async fn error_in_order(&mut self, message: &str) {
        self.frames.rewind_to_shown();
        if self.frames.allows(FrameEvent::Start) {
            let start = wire::Frame::Start(wire::Start {
                turn_id: self.turn_id.clone(),
                thread_id: self.thread_id.clone(),
            });
            let _ = self.frames.emit(start).await;
        }
        if self.frames.allows(FrameEvent::Error) {
            let e = wire::Frame::Error(wire::Error {
                message: message.into(),
                ..wire::Error::default()
            });
            let _ = self.frames.emit(e).await;
        }
    }

    /// The lease on the thread was lost mid-turn (it expired, and another
    /// turn may own the thread now): nothing more is stored, and the client
    /// is told, in the frame order it saw.
    pub(super) async fn lease_lost(&mut self) {
        self.claim = None;
        self.error_in_order(
            "this turn lost its claim on the thread and was stopped; nothing after this point was saved",
        )
        .await;
        let _ = self.frames.close().await;
    }

    /// The process stops under the turn (a drain's window ended): the client
    /// is told, in the order it saw, to send again.
    pub(super) async fn stopped_for_restart(&mut self) {
        self.error_in_order(
            "this server is restarting and stopped this turn; what was shown is kept: send your message again in a moment",
        )
        .await;
        let _ = self.frames.close().await;
    }

    /// The client went away: `client_gone` is fired and its row decides.
    /// A row whose effect is `cancel` ends the turn, and the cut is recorded
    /// (best effort: the process may be going away too). A row that keeps
    /// the turn (a suspended turn waits for its decision without a client)
    /// is stored as it is, and nothing is cut.
    pub(super) async fn cancelled(&mut self) {
        // The turn ended (its terminal frame is committed) and only the
        // sending failed: nothing was cut, and the thread may be another
        // turn's already.
        if self.machine.is_terminal() {
            return;
        }
        let records = match self.machine.fire(TurnEvent::ClientGone) {
            Ok(step) => {
                self.last_row = self.machine.row_id(step.row).to_string();
                match step.effect {
                    Some(TurnEffect::Cancel) => vec![Record::Cut.message()],
                    _ => {
                        tracing::info!(row_id = %self.last_row, "the turn table keeps the turn without its client");
                        vec![]
                    }
                }
            }
            Err(v) => {
                // A refused leaving still leaves: what was shown is marked.
                tracing::error!(row_id = %v.row_id, "turn table refused the client's leaving");
                telemetry::violation(&v);
                vec![Record::Cut.message()]
            }
        };
        let save = self.persist(records);
        match tokio::time::timeout(std::time::Duration::from_secs(5), save).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "recording the cut"),
            Err(_) => tracing::warn!("recording the cut timed out"),
        }
    }

    /// A frame whose step is durable before the client sees it: the
    /// machine moves, the records and the machine states are written in one
    /// transaction (with those of the frames held before it), then the held
    /// frames and this one are sent, in order.
    pub(super) async fn step(
        &mut self,
        frame: wire::Frame,
        messages: Vec<NewMessage>,
    ) -> Result<(), Stop> {
        let before = self
            .ledger
            .held_from
            .unwrap_or_else(|| self.frames.checkpoint());
        let effect = match self.frames.fire(event_of(&frame)).await {
            Ok(effect) => effect,
            Err(e) => {
                self.drop_held(before);
                return Err(e.into());
            }
        };
        // The frame table's terminal frame is committed with the lease's
        // release: the thread is free before the client hears the turn
        // ended, so its next message is never a 409.
        let last = effect == Some(FrameEffect::EmitFinal);
        self.commit_and_send(messages, last, before, Some(frame))
            .await
    }

    /// Commits what is held with `messages`, then sends the held frames and
    /// `frame`, in order. On a failed commit nothing was sent: the machine
    /// goes back to `before`, so the failure can still be reported in
    /// order.
    async fn commit_and_send(
        &mut self,
        messages: Vec<NewMessage>,
        last: bool,
        before: crate::fsm::Checkpoint,
        frame: Option<wire::Frame>,
    ) -> Result<(), Stop> {
        if let Err(e) = self.commit(messages, last).await {
            self.drop_held(before);
            return Err(e);
        }
        let held = std::mem::take(&mut self.ledger.held);
        for f in held.into_iter().chain(frame) {
            self.frames.send(f).await?;
        }
        Ok(())
    }

    /// A frame the turn follows at once with another, with no wait on the
    /// outside world and no side effect between: fired now, stored and sent
    /// with the next step's commit (ADR 0031). A terminal frame is never
    /// staged.
    pub(super) async fn stage(
        &mut self,
        frame: wire::Frame,
        messages: Vec<NewMessage>,
    ) -> Result<(), Stop> {
        let before = self.frames.checkpoint();
        let effect = self.frames.fire(event_of(&frame)).await?;
        if effect == Some(FrameEffect::EmitFinal) {
            self.frames.restore(before);
            return self.step(frame, messages).await;
        }
        self.ledger.held_from.get_or_insert(before);
        self.ledger.held_records.extend(messages);
        self.ledger.held.push(frame);
        Ok(())
    }

    /// Commits and sends what is held, before the turn waits on the
    /// outside world (a model, a tool) or lets a side effect leave.
    pub(super) async fn flush(&mut self) -> Result<(), Stop> {
        if self.ledger.held.is_empty() {
            return Ok(());
        }
        let before = self
            .ledger
            .held_from
            .unwrap_or_else(|| self.frames.checkpoint());
        self.commit_and_send(Vec::new(), false, before, None).await
    }

    /// Forgets the frames held since `before` (never stored, never sent).
    fn drop_held(&mut self, before: crate::fsm::Checkpoint) {
        if self.ledger.held_from.is_some() {
            self.ledger.held.clear();
            self.ledger.held_records.clear();
            self.ledger.held_from = None;
        }
        self.frames.restore(before);
    }

    pub(super) async fn finish(&mut self) -> Result<(), Stop> {
        let population = self.thread.population.as_ref().map(|(p, _)| p);
        let narrowing = self.thread.population.as_ref().map(|(_, s)| s);
        let answer = Record::Answer {
            text: &self.evidence.answer,
            anchors: &self.evidence.anchors,
            population,
            narrowing,
            scope_released: self.thread.released,
        }
        .message();
        let done = wire::Frame::Done(wire::Done {
            turn_id: self.turn_id.clone(),
        });
        self.step(done, vec![answer]).await
    }

    /// Ends the turn with an error frame and records it.
    pub(super) async fn fail(&mut self) -> Result<(), Stop> {
        let error = self.evidence.failure.take().unwrap_or_else(|| wire::Error {
            message: "internal error: the turn failed without a reason".into(),
            ..wire::Error::default()
        });
        let record = Record::Error(&error).message();
        self.step(wire::Frame::Error(error), vec![record]).await
    }

    pub(super) async fn emit_call(
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

    /// A long call's task still runs: what its server says of it now.
    pub(super) async fn emit_progress(&mut self, frame: wire::Progress) -> Result<(), Stop> {
        let record = Record::Progress(&frame).message();
        self.step(wire::Frame::Progress(frame), vec![record]).await
    }

    pub(super) async fn emit_result(
        &mut self,
        frame: wire::ToolResult,
        args: &Map<String, Value>,
        out: Option<&ToolOutput>,
        digest: Option<&Digest>,
    ) -> Result<(), Stop> {
        self.emit_result_released(frame, args, out, digest, false)
            .await
    }

    pub(super) async fn emit_result_released(
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
        self.stage(wire::Frame::ToolResult(frame), vec![record])
            .await
    }

    pub(super) fn record_for(
        &self,
        model_id: Option<&str>,
        tool: &str,
        args: Map<String, Value>,
        digest: Digest,
    ) -> CallRecord {
        CallRecord {
            id: model_id
                .map(str::to_string)
                .unwrap_or_else(|| format!("{}-{}", self.turn_id, self.cursor.calls)),
            tool: tool.to_string(),
            args,
            digest,
        }
    }

    pub(super) fn next_call_id(&mut self) -> String {
        self.cursor.calls += 1;
        format!("{}-{}", self.turn_id, self.cursor.calls)
    }
}

/// A machine as one step stores it: its table, hash and state, and the
/// rows it took from the `from`-th on (`trace_from`), not its whole trace.
fn since(machine: &Machine, from: usize) -> Value {
    let table = machine.table();
    let rows: Vec<&str> = machine.trace_ids().skip(from).collect();
    serde_json::json!({
        "table": table.name,
        "table_hash": table.hash,
        "state": machine.state_name(),
        "trace": rows,
        "trace_from": from,
    })
}
