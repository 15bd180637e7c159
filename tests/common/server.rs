//! A real server for integration tests: the demo MCP server, the chat server
//! over a real socket, a real database. Turns are driven over HTTP/SSE and
//! every frame is checked against the `frame` table as a client would.
//!
//! Each scenario runs under the `harness` table: the substrate (this server)
//! is probed first, and a scenario verdict exists only if the probe passed.

use std::net::SocketAddr;
use std::sync::Arc;

use serde_json::{json, Value};
use turnstile::agent::Limits;
use turnstile::app::{self, AppConfig};
use turnstile::demo::{DemoOptions, DemoServer, Fault};
use turnstile::fsm::Machine;
use turnstile::llm::{Model, Scripted};
use turnstile::mcp::ServerSpec;
use turnstile::protocols::harness::{Harness, HarnessEvent};
use turnstile::protocols::{TableSet, Typed};

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

/// The databases to run against: SQLite always, PostgreSQL when configured.
pub fn databases(tmp: &tempfile::TempDir) -> Vec<String> {
    let mut out = vec![format!(
        "sqlite://{}?mode=rwc",
        tmp.path().join("t.db").display()
    )];
    match std::env::var("TURNSTILE_TEST_DATABASE_URL") {
        Ok(url) if !url.is_empty() => out.push(url),
        _ => eprintln!("skipping PostgreSQL: TURNSTILE_TEST_DATABASE_URL is not set"),
    }
    out
}

impl TestServer {
    pub async fn start(db_url: &str, faults: Vec<Fault>) -> TestServer {
        let demo = DemoServer::start(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            DemoOptions { faults },
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
            DemoOptions { faults },
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
            tables_dir: None,
            contracts: turnstile::demo::contracts(),
        })
        .await
        .expect("app builds");
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

    /// The substrate check: health, the frame table, and a real tool list.
    async fn probe(&mut self) {
        self.harness.fire(HarnessEvent::Probe).unwrap();
        let health = self.http.get(format!("{}/healthz", self.base)).send().await;
        let table = self.get("/v1/tables/frame").await;
        let ok = health.map(|r| r.status().is_success()).unwrap_or(false)
            && table.0 == 200
            && table.1["rows"].as_array().map(|r| r.len()) == Some(60);
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
        let (status, v) = self.get(&format!("/v1/threads/{thread}")).await;
        assert_eq!(status, 200, "{v}");
        v["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap().to_string())
            .collect()
    }

    /// Starts a turn and reads its stream until `marker` has arrived;
    /// returns the open stream and what was read so far.
    pub async fn turn_until(
        &self,
        thread: &str,
        text: &str,
        marker: &str,
    ) -> (
        futures::stream::BoxStream<'static, reqwest::Result<axum::body::Bytes>>,
        String,
    ) {
        use futures::StreamExt;
        let r = self
            .http
            .post(format!("{}/v1/threads/{thread}/messages", self.base))
            .json(&json!({"text": text}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let mut body = r.bytes_stream().boxed();
        let mut seen = String::new();
        while !seen.contains(marker) {
            let chunk = body.next().await.expect("stream open").unwrap();
            seen += &String::from_utf8_lossy(&chunk);
        }
        (body, seen)
    }

    pub async fn new_thread(&self) -> String {
        let (status, v) = self.post_raw("/v1/threads", "{}").await;
        assert_eq!(status, 201);
        v["thread_id"].as_str().unwrap().to_string()
    }

    /// One turn over HTTP/SSE; every frame is checked against the frame
    /// table as it arrives, and the stream's end is fired as `close`.
    pub async fn turn(&self, thread: &str, body: Value) -> Vec<(String, Value)> {
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
        let text = r.text().await.unwrap();
        let frame = TableSet::builtin().unwrap().get("frame").unwrap().clone();
        let mut m = Machine::new(frame.clone());
        let mut out = Vec::new();
        let mut last_id = 0u64;
        for block in text.split("\n\n").filter(|b| !b.trim().is_empty()) {
            let (mut id, mut kind, mut data) = (None, None, None);
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id: ") {
                    id = Some(v.parse::<u64>().unwrap());
                } else if let Some(v) = line.strip_prefix("event: ") {
                    kind = Some(v.to_string());
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data = Some(serde_json::from_str::<Value>(v).unwrap());
                }
            }
            let Some(kind) = kind else { continue };
            let id = id.expect("every frame has an id");
            assert_eq!(id, last_id + 1, "frame ids are consecutive");
            last_id = id;
            m.fire(frame.event_index(&kind).unwrap())
                .unwrap_or_else(|v| panic!("frame order violation: {v}"));
            out.push((kind, data.unwrap_or(Value::Null)));
        }
        m.fire(frame.event_index("close").unwrap())
            .unwrap_or_else(|v| panic!("stream ended out of order: {v}"));
        out
    }

    pub async fn say(&self, thread: &str, text: &str) -> Vec<(String, Value)> {
        self.turn(thread, json!({"text": text})).await
    }
}

/// Kinds and stable fields of a turn's frames, for snapshots: ids that
/// change per run are replaced.
pub fn stable(frames: &[(String, Value)]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < frames.len() {
        let (kind, d) = &frames[i];
        if kind == "delta" {
            // Consecutive deltas as one line: the text matters, not its chunking.
            let mut text = String::new();
            let mut n = 0;
            while i < frames.len() && frames[i].0 == "delta" {
                text += frames[i].1["text"].as_str().unwrap_or("");
                n += 1;
                i += 1;
            }
            out += &format!("delta ×{n}: {text}\n");
            continue;
        }
        i += 1;
        let mut d = d.clone();
        for key in ["turn_id", "thread_id", "call_id"] {
            if d.get(key).is_some() {
                d[key] = json!("[id]");
            }
        }
        if kind == "citation" {
            // Item details are the demo data's; the count fields are the point.
            let n = d["items"].as_array().map(|a| a.len()).unwrap_or(0);
            d["items"] = json!(format!("[{n} items]"));
        }
        out += &format!("{kind}: {d}\n");
    }
    out
}

pub fn answer(frames: &[(String, Value)]) -> String {
    frames
        .iter()
        .filter(|(k, _)| k == "delta")
        .map(|(_, d)| d["text"].as_str().unwrap_or("").to_string())
        .collect()
}

pub fn kinds(frames: &[(String, Value)]) -> Vec<&str> {
    frames.iter().map(|(k, _)| k.as_str()).collect()
}
