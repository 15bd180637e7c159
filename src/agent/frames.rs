//! The frame writer: every frame of a response stream is fired through the
//! `frame` table before it is written. A violation is a server bug: it is
//! logged with its row id and the stream ends with an `error` frame where the
//! table allows one.

use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::fsm::{Snapshot, Violation};
use crate::protocols::frame::{Frame, FrameEvent};
use crate::protocols::{Bound, Typed};

/// One frame as the HTTP layer writes it: `id`, `event`, `data`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutFrame {
    pub seq: u64,
    pub kind: &'static str,
    pub data: Value,
}

#[derive(Debug, thiserror::Error)]
pub enum EmitError {
    #[error("the client disconnected")]
    Disconnected,
    #[error("frame order violation: {0}")]
    Violation(Box<Violation>),
}

pub struct FrameWriter {
    machine: Typed<Frame>,
    seq: u64,
    tx: mpsc::Sender<OutFrame>,
}

impl FrameWriter {
    pub fn new(table: &Bound<Frame>, tx: mpsc::Sender<OutFrame>) -> Self {
        FrameWriter {
            machine: table.machine(),
            seq: 0,
            tx,
        }
    }

    pub async fn emit(&mut self, event: FrameEvent, data: Value) -> Result<(), EmitError> {
        self.fire(event).await?;
        self.send(event, data).await
    }

    /// Moves the machine for `event` without writing the frame yet, so the
    /// caller can make the step durable first and then [`send`](Self::send)
    /// it: a client never sees a frame whose step could still be lost.
    pub async fn fire(&mut self, event: FrameEvent) -> Result<(), EmitError> {
        match self.machine.fire(event) {
            Ok(_) => Ok(()),
            Err(v) => {
                tracing::error!(
                    table = %v.table, row_id = %v.row_id, state = %v.state, event = %v.event,
                    "frame order violation (server bug)"
                );
                if self.machine.fire(FrameEvent::Error).is_ok() {
                    let data = json!({"message": "internal error: frame order violation", "row_id": v.row_id});
                    let _ = self.send(FrameEvent::Error, data).await;
                }
                Err(EmitError::Violation(v))
            }
        }
    }

    /// Writes a frame whose event was already fired.
    pub async fn send(&mut self, event: FrameEvent, data: Value) -> Result<(), EmitError> {
        self.seq += 1;
        let frame = OutFrame {
            seq: self.seq,
            kind: event.kind(),
            data,
        };
        self.tx
            .send(frame)
            .await
            .map_err(|_| EmitError::Disconnected)
    }

    /// Ends the stream: fires `close`. A stream the turn left unterminated is
    /// a bug; it gets an `error` frame first so the client is never left
    /// guessing.
    pub async fn close(&mut self) -> Result<(), EmitError> {
        if !self.machine.is_terminal() && self.machine.allows(FrameEvent::Error) {
            tracing::error!(state = ?self.machine.state(), "turn ended without a terminal frame (server bug)");
            self.emit(
                FrameEvent::Error,
                json!({"message": "internal error: the turn ended without a result"}),
            )
            .await?;
        }
        self.machine
            .fire(FrameEvent::Close)
            .map(|_| ())
            .map_err(|v| {
                tracing::error!(row_id = %v.row_id, "stream closed out of order (server bug)");
                EmitError::Violation(v)
            })
    }

    /// The machine as it is now, to [`restore`](Self::restore) if the step
    /// a fired event belongs to could not be made durable.
    pub fn checkpoint(&self) -> Typed<Frame> {
        self.machine.clone()
    }

    /// Puts back a checkpoint. Only for an event whose frame was never sent.
    pub fn restore(&mut self, checkpoint: Typed<Frame>) {
        self.machine = checkpoint;
    }

    pub fn is_terminal(&self) -> bool {
        self.machine.is_terminal()
    }

    pub fn allows(&self, event: FrameEvent) -> bool {
        self.machine.allows(event)
    }

    pub fn snapshot(&self) -> Snapshot {
        self.machine.snapshot()
    }
}
