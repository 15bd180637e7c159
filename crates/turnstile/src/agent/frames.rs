//! The frame writer: every frame of a response stream is fired through the
//! `frame` table before it is written. A violation is a server bug: it is
//! logged with its row id and the stream ends with an `error` frame where the
//! table allows one.

use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::fsm::{Checkpoint, Snapshot, Violation};
use crate::protocols::frame::{Frame, FrameEffect, FrameEvent};
use crate::protocols::{Bound, Typed};
use crate::wire;

/// The `frame` table's event for a typed frame.
pub fn event_of(frame: &wire::Frame) -> FrameEvent {
    match frame {
        wire::Frame::Start(_) => FrameEvent::Start,
        wire::Frame::Plan(_) => FrameEvent::Plan,
        wire::Frame::ToolCall(_) => FrameEvent::ToolCall,
        wire::Frame::ToolResult(_) => FrameEvent::ToolResult,
        wire::Frame::Citation(_) => FrameEvent::Citation,
        wire::Frame::Figure(_) => FrameEvent::Figure,
        wire::Frame::Progress(_) => FrameEvent::Progress,
        wire::Frame::Delta(_) => FrameEvent::Delta,
        wire::Frame::Interrupt(_) => FrameEvent::Interrupt,
        wire::Frame::Done(_) => FrameEvent::Done,
        wire::Frame::Error(_) => FrameEvent::Error,
    }
}

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
    /// The machine as of the last frame sent.
    shown: Checkpoint,
    seq: u64,
    tx: mpsc::Sender<OutFrame>,
}

impl FrameWriter {
    /// A handle on the stream's sender, to notice the client leaving.
    pub fn sender(&self) -> mpsc::Sender<OutFrame> {
        self.tx.clone()
    }

    pub fn new(table: &Bound<Frame>, tx: mpsc::Sender<OutFrame>) -> Self {
        let machine = table.machine();
        FrameWriter {
            shown: machine.checkpoint(),
            machine,
            seq: 0,
            tx,
        }
    }

    pub async fn emit(&mut self, frame: wire::Frame) -> Result<(), EmitError> {
        self.fire(event_of(&frame)).await?;
        self.send(frame).await
    }

    /// Moves the machine for `event` without writing the frame yet, so the
    /// caller can make the step durable first and then [`send`](Self::send)
    /// it: a client never sees a frame whose step could still be lost.
    /// Returns the row's effect: `emit-final` marks the stream's terminal
    /// frame.
    pub async fn fire(&mut self, event: FrameEvent) -> Result<Option<FrameEffect>, EmitError> {
        match self.machine.fire(event) {
            Ok(step) => Ok(step.effect),
            Err(v) => {
                // The caller reports it: an error frame naming the row,
                // committed like any other frame.
                tracing::error!(
                    table = %v.table, row_id = %v.row_id, state = %v.state, event = %v.event,
                    "frame order violation (server bug)"
                );
                Err(EmitError::Violation(v))
            }
        }
    }

    /// Writes a frame whose event was already fired.
    pub async fn send(&mut self, frame: wire::Frame) -> Result<(), EmitError> {
        self.seq += 1;
        let frame = OutFrame {
            seq: self.seq,
            kind: frame.kind(),
            data: frame.data(),
        };
        self.tx
            .send(frame)
            .await
            .map_err(|_| EmitError::Disconnected)?;
        self.shown = self.machine.checkpoint();
        Ok(())
    }

    /// Ends the stream: fires `close`. A stream the turn left unterminated is
    /// a bug; it gets an `error` frame first so the client is never left
    /// guessing.
    pub async fn close(&mut self) -> Result<(), EmitError> {
        if !self.machine.is_terminal() && self.machine.allows(FrameEvent::Error) {
            tracing::error!(state = ?self.machine.state(), "turn ended without a terminal frame (server bug)");
            self.emit(wire::Frame::Error(wire::Error {
                message: "internal error: the turn ended without a result".into(),
                ..wire::Error::default()
            }))
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

    /// Where the machine is now, to [`restore`](Self::restore) if the step
    /// a fired event belongs to could not be made durable. Two words, not a
    /// copy: taking one on every frame costs nothing.
    pub fn checkpoint(&self) -> Checkpoint {
        self.machine.checkpoint()
    }

    /// Back to a checkpoint. Only for an event whose frame was never sent.
    pub fn restore(&mut self, checkpoint: Checkpoint) {
        self.machine.rewind(checkpoint);
    }

    pub fn is_terminal(&self) -> bool {
        self.machine.is_terminal()
    }

    /// Undoes what the machine took for frames the client never got: a
    /// step cut off between firing its frame and sending it (the turn's
    /// future dropped when its lease was lost) leaves the machine ahead of
    /// the client.
    pub fn rewind_to_shown(&mut self) {
        self.machine.rewind(self.shown);
    }

    pub fn allows(&self, event: FrameEvent) -> bool {
        self.machine.allows(event)
    }

    pub fn snapshot(&self) -> Snapshot {
        self.machine.snapshot()
    }

    /// The frame machine, to read its trace without copying it.
    pub fn machine(&self) -> &crate::fsm::Machine {
        self.machine.untyped()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocols::TableSet;

    fn start() -> wire::Frame {
        wire::Frame::Start(wire::Start {
            turn_id: "t".into(),
            thread_id: "th".into(),
        })
    }

    /// A step cut off after its frame was taken and before it was sent
    /// (its future dropped): the writer goes back to what the client saw,
    /// so an error can still follow a start, in order.
    #[tokio::test]
    async fn a_frame_taken_but_never_sent_is_undone() {
        let set = TableSet::builtin().expect("the built-in tables load");
        let table = set.bound::<Frame>().expect("the frame table binds");
        let (tx, mut rx) = mpsc::channel(8);
        let mut w = FrameWriter::new(&table, tx);
        w.fire(FrameEvent::Start)
            .await
            .expect("start is legal first");
        assert!(!w.allows(FrameEvent::Start), "the machine took start");
        w.rewind_to_shown();
        assert!(w.allows(FrameEvent::Start), "the client saw no start");
        assert!(!w.allows(FrameEvent::Error), "error-before-start");
        w.emit(start()).await.expect("sent");
        w.fire(FrameEvent::Plan).await.expect("plan after start");
        w.rewind_to_shown();
        assert!(w.allows(FrameEvent::Plan), "back to just after start");
        assert_eq!(rx.recv().await.map(|f| f.kind), Some("start"));
    }
}
