//! Which server processes are alive: one row per process, renewed while it
//! runs (migration 0008). What a process holds only in memory (a 2025-11-25
//! question's open call) is stored with the process's id, and is settled
//! by another process only once that id's row has expired.

use std::time::Duration;

use sqlx::Row;

use super::{now_ms, Store, StoreError};

impl Store {
    /// Inserts or renews process `id`'s row: alive until `ttl` from now.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn renew_process(&self, id: &str, ttl: Duration) -> Result<(), StoreError> {
        let now = now_ms();
        let expires_at = super::lease::expiry(now, ttl);
        sqlx::query(
            "INSERT INTO process_leases (process_id, started_at, expires_at) VALUES ($1, $2, $3) \
             ON CONFLICT (process_id) DO UPDATE SET expires_at = excluded.expires_at",
        )
        .bind(id)
        .bind(now)
        .bind(expires_at)
        .execute(&self.pool)
        .await?;
        self.committed();
        Ok(())
    }

    /// Until when process `id`'s row holds (unix ms), or `None` if it has
    /// none (it stopped cleanly, or never ran against this database).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn process_expiry(&self, id: &str) -> Result<Option<i64>, StoreError> {
        let row = sqlx::query("SELECT expires_at FROM process_leases WHERE process_id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| r.try_get("expires_at").map_err(StoreError::from))
            .transpose()
    }

    /// Removes process `id`'s row (a clean stop), and rows that expired
    /// long ago (a day), so the table does not grow with every restart.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn release_process(&self, id: &str) -> Result<(), StoreError> {
        let day_ago = now_ms().saturating_sub(24 * 3_600_000);
        sqlx::query("DELETE FROM process_leases WHERE process_id = $1 OR expires_at < $2")
            .bind(id)
            .bind(day_ago)
            .execute(&self.pool)
            .await?;
        self.committed();
        Ok(())
    }
}

/// This process's row, renewed every third of its TTL while the guard
/// lives. Dropping the guard stops the renewals and removes the row, so a
/// process that stops cleanly (or an app dropped in a test) is at once
/// known to hold nothing; a killed one is known so once the row expires.
pub struct ProcessRow {
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl ProcessRow {
    /// Inserts the row for `id`, then renews it in the background.
    pub async fn start(store: Store, id: &str, ttl: Duration) -> Result<ProcessRow, StoreError> {
        store.renew_process(id, ttl).await?;
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let process = id.to_string();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(ttl / 3);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    _ = tick.tick() => {}
                }
                // A failed renewal is retried at the next tick; a process
                // that cannot write for a whole TTL is taken for gone.
                if let Err(e) = store.renew_process(&process, ttl).await {
                    tracing::warn!(error = %e, "renewing this process's row");
                }
            }
            if let Err(e) = store.release_process(&process).await {
                tracing::debug!(error = %e, "removing this process's row");
            }
        });
        Ok(ProcessRow { _stop: stop })
    }
}
