//! Approval across a real process kill (issue 17): `turnstile serve` is a
//! child process, killed with SIGKILL, and started again on the same
//! SQLite file. The tool server (the demo's, in this test's process) and the
//! model (an OpenAI-compatible fake, here too) outlive it, so the tool
//! server's own counters say how many confirms the backend received.
//!
//! - Killed (or stopped with SIGTERM, which drains: issue 39 §2) with the
//!   interrupt pending: the restarted server approves it, once; a second
//!   approve is refused.
//! - Killed after the approved confirm was sent and before its answer was
//!   stored: start-up recovery asks the status tool, never re-sends the
//!   confirm, and the thread shows how it ended.

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::fake_openai::{Action, FakeOpenAi, Role, FAKE_MODEL, KEY};
use common::frames::{is_done, FrameKind, FrameReader};
use futures::StreamExt;
use serde_json::{json, Value};
use turnstile::wire::Frame;
use turnstile_demo::{DemoOptions, DemoServer};

const LEASE_SECS: u64 = 1;

/// A `turnstile serve` child; SIGKILLed when dropped.
struct Served {
    child: Child,
    base: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A browser of this test's own: cookies know no port, and the servers
/// these tests start in parallel would each issue the shared jar a session
/// of their own.
fn own_browser() -> reqwest::Client {
    reqwest::Client::builder()
        .cookie_store(true)
        .build()
        .expect("an HTTP client")
}

fn config(dir: &Path, port: u16, db: &str, fake: &FakeOpenAi, url: &str, protocol: &str) -> String {
    let q = |s: &str| toml::Value::String(s.to_string()).to_string();
    let src = format!(
        r#"addr = {addr}
database_url = {db}

[model]
base_url = {base}
name = {name}
api_key = {key}
connect_timeout_secs = 2
idle_timeout_secs = 10

[limits]
turn_lease_secs = {LEASE_SECS}

# A SIGTERM's drain lets open turns run 1 s (issue 39 §2).
[http]
drain_secs = 1

[[mcp_servers]]
name = "demo"
url = {url}
protocol = {protocol}

[mcp_servers.tools.prepare_seat_reservation.approval.prepare]
action_id = "actionId"
confirm = "confirm_action"
cancel = "cancel_action"
status = "get_action"
"#,
        addr = q(&format!("127.0.0.1:{port}")),
        db = q(db),
        base = q(&fake.base_url),
        name = q(FAKE_MODEL),
        key = q(KEY),
        url = q(url),
        protocol = q(protocol),
    );
    let path = dir.join(format!("serve-{}.toml", uuid::Uuid::new_v4()));
    std::fs::write(&path, src).unwrap();
    path.display().to_string()
}

impl Served {
    async fn start(
        dir: &Path,
        db: &Path,
        fake: &FakeOpenAi,
        tools: &DemoServer,
        http: &reqwest::Client,
    ) -> Served {
        Served::speaking(dir, db, fake, &tools.url, http, "2025-11-25").await
    }

    /// As [`Served::start`], speaking `protocol` to the tool server at
    /// `url`.
    async fn speaking(
        dir: &Path,
        db: &Path,
        fake: &FakeOpenAi,
        url: &str,
        http: &reqwest::Client,
        protocol: &str,
    ) -> Served {
        let db = format!("sqlite://{}?mode=rwc", db.display());
        Served::on_database(dir, &db, fake, url, http, protocol).await
    }

    /// As [`Served::speaking`], on the database at URL `db`.
    async fn on_database(
        dir: &Path,
        db: &str,
        fake: &FakeOpenAi,
        url: &str,
        http: &reqwest::Client,
        protocol: &str,
    ) -> Served {
        // Port 0, and the address the process prints: a port chosen here
        // could be taken by another test's process before this one binds
        // it, and the readiness probe would then reach that process.
        let cfg = config(dir, 0, db, fake, url, protocol);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("serve.log"))
            .unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_turnstile"))
            .args(["serve", "--config", &cfg])
            .env("RUST_LOG", "warn,turnstile=info")
            .env_remove("TURNSTILE_TABLES")
            .env_remove("TURNSTILE_DATABASE_URL")
            .env_remove("TURNSTILE_ADDR")
            .env_remove("OPENAI_API_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("turnstile serve runs");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            let mut sent = false;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(url) = line.strip_prefix("turnstile is serving on ") {
                    if !sent {
                        let _ = tx.send(url.trim_end_matches('/').to_string());
                        sent = true;
                    }
                }
            }
        });
        let mut served = Served {
            child,
            base: String::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(base) = rx.try_recv() {
                served.base = base;
                break;
            }
            let exited = served.child.try_wait().unwrap();
            assert!(
                exited.is_none() && Instant::now() < deadline,
                "turnstile serve did not come up ({exited:?}); see {}",
                dir.join("serve.log").display()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        loop {
            let up = http
                .get(format!("{}/readyz", served.base))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if up {
                return served;
            }
            let exited = served.child.try_wait().unwrap();
            assert!(
                exited.is_none() && Instant::now() < deadline,
                "turnstile serve did not come up ({exited:?}); see {}",
                dir.join("serve.log").display()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// SIGTERM: the process drains (issue 39 §2; no turn is open) and
    /// exits 0.
    fn terminate(mut self) {
        crate::common::remote::sigterm(self.child.id());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "a drained process exits 0: {status:?}");
    }

    async fn post(&self, http: &reqwest::Client, path: &str, body: Value) -> reqwest::Response {
        http.post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    async fn thread(&self, http: &reqwest::Client, id: &str) -> Value {
        let r = http
            .get(format!("{}/v1/threads/{id}", self.base))
            .send()
            .await
            .unwrap();
        r.json().await.unwrap()
    }
}

/// A first `turnstile serve` speaking `protocol` to a demo tool server (2026-07-28
/// offered too) that outlives it, with a thread, ready to be killed.
struct Killable {
    tmp: tempfile::TempDir,
    db: std::path::PathBuf,
    http: reqwest::Client,
    fake: FakeOpenAi,
    tools: DemoServer,
    first: Served,
    thread: String,
}

impl Killable {
    async fn start(protocol: &str) -> Killable {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("kill.db");
        let http = own_browser();
        let fake = FakeOpenAi::start().await;
        let options = DemoOptions {
            stateless: true,
            ..DemoOptions::default()
        };
        let tools = DemoServer::start("127.0.0.1:0".parse().unwrap(), options)
            .await
            .unwrap();
        let first = Served::speaking(tmp.path(), &db, &fake, &tools.url, &http, protocol).await;
        let thread = first.new_thread(&http).await;
        Killable {
            tmp,
            db,
            http,
            fake,
            tools,
            first,
            thread,
        }
    }
}

impl Served {
    /// A turn whose planner calls `tool` with `args`; its response, still
    /// streaming.
    async fn turn(
        &self,
        http: &reqwest::Client,
        fake: &FakeOpenAi,
        thread: &str,
        text: &str,
        tool: &str,
        args: Value,
    ) -> reqwest::Response {
        fake.on(
            Role::Planner,
            Action::ToolCalls(vec![(tool.into(), args.to_string())]),
        );
        self.post(
            http,
            &format!("/v1/threads/{thread}/messages"),
            json!({ "text": text }),
        )
        .await
    }
}

impl Served {
    /// A new thread on this process.
    async fn new_thread(&self, http: &reqwest::Client) -> String {
        let created: Value = self
            .post(http, "/v1/threads", json!({}))
            .await
            .json()
            .await
            .unwrap();
        created["thread_id"].as_str().unwrap().to_string()
    }

    /// A turn whose planner calls `notify_site_contact`, whose server asks
    /// the user for a contact: the interrupt, and its form's key.
    async fn ask_contact(
        &self,
        http: &reqwest::Client,
        fake: &FakeOpenAi,
        thread: &str,
    ) -> (turnstile::wire::Interrupt, String) {
        let r = self
            .turn(
                http,
                fake,
                thread,
                "notify the site contact about PANO-003-0611",
                "notify_site_contact",
                json!({"issue_id": "PANO-003-0611"}),
            )
            .await;
        let frames = read_all(r).await;
        let i = frames
            .iter()
            .find_map(|f| match f {
                Frame::Interrupt(i) => Some(i.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no interrupt: {frames:?}"));
        let key = i.input.as_ref().expect("a question").requests[0]
            .key
            .clone();
        (i, key)
    }
}

/// The answer to [`Served::ask_contact`]'s question.
fn contact_answer(interrupt_id: &str, key: &str) -> Value {
    json!({
        "interrupt_id": interrupt_id,
        "decision": "accept",
        "answers": {key: {"name": "Ana Kim", "email": "ana@example.com", "role": "foreman"}}
    })
}

async fn read_all(r: reqwest::Response) -> Vec<Frame> {
    let mut reader = FrameReader::new();
    let mut body = r.bytes_stream();
    while let Some(chunk) = body.next().await {
        reader.push(&chunk.unwrap());
    }
    reader.finish()
}

fn approval_state(thread: &Value, id: &str) -> String {
    thread["approvals"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["interrupt_id"] == id)
        .and_then(|a| a["state"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// One reservation turn to its interrupt; the thread and the interrupt id.
async fn reserve(s: &Served, fake: &FakeOpenAi, http: &reqwest::Client) -> (String, String) {
    reserve_seat(s, fake, http, "12").await
}

/// [`reserve`], for `seat` (the demo desk refuses a seat already taken).
async fn reserve_seat(
    s: &Served,
    fake: &FakeOpenAi,
    http: &reqwest::Client,
    seat: &str,
) -> (String, String) {
    let thread = s.new_thread(http).await;
    let args = json!({"seat": seat, "time": "15:00"}).to_string();
    fake.on(
        Role::Planner,
        Action::ToolCalls(vec![("prepare_seat_reservation".into(), args)]),
    );
    let r = s
        .post(
            http,
            &format!("/v1/threads/{thread}/messages"),
            json!({"text": format!("reserve seat {seat} at 15:00")}),
        )
        .await;
    assert_eq!(r.status().as_u16(), 200);
    let frames = read_all(r).await;
    assert!(is_done(&frames), "{frames:?}");
    let id = frames
        .iter()
        .find_map(|f| match f {
            Frame::Interrupt(i) => Some(i.interrupt_id.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no interrupt: {frames:?}"));
    (thread, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_pending_at_a_sigkill_is_approved_once_after_restart() {
    interrupt_pending_at_a_stop(Served::kill).await;
}

/// The same across a rolling deploy's SIGTERM: the process drains and
/// exits 0, and the card is decided once by the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_pending_at_a_sigterm_is_approved_once_after_restart() {
    interrupt_pending_at_a_stop(Served::terminate).await;
}

async fn interrupt_pending_at_a_stop(stop: fn(Served)) {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("kill.db");
    let http = own_browser();
    let fake = FakeOpenAi::start().await;
    let options = DemoOptions {
        action_worker_delay: Duration::from_millis(20),
        ..DemoOptions::default()
    };
    let tools = DemoServer::start("127.0.0.1:0".parse().unwrap(), options)
        .await
        .unwrap();
    let first = Served::start(tmp.path(), &db, &fake, &tools, &http).await;
    let (thread, id) = reserve(&first, &fake, &http).await;
    stop(first);

    let second = Served::start(tmp.path(), &db, &fake, &tools, &http).await;
    assert_eq!(
        approval_state(&second.thread(&http, &thread).await, &id),
        "Awaiting"
    );
    let path = format!("/v1/threads/{thread}/resume");
    let approve = json!({"interrupt_id": id, "decision": "approve"});
    let r = second.post(&http, &path, approve.clone()).await;
    assert_eq!(r.status().as_u16(), 200);
    let frames = read_all(r).await;
    assert!(is_done(&frames), "{frames:?}");
    assert_eq!(tools.action_counts(1).confirms, 1);
    assert_eq!(
        approval_state(&second.thread(&http, &thread).await, &id),
        "Completed"
    );
    let again = second.post(&http, &path, approve).await;
    assert_eq!(again.status().as_u16(), 409);
    assert_eq!(
        tools.action_counts(1).confirms,
        1,
        "a second confirm was sent"
    );
    second.kill();
    tools.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_with_the_confirm_out_is_recovered_without_resending_it() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("kill.db");
    let http = own_browser();
    let fake = FakeOpenAi::start().await;
    // Every call is held a while at the server, so the kill lands while the
    // confirm is out.
    let options = DemoOptions {
        action_worker_delay: Duration::from_millis(20),
        call_delay: Duration::from_millis(400),
        ..DemoOptions::default()
    };
    let tools = DemoServer::start("127.0.0.1:0".parse().unwrap(), options)
        .await
        .unwrap();
    let first = Served::start(tmp.path(), &db, &fake, &tools, &http).await;
    let (thread, id) = reserve(&first, &fake, &http).await;
    let r = first
        .post(
            &http,
            &format!("/v1/threads/{thread}/resume"),
            json!({"interrupt_id": id, "decision": "approve"}),
        )
        .await;
    assert_eq!(r.status().as_u16(), 200);
    let mut reader = FrameReader::new();
    let mut body = r.bytes_stream();
    // The confirm's call frame is out: the confirm intent is committed and
    // the call is at the server.
    while !reader.frames().iter().any(|f| {
        FrameKind::of(f) == FrameKind::ToolCall
            && matches!(f, Frame::ToolCall(c) if c.tool == "confirm_action")
    }) {
        let chunk = body.next().await.expect("stream open").unwrap();
        reader.push(&chunk);
    }
    // The frame is committed and sent just before the call goes out: wait
    // until the tool server has it (its handler counts it, then waits).
    let deadline = Instant::now() + Duration::from_secs(5);
    while tools.calls("confirm_action") == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(tools.calls("confirm_action"), 1);
    first.kill();
    drop(body);

    // The killed turn's lease lapses; start-up recovery finds the confirm in
    // flight and asks the status tool.
    tokio::time::sleep(Duration::from_millis(LEASE_SECS * 1000 + 200)).await;
    let second = Served::start(tmp.path(), &db, &fake, &tools, &http).await;
    let deadline = Instant::now() + Duration::from_secs(15);
    let state = loop {
        let state = approval_state(&second.thread(&http, &thread).await, &id);
        let settled = ["Completed", "Failed", "Unknown"].contains(&state.as_str());
        if (settled && state != "Unknown") || Instant::now() > deadline {
            break state;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // The backend received the confirm once and completed it; the status
    // tool said so. It was never sent again.
    assert_eq!(state, "Completed", "the status tool was asked");
    assert_eq!(tools.calls("confirm_action"), 1, "the confirm was re-sent");
    assert!(tools.calls("get_action") >= 1);
    second.kill();
    tools.shutdown().await;
}

/// A question of the tool server pending at a SIGKILL (issue 22 §3). On
/// 2026-07-28 the interrupt holds everything the answer's re-send needs: the
/// restarted server sends it once, and the demo records one notification.
/// On 2025-11-25 the call that asked was open in the killed process: the
/// restarted server settles the question as outcome unknown, and an answer
/// is refused by that row; nothing is recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_pending_at_a_sigkill() {
    for (protocol, survives) in [("2026-07-28", true), ("2025-11-25", false)] {
        let Killable {
            tmp,
            db,
            http,
            fake,
            tools,
            first,
            thread,
        } = Killable::start(protocol).await;
        let (i, key) = first.ask_contact(&http, &fake, &thread).await;
        first.kill();

        let second = Served::speaking(tmp.path(), &db, &fake, &tools.url, &http, protocol).await;
        let answer = contact_answer(&i.interrupt_id, &key);
        let path = format!("/v1/threads/{thread}/resume");
        let r = second.post(&http, &path, answer.clone()).await;
        if survives {
            assert_eq!(r.status().as_u16(), 200, "{protocol}");
            let frames = read_all(r).await;
            assert!(is_done(&frames), "{frames:?}");
            assert_eq!(tools.notifications().len(), 1, "{protocol}: sent once");
            let again = second.post(&http, &path, answer).await;
            assert_eq!(again.status().as_u16(), 409);
            assert_eq!(tools.notifications().len(), 1, "{protocol}: not twice");
        } else {
            // Until the killed process's row expires (one lease), nobody can
            // tell it from a live one: the answer is refused as held there,
            // then recovery settles the question.
            let status = r.status().as_u16();
            let deadline = Instant::now() + Duration::from_secs(LEASE_SECS + 10);
            let state = loop {
                let state = approval_state(&second.thread(&http, &thread).await, &i.interrupt_id);
                if state == "Unknown" || Instant::now() > deadline {
                    break state;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            };
            assert_eq!(
                state, "Unknown",
                "{protocol}: the lost question is outcome unknown"
            );
            assert_eq!(status, 409, "{protocol}");
            let r = second.post(&http, &path, answer.clone()).await;
            assert_eq!(r.status().as_u16(), 409, "{protocol}");
            let body: Value = r.json().await.unwrap();
            assert_eq!(body["row_id"], "answer-while-unknown", "{body}");
            assert!(tools.notifications().is_empty(), "{protocol}: nothing sent");
        }
        second.kill();
        tools.shutdown().await;
    }
}

/// A long call the tool server made a task, running when `turnstile serve`
/// is SIGKILLed (issue 22 §4): the task's id was stored before the first
/// poll, so the restarted server follows the same task by that id, stores
/// how it ended and appends it to the cut turn. The tool server ran the
/// work once and got the call once: nothing was re-sent. On both
/// revisions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_running_at_a_sigkill_is_followed_after_restart() {
    for protocol in ["2025-11-25", "2026-07-28"] {
        let Killable {
            tmp,
            db,
            http,
            fake,
            tools,
            first,
            thread,
        } = Killable::start(protocol).await;
        let r = report_turn(&first, &http, &fake, &thread).await;
        until_progress(r, first).await;
        assert_eq!(tools.reports().runs(), 1, "{protocol}");

        let second = Served::speaking(tmp.path(), &db, &fake, &tools.url, &http, protocol).await;
        completed_after_restart(&second, &http, &thread, tmp.path(), protocol).await;
        ran_once(&tools, protocol);
        assert!(tools.reports().polls() >= 2, "{protocol}");
        second.kill();
        tools.shutdown().await;
    }
}

/// A long call running when `turnstile serve` gets SIGTERM (issue 39 §2):
/// the drain's 1 s window ends with the task still running, so the turn is
/// stopped as a client's leaving stops it (its stream ends with the error
/// that says to send again) and the process exits 0; the next one follows
/// the same task by its stored id to its end, once: the work ran once and
/// the call was never re-sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_running_at_a_sigterm_is_followed_once_after_restart() {
    let Killable {
        tmp,
        db,
        http,
        fake,
        tools,
        first,
        thread,
    } = Killable::start("2025-11-25").await;
    let r = report_turn(&first, &http, &fake, &thread).await;
    let (mut reader, mut body) = read_until_progress(r).await;
    let stopping = std::thread::spawn(move || first.terminate());
    while let Some(chunk) = body.next().await {
        reader.push(&chunk.unwrap());
    }
    let frames = reader.finish();
    match frames.last() {
        Some(Frame::Error(e)) => assert!(
            e.message.contains("send your message again"),
            "{}",
            e.message
        ),
        other => panic!("the stream ends with the error that says to retry: {other:?}"),
    }
    stopping.join().expect("the process drained and exited 0");
    let second = Served::speaking(tmp.path(), &db, &fake, &tools.url, &http, "2025-11-25").await;
    completed_after_restart(&second, &http, &thread, tmp.path(), "sigterm").await;
    ran_once(&tools, "sigterm");
    second.kill();
    tools.shutdown().await;
}

/// Reads a turn's stream until its first progress frame (the task is
/// stored and runs), then SIGKILLs the process serving it.
async fn until_progress(r: reqwest::Response, served: Served) {
    // The stream stays open until the kill: the client never left.
    let _open = read_until_progress(r).await;
    served.kill();
}

/// A turn's stream read until its first progress frame: what was read, and
/// the rest of the stream.
async fn read_until_progress(
    r: reqwest::Response,
) -> (
    FrameReader,
    impl futures::Stream<Item = reqwest::Result<axum::body::Bytes>> + Unpin,
) {
    let mut reader = FrameReader::new();
    let mut body = Box::pin(r.bytes_stream());
    while !(reader.frames().iter()).any(|f| FrameKind::of(f) == FrameKind::Progress) {
        let chunk = body.next().await.expect("the stream is open").unwrap();
        reader.push(&chunk);
    }
    (reader, body)
}

/// The site report's turn on `thread`: the planner asks for
/// `compile_site_report`, which its server makes a long task.
async fn report_turn(
    first: &Served,
    http: &reqwest::Client,
    fake: &FakeOpenAi,
    thread: &str,
) -> reqwest::Response {
    first
        .turn(
            http,
            fake,
            thread,
            "compile the site report for tower-a",
            "compile_site_report",
            json!({"project": "tower-a"}),
        )
        .await
}

/// The task's work ran once, and its call was sent once.
fn ran_once(tools: &DemoServer, what: &str) {
    assert_eq!(tools.reports().runs(), 1, "{what}: the work ran once");
    assert_eq!(
        tools.tool_calls("compile_site_report"),
        1,
        "{what}: the call was never re-sent"
    );
}

/// Waits (30 s at most) until the restarted process has followed the
/// thread's task to `Completed` and appended it to the cut turn.
async fn completed_after_restart(
    served: &Served,
    http: &reqwest::Client,
    thread: &str,
    dir: &Path,
    label: &str,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let view = loop {
        let v = served.thread(http, thread).await;
        let settled = v["tasks"][0]["state"] == "Completed"
            && v["messages"].to_string().contains("task_settled");
        if settled {
            break v;
        }
        assert!(
            Instant::now() < deadline,
            "{label}: the task was not followed after the restart: {v:#}; see {}",
            dir.join("serve.log").display()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        view["tasks"][0]["outcome"]["text"], "the task ended, and the tool returned a result",
        "{label}"
    );
}

/// The same kill against a server we did not write the SDK of: the
/// official Python SDK's `py_server.py`, whose `inspect_site` is a task on
/// 2026-07-28 (`py_tasks.py`). The restarted process follows the SDK's
/// task by its stored id to `Completed`; the server ran the inspection
/// once: the call was never re-sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the npm/PyPI MCP servers: scripts/test-deps, run with --include-ignored"]
async fn a_python_sdk_task_running_at_a_sigkill_is_followed_after_restart() {
    let py = crate::mcp_interop::start_py_server().await;
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("kill.db");
    let http = own_browser();
    let fake = FakeOpenAi::start().await;
    let protocol = "2026-07-28";
    let first = Served::speaking(tmp.path(), &db, &fake, &py.url, &http, protocol).await;
    let thread = first.new_thread(&http).await;
    let r = first
        .turn(
            &http,
            &fake,
            &thread,
            "inspect tower-a",
            "inspect_site",
            json!({"site": "tower-a"}),
        )
        .await;
    until_progress(r, first).await;
    let second = Served::speaking(tmp.path(), &db, &fake, &py.url, &http, protocol).await;
    completed_after_restart(&second, &http, &thread, tmp.path(), "python").await;
    let client = turnstile::mcp::ToolClient::connect(&turnstile::mcp::ServerSpec::http(
        "python",
        py.url.clone(),
    ))
    .await
    .expect("connect to the python server");
    let out = client
        .call("task_counts", serde_json::Map::new())
        .await
        .expect("task_counts");
    let counts: Value = serde_json::from_str(out.text().trim()).expect("the counts as JSON");
    assert_eq!(counts["runs"], 1, "the inspection ran once: {counts}");
    assert_eq!(counts["cancels"], 0, "{counts}");
    client.close().await;
    second.kill();
}

/// The confirm's call is at the tool server when the first process is
/// SIGKILLed. Returns the thread and the interrupt.
async fn kill_with_the_confirm_out(
    tmp: &Path,
    db: &Path,
    fake: &FakeOpenAi,
    tools: &DemoServer,
    http: &reqwest::Client,
) -> (String, String) {
    let first = Served::start(tmp, db, fake, tools, http).await;
    let (thread, id) = reserve(&first, fake, http).await;
    let r = first
        .post(
            http,
            &format!("/v1/threads/{thread}/resume"),
            json!({"interrupt_id": id, "decision": "approve"}),
        )
        .await;
    assert_eq!(r.status().as_u16(), 200);
    let mut reader = FrameReader::new();
    let mut body = r.bytes_stream();
    while !reader
        .frames()
        .iter()
        .any(|f| matches!(f, Frame::ToolCall(c) if c.tool == "confirm_action"))
    {
        let chunk = body.next().await.expect("stream open").unwrap();
        reader.push(&chunk);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while tools.calls("confirm_action") == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(tools.calls("confirm_action"), 1);
    first.kill();
    (thread, id)
}

/// Issue 34 item 1: restarted at once, while the dead turn's lease is
/// still live. Start-up recovery comes back to the approval when that
/// lease expires, asks the status tool, and settles it, without a second
/// restart and without re-sending the confirm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_in_flight_at_a_quick_restart_settles_once_the_dead_lease_expires() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("kill.db");
    let http = own_browser();
    let fake = FakeOpenAi::start().await;
    let options = DemoOptions {
        action_worker_delay: Duration::from_millis(20),
        call_delay: Duration::from_millis(400),
        ..DemoOptions::default()
    };
    let tools = DemoServer::start("127.0.0.1:0".parse().unwrap(), options)
        .await
        .unwrap();
    let (thread, id) = kill_with_the_confirm_out(tmp.path(), &db, &fake, &tools, &http).await;
    // No wait: the killed turn's lease is live when the second one starts.
    let second = Served::start(tmp.path(), &db, &fake, &tools, &http).await;
    let deadline = Instant::now() + Duration::from_secs(LEASE_SECS + 14);
    let state = loop {
        let state = approval_state(&second.thread(&http, &thread).await, &id);
        if state == "Completed" || Instant::now() > deadline {
            break state;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(state, "Completed", "settled without a second restart");
    assert_eq!(tools.calls("confirm_action"), 1, "the confirm was re-sent");
    second.kill();
    tools.shutdown().await;
}

/// The `legal` count of `row` in the approval table, from a process's
/// `/v1/metrics`.
async fn approval_row_count(s: &Served, http: &reqwest::Client, row: &str) -> u64 {
    let text = http
        .get(format!("{}/v1/metrics", s.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let label = format!("table=\"approval\",row=\"{row}\",kind=\"legal\"}} ");
    text.lines()
        .find_map(|l| l.split_once(&label).map(|(_, n)| n.trim().parse().unwrap()))
        .unwrap_or(0)
}

/// Issue 34 item 5: a row is counted once, when it is fired. Refused
/// approves restore the approval's machine from the store; that counts
/// none of its earlier rows again. A process of its own, so no other test's
/// rows are in its metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_machine_does_not_count_its_rows_again() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("rows.db");
    let http = own_browser();
    let fake = FakeOpenAi::start().await;
    let tools = DemoServer::start("127.0.0.1:0".parse().unwrap(), DemoOptions::default())
        .await
        .unwrap();
    let s = Served::start(tmp.path(), &db, &fake, &tools, &http).await;
    let mut approved = 0;
    for seat in ["12", "13", "14"] {
        let (thread, id) = reserve_seat(&s, &fake, &http, seat).await;
        let path = format!("/v1/threads/{thread}/resume");
        let approve = json!({"interrupt_id": id, "decision": "approve"});
        let frames = read_all(s.post(&http, &path, approve.clone()).await).await;
        assert!(is_done(&frames), "{frames:?}");
        approved += 1;
        if approved == 3 {
            for _ in 0..4 {
                let again = s.post(&http, &path, approve.clone()).await;
                assert_eq!(again.status().as_u16(), 409);
            }
        }
    }
    assert_eq!(tools.calls("confirm_action"), 3);
    assert_eq!(
        approval_row_count(&s, &http, "approve-sends-confirm").await,
        3,
        "3 approves sent 3 confirms; 4 refused approves fired no such row"
    );
    assert_eq!(
        approval_row_count(&s, &http, "show-interrupt").await,
        3,
        "each interrupt was shown once"
    );
    s.kill();
    tools.shutdown().await;
}

/// Issue 34 item 10: a second process on the same database (here the same
/// SQLite file, as two `turnstile demo`s in one folder once shared) starts
/// while the first holds a 2025-11-25 question's open call. Its start-up
/// recovery leaves the question alone, for the first process renews its
/// row; an answer sent to the second is refused as held elsewhere, nothing
/// decided; the first takes the answer and sends it once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_process_leaves_the_first_ones_open_question_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}?mode=rwc", tmp.path().join("two.db").display());
    two_processes_leave_each_others_questions_alone(tmp, &db).await;
}

/// The same with two processes on PostgreSQL, the usual deployment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: set TURNSTILE_TEST_DATABASE_URL, run with --include-ignored"]
async fn a_second_process_leaves_the_first_ones_open_question_alone_on_postgres() {
    let tmp = tempfile::tempdir().unwrap();
    two_processes_leave_each_others_questions_alone(tmp, &common::needs::postgres()).await;
}

async fn two_processes_leave_each_others_questions_alone(tmp: tempfile::TempDir, db: &str) {
    let http = own_browser();
    let fake = FakeOpenAi::start().await;
    let options = DemoOptions {
        stateless: true,
        ..DemoOptions::default()
    };
    let tools = DemoServer::start("127.0.0.1:0".parse().unwrap(), options)
        .await
        .unwrap();
    let first = Served::on_database(tmp.path(), db, &fake, &tools.url, &http, "2025-11-25").await;
    let thread = first.new_thread(&http).await;
    let (i, key) = first.ask_contact(&http, &fake, &thread).await;
    let second = Served::on_database(tmp.path(), db, &fake, &tools.url, &http, "2025-11-25").await;
    // Several of the first process's lease periods: a recovery that
    // settled it, at start or on a retry, would have done so by now.
    tokio::time::sleep(Duration::from_millis(LEASE_SECS * 3000)).await;
    assert_eq!(
        approval_state(&second.thread(&http, &thread).await, &i.interrupt_id),
        "Awaiting",
        "the second process settled the first one's live question"
    );
    let answer = contact_answer(&i.interrupt_id, &key);
    let path = format!("/v1/threads/{thread}/resume");
    let there = second.post(&http, &path, answer.clone()).await;
    assert_eq!(there.status().as_u16(), 409);
    let body: Value = there.json().await.unwrap();
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|e| e.contains("another running turnstile process")),
        "{body}"
    );
    assert_eq!(body["table"], "approval", "{body}");
    assert_eq!(body["row_id"], "answered-elsewhere", "{body}");
    let r = first.post(&http, &path, answer).await;
    assert_eq!(
        r.status().as_u16(),
        200,
        "the first process takes the answer"
    );
    let frames = read_all(r).await;
    assert!(is_done(&frames), "{frames:?}");
    assert_eq!(tools.notifications().len(), 1, "sent once");
    second.kill();
    first.kill();
    tools.shutdown().await;
}
