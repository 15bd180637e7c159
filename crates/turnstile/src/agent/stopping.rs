//! The process is stopping (issue 39 §2): a drain's window ended with turns
//! still running. Each is ended as a client's leaving ends it (its turn
//! table's `client_gone` row: the cut is stored, a running task is followed
//! on, a card keeps waiting), its client is told in order to send again,
//! and its lease is released, so the next process starts clean.

use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

#[derive(Debug, Default)]
pub struct Stopping {
    fired: AtomicBool,
    notify: Notify,
}

impl Stopping {
    /// Stops every running turn of this process.
    pub fn fire(&self) {
        self.fired.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// Resolves once [`Stopping::fire`] was called.
    pub async fn fired(&self) {
        loop {
            let notified = self.notify.notified();
            if self.fired.load(Ordering::SeqCst) {
                return;
            }
            notified.await;
        }
    }
}
