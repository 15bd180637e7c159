//! The chat server end to end: real HTTP/SSE, the real demo MCP server, a
//! real database (SQLite; a check that also runs on PostgreSQL has an
//! `…_on_postgres` twin, ignored unless `--include-ignored`, where it needs
//! TURNSTILE_TEST_DATABASE_URL: ADR 0015). Every frame is checked against
//! the frame table as it arrives.

use crate::common;

use std::time::Duration;

use common::frames::{
    answer, assert_done, citation, count, error, has, is_done, plan, stable, tool_results,
    FrameKind,
};
use common::server::{databases, Slow, TestServer};
use common::thread::{Record, RecordKind};
use serde_json::json;
use turnstile::judge::CountGrade;

const DEMO_PROMPTS: &[(&str, &str)] = &[
    ("safety-floor-3", "show safety issues on floor 3"),
    ("safety-floor-3-ko", "3층 안전 지적사항 보여줘"),
    ("photos-1999", "show photos from 1999"),
    ("twelve-photos-floor-2", "show me 12 photos of floor 2"),
    ("hello", "hello"),
];

#[tokio::test]
async fn demo_prompts_stream_frames_in_table_order() {
    let tmp = tempfile::tempdir().unwrap();
    demo_prompts_stream_frames_in_table_order_on(&databases(&tmp)[0]).await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL: set TURNSTILE_TEST_DATABASE_URL, run with --include-ignored"]
async fn demo_prompts_stream_frames_in_table_order_on_postgres() {
    demo_prompts_stream_frames_in_table_order_on(&common::needs::postgres()).await;
}

async fn demo_prompts_stream_frames_in_table_order_on(db: &str) {
    let s = TestServer::builder().database(db).start().await;
    let thread = s.new_thread().await;
    for (name, prompt) in DEMO_PROMPTS {
        let frames = s.say(&thread, prompt).await;
        assert_done(&frames, prompt);
        common::snapshot_settings()
            .bind(|| insta::assert_snapshot!(format!("turn-{name}"), stable(&frames)));
    }
    s.pass();
}

#[tokio::test]
async fn the_safety_card_is_honest() {
    let s = TestServer::builder().start().await;
    let thread = s.new_thread().await;
    let frames = s.say(&thread, "show safety issues on floor 3").await;
    let c = citation(&frames).expect("a card");
    assert_eq!(c.grade, CountGrade::LowerBound.as_str());
    assert_eq!(c.displayed, 10);
    assert_eq!(c.total, Some(189));
    assert!(c.total_is_lower_bound);
    assert!(c.has_more);
    let text = answer(&frames);
    assert!(text.contains("At least 189"), "{text}");
    assert!(text.contains("These 10"), "{text}");
    // "show me 12" answered with 12 is never called all when more exist.
    let frames = s.say(&thread, "show me 12 photos of floor 2").await;
    let c = citation(&frames).expect("a card");
    assert_eq!(c.displayed, 12);
    assert!(!c.complete);
    assert!(!answer(&frames).to_lowercase().contains("all of them"));
    s.pass();
}

#[tokio::test]
async fn threads_persist_and_survive_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    threads_persist_and_survive_a_restart_on(&databases(&tmp)[0]).await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL: set TURNSTILE_TEST_DATABASE_URL, run with --include-ignored"]
async fn threads_persist_and_survive_a_restart_on_postgres() {
    threads_persist_and_survive_a_restart_on(&common::needs::postgres()).await;
}

async fn threads_persist_and_survive_a_restart_on(db: &str) {
    let s = TestServer::builder().database(db).start().await;
    let thread = s.new_thread().await;
    s.say(&thread, "show safety issues on floor 3").await;
    s.pass_and_stop().await;

    let s = TestServer::builder().database(db).start().await;
    use RecordKind as K;
    assert_eq!(
        s.records(&thread).await,
        [
            K::User,
            K::Plan,
            K::Licence,
            K::Call,
            K::Result,
            K::Card,
            K::Text,
            K::Answer
        ]
    );
    let v = s.thread(&thread).await;
    let Record::Card { citation: card, .. } = &v.messages[5].body else {
        panic!("the sixth record is the card: {:?}", v.kinds());
    };
    assert_eq!(card.grade, "LOWER_BOUND");
    // The thread goes on after the restart.
    let frames = s.say(&thread, "3층 안전 지적사항 보여줘").await;
    assert_done(&frames, "after the restart");
    s.pass();
}

#[tokio::test]
async fn bad_requests_get_clear_4xx() {
    let s = TestServer::builder().start().await;
    let thread = s.new_thread().await;
    let msg = format!("/v1/threads/{thread}/messages");
    let cases: Vec<(&str, String, u16, &str)> = vec![
        ("malformed json", "{\"text\": ".into(), 400, "EOF"),
        ("missing field", "{}".into(), 400, "text"),
        ("wrong type", "{\"text\": 3}".into(), 400, "text"),
        (
            "unknown field",
            "{\"text\": \"hi\", \"colour\": 1}".into(),
            400,
            "colour",
        ),
        ("empty text", "{\"text\": \"  \"}".into(), 400, "empty"),
        (
            "oversize body",
            format!("{{\"text\": \"{}\"}}", "x".repeat(70_000)),
            413,
            "",
        ),
        (
            "oversize text",
            format!("{{\"text\": \"{}\"}}", "x".repeat(9_000)),
            413,
            "8000",
        ),
    ];
    for (name, body, status, reason) in cases {
        let (got, v) = s.post_raw(&msg, &body).await;
        assert_eq!(got, status, "{name}: {v}");
        assert!(
            v["error"].as_str().unwrap_or("").contains(reason),
            "{name}: {v}"
        );
    }
    let (got, v) = s
        .post_raw("/v1/threads/no-such-thread/messages", "{\"text\": \"hi\"}")
        .await;
    assert_eq!((got, v["error"].as_str()), (404, Some("thread not found")));
    assert_eq!(s.get("/v1/threads/no-such-thread").await.0, 404);
    assert_eq!(s.get("/v1/tables/no-such-table").await.0, 404);
    let (got, _) = s
        .post_raw(
            &format!("/v1/threads/{thread}/resume"),
            "{\"interrupt_id\": \"x\", \"decision\": \"approve\"}",
        )
        .await;
    // No interrupt has that id: the approval table's row for a decision
    // on nothing.
    assert_eq!(got, 404);
    // Nothing was lost: the thread still works.
    assert!(is_done(&s.say(&thread, "hello").await));
    s.pass();
}

#[tokio::test]
async fn host_context_is_bounded_and_marked() {
    let s = TestServer::builder().start().await;
    let thread = s.new_thread().await;
    let visible: Vec<String> = (0..80).map(|i| format!("ANN-{i}")).collect();
    let body = json!({
        "text": "show quality issues on this floor",
        "context": {"project": "x".repeat(500), "floor": 4, "visible_items": visible}
    });
    let frames = s.turn(&thread, body).await;
    let plan = plan(&frames).expect("a plan");
    assert_eq!(
        plan.steps[0].args.get("floor"),
        Some(&json!(4)),
        "floor came from the host context"
    );
    assert!(
        answer(&frames).contains("may be truncated"),
        "{}",
        answer(&frames)
    );
    let v = s.thread(&thread).await;
    let Record::User {
        context: Some(ctx), ..
    } = &v.messages[0].body
    else {
        panic!(
            "the first record is the user's, with its context: {:?}",
            v.messages[0]
        );
    };
    assert_eq!(ctx.project.as_deref().map(str::len), Some(200));
    assert_eq!(ctx.visible_items.len(), 50);
    assert_eq!(ctx.truncated, ["project", "visible_items"]);
    s.pass();
}

#[tokio::test]
async fn a_tool_server_that_is_down_is_a_failed_call_the_model_cannot_answer_from() {
    let mut s = TestServer::builder().start().await;
    let thread = s.new_thread().await;
    s.demo.take().unwrap().shutdown().await;
    let frames = s.say(&thread, "show safety issues on floor 3").await;
    // The failed call is judged like any result: the planner is asked again
    // (it could correct itself), and the answer says the tool failed.
    let results = tool_results(&frames);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].tool, "search_photos");
    assert!(!results[0].ok);
    assert!(!has(&frames, FrameKind::Citation));
    assert!(
        answer(&frames).contains("The search_photos tool failed"),
        "{}",
        answer(&frames)
    );
    assert_done(&frames, "the failed call");
    // The thread stays usable.
    assert!(is_done(&s.say(&thread, "hello").await));
    use RecordKind as K;
    assert_eq!(
        s.records(&thread).await,
        [
            K::User,
            K::Plan,
            K::Licence,
            K::Call,
            K::Result,
            K::Text,
            K::Answer,
            K::User,
            K::Text,
            K::Answer
        ]
    );
    s.pass();
}

#[tokio::test]
async fn a_client_that_disconnects_cancels_the_turn_and_loses_nothing_persisted() {
    // The scripted model, answering slowly: a turn that is still narrating
    // when the client hangs up.
    let s = TestServer::builder()
        .model(Slow::answering(Duration::from_millis(100)))
        .start()
        .await;
    let thread = s.new_thread().await;
    // Read until the answer has begun (≈ 20 words at 100 ms each remain),
    // then hang up mid-turn.
    let open = s
        .turn_until(&thread, "show safety issues on floor 3", FrameKind::Delta)
        .await;
    let seen = open.frames().to_vec();
    // One turn at a time per thread.
    let (status, v) = s
        .post_raw(
            &format!("/v1/threads/{thread}/messages"),
            "{\"text\": \"hello\"}",
        )
        .await;
    assert_eq!(status, 409, "{v}");
    drop(open);
    // Long enough for the whole answer, had the turn gone on.
    tokio::time::sleep(Duration::from_millis(3000)).await;
    let v = s.thread(&thread).await;
    let records = v.kinds();
    // Every frame the client saw had its record committed first; the turn
    // was cancelled: the cut is marked, no answer was written after the
    // client left, and at most the batch in flight when it left follows.
    use RecordKind as K;
    assert_eq!(
        records[..7],
        [
            K::User,
            K::Plan,
            K::Licence,
            K::Call,
            K::Result,
            K::Card,
            K::Text
        ],
        "after seeing {:?}",
        common::frames::kinds(&seen)
    );
    assert!(
        matches!(v.records().last(), Some(Record::Cut(c)) if c.cause.is_none()),
        "{records:?}"
    );
    assert!(!v.has(K::Answer), "{records:?}");
    let deltas_seen = count(&seen, FrameKind::Delta);
    let texts = v.count(K::Text);
    assert!(
        texts <= deltas_seen + 1,
        "{texts} text records, {deltas_seen} deltas seen"
    );
    // No orphan holds the thread: a new turn is accepted and finishes.
    assert!(is_done(&s.say(&thread, "hello").await));
    s.pass();
}

/// A store that fails mid-turn: the step that could not be saved is never
/// sent, and the client gets an `error` frame in table order, not a cut
/// stream.
#[tokio::test]
async fn a_store_failure_mid_turn_ends_the_stream_with_an_error_in_order() {
    let s = TestServer::builder()
        .model(Slow::answering(Duration::from_millis(100)))
        .start()
        .await;
    let thread = s.new_thread().await;
    let open = s
        .turn_until(&thread, "show safety issues on floor 3", FrameKind::Delta)
        .await;
    // The store goes away while the answer is being written: `done` cannot
    // be made durable.
    s.store.close().await;
    // Every frame in table order, the end fired as `close`.
    let frames = open.finish().await;
    let err = error(&frames).unwrap_or_else(|| panic!("{:?}", common::frames::kinds(&frames)));
    assert!(err.message.contains("storage"), "{err:?}");
    assert!(
        !has(&frames, FrameKind::Done),
        "a done that was not saved must not be sent"
    );
    s.pass();
}

#[tokio::test]
async fn the_page_and_tables_are_served() {
    let s = TestServer::builder().start().await;
    let page = s
        .http
        .get(format!("{}/", s.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("/v1/tables/frame"));
    let (status, tables) = s.get("/v1/tables").await;
    assert_eq!(status, 200);
    let names: Vec<&str> = tables
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names.len(),
        turnstile::protocols::BUILTIN.len(),
        "{names:?}"
    );
    assert!(
        names.contains(&"hold"),
        "the approval policy is served: {names:?}"
    );
    // The harness table is the tests' own: not compiled in, not served.
    assert!(!names.contains(&"harness"), "{names:?}");
    s.pass();
}

/// Issue 34 item 8: the losers of a race for a busy thread, a message or a
/// decision alike, get a 409 that names its row (`ownership`,
/// `thread-busy`), like every other refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_losers_of_a_race_for_a_busy_thread_are_refused_by_a_named_row() {
    let s = TestServer::builder()
        .model(Slow::planning(Duration::from_secs(2)))
        .start()
        .await;
    let thread = s.new_thread().await;
    let mut running = s.open_turn(&thread, "photos of floor 2").await;
    let tries = (0..6).map(|i| {
        let (path, body) = match i % 2 {
            0 => ("messages", json!({"text": format!("photos of floor {i}")})),
            _ => (
                "resume",
                json!({"interrupt_id": "int-x", "decision": "approve"}),
            ),
        };
        s.http
            .post(format!("{}/v1/threads/{thread}/{path}", s.base))
            .json(&body)
            .send()
    });
    let mut unnamed = Vec::new();
    for r in futures::future::join_all(tries).await {
        let r = r.unwrap();
        let status = r.status().as_u16();
        let v: serde_json::Value = r.json().await.unwrap();
        if status != 409 || v["table"] != "ownership" || v["row_id"] != "thread-busy" {
            unnamed.push(format!("{status} {v}"));
        }
    }
    assert!(
        unnamed.is_empty(),
        "refusals without their row: {unnamed:#?}"
    );
    running.until(common::frames::FrameKind::Done).await;
    s.pass();
}
