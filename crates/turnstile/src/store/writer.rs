//! Group commit (issue 19, ADR 0021): one writer task per database takes
//! every step that is waiting and commits them in one transaction, each in
//! a savepoint of its own, so one step's failure (an unknown thread, a
//! constraint) undoes that step alone. A step's caller hears back only
//! after the transaction holding it committed: a frame is still sent only
//! once its step is durable (ADR 0010), and concurrent turns share the cost
//! of a commit (one fsync on SQLite with `synchronous=FULL`) instead of
//! queueing for the write lock one by one.
//!
//! On SQLite the writer is the one connection that writes steps (readers
//! use the others, in WAL); on PostgreSQL a batch is one transaction on one
//! connection of the pool, and steps on different threads lock different
//! rows.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use sqlx::{Any, AnyPool, Row, Transaction};
use tokio::sync::{mpsc, oneshot};

use super::error::StoreError;
use super::model::{Backend, Mark, NewApproval, NewMessage};
use super::sql::{now_ms, placeholders, split_trace, ROWS_PER_INSERT};

/// The most steps one transaction takes: a bound on how long a batch holds
/// the write lock and on the statement sizes.
const MAX_BATCH: usize = 64;

/// Steps waiting for the writer, at most (backpressure on the turns).
const QUEUE: usize = 1024;

/// One step, encoded, as the writer writes it.
pub(super) struct Step {
    thread_id: String,
    turn_id: String,
    /// (role, body as JSON text, mark).
    messages: Vec<(&'static str, String, Option<Mark>)>,
    /// (name, snapshot head as JSON text, trace from, trace rows).
    machines: Vec<(String, String, i64, Vec<String>)>,
    approval: Option<NewApproval>,
    /// Renew the lease held under this turn id (the claim's: a resumed
    /// stream claims under an id of its own) by this, in the same
    /// transaction; or, with `true`, release it there (the turn's last
    /// step).
    lease: Option<(String, std::time::Duration, bool)>,
}

/// What a committed step reports: its seqs, and whether it renewed the
/// turn's lease (it still held it).
pub(super) type Written = (Vec<i64>, bool);

impl Step {
    /// Encodes a step's records and machines (on the caller's task).
    pub(super) fn encode(
        thread_id: &str,
        turn_id: &str,
        messages: &[NewMessage],
        machines: &[(&str, serde_json::Value)],
        approval: Option<&NewApproval>,
        lease: Option<(&str, std::time::Duration, bool)>,
    ) -> Result<Step, StoreError> {
        let messages = messages
            .iter()
            .map(|m| Ok((m.role.as_str(), serde_json::to_string(&m.body)?, m.mark)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        let snapshots = machines
            .iter()
            .map(|(name, snapshot)| {
                let (head, from, rows) = split_trace(snapshot)?;
                Ok((name.to_string(), serde_json::to_string(&head)?, from, rows))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        // A machine named twice in one step: the last snapshot stands (one
        // multi-row upsert may not touch a row twice on PostgreSQL).
        let mut seen = std::collections::HashSet::new();
        let mut kept: Vec<_> = snapshots
            .into_iter()
            .rev()
            .filter(|(name, ..)| seen.insert(name.clone()))
            .collect();
        kept.reverse();
        Ok(Step {
            thread_id: thread_id.to_string(),
            turn_id: turn_id.to_string(),
            messages,
            machines: kept,
            approval: approval.cloned(),
            lease: lease.map(|(holder, ttl, release)| (holder.to_string(), ttl, release)),
        })
    }
}

impl Step {
    /// The payload bytes the step writes: message bodies, machine heads
    /// and trace rows (what grows with a turn, not the SQL around it).
    fn bytes(&self) -> u64 {
        let messages: usize = self.messages.iter().map(|(_, body, _)| body.len()).sum();
        let machines: usize = (self.machines.iter())
            .map(|(name, head, _, rows)| {
                name.len() + head.len() + rows.iter().map(String::len).sum::<usize>()
            })
            .sum();
        (messages + machines) as u64
    }
}

type Reply = oneshot::Sender<Result<Written, StoreError>>;

/// The handle every clone of a store shares.
#[derive(Clone, Debug)]
pub(super) struct Writer {
    tx: mpsc::Sender<(Step, Reply)>,
}

impl Writer {
    /// Starts the writer task of `pool`. It ends when every handle is gone.
    pub(super) fn spawn(
        pool: AnyPool,
        backend: Backend,
        commits: Arc<AtomicU64>,
        bytes: Arc<AtomicU64>,
    ) -> Writer {
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::spawn(run(pool, backend, commits, bytes, rx));
        Writer { tx }
    }

    /// Writes `step` in the next group commit; its seqs once committed.
    pub(super) async fn write(&self, step: Step) -> Result<Written, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send((step, reply))
            .await
            .map_err(|_| StoreError::Writer("the store's writer has stopped".into()))?;
        answer.await.map_err(|_| {
            StoreError::Writer("the store's writer stopped before the commit".into())
        })?
    }
}

async fn run(
    pool: AnyPool,
    backend: Backend,
    commits: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
    mut rx: mpsc::Receiver<(Step, Reply)>,
) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let (steps, replies): (Vec<Step>, Vec<Reply>) = batch.into_iter().unzip();
        let span = tracing::debug_span!("store.group_commit", steps = steps.len());
        let results = tracing::Instrument::instrument(commit(&pool, backend, &steps), span).await;
        match results {
            Ok(results) => {
                commits.fetch_add(1, Ordering::Relaxed);
                bytes.fetch_add(steps.iter().map(Step::bytes).sum(), Ordering::Relaxed);
                for (reply, result) in replies.into_iter().zip(results) {
                    let _ = reply.send(result);
                }
            }
            Err(e) => {
                // Nothing of the batch is durable: every step hears so.
                let why = e.to_string();
                tracing::warn!(error = %why, steps = replies.len(), "a group commit failed");
                for reply in replies {
                    let _ = reply.send(Err(StoreError::Writer(why.clone())));
                }
            }
        }
    }
}

/// One transaction for `steps`: each in a savepoint when there are several,
/// so that a failing step is undone alone. The per-step results, once
/// committed.
async fn commit(
    pool: &AnyPool,
    backend: Backend,
    steps: &[Step],
) -> Result<Vec<Result<Written, StoreError>>, StoreError> {
    let mut tx = match backend {
        Backend::Sqlite => pool.begin_with("BEGIN IMMEDIATE").await?,
        Backend::Postgres => pool.begin().await?,
    };
    let alone = steps.len() == 1;
    let mut out = Vec::with_capacity(steps.len());
    for step in steps {
        if !alone {
            sqlx::query("SAVEPOINT step").execute(&mut *tx).await?;
        }
        let written = write(&mut tx, step).await;
        match (&written, alone) {
            (Ok(_), false) => {
                sqlx::query("RELEASE SAVEPOINT step")
                    .execute(&mut *tx)
                    .await?;
            }
            (Err(_), false) => {
                sqlx::query("ROLLBACK TO SAVEPOINT step")
                    .execute(&mut *tx)
                    .await?;
                sqlx::query("RELEASE SAVEPOINT step")
                    .execute(&mut *tx)
                    .await?;
            }
            (Err(_), true) => {
                tx.rollback().await?;
                return Ok(vec![written]);
            }
            (Ok(_), true) => {}
        }
        out.push(written);
    }
    tx.commit().await?;
    Ok(out)
}

/// One step's statements: its seqs (and the thread's pointers), its
/// messages, its machines and their new trace rows, its interrupt.
async fn write(tx: &mut Transaction<'static, Any>, step: &Step) -> Result<Written, StoreError> {
    let (thread_id, turn_id) = (step.thread_id.as_str(), step.turn_id.as_str());
    let now = now_ms();
    // The turn's lease rides on its own commits: a turn that commits is
    // making progress, and its lease never waits behind other commits to be
    // renewed. First, so that a turn that no longer holds the lease (another
    // took the thread) writes nothing: its step is undone.
    if let Some((holder, ttl, release)) = &step.lease {
        let held = match release {
            true => sqlx::query("DELETE FROM turn_leases WHERE thread_id = $1 AND turn_id = $2")
                .bind(thread_id)
                .bind(holder.as_str()),
            false => {
                let until = now.saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX));
                sqlx::query(
                    "UPDATE turn_leases SET expires_at = $1 WHERE thread_id = $2 AND turn_id = $3",
                )
                .bind(until)
                .bind(thread_id)
                .bind(holder.as_str())
            }
        }
        .execute(&mut **tx)
        .await?
        .rows_affected()
            == 1;
        if !held {
            return Err(StoreError::LeaseLost {
                thread_id: thread_id.to_owned(),
                turn_id: holder.clone(),
            });
        }
    }
    let count = i64::try_from(step.messages.len()).map_err(|_| StoreError::Corrupt {
        table: "messages",
        detail: "too many messages in one step".into(),
    })?;
    // The position (1-based) in this step of the last message of each mark,
    // 0 for none: the thread's pointer moves to its seq.
    let marked = |mark: Mark| -> i64 {
        step.messages
            .iter()
            .rposition(|(_, _, m)| *m == Some(mark))
            .map_or(0, |i| i as i64 + 1)
    };
    // Allocates the seqs and (PostgreSQL) row-locks the thread until commit;
    // a rollback undoes the increment, so seqs stay gapless. The pointers
    // move in the same statement (`last_seq` on the right is the value
    // before it).
    let row = sqlx::query(
        "UPDATE threads SET last_seq = last_seq + $1, \
         population_seq = CASE WHEN $3 > 0 THEN last_seq + $3 ELSE population_seq END, \
         delivery_seq = CASE WHEN $4 > 0 THEN last_seq + $4 ELSE delivery_seq END \
         WHERE id = $2 RETURNING last_seq",
    )
    .bind(count)
    .bind(thread_id)
    .bind(marked(Mark::Population))
    .bind(marked(Mark::Delivery))
    .fetch_optional(&mut **tx)
    .await?;
    let Some(row) = row else {
        return Err(StoreError::UnknownThread(thread_id.to_owned()));
    };
    let last: i64 = row.try_get("last_seq")?;
    let first = last - count + 1;

    // One statement per table, however many rows: a statement costs a round
    // trip to the database.
    if !step.messages.is_empty() {
        let sql = format!(
            "INSERT INTO messages (thread_id, seq, turn_id, role, body, created_at) VALUES {}",
            placeholders(step.messages.len(), 6)
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (seq, (role, body, _)) in (first..).zip(&step.messages) {
            q = q
                .bind(thread_id)
                .bind(seq)
                .bind(turn_id)
                .bind(*role)
                .bind(body.as_str())
                .bind(now);
        }
        q.execute(&mut **tx).await?;
    }

    let snapshots = &step.machines;
    if !snapshots.is_empty() {
        let sql = format!(
            "INSERT INTO machines (thread_id, turn_id, name, snapshot, updated_at) VALUES {} \
             ON CONFLICT (thread_id, turn_id, name) \
             DO UPDATE SET snapshot = excluded.snapshot, updated_at = excluded.updated_at",
            placeholders(snapshots.len(), 5)
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (name, snapshot, _, _) in snapshots {
            q = q
                .bind(thread_id)
                .bind(turn_id)
                .bind(name.as_str())
                .bind(snapshot.as_str())
                .bind(now);
        }
        q.execute(&mut **tx).await?;
        // Each machine's rows from its `from` on are these: a rewritten tail
        // (a full snapshot, a rewound machine, a step retried) replaces what
        // was there.
        let tails = (0..snapshots.len())
            .map(|i| format!("(name = ${} AND n >= ${})", 3 + 2 * i, 4 + 2 * i))
            .collect::<Vec<_>>()
            .join(" OR ");
        let sql =
            format!("DELETE FROM machine_rows WHERE thread_id = $1 AND turn_id = $2 AND ({tails})");
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(thread_id)
            .bind(turn_id);
        for (name, _, from, _) in snapshots {
            q = q.bind(name.as_str()).bind(*from);
        }
        q.execute(&mut **tx).await?;
        // A full snapshot (recovery, a long stream) may carry thousands of
        // rows: in chunks, under both databases' parameter limits (SQLite
        // 32,766; PostgreSQL 65,535).
        let rows: Vec<(&str, i64, &str)> = snapshots
            .iter()
            .flat_map(|(name, _, from, ids)| {
                (*from..)
                    .zip(ids)
                    .map(move |(n, id)| (name.as_str(), n, id.as_str()))
            })
            .collect();
        for chunk in rows.chunks(ROWS_PER_INSERT) {
            let sql = format!(
                "INSERT INTO machine_rows (thread_id, turn_id, name, n, row_id) VALUES {}",
                placeholders(chunk.len(), 5)
            );
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (name, n, row_id) in chunk {
                q = q
                    .bind(thread_id)
                    .bind(turn_id)
                    .bind(*name)
                    .bind(*n)
                    .bind(*row_id);
            }
            q.execute(&mut **tx).await?;
        }
    }

    if let Some(a) = &step.approval {
        sqlx::query(
            "INSERT INTO approvals (interrupt_id, thread_id, turn_id, state, machine, action, \
             expires_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)",
        )
        .bind(a.interrupt_id.as_str())
        .bind(thread_id)
        .bind(turn_id)
        .bind(a.state.as_str())
        .bind(serde_json::to_string(&a.machine)?)
        .bind(serde_json::to_string(&a.action)?)
        .bind(a.expires_at)
        .bind(now)
        .execute(&mut **tx)
        .await?;
    }
    Ok(((first..=last).collect(), step.lease.is_some()))
}
