//! One running turn per thread across processes: two real `turnstile serve`
//! processes on one PostgreSQL database (TURNSTILE_TEST_DATABASE_URL), with
//! the in-process fake OpenAI-compatible model of `common::fake_openai`.
//!
//! A turn on process A is held open by the model (the fake stalls the
//! planner's stream); process B refuses a turn on the same thread with the
//! same 409 as a second turn in one process. Then A is killed with SIGKILL
//! mid-turn: nothing releases its lease, which expires after
//! `limits.turn_lease_secs`, and from then on B runs turns on the thread.
//!
//! Ignored without `--include-ignored`; run, it fails without
//! `TURNSTILE_TEST_DATABASE_URL` (ADR 0015).

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::fake_openai::{Action, FakeOpenAi, Role, FAKE_MODEL, KEY};
use common::frames::read_frames;
use common::harness::Run;
use common::thread::{Record, ThreadView};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::Child;
use turnstile::store::Store;
use turnstile::wire::Frame;

const BIN: &str = env!("CARGO_BIN_EXE_turnstile");
/// The lease TTL of both processes: short, so the test waits little for a
/// dead process's lease to expire, and still three renewals long.
const LEASE_SECS: u64 = 3;
/// The 409 body of a held thread, the same in one process as in two.
const HELD: &str = "a turn is already running on this thread; wait for its done or error frame";

fn now_ms() -> i64 {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    i64::try_from(d.as_millis()).unwrap()
}

/// One `turnstile serve` child process, probed by the harness.
struct Server {
    name: &'static str,
    child: Child,
    base: String,
    /// Its harness run; the verdict is given when it is stopped or killed
    /// on purpose.
    run: Run,
    /// Everything the process wrote to stderr, once it has exited.
    stderr: tokio::task::JoinHandle<String>,
}

impl Server {
    async fn spawn(name: &'static str, config: &Path) -> Server {
        let mut child = tokio::process::Command::new(BIN)
            .args(["serve", "--config"])
            .arg(config)
            .env("OPENAI_API_KEY", KEY)
            .env("RUST_LOG", "warn,turnstile=debug")
            .env_remove("TURNSTILE_ADDR")
            .env_remove("DATABASE_URL")
            .env_remove("TURNSTILE_MODEL_BASE_URL")
            .env_remove("TURNSTILE_MODEL")
            .env_remove("TURNSTILE_TABLES")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the binary starts");
        let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut err = child.stderr.take().unwrap();
        let stderr = tokio::spawn(async move {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s).await;
            s
        });
        let base = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = stdout.next_line().await.unwrap() {
                if let Some(url) = line.strip_prefix("turnstile is serving on ") {
                    return Some(url.trim_end_matches('/').to_string());
                }
            }
            None
        })
        .await
        .expect("serve starts within a minute");
        let Some(base) = base else {
            let _ = child.wait().await;
            panic!("{name} exited before listening: {}", stderr.await.unwrap());
        };
        // Keep draining stdout so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = stdout.next_line().await {} });
        // The config names no tables: the child serves the built-in ones,
        // and the substrate check proves it.
        let own = turnstile::protocols::TableSet::builtin().unwrap();
        let run = Run::start(
            format!("turnstile serve {name}"),
            &crate::common::browser(),
            &base,
            &own,
        )
        .await;
        Server {
            name,
            child,
            base,
            stderr,
            run,
        }
    }

    /// `POST /v1/threads/{thread}/messages`; the response is returned as
    /// soon as its headers arrive (the stream stays open).
    async fn post(&self, http: &reqwest::Client, thread: &str, text: &str) -> reqwest::Response {
        http.post(format!("{}/v1/threads/{thread}/messages", self.base))
            .json(&json!({ "text": text }))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", self.name))
    }

    /// The verdict on this process's part, then SIGKILL: no destructor, no
    /// release, no goodbye.
    async fn kill9(mut self) -> String {
        self.run.pass();
        self.child.start_kill().expect("SIGKILL sent");
        let status = self.child.wait().await.expect("reaped");
        assert!(!status.success(), "{} was killed: {status}", self.name);
        self.stderr.await.unwrap()
    }

    /// The verdict, then the process is stopped.
    async fn stop(mut self) -> String {
        self.run.pass();
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
        self.stderr.await.unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: set TURNSTILE_TEST_DATABASE_URL, run with --include-ignored"]
async fn a_thread_runs_one_turn_across_two_processes_and_a_dead_holder_expires() {
    let url = common::needs::postgres();
    let tmp = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let config = tmp.path().join("turnstile.toml");
    std::fs::write(
        &config,
        format!(
            "addr = \"127.0.0.1:0\"\ndatabase_url = \"{url}\"\n\n[model]\nbase_url = \"{}\"\nname = \"{FAKE_MODEL}\"\nidle_timeout_secs = 120\nmax_retries = 0\n\n[limits]\nturn_lease_secs = {LEASE_SECS}\n",
            fake.base_url
        ),
    )
    .unwrap();
    let a = Server::spawn("A", &config).await;
    let b = Server::spawn("B", &config).await;
    let http = crate::common::browser();
    let store = Store::connect(&url)
        .await
        .expect("the test reads the leases");

    // A thread made on B; a turn on it started on A. The model stalls A's
    // planner stream, so the turn stays in flight until A dies.
    let created: Value = http
        .post(format!("{}/v1/threads", b.base))
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let thread = created["thread_id"].as_str().unwrap().to_string();
    fake.on(Role::Planner, Action::StallAfter(1));
    let running = a.post(&http, &thread, "hello").await;
    assert_eq!(running.status().as_u16(), 200, "A starts the turn");
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    while !fake.requests().iter().any(|r| r.role == Role::Planner) {
        assert!(
            tokio::time::Instant::now() < until,
            "A never asked the model"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let held = store
        .turn_lease(&thread)
        .await
        .unwrap()
        .expect("A's lease is in the database");

    // B refuses a second turn on the thread, exactly as one process would.
    let refused = b.post(&http, &thread, "hello from B").await;
    assert_eq!(refused.status().as_u16(), 409);
    assert_eq!(
        refused.json::<Value>().await.unwrap(),
        json!({ "error": HELD, "table": "ownership", "row_id": "thread-busy" }),
        "the refusal names its row (issue 34 item 8)"
    );

    // A outlives several TTLs: its lease is renewed while the turn runs.
    tokio::time::sleep(Duration::from_secs(LEASE_SECS + 1)).await;
    let renewed = store
        .turn_lease(&thread)
        .await
        .unwrap()
        .expect("still held");
    assert_eq!(renewed.turn_id, held.turn_id);
    assert!(renewed.expires_at > held.expires_at, "A renewed its lease");
    assert_eq!(
        b.post(&http, &thread, "hello from B")
            .await
            .status()
            .as_u16(),
        409,
        "still held after the first TTL"
    );

    // A dies mid-turn. Its lease stays until it expires; B refuses the
    // thread until then and accepts it from then on.
    let a_log = a.kill9().await;
    drop(running);
    let last = store
        .turn_lease(&thread)
        .await
        .unwrap()
        .expect("not released");
    assert_eq!(last.turn_id, held.turn_id, "nobody released A's lease");
    let until = tokio::time::Instant::now() + Duration::from_secs(LEASE_SECS + 30);
    let mut refusals = 0;
    let frames = loop {
        assert!(
            tokio::time::Instant::now() < until,
            "the thread never became usable; A's log:\n{a_log}"
        );
        let sent = now_ms();
        let r = b.post(&http, &thread, "hello from B").await;
        match r.status().as_u16() {
            409 => {
                assert!(
                    sent < last.expires_at,
                    "refused at {sent}, after A's lease expired at {}",
                    last.expires_at
                );
                refusals += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            200 => {
                assert!(
                    now_ms() >= last.expires_at,
                    "accepted before A's lease expired at {}",
                    last.expires_at
                );
                // Read as a client reads it: ids, bodies and the frame
                // table's order are checked frame by frame.
                break read_frames(&r.bytes().await.unwrap());
            }
            s => panic!("unexpected status {s}: {}", r.text().await.unwrap()),
        }
    };
    assert!(
        refusals > 0,
        "B refused the thread right after A died (the lease outlives the process)"
    );
    // B's own turn on the thread ran to `done`, under a new turn id (not
    // the dead holder's).
    let (Some(Frame::Start(start)), Some(Frame::Done(done))) = (frames.first(), frames.last())
    else {
        panic!("B's turn starts and ends with done: {frames:?}");
    };
    assert_eq!(start.thread_id, thread, "{frames:?}");
    assert_eq!(done.turn_id, start.turn_id, "{frames:?}");
    assert_ne!(start.turn_id, held.turn_id, "B ran a turn of its own");
    // B released its lease before its stream ended.
    assert_eq!(store.turn_lease(&thread).await.unwrap(), None);
    let stored: Value = http
        .get(format!("{}/v1/threads/{thread}", b.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let view = ThreadView::read(&stored);
    let texts: Vec<&str> = view
        .messages
        .iter()
        .filter(|m| m.role == turnstile::store::Role::User)
        .filter_map(|m| match &m.body {
            Record::User { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(texts.contains(&"hello from B"), "{stored}");

    let b_log = b.stop().await;
    assert!(!b_log.contains(KEY) && !a_log.contains(KEY));
    store.close().await;
}
