//! Issue 11, finding 8: crash leftovers. The real `turnstile demo` binary is
//! killed with SIGKILL at each step of a turn, as the client reads it (after
//! `start`, the plan, a tool result, a citation, mid-answer), and restarted
//! on the same SQLite file. Each time, the interrupted turn is closed as cut
//! through its tables before anything is served, its stored records hold
//! everything the client had read, and the next turn on the thread works. A
//! last restart changes nothing (idempotent).
//!
//! A second test drives the recovery in process against a turn whose lease
//! is still held (as by another live process): it is left alone until the
//! lease is gone. It runs on SQLite, and on PostgreSQL as its
//! `…_on_postgres` twin: ignored unless `--include-ignored`, where it needs
//! TURNSTILE_TEST_DATABASE_URL (ADR 0015).

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::frames::{is_done, kinds, FrameKind, FrameReader};
use common::harness::Run;
use common::thread::{self as stored, machine, Record, RecordKind, ThreadView};
use futures::StreamExt;
use serde_json::{json, Value};
use turnstile::agent::recovery;
use turnstile::agent::TurnTables;
use turnstile::protocols::frame::FrameEvent;
use turnstile::protocols::turn::TurnEvent;
use turnstile::protocols::TableSet;
use turnstile::store::{NewMessage, Role, Store};
use turnstile::wire::{Citation, Frame};

/// The lease TTL the servers run with: a killed turn's thread is free again
/// after it.
const LEASE_SECS: u64 = 1;

/// A `turnstile demo` process, probed by the harness; killed (SIGKILL)
/// when dropped.
struct Proc {
    child: Child,
    base: String,
    /// This process's harness run: its verdict is given when it is killed
    /// on purpose ([`Proc::kill`]).
    run: Run,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A child not yet handed to a [`Proc`]: killed when dropped.
struct Killed(Option<Child>);

impl Drop for Killed {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Proc {
    /// Starts the demo on `db` and waits until it serves; on a port taken
    /// between choosing and binding it, tries another.
    async fn start(db: &Path, log: &Path, http: &reqwest::Client) -> Proc {
        for _ in 0..3 {
            if let Some(p) = Proc::try_start(db, log, http).await {
                return p;
            }
        }
        panic!("turnstile did not start; see {}", log.display());
    }

    async fn try_start(db: &Path, log: &Path, http: &reqwest::Client) -> Option<Proc> {
        let port = crate::common::free_port();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_turnstile"))
            .args(["demo", "--addr"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("--db")
            .arg(db)
            .args(["--mcp-addr", "127.0.0.1:0"])
            .args(["--turn-lease-secs", &LEASE_SECS.to_string()])
            // Slow enough that a kill lands mid-answer; fast enough that a
            // whole turn takes about a second.
            .args(["--model-delay-ms", "40"])
            .env("RUST_LOG", "warn,turnstile=info")
            .env_remove("TURNSTILE_TABLES")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("turnstile runs");
        // Killed (by `Drop`) if it never comes up.
        let mut child = Killed(Some(child));
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ok = http
                .get(format!("{base}/healthz"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ok {
                // The demo serves the built-in tables (TURNSTILE_TABLES is
                // removed): the substrate check proves it.
                let own = TableSet::builtin().unwrap();
                let run = Run::start(format!("turnstile demo at {base}"), http, &base, &own).await;
                return Some(Proc {
                    child: child.0.take().unwrap(),
                    base,
                    run,
                });
            }
            let c = child.0.as_mut().unwrap();
            if c.try_wait().unwrap().is_some() || Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The verdict on this process's part of the scenario, then SIGKILL,
    /// and reaped.
    fn kill(mut self) {
        self.run.pass();
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    async fn thread(&self, http: &reqwest::Client, id: &str) -> Value {
        let r = http
            .get(format!("{}/v1/threads/{id}", self.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        r.json().await.unwrap()
    }

    async fn new_thread(&self, http: &reqwest::Client) -> String {
        let r = http
            .post(format!("{}/v1/threads", self.base))
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        let v: Value = r.json().await.unwrap();
        v["thread_id"].as_str().unwrap().to_string()
    }

    /// Posts a message; retried while the thread is still leased (409).
    async fn post(&self, http: &reqwest::Client, thread: &str, text: &str) -> reqwest::Response {
        let deadline = Instant::now() + Duration::from_secs(LEASE_SECS * 5 + 5);
        loop {
            let r = http
                .post(format!("{}/v1/threads/{thread}/messages", self.base))
                .json(&json!({ "text": text }))
                .send()
                .await
                .unwrap();
            if r.status().as_u16() != 409 || Instant::now() > deadline {
                assert_eq!(r.status().as_u16(), 200, "turn refused");
                return r;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

const ASK: &str = "show safety issues on floor 3";

/// The interrupted turn is closed as cut, and holds what the client read.
fn check_cut(thread: &ThreadView, turn: &str, seen: &[Frame], step: &str) {
    let recs = thread.records_of(turn);
    let m = thread.turn(turn);
    let t = m.machine("turn");
    assert_eq!(
        t.state, "Cancelled",
        "[{step}] the turn is closed through its table: {m:?}"
    );
    let gone = t.trace.last().unwrap();
    assert!(
        gone.starts_with("gone-"),
        "[{step}] by a client_gone row: {gone}"
    );
    assert_eq!(
        stored::count(&recs, RecordKind::Cut),
        1,
        "[{step}] one cut record"
    );
    assert_eq!(
        stored::count(&recs, RecordKind::Answer),
        0,
        "[{step}] no answer"
    );
    let Some(Record::Cut(cut)) = recs.last() else {
        panic!("[{step}] the cut is the turn's last record: {recs:?}");
    };
    assert_eq!(cut.cause.as_deref(), Some("restart"));
    // The frame table forbids closing a stream without a terminal frame:
    // the row is named, and the frame machine keeps what the client saw.
    let frame_state = m.machine("frame").state.as_str();
    assert!(
        ["Open", "Working", "Narrating"].contains(&frame_state),
        "[{step}] {frame_state}"
    );
    let forbidden = cut.frame.as_ref().and_then(|f| f.forbidden.as_deref());
    assert!(
        forbidden.is_some_and(|r| r.starts_with("unterminated")),
        "[{step}] {cut:?}"
    );
    // Everything the client read is stored.
    for (frame_kind, record_kind) in [
        (FrameKind::Start, RecordKind::User),
        (FrameKind::Plan, RecordKind::Plan),
        (FrameKind::ToolCall, RecordKind::Call),
        (FrameKind::ToolResult, RecordKind::Result),
        (FrameKind::Citation, RecordKind::Card),
        (FrameKind::Delta, RecordKind::Text),
    ] {
        let shown = common::frames::count(seen, frame_kind);
        let kept = stored::count(&recs, record_kind);
        assert!(
            kept >= shown,
            "[{step}] {shown} {frame_kind:?} frames read, {kept} {record_kind:?} records stored",
        );
    }
    let cards = stored::cards(&recs);
    let shown: Vec<&Citation> = common::frames::citations(seen);
    for (i, c) in shown.iter().enumerate() {
        assert_eq!(cards[i], *c, "[{step}] card {i} as shown");
    }
    let text = stored::text(&recs);
    let seen_text = common::frames::answer(seen);
    assert!(
        text.starts_with(&seen_text),
        "[{step}] stored {text:?} holds what was read {seen_text:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_killed_at_each_step_is_closed_as_cut_on_restart() {
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("crash.db");
    let log = tmp.path().join("turnstile.log");
    let http = crate::common::browser();
    let mut proc = Proc::start(&db, &log, &http).await;
    let mut threads = Vec::new();
    for step in [
        FrameKind::Start,
        FrameKind::Plan,
        FrameKind::ToolResult,
        FrameKind::Citation,
        FrameKind::Delta,
    ] {
        let thread = proc.new_thread(&http).await;
        let r = proc.post(&http, &thread, ASK).await;
        let mut body = r.bytes_stream();
        let mut reader = FrameReader::new();
        while !reader.frames().iter().any(|f| FrameKind::of(f) == step) {
            let chunk = body.next().await.expect("stream open").unwrap();
            reader.push(&chunk);
        }
        let seen = reader.frames().to_vec();
        assert!(
            !seen.iter().any(|f| FrameKind::of(f).is_terminal()),
            "[{step:?}] killed before the turn ended: {:?}",
            kinds(&seen)
        );
        let turn = match &seen[0] {
            Frame::Start(s) => s.turn_id.clone(),
            f => panic!("first frame {f:?}"),
        };
        proc.kill();
        drop(body);
        // The killed turn's lease has expired by the time the new process
        // starts: recovery closes the turn before anything is served.
        tokio::time::sleep(Duration::from_millis(LEASE_SECS * 1000 + 100)).await;
        proc = Proc::start(&db, &log, &http).await;
        let v = proc.thread(&http, &thread).await;
        check_cut(&ThreadView::read(&v), &turn, &seen, &format!("{step:?}"));
        // The next turn on the thread works, and reads the cut one as
        // history.
        let r = proc.post(&http, &thread, ASK).await;
        let mut reader = FrameReader::new();
        let mut body = r.bytes_stream();
        while let Some(chunk) = body.next().await {
            reader.push(&chunk.unwrap());
        }
        let frames = reader.finish();
        assert!(is_done(&frames), "[{step:?}] {:?}", kinds(&frames));
        let v = proc.thread(&http, &thread).await;
        let view = ThreadView::read(&v);
        let states: Vec<&str> = view
            .turns
            .iter()
            .map(|t| t.machine("turn").state.as_str())
            .collect();
        assert_eq!(states, ["Cancelled", "Done"], "[{step:?}]");
        threads.push((thread, v));
    }
    // Idempotent: another kill and restart, with nothing unfinished,
    // changes nothing.
    proc.kill();
    let proc = Proc::start(&db, &log, &http).await;
    for (thread, before) in &threads {
        let after = proc.thread(&http, thread).await;
        assert_eq!(&after, before, "a second start changed the thread");
    }
    proc.kill();
    assert!(
        started.elapsed() < Duration::from_secs(45),
        "took {:?}",
        started.elapsed()
    );
}

/// The builtin tables as a turn runs them.
fn tables() -> TurnTables {
    TurnTables::bind(&TableSet::builtin().unwrap()).unwrap()
}

/// A turn as a process leaves it when it dies after its plan: the user's
/// message and the plan stored, `turn` in Calling and `frame` in Working.
async fn dead_turn(store: &Store, tables: &TurnTables, thread: &str, turn: &str) {
    let mut t = tables.turn.machine();
    t.fire(TurnEvent::Begin).unwrap();
    t.fire(TurnEvent::Planned).unwrap();
    let mut f = tables.frame.machine();
    f.fire(FrameEvent::Start).unwrap();
    f.fire(FrameEvent::Plan).unwrap();
    let machines = [
        ("turn", serde_json::to_value(t.snapshot()).unwrap()),
        ("frame", serde_json::to_value(f.snapshot()).unwrap()),
    ];
    let msgs = [
        NewMessage::new(Role::User, json!({"kind": "user", "text": "hi"})),
        NewMessage::new(
            Role::Assistant,
            json!({"kind": "plan", "step": 1, "steps": [], "note": ""}),
        ),
    ];
    store.step(thread, turn, &msgs, &machines).await.unwrap();
}

async fn leased_turn_is_left_alone(url: &str) {
    let store = Store::connect(url).await.unwrap();
    let tables = tables();
    let thread = store.create_thread(None).await.unwrap().id;
    let turn = uuid::Uuid::new_v4().to_string();
    // Another live process holds the thread for this turn.
    store
        .claim_turn_lease(&thread, &turn, Duration::from_secs(60))
        .await
        .unwrap();
    dead_turn(&store, &tables, &thread, &turn).await;
    let before = store.messages(&thread).await.unwrap();

    let r = recovery::recover(&store, &tables, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(!r.closed.contains(&(thread.clone(), turn.clone())));
    assert!(r.deferred.iter().any(|d| d.0 == thread && d.1 == turn));
    assert_eq!(store.messages(&thread).await.unwrap(), before);
    assert_eq!(
        store.turn_lease(&thread).await.unwrap().unwrap().turn_id,
        turn,
        "the live lease is untouched"
    );

    // The holder is gone (its lease released or expired): closed as cut.
    store.release_turn_lease(&thread, &turn).await.unwrap();
    // Re-create the row as an expired one, as a dead process leaves it.
    store
        .claim_turn_lease(&thread, &turn, Duration::ZERO)
        .await
        .unwrap();
    let r = recovery::recover(&store, &tables, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(r.closed.contains(&(thread.clone(), turn.clone())));
    let after = store.messages(&thread).await.unwrap();
    assert_eq!(after.len(), before.len() + 1);
    let Record::Cut(cut) = Record::read(&after.last().unwrap().body) else {
        panic!("the last record is the cut: {:?}", after.last());
    };
    assert_eq!(cut.cause.as_deref(), Some("restart"));
    let closed = cut.turn.expect("the turn machine's closing step");
    assert_eq!(closed.row_id.as_deref(), Some("gone-while-calling"));
    assert_eq!(closed.to.as_deref(), Some("Cancelled"));
    let frame = cut.frame.expect("the frame machine's closing step");
    assert_eq!(frame.from, "Working");
    assert_eq!(frame.forbidden.as_deref(), Some("unterminated-working"));
    let t = machine(&store, &thread, &turn, "turn").await.unwrap();
    assert_eq!(t.state, "Cancelled");
    let f = machine(&store, &thread, &turn, "frame").await.unwrap();
    assert_eq!(
        f.state, "Working",
        "no state is written past a forbidden row"
    );
    assert!(
        store.turn_lease(&thread).await.unwrap().is_none(),
        "recovery's own lease is released"
    );

    // Idempotent.
    let r = recovery::recover(&store, &tables, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(!r.closed.iter().any(|c| c.0 == thread));
    assert_eq!(store.messages(&thread).await.unwrap(), after);
    // A turn that starts on the thread later finds nothing to close either.
    let closed = recovery::close_leftovers(&store, &tables, &thread, "next")
        .await
        .unwrap();
    assert_eq!(closed, 0);
    store.close().await;
}

#[tokio::test]
async fn recovery_leaves_a_turn_alone_while_another_process_holds_its_lease() {
    let tmp = tempfile::tempdir().unwrap();
    leased_turn_is_left_alone(&common::server::databases(&tmp)[0]).await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL: set TURNSTILE_TEST_DATABASE_URL, run with --include-ignored"]
async fn recovery_leaves_a_turn_alone_while_another_process_holds_its_lease_on_postgres() {
    leased_turn_is_left_alone(&common::needs::postgres()).await;
}

/// A turn that starts on a thread closes the leftovers of a dead turn
/// there first, whatever state the lease row is in.
#[tokio::test]
async fn a_new_turn_closes_the_threads_leftovers_first() {
    let store = Store::connect("sqlite::memory:").await.unwrap();
    let tables = tables();
    let thread = store.create_thread(None).await.unwrap().id;
    dead_turn(&store, &tables, &thread, "dead").await;
    let closed = recovery::close_leftovers(&store, &tables, &thread, "next")
        .await
        .unwrap();
    assert_eq!(closed, 1);
    let t = machine(&store, &thread, "dead", "turn").await.unwrap();
    assert_eq!(t.state, "Cancelled");
    let closed = recovery::close_leftovers(&store, &tables, &thread, "next")
        .await
        .unwrap();
    assert_eq!(closed, 0, "idempotent");
}

/// A turn deferred at start-up (its lease was live) is closed in the
/// background once the lease has expired without renewal.
#[tokio::test]
async fn a_deferred_turn_is_closed_once_its_lease_expires() {
    let store = Store::connect("sqlite::memory:").await.unwrap();
    let tables = tables();
    let thread = store.create_thread(None).await.unwrap().id;
    store
        .claim_turn_lease(&thread, "dead", Duration::from_millis(300))
        .await
        .unwrap();
    dead_turn(&store, &tables, &thread, "dead").await;
    let r = recovery::recover(&store, &tables, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(r.deferred.len(), 1);
    assert!(r.closed.is_empty());
    recovery::spawn_deferred(store.clone(), tables.clone(), Duration::from_secs(5), r);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let t = machine(&store, &thread, "dead", "turn").await.unwrap();
        if t.state == "Cancelled" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not closed after the lease expired"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cuts = store
        .messages(&thread)
        .await
        .unwrap()
        .iter()
        .filter(|m| Record::read(&m.body).kind() == RecordKind::Cut)
        .count();
    assert_eq!(cuts, 1);
}
