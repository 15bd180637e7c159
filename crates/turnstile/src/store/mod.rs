//! Persistence for threads, their messages, and machine snapshots.
//!
//! One code path serves SQLite (the default: a file, created if missing) and
//! PostgreSQL, through the runtime-selected [`sqlx::Any`] driver and
//! portable SQL (`$n` placeholders, `TEXT`/`BIGINT` columns, no
//! `AUTOINCREMENT`/`SERIAL`, `INSERT … ON CONFLICT … DO UPDATE` upserts).
//! Queries are runtime-checked; building never needs a database. See
//! `docs/adr/0005-store-any-driver.md`.
//!
//! # Connection strings
//!
//! | string | backend |
//! | --- | --- |
//! | `postgres://…`, `postgresql://…` | PostgreSQL |
//! | `sqlite://path/to.db`, `sqlite:path/to.db` (any `?mode=`; without one, `mode=rwc`: created if missing) | SQLite file |
//! | `sqlite::memory:` | SQLite in memory (one connection; gone when the `Store` is dropped) |
//! | `sqlite://path/to.db?synchronous=full` | SQLite file, each commit fsync'd (default `normal`, see below) |
//! | anything else without `://`, e.g. `turnstile.db` | SQLite file at that path, created if missing |
//!
//! The migrations in the crate's top-level `migrations/` directory are
//! compiled into the binary and applied on [`Store::connect`].
//!
//! # Data model
//!
//! A [`Thread`] holds [`Message`]s numbered `seq = 1, 2, 3, …` without gaps,
//! and machine snapshots (JSON) keyed by `(thread, turn, machine name)`.
//! Everything a turn writes goes through [`Store::step`], which is atomic.
//! A thread has at most one live turn [`Lease`] (`claim_turn_lease`,
//! `renew_turn_lease`, `release_turn_lease`): one running turn per thread
//! across processes.
//!
//! # Concurrency
//!
//! Sequence numbers are allocated inside the step's transaction by
//! `UPDATE threads SET last_seq = last_seq + n … RETURNING last_seq`. On PostgreSQL the
//! update row-locks the thread until commit, so steps on one thread from any
//! number of processes serialise and get unique, gapless seqs (a rolled-back
//! step rolls its increment back too). On SQLite the step's transaction is
//! `BEGIN IMMEDIATE` (one writer at a time, waited for with a busy timeout),
//! and file databases are switched to WAL so readers never block the writer.
//!
//! Message bodies and snapshots are never logged.

mod approval;
mod connections;
mod error;
mod lease;
mod model;
mod owners;
mod process;
mod sql;
mod task;
mod unfinished;
mod writer;

use std::borrow::Cow;
use std::str::FromStr;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions, AnyRow};
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode};
use sqlx::{AnyPool, ConnectOptions, Connection, Executor, Row, SqlSafeStr};
use tracing::Instrument;

pub use connections::{ConnectionRow, SealError, SealingKey, KEY_ENV as CONNECTIONS_KEY_ENV};
pub use error::StoreError;
pub use lease::Lease;
pub use model::{
    Backend, Message, NewApproval, NewMessage, Pointed, Role, StoredApproval, Thread,
    ThreadPointer, UnknownRole,
};
pub use owners::{LicenceAudit, Owner, OwnerKind, Ownership};
pub use process::ProcessRow;
use sql::now_ms;
pub use task::{NewTask, StoredTask};
pub use unfinished::TurnMachines;

/// The migrations under `migrations/`, embedded at compile time:
/// `(version, description, sql)`. A new file there must be added here too
/// (a unit test checks that the two agree).
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "store",
        include_str!("../../../../migrations/0001_store.sql"),
    ),
    (
        2,
        "turn_leases",
        include_str!("../../../../migrations/0002_turn_leases.sql"),
    ),
    (
        3,
        "machine_rows",
        include_str!("../../../../migrations/0003_machine_rows.sql"),
    ),
    (
        4,
        "approvals",
        include_str!("../../../../migrations/0004_approvals.sql"),
    ),
    (
        5,
        "thread_marks",
        include_str!("../../../../migrations/0005_thread_marks.sql"),
    ),
    (
        6,
        "ownership",
        include_str!("../../../../migrations/0006_ownership.sql"),
    ),
    (
        7,
        "tasks",
        include_str!("../../../../migrations/0007_tasks.sql"),
    ),
    (
        8,
        "process_leases",
        include_str!("../../../../migrations/0008_process_leases.sql"),
    ),
    (
        9,
        "connections",
        include_str!("../../../../migrations/0009_connections.sql"),
    ),
];

/// A stored snapshot with its trace: the rows of `machine_rows` when it has
/// any, else the trace stored inline (snapshots from before migration 3);
/// only the first `trace_len` rows where the head says how many there are
/// (rows past it are a rewound machine's, left by an upsert).
pub(crate) fn with_trace(
    mut snapshot: serde_json::Value,
    rows: Option<Vec<String>>,
) -> serde_json::Value {
    let Some(obj) = snapshot.as_object_mut() else {
        return snapshot;
    };
    let len = obj.remove("trace_len").and_then(|v| v.as_u64());
    if let Some(mut rows) = rows {
        if obj.contains_key("trace") {
            if let Some(len) = len.and_then(|n| usize::try_from(n).ok()) {
                rows.truncate(len);
            }
            obj.insert("trace".into(), rows.into());
        }
    }
    snapshot
}

/// How long a SQLite connection waits for another writer before failing
/// with `SQLITE_BUSY` (sqlx's default is 5 s).
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(30);
/// The same, run on every pooled SQLite connection.
const SQLITE_BUSY_TIMEOUT_PRAGMA: &str = "PRAGMA busy_timeout = 30000";
/// In WAL mode, `NORMAL` syncs at checkpoints instead of at every commit: a
/// committed step survives a crash or kill of the process (the contract of
/// ADR 0010); only an OS crash or power loss may lose the last commits.
/// Every frame is a commit, so this is what keeps a turn's frames fast.
/// `?synchronous=full` on a SQLite URL asks for an fsync at every commit
/// (survives power loss too), `extra` for more.
const SQLITE_SYNCHRONOUS_DEFAULT: Synchronous = Synchronous::Normal;

/// SQLite's `PRAGMA synchronous`, from the URL's `synchronous=` parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Synchronous {
    Normal,
    Full,
    Extra,
}

impl Synchronous {
    fn parse(v: &str) -> Option<Synchronous> {
        match v.to_ascii_lowercase().as_str() {
            "normal" | "1" => Some(Synchronous::Normal),
            "full" | "2" => Some(Synchronous::Full),
            "extra" | "3" => Some(Synchronous::Extra),
            _ => None,
        }
    }

    fn pragma(self) -> &'static str {
        match self {
            Synchronous::Normal => "PRAGMA synchronous = NORMAL",
            Synchronous::Full => "PRAGMA synchronous = FULL",
            Synchronous::Extra => "PRAGMA synchronous = EXTRA",
        }
    }
}

/// A step as the callers give it: thread, turn, messages, machines and an
/// interrupt to insert.
type StepParts<'a> = (
    &'a str,
    &'a str,
    &'a [NewMessage],
    &'a [(&'a str, serde_json::Value)],
    Option<&'a NewApproval>,
);

/// A handle to the database. Cheap to clone: clones share one pool.
#[derive(Clone, Debug)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    /// The one task per database that commits steps, grouped (ADR 0021).
    writer: writer::Writer,
    /// Write statements and transactions committed through this handle
    /// and its clones (benchmarks report commits per turn and per cycle),
    /// payload bytes the writer committed, and its fallbacks.
    counters: std::sync::Arc<writer::Counters>,
}

/// A connection string, classified.
struct Target {
    backend: Backend,
    options: AnyConnectOptions,
    /// SQLite `:memory:` / `mode=memory`.
    in_memory: bool,
    synchronous: Synchronous,
}

impl Target {
    fn resolve(url: &str) -> Result<Target, StoreError> {
        let lower = url.trim_start().to_ascii_lowercase();
        if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
            return Ok(Target {
                backend: Backend::Postgres,
                options: AnyConnectOptions::from_str(url)?,
                in_memory: false,
                synchronous: SQLITE_SYNCHRONOUS_DEFAULT,
            });
        }
        if lower.starts_with("sqlite:") {
            let mut options = AnyConnectOptions::from_str(url)?;
            let database = url
                .trim_start_matches("sqlite://")
                .trim_start_matches("sqlite:")
                .split('?')
                .next()
                .unwrap_or_default();
            let mode = options
                .database_url
                .query_pairs()
                .find(|(k, _)| k == "mode")
                .map(|(_, v)| v.into_owned());
            let synchronous = take_synchronous(&mut options)?;
            let in_memory = database == ":memory:" || mode.as_deref() == Some("memory");
            if mode.is_none() && !in_memory {
                options
                    .database_url
                    .query_pairs_mut()
                    .append_pair("mode", "rwc");
            }
            return Ok(Target {
                backend: Backend::Sqlite,
                options,
                in_memory,
                synchronous,
            });
        }
        if let Some((scheme, _)) = url.split_once("://") {
            return Err(StoreError::UnsupportedUrl {
                scheme: scheme.to_owned(),
            });
        }
        // A bare path: let the SQLite driver build (and percent-encode) the URL.
        let sqlite = SqliteConnectOptions::new()
            .filename(url)
            .create_if_missing(true);
        Ok(Target {
            backend: Backend::Sqlite,
            options: AnyConnectOptions::from_url(&sqlite.to_url_lossy())?,
            in_memory: false,
            synchronous: SQLITE_SYNCHRONOUS_DEFAULT,
        })
    }
}

/// Takes `synchronous=` off a SQLite URL (the driver does not know it);
/// the level it names, or the default.
fn take_synchronous(options: &mut AnyConnectOptions) -> Result<Synchronous, StoreError> {
    let url = &mut options.database_url;
    let mut level = SQLITE_SYNCHRONOUS_DEFAULT;
    let mut rest = Vec::new();
    for (k, v) in url.query_pairs() {
        match k.as_ref() {
            "synchronous" => {
                level = Synchronous::parse(&v).ok_or_else(|| StoreError::BadOption {
                    option: "synchronous".into(),
                    reason: format!("`{v}` is not normal, full or extra"),
                })?;
            }
            _ => rest.push((k.into_owned(), v.into_owned())),
        }
    }
    if rest.is_empty() {
        url.set_query(None);
    } else {
        url.query_pairs_mut().clear().extend_pairs(rest);
    }
    Ok(level)
}

fn migrator() -> Migrator {
    Migrator::with_migrations(
        MIGRATIONS
            .iter()
            .map(|&(version, description, sql)| {
                Migration::new(
                    version,
                    Cow::Borrowed(description),
                    MigrationType::Simple,
                    sql.into_sql_str(),
                    false,
                )
            })
            .collect(),
    )
}

/// Now, in unix milliseconds, as the store writes it (lease expiries).
pub fn now_unix_ms() -> i64 {
    now_ms()
}

impl Store {
    /// Opens (and for SQLite files, creates) the database, applies the
    /// embedded migrations and returns a pooled handle. See the module docs
    /// for accepted strings.
    ///
    /// Installs sqlx's default `Any` drivers (idempotent; panics only if
    /// something else already called `sqlx::any::install_drivers`).
    pub async fn connect(url: &str) -> Result<Store, StoreError> {
        sqlx::any::install_default_drivers();
        let target = Target::resolve(url)?;
        let backend = target.backend;
        // The URL may hold a password: log the backend only.
        let span = tracing::info_span!("store.connect", backend = ?backend);
        async move {
            let mut pool = AnyPoolOptions::new();
            if backend == Backend::Sqlite {
                if target.in_memory {
                    // Each new connection to `:memory:` would be a new, empty
                    // database: keep exactly one, forever.
                    pool = pool
                        .max_connections(1)
                        .idle_timeout(None)
                        .max_lifetime(None);
                } else {
                    // WAL is a property of the file: set it once, here, on a
                    // native connection (changing it needs an exclusive lock
                    // that the busy timeout cannot wait for).
                    let conn = SqliteConnectOptions::from_url(&target.options.database_url)?
                        .journal_mode(SqliteJournalMode::Wal)
                        .busy_timeout(SQLITE_BUSY_TIMEOUT)
                        .connect()
                        .await?;
                    conn.close().await?;
                }
                let synchronous = target.synchronous.pragma();
                pool = pool.after_connect(move |conn, _meta| {
                    Box::pin(async move {
                        conn.execute(SQLITE_BUSY_TIMEOUT_PRAGMA).await?;
                        conn.execute(synchronous).await?;
                        Ok(())
                    })
                });
            }
            let pool = pool.connect_with(target.options).await?;
            migrator().run(&pool).await?;
            tracing::info!("store ready");
            let counters: std::sync::Arc<writer::Counters> = Default::default();
            let writer = writer::Writer::spawn(pool.clone(), backend, counters.clone());
            Ok(Store {
                pool,
                backend,
                writer,
                counters,
            })
        }
        .instrument(span)
        .await
    }

    /// How many writes this store (and its clones) committed: each
    /// [`step`](Self::step), approval swap, lease claim, renewal and
    /// release, and thread creation is one commit.
    pub fn commits(&self) -> u64 {
        self.counters
            .commits
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Group commits the writer had to write again one step per savepoint
    /// because a statement of its one-statement-per-table path failed.
    pub fn batch_fallbacks(&self) -> u64 {
        self.counters
            .fallbacks
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Payload bytes the step writer committed (message bodies, machine
    /// heads and trace rows; not the SQL around them).
    pub fn committed_bytes(&self) -> u64 {
        self.counters
            .bytes
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Counts one committed write.
    pub(crate) fn committed(&self) {
        self.counters
            .commits
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Which database this store talks to.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Closes the pool, waiting for connections in use to come back.
    /// Clones of this store stop working too.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Creates a thread with a fresh UUID v4 id.
    #[tracing::instrument(name = "store.create_thread", level = "debug", skip_all)]
    pub async fn create_thread(&self, owner: Option<&str>) -> Result<Thread, StoreError> {
        let thread = Thread {
            id: uuid::Uuid::new_v4().to_string(),
            owner: owner.map(str::to_owned),
            created_at: now_ms(),
        };
        sqlx::query(
            "INSERT INTO threads (id, owner, created_at, last_seq, population_seq, delivery_seq) \
             VALUES ($1, $2, $3, 0, 0, 0)",
        )
        .bind(thread.id.as_str())
        .bind(thread.owner.as_deref())
        .bind(thread.created_at)
        .execute(&self.pool)
        .await?;
        self.committed();
        tracing::debug!(thread_id = %thread.id, "thread created");
        Ok(thread)
    }

    /// The thread with this id, or `None`.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn thread(&self, id: &str) -> Result<Option<Thread>, StoreError> {
        let row = sqlx::query("SELECT id, owner, created_at FROM threads WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| {
            Ok(Thread {
                id: row.try_get("id")?,
                owner: row.try_get("owner")?,
                created_at: row.try_get("created_at")?,
            })
        })
        .transpose()
    }

    /// One step of a turn, atomically: append these messages (seq continues
    /// the thread's sequence, 1-based) and upsert these machine snapshots
    /// (keyed by thread, turn, machine name). Either all of it is written or
    /// none.
    ///
    /// Returns the seqs assigned to `messages`, in order (consecutive).
    /// Fails with [`StoreError::UnknownThread`] if the thread does not exist,
    /// and with [`StoreError::Database`] if a row violates a constraint
    /// (e.g. an empty machine name); nothing is written in either case.
    ///
    /// Its span carries counts only: the thread and turn ids come from the
    /// caller's span (the turn's), so a log line names each field once.
    pub async fn step(
        &self,
        thread_id: &str,
        turn_id: &str,
        messages: &[NewMessage],
        machines: &[(&str, serde_json::Value)],
    ) -> Result<Vec<i64>, StoreError> {
        self.step_with(thread_id, turn_id, messages, machines, None)
            .await
    }

    /// [`step`](Self::step), with a pending interrupt inserted in the same
    /// transaction: the interrupt is stored with every machine and record
    /// of the step that shows it, or not at all.
    pub async fn step_with(
        &self,
        thread_id: &str,
        turn_id: &str,
        messages: &[NewMessage],
        machines: &[(&str, serde_json::Value)],
        approval: Option<&NewApproval>,
    ) -> Result<Vec<i64>, StoreError> {
        let step = (thread_id, turn_id, messages, machines, approval);
        Ok(self.write_step(step, None).await?.0)
    }

    /// [`step_with`](Self::step_with), renewing the lease that `lease`'s
    /// turn id holds (the claim's) by its TTL in the same transaction: the
    /// seqs, and that the lease was renewed. Fails with
    /// [`StoreError::LeaseLost`], writing nothing, when the turn no longer
    /// holds the thread's lease.
    pub async fn step_leased(
        &self,
        thread_id: &str,
        turn_id: &str,
        messages: &[NewMessage],
        machines: &[(&str, serde_json::Value)],
        approval: Option<&NewApproval>,
        lease: (&str, Duration),
    ) -> Result<(Vec<i64>, bool), StoreError> {
        let step = (thread_id, turn_id, messages, machines, approval);
        self.write_step(step, Some((lease.0, writer::LeaseOp::Renew(lease.1))))
            .await
    }

    /// [`step_leased`](Self::step_leased) for a turn's last step: the lease
    /// is released (deleted) in the same transaction instead of renewed,
    /// so the thread is free the moment the terminal frame is durable, at
    /// no commit of its own (ADR 0031). Fails with
    /// [`StoreError::LeaseLost`], writing nothing, when the turn no longer
    /// holds it.
    pub async fn step_releasing(
        &self,
        thread_id: &str,
        turn_id: &str,
        messages: &[NewMessage],
        machines: &[(&str, serde_json::Value)],
        approval: Option<&NewApproval>,
        holder: &str,
    ) -> Result<Vec<i64>, StoreError> {
        let step = (thread_id, turn_id, messages, machines, approval);
        let lease = Some((holder, writer::LeaseOp::Release));
        Ok(self.write_step(step, lease).await?.0)
    }

    /// Encodes a step here, on the caller's task, and hands it to the
    /// writer's next group commit. Its span carries counts only: the thread
    /// and turn ids come from the caller's span.
    #[tracing::instrument(
        name = "store.step",
        level = "debug",
        skip_all,
        fields(messages = step.2.len(), machines = step.3.len())
    )]
    async fn write_step(
        &self,
        step: StepParts<'_>,
        lease: Option<(&str, writer::LeaseOp)>,
    ) -> Result<(Vec<i64>, bool), StoreError> {
        let (thread_id, turn_id, messages, machines, approval) = step;
        let step = writer::Step::encode(thread_id, turn_id, messages, machines, approval, lease)?;
        let (seqs, renewed) = self.writer.write(step).await?;
        tracing::debug!(
            first_seq = seqs.first(),
            last_seq = seqs.last(),
            "step committed"
        );
        Ok((seqs, renewed))
    }

    /// The thread's messages in seq order (empty for an unknown thread).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn messages(&self, thread_id: &str) -> Result<Vec<Message>, StoreError> {
        let rows = sqlx::query(
            "SELECT seq, turn_id, role, body, created_at FROM messages \
             WHERE thread_id = $1 ORDER BY seq",
        )
        .bind(thread_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(message_from_row).collect()
    }

    /// Up to `limit` of the thread's messages before seq `before` (all, if
    /// `None`), newest first, without tool records (calls and raw results):
    /// what was said and shown. A turn reads its history a page at a time
    /// and stops when its budget is full.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn recent_said(
        &self,
        thread_id: &str,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<Message>, StoreError> {
        let rows = sqlx::query(
            "SELECT seq, turn_id, role, body, created_at FROM messages \
             WHERE thread_id = $1 AND seq < $2 AND role <> 'tool' ORDER BY seq DESC LIMIT $3",
        )
        .bind(thread_id)
        .bind(before.unwrap_or(i64::MAX))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(message_from_row).collect()
    }

    /// The messages the thread's pointers name (migration 5), in one
    /// statement.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn marked(&self, thread_id: &str) -> Result<Pointed, StoreError> {
        // Two keyed lookups (an `OR` in the join could read the thread).
        let rows = sqlx::query(
            "SELECT t.population_seq, t.delivery_seq, m.seq, m.turn_id, m.role, m.body, \
             m.created_at FROM threads t LEFT JOIN messages m ON m.thread_id = t.id \
             AND m.seq = t.population_seq WHERE t.id = $1 \
             UNION ALL \
             SELECT t.population_seq, t.delivery_seq, m.seq, m.turn_id, m.role, m.body, \
             m.created_at FROM threads t JOIN messages m ON m.thread_id = t.id \
             AND m.seq = t.delivery_seq WHERE t.id = $1",
        )
        .bind(thread_id)
        .fetch_all(&self.pool)
        .await?;
        let mut out = Pointed::default();
        for row in &rows {
            let population: Option<i64> = row.try_get("population_seq")?;
            let delivery: Option<i64> = row.try_get("delivery_seq")?;
            out.population_known = population.is_some();
            let seq: Option<i64> = row.try_get("seq")?;
            let Some(seq) = seq else { continue };
            let message = message_from_row(row)?;
            if Some(seq) == delivery {
                out.delivery = Some(message.clone());
            }
            if Some(seq) == population {
                out.population = Some(message);
            }
        }
        Ok(out)
    }

    /// The snapshot of machine `name` in this thread's turn, or `None`.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn machine(
        &self,
        thread_id: &str,
        turn_id: &str,
        name: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        let all = self.read_machines(thread_id, Some(turn_id), false).await?;
        Ok(all
            .into_iter()
            .find(|(_, n, _)| n == name)
            .map(|(_, _, s)| s))
    }

    /// All machine snapshots of the thread as `(turn, name, snapshot)`,
    /// sorted by turn id then name (bytewise, the same on every backend).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn machines(
        &self,
        thread_id: &str,
    ) -> Result<Vec<(String, String, serde_json::Value)>, StoreError> {
        let mut out = self.read_machines(thread_id, None, false).await?;
        out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        Ok(out)
    }

    /// The thread's machine snapshots (of one turn, if named; only `turn`
    /// and `frame`, if asked) with their traces, as `(turn, name,
    /// snapshot)`. One statement, so a snapshot and its rows are read from
    /// the same state of the database, even while a turn writes.
    pub(crate) async fn read_machines(
        &self,
        thread_id: &str,
        turn_id: Option<&str>,
        turn_and_frame_only: bool,
    ) -> Result<Vec<(String, String, serde_json::Value)>, StoreError> {
        // Each filter is written only when it applies: a `($2 = '' OR …)`
        // would keep the database from using the key for one turn, and a
        // turn's read would grow with its thread.
        let mut filter = String::new();
        if turn_id.is_some() {
            filter += " AND m.turn_id = $2";
        }
        if turn_and_frame_only {
            filter += " AND m.name IN ('turn', 'frame')";
        }
        let sql = format!(
            "SELECT m.turn_id, m.name, m.snapshot, r.row_id FROM machines m \
             LEFT JOIN machine_rows r \
               ON r.thread_id = m.thread_id AND r.turn_id = m.turn_id AND r.name = m.name \
             WHERE m.thread_id = $1{filter} ORDER BY m.turn_id, m.name, r.n"
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(thread_id);
        if let Some(turn) = turn_id {
            q = q.bind(turn);
        }
        let rows = q.fetch_all(&self.pool).await?;
        let mut out: Vec<(String, String, String, Option<Vec<String>>)> = Vec::new();
        for row in &rows {
            let turn: String = row.try_get("turn_id")?;
            let name: String = row.try_get("name")?;
            let row_id: Option<String> = row.try_get("row_id")?;
            let same = out
                .last()
                .is_some_and(|(t, n, _, _)| *t == turn && *n == name);
            if !same {
                out.push((turn, name, row.try_get("snapshot")?, None));
            }
            if let (Some(id), Some(last)) = (row_id, out.last_mut()) {
                last.3.get_or_insert_with(Vec::new).push(id);
            }
        }
        out.into_iter()
            .map(|(turn, name, text, trace)| {
                let snap = with_trace(json_column("machines", &text)?, trace);
                Ok((turn, name, snap))
            })
            .collect()
    }
}

fn message_from_row(row: &AnyRow) -> Result<Message, StoreError> {
    let seq: i64 = row.try_get("seq")?;
    let role: String = row.try_get("role")?;
    let body: String = row.try_get("body")?;
    Ok(Message {
        seq,
        turn_id: row.try_get("turn_id")?,
        role: role.parse().map_err(|e: UnknownRole| StoreError::Corrupt {
            table: "messages",
            detail: format!("seq {seq}: {e}"),
        })?,
        body: json_column("messages", &body)?,
        created_at: row.try_get("created_at")?,
    })
}

/// Parses a JSON column; the error names the table, never the content.
fn json_column(table: &'static str, text: &str) -> Result<serde_json::Value, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt {
        table,
        detail: format!("invalid JSON at line {} column {}", e.line(), e.column()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file in `migrations/` is embedded, with the version and
    /// description its name gives, and nothing else is.
    #[test]
    fn embedded_migrations_match_directory() -> std::io::Result<()> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations");
        let mut on_disk = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(stem) = name.strip_suffix(".sql") else {
                continue;
            };
            let (version, description) = stem.split_once('_').expect("VERSION_description.sql");
            let version: i64 = version.parse().expect("numeric version");
            on_disk.push((
                version,
                description.to_owned(),
                std::fs::read_to_string(entry.path())?,
            ));
        }
        on_disk.sort();
        let embedded: Vec<_> = MIGRATIONS
            .iter()
            .map(|&(v, d, sql)| (v, d.to_owned(), sql.to_owned()))
            .collect();
        assert_eq!(embedded, on_disk);
        Ok(())
    }

    #[test]
    fn urls_resolve_to_backends() {
        let cases = [
            ("postgres://u@h/db", Some((Backend::Postgres, false))),
            ("postgresql://u@h/db", Some((Backend::Postgres, false))),
            ("sqlite::memory:", Some((Backend::Sqlite, true))),
            ("sqlite://a.db?mode=rwc", Some((Backend::Sqlite, false))),
            ("sqlite://a.db", Some((Backend::Sqlite, false))),
            ("sqlite:a.db?mode=memory", Some((Backend::Sqlite, true))),
            ("turnstile.db", Some((Backend::Sqlite, false))),
            (
                "/var/lib/turnstile/state.db",
                Some((Backend::Sqlite, false)),
            ),
            ("mysql://u@h/db", None),
        ];
        for (url, want) in cases {
            let got = Target::resolve(url).ok().map(|t| (t.backend, t.in_memory));
            assert_eq!(got, want, "{url}");
        }
        // No mode given: created if missing.
        let t = Target::resolve("sqlite://a.db").expect("resolves");
        assert_eq!(t.options.database_url.as_str(), "sqlite://a.db?mode=rwc");
        let t = Target::resolve("a b.db").expect("resolves");
        assert!(t.options.database_url.as_str().contains("mode=rwc"));
    }

    /// A full snapshot of thousands of rows is written in chunks (one
    /// statement would pass the databases' parameter limits) and read back
    /// whole.
    #[tokio::test]
    async fn a_long_trace_is_written_in_chunks() {
        let store = Store::connect("sqlite::memory:").await.unwrap();
        let thread = store.create_thread(None).await.unwrap().id;
        let rows: Vec<String> = (0..7_500).map(|i| format!("r{i}")).collect();
        let snap = serde_json::json!({"table": "frame", "table_hash": "h", "state": "S",
            "trace": rows, "trace_from": 0});
        store
            .step(&thread, "t", &[], &[("frame", snap)])
            .await
            .unwrap();
        let back = store.machine(&thread, "t", "frame").await.unwrap().unwrap();
        assert_eq!(back["trace"].as_array().unwrap().len(), 7_500);
        assert_eq!(back["trace"][7_499], "r7499");
    }

    /// `?synchronous=` sets SQLite's fsync policy on every pooled
    /// connection, is taken off the URL the driver sees, and an unknown
    /// level is refused by name.
    #[tokio::test]
    async fn synchronous_is_read_off_the_url() {
        let dir = tempfile::tempdir().unwrap();
        let level = |url: String| async move {
            let store = Store::connect(&url).await.unwrap();
            let row = sqlx::query("PRAGMA synchronous")
                .fetch_one(&store.pool)
                .await
                .unwrap();
            let v: i64 = row.try_get(0).unwrap();
            store.close().await;
            v
        };
        let db = dir.path().join("s.db");
        assert_eq!(level(format!("sqlite://{}", db.display())).await, 1);
        let full = format!("sqlite://{}?mode=rwc&synchronous=full", db.display());
        assert_eq!(level(full.clone()).await, 2);
        let t = Target::resolve(&full).unwrap();
        assert!(!t.options.database_url.as_str().contains("synchronous"));
        assert!(t.options.database_url.as_str().contains("mode=rwc"));
        let bad = format!("sqlite://{}?synchronous=sometimes", db.display());
        let err = Target::resolve(&bad).err().expect("refused").to_string();
        assert!(err.contains("synchronous"), "{err}");
    }

    /// A step stores only the rows a machine took since the last commit;
    /// reading it back gives the whole trace, and a full snapshot (no
    /// `trace_from`) replaces the rows.
    #[tokio::test]
    async fn a_trace_is_stored_row_by_row_and_read_back_whole() {
        let store = Store::connect("sqlite::memory:").await.unwrap();
        let thread = store.create_thread(None).await.unwrap().id;
        let part = |from: usize, rows: &[&str]| {
            serde_json::json!({"table": "frame", "table_hash": "h", "state": "Working",
                "trace": rows, "trace_from": from})
        };
        store
            .step(&thread, "t", &[], &[("frame", part(0, &["open", "plan"]))])
            .await
            .unwrap();
        store
            .step(&thread, "t", &[], &[("frame", part(2, &["call"]))])
            .await
            .unwrap();
        let snap = store.machine(&thread, "t", "frame").await.unwrap().unwrap();
        assert_eq!(snap["trace"], serde_json::json!(["open", "plan", "call"]));
        assert_eq!(snap["state"], "Working");
        assert!(snap.get("trace_from").is_none());
        let all = store.machines(&thread).await.unwrap();
        assert_eq!(
            all[0].2["trace"],
            serde_json::json!(["open", "plan", "call"])
        );
        // A full snapshot rewrites the trace.
        let full = serde_json::json!({"table": "frame", "table_hash": "h", "state": "Done",
            "trace": ["open"]});
        store
            .step(&thread, "t", &[], &[("frame", full)])
            .await
            .unwrap();
        let snap = store.machine(&thread, "t", "frame").await.unwrap().unwrap();
        assert_eq!(snap["trace"], serde_json::json!(["open"]));
    }
}
