//! A real server for integration tests: the demo MCP server, the chat server
//! over a real socket, a real database. Turns are driven over HTTP/SSE and
//! every frame is checked against the `frame` table as a client would.
//!
//! Each scenario runs under the `harness` table: the substrate (this server)
//! is probed first, and a scenario verdict exists only if the probe passed.

use std::net::SocketAddr;
use std::sync::Arc;

use futures::stream::BoxStream;
use futures::StreamExt;
use serde_json::{json, Value};
use turnstile::agent::Limits;
use turnstile::app::{self, AppConfig};
use turnstile::demo::{DemoOptions, DemoServer, Fault};
use turnstile::llm::{Model, Scripted};
use turnstile::mcp::ServerSpec;
use turnstile::protocols::harness::{Harness, HarnessEvent};
use turnstile::protocols::{TableSet, Typed};
use turnstile::wire::Frame;

/// The frame helpers' old home, for tests that import them from here.
#[allow(unused_imports)]
pub use super::frames::{answer, kinds, stable};
use super::frames::{read_frames, FrameReader};

pub struct TestServer {
    pub base: String,
    pub demo: Option<DemoServer>,
    pub db_url: String,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    harness: Typed<Harness>,
    pub http: reqwest::Client,
    /// The server's own store, to break it from a test.
    pub store: turnstile::store::Store,
}

/// The databases to run against: `databases(&tmp)[0]` is SQLite (a file in
/// `tmp`), `[1]` PostgreSQL ([`super::needs::postgres`]: a test that takes it
/// fails without `TURNSTILE_TEST_DATABASE_URL`). A check that runs on both
/// is two tests, the PostgreSQL one `#[ignore = "needs PostgreSQL: …"]`
/// (ADR 0015): there is no loop over both that could skip a half.
pub fn databases(tmp: &tempfile::TempDir) -> Databases {
    Databases {
        sqlite: format!("sqlite://{}?mode=rwc", tmp.path().join("t.db").display()),
        postgres: super::needs::postgres_url(),
    }
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

impl TestServer {
    pub async fn start(db_url: &str, faults: Vec<Fault>) -> TestServer {
        let demo = DemoServer::start(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            DemoOptions {
                faults,
                ..DemoOptions::default()
            },
        )
        .await
        .expect("demo server starts");
        let url = demo.url.clone();
        Self::start_with(db_url, vec![ServerSpec::http("demo", url)], Some(demo)).await
    }

    pub async fn start_with(
        db_url: &str,
        servers: Vec<ServerSpec>,
        demo: Option<DemoServer>,
    ) -> TestServer {
        Self::start_full(db_url, servers, demo, Arc::new(Scripted::demo())).await
    }

    /// The demo tool server (with `faults`) and `model` instead of the
    /// scripted one.
    pub async fn start_with_model(
        db_url: &str,
        faults: Vec<Fault>,
        model: Arc<dyn Model>,
    ) -> TestServer {
        let demo = DemoServer::start(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            DemoOptions {
                faults,
                ..DemoOptions::default()
            },
        )
        .await
        .expect("demo server starts");
        let url = demo.url.clone();
        Self::start_full(
            db_url,
            vec![ServerSpec::http("demo", url)],
            Some(demo),
            model,
        )
        .await
    }

    pub async fn start_full(
        db_url: &str,
        servers: Vec<ServerSpec>,
        demo: Option<DemoServer>,
        model: Arc<dyn Model>,
    ) -> TestServer {
        let state = app::build(AppConfig {
            database_url: db_url,
            servers,
            model,
            limits: Limits::default(),
            turn_lease: turnstile::agent::claims::DEFAULT_TURN_LEASE,
            tables_dir: None,
            contracts: turnstile::demo::contracts(),
        })
        .await
        .expect("app builds");
        Self::serve_state(db_url, state, demo).await
    }

    /// Serves a built app on a free port and probes it (the harness's
    /// substrate check).
    async fn serve_state(
        db_url: &str,
        state: turnstile::http::AppState,
        demo: Option<DemoServer>,
    ) -> TestServer {
        let store = state.store.clone();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            turnstile::http::serve(listener, state, async {
                let _ = rx.await;
            })
            .await
            .unwrap();
        });
        let harness = TableSet::builtin()
            .unwrap()
            .bound::<Harness>()
            .unwrap()
            .machine();
        let mut s = TestServer {
            base,
            demo,
            db_url: db_url.to_string(),
            shutdown: Some(tx),
            task: Some(task),
            harness,
            http: reqwest::Client::new(),
            store,
        };
        s.probe().await;
        s
    }

    /// The app as `turnstile serve` builds it from a configuration: the
    /// config's MCP servers, per-tool contracts, limits, turn lease and
    /// tables, with `model` as the model and `db_url` as the database (the
    /// config's own `database_url` is not used).
    pub async fn start_config(
        db_url: &str,
        config: &turnstile::config::Config,
        model: Arc<dyn Model>,
    ) -> TestServer {
        let state = app::build(AppConfig {
            database_url: db_url,
            servers: config.server_specs(),
            model,
            limits: config.agent_limits(),
            turn_lease: config.turn_lease(),
            tables_dir: config.tables_dir.as_deref(),
            contracts: config.contracts(),
        })
        .await
        .expect("app builds from the config");
        Self::serve_state(db_url, state, None).await
    }

    /// The thread's stored messages, in order.
    async fn messages(&self, thread: &str) -> Vec<Value> {
        let (status, v) = self.get(&format!("/v1/threads/{thread}")).await;
        assert_eq!(status, 200, "{v}");
        v["messages"].as_array().unwrap().clone()
    }

    /// The thread's stored message bodies, in order (each has a `kind`).
    pub async fn bodies(&self, thread: &str) -> Vec<Value> {
        let messages = self.messages(thread).await;
        messages.iter().map(|m| m["body"].clone()).collect()
    }

    /// The substrate check: health, the frame table, and a real tool list.
    async fn probe(&mut self) {
        self.harness.fire(HarnessEvent::Probe).unwrap();
        let health = self.http.get(format!("{}/healthz", self.base)).send().await;
        let table = self.get("/v1/tables/frame").await;
        // The served frame table is the compiled-in one, row for row.
        let rows = TableSet::builtin()
            .ok()
            .and_then(|t| t.get("frame").map(|f| f.rows.len()));
        let ok = health.map(|r| r.status().is_success()).unwrap_or(false)
            && table.0 == 200
            && rows.is_some()
            && table.1["rows"].as_array().map(|r| r.len()) == rows;
        if ok {
            self.harness.fire(HarnessEvent::SubstrateOk).unwrap();
        } else {
            self.harness.fire(HarnessEvent::SubstrateBroken).unwrap();
            panic!("substrate check failed: no verdict of this test would mean anything");
        }
        self.harness.fire(HarnessEvent::Run).unwrap();
    }

    /// Records the scenario verdict; only reachable after a passed probe.
    pub fn pass(mut self) {
        self.harness
            .fire(HarnessEvent::Pass)
            .expect("a verdict needs a passed substrate check");
    }

    pub async fn stop(mut self) {
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

    /// The roles of a thread's stored messages, in order.
    pub async fn roles(&self, thread: &str) -> Vec<String> {
        let messages = self.messages(thread).await;
        messages
            .iter()
            .map(|m| m["role"].as_str().unwrap().to_string())
            .collect()
    }

    /// The `kind` of every stored record, in order (`user`, `plan`, `call`,
    /// `result`, `card`, `text`, `answer`, `error`, `cut`).
    pub async fn records(&self, thread: &str) -> Vec<String> {
        let bodies = self.bodies(thread).await;
        bodies
            .iter()
            .map(|b| b["kind"].as_str().unwrap_or("?").to_string())
            .collect()
    }

    /// Starts a turn and reads its stream until a frame of `kind` has
    /// arrived; returns the still open stream.
    pub async fn turn_until(&self, thread: &str, text: &str, kind: &str) -> OpenTurn {
        let r = self
            .http
            .post(format!("{}/v1/threads/{thread}/messages", self.base))
            .json(&json!({"text": text}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let mut open = OpenTurn {
            body: r.bytes_stream().boxed(),
            reader: FrameReader::new(),
        };
        open.until(kind).await;
        open
    }

    pub async fn new_thread(&self) -> String {
        let (status, v) = self.post_raw("/v1/threads", "{}").await;
        assert_eq!(status, 201);
        v["thread_id"].as_str().unwrap().to_string()
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
        read_frames(&r.bytes().await.unwrap())
    }

    pub async fn say(&self, thread: &str, text: &str) -> Vec<Frame> {
        self.turn(thread, json!({"text": text})).await
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

    /// Reads until a frame of `kind` has arrived.
    pub async fn until(&mut self, kind: &str) {
        while !self.frames().iter().any(|f| f.kind() == kind) {
            let chunk = self.body.next().await.expect("stream open").unwrap();
            self.reader.push(&chunk);
        }
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
