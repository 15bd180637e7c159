//! The one in-process server of the integration tests: the app as
//! `turnstile serve` builds it (`app::build_with`), over a real socket
//! (`http::serve_with`), on a real database, with the demo MCP server (or
//! the tool servers a test names). Turns are driven over HTTP/SSE and every
//! frame is checked against the test's own `frame` table as a client would.
//!
//! [`TestServer::builder`] sets what a test needs (model, faults, tables,
//! limits, HTTP config, database, servers and contracts, turn lease);
//! nothing else in `tests/` calls `app::build`.
//!
//! Each server is one run of the `harness` table ([`super::harness`]): it is
//! probed before the test gets it (its tables' hashes against the test's
//! own), the scenario's verdict is [`TestServer::pass`], and a server
//! dropped without one fails the test.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::StreamExt;
use serde_json::{json, Value};
use turnstile::agent::Limits;
use turnstile::app::{self, AppConfig};
use turnstile::fsm::Table;
use turnstile::http::HttpConfig;
use turnstile::judge::Contracts;
use turnstile::llm::{LlmError, Model, Plan, PlanRequest, RespondRequest, TextStream};
use turnstile::mcp::{ClientOptions, ServerSpec};
use turnstile::protocols::TableSet;
use turnstile::store::{Role, Store};
use turnstile::wire::Frame;
use turnstile_demo::slow::Slowed;
use turnstile_demo::Scripted;
use turnstile_demo::{DemoOptions, DemoServer, Fault};

use super::frames::{FrameKind, FrameReader};
use super::harness::{Run, SubstrateBroken};
use super::thread::{RecordKind, ThreadView};

/// The one slow model of the tests: the scripted demo model, each plan
/// after `plan_pause`, and every answer delta released `delta_delay` after
/// the previous one was due (`turnstile_demo::slow::Slowed`, the model of
/// `turnstile demo --model-delay-ms`).
pub struct Slow {
    plan_pause: Duration,
    inner: Slowed<Scripted>,
}

impl Slow {
    /// Answers paced one delta every `delay`: a turn that is still
    /// narrating when a test acts.
    pub fn answering(delay: Duration) -> Arc<dyn Model> {
        Arc::new(Slow {
            plan_pause: Duration::ZERO,
            inner: Slowed::new(Scripted::demo(), delay),
        })
    }

    /// Silent for `pause` before each plan: a live turn that sends nothing
    /// for a while.
    pub fn planning(pause: Duration) -> Arc<dyn Model> {
        Arc::new(Slow {
            plan_pause: pause,
            inner: Slowed::new(Scripted::demo(), Duration::ZERO),
        })
    }
}

#[async_trait::async_trait]
impl Model for Slow {
    fn name(&self) -> &str {
        "slow"
    }
    async fn plan(&self, req: &PlanRequest) -> Result<Plan, LlmError> {
        tokio::time::sleep(self.plan_pause).await;
        self.inner.plan(req).await
    }
    async fn respond(&self, req: &RespondRequest) -> Result<TextStream, LlmError> {
        self.inner.respond(req).await
    }
}

/// The databases to run against: `databases(&tmp)[0]` is SQLite (a file in
/// `tmp`), `[1]` PostgreSQL ([`super::needs::postgres`]: a test that takes it
/// fails without `TURNSTILE_TEST_DATABASE_URL`). A check that runs on both
/// is two tests, the PostgreSQL one `#[ignore = "needs PostgreSQL: …"]`
/// (ADR 0015): there is no loop over both that could skip a half.
pub fn databases(tmp: &tempfile::TempDir) -> Databases {
    Databases {
        sqlite: sqlite_in(tmp.path(), "t.db"),
        postgres: super::needs::postgres_url(),
    }
}

/// A SQLite database in the file `dir/name` (created on first use).
pub fn sqlite_in(dir: &Path, name: &str) -> String {
    format!("sqlite://{}?mode=rwc", dir.join(name).display())
}

/// SQLite, and PostgreSQL when configured.
pub struct Databases {
    sqlite: String,
    postgres: Option<String>,
}

impl Databases {
    /// The `i`-th URL (0: SQLite, 1: PostgreSQL), taken out.
    pub fn remove(&mut self, i: usize) -> String {
        match i {
            0 => std::mem::take(&mut self.sqlite),
            _ => self.postgres.take().unwrap_or_else(super::needs::postgres),
        }
    }
}

impl std::ops::Index<usize> for Databases {
    type Output = String;
    fn index(&self, i: usize) -> &String {
        match i {
            0 => &self.sqlite,
            _ => self
                .postgres
                .as_ref()
                .unwrap_or_else(|| super::needs::no_postgres()),
        }
    }
}

/// Where the turns' tools come from.
enum Tools {
    /// A demo MCP server started for this server, with these options.
    Demo(DemoOptions),
    /// This demo server, already running (kept as [`TestServer::demo`]).
    Given(DemoServer),
    /// These servers, and no demo server.
    Servers(Vec<ServerSpec>),
}

/// What a [`TestServer`] runs with; [`TestServer::builder`] starts from the
/// demo: the scripted model, the demo tool server without faults and its
/// contracts, the built-in tables, default limits, turn lease, HTTP config
/// and MCP client options, and a fresh SQLite file.
pub struct Builder {
    database: Option<String>,
    model: Arc<dyn Model>,
    tools: Tools,
    limits: Limits,
    turn_lease: Duration,
    tables_dir: Option<PathBuf>,
    contracts: Contracts,
    roles: turnstile::judge::approval::Roles,
    /// The approval cards' wording (default: the demo's).
    cards: turnstile::judge::card::Cards,
    /// The assistant's instructions (default: the demo's).
    instructions: turnstile::llm::prompt::Instructions,
    /// `None`: the demo's flow when the demo tool server runs, else none.
    terminals: Option<turnstile::judge::capability::Terminals>,
    http: HttpConfig,
    client: ClientOptions,
    test_tables: Option<TableSet>,
    auth: turnstile::http::AuthConfig,
    licences: turnstile::judge::tiers::LicenceMap,
    guardrails: turnstile::agent::Guardrails,
    /// The MCP revision spoken to the demo tool server.
    revision: turnstile::mcp::Revision,
}

impl Builder {
    /// Speak `revision` to the demo tool server, which then offers
    /// 2026-07-28 too (default: 2025-11-25, which it always offers).
    pub fn revision(mut self, revision: turnstile::mcp::Revision) -> Self {
        self.revision = revision;
        self
    }

    /// Who may call (default: no verifier, no proxy key, development
    /// mode: the session-owned anonymous flow).
    pub fn auth(mut self, auth: turnstile::http::AuthConfig) -> Self {
        self.auth = auth;
        self
    }

    /// The tool → tier map (default: `LicenceMap::open()`, every tool
    /// everybody's).
    pub fn licences(mut self, licences: turnstile::judge::tiers::LicenceMap) -> Self {
        self.licences = licences;
        self
    }

    /// The safety checks (default: none).
    pub fn guardrails(mut self, guardrails: turnstile::agent::Guardrails) -> Self {
        self.guardrails = guardrails;
        self
    }

    /// The database URL (default: a fresh SQLite file the server owns).
    pub fn database(mut self, url: impl Into<String>) -> Self {
        self.database = Some(url.into());
        self
    }

    /// The model (default: `Scripted::demo()`).
    pub fn model(mut self, model: Arc<dyn Model>) -> Self {
        self.model = model;
        self
    }

    /// The demo tool server's faults (default: none).
    pub fn faults(mut self, faults: Vec<Fault>) -> Self {
        self.tools = Tools::Demo(DemoOptions {
            faults,
            ..DemoOptions::default()
        });
        self
    }

    /// The demo tool server, already running: its URL is the one tool
    /// server, and it is kept as [`TestServer::demo`].
    pub fn demo(mut self, demo: DemoServer) -> Self {
        self.tools = Tools::Given(demo);
        self
    }

    /// These MCP servers instead of the demo one (none: a server without
    /// tools).
    pub fn servers(mut self, servers: Vec<ServerSpec>) -> Self {
        self.tools = Tools::Servers(servers);
        self
    }

    /// Which tools' results are judged (default: the demo's contracts).
    pub fn contracts(mut self, contracts: Contracts) -> Self {
        self.contracts = contracts;
        self
    }

    /// The tools' approval roles (default: the demo's).
    pub fn roles(mut self, roles: turnstile::judge::approval::Roles) -> Self {
        self.roles = roles;
        self
    }

    /// The approval cards' wording per tool (default: the demo's).
    pub fn cards(mut self, cards: turnstile::judge::card::Cards) -> Self {
        self.cards = cards;
        self
    }

    /// The assistant's instructions, first in every prompt (default: the
    /// demo's).
    pub fn instructions(mut self, instructions: turnstile::llm::prompt::Instructions) -> Self {
        self.instructions = instructions;
        self
    }

    /// The terminal flows (default: the demo's, at the demo server's
    /// origin, when it runs).
    pub fn terminals(mut self, terminals: turnstile::judge::capability::Terminals) -> Self {
        self.terminals = Some(terminals);
        self
    }

    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    pub fn turn_lease(mut self, lease: Duration) -> Self {
        self.turn_lease = lease;
        self
    }

    /// A directory of table overrides the server loads. The test loads its
    /// own copy from the same directory (its frames are checked against
    /// that `frame` table), unless [`Builder::test_tables`] says otherwise.
    pub fn tables_dir(mut self, dir: &Path) -> Self {
        self.tables_dir = Some(dir.to_path_buf());
        self
    }

    /// The tables the test believes the server runs, and checks frames
    /// with (default: its own load of the server's tables directory). Set
    /// apart from the server's only to break the substrate on purpose.
    pub fn test_tables(mut self, tables: TableSet) -> Self {
        self.test_tables = Some(tables);
        self
    }

    /// Timeouts, limits and browser headers of the HTTP server.
    pub fn http(mut self, http: HttpConfig) -> Self {
        self.http = http;
        self
    }

    /// Options of every MCP server's client.
    pub fn client(mut self, client: ClientOptions) -> Self {
        self.client = client;
        self
    }

    /// The app as `turnstile serve` builds it from `config`: its MCP
    /// servers, per-tool contracts, limits, turn lease, tables and HTTP
    /// settings. The model and the database stay the builder's (the
    /// config's `database_url` is not used).
    pub fn config(self, config: &turnstile::config::Config) -> Self {
        let mut b = self
            .servers(config.server_specs())
            .contracts(config.contracts())
            .roles(config.roles())
            .cards(config.cards())
            .instructions(config.model.instructions.clone())
            .terminals(config.terminal_flows())
            .limits(config.agent_limits())
            .turn_lease(config.turn_lease())
            .http(config.http.clone())
            .auth(config.auth.clone())
            .licences(config.licences())
            .guardrails(config.guardrails.clone());
        b.tables_dir = config.tables_dir.clone();
        b
    }

    /// Builds and serves the app, and probes it; a substrate that fails its
    /// check fails the test.
    pub async fn start(self) -> TestServer {
        self.try_start().await.unwrap_or_else(|b| b.fail())
    }

    /// As [`Builder::start`], with a failed substrate check returned: the
    /// harness run is then void and there is no server.
    pub async fn try_start(self) -> Result<TestServer, SubstrateBroken> {
        let tmp = match self.database {
            Some(_) => None,
            None => Some(tempfile::tempdir().expect("a temporary directory")),
        };
        let db_url = match (&self.database, &tmp) {
            (Some(url), _) => url.clone(),
            (None, Some(tmp)) => sqlite_in(tmp.path(), "t.db"),
            (None, None) => unreachable!(),
        };
        let (servers, demo) = match self.tools {
            Tools::Demo(mut options) => {
                options.stateless |= self.revision != turnstile::mcp::Revision::Sessions;
                let demo = DemoServer::start(SocketAddr::from(([127, 0, 0, 1], 0)), options)
                    .await
                    .expect("demo server starts");
                let spec = ServerSpec::http("demo", demo.url.clone()).with_protocol(self.revision);
                (vec![spec], Some(demo))
            }
            Tools::Given(demo) => {
                let spec = ServerSpec::http("demo", demo.url.clone()).with_protocol(self.revision);
                (vec![spec], Some(demo))
            }
            Tools::Servers(servers) => (servers, None),
        };
        let terminals = match (self.terminals, &demo) {
            (Some(t), _) => t,
            (None, Some(demo)) => turnstile_demo::terminals(&demo.url),
            (None, None) => Default::default(),
        };
        let state = app::build_with(
            AppConfig {
                terminals,
                database_url: &db_url,
                servers,
                model: self.model,
                limits: self.limits,
                turn_lease: self.turn_lease,
                tables_dir: self.tables_dir.as_deref(),
                contracts: self.contracts,
                roles: self.roles,
                cards: self.cards,
                instructions: self.instructions,
                auth: self.auth,
                licences: self.licences,
                guardrails: self.guardrails,
                connections: None,
            },
            self.client,
        )
        .await
        .expect("the app builds");
        let store = state.store.clone();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let base = format!("http://{addr}");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let http_config = self.http;
        let task = tokio::spawn(async move {
            turnstile::http::serve_with(listener, state, &http_config, async {
                let _ = rx.await;
            })
            .await
            .expect("the server serves");
        });
        let tables = match self.test_tables {
            Some(t) => t,
            None => TableSet::load(self.tables_dir.as_deref())
                .unwrap_or_else(|e| panic!("the test loads its own tables: {e}")),
        };
        let http = super::browser();
        let what = format!("TestServer at {base}");
        let run = match Run::probe(what, &http, &base, &tables).await {
            Ok(run) => run,
            Err(broken) => {
                let _ = tx.send(());
                let _ = task.await;
                return Err(broken);
            }
        };
        // The browser has its session before a test sends requests at once
        // (each cookie-less request would be issued a session of its own).
        // One at a time: the jar is the whole process's, and cookies know
        // no port, so two servers that both issued a first session at once
        // would leave the jar with one and a thread of the other's
        // invisible to it.
        static FIRST: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
        {
            let _one = FIRST.lock().await;
            let _ = http.get(format!("{base}/v1/threads")).send().await;
        }
        Ok(TestServer {
            base,
            addr,
            demo,
            db_url,
            http,
            store,
            tables: Arc::new(tables),
            run,
            shutdown: Some(tx),
            task: Some(task),
            _tmp: tmp,
        })
    }
}

/// A running server, probed; end its scenario with [`TestServer::pass`].
pub struct TestServer {
    pub base: String,
    pub addr: SocketAddr,
    /// The demo tool server, when the server has one (take it to stop it
    /// under a running server).
    pub demo: Option<DemoServer>,
    pub db_url: String,
    pub http: reqwest::Client,
    /// The server's own store, to break it from a test.
    pub store: Store,
    /// The test's own tables: the substrate check proved the server serves
    /// exactly these, and frames are checked against its `frame` table.
    tables: Arc<TableSet>,
    run: Run,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    /// The default database's directory.
    _tmp: Option<tempfile::TempDir>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        // `run` is dropped next: without a verdict, that fails the test.
    }
}

impl TestServer {
    /// A server to start; see [`Builder`] for what it runs with.
    pub fn builder() -> Builder {
        Builder {
            database: None,
            model: Arc::new(Scripted::demo()),
            tools: Tools::Demo(DemoOptions::default()),
            limits: Limits::default(),
            turn_lease: turnstile::agent::thread_lease::DEFAULT_TURN_LEASE,
            tables_dir: None,
            contracts: turnstile_demo::contracts(),
            roles: turnstile_demo::roles(),
            cards: turnstile_demo::cards(),
            instructions: turnstile_demo::instructions(),
            terminals: None,
            http: HttpConfig::default(),
            client: ClientOptions::default(),
            test_tables: None,
            auth: Default::default(),
            licences: turnstile::judge::tiers::LicenceMap::open(),
            guardrails: Default::default(),
            revision: turnstile::mcp::Revision::default(),
        }
    }

    /// Where this server's harness run is (`Running` until the verdict).
    pub fn harness_state(&self) -> crate::common::harness_table::HarnessState {
        self.run.state()
    }

    /// The tables the substrate check proved the server serves.
    pub fn tables(&self) -> &TableSet {
        &self.tables
    }

    fn frame_table(&self) -> Arc<Table> {
        self.tables.get("frame").expect("a frame table").clone()
    }

    /// The verdict: this server's scenario passed (the harness machine
    /// takes `scenario-passed` into `Verdict`). The server stops.
    #[track_caller]
    pub fn pass(mut self) {
        self.verdict();
    }

    /// [`TestServer::pass`], and waits until the server has stopped, so a
    /// next server can take over its database.
    pub async fn pass_and_stop(mut self) {
        self.verdict();
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
        if let Some(d) = self.demo.take() {
            d.shutdown().await;
        }
    }

    #[track_caller]
    fn verdict(&mut self) {
        if self.task.as_ref().is_some_and(|t| t.is_finished()) {
            self.run.died("the server's task ended before the verdict");
        }
        self.run.pass();
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub async fn post_raw(&self, path: &str, body: &str) -> (u16, Value) {
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// `GET /v1/threads/{id}` as JSON, for checks that something is stored
    /// nowhere; read records through [`TestServer::thread`].
    pub async fn thread_json(&self, thread: &str) -> Value {
        let (status, v) = self.get(&format!("/v1/threads/{thread}")).await;
        assert_eq!(status, 200, "{v}");
        v
    }

    /// `GET /v1/threads/{id}`, typed.
    pub async fn thread(&self, thread: &str) -> ThreadView {
        ThreadView::read(&self.thread_json(thread).await)
    }

    /// The thread once a record of `kind` is stored (polled: the server
    /// records a cut after it notices the client left).
    pub async fn thread_with(&self, thread: &str, kind: RecordKind) -> ThreadView {
        for _ in 0..50 {
            let v = self.thread(thread).await;
            if v.has(kind) {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no {kind:?} record was stored");
    }

    /// The thread's stored message bodies as JSON, in order, for checks
    /// that something is stored nowhere; read records through
    /// [`TestServer::thread`].
    pub async fn bodies(&self, thread: &str) -> Vec<Value> {
        let v = self.thread_json(thread).await;
        let view = ThreadView::read(&v);
        let bodies: Vec<Value> = v["messages"]
            .as_array()
            .map(|m| m.iter().map(|m| m["body"].clone()).collect())
            .unwrap_or_default();
        assert_eq!(bodies.len(), view.messages.len());
        bodies
    }

    /// The roles of a thread's stored messages, in order.
    pub async fn roles(&self, thread: &str) -> Vec<Role> {
        let v = self.thread(thread).await;
        v.messages.iter().map(|m| m.role).collect()
    }

    /// The kind of every stored record, in order.
    pub async fn records(&self, thread: &str) -> Vec<RecordKind> {
        self.thread(thread).await.kinds()
    }

    /// The stored error records of the thread: (table, row_id).
    pub async fn stored_errors(&self, thread: &str) -> Vec<(Option<String>, Option<String>)> {
        let v = self.thread(thread).await;
        v.records()
            .into_iter()
            .filter_map(|r| match r {
                super::thread::Record::Error(e) => Some((e.table.clone(), e.row_id.clone())),
                _ => None,
            })
            .collect()
    }

    pub async fn new_thread(&self) -> String {
        let (status, v) = self.post_raw("/v1/threads", "{}").await;
        assert_eq!(status, 201, "{v}");
        v["thread_id"].as_str().unwrap().to_string()
    }

    /// Starts a turn and returns its stream, still open.
    pub async fn open_turn(&self, thread: &str, text: &str) -> OpenTurn {
        let r = self
            .http
            .post(format!("{}/v1/threads/{thread}/messages", self.base))
            .json(&json!({ "text": text }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "turn refused");
        OpenTurn {
            body: r.bytes_stream().boxed(),
            reader: FrameReader::with_table(self.frame_table()),
        }
    }

    /// Starts a turn and reads its stream until a frame of `kind` has
    /// arrived; returns the still open stream.
    pub async fn turn_until(&self, thread: &str, text: &str, kind: FrameKind) -> OpenTurn {
        let mut open = self.open_turn(thread, text).await;
        open.until(kind).await;
        open
    }

    /// One turn over HTTP/SSE; every frame is checked against the frame
    /// table as it arrives, and the stream's end is fired as `close`.
    pub async fn turn(&self, thread: &str, body: Value) -> Vec<Frame> {
        let r = self
            .http
            .post(format!("{}/v1/threads/{thread}/messages", self.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(
            r.status().as_u16(),
            200,
            "turn refused: {:?}",
            r.text().await
        );
        let mut reader = FrameReader::with_table(self.frame_table());
        reader.push(&r.bytes().await.unwrap());
        reader.finish()
    }

    pub async fn say(&self, thread: &str, text: &str) -> Vec<Frame> {
        self.turn(thread, json!({"text": text})).await
    }

    /// A decision on an interrupt over HTTP: the resumed stream's frames
    /// (checked against the frame table), or the refusal's status and body.
    pub async fn resume(
        &self,
        thread: &str,
        interrupt_id: &str,
        decision: &str,
    ) -> Result<Vec<Frame>, (u16, Value)> {
        let body = json!({"interrupt_id": interrupt_id, "decision": decision});
        self.resume_with(thread, body).await
    }

    /// Answers a question of a tool's server: `accept` with `answers` (by
    /// request key), `decline` or `cancel`.
    pub async fn answer(
        &self,
        thread: &str,
        interrupt_id: &str,
        decision: &str,
        answers: Value,
    ) -> Result<Vec<Frame>, (u16, Value)> {
        let mut body = json!({"interrupt_id": interrupt_id, "decision": decision});
        if !answers.is_null() {
            body["answers"] = answers;
        }
        self.resume_with(thread, body).await
    }

    async fn resume_with(&self, thread: &str, body: Value) -> Result<Vec<Frame>, (u16, Value)> {
        let r = self
            .http
            .post(format!("{}/v1/threads/{thread}/resume", self.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        if status != 200 {
            return Err((status, r.json().await.unwrap_or(Value::Null)));
        }
        let mut reader = FrameReader::with_table(self.frame_table());
        reader.push(&r.bytes().await.unwrap());
        Ok(reader.finish())
    }
}

/// A turn whose stream is still open.
pub struct OpenTurn {
    body: BoxStream<'static, reqwest::Result<axum::body::Bytes>>,
    reader: FrameReader,
}

impl OpenTurn {
    /// The frames read so far.
    pub fn frames(&self) -> &[Frame] {
        self.reader.frames()
    }

    /// The client hangs up: the connection is dropped, and what was read
    /// stays, for a reconnect to go on from.
    pub fn hang_up(self) -> FrameReader {
        self.reader
    }

    /// Reads until a frame of `kind` has arrived; returns the frames read
    /// so far.
    pub async fn until(&mut self, kind: FrameKind) -> Vec<Frame> {
        while !self.frames().iter().any(|f| FrameKind::of(f) == kind) {
            let chunk = self.body.next().await.expect("stream open").unwrap();
            self.reader.push(&chunk);
        }
        self.frames().to_vec()
    }

    /// Reads the rest of the stream; every frame of the turn, the end fired
    /// as `close`.
    pub async fn finish(mut self) -> Vec<Frame> {
        while let Some(chunk) = self.body.next().await {
            self.reader.push(&chunk.unwrap());
        }
        self.reader.finish()
    }
}
