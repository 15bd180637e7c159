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
//! - The export → confirm → capability flow (docs/export.md, "The page"):
//!   the delivered answer ends at a download button whose link serves a
//!   ZIP, also after a reload; the lying model's links are never buttons;
//!   hand-made streams show that only a URL its frame lists in
//!   `capabilities` is a button, other http(s) URLs plain anchors and other
//!   schemes text. Driven by tests/browser/export.mjs.
//! - An approval card approved once in the browser. Driven by
//!   tests/browser/approval.mjs.
//! - A Korean thread's cards in Korean, and a new message that withdraws
//!   the cards still waiting, live and after a reload. Driven by
//!   tests/browser/withdraw_ko.mjs.
//! - "Show more": a listing card extended in place by its continuations,
//!   or lowered by one that found the data changed, live and after a
//!   reload. Driven by tests/browser/show_more.mjs.
//! - A question a tool's server asks (a form, a URL to open), answered in
//!   the page against the demo tools on both MCP revisions, and every kind
//!   of field against a hand-made question. Driven by
//!   tests/browser/questions.mjs.
//! - The page as a panel in the demo's host apps (issue 38): driven by
//!   tests/browser/embed.mjs against a real `turnstile demo`; the host's
//!   token through the panel against `turnstile demo --auth`, by
//!   tests/browser/embed_auth.mjs; the minimal host page of docs/embedding.md,
//!   as written there, from an origin of its own, by tests/browser/embed_doc.mjs.
//! - A long call its server makes a task: one progress line under the
//!   call's row, updated in place, replaced by its result; a task that
//!   ended after its turn is told under its call after a reload; a
//!   hand-made stream's progress (every status, markup in the server's
//!   words, a stream that ends mid-task). Driven by tests/browser/tasks.mjs.
//!
//! Needs `chromium` (`TURNSTILE_CHROMIUM`) and `node` 20+ (`NODE`), so every
//! test is `#[ignore = "needs Chromium and node: …"]`; run with
//! `--include-ignored`, a missing one fails it (ADR 0015). `scripts/test-deps`
//! installs Debian's chromium (as root).

use crate::common;

use std::process::Output;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use common::server::{databases, TestServer};
use futures::StreamExt;
use serde_json::{json, Map, Value};
use turnstile::wire::{
    ActionPreview, CapabilityLink, Citation, Delta, Done, Error, Frame, InputAsked, InputPrompt,
    Interrupt, Progress, Replaced, Start, ToolCall, ToolResult,
};

/// What drives the page: Chromium and node; fails the test without them.
pub(crate) struct Browser {
    chromium: String,
    node: String,
}

pub(crate) fn browser() -> Browser {
    Browser {
        chromium: common::needs::chromium(),
        node: common::needs::node(),
    }
}

/// Runs one driver script under node and asserts that every check passed.
pub(crate) async fn drive(browser: &Browser, script: &str, args: &[&str]) -> Output {
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

/// Starts `server` on a database of its own and drives the page at its
/// base URL with `script`, given `mode` before the URL.
async fn drive_page(server: common::server::Builder, script: &str, mode: &[&str]) {
    let browser = browser();
    let tmp = tempfile::tempdir().unwrap();
    let s = server.database(&databases(&tmp)[0]).start().await;
    let base = format!("{}/", s.base);
    let args: Vec<&str> = mode.iter().copied().chain([base.as_str()]).collect();
    drive(&browser, script, &args).await;
    s.pass();
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
    drive_page(TestServer::builder(), "tests/browser/csp.mjs", &[]).await;
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

/// The safety checks in the page: a message with a credential is refused by
/// code, marked with the guardrail table's row and the check in its
/// tooltip; after a reload the credential is nowhere in the page.
#[tokio::test]
#[ignore = "needs Chromium and node: scripts/test-deps, run with --include-ignored"]
async fn the_page_marks_what_a_safety_check_refused() {
    let browser = browser();
    let guardrails = turnstile::agent::Guardrails::built_in(true, &["project falcon".into()])
        .expect("the built-in checks");
    let s = TestServer::builder().guardrails(guardrails).start().await;
    let base = format!("{}/", s.base);
    drive(
        &browser,
        "tests/browser/guardrail.mjs",
        &[&base, "hunter2hunter2"],
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
    let routes = Router::new().route("/v1/threads/{id}/messages", post(bad_stream));
    drive_stub(
        routes,
        "tests/browser/violations.mjs",
        None,
        3,
        "every scenario's stream came from the stub",
    )
    .await;
}

/// The export flow in the page: "download all my lecture files" (English
/// and Korean) ends at one download button, named by the capability's label,
/// whose link serves a ZIP once the export is built; a reload renders the
/// same button; a user's `javascript:` link stays text. The delivered turn
/// is captured; `TURNSTILE_SCREENSHOT_DOCS=1` copies it to
/// docs/export-delivered.png.
#[tokio::test]
#[ignore = "needs Chromium and node: scripts/test-deps, run with --include-ignored"]
async fn the_export_flow_ends_at_a_download_button_in_chromium() {
    let browser = browser();
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::builder()
        .database(&databases(&tmp)[0])
        .start()
        .await;
    let shot = tmp.path().join("export-delivered.png");
    let base = format!("{}/", s.base);
    let shot_arg = shot.to_string_lossy().into_owned();
    drive(
        &browser,
        "tests/browser/export.mjs",
        &["export", &base, &shot_arg],
    )
    .await;
    assert!(shot.exists(), "the delivered turn was captured");
    if std::env::var("TURNSTILE_SCREENSHOT_DOCS").as_deref() == Ok("1") {
        std::fs::copy(&shot, "docs/export-delivered.png")
            .expect("the screenshot is copied to docs/");
    }
    s.pass();
}

/// The lying model (`--fault lying-model`): on a thread with no delivery it
/// writes a made-up download link; whatever of it the narration guard lets
/// through, the page never shows it as a download button. Its batched
/// confirm is refused and the export still delivers a button, which "show me
/// the link again" shows again.
#[tokio::test]
#[ignore = "needs Chromium and node: scripts/test-deps, run with --include-ignored"]
async fn a_link_the_model_wrote_is_never_a_download_button() {
    let model = Arc::new(turnstile_demo::lying::Lying::new(
        turnstile_demo::Scripted::demo(),
    ));
    let server = TestServer::builder().model(model);
    drive_page(server, "tests/browser/export.mjs", &["lying"]).await;
}

/// The page's link allowlist against hand-made streams: only a URL that its
/// own frame lists in `capabilities` becomes a download button (named by the
/// label, "link expired" once past its expiry), one it lists in `links` a
/// plain anchor; every other http(s) URL is inert text without its query
/// (issue 33), other schemes stay text, a replaced sentence keeps its
/// marker. The page, the table and threads are the real server's.
#[tokio::test]
#[ignore = "needs Chromium and node: scripts/test-deps, run with --include-ignored"]
async fn the_page_makes_buttons_only_of_listed_capabilities() {
    let routes = Router::new().route("/v1/threads/{id}/messages", post(link_stream));
    drive_stub(
        routes,
        "tests/browser/export.mjs",
        Some("links"),
        1,
        "the stream came from the stub",
    )
    .await;
}

/// Human approval in the page: "reserve seat 12 at 15:00" stops at a card
/// that asks "Reserve seat 12 at 15:00?" with the tool names on the line
/// below; one click on Approve runs `confirm_action` once and the answer says it is
/// done; the card is locked, a second approve is refused by the approval
/// table's row, and a reload shows the card decided.
#[tokio::test]
#[ignore = "needs Chromium and node: scripts/test-deps, run with --include-ignored"]
async fn an_approval_card_approves_once_in_chromium() {
    drive_page(TestServer::builder(), "tests/browser/approval.mjs", &[]).await;
}

/// Issue 34: the page's own words follow the thread's language, and a new
/// message withdraws what waits. A Korean reservation, in a browser that
/// asks for English, stops at a card whose title, buttons and captions are
/// Korean; a new message marks it withdrawn at once (its buttons send
/// nothing), the new turn's listing card speaks Korean and a line under the
/// message says what it withdrew and what became of the cancel; a Korean
/// question card is withdrawn the same way, never "denied"; a reload
/// shows the same. Driven by tests/browser/withdraw_ko.mjs.
#[tokio::test]
#[ignore = "needs Chromium and node: scripts/test-deps, run with --include-ignored"]
async fn a_korean_thread_labels_its_cards_in_korean_and_a_new_message_withdraws_them() {
    drive_page(TestServer::builder(), "tests/browser/withdraw_ko.mjs", &[]).await;
}

/// "Show more" in the page: "show photos of floor 3" shows 10 of exactly
/// 613; each click on the card's button appends the next 10 rows to the
/// same card and its count line follows (20, then 30), one button stays,
/// no row repeats; a reload renders the card with all 30 rows. Driven by
/// tests/browser/show_more.mjs.
#[tokio::test]
#[ignore = "needs Chromium and node: scripts/test-deps, run with --include-ignored"]
async fn show_more_extends_the_same_card_in_chromium() {
    drive_page(
        TestServer::builder(),
        "tests/browser/show_more.mjs",
        &["pages"],
    )
    .await;
}

/// A continuation that finds the data changed (the demo's `CursorDrift`:
/// 613 → 616 between turns) appends nothing: the same card keeps its 10
/// rows, its count line and grade are lowered, its button is gone, and the
/// turn says why; a reload shows the same. The browser asks for Korean,
/// the thread is English: the button and the message it sends follow the
/// thread ("Show more").
#[tokio::test]
#[ignore = "needs Chromium and node: scripts/test-deps, run with --include-ignored"]
async fn a_drifted_continuation_lowers_the_card_in_chromium() {
    let server = TestServer::builder().faults(vec![turnstile_demo::Fault::CursorDrift]);
    drive_page(server, "tests/browser/show_more.mjs", &["drift"]).await;
}

/// A long call in the page: "compile the site report for tower-a" is one
/// `compile_site_report` call, which the demo's tool server makes a task of
/// four steps. While it runs, one progress line under the call's row shows
/// the server's message as its words ("step 1 of 4", then later steps),
/// updated in place; the result replaces it and the answer follows; a
/// reload shows the result and no progress line. The report ran once.
/// Then a client that leaves after the first progress frame: a reload shows
/// the last report marked as still running when the turn ended, and once
/// the task has ended on its own, a line saying so under the call's row.
/// That second call ran once too, and nothing was cancelled.
#[tokio::test]
#[ignore = "needs Chromium and node: scripts/test-deps, run with --include-ignored"]
async fn a_task_shows_progress_in_the_page() {
    let browser = browser();
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::builder()
        .database(&databases(&tmp)[0])
        .start()
        .await;
    let base = format!("{}/", s.base);
    drive(&browser, "tests/browser/tasks.mjs", &["live", &base]).await;
    let reports = s
        .demo
        .as_ref()
        .expect("the demo tool server runs")
        .reports();
    assert_eq!(
        reports.runs(),
        1,
        "the report ran once: the call went out once and its task was polled"
    );
    drive(&browser, "tests/browser/tasks.mjs", &["left", &base]).await;
    assert_eq!(
        reports.runs(),
        2,
        "the second message's report ran once: a client that left sends nothing again"
    );
    assert_eq!(reports.cancels(), 0, "a client that left cancels nothing");
    assert_eq!(reports.running(), 0, "every report's work has ended");
    s.pass();
}

/// Progress in a hand-made stream, paced like a task: each status
/// (`working`, `input_required`, `cancelling`) in the page's words, the
/// server's message as text even when it holds markup and a Markdown link,
/// no line for a call that already has its result, and a stream that ends
/// before the task did leaves the last report marked so. The page, the
/// table and threads are the real server's.
#[tokio::test]
#[ignore = "needs Chromium and node: scripts/test-deps, run with --include-ignored"]
async fn a_tasks_progress_from_a_hand_made_stream_stays_text_in_chromium() {
    let routes = Router::new().route("/v1/threads/{id}/messages", post(progress_stream));
    drive_stub(
        routes,
        "tests/browser/tasks.mjs",
        Some("stub"),
        1,
        "the stream came from the stub",
    )
    .await;
}

/// A question of the demo's tool server in the page, on `revision`:
/// "notify the site contact about PANO-003-0611" stops at a form card;
/// nothing is sent until the required fields are filled, an email the
/// server refuses (422) leaves the card waiting with every value, the good
/// answer is sent once and the resumed turn shows below; a decline is one
/// too. "open the permit portal for HW-12" shows the URL as text with its
/// domain, and nothing fetches it until "Open and agree" opens it in a new
/// tab. The demo recorded exactly the one notification the form sent, and
/// its portal page was fetched once: by that tab.
async fn a_question_is_answered_in_the_page(revision: turnstile::mcp::Revision) {
    let browser = browser();
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::builder()
        .database(&databases(&tmp)[0])
        .revision(revision)
        .start()
        .await;
    let base = format!("{}/", s.base);
    drive(&browser, "tests/browser/questions.mjs", &["demo", &base]).await;
    let demo = s.demo.as_ref().expect("the demo tool server runs");
    let told: Vec<_> = demo
        .notifications()
        .into_iter()
        .map(|n| (n.issue_id, n.name, n.email, n.role, n.urgent))
        .collect();
    assert_eq!(
        told,
        [(
            "PANO-003-0611".to_string(),
            "Ana Kim".to_string(),
            "ana.kim@example.com".to_string(),
            "safety officer".to_string(),
            true
        )],
        "one notification, as the form sent it (the refused and the declined answers told nobody)"
    );
    assert_eq!(
        demo.permit_visits(),
        1,
        "the portal was fetched once: by the tab the click opened"
    );
    s.pass();
}

#[tokio::test]
#[ignore = "needs Chromium and node: scripts/test-deps, run with --include-ignored"]
async fn a_question_card_is_answered_once_in_chromium() {
    a_question_is_answered_in_the_page(turnstile::mcp::Revision::Sessions).await;
}

#[tokio::test]
#[ignore = "needs Chromium and node: scripts/test-deps, run with --include-ignored"]
async fn a_question_card_is_answered_once_on_2026_07_28_in_chromium() {
    a_question_is_answered_in_the_page(turnstile::mcp::Revision::Stateless).await;
}

/// Every kind of form field, against a hand-made question: each property
/// rendered by its type (text, url, date, date-time, integer and number
/// with their bounds, boolean, enum with enumNames, oneOf, multi-select),
/// the server's words and name kept as text, a punycode URL warned about;
/// the browser's own checks stop a bad answer, the answer sent carries
/// each value in its schema's type; the stub's 422 marks the field it
/// names and keeps the values, its 409 shows the card decided. The page,
/// the table and threads are the real server's.
#[tokio::test]
#[ignore = "needs Chromium and node: scripts/test-deps, run with --include-ignored"]
async fn the_page_renders_every_kind_of_question_field() {
    let routes = Router::new()
        .route("/v1/threads/{id}/messages", post(question_stream))
        .route("/v1/threads/{id}/resume", post(question_resume));
    drive_stub(
        routes,
        "tests/browser/questions.mjs",
        Some("stub"),
        3,
        "one question streamed, and two answers reached the stub (the browser stopped the bad one)",
    )
    .await;
}

/// A stored thread's questions after a reload, one per way the approval
/// table ends one (outcome unknown, expired, withdrawn, answered and
/// failed, cancelled): each card says its state and what the user
/// answered, and none can be answered again. The thread is the stub's; the
/// page and the table are the real server's.
#[tokio::test]
#[ignore = "needs Chromium and node: scripts/test-deps, run with --include-ignored"]
async fn a_stored_question_shows_how_it_ended_in_chromium() {
    let routes = Router::new().route("/v1/threads/{id}", axum::routing::get(stored_questions));
    drive_stub(
        routes,
        "tests/browser/questions.mjs",
        Some("stored"),
        1,
        "the thread came from the stub",
    )
    .await;
}

/// The stub's stored thread: six questions, each ended another way
/// (withdrawn by a new message and voided among them).
async fn stored_questions(
    State(st): State<Stub>,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Response {
    if id != "stub-thread" {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({"error": "thread not found"})),
        )
            .into_response();
    }
    let question = |interrupt_id: &str| {
        let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
        let mut body = serde_json::to_value(Interrupt {
            interrupt_id: interrupt_id.into(),
            tool: "ask".into(),
            args: Map::new(),
            action: ActionPreview {
                tool: "ask".into(),
                args: Map::new(),
                action_id: None,
                prepared: Map::new(),
            },
            summary: "stub asks you something.".into(),
            detail: String::new(),
            choices: vec!["accept".into(), "decline".into(), "cancel".into()],
            expires_at: 1_764_000_000_000,
            input: Some(InputPrompt {
                server: "stub".into(),
                requests: vec![InputAsked {
                    key: "form".into(),
                    mode: "form".into(),
                    message: "Who?".into(),
                    schema: Some(schema),
                    url: None,
                    domain: None,
                    punycode: false,
                }],
            }),
        })
        .unwrap();
        body["kind"] = json!("interrupt");
        body
    };
    let mut messages = Vec::new();
    let mut say = |turn: &str, role: &str, body: Value| {
        let seq = messages.len() + 1;
        messages.push(json!({"seq": seq, "turn_id": turn, "role": role, "body": body}));
    };
    let states = [
        ("q-unknown", "Unknown", None),
        ("q-expired", "Expired", None),
        ("q-withdrawn", "Withdrawn", None),
        ("q-voided", "Voided", None),
        ("q-failed", "Failed", Some("accept")),
        ("q-cancelled", "Completed", Some("cancel")),
    ];
    for (id, _, decision) in states {
        let turn = format!("turn-{id}");
        say(
            &turn,
            "user",
            json!({"kind": "user", "text": format!("ask {id}")}),
        );
        say(&turn, "assistant", question(id));
        if let Some(decision) = decision {
            say(
                &turn,
                "user",
                json!({"kind": "decision", "interrupt_id": id, "decision": decision, "state": "Confirming"}),
            );
            say(
                &turn,
                "assistant",
                json!({"kind": "answer", "text": format!("After {id}.")}),
            );
        }
    }
    let approvals: Vec<Value> = states
        .iter()
        .map(|(id, state, _)| json!({"interrupt_id": id, "turn_id": format!("turn-{id}"), "state": state, "expires_at": 1_764_000_000_000_i64}))
        .collect();
    st.answered.fetch_add(1, Ordering::SeqCst);
    Json(json!({"thread": {"id": id}, "messages": messages, "turns": [], "approvals": approvals, "licence_audit": []}))
        .into_response()
}

/// The one stream of the question check: a call whose server asks for a
/// form with every kind of field and a punycode URL.
async fn question_stream(State(st): State<Stub>, Json(body): Json<Value>) -> Response {
    const TURN: &str = "stub-turn";
    if body["text"].as_str() != Some("ask everything") {
        return (
            StatusCode::BAD_REQUEST,
            "the stub only asks \"ask everything\"",
        )
            .into_response();
    }
    let schema = json!({
        "type": "object",
        "properties": {
            "nick": {"type": "string", "title": "Nickname", "minLength": 3, "maxLength": 20, "default": "crane"},
            "site": {"type": "string", "title": "Site page", "format": "uri"},
            "day": {"type": "string", "title": "Day", "format": "date", "default": "2026-12-03"},
            "at": {"type": "string", "title": "Start", "format": "date-time"},
            "count": {"type": "integer", "title": "Count", "minimum": 1, "maximum": 10, "default": 2},
            "ratio": {"type": "number"},
            // Names a page must not trip over: a form method, a prototype key.
            "addEventListener": {"type": "string"},
            "__proto__": {"type": "string"},
            "agree": {"type": "boolean", "title": "Agree", "description": "Tick to agree"},
            "level": {"type": "string", "title": "Level", "enum": ["lo", "hi"], "enumNames": ["Low", "High"]},
            "crew": {"type": "string", "title": "Crew", "oneOf": [{"const": "c1", "title": "Crew one"}, {"const": "c2", "title": "Crew two"}]},
            "tags": {"type": "array", "title": "Sides", "items": {"anyOf": [
                {"const": "North", "title": "North"}, {"const": "South", "title": "South"}, {"const": "East", "title": "East"}]},
                "maxItems": 2, "default": ["South"]},
        },
        "required": ["count", "agree"],
    });
    let args = Map::from_iter([("what".to_string(), json!("everything"))]);
    let frames = vec![
        Frame::Start(Start {
            thread_id: "stub".into(),
            turn_id: TURN.into(),
        }),
        Frame::ToolCall(ToolCall {
            call_id: format!("{TURN}-1"),
            tool: "ask_everything".into(),
            server: Some("stub-server".into()),
            args: args.clone(),
        }),
        Frame::ToolResult(ToolResult {
            call_id: format!("{TURN}-1"),
            tool: "ask_everything".into(),
            ok: false,
            summary: "input_required".into(),
            shape: None,
            conflict: None,
            refusal: None,
        }),
        Frame::Interrupt(Interrupt {
            interrupt_id: "stub-question".into(),
            tool: "ask_everything".into(),
            args: args.clone(),
            action: ActionPreview {
                tool: "ask_everything".into(),
                args,
                action_id: None,
                prepared: Map::new(),
            },
            summary: "stub-server asks you something before ask_everything can go on.".into(),
            detail: String::new(),
            choices: vec!["accept".into(), "decline".into(), "cancel".into()],
            expires_at: i64::try_from(
                (SystemTime::now() + Duration::from_secs(3600))
                    .duration_since(UNIX_EPOCH)
                    .unwrap()
                    .as_millis(),
            )
            .unwrap(),
            input: Some(InputPrompt {
                server: "stub-server <b>x</b>".into(),
                requests: vec![
                    InputAsked {
                        key: "form".into(),
                        mode: "form".into(),
                        message: "Fill this in <img src=x data-pwned=1> and [click here](https://evil.example/) **now**".into(),
                        schema: Some(schema),
                        url: None,
                        domain: None,
                        punycode: false,
                    },
                    InputAsked {
                        key: "portal".into(),
                        mode: "url".into(),
                        message: "Log in at https://evil.example/login".into(),
                        schema: None,
                        url: Some("https://xn--pple-43d.example/login?next=/home".into()),
                        domain: Some("xn--pple-43d.example".into()),
                        punycode: true,
                    },
                ],
            }),
        }),
        Frame::Done(Done {
            turn_id: TURN.into(),
        }),
    ];
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

/// The stub's answers to the question's answers: the first does not fit
/// (422, naming a field), the second comes after it was decided (409).
async fn question_resume(State(st): State<Stub>, Json(body): Json<Value>) -> Response {
    assert_eq!(body["interrupt_id"], "stub-question", "{body}");
    match st.answered.fetch_add(1, Ordering::SeqCst) {
        1 => (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"error": "`answers.form`: `count`: expected a number of at most 2"})),
        )
            .into_response(),
        _ => (
            StatusCode::CONFLICT,
            Json(json!({"error": "the question was answered already", "table": "approval", "row_id": "second-answer"})),
        )
            .into_response(),
    }
}

/// Serves `routes` in front of the real server `s` (everything else passes
/// through to it): the stub, its base URL, and its task.
/// A page test against a stub in front of the real server: `routes`
/// answer in its place, everything else passes through. `script` runs in
/// `mode` (if any) against the stub; the stub answered `answered` times.
async fn drive_stub(
    routes: Router<Stub>,
    script: &str,
    mode: Option<&str>,
    answered: usize,
    why: &str,
) {
    let browser = browser();
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::builder()
        .database(&databases(&tmp)[0])
        .start()
        .await;
    let (stub, base, task) = serve_stub(&s, routes).await;
    let args: Vec<&str> = mode.into_iter().chain([base.as_str()]).collect();
    drive(&browser, script, &args).await;
    assert_eq!(stub.answered.load(Ordering::SeqCst), answered, "{why}");
    task.abort();
    s.pass();
}

async fn serve_stub(
    s: &TestServer,
    routes: Router<Stub>,
) -> (Stub, String, tokio::task::JoinHandle<std::io::Result<()>>) {
    let stub = Stub {
        real: s.base.clone(),
        http: crate::common::browser(),
        answered: Arc::new(AtomicUsize::new(0)),
    };
    let app = routes.fallback(pass_through).with_state(stub.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    let task = tokio::spawn(async move { axum::serve(listener, app).await });
    (stub, base, task)
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

/// The one stream of the stub's task (tests/browser/tasks.mjs, mode
/// `stub`): a quick call, a late progress frame for it, then a long call
/// whose progress frames come 400 ms apart, and an error before its
/// result. Each frame's pause comes before it.
async fn progress_stream(State(st): State<Stub>, Json(body): Json<Value>) -> Response {
    const TURN: &str = "stub-turn";
    if body["text"].as_str() != Some("long call") {
        return (
            StatusCode::BAD_REQUEST,
            "the stub only streams \"long call\"",
        )
            .into_response();
    }
    let call = |n: u32, tool: &str| {
        Frame::ToolCall(ToolCall {
            call_id: format!("{TURN}-{n}"),
            tool: tool.into(),
            server: Some("stub-server".into()),
            args: Map::new(),
        })
    };
    let progress = |n: u32, tool: &str, status: &str, message: Option<&str>, polls, elapsed_ms| {
        Frame::Progress(Progress {
            call_id: format!("{TURN}-{n}"),
            tool: tool.into(),
            status: status.into(),
            message: message.map(Into::into),
            polls,
            elapsed_ms,
        })
    };
    let pause = Duration::from_millis(400);
    let frames = vec![
        (
            Duration::ZERO,
            Frame::Start(Start {
                thread_id: "stub".into(),
                turn_id: TURN.into(),
            }),
        ),
        (Duration::ZERO, call(1, "quick_tool")),
        (
            Duration::ZERO,
            Frame::ToolResult(ToolResult {
                call_id: format!("{TURN}-1"),
                tool: "quick_tool".into(),
                ok: true,
                summary: "done".into(),
                shape: None,
                conflict: None,
                refusal: None,
            }),
        ),
        // After its result: the page shows no progress for it.
        (
            Duration::ZERO,
            progress(1, "quick_tool", "working", Some("LATE-REPORT"), 1, 100),
        ),
        (Duration::ZERO, call(2, "long_tool")),
        (
            Duration::ZERO,
            progress(
                2,
                "long_tool",
                "working",
                Some("<img src=x data-pwned=1> step [1](https://evil.example/) of 2"),
                1,
                300,
            ),
        ),
        (
            pause,
            progress(
                2,
                "long_tool",
                "input_required",
                Some("Waiting for the site office"),
                3,
                900,
            ),
        ),
        (pause, progress(2, "long_tool", "cancelling", None, 5, 1500)),
        (
            pause,
            Frame::Error(Error {
                message: "the stub stops here".into(),
                tool: None,
                table: None,
                row_id: None,
            }),
        ),
    ];
    st.answered.fetch_add(1, Ordering::SeqCst);
    let chunks = frames.into_iter().enumerate().map(|(i, (pause, f))| {
        let text = format!("id: {}\nevent: {}\ndata: {}\n\n", i + 1, f.kind(), f.data());
        (pause, text)
    });
    let body = futures::stream::iter(chunks).then(|(pause, text)| async move {
        tokio::time::sleep(pause).await;
        Ok::<_, std::convert::Infallible>(Bytes::from(text))
    });
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        axum::body::Body::from_stream(body),
    )
        .into_response()
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
            links: vec![],
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
        refusal: None,
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
        listing: None,
        shown_before: None,
        more: false,
        links: Vec::new(),
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

/// `t` as RFC 3339 UTC, whole seconds (as the demo's tools write expiries).
fn rfc3339(t: SystemTime) -> String {
    let secs = i64::try_from(t.duration_since(UNIX_EPOCH).unwrap().as_secs()).unwrap();
    let d = turnstile_demo::data::Date::from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        d.year,
        d.month,
        d.day,
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// The one stream of the link check (tests/browser/export.mjs, mode
/// `links`): links of every kind, each delta with the capabilities it lists.
/// The stub is no validator: the page must trust exactly what the frame
/// lists, and nothing else.
async fn link_stream(State(st): State<Stub>, Json(body): Json<Value>) -> Response {
    const TURN: &str = "stub-turn";
    if body["text"].as_str() != Some("links") {
        return (StatusCode::BAD_REQUEST, "the stub only streams \"links\"").into_response();
    }
    let now = SystemTime::now();
    let cap = |url: &str, label: &str, expires: SystemTime| CapabilityLink {
        url: url.into(),
        label: label.into(),
        expires_at: Some(rfc3339(expires)),
    };
    let delta = |text: &str, capabilities: Vec<CapabilityLink>| {
        Frame::Delta(Delta {
            text: text.into(),
            replaced: None,
            capabilities,
            links: vec![],
        })
    };
    let hour = now + Duration::from_secs(3600);
    let j9 = "https://files.example/api/lms/exports/J9/download?token=abc";
    let j8 = "https://files.example/api/lms/exports/J8/download?token=x";
    let j7 = "https://soon.example/api/lms/exports/J7/download?token=y";
    let j4 = "https://old.example/api/lms/exports/J4/download?token=z";
    let frames = vec![
        Frame::Start(Start {
            thread_id: "stub".into(),
            turn_id: TURN.into(),
        }),
        // The guide is of an origin the operator allows (`links`); the
        // other URL is listed by no frame.
        Frame::Delta(Delta {
            text: "Docs: [the guide](https://docs.example.com/guide?token=SECRET1) and \
                   https://example.org/a/b?token=SECRET2. "
                .into(),
            replaced: None,
            capabilities: vec![],
            links: vec!["https://docs.example.com/guide?token=SECRET1".into()],
        }),
        delta(
            "Not links: javascript:alert(1) [x](javascript:alert(1)) [d](data:text/html,hi) \
             [v](vbscript:msgbox) [f](file:///etc/passwd) [r](/relative) [u](HTTPS:no-slashes. ",
            vec![],
        ),
        // Shaped like a delivery, listed by no frame.
        delta(
            "\n[Download lecture files](https://lms.example.com/api/lms/exports/EXP-1/download?token=guessed)",
            vec![],
        ),
        delta(
            &format!("\n[Download lecture files]({j9})"),
            vec![cap(j9, "Download lecture files", hour)],
        ),
        // The frame lists another URL than the one in its text.
        delta(
            "\n[Download lecture files](https://files.example/api/lms/exports/J3/download?token=other)",
            vec![cap(
                "https://files.example/api/lms/exports/J5/download?token=listed",
                "Download lecture files",
                hour,
            )],
        ),
        delta(
            &format!("\n[Old export]({j4})"),
            vec![cap(j4, "Old export", now - Duration::from_secs(60))],
        ),
        Frame::Delta(Delta {
            text: "The code's own sentence. ".into(),
            replaced: Some(Replaced {
                row_id: "stub-row".into(),
                why: "A sentence the stub says was replaced.".into(),
                claim: "count".into(),
                table: None,
                check: None,
            }),
            capabilities: vec![],
            links: vec![],
        }),
        delta("\nSplit: https://split.exa", vec![]),
        delta("mple.com/path?token=T now.", vec![]),
        // A listed URL that does not arrive whole in one frame.
        delta(
            "\n[Download lecture files](https://files.example/api/lms/exports/J8/do",
            vec![cap(j8, "Download lecture files", hour)],
        ),
        delta(
            "wnload?token=x)",
            vec![cap(j8, "Download lecture files", hour)],
        ),
        // Expires while the page shows it.
        delta(
            &format!("\n[강의 파일 받기]({j7})"),
            vec![cap(j7, "강의 파일 받기", now + Duration::from_secs(5))],
        ),
        Frame::Done(Done {
            turn_id: TURN.into(),
        }),
    ];
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

// ---------------------------------------------------------------------------
// The front ends' own clients in Chromium (issue 37 §5): the `useChat` page
// and the AG-UI page of docs/ai-sdk.md and docs/ag-ui.md, bundled here with
// esbuild from `tests/frontends/node_modules`, served by a stub in front of
// the real server (same origin: the session cookie is the page's), and
// driven through one search, one approval and one export. Screenshots go to
// `target/frontends/`.
// ---------------------------------------------------------------------------

/// Bundles `tests/frontends/{page}/{entry}` with esbuild; its JavaScript.
fn bundle(page: &str, entry: &str) -> String {
    let dir = common::needs::repo_dir().join("tests/frontends");
    let esbuild = common::needs::npm_file(&dir, ".bin/esbuild");
    let out = tempfile::tempdir().unwrap();
    let js = out.path().join("app.js");
    let run = std::process::Command::new(esbuild)
        .current_dir(&dir)
        .arg(format!("{page}/{entry}"))
        .args([
            "--bundle",
            "--format=esm",
            "--jsx=automatic",
            "--log-level=warning",
        ])
        .arg("--define:process.env.NODE_ENV=\"production\"")
        .arg(format!("--outfile={}", js.display()))
        .output()
        .expect("esbuild runs");
    assert!(
        run.status.success(),
        "esbuild: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    std::fs::read_to_string(js).unwrap()
}

async fn drive_front_end(page: &'static str, entry: &str) {
    let browser = browser();
    let js = bundle(page, entry);
    let html = std::fs::read_to_string(
        common::needs::repo_dir().join(format!("tests/frontends/{page}/index.html")),
    )
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::builder()
        .database(&databases(&tmp)[0])
        .start()
        .await;
    let routes: Router<Stub> = Router::new()
        .route(
            "/",
            axum::routing::get(move || async move { axum::response::Html(html) }),
        )
        .route(
            "/app.js",
            axum::routing::get(
                move || async move { ([(header::CONTENT_TYPE, "text/javascript")], js) },
            ),
        );
    let (_stub, base, task) = serve_stub(&s, routes).await;
    let shots = common::needs::repo_dir().join("target/frontends");
    std::fs::create_dir_all(&shots).unwrap();
    let shots = shots.display().to_string();
    let script = "tests/browser/frontend.mjs";
    drive(&browser, script, &[page, base.as_str(), shots.as_str()]).await;
    task.abort();
    s.pass();
}

#[tokio::test]
#[ignore = "needs Chromium, node and the front ends' npm packages: scripts/test-deps, run with --include-ignored"]
async fn a_use_chat_page_searches_approves_and_exports_in_chromium() {
    drive_front_end("usechat", "app.jsx").await;
}

#[tokio::test]
#[ignore = "needs Chromium, node and the front ends' npm packages: scripts/test-deps, run with --include-ignored"]
async fn an_ag_ui_page_searches_approves_and_exports_in_chromium() {
    drive_front_end("agui", "app.js").await;
}

/// Issue 38: the chat page as a panel in the demo's two host apps, against
/// a real `turnstile demo` (its host pages, its origin list, its reconnect
/// grace; the scripted model at a real model's pace, so that a connection
/// can be cut mid-answer). The site viewer mounts the panel and its floor
/// scopes the next answer; a citation click dispatches the exact deep-link
/// payload with no navigation and no reload; a foreign origin's messages are
/// ignored; the console sends names only and gets the routing part; a cut
/// connection is reconnected and the answer shown once, whole; every
/// forbidden row of tables/panel.ron is refused by the page's own runner.
/// Screenshots before and after a click land in target/embedding/. Driven
/// by tests/browser/embed.mjs.
#[tokio::test]
#[ignore = "needs Chromium and node: scripts/test-deps, run with --include-ignored"]
async fn the_panel_in_its_host_apps_in_chromium() {
    let browser = browser();
    let tmp = tempfile::tempdir().unwrap();
    let (mut demo, lines) = common::demo::spawn(tmp.path(), &["--model-delay-ms", "150"]).await;
    let base = common::demo::url(&lines);
    let shots = common::needs::repo_dir().join("target/embedding");
    std::fs::create_dir_all(&shots).unwrap();
    let shot_dir = shots.to_string_lossy().into_owned();
    drive(&browser, "tests/browser/embed.mjs", &[&base, &shot_dir]).await;
    for name in [
        "host-before-click",
        "host-after-click",
        "console-after-click",
    ] {
        assert!(
            shots.join(format!("{name}.png")).exists(),
            "the e2e run took {name}.png"
        );
    }
    demo.kill().await.ok();
}

/// Issue 38: the viewer's token (`getAuthToken`) through the panel, against
/// `turnstile demo --auth`: the host's tier claim is shown and decides
/// nothing; anonymous, a basic tool never runs; signed in in the viewer as
/// a basic user, the panel carries the token and the tool runs, on a thread
/// that is the token's subject's; the token is in no document or URL.
/// Driven by tests/browser/embed_auth.mjs.
#[tokio::test]
#[ignore = "needs Chromium and node: scripts/test-deps, run with --include-ignored"]
async fn the_panel_carries_the_hosts_token_in_chromium() {
    let browser = browser();
    let tmp = tempfile::tempdir().unwrap();
    let (mut demo, lines) = common::demo::spawn(tmp.path(), &["--auth"]).await;
    let base = common::demo::url(&lines);
    let token = lines
        .iter()
        .find_map(|l| {
            l.trim_start()
                .strip_prefix("demo user ana (tiers basic): --token ")
        })
        .unwrap_or_else(|| panic!("the demo prints ana's token: {lines:#?}"))
        .trim()
        .to_string();
    drive(&browser, "tests/browser/embed_auth.mjs", &[&base, &token]).await;
    demo.kill().await.ok();
}

/// Issue 38: the minimal host page of docs/embedding.md, taken from the
/// document as written (only the server's origin filled in), served from
/// an origin of its own, as a real host is, and listed in the server's
/// `http.frame_ancestors`: it mounts the panel across origins, its floor
/// scopes the next search, and a click gives its `dispatchCitation` the
/// routing part of the cited item's link. Driven by
/// tests/browser/embed_doc.mjs.
#[tokio::test]
#[ignore = "needs Chromium and node: scripts/test-deps, run with --include-ignored"]
async fn the_documented_host_page_mounts_the_panel_from_another_origin_in_chromium() {
    let browser = browser();
    let tmp = tempfile::tempdir().unwrap();
    let host = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host_origin = format!("http://{}", host.local_addr().unwrap());
    let s = TestServer::builder()
        .database(&databases(&tmp)[0])
        .http(turnstile::http::HttpConfig {
            frame_ancestors: vec![host_origin.clone()],
            ..turnstile::http::HttpConfig::default()
        })
        .start()
        .await;
    let doc = std::fs::read_to_string(common::needs::repo_dir().join("docs/embedding.md")).unwrap();
    let page = doc
        .split("```html\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("docs/embedding.md shows a host page")
        .replace("https://assistant.example.com", &s.base);
    assert!(page.contains(&s.base), "the page names the server");
    let app = Router::new().route(
        "/",
        axum::routing::get(move || {
            let page = page.clone();
            async move { axum::response::Html(page) }
        }),
    );
    let task = tokio::spawn(async move { axum::serve(host, app).await });
    let host_url = format!("{host_origin}/");
    drive(
        &browser,
        "tests/browser/embed_doc.mjs",
        &[&host_url, &s.base],
    )
    .await;
    task.abort();
    s.pass();
}
