//! The safety checks (issue 39 §3), through HTTP/SSE against the OpenAI
//! wire adapter and a fake OpenAI server that records every request: a
//! blocked message reaches no model and no tool and is not stored; a
//! redacted one reaches the model redacted; a blocked or redacted sentence
//! of the answer is replaced by code's sentence with the guardrail table's
//! row, in the frame, the store and the page's record alike. Each built-in
//! checker in English and Korean. The external checker is an HTTP server in
//! the shape of OpenAI's moderation API: it blocks, passes, times out (fail
//! closed and fail open) and answers malformed JSON. Every row taken is
//! counted in `/v1/metrics`.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use common::fake_openai::{Action, FakeOpenAi, Role};
use common::frames::{answer, is_done, tool_calls};
use common::server::TestServer;
use serde_json::{json, Value};
use turnstile::agent::Guardrails;
use turnstile::wire::{Delta, Frame, Replaced};

/// The checks a config's `[[guardrails]]` section gives.
fn guardrails(section: &str) -> Guardrails {
    let env = |k: &str| (k == "MODERATION_KEY").then(|| MODERATION_KEY.to_string());
    common::config_with(section, &env)
        .unwrap_or_else(|e| panic!("{e}"))
        .guardrails
}

async fn server(fake: &FakeOpenAi, section: &str) -> TestServer {
    TestServer::builder()
        .model(fake.model())
        .guardrails(guardrails(section))
        .start()
        .await
}

/// The deltas a guardrail row marked.
fn marked(frames: &[Frame]) -> Vec<&Replaced> {
    frames
        .iter()
        .filter_map(|f| match f {
            Frame::Delta(Delta {
                replaced: Some(r), ..
            }) if r.table.as_deref() == Some("guardrail") => Some(r),
            _ => None,
        })
        .collect()
}

fn rows(frames: &[Frame]) -> Vec<&str> {
    marked(frames).iter().map(|r| r.row_id.as_str()).collect()
}

/// Everything every model request carried.
fn model_saw(fake: &FakeOpenAi) -> String {
    fake.requests()
        .iter()
        .map(|r| r.raw.clone())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn a_message_with_a_credential_reaches_no_model_and_is_not_stored() {
    common::logs::capture();
    let fake = FakeOpenAi::start().await;
    let s = server(&fake, "[[guardrails]]\nname = \"secrets\"\n").await;
    for (text, secret, korean) in [
        (
            "Here is my AWS key AKIAIOSFODNN7EXAMPLE, show safety issues on floor 3",
            "AKIAIOSFODNN7EXAMPLE",
            false,
        ),
        (
            "제 비밀번호는 hunter2hunter2 입니다. 3층 안전 지적사항 보여줘",
            "hunter2hunter2",
            true,
        ),
    ] {
        let t = s.new_thread().await;
        let frames = s.say(&t, text).await;
        assert!(is_done(&frames), "{frames:?}");
        assert_eq!(rows(&frames), ["input-blocked"], "{frames:?}");
        assert_eq!(marked(&frames)[0].check.as_deref(), Some("secrets"));
        assert!(
            tool_calls(&frames).is_empty(),
            "a tool ran on a refused message"
        );
        let said = answer(&frames);
        assert!(
            said.contains("`secrets`") && said.contains("`input-blocked`"),
            "{said}"
        );
        assert_eq!(said.contains("메시지를"), korean, "{said}");
        let stored = s.thread_json(&t).await.to_string();
        for (what, place) in [
            ("the frames", format!("{frames:?}")),
            ("the thread", stored.clone()),
            ("the log", common::logs::text()),
        ] {
            assert!(!place.contains(secret), "the secret is in {what}");
        }
        assert!(
            stored.contains("input-blocked"),
            "the refusal is stored with its row"
        );
    }
    assert!(
        fake.requests().is_empty(),
        "a model was asked: {}",
        model_saw(&fake)
    );
    // A clean message afterwards goes through.
    let t = s.new_thread().await;
    let frames = s.say(&t, "show safety issues on floor 3").await;
    assert!(is_done(&frames) && rows(&frames).is_empty(), "{frames:?}");
    assert!(!fake.requests().is_empty());
    s.pass();
}

#[tokio::test]
async fn pii_reaches_the_model_redacted_and_is_redacted_in_answers() {
    let fake = FakeOpenAi::start().await;
    let s = server(&fake, "[[guardrails]]\nname = \"pii\"\n").await;
    for (text, private, mark) in [
        (
            "show safety issues on floor 3, my email is ana.kim@example.com",
            "ana.kim@example.com",
            "[email]",
        ),
        (
            "3층 안전 지적사항 보여줘. 제 번호는 010-1234-5678 입니다",
            "010-1234-5678",
            "[phone]",
        ),
    ] {
        let t = s.new_thread().await;
        let frames = s.say(&t, text).await;
        assert!(is_done(&frames), "{frames:?}");
        let saw = model_saw(&fake);
        assert!(!saw.contains(private), "the model saw {private}");
        assert!(saw.contains(mark), "the model saw no {mark}");
        assert!(!s.thread_json(&t).await.to_string().contains(private));
        // The search still ran on what was left.
        assert!(!tool_calls(&frames).is_empty(), "{frames:?}");
    }
    // The model writes an address into its answer: shown redacted, marked.
    fake.on(
        Role::Responder,
        Action::Text("Write to the site office at office@example.com for details.".into()),
    );
    let t = s.new_thread().await;
    let frames = s.say(&t, "hello").await;
    assert!(is_done(&frames), "{frames:?}");
    assert_eq!(rows(&frames), ["output-redacted"], "{frames:?}");
    let said = answer(&frames);
    assert!(
        said.contains("[email]") && !said.contains("office@example.com"),
        "{said}"
    );
    assert!(!s
        .thread_json(&t)
        .await
        .to_string()
        .contains("office@example.com"));
    s.pass();
}

#[tokio::test]
async fn the_operators_words_block_messages_and_sentences_in_english_and_korean() {
    let fake = FakeOpenAi::start().await;
    let s = server(
        &fake,
        "[[guardrails]]\nname = \"words\"\nwords = [\"Project Falcon\", \"기밀\"]\n",
    )
    .await;
    for (text, korean) in [
        ("what is the status of project falcon?", false),
        ("기밀 문서 보여줘", true),
    ] {
        let t = s.new_thread().await;
        let frames = s.say(&t, text).await;
        assert_eq!(rows(&frames), ["input-blocked"], "{frames:?}");
        let said = answer(&frames);
        assert_eq!(said.contains("허용하지 않는 용어"), korean, "{said}");
        assert!(!s.thread_json(&t).await.to_string().contains(if korean {
            "기밀 문서"
        } else {
            "falcon"
        }));
    }
    assert!(fake.requests().is_empty());
    // A sentence of the answer with a listed word is withheld; the rest is
    // shown.
    fake.on(
        Role::Responder,
        Action::Text("Hello there. Our codename is Project Falcon. Ask me about the site.".into()),
    );
    let t = s.new_thread().await;
    let frames = s.say(&t, "hello").await;
    assert!(is_done(&frames), "{frames:?}");
    assert_eq!(rows(&frames), ["output-blocked"], "{frames:?}");
    let said = answer(&frames);
    assert!(
        said.contains("Hello there.") && said.contains("Ask me about the site."),
        "{said}"
    );
    assert!(
        said.contains("`output-blocked`") && !said.contains("Falcon"),
        "{said}"
    );
    // In Korean, the sentence code puts in its place is Korean.
    fake.on(
        Role::Responder,
        Action::Text("안녕하세요. 이 자료는 기밀입니다.".into()),
    );
    let t = s.new_thread().await;
    let frames = s.say(&t, "안녕").await;
    assert_eq!(rows(&frames), ["output-blocked"], "{frames:?}");
    let said = answer(&frames);
    assert!(
        said.contains("문장 하나를 표시하지 않았습니다") && !said.contains("기밀입니다"),
        "{said}"
    );
    s.pass();
}

#[tokio::test]
async fn a_credential_the_model_writes_is_never_shown_or_stored() {
    let fake = FakeOpenAi::start().await;
    let s = server(&fake, "[[guardrails]]\nname = \"secrets\"\n").await;
    fake.on(
        Role::Responder,
        Action::Text("Hello. Paste -----BEGIN RSA PRIVATE KEY----- into the form.".into()),
    );
    let t = s.new_thread().await;
    let frames = s.say(&t, "hello").await;
    assert!(is_done(&frames), "{frames:?}");
    assert_eq!(rows(&frames), ["output-blocked"], "{frames:?}");
    let all = format!("{frames:?}{}", s.thread_json(&t).await);
    assert!(
        !all.contains("BEGIN RSA PRIVATE"),
        "the key was shown or stored"
    );
    s.pass();
}

// ---------------------------------------------------------------------------
// The external checker

const MODERATION_KEY: &str = "mod-key-4c1e-DO-NOT-LOG";

/// (mode, authorization, input) of one request.
type Seen = (String, Option<String>, String);

#[derive(Clone, Default)]
struct Moderator {
    seen: Arc<Mutex<Vec<Seen>>>,
}

/// `/ok/…` answers as OpenAI's endpoint does (flagged when the input says
/// "attack"); `/slow/…` answers after 3 s; `/bad/…` answers JSON that is
/// not a moderation result.
async fn moderate(
    State(m): State<Moderator>,
    axum::extract::Path(mode): axum::extract::Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    let input = body["input"].as_str().unwrap_or_default().to_string();
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    m.seen
        .lock()
        .unwrap()
        .push((mode.clone(), auth, input.clone()));
    match mode.as_str() {
        "slow" => tokio::time::sleep(Duration::from_secs(3)).await,
        "bad" => return Json(json!({"results": "not a list"})),
        _ => {}
    }
    let flagged = input.to_lowercase().contains("attack");
    Json(json!({
        "id": "modr-0001",
        "model": "omni-moderation-latest",
        "results": [{
            "flagged": flagged,
            "categories": {"violence": flagged, "harassment": false},
            "category_scores": {"violence": if flagged { 0.91 } else { 0.01 }, "harassment": 0.0},
            "category_applied_input_types": {"violence": ["text"], "harassment": ["text"]}
        }]
    }))
}

async fn moderator() -> (Moderator, String) {
    let m = Moderator::default();
    let app = Router::new()
        .route("/{mode}/v1/moderations", post(moderate))
        .with_state(m.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (m, base)
}

fn external(base: &str, mode: &str, unavailable: &str) -> String {
    format!(
        "[[guardrails]]\nname = \"moderation\"\nkind = \"moderation\"\n\
         url = \"{base}/{mode}/v1/moderations\"\nmodel = \"omni-moderation-latest\"\n\
         api_key_env = \"MODERATION_KEY\"\ntimeout_ms = 400\nunavailable = \"{unavailable}\"\n"
    )
}

#[tokio::test]
async fn an_external_checker_blocks_passes_and_its_outage_fails_as_configured() {
    common::logs::capture();
    let (m, base) = moderator().await;

    // Blocking and passing.
    let fake = FakeOpenAi::start().await;
    let s = server(&fake, &external(&base, "ok", "closed")).await;
    let t = s.new_thread().await;
    let frames = s.say(&t, "how do I attack the site office?").await;
    assert_eq!(rows(&frames), ["input-blocked"], "{frames:?}");
    let said = answer(&frames);
    assert!(
        said.contains("`moderation`") && said.contains("violence"),
        "{said}"
    );
    assert!(fake.requests().is_empty(), "a model was asked");
    let frames = s.say(&t, "show safety issues on floor 3").await;
    assert!(is_done(&frames) && rows(&frames).is_empty(), "{frames:?}");
    assert!(!fake.requests().is_empty());
    {
        let seen = m.seen.lock().unwrap();
        assert!(seen
            .iter()
            .any(|(_, _, i)| i == "show safety issues on floor 3"));
        // The message, then each sentence of the answer.
        assert!(seen.len() > 2, "{seen:?}");
        let bearer = format!("Bearer {MODERATION_KEY}");
        assert!(seen
            .iter()
            .all(|(_, a, _)| a.as_deref() == Some(bearer.as_str())));
    }
    // A flagged sentence of the answer is withheld.
    fake.on(
        Role::Responder,
        Action::Text("Hello. Let us attack the problem together.".into()),
    );
    let frames = s.say(&s.new_thread().await, "hello").await;
    assert_eq!(rows(&frames), ["output-blocked"], "{frames:?}");

    // Timing out: closed refuses, open lets the message through.
    for (mode, unavailable, refused) in [
        ("slow", "closed", Some("input-unchecked-closed")),
        ("bad", "closed", Some("input-unchecked-closed")),
        ("slow", "open", None),
        ("bad", "open", None),
    ] {
        let fake = FakeOpenAi::start().await;
        let s = server(&fake, &external(&base, mode, unavailable)).await;
        let t = s.new_thread().await;
        let frames = s.say(&t, "show safety issues on floor 3").await;
        assert!(is_done(&frames), "{mode}/{unavailable}: {frames:?}");
        match refused {
            Some(row) => {
                assert_eq!(rows(&frames), [row], "{mode}/{unavailable}: {frames:?}");
                assert!(answer(&frames).contains("could not be run"), "{frames:?}");
                assert!(fake.requests().is_empty(), "{mode}: a model was asked");
            }
            None => {
                assert!(rows(&frames).is_empty(), "{mode}/{unavailable}: {frames:?}");
                assert!(
                    !tool_calls(&frames).is_empty(),
                    "{mode}/{unavailable}: nothing ran"
                );
            }
        }
        s.pass();
    }
    // The rows are counted where an operator reads them.
    let metrics = reqwest::get(format!("{}/v1/metrics", s.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for row in [
        "input-blocked",
        "input-unchecked-closed",
        "input-unchecked-open",
        "output-blocked",
        "output-passed",
    ] {
        let label = format!("table=\"guardrail\",row=\"{row}\",kind=\"legal\"");
        assert!(metrics.contains(&label), "{row} is not counted:\n{metrics}");
    }
    let log = common::logs::text();
    assert!(
        !log.contains(MODERATION_KEY),
        "the moderation key is in the log"
    );
    s.pass();
}

/// A message a built-in check blocked is sent to no outside checker, and an
/// endpoint that could not answer is not asked again in the same turn.
#[tokio::test]
async fn a_blocked_message_goes_to_no_external_checker() {
    let (m, base) = moderator().await;
    let fake = FakeOpenAi::start().await;
    let section = format!(
        "[[guardrails]]\nname = \"secrets\"\n{}",
        external(&base, "ok", "closed")
    );
    let s = server(&fake, &section).await;
    let frames = s
        .say(
            &s.new_thread().await,
            "my key is AKIAIOSFODNN7EXAMPLE, check it",
        )
        .await;
    assert_eq!(rows(&frames), ["input-blocked"], "{frames:?}");
    assert_eq!(marked(&frames)[0].check.as_deref(), Some("secrets"));
    let seen = m.seen.lock().unwrap().clone();
    assert!(
        seen.iter()
            .all(|(_, _, i)| !i.contains("AKIAIOSFODNN7EXAMPLE")),
        "the blocked message reached the moderation endpoint: {seen:?}"
    );
    s.pass();

    // A slow endpoint, open on outage: asked once for the message, then not
    // again for the answer's sentences (each would wait the timeout).
    let (m, base) = moderator().await;
    let fake = FakeOpenAi::start().await;
    fake.on(
        Role::Responder,
        Action::Text("Hello there. The site opens early. Ask me about it.".into()),
    );
    let s = server(&fake, &external(&base, "slow", "open")).await;
    let frames = s.say(&s.new_thread().await, "hello").await;
    assert!(is_done(&frames), "{frames:?}");
    assert_eq!(
        m.seen.lock().unwrap().len(),
        1,
        "the endpoint was asked again after its outage"
    );
    s.pass();
}

/// A reviewer who forbids failing open: the turn reaches the forbidden row
/// and ends with an error frame naming it, after its start; the message is
/// stored withheld and no model is asked.
#[tokio::test]
async fn a_forbidden_fail_open_row_ends_the_turn_with_its_row() {
    let (_m, base) = moderator().await;
    let fake = FakeOpenAi::start().await;
    let tables = tempfile::tempdir().unwrap();
    let src =
        std::fs::read_to_string(common::needs::repo_dir().join("tables/guardrail.ron")).unwrap();
    let legal = r#"Legal(id: "input-unchecked-open", from: "Input", on: "input_unavailable_open", to: "Model", effect: "ask-model"),"#;
    assert!(src.contains(legal));
    let edited = src.replace(
        legal,
        r#"Forbidden(id: "input-unchecked-open", from: "Input", on: "input_unavailable_open", why: "This deployment never lets a message through unchecked."),"#,
    );
    std::fs::write(tables.path().join("guardrail.ron"), edited).unwrap();
    let s = TestServer::builder()
        .model(fake.model())
        .guardrails(guardrails(&external(&base, "bad", "open")))
        .tables_dir(tables.path())
        .start()
        .await;
    let t = s.new_thread().await;
    let frames = s.say(&t, "show safety issues on floor 3").await;
    assert!(
        matches!(frames.first(), Some(Frame::Start(_))),
        "{frames:?}"
    );
    match frames.last() {
        Some(Frame::Error(e)) => {
            assert_eq!(e.table.as_deref(), Some("guardrail"), "{e:?}");
            assert_eq!(e.row_id.as_deref(), Some("input-unchecked-open"), "{e:?}");
        }
        other => panic!("the turn ends with the row's error, not {other:?}"),
    }
    assert!(fake.requests().is_empty(), "a model was asked");
    let stored = s.thread_json(&t).await.to_string();
    assert!(
        !stored.contains("safety issues on floor 3") && stored.contains("input-unchecked-open")
    );
    s.pass();
}

#[test]
fn a_bad_guardrails_section_is_refused_with_its_key() {
    let env = |_: &str| None;
    for (section, key) in [
        ("[[guardrails]]\nname = \"x y\"\n", "guardrails[0].name"),
        ("[[guardrails]]\nname = \"nope\"\n", "guardrails[0].kind"),
        ("[[guardrails]]\nname = \"words\"\n", "guardrails[0].words"),
        ("[[guardrails]]\nname = \"pii\"\naction = \"maybe\"\n", "guardrails[0].action"),
        ("[[guardrails]]\nname = \"pii\"\non = [\"inbox\"]\n", "guardrails[0].on"),
        ("[[guardrails]]\nname = \"m\"\nkind = \"moderation\"\n", "guardrails[0].url"),
        (
            "[[guardrails]]\nname = \"m\"\nkind = \"moderation\"\nurl = \"http://127.0.0.1:1/m\"\naction = \"redact\"\n",
            "guardrails[0].action",
        ),
        ("[[guardrails]]\nname = \"secrets\"\nurl = \"http://127.0.0.1:1/m\"\n", "guardrails[0].url"),
        ("[[guardrails]]\nname = \"pii\"\n[[guardrails]]\nname = \"pii\"\n", "guardrails[1].name"),
    ] {
        let err = common::config_with(section, &env)
            .expect_err(section)
            .to_string();
        assert!(err.contains(&format!("`{key}`")), "{section}: {err}");
    }
}

/// `turnstile demo --guardrails --guardrail-word …`, a real process, read
/// by `turnstile chat`: a refused message and a redacted one are printed
/// with the guardrail table's row, and the demo's own answers pass.
#[tokio::test]
async fn the_demo_runs_the_checks_and_chat_prints_their_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut demo, lines) = common::demo::spawn(
        tmp.path(),
        &[
            "--guardrails",
            "--guardrail-word",
            "project falcon",
            "--model-delay-ms",
            "0",
        ],
    )
    .await;
    let base = common::demo::url(&lines);
    let chat = |text: &'static str| {
        let base = base.clone();
        async move {
            let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnstile"))
                .args(["chat", &base, text])
                .output()
                .await
                .expect("chat runs");
            String::from_utf8_lossy(&out.stdout).to_string()
        }
    };
    let out = chat("my password = hunter2hunter2, show safety issues on floor 3").await;
    assert!(out.contains("[guardrail: input-blocked]"), "{out}");
    assert!(!out.contains("hunter2hunter2"), "{out}");
    let out = chat("what about Project Falcon?").await;
    assert!(
        out.contains("[guardrail: input-blocked]") && out.contains("`words`"),
        "{out}"
    );
    // The demo's honest answer passes every check.
    let out = chat("show safety issues on floor 3").await;
    assert!(!out.contains("[guardrail:"), "{out}");
    assert!(out.contains("safety"), "{out}");
    demo.kill().await.unwrap();
}
