//! The demo prompt end to end against a real `turnstile demo` process:
//! first-frame latency and turns per second at 1 and 32 concurrent clients,
//! and the server's peak memory. Baseline in the same run: the same search
//! called directly on the demo MCP server (what a turn costs beyond its tool).
//!
//! Run: `cargo bench --bench chat`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{json, Map, Value};
use turnstile::mcp::{ServerSpec, ToolClient};

const PROMPT: &str = "show safety issues on floor 3";

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

/// One turn; returns (time to the first frame, whole turn).
async fn turn(http: &reqwest::Client, base: &str, thread: &str) -> (Duration, Duration) {
    let t0 = Instant::now();
    let r = http
        .post(format!("{base}/v1/threads/{thread}/messages"))
        .json(&json!({"text": PROMPT}))
        .send()
        .await
        .expect("turn accepted");
    assert!(r.status().is_success());
    let mut body = r.bytes_stream();
    let mut first = None;
    let mut all = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.expect("stream");
        first.get_or_insert_with(|| t0.elapsed());
        all.extend_from_slice(&chunk);
    }
    let text = String::from_utf8_lossy(&all);
    assert!(text.contains("event: done"), "turn did not finish: {text}");
    (first.unwrap_or_default(), t0.elapsed())
}

async fn run(base: &str, clients: usize, turns_each: usize) -> (Vec<Duration>, Duration) {
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let base = base.to_string();
        tasks.push(tokio::spawn(async move {
            let http = reqwest::Client::new();
            let thread: Value = http
                .post(format!("{base}/v1/threads"))
                .json(&json!({}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let thread = thread["thread_id"].as_str().unwrap().to_string();
            let mut firsts = Vec::new();
            for _ in 0..turns_each {
                firsts.push(turn(&http, &base, &thread).await.0);
            }
            firsts
        }));
    }
    let mut firsts = Vec::new();
    for t in tasks {
        firsts.extend(t.await.unwrap());
    }
    (firsts, t0.elapsed())
}

#[tokio::main]
async fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_turnstile"))
        .args(["demo", "--addr", &format!("127.0.0.1:{port}"), "--db"])
        .arg(tmp.path().join("bench.db"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("turnstile demo starts");
    let pid = child.id();
    let mut mcp_url = String::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(u) = line.trim().strip_prefix("demo tool server (MCP): ") {
            mcp_url = u.to_string();
            break;
        }
    }
    let base = format!("http://127.0.0.1:{port}");

    // Baseline: the same search straight to the demo MCP server.
    let client = ToolClient::connect(&ServerSpec::http("demo", mcp_url))
        .await
        .unwrap();
    let mut args = Map::new();
    args.insert("query".into(), json!("safety"));
    args.insert("floor".into(), json!(3));
    for _ in 0..20 {
        client.call("search_photos", args.clone()).await.unwrap();
    }
    let mut direct = Vec::new();
    for _ in 0..200 {
        let t0 = Instant::now();
        client.call("search_photos", args.clone()).await.unwrap();
        direct.push(t0.elapsed());
    }
    let direct_p50 = percentile(&mut direct, 0.5);

    run(&base, 4, 10).await; // warm-up
    println!("demo prompt {PROMPT:?} against `turnstile demo` (SQLite), release build");
    println!(
        "  baseline: search_photos directly over MCP   p50 {:.2} ms",
        ms(direct_p50)
    );
    for (clients, turns_each) in [(1usize, 200usize), (32, 20)] {
        let (mut firsts, wall) = run(&base, clients, turns_each).await;
        let n = firsts.len();
        let p50 = percentile(&mut firsts, 0.5);
        let p95 = percentile(&mut firsts, 0.95);
        println!(
            "  {clients:>2} client(s): {n} turns in {:.2} s = {:.1} turns/s; first frame p50 {:.2} ms, p95 {:.2} ms ({:.2}x the direct tool call)",
            wall.as_secs_f64(),
            n as f64 / wall.as_secs_f64(),
            ms(p50),
            ms(p95),
            ms(p50) / ms(direct_p50)
        );
    }
    println!(
        "  server peak memory (VmHWM): {:.1} MiB",
        peak_rss_kib(pid) as f64 / 1024.0
    );
    client.close().await;
    let _ = child.kill();
    let _ = child.wait();
}
