//! Draining before a stop (issue 39 §2), through the real HTTP path and a
//! real process: `POST /v1/admin/drain` with the operator key (or SIGTERM
//! to `turnstile demo`) turns `/readyz` 503 at once, refuses new turns and
//! decisions with 503 and `Retry-After`, and lets every open stream run to
//! its `done`, stored as shown.

use std::time::Duration;

use crate::common::frames::{answer, FrameKind};
use crate::common::server::{Slow, TestServer};
use turnstile::http::{AdminKey, HttpConfig};
use turnstile::wire::Frame;

const KEY: &str = "operator-key-0123456789";

#[tokio::test]
async fn a_drain_refuses_new_turns_and_lets_fifty_open_streams_finish() {
    let s = TestServer::builder()
        .model(Slow::answering(Duration::from_millis(100)))
        .http(HttpConfig {
            admin_key: Some(AdminKey::new(KEY)),
            drain: Duration::from_secs(60),
            ..HttpConfig::default()
        })
        .start()
        .await;
    // 50 turns, each answering when the drain begins.
    let mut threads = Vec::new();
    for _ in 0..50 {
        threads.push(s.new_thread().await);
    }
    let opened = futures::future::join_all(
        threads
            .iter()
            .map(|t| s.turn_until(t, "show safety issues on floor 3", FrameKind::Delta)),
    )
    .await;
    let drain = |key: &'static str| {
        s.http
            .post(format!("{}/v1/admin/drain", s.base))
            .header("x-turnstile-admin-key", key)
            .send()
    };
    let wrong = drain("not-the-operator-key").await.unwrap();
    assert_eq!(wrong.status(), 401);
    assert_eq!(
        s.http
            .get(format!("{}/readyz", s.base))
            .send()
            .await
            .unwrap()
            .status(),
        200,
        "a refused drain drains nothing"
    );
    let r = drain(KEY).await.unwrap();
    assert_eq!(r.status(), 202);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["open_turns"], 50, "{v}");
    // At once: not ready, and no new turn or decision.
    let ready = s
        .http
        .get(format!("{}/readyz", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    let other = s.new_thread().await;
    let refused = s
        .http
        .post(format!("{}/v1/threads/{other}/messages", s.base))
        .json(&serde_json::json!({"text": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "5");
    let (status, v) = s
        .post_raw(
            &format!("/v1/threads/{other}/resume"),
            r#"{"interrupt_id": "i-1", "decision": "approve"}"#,
        )
        .await;
    assert_eq!(status, 503, "{v}");
    // Every open stream runs to its `done`, and what it showed is stored.
    let finished = futures::future::join_all(opened.into_iter().map(|o| o.finish())).await;
    for (thread, frames) in threads.iter().zip(&finished) {
        assert!(matches!(frames.last(), Some(Frame::Done(_))), "{frames:?}");
        let v = s.thread(thread).await;
        let stored = v.answer_text().expect("the answer was stored");
        assert_eq!(answer(frames), stored);
    }
    s.pass();
}

#[tokio::test]
async fn without_an_operator_key_there_is_no_drain_route() {
    let s = TestServer::builder().start().await;
    let r = s
        .http
        .post(format!("{}/v1/admin/drain", s.base))
        .header("x-turnstile-admin-key", KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    s.pass();
}

/// A real `turnstile demo` in `dir` with `args`, and its base URL.
async fn demo(dir: &std::path::Path, args: &[&str]) -> (tokio::process::Child, String) {
    let (child, lines) = crate::common::demo::spawn(dir, args).await;
    let base = crate::common::demo::url(&lines);
    (child, base.trim_end_matches('/').to_string())
}

/// Starts a turn on a new thread of `base`; its response, still open.
async fn open_turn(http: &reqwest::Client, base: &str) -> (String, reqwest::Response) {
    let id = crate::common::remote::new_thread(http, base, None).await;
    let r = http
        .post(format!("{base}/v1/threads/{id}/messages"))
        .header("origin", base)
        .json(&serde_json::json!({"text": "show safety issues on floor 3"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    (id, r)
}

async fn sigterm(demo: &tokio::process::Child) {
    crate::common::remote::sigterm(demo.id().expect("the demo runs"));
}

/// SIGTERM to a real `turnstile demo` mid-answer: `/readyz` is 503 at
/// once, the open streams end with `done`, and the process exits 0 when
/// they have.
#[tokio::test]
async fn sigterm_drains_a_real_process() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut demo, base) = demo(tmp.path(), &["--model-delay-ms", "200"]).await;
    let http = reqwest::Client::builder()
        .cookie_store(true)
        .build()
        .unwrap();
    let mut streams = Vec::new();
    for _ in 0..3 {
        let (_, r) = open_turn(&http, &base).await;
        streams.push(tokio::spawn(async move { r.bytes().await.unwrap() }));
    }
    // The answers are streaming (one delta every 200 ms) when the stop comes.
    tokio::time::sleep(Duration::from_millis(600)).await;
    sigterm(&demo).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let ready = http.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 503, "a draining process is not ready");
    for s in streams {
        let body = s.await.unwrap();
        let frames = crate::common::frames::read_frames(&body);
        assert!(matches!(frames.last(), Some(Frame::Done(_))), "{frames:?}");
    }
    let status = tokio::time::timeout(Duration::from_secs(20), demo.wait())
        .await
        .expect("the process stops once its turns have ended")
        .unwrap();
    assert!(status.success(), "{status:?}");
}

/// A turn that cannot finish within the window (one delta every 1.5 s, a
/// 1 s window): its stream ends with an `error` frame that says to send
/// again, in the frame table's order; the process exits 0; the next process
/// on the same database finds the turn stored as cut and the thread free.
#[tokio::test]
async fn what_cannot_finish_in_the_window_is_cut_told_and_the_thread_freed() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("drain.db");
    let db = db.to_string_lossy().into_owned();
    let args = [
        "--model-delay-ms",
        "1500",
        "--drain-secs",
        "1",
        "--db",
        db.as_str(),
    ];
    let (mut first, base) = demo(tmp.path(), &args).await;
    let http = reqwest::Client::builder()
        .cookie_store(true)
        .build()
        .unwrap();
    let (thread, r) = open_turn(&http, &base).await;
    let stream = tokio::spawn(async move { r.bytes().await.unwrap() });
    tokio::time::sleep(Duration::from_millis(800)).await;
    sigterm(&first).await;
    let frames = crate::common::frames::read_frames(&stream.await.unwrap());
    match frames.last() {
        Some(Frame::Error(e)) => assert!(
            e.message.contains("send your message again"),
            "{}",
            e.message
        ),
        other => panic!("the stream ends with an error that says to retry: {other:?}"),
    }
    let status = tokio::time::timeout(Duration::from_secs(20), first.wait())
        .await
        .expect("the process stops after the window")
        .unwrap();
    assert!(status.success(), "{status:?}");
    // The next process, on the same database.
    let (mut second, base) = demo(tmp.path(), &args).await;
    let v = crate::common::remote::thread_json(&http, &base, &thread).await;
    let kinds: Vec<&str> = v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["body"]["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"cut"), "{kinds:?}");
    assert!(!kinds.contains(&"answer"), "{kinds:?}");
    // Its lease was released: the thread takes a turn at once.
    let again = http
        .post(format!("{base}/v1/threads/{thread}/messages"))
        .header("origin", &base)
        .json(&serde_json::json!({"text": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 200);
    drop(again);
    second.kill().await.ok();
}
