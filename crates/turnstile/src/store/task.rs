//! Calls a server made tasks (migration 0007): inserted before the first
//! poll, settled by one compare-and-swap on `state`.

use sqlx::any::AnyRow;
use sqlx::Row;

use super::{now_ms, Store, StoreError};

const COLUMNS: &str = "task_key, thread_id, turn_id, call_id, server, tool, task_id, state, \
                       machine, outcome, created_at, updated_at";

/// A task as it is first stored.
#[derive(Debug, Clone)]
pub struct NewTask<'a> {
    /// This store's key for it: the turn and the call.
    pub task_key: &'a str,
    pub thread_id: &'a str,
    pub turn_id: &'a str,
    pub call_id: &'a str,
    pub server: &'a str,
    pub tool: &'a str,
    /// The server's task id (never logged).
    pub task_id: &'a str,
    pub state: &'a str,
    pub machine: &'a serde_json::Value,
}

/// A stored task. `Debug` leaves the server's task id out.
#[derive(Clone)]
pub struct StoredTask {
    pub task_key: String,
    pub thread_id: String,
    pub turn_id: String,
    pub call_id: String,
    pub server: String,
    pub tool: String,
    pub task_id: String,
    pub state: String,
    pub machine: serde_json::Value,
    /// What the user was told when it settled.
    pub outcome: Option<serde_json::Value>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl std::fmt::Debug for StoredTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredTask")
            .field("task_key", &self.task_key)
            .field("tool", &self.tool)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

fn from_row(row: &AnyRow) -> Result<StoredTask, StoreError> {
    let machine: String = row.try_get("machine")?;
    let outcome: Option<String> = row.try_get("outcome")?;
    Ok(StoredTask {
        task_key: row.try_get("task_key")?,
        thread_id: row.try_get("thread_id")?,
        turn_id: row.try_get("turn_id")?,
        call_id: row.try_get("call_id")?,
        server: row.try_get("server")?,
        tool: row.try_get("tool")?,
        task_id: row.try_get("task_id")?,
        state: row.try_get("state")?,
        machine: serde_json::from_str(&machine)?,
        outcome: outcome.map(|o| serde_json::from_str(&o)).transpose()?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

impl Store {
    /// Stores a call that became a task, before it is polled.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn insert_task(&self, task: &NewTask<'_>) -> Result<(), StoreError> {
        let now = now_ms();
        sqlx::query(
            "INSERT INTO tasks (task_key, thread_id, turn_id, call_id, server, tool, task_id, \
             state, machine, outcome, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULL, $10, $11)",
        )
        .bind(task.task_key)
        .bind(task.thread_id)
        .bind(task.turn_id)
        .bind(task.call_id)
        .bind(task.server)
        .bind(task.tool)
        .bind(task.task_id)
        .bind(task.state)
        .bind(serde_json::to_string(task.machine)?)
        .bind(now)
        .bind(now)
        .execute(&self.pool)
        .await?;
        self.committed();
        Ok(())
    }

    /// The thread's tasks, oldest first.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn tasks(&self, thread_id: &str) -> Result<Vec<StoredTask>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM tasks WHERE thread_id = $1 ORDER BY created_at, task_key"
        )))
        .bind(thread_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(from_row).collect()
    }

    /// Every task in one of `states` (start-up follows the unsettled ones).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn tasks_in(&self, states: &[&str]) -> Result<Vec<StoredTask>, StoreError> {
        super::sql::rows_in_states(&self.pool, "tasks", COLUMNS, states, from_row).await
    }

    /// Moves the task from `from` to `to` with its machine's snapshot (and,
    /// when it settles, what the user was told), if it is still in `from`.
    /// `false`: another follower moved it first, and nothing changed.
    #[tracing::instrument(level = "debug", skip_all, fields(from, to))]
    pub async fn swap_task(
        &self,
        task_key: &str,
        from: &str,
        to: &str,
        machine: &serde_json::Value,
        outcome: Option<&serde_json::Value>,
    ) -> Result<bool, StoreError> {
        let outcome = outcome.map(serde_json::to_string).transpose()?;
        let done = sqlx::query(
            "UPDATE tasks SET state = $1, machine = $2, outcome = $3, updated_at = $4 \
             WHERE task_key = $5 AND state = $6",
        )
        .bind(to)
        .bind(serde_json::to_string(machine)?)
        .bind(outcome)
        .bind(now_ms())
        .bind(task_key)
        .bind(from)
        .execute(&self.pool)
        .await?;
        self.committed();
        Ok(done.rows_affected() == 1)
    }
}
