//! Pending and decided approvals (migration 0004): inserted with the step
//! that shows the interrupt, decided by one compare-and-swap on `state`.

use sqlx::any::AnyRow;
use sqlx::Row;

use super::model::StoredApproval;
use super::{now_ms, Store, StoreError};

const COLUMNS: &str = "interrupt_id, thread_id, turn_id, state, machine, action, expires_at, \
                       created_at, updated_at";

fn from_row(row: &AnyRow) -> Result<StoredApproval, StoreError> {
    let json = |col: &str| -> Result<serde_json::Value, StoreError> {
        let text: String = row.try_get(col)?;
        Ok(serde_json::from_str(&text)?)
    };
    Ok(StoredApproval {
        interrupt_id: row.try_get("interrupt_id")?,
        thread_id: row.try_get("thread_id")?,
        turn_id: row.try_get("turn_id")?,
        state: row.try_get("state")?,
        machine: json("machine")?,
        action: json("action")?,
        expires_at: row.try_get("expires_at")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

impl Store {
    /// One approval by its interrupt id.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn approval(&self, interrupt_id: &str) -> Result<Option<StoredApproval>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM approvals WHERE interrupt_id = $1"
        )))
        .bind(interrupt_id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// The thread's approvals, oldest first.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn approvals(&self, thread_id: &str) -> Result<Vec<StoredApproval>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM approvals WHERE thread_id = $1 ORDER BY created_at, interrupt_id"
        )))
        .bind(thread_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(from_row).collect()
    }

    /// Every approval in one of `states` (start-up recovery reads the ones
    /// whose confirm was sent).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn approvals_in(&self, states: &[&str]) -> Result<Vec<StoredApproval>, StoreError> {
        super::sql::rows_in_states(&self.pool, "approvals", COLUMNS, states, from_row).await
    }

    /// The turn of the thread's latest user-side message (a user message or
    /// a decision on an interrupt), read from the newest end: one row,
    /// however long the thread.
    pub async fn latest_user_turn(&self, thread_id: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query(
            "SELECT turn_id FROM messages WHERE thread_id = $1 AND role = 'user' \
             ORDER BY seq DESC LIMIT 1",
        )
        .bind(thread_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|r| r.try_get("turn_id")).transpose()?)
    }

    /// Moves the approval from `from` to `to` with its machine's new
    /// snapshot, if it is still in `from`: one statement, so of two
    /// processes deciding at once exactly one wins. `false`: it was not in
    /// `from` (another decision won, or it never was), and nothing changed.
    #[tracing::instrument(level = "debug", skip_all, fields(from, to))]
    pub async fn swap_approval(
        &self,
        interrupt_id: &str,
        from: &str,
        to: &str,
        machine: &serde_json::Value,
    ) -> Result<bool, StoreError> {
        self.swap_approval_as(interrupt_id, from, to, machine, None)
            .await
    }

    /// [`swap_approval`](Self::swap_approval), recording in the same
    /// statement who decided it (`approver`: the winning caller's owner
    /// hash), so a decision costs one commit, not two.
    pub async fn swap_approval_as(
        &self,
        interrupt_id: &str,
        from: &str,
        to: &str,
        machine: &serde_json::Value,
        approver: Option<&str>,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE approvals SET state = $1, machine = $2, updated_at = $3, \
             approver = COALESCE($6, approver) WHERE interrupt_id = $4 AND state = $5",
        )
        .bind(to)
        .bind(serde_json::to_string(machine)?)
        .bind(now_ms())
        .bind(interrupt_id)
        .bind(from)
        .bind(approver)
        .execute(&self.pool)
        .await?;
        self.committed();
        Ok(done.rows_affected() == 1)
    }
}
