//! Draining before a stop (issue 39 §2): on SIGTERM, or `POST
//! /v1/admin/drain` with the operator key, the process stops taking turns
//! and lets the open ones finish. From that moment `/readyz` answers 503 (a
//! load balancer sends no new traffic), a new turn or decision gets 503
//! with `Retry-After` (another instance takes it), and the turns already
//! running go on to their `done` for up to the drain window
//! (`http.drain_secs`). The binary stops serving when the last one ends or
//! the window does. A turn still running then is ended as a client's
//! leaving ends it (`agent::Stopping`): its cut is stored, its task is
//! followed on, its card keeps waiting, its lease is released, and its
//! client gets an `error` frame that says to send again.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::Notify;

/// The process's drain: whether it has begun, and how many turns are open.
#[derive(Debug, Default)]
pub struct Drain {
    draining: AtomicBool,
    open: AtomicUsize,
    /// The drain window, in milliseconds (set with the router).
    window_ms: AtomicU64,
    /// A turn ended, or the drain began.
    changed: Notify,
    /// What stops the agent's running turns.
    stopping: OnceLock<Arc<crate::agent::Stopping>>,
}

/// An open turn, counted until it is dropped.
#[derive(Debug)]
pub struct OpenTurn(Arc<Drain>);

impl Drop for OpenTurn {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
        self.0.changed.notify_waiters();
    }
}

impl Drain {
    pub(super) fn set_window(&self, window: Duration) {
        let ms = u64::try_from(window.as_millis()).unwrap_or(u64::MAX);
        self.window_ms.store(ms, Ordering::SeqCst);
    }

    pub(super) fn set_stopping(&self, stopping: Arc<crate::agent::Stopping>) {
        let _ = self.stopping.set(stopping);
    }

    /// The window ended: the turns still running are stopped, and given
    /// `grace` to store their cut and release their leases; returns how
    /// many are still open after it.
    pub async fn stop_open_turns(&self, grace: Duration) -> usize {
        if let Some(s) = self.stopping.get() {
            s.fire();
        }
        let until = tokio::time::Instant::now() + grace;
        loop {
            let changed = self.changed.notified();
            if self.open_turns() == 0 {
                return 0;
            }
            if tokio::time::timeout_at(until, changed).await.is_err() {
                return self.open_turns();
            }
        }
    }

    pub fn window(&self) -> Duration {
        Duration::from_millis(self.window_ms.load(Ordering::SeqCst))
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Begins the drain; `true` the first time.
    pub fn begin(&self) -> bool {
        let first = !self.draining.swap(true, Ordering::SeqCst);
        if first {
            tracing::warn!(open_turns = self.open_turns(), "draining: no new turns");
        }
        self.changed.notify_waiters();
        first
    }

    pub fn open_turns(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    /// Counts a turn as open until the guard is dropped.
    pub fn turn_opened(self: &Arc<Self>) -> OpenTurn {
        self.open.fetch_add(1, Ordering::SeqCst);
        OpenTurn(self.clone())
    }

    /// Resolves once the drain has begun (by a signal or the admin route).
    pub async fn requested(&self) {
        loop {
            let changed = self.changed.notified();
            if self.is_draining() {
                return;
            }
            changed.await;
        }
    }

    /// Waits until no turn is open or the window has passed; returns how
    /// many turns are still open.
    pub async fn settled(&self) -> usize {
        let until = tokio::time::Instant::now() + self.window();
        loop {
            let changed = self.changed.notified();
            let open = self.open_turns();
            if open == 0 {
                return 0;
            }
            if tokio::time::timeout_at(until, changed).await.is_err() {
                return self.open_turns();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_drain_waits_for_open_turns_and_no_longer_than_its_window() {
        let d = Arc::new(Drain::default());
        d.set_window(Duration::from_millis(300));
        assert!(!d.is_draining());
        let a = d.turn_opened();
        let b = d.turn_opened();
        assert!(d.begin());
        assert!(!d.begin(), "once");
        d.requested().await;
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            drop(a);
        });
        // `b` never ends: the window does.
        let started = tokio::time::Instant::now();
        assert_eq!(d.settled().await, 1);
        assert!(started.elapsed() >= Duration::from_millis(300));
        drop(b);
        assert_eq!(d.settled().await, 0);
    }
}
