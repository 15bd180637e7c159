//! The demo prompt end to end against real `turnstile demo` processes.
//!
//! Default mode (`cargo bench --bench chat`): first-frame latency and turns
//! per second at 1 and 32 concurrent clients, commits per turn (read back
//! from `GET /v1/threads/{id}`: every committed step appends exactly one
//! message, ADR 0010), the server's peak memory, and its CPU per turn at
//! each level with the kernel's share of it (`/proc/PID/stat`: syscalls,
//! fsyncs, hand-offs between threads). Baseline in the same
//! run: the same search called directly on the demo MCP server (what a turn
//! costs beyond its tool).
//!
//! Another server: `cargo bench --bench chat -- --url URL` (or
//! `TURNSTILE_BENCH_URL`) runs the same levels against it and the current
//! build's demo, alternating, with this client (see `url_mode`).
//!
//! Before/after: with `TURNSTILE_BENCH_BASELINE_BIN=/path/to/old/turnstile`
//! the same measurements run against that binary too, alternating with the
//! current build round by round, and both sets are printed with ratios.
//!
//! Slow-model mode (`cargo bench --bench chat -- --slow`, or
//! `TURNSTILE_BENCH_SLOW=1`): `turnstile demo --model-delay-ms 200` streams
//! one answer delta every 200 ms; 1,000 and then 10,000 concurrent turns
//! (one thread each) report the server's memory with every stream open,
//! per-delta lateness against the model's schedule, and whether every
//! stream completed (with `TURNSTILE_BENCH_BASELINE_BIN`, the same phases
//! on that binary right after). SQLite always; PostgreSQL too when
//! `TURNSTILE_BENCH_PG=postgres://user@host:port/db` names a server (a
//! fresh database is created on it and dropped afterwards).
//!
//! Long-thread mode (`cargo bench --bench chat -- --long`, or
//! `TURNSTILE_BENCH_LONG=1`): one client sends the demo prompt
//! `TURNSTILE_BENCH_LONG_TURNS` (1,000) times on ONE thread; the turn time
//! (sent → `done`) p50 of the first 20 turns against the last 20, their
//! ratio (goal ≤ 1.2), the server's CPU per turn and the kernel's share of
//! it (utime + stime from
//! `/proc`). With a baseline binary both run on threads of their own,
//! alternating every 50 turns.
//!
//! Quick mode (`cargo bench --bench chat -- --quick`, or
//! `TURNSTILE_BENCH_QUICK=1`): every measurement of the default mode once
//! and small (1 round: 3 turns on 1 client, 32x1 turns on 32 clients, 10
//! direct calls), then the slow-model mode's (20 concurrent turns, one delta
//! per 20 ms; with `--slow`, only those); every turn must end with `done`
//! and be stored, or the bench panics (non-zero exit). For CI: its numbers
//! mean nothing.
//!
//! Knobs: `TURNSTILE_BENCH_SYNCHRONOUS` (`full` fsyncs every SQLite
//! commit; default the store's `normal`), `TURNSTILE_BENCH_SLOW_DELAY_MS` (200; 20 in quick mode),
//! `TURNSTILE_BENCH_SLOW_TURNS` (`1000,10000`; `20` in quick mode),
//! `TURNSTILE_BENCH_ROUNDS` (3; 1 in quick mode).

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{json, Map, Value};
use turnstile::mcp::{ServerSpec, ToolClient};

const PROMPT: &str = "show safety issues on floor 3";
const CURRENT: &str = env!("CARGO_BIN_EXE_turnstile");

fn quick() -> bool {
    std::env::args().any(|a| a == "--quick")
        || std::env::var("TURNSTILE_BENCH_QUICK").is_ok_and(|v| v == "1")
}

fn percentile<T: Copy + PartialOrd>(v: &mut [T], p: f64) -> T {
    v.sort_by(|a, b| a.partial_cmp(b).expect("comparable"));
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A `/proc/PID/status` field in KiB (`VmRSS`, `VmHWM`).
fn proc_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Raises this process's open-file limit (10,000 streams need 10,000
/// sockets); returns the soft limit now in force.
fn raise_fd_limit(want: u64) -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        let both = libc::rlimit {
            rlim_cur: want.max(lim.rlim_cur),
            rlim_max: want.max(lim.rlim_max),
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &both) != 0 {
            // Not allowed to raise the hard limit: take all of it.
            let soft = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            libc::setrlimit(libc::RLIMIT_NOFILE, &soft);
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
    }
    lim.rlim_cur
}

// ---------------------------------------------------------------------------
// Servers

/// A running `turnstile demo`.
struct Server {
    label: String,
    child: Child,
    pid: u32,
    base: String,
    mcp_url: String,
    db_label: &'static str,
    /// The server's stderr (`RUST_LOG=warn`).
    log: PathBuf,
    _dir: tempfile::TempDir,
}

enum Db<'a> {
    Sqlite,
    Postgres(&'a str),
}

impl Server {
    fn start(label: &str, bin: &Path, db: &Db<'_>, extra: &[String]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let (db_arg, db_label) = match db {
            // `TURNSTILE_BENCH_SYNCHRONOUS=full` fsyncs every commit.
            Db::Sqlite => match std::env::var("TURNSTILE_BENCH_SYNCHRONOUS") {
                Ok(sync) => (
                    format!(
                        "sqlite://{}?synchronous={sync}",
                        dir.path().join("bench.db").display()
                    ),
                    "SQLite",
                ),
                Err(_) => (
                    dir.path().join("bench.db").to_string_lossy().into_owned(),
                    "SQLite",
                ),
            },
            Db::Postgres(url) => (url.to_string(), "PostgreSQL"),
        };
        // Through sh to raise the server's open-file limit before exec (the
        // pid stays the server's).
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(r#"ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"; exec "$0" "$@""#)
            .arg(bin)
            .args([
                "demo",
                "--addr",
                &format!("127.0.0.1:{port}"),
                "--db",
                &db_arg,
            ])
            .args(extra)
            .env("RUST_LOG", "warn")
            .env_remove("TURNSTILE_TABLES")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.path().join("server.log")).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("{} starts: {e}", bin.display()));
        let pid = child.id();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut mcp_url = String::new();
        for line in lines.by_ref() {
            let line = line.unwrap();
            if let Some(u) = line.trim().strip_prefix("demo tool server (MCP): ") {
                mcp_url = u.to_string();
                break;
            }
        }
        assert!(!mcp_url.is_empty(), "{} did not start", bin.display());
        // Keep draining: a closed pipe would make the server's next print fail.
        std::thread::spawn(move || for _ in lines {});
        Server {
            label: label.to_string(),
            child,
            pid,
            base: format!("http://127.0.0.1:{port}"),
            mcp_url,
            db_label,
            log: dir.path().join("server.log"),
            _dir: dir,
        }
    }

    fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fresh PostgreSQL database on the server `admin_url` names; dropped by
/// [`drop_pg_database`].
async fn create_pg_database(admin_url: &str) -> (String, String) {
    use sqlx::Connection;
    let name = format!("turnstile_bench_{}", std::process::id());
    let mut c = sqlx::postgres::PgConnection::connect(admin_url)
        .await
        .expect("PostgreSQL reachable");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name}"
    )))
    .execute(&mut c)
    .await
    .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut c)
        .await
        .unwrap();
    c.close().await.unwrap();
    let base = admin_url.split('?').next().unwrap();
    let (server, _) = base.rsplit_once('/').expect("a database path in the URL");
    (format!("{server}/{name}"), name)
}

async fn drop_pg_database(admin_url: &str, name: &str) {
    use sqlx::Connection;
    if let Ok(mut c) = sqlx::postgres::PgConnection::connect(admin_url).await {
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
        )))
        .execute(&mut c)
        .await;
        let _ = c.close().await;
    }
}

/// The WARN/ERROR lines a server logged after byte `from`: their count and
/// the most frequent messages (ids and numbers masked).
fn log_summary(path: &Path, from: usize) -> (usize, Vec<(usize, String)>) {
    let text = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(text.get(from..).unwrap_or_default());
    let mut counts: HashMap<String, usize> = HashMap::new();
    let mut n = 0;
    for line in text.lines() {
        // Without colour codes.
        let mut plain = String::new();
        let mut esc = false;
        for c in line.chars() {
            match c {
                '\x1b' => esc = true,
                'm' if esc => esc = false,
                _ if esc => {}
                c => plain.push(c),
            }
        }
        if !(plain.contains(" WARN ") || plain.contains(" ERROR ")) {
            continue;
        }
        n += 1;
        let masked: Vec<&str> = plain
            .split_whitespace()
            .skip(1) // the timestamp
            .map(|w| {
                if w.len() >= 8 && w.chars().filter(|c| c.is_ascii_digit()).count() >= 3 {
                    "#"
                } else {
                    w
                }
            })
            .collect();
        let msg: String = masked.join(" ").chars().take(200).collect();
        *counts.entry(msg).or_insert(0) += 1;
    }
    let mut top: Vec<(usize, String)> = counts.into_iter().map(|(m, c)| (c, m)).collect();
    top.sort_by(|a, b| b.cmp(a));
    top.truncate(3);
    (n, top)
}

/// The 1-minute load average: other work on the machine skews every number.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn log_len(path: &Path) -> usize {
    std::fs::metadata(path)
        .map(|m| m.len() as usize)
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------
// Client side

/// The bench's one browser: the process's one cookie jar. A thread belongs
/// to the session that made it (tables/ownership.ron); cookies are kept per
/// host, so every server of the run sees the same session.
fn browser() -> reqwest::ClientBuilder {
    static JAR: std::sync::LazyLock<std::sync::Arc<reqwest::cookie::Jar>> =
        std::sync::LazyLock::new(Default::default);
    reqwest::Client::builder().cookie_provider(JAR.clone())
}

/// Has the session issued before requests go out concurrently: otherwise
/// each of them would be issued a session of its own.
async fn warm(http: &reqwest::Client, base: &str) {
    let _ = http.get(format!("{base}/v1/threads")).send().await;
}

async fn new_thread(http: &reqwest::Client, base: &str) -> String {
    let v: Value = http
        .post(format!("{base}/v1/threads"))
        .json(&json!({}))
        .send()
        .await
        .expect("thread created")
        .json()
        .await
        .unwrap();
    v["thread_id"].as_str().unwrap().to_string()
}

/// One SSE frame as the client received it.
struct Frame {
    event: String,
    data: String,
    at: Instant,
}

/// Takes every complete event off the decoder (the one SSE parser,
/// `turnstile::wire::sse`; keep-alive comments are no events).
fn take_frames(sse: &mut turnstile::wire::sse::SseDecoder, at: Instant, out: &mut Vec<Frame>) {
    while let Some(ev) = sse.next_event() {
        if let Some(event) = ev.event {
            out.push(Frame {
                event,
                data: ev.data,
                at,
            });
        }
    }
}

/// One turn: when it was sent, when its response arrived, its frames.
struct Trace {
    sent: Instant,
    frames: Vec<Frame>,
}

impl Trace {
    fn finished(&self) -> bool {
        self.frames.last().is_some_and(|f| f.event == "done")
    }
    fn first_frame(&self) -> Option<Duration> {
        self.frames.first().map(|f| f.at - self.sent)
    }
}

async fn turn(
    http: &reqwest::Client,
    base: &str,
    thread: &str,
    open: Option<&AtomicUsize>,
) -> Result<Trace, String> {
    let sent = Instant::now();
    let r = http
        .post(format!("{base}/v1/threads/{thread}/messages"))
        .json(&json!({"text": PROMPT}))
        .send()
        .await
        .map_err(|e| format!("request: {e}"))?;
    if !r.status().is_success() {
        return Err(format!("HTTP {}", r.status()));
    }
    if let Some(o) = open {
        o.fetch_add(1, Ordering::SeqCst);
    }
    let mut body = r.bytes_stream();
    let mut sse = turnstile::wire::sse::SseDecoder::new();
    let mut frames = Vec::new();
    let mut broke = None;
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(chunk) => {
                sse.push(&chunk);
                take_frames(&mut sse, Instant::now(), &mut frames);
            }
            Err(e) => {
                broke = Some(format!("stream: {e}"));
                break;
            }
        }
    }
    if let Some(o) = open {
        o.fetch_sub(1, Ordering::SeqCst);
    }
    match broke {
        Some(e) => Err(e),
        None => Ok(Trace { sent, frames }),
    }
}

/// Messages stored per turn on `threads`, read back from the API: (turns,
/// messages, messages by `kind`, or by `role` for records without one).
async fn stored_messages(
    http: &reqwest::Client,
    base: &str,
    threads: &[String],
) -> (usize, usize, BTreeMap<String, usize>) {
    let bodies: Vec<Value> = futures::stream::iter(threads.iter())
        .map(|t| async move {
            http.get(format!("{base}/v1/threads/{t}"))
                .send()
                .await
                .expect("thread readable")
                .json::<Value>()
                .await
                .unwrap()
        })
        .buffer_unordered(32)
        .collect()
        .await;
    let mut turns = std::collections::HashSet::new();
    let mut messages = 0;
    let mut kinds = BTreeMap::new();
    for b in &bodies {
        for m in b["messages"].as_array().expect("messages") {
            turns.insert(m["turn_id"].as_str().unwrap_or_default().to_string());
            messages += 1;
            let kind = m["body"]["kind"]
                .as_str()
                .or(m["role"].as_str())
                .unwrap_or("?")
                .to_string();
            *kinds.entry(kind).or_insert(0) += 1;
        }
    }
    (turns.len(), messages, kinds)
}

// ---------------------------------------------------------------------------
// Default mode

/// The server's phase totals in seconds (`turnstile_turn_phase_seconds`)
/// and its turn count (`turns`), from `GET /v1/metrics`.
async fn phase_totals(http: &reqwest::Client, base: &str) -> BTreeMap<String, f64> {
    let text = match http.get(format!("{base}/v1/metrics")).send().await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    };
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((key, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        if let Some(phase) = key
            .strip_prefix("turnstile_turn_phase_seconds_total{phase=\"")
            .and_then(|k| k.strip_suffix("\"}"))
        {
            out.insert(phase.to_string(), value);
        } else if let Some(name) = key
            .strip_prefix("turnstile_")
            .and_then(|k| k.strip_suffix("_total"))
            .filter(|k| {
                matches!(
                    *k,
                    "turns" | "model_requests" | "store_commits" | "store_committed_bytes"
                )
            })
        {
            out.insert(name.to_string(), value);
        }
    }
    out
}

/// The table of rows: the current build's value, and with a baseline its
/// value and the ratio.
fn print_rows(rows: &[(String, Vec<f64>)], baseline: bool) {
    print!("  {:<48} {:>12}", "", "current");
    if baseline {
        print!(" {:>12} {:>12}", "baseline", "cur/base");
    }
    println!();
    for (name, v) in rows {
        print!("  {name:<48} {:>12.2}", v[0]);
        if v.len() == 2 {
            print!(" {:>12.2} {:>11.2}x", v[1], v[0] / v[1]);
        }
        println!();
    }
}

/// Adds `v` to the row `name` (one value per binary, in order).
fn push(name: &str, v: f64, rows: &mut Vec<(String, Vec<f64>)>) {
    if let Some(r) = rows.iter_mut().find(|r| r.0 == name) {
        r.1.push(v);
    } else {
        rows.push((name.to_string(), vec![v]));
    }
}

/// `clients` concurrent clients, each on its own thread, `turns_each` turns
/// one after the other. Returns the first-frame latencies, the wall time,
/// frames received and the threads used.
async fn run(
    base: &str,
    clients: usize,
    turns_each: usize,
) -> (Vec<Duration>, Duration, usize, Vec<String>) {
    warm(&browser().build().unwrap(), base).await;
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let base = base.to_string();
        tasks.push(tokio::spawn(async move {
            let http = browser().build().unwrap();
            let thread = new_thread(&http, &base).await;
            let mut firsts = Vec::new();
            let mut frames = 0;
            for _ in 0..turns_each {
                let t = turn(&http, &base, &thread, None).await.expect("turn");
                assert!(t.finished(), "turn did not finish");
                firsts.push(t.first_frame().unwrap());
                frames += t.frames.len();
            }
            (firsts, frames, thread)
        }));
    }
    let mut firsts = Vec::new();
    let mut frames = 0;
    let mut threads = Vec::new();
    for t in tasks {
        let (f, n, th) = t.await.unwrap();
        firsts.extend(f);
        frames += n;
        threads.push(th);
    }
    (firsts, t0.elapsed(), frames, threads)
}

#[derive(Default)]
struct Level {
    firsts: Vec<Duration>,
    wall: Duration,
    /// The server's user and kernel CPU time while this level ran (the
    /// demo's tool server is in the same process).
    user: Duration,
    system: Duration,
}

impl Level {
    fn turns_per_s(&self) -> f64 {
        self.firsts.len() as f64 / self.wall.as_secs_f64()
    }
    fn p(&self, p: f64) -> Duration {
        percentile(&mut self.firsts.clone(), p)
    }
}

/// Everything measured on one binary.
struct Measured {
    server: Server,
    direct_p50: Duration,
    levels: [Level; 2],
    turns: usize,
    frames: usize,
    threads: Vec<String>,
}

/// `TURNSTILE_BENCH_ROUNDS`, at least 1 (1 in quick mode, 3 by default).
fn rounds(quick: bool) -> usize {
    std::env::var("TURNSTILE_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if quick { 1 } else { 3 })
        .max(1)
}

/// (clients, turns each) per level.
fn levels(quick: bool) -> [(usize, usize); 2] {
    if quick {
        [(1, 3), (32, 1)]
    } else {
        [(1, 100), (32, 10)]
    }
}

/// The median of `calls` direct calls, after `calls / 10` to warm up.
async fn direct_baseline(mcp_url: &str, calls: usize) -> Duration {
    let client = ToolClient::connect(&ServerSpec::http("demo", mcp_url.to_string()))
        .await
        .unwrap();
    let mut args = Map::new();
    args.insert("query".into(), json!("safety"));
    args.insert("floor".into(), json!(3));
    for _ in 0..calls / 10 {
        client.call("search_photos", args.clone()).await.unwrap();
    }
    let mut direct = Vec::new();
    for _ in 0..calls.max(1) {
        let t0 = Instant::now();
        client.call("search_photos", args.clone()).await.unwrap();
        direct.push(t0.elapsed());
    }
    client.close().await;
    percentile(&mut direct, 0.5)
}

async fn default_mode(baseline: Option<PathBuf>, quick: bool) {
    let rounds = rounds(quick);
    let levels = levels(quick);
    let (direct_calls, warm_clients, warm_turns) = if quick { (10, 1, 1) } else { (200, 4, 10) };
    let mut bins = vec![("current", PathBuf::from(CURRENT))];
    if let Some(b) = baseline.clone() {
        bins.push(("baseline", b));
    }
    let mut measured: Vec<Measured> = Vec::new();
    for (label, bin) in &bins {
        let server = Server::start(label, bin, &Db::Sqlite, &[]);
        let direct_p50 = direct_baseline(&server.mcp_url, direct_calls).await;
        let (_, _, frames, threads) = run(&server.base, warm_clients, warm_turns).await; // warm-up
        measured.push(Measured {
            server,
            direct_p50,
            levels: Default::default(),
            turns: warm_clients * warm_turns,
            frames,
            threads,
        });
    }
    // Alternating: each level runs on every binary in turn, round by round,
    // so drift on the machine (other builds, thermal) hits both alike.
    for _ in 0..rounds {
        for (li, (clients, turns_each)) in levels.iter().enumerate() {
            for m in measured.iter_mut() {
                let (user, system) = cpu_split(m.server.pid);
                let (firsts, wall, frames, threads) =
                    run(&m.server.base, *clients, *turns_each).await;
                let (user_after, system_after) = cpu_split(m.server.pid);
                m.levels[li].user += user_after.saturating_sub(user);
                m.levels[li].system += system_after.saturating_sub(system);
                m.turns += firsts.len();
                m.frames += frames;
                m.threads.extend(threads);
                m.levels[li].firsts.extend(firsts);
                m.levels[li].wall += wall;
            }
        }
    }

    if quick {
        println!(
            "quick mode: every measurement once and small; checks only, the numbers mean nothing"
        );
    }
    println!(
        "demo prompt {PROMPT:?} against `turnstile demo` (SQLite), {} build",
        build()
    );
    println!(
        "  {} round(s), alternating binaries; per round and binary: {} turns on 1 client, {}x{} turns on 32 clients",
        rounds, levels[0].1, levels[1].0, levels[1].1
    );
    println!(
        "  machine: {} CPUs, load average {} after the runs (other work on it skews the numbers)",
        cpus(),
        loadavg()
    );
    let http = browser().build().unwrap();
    let mut rows: Vec<(String, Vec<f64>)> = Vec::new();
    let mut kinds_lines = Vec::new();
    for m in &measured {
        push(
            "direct search_photos over MCP, p50 ms",
            ms(m.direct_p50),
            &mut rows,
        );
        for (li, (clients, _)) in levels.iter().enumerate() {
            let l = &m.levels[li];
            push(
                &format!("{clients:>2} client(s): turns/s"),
                l.turns_per_s(),
                &mut rows,
            );
            push(
                &format!("{clients:>2} client(s): first frame p50 ms"),
                ms(l.p(0.5)),
                &mut rows,
            );
            push(
                &format!("{clients:>2} client(s): first frame p95 ms"),
                ms(l.p(0.95)),
                &mut rows,
            );
            let cpu = ms(l.user + l.system);
            push(
                &format!("{clients:>2} client(s): server CPU per turn, ms"),
                cpu / l.firsts.len().max(1) as f64,
                &mut rows,
            );
            push(
                &format!("{clients:>2} client(s): server CPU in the kernel, %"),
                100.0 * ms(l.system) / cpu.max(f64::MIN_POSITIVE),
                &mut rows,
            );
        }
        let (turns, messages, kinds) = stored_messages(&http, &m.server.base, &m.threads).await;
        assert_eq!(turns, m.turns, "every turn stored its messages");
        push(
            "frames per turn (client side)",
            m.frames as f64 / m.turns as f64,
            &mut rows,
        );
        push(
            "messages stored per turn",
            messages as f64 / turns as f64,
            &mut rows,
        );
        push(
            "server peak memory VmHWM, MiB",
            mib(proc_kib(m.server.pid, "VmHWM:")),
            &mut rows,
        );
        // Where the server's time went, per turn (a build without the
        // phase counters shows none).
        let phases = phase_totals(&http, &m.server.base).await;
        if let Some(ran) = phases.get("turns").copied().filter(|n| *n > 0.0) {
            let mut sum = 0.0;
            for phase in ["lease", "commit", "mcp", "model", "judge", "guard"] {
                let v = phases.get(phase).copied().unwrap_or(0.0) * 1000.0 / ran;
                sum += v;
                push(&format!("server ms per turn: {phase}"), v, &mut rows);
            }
            push("server ms per turn: these phases together", sum, &mut rows);
            // Counted by the server (a build without the counters shows none).
            for (key, label) in [
                ("model_requests", "model requests per turn"),
                (
                    "store_commits",
                    "store commits per turn (group commits, shared)",
                ),
                ("store_committed_bytes", "bytes committed per turn"),
            ] {
                if let Some(v) = phases.get(key) {
                    push(label, v / ran, &mut rows);
                }
            }
        }
        let per: Vec<String> = kinds
            .iter()
            .map(|(k, n)| format!("{k} {:.2}", *n as f64 / turns as f64))
            .collect();
        kinds_lines.push(format!(
            "  stored per turn, {} ({} turns): {}",
            m.server.label,
            turns,
            per.join(", ")
        ));
    }
    let base_label = baseline
        .as_ref()
        .map(|b| format!("baseline ({})", b.display()));
    print_rows(&rows, baseline.is_some());
    for l in kinds_lines {
        println!("{l}");
    }
    match base_label {
        Some(b) => println!("  {b}; cur/base > 1: the current build's number is higher"),
        None => println!(
            "  baseline skipped: set TURNSTILE_BENCH_BASELINE_BIN=/path/to/old/turnstile to measure it in the same run"
        ),
    }
    for m in measured {
        m.server.stop();
    }
}

// ---------------------------------------------------------------------------
// Long-thread mode

/// The server's user and system (kernel) CPU time so far, from
/// `/proc/PID/stat`.
fn cpu_split(pid: u32) -> (Duration, Duration) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command's closing parenthesis; utime and stime are
    // the 14th and 15th of the whole line.
    let rest = stat.rsplit(')').next().unwrap_or_default();
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let at = |i: usize| Duration::from_micros(f.get(i).copied().unwrap_or(0) * 1_000_000 / ticks);
    (at(0), at(1))
}

async fn long_mode(baseline: Option<PathBuf>, quick: bool) {
    let turns: usize = std::env::var("TURNSTILE_BENCH_LONG_TURNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if quick { 45 } else { 1000 })
        .max(40);
    let mut bins = vec![("current", PathBuf::from(CURRENT))];
    if let Some(b) = baseline {
        bins.push(("baseline", b));
    }
    let http = browser().build().unwrap();
    struct Long {
        server: Server,
        thread: String,
        times: Vec<Duration>,
        cpu_before: Duration,
        system_before: Duration,
    }
    let mut runs = Vec::new();
    for (label, bin) in &bins {
        let server = Server::start(label, bin, &Db::Sqlite, &[]);
        let thread = new_thread(&http, &server.base).await;
        // One read of /proc at each end: total and kernel time of the
        // same moment.
        let (user_before, system_before) = cpu_split(server.pid);
        let cpu_before = user_before + system_before;
        runs.push(Long {
            server,
            thread,
            times: Vec::new(),
            cpu_before,
            system_before,
        });
    }
    let mut done = 0;
    while done < turns {
        let chunk = 50.min(turns - done);
        for r in runs.iter_mut() {
            for _ in 0..chunk {
                let t = turn(&http, &r.server.base, &r.thread, None)
                    .await
                    .unwrap_or_else(|e| panic!("{}: a turn failed: {e}", r.server.label));
                assert!(
                    t.finished(),
                    "{}: a turn did not end with done",
                    r.server.label
                );
                let last = t.frames.last().map(|f| f.at).unwrap_or(t.sent);
                r.times.push(last - t.sent);
            }
        }
        done += chunk;
    }
    println!(
        "long thread: {turns} turns of {PROMPT:?} on one thread per binary, 1 client, SQLite, {} build; {} CPUs, load average {}",
        build(),
        cpus(),
        loadavg()
    );
    let mut rows: Vec<(String, Vec<f64>)> = Vec::new();
    for r in &runs {
        let mut first: Vec<Duration> = r.times[..20].to_vec();
        let mut last: Vec<Duration> = r.times[r.times.len() - 20..].to_vec();
        let (f, l) = (percentile(&mut first, 0.5), percentile(&mut last, 0.5));
        let (user_after, system_after) = cpu_split(r.server.pid);
        let cpu = (user_after + system_after).saturating_sub(r.cpu_before);
        push("turn p50, first 20 turns, ms", ms(f), &mut rows);
        push(
            &format!("turn p50, last 20 turns (of {turns}), ms"),
            ms(l),
            &mut rows,
        );
        push("last 20 / first 20 (goal <= 1.2)", ms(l) / ms(f), &mut rows);
        push(
            "server CPU per turn, ms",
            ms(cpu) / r.times.len() as f64,
            &mut rows,
        );
        // The kernel's share of it: syscalls, fsyncs, thread hand-offs.
        let system = system_after.saturating_sub(r.system_before);
        push(
            "server CPU in the kernel (stime / (utime + stime)), %",
            100.0 * ms(system) / ms(cpu).max(f64::MIN_POSITIVE),
            &mut rows,
        );
        let (_, messages, _) =
            stored_messages(&http, &r.server.base, std::slice::from_ref(&r.thread)).await;
        push("messages on the thread", messages as f64, &mut rows);
    }
    print_rows(&rows, runs.len() == 2);
    for r in runs {
        r.server.stop();
    }
}

// ---------------------------------------------------------------------------
// Slow-model mode

/// The number of model deltas in a delta frame's text: the scripted model
/// cuts after every space, so each delta but the last ends in one.
fn model_deltas(text: &str) -> usize {
    text.matches(' ').count() + usize::from(!text.is_empty() && !text.ends_with(' '))
}

/// One phase of `n` concurrent turns. With `check`, every stream must end
/// with `done` and every turn be stored (quick mode: a failure there is a
/// broken bench, not a measurement).
async fn slow_phase(server: &Server, n: usize, delay: Duration, check: bool) {
    let http = browser()
        .pool_max_idle_per_host(usize::MAX)
        .build()
        .unwrap();
    let base = server.base.clone();
    warm(&http, &base).await;
    let t_create = Instant::now();
    let threads: Vec<String> = futures::stream::iter(0..n)
        .map(|_| new_thread(&http, &base))
        .buffer_unordered(64)
        .collect()
        .await;
    let create = t_create.elapsed();
    let log_from = log_len(&server.log);
    let load_before = loadavg();

    let open = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    // (max open, max VmRSS with all open, max VmRSS)
    let samples = Arc::new(Mutex::new((0usize, 0u64, 0u64)));
    let sampler = {
        let (open, stop, samples, pid) = (open.clone(), stop.clone(), samples.clone(), server.pid);
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let o = open.load(Ordering::SeqCst);
                let rss = proc_kib(pid, "VmRSS:");
                {
                    let mut s = samples.lock().unwrap();
                    s.0 = s.0.max(o);
                    if o == n {
                        s.1 = s.1.max(rss);
                    }
                    s.2 = s.2.max(rss);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };

    let t0 = Instant::now();
    let tasks: Vec<_> = threads
        .iter()
        .map(|t| {
            let (http, base, t, open) = (http.clone(), base.clone(), t.clone(), open.clone());
            tokio::spawn(async move { turn(&http, &base, &t, Some(&open)).await })
        })
        .collect();
    let mut traces = Vec::new();
    let mut failures: BTreeMap<String, usize> = BTreeMap::new();
    for t in tasks {
        match t.await.unwrap() {
            Ok(tr) => traces.push(tr),
            Err(e) => *failures.entry(e).or_insert(0) += 1,
        }
    }
    let wall = t0.elapsed();
    let load_after = loadavg();
    stop.store(true, Ordering::SeqCst);
    sampler.await.unwrap();
    let (max_open, rss_all_open, rss_max) = *samples.lock().unwrap();
    let hwm = proc_kib(server.pid, "VmHWM:");

    let done = traces.iter().filter(|t| t.finished()).count();
    let errored = traces
        .iter()
        .filter(|t| t.frames.last().is_some_and(|f| f.event == "error"))
        .count();
    let unterminated = traces.len() - done - errored;
    let mut events: HashMap<String, usize> = HashMap::new();
    let mut lateness = Vec::new();
    let mut release = Vec::new();
    let mut firsts = Vec::new();
    let mut durations = Vec::new();
    let mut delta_frames = 0usize;
    let mut deltas = 0usize;
    for t in &traces {
        for f in &t.frames {
            *events.entry(f.event.clone()).or_insert(0) += 1;
        }
        if let Some(f) = t.first_frame() {
            firsts.push(ms(f));
        }
        if let Some(last) = t.frames.last() {
            durations.push(ms(last.at - t.sent));
        }
        let Some(i) = t.frames.iter().position(|f| f.event == "delta") else {
            continue;
        };
        let Some(anchor) = i.checked_sub(1).map(|a| t.frames[a].at) else {
            continue;
        };
        let mut k = 0u32;
        for f in t.frames[i..].iter().filter(|f| f.event == "delta") {
            delta_frames += 1;
            let text: Value = serde_json::from_str(&f.data).unwrap_or_default();
            let count = model_deltas(text["text"].as_str().unwrap_or_default());
            deltas += count;
            let signed = |due: Instant| {
                if f.at >= due {
                    ms(f.at - due)
                } else {
                    -ms(due - f.at)
                }
            };
            for _ in 0..count {
                k += 1;
                lateness.push(signed(anchor + delay * k));
            }
            // The frame could leave no earlier than its last model delta was
            // due: the narration guard shows whole sentences (ADR 0013), so
            // the rest of its lateness is the server's queueing and commits.
            if count > 0 {
                release.push(signed(anchor + delay * k));
            }
        }
    }
    let (turns, messages, _) = stored_messages(&http, &base, &threads).await;
    let pct = |v: &mut Vec<f64>, p: f64| {
        if v.is_empty() {
            f64::NAN
        } else {
            percentile(v, p)
        }
    };
    let mut ev: Vec<_> = events.into_iter().collect();
    ev.sort();
    let ev: Vec<String> = ev.iter().map(|(e, c)| format!("{e} {c}")).collect();

    println!(
        "  {n} concurrent turns ({}, {} threads created first in {:.1} s):",
        server.db_label,
        n,
        create.as_secs_f64()
    );
    println!(
        "    completed: {done} of {n} streams ended with `done` ({}); wall {:.1} s",
        if done == n { "all" } else { "NOT all" },
        wall.as_secs_f64()
    );
    if errored + unterminated > 0 {
        println!(
            "    ended otherwise: {errored} with an `error` frame, {unterminated} closed by the server without a terminal frame"
        );
    }
    for (e, c) in &failures {
        println!("    failed on the client: {c} x {e}");
    }
    let (warnings, top) = log_summary(&server.log, log_from);
    if warnings > 0 {
        println!("    server logged {warnings} WARN/ERROR lines; most frequent:");
        for (c, m) in top {
            println!("      {c} x {m}");
        }
    }
    println!("    frames received: {}", ev.join(", "));
    println!(
        "    server memory: VmRSS {} with all {n} streams open; max VmRSS {:.1} MiB, VmHWM {:.1} MiB; at most {max_open} streams open at once",
        if rss_all_open > 0 {
            format!("{:.1} MiB", mib(rss_all_open))
        } else {
            "n/a (never all open at once)".into()
        },
        mib(rss_max),
        mib(hwm)
    );
    println!(
        "    delta lateness: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms over {} model deltas in {} delta frames",
        pct(&mut lateness.clone(), 0.5),
        pct(&mut lateness.clone(), 0.99),
        pct(&mut lateness, 1.0),
        deltas,
        delta_frames
    );
    println!(
        "    release lateness (frame arrival minus its last model delta's due time): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        pct(&mut release.clone(), 0.5),
        pct(&mut release.clone(), 0.99),
        pct(&mut release, 1.0),
    );
    println!(
        "    first frame p50 {:.1} ms, p99 {:.1} ms; whole turn p50 {:.2} s, p99 {:.2} s",
        pct(&mut firsts.clone(), 0.5),
        pct(&mut firsts, 0.99),
        pct(&mut durations.clone(), 0.5) / 1e3,
        pct(&mut durations, 0.99) / 1e3
    );
    println!(
        "    messages stored per turn: {:.2} ({} turns stored; each committed with the frame that shows it, the licence gate's record with the plan's)",
        messages as f64 / turns.max(1) as f64,
        turns
    );
    println!(
        "    machine: {} CPUs, load average {load_before} before the turns, {load_after} after",
        cpus()
    );
    if check {
        assert!(
            done == n && failures.is_empty(),
            "{} of {n} streams ended with `done` ({errored} with `error`, {unterminated} unterminated, {} failed on the client)",
            done,
            failures.values().sum::<usize>()
        );
        assert_eq!(turns, n, "every turn stored its messages");
    }
    let p99 = pct(&mut lateness, 0.99);
    let met = done == n && rss_all_open > 0 && mib(rss_all_open) < 500.0 && p99 < 50.0;
    println!(
        "    goal (all done, < 500 MB with all open, lateness p99 < 50 ms): {}",
        if met { "met" } else { "NOT met" }
    );
}

async fn slow_mode(quick: bool) {
    let delay = Duration::from_millis(
        std::env::var("TURNSTILE_BENCH_SLOW_DELAY_MS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(if quick { 20 } else { 200 }),
    );
    let sizes: Vec<usize> = std::env::var("TURNSTILE_BENCH_SLOW_TURNS")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| if quick { vec![20] } else { vec![1000, 10000] });
    if quick {
        println!("quick mode: one small phase; checks only, the numbers mean nothing");
    }
    let fds = raise_fd_limit(65536);
    println!(
        "slow model: `turnstile demo --model-delay-ms {}` (one answer delta every {} ms), prompt {PROMPT:?}, {} build",
        delay.as_millis(),
        delay.as_millis(),
        build()
    );
    println!("  client open-file limit {fds}; each turn on its own thread, all turns of a phase sent at once");
    println!(
        "  delta lateness = arrival of the frame carrying model delta k minus its due time, anchor + k x {} ms,",
        delay.as_millis()
    );
    println!("  where anchor = arrival of the frame before the first delta (the model is called right after it);");
    println!("  the model releases deltas on that schedule regardless of the consumer; a delta frame carries a whole");
    println!("  sentence (the narration guard judges sentences), so delta lateness includes the wait for the sentence's");
    println!(
        "  last delta; release lateness (from that last delta's due time) is the server's own"
    );
    println!("  goal: 10,000 concurrent streams under 500 MB (VmRSS with all open) with delta lateness p99 under 50 ms");
    let extra = vec![
        "--model-delay-ms".to_string(),
        delay.as_millis().to_string(),
    ];
    let pg = std::env::var("TURNSTILE_BENCH_PG").ok();
    let mut dbs: Vec<Option<&str>> = vec![None];
    if let Some(pg) = pg.as_deref() {
        dbs.push(Some(pg));
    }
    // With a baseline binary, the same phases on it right after the current
    // build's, each on a database of its own.
    let baseline = std::env::var_os("TURNSTILE_BENCH_BASELINE_BIN").map(PathBuf::from);
    let bins: Vec<(&str, PathBuf)> = std::iter::once(("current", PathBuf::from(CURRENT)))
        .chain(baseline.map(|b| ("baseline", b)))
        .collect();
    for db in dbs {
        for (label, bin) in &bins {
            println!("  {label}: {}", bin.display());
            let pg_db = match db {
                Some(admin) => Some(create_pg_database(admin).await),
                None => None,
            };
            let server = match &pg_db {
                Some((url, _)) => Server::start(label, bin, &Db::Postgres(url), &extra),
                None => Server::start(label, bin, &Db::Sqlite, &extra),
            };
            for &n in &sizes {
                slow_phase(&server, n, delay, quick).await;
            }
            server.stop();
            if let (Some(admin), Some((_, name))) = (db, &pg_db) {
                drop_pg_database(admin, name).await;
            }
        }
    }
    if pg.is_none() {
        println!("  PostgreSQL skipped: set TURNSTILE_BENCH_PG=postgres://postgres@127.0.0.1:5432/test to run the same phases on it");
    }
}

/// The profile the server under test was built with (quick mode in CI runs
/// the dev build).
/// `cargo bench --bench chat -- --url URL` (or `TURNSTILE_BENCH_URL`): the
/// same two levels, through this Rust client, against any server that speaks
/// this HTTP API (`POST /v1/threads`, `POST /v1/threads/{id}/messages` as
/// SSE ending with `done`; the LangGraph peer does), alternating round by
/// round with the current build's `turnstile demo`: the ratio comes from one
/// run, with no Python load generator capping either side.
async fn url_mode(url: String, quick: bool) {
    let rounds = rounds(quick);
    let levels = levels(quick);
    let server = Server::start("current", &PathBuf::from(CURRENT), &Db::Sqlite, &[]);
    let other = url.trim_end_matches('/').to_string();
    let sides = [server.base.clone(), other.clone()];
    let warm_turns = if quick { 1 } else { 10 };
    for base in &sides {
        run(base, 1, warm_turns).await;
    }
    let mut measured: [[Level; 2]; 2] = Default::default();
    for _ in 0..rounds {
        for (li, (clients, turns_each)) in levels.iter().enumerate() {
            for (si, base) in sides.iter().enumerate() {
                let (firsts, wall, _, _) = run(base, *clients, *turns_each).await;
                measured[si][li].firsts.extend(firsts);
                measured[si][li].wall += wall;
            }
        }
    }
    println!(
        "demo prompt {PROMPT:?}: `turnstile demo` (SQLite, {} build) against {other}, {rounds} round(s) alternating",
        build()
    );
    println!(
        "  machine: {} CPUs, load average {} after the runs; one Rust client drives both",
        cpus(),
        loadavg()
    );
    println!(
        "  {:<42} {:>10} {:>10} {:>8}",
        "", "turnstile", "--url", "ratio"
    );
    for (li, (clients, _)) in levels.iter().enumerate() {
        let (a, b) = (&measured[0][li], &measured[1][li]);
        let rows = [
            ("turns/s", a.turns_per_s(), b.turns_per_s()),
            ("first frame p50 ms", ms(a.p(0.5)), ms(b.p(0.5))),
            ("first frame p95 ms", ms(a.p(0.95)), ms(b.p(0.95))),
        ];
        for (name, x, y) in rows {
            println!(
                "  {:<42} {x:>10.2} {y:>10.2} {:>7.2}x",
                format!("{clients:>2} client(s): {name}"),
                x / y
            );
        }
    }
    server.stop();
}

fn build() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

fn main() {
    let quick = quick();
    let slow = std::env::args().any(|a| a == "--slow")
        || std::env::var("TURNSTILE_BENCH_SLOW").is_ok_and(|v| v == "1");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let long = std::env::args().any(|a| a == "--long")
        || std::env::var("TURNSTILE_BENCH_LONG").is_ok_and(|v| v == "1");
    let args: Vec<String> = std::env::args().collect();
    let url = (args.iter().position(|a| a == "--url"))
        .and_then(|i| args.get(i + 1).cloned())
        .or_else(|| std::env::var("TURNSTILE_BENCH_URL").ok());
    if let Some(url) = url {
        rt.block_on(url_mode(url, quick));
    } else if long {
        let baseline = std::env::var_os("TURNSTILE_BENCH_BASELINE_BIN").map(PathBuf::from);
        rt.block_on(long_mode(baseline, quick));
    } else if slow {
        rt.block_on(slow_mode(quick));
    } else {
        let baseline = std::env::var_os("TURNSTILE_BENCH_BASELINE_BIN").map(PathBuf::from);
        rt.block_on(default_mode(baseline.clone(), quick));
        if quick {
            println!();
            rt.block_on(slow_mode(quick));
            println!();
            rt.block_on(long_mode(baseline, quick));
        }
    }
}
