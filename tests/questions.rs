//! A tool server's question as a durable interrupt (issue 22 §3, ADR 0025),
//! through HTTP/SSE, the real demo MCP server (rmcp) and SQLite, on both
//! revisions: on 2026-07-28 the demo answers the first call with an
//! `InputRequiredResult` and the answer re-sends it with the server's
//! `requestState`; on 2025-11-25 it sends `elicitation/create` inside the
//! open call. The demo's own record of notifications proves exactly once.

use std::net::SocketAddr;

use crate::common;

use common::frames::{answer, is_done, stable, tool_results};
use common::server::TestServer;
use serde_json::{json, Value};
use turnstile::mcp::Revision;
use turnstile::wire::{Frame, Interrupt};
use turnstile_demo::{DemoOptions, DemoServer, Fault};

fn interrupt(frames: &[Frame]) -> Option<&Interrupt> {
    frames.iter().find_map(|f| match f {
        Frame::Interrupt(i) => Some(i),
        _ => None,
    })
}

const NOTIFY: &str = "notify the site contact about PANO-003-0611";

fn contact() -> Value {
    json!({"contact": {"name": "Ana Kim", "email": "ana@example.com", "role": "safety officer"}})
}

fn demo(s: &TestServer) -> &DemoServer {
    s.demo.as_ref().expect("the demo tool server runs")
}

async fn server(revision: Revision, faults: Vec<Fault>) -> TestServer {
    TestServer::builder()
        .faults(faults)
        .revision(revision)
        .start()
        .await
}

/// Asks, and checks what the interrupt shows: the form, and never the
/// server's `requestState`.
async fn ask(s: &TestServer, thread: &str, revision: Revision) -> Interrupt {
    let frames = s.say(thread, NOTIFY).await;
    assert!(is_done(&frames), "{}", stable(&frames));
    let i = interrupt(&frames)
        .unwrap_or_else(|| panic!("no interrupt:\n{}", stable(&frames)))
        .clone();
    assert_eq!(i.tool, "notify_site_contact");
    assert_eq!(i.choices, ["accept", "decline", "cancel"]);
    let input = i.input.as_ref().expect("a question");
    assert_eq!(input.server, "demo");
    let form = &input.requests[0];
    assert_eq!(
        (form.key.as_str(), form.mode.as_str()),
        (expected_key(revision), "form")
    );
    assert!(form.message.contains("PANO-003-0611"), "{form:?}");
    let raw = format!("{frames:?}");
    assert!(!raw.contains("rs-"), "a requestState reached a frame");
    // The call asked; it did not answer: no result, nothing recorded.
    assert!(!tool_results(&frames)[0].ok);
    assert!(demo(s).notifications().is_empty());
    i
}

/// The key the question goes by: 2026-07-28 names its requests (the
/// demo's `contact`); 2025-11-25's one question inside the open call goes
/// by `elicitation`.
fn expected_key(revision: Revision) -> &'static str {
    match revision {
        Revision::Stateless => turnstile_demo::CONTACT_KEY,
        _ => turnstile::mcp::client::NESTED_KEY,
    }
}

fn answers_for(i: &Interrupt, content: Value) -> Value {
    let key = &i.input.as_ref().unwrap().requests[0].key;
    json!({ key.clone(): content["contact"].clone() })
}

async fn answered_once(revision: Revision) {
    common::logs::capture();
    let s = server(revision, vec![]).await;
    let t = s.new_thread().await;
    let i = ask(&s, &t, revision).await;
    // An answer that does not fit the form: 422, nothing decided.
    let bad =
        json!({"contact": {"name": "Ana", "email": "not-an-email", "role": "safety officer"}});
    let (status, body) = s
        .answer(&t, &i.interrupt_id, "accept", answers_for(&i, bad))
        .await
        .unwrap_err();
    assert_eq!(status, 422, "{body}");
    assert!(
        !body.to_string().contains("not-an-email"),
        "a refusal echoed the value: {body}"
    );
    let frames = s
        .answer(&t, &i.interrupt_id, "accept", answers_for(&i, contact()))
        .await
        .unwrap_or_else(|e| panic!("the answer is refused: {e:?}"));
    assert!(is_done(&frames), "{}", stable(&frames));
    let result = tool_results(&frames)
        .into_iter()
        .find(|r| r.tool == "notify_site_contact")
        .expect("the call's result");
    assert!(result.ok, "{}", stable(&frames));
    let sent = demo(&s).notifications();
    assert_eq!(sent.len(), 1, "one notification");
    assert_eq!(sent[0].email, "ana@example.com");
    let text = answer(&frames);
    assert!(!text.is_empty());
    // A second answer is refused by its row, and nothing is sent.
    let (status, body) = s
        .answer(&t, &i.interrupt_id, "accept", answers_for(&i, contact()))
        .await
        .unwrap_err();
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["row_id"], "second-answer-after-completion", "{body}");
    assert_eq!(demo(&s).notifications().len(), 1);
    let view = s.thread(&t).await;
    assert_eq!(view.approvals[0].state, "Completed");
    // Neither the server's state nor what the user typed is logged by
    // turnstile or rmcp.
    let logs = common::logs::text();
    for line in logs
        .lines()
        .filter(|l| l.contains(" turnstile::") || l.contains(" rmcp"))
    {
        assert!(!line.contains("rs-"), "a requestState was logged: {line}");
        assert!(
            !line.contains("ana@example.com"),
            "an answer was logged: {line}"
        );
    }
    s.pass();
}

async fn declined_or_cancelled(revision: Revision) {
    for (word, said) in [
        ("decline", "you declined the form"),
        ("cancel", "the request was cancelled"),
    ] {
        let s = server(revision, vec![]).await;
        let t = s.new_thread().await;
        let i = ask(&s, &t, revision).await;
        let frames = s
            .answer(&t, &i.interrupt_id, word, Value::Null)
            .await
            .unwrap_or_else(|e| panic!("{word}: refused: {e:?}"));
        assert!(is_done(&frames), "{word}: {}", stable(&frames));
        // The tool's own record says what became of it; code's sentence
        // says the answer went once.
        let text = answer(&frames);
        assert!(text.contains("Your answer was sent once"), "{word}: {text}");
        assert!(text.contains(said), "{word}: {text}");
        assert!(text.contains("Nobody was notified"), "{word}: {text}");
        assert!(demo(&s).notifications().is_empty(), "{word}: nothing sent");
        s.pass();
    }
}

crate::on_both_revisions!(answered_once, declined_or_cancelled);

/// A restart with a question pending. 2026-07-28: the interrupt holds all
/// the re-send needs, so the answer works after the restart, once.
/// 2025-11-25: the open call died with the process, so the question can
/// no longer be answered; it is settled as outcome unknown and the answer
/// is refused by that row. The demo server is the same across the restart.
#[tokio::test]
async fn a_restart_with_a_question_pending() {
    let tmp = tempfile::tempdir().unwrap();
    for (revision, survives) in [(Revision::Stateless, true), (Revision::Sessions, false)] {
        let db = common::server::sqlite_in(tmp.path(), &format!("{revision:?}.db"));
        let tools = DemoServer::start(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            DemoOptions {
                stateless: true,
                ..DemoOptions::default()
            },
        )
        .await
        .unwrap();
        let first = TestServer::builder()
            .database(&db)
            .demo(tools)
            .revision(revision)
            .start()
            .await;
        let t = first.new_thread().await;
        let i = ask(&first, &t, revision).await;
        let mut first = first;
        let tools = first.demo.take().expect("the demo server");
        first.pass();
        let second = TestServer::builder()
            .database(&db)
            .demo(tools)
            .revision(revision)
            .start()
            .await;
        let result = second
            .answer(&t, &i.interrupt_id, "accept", answers_for(&i, contact()))
            .await;
        if survives {
            let frames = result.unwrap_or_else(|e| panic!("{revision:?}: refused: {e:?}"));
            assert!(is_done(&frames), "{}", stable(&frames));
            assert_eq!(demo(&second).notifications().len(), 1, "{revision:?}: once");
            let (status, _) = second
                .answer(&t, &i.interrupt_id, "accept", answers_for(&i, contact()))
                .await
                .unwrap_err();
            assert_eq!(status, 409);
            assert_eq!(demo(&second).notifications().len(), 1);
        } else {
            let (status, body) = result.expect_err("a lost question cannot be answered");
            assert_eq!(status, 409, "{body}");
            assert_eq!(body["row_id"], "answer-while-unknown", "{body}");
            let view = second.thread(&t).await;
            assert_eq!(view.approvals[0].state, "Unknown", "outcome unknown");
            assert!(demo(&second).notifications().is_empty());
        }
        second.pass();
    }
}

/// A hostile `requestState` (over 1 MiB) is refused without a panic and
/// without being stored, shown or logged: the call fails, and the turn says
/// the tool failed. A form that asks for a password is never shown.
#[tokio::test]
async fn hostile_questions_are_refused() {
    common::logs::capture();
    let s = server(Revision::Stateless, vec![Fault::InputHugeState]).await;
    let t = s.new_thread().await;
    let frames = s.say(&t, NOTIFY).await;
    assert!(is_done(&frames), "{}", stable(&frames));
    assert!(interrupt(&frames).is_none(), "{}", stable(&frames));
    assert!(!tool_results(&frames)[0].ok);
    assert!(s.thread(&t).await.approvals.is_empty());
    let huge = "x".repeat(4096);
    assert!(
        !common::logs::text().contains(&huge),
        "the state was logged"
    );
    assert!(!format!("{frames:?}").contains(&huge));
    s.pass();

    for revision in [Revision::Stateless, Revision::Sessions] {
        let s = server(revision, vec![Fault::InputAsksSecret]).await;
        let t = s.new_thread().await;
        let frames = s.say(&t, NOTIFY).await;
        assert!(is_done(&frames), "{}", stable(&frames));
        assert!(
            interrupt(&frames).is_none(),
            "{revision:?}: {}",
            stable(&frames)
        );
        let text = answer(&frames);
        assert!(
            text.contains("asked for something I do not ask you for"),
            "{revision:?}: {text}"
        );
        assert!(demo(&s).notifications().is_empty());
        s.pass();
    }
}

/// A URL question: the interrupt shows the full URL and its domain; the
/// URL is never fetched by turnstile; accept is consent, and the answer
/// says no more than the tool did.
#[tokio::test]
async fn a_url_question_is_consent_not_completion() {
    for revision in [Revision::Stateless, Revision::Sessions] {
        let s = server(revision, vec![]).await;
        let t = s.new_thread().await;
        let frames = s.say(&t, "open the permit portal for HW-12").await;
        let i = interrupt(&frames)
            .unwrap_or_else(|| panic!("{revision:?}: no interrupt: {}", stable(&frames)))
            .clone();
        let url = &i.input.as_ref().unwrap().requests[0];
        assert_eq!(url.mode, "url");
        assert_eq!(url.domain.as_deref(), Some("127.0.0.1"));
        assert!(url.url.as_deref().unwrap().contains("/permits/HW-12"));
        assert!(!url.punycode);
        // A URL takes no values.
        let key = url.key.clone();
        let (status, _) = s
            .answer(&t, &i.interrupt_id, "accept", json!({ key: {"x": 1} }))
            .await
            .unwrap_err();
        assert_eq!(status, 422);
        let frames = s
            .answer(&t, &i.interrupt_id, "accept", Value::Null)
            .await
            .unwrap();
        assert!(is_done(&frames), "{}", stable(&frames));
        assert_eq!(demo(&s).permit_visits(), 0, "turnstile never opens the URL");
        let text = answer(&frames).to_lowercase();
        assert!(text.contains("agreed to open"), "{revision:?}: {text}");
        for claim in ["is signed", "was signed", "signed it", "permit signed"] {
            assert!(!text.contains(claim), "{revision:?}: {text}");
        }
        s.pass();
    }
}
