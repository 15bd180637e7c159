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
use super::model::{Backend, NewApproval, NewMessage, ThreadPointer};
use super::sql::{now_ms, placeholders, placeholders_from, split_trace, ROWS_PER_INSERT};

/// The most steps one transaction takes: a bound on how long a batch holds
/// the write lock and on the statement sizes. 256 was tried (issue 35): on
/// SQLite with 10,000 slow streams it made release lateness p99 17.5 s
/// against 5.6 s at 64, and the RSS 2.7 GB against 1.5 GB.
const MAX_BATCH: usize = 64;

/// Steps waiting for the writer, at most (backpressure on the turns).
const QUEUE: usize = 1024;

/// One step, encoded, as the writer writes it.
pub(super) struct Step {
    thread_id: String,
    turn_id: String,
    /// (role, body as JSON text, mark).
    messages: Vec<(&'static str, String, Option<ThreadPointer>)>,
    machines: Vec<Head>,
    approval: Option<NewApproval>,
    /// The lease held under this turn id (the claim's: a resumed stream
    /// claims under an id of its own), and what the step does to it in
    /// its transaction.
    lease: Option<(String, LeaseOp)>,
}

/// What a step does to its thread's lease.
#[derive(Clone, Copy, Debug)]
pub(super) enum LeaseOp {
    /// Renew it by this TTL from the commit (a step of a running turn).
    Renew(std::time::Duration),
    /// Delete it (the turn's last step).
    Release,
    /// Take it when no lease exists or the existing one has expired by
    /// `claimed_at`, holding until `expires_at` (unix ms). A claim step
    /// writes nothing else: claims share group commits with the steps of
    /// other turns instead of taking SQLite's write lock on their own.
    Claim { claimed_at: i64, expires_at: i64 },
}

/// A machine as a step writes it: (name, snapshot head as JSON text,
/// trace from, trace rows).
type Head = (String, String, i64, Vec<String>);

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
        lease: Option<(&str, LeaseOp)>,
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
            lease: lease.map(|(holder, op)| (holder.to_string(), op)),
        })
    }

    /// A step that only claims the thread's lease for `turn_id`.
    pub(super) fn claim(thread_id: &str, turn_id: &str, claimed_at: i64, expires_at: i64) -> Step {
        Step {
            thread_id: thread_id.to_string(),
            turn_id: turn_id.to_string(),
            messages: Vec::new(),
            machines: Vec::new(),
            approval: None,
            lease: Some((
                turn_id.to_string(),
                LeaseOp::Claim {
                    claimed_at,
                    expires_at,
                },
            )),
        }
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

/// What the writer counts, shared with every clone of the store.
#[derive(Debug, Default)]
pub(super) struct Counters {
    /// Group commits.
    pub(super) commits: AtomicU64,
    /// Payload bytes committed (see `Step::bytes`).
    pub(super) bytes: AtomicU64,
    /// Batches written again one step per savepoint after a statement of
    /// the one-statement-per-table path failed (a step that violates a
    /// constraint; a rising count with no such step is a bug).
    pub(super) fallbacks: AtomicU64,
}

/// The handle every clone of a store shares.
#[derive(Clone, Debug)]
pub(super) struct Writer {
    tx: mpsc::Sender<(Step, Reply)>,
}

impl Writer {
    /// Starts the writer task of `pool`. It ends when every handle is gone.
    pub(super) fn spawn(pool: AnyPool, backend: Backend, counters: Arc<Counters>) -> Writer {
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::spawn(run(pool, backend, counters, rx));
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
    counters: Arc<Counters>,
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
        let results =
            tracing::Instrument::instrument(commit(&pool, backend, &counters, &steps), span).await;
        match results {
            Ok(results) => {
                counters.commits.fetch_add(1, Ordering::Relaxed);
                counters
                    .bytes
                    .fetch_add(steps.iter().map(Step::bytes).sum(), Ordering::Relaxed);
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

/// One transaction for `steps`, the per-step results once committed.
///
/// A batch of several steps on distinct threads is written as one statement per
/// table for the whole batch (`commit_batch`): a statement is a hop to
/// the database's worker, and a batch of many steps would otherwise make
/// several hops per step. Any statement error there undoes the batch,
/// which is then written again one savepoint per step (`commit_each`), so
/// a step that violates a constraint fails alone, as before.
async fn commit(
    pool: &AnyPool,
    backend: Backend,
    counters: &Counters,
    steps: &[Step],
) -> Result<Vec<Result<Written, StoreError>>, StoreError> {
    // A claim alone is one autocommit statement (a transaction around it
    // would cost two more round trips to the database's worker).
    if let [step] = steps {
        if matches!(step.lease, Some((_, LeaseOp::Claim { .. }))) {
            let mut conn = pool.acquire().await?;
            return Ok(vec![write_lease(&mut conn, step, now_ms()).await]);
        }
    }
    // A step alone takes the plainer statements of the per-step path.
    if steps.len() > 1 && batchable(steps) {
        match commit_batch(pool, backend, steps).await {
            Ok(out) => return Ok(out),
            Err(e) => {
                counters.fallbacks.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(
                    error = %e,
                    steps = steps.len(),
                    "a batched commit failed; writing its steps one by one"
                );
            }
        }
    }
    commit_each(pool, backend, steps).await
}

/// Whether one statement per table can carry the batch: every step on a
/// thread of its own (the seq allocation is one row per thread, and an
/// upsert may not touch one key twice).
fn batchable(steps: &[Step]) -> bool {
    let mut threads = std::collections::HashSet::with_capacity(steps.len());
    steps.iter().all(|s| threads.insert(s.thread_id.as_str()))
}

/// Bind parameters per statement, under both databases' limits (SQLite
/// 32,766; PostgreSQL 65,535).
const PARAMS_PER_STATEMENT: usize = 30_000;

/// Rows of `width` parameters per statement.
fn rows_per_statement(width: usize) -> usize {
    (PARAMS_PER_STATEMENT / width).max(1)
}

/// The batch in one transaction, one statement per table (chunked under
/// the parameter limits): leases first, so a step whose turn lost its
/// lease writes nothing; then the threads' seqs, so a step on an unknown
/// thread writes nothing; then every surviving step's messages, machines,
/// trace rows and interrupts.
async fn commit_batch(
    pool: &AnyPool,
    backend: Backend,
    steps: &[Step],
) -> Result<Vec<Result<Written, StoreError>>, StoreError> {
    let mut tx = begin(pool, backend).await?;
    let now = now_ms();
    let mut out: Vec<Option<Result<Written, StoreError>>> =
        (0..steps.len()).map(|_| None).collect();

    write_leases(&mut tx, steps, now, &mut out).await?;

    let written = allocate_seqs(&mut tx, steps, &mut out).await?;

    // Messages, machines and trace rows of every step written.
    let messages: Vec<Seqd<'_>> = written
        .iter()
        .flat_map(|&(i, first)| {
            (first..)
                .zip(&steps[i].messages)
                .map(move |(seq, m)| (&steps[i], seq, m))
        })
        .collect();
    insert_messages(&mut tx, &messages, now).await?;
    let steps_written: Vec<&Step> = written.iter().map(|&(i, _)| &steps[i]).collect();
    upsert_machines(&mut tx, &steps_written, now).await?;
    for &(i, _) in &written {
        if let Some(a) = &steps[i].approval {
            insert_approval(&mut tx, &steps[i], a, now).await?;
        }
    }
    tx.commit().await?;
    out.into_iter()
        .map(|r| r.ok_or_else(|| StoreError::Writer("a step of the batch was not written".into())))
        .collect()
}

/// The batch's lease statements: claims, renewals grouped by their new
/// expiry, releases. A step whose lease is not returned hears `LeaseHeld`
/// (a claim) or `LeaseLost` in `out`; a claim taken is its whole answer.
async fn write_leases(
    tx: &mut Transaction<'static, Any>,
    steps: &[Step],
    now: i64,
    out: &mut [Option<Result<Written, StoreError>>],
) -> Result<(), StoreError> {
    let mut claims = Vec::new();
    let mut renewals: std::collections::BTreeMap<i64, Vec<usize>> = Default::default();
    let mut releases = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        match step.lease.as_ref().map(|(_, op)| *op) {
            Some(LeaseOp::Release) => releases.push(i),
            Some(LeaseOp::Renew(ttl)) => renewals.entry(until(now, ttl)).or_default().push(i),
            Some(LeaseOp::Claim {
                claimed_at,
                expires_at,
            }) => claims.push((i, claimed_at, expires_at)),
            None => {}
        }
    }
    let mut held = std::collections::HashSet::new();
    for chunk in claims.chunks(rows_per_statement(4)) {
        let mut q = sqlx::query(sqlx::AssertSqlSafe(claim_sql(chunk.len())));
        for &(i, claimed_at, expires_at) in chunk {
            q = q
                .bind(steps[i].thread_id.as_str())
                .bind(lease_holder(&steps[i]))
                .bind(claimed_at)
                .bind(expires_at);
        }
        for row in q.fetch_all(&mut **tx).await? {
            held.insert(row.try_get::<String, _>("thread_id")?);
        }
    }
    for (until, group) in &renewals {
        for chunk in group.chunks(rows_per_statement(2)) {
            let sql = renew_sql(chunk.len());
            lease_pairs(tx, sql, Some(*until), steps, chunk, &mut held).await?;
        }
    }
    for chunk in releases.chunks(rows_per_statement(2)) {
        lease_pairs(tx, release_sql(chunk.len()), None, steps, chunk, &mut held).await?;
    }
    for (i, step) in steps.iter().enumerate() {
        let Some((_, op)) = &step.lease else { continue };
        let held = held.contains(&step.thread_id);
        // A renewed or released lease lets the step go on to its writes.
        if !held || matches!(op, LeaseOp::Claim { .. }) {
            out[i] = Some(lease_outcome(step, held));
        }
    }
    Ok(())
}

/// The batch's seqs: one row per thread, the pointers moved in the same
/// statement (`threads.last_seq` on the right is the value before it). The
/// steps written, each with its first seq; a step on an unknown thread
/// hears so in `out`.
async fn allocate_seqs(
    tx: &mut Transaction<'static, Any>,
    steps: &[Step],
    out: &mut [Option<Result<Written, StoreError>>],
) -> Result<Vec<(usize, i64)>, StoreError> {
    let live: Vec<usize> = (0..steps.len()).filter(|i| out[*i].is_none()).collect();
    let mut last_seqs = std::collections::HashMap::new();
    for chunk in live.chunks(rows_per_statement(4)) {
        let sql = format!(
            "UPDATE threads SET last_seq = threads.last_seq + v.column2, \
             population_seq = CASE WHEN v.column3 > 0 THEN threads.last_seq + v.column3 \
               ELSE threads.population_seq END, \
             delivery_seq = CASE WHEN v.column4 > 0 THEN threads.last_seq + v.column4 \
               ELSE threads.delivery_seq END \
             FROM (VALUES {}) AS v WHERE threads.id = v.column1 \
             RETURNING threads.id, threads.last_seq",
            placeholders(chunk.len(), 4)
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for &i in chunk {
            let step = &steps[i];
            q = q
                .bind(step.thread_id.as_str())
                .bind(step.count()?)
                .bind(step.marked(ThreadPointer::Population))
                .bind(step.marked(ThreadPointer::Delivery));
        }
        for row in q.fetch_all(&mut **tx).await? {
            let id: String = row.try_get("id")?;
            last_seqs.insert(id, row.try_get::<i64, _>("last_seq")?);
        }
    }
    let mut written = Vec::new();
    for &i in &live {
        let step = &steps[i];
        match last_seqs.get(&step.thread_id) {
            Some(&last) => {
                let first = last - step.count()? + 1;
                written.push((i, first));
                out[i] = Some(Ok(((first..=last).collect(), step.lease.is_some())));
            }
            None => out[i] = Some(Err(StoreError::UnknownThread(step.thread_id.clone()))),
        }
    }
    Ok(written)
}

/// A claim of `rows` leases: taken where none exists or the one there has
/// expired by the claim's time; returns the threads claimed.
fn claim_sql(rows: usize) -> String {
    format!(
        "INSERT INTO turn_leases (thread_id, turn_id, claimed_at, expires_at) VALUES {} \
         ON CONFLICT (thread_id) DO UPDATE SET turn_id = excluded.turn_id, \
         claimed_at = excluded.claimed_at, expires_at = excluded.expires_at \
         WHERE turn_leases.expires_at <= excluded.claimed_at RETURNING thread_id",
        placeholders(rows, 4)
    )
}

/// Renews the leases of `rows` (thread, turn) pairs to the expiry in `$1`.
fn renew_sql(rows: usize) -> String {
    format!(
        "UPDATE turn_leases SET expires_at = $1 \
         WHERE (thread_id, turn_id) IN (VALUES {}) RETURNING thread_id",
        placeholders_from(rows, 2, 1)
    )
}

/// Releases the leases of `rows` (thread, turn) pairs.
fn release_sql(rows: usize) -> String {
    format!(
        "DELETE FROM turn_leases WHERE (thread_id, turn_id) IN (VALUES {}) RETURNING thread_id",
        placeholders(rows, 2)
    )
}

/// What a step's lease statement means for the step: a claim taken is its
/// answer, a lease renewed or released lets it go on (`Ok`), and one not
/// held is `LeaseHeld` (a claim) or `LeaseLost`.
fn lease_outcome(step: &Step, held: bool) -> Result<Written, StoreError> {
    match (held, &step.lease) {
        (true, _) | (_, None) => Ok((Vec::new(), held)),
        (false, Some((_, LeaseOp::Claim { .. }))) => {
            Err(StoreError::LeaseHeld(step.thread_id.clone()))
        }
        (false, Some((holder, _))) => Err(StoreError::LeaseLost {
            thread_id: step.thread_id.clone(),
            turn_id: holder.clone(),
        }),
    }
}

/// A message of a step with the seq it was given.
type Seqd<'a> = (
    &'a Step,
    i64,
    &'a (&'static str, String, Option<ThreadPointer>),
);

/// `messages` inserted: one statement (chunked under the parameter limits).
async fn insert_messages(
    tx: &mut Transaction<'static, Any>,
    messages: &[Seqd<'_>],
    now: i64,
) -> Result<(), StoreError> {
    for chunk in messages.chunks(rows_per_statement(6)) {
        let sql = format!(
            "INSERT INTO messages (thread_id, seq, turn_id, role, body, created_at) VALUES {}",
            placeholders(chunk.len(), 6)
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (step, seq, (role, body, _)) in chunk {
            q = q
                .bind(step.thread_id.as_str())
                .bind(*seq)
                .bind(step.turn_id.as_str())
                .bind(*role)
                .bind(body.as_str())
                .bind(now);
        }
        q.execute(&mut **tx).await?;
    }
    Ok(())
}

/// Runs `statement` (from [`renew_sql`] or [`release_sql`]) over the
/// `(thread_id, turn_id)` pairs of the steps `chunk` names (after `lead`,
/// its `$1`, when given) and adds the threads it returns to `held`.
async fn lease_pairs(
    tx: &mut Transaction<'static, Any>,
    statement: String,
    lead: Option<i64>,
    steps: &[Step],
    chunk: &[usize],
    held: &mut std::collections::HashSet<String>,
) -> Result<(), StoreError> {
    let mut q = sqlx::query(sqlx::AssertSqlSafe(statement));
    if let Some(v) = lead {
        q = q.bind(v);
    }
    for &i in chunk {
        q = q
            .bind(steps[i].thread_id.as_str())
            .bind(lease_holder(&steps[i]));
    }
    for row in q.fetch_all(&mut **tx).await? {
        held.insert(row.try_get::<String, _>("thread_id")?);
    }
    Ok(())
}

/// A renewal's new expiry: `ttl` from `now` (unix ms).
fn until(now: i64, ttl: std::time::Duration) -> i64 {
    now.saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX))
}

/// The turn id a step's lease is held under.
fn lease_holder(step: &Step) -> &str {
    step.lease
        .as_ref()
        .map_or("", |(holder, ..)| holder.as_str())
}

impl Step {
    /// How many messages the step appends.
    fn count(&self) -> Result<i64, StoreError> {
        i64::try_from(self.messages.len()).map_err(|_| StoreError::Corrupt {
            table: "messages",
            detail: "too many messages in one step".into(),
        })
    }

    /// The position (1-based) in this step of the last message of `mark`,
    /// 0 for none: the thread's pointer moves to its seq.
    fn marked(&self, mark: ThreadPointer) -> i64 {
        self.messages
            .iter()
            .rposition(|(_, _, m)| *m == Some(mark))
            .map_or(0, |i| i as i64 + 1)
    }
}

async fn begin(pool: &AnyPool, backend: Backend) -> Result<Transaction<'static, Any>, StoreError> {
    Ok(match backend {
        Backend::Sqlite => pool.begin_with("BEGIN IMMEDIATE").await?,
        Backend::Postgres => pool.begin().await?,
    })
}

/// Every machine of `steps` upserted, and their new trace rows: one
/// statement each (chunked). Rows are upserted, not deleted and inserted:
/// a rewritten tail (a full snapshot, a rewound machine, a step retried)
/// overwrites rows from its `from` on, and the head's `trace_len` hides
/// any row past the end.
async fn upsert_machines(
    tx: &mut Transaction<'static, Any>,
    steps: &[&Step],
    now: i64,
) -> Result<(), StoreError> {
    let heads: Vec<(&Step, &Head)> = steps
        .iter()
        .flat_map(|s| s.machines.iter().map(move |m| (*s, m)))
        .collect();
    for chunk in heads.chunks(rows_per_statement(5)) {
        let sql = format!(
            "INSERT INTO machines (thread_id, turn_id, name, snapshot, updated_at) VALUES {} \
             ON CONFLICT (thread_id, turn_id, name) \
             DO UPDATE SET snapshot = excluded.snapshot, updated_at = excluded.updated_at",
            placeholders(chunk.len(), 5)
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (step, (name, snapshot, _, _)) in chunk {
            q = q
                .bind(step.thread_id.as_str())
                .bind(step.turn_id.as_str())
                .bind(name.as_str())
                .bind(snapshot.as_str())
                .bind(now);
        }
        q.execute(&mut **tx).await?;
    }
    let rows: Vec<(&Step, &str, i64, &str)> = heads
        .iter()
        .flat_map(|(step, (name, _, from, ids))| {
            (*from..)
                .zip(ids)
                .map(move |(n, id)| (*step, name.as_str(), n, id.as_str()))
        })
        .collect();
    for chunk in rows.chunks(ROWS_PER_INSERT) {
        let sql = format!(
            "INSERT INTO machine_rows (thread_id, turn_id, name, n, row_id) VALUES {} \
             ON CONFLICT (thread_id, turn_id, name, n) DO UPDATE SET row_id = excluded.row_id",
            placeholders(chunk.len(), 5)
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (step, name, n, row_id) in chunk {
            q = q
                .bind(step.thread_id.as_str())
                .bind(step.turn_id.as_str())
                .bind(*name)
                .bind(*n)
                .bind(*row_id);
        }
        q.execute(&mut **tx).await?;
    }
    Ok(())
}

async fn insert_approval(
    tx: &mut Transaction<'static, Any>,
    step: &Step,
    a: &NewApproval,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO approvals (interrupt_id, thread_id, turn_id, state, machine, action, \
         expires_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)",
    )
    .bind(a.interrupt_id.as_str())
    .bind(step.thread_id.as_str())
    .bind(step.turn_id.as_str())
    .bind(a.state.as_str())
    .bind(serde_json::to_string(&a.machine)?)
    .bind(serde_json::to_string(&a.action)?)
    .bind(a.expires_at)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// One transaction for `steps`, each in a savepoint when there are
/// several, so that a failing step is undone alone.
async fn commit_each(
    pool: &AnyPool,
    backend: Backend,
    steps: &[Step],
) -> Result<Vec<Result<Written, StoreError>>, StoreError> {
    let mut tx = begin(pool, backend).await?;
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

/// One step's statements: its lease, its seqs (and the thread's
/// pointers), its messages, its machines and their new trace rows, its
/// interrupt.
async fn write(tx: &mut Transaction<'static, Any>, step: &Step) -> Result<Written, StoreError> {
    let thread_id = step.thread_id.as_str();
    let now = now_ms();
    // The turn's lease rides on its own commits: a turn that commits is
    // making progress, and its lease never waits behind other commits to be
    // renewed. First, so that a turn that no longer holds the lease (another
    // took the thread) writes nothing: its step is undone. A claim step is
    // only its claim.
    let lease = write_lease(tx, step, now).await?;
    if matches!(step.lease, Some((_, LeaseOp::Claim { .. }))) {
        return Ok(lease);
    }
    let count = step.count()?;
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
    .bind(step.marked(ThreadPointer::Population))
    .bind(step.marked(ThreadPointer::Delivery))
    .fetch_optional(&mut **tx)
    .await?;
    let Some(row) = row else {
        return Err(StoreError::UnknownThread(thread_id.to_owned()));
    };
    let last: i64 = row.try_get("last_seq")?;
    let first = last - count + 1;

    let messages: Vec<Seqd<'_>> = (first..)
        .zip(&step.messages)
        .map(|(seq, m)| (step, seq, m))
        .collect();
    insert_messages(tx, &messages, now).await?;
    upsert_machines(tx, &[step], now).await?;
    if let Some(a) = &step.approval {
        insert_approval(tx, step, a, now).await?;
    }
    Ok(((first..=last).collect(), step.lease.is_some()))
}

/// A step's lease statement: the claim taken (the step's whole answer),
/// or the lease renewed or released; `LeaseHeld` / `LeaseLost` when the
/// turn does not hold it, `UnknownThread` for a claim on no thread.
async fn write_lease(
    conn: &mut sqlx::AnyConnection,
    step: &Step,
    now: i64,
) -> Result<Written, StoreError> {
    let thread_id = step.thread_id.as_str();
    let Some((holder, op)) = &step.lease else {
        return Ok((Vec::new(), false));
    };
    let q = match *op {
        LeaseOp::Release => sqlx::query(sqlx::AssertSqlSafe(release_sql(1)))
            .bind(thread_id)
            .bind(holder.as_str()),
        LeaseOp::Renew(ttl) => sqlx::query(sqlx::AssertSqlSafe(renew_sql(1)))
            .bind(until(now, ttl))
            .bind(thread_id)
            .bind(holder.as_str()),
        LeaseOp::Claim {
            claimed_at,
            expires_at,
        } => sqlx::query(sqlx::AssertSqlSafe(claim_sql(1)))
            .bind(thread_id)
            .bind(holder.as_str())
            .bind(claimed_at)
            .bind(expires_at),
    };
    let held = q.execute(&mut *conn).await.map_err(|e| match &e {
        sqlx::Error::Database(d) if d.is_foreign_key_violation() => {
            StoreError::UnknownThread(thread_id.to_owned())
        }
        _ => StoreError::Database(e),
    })?;
    lease_outcome(step, held.rows_affected() == 1)
}
