//! Reconnecting to a turn's stream (issue 38 §5). A panel that loses its
//! connection mid-answer (a laptop lid, a proxy) asks again with the id of
//! the last frame it showed (`Last-Event-ID`) and gets the frames after it,
//! then the live rest: nothing lost, nothing shown twice.
//!
//! The turn writes its frames into a relay, not into the response: the
//! relay keeps every frame of the turn and forwards each to the one
//! connection attached. When that connection goes, the turn keeps running
//! for `grace`; a reconnect within it attaches and is sent what it missed.
//! With nobody attached at the end of the grace, the relay lets go of the
//! turn, which then meets its client's absence as before (the turn is cut,
//! its tasks followed, its approvals kept, its lease released). A zero
//! grace is the old behaviour: no relay at all.
//!
//! The relay is this process's memory. A reconnect that reaches another
//! process (or comes after the grace) finds no live turn and is told so
//! (204); the client then shows the stored thread, which holds every frame
//! that was sent (ADR 0010).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc::{self, Receiver, Sender};
use tokio::sync::Notify;

use crate::agent::OutFrame;

/// Each thread's live turn, while it runs and for `grace` after.
#[derive(Default)]
pub struct Live {
    grace: Duration,
    turns: Mutex<HashMap<String, Arc<Relay>>>,
}

struct Relay {
    inner: Mutex<Inner>,
    /// A connection attached: the relay loop looks again at who is
    /// attached (a grace running out, a send to a connection replaced).
    attached: Notify,
}

#[derive(Default)]
struct Inner {
    /// The turn's id, as its `start` frame named it (a resumed turn's
    /// stream names the turn it resumes).
    turn_id: Option<String>,
    /// Every frame the turn wrote, in order.
    frames: Vec<OutFrame>,
    /// The attached connection.
    sub: Option<Sender<OutFrame>>,
    /// The turn wrote its last frame.
    ended: bool,
    /// Nobody came back within the grace: the turn was let go (and cut).
    /// A reconnect now reads the stored thread, not a stream that stops.
    abandoned: bool,
}

/// Why a reconnect gets no stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Missing {
    /// No turn of this thread runs here (or it ended longer than the grace
    /// ago): the stored thread has it.
    NoLiveTurn,
    /// A frame id that is not a number.
    BadLastEventId,
}

impl Live {
    pub fn new(grace: Duration) -> Live {
        Live {
            grace,
            turns: Mutex::default(),
        }
    }

    pub fn enabled(&self) -> bool {
        !self.grace.is_zero()
    }

    /// Puts the turn's frames behind a relay and returns the first
    /// connection's stream. Without a grace, the frames go straight through.
    pub fn relay(
        self: &Arc<Self>,
        thread_id: &str,
        frames: Receiver<OutFrame>,
    ) -> Receiver<OutFrame> {
        if !self.enabled() {
            return frames;
        }
        let (tx, rx) = mpsc::channel(64);
        let relay = Arc::new(Relay {
            inner: Mutex::new(Inner {
                sub: Some(tx),
                ..Inner::default()
            }),
            attached: Notify::new(),
        });
        self.lock().insert(thread_id.to_string(), relay.clone());
        let live = self.clone();
        let thread = thread_id.to_string();
        tokio::spawn(async move {
            live.run(&relay, frames).await;
            // Kept for the grace after the turn ended: a client that lost
            // its connection just before `done` still gets the end.
            tokio::time::sleep(live.grace).await;
            let mut turns = live.lock();
            if turns.get(&thread).is_some_and(|r| Arc::ptr_eq(r, &relay)) {
                turns.remove(&thread);
            }
        });
        rx
    }

    /// A reconnect to `turn_id` of `thread_id` (the thread's running turn
    /// when the client never read its `start`): the frames after
    /// `last_event_id` (all of them without one), then the live rest. A
    /// connection still attached is let go: the newest one gets the rest.
    pub fn attach(
        &self,
        thread_id: &str,
        turn_id: Option<&str>,
        last_event_id: Option<&str>,
    ) -> Result<(Vec<OutFrame>, Receiver<OutFrame>), Missing> {
        let after = match last_event_id.map(str::trim) {
            None | Some("") => 0,
            Some(s) => s.parse::<u64>().map_err(|_| Missing::BadLastEventId)?,
        };
        let relay = (self.lock().get(thread_id).cloned()).ok_or(Missing::NoLiveTurn)?;
        let mut inner = relay.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if inner.abandoned || turn_id.is_some_and(|t| inner.turn_id.as_deref() != Some(t)) {
            return Err(Missing::NoLiveTurn);
        }
        let missed: Vec<OutFrame> = (inner.frames.iter())
            .filter(|f| f.seq > after)
            .cloned()
            .collect();
        let (tx, rx) = mpsc::channel(64);
        // An ended turn sends nothing more: the stream ends after what was
        // missed (the sender is dropped here).
        inner.sub = (!inner.ended).then_some(tx);
        drop(inner);
        relay.attached.notify_one();
        Ok((missed, rx))
    }

    /// Forwards the turn's frames until it ends, or until nobody has been
    /// attached for the grace (then the turn's receiver is dropped, which
    /// the turn meets as its client's disconnect).
    async fn run(&self, relay: &Relay, mut frames: Receiver<OutFrame>) {
        let mut alone_since: Option<tokio::time::Instant> = None;
        loop {
            let sub = relay.sub();
            if sub.is_some() {
                alone_since = None;
            } else if alone_since.is_none() {
                alone_since = Some(tokio::time::Instant::now());
            }
            let deadline = alone_since.map(|t| t + self.grace);
            tokio::select! {
                f = frames.recv() => {
                    let Some(f) = f else { break };
                    let sub = relay.push(f.clone());
                    if let Some(s) = sub {
                        // A connection that stalls holds the turn back, as
                        // a direct one would; a reconnect that replaces it
                        // got this frame among what it missed. A wake from
                        // an earlier reconnect (this very connection) sends
                        // again.
                        loop {
                            tokio::select! {
                                sent = s.send(f.clone()) => {
                                    if sent.is_err() {
                                        relay.detach(&s);
                                    }
                                    break;
                                }
                                () = relay.attached.notified() => {
                                    if relay.sub().is_some_and(|now| now.same_channel(&s)) {
                                        continue;
                                    }
                                    break;
                                }
                            }
                        }
                    }
                }
                // The attached client went away between frames.
                () = closed(sub.as_ref()) => {
                    if let Some(s) = &sub {
                        relay.detach(s);
                    }
                }
                // Someone attached: look again before any deadline.
                () = relay.attached.notified() => {}
                () = until(deadline) => {
                    if relay.sub().is_some() {
                        continue;
                    }
                    tracing::debug!("no client came back within the grace");
                    let mut inner = relay.inner.lock().unwrap_or_else(PoisonError::into_inner);
                    inner.abandoned = true;
                    break;
                }
            }
        }
        let mut inner = relay.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.ended = true;
        inner.sub = None;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Relay>>> {
        self.turns.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Relay {
    fn sub(&self) -> Option<Sender<OutFrame>> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.sub.clone()
    }

    /// Keeps `f` and returns the connection it goes to. One lock for both,
    /// so a reconnect sees `f` either among the missed frames or live,
    /// never both and never neither.
    fn push(&self, f: OutFrame) -> Option<Sender<OutFrame>> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if f.kind == "start" && inner.turn_id.is_none() {
            inner.turn_id = (f.data.get("turn_id").and_then(|v| v.as_str())).map(str::to_string);
        }
        inner.frames.push(f);
        inner.sub.clone()
    }

    fn detach(&self, gone: &Sender<OutFrame>) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if inner.sub.as_ref().is_some_and(|s| s.same_channel(gone)) {
            inner.sub = None;
        }
    }
}

async fn closed(sub: Option<&Sender<OutFrame>>) {
    match sub {
        Some(s) => s.closed().await,
        None => std::future::pending().await,
    }
}

async fn until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn frame(seq: u64) -> OutFrame {
        match seq {
            1 => OutFrame {
                seq,
                kind: "start",
                data: json!({"turn_id": "u"}),
            },
            _ => OutFrame {
                seq,
                kind: "delta",
                data: json!({"text": seq.to_string()}),
            },
        }
    }

    async fn drain(rx: &mut Receiver<OutFrame>) -> Vec<u64> {
        let mut out = Vec::new();
        while let Some(f) = rx.recv().await {
            out.push(f.seq);
        }
        out
    }

    #[tokio::test]
    async fn a_reconnect_gets_what_it_missed_then_the_rest_once() {
        let live = Arc::new(Live::new(Duration::from_secs(5)));
        let (turn, frames) = mpsc::channel(8);
        let mut first = live.relay("t", frames);
        for s in 1..=3 {
            turn.send(frame(s)).await.unwrap();
        }
        assert_eq!(first.recv().await.unwrap().seq, 1);
        assert_eq!(first.recv().await.unwrap().seq, 2);
        // The client is gone after frame 2 (frame 3 may be in flight).
        drop(first);
        turn.send(frame(4)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            live.attach("t", Some("other-turn"), Some("2")).unwrap_err(),
            Missing::NoLiveTurn
        );
        assert_eq!(
            live.attach("t", Some("u"), Some("x")).unwrap_err(),
            Missing::BadLastEventId
        );
        let (missed, mut rest) = live.attach("t", Some("u"), Some("2")).unwrap();
        turn.send(frame(5)).await.unwrap();
        drop(turn);
        let seqs: Vec<u64> = missed.iter().map(|f| f.seq).collect();
        assert_eq!(seqs, vec![3, 4]);
        assert_eq!(drain(&mut rest).await, vec![5]);
        // After the end, within the grace, the whole turn can still be read.
        let (all, mut none) = live.attach("t", None, None).unwrap();
        assert_eq!(all.len(), 5);
        assert!(drain(&mut none).await.is_empty());
    }

    #[tokio::test]
    async fn a_client_back_within_the_grace_keeps_the_turn_however_quiet_it_is() {
        let live = Arc::new(Live::new(Duration::from_millis(200)));
        let (turn, frames) = mpsc::channel(8);
        let first = live.relay("t", frames);
        turn.send(frame(1)).await.unwrap();
        drop(first);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (missed, mut rest) = live.attach("t", Some("u"), Some("0")).unwrap();
        assert_eq!(missed.len(), 1);
        // Long past the first deadline, with no frame written meanwhile.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(
            !turn.is_closed(),
            "the turn was let go with a client attached"
        );
        turn.send(frame(2)).await.unwrap();
        assert_eq!(rest.recv().await.unwrap().seq, 2);
    }

    #[tokio::test]
    async fn with_nobody_back_within_the_grace_the_turn_meets_its_clients_absence() {
        let live = Arc::new(Live::new(Duration::from_millis(100)));
        let (turn, frames) = mpsc::channel(8);
        let first = live.relay("t", frames);
        drop(first);
        tokio::time::timeout(Duration::from_secs(5), turn.closed())
            .await
            .expect("the turn's sender sees the receiver gone");
        // A reconnect after that reads the stored thread, not a stream that
        // stops short.
        assert_eq!(
            live.attach("t", None, None).unwrap_err(),
            Missing::NoLiveTurn
        );
        // And without a grace there is no relay: the receiver is the turn's.
        let none = Arc::new(Live::new(Duration::ZERO));
        let (turn, frames) = mpsc::channel(8);
        drop(none.relay("t", frames));
        assert!(turn.is_closed());
        assert_eq!(
            none.attach("t", Some("u"), None).unwrap_err(),
            Missing::NoLiveTurn
        );
    }
}
