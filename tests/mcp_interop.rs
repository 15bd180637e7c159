//! Real MCP interoperability — no mocks.
//!
//! * Our [`ToolClient`] against our [`DemoServer`] over streamable HTTP.
//! * Against servers nobody here wrote:
//!   - npm `@modelcontextprotocol/server-everything` over stdio
//!     (`npm ci` in tests/interop),
//!   - a server on the official Python SDK over streamable HTTP
//!     (`tests/interop/requirements.txt` in the venv `tests/interop/.venv`;
//!     `tests/interop/py_server.py`).
//!
//! `scripts/test-deps` installs both. The tests against them are
//! `#[ignore = "needs the npm/PyPI MCP servers: …"]`; run with
//! `--include-ignored`, a missing server fails them (ADR 0015,
//! `tests/common/needs.rs`). `TURNSTILE_PYTHON` overrides the interpreter
//! (default `tests/interop/.venv/bin/python`, else `python3`), `NODE` the
//! node binary (default `node`).

use crate::common;

use common::{init_tracing, needs};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use turnstile::mcp::{
    ClientOptions, McpError, ServerSpec, ToolClient, ToolOutput, PROTOCOL_VERSION,
};
use turnstile_demo::{DemoOptions, DemoServer, Fault};

// ---------------------------------------------------------------- helpers --

fn interop_dir() -> PathBuf {
    needs::interop_dir()
}

fn args(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(map) => map,
        other => panic!("arguments must be an object, got {other}"),
    }
}

fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

async fn demo(faults: Vec<Fault>) -> DemoServer {
    DemoServer::start(
        loopback(),
        DemoOptions {
            faults,
            ..DemoOptions::default()
        },
    )
    .await
    .expect("demo server starts")
}

async fn connect(server: &DemoServer) -> ToolClient {
    ToolClient::connect(&ServerSpec::http("demo", server.url.clone()))
        .await
        .expect("client connects to demo server")
}

fn meta(out: &ToolOutput) -> Map<String, Value> {
    out.meta.clone().expect("result-level _meta present")
}

fn item_ids(out: &ToolOutput) -> Vec<String> {
    out.json()
        .and_then(|v| v.get("items").and_then(Value::as_array).cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|i| i.get("id").and_then(Value::as_str).map(str::to_string))
        .collect()
}

fn safety_floor3() -> Map<String, Value> {
    args(json!({"query": "safety", "floor": 3}))
}

// ------------------------------------------ the ignore-or-fail mechanism --

/// An interop test never passes without its server: a plain run lists it as
/// ignored with its reason, and `--include-ignored` with an interpreter that
/// lacks the Python SDK fails it, saying to run `scripts/test-deps` (ADR
/// 0015; the PostgreSQL twin of this check is in `tests/store.rs`). Runs the
/// test in a child process of this test binary, with a stand-in `python`
/// that answers `--version` and nothing else.
#[test]
fn an_interop_test_without_its_server_is_ignored_or_fails() {
    let test = needs::test_name(module_path!(), "python_sdk_server_over_streamable_http");
    let test = test.as_str();
    let tmp = tempfile::tempdir().unwrap();
    let python = tmp.path().join("python");
    std::fs::write(
        &python,
        "#!/bin/sh\n[ \"$1\" = --version ] && exit 0\nexit 1\n",
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let run = |include_ignored: bool| {
        let mut c = std::process::Command::new(std::env::current_exe().unwrap());
        c.args([test, "--exact", "--test-threads", "1"])
            .env("TURNSTILE_PYTHON", &python);
        if include_ignored {
            c.arg("--include-ignored");
        }
        let out = c.output().expect("the test binary runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let (ok, out) = run(false);
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!(
            "test {test} ... ignored, needs the npm/PyPI MCP servers: scripts/test-deps, run with --include-ignored"
        )),
        "{out}"
    );
    assert!(out.contains("0 passed; 0 failed; 1 ignored"), "{out}");
    let (ok, out) = run(true);
    assert!(!ok, "a missing server must fail the test:\n{out}");
    assert!(out.contains(&format!("test {test} ... FAILED")), "{out}");
    assert!(
        out.contains("needs the MCP Python SDK 2.x, which is missing"),
        "{out}"
    );
    assert!(out.contains("run scripts/test-deps"), "{out}");
}

// ------------------------------------------------------- demo server (ours) --

#[tokio::test]
async fn demo_handshake_and_paginated_tool_list() {
    init_tracing();
    let server = demo(vec![]).await;
    assert!(server.url.ends_with("/mcp") && !server.url.contains(":0/"));
    let client = connect(&server).await;
    assert_eq!(client.name(), "demo");
    assert_eq!(client.protocol_version(), PROTOCOL_VERSION.as_str());

    // The demo pages tools/list two at a time: fifteen tools means we followed seven cursors.
    let tools = client.list_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "archive_query",
            "cancel_action",
            "compile_site_report",
            "confirm_action",
            "confirm_lms_material_export",
            "export_all_lms_materials",
            "get_action",
            "get_panorama",
            "get_photo",
            "list_projects",
            "notify_site_contact",
            "open_permit_portal",
            "prepare_seat_reservation",
            "query_data",
            "search_photos"
        ]
    );
    let search = tools
        .iter()
        .find(|t| t.name == "search_photos")
        .expect("search_photos");
    assert!(!search.description.is_empty());
    assert_eq!(search.input_schema["type"], "object");
    assert!(search.input_schema["properties"]["query"].is_object());
    assert!(search.input_schema["properties"]["cursor"].is_object());
    assert_eq!(search.input_schema["required"], json!(["query"]));

    client.close().await;
    server.shutdown().await;
}

#[tokio::test]
async fn demo_search_accounting_cursor_and_honest_empty() {
    init_tracing();
    let server = demo(vec![]).await;
    let client = connect(&server).await;

    let first = client
        .call("search_photos", safety_floor3())
        .await
        .expect("search_photos");
    assert!(!first.is_error);
    assert_eq!(first.blocks.len(), 10);
    let m = meta(&first);
    assert_eq!(m["returned"], json!(10));
    assert_eq!(m["total_lower_bound"], json!(189));
    assert!(!m.contains_key("total"));
    assert_eq!(m["has_more"], json!(true));
    let cursor = m["next_cursor"].as_str().expect("next_cursor").to_string();
    // Every hit block carries the same accounting as the result.
    assert_eq!(first.metas().count(), 11);
    assert!(first.metas().all(|bm| *bm == m));
    assert!(first.blocks[0]
        .as_text()
        .is_some_and(|t| t.starts_with("## Image #1 — PANO-003-") && t.contains("(safety)")));
    let structured = first.json().expect("structured content");
    assert_eq!(structured["returned"], json!(10));
    assert_eq!(structured["items"][0]["floor"], json!(3));

    let mut follow = safety_floor3();
    follow.insert("cursor".into(), json!(cursor));
    let second = client
        .call("search_photos", follow)
        .await
        .expect("second page");
    assert!(!second.is_error);
    assert!(second.text().starts_with("## Image #11 — "));
    let (a, b) = (item_ids(&first), item_ids(&second));
    assert_eq!(b.len(), 10);
    assert!(a.iter().all(|id| !b.contains(id)), "pages do not overlap");

    // A cursor is bound to its search.
    let foreign = client
        .call(
            "search_photos",
            args(json!({"query": "quality", "floor": 3, "cursor": cursor})),
        )
        .await
        .expect("foreign cursor call");
    assert!(foreign.is_error);
    assert!(foreign.meta.is_none());

    // 1999: zero hits, with accounting — an honest "empty".
    let empty = client
        .call(
            "search_photos",
            args(json!({"query": "safety", "date_from": "1999-01-01", "date_to": "1999-12-31"})),
        )
        .await
        .expect("1999 search");
    assert!(!empty.is_error);
    assert!(empty.blocks.is_empty());
    let m = meta(&empty);
    assert_eq!(m["returned"], json!(0));
    assert_eq!(m["total"], json!(0));
    assert_eq!(m["has_more"], json!(false));
    assert_eq!(m["next_cursor"], Value::Null);

    // Filters only (empty query): an exact total.
    let exact = client
        .call(
            "search_photos",
            args(json!({"query": "", "project": "tower-a"})),
        )
        .await
        .expect("filters-only search");
    assert_eq!(meta(&exact)["total"], json!(7961));

    client.close().await;
    server.shutdown().await;
}

#[tokio::test]
async fn demo_failures_are_observable() {
    init_tracing();
    let server = demo(vec![]).await;
    let client = connect(&server).await;

    // Unknown tool: rmcp answers with a JSON-RPC error.
    match client.call("no_such_tool", Map::new()).await {
        Err(McpError::Rpc { code, server, .. }) => {
            assert_eq!(code, -32602);
            assert_eq!(server, "demo");
        }
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
    // Arguments of the wrong type: a tool-level error (isError: true).
    let bad = client
        .call("search_photos", args(json!({"query": 5})))
        .await
        .expect("bad arguments still get a result");
    assert!(bad.is_error);
    // Tool-level validation failure.
    let bad_date = client
        .call(
            "search_photos",
            args(json!({"query": "safety", "date_from": "yesterday"})),
        )
        .await
        .expect("bad date");
    assert!(bad_date.is_error);
    assert!(bad_date.text().contains("date_from"));

    // get_photo and list_projects work and carry structured content.
    let projects = client
        .call("list_projects", Map::new())
        .await
        .expect("list_projects");
    let projects = projects.json().expect("projects json");
    assert_eq!(projects["projects"][0]["panoramas"], json!(7961));
    let photo = client
        .call("get_photo", args(json!({"id": "TA-00412"})))
        .await
        .expect("get_photo");
    assert_eq!(photo.json().expect("photo json")["id"], json!("TA-00412"));

    client.close().await;
    server.shutdown().await;
}

#[tokio::test]
async fn demo_faults() {
    init_tracing();

    for fault in [Fault::Upstream502, Fault::AuthEmptyObject] {
        let server = demo(vec![fault]).await;
        let client = connect(&server).await;
        let out = client
            .call("search_photos", safety_floor3())
            .await
            .expect("faulty search still answers");
        assert!(!out.is_error, "{fault}: the adapter claims success");
        assert_eq!(out.blocks.len(), 1, "{fault}");
        assert_eq!(out.metas().count(), 0, "{fault}: no _meta anywhere");
        assert!(out.structured.is_none(), "{fault}");
        match fault {
            Fault::Upstream502 => assert!(out
                .text()
                .starts_with("Search API error: 502 Server Error: Bad Gateway for url: ")),
            _ => {
                assert_eq!(out.text(), "{}");
                assert_eq!(out.json(), Some(json!({})));
            }
        }
        client.close().await;
        server.shutdown().await;
    }

    // cursor-rejected: first page fine, any cursor → "invalid cursor".
    let server = demo(vec![Fault::CursorRejected]).await;
    let client = connect(&server).await;
    let first = client
        .call("search_photos", safety_floor3())
        .await
        .expect("first page");
    let cursor = meta(&first)["next_cursor"].clone();
    let mut follow = safety_floor3();
    follow.insert("cursor".into(), cursor);
    let out = client
        .call("search_photos", follow)
        .await
        .expect("rejected");
    assert!(!out.is_error);
    assert_eq!(out.text(), "invalid cursor");
    assert_eq!(out.metas().count(), 0);
    client.close().await;
    server.shutdown().await;

    // cursor-drift: the next page overlaps the previous one and the total moves by +3.
    let server = demo(vec![Fault::CursorDrift]).await;
    let client = connect(&server).await;
    let first = client
        .call("search_photos", safety_floor3())
        .await
        .expect("first page");
    let mut follow = safety_floor3();
    follow.insert("cursor".into(), meta(&first)["next_cursor"].clone());
    let second = client
        .call("search_photos", follow)
        .await
        .expect("drifted page");
    let (a, b) = (item_ids(&first), item_ids(&second));
    assert_eq!(b.iter().filter(|id| a.contains(id)).count(), 3);
    let before = meta(&first)["total_lower_bound"]
        .as_i64()
        .unwrap_or_default();
    let after = meta(&second)["total_lower_bound"]
        .as_i64()
        .unwrap_or_default();
    assert_eq!(after - before, 3);
    client.close().await;
    server.shutdown().await;
}

/// ADR 0004 and 0029: an expired session is not re-initialised by rmcp,
/// unseen; the table does it (row `session-expired-on-call`, in the trace),
/// and re-sends the call whose POST met the 404 once. The server ran it once.
#[tokio::test]
async fn an_expired_session_is_re_initialised_by_the_table_and_the_call_runs_once() {
    init_tracing();
    let server = demo(vec![]).await;
    let client = connect(&server).await;
    client
        .call("search_photos", safety_floor3())
        .await
        .expect("first call");
    assert_eq!(server.search_calls(), 1);

    server.expire_sessions().await;
    let again = client
        .call("search_photos", safety_floor3())
        .await
        .expect("the call is re-sent once on the new session");
    assert!(!again.is_error);
    assert_eq!(server.search_calls(), 2, "the call ran once");
    let trace = client.trace();
    let moves: Vec<&str> = trace
        .iter()
        .map(String::as_str)
        .filter(|r| *r != "answered")
        .collect();
    assert_eq!(
        moves,
        ["connected", "session-expired-on-call", "reinitialized"],
        "{trace:?}"
    );
    client.close().await;
    server.shutdown().await;
}

/// Characterises the rmcp default that ADR 0004 turns off: with
/// `reinit_on_expired_session = true` the same situation silently opens a new
/// session and runs the call. If this ever fails, rmcp changed its default;
/// re-read ADR 0004.
#[tokio::test]
async fn rmcp_default_would_silently_reinitialise() {
    use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::ServiceExt;

    init_tracing();
    let server = demo(vec![]).await;
    let client = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("rmcp-defaults", "0"),
    )
    .with_protocol_version(PROTOCOL_VERSION)
    .serve(StreamableHttpClientTransport::from_uri(server.url.clone()))
    .await
    .expect("raw rmcp client connects");
    let call = || CallToolRequestParams::new("search_photos").with_arguments(safety_floor3());
    client.call_tool(call()).await.expect("first call");
    server.expire_sessions().await;
    let second = client.call_tool(call()).await;
    assert!(
        second.is_ok(),
        "rmcp default re-initialised and retried: {second:?}"
    );
    assert_eq!(server.search_calls(), 2);
    let _ = client.cancel().await;
    server.shutdown().await;
}

// ------------------------------------- npm @modelcontextprotocol/server-everything --

fn everything_spec() -> ServerSpec {
    let entry = needs::interop_npm("@modelcontextprotocol/server-everything/dist/index.js");
    let node = needs::node();
    ServerSpec::stdio(
        "everything",
        node,
        [entry.display().to_string(), "stdio".to_string()],
    )
}

#[tokio::test]
#[ignore = "needs the npm/PyPI MCP servers: scripts/test-deps, run with --include-ignored"]
async fn npm_server_everything_over_stdio() {
    init_tracing();
    let spec = everything_spec();
    let client = ToolClient::connect(&spec)
        .await
        .expect("connect to server-everything");
    assert_eq!(client.protocol_version(), "2025-11-25");

    let tools = client.list_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    for wanted in ["echo", "get-sum", "get-structured-content"] {
        assert!(names.contains(&wanted), "{wanted} missing from {names:?}");
    }

    let echo = client
        .call("echo", args(json!({"message": "hello turnstile"})))
        .await
        .expect("echo");
    assert!(!echo.is_error);
    assert_eq!(echo.text(), "Echo: hello turnstile");

    let sum = client
        .call("get-sum", args(json!({"a": 2, "b": 40})))
        .await
        .expect("get-sum");
    assert!(!sum.is_error);
    assert!(sum.text().contains("is 42"), "{}", sum.text());

    let weather = client
        .call(
            "get-structured-content",
            args(json!({"location": "Chicago"})),
        )
        .await
        .expect("get-structured-content");
    let expected = json!({"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82});
    assert_eq!(weather.structured, Some(expected.clone()));
    assert_eq!(weather.json(), Some(expected));

    // Unknown tool: must be observable as a failure. This TypeScript SDK
    // turns it into an `isError: true` result ("Tool ... not found") rather
    // than a JSON-RPC error; either counts.
    match client.call("no-such-tool", Map::new()).await {
        Ok(out) => {
            assert!(out.is_error, "unknown tool must fail: {out:?}");
            assert!(out.text().contains("not found"), "{}", out.text());
        }
        Err(McpError::Rpc { .. }) => {}
        Err(other) => panic!("unexpected failure kind: {other}"),
    }
    // Invalid arguments are also a failure.
    let invalid = client.call("get-sum", args(json!({"a": "two"}))).await;
    assert!(invalid.as_ref().map_or(true, |o| o.is_error), "{invalid:?}");

    // Our timeout fires, and the connection stays usable afterwards.
    let client = client.with_call_timeout(Duration::from_millis(300));
    let slow = client
        .call(
            "trigger-long-running-operation",
            args(json!({"duration": 5, "steps": 5})),
        )
        .await;
    assert!(
        matches!(slow, Err(McpError::Timeout { ref tool, .. }) if tool == "trigger-long-running-operation"),
        "{slow:?}"
    );
    let client = client.with_call_timeout(Duration::from_secs(10));
    let again = client
        .call("echo", args(json!({"message": "still here"})))
        .await
        .expect("echo after a timeout");
    assert_eq!(again.text(), "Echo: still here");
    client.close().await;
}

// ------------------------------------------------ official Python SDK server --

pub(crate) struct PyServer {
    child: tokio::process::Child,
    pub(crate) url: String,
}

pub(crate) async fn start_py_server() -> PyServer {
    start_py_server_with(&[]).await
}

/// [`start_py_server`] with these environment variables set.
pub(crate) async fn start_py_server_with(env: &[(&str, &str)]) -> PyServer {
    let py = needs::python_sdk();
    let port = crate::common::free_port();
    let mut child = tokio::process::Command::new(&py)
        .arg(interop_dir().join("py_server.py"))
        .args(["--port", &port.to_string()])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn python server");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            break;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("python MCP server exited early with {status}");
        }
        assert!(
            Instant::now() < deadline,
            "python MCP server did not listen on {port} within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    PyServer {
        child,
        url: format!("http://127.0.0.1:{port}/mcp"),
    }
}

#[tokio::test]
#[ignore = "needs the npm/PyPI MCP servers: scripts/test-deps, run with --include-ignored"]
async fn python_sdk_server_over_streamable_http() {
    init_tracing();
    let mut py = start_py_server().await;
    let client = ToolClient::connect_with(
        &ServerSpec::http("python", py.url.clone()),
        ClientOptions::default(),
    )
    .await
    .expect("connect to python server");
    assert_eq!(client.protocol_version(), "2025-11-25");

    let tools = client.list_tools().await.expect("tools/list");
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "add",
            "crash_tool",
            "fail_tool",
            "inspect_site",
            "issue_badge",
            "register_visitor",
            "rpc_error",
            "task_counts",
            "visitor_count",
            "weather"
        ]
    );

    let sum = client
        .call("add", args(json!({"a": 2, "b": 3})))
        .await
        .expect("add");
    assert!(!sum.is_error);
    assert_eq!(sum.text(), "5");
    // The Python SDK wraps a primitive return value as {"result": ...}.
    assert_eq!(sum.json(), Some(json!({"result": 5})));

    let weather = client
        .call("weather", args(json!({"city": "Lyon"})))
        .await
        .expect("weather");
    let expected = json!({"city": "Lyon", "temperature_c": 21.5, "conditions": "overcast"});
    assert_eq!(weather.structured, Some(expected.clone()));
    assert_eq!(weather.json(), Some(expected));

    let failed = client
        .call("fail_tool", args(json!({"reason": "test"})))
        .await
        .expect("isError is a result, not an Err");
    assert!(failed.is_error);
    assert!(
        failed.text().contains("tool failed on purpose: test"),
        "{}",
        failed.text()
    );

    let crashed = client
        .call("crash_tool", Map::new())
        .await
        .expect("a crash is still a result");
    assert!(crashed.is_error);
    assert!(
        !crashed.text().contains("internal detail"),
        "{}",
        crashed.text()
    );

    match client
        .call("rpc_error", args(json!({"reason": "test"})))
        .await
    {
        Err(McpError::Rpc {
            code,
            message,
            tool,
            ..
        }) => {
            assert_eq!(code, -32602);
            assert!(message.contains("rejected on purpose: test"), "{message}");
            assert_eq!(tool, "rpc_error");
        }
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }

    match client.call("no_such_tool", Map::new()).await {
        Ok(out) => assert!(out.is_error, "unknown tool must fail: {out:?}"),
        Err(McpError::Rpc { .. }) => {}
        Err(other) => panic!("unexpected failure kind: {other}"),
    }

    client.close().await;
    let _ = py.child.kill().await;
}

/// The turn loop against a server and a model nobody here wrote the habits
/// of: the official Python SDK server's tools, planned by an OpenAI-style
/// model (the fake provider). Step 1 calls a tool that fails (`isError`),
/// step 2 corrects itself with another tool, step 3 answers. The failed
/// result reaches the planner as a digest under its `tool_call_id`, and the
/// thread stores every call and result the client was shown.
#[tokio::test]
#[ignore = "needs the npm/PyPI MCP servers: scripts/test-deps, run with --include-ignored"]
async fn the_turn_loop_runs_against_the_python_sdk_server() {
    use common::fake_openai::{Action, FakeOpenAi, Role};
    use common::frames::{assert_done, plans, tool_results};
    use common::thread::RecordKind;
    init_tracing();
    let mut py = start_py_server().await;
    let fake = FakeOpenAi::start().await;
    let s = common::server::TestServer::builder()
        .servers(vec![ServerSpec::http("python", py.url.clone())])
        .model(fake.model())
        .start()
        .await;
    fake.on(
        Role::Planner,
        Action::ToolCalls(vec![(
            "fail_tool".into(),
            r#"{"reason":"first try"}"#.into(),
        )]),
    );
    fake.on(
        Role::Planner,
        Action::ToolCalls(vec![("weather".into(), r#"{"city":"Seoul"}"#.into())]),
    );
    let thread = s.new_thread().await;
    let frames = s.say(&thread, "what is the weather in Seoul?").await;
    assert_done(&frames, "the weather turn");
    let steps: Vec<u32> = plans(&frames).iter().map(|p| p.step).collect();
    assert_eq!(steps, [1, 2]);
    let results = tool_results(&frames);
    assert_eq!(
        results
            .iter()
            .map(|r| (r.tool.as_str(), r.ok))
            .collect::<Vec<_>>(),
        [("fail_tool", false), ("weather", true)]
    );
    // Two tool steps, three requests: the third round, which answers,
    // carries both earlier calls as the tools loop, each answered by a
    // bounded digest, never the raw result.
    let requests = fake.requests();
    assert_eq!(
        requests.iter().map(|r| r.role).collect::<Vec<_>>(),
        [Role::Planner, Role::Planner, Role::Responder]
    );
    let messages = requests[2].body["messages"].as_array().unwrap().clone();
    let tool_messages: Vec<&Value> = messages.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tool_messages.len(), 2);
    let failed: turnstile::judge::digest::Digest =
        serde_json::from_str(tool_messages[0]["content"].as_str().unwrap()).unwrap();
    assert!(!failed.ok);
    assert!(!tool_messages[0]["content"]
        .as_str()
        .unwrap()
        .contains("first try"));
    let calls = messages
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .map(|c| c["id"].clone())
        .collect::<Vec<_>>();
    let answered = tool_messages
        .iter()
        .map(|m| m["tool_call_id"].clone())
        .collect::<Vec<_>>();
    assert_eq!(calls, answered, "every call answered under its own id");
    let records = s.records(&thread).await;
    assert_eq!(
        records.iter().filter(|r| **r == RecordKind::Result).count(),
        2,
        "{records:?}"
    );
    assert_eq!(records.last(), Some(&RecordKind::Answer));
    s.pass();
    let _ = py.child.kill().await;
}
