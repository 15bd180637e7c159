//! A long call a tool server makes a task (issue 22 §4, MCP tasks
//! extension), through HTTP/SSE, the real demo MCP server (rmcp's
//! `TaskManager`) and SQLite, on both revisions: the turn polls `tasks/get`
//! at the server's interval, shows `progress` frames between the call and
//! its result, and settles as `tables/task.ron` says. The demo's own
//! counters prove the work ran once and how often it was polled.

use std::time::{Duration, Instant};

use crate::common;

use common::frames::{is_done, kinds_without_deltas, stable, tool_results, FrameKind};
use common::server::TestServer;
use common::thread::{Record, RecordKind};
use serde_json::Value;
use turnstile::mcp::Revision;
use turnstile::wire::{Frame, Progress};
use turnstile_demo::reports::{POLL_INTERVAL_MS, STEPS};
use turnstile_demo::DemoServer;

const REPORT: &str = "compile the site report for tower-a";

fn demo(s: &TestServer) -> &DemoServer {
    s.demo.as_ref().expect("the demo tool server runs")
}

fn progress(frames: &[Frame]) -> Vec<&Progress> {
    frames
        .iter()
        .filter_map(|f| match f {
            Frame::Progress(p) => Some(p),
            _ => None,
        })
        .collect()
}

/// The thread's stored view until `done` says so, or panics after 20 s.
async fn thread_until(s: &TestServer, thread: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v = s.thread_json(thread).await;
        if done(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "never settled: {v:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn task_state(thread: &Value) -> Option<&str> {
    thread["tasks"][0]["state"].as_str()
}

/// The call becomes a task; each step's status message is shown once, in
/// order, between the call and its result; the result is the report, and
/// the answer says so. The work ran once; it was polled at the server's
/// interval (not faster, not once per second); the task is stored as
/// Completed, without its id.
async fn a_long_call_is_followed_with_progress(revision: Revision) {
    common::logs::capture();
    let s = TestServer::builder().revision(revision).start().await;
    let t = s.new_thread().await;
    let started = Instant::now();
    let frames = s.say(&t, REPORT).await;
    let took = started.elapsed();
    assert!(is_done(&frames), "{}", stable(&frames));
    let kinds = kinds_without_deltas(&frames);
    let call = kinds
        .iter()
        .position(|k| *k == FrameKind::ToolCall)
        .unwrap();
    let result = kinds
        .iter()
        .position(|k| *k == FrameKind::ToolResult)
        .unwrap();
    let shown: Vec<usize> = (kinds.iter().enumerate())
        .filter(|(_, k)| **k == FrameKind::Progress)
        .map(|(i, _)| i)
        .collect();
    assert!(shown.iter().all(|i| call < *i && *i < result), "{kinds:?}");
    let messages: Vec<String> = progress(&frames)
        .iter()
        .map(|p| p.message.clone().unwrap_or_default())
        .collect();
    let expected: Vec<String> = (STEPS.iter().enumerate())
        .map(|(n, what)| format!("step {} of {}: {what}", n + 1, STEPS.len()))
        .collect();
    // Each message shown once, in the steps' order; a step lasts more than
    // two poll intervals, so a loaded machine may miss one, not most.
    let mut rest = expected.iter();
    assert!(
        messages.iter().all(|m| rest.any(|e| e == m)),
        "{messages:?} is not in the order of {expected:?}"
    );
    assert!(messages.len() >= 2, "{}", stable(&frames));
    assert!(progress(&frames).iter().all(|p| p.status == "working"));
    let r = &tool_results(&frames)[0];
    assert!(r.ok, "{}", stable(&frames));
    let text = common::frames::answer(&frames);
    assert!(text.contains("site report for tower-a"), "{text}");

    let reports = demo(&s).reports();
    assert_eq!(reports.runs(), 1, "the work ran once");
    assert_eq!(demo(&s).tool_calls("compile_site_report"), 1);
    // Polled at the server's 250 ms: never sooner after the last poll
    // (the server's clock), and not at the client's own 1 s default.
    let gaps = reports.poll_gaps();
    let interval = Duration::from_millis(POLL_INTERVAL_MS);
    assert!(gaps.len() >= 2, "{gaps:?} (took {took:?})");
    assert!(
        gaps.iter()
            .all(|g| *g >= interval - Duration::from_millis(10)),
        "a poll sooner than the server's interval: {gaps:?}"
    );
    assert!(
        gaps.iter().any(|g| *g < Duration::from_millis(900)),
        "never polled at the server's interval: {gaps:?}"
    );
    let thread = s.thread_json(&t).await;
    assert_eq!(task_state(&thread), Some("Completed"), "{thread:#}");
    assert_eq!(thread["tasks"][0]["tool"], "compile_site_report");
    assert!(
        thread["turns"].to_string().contains("task-completed"),
        "the task machine's rows are stored: {thread:#}"
    );
    // The server's task id is stored (a restart follows it by that id),
    // and is in no frame, no record the client reads, and no log line.
    let stored = s.store.tasks(&t).await.unwrap();
    let id = &stored[0].task_id;
    assert!(id.len() >= 16, "{id}");
    let raw = format!("{frames:?}{thread}");
    assert!(!raw.contains(id.as_str()), "the task id reached a client");
    assert!(
        !common::logs::text().contains(id.as_str()),
        "the task id was logged"
    );
    s.pass();
}

/// The client leaves while the task runs: the turn is cut, the task is
/// followed on in the background, and its end is appended to the turn
/// (`task_settled`), where a later turn's planner sees it. The work ran
/// once.
async fn a_client_that_leaves_does_not_lose_the_task(revision: Revision) {
    let s = TestServer::builder().revision(revision).start().await;
    a_client_that_leaves_does_not_lose_the_task_on(s).await;
}

/// The same on PostgreSQL, where the hand-off's swap and record are the
/// other backend's statements.
#[tokio::test]
#[ignore = "needs PostgreSQL: set TURNSTILE_TEST_DATABASE_URL, run with --include-ignored"]
async fn a_client_that_leaves_does_not_lose_the_task_on_postgres() {
    let s = TestServer::builder()
        .database(common::needs::postgres())
        .start()
        .await;
    a_client_that_leaves_does_not_lose_the_task_on(s).await;
}

async fn a_client_that_leaves_does_not_lose_the_task_on(s: TestServer) {
    let t = s.new_thread().await;
    let open = s.turn_until(&t, REPORT, FrameKind::Progress).await;
    drop(open);
    let thread = thread_until(&s, &t, |v| task_state(v) == Some("Completed")).await;
    assert_eq!(
        thread["tasks"][0]["outcome"]["text"],
        "the task ended, and the tool returned a result"
    );
    let view = thread_until(&s, &t, |v| {
        v["messages"].to_string().contains("task_settled")
    })
    .await;
    let records: Vec<Record> = view["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| Record::read(&m["body"]))
        .collect();
    let kinds: Vec<RecordKind> = records.iter().map(Record::kind).collect();
    assert!(kinds.contains(&RecordKind::Cut), "{kinds:?}");
    let settled = records
        .iter()
        .find_map(|r| match r {
            Record::TaskSettled {
                state,
                tool,
                result,
                ..
            } => Some((state, tool, result)),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        (settled.0.as_str(), settled.1.as_str()),
        ("Completed", "compile_site_report")
    );
    assert!(settled.2.is_some(), "the tool's result is kept with it");
    assert_eq!(demo(&s).reports().runs(), 1, "the work ran once");
    assert_eq!(
        demo(&s).tool_calls("compile_site_report"),
        1,
        "never re-sent"
    );
    s.pass();
}

/// A turn that waits less than the task takes asks the server to cancel
/// it (`deadline-asks-cancel`); the demo stops between two steps and says
/// `cancelled`. The call's result is outcome unknown, never "failed", and
/// nothing is sent again.
async fn a_task_that_outlasts_its_wait_is_cancelled(revision: Revision) {
    let limits = turnstile::agent::Limits {
        task_wait: Duration::from_millis(700),
        ..Default::default()
    };
    let s = TestServer::builder()
        .revision(revision)
        .limits(limits)
        .start()
        .await;
    let t = s.new_thread().await;
    let frames = s.say(&t, REPORT).await;
    assert!(is_done(&frames), "{}", stable(&frames));
    assert!(progress(&frames).iter().any(|p| p.status == "cancelling"));
    let r = &tool_results(&frames)[0];
    assert!(!r.ok);
    assert_eq!(r.summary, "outcome_unknown", "{}", stable(&frames));
    let reports = demo(&s).reports();
    assert_eq!(reports.cancels(), 1);
    assert_eq!(reports.runs(), 1);
    let thread = s.thread_json(&t).await;
    assert_eq!(task_state(&thread), Some("Cancelled"), "{thread:#}");
    let text = common::frames::answer(&frames);
    assert!(!text.contains("failed"), "{text}");
    s.pass();
}

crate::on_both_revisions!(
    a_long_call_is_followed_with_progress,
    a_client_that_leaves_does_not_lose_the_task,
    a_task_that_outlasts_its_wait_is_cancelled,
);
