//! The honesty flows of `docs/honesty.md` against MCP servers nobody here
//! wrote the habits of (issue 9 §5), through the real path: turnstile's
//! HTTP + SSE, a real MCP connection, the judge, and an OpenAI-style model
//! (the fake provider: each planning round is queued by the test; the
//! responder writes one sentence per directive the judge gave it).
//!
//! Each turnstile is built from a TOML configuration, as `turnstile serve`
//! builds it: the server, the per-tool result contracts (`accounting`,
//! `items_path`, `id_field`, `scope_ids_param`, `accounting_keys`) and the
//! limits.
//!
//! The servers, all over one dataset (photos with an id, a floor and a
//! capture date: 651 on floor 3, 613 on floor 2, 198 on floor 4, 24 on
//! floor 7, none on floor 9; see [`photos`]):
//!
//! | server | SDK, transport | habits | accounting mode |
//! |---|---|---|---|
//! | `tests/interop/ts_server.mjs` | TypeScript SDK, streamable HTTP | items in `structuredContent.results`, id `uid`, standard accounting keys in result `_meta`, a `resource_link` per item, cursor paging, id list `uids` (ignored above 50 ids), count as `structuredContent: {"count": N}` | `required` |
//! | `tests/interop/py_text_server.py` | Python SDK 2.x, streamable HTTP | no `structuredContent`: JSON in one text block, items under `photos`, id `photo_id`, accounting as `count` / `total_count` / `at_least` / `more` / `next`, id list `photo_ids`, count as text `{"columns": ["COUNT(*)"], "rows": [[N]]}` | `required` + `accounting_keys` |
//! | `mcp-server-sqlite` (PyPI, the reference server) | Python SDK 1.x, stdio | `read_query` answers Python-literal text (`[{'n': 651}]`), errors as text `Database error: …`, no accounting ever | `absent` |
//! | `tests/interop/py_server.py` | Python SDK 2.x, streamable HTTP | `isError` failures, a JSON-RPC error, a primitive wrapped as `{"result": N}` | `required` / `absent` |
//!
//! Flows (one test per server and flow, `<server>::<flow>`): counted
//! listing, lower bound, accounted zero (the SQLite server: an empty result,
//! which is not an accounted zero), in-band failure, narrowing, "show more"
//! across turns (the model calls `show_more_results`, code continues from
//! the stored cursor; drift between turns by the total and by repeated ids;
//! an expired cursor answered in band) and the single-value aggregate;
//! on the Python SDK text server also human approval and an export whose
//! capability link code delivers (issue 18: a second terminal flow, its own
//! path template and token parameter, declared in the config alone; see
//! `interop_honesty/terminal.rs`).
//!
//! Every test here needs one of these servers, so every test is
//! `#[ignore = "needs the npm/PyPI MCP servers: …"]`; run with
//! `--include-ignored`, a missing server fails it (ADR 0015,
//! `tests/common/needs.rs`). `scripts/test-deps` installs them all: `npm ci`
//! in tests/interop, `tests/interop/requirements.txt` in the venv
//! `tests/interop/.venv`, and `tests/interop/requirements-sqlite.txt` in the
//! venv `tests/interop/.venv-sqlite` (it needs `mcp<2`).
//! `TURNSTILE_PYTHON` overrides the interpreter (default
//! `tests/interop/.venv/bin/python`, else `python3`), `NODE` the node binary,
//! `TURNSTILE_SQLITE_SERVER` the SQLite server's executable.

use crate::common;

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::fake_openai::{Action, FakeOpenAi, Role, FAKE_MODEL, KEY};
use common::frames::{citations, figures, is_done, stable, tool_calls, tool_results};
use common::server::TestServer;
use common::thread::Record;
use common::{init_tracing, needs};
use serde_json::{json, Map, Value};
use turnstile::config::Config;
use turnstile::llm::openai::{NARROW_PREVIOUS_TOOL, SHOW_MORE_TOOL};
use turnstile::llm::OpenAi;
use turnstile::mcp::{ServerSpec, ToolClient, ToolOutput};
use turnstile::wire::{Citation, Frame};

// ---------------------------------------------------------------- dataset --

/// Photos per floor (floor 9 exists and has none). The servers hold the same
/// rule: `ts_server.mjs`, `py_text_server.py`, and the SQLite file below.
const FLOOR_COUNTS: [(u32, u32); 8] = [
    (1, 240),
    (2, 613),
    (3, 651),
    (4, 198),
    (5, 87),
    (6, 45),
    (7, 24),
    (8, 3),
];
/// The HTTP servers count exactly up to this many matches; above it they
/// only know a lower bound.
const COUNT_CAP: u64 = 500;
/// `[limits] limit_sentinel` of the SQLite configuration.
const SQLITE_SENTINEL: u64 = 50;

#[derive(Debug, Clone)]
struct Photo {
    id: String,
    floor: u32,
    captured_at: String,
}

/// `2026-01-01` plus `day` days (2026 is not a leap year).
fn date_of(day: u32) -> String {
    const MONTHS: [u32; 12] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let (mut d, mut m) = (day, 0);
    while d >= MONTHS[m] {
        d -= MONTHS[m];
        m += 1;
    }
    format!("2026-{:02}-{:02}", m + 1, d + 1)
}

/// Id `P{floor:02}-{i:04}` for i = 1..=n, captured on 2026-01-01 plus
/// `(i * 37 + floor * 11) % 365` days.
fn photos() -> Vec<Photo> {
    FLOOR_COUNTS
        .iter()
        .flat_map(|&(floor, n)| {
            (1..=n).map(move |i| Photo {
                id: format!("P{floor:02}-{i:04}"),
                floor,
                captured_at: date_of((i * 37 + floor * 11) % 365),
            })
        })
        .collect()
}

/// The ids on `floor` captured in `[from, to]`, in id order.
fn ids_where(floor: u32, from: &str, to: &str) -> Vec<String> {
    let mut out: Vec<String> = photos()
        .into_iter()
        .filter(|p| {
            p.floor == floor && p.captured_at.as_str() >= from && p.captured_at.as_str() <= to
        })
        .map(|p| p.id)
        .collect();
    out.sort();
    out
}

fn floor_ids(floor: u32) -> Vec<String> {
    ids_where(floor, "0000", "9999")
}

/// The SQLite file the reference server reads.
async fn make_sqlite(path: &Path) {
    use sqlx::{Connection, SqliteConnection};
    let url = format!("sqlite://{}?mode=rwc", path.display());
    let mut conn = SqliteConnection::connect(&url).await.expect("sqlite file");
    sqlx::query(
        "CREATE TABLE photos (id TEXT PRIMARY KEY, floor INTEGER NOT NULL, captured_at TEXT NOT NULL)",
    )
    .execute(&mut conn)
    .await
    .expect("create table");
    let mut tx = conn.begin().await.expect("begin");
    for p in photos() {
        sqlx::query("INSERT INTO photos (id, floor, captured_at) VALUES (?, ?, ?)")
            .bind(&p.id)
            .bind(p.floor as i64)
            .bind(&p.captured_at)
            .execute(&mut *tx)
            .await
            .expect("insert");
    }
    tx.commit().await.expect("commit");
    conn.close().await.expect("close");
}

// ---------------------------------------------------------------- servers --

fn interop_dir() -> PathBuf {
    needs::interop_dir()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `ts_server.mjs`, official TypeScript SDK.
    Ts,
    /// `py_text_server.py`, official Python SDK, JSON in text.
    PyText,
    /// PyPI `mcp-server-sqlite`, the reference server.
    Sqlite,
    /// `py_server.py`, official Python SDK (the existing interop server).
    PySdk,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Ts => "ts",
            Kind::PyText => "pytext",
            Kind::Sqlite => "sqlite",
            Kind::PySdk => "python",
        })
    }
}

impl Kind {
    /// The listing tool.
    fn listing(self) -> &'static str {
        match self {
            Kind::Sqlite => "read_query",
            _ => "find_photos",
        }
    }

    /// The id-list parameter a narrowing fills.
    fn ids_param(self) -> &'static str {
        match self {
            Kind::Ts => "uids",
            _ => "photo_ids",
        }
    }

    /// The `[mcp_servers.tools.*]` tables of this server's configuration.
    fn tools_toml(self) -> &'static str {
        match self {
            // Items path left to detection (`structuredContent.results`);
            // `uids` is no `*_ids` name, so it is named.
            Kind::Ts => {
                r#"
[mcp_servers.tools.find_photos]
result_contract = true
accounting = "required"
id_field = "uid"
scope_ids_param = "uids"

[mcp_servers.tools.count_photos]
result_contract = true
accounting = "required"
"#
            }
            // The id-list parameter `photo_ids` is left to detection.
            Kind::PyText => {
                r#"
[mcp_servers.tools.find_photos]
result_contract = true
accounting = "required"
items_path = "photos"
id_field = "photo_id"

[mcp_servers.tools.find_photos.accounting_keys]
returned = "count"
total = "total_count"
total_lower_bound = "at_least"
has_more = "more"
next_cursor = "next"

[mcp_servers.tools.count_photos]
result_contract = true
accounting = "required"

[mcp_servers.tools.hold_seat.approval.prepare]
action_id = "reservation_id"
confirm = "book"
cancel = "release"
status = "reservation_status"
"#
            }
            Kind::Sqlite => {
                r#"
[mcp_servers.tools.read_query]
result_contract = true
accounting = "absent"
"#
            }
            Kind::PySdk => {
                r#"
[mcp_servers.tools.fail_tool]
result_contract = true

[mcp_servers.tools.crash_tool]
result_contract = true

[mcp_servers.tools.rpc_error]
result_contract = true

[mcp_servers.tools.add]
result_contract = true
accounting = "absent"
"#
            }
        }
    }
}

/// One running MCP server. HTTP servers are the test's children; the stdio
/// SQLite server is started by turnstile itself (and by a direct client).
struct Running {
    kind: Kind,
    spec: ServerSpec,
    _child: Option<tokio::process::Child>,
}

impl Running {
    /// The `[[mcp_servers]]` entry's transport keys.
    fn transport_toml(&self) -> String {
        let q = |s: &str| toml::Value::String(s.to_string()).to_string();
        match &self.spec.transport {
            turnstile::mcp::Transport::Http { url } => format!("url = {}", q(url)),
            turnstile::mcp::Transport::Stdio { command, args } => {
                let args: Vec<String> = args.iter().map(|a| q(a)).collect();
                format!("command = {}\nargs = [{}]", q(command), args.join(", "))
            }
        }
    }

    /// The origin an HTTP server answers on (`http://127.0.0.1:PORT`); a
    /// stdio server has none.
    fn origin(&self) -> Option<String> {
        match &self.spec.transport {
            turnstile::mcp::Transport::Http { url } => {
                let u = url::Url::parse(url).expect("the server's URL");
                Some(u.origin().ascii_serialization())
            }
            turnstile::mcp::Transport::Stdio { .. } => None,
        }
    }

    /// A client of our own, for what the model is not asked to do (the
    /// mutation that makes a total drift) and for the raw-shape checks.
    async fn client(&self) -> ToolClient {
        ToolClient::connect(&self.spec)
            .await
            .unwrap_or_else(|e| panic!("{}: direct client connects: {e}", self.kind))
    }
}

async fn spawn_http(kind: Kind, cmd: &str, script: &str) -> Running {
    let port = crate::common::free_port();
    let mut child = tokio::process::Command::new(cmd)
        .arg(interop_dir().join(script))
        .args(["--port", &port.to_string()])
        .current_dir(interop_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {script}: {e}"));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            break;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{script} exited early with {status}");
        }
        assert!(
            Instant::now() < deadline,
            "{script} did not listen on {port} within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Running {
        kind,
        spec: ServerSpec::http(kind.to_string(), format!("http://127.0.0.1:{port}/mcp")),
        _child: Some(child),
    }
}

/// Starts `kind`; fails the test when it is not installed.
async fn start_server(kind: Kind, tmp: &Path) -> Running {
    match kind {
        Kind::Ts => {
            needs::interop_npm("@modelcontextprotocol/sdk/package.json");
            let node = needs::node();
            spawn_http(kind, &node, "ts_server.mjs").await
        }
        Kind::PyText | Kind::PySdk => {
            let py = needs::python_sdk();
            let script = match kind {
                Kind::PyText => "py_text_server.py",
                _ => "py_server.py",
            };
            spawn_http(kind, &py, script).await
        }
        Kind::Sqlite => {
            let bin = needs::sqlite_server();
            let db = tmp.join("photos.db");
            make_sqlite(&db).await;
            Running {
                kind,
                spec: ServerSpec::stdio(
                    "sqlite",
                    bin.display().to_string(),
                    ["--db-path".to_string(), db.display().to_string()],
                ),
                _child: None,
            }
        }
    }
}

// -------------------------------------------------------------- the rig --

/// One server, a turnstile built from a TOML config in front of it, the
/// fake model, and a thread.
struct Rig {
    kind: Kind,
    server: Running,
    fake: FakeOpenAi,
    app: TestServer,
    thread: String,
    _tmp: tempfile::TempDir,
}

/// The configuration `turnstile serve` would read for this server.
fn config_toml(server: &Running, fake: &FakeOpenAi, db: &str, extra: &Extra) -> String {
    let q = |s: &str| toml::Value::String(s.to_string()).to_string();
    let limits = match server.kind {
        Kind::Sqlite => format!("\n[limits]\nlimit_sentinel = {SQLITE_SENTINEL}\n"),
        _ => String::new(),
    };
    format!(
        r#"database_url = {db}

[model]
base_url = {base}
name = {name}
api_key = {key}
connect_timeout_secs = 2
idle_timeout_secs = 10
max_retries = 2
backoff_initial_ms = 10
backoff_max_ms = 200
{limits}
[[mcp_servers]]
name = {server_name}
{transport}
{server_keys}
{tools}
{extra_tools}"#,
        db = q(db),
        base = q(&fake.base_url),
        name = q(FAKE_MODEL),
        key = q(KEY),
        server_name = q(&server.kind.to_string()),
        transport = server.transport_toml(),
        tools = server.kind.tools_toml(),
        server_keys = extra.with_origin(extra.server_keys, server),
        extra_tools = extra.with_origin(extra.tools, server),
    )
}

/// Configuration a flow adds to its server's entry: keys of the
/// `[[mcp_servers]]` table itself, and more `[mcp_servers.tools.*]` tables.
/// `$ORIGIN` in either is the running server's origin (its port is chosen
/// when it starts).
#[derive(Default)]
struct Extra {
    server_keys: &'static str,
    tools: &'static str,
}

impl Extra {
    fn with_origin(&self, toml: &str, server: &Running) -> String {
        match server.origin() {
            Some(origin) => toml.replace("$ORIGIN", &origin),
            None => toml.to_string(),
        }
    }
}

impl Rig {
    async fn start(kind: Kind) -> Rig {
        Rig::start_with(kind, Extra::default()).await
    }

    async fn start_with(kind: Kind, extra: Extra) -> Rig {
        init_tracing();
        let tmp = tempfile::tempdir().unwrap();
        let server = start_server(kind, tmp.path()).await;
        let fake = FakeOpenAi::start().await;
        let db = format!("sqlite://{}?mode=rwc", tmp.path().join("t.db").display());
        let src = config_toml(&server, &fake, &db, &extra);
        let config = Config::from_toml(&src, Path::new("interop-honesty.toml"), &|_| None)
            .unwrap_or_else(|e| panic!("{kind}: the configuration does not load: {e}\n{src}"));
        assert_eq!(config.mcp_servers.len(), 1);
        let model = Arc::new(OpenAi::new(config.openai()).expect("model adapter from the config"));
        let app = TestServer::builder()
            .database(&db)
            .config(&config)
            .model(model)
            .start()
            .await;
        let thread = app.new_thread().await;
        Rig {
            kind,
            server,
            fake,
            app,
            thread,
            _tmp: tmp,
        }
    }

    /// One turn whose first planning round makes exactly `calls`; later
    /// rounds are the scripted planner's, which answers.
    async fn turn(&self, text: &str, calls: &[(&str, Value)]) -> Vec<Frame> {
        let calls = calls
            .iter()
            .map(|(tool, args)| (tool.to_string(), args.to_string()))
            .collect();
        self.fake.on(Role::Planner, Action::ToolCalls(calls));
        let frames =
            tokio::time::timeout(Duration::from_secs(90), self.app.say(&self.thread, text))
                .await
                .unwrap_or_else(|_| {
                    panic!("{}: the turn `{text}` did not end within 90 s", self.kind)
                });
        // Shown when a test fails (or with --nocapture).
        eprintln!("── {} · {text}\n{}", self.kind, stable(&frames));
        assert!(
            is_done(&frames),
            "{}: the turn `{text}` did not finish:\n{}",
            self.kind,
            stable(&frames)
        );
        frames
    }

    /// The `next_cursor` the previous turn's last result carried, as
    /// turnstile stored it (in `_meta`, or inside a JSON text block).
    async fn stored_cursor(&self) -> Option<String> {
        let thread = self.app.thread(&self.thread).await;
        let (result, digest) = thread.records().into_iter().rev().find_map(|r| match r {
            Record::Result { result, digest, .. } => Some((result.clone(), digest.clone())),
            _ => None,
        })?;
        // The tool's own output first, else what the models were shown.
        let mut found = None;
        find_cursor(&result.unwrap_or_default(), &mut found);
        if found.is_none() {
            find_cursor(&digest.unwrap_or_default(), &mut found);
        }
        found
    }

    /// The cursor for the next page after `args`: the one turnstile stored,
    /// else the server's answer to the same call (cursors here are
    /// stateless, so the two are equal).
    async fn cursor_after(&self, args: &Value) -> String {
        if let Some(c) = self.stored_cursor().await {
            return c;
        }
        eprintln!(
            "{}: no cursor in the stored result; asking the server",
            self.kind
        );
        let client = self.server.client().await;
        let out = client
            .call(self.kind.listing(), obj(args.clone()))
            .await
            .expect("direct call");
        client.close().await;
        let mut found = None;
        find_cursor(&serde_json::to_value(&out).unwrap(), &mut found);
        found.expect("the server's answer has a cursor")
    }

    /// Changes the tool server's data between turns, as another client
    /// would: each call straight to the server, each must succeed.
    async fn behind_the_back(&self, calls: &[(&str, Value)]) {
        let client = self.server.client().await;
        for (tool, args) in calls {
            let out = client.call(tool, obj(args.clone())).await.expect(tool);
            assert!(!out.is_error, "{tool}: {}", out.text());
        }
        client.close().await;
    }

    fn done(self) {
        self.app.pass();
    }
}

/// The last string under a `next_cursor` (or `next`) key anywhere in `v`,
/// looking inside strings that hold JSON objects too.
fn find_cursor(v: &Value, out: &mut Option<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if k == "next_cursor" || k == "next" {
                    if let Some(s) = x.as_str().filter(|s| !s.is_empty()) {
                        *out = Some(s.to_string());
                    }
                }
                find_cursor(x, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| find_cursor(x, out)),
        Value::String(s) if s.trim_start().starts_with('{') => {
            if let Ok(j) = serde_json::from_str::<Value>(s) {
                find_cursor(&j, out);
            }
        }
        _ => {}
    }
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        other => panic!("arguments must be an object, got {other}"),
    }
}

// ------------------------------------------------------------ assertions --

/// An item's id, whatever the server calls it.
fn id_of(item: &Value) -> Option<String> {
    ["uid", "photo_id", "id", "name"]
        .iter()
        .find_map(|k| item.get(*k).and_then(Value::as_str))
        .map(str::to_string)
}

fn card_ids(c: &Citation) -> Vec<String> {
    c.items.iter().filter_map(id_of).collect()
}

/// The turn's one citation.
fn one_citation(kind: Kind, frames: &[Frame]) -> &Citation {
    let cs = citations(frames);
    assert_eq!(
        cs.len(),
        1,
        "{kind}: expected one citation:\n{}",
        stable(frames)
    );
    cs[0]
}

/// The answer with the directives' origins ("(step 1, call 1)") taken out.
fn answer_text(frames: &[Frame]) -> String {
    let text = common::frames::answer(frames);
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("(step ").or_else(|| rest.find("(host context)")) {
        out += &rest[..at];
        match rest[at..].find(')') {
            Some(end) => rest = &rest[at + end + 1..],
            None => {
                rest = "";
            }
        }
    }
    out + rest
}

/// Every number the answer utters.
fn numbers(answer: &str) -> Vec<String> {
    answer
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Whether the answer says that nothing exists.
fn claims_absence(answer: &str) -> bool {
    let lower = answer.to_lowercase();
    lower.contains("nothing matches")
        || lower.contains("no such data")
        || lower
            .split(|c: char| !c.is_alphanumeric())
            .any(|w| w == "none")
}

fn value_number(v: &Value) -> Option<f64> {
    v.as_f64()
        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
}

/// A failed call: a failed tool_result, no card, no figure, no number, no
/// absence claim.
fn assert_failed(kind: Kind, tool: &str, frames: &[Frame]) {
    let shown = stable(frames);
    let results = tool_results(frames);
    assert!(
        !results.is_empty() && results.iter().all(|r| r.tool == tool && !r.ok),
        "{kind}: {tool} must be a failed tool_result:\n{shown}"
    );
    assert!(citations(frames).is_empty(), "{kind}: no card:\n{shown}");
    assert!(figures(frames).is_empty(), "{kind}: no figure:\n{shown}");
    let answer = answer_text(frames);
    assert!(
        numbers(&answer).is_empty(),
        "{kind}: a failed source gives no number: {answer:?}"
    );
    assert!(
        !claims_absence(&answer),
        "{kind}: a failure is not an absence: {answer:?}"
    );
}

fn sql_listing(floor: u32, limit: u64, offset: u64) -> Value {
    let offset = match offset {
        0 => String::new(),
        n => format!(" OFFSET {n}"),
    };
    json!({"query": format!(
        "SELECT id, floor, captured_at FROM photos WHERE floor = {floor} ORDER BY id LIMIT {limit}{offset}"
    )})
}

// ------------------------------------------------------------------ flows --

/// A listing whose total the server counted: EXACT with that total. From a
/// server without accounting: SHOWN, never EXACT, never "none".
async fn counted_listing(kind: Kind) {
    let rig = Rig::start(kind).await;
    let floor4 = floor_ids(4);
    match kind {
        Kind::Ts | Kind::PyText => {
            let frames = rig
                .turn(
                    "show photos of floor 4",
                    &[("find_photos", json!({"floor": 4, "limit": 10}))],
                )
                .await;
            let c = one_citation(kind, &frames);
            let shown = stable(&frames);
            assert_eq!(c.grade, "EXACT", "{kind}:\n{shown}");
            assert_eq!(c.total, Some(198), "{kind}:\n{shown}");
            assert!(!c.total_is_lower_bound, "{kind}:\n{shown}");
            assert_eq!(c.displayed, 10, "{kind}:\n{shown}");
            assert!(c.has_more && !c.complete, "{kind}: 10 of 198:\n{shown}");
            assert_eq!(
                card_ids(c),
                floor4[..10],
                "{kind}: the card's items:\n{shown}"
            );
            let answer = answer_text(&frames);
            assert!(answer.contains("exactly 198"), "{kind}: {answer:?}");
        }
        Kind::Sqlite => {
            let frames = rig
                .turn(
                    "show photos of floor 4",
                    &[("read_query", sql_listing(4, 20, 0))],
                )
                .await;
            let c = one_citation(kind, &frames);
            let shown = stable(&frames);
            assert_eq!(
                c.grade, "SHOWN",
                "{kind}: no accounting, no total:\n{shown}"
            );
            assert_eq!(c.displayed, 20, "{kind}:\n{shown}");
            assert!(!c.complete, "{kind}: never complete:\n{shown}");
            assert_eq!(
                card_ids(c),
                floor4[..20],
                "{kind}: the card's items:\n{shown}"
            );
            let answer = answer_text(&frames);
            assert!(!answer.contains("exactly"), "{kind}: {answer:?}");
            assert!(!claims_absence(&answer), "{kind}: {answer:?}");
        }
        Kind::PySdk => unreachable!("no listing on the Python SDK server"),
    }
    rig.done();
}

/// A total the server only knows a lower bound of (the SQLite server: a
/// result at the configured `limit_sentinel`): LOWER_BOUND, "at least".
async fn lower_bound(kind: Kind) {
    let rig = Rig::start(kind).await;
    let (tool, args, at_least, displayed) = match kind {
        Kind::Ts | Kind::PyText => (
            "find_photos",
            json!({"floor": 3, "limit": 10}),
            COUNT_CAP,
            10,
        ),
        Kind::Sqlite => (
            "read_query",
            sql_listing(3, SQLITE_SENTINEL, 0),
            SQLITE_SENTINEL,
            SQLITE_SENTINEL,
        ),
        Kind::PySdk => unreachable!("no listing on the Python SDK server"),
    };
    let frames = rig.turn("show photos of floor 3", &[(tool, args)]).await;
    let c = one_citation(kind, &frames);
    let shown = stable(&frames);
    assert_eq!(c.grade, "LOWER_BOUND", "{kind}:\n{shown}");
    assert!(c.total_is_lower_bound, "{kind}:\n{shown}");
    assert_eq!(c.total, Some(at_least), "{kind}:\n{shown}");
    assert_eq!(c.displayed, displayed, "{kind}:\n{shown}");
    assert!(c.has_more && !c.complete, "{kind}:\n{shown}");
    let answer = answer_text(&frames);
    assert!(
        answer.contains(&format!("at least {at_least}")),
        "{kind}: {answer:?}"
    );
    assert!(!answer.contains("exactly"), "{kind}: {answer:?}");
    rig.done();
}

/// The front ends' streams (issue 37) over a server we did not write, with
/// the model behind the OpenAI adapter: the same planned call through the
/// AI SDK route and the AG-UI route parses with the official packages
/// into the native route's answer and card (grade and count).
async fn front_ends(kind: Kind) {
    let rig = Rig::start(kind).await;
    let (tool, args) = match kind {
        Kind::Ts | Kind::PyText => ("find_photos", json!({"floor": 3, "limit": 10})),
        Kind::Sqlite => ("read_query", sql_listing(3, SQLITE_SENTINEL, 0)),
        Kind::PySdk => unreachable!("no listing on the Python SDK server"),
    };
    let text = "show photos of floor 3";
    let want = rig.turn(text, &[(tool, args.clone())]).await;
    let card = one_citation(kind, &want);
    let calls = || Action::ToolCalls(vec![(tool.to_string(), args.to_string())]);
    let app = &rig.app;

    rig.fake.on(Role::Planner, calls());
    let thread = app.new_thread().await;
    let body = json!({"messages": [{"role": "user", "parts": [{"type": "text", "text": text}]}]});
    let r = (app.http)
        .post(format!(
            "{}/v1/threads/{thread}/ui-message-stream",
            app.base
        ))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{kind}");
    let ui = crate::frontends::read(&r.text().await.unwrap(), false);
    assert_eq!(ui.text(), common::frames::answer(&want), "{kind}: AI SDK");
    let cards = ui.parts("data-citation");
    assert_eq!(cards.len(), 1, "{kind}: {}", ui.message);
    assert_eq!(cards[0]["data"]["grade"], json!(card.grade), "{kind}");
    assert_eq!(
        cards[0]["data"]["displayed"],
        json!(card.displayed),
        "{kind}"
    );

    rig.fake.on(Role::Planner, calls());
    let thread = app.new_thread().await;
    let run = json!({"threadId": thread, "runId": "r1", "messages": [
        {"id": "m1", "role": "user", "content": text}
    ]});
    let r = (app.http)
        .post(format!("{}/v1/threads/{thread}/agui", app.base))
        .json(&run)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{kind}");
    let ag = crate::frontends::read_agui(&r.text().await.unwrap());
    assert_eq!(ag.text, common::frames::answer(&want), "{kind}: AG-UI");
    let cards = ag.custom("citation");
    assert_eq!(cards.len(), 1, "{kind}");
    assert_eq!(cards[0]["grade"], json!(card.grade), "{kind}");
    assert_eq!(cards[0]["displayed"], json!(card.displayed), "{kind}");
    rig.done();
}

/// Floor 9 has no photos. With accounting: "none" may be said, and no card
/// shows a number. Without (the SQLite server's `[]`): no absence claim.
async fn accounted_zero(kind: Kind) {
    let rig = Rig::start(kind).await;
    let (tool, args) = match kind {
        Kind::Ts | Kind::PyText => ("find_photos", json!({"floor": 9})),
        Kind::Sqlite => ("read_query", sql_listing(9, 20, 0)),
        Kind::PySdk => unreachable!("no listing on the Python SDK server"),
    };
    let frames = rig.turn("show photos of floor 9", &[(tool, args)]).await;
    let shown = stable(&frames);
    let results = tool_results(&frames);
    assert!(
        results.len() == 1 && results[0].ok,
        "{kind}: an empty answer is not a failure:\n{shown}"
    );
    for c in citations(&frames) {
        assert_eq!(c.displayed, 0, "{kind}:\n{shown}");
        assert!(c.items.is_empty(), "{kind}:\n{shown}");
    }
    assert!(figures(&frames).is_empty(), "{kind}:\n{shown}");
    let answer = answer_text(&frames);
    match kind {
        Kind::Sqlite => {
            assert!(
                !claims_absence(&answer),
                "{kind}: no accounting, no right to say \"none\": {answer:?}"
            );
            for c in citations(&frames) {
                assert_ne!(c.grade, "EXACT", "{kind}:\n{shown}");
            }
        }
        _ => {
            assert!(
                claims_absence(&answer),
                "{kind}: an accounted zero is \"none\": {answer:?}"
            );
            assert!(numbers(&answer).is_empty(), "{kind}: {answer:?}");
        }
    }
    rig.done();
}

/// An upstream failure relayed as an answer (HTTP 200, `isError: false`):
/// a failed tool_result, nothing cited, counted or called absent. On the
/// Python SDK server: `isError` results and a JSON-RPC error.
async fn in_band_failure(kind: Kind) {
    let rig = Rig::start(kind).await;
    match kind {
        Kind::Ts | Kind::PyText => {
            let frames = rig
                .turn(
                    "show photos of floor 3 from the archive",
                    &[("find_photos", json!({"floor": 3, "archive": true}))],
                )
                .await;
            assert_failed(kind, "find_photos", &frames);
        }
        Kind::Sqlite => {
            let frames = rig
                .turn(
                    "show the panoramas",
                    &[("read_query", json!({"query": "SELECT id FROM panoramas"}))],
                )
                .await;
            assert_failed(kind, "read_query", &frames);
        }
        Kind::PySdk => {
            for (tool, args) in [
                ("fail_tool", json!({"reason": "651 photos"})),
                ("crash_tool", json!({})),
                ("rpc_error", json!({"reason": "651 photos"})),
            ] {
                let frames = rig.turn("how many photos?", &[(tool, args)]).await;
                assert_failed(kind, tool, &frames);
            }
        }
    }
    rig.done();
}

/// "Only those from April" after a listing of floor 7 (24 photos, all
/// shown): the previous ids go into the tool's id-list parameter, the card
/// is narrowed, and it holds only previous results. The SQLite server's one
/// parameter is SQL: narrowing is refused, nothing is searched.
async fn narrowing(kind: Kind) {
    let rig = Rig::start(kind).await;
    let april = ("2026-04-01", "2026-04-30");
    match kind {
        Kind::Ts | Kind::PyText => {
            let first = rig
                .turn(
                    "show photos of floor 7",
                    &[("find_photos", json!({"floor": 7, "limit": 30}))],
                )
                .await;
            let c1 = one_citation(kind, &first);
            let before: BTreeSet<String> = card_ids(c1).into_iter().collect();
            assert_eq!(
                before,
                floor_ids(7).into_iter().collect(),
                "{kind}: all 24 of floor 7 shown:\n{}",
                stable(&first)
            );
            assert_eq!((c1.grade.as_str(), c1.complete), ("EXACT", true));

            let frames = rig
                .turn(
                    "only those from April",
                    &[
                        (NARROW_PREVIOUS_TOOL, json!({})),
                        (
                            "find_photos",
                            json!({"date_from": april.0, "date_to": april.1}),
                        ),
                    ],
                )
                .await;
            let shown = stable(&frames);
            let call = tool_calls(&frames)
                .into_iter()
                .find(|c| c.tool == "find_photos")
                .unwrap_or_else(|| panic!("{kind}: the narrowed call:\n{shown}"));
            let param = kind.ids_param();
            let spread: BTreeSet<String> = call
                .args
                .get(param)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            assert_eq!(
                spread, before,
                "{kind}: the previous results' ids are spread into `{param}`:\n{shown}"
            );
            assert_eq!(call.args.get("floor"), Some(&json!(7)), "{kind}:\n{shown}");
            let c = one_citation(kind, &frames);
            assert!(c.narrowed, "{kind}:\n{shown}");
            let ids = card_ids(c);
            assert!(
                ids.iter().all(|id| before.contains(id)),
                "{kind}: only previous results:\n{shown}"
            );
            let expected = ids_where(7, april.0, april.1);
            assert!(!expected.is_empty());
            assert_eq!(ids, expected, "{kind}:\n{shown}");
            assert_eq!(
                (c.grade.as_str(), c.total, c.complete),
                ("EXACT", Some(expected.len() as u64), true),
                "{kind}: the narrowed page fits:\n{shown}"
            );
        }
        Kind::Sqlite => {
            let first = rig
                .turn(
                    "show photos of floor 4",
                    &[("read_query", sql_listing(4, 20, 0))],
                )
                .await;
            assert_eq!(one_citation(kind, &first).displayed, 20);
            let narrowed = json!({"query": format!(
                "SELECT id, floor, captured_at FROM photos WHERE floor = 4 AND captured_at BETWEEN '{}' AND '{}' ORDER BY id LIMIT 20",
                april.0, april.1
            )});
            let frames = rig
                .turn(
                    "only those from April",
                    &[(NARROW_PREVIOUS_TOOL, json!({})), ("read_query", narrowed)],
                )
                .await;
            let shown = stable(&frames);
            let results = tool_results(&frames);
            assert!(
                !results.is_empty() && results.iter().all(|r| !r.ok),
                "{kind}: a SQL string cannot be held to the previous results:\n{shown}"
            );
            assert!(
                tool_calls(&frames).iter().all(|c| c.server.is_none()),
                "{kind}: nothing is searched:\n{shown}"
            );
            assert!(citations(&frames).is_empty(), "{kind}:\n{shown}");
            let answer = answer_text(&frames);
            assert!(answer.contains("cannot be narrowed"), "{kind}: {answer:?}");
        }
        Kind::PySdk => unreachable!("no listing on the Python SDK server"),
    }
    rig.done();
}

/// The TypeScript server ignores an id list longer than 50, as many search
/// APIs do: a narrowing of 60 previous results comes back with photos that
/// were never among them. Those are discarded, never shown as the answer.
async fn narrowing_discards_outside(kind: Kind) {
    let rig = Rig::start(kind).await;
    let april = ("2026-04-01", "2026-04-30");
    let first = rig
        .turn(
            "show photos of floor 4",
            &[("find_photos", json!({"floor": 4, "limit": 60}))],
        )
        .await;
    let before: BTreeSet<String> = card_ids(one_citation(kind, &first)).into_iter().collect();
    assert_eq!(before.len(), 60, "{}", stable(&first));
    let outside: Vec<String> = ids_where(4, april.0, april.1)
        .into_iter()
        .filter(|id| !before.contains(id))
        .collect();
    assert!(
        !outside.is_empty(),
        "the dataset has April photos beyond the first 60"
    );

    let frames = rig
        .turn(
            "only those from April",
            &[
                (NARROW_PREVIOUS_TOOL, json!({})),
                (
                    "find_photos",
                    json!({"date_from": april.0, "date_to": april.1, "limit": 50}),
                ),
            ],
        )
        .await;
    let shown = stable(&frames);
    let call = tool_calls(&frames)
        .into_iter()
        .find(|c| c.tool == "find_photos")
        .unwrap_or_else(|| panic!("{kind}: the narrowed call:\n{shown}"));
    assert_eq!(
        call.args
            .get(kind.ids_param())
            .and_then(Value::as_array)
            .map(Vec::len),
        Some(60),
        "{kind}: the 60 previous ids are spread:\n{shown}"
    );
    for c in citations(&frames) {
        let leaked: Vec<String> = card_ids(c)
            .into_iter()
            .filter(|id| !before.contains(id))
            .collect();
        assert!(
            leaked.is_empty(),
            "{kind}: results outside the previous ids are shown as the narrowed answer: {leaked:?}\n{shown}"
        );
    }
    let answer = answer_text(&frames);
    assert!(
        answer.contains("outside the scope"),
        "{kind}: the discard is said: {answer:?}"
    );
    assert!(!answer.contains("exactly"), "{kind}: {answer:?}");
    rig.done();
}

/// "Show more", three times: the model only calls `show_more_results`
/// (no arguments), and the server continues the listing from the cursor it
/// stored: pages 2, 3 and 4 of the same population under the same card,
/// checked against everything shown (the same total, no id twice), and no
/// cursor in any request the model got. Without accounting (SQL OFFSET,
/// which the model writes itself): still never EXACT.
async fn paging(kind: Kind) {
    let rig = Rig::start(kind).await;
    let floor4 = floor_ids(4);
    match kind {
        Kind::Ts | Kind::PyText => {
            let args = json!({"floor": 4, "limit": 10});
            let first = rig
                .turn("show photos of floor 4", &[("find_photos", args.clone())])
                .await;
            let c = one_citation(kind, &first);
            assert!(c.more, "{kind}: more is offered:\n{}", stable(&first));
            let listing = c.listing.clone();
            let mut seen = card_ids(c);
            let mut cursors = vec![rig.cursor_after(&args).await];
            for page in 2..=4usize {
                let frames = rig.turn("show more", &[(SHOW_MORE_TOOL, json!({}))]).await;
                let shown = stable(&frames);
                let c = one_citation(kind, &frames);
                let ids = card_ids(c);
                assert!(
                    ids.iter().all(|id| !seen.contains(id)),
                    "{kind}: no id twice:\n{shown}"
                );
                assert_eq!(
                    ids,
                    floor4[10 * (page - 1)..10 * page],
                    "{kind}: page {page}:\n{shown}"
                );
                assert_eq!(
                    (c.grade.as_str(), c.total, c.total_is_lower_bound),
                    ("EXACT", Some(198), false),
                    "{kind}: the same population, the same total:\n{shown}"
                );
                assert_eq!(
                    (c.displayed, c.shown_before),
                    (10 * page as u64, Some(10 * (page as u64 - 1))),
                    "{kind}: displayed adds up:\n{shown}"
                );
                assert_eq!(c.listing, listing, "{kind}: the same card");
                assert!(
                    c.stitch.as_ref().is_none_or(|s| s.anomaly.is_none()),
                    "{kind}: no anomaly:\n{shown}"
                );
                let answer = answer_text(&frames);
                assert!(answer.contains("198"), "{kind}: {answer:?}");
                seen.extend(ids);
                if let Some(c) = rig.stored_cursor().await {
                    cursors.push(c);
                }
            }
            // The model never handled a cursor: none is in any request.
            for r in rig.fake.requests() {
                for c in &cursors {
                    assert!(!r.raw.contains(c.as_str()), "{kind}: {c} reached the model");
                }
            }
        }
        Kind::Sqlite => {
            let first = rig
                .turn(
                    "show photos of floor 4",
                    &[("read_query", sql_listing(4, 20, 0))],
                )
                .await;
            assert_eq!(card_ids(one_citation(kind, &first)), floor4[..20]);
            let frames = rig
                .turn("show more", &[("read_query", sql_listing(4, 20, 20))])
                .await;
            let shown = stable(&frames);
            let c = one_citation(kind, &frames);
            assert_eq!(card_ids(c), floor4[20..40], "{kind}:\n{shown}");
            assert_ne!(c.grade, "EXACT", "{kind}:\n{shown}");
            let answer = answer_text(&frames);
            assert!(!answer.contains("exactly"), "{kind}: {answer:?}");
            assert!(!claims_absence(&answer), "{kind}: {answer:?}");
        }
        Kind::PySdk => unreachable!("no listing on the Python SDK server"),
    }
    rig.done();
}

/// "Show more" after the population changed (a photo was added between the
/// turns): the next page's total differs from the one shown, so the
/// continuation is abandoned, nothing of it is shown, the anomaly is named,
/// and the card the user saw is no longer EXACT.
async fn paging_drift(kind: Kind) {
    let rig = Rig::start(kind).await;
    let args = json!({"floor": 4, "limit": 10});
    let first = rig
        .turn("show photos of floor 4", &[("find_photos", args.clone())])
        .await;
    assert_eq!(one_citation(kind, &first).total, Some(198));

    rig.behind_the_back(&[(
        "add_photo",
        json!({"floor": 4, "captured_at": "2026-04-15"}),
    )])
    .await;

    let frames = rig.turn("show more", &[(SHOW_MORE_TOOL, json!({}))]).await;
    let shown = stable(&frames);
    let c = one_citation(kind, &frames);
    assert!(c.items.is_empty(), "{kind}: nothing blended:\n{shown}");
    assert_eq!(c.grade, "SHOWN", "{kind}: a contradicted total:\n{shown}");
    assert!(!c.more, "{kind}:\n{shown}");
    let s = c.stitch.as_ref().expect("how the continuation ended");
    assert_eq!(s.end, "abandoned", "{kind}:\n{shown}");
    assert_eq!(
        s.anomaly.as_ref().map(|a| a["kind"].clone()),
        Some(json!("total_changed")),
        "{kind}:\n{shown}"
    );
    let answer = answer_text(&frames);
    assert!(
        answer.contains("198 → 199"),
        "{kind}: the anomaly is named: {answer:?}"
    );
    assert!(!answer.contains("exactly"), "{kind}: {answer:?}");
    rig.done();
}

/// "Show more" after the server moved its pages without changing the
/// total (a photo added at the front, one removed at the end): the next
/// page repeats ids the user saw (I-b across turns). The continuation is
/// abandoned, nothing of it is shown, and the total shown then is no longer
/// EXACT: the population moved under it.
async fn paging_overlap(kind: Kind) {
    let rig = Rig::start(kind).await;
    let args = json!({"floor": 4, "limit": 10});
    let first = rig
        .turn("show photos of floor 4", &[("find_photos", args.clone())])
        .await;
    assert_eq!(one_citation(kind, &first).total, Some(198));
    let last = floor_ids(4).last().cloned().unwrap();
    rig.behind_the_back(&[
        (
            "add_photo",
            json!({"floor": 4, "captured_at": "2026-04-15"}),
        ),
        ("remove_photo", json!({"uid": last})),
    ])
    .await;

    let frames = rig.turn("show more", &[(SHOW_MORE_TOOL, json!({}))]).await;
    let shown = stable(&frames);
    let c = one_citation(kind, &frames);
    assert!(c.items.is_empty(), "{kind}: nothing blended:\n{shown}");
    assert_eq!(c.grade, "SHOWN", "{kind}:\n{shown}");
    assert_eq!(
        c.stitch
            .as_ref()
            .and_then(|s| s.anomaly.as_ref())
            .map(|a| a["kind"].clone()),
        Some(json!("id_overlap")),
        "{kind}:\n{shown}"
    );
    let answer = answer_text(&frames);
    assert!(answer.contains("repeated"), "{kind}: {answer:?}");
    assert!(!answer.contains("exactly"), "{kind}: {answer:?}");
    let view = rig.app.thread(&rig.thread).await;
    assert_eq!(
        view.turns.last().unwrap().machine("paging#1").trace,
        ["continue-shown", "ids-repeat-since-shown"]
    );
    rig.done();
}

/// "Show more" with a cursor the server has expired since, answered in
/// band (text, isError false, the TypeScript server's habit): recognised
/// by the missing accounting, not by its wording (row `cursor-rejected`).
/// The card the user saw stands as it was, with no more to offer.
async fn paging_expired(kind: Kind) {
    let rig = Rig::start(kind).await;
    let args = json!({"floor": 4, "limit": 10});
    rig.turn("show photos of floor 4", &[("find_photos", args)])
        .await;
    rig.behind_the_back(&[("expire_cursors", json!({}))]).await;

    let frames = rig.turn("show more", &[(SHOW_MORE_TOOL, json!({}))]).await;
    let shown = stable(&frames);
    let c = one_citation(kind, &frames);
    assert!(c.items.is_empty(), "{kind}:\n{shown}");
    assert_eq!(
        (c.grade.as_str(), c.total, c.displayed, c.more),
        ("EXACT", Some(198), 10, false),
        "{kind}: what was shown stands:\n{shown}"
    );
    let answer = answer_text(&frames);
    assert!(
        answer.contains("did not continue the"),
        "{kind}: {answer:?}"
    );
    assert!(
        !answer.contains("expired"),
        "{kind}: not its words: {answer:?}"
    );
    let view = rig.app.thread(&rig.thread).await;
    assert_eq!(
        view.turns.last().unwrap().machine("paging#1").trace,
        ["continue-shown", "cursor-rejected"]
    );
    rig.done();
}

/// A single-value aggregate: one `figure` frame carrying the value, its
/// grade and whether the server accounted for it; never a card saying "1".
async fn aggregate(kind: Kind) {
    let rig = Rig::start(kind).await;
    // (tool, args, label, value, grade, accounted)
    let (tool, args, label, value, grade, accounted) = match kind {
        Kind::Ts => (
            "count_photos",
            json!({"floor": 2}),
            "count",
            613,
            "EXACT",
            true,
        ),
        Kind::PyText => (
            "count_photos",
            json!({"floor": 2}),
            "COUNT(*)",
            613,
            "EXACT",
            true,
        ),
        Kind::Sqlite => (
            "read_query",
            json!({"query": "SELECT COUNT(*) AS n FROM photos WHERE floor = 3"}),
            "n",
            651,
            "SHOWN",
            false,
        ),
        // `add` returns an int, which the SDK wraps as {"result": N}.
        Kind::PySdk => (
            "add",
            json!({"a": 600, "b": 51}),
            "result",
            651,
            "SHOWN",
            false,
        ),
    };
    let frames = rig
        .turn("how many photos are there?", &[(tool, args.clone())])
        .await;
    let shown = stable(&frames);
    let results = tool_results(&frames);
    assert!(
        results.len() == 1 && results[0].ok,
        "{kind}: the aggregate is an answer:\n{shown}"
    );
    assert!(
        citations(&frames).is_empty(),
        "{kind}: a number needs no card (and never one saying 1):\n{shown}"
    );
    let figs = figures(&frames);
    assert_eq!(figs.len(), 1, "{kind}: one figure frame:\n{shown}");
    let f = figs[0];
    assert_eq!(f.source, tool, "{kind}: {f:?}");
    assert_eq!(f.label, label, "{kind}: {f:?}");
    assert_eq!(value_number(&f.value), Some(value as f64), "{kind}: {f:?}");
    assert_eq!(f.grade, grade, "{kind}: {f:?}");
    assert_eq!(f.accounted, accounted, "{kind}: {f:?}");
    assert_eq!(Value::Object(f.query.clone()), args, "{kind}: {f:?}");
    let answer = answer_text(&frames);
    assert!(
        answer.contains(&value.to_string()),
        "{kind}: the value is said: {answer:?}"
    );
    assert_eq!(
        answer.contains(&format!("exactly {value}")),
        accounted,
        "{kind}: \"exactly\" only for an accounted value: {answer:?}"
    );
    rig.done();
}

/// The narration guard on a server and a model wire we did not write: the
/// responder (an OpenAI-style stream) contradicts the lower-bound card of
/// the server's own listing, and says the honest thing in its own words.
/// The lies are replaced by the guard's rows; the honest sentence passes.
async fn narration_guard(kind: Kind) {
    let rig = Rig::start(kind).await;
    let lies = [
        "There are exactly 10 photos on floor 3.",
        "That is the complete list of all 10 photos.",
        "There are 7342 photos on floor 3.",
    ];
    let honest = "The server counted at least 500 photos on floor 3; the card holds 10 of them.";
    let text = format!("{} {honest} {} {}", lies[0], lies[1], lies[2]);
    rig.fake.on(Role::Responder, Action::Text(text));
    let frames = rig
        .turn(
            "show photos of floor 3",
            &[("find_photos", json!({"floor": 3, "limit": 10}))],
        )
        .await;
    let answer = answer_text(&frames);
    for lie in lies {
        assert!(
            !answer.contains(lie),
            "{kind}: a lie reached the client: {answer:?}"
        );
    }
    assert!(
        answer.contains(honest),
        "{kind}: the honest sentence passes: {answer:?}"
    );
    let rows: Vec<String> = frames
        .iter()
        .filter_map(|f| match f {
            Frame::Delta(d) => d.replaced.as_ref().map(|r| r.row_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        rows,
        [
            "sample-said-exact",
            "sample-called-complete",
            "unlicensed-number"
        ],
        "{kind}: each lie is replaced by its row"
    );
    let stored = Value::Array(rig.app.bodies(&rig.thread).await).to_string();
    for lie in lies {
        assert!(!stored.contains(lie), "{kind}: a lie was stored");
    }
    rig.done();
}

/// Issue 33 against servers nobody here wrote: how a call ended is
/// licensed by the machines alone. After an in-band failure the model says
/// the user lacks permission and offers a link of its own: both are
/// replaced by their rows, and its honest "the search failed" is kept. On
/// the Python SDK server, after a denied reservation the model says the seat
/// is booked: code tells the cancel first, and the lie is removed.
async fn outcome_guard(kind: Kind) {
    let rig = Rig::start(kind).await;
    let replaced = |frames: &[Frame]| -> Vec<String> {
        frames
            .iter()
            .filter_map(|f| match f {
                Frame::Delta(d) => d.replaced.as_ref().map(|r| r.row_id.clone()),
                _ => None,
            })
            .collect()
    };
    let lies = [
        "You don't have permission to see the archive.",
        "Here it is: https://archive.example.com/floor3?key=guessed",
    ];
    let honest = "The archive search failed, so I cannot answer from it.";
    rig.fake.on(
        Role::Responder,
        Action::Text(format!("{} {honest} {}", lies[0], lies[1])),
    );
    let frames = rig
        .turn(
            "show photos of floor 3 from the archive",
            &[("find_photos", json!({"floor": 3, "archive": true}))],
        )
        .await;
    let answer = answer_text(&frames);
    for lie in lies {
        assert!(
            !answer.contains(lie),
            "{kind}: a lie reached the client: {answer:?}"
        );
    }
    assert!(
        answer.contains(honest),
        "{kind}: the honest sentence passes: {answer:?}"
    );
    assert_eq!(
        replaced(&frames),
        ["refusal-claimed-without-refusal", "link-not-delivered"],
        "{kind}: {answer:?}"
    );
    if kind == Kind::PyText {
        let frames = rig
            .turn(
                "reserve seat 12 at 15:00",
                &[("hold_seat", json!({"seat": "12", "time": "15:00"}))],
            )
            .await;
        let interrupt = frames
            .iter()
            .find_map(|f| match f {
                Frame::Interrupt(i) => Some(i.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{kind}: no interrupt:\n{}", stable(&frames)));
        rig.fake.on(
            Role::Responder,
            Action::Text("Your seat is booked. Enjoy the show.".into()),
        );
        let resumed = rig
            .app
            .resume(&rig.thread, &interrupt.interrupt_id, "deny")
            .await
            .unwrap_or_else(|e| panic!("{kind}: resume refused: {e:?}"));
        let answer = answer_text(&resumed);
        assert!(
            answer.starts_with("It was cancelled as you decided"),
            "{kind}: code tells the deny first: {answer:?}"
        );
        assert!(!answer.contains("booked"), "{kind}: {answer:?}");
        assert!(answer.contains("Enjoy the show."), "{kind}: {answer:?}");
        assert_eq!(
            replaced(&resumed),
            ["action-claimed-not-done"],
            "{kind}: {answer:?}"
        );
    }
    rig.done();
}

/// Human approval through config alone (issue 17): the Python SDK server's
/// `hold_seat` prepares, `book` confirms. A model's `book` is refused and
/// not sent; the human's approve sends it once; a second is refused.
async fn approval(kind: Kind) {
    let rig = Rig::start(kind).await;
    let frames = rig
        .turn(
            "reserve seat 12 at 15:00",
            &[
                ("hold_seat", json!({"seat": "12", "time": "15:00"})),
                ("book", json!({"reservation_id": 1})),
            ],
        )
        .await;
    let interrupt = frames
        .iter()
        .find_map(|f| match f {
            Frame::Interrupt(i) => Some(i.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{kind}: no interrupt:\n{}", stable(&frames)));
    assert_eq!(interrupt.tool, "book");
    assert_eq!(interrupt.args["reservation_id"], 1);
    let counts = |out: ToolOutput| -> Value { serde_json::from_str(&out.text()).unwrap() };
    let client = rig.server.client().await;
    let before = counts(client.call("reservation_counts", Map::new()).await.unwrap());
    assert_eq!(before["book"], 0, "{kind}: the model's book was sent");
    let resumed = rig
        .app
        .resume(&rig.thread, &interrupt.interrupt_id, "approve")
        .await
        .unwrap_or_else(|e| panic!("{kind}: resume refused: {e:?}"));
    assert!(is_done(&resumed), "{kind}:\n{}", stable(&resumed));
    let after = counts(client.call("reservation_counts", Map::new()).await.unwrap());
    assert_eq!(after["book"], 1, "{kind}: one book");
    let view = rig.app.thread(&rig.thread).await;
    assert_eq!(view.approvals[0].state, "Completed", "{kind}");
    let (status, _) = rig
        .app
        .resume(&rig.thread, &interrupt.interrupt_id, "approve")
        .await
        .unwrap_err();
    assert_eq!(status, 409);
    let last = counts(client.call("reservation_counts", Map::new()).await.unwrap());
    assert_eq!(last["book"], 1, "{kind}: still one book");
    rig.done();
}

mod before_call;
mod licence;
mod questions;
mod tasks;
mod terminal;
use terminal::export;

// ------------------------------------------------------ server × flow table --

macro_rules! flows {
    ($server:ident: $kind:expr => [$($flow:ident),* $(,)?]) => {
        mod $server {
            use super::Kind;
            $(
                #[tokio::test]
                #[ignore = "needs the npm/PyPI MCP servers: scripts/test-deps, run with --include-ignored"]
                async fn $flow() {
                    super::$flow($kind).await
                }
            )*
        }
    };
}

flows!(ts_sdk: Kind::Ts => [
    counted_listing, lower_bound, accounted_zero, in_band_failure, narrowing,
    narrowing_discards_outside, paging, paging_drift, paging_overlap, paging_expired,
    aggregate, narration_guard, outcome_guard, front_ends,
]);
flows!(py_text: Kind::PyText => [
    counted_listing, lower_bound, accounted_zero, in_band_failure, narrowing,
    paging, paging_drift, aggregate, narration_guard, outcome_guard, approval, export,
    front_ends,
]);
flows!(sqlite_reference: Kind::Sqlite => [
    counted_listing, lower_bound, accounted_zero, in_band_failure, narrowing,
    paging, aggregate, front_ends,
]);
flows!(py_sdk: Kind::PySdk => [in_band_failure, aggregate]);

// ---------------------------------------------------- the servers' shapes --

/// Each server answers in the shapes the flows rely on, seen by a plain MCP
/// client (no judge): the test's premises, checked.
mod shapes {
    use super::*;

    fn meta(out: &ToolOutput) -> Map<String, Value> {
        out.meta.clone().unwrap_or_default()
    }

    fn text_json(out: &ToolOutput) -> Value {
        serde_json::from_str(&out.text()).unwrap_or_else(|e| panic!("{e}: {}", out.text()))
    }

    async fn start(kind: Kind) -> (Running, tempfile::TempDir) {
        init_tracing();
        let tmp = tempfile::tempdir().unwrap();
        let server = start_server(kind, tmp.path()).await;
        (server, tmp)
    }

    async fn call(client: &ToolClient, tool: &str, args: Value) -> ToolOutput {
        client
            .call(tool, obj(args))
            .await
            .unwrap_or_else(|e| panic!("{tool}: {e}"))
    }

    fn next_cursor_args(m: &Map<String, Value>) -> Map<String, Value> {
        let mut next = obj(json!({"floor": 4, "limit": 3}));
        next.insert("cursor".into(), m["next_cursor"].clone());
        next
    }

    #[tokio::test]
    #[ignore = "needs the npm/PyPI MCP servers: scripts/test-deps, run with --include-ignored"]
    async fn typescript_sdk_server() {
        let (server, _tmp) = start(Kind::Ts).await;
        let client = server.client().await;
        let mut names: Vec<String> = client
            .list_tools()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "add_photo",
                "count_photos",
                "expire_cursors",
                "find_photos",
                "remove_photo"
            ]
        );

        let page = call(&client, "find_photos", json!({"floor": 4, "limit": 3})).await;
        assert!(!page.is_error);
        let s = page.structured.clone().expect("structuredContent");
        let uids: Vec<&str> = s["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["uid"].as_str().unwrap())
            .collect();
        assert_eq!(uids, floor_ids(4)[..3]);
        assert!(s.get("items").is_none());
        let m = meta(&page);
        assert_eq!(
            (&m["returned"], &m["total"], &m["has_more"]),
            (&json!(3), &json!(198), &json!(true))
        );
        assert!(m["next_cursor"].as_str().is_some_and(|c| !c.is_empty()));
        let block_kinds: Vec<&str> = page.blocks.iter().map(|b| b.kind()).collect();
        assert_eq!(
            block_kinds,
            ["text", "resource_link", "resource_link", "resource_link"]
        );

        let next = next_cursor_args(&m);
        let page2 = client.call("find_photos", next).await.unwrap();
        let m2 = meta(&page2);
        assert_eq!(m2["total"], json!(198));
        assert_eq!(
            page2.structured.unwrap()["results"][0]["uid"],
            json!(floor_ids(4)[3])
        );
        // An expired cursor is answered in band: text, isError false, no
        // accounting, no structure.
        let expired = next_cursor_args(&m);
        call(&client, "expire_cursors", json!({})).await;
        let stale = client.call("find_photos", expired).await.unwrap();
        assert!(!stale.is_error);
        assert!(stale.structured.is_none());
        assert!(stale.meta.as_ref().is_none_or(|m| m.is_empty()));
        assert!(stale.text().contains("expired"), "{}", stale.text());

        let bound = call(&client, "find_photos", json!({"floor": 3})).await;
        let m = meta(&bound);
        assert_eq!(m["total_lower_bound"], json!(COUNT_CAP));
        assert!(!m.contains_key("total"));

        let zero = call(&client, "find_photos", json!({"floor": 9})).await;
        let m = meta(&zero);
        assert_eq!(
            (
                &m["returned"],
                &m["total"],
                &m["has_more"],
                &m["next_cursor"]
            ),
            (&json!(0), &json!(0), &json!(false), &Value::Null)
        );

        let failed = call(&client, "find_photos", json!({"floor": 3, "archive": true})).await;
        assert!(!failed.is_error);
        assert_eq!(
            failed.text(),
            "upstream error 502: Bad Gateway from the photo archive"
        );
        assert!(failed.structured.is_none() && failed.meta.is_none());

        let count = call(&client, "count_photos", json!({"floor": 2})).await;
        assert_eq!(count.structured, Some(json!({"count": 613})));

        let april = ids_where(7, "2026-04-01", "2026-04-30");
        let some: Vec<String> = floor_ids(7);
        let narrowed = call(
            &client,
            "find_photos",
            json!({"floor": 7, "date_from": "2026-04-01", "date_to": "2026-04-30", "uids": some}),
        )
        .await;
        assert_eq!(meta(&narrowed)["total"], json!(april.len()));
        // Over 50 ids, the list is ignored.
        let many: Vec<String> = floor_ids(4)[..51].to_vec();
        let ignored = call(&client, "find_photos", json!({"floor": 4, "uids": many})).await;
        assert_eq!(meta(&ignored)["total"], json!(198));

        let added = call(
            &client,
            "add_photo",
            json!({"floor": 4, "captured_at": "2026-04-15"}),
        )
        .await;
        assert_eq!(added.text(), "added P04-0000-1");
        let drifted = call(&client, "find_photos", json!({"floor": 4})).await;
        assert_eq!(meta(&drifted)["total"], json!(199));
        client.close().await;
    }

    #[tokio::test]
    #[ignore = "needs the npm/PyPI MCP servers: scripts/test-deps, run with --include-ignored"]
    async fn python_sdk_text_server() {
        let (server, _tmp) = start(Kind::PyText).await;
        let client = server.client().await;
        let page = call(&client, "find_photos", json!({"floor": 4, "limit": 3})).await;
        assert!(!page.is_error);
        assert!(page.structured.is_none(), "no structuredContent at all");
        assert!(page
            .meta
            .as_ref()
            .is_none_or(|m| !m.contains_key("returned")));
        assert_eq!(page.blocks.len(), 1);
        let j = text_json(&page);
        let ids: Vec<&str> = j["photos"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["photo_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, floor_ids(4)[..3]);
        assert_eq!(
            (&j["count"], &j["total_count"], &j["at_least"], &j["more"]),
            (&json!(3), &json!(198), &Value::Null, &json!(true))
        );
        let cursor = j["next"].as_str().expect("next").to_string();
        let page2 = call(
            &client,
            "find_photos",
            json!({"floor": 4, "limit": 3, "cursor": cursor}),
        )
        .await;
        assert_eq!(
            text_json(&page2)["photos"][0]["photo_id"],
            json!(floor_ids(4)[3])
        );

        let bound = text_json(&call(&client, "find_photos", json!({"floor": 3})).await);
        assert_eq!(
            (&bound["total_count"], &bound["at_least"]),
            (&Value::Null, &json!(COUNT_CAP))
        );
        let zero = text_json(&call(&client, "find_photos", json!({"floor": 9})).await);
        assert_eq!(
            zero,
            json!({"photos": [], "count": 0, "total_count": 0, "at_least": null, "more": false, "next": null})
        );
        let failed = call(&client, "find_photos", json!({"archive": true})).await;
        assert!(!failed.is_error);
        assert_eq!(
            failed.text(),
            "upstream error 502: Bad Gateway from the photo archive"
        );
        let count = call(&client, "count_photos", json!({"floor": 2})).await;
        assert!(count.structured.is_none());
        assert_eq!(
            text_json(&count),
            json!({"columns": ["COUNT(*)"], "rows": [[613]]})
        );
        let narrowed = text_json(
            &call(
                &client,
                "find_photos",
                json!({"date_from": "2026-04-01", "date_to": "2026-04-30", "photo_ids": floor_ids(7)}),
            )
            .await,
        );
        assert_eq!(
            narrowed["total_count"],
            json!(ids_where(7, "2026-04-01", "2026-04-30").len())
        );
        let added = call(
            &client,
            "add_photo",
            json!({"floor": 4, "captured_at": "2026-04-15"}),
        )
        .await;
        assert_eq!(added.text(), "added P04-0000-1");
        let drifted = text_json(&call(&client, "find_photos", json!({"floor": 4})).await);
        assert_eq!(drifted["total_count"], json!(199));

        // The export (interop_honesty/terminal.rs): a preview, a confirm
        // whose link is on the server's own origin, and that link served.
        let preview = text_json(&call(&client, "prepare_report", json!({})).await);
        assert_eq!(
            (&preview["status"], &preview["reportId"], &preview["files"]),
            (&json!("OK"), &json!("R-1"), &json!(3))
        );
        assert!(preview["bytes"].as_u64().is_some_and(|b| b > 0));
        let confirm = call(&client, "issue_report_link", json!({"reportId": "R-1"})).await;
        assert!(!confirm.is_error && confirm.structured.is_none());
        let confirm = text_json(&confirm);
        assert_eq!(confirm["status"], json!("OK"));
        let link = confirm["data"]["link"].as_str().expect("data.link");
        let origin = server.origin().unwrap();
        assert!(
            link.starts_with(&format!("{origin}/reports/R-1/file?key=")),
            "{link}"
        );
        assert!(confirm["data"]["expiresAt"]
            .as_str()
            .is_some_and(|at| at.ends_with('Z')));
        let get = |url: String| async move { reqwest::get(url).await.unwrap().status().as_u16() };
        assert_eq!(get(link.to_string()).await, 200);
        assert_eq!(
            get(format!("{origin}/reports/R-1/file?key=wrong")).await,
            403
        );
        assert_eq!(get(format!("{origin}/reports/R-1/file")).await, 403);
        assert_eq!(get(format!("{origin}/reports/R-9/file?key=x")).await, 404);
        let counts = text_json(&call(&client, "report_counts", json!({})).await);
        assert_eq!(counts, json!({"prepare_report": 1, "issue_report_link": 1}));
        client.close().await;
    }

    #[tokio::test]
    #[ignore = "needs the npm/PyPI MCP servers: scripts/test-deps, run with --include-ignored"]
    async fn reference_sqlite_server() {
        let (server, _tmp) = start(Kind::Sqlite).await;
        let client = server.client().await;
        let names: Vec<String> = client
            .list_tools()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert!(names.iter().any(|n| n == "read_query"), "{names:?}");
        let rows = call(&client, "read_query", sql_listing(4, 2, 0)).await;
        assert!(!rows.is_error && rows.structured.is_none() && rows.meta.is_none());
        let p = photos();
        let row = |id: &str| {
            let p = p.iter().find(|p| p.id == id).unwrap();
            format!(
                "{{'id': '{}', 'floor': {}, 'captured_at': '{}'}}",
                p.id, p.floor, p.captured_at
            )
        };
        assert_eq!(
            rows.text(),
            format!("[{}, {}]", row("P04-0001"), row("P04-0002"))
        );
        let count = call(
            &client,
            "read_query",
            json!({"query": "SELECT COUNT(*) AS n FROM photos WHERE floor = 3"}),
        )
        .await;
        assert_eq!(count.text(), "[{'n': 651}]");
        let empty = call(&client, "read_query", sql_listing(9, 20, 0)).await;
        assert_eq!(empty.text(), "[]");
        let bad = call(
            &client,
            "read_query",
            json!({"query": "SELECT id FROM panoramas"}),
        )
        .await;
        assert!(!bad.is_error);
        assert_eq!(bad.text(), "Database error: no such table: panoramas");
        client.close().await;
    }
}
