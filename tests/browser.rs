//! The chat page in headless Chromium.
//!
//! - Against the real server: the honest count on the card, narrowing to a
//!   complete card, no frame violation, a reload that renders the stored
//!   thread; then the two-step turn in English and Korean (plan → search
//!   card, plan step 2 → get_panorama detail card → answer), live and after
//!   a reload. Driven by tests/browser/e2e.mjs.
//! - Against streams that break the frame table: the page names the broken
//!   row and renders nothing of the stream after it. A stub in front of the
//!   real server answers the message route with hand-made SSE and passes
//!   every other request (the page, the frame table, threads) through.
//!   Driven by tests/browser/violations.mjs.
//!
//! Needs `chromium` (`TURNSTILE_CHROMIUM`) and `node` 20+ (`NODE`), so every
//! test is `#[ignore = "needs Chromium and node: …"]`; run with
//! `--include-ignored`, a missing one fails it (ADR 0015). `scripts/test-deps`
//! installs Debian's chromium (as root).

use crate::common;

use std::process::Output;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use common::server::{databases, TestServer};
use serde_json::{json, Map, Value};
use turnstile::wire::{Citation, Delta, Done, Frame, Start, ToolCall, ToolResult};

/// What drives the page: Chromium and node; fails the test without them.
struct Browser {
    chromium: String,
    node: String,
}

fn browser() -> Browser {
    Browser {
        chromium: common::needs::chromium(),
        node: common::needs::node(),
    }
}

/// Runs one driver script under node and asserts that every check passed.
async fn drive(browser: &Browser, script: &str, args: &[&str]) -> Output {
    let run = tokio::process::Command::new(&browser.node)
        .arg("--experimental-websocket")
        .arg(script)
        .args(args)
        .env("TURNSTILE_CHROMIUM", &browser.chromium)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(90), run)
        .await
        .expect("the browser check finishes")
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "browser check {script} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[tokio::test]
#[ignore = "needs Chromium and node: scripts/test-deps, run with --include-ignored"]
async fn the_chat_page_in_chromium() {
    let browser = browser();
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::builder()
        .database(&databases(&tmp)[0])
        .start()
        .await;
    let shot = tmp.path().join("page.png");
    let base = format!("{}/", s.base);
    let shot_arg = shot.to_string_lossy().into_owned();
    drive(&browser, "tests/browser/e2e.mjs", &[&base, &shot_arg]).await;
    assert!(shot.exists(), "the screenshot was taken");
    for lang in ["en", "ko"] {
        let two_step = tmp.path().join(format!("page-two-step-{lang}.png"));
        assert!(two_step.exists(), "the two-step turn ({lang}) was captured");
    }
    s.pass();
}

/// The page's Content-Security-Policy holds in a real browser: the page's
/// own script and style run (a turn renders its card, nothing is reported),
/// while an inline script or event handler injected into the document does
/// not run and is reported as a violation. Driven by tests/browser/csp.mjs.
#[tokio::test]
#[ignore = "needs Chromium and node: scripts/test-deps, run with --include-ignored"]
async fn the_page_runs_under_its_csp_and_injected_script_does_not() {
    let browser = browser();
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::builder()
        .database(&databases(&tmp)[0])
        .start()
        .await;
    let base = format!("{}/", s.base);
    drive(&browser, "tests/browser/csp.mjs", &[&base]).await;
    s.pass();
}

/// The narration guard in the page: a model that lies on purpose (the
/// demo's `--fault lying-model`) has each lie replaced; the page marks the
/// replacement with a tooltip naming the row, and no lie reaches the DOM.
#[tokio::test]
#[ignore = "needs Chromium and node: scripts/test-deps, run with --include-ignored"]
async fn the_page_marks_sentences_the_guard_replaced() {
    let browser = browser();
    let tmp = tempfile::tempdir().unwrap();
    let model = Arc::new(turnstile_demo::lying::Lying::new(
        turnstile_demo::Scripted::demo(),
    ));
    let s = TestServer::builder()
        .database(&databases(&tmp)[0])
        .model(model)
        .start()
        .await;
    let base = format!("{}/", s.base);
    // The lies `Lying` tells over the safety search's lower-bound card.
    drive(
        &browser,
        "tests/browser/guard.mjs",
        &[
            &base,
            "There are exactly 10",
            "Here are all 189",
            "that is the complete list",
        ],
    )
    .await;
    s.pass();
}

/// The page's frame check must stop a stream that breaks the `frame` table:
/// it names the broken row (with the table's reason) and renders nothing of
/// the stream from that frame on. The page, the table and threads are the
/// real server's; only the message route answers with hand-made streams.
#[tokio::test]
#[ignore = "needs Chromium and node: scripts/test-deps, run with --include-ignored"]
async fn the_page_stops_a_stream_that_breaks_the_frame_table() {
    let browser = browser();
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::builder()
        .database(&databases(&tmp)[0])
        .start()
        .await;
    let stub = Stub {
        real: s.base.clone(),
        http: reqwest::Client::new(),
        answered: Arc::new(AtomicUsize::new(0)),
    };
    let app = Router::new()
        .route("/v1/threads/{id}/messages", post(bad_stream))
        .fallback(pass_through)
        .with_state(stub.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    let task = tokio::spawn(async move { axum::serve(listener, app).await });

    drive(&browser, "tests/browser/violations.mjs", &[&base]).await;
    assert_eq!(
        stub.answered.load(Ordering::SeqCst),
        3,
        "every scenario's stream came from the stub"
    );
    task.abort();
    s.pass();
}

#[derive(Clone)]
struct Stub {
    real: String,
    http: reqwest::Client,
    answered: Arc<AtomicUsize>,
}

/// The SSE body the page receives for one message: the frames in order,
/// numbered from 1, all in the body even after the broken one (the page,
/// not the server, must stop). Each frame is a typed `wire::Frame`: its
/// `event:` is `Frame::kind` and its `data:` `Frame::data`, so a renamed
/// field or kind breaks this test's build, not its meaning.
fn sse(frames: &[Frame]) -> String {
    frames
        .iter()
        .enumerate()
        .map(|(i, f)| format!("id: {}\nevent: {}\ndata: {}\n\n", i + 1, f.kind(), f.data()))
        .collect()
}

/// Answers a message with the stream its text names.
async fn bad_stream(State(st): State<Stub>, Json(body): Json<Value>) -> Response {
    const TURN: &str = "stub-turn";
    let start = Frame::Start(Start {
        thread_id: "stub".into(),
        turn_id: TURN.into(),
    });
    let done = Frame::Done(Done {
        turn_id: TURN.into(),
    });
    let delta = |t: &str| {
        Frame::Delta(Delta {
            text: t.into(),
            replaced: None,
            capabilities: vec![],
        })
    };
    let call = Frame::ToolCall(ToolCall {
        call_id: format!("{TURN}-1"),
        tool: "search_photos".into(),
        server: Some("demo".into()),
        args: Map::new(),
    });
    let result = Frame::ToolResult(ToolResult {
        call_id: format!("{TURN}-1"),
        tool: "search_photos".into(),
        ok: true,
        summary: "1 items".into(),
        shape: None,
        conflict: None,
    });
    let citation = Frame::Citation(Citation {
        source: "demo".into(),
        items: vec![json!({"id": "STUB-1", "label": "STUB-CARD-ITEM"})],
        displayed: 1,
        total: Some(1),
        total_is_lower_bound: false,
        has_more: false,
        grade: "EXACT".into(),
        complete: true,
        narrowed: false,
        stitch: None,
    });
    let frames = match body["text"].as_str().unwrap_or("") {
        // Row delta-before-start; everything after it would be a legal
        // stream, so a page that only skipped the bad frame would render it.
        "delta-before-start" => vec![
            delta("EARLY-DELTA-TEXT"),
            start,
            call,
            result,
            citation,
            delta("LATE-DELTA-TEXT"),
            done,
        ],
        // Row delta-after-terminal.
        "delta-after-done" => vec![
            start,
            delta("Shown before done."),
            done,
            delta("AFTER-DONE-TEXT"),
            citation,
        ],
        // Row duplicate-terminal.
        "done-after-done" => vec![
            start,
            delta("Answered once."),
            done.clone(),
            done,
            delta("AFTER-SECOND-DONE-TEXT"),
            call,
        ],
        other => {
            return (
                StatusCode::BAD_REQUEST,
                format!("the stub has no stream for {other:?}"),
            )
                .into_response()
        }
    };
    st.answered.fetch_add(1, Ordering::SeqCst);
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        sse(&frames),
    )
        .into_response()
}

/// Every other request goes to the real server unchanged.
async fn pass_through(State(st): State<Stub>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body: Bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut out = st
        .http
        .request(parts.method, format!("{}{path}", st.real))
        .body(body);
    for name in [header::CONTENT_TYPE, header::ACCEPT] {
        if let Some(v) = parts.headers.get(&name) {
            out = out.header(name, v);
        }
    }
    let resp = out.send().await.expect("the real server answers");
    let status = resp.status();
    let content_type = resp.headers().get(header::CONTENT_TYPE).cloned();
    let bytes = resp.bytes().await.expect("the real server's body");
    let mut r = (status, bytes).into_response();
    if let Some(ct) = content_type {
        r.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    r
}
