//! One running turn per thread, across every process sharing the database.
//! Two turns interleaving on one thread would mix their messages, and a
//! narrowing follow-up could read the other turn's population.
//!
//! The claim is a lease row in the store (`Store::claim_turn_lease`,
//! `docs/adr/0009-turn-lease.md`): it holds for a TTL, every step the turn
//! commits renews it in the same transaction ([`ThreadLease::renewed`]), a
//! background task renews it when no step did for TTL/3 (a slow model),
//! and it is released when the turn ends. A renewal that waits behind
//! commits never expires a lease that those commits renewed. A crashed process stops renewing, so its leases expire after
//! the TTL and the threads are usable again; nothing has to clean up.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::Instrument;

use crate::store::{Store, StoreError};

/// The lease TTL when the configuration names none (`limits.turn_lease_secs`).
pub const DEFAULT_TURN_LEASE: Duration = Duration::from_secs(30);

/// The longest lease TTL: longer ones are cut to it (and refused by the
/// configuration). A day is far beyond any turn's step.
pub const MAX_TURN_LEASE: Duration = Duration::from_secs(24 * 60 * 60);

/// Renewal never runs more often than this, whatever the TTL.
const MIN_RENEW_EVERY: Duration = Duration::from_millis(10);

/// Hands out thread claims backed by the store's turn leases.
#[derive(Debug, Clone)]
pub struct ThreadLeases {
    store: Store,
    ttl: Duration,
}

/// Held while a turn runs: the thread's lease, renewed in the background.
/// [`ThreadLease::release`] (or [`ThreadLease::hold_while`]) frees the thread; dropping
/// the guard stops the renewal at once and releases the lease in a spawned
/// task (or, outside a runtime, leaves it to expire).
#[derive(Debug)]
pub struct ThreadLease {
    store: Store,
    thread: String,
    turn: String,
    /// The renewal task; aborted when the claim is released or dropped.
    renewer: JoinHandle<()>,
    /// Becomes `true` when the renewal task has given the lease up.
    lost: watch::Receiver<bool>,
    /// The local view of the lease's expiry, moved by every renewal (the
    /// task's and the turn's own commits').
    deadline: Deadline,
    ttl: Duration,
    released: bool,
}

/// The local deadline a lease holds until, shared by the renewal task and
/// the turn's commits.
#[derive(Debug, Clone)]
struct Deadline(Arc<Mutex<Instant>>);

impl Deadline {
    fn get(&self) -> Instant {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Moves it to `to` if that is later.
    fn extend(&self, to: Instant) {
        let mut d = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *d = (*d).max(to);
    }
}

impl ThreadLeases {
    /// Claims backed by `store`, each lease holding for `ttl` (at most
    /// [`MAX_TURN_LEASE`]) between renewals, renewed every `ttl / 3`.
    pub fn new(store: Store, ttl: Duration) -> Self {
        ThreadLeases {
            store,
            ttl: ttl.min(MAX_TURN_LEASE),
        }
    }

    /// Claims `thread` for turn `turn_id`, or `Ok(None)` while another turn
    /// (in this process or another) holds it. Fails with
    /// [`StoreError::UnknownThread`] for a thread that does not exist, and
    /// with the store's error when the database cannot be reached.
    pub async fn claim(
        &self,
        thread: &str,
        turn_id: &str,
    ) -> Result<Option<ThreadLease>, StoreError> {
        // On a task of its own: a caller dropped half-way (a client that
        // reset its connection right after sending) cannot leave a claimed
        // row behind without its guard; the task finishes, and a claim no
        // one takes is dropped, which releases the lease.
        let (store, ttl) = (self.store.clone(), self.ttl);
        let (thread, turn) = (thread.to_owned(), turn_id.to_owned());
        let started = Instant::now();
        let claimed = tokio::spawn(async move { claim_now(store, thread, turn, ttl).await });
        let claim = claimed
            .await
            .map_err(|e| StoreError::Writer(format!("the claim's task failed: {e}")))?;
        let spent = started.elapsed();
        crate::protocols::telemetry::phase(crate::protocols::telemetry::Phase::Lease, spent);
        claim
    }
}

async fn claim_now(
    store: Store,
    thread: String,
    turn: String,
    ttl: Duration,
) -> Result<Option<ThreadLease>, StoreError> {
    // The local deadline starts before the row's expiry is computed, so the
    // holder gives up no later than the row expires.
    let started = Instant::now();
    match store.claim_turn_lease(&thread, &turn, ttl).await {
        Ok(_) => {}
        Err(StoreError::LeaseHeld(_)) => return Ok(None),
        Err(e) => return Err(e),
    }
    let (lost_tx, lost) = watch::channel(false);
    let deadline = Deadline(Arc::new(Mutex::new(started + ttl)));
    let renewer = tokio::spawn(renew(
        store.clone(),
        thread.clone(),
        turn.clone(),
        ttl,
        deadline.clone(),
        lost_tx,
    ));
    Ok(Some(ThreadLease {
        store,
        thread,
        turn,
        renewer,
        lost,
        deadline,
        ttl,
        released: false,
    }))
}

/// Renews the lease when no commit of the turn did for `ttl / 3`, until
/// aborted. Gives up (and says so on `lost`) when the store answers that
/// this turn no longer holds the lease, or when the deadline (the local view
/// of the lease's expiry, which the turn's commits move too) passes without
/// a renewal: after that another process may claim the thread.
async fn renew(
    store: Store,
    thread: String,
    turn: String,
    ttl: Duration,
    deadline: Deadline,
    lost: watch::Sender<bool>,
) {
    let every = (ttl / 3).max(MIN_RENEW_EVERY);
    loop {
        // A third of the way after the last renewal, whoever made it.
        let held_until = deadline.get();
        let due = (held_until - ttl + every).min(held_until);
        tokio::time::sleep_until(due).await;
        if deadline.get() != held_until {
            continue;
        }
        let started = Instant::now();
        if started >= deadline.get() {
            tracing::error!(thread_id = %thread, turn_id = %turn, "turn lease expired before it could be renewed");
            break;
        }
        let renewal = store.renew_turn_lease(&thread, &turn, ttl);
        tokio::pin!(renewal);
        // Waits for the renewal while the lease holds; the turn's commits
        // may move the deadline meanwhile.
        let result = loop {
            tokio::select! {
                r = &mut renewal => break Some(r),
                () = tokio::time::sleep_until(deadline.get()) => {
                    if Instant::now() >= deadline.get() {
                        break None;
                    }
                }
            }
        };
        match result {
            Some(Ok(_)) => deadline.extend(started + ttl),
            Some(Err(StoreError::LeaseLost { .. })) => {
                tracing::error!(thread_id = %thread, turn_id = %turn, "turn lease lost to another turn");
                break;
            }
            Some(Err(e)) => {
                tracing::warn!(thread_id = %thread, turn_id = %turn, error = %e, "cannot renew the turn lease; retrying");
                // Not at once: the next try after a renewal's interval, or
                // at the deadline.
                let pause = (Instant::now() + every).min(deadline.get());
                tokio::time::sleep_until(pause).await;
            }
            None => {
                tracing::error!(thread_id = %thread, turn_id = %turn, "turn lease expired while renewing it");
                break;
            }
        }
    }
    let _ = lost.send(true);
}

/// Releases the lease, logging instead of failing: a lease that cannot be
/// released expires after its TTL. The events name no thread or turn: they
/// run in the turn's span, or in [`lease_span`] outside it, so each log line
/// carries each id once.
async fn release_lease(store: &Store, thread: &str, turn: &str) {
    match store.release_turn_lease(thread, turn).await {
        Ok(()) => tracing::debug!("turn lease released"),
        Err(StoreError::LeaseLost { .. }) => {
            tracing::debug!("turn lease was no longer held")
        }
        Err(e) => tracing::warn!(
            error = %e,
            "cannot release the turn lease; it expires after its TTL"
        ),
    }
}

/// The span that names the thread and turn of a lease operation run
/// outside the turn's own span (which already names them).
fn lease_span(thread: &str, turn: &str) -> tracing::Span {
    let current = tracing::Span::current();
    if current.metadata().is_some_and(|m| m.name() == "turn") {
        return current;
    }
    tracing::info_span!(parent: None, "turn_lease", thread_id = %thread, turn_id = %turn)
}

impl ThreadLease {
    pub fn thread_id(&self) -> &str {
        &self.thread
    }

    pub fn turn_id(&self) -> &str {
        &self.turn
    }

    /// The lease TTL a step renews it by.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// A step that started at `started` committed and renewed the lease in
    /// its transaction: the lease holds until `started + ttl`.
    pub fn renewed(&self, started: Instant) {
        self.deadline.extend(started + self.ttl);
    }

    /// Resolves once the lease is lost: another turn took the thread over,
    /// or the lease expired because the store could not be reached to
    /// renew it. Never resolves while the lease is held.
    pub async fn lost(&self) {
        self.lost_signal().await
    }

    /// A future that resolves once the lease is lost, independent of the
    /// claim's lifetime (so the claim itself can move into the turn).
    pub fn lost_signal(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut lost = self.lost.clone();
        async move {
            if lost.wait_for(|l| *l).await.is_err() {
                // The renewal task is gone without losing the lease (released).
                std::future::pending::<()>().await;
            }
        }
    }

    /// Runs `work` while the lease is held, then releases the lease.
    /// Returns `work`'s output, or `None` if the lease was lost first: then
    /// `work` is dropped (cancelled), since another turn may now run on the
    /// thread.
    pub async fn hold_while<F: Future>(self, work: F) -> Option<F::Output> {
        let out = tokio::select! {
            biased;
            out = work => Some(out),
            () = self.lost() => None,
        };
        self.release().await;
        out
    }

    /// Stops renewing: the turn's last step is about to release the lease
    /// in its own transaction (a renewal racing it would find the lease
    /// gone and report it lost).
    pub fn stop_renewing(&self) {
        self.renewer.abort();
    }

    /// The turn's last step released the lease in its commit: nothing is
    /// left to release.
    pub fn released_by_commit(mut self) {
        self.renewer.abort();
        self.released = true;
    }

    /// Stops renewing and releases the lease now, so the next claim on the
    /// thread succeeds at once.
    pub async fn release(mut self) {
        self.renewer.abort();
        let span = lease_span(&self.thread, &self.turn);
        release_lease(&self.store, &self.thread, &self.turn)
            .instrument(span)
            .await;
        // Only now: if this future is dropped half-way, `drop` releases.
        self.released = true;
    }
}

impl Drop for ThreadLease {
    fn drop(&mut self) {
        self.renewer.abort();
        if self.released {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let (store, thread, turn) =
                    (self.store.clone(), self.thread.clone(), self.turn.clone());
                let span = lease_span(&thread, &turn);
                runtime.spawn(
                    async move { release_lease(&store, &thread, &turn).await }.instrument(span),
                );
            }
            Err(_) => tracing::warn!(
                thread_id = %self.thread,
                turn_id = %self.turn,
                "no runtime to release the turn lease; it expires after its TTL"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn setup(ttl: Duration) -> (Store, ThreadLeases, String) {
        let store = Store::connect("sqlite::memory:").await.expect("store");
        let thread = store.create_thread(None).await.expect("thread").id;
        let claims = ThreadLeases::new(store.clone(), ttl);
        (store, claims, thread)
    }

    /// Polls `store` until the thread has no lease row (a spawned release).
    async fn wait_released(store: &Store, thread: &str) {
        for _ in 0..200 {
            if store.turn_lease(thread).await.expect("read").is_none() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the lease was never released");
    }

    #[tokio::test]
    async fn one_claim_per_thread() {
        let (store, c, t1) = setup(DEFAULT_TURN_LEASE).await;
        let t2 = store.create_thread(None).await.expect("thread").id;
        let a = c.claim(&t1, "turn-a").await.expect("claim").expect("free");
        assert!(c.claim(&t1, "turn-b").await.expect("claim").is_none());
        assert!(c.claim(&t2, "turn-c").await.expect("claim").is_some());
        a.release().await;
        assert!(c.claim(&t1, "turn-d").await.expect("claim").is_some());
        assert!(matches!(
            c.claim("no-such-thread", "turn-e").await,
            Err(StoreError::UnknownThread(_))
        ));
    }

    #[tokio::test]
    async fn dropping_the_guard_releases_the_lease() {
        let (store, c, t) = setup(DEFAULT_TURN_LEASE).await;
        let a = c.claim(&t, "turn-a").await.expect("claim").expect("free");
        drop(a);
        wait_released(&store, &t).await;
        assert!(c.claim(&t, "turn-b").await.expect("claim").is_some());
    }

    #[tokio::test]
    async fn renewal_keeps_a_short_lease_while_the_turn_runs() {
        let ttl = Duration::from_millis(300);
        let (store, c, t) = setup(ttl).await;
        let a = c.claim(&t, "turn-a").await.expect("claim").expect("free");
        let first = store.turn_lease(&t).await.expect("read").expect("row");
        let out = a
            .hold_while(async {
                // Several TTLs: without renewal the lease would have expired.
                tokio::time::sleep(ttl * 4).await;
                let held = store.turn_lease(&t).await.expect("read").expect("row");
                assert_eq!(held.turn_id, "turn-a");
                assert!(held.expires_at > first.expires_at, "renewed");
                assert!(c.claim(&t, "turn-b").await.expect("claim").is_none());
                7
            })
            .await;
        assert_eq!(out, Some(7));
        assert!(
            store.turn_lease(&t).await.expect("read").is_none(),
            "released"
        );
    }

    #[tokio::test]
    async fn a_lease_taken_over_cancels_the_work() {
        let ttl = Duration::from_millis(300);
        let (store, c, t) = setup(ttl).await;
        let a = c.claim(&t, "turn-a").await.expect("claim").expect("free");
        // As if this process had stalled past the TTL and another took over.
        store
            .release_turn_lease(&t, "turn-a")
            .await
            .expect("release");
        store
            .claim_turn_lease(&t, "turn-b", DEFAULT_TURN_LEASE)
            .await
            .expect("takeover");
        let out = a.hold_while(tokio::time::sleep(DEFAULT_TURN_LEASE)).await;
        assert_eq!(out, None, "the work stops when the lease is lost");
        let lease = store.turn_lease(&t).await.expect("read").expect("row");
        assert_eq!(lease.turn_id, "turn-b", "another turn's lease is kept");
    }
}
