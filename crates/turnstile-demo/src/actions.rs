//! The demo's seat-reservation desk: a store of two-phase actions and the
//! worker that carries a confirmed one out.
//!
//! `prepare_seat_reservation` creates a PENDING action that expires after
//! [`ACTION_TTL`] unless confirmed; `confirm_action` moves it to ACCEPTED
//! and a background task completes it [`DEFAULT_ACTION_WORKER_DELAY`] later
//! (COMPLETED, or FAILED with "seat taken" when the seat and time went to an
//! action accepted before it); `cancel_action` moves a PENDING one to
//! CANCELLED. Every confirm and cancel received is counted per action id,
//! refused ones included, so tests can prove what a client asked for.
//!
//! Every action belongs to the [`Owner`] that prepared it (issue 20): to
//! any other owner, confirming, cancelling or reading it answers as for an
//! unknown id. The `_as` methods take the owner; the others act as the
//! anonymous owner, except [`ActionStore::get`], the handle's read, which
//! sees every action.
//!
//! The state machine is small and lives here, in the tool server, on
//! purpose: it is the server's word the client has to respect, not the
//! client's decision.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rmcp::schemars;
use serde::Serialize;

use crate::auth::Owner;

/// Seats are numbered 1 to this, inclusive.
pub const SEATS: u32 = 40;
/// How long a prepared action waits for its confirmation.
pub const ACTION_TTL: Duration = Duration::from_secs(10 * 60);
/// How long after its confirmation an action is carried out.
pub const DEFAULT_ACTION_WORKER_DELAY: Duration = Duration::from_millis(300);
/// The reason a confirmed action fails when its seat was taken first.
pub const SEAT_TAKEN: &str = "seat taken";

/// Where an action stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ActionStatus {
    /// Prepared, waiting for `confirm_action` or `cancel_action`.
    Pending,
    /// Confirmed; the worker has not carried it out yet.
    Accepted,
    /// Carried out: the seat is reserved.
    Completed,
    /// Confirmed but not carried out (see `reason`).
    Failed,
    /// Cancelled before it was confirmed.
    Cancelled,
    /// Not confirmed within [`ACTION_TTL`].
    Expired,
}

impl ActionStatus {
    /// The wire name: `PENDING`, `ACCEPTED`, `COMPLETED`, `FAILED`,
    /// `CANCELLED`, `EXPIRED`.
    pub fn as_str(self) -> &'static str {
        match self {
            ActionStatus::Pending => "PENDING",
            ActionStatus::Accepted => "ACCEPTED",
            ActionStatus::Completed => "COMPLETED",
            ActionStatus::Failed => "FAILED",
            ActionStatus::Cancelled => "CANCELLED",
            ActionStatus::Expired => "EXPIRED",
        }
    }

    /// Confirmed at some point: accepted, completed or failed.
    fn confirmed(self) -> bool {
        matches!(
            self,
            ActionStatus::Accepted | ActionStatus::Completed | ActionStatus::Failed
        )
    }
}

impl fmt::Display for ActionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How many `confirm_action` and `cancel_action` calls named one action id
/// (refused ones and unknown ids included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ActionCounts {
    pub confirms: u64,
    pub cancels: u64,
}

/// One action as `get_action` reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActionView {
    /// The action's id, as prepare_seat_reservation returned it.
    pub action_id: u64,
    pub status: ActionStatus,
    /// Seat number, "1" to "40".
    pub seat: String,
    /// Time of the reservation, HH:MM (24-hour).
    pub time: String,
    /// Why a FAILED action failed, e.g. "seat taken".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What `prepare_seat_reservation` made of its arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prepared {
    /// A PENDING action with this id.
    Created(u64),
    /// The seat is not "1" to "40": nothing was created.
    NoSuchSeat,
    /// The time is not HH:MM (24-hour): nothing was created.
    BadTime,
    /// The seat at that time is already reserved (an action for it was
    /// accepted or completed): nothing was created, as a real desk
    /// refuses what it cannot do before asking anyone to approve it.
    SeatTaken,
}

/// A confirmation the store took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Confirmed {
    pub action_id: u64,
    /// `false` for a retry with the first confirmation's idempotency key:
    /// nothing moved, and no worker is due.
    pub fresh: bool,
}

/// Why a confirm, cancel or read was refused. Its `Display` is the message
/// the tool error carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ActionError {
    /// No action has this id.
    Unknown(u64),
    /// The action is not PENDING: confirmed, cancelled or expired.
    NotPending {
        action_id: u64,
        status: ActionStatus,
    },
}

impl fmt::Display for ActionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            // Id 0 is the no-op answer of a refused prepare; say so, since
            // a model that confirms it has misread that answer.
            ActionError::Unknown(0) => f.write_str(
                "no action 0: actionId 0 means prepare_seat_reservation created nothing (unknown seat or malformed time)",
            ),
            ActionError::Unknown(id) => write!(
                f,
                "no action {id}: prepare_seat_reservation returns the actionId to use"
            ),
            ActionError::NotPending { action_id, status } => match status {
                ActionStatus::Cancelled => write!(f, "action {action_id} was cancelled"),
                ActionStatus::Expired => write!(
                    f,
                    "action {action_id} expired: it was not confirmed within {} minutes; prepare a new one",
                    ACTION_TTL.as_secs() / 60
                ),
                status => write!(
                    f,
                    "action {action_id} is already confirmed (status {status})"
                ),
            },
        }
    }
}

impl std::error::Error for ActionError {}

#[derive(Debug)]
struct Action {
    owner: Owner,
    seat: String,
    time: String,
    status: ActionStatus,
    reason: Option<String>,
    expires_at: Instant,
    /// The key of the confirmation that accepted it, if it carried one.
    idempotency_key: Option<String>,
    /// Order of acceptance across the store: who was first to a seat.
    accepted_seq: Option<u64>,
}

impl Action {
    /// A PENDING action past its expiry becomes EXPIRED when it is next
    /// looked at; the store needs no timer for it.
    fn settle(&mut self, now: Instant) {
        if self.status == ActionStatus::Pending && now >= self.expires_at {
            self.status = ActionStatus::Expired;
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    last_id: u64,
    accepted: u64,
    actions: BTreeMap<u64, Action>,
    counts: BTreeMap<u64, ActionCounts>,
}

/// Every action of one demo server, shared by its sessions and its handle.
#[derive(Debug)]
pub struct ActionStore {
    ttl: Duration,
    worker_delay: Duration,
    inner: Mutex<Inner>,
}

impl Default for ActionStore {
    fn default() -> Self {
        ActionStore::new(ACTION_TTL, DEFAULT_ACTION_WORKER_DELAY)
    }
}

/// `"12"` for a seat 1..=[`SEATS`] written in plain digits (no sign, no
/// leading zero, no words around it).
fn seat(text: &str) -> Option<String> {
    let t = text.trim();
    let canonical = !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) && !t.starts_with('0');
    let n: u32 = t.parse().ok().filter(|_| canonical)?;
    (1..=SEATS).contains(&n).then(|| t.to_string())
}

/// `"15:00"` for a 24-hour `HH:MM`, two digits each.
fn time(text: &str) -> Option<String> {
    let t = text.trim();
    let (h, m) = t.split_once(':')?;
    let two = |s: &str| s.len() == 2 && s.bytes().all(|b| b.is_ascii_digit());
    if !two(h) || !two(m) {
        return None;
    }
    let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
    (h < 24 && m < 60).then(|| t.to_string())
}

impl ActionStore {
    /// Actions expire `ttl` after they are prepared and are carried out
    /// `worker_delay` after they are confirmed.
    pub fn new(ttl: Duration, worker_delay: Duration) -> Self {
        ActionStore {
            ttl,
            worker_delay,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves no half-made transition
        // (each is one assignment), so the data is still good.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Prepare a reservation of `seat` at `time`: a PENDING action, or a
    /// refusal that created nothing.
    pub fn prepare(&self, seat_text: &str, time_text: &str) -> Prepared {
        self.prepare_as(&Owner::Anonymous, seat_text, time_text)
    }

    /// [`prepare`](Self::prepare) an action that belongs to `owner`.
    pub fn prepare_as(&self, owner: &Owner, seat_text: &str, time_text: &str) -> Prepared {
        self.prepare_at(owner, seat_text, time_text, Instant::now())
    }

    fn prepare_at(
        &self,
        owner: &Owner,
        seat_text: &str,
        time_text: &str,
        now: Instant,
    ) -> Prepared {
        let Some(seat) = seat(seat_text) else {
            return Prepared::NoSuchSeat;
        };
        let Some(time) = time(time_text) else {
            return Prepared::BadTime;
        };
        let mut inner = self.lock();
        let taken = inner.actions.values().any(|a| {
            a.seat == seat
                && a.time == time
                && matches!(a.status, ActionStatus::Accepted | ActionStatus::Completed)
        });
        if taken {
            return Prepared::SeatTaken;
        }
        inner.last_id += 1;
        let id = inner.last_id;
        inner.actions.insert(
            id,
            Action {
                owner: owner.clone(),
                seat,
                time,
                status: ActionStatus::Pending,
                reason: None,
                expires_at: now + self.ttl,
                idempotency_key: None,
                accepted_seq: None,
            },
        );
        Prepared::Created(id)
    }

    /// Confirm a PENDING action (→ ACCEPTED) and have the worker carry it
    /// out after the worker delay. A retry carrying the key of the
    /// confirmation that accepted it is answered the same, and moves
    /// nothing. Counted whatever the outcome.
    pub fn confirm(
        self: &Arc<Self>,
        action_id: u64,
        idempotency_key: Option<&str>,
    ) -> Result<Confirmed, ActionError> {
        self.confirm_as(&Owner::Anonymous, action_id, idempotency_key)
    }

    /// [`confirm`](Self::confirm) as `owner`: another owner's action is
    /// refused as [`ActionError::Unknown`] (and counted).
    pub fn confirm_as(
        self: &Arc<Self>,
        owner: &Owner,
        action_id: u64,
        idempotency_key: Option<&str>,
    ) -> Result<Confirmed, ActionError> {
        let confirmed = self.accept_at(owner, action_id, idempotency_key, Instant::now())?;
        if confirmed.fresh {
            self.schedule(action_id);
        }
        Ok(confirmed)
    }

    fn accept_at(
        &self,
        owner: &Owner,
        action_id: u64,
        idempotency_key: Option<&str>,
        now: Instant,
    ) -> Result<Confirmed, ActionError> {
        let mut guard = self.lock();
        // One borrow of the guard, so its fields can be borrowed apart.
        let inner = &mut *guard;
        inner.counts.entry(action_id).or_default().confirms += 1;
        let action = inner
            .actions
            .get_mut(&action_id)
            .filter(|a| a.owner == *owner)
            .ok_or(ActionError::Unknown(action_id))?;
        action.settle(now);
        let key = idempotency_key.filter(|k| !k.is_empty());
        match action.status {
            ActionStatus::Pending => {
                inner.accepted += 1;
                action.status = ActionStatus::Accepted;
                action.idempotency_key = key.map(str::to_string);
                action.accepted_seq = Some(inner.accepted);
                Ok(Confirmed {
                    action_id,
                    fresh: true,
                })
            }
            status
                if status.confirmed()
                    && key.is_some()
                    && action.idempotency_key.as_deref() == key =>
            {
                Ok(Confirmed {
                    action_id,
                    fresh: false,
                })
            }
            status => Err(ActionError::NotPending { action_id, status }),
        }
    }

    /// Run the worker for an accepted action. Without a tokio runtime (a
    /// handler called outside a server) there is nothing to wait in, and
    /// with a worker delay of zero nothing to wait for, so it is carried
    /// out at once: the status tool then reads its outcome right away.
    fn schedule(self: &Arc<Self>, action_id: u64) {
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) if !self.worker_delay.is_zero() => {
                let store = Arc::clone(self);
                runtime.spawn(async move {
                    tokio::time::sleep(store.worker_delay).await;
                    store.complete(action_id);
                });
            }
            _ => {
                self.complete(action_id);
            }
        }
    }

    /// Carry out an ACCEPTED action: COMPLETED, or FAILED ("seat taken")
    /// when another action holds its seat and time, completed or accepted
    /// before it. Anything not ACCEPTED is left alone.
    fn complete(&self, action_id: u64) -> Option<ActionStatus> {
        let mut inner = self.lock();
        let action = inner.actions.get(&action_id)?;
        if action.status != ActionStatus::Accepted {
            return Some(action.status);
        }
        let taken = inner.actions.iter().any(|(&id, other)| {
            id != action_id
                && other.seat == action.seat
                && other.time == action.time
                && (other.status == ActionStatus::Completed
                    || (other.status == ActionStatus::Accepted
                        && other.accepted_seq < action.accepted_seq))
        });
        let action = inner.actions.get_mut(&action_id)?;
        if taken {
            action.status = ActionStatus::Failed;
            action.reason = Some(SEAT_TAKEN.into());
        } else {
            action.status = ActionStatus::Completed;
        }
        Some(action.status)
    }

    /// Cancel a PENDING action (→ CANCELLED); cancelling a cancelled one
    /// answers the same. Counted whatever the outcome.
    pub fn cancel(&self, action_id: u64) -> Result<u64, ActionError> {
        self.cancel_as(&Owner::Anonymous, action_id)
    }

    /// [`cancel`](Self::cancel) as `owner`: another owner's action is
    /// refused as [`ActionError::Unknown`] (and counted).
    pub fn cancel_as(&self, owner: &Owner, action_id: u64) -> Result<u64, ActionError> {
        self.cancel_at(owner, action_id, Instant::now())
    }

    fn cancel_at(&self, owner: &Owner, action_id: u64, now: Instant) -> Result<u64, ActionError> {
        let mut inner = self.lock();
        inner.counts.entry(action_id).or_default().cancels += 1;
        let action = inner
            .actions
            .get_mut(&action_id)
            .filter(|a| a.owner == *owner)
            .ok_or(ActionError::Unknown(action_id))?;
        action.settle(now);
        match action.status {
            ActionStatus::Pending | ActionStatus::Cancelled => {
                action.status = ActionStatus::Cancelled;
                Ok(action_id)
            }
            status => Err(ActionError::NotPending { action_id, status }),
        }
    }

    /// One action as it stands now (a PENDING one past its expiry reads,
    /// and from then on stays, EXPIRED).
    /// Whoever owns it: this is the handle's read, not a tool's.
    pub fn get(&self, action_id: u64) -> Result<ActionView, ActionError> {
        self.get_at(None, action_id, Instant::now())
    }

    /// [`get`](Self::get) as `owner`: another owner's action reads as
    /// [`ActionError::Unknown`].
    pub fn get_as(&self, owner: &Owner, action_id: u64) -> Result<ActionView, ActionError> {
        self.get_at(Some(owner), action_id, Instant::now())
    }

    fn get_at(
        &self,
        owner: Option<&Owner>,
        action_id: u64,
        now: Instant,
    ) -> Result<ActionView, ActionError> {
        let mut inner = self.lock();
        let action = inner
            .actions
            .get_mut(&action_id)
            .filter(|a| owner.is_none_or(|o| a.owner == *o))
            .ok_or(ActionError::Unknown(action_id))?;
        action.settle(now);
        Ok(ActionView {
            action_id,
            status: action.status,
            seat: action.seat.clone(),
            time: action.time.clone(),
            reason: action.reason.clone(),
        })
    }

    /// How many confirms and cancels named `action_id`.
    pub fn counts(&self, action_id: u64) -> ActionCounts {
        self.lock()
            .counts
            .get(&action_id)
            .copied()
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn store() -> ActionStore {
        ActionStore::default()
    }

    fn status(s: &ActionStore, id: u64) -> ActionStatus {
        s.get(id)
            .map(|v| v.status)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn prepare_is_strict_and_ids_count_from_one() {
        let s = store();
        assert_eq!(s.prepare("12", "15:00"), Prepared::Created(1));
        assert_eq!(s.prepare("40", "00:00"), Prepared::Created(2));
        assert_eq!(s.prepare("1", "23:59"), Prepared::Created(3));
        for bad in ["0", "41", "012", "seat 12", "12a", "", "-3", "+5"] {
            assert_eq!(s.prepare(bad, "15:00"), Prepared::NoSuchSeat, "{bad}");
        }
        for bad in [
            "24:00", "15:60", "9:00", "15", "3pm", "15:00:00", "", "15-00",
        ] {
            assert_eq!(s.prepare("12", bad), Prepared::BadTime, "{bad}");
        }
        // A refusal creates nothing: the next id is still 4.
        assert_eq!(s.prepare("12", "15:30"), Prepared::Created(4));
        let v = s.get(1).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            v,
            ActionView {
                action_id: 1,
                status: ActionStatus::Pending,
                seat: "12".into(),
                time: "15:00".into(),
                reason: None,
            }
        );
        assert_eq!(s.get(5), Err(ActionError::Unknown(5)));
    }

    #[test]
    fn confirm_then_complete() {
        let s = store();
        let now = Instant::now();
        assert_eq!(
            s.prepare_at(&Owner::Anonymous, "12", "15:00", now),
            Prepared::Created(1)
        );
        assert_eq!(
            s.accept_at(&Owner::Anonymous, 1, None, now),
            Ok(Confirmed {
                action_id: 1,
                fresh: true
            })
        );
        assert_eq!(status(&s, 1), ActionStatus::Accepted);
        assert_eq!(s.complete(1), Some(ActionStatus::Completed));
        // The worker running twice moves nothing.
        assert_eq!(s.complete(1), Some(ActionStatus::Completed));
        assert_eq!(status(&s, 1), ActionStatus::Completed);
        // Confirming again without the key is refused, and counted.
        assert_eq!(
            s.accept_at(&Owner::Anonymous, 1, None, now),
            Err(ActionError::NotPending {
                action_id: 1,
                status: ActionStatus::Completed
            })
        );
        assert_eq!(
            s.counts(1),
            ActionCounts {
                confirms: 2,
                cancels: 0
            }
        );
    }

    #[test]
    fn the_idempotency_key_replays_without_a_second_transition() {
        let s = store();
        let now = Instant::now();
        s.prepare_at(&Owner::Anonymous, "7", "09:30", now);
        let first = s.accept_at(&Owner::Anonymous, 1, Some("k-1"), now);
        assert_eq!(first.map(|c| c.fresh), Ok(true));
        let seq = s.lock().actions[&1].accepted_seq;
        let again = s.accept_at(&Owner::Anonymous, 1, Some("k-1"), now);
        assert_eq!(
            again,
            Ok(Confirmed {
                action_id: 1,
                fresh: false
            })
        );
        // Still the first acceptance: its place in the queue is kept.
        assert_eq!(s.lock().actions[&1].accepted_seq, seq);
        s.complete(1);
        assert_eq!(
            s.accept_at(&Owner::Anonymous, 1, Some("k-1"), now)
                .map(|c| c.fresh),
            Ok(false)
        );
        // Another key, or none, is a second confirmation: refused.
        for key in [Some("k-2"), None, Some("")] {
            assert!(matches!(
                s.accept_at(&Owner::Anonymous, 1, key, now),
                Err(ActionError::NotPending { .. })
            ));
        }
        assert_eq!(s.counts(1).confirms, 6);
        // A key on a confirmation that carried none does not make one.
        s.prepare_at(&Owner::Anonymous, "8", "09:30", now);
        assert!(s.accept_at(&Owner::Anonymous, 2, None, now).is_ok());
        assert!(s
            .accept_at(&Owner::Anonymous, 2, Some("late"), now)
            .is_err());
    }

    #[test]
    fn expiry_is_read_and_stays() {
        let s = store();
        let now = Instant::now();
        s.prepare_at(&Owner::Anonymous, "12", "15:00", now);
        s.prepare_at(&Owner::Anonymous, "13", "15:00", now);
        assert_eq!(
            s.get_at(None, 1, now + ACTION_TTL - SECOND)
                .map(|v| v.status),
            Ok(ActionStatus::Pending)
        );
        let late = now + ACTION_TTL;
        assert_eq!(
            s.get_at(None, 1, late).map(|v| v.status),
            Ok(ActionStatus::Expired)
        );
        // Expired for good, whatever clock reads it next.
        assert_eq!(
            s.get_at(None, 1, now).map(|v| v.status),
            Ok(ActionStatus::Expired)
        );
        let expired = Err(ActionError::NotPending {
            action_id: 1,
            status: ActionStatus::Expired,
        });
        assert_eq!(
            s.accept_at(&Owner::Anonymous, 1, None, now)
                .map(|c| c.action_id),
            expired
        );
        assert_eq!(s.cancel_at(&Owner::Anonymous, 1, now), expired);
        // Confirming is looked at with the confirm's clock too.
        assert!(matches!(
            s.accept_at(&Owner::Anonymous, 2, None, late),
            Err(ActionError::NotPending {
                status: ActionStatus::Expired,
                ..
            })
        ));
        let msg = ActionError::NotPending {
            action_id: 1,
            status: ActionStatus::Expired,
        }
        .to_string();
        assert!(msg.contains("expired"), "{msg}");
    }

    #[test]
    fn the_first_accepted_gets_the_seat() {
        let s = store();
        let now = Instant::now();
        for _ in 0..3 {
            s.prepare_at(&Owner::Anonymous, "12", "15:00", now);
        }
        s.prepare_at(&Owner::Anonymous, "12", "16:00", now);
        // 2 is accepted before 1; their workers run in the other order.
        for id in [2, 1, 3, 4] {
            assert!(s.accept_at(&Owner::Anonymous, id, None, now).is_ok());
        }
        assert_eq!(s.complete(1), Some(ActionStatus::Failed));
        assert_eq!(s.complete(2), Some(ActionStatus::Completed));
        assert_eq!(s.complete(3), Some(ActionStatus::Failed));
        assert_eq!(s.complete(4), Some(ActionStatus::Completed));
        let failed = s.get(3).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(failed.reason.as_deref(), Some(SEAT_TAKEN));
        assert_eq!(s.get(2).map(|v| v.reason), Ok(None));
        // A cancelled or failed action holds no seat.
        s.prepare_at(&Owner::Anonymous, "5", "10:00", now);
        s.prepare_at(&Owner::Anonymous, "5", "10:00", now);
        assert!(s.cancel_at(&Owner::Anonymous, 5, now).is_ok());
        assert!(s.accept_at(&Owner::Anonymous, 6, None, now).is_ok());
        assert_eq!(s.complete(6), Some(ActionStatus::Completed));
    }

    #[test]
    fn cancel_transitions_and_counts() {
        let s = store();
        let now = Instant::now();
        s.prepare_at(&Owner::Anonymous, "1", "08:00", now);
        assert_eq!(s.cancel_at(&Owner::Anonymous, 1, now), Ok(1));
        assert_eq!(s.cancel_at(&Owner::Anonymous, 1, now), Ok(1));
        assert_eq!(status(&s, 1), ActionStatus::Cancelled);
        assert_eq!(
            s.accept_at(&Owner::Anonymous, 1, Some("k"), now),
            Err(ActionError::NotPending {
                action_id: 1,
                status: ActionStatus::Cancelled
            })
        );
        s.prepare_at(&Owner::Anonymous, "2", "08:00", now);
        assert!(s.accept_at(&Owner::Anonymous, 2, None, now).is_ok());
        for expect in [ActionStatus::Accepted, ActionStatus::Completed] {
            assert_eq!(
                s.cancel_at(&Owner::Anonymous, 2, now),
                Err(ActionError::NotPending {
                    action_id: 2,
                    status: expect
                })
            );
            s.complete(2);
        }
        // Unknown ids are refused and counted too, 0 included.
        assert_eq!(
            s.cancel_at(&Owner::Anonymous, 9, now),
            Err(ActionError::Unknown(9))
        );
        assert_eq!(
            s.accept_at(&Owner::Anonymous, 0, None, now),
            Err(ActionError::Unknown(0))
        );
        assert_eq!(
            s.accept_at(&Owner::Anonymous, 0, None, now),
            Err(ActionError::Unknown(0))
        );
        assert_eq!(
            s.counts(1),
            ActionCounts {
                confirms: 1,
                cancels: 2
            }
        );
        assert_eq!(
            s.counts(2),
            ActionCounts {
                confirms: 1,
                cancels: 2
            }
        );
        assert_eq!(s.counts(9).cancels, 1);
        assert_eq!(s.counts(0).confirms, 2);
        assert_eq!(s.counts(42), ActionCounts::default());
        assert!(ActionError::Unknown(0)
            .to_string()
            .contains("created nothing"));
    }

    #[test]
    fn another_owners_action_is_unknown_to_it() {
        let s = Arc::new(store());
        let ana = Owner::Subject("user-ana".into());
        let bo = Owner::Subject("user-bo".into());
        assert_eq!(s.prepare_as(&ana, "12", "15:00"), Prepared::Created(1));
        assert_eq!(s.get_as(&bo, 1), Err(ActionError::Unknown(1)));
        assert_eq!(s.get_as(&Owner::Anonymous, 1), Err(ActionError::Unknown(1)));
        assert_eq!(s.confirm_as(&bo, 1, None), Err(ActionError::Unknown(1)));
        assert_eq!(s.cancel_as(&bo, 1), Err(ActionError::Unknown(1)));
        assert_eq!(s.confirm(1, None), Err(ActionError::Unknown(1)));
        // Nothing moved, and every refusal was counted.
        assert_eq!(
            s.get_as(&ana, 1).map(|v| v.status),
            Ok(ActionStatus::Pending)
        );
        assert_eq!(s.get(1).map(|v| v.status), Ok(ActionStatus::Pending));
        assert_eq!(
            s.counts(1),
            ActionCounts {
                confirms: 2,
                cancels: 1
            }
        );
        assert_eq!(s.cancel_as(&ana, 1), Ok(1));
    }

    #[tokio::test]
    async fn the_worker_completes_after_its_delay() {
        let s = Arc::new(ActionStore::new(ACTION_TTL, Duration::from_millis(50)));
        assert_eq!(s.prepare("12", "15:00"), Prepared::Created(1));
        assert_eq!(s.confirm(1, None).map(|c| c.fresh), Ok(true));
        assert_eq!(status(&s, 1), ActionStatus::Accepted);
        let deadline = Instant::now() + 5 * SECOND;
        while status(&s, 1) == ActionStatus::Accepted && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(status(&s, 1), ActionStatus::Completed);
    }

    #[test]
    fn without_a_runtime_the_worker_runs_at_once() {
        let s = Arc::new(store());
        s.prepare("3", "12:00");
        assert!(s.confirm(1, None).is_ok());
        assert_eq!(status(&s, 1), ActionStatus::Completed);
    }
}
