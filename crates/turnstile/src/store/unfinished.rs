//! What start-up recovery reads: the stored `turn` and `frame` machines of
//! each turn, and whether a turn was already marked `cut`
//! (`docs/adr/0014-start-up-recovery.md`). Deciding what is unfinished is
//! the tables' job (`agent::recovery`); the store only reads rows.

use sqlx::Row;

use super::{json_column, Store, StoreError};

/// One turn's stored `turn` and `frame` machine snapshots (JSON).
#[derive(Clone, Debug, PartialEq)]
pub struct TurnMachines {
    pub thread_id: String,
    pub turn_id: String,
    pub turn: serde_json::Value,
    pub frame: Option<serde_json::Value>,
}

impl Store {
    /// The threads that have a turn lease row, live or expired. A turn
    /// claims its thread before its first step and deletes the row only
    /// after its terminal step, so every turn a dead process left
    /// unfinished is on one of these threads (until a later turn on the
    /// thread takes the row over, and closes it then).
    #[tracing::instrument(name = "store.leased_threads", level = "debug", skip_all)]
    pub async fn leased_threads(&self) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query("SELECT thread_id FROM turn_leases ORDER BY thread_id")
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|r| Ok(r.try_get("thread_id")?)).collect()
    }

    /// The `turn` and `frame` machines of every turn of the thread that has
    /// a `turn` machine, sorted by turn id.
    #[tracing::instrument(name = "store.turn_machines", level = "debug", skip_all)]
    pub async fn turn_machines(&self, thread_id: &str) -> Result<Vec<TurnMachines>, StoreError> {
        let machines = self.read_machines(thread_id, None, true).await?;
        let mut turns =
            std::collections::BTreeMap::<(String, String), (Option<_>, Option<_>)>::new();
        for (turn, name, snap) in machines {
            let entry = turns.entry((thread_id.to_string(), turn)).or_default();
            match name.as_str() {
                "turn" => entry.0 = Some(snap),
                _ => entry.1 = Some(snap),
            }
        }
        Ok(turns
            .into_iter()
            .filter_map(|((thread_id, turn_id), (turn, frame))| {
                Some(TurnMachines {
                    thread_id,
                    turn_id,
                    turn: turn?,
                    frame,
                })
            })
            .collect())
    }

    /// The `turn` and `frame` machines of the thread's latest turn other
    /// than `except` (the one whose message has the highest seq), if it has
    /// a `turn` machine: two reads, whatever the thread's length.
    #[tracing::instrument(name = "store.latest_turn_machines", level = "debug", skip_all)]
    pub async fn latest_turn_machines(
        &self,
        thread_id: &str,
        except: &str,
    ) -> Result<Option<TurnMachines>, StoreError> {
        let row = sqlx::query(
            "SELECT turn_id FROM messages WHERE thread_id = $1 AND turn_id <> $2 \
             ORDER BY seq DESC LIMIT 1",
        )
        .bind(thread_id)
        .bind(except)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let turn_id: String = row.try_get("turn_id")?;
        let (mut turn, mut frame) = (None, None);
        for (_, name, snap) in self.read_machines(thread_id, Some(&turn_id), true).await? {
            match name.as_str() {
                "turn" => turn = Some(snap),
                _ => frame = Some(snap),
            }
        }
        Ok(turn.map(|turn| TurnMachines {
            thread_id: thread_id.to_string(),
            turn_id,
            turn,
            frame,
        }))
    }

    /// Whether the turn has a record of `kind` (a message body whose `kind`
    /// field is it).
    #[tracing::instrument(name = "store.turn_has_record", level = "debug", skip_all)]
    pub async fn turn_has_record(
        &self,
        thread_id: &str,
        turn_id: &str,
        kind: &str,
    ) -> Result<bool, StoreError> {
        let rows = sqlx::query("SELECT body FROM messages WHERE thread_id = $1 AND turn_id = $2")
            .bind(thread_id)
            .bind(turn_id)
            .fetch_all(&self.pool)
            .await?;
        for row in &rows {
            let text: String = row.try_get("body")?;
            let body = json_column("messages", &text)?;
            if body.get("kind").and_then(serde_json::Value::as_str) == Some(kind) {
                return Ok(true);
            }
        }
        Ok(false)
    }
}
