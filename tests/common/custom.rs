//! A server for tests that need their own tables, model or limits: the
//! demo tool server, the chat server over a real socket, a real database.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};
use turnstile::agent::Limits;
use turnstile::app::{self, AppConfig};
use turnstile::demo::{DemoOptions, DemoServer};
use turnstile::llm::{Model, Scripted};
use turnstile::mcp::ServerSpec;
use turnstile::wire::Frame;

use futures::stream::BoxStream;
use futures::StreamExt;

use super::frames::{read_frames, FrameReader};

/// A turn whose response stream is still open.
pub struct OpenTurn {
    body: BoxStream<'static, reqwest::Result<Vec<u8>>>,
    reader: FrameReader,
}

impl OpenTurn {
    /// Reads until `done(frames so far)` holds; returns the frames seen.
    pub async fn until(&mut self, done: impl Fn(&[Frame]) -> bool) -> Vec<Frame> {
        while !done(self.reader.frames()) {
            let chunk = self.body.next().await.expect("stream open").unwrap();
            self.reader.push(&chunk);
        }
        self.reader.frames().to_vec()
    }
}

/// How many frames of `frames` match `kind` (its SSE event name).
pub fn count(frames: &[Frame], kind: &str) -> usize {
    frames.iter().filter(|f| f.kind() == kind).count()
}

pub struct Server {
    pub base: String,
    pub http: reqwest::Client,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
    _demo: DemoServer,
}

impl Server {
    pub async fn start(db: &str, tables_dir: Option<&Path>) -> Server {
        Self::start_with(
            db,
            tables_dir,
            Arc::new(Scripted::demo()),
            Limits::default(),
        )
        .await
    }

    pub async fn start_with(
        db: &str,
        tables_dir: Option<&Path>,
        model: Arc<dyn Model>,
        limits: Limits,
    ) -> Server {
        super::init_tracing();
        let demo = DemoServer::start(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            DemoOptions::default(),
        )
        .await
        .expect("demo server starts");
        let state = app::build(AppConfig {
            database_url: db,
            servers: vec![ServerSpec::http("demo", demo.url.clone())],
            model,
            limits,
            turn_lease: turnstile::agent::claims::DEFAULT_TURN_LEASE,
            tables_dir,
            contracts: turnstile::demo::contracts(),
        })
        .await
        .expect("app builds with the edited tables");
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
        Server {
            base,
            http: reqwest::Client::new(),
            shutdown: Some(tx),
            task,
            _demo: demo,
        }
    }

    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let _ = self.task.await;
    }

    pub async fn new_thread(&self) -> String {
        let v: Value = self
            .http
            .post(format!("{}/v1/threads", self.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
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
        assert_eq!(r.status(), 200);
        OpenTurn {
            body: r.bytes_stream().map(|c| c.map(|b| b.to_vec())).boxed(),
            reader: FrameReader::new(),
        }
    }

    /// The thread once a record of `kind` is stored (polled: the server
    /// records a cut after it notices the client left).
    pub async fn thread_with(&self, thread: &str, kind: &str) -> Value {
        for _ in 0..50 {
            let v = self.thread(thread).await;
            let records = v["messages"].as_array().unwrap();
            if records.iter().any(|m| m["body"]["kind"] == kind) {
                return v;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!("no `{kind}` record was stored");
    }

    /// The thread as `GET /v1/threads/{id}` returns it.
    pub async fn thread(&self, thread: &str) -> Value {
        self.http
            .get(format!("{}/v1/threads/{thread}", self.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    pub async fn say(&self, thread: &str, text: &str) -> Vec<Frame> {
        let r = self
            .http
            .post(format!("{}/v1/threads/{thread}/messages", self.base))
            .json(&json!({ "text": text }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        read_frames(&r.bytes().await.unwrap())
    }

    /// The stored error records of the thread: (table, row_id).
    pub async fn stored_errors(&self, thread: &str) -> Vec<(Option<String>, Option<String>)> {
        let v = self.thread(thread).await;
        v["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| &m["body"])
            .filter(|b| b["kind"] == "error")
            .map(|b| {
                let e: turnstile::wire::Error = serde_json::from_value(b.clone()).unwrap();
                (e.table, e.row_id)
            })
            .collect()
    }
}
