//! OpenTelemetry export against a real collector (issue 39 §1): Arize
//! Phoenix (PyPI `arize-phoenix`, installed into tests/otel/.venv by
//! scripts/test-deps) runs on loopback; a real `turnstile demo --auth
//! --otlp-endpoint …` runs the demo's search, approval and export flows
//! with a bearer token; the spans are read back through Phoenix's own REST
//! API and its database file is searched for every secret the flows used.
//!
//! A second process, `turnstile serve` with the official Python SDK's MCP
//! server (tests/interop/py_server.py, which exports its own spans), shows
//! a tool server's span under the turn's trace through
//! `_meta.traceparent`. A screenshot of the turn in Phoenix's UI, taken
//! by Debian's Chromium, is written to target/otel/phoenix-turn.png.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::fake_openai::{Action, FakeOpenAi, Role};
use common::frames::{is_done, read_frames};
use serde_json::{json, Value};
use turnstile::wire::Frame;

const PROJECT: &str = "turnstile-demo";
const INTEROP_PROJECT: &str = "turnstile-interop";

/// Phoenix's `phoenix` command from the venv scripts/test-deps makes; fails
/// the test without it.
fn phoenix_bin() -> PathBuf {
    let bin = common::needs::repo_dir().join("tests/otel/.venv/bin/phoenix");
    if !bin.exists() {
        common::needs::missing(
            "Arize Phoenix",
            &format!(
                "{} is not there ({}: it makes the venv tests/otel/.venv)",
                bin.display(),
                common::needs::INSTALL
            ),
        );
    }
    bin
}

struct Phoenix {
    /// Killed when the test ends (`kill_on_drop`).
    _child: tokio::process::Child,
    base: String,
    dir: tempfile::TempDir,
}

impl Phoenix {
    async fn start() -> Phoenix {
        let bin = phoenix_bin();
        let dir = tempfile::tempdir().unwrap();
        let port = common::free_port();
        let log = std::fs::File::create(dir.path().join("phoenix.log")).unwrap();
        let child = tokio::process::Command::new(bin)
            .arg("serve")
            .env("PHOENIX_WORKING_DIR", dir.path())
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", port.to_string())
            .env("PHOENIX_GRPC_PORT", common::free_port().to_string())
            .env("PHOENIX_TELEMETRY_ENABLED", "false")
            .env("PHOENIX_ALLOW_EXTERNAL_RESOURCES", "false")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .expect("phoenix serve runs");
        let p = Phoenix {
            _child: child,
            base: format!("http://127.0.0.1:{port}"),
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let up = reqwest::get(format!("{}/healthz", p.base)).await;
            if up.is_ok_and(|r| r.status().is_success()) {
                return p;
            }
            assert!(
                Instant::now() < deadline,
                "Phoenix did not start: {}",
                p.log()
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    fn traces_endpoint(&self) -> String {
        format!("{}/v1/traces", self.base)
    }

    fn log(&self) -> String {
        let text = std::fs::read_to_string(self.dir.path().join("phoenix.log")).unwrap_or_default();
        text.lines().rev().take(30).collect::<Vec<_>>().join("\n")
    }

    /// Every span of `project`, as Phoenix's REST API gives them.
    async fn spans(&self, project: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut url = format!("{}/v1/projects/{project}/spans?limit=1000", self.base);
            if let Some(c) = &cursor {
                url += &format!("&cursor={c}");
            }
            let r = reqwest::get(&url).await.unwrap();
            if r.status().as_u16() == 404 {
                return out;
            }
            let body: Value = r.json().await.unwrap();
            out.extend(body["data"].as_array().cloned().unwrap_or_default());
            match body["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => return out,
            }
        }
    }

    /// Waits until `project` has spans that `ready` accepts.
    async fn spans_until(&self, project: &str, ready: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let spans = self.spans(project).await;
            if ready(&spans) {
                return spans;
            }
            assert!(
                Instant::now() < deadline,
                "Phoenix never had the spans: {} spans of {project}: {:#?}\n{}",
                spans.len(),
                spans.iter().map(|s| s["name"].clone()).collect::<Vec<_>>(),
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Everything Phoenix stored, as bytes: its database and the rest of
    /// its working directory.
    fn store(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for entry in walk(self.dir.path()) {
            if entry.file_name().is_some_and(|n| n == "phoenix.log") {
                continue;
            }
            out.extend(std::fs::read(entry).unwrap_or_default());
        }
        out
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// `turnstile demo --auth`, exporting to `endpoint`; its chat URL and ana's
/// bearer token.
async fn demo(dir: &Path, endpoint: &str) -> (tokio::process::Child, String, String) {
    let (child, lines) = common::demo::spawn(
        dir,
        &["--auth", "--otlp-endpoint", endpoint, "--drain-secs", "2"],
    )
    .await;
    let base = common::demo::url(&lines).trim_end_matches('/').to_string();
    let token = lines
        .iter()
        .find_map(|l| {
            l.trim()
                .strip_prefix("demo user ana (tiers basic): --token ")
        })
        .unwrap_or_else(|| panic!("the demo prints ana's token: {lines:#?}"))
        .trim()
        .to_string();
    (child, base, token)
}

async fn post(http: &reqwest::Client, url: &str, token: &str, body: Value) -> reqwest::Response {
    http.post(url)
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap()
}

async fn thread(http: &reqwest::Client, base: &str, token: &str) -> String {
    common::remote::new_thread(http, base, Some(token)).await
}

async fn say(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    thread: &str,
    text: &str,
) -> Vec<Frame> {
    let url = format!("{base}/v1/threads/{thread}/messages");
    let r = post(http, &url, token, json!({ "text": text })).await;
    assert_eq!(r.status().as_u16(), 200);
    read_frames(&r.bytes().await.unwrap())
}

fn sigterm(child: &tokio::process::Child) {
    common::remote::sigterm(child.id().expect("the process runs"));
}

async fn exits(mut child: tokio::process::Child, what: &str) {
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .unwrap_or_else(|_| panic!("{what} did not exit after SIGTERM"))
        .unwrap();
    assert!(status.success(), "{what} exited with {status}");
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

fn named<'a>(spans: &'a [Value], prefix: &str) -> Vec<&'a Value> {
    spans
        .iter()
        .filter(|s| s["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
        .collect()
}

fn span_id(s: &Value) -> &str {
    s["context"]["span_id"].as_str().unwrap_or_default()
}

fn trace_id(s: &Value) -> &str {
    s["context"]["trace_id"].as_str().unwrap_or_default()
}

/// The `turnstile.row_id`s of a span's table-row events.
fn rows(span: &Value) -> Vec<String> {
    span["events"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["name"] == "table row")
        .map(|e| {
            let a = &e["attributes"];
            format!(
                "{}:{}",
                a["turnstile.table"].as_str().unwrap_or("?"),
                a["turnstile.row_id"].as_str().unwrap_or("?")
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Arize Phoenix and the MCP Python SDK: scripts/test-deps, run with --include-ignored"]
async fn the_demos_turns_are_read_back_from_phoenix_as_gen_ai_spans() {
    let phoenix = Phoenix::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let (demo, base, token) = demo(tmp.path(), &phoenix.traces_endpoint()).await;
    let http = reqwest::Client::builder()
        .cookie_store(true)
        .build()
        .unwrap();

    // Search.
    let search = thread(&http, &base, &token).await;
    let frames = say(
        &http,
        &base,
        &token,
        &search,
        "show safety issues on floor 3",
    )
    .await;
    assert!(is_done(&frames), "{frames:?}");
    let searched = common::frames::tool_calls(&frames)[0].tool.clone();
    // Approval: the card, then approve.
    let approval = thread(&http, &base, &token).await;
    let frames = say(&http, &base, &token, &approval, "reserve seat 12 at 15:00").await;
    let interrupt = frames
        .iter()
        .find_map(|f| match f {
            Frame::Interrupt(i) => Some(i.interrupt_id.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("an approval card: {frames:?}"));
    let r = post(
        &http,
        &format!("{base}/v1/threads/{approval}/resume"),
        &token,
        json!({"interrupt_id": interrupt, "decision": "approve"}),
    )
    .await;
    assert_eq!(r.status().as_u16(), 200);
    assert!(is_done(&read_frames(&r.bytes().await.unwrap())));
    // Export: preview, confirm, a capability delivered by code.
    let export = thread(&http, &base, &token).await;
    let frames = say(
        &http,
        &base,
        &token,
        &export,
        "download all my lecture files",
    )
    .await;
    let capability = frames
        .iter()
        .find_map(|f| match f {
            Frame::Delta(d) => d.capabilities.first().map(|c| c.url.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("a delivered capability: {frames:?}"));
    let capability_token = reqwest::Url::parse(&capability)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.to_string())
        .expect("the capability has its token");
    sigterm(&demo);
    exits(demo, "turnstile demo").await;

    let threads = [&search, &approval, &export];
    let spans = phoenix
        .spans_until(PROJECT, |spans| {
            let turns = named(spans, "invoke_agent");
            threads.iter().all(|t| {
                turns
                    .iter()
                    .any(|s| attr(s, "gen_ai.conversation.id").as_str() == Some(t.as_str()))
            }) && !named(spans, "execute_tool").is_empty()
        })
        .await;

    // The span tree: each model request and tool call is a child of its
    // turn's invoke_agent span, in the same trace.
    let turns = named(&spans, "invoke_agent turnstile");
    assert!(
        turns.len() >= 4,
        "a turn per message and one resumed: {}",
        turns.len()
    );
    for t in &turns {
        assert_eq!(attr(t, "gen_ai.operation.name"), "invoke_agent", "{t:#}");
        assert_eq!(attr(t, "gen_ai.agent.name"), "turnstile");
    }
    let by_id = |id: &str| spans.iter().find(|s| span_id(s) == id);
    let turn_of = |s: &Value| -> Option<String> {
        let parent = by_id(s["parent_id"].as_str()?)?;
        parent["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("invoke_agent"))
            .then(|| {
                attr(parent, "gen_ai.conversation.id")
                    .as_str()
                    .unwrap_or("")
                    .to_string()
            })
    };
    let chats = named(&spans, "chat ");
    assert!(!chats.is_empty(), "no chat spans");
    for c in &chats {
        assert_eq!(attr(c, "gen_ai.operation.name"), "chat", "{c:#}");
        assert!(attr(c, "gen_ai.provider.name").is_string(), "{c:#}");
        let model = attr(c, "gen_ai.request.model").as_str().unwrap();
        assert_eq!(c["name"].as_str().unwrap(), format!("chat {model}"));
        assert!(turn_of(c).is_some(), "a chat span outside a turn: {c:#}");
    }
    let tools = named(&spans, "execute_tool ");
    let tool_names: Vec<&str> = tools
        .iter()
        .filter_map(|s| attr(s, "gen_ai.tool.name").as_str())
        .collect();
    for (tool, thread) in [
        (searched.as_str(), &search),
        ("prepare_seat_reservation", &approval),
        ("confirm_action", &approval),
        ("export_all_lms_materials", &export),
        ("confirm_lms_material_export", &export),
    ] {
        let span = tools
            .iter()
            .find(|s| attr(s, "gen_ai.tool.name") == tool)
            .unwrap_or_else(|| panic!("no execute_tool {tool}: {tool_names:?}"));
        assert_eq!(
            span["name"].as_str().unwrap(),
            format!("execute_tool {tool}")
        );
        assert!(attr(span, "gen_ai.tool.call.id").is_string(), "{span:#}");
        assert_eq!(
            turn_of(span).as_deref(),
            Some(thread.as_str()),
            "{tool} in its turn"
        );
        let parent = by_id(span["parent_id"].as_str().unwrap()).unwrap();
        assert_eq!(trace_id(span), trace_id(parent));
    }
    // turnstile's facts as events: table rows, the grade, the approval.
    let all_rows: Vec<String> = turns.iter().flat_map(|t| rows(t)).collect();
    for row in [
        "turn:begin-with-a-plan",
        "turn:await-approval",
        "turn:run-approved",
        "turn:deliver-terminal",
        "guardrail:input-passed",
        "approval:",
        "export:",
        "frame:",
    ] {
        assert!(
            all_rows.iter().any(|r| r.starts_with(row)),
            "no row {row} among the turns' events: {all_rows:?}"
        );
    }
    let events: Vec<&Value> = turns
        .iter()
        .flat_map(|t| t["events"].as_array().unwrap().iter())
        .collect();
    assert!(
        events
            .iter()
            .any(|e| e["attributes"]["turnstile.citation.grade"].is_string()),
        "no citation grade event"
    );

    // No secret anywhere Phoenix keeps: not in what its API returns, not in
    // its database.
    let exported = serde_json::to_string(&spans).unwrap();
    for (what, secret) in [
        ("the bearer token", token.as_str()),
        ("the subject", "user-ana"),
        ("the capability token", capability_token.as_str()),
        ("the user's message", "show safety issues on floor 3"),
    ] {
        assert!(
            !exported.contains(secret),
            "{what} is in the exported spans"
        );
    }

    // A tool server's own span joins the turn's trace (_meta.traceparent);
    // that turn ran with a session cookie.
    let (py_span, trace, cookie) = python_server_joins_the_trace(&phoenix).await;
    assert_eq!(trace_id(&py_span), trace);

    // Nothing secret in anything Phoenix stored, searched byte by byte.
    let store = phoenix.store();
    assert!(store.len() > 10_000, "Phoenix stored {} bytes", store.len());
    for (what, secret) in [
        ("the bearer token", token.as_str()),
        ("the subject", "user-ana"),
        ("the capability token", capability_token.as_str()),
        ("the session cookie", cookie.as_str()),
        ("the user's message", "show safety issues on floor 3"),
    ] {
        assert!(
            !store.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "{what} is in Phoenix's store"
        );
    }

    // The turn in Phoenix's UI, for docs/operations.md.
    screenshot(&phoenix, PROJECT, trace_id(turns[0])).await;
}

/// `turnstile serve` with the Python SDK server as its one tool server and
/// a fake OpenAI model that plans one call of its `add`: the SDK's own
/// `tools/call add` span, read back from Phoenix, the trace of the turn's
/// `execute_tool add` span, and the session cookie the turn ran with.
async fn python_server_joins_the_trace(phoenix: &Phoenix) -> (Value, String, String) {
    let endpoint = phoenix.traces_endpoint();
    let resource = format!("openinference.project.name={INTEROP_PROJECT}");
    let py = crate::mcp_interop::start_py_server_with(&[
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint.as_str()),
        ("OTEL_SERVICE_NAME", "py-interop"),
        ("OTEL_RESOURCE_ATTRIBUTES", resource.as_str()),
    ])
    .await;
    let fake = FakeOpenAi::start().await;
    fake.on(
        Role::Planner,
        Action::ToolCalls(vec![("add".into(), r#"{"a": 2, "b": 3}"#.into())]),
    );
    let tmp = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let config = format!(
        "addr = \"127.0.0.1:{port}\"\ndatabase_url = \"sqlite://{db}?mode=rwc\"\n\
         [model]\nbase_url = \"{model}\"\nname = \"fake-model-1\"\napi_key_env = \"OTEL_TEST_MODEL_KEY\"\n\
         [http]\ndrain_secs = 2\n\
         [telemetry]\notlp_endpoint = \"{endpoint}\"\nproject = \"{INTEROP_PROJECT}\"\n\
         [[mcp_servers]]\nname = \"py\"\nurl = \"{url}\"\n",
        db = tmp.path().join("t.db").display(),
        model = fake.base_url,
        url = py.url,
    );
    let path = tmp.path().join("turnstile.toml");
    std::fs::write(&path, config).unwrap();
    let serve = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnstile"))
        .args(["serve", "--config"])
        .arg(&path)
        .env("OTEL_TEST_MODEL_KEY", common::fake_openai::KEY)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("turnstile serve runs");
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !http
        .get(format!("{base}/readyz"))
        .send()
        .await
        .is_ok_and(|r| r.status().is_success())
    {
        assert!(
            Instant::now() < deadline,
            "turnstile serve did not get ready"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let r = http
        .post(format!("{base}/v1/threads"))
        .send()
        .await
        .unwrap();
    // The anonymous flow's session cookie (name=value), sent back by hand.
    let cookie = r
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .expect("a session cookie")
        .to_string();
    let thread = r.json::<Value>().await.unwrap()["thread_id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = http
        .post(format!("{base}/v1/threads/{thread}/messages"))
        .header("cookie", &cookie)
        .json(&json!({"text": "add two and three"}))
        .send()
        .await
        .unwrap();
    let frames = read_frames(&r.bytes().await.unwrap());
    assert!(is_done(&frames), "{frames:?}");
    // The model request carried the turn's trace too.
    let traceparent = fake
        .requests()
        .iter()
        .find_map(|c| c.traceparent.clone())
        .expect("a model request with a traceparent header");
    sigterm(&serve);
    exits(serve, "turnstile serve").await;
    let ours = phoenix
        .spans_until(INTEROP_PROJECT, |spans| {
            !named(spans, "execute_tool add").is_empty()
                && !named(spans, "tools/call add").is_empty()
        })
        .await;
    let call = named(&ours, "execute_tool add")[0].clone();
    let theirs = named(&ours, "tools/call add")[0].clone();
    assert_eq!(
        theirs["parent_id"].as_str(),
        Some(span_id(&call)),
        "the SDK's span is a child of turnstile's execute_tool span"
    );
    assert_eq!(
        traceparent.split('-').nth(1),
        Some(trace_id(&call)),
        "{traceparent}"
    );
    drop(py);
    let value = cookie
        .split_once('=')
        .map_or(cookie.as_str(), |(_, v)| v)
        .to_string();
    (theirs, trace_id(&call).to_string(), value)
}

/// Phoenix's page of the trace, rendered by Debian's Chromium.
async fn screenshot(phoenix: &Phoenix, project: &str, trace: &str) {
    let projects: Value = reqwest::get(format!("{}/v1/projects", phoenix.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = projects["data"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == project)
        .and_then(|p| p["id"].as_str())
        .unwrap_or_else(|| panic!("Phoenix lists {project}: {projects}"))
        .to_string();
    let out = common::needs::repo_dir().join("target/otel");
    std::fs::create_dir_all(&out).unwrap();
    let png = out.join("phoenix-turn.png");
    let _ = std::fs::remove_file(&png);
    let chromium = std::env::var("TURNSTILE_CHROMIUM").unwrap_or_else(|_| "chromium".into());
    let profile = tempfile::tempdir().unwrap();
    let status = tokio::process::Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1600,1000",
            "--virtual-time-budget=20000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("{}/projects/{id}/traces/{trace}", phoenix.base))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .expect("chromium runs");
    assert!(status.success(), "chromium's screenshot failed");
    let size = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0);
    assert!(
        size > 20_000,
        "the screenshot is {size} bytes: a blank page?"
    );
}

#[test]
fn the_telemetry_section_is_read_and_checked() {
    use turnstile::config::TelemetryConfig;
    let c = common::config_with("", &|_| None).expect("valid");
    assert_eq!(c.telemetry, TelemetryConfig::default(), "off by default");
    let section = "[telemetry]\notlp_endpoint = \"http://127.0.0.1:6006/v1/traces\"\n\
         service_name = \"assistant\"\nproject = \"site\"\n";
    let c = common::config_with(section, &|_| None).expect("valid");
    assert_eq!(
        c.telemetry.otlp_endpoint.as_deref(),
        Some("http://127.0.0.1:6006/v1/traces")
    );
    assert_eq!(c.telemetry.service_name.as_deref(), Some("assistant"));
    assert_eq!(c.telemetry.project.as_deref(), Some("site"));
    for (bad, named) in [
        (
            "otlp_endpoint = \"ftp://x/v1/traces\"",
            "`telemetry.otlp_endpoint`",
        ),
        ("endpoint = \"http://x\"", "unknown field `endpoint`"),
    ] {
        let err = common::config_with(&format!("[telemetry]\n{bad}\n"), &|_| None)
            .expect_err(bad)
            .to_string();
        assert!(err.contains(named), "{bad}: {err}");
    }
}
