//! The interrupt → resume cycle of an approval (issue 17) on a durable
//! store: SQLite in WAL mode with `synchronous=FULL` (every commit
//! fsync'd), the demo's seat reservation, the scripted model.
//!
//! One cycle: "reserve seat N at HH:MM" on a fresh thread runs until the
//! `interrupt` frame (prepare called, the interrupt committed with every
//! machine), then approve resumes it to `done` (the decision swapped,
//! confirm sent once, its status read, the answer streamed). Measured, in
//! rounds that alternate within one run:
//!
//! - **library**: `Agent::run_turn` / `Agent::decide` / `Agent::resume_turn`
//!   as `POST /messages` and `POST /resume` call them, without HTTP;
//! - **http**: the same over `POST /v1/threads/{id}/messages` and
//!   `POST /v1/threads/{id}/resume`, each SSE stream read to its end;
//! - **tools only**: the cycle's three MCP calls (prepare, confirm,
//!   get_action) sent straight to the demo tool server: what a cycle costs
//!   before turnstile does anything;
//! - **commit floor**: one fsync'd autocommit `INSERT` on a file like the
//!   store's, times the commits a cycle makes (`Store::commits`).
//! - **peer** (with `TURNSTILE_BENCH_PEER_PYTHON=/path/to/venv/python`):
//!   `../shared/peers/langgraph-hitl/bench_langgraph.py`, LangGraph's
//!   `interrupt()` → `Command(resume=...)` on its SQLite saver, run in the
//!   same rounds.
//!
//! `cargo bench --bench approval` (`-- --quick`: 3 cycles, 1 round, for CI;
//! its numbers mean nothing). Knobs: `TURNSTILE_BENCH_CYCLES` (200),
//! `TURNSTILE_BENCH_ROUNDS` (3), `TURNSTILE_BENCH_PEER_SCRIPT` (the peer
//! script's path, default relative to this checkout).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use sqlx::Connection;
use turnstile::agent::{OutFrame, TurnRequest};
use turnstile::app::{self, AppConfig};
use turnstile::http::{AppState, HttpConfig};
use turnstile::mcp::{ServerSpec, ToolClient};
use turnstile_demo::{DemoOptions, DemoServer, Scripted};

fn quick() -> bool {
    std::env::args().any(|a| a == "--quick")
        || std::env::var("TURNSTILE_BENCH_QUICK").is_ok_and(|v| v == "1")
}

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The i-th reservation's seat and time: 40 seats × 24 hours × 60
/// minutes, so no two cycles of a run ask for the same seat at the same
/// time (each completes; none finds its seat taken).
fn slot(i: usize) -> (String, String) {
    let seat = 1 + i % 40;
    let (hour, minute) = ((i / 40) % 24, (i / 960) % 60);
    (seat.to_string(), format!("{hour:02}:{minute:02}"))
}

fn prompt(i: usize) -> String {
    let (seat, time) = slot(i);
    format!("reserve seat {seat} at {time}")
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(run());
}

struct Rig {
    state: AppState,
    base: String,
    http: reqwest::Client,
    demo: DemoServer,
    _dir: tempfile::TempDir,
}

async fn rig() -> Rig {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let options = DemoOptions {
        action_worker_delay: Duration::ZERO,
        ..DemoOptions::default()
    };
    let demo = DemoServer::start(SocketAddr::from(([127, 0, 0, 1], 0)), options)
        .await
        .expect("the demo tool server starts");
    // `TURNSTILE_BENCH_SYNCHRONOUS=normal` shows what the fsyncs cost.
    let sync = std::env::var("TURNSTILE_BENCH_SYNCHRONOUS").unwrap_or_else(|_| "full".into());
    let db = format!(
        "sqlite://{}?synchronous={sync}",
        dir.path().join("bench.db").display()
    );
    let state = app::build(AppConfig {
        database_url: &db,
        servers: vec![ServerSpec::http("demo", demo.url.clone())],
        model: Arc::new(Scripted::demo()),
        limits: Default::default(),
        turn_lease: Duration::from_secs(30),
        tables_dir: None,
        contracts: turnstile_demo::contracts(),
        roles: turnstile_demo::roles(),
        terminals: turnstile_demo::terminals(&demo.url),
        cards: turnstile_demo::cards(),
        instructions: turnstile_demo::instructions(),
        auth: Default::default(),
        licences: turnstile::judge::tiers::LicenceMap::open(),
        guardrails: Default::default(),
        connections: None,
    })
    .await
    .expect("the app builds");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let base = format!("http://{}", listener.local_addr().expect("an address"));
    let served = state.clone();
    tokio::spawn(async move {
        turnstile::http::serve_with(
            listener,
            served,
            &HttpConfig::default(),
            std::future::pending(),
        )
        .await
        .expect("serves");
    });
    Rig {
        state,
        base,
        http: reqwest::Client::builder()
            .cookie_store(true)
            .build()
            .unwrap(),
        demo,
        _dir: dir,
    }
}

/// Every frame a turn sent, read until the agent is done with it.
async fn frames_of<F>(run: F, mut rx: tokio::sync::mpsc::Receiver<OutFrame>) -> Vec<OutFrame>
where
    F: std::future::Future<Output = ()>,
{
    let collect = async move {
        let mut out = Vec::new();
        while let Some(f) = rx.recv().await {
            out.push(f);
        }
        out
    };
    let ((), frames) = tokio::join!(run, collect);
    frames
}

fn interrupt_id(kinds: &[(String, Value)]) -> String {
    kinds
        .iter()
        .find(|(k, _)| k == "interrupt")
        .and_then(|(_, d)| d["interrupt_id"].as_str())
        .unwrap_or_else(|| panic!("no interrupt frame: {kinds:?}"))
        .to_string()
}

fn assert_done(kinds: &[(String, Value)], what: &str) {
    let last = kinds.last().map(|(k, _)| k.as_str());
    assert_eq!(last, Some("done"), "{what}: {kinds:?}");
}

/// One cycle through the library API: (interrupt leg, resume leg).
async fn library_cycle(rig: &Rig, i: usize) -> (Duration, Duration) {
    let agent = rig.state.agent.clone();
    let thread = rig
        .state
        .store
        .create_thread(None)
        .await
        .expect("thread")
        .id;
    let t0 = Instant::now();
    let turn_id = uuid::Uuid::new_v4().to_string();
    let claim = agent.leases.claim(&thread, &turn_id).await.expect("claim");
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let req = TurnRequest {
        text: prompt(i),
        context: None,
        ..Default::default()
    };
    let frames = frames_of(agent.run_turn(&thread, &turn_id, req, tx, claim), rx).await;
    let kinds: Vec<(String, Value)> = frames
        .into_iter()
        .map(|f| (f.kind.into(), f.data))
        .collect();
    assert_done(&kinds, "the interrupt leg");
    let id = interrupt_id(&kinds);
    let t1 = Instant::now();
    let turn_id = uuid::Uuid::new_v4().to_string();
    let claim = agent.leases.claim(&thread, &turn_id).await.expect("claim");
    let decided = agent
        .decide(&thread, &id, turnstile::agent::UserDecision::Approve)
        .await
        .expect("approve wins");
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let frames = frames_of(agent.resume_turn(&thread, decided, None, tx, claim), rx).await;
    let t2 = Instant::now();
    let kinds: Vec<(String, Value)> = frames
        .into_iter()
        .map(|f| (f.kind.into(), f.data))
        .collect();
    assert_done(&kinds, "the resume leg");
    let stored = rig.state.store.approval(&id).await.expect("read");
    let state = stored.map(|a| a.state);
    assert_eq!(state.as_deref(), Some("Completed"), "the action ran once");
    (t1 - t0, t2 - t1)
}

/// An SSE body's frames, as (event, data).
fn sse(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter_map(|block| {
            let mut event = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(e) = line.strip_prefix("event:") {
                    event = Some(e.trim().to_string());
                } else if let Some(d) = line.strip_prefix("data:") {
                    data.push_str(d.trim_start());
                }
            }
            Some((event?, serde_json::from_str(&data).unwrap_or(Value::Null)))
        })
        .collect()
}

/// One cycle over HTTP/SSE: (interrupt leg, resume leg).
async fn http_cycle(rig: &Rig, i: usize) -> (Duration, Duration) {
    let created: Value = rig
        .http
        .post(format!("{}/v1/threads", rig.base))
        .send()
        .await
        .expect("POST /v1/threads")
        .json()
        .await
        .expect("a thread");
    let thread = created["thread_id"]
        .as_str()
        .or_else(|| created["id"].as_str())
        .unwrap_or_else(|| panic!("no thread id in {created}"))
        .to_string();
    let t0 = Instant::now();
    let body = rig
        .http
        .post(format!("{}/v1/threads/{thread}/messages", rig.base))
        .json(&json!({"text": prompt(i)}))
        .send()
        .await
        .expect("POST messages")
        .text()
        .await
        .expect("the stream");
    let kinds = sse(&body);
    assert_done(&kinds, "the interrupt leg over HTTP");
    let id = interrupt_id(&kinds);
    let t1 = Instant::now();
    let body = rig
        .http
        .post(format!("{}/v1/threads/{thread}/resume", rig.base))
        .json(&json!({"interrupt_id": id, "decision": "approve"}))
        .send()
        .await
        .expect("POST resume")
        .text()
        .await
        .expect("the stream");
    let t2 = Instant::now();
    assert_done(&sse(&body), "the resume leg over HTTP");
    (t1 - t0, t2 - t1)
}

/// The cycle's three tool calls, straight to the demo server.
async fn tools_cycle(client: &ToolClient, i: usize) -> Duration {
    let args = |v: Value| -> Map<String, Value> { v.as_object().cloned().unwrap_or_default() };
    let t0 = Instant::now();
    let (seat, time) = slot(i);
    let out = client
        .call(
            "prepare_seat_reservation",
            args(json!({"seat": seat, "time": time})),
        )
        .await
        .expect("prepare");
    let id = out
        .json()
        .and_then(|v| v["actionId"].as_u64())
        .expect("an action id");
    client
        .call(
            "confirm_action",
            args(json!({"actionId": id, "idempotencyKey": format!("k{i}")})),
        )
        .await
        .expect("confirm");
    client
        .call("get_action", args(json!({"actionId": id})))
        .await
        .expect("status");
    t0.elapsed()
}

/// One fsync'd autocommit write on a file like the store's (WAL,
/// `synchronous=FULL`): the cost of one durable commit here.
async fn commit_floor(dir: &std::path::Path, n: usize) -> f64 {
    let url = format!("sqlite://{}?mode=rwc", dir.join("floor.db").display());
    let mut conn = sqlx::SqliteConnection::connect(&url)
        .await
        .expect("floor db");
    for pragma in [
        "PRAGMA journal_mode = WAL",
        "PRAGMA synchronous = FULL",
        "CREATE TABLE IF NOT EXISTS t (k TEXT, v TEXT)",
    ] {
        sqlx::query(pragma)
            .execute(&mut conn)
            .await
            .expect("pragma");
    }
    let t0 = Instant::now();
    for i in 0..n {
        sqlx::query("INSERT INTO t (k, v) VALUES ($1, $2)")
            .bind(format!("k{i}"))
            .bind("x".repeat(200))
            .execute(&mut conn)
            .await
            .expect("insert");
    }
    t0.elapsed().as_secs_f64() * 1e3 / n as f64
}

/// The peer's SQLite `durability=sync` cycle (ms), and its checkpoints and
/// SQL statements per cycle, from its JSON lines.
fn peer(python: &str, script: &PathBuf, n: usize) -> Option<(f64, Value)> {
    let out = std::process::Command::new(python)
        .arg(script)
        .arg("10")
        .arg(n.to_string())
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "the peer failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        );
        return None;
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["variant"] == "sqlite durability=sync: cycle")
        .map(|v| (v["value"].as_f64().unwrap_or(f64::NAN), v))
}

async fn run() {
    if std::env::var("RUST_LOG").is_ok() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let quick = quick();
    let n = if quick {
        3
    } else {
        knob("TURNSTILE_BENCH_CYCLES", 200)
    };
    let rounds = if quick {
        1
    } else {
        knob("TURNSTILE_BENCH_ROUNDS", 3)
    };
    let rig = rig().await;
    let client = ToolClient::connect(&ServerSpec::http("direct", rig.demo.url.clone()))
        .await
        .expect("a direct client");
    let floor_dir = tempfile::tempdir().expect("a temporary directory");
    let python = std::env::var("TURNSTILE_BENCH_PEER_PYTHON").ok();
    let script = std::env::var("TURNSTILE_BENCH_PEER_SCRIPT")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../shared/peers/langgraph-hitl/bench_langgraph.py")
        });

    // Warm-up: connections, the tables' first use, the page cache.
    for i in 0..(n / 10).max(2) {
        library_cycle(&rig, 10_000 + i).await;
        http_cycle(&rig, 20_000 + i).await;
    }

    let mut lib = Vec::new();
    let mut lib_legs = (Vec::new(), Vec::new());
    let mut http = Vec::new();
    let mut tools = Vec::new();
    let mut floor = Vec::new();
    let mut peer_ms = Vec::new();
    let mut peer_detail = Value::Null;
    let mut commits = 0u64;
    let mut seat = 0usize;
    for round in 0..rounds {
        let before = rig.state.store.commits();
        let mut legs = (Duration::ZERO, Duration::ZERO);
        for _ in 0..n {
            // create_thread is a commit outside the timed cycle.
            let (a, b) = library_cycle(&rig, seat).await;
            seat += 1;
            legs.0 += a;
            legs.1 += b;
        }
        let per = |d: Duration| d.as_secs_f64() * 1e3 / n as f64;
        lib.push(per(legs.0 + legs.1));
        lib_legs.0.push(per(legs.0));
        lib_legs.1.push(per(legs.1));
        commits = (rig.state.store.commits() - before) / n as u64;

        let mut total = Duration::ZERO;
        for _ in 0..n {
            let (a, b) = http_cycle(&rig, seat).await;
            seat += 1;
            total += a + b;
        }
        http.push(total.as_secs_f64() * 1e3 / n as f64);

        let mut total = Duration::ZERO;
        for _ in 0..n {
            total += tools_cycle(&client, seat).await;
            seat += 1;
        }
        tools.push(total.as_secs_f64() * 1e3 / n as f64);

        floor.push(commit_floor(floor_dir.path(), n.max(50)).await);

        if let Some(py) = &python {
            if let Some((ms, detail)) = peer(py, &script, n) {
                peer_ms.push(ms);
                peer_detail = detail;
            }
        }
        eprintln!("round {} of {rounds} done", round + 1);
    }

    let floor = median(floor);
    let lib_ms = median(lib);
    let http_ms = median(http);
    let tools_ms = median(tools);
    // Each cycle's create_thread is one more commit, outside the cycle.
    let per_cycle = commits.saturating_sub(1);
    let floor_cycle = floor * per_cycle as f64;
    println!("# The approval cycle: interrupt → approve → done (SQLite WAL, synchronous=FULL)");
    println!();
    println!("{n} cycles × {rounds} rounds, medians of the rounds; one run, alternating.");
    println!();
    println!("| measure | ms/cycle | vs commit floor |");
    println!("|---|---|---|");
    println!(
        "| one fsync'd commit | {floor:.3} ms | — |\n| commit floor: {per_cycle} commits/cycle × one commit | {floor_cycle:.2} | 1.00× |"
    );
    println!(
        "| library API cycle (interrupt leg {:.2} + resume leg {:.2}) | {lib_ms:.2} | {:.2}× |",
        median(lib_legs.0),
        median(lib_legs.1),
        lib_ms / floor_cycle
    );
    println!(
        "| HTTP/SSE cycle | {http_ms:.2} | {:.2}× |",
        http_ms / floor_cycle
    );
    println!(
        "| the cycle's 3 MCP calls alone (prepare, confirm, get_action) | {tools_ms:.2} | — |"
    );
    println!(
        "| library cycle less its MCP calls | {:.2} | {:.2}× |",
        lib_ms - tools_ms,
        (lib_ms - tools_ms) / floor_cycle
    );
    if !peer_ms.is_empty() {
        let p = median(peer_ms);
        println!(
            "| LangGraph peer, SQLite saver, durability=sync ({} checkpoints/thread) | {p:.2} | — |",
            peer_detail["checkpoints_per_thread"]
        );
        println!();
        println!(
            "peer / turnstile: library {:.2}×, HTTP {:.2}×, library less MCP {:.2}×",
            p / lib_ms,
            p / http_ms,
            p / (lib_ms - tools_ms)
        );
        println!(
            "peer SQL per cycle: {} (journal_mode {}, synchronous {})",
            peer_detail["sql_per_cycle"], peer_detail["journal_mode"], peer_detail["synchronous"]
        );
    } else {
        println!();
        println!("(no peer: set TURNSTILE_BENCH_PEER_PYTHON to a Python with ../shared/peers/requirements.txt)");
    }
}
