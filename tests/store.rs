//! Store tests: one suite of checks, each run against SQLite (a fresh temp
//! file, `sqlite::*`) and against PostgreSQL (`postgres::*`, the database
//! `TURNSTILE_TEST_DATABASE_URL` names, e.g.
//! `postgres://postgres@127.0.0.1:5432/test`). The PostgreSQL checks are
//! `#[ignore = "needs PostgreSQL: …"]`: `cargo test -- --include-ignored`
//! runs them, and there a missing URL fails them (ADR 0015).
//!
//! Checks only ever touch threads they create (random UUIDs), so they are
//! independent of each other and of earlier runs on the same database; the
//! shared tables are never dropped or truncated.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};
use turnstile::store::{Backend, NewMessage, NewTask, Role, Store, StoreError};

use crate::common::needs;

/// A database the checks may open any number of pools on.
struct Db {
    url: String,
    backend: Backend,
    _dir: Option<tempfile::TempDir>,
}

impl Db {
    /// A SQLite file that does not exist yet, named by a bare path.
    fn sqlite() -> Db {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = dir.path().join("store.db").to_string_lossy().into_owned();
        Db {
            url,
            backend: Backend::Sqlite,
            _dir: Some(dir),
        }
    }

    /// The PostgreSQL database named by the environment; without one, the
    /// test fails ([`needs::postgres`]).
    fn postgres() -> Db {
        Db {
            url: needs::postgres(),
            backend: Backend::Postgres,
            _dir: None,
        }
    }

    /// A new pool: another "process" on the same database.
    async fn open(&self) -> Store {
        let store = Store::connect(&self.url).await.expect("connect");
        assert_eq!(store.backend(), self.backend);
        store
    }
}

/// Runs every listed check once per backend: `sqlite::<check>` and
/// `postgres::<check>` (ignored unless `--include-ignored`).
macro_rules! suite {
    ($($check:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    super::$check(&super::Db::sqlite()).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[ignore = "needs PostgreSQL: set TURNSTILE_TEST_DATABASE_URL, run with --include-ignored"]
                async fn $check() {
                    super::$check(&super::Db::postgres()).await;
                }
            )*
        }
    };
}

suite!(
    threads_round_trip,
    step_appends_and_upserts,
    step_on_unknown_thread_writes_nothing,
    failed_step_is_atomic,
    json_bodies_round_trip,
    data_survives_reconnect,
    concurrent_steps_in_one_pool,
    concurrent_steps_from_two_pools,
    lease_claim_renew_release,
    expired_lease_is_taken_over,
    concurrent_lease_claims_from_two_pools,
    pointers_move_with_the_step_that_marks,
    recent_said_pages_newest_first_without_tool_records,
    a_failing_step_among_concurrent_ones_fails_alone,
    a_step_of_a_turn_that_lost_its_lease_writes_nothing,
    a_batch_on_many_threads_is_one_statement_per_table,
    a_rewound_trace_reads_back_to_its_length,
    claims_on_many_threads_go_through_the_step_writer,
    a_task_settles_once_by_compare_and_swap,
);

/// A PostgreSQL check never passes without PostgreSQL: a plain run lists it
/// as ignored with its reason, and `--include-ignored` without
/// `TURNSTILE_TEST_DATABASE_URL` fails it, naming what is missing. Runs one
/// such check in a child process of this test binary. (The ignore-and-fail
/// mechanism of every outside dependency, ADR 0015; the interop one is
/// checked in `tests/mcp_interop.rs`.)
#[test]
fn a_postgres_check_without_postgres_is_ignored_or_fails() {
    let test = needs::test_name(module_path!(), "postgres::threads_round_trip");
    let test = test.as_str();
    let run = |include_ignored: bool| {
        let mut c = std::process::Command::new(std::env::current_exe().unwrap());
        c.args([test, "--exact", "--test-threads", "1"])
            .env_remove(needs::PG_ENV);
        if include_ignored {
            c.arg("--include-ignored");
        }
        let out = c.output().expect("the test binary runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let (ok, out) = run(false);
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!(
            "test {test} ... ignored, needs PostgreSQL: set TURNSTILE_TEST_DATABASE_URL, run with --include-ignored"
        )),
        "{out}"
    );
    assert!(out.contains("0 passed; 0 failed; 1 ignored"), "{out}");
    let (ok, out) = run(true);
    assert!(!ok, "a missing database must fail the check:\n{out}");
    assert!(out.contains(&format!("test {test} ... FAILED")), "{out}");
    assert!(
        out.contains("needs PostgreSQL, which is missing: TURNSTILE_TEST_DATABASE_URL is not set"),
        "{out}"
    );
}

fn msg(role: Role, body: Value) -> NewMessage {
    NewMessage::new(role, body)
}

fn random_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

// ---------------------------------------------------------------- checks

/// A message that carries a mark moves the thread's pointer to its own seq
/// in the same step; a later step without one leaves it; the last of a
/// step's marked messages wins. `marked` reads the pointed-at messages.
async fn pointers_move_with_the_step_that_marks(db: &Db) {
    use turnstile::store::ThreadPointer;
    let store = db.open().await;
    let t = store.create_thread(None).await.unwrap();
    let none = store.marked(&t.id).await.unwrap();
    assert!(none.population_known);
    assert_eq!((none.population, none.delivery), (None, None));
    let marked = |n: u32, mark: Option<ThreadPointer>| NewMessage {
        mark,
        ..msg(Role::Assistant, json!({ "n": n }))
    };
    store
        .step(
            &t.id,
            "t1",
            &[
                marked(1, Some(ThreadPointer::Population)),
                marked(2, None),
                marked(3, Some(ThreadPointer::Population)),
                marked(4, Some(ThreadPointer::Delivery)),
            ],
            &[],
        )
        .await
        .unwrap();
    store
        .step(&t.id, "t2", &[marked(5, None), marked(6, None)], &[])
        .await
        .unwrap();
    let m = store.marked(&t.id).await.unwrap();
    assert_eq!(
        m.population.map(|m| (m.seq, m.body)),
        Some((3, json!({"n": 3})))
    );
    assert_eq!(
        m.delivery.map(|m| (m.seq, m.turn_id)),
        Some((4, "t1".into()))
    );
    store
        .step(
            &t.id,
            "t3",
            &[marked(7, Some(ThreadPointer::Population))],
            &[],
        )
        .await
        .unwrap();
    let m = store.marked(&t.id).await.unwrap();
    assert_eq!(m.population.map(|m| m.seq), Some(7));
    assert_eq!(m.delivery.map(|m| m.seq), Some(4));
    let unknown = store.marked(&random_id()).await.unwrap();
    assert_eq!(unknown.population, None);
}

/// Steps sent at once share group commits (ADR 0021), each in its own
/// savepoint: a step on an unknown thread fails alone, the others are
/// written whole with gapless seqs, and a step's seqs are durable when it
/// returns (read back from a second pool).
async fn a_failing_step_among_concurrent_ones_fails_alone(db: &Db) {
    let store = db.open().await;
    let threads: Vec<String> = futures::future::join_all((0..8).map(|_| store.create_thread(None)))
        .await
        .into_iter()
        .map(|t| t.unwrap().id)
        .collect();
    let before = store.commits();
    let unknown = random_id();
    let steps = (0..64).map(|i| {
        let store = store.clone();
        let thread = match i {
            17 => unknown.clone(),
            _ => threads[i % threads.len()].clone(),
        };
        async move {
            let m = [msg(Role::User, json!({ "i": i })), msg(Role::Assistant, json!({ "i": i }))];
            let snap = json!({"table": "t", "table_hash": "h", "state": "S", "trace": ["a"], "trace_from": 0});
            (i, store.step(&thread, &format!("turn-{i}"), &m, &[("frame", snap)]).await)
        }
    });
    let results = futures::future::join_all(steps).await;
    for (i, r) in &results {
        match i {
            17 => assert!(matches!(r, Err(StoreError::UnknownThread(_))), "{r:?}"),
            _ => assert_eq!(r.as_ref().map(Vec::len).ok(), Some(2), "step {i}: {r:?}"),
        }
    }
    let commits = store.commits() - before;
    assert!(
        (1..=63).contains(&commits),
        "{commits} commits for 63 steps"
    );
    let other = db.open().await;
    for (n, t) in threads.iter().enumerate() {
        let seqs: Vec<i64> = other
            .messages(t)
            .await
            .unwrap()
            .iter()
            .map(|m| m.seq)
            .collect();
        assert_eq!(seqs, (1..=seqs.len() as i64).collect::<Vec<_>>());
        // Eight steps of two messages each; thread 1 lost step 17's.
        assert_eq!(seqs.len(), if n == 1 { 14 } else { 16 }, "thread {n}");
    }
}

/// Steps on as many threads as there are steps, sent at once, are written
/// by the writer's one-statement-per-table path (issue 35 §3): no batch
/// falls back to one savepoint per step. Among them a step whose turn lost
/// its lease, one that releases its lease, and one on an unknown thread:
/// each of those hears its own result and the others are written whole,
/// their leases renewed or released in the same commit.
async fn a_batch_on_many_threads_is_one_statement_per_table(db: &Db) {
    let store = db.open().await;
    let ttl = Duration::from_secs(30);
    let threads: Vec<String> =
        futures::future::join_all((0..48).map(|_| store.create_thread(None)))
            .await
            .into_iter()
            .map(|t| t.unwrap().id)
            .collect();
    for (i, t) in threads.iter().enumerate() {
        store
            .claim_turn_lease(t, &format!("turn-{i}"), ttl)
            .await
            .unwrap();
    }
    let leases_before: Vec<i64> =
        futures::future::join_all(threads.iter().map(|t| store.turn_lease(t)))
            .await
            .into_iter()
            .map(|l| l.unwrap().unwrap().expires_at)
            .collect();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let (commits, fallbacks) = (store.commits(), store.batch_fallbacks());
    let unknown = random_id();
    let steps = (0..49).map(|i| {
        let store = store.clone();
        let thread = threads.get(i).cloned().unwrap_or_else(|| unknown.clone());
        async move {
            let turn = format!("turn-{i}");
            let m = [msg(Role::User, json!({ "i": i })), msg(Role::Assistant, json!({ "i": i }))];
            let snap = json!({"table": "t", "table_hash": "h", "state": "S", "trace": ["a", "b"], "trace_from": 0});
            let machines = [("frame", snap)];
            let r = match i {
                // Holds no lease: another turn's id.
                7 => store.step_leased(&thread, "someone-else", &m, &machines, None, ("someone-else", ttl)).await,
                11 => store.step_releasing(&thread, &turn, &m, &machines, None, &turn).await.map(|s| (s, true)),
                48 => store.step(&thread, &turn, &m, &machines).await.map(|s| (s, false)),
                _ => store.step_leased(&thread, &turn, &m, &machines, None, (&turn, ttl)).await,
            };
            (i, r)
        }
    });
    let results = futures::future::join_all(steps).await;
    for (i, r) in &results {
        match i {
            7 => assert!(matches!(r, Err(StoreError::LeaseLost { .. })), "{r:?}"),
            48 => assert!(matches!(r, Err(StoreError::UnknownThread(_))), "{r:?}"),
            _ => assert_eq!(
                r.as_ref().ok(),
                Some(&(vec![1, 2], true)),
                "step {i}: {r:?}"
            ),
        }
    }
    assert_eq!(store.batch_fallbacks() - fallbacks, 0, "a batch fell back");
    let commits = store.commits() - commits;
    assert!(
        (1..=48).contains(&commits),
        "{commits} commits for 49 steps"
    );
    let other = db.open().await;
    for (i, t) in threads.iter().enumerate() {
        let messages = other.messages(t).await.unwrap();
        let lease = other.turn_lease(t).await.unwrap();
        let trace = other
            .machine(t, &format!("turn-{i}"), "frame")
            .await
            .unwrap();
        match i {
            7 => {
                assert!(messages.is_empty(), "thread {i}");
                assert_eq!(
                    lease.map(|l| l.expires_at),
                    Some(leases_before[i]),
                    "untouched"
                );
                assert!(trace.is_none());
            }
            11 => {
                assert_eq!(messages.len(), 2);
                assert!(lease.is_none(), "released with its last step");
            }
            _ => {
                let seqs: Vec<i64> = messages.iter().map(|m| m.seq).collect();
                assert_eq!(seqs, vec![1, 2], "thread {i}");
                assert_eq!(messages[0].body, json!({ "i": i }));
                assert!(lease.unwrap().expires_at > leases_before[i], "renewed");
                assert_eq!(trace.unwrap()["trace"], json!(["a", "b"]));
            }
        }
    }
}

/// Lease claims go through the step writer and share its group commits:
/// sent at once on 32 threads, half of them held by a live lease, each
/// hears its own answer, no batch falls back, and the claimed ones hold.
async fn claims_on_many_threads_go_through_the_step_writer(db: &Db) {
    let store = db.open().await;
    let ttl = Duration::from_secs(30);
    let threads: Vec<String> =
        futures::future::join_all((0..32).map(|_| store.create_thread(None)))
            .await
            .into_iter()
            .map(|t| t.unwrap().id)
            .collect();
    for t in threads.iter().step_by(2) {
        store.claim_turn_lease(t, "first", ttl).await.unwrap();
    }
    let fallbacks = store.batch_fallbacks();
    let claims = threads
        .iter()
        .map(|t| store.claim_turn_lease(t, "second", ttl));
    let results = futures::future::join_all(claims).await;
    for (i, r) in results.iter().enumerate() {
        match i % 2 {
            0 => assert!(matches!(r, Err(StoreError::LeaseHeld(_))), "{i}: {r:?}"),
            _ => assert_eq!(r.as_ref().map(|l| l.turn_id.as_str()).ok(), Some("second")),
        }
        let holder = db
            .open()
            .await
            .turn_lease(&threads[i])
            .await
            .unwrap()
            .unwrap();
        assert_eq!(holder.turn_id, if i % 2 == 0 { "first" } else { "second" });
    }
    assert_eq!(store.batch_fallbacks(), fallbacks, "a batch fell back");
    let unknown = store.claim_turn_lease(&random_id(), "x", ttl).await;
    assert!(
        matches!(unknown, Err(StoreError::UnknownThread(_))),
        "{unknown:?}"
    );
}

/// A machine rewound to fewer rows than it stored (a failed commit puts
/// the frame machine back) reads back as its new trace: rows are upserted,
/// not deleted, and the head's length hides the rest.
async fn a_rewound_trace_reads_back_to_its_length(db: &Db) {
    let store = db.open().await;
    let t = store.create_thread(None).await.unwrap().id;
    let part = |from: usize, rows: &[&str]| json!({"table": "frame", "table_hash": "h", "state": "S", "trace": rows, "trace_from": from});
    store
        .step(&t, "u", &[], &[("frame", part(0, &["a", "b", "c", "d"]))])
        .await
        .unwrap();
    store
        .step(&t, "u", &[], &[("frame", part(1, &["x"]))])
        .await
        .unwrap();
    let snap = store.machine(&t, "u", "frame").await.unwrap().unwrap();
    assert_eq!(snap["trace"], json!(["a", "x"]));
    assert!(snap.get("trace_len").is_none(), "{snap}");
    store
        .step(&t, "u", &[], &[("frame", part(2, &["y"]))])
        .await
        .unwrap();
    let all = db.open().await.machines(&t).await.unwrap();
    assert_eq!(all[0].2["trace"], json!(["a", "x", "y"]));
}

/// A step that renews its turn's lease is refused, writing nothing, once
/// another turn holds the thread; the holder's step renews it.
async fn a_step_of_a_turn_that_lost_its_lease_writes_nothing(db: &Db) {
    let store = db.open().await;
    let t = store.create_thread(None).await.unwrap();
    let ttl = Duration::from_secs(30);
    store.claim_turn_lease(&t.id, "holder", ttl).await.unwrap();
    let m = [msg(Role::User, json!({"x": 1}))];
    let lost = store
        .step_leased(&t.id, "late", &m, &[], None, ("late", ttl))
        .await;
    assert!(
        matches!(lost, Err(StoreError::LeaseLost { .. })),
        "{lost:?}"
    );
    assert!(store.messages(&t.id).await.unwrap().is_empty());
    let before = store.turn_lease(&t.id).await.unwrap().unwrap().expires_at;
    tokio::time::sleep(Duration::from_millis(5)).await;
    let (seqs, renewed) = store
        .step_leased(&t.id, "holder", &m, &[], None, ("holder", ttl))
        .await
        .unwrap();
    assert_eq!((seqs, renewed), (vec![1], true));
    let after = store.turn_lease(&t.id).await.unwrap().unwrap().expires_at;
    assert!(after > before, "{after} > {before}");
}

/// The history reads newest first a page at a time, and never the tool
/// records (calls and raw results).
async fn recent_said_pages_newest_first_without_tool_records(db: &Db) {
    let store = db.open().await;
    let t = store.create_thread(None).await.unwrap();
    let bodies: Vec<NewMessage> = (1..=10)
        .map(|n| msg(Role::User, json!({ "n": n })))
        .collect();
    store.step(&t.id, "t1", &bodies, &[]).await.unwrap();
    let tools: Vec<NewMessage> = (11..=12)
        .map(|n| msg(Role::Tool, json!({ "n": n })))
        .collect();
    store.step(&t.id, "t1", &tools, &[]).await.unwrap();
    let seqs = |m: Vec<turnstile::store::Message>| m.iter().map(|m| m.seq).collect::<Vec<_>>();
    let first = store.recent_said(&t.id, None, 4).await.unwrap();
    assert_eq!(seqs(first), [10, 9, 8, 7]);
    let next = store.recent_said(&t.id, Some(7), 4).await.unwrap();
    assert_eq!(seqs(next), [6, 5, 4, 3]);
    let last = store.recent_said(&t.id, Some(3), 4).await.unwrap();
    assert_eq!(seqs(last), [2, 1]);
}

async fn threads_round_trip(db: &Db) {
    let store = db.open().await;

    let owned = store.create_thread(Some("alice")).await.expect("create");
    let anonymous = store.create_thread(None).await.expect("create");
    assert_ne!(owned.id, anonymous.id);
    for t in [&owned, &anonymous] {
        let id = uuid::Uuid::parse_str(&t.id).expect("thread id is a UUID");
        assert_eq!(id.get_version_num(), 4);
        assert!(
            t.created_at > 1_600_000_000_000,
            "unix ms: {}",
            t.created_at
        );
        assert_eq!(store.thread(&t.id).await.expect("get").as_ref(), Some(t));
    }
    assert_eq!(owned.owner.as_deref(), Some("alice"));
    assert_eq!(anonymous.owner, None);

    let unknown = random_id();
    assert_eq!(store.thread(&unknown).await.expect("get"), None);
    assert!(store.messages(&unknown).await.expect("messages").is_empty());
    assert!(store.machines(&unknown).await.expect("machines").is_empty());
    assert_eq!(
        store
            .machine(&unknown, "t", "frame")
            .await
            .expect("machine"),
        None
    );
}

/// A table of steps and what each must return, then the resulting state.
async fn step_appends_and_upserts(db: &Db) {
    let store = db.open().await;
    let a = store.create_thread(Some("a")).await.expect("create").id;
    let b = store.create_thread(Some("b")).await.expect("create").id;

    type Step = (
        &'static str,               // thread: "a" or "b"
        &'static str,               // turn
        Vec<NewMessage>,            // messages
        Vec<(&'static str, Value)>, // machines
        Vec<i64>,                   // expected seqs
    );
    let steps: Vec<Step> = vec![
        (
            "a",
            "t1",
            vec![msg(Role::User, json!("hi"))],
            vec![("frame", json!({"state": "Planning"}))],
            vec![1],
        ),
        (
            "b",
            "t1",
            vec![msg(Role::User, json!("other thread"))],
            vec![],
            vec![1],
        ),
        (
            "a",
            "t1",
            vec![
                msg(Role::Assistant, json!({"call": "search"})),
                msg(Role::Tool, json!({"hits": 3})),
            ],
            vec![
                ("frame", json!({"state": "Responding"})),
                ("judge", json!({"count": 3})),
            ],
            vec![2, 3],
        ),
        (
            "a",
            "t2",
            vec![],
            vec![("frame", json!({"state": "Idle"}))],
            vec![],
        ),
        (
            "a",
            "t2",
            vec![msg(Role::System, json!("notice"))],
            vec![],
            vec![4],
        ),
        (
            "b",
            "t1",
            vec![
                msg(Role::Assistant, json!("ok")),
                msg(Role::User, json!("thanks")),
            ],
            vec![],
            vec![2, 3],
        ),
        (
            "a",
            "t1",
            vec![],
            vec![("frame", json!({"state": "Done"}))],
            vec![],
        ),
    ];

    let id = |which: &str| if which == "a" { a.as_str() } else { b.as_str() };
    let mut expected: BTreeMap<&str, Vec<(String, Role, Value)>> = BTreeMap::new();
    for (which, turn, messages, machines, want) in &steps {
        let machines: Vec<(&str, Value)> = machines.iter().map(|(n, v)| (*n, v.clone())).collect();
        let got = store
            .step(id(which), turn, messages, &machines)
            .await
            .expect("step");
        assert_eq!(&got, want, "seqs for step {which}/{turn}");
        expected.entry(which).or_default().extend(
            messages
                .iter()
                .map(|m| (turn.to_string(), m.role, m.body.clone())),
        );
    }

    for (which, want) in &expected {
        let got = store.messages(id(which)).await.expect("messages");
        let seqs: Vec<i64> = got.iter().map(|m| m.seq).collect();
        assert_eq!(
            seqs,
            (1..=want.len() as i64).collect::<Vec<_>>(),
            "thread {which}"
        );
        let rows: Vec<(String, Role, Value)> = got
            .iter()
            .map(|m| (m.turn_id.clone(), m.role, m.body.clone()))
            .collect();
        assert_eq!(&rows, want, "thread {which}");
        assert!(got.windows(2).all(|w| w[0].created_at <= w[1].created_at));
    }

    // Upserts: the last snapshot per (turn, name) wins; turns are separate.
    assert_eq!(
        store.machine(&a, "t1", "frame").await.expect("machine"),
        Some(json!({"state": "Done"}))
    );
    assert_eq!(
        store.machines(&a).await.expect("machines"),
        vec![
            (
                "t1".to_string(),
                "frame".to_string(),
                json!({"state": "Done"})
            ),
            ("t1".to_string(), "judge".to_string(), json!({"count": 3})),
            (
                "t2".to_string(),
                "frame".to_string(),
                json!({"state": "Idle"})
            ),
        ]
    );
    assert!(store.machines(&b).await.expect("machines").is_empty());
    assert_eq!(
        store.machine(&a, "t3", "frame").await.expect("machine"),
        None
    );
}

async fn step_on_unknown_thread_writes_nothing(db: &Db) {
    let store = db.open().await;
    let unknown = random_id();
    let err = store
        .step(
            &unknown,
            "t1",
            &[msg(Role::User, json!("lost"))],
            &[("frame", json!({"state": "Planning"}))],
        )
        .await
        .expect_err("unknown thread");
    assert!(
        matches!(&err, StoreError::UnknownThread(id) if *id == unknown),
        "{err:?}"
    );
    // An empty step is no excuse either.
    let err = store
        .step(&unknown, "t1", &[], &[])
        .await
        .expect_err("unknown thread");
    assert!(matches!(err, StoreError::UnknownThread(_)), "{err:?}");

    assert_eq!(store.thread(&unknown).await.expect("get"), None);
    assert!(store.messages(&unknown).await.expect("messages").is_empty());
    assert!(store.machines(&unknown).await.expect("machines").is_empty());
}

/// A step whose last write violates a constraint (an empty machine name)
/// leaves no trace: no messages, no upserts, no used-up seqs.
async fn failed_step_is_atomic(db: &Db) {
    let store = db.open().await;
    let thread = store.create_thread(None).await.expect("create").id;
    let first = store
        .step(
            &thread,
            "t1",
            &[msg(Role::User, json!("q"))],
            &[("frame", json!(1))],
        )
        .await
        .expect("step");
    assert_eq!(first, vec![1]);

    let err = store
        .step(
            &thread,
            "t1",
            &[
                msg(Role::Assistant, json!("partial")),
                msg(Role::Tool, json!("partial")),
            ],
            &[
                ("frame", json!(2)),
                ("other", json!(2)),
                ("", json!("violates CHECK")),
            ],
        )
        .await
        .expect_err("constraint violation");
    assert!(matches!(err, StoreError::Database(_)), "{err:?}");

    let messages = store.messages(&thread).await.expect("messages");
    assert_eq!(messages.len(), 1, "no partial messages");
    assert_eq!(
        store
            .machine(&thread, "t1", "frame")
            .await
            .expect("machine"),
        Some(json!(1))
    );
    assert_eq!(
        store
            .machine(&thread, "t1", "other")
            .await
            .expect("machine"),
        None
    );

    // The rolled-back step did not consume seqs.
    let next = store
        .step(&thread, "t1", &[msg(Role::Assistant, json!("a"))], &[])
        .await
        .expect("step");
    assert_eq!(next, vec![2]);
}

/// Bodies and snapshots come back exactly as given, Korean text included.
async fn json_bodies_round_trip(db: &Db) {
    let cases: Vec<Value> = vec![
        json!("안녕하세요, 세계! 오늘 날씨는 어떤가요?"),
        json!({"text": "한국어 텍스트와 English가 섞인 문장", "lang": "ko"}),
        json!({"키": "값", "목록": ["하나", "둘", "셋"], "중첩": {"깊이": 2}}),
        json!("emoji 🚀🧪 and combining é (e\u{301}) and RTL שלום and 中文"),
        json!("quotes \" backslash \\ newline \n tab \t nul \u{0} bell \u{7}"),
        json!("'; DROP TABLE messages; --"),
        json!(""),
        json!(null),
        json!(true),
        json!(0),
        json!(i64::MAX),
        json!(i64::MIN),
        json!(u64::MAX),
        json!(1.5),
        json!(-2.25e-10),
        json!([]),
        json!({}),
        json!([1, "two", null, {"three": [3.0, false]}]),
        json!({"tool_calls": [{"id": "call_1", "arguments": "{\"q\":\"서울 날씨\"}"}]}),
        Value::String("긴 문장 ".repeat(2000)),
    ];
    let store = db.open().await;
    let thread = store.create_thread(Some("사용자")).await.expect("create");
    assert_eq!(
        store
            .thread(&thread.id)
            .await
            .expect("get")
            .and_then(|t| t.owner)
            .as_deref(),
        Some("사용자")
    );

    let messages: Vec<NewMessage> = cases
        .iter()
        .zip(Role::ALL.into_iter().cycle())
        .map(|(body, role)| msg(role, body.clone()))
        .collect();
    let names: Vec<String> = (0..cases.len()).map(|i| format!("상태기계-{i}")).collect();
    let machines: Vec<(&str, Value)> = names
        .iter()
        .map(String::as_str)
        .zip(cases.iter().cloned())
        .collect();
    let seqs = store
        .step(&thread.id, "턴-1", &messages, &machines)
        .await
        .expect("step");
    assert_eq!(seqs, (1..=cases.len() as i64).collect::<Vec<_>>());

    let stored = store.messages(&thread.id).await.expect("messages");
    assert_eq!(stored.len(), cases.len());
    for ((got, sent), case) in stored.iter().zip(&messages).zip(&cases) {
        assert_eq!(&got.body, case, "seq {}", got.seq);
        assert_eq!(got.role, sent.role);
        assert_eq!(got.turn_id, "턴-1");
    }
    for (name, case) in names.iter().zip(&cases) {
        let got = store
            .machine(&thread.id, "턴-1", name)
            .await
            .expect("machine");
        assert_eq!(got.as_ref(), Some(case), "{name}");
    }

    // The serialised shape callers see.
    let first = serde_json::to_value(&stored[0]).expect("serialise");
    assert_eq!(first["role"], json!("user"));
    assert_eq!(first["seq"], json!(1));
    assert_eq!(first["body"], cases[0]);
}

async fn data_survives_reconnect(db: &Db) {
    let thread;
    let before;
    {
        let store = db.open().await;
        thread = store.create_thread(Some("persist")).await.expect("create");
        store
            .step(
                &thread.id,
                "t1",
                &[
                    msg(Role::User, json!("기억해 주세요")),
                    msg(Role::Assistant, json!("네")),
                ],
                &[("frame", json!({"state": "Done"}))],
            )
            .await
            .expect("step");
        before = store.messages(&thread.id).await.expect("messages");
        store.close().await;
    }

    let store = db.open().await;
    assert_eq!(
        store.thread(&thread.id).await.expect("get"),
        Some(thread.clone())
    );
    assert_eq!(store.messages(&thread.id).await.expect("messages"), before);
    assert_eq!(
        store.machines(&thread.id).await.expect("machines"),
        vec![("t1".into(), "frame".into(), json!({"state": "Done"}))]
    );
    let seqs = store
        .step(&thread.id, "t2", &[msg(Role::User, json!("again"))], &[])
        .await
        .expect("step");
    assert_eq!(seqs, vec![3]);
}

async fn concurrent_steps_in_one_pool(db: &Db) {
    let store = db.open().await;
    hammer(&[store.clone(), store.clone()], 4).await;
}

/// Two pools on one database stand in for two server processes.
async fn concurrent_steps_from_two_pools(db: &Db) {
    let one = db.open().await;
    let two = db.open().await;
    hammer(&[one, two], 3).await;
}

/// `tasks_per_store` tasks per store append to one thread at once; every
/// step must get consecutive seqs and all seqs together must be 1..=n.
async fn hammer(stores: &[Store], tasks_per_store: usize) {
    const STEPS: usize = 8;
    const PER_STEP: usize = 2;
    let thread = stores[0]
        .create_thread(Some("hammer"))
        .await
        .expect("create")
        .id;

    let mut tasks = Vec::new();
    for (s, store) in stores.iter().enumerate() {
        for t in 0..tasks_per_store {
            let store = store.clone();
            let thread = thread.clone();
            tasks.push(tokio::spawn(async move {
                let turn = format!("store{s}-task{t}");
                let mut got = Vec::new();
                for step in 0..STEPS {
                    let messages: Vec<NewMessage> = (0..PER_STEP)
                        .map(|i| msg(Role::Assistant, json!({"step": step, "i": i})))
                        .collect();
                    let seqs = store
                        .step(&thread, &turn, &messages, &[("progress", json!(step))])
                        .await
                        .expect("concurrent step");
                    got.push(seqs);
                }
                (turn, got)
            }));
        }
    }

    let mut by_seq: BTreeMap<i64, (String, Value)> = BTreeMap::new();
    let mut turns = Vec::new();
    for task in tasks {
        let (turn, steps) = task.await.expect("task");
        for (step, seqs) in steps.iter().enumerate() {
            assert_eq!(seqs.len(), PER_STEP);
            assert!(
                seqs.windows(2).all(|w| w[1] == w[0] + 1),
                "consecutive: {seqs:?}"
            );
            for (i, seq) in seqs.iter().enumerate() {
                let dup = by_seq.insert(*seq, (turn.clone(), json!({"step": step, "i": i})));
                assert!(dup.is_none(), "seq {seq} handed out twice");
            }
        }
        turns.push(turn);
    }
    let total = (stores.len() * tasks_per_store * STEPS * PER_STEP) as i64;
    assert_eq!(
        by_seq.keys().copied().collect::<Vec<_>>(),
        (1..=total).collect::<Vec<_>>()
    );

    // What is stored is what each step was told.
    let stored = stores[0].messages(&thread).await.expect("messages");
    assert_eq!(stored.len() as i64, total);
    for m in &stored {
        let (turn, body) = &by_seq[&m.seq];
        assert_eq!((&m.turn_id, &m.body), (turn, body), "seq {}", m.seq);
    }
    for turn in &turns {
        let progress = stores[0]
            .machine(&thread, turn, "progress")
            .await
            .expect("machine");
        assert_eq!(progress, Some(json!(STEPS - 1)), "{turn}");
    }
}

// ------------------------------------------------------------ turn leases

const LEASE: Duration = Duration::from_secs(30);

async fn lease_claim_renew_release(db: &Db) {
    let store = db.open().await;
    let thread = store.create_thread(None).await.expect("create").id;
    assert_eq!(store.turn_lease(&thread).await.expect("read"), None);

    let a = store
        .claim_turn_lease(&thread, "turn-a", LEASE)
        .await
        .expect("a free thread is claimed");
    assert_eq!(
        (a.thread_id.as_str(), a.turn_id.as_str()),
        (thread.as_str(), "turn-a")
    );
    assert!(a.expires_at >= a.claimed_at + 30_000, "{a:?}");
    assert_eq!(
        store.turn_lease(&thread).await.expect("read"),
        Some(a.clone())
    );

    // A live lease cannot be claimed, not even by its own turn again.
    for turn in ["turn-b", "turn-a"] {
        let err = store
            .claim_turn_lease(&thread, turn, LEASE)
            .await
            .expect_err("held");
        assert!(
            matches!(&err, StoreError::LeaseHeld(t) if *t == thread),
            "{err:?}"
        );
    }

    // Only the holder renews or releases; the others change nothing.
    let err = store
        .renew_turn_lease(&thread, "turn-b", LEASE)
        .await
        .expect_err("not the holder");
    assert!(
        matches!(&err, StoreError::LeaseLost { turn_id, .. } if turn_id == "turn-b"),
        "{err:?}"
    );
    let err = store
        .release_turn_lease(&thread, "turn-b")
        .await
        .expect_err("not the holder");
    assert!(matches!(err, StoreError::LeaseLost { .. }), "{err:?}");
    assert_eq!(
        store.turn_lease(&thread).await.expect("read"),
        Some(a.clone())
    );

    tokio::time::sleep(Duration::from_millis(5)).await;
    let renewed = store
        .renew_turn_lease(&thread, "turn-a", LEASE)
        .await
        .expect("the holder renews");
    assert_eq!(renewed.claimed_at, a.claimed_at);
    assert!(renewed.expires_at > a.expires_at, "{renewed:?} after {a:?}");
    assert_eq!(
        store.turn_lease(&thread).await.expect("read"),
        Some(renewed)
    );

    store
        .release_turn_lease(&thread, "turn-a")
        .await
        .expect("the holder releases");
    assert_eq!(store.turn_lease(&thread).await.expect("read"), None);
    assert!(matches!(
        store.release_turn_lease(&thread, "turn-a").await,
        Err(StoreError::LeaseLost { .. })
    ));
    assert!(matches!(
        store.renew_turn_lease(&thread, "turn-a", LEASE).await,
        Err(StoreError::LeaseLost { .. })
    ));
    // Released: the next turn claims at once.
    store
        .claim_turn_lease(&thread, "turn-b", LEASE)
        .await
        .expect("claimed after release");

    let missing = random_id();
    let err = store
        .claim_turn_lease(&missing, "turn-c", LEASE)
        .await
        .expect_err("no such thread");
    assert!(
        matches!(&err, StoreError::UnknownThread(t) if *t == missing),
        "{err:?}"
    );
    assert_eq!(store.turn_lease(&missing).await.expect("read"), None);
}

/// A holder that stops renewing (a crashed process) loses the thread when
/// its lease expires, and cannot renew or release the new holder's lease.
/// A stored task (migration 0007) round-trips; of two followers settling
/// it from two pools at once, exactly one wins; a settled task is no longer
/// among the unsettled ones a restart follows.
async fn a_task_settles_once_by_compare_and_swap(db: &Db) {
    let one = db.open().await;
    let two = db.open().await;
    let thread = one.create_thread(None).await.expect("create").id;
    let key = format!("{}#c1", random_id());
    let machine = json!({"table": "task", "state": "Working", "trace": ["follow-created-task"]});
    one.insert_task(&NewTask {
        task_key: &key,
        thread_id: &thread,
        turn_id: "turn-1",
        call_id: "c1",
        server: "demo",
        tool: "compile_site_report",
        task_id: "7f3a-opaque",
        state: "Working",
        machine: &machine,
    })
    .await
    .expect("insert");
    let stored = two.tasks(&thread).await.expect("read");
    assert_eq!(stored.len(), 1);
    assert_eq!(
        (
            stored[0].task_id.as_str(),
            stored[0].state.as_str(),
            &stored[0].outcome
        ),
        ("7f3a-opaque", "Working", &None)
    );
    assert!(
        !format!("{:?}", stored[0]).contains("7f3a"),
        "Debug leaves the id out"
    );
    let unsettled = two
        .tasks_in(&["Working", "Cancelling"])
        .await
        .expect("read");
    assert!(unsettled.iter().any(|t| t.task_key == key));

    let outcome = json!({"state": "Completed", "text": "the task ended"});
    let settled = json!({"table": "task", "state": "Completed"});
    let (a, b) = tokio::join!(
        one.swap_task(&key, "Working", "Completed", &settled, Some(&outcome)),
        two.swap_task(&key, "Working", "Unknown", &settled, Some(&outcome)),
    );
    let wins = [a.expect("swap"), b.expect("swap")];
    assert_eq!(wins.iter().filter(|w| **w).count(), 1, "{wins:?}");
    let after = one.tasks(&thread).await.expect("read");
    assert!(["Completed", "Unknown"].contains(&after[0].state.as_str()));
    assert_eq!(after[0].outcome.as_ref(), Some(&outcome));
    let unsettled = one
        .tasks_in(&["Working", "Cancelling"])
        .await
        .expect("read");
    assert!(!unsettled.iter().any(|t| t.task_key == key));
}

async fn expired_lease_is_taken_over(db: &Db) {
    let one = db.open().await;
    let two = db.open().await;
    let thread = one.create_thread(None).await.expect("create").id;

    let short = Duration::from_millis(300);
    let a = one
        .claim_turn_lease(&thread, "turn-a", short)
        .await
        .expect("claim");
    assert!(matches!(
        two.claim_turn_lease(&thread, "turn-b", LEASE).await,
        Err(StoreError::LeaseHeld(_))
    ));
    // An expired lease nobody took over is still its holder's to renew.
    tokio::time::sleep(Duration::from_millis(400)).await;
    one.renew_turn_lease(&thread, "turn-a", short)
        .await
        .expect("renewed after expiry, before any takeover");
    tokio::time::sleep(Duration::from_millis(400)).await;

    let b = two
        .claim_turn_lease(&thread, "turn-b", LEASE)
        .await
        .expect("an expired lease is taken over");
    assert!(b.claimed_at >= a.expires_at, "{b:?} after {a:?}");
    assert_eq!(
        one.turn_lease(&thread).await.expect("read"),
        Some(b.clone())
    );
    assert!(matches!(
        one.renew_turn_lease(&thread, "turn-a", short).await,
        Err(StoreError::LeaseLost { .. })
    ));
    assert!(matches!(
        one.release_turn_lease(&thread, "turn-a").await,
        Err(StoreError::LeaseLost { .. })
    ));
    assert_eq!(two.turn_lease(&thread).await.expect("read"), Some(b));

    // A zero TTL is expired at once.
    let c = random_id();
    let thread_c = one.create_thread(None).await.expect("create").id;
    one.claim_turn_lease(&thread_c, &c, Duration::ZERO)
        .await
        .expect("claim");
    two.claim_turn_lease(&thread_c, "turn-d", LEASE)
        .await
        .expect("taken over");
}

/// Many claims on one thread at once, from two pools (two "processes"):
/// exactly one wins each round, on both backends.
async fn concurrent_lease_claims_from_two_pools(db: &Db) {
    const ROUNDS: usize = 5;
    const PER_POOL: usize = 4;
    let pools = [db.open().await, db.open().await];
    let thread = pools[0].create_thread(None).await.expect("create").id;
    for round in 0..ROUNDS {
        let start = std::sync::Arc::new(tokio::sync::Barrier::new(2 * PER_POOL));
        let mut tasks = Vec::new();
        for (p, store) in pools.iter().enumerate() {
            for t in 0..PER_POOL {
                let (store, thread, start) = (store.clone(), thread.clone(), start.clone());
                tasks.push(tokio::spawn(async move {
                    let turn = format!("round{round}-pool{p}-task{t}");
                    start.wait().await;
                    match store.claim_turn_lease(&thread, &turn, LEASE).await {
                        Ok(lease) => Some(lease),
                        Err(StoreError::LeaseHeld(_)) => None,
                        Err(e) => panic!("{turn}: {e}"),
                    }
                }));
            }
        }
        let mut winners = Vec::new();
        for task in tasks {
            if let Some(lease) = task.await.expect("task") {
                winners.push(lease);
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: {winners:?}");
        let winner = &winners[0];
        assert_eq!(
            pools[1].turn_lease(&thread).await.expect("read"),
            Some(winner.clone())
        );
        pools[round % 2]
            .release_turn_lease(&thread, &winner.turn_id)
            .await
            .expect("release");
    }
}

// ------------------------------------------------------- SQLite specifics

/// Every accepted way of naming a SQLite file creates it if missing.
#[tokio::test]
async fn sqlite_url_forms_create_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    // (file, text before the path, text after it)
    let forms = [
        ("bare.db", "", ""),
        ("rwc.db", "sqlite://", "?mode=rwc"),
        ("nomode.db", "sqlite://", ""),
        ("short.db", "sqlite:", ""),
    ];
    for (file, before, after) in forms {
        let path = dir.path().join(file);
        assert!(!path.exists());
        let url = format!("{before}{}{after}", path.display());
        let store = Store::connect(&url)
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!(store.backend(), Backend::Sqlite);
        let thread = store.create_thread(None).await.expect("create").id;
        let seqs = store
            .step(&thread, "t", &[msg(Role::User, json!(file))], &[])
            .await
            .expect("step");
        assert_eq!(seqs, vec![1]);
        assert!(path.exists(), "{url} created {}", path.display());
        // File databases run in WAL mode.
        let wal = dir.path().join(format!("{file}-wal"));
        assert!(wal.exists(), "{url}: no WAL file");
        store.close().await;
    }
}

#[tokio::test]
async fn sqlite_in_memory_keeps_data_while_open() {
    let store = Store::connect("sqlite::memory:").await.expect("connect");
    let thread = store.create_thread(None).await.expect("create").id;
    let tasks: Vec<_> = (0..4)
        .map(|i| {
            let store = store.clone();
            let thread = thread.clone();
            tokio::spawn(async move {
                store
                    .step(
                        &thread,
                        "t",
                        &[msg(Role::User, json!(i))],
                        &[("m", json!(i))],
                    )
                    .await
                    .expect("step")
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    let seqs: Vec<i64> = store
        .messages(&thread)
        .await
        .expect("messages")
        .iter()
        .map(|m| m.seq)
        .collect();
    assert_eq!(seqs, vec![1, 2, 3, 4]);

    // Another in-memory store is another database.
    let other = Store::connect("sqlite::memory:").await.expect("connect");
    assert_eq!(other.thread(&thread).await.expect("get"), None);
}

#[tokio::test]
async fn unsupported_url_is_an_error() {
    let err = Store::connect("mysql://root:secret@localhost/db")
        .await
        .expect_err("mysql is not supported");
    assert!(
        matches!(&err, StoreError::UnsupportedUrl { scheme } if scheme == "mysql"),
        "{err:?}"
    );
    assert!(
        !err.to_string().contains("secret"),
        "error leaks the URL: {err}"
    );
}
