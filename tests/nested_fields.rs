//! Issue 33 §4, through the real path: HTTP and SSE into a turnstile built
//! from a TOML configuration (as `turnstile serve` builds it), an
//! OpenAI-style model (the fake provider, each planning round queued here)
//! and a real MCP connection to a tool server that answers in the seed's
//! envelope, `{"status": "OK", "data": {…}}`, as JSON text only (the habit
//! of a Python SDK server returning `json.dumps(...)`).
//!
//! - `action_id = "data.bookingId"` finds the id the envelope wraps: the
//!   prepare holds an action, the turn ends at its card, and the approve
//!   sends the confirm once with the id under its own name (`bookingId`).
//! - A path the answers do not have is a located problem: a warning naming
//!   server, tool and path (never a value), and a `problems` entry on the
//!   server in `GET /readyz`, whose status stays 200.
//! - The export preview's digest shows the model the fields the envelope
//!   wraps (`data.exportId`), with no configuration.

use crate::common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::fake_openai::{Action, FakeOpenAi, Role, FAKE_MODEL, KEY};
use common::frames::{is_done, stable, tool_calls};
use common::server::TestServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{json, Map, Value};
use turnstile::config::Config;
use turnstile::llm::OpenAi;
use turnstile::wire::{Frame, Interrupt};

// ------------------------------------------------------- the tool server --

/// Every call the server received: (tool, arguments).
type Calls = Arc<Mutex<Vec<(String, Map<String, Value>)>>>;

/// A tool server that wraps every answer in the seed's envelope.
#[derive(Clone, Default)]
struct Envelopes {
    calls: Calls,
}

fn tool(name: &'static str, description: &'static str, params: &[&str]) -> Tool {
    let props: Map<String, Value> = params
        .iter()
        .map(|p| (p.to_string(), json!({"type": ["string", "integer"]})))
        .collect();
    let schema = json!({"type": "object", "properties": props});
    let Value::Object(schema) = schema else {
        unreachable!("a JSON object literal")
    };
    Tool::new(name, description, Arc::new(schema))
}

/// What each tool answers, as one JSON text block.
fn answer(tool: &str, args: &Map<String, Value>) -> Value {
    match tool {
        "hold_room" => json!({"status": "OK", "data": {"bookingId": 101, "room": "B-2"}}),
        "book_room" => {
            json!({"status": "OK", "data": {"bookingId": args.get("bookingId"), "state": "CONFIRMED"}})
        }
        "release_room" => json!({"status": "OK", "data": {"state": "RELEASED"}}),
        "export_files" => json!({
            "status": "OK",
            "data": {"exportId": "EXP-1", "fileCount": 3, "estimatedBytes": 48213},
        }),
        _ => json!({"status": "NOT_FOUND"}),
    }
}

impl ServerHandler for Envelopes {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![
            tool(
                "hold_room",
                "Hold a room; answers the booking id.",
                &["room"],
            ),
            tool("book_room", "Confirm a held booking.", &["bookingId"]),
            tool("release_room", "Release a held booking.", &["bookingId"]),
            tool(
                "export_files",
                "Preview an export of the user's files.",
                &[],
            ),
            tool("confirm_files", "Start a previewed export.", &["exportId"]),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let body = answer(&request.name, &args);
        self.calls
            .lock()
            .unwrap()
            .push((request.name.to_string(), args));
        Ok(CallToolResult::success(vec![ContentBlock::text(body.to_string())]).into())
    }
}

/// The server on a free loopback port: its MCP URL, its origin and the
/// calls it receives.
async fn start_envelopes() -> (String, String, Calls, tokio::task::JoinHandle<()>) {
    let server = Envelopes::default();
    let calls = server.calls.clone();
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default().with_sse_keep_alive(None),
    );
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let router = axum::Router::new().nest_service("/mcp", service);
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    let origin = format!("http://{addr}");
    (format!("{origin}/mcp"), origin, calls, task)
}

// ------------------------------------------------------------- the rig --

struct Rig {
    fake: FakeOpenAi,
    app: TestServer,
    thread: String,
    calls: Calls,
    server: tokio::task::JoinHandle<()>,
    _tmp: tempfile::TempDir,
}

impl Rig {
    /// turnstile as `turnstile serve` builds it from this `[mcp_servers]`
    /// entry's tool tables (`$ORIGIN`: the tool server's origin).
    async fn start(tools: &str) -> Rig {
        common::init_tracing();
        let tmp = tempfile::tempdir().unwrap();
        let (url, origin, calls, server) = start_envelopes().await;
        let fake = FakeOpenAi::start().await;
        let db = format!("sqlite://{}?mode=rwc", tmp.path().join("t.db").display());
        let q = |s: &str| toml::Value::String(s.to_string()).to_string();
        let src = format!(
            "database_url = {db}\n\n[model]\nbase_url = {base}\nname = {name}\napi_key = {key}\n\
             connect_timeout_secs = 2\nidle_timeout_secs = 10\nmax_retries = 2\n\
             backoff_initial_ms = 10\nbackoff_max_ms = 200\n\n\
             [[mcp_servers]]\nname = \"rooms\"\nurl = {url}\ntrusted_origin = {origin}\n\n{tools}",
            db = q(&db),
            base = q(&fake.base_url),
            name = q(FAKE_MODEL),
            key = q(KEY),
            url = q(&url),
            origin = q(&origin),
            tools = tools.replace("$ORIGIN", &origin),
        );
        let config = Config::from_toml(&src, Path::new("nested-fields.toml"), &|_| None)
            .unwrap_or_else(|e| panic!("the configuration does not load: {e}\n{src}"));
        let model = Arc::new(OpenAi::new(config.openai()).expect("model adapter"));
        let app = TestServer::builder()
            .database(&db)
            .config(&config)
            .model(model)
            .start()
            .await;
        let thread = app.new_thread().await;
        Rig {
            fake,
            app,
            thread,
            calls,
            server,
            _tmp: tmp,
        }
    }

    /// One turn whose first planning round makes exactly `calls`, and
    /// whose next ones are queued after them (the scripted planner's when
    /// none are).
    async fn turn(&self, text: &str, calls: &[(&str, Value)], then: &[Action]) -> Vec<Frame> {
        let calls = calls
            .iter()
            .map(|(tool, args)| (tool.to_string(), args.to_string()))
            .collect();
        self.fake.on(Role::Planner, Action::ToolCalls(calls));
        for a in then {
            self.fake.on(Role::Planner, a.clone());
        }
        let frames =
            tokio::time::timeout(Duration::from_secs(60), self.app.say(&self.thread, text))
                .await
                .unwrap_or_else(|_| panic!("the turn `{text}` did not end within 60 s"));
        eprintln!("── {text}\n{}", stable(&frames));
        assert!(
            is_done(&frames),
            "`{text}` did not finish:\n{}",
            stable(&frames)
        );
        frames
    }

    /// How many times the tool server received a call of `tool`, and the
    /// arguments of the last.
    fn received(&self, tool: &str) -> (usize, Option<Map<String, Value>>) {
        let calls = self.calls.lock().unwrap();
        let of: Vec<&Map<String, Value>> = calls
            .iter()
            .filter(|(t, _)| t == tool)
            .map(|(_, a)| a)
            .collect();
        (of.len(), of.last().map(|a| (*a).clone()))
    }

    fn done(self) {
        self.server.abort();
        self.app.pass();
    }
}

fn interrupt(frames: &[Frame]) -> Option<&Interrupt> {
    frames.iter().find_map(|f| match f {
        Frame::Interrupt(i) => Some(i),
        _ => None,
    })
}

fn prepare_tools(action_id: &str) -> String {
    format!(
        "[mcp_servers.tools.hold_room.approval.prepare]\naction_id = \"{action_id}\"\n\
         confirm = \"book_room\"\ncancel = \"release_room\"\n"
    )
}

// ------------------------------------------------------------- the tests --

/// `action_id = "data.bookingId"` against `{"status":"OK","data":
/// {"bookingId":101,…}}`: the card, and on approve one confirm with
/// `bookingId: 101`. Before paths, this configuration passed `serve
/// --check` and every prepare was a silent no-op.
#[tokio::test]
async fn a_dotted_action_id_holds_the_prepare_and_the_confirm_gets_the_id() {
    let rig = Rig::start(&prepare_tools("data.bookingId")).await;
    let frames = rig
        .turn(
            "book room B-2",
            &[("hold_room", json!({"room": "B-2"}))],
            &[],
        )
        .await;
    let i = interrupt(&frames)
        .unwrap_or_else(|| panic!("no interrupt:\n{}", stable(&frames)))
        .clone();
    assert_eq!(i.tool, "book_room");
    assert_eq!(i.action.tool, "hold_room");
    assert_eq!(i.action.action_id, Some(101));
    assert_eq!(
        i.args,
        json!({"bookingId": 101}).as_object().cloned().unwrap()
    );
    assert_eq!(rig.received("book_room").0, 0, "nothing confirmed yet");

    let resumed = rig
        .app
        .resume(&rig.thread, &i.interrupt_id, "approve")
        .await
        .unwrap_or_else(|e| panic!("resume refused: {e:?}"));
    assert!(is_done(&resumed), "{}", stable(&resumed));
    assert_eq!(tool_calls(&resumed)[0].tool, "book_room");
    let (n, args) = rig.received("book_room");
    assert_eq!(n, 1, "one confirm");
    assert_eq!(
        args.and_then(|a| a.get("bookingId").cloned()),
        Some(json!(101))
    );

    let (status, body) = rig.app.get("/readyz").await;
    assert_eq!(status, 200, "{body}");
    assert!(body["servers"][0].get("problems").is_none(), "{body}");
    rig.done();
}

/// A path the prepare's answers do not have: no card (nothing is held on
/// a guess), and the operator sees where: a warning naming server, tool,
/// key and path, and the same under the server in `GET /readyz`, still
/// 200 (the server answers; its configuration is what is wrong).
#[tokio::test]
async fn a_path_the_answer_lacks_is_a_problem_in_readyz_and_the_log() {
    let rig = Rig::start(&prepare_tools("data.reservationId")).await;
    let frames = rig
        .turn(
            "book room B-2",
            &[("hold_room", json!({"room": "B-2"}))],
            &[],
        )
        .await;
    assert!(interrupt(&frames).is_none(), "{}", stable(&frames));
    assert_eq!(rig.received("hold_room").0, 1);
    assert_eq!(rig.received("book_room").0, 0);
    // The approval table's `unread-prepare-asks-nothing` row: the user is
    // told the answer could not be read, never that nothing was prepared
    // (the server may hold an action).
    let said = common::frames::answer(&frames);
    assert!(
        said.starts_with("The tool answered, but I could not read which action it prepared"),
        "{said}"
    );
    assert!(!said.contains("Nothing was prepared"), "{said}");

    let (status, body) = rig.app.get("/readyz").await;
    assert_eq!(status, 200, "a field problem changes no readiness: {body}");
    let problems = &body["servers"][0]["problems"];
    assert_eq!(
        problems,
        &json!([{
            "tool": "hold_room",
            "key": "approval.prepare.action_id",
            "path": "data.reservationId",
            "problem": turnstile::agent::problems::NOT_FOUND,
            "times": 1,
        }]),
        "{body}"
    );

    let logs = common::logs::text();
    let line = logs
        .lines()
        .find(|l| l.contains("WARN") && l.contains("path=data.reservationId"))
        .unwrap_or_else(|| panic!("no warning names the path"));
    for want in [
        "server=rooms",
        "tool=hold_room",
        "key=approval.prepare.action_id",
    ] {
        assert!(line.contains(want), "{want} not in: {line}");
    }
    for value in ["101", "B-2"] {
        assert!(!line.contains(value), "a result's value in the log: {line}");
    }
    rig.done();
}

/// The seed's export preview, `{"status":"OK","data":{"exportId":"EXP-1",
/// "fileCount":3,"estimatedBytes":48213}}`, with no contract: the model's
/// next planning round is shown the export id it must confirm, after the
/// envelope's own `status`.
#[tokio::test]
async fn the_seed_preview_shows_the_model_its_export_id() {
    let rig = Rig::start(
        "[mcp_servers.tools.confirm_files.terminal.capability]\n\
         preview = \"export_files\"\npath_template = \"/dl/{jobId}\"\n",
    )
    .await;
    let then = [Action::Text("Shall I start the export?".into())];
    rig.turn("export my files", &[("export_files", json!({}))], &then)
        .await;
    let shown: Vec<String> = rig
        .fake
        .requests()
        .iter()
        .flat_map(|r| r.body["messages"].as_array().cloned().unwrap_or_default())
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect();
    let digest = shown
        .iter()
        .find(|c| c.contains("export_files"))
        .unwrap_or_else(|| panic!("no digest of the preview was shown: {shown:?}"));
    assert!(digest.contains(r#""data.exportId":"EXP-1""#), "{digest}");
    assert!(digest.contains(r#""data.fileCount":3"#), "{digest}");
    let at = |k: &str| digest.find(k).unwrap_or(usize::MAX);
    assert!(at(r#""status":"OK""#) < at("data.exportId"), "{digest}");
    rig.done();
}
