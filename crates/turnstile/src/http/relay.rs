//! What the front ends' writers share (issue 37, ADR 0036): the protocol's
//! table that lets each chunk through or ends the stream, and the response
//! that relays a turn's frames through a writer as SSE `data:` lines.

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::Response;
use tokio::sync::mpsc::Receiver;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;

use super::identity::Caller;
use crate::agent::OutFrame;
use crate::protocols::{telemetry, Bound, Protocol, Typed};

/// A protocol's order on one stream: every chunk is fired through its
/// table before it is written, and the first one the table refuses ends
/// the stream (a server fault, not the client's: counted and logged).
pub(super) struct StreamOrder<P: Protocol> {
    machine: Typed<P>,
    stopped: bool,
}

impl<P: Protocol> StreamOrder<P> {
    pub(super) fn new(table: &Bound<P>) -> StreamOrder<P> {
        StreamOrder {
            machine: table.machine(),
            stopped: false,
        }
    }

    /// The items the table lets through, in order, up to the first it
    /// refuses.
    pub(super) fn through<T>(&mut self, items: Vec<T>, event: impl Fn(&T) -> P::Event) -> Vec<T> {
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            if self.stopped {
                break;
            }
            match self.machine.fire(event(&item)) {
                Ok(_) => out.push(item),
                Err(v) => {
                    telemetry::violation(&v);
                    tracing::error!(table = P::NAME, row = %v.row_id, "a front-end table refused the server's own chunk");
                    self.stopped = true;
                }
            }
        }
        out
    }

    /// The stream ended (`close`): a stream cut before its end is counted
    /// as the table's violation.
    pub(super) fn close(&mut self, close: P::Event) {
        if !self.stopped {
            if let Err(v) = self.machine.fire(close) {
                telemetry::violation(&v);
            }
        }
    }

    pub(super) fn stopped(&self) -> bool {
        self.stopped
    }

    /// The table's state, for tests.
    #[cfg(test)]
    pub(super) fn state(&self) -> &'static str {
        use crate::protocols::Names;
        self.machine.state().name()
    }
}

/// A front end's writer: the `data:` lines one frame becomes.
pub(super) trait Relay: Send + 'static {
    fn lines(&mut self, frame: &OutFrame) -> Vec<String>;
    /// The turn's frames ended.
    fn close(&mut self);
    /// Nothing more may be written.
    fn stopped(&self) -> bool;
}

/// The response: the turn's frames through `relay`, as SSE `data:` lines. A
/// client that leaves drops the turn's receiver, as on the native route.
pub(super) fn respond(
    mut relay: impl Relay,
    caller: &Caller,
    mut frames: Receiver<OutFrame>,
) -> Response {
    let (tx, out) = tokio::sync::mpsc::channel::<String>(64);
    tokio::spawn(async move {
        while let Some(frame) = frames.recv().await {
            for line in relay.lines(&frame) {
                if tx.send(line).await.is_err() {
                    return;
                }
            }
            if relay.stopped() {
                return;
            }
        }
        relay.close();
    });
    let stream =
        ReceiverStream::new(out).map(|data| Ok::<_, Infallible>(Event::default().data(data)));
    let sse = Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(10)));
    caller.respond(sse)
}
