//! Export → confirm → a capability delivered by code (issue 18, seeds
//! 000/001), through HTTP/SSE, the demo MCP tool server and the database:
//!
//! - "download all my lecture files" is two loop steps (preview, then
//!   confirm) and ends with the code's message: its sentence, a delta whose
//!   link is a validated capability, `done`; no model call after the
//!   confirm, even when the model hangs from then on; the link survives a
//!   reload and downloads a ZIP;
//! - a confirm batched with its preview (the lying model) or planned with no
//!   preview is refused with `INVALID_TOOL_SEQUENCE` naming the export
//!   table's row, and is never sent;
//! - a capability the validator refuses takes the normal error path;
//! - "show me the link again" is answered from the stored delivery, and
//!   once it expired, says so;
//! - the capability's token reaches no prompt (the real OpenAI adapter's
//!   requests, captured at a fake provider) and no log line.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::fake_openai::{Action, FakeOpenAi, Role};
use common::frames::{answer, is_done, plans, tool_calls, tool_results};
use common::server::TestServer;
use serde_json::{json, Value};
use turnstile::llm::{LlmError, Model, Plan, PlanRequest, RespondRequest, TextStream};
use turnstile::wire::{CapabilityLink, Frame};
use turnstile_demo::{DemoOptions, DemoServer, Scripted};

/// The scripted demo model, counting its calls and keeping every prompt it
/// was given; from call `hang_from` on (1-based), it never answers: a model
/// adapter that hangs right after the confirm.
struct Watched {
    inner: Scripted,
    calls: AtomicUsize,
    hang_from: Option<usize>,
    prompts: std::sync::Mutex<Vec<String>>,
    /// The bytes of history each plan was given, and its turns.
    histories: std::sync::Mutex<Vec<(usize, usize)>>,
}

impl Watched {
    fn new(hang_from: Option<usize>) -> Arc<Watched> {
        Arc::new(Watched {
            inner: Scripted::demo(),
            calls: AtomicUsize::new(0),
            hang_from,
            prompts: Default::default(),
            histories: Default::default(),
        })
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    async fn enter(&self, prompt: String) {
        self.prompts.lock().unwrap().push(prompt);
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if self.hang_from.is_some_and(|h| n >= h) {
            std::future::pending::<()>().await;
        }
    }
}

#[async_trait::async_trait]
impl Model for Watched {
    fn name(&self) -> &str {
        "watched"
    }
    async fn plan(&self, req: &PlanRequest) -> Result<Plan, LlmError> {
        let bytes = (req.history.iter())
            .map(|t| t.user.len() + t.answer.len() + t.cards.iter().map(String::len).sum::<usize>())
            .sum();
        self.histories
            .lock()
            .unwrap()
            .push((bytes, req.history.len()));
        self.enter(format!("{}\n{req:?}", req.prompt.render()))
            .await;
        self.inner.plan(req).await
    }
    async fn respond(&self, req: &RespondRequest) -> Result<TextStream, LlmError> {
        self.enter(format!("{}\n{req:?}", req.prompt.render()))
            .await;
        self.inner.respond(req).await
    }
}

/// A demo tool server whose ZIP is ready at once, with this link TTL.
async fn demo_tools(ttl: Duration) -> DemoServer {
    let options = DemoOptions {
        export_build_delay: Duration::ZERO,
        export_ttl: ttl,
        ..DemoOptions::default()
    };
    DemoServer::start("127.0.0.1:0".parse().unwrap(), options)
        .await
        .expect("the demo tool server starts")
}

fn demo(s: &TestServer) -> &DemoServer {
    s.demo.as_ref().expect("the demo tool server runs")
}

/// The capabilities the turn's deltas carried.
fn capabilities(frames: &[Frame]) -> Vec<CapabilityLink> {
    frames
        .iter()
        .filter_map(|f| match f {
            Frame::Delta(d) => Some(d.capabilities.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

/// The one capability a delivering turn carried.
fn delivered(frames: &[Frame]) -> CapabilityLink {
    let caps = capabilities(frames);
    assert_eq!(caps.len(), 1, "one capability: {frames:#?}");
    caps.into_iter().next().unwrap()
}

/// The token a capability URL carries.
fn token(url: &str) -> String {
    url.split("token=").nth(1).expect("a token").to_string()
}

/// The turn machine's rows and the export machines of `turn`, as stored.
async fn machines(s: &TestServer, thread: &str) -> Value {
    let view = s.thread_json(thread).await;
    view["turns"].clone()
}

/// The ZIP at a delivered link (the demo builds it at once here).
async fn download(url: &str) -> Vec<u8> {
    let http = crate::common::browser();
    for _ in 0..50 {
        let r = http.get(url).send().await.expect("the link answers");
        assert_eq!(r.status(), 200, "the delivered link works");
        let zip = r
            .headers()
            .get("content-type")
            .is_some_and(|v| v == "application/zip");
        let body = r.bytes().await.unwrap().to_vec();
        if zip {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the export never finished building");
}

async fn two_steps_delivered_by_code(text: &str, label: &str, sentence: &str) {
    let model = Watched::new(None);
    let s = TestServer::builder()
        .model(model.clone())
        .demo(demo_tools(Duration::from_secs(1200)).await)
        .start()
        .await;
    let thread = s.new_thread().await;
    let frames = s.say(&thread, text).await;
    assert!(is_done(&frames), "{frames:#?}");
    // Two loop steps: the preview, then (after the model saw it) the confirm.
    let steps: Vec<(u32, Vec<&str>)> = plans(&frames)
        .iter()
        .map(|p| (p.step, p.steps.iter().map(|s| s.tool.as_str()).collect()))
        .collect();
    assert_eq!(
        steps,
        [
            (1, vec!["export_all_lms_materials"]),
            (2, vec!["confirm_lms_material_export"])
        ]
    );
    assert!(tool_results(&frames).iter().all(|r| r.ok));
    // Planned twice, never asked to answer: the message is the code's.
    assert_eq!(model.calls(), 2, "no model call after the confirm");
    let link = delivered(&frames);
    let origin = demo(&s).url.trim_end_matches("/mcp").to_string();
    assert!(
        link.url
            .starts_with(&format!("{origin}/api/lms/exports/J1/download?token=")),
        "{}",
        link.url
    );
    assert_eq!(link.label, label);
    assert!(link.expires_at.is_some());
    let said = answer(&frames);
    assert!(said.starts_with(sentence), "{said}");
    assert!(
        said.ends_with(&format!("[{label}]({})", link.url)),
        "{said}"
    );
    // The last delta carries the link; `done` follows it.
    let n = frames.len();
    assert!(matches!(&frames[n - 2], Frame::Delta(d) if !d.capabilities.is_empty()));
    // The stored thread: the turn ended in `Delivered` by `deliver-terminal`,
    // the export machine delivered, the delivery is a record.
    let turns = machines(&s, &thread).await;
    let turn = &turns[0]["machines"];
    assert_eq!(turn["turn"]["state"], "Delivered", "{turn:#}");
    let rows = turn["turn"]["trace"].to_string();
    assert!(rows.contains("deliver-terminal"), "{rows}");
    let export = turn
        .as_object()
        .unwrap()
        .iter()
        .find(|(k, _)| k.starts_with("export#"))
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("an export machine is stored: {turn:#}"));
    assert_eq!(export["state"], "Delivered");
    assert_eq!(
        export["trace"],
        json!([
            "hold-preview",
            "model-sees-preview",
            "confirm-after-preview",
            "deliver-terminal"
        ])
    );
    // Reloaded, the thread still shows the link as a capability.
    let bodies = s.bodies(&thread).await;
    let stored = Value::Array(bodies.clone()).to_string();
    assert!(stored.contains(&link.url));
    assert!(bodies.iter().any(|b| b["kind"] == "delivery"));
    assert!(bodies
        .iter()
        .any(|b| b["kind"] == "text" && b["capabilities"][0]["url"] == json!(link.url)));
    let zip = download(&link.url).await;
    assert!(zip.starts_with(b"PK\x03\x04"), "a ZIP");
    s.pass();
}

#[tokio::test]
async fn the_export_is_two_steps_and_its_link_is_delivered_by_code() {
    two_steps_delivered_by_code(
        "download all my lecture files",
        "Download lecture files",
        "Your export is ready: 14 files, about ",
    )
    .await;
}

#[tokio::test]
async fn the_export_in_korean() {
    two_steps_delivered_by_code(
        "수강 중인 모든 강의 파일 받아줘",
        "강의 파일 받기",
        "내보내기가 준비되었습니다: 파일 14개, 약 ",
    )
    .await;
}

/// The model adapter hangs from its third call on (the first after the
/// confirm): the link arrives all the same, and survives a reload.
#[tokio::test]
async fn a_model_that_hangs_after_the_confirm_does_not_hold_the_link() {
    let model = Watched::new(Some(3));
    let s = TestServer::builder()
        .model(model.clone())
        .demo(demo_tools(Duration::from_secs(1200)).await)
        .start()
        .await;
    let thread = s.new_thread().await;
    let said = s.say(&thread, "download all my lecture files");
    let frames = tokio::time::timeout(Duration::from_secs(20), said)
        .await
        .expect("the turn ends without the model");
    assert!(is_done(&frames), "{frames:#?}");
    let link = delivered(&frames);
    assert_eq!(model.calls(), 2);
    let bodies = s.bodies(&thread).await;
    assert!(Value::Array(bodies).to_string().contains(&link.url));
    s.pass();
}

/// The lying model confirms in the step that previews, with a guessed id:
/// that confirm is refused by `export-and-confirm-in-one-step` and never
/// sent; the confirm of the next step, after the preview, is sent once.
#[tokio::test]
async fn a_confirm_batched_with_its_preview_is_refused_and_not_sent() {
    let model = Arc::new(turnstile_demo::lying::Lying::new(Scripted::demo()));
    let s = TestServer::builder()
        .model(model)
        .demo(demo_tools(Duration::from_secs(1200)).await)
        .start()
        .await;
    let thread = s.new_thread().await;
    let frames = s.say(&thread, "download all my lecture files").await;
    assert!(is_done(&frames), "{frames:#?}");
    let first = &plans(&frames)[0];
    let tools: Vec<&str> = first.steps.iter().map(|s| s.tool.as_str()).collect();
    assert_eq!(
        tools,
        ["export_all_lms_materials", "confirm_lms_material_export"]
    );
    let confirms: Vec<_> = tool_results(&frames)
        .into_iter()
        .filter(|r| r.tool == "confirm_lms_material_export")
        .collect();
    assert_eq!(confirms.len(), 2, "{frames:#?}");
    assert!(!confirms[0].ok);
    assert!(
        confirms[0].summary.contains("INVALID_TOOL_SEQUENCE")
            && confirms[0]
                .summary
                .contains("export row `export-and-confirm-in-one-step`"),
        "{}",
        confirms[0].summary
    );
    // Refused before the preview ran: it was never sent to a server.
    let calls: Vec<_> = tool_calls(&frames)
        .into_iter()
        .map(|c| (c.tool.as_str(), c.server.is_some()))
        .collect();
    assert_eq!(
        calls,
        [
            ("confirm_lms_material_export", false),
            ("export_all_lms_materials", true),
            ("confirm_lms_material_export", true),
        ]
    );
    assert!(confirms[1].ok);
    delivered(&frames);
    s.pass();
}

/// A confirm planned with no preview on the thread is refused by
/// `confirm-before-preview` and never sent, whatever id the model names.
#[tokio::test]
async fn a_confirm_without_a_preview_is_refused_and_not_sent() {
    let fake = FakeOpenAi::start().await;
    let tools = demo_tools(Duration::from_secs(1200)).await;
    // A real export, so that the refusal is the table's, not the backend's.
    let export = tools.exports().preview().export_id;
    let s = TestServer::builder()
        .model(fake.model())
        .demo(tools)
        .start()
        .await;
    let args = json!({ "exportId": export }).to_string();
    fake.on(
        Role::Planner,
        Action::ToolCalls(vec![("confirm_lms_material_export".into(), args)]),
    );
    let thread = s.new_thread().await;
    let frames = s.say(&thread, "download all my lecture files").await;
    assert!(is_done(&frames), "{frames:#?}");
    let refused = tool_results(&frames)
        .into_iter()
        .find(|r| r.tool == "confirm_lms_material_export")
        .expect("the confirm's result");
    assert!(!refused.ok);
    assert!(
        refused.summary.contains("INVALID_TOOL_SEQUENCE")
            && refused.summary.contains("confirm-before-preview"),
        "{}",
        refused.summary
    );
    assert_eq!(demo(&s).exports().confirms(&export), 0, "it was sent");
    assert!(capabilities(&frames).is_empty());
    s.pass();
}

/// A capability the validator refuses (here: the flow trusts another
/// origin than the one the tool server answers with) is no delivery: the
/// confirm is a failed call, the model answers from that, and no delta
/// carries a capability.
#[tokio::test]
async fn a_capability_the_validator_refuses_takes_the_error_path() {
    use turnstile::judge::capability::{CapabilityRule, TerminalFlow, Terminals};
    let mut terminals = Terminals::default();
    let rule = CapabilityRule::new(
        "http://127.0.0.1:1",
        "/api/lms/exports/{jobId}/download",
        "token",
    )
    .unwrap();
    terminals.insert(
        "confirm_lms_material_export",
        TerminalFlow {
            preview: "export_all_lms_materials".into(),
            rule,
            label: "Download lecture files".into(),
            label_ko: None,
        },
    );
    let model = Watched::new(None);
    let s = TestServer::builder()
        .model(model.clone())
        .demo(demo_tools(Duration::from_secs(1200)).await)
        .terminals(terminals)
        .start()
        .await;
    let thread = s.new_thread().await;
    let frames = s.say(&thread, "download all my lecture files").await;
    assert!(is_done(&frames), "{frames:#?}");
    assert!(capabilities(&frames).is_empty(), "{frames:#?}");
    // The confirm's own result frame says it failed, and why (never the URL).
    let confirm = tool_results(&frames)
        .into_iter()
        .find(|r| r.tool == "confirm_lms_material_export")
        .expect("the confirm's result");
    assert!(!confirm.ok);
    assert_eq!(
        confirm.summary,
        "not a download link this server may deliver: the URL's origin is not the tool server's trusted origin"
    );
    let said = answer(&frames);
    assert!(
        said.contains("The confirm_lms_material_export tool failed"),
        "{said}"
    );
    let turns = machines(&s, &thread).await;
    let turn = &turns[0]["machines"];
    assert_eq!(turn["turn"]["state"], "Done");
    let failed = turn.as_object().unwrap().values().any(|m| {
        m["state"] == "Failed"
            && m["trace"]
                .to_string()
                .contains("invalid-capability-takes-error-path")
    });
    assert!(failed, "{turn:#}");
    let bodies = s.bodies(&thread).await;
    assert!(!bodies.iter().any(|b| b["kind"] == "delivery"));
    s.pass();
}

/// "Show me the link again" is answered from the stored delivery: the same
/// link, no tool called, the model asked only to plan. Once the link has
/// expired the code says so; on a thread with no delivery, that there is
/// none. In English and Korean.
#[tokio::test]
async fn the_link_is_shown_again_from_the_store_until_it_expires() {
    let model = Watched::new(None);
    let s = TestServer::builder()
        .model(model.clone())
        .demo(demo_tools(Duration::from_secs(3)).await)
        .start()
        .await;
    let thread = s.new_thread().await;
    let first = s.say(&thread, "download all my lecture files").await;
    let link = delivered(&first);
    for again in ["show me the link again", "링크 다시 보여줘"] {
        let before = model.calls();
        let frames = s.say(&thread, again).await;
        assert!(is_done(&frames), "{frames:#?}");
        assert!(tool_calls(&frames).is_empty(), "{frames:#?}");
        assert_eq!(delivered(&frames).url, link.url);
        assert_eq!(model.calls(), before + 1, "planned once, no answer asked");
    }
    let turns = machines(&s, &thread).await;
    assert!(turns[1]["machines"]["turn"]["trace"]
        .to_string()
        .contains("show-stored-delivery"));
    // Expired: the export table's `link-expired`, and the code says so.
    tokio::time::sleep(Duration::from_millis(3200)).await;
    let frames = s.say(&thread, "show me the link again").await;
    assert!(is_done(&frames), "{frames:#?}");
    assert!(capabilities(&frames).is_empty());
    let said = answer(&frames);
    assert!(said.contains("has expired"), "{said}");
    assert!(!said.contains("http"), "{said}");
    // A thread with no delivery: `no-link-yet`.
    let other = s.new_thread().await;
    let frames = s.say(&other, "show me the link again").await;
    assert!(
        answer(&frames).contains("No download link was given"),
        "{frames:#?}"
    );
    let frames = s.say(&other, "링크 다시 보여줘").await;
    assert!(
        answer(&frames).contains("다운로드 링크가 없어"),
        "{frames:#?}"
    );
    assert!(!answer(&frames).contains("replaced"), "{frames:#?}");
    s.pass();
}

/// The token is never given to a model and never logged: the real OpenAI
/// adapter's requests (captured at a fake provider) for the delivering turn
/// and for later turns of the thread, every prompt of the scripted model
/// over a longer thread, the log lines and the metrics are searched for it.
#[tokio::test]
async fn the_capability_never_reaches_a_prompt_a_log_or_the_metrics() {
    common::logs::capture();
    let fake = FakeOpenAi::start().await;
    let s = TestServer::builder()
        .model(fake.model())
        .demo(demo_tools(Duration::from_secs(1200)).await)
        .start()
        .await;
    // The demo numbers its previews: the model's is the store's first.
    let planned = |tool: &str, args: Value| {
        fake.on(
            Role::Planner,
            Action::ToolCalls(vec![(tool.into(), args.to_string())]),
        )
    };
    planned("export_all_lms_materials", json!({}));
    planned("confirm_lms_material_export", json!({"exportId": "EXP-1"}));
    let thread = s.new_thread().await;
    let frames = s.say(&thread, "download all my lecture files").await;
    assert!(is_done(&frames), "{frames:#?}");
    let link = delivered(&frames);
    let secret = token(&link.url);
    // Later turns: a search (the planner sees the thread's history), then
    // the link again through the adapter's marker function.
    planned("search_photos", json!({"query": "safety", "floor": 3}));
    let frames = s.say(&thread, "show safety issues on floor 3").await;
    assert!(is_done(&frames), "{frames:#?}");
    planned("show_delivered_link", json!({}));
    let frames = s.say(&thread, "show me the link again").await;
    assert_eq!(delivered(&frames).url, link.url, "{frames:#?}");
    let requests = fake.requests();
    assert!(requests.len() >= 5, "{} requests", requests.len());
    for r in &requests {
        assert!(
            !r.raw.contains(&secret),
            "a prompt carried the token: {}",
            r.raw
        );
    }

    // The scripted model over a longer thread: every prompt it was given.
    let model = Watched::new(None);
    let s2 = TestServer::builder()
        .model(model.clone())
        .demo(demo_tools(Duration::from_secs(1200)).await)
        .start()
        .await;
    let thread = s2.new_thread().await;
    let first = s2.say(&thread, "download all my lecture files").await;
    let secret2 = token(&delivered(&first).url);
    for text in [
        "show safety issues on floor 3",
        "only those from April",
        "show me the link again",
        "show the newest safety issue on floor 3 in detail",
    ] {
        assert!(is_done(&s2.say(&thread, text).await), "{text}");
    }
    let prompts = model.prompts.lock().unwrap().clone();
    assert!(prompts.len() >= 7);
    for p in &prompts {
        assert!(!p.contains(&secret2), "a prompt carried the token: {p}");
    }
    let (_, metrics) = s2.get("/v1/metrics").await;
    let logs = common::logs::text();
    for t in [&secret, &secret2] {
        assert!(!metrics.to_string().contains(t.as_str()));
        assert!(!logs.contains(t.as_str()), "the token was logged");
    }
    assert!(
        logs.contains("tool result"),
        "the capture holds this test's logs"
    );
    s.pass();
    s2.pass();
}

/// The delivery outlives the process: a server restarted on the same
/// database shows the stored link again. Restarted with the flow's trusted
/// origin changed, the stored link no longer passes the validator and is
/// refused by the export table's `unvalidated-delivery-while-delivered`
/// row, never shown.
#[tokio::test]
async fn a_stored_link_is_shown_after_a_restart_only_while_it_validates() {
    use turnstile::judge::capability::{CapabilityRule, TerminalFlow, Terminals};
    use turnstile::mcp::ServerSpec;
    let tools = demo_tools(Duration::from_secs(1200)).await;
    let tmp = tempfile::tempdir().unwrap();
    let db = common::server::sqlite_in(tmp.path(), "restart.db");
    let server = |terminals: Terminals| {
        TestServer::builder()
            .database(db.clone())
            .servers(vec![ServerSpec::http("demo", tools.url.clone())])
            .terminals(terminals)
            .start()
    };
    let s = server(turnstile_demo::terminals(&tools.url)).await;
    let thread = s.new_thread().await;
    let link = delivered(&s.say(&thread, "download all my lecture files").await);
    s.pass_and_stop().await;

    let s = server(turnstile_demo::terminals(&tools.url)).await;
    let frames = s.say(&thread, "show me the link again").await;
    assert_eq!(delivered(&frames).url, link.url);
    s.pass_and_stop().await;

    let mut moved = Terminals::default();
    moved.insert(
        "confirm_lms_material_export",
        TerminalFlow {
            preview: "export_all_lms_materials".into(),
            rule: CapabilityRule::new(
                "https://lms.example.com",
                "/api/lms/exports/{jobId}/download",
                "token",
            )
            .unwrap(),
            label: "Download lecture files".into(),
            label_ko: None,
        },
    );
    let s = server(moved).await;
    let frames = s.say(&thread, "show me the link again").await;
    assert!(capabilities(&frames).is_empty(), "{frames:#?}");
    let error = frames
        .iter()
        .find_map(|f| match f {
            Frame::Error(e) => Some(e.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("an error frame: {frames:#?}"));
    assert_eq!(error.table.as_deref(), Some("export"));
    assert_eq!(
        error.row_id.as_deref(),
        Some("unvalidated-delivery-while-delivered")
    );
    assert!(!answer(&frames).contains(&link.url));
    s.pass_and_stop().await;
}

/// A long thread is read through its pointers and a bounded history, not
/// whole: 40 search turns after a delivery (hundreds of messages), the link
/// is still shown again and a narrowing still narrows the last search, and
/// every plan's history stays within `history_bytes`.
#[tokio::test]
async fn a_long_thread_is_read_through_its_pointers_and_a_bounded_history() {
    let model = Watched::new(None);
    let s = TestServer::builder()
        .model(model.clone())
        .demo(demo_tools(Duration::from_secs(1200)).await)
        .start()
        .await;
    let thread = s.new_thread().await;
    let link = delivered(&s.say(&thread, "download all my lecture files").await);
    for _ in 0..40 {
        let frames = s.say(&thread, "show safety issues on floor 3").await;
        assert!(is_done(&frames));
    }
    let stored = s.bodies(&thread).await.len();
    assert!(stored > 250, "{stored} messages");
    let frames = s.say(&thread, "only those from April").await;
    let card = frames
        .iter()
        .find_map(|f| match f {
            Frame::Citation(c) => Some(c.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("a narrowed card: {frames:#?}"));
    assert!(card.narrowed, "{card:#?}");
    assert_eq!((card.total, card.grade.as_str()), (Some(25), "EXACT"));
    let frames = s.say(&thread, "show me the link again").await;
    assert_eq!(delivered(&frames).url, link.url);
    let budget = turnstile::agent::Limits::default().history_bytes;
    let histories = model.histories.lock().unwrap().clone();
    let (largest, turns) = histories.iter().max().copied().unwrap();
    assert!(largest <= budget, "{largest} > {budget}");
    assert!(turns >= 2, "the history holds earlier turns: {histories:?}");
    s.pass();
}

/// A step that previews again and confirms the earlier preview in the same
/// plan: the confirm is refused (`confirm-in-the-preview-step`), the turn
/// goes on, and the confirm of the newest preview in the next step is
/// delivered.
#[tokio::test]
async fn a_confirm_refused_after_an_earlier_preview_does_not_stop_the_turn() {
    let fake = FakeOpenAi::start().await;
    let s = TestServer::builder()
        .model(fake.model())
        .demo(demo_tools(Duration::from_secs(1200)).await)
        .start()
        .await;
    let plan = |calls: Vec<(&str, Value)>| {
        let calls = calls
            .into_iter()
            .map(|(t, a)| (t.to_string(), a.to_string()))
            .collect();
        fake.on(Role::Planner, Action::ToolCalls(calls));
    };
    plan(vec![("export_all_lms_materials", json!({}))]);
    plan(vec![
        ("export_all_lms_materials", json!({})),
        ("confirm_lms_material_export", json!({"exportId": "EXP-1"})),
    ]);
    plan(vec![(
        "confirm_lms_material_export",
        json!({"exportId": "EXP-2"}),
    )]);
    let thread = s.new_thread().await;
    let frames = s.say(&thread, "download all my lecture files").await;
    assert!(is_done(&frames), "{frames:#?}");
    let refused = tool_results(&frames)
        .into_iter()
        .find(|r| r.tool == "confirm_lms_material_export" && !r.ok)
        .unwrap_or_else(|| panic!("a refused confirm: {frames:#?}"));
    assert!(
        refused.summary.contains("confirm-in-the-preview-step"),
        "{}",
        refused.summary
    );
    assert_eq!(demo(&s).exports().confirms("EXP-1"), 0);
    assert_eq!(demo(&s).exports().confirms("EXP-2"), 1);
    assert!(delivered(&frames).url.contains("/download?token="));
    // Each export's machine is stored under a name of its own.
    let turns = machines(&s, &thread).await;
    let names: Vec<String> = turns[0]["machines"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| k.starts_with("export#"))
        .cloned()
        .collect();
    assert_eq!(names, ["export#1", "export#2"], "{turns:#}");
    s.pass();
}
