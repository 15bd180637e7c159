//! Turn leases: at most one running turn per thread, across every process
//! that shares the database (`migrations/0002_turn_leases.sql`,
//! `docs/adr/0009-turn-lease.md`).
//!
//! A lease is a row `(thread_id, turn_id, claimed_at, expires_at)`. It is
//! live while `now < expires_at` (unix milliseconds from the writing
//! process's clock). Each operation is one statement, so it is atomic on
//! both backends without an explicit transaction:
//!
//! - **claim** inserts the row, or takes over an *expired* row, with
//!   `INSERT … ON CONFLICT (thread_id) DO UPDATE … WHERE
//!   turn_leases.expires_at <= now`. PostgreSQL row-locks the conflicting
//!   row and re-checks the `WHERE` on its latest version, SQLite has one
//!   writer at a time: of any number of concurrent claims exactly one
//!   changes a row, and `rows_affected` tells which.
//! - **renew** moves `expires_at` forward only where `turn_id` is the holder.
//! - **release** deletes the row only where `turn_id` is the holder.
//!
//! A holder that stops renewing (a crashed process) loses the thread when
//! the lease expires; nothing has to clean up after it.

use std::time::Duration;

use sqlx::Row;

use super::{now_ms, Store, StoreError};

/// A thread's turn lease as stored.
#[derive(serde::Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The thread the lease is for.
    pub thread_id: String,
    /// The turn that holds it.
    pub turn_id: String,
    /// When this turn claimed it, unix milliseconds.
    pub claimed_at: i64,
    /// Until when it holds, unix milliseconds (exclusive).
    pub expires_at: i64,
}

impl Lease {
    /// Whether the lease still holds at `now_ms` (unix milliseconds).
    pub fn is_live_at(&self, now_ms: i64) -> bool {
        now_ms < self.expires_at
    }
}

/// `now + ttl` in unix milliseconds, saturating.
pub(super) fn expiry(now: i64, ttl: Duration) -> i64 {
    now.saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX))
}

impl Store {
    /// Claims the thread for `turn_id` until `ttl` from now: succeeds if no
    /// lease exists or the existing one has expired (a crashed holder's).
    ///
    /// Fails with [`StoreError::LeaseHeld`] while another turn's lease is
    /// live, and with [`StoreError::UnknownThread`] for a thread that does
    /// not exist. Claiming again with the holder's own `turn_id` while the
    /// lease is live also fails: a turn claims once, then renews.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn claim_turn_lease(
        &self,
        thread_id: &str,
        turn_id: &str,
        ttl: Duration,
    ) -> Result<Lease, StoreError> {
        let now = now_ms();
        let lease = Lease {
            thread_id: thread_id.to_owned(),
            turn_id: turn_id.to_owned(),
            claimed_at: now,
            expires_at: expiry(now, ttl),
        };
        // Through the step writer: a claim shares a group commit with other
        // turns' steps instead of waiting for SQLite's write lock on its own.
        let step =
            super::writer::Step::claim(thread_id, turn_id, lease.claimed_at, lease.expires_at);
        self.writer.write(step).await?;
        tracing::debug!(expires_at = lease.expires_at, "turn lease claimed");
        Ok(lease)
    }

    /// Extends `turn_id`'s lease on the thread to `ttl` from now. Fails with
    /// [`StoreError::LeaseLost`] if `turn_id` does not hold it (it was
    /// released, or it expired and another turn claimed it). An expired
    /// lease that nobody took over is still the holder's, and is renewed.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn renew_turn_lease(
        &self,
        thread_id: &str,
        turn_id: &str,
        ttl: Duration,
    ) -> Result<Lease, StoreError> {
        let expires_at = expiry(now_ms(), ttl);
        let row = sqlx::query(
            "UPDATE turn_leases SET expires_at = $1 WHERE thread_id = $2 AND turn_id = $3 \
             RETURNING claimed_at",
        )
        .bind(expires_at)
        .bind(thread_id)
        .bind(turn_id)
        .fetch_optional(&self.pool)
        .await?;
        self.committed();
        let Some(row) = row else {
            return Err(StoreError::LeaseLost {
                thread_id: thread_id.to_owned(),
                turn_id: turn_id.to_owned(),
            });
        };
        Ok(Lease {
            thread_id: thread_id.to_owned(),
            turn_id: turn_id.to_owned(),
            claimed_at: row.try_get("claimed_at")?,
            expires_at,
        })
    }

    /// Ends `turn_id`'s lease on the thread, so the next claim succeeds at
    /// once. Fails with [`StoreError::LeaseLost`], changing nothing, if
    /// `turn_id` does not hold it: another turn's lease is never removed.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn release_turn_lease(
        &self,
        thread_id: &str,
        turn_id: &str,
    ) -> Result<(), StoreError> {
        let done = sqlx::query("DELETE FROM turn_leases WHERE thread_id = $1 AND turn_id = $2")
            .bind(thread_id)
            .bind(turn_id)
            .execute(&self.pool)
            .await?;
        self.committed();
        if done.rows_affected() == 0 {
            return Err(StoreError::LeaseLost {
                thread_id: thread_id.to_owned(),
                turn_id: turn_id.to_owned(),
            });
        }
        Ok(())
    }

    /// The thread's lease row, live or expired, or `None`.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn turn_lease(&self, thread_id: &str) -> Result<Option<Lease>, StoreError> {
        let row = sqlx::query(
            "SELECT turn_id, claimed_at, expires_at FROM turn_leases WHERE thread_id = $1",
        )
        .bind(thread_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| {
            Ok(Lease {
                thread_id: thread_id.to_owned(),
                turn_id: row.try_get("turn_id")?,
                claimed_at: row.try_get("claimed_at")?,
                expires_at: row.try_get("expires_at")?,
            })
        })
        .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_saturates_and_liveness_is_exclusive() {
        assert_eq!(expiry(1_000, Duration::from_millis(250)), 1_250);
        assert_eq!(expiry(1_000, Duration::MAX), i64::MAX);
        let lease = Lease {
            thread_id: "t".into(),
            turn_id: "u".into(),
            claimed_at: 1_000,
            expires_at: 1_250,
        };
        assert!(lease.is_live_at(1_249));
        assert!(!lease.is_live_at(1_250));
    }
}
