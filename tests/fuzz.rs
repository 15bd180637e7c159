//! Time-bounded mutational fuzzers for every parser that reads input from
//! outside (issue 11): the table loader, the SSE parser, the OpenAI stream
//! decoder, the MCP result seam, the config loader, and the HTTP request
//! bodies of `messages` and `resume`.
//!
//! Each target starts from its corpus in `fuzz/corpus/<target>/` (real
//! inputs, kept in the repository) and mutates it — flipped and inserted
//! bytes, deleted, duplicated and spliced ranges, interesting tokens — for
//! `TURNSTILE_FUZZ_SECS` seconds (3 by default; `.ci/run` sets 60). Any
//! panic fails the test with the input that caused it, which is also
//! written to `target/fuzz-crashes/`. Each target prints its number of
//! executions. The generator is a fixed-seed xorshift (`TURNSTILE_FUZZ_SEED`
//! overrides it), so a run can be repeated.
//!
//! The OpenAI decoder and the HTTP bodies are fuzzed through their real
//! paths: a local HTTP server answers the adapter with the mutated stream,
//! and the chat server's router is called with the mutated body.

use crate::common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

fn budget() -> Duration {
    let secs = std::env::var("TURNSTILE_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(3);
    Duration::from_secs(secs)
}

/// xorshift64*: small, fast, reproducible.
struct Rng(u64);

impl Rng {
    fn new(target: &str) -> Rng {
        let seed = std::env::var("TURNSTILE_FUZZ_SEED")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0x9E37_79B9_7F4A_7C15);
        // One stream per target, whatever the order tests run in.
        let mixed = target.bytes().fold(seed, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3)
        });
        Rng(mixed | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Tokens that reach parser corners: quotes, brackets, escapes, numbers at
/// the edges, multi-byte characters, SSE and RON syntax.
const TOKENS: &[&[u8]] = &[
    b"\"",
    b"'",
    b"\\",
    b"{",
    b"}",
    b"[",
    b"]",
    b"(",
    b")",
    b",",
    b":",
    b"\n",
    b"\r\n",
    b"\n\n",
    b"data: ",
    b"event: ",
    b"id: ",
    b": ",
    b"[DONE]",
    b"null",
    b"true",
    b"-1",
    b"1e999",
    b"18446744073709551616",
    b"0.5",
    b"\xff",
    b"\xe2\x82",
    "층".as_bytes(),
    b"\\u0000",
    b"\\ud800",
    b"Legal(",
    b"Forbidden(",
    b"rows: [",
    b"\"content\"",
    b"\"structuredContent\"",
    b"\"_meta\"",
    b"\"isError\"",
    b"\"type\":\"text\"",
    b"{\"returned\":1,\"total\":0}",
    b"[[[[[[[[[[",
    b"]]]]]]]]]]",
    b"=",
    b"[[mcp_servers]]",
    b"\"\"\"",
];

fn mutate(rng: &mut Rng, corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut out = corpus[rng.below(corpus.len())].clone();
    for _ in 0..=rng.below(4) {
        let len = out.len();
        match rng.below(8) {
            0 if len > 0 => {
                let i = rng.below(len);
                out[i] ^= 1 << rng.below(8);
            }
            1 => {
                let i = rng.below(len + 1);
                out.insert(i, rng.next() as u8);
            }
            2 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(16)).min(len);
                out.drain(a..b);
            }
            3 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(32)).min(len);
                let piece = out[a..b].to_vec();
                let at = rng.below(out.len() + 1);
                out.splice(at..at, piece);
            }
            4 => {
                let t = TOKENS[rng.below(TOKENS.len())];
                let at = rng.below(len + 1);
                out.splice(at..at, t.iter().copied());
            }
            5 if len > 0 => out.truncate(rng.below(len)),
            6 => {
                let other = &corpus[rng.below(corpus.len())];
                if !other.is_empty() {
                    let a = rng.below(other.len());
                    let b = (a + 1 + rng.below(64)).min(other.len());
                    let at = rng.below(len + 1);
                    out.splice(at..at, other[a..b].iter().copied());
                }
            }
            _ => {
                let n = rng.below(8);
                for _ in 0..n {
                    let at = rng.below(out.len() + 1);
                    out.insert(at, rng.next() as u8);
                }
            }
        }
    }
    out
}

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    let seeds: Vec<Vec<u8>> = files.iter().filter_map(|p| std::fs::read(p).ok()).collect();
    assert!(!seeds.is_empty(), "{} holds no corpus", dir.display());
    seeds
}

fn crash_file(target: &str, input: &[u8]) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/fuzz-crashes");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("{target}-{:016x}", fxhash(input)));
    let _ = std::fs::write(&path, input);
    path
}

fn fxhash(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, x| {
        (h ^ u64::from(*x)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Runs `f` on the corpus, then on mutations of it, until the budget is
/// spent. Returns the number of executions.
fn fuzz(target: &str, mut f: impl FnMut(&[u8])) -> u64 {
    let seeds = corpus(target);
    let mut rng = Rng::new(target);
    let start = Instant::now();
    let mut execs = 0u64;
    let mut run = |input: &[u8], execs: &mut u64| {
        *execs += 1;
        if catch_unwind(AssertUnwindSafe(|| f(input))).is_err() {
            let path = crash_file(target, input);
            panic!(
                "fuzz {target}: panic on input {:?} (saved to {})",
                String::from_utf8_lossy(input),
                path.display()
            );
        }
    };
    for s in &seeds {
        run(s, &mut execs);
    }
    while start.elapsed() < budget() {
        let input = mutate(&mut rng, &seeds);
        run(&input, &mut execs);
    }
    println!(
        "fuzz {target}: {execs} executions in {:.1} s, 0 panics",
        start.elapsed().as_secs_f64()
    );
    execs
}

#[test]
fn fuzz_table_loader() {
    use turnstile::protocols::registry_check_source as check_source;
    let names = ["frame.ron", "turn.ron", "narration.ron", "x.ron"];
    let mut n = 0usize;
    let execs = fuzz("tables", |input| {
        n += 1;
        let text = String::from_utf8_lossy(input);
        let _ = check_source(&text, names[n % names.len()]);
    });
    assert!(execs > 0);
}

#[test]
fn fuzz_sse_parser() {
    use turnstile::wire::sse::SseDecoder;
    use turnstile::wire::Frame;
    let mut split = Rng::new("sse-split");
    let execs = fuzz("sse", |input| {
        // The same bytes, cut at arbitrary places, as a network delivers.
        let mut d = SseDecoder::new();
        let mut rest = input;
        while !rest.is_empty() {
            let cut = 1 + split.below(rest.len());
            d.push(&rest[..cut]);
            rest = &rest[cut..];
            while let Some(ev) = d.next_event() {
                let _ = Frame::parse(ev.event.as_deref().unwrap_or("message"), &ev.data);
            }
        }
        d.finish();
        while let Some(ev) = d.next_event() {
            let _ = Frame::parse(ev.event.as_deref().unwrap_or("message"), &ev.data);
        }
    });
    assert!(execs > 0);
}

#[test]
fn fuzz_mcp_result_seam() {
    use turnstile::judge::contracts::{AccountingMode, Contract};
    use turnstile::judge::emptiness::read_result_emptiness;
    use turnstile::judge::in_band;
    use turnstile::judge::result::Reading;
    use turnstile::mcp::{pyliteral, ToolOutput};
    let required = Contract::default();
    let absent = Contract {
        accounting: AccountingMode::Absent,
        ..Contract::default()
    };
    let execs = fuzz("normalize", |input| {
        let text = String::from_utf8_lossy(input);
        let _ = pyliteral::parse(&text);
        let value: Value = serde_json::from_slice(input).unwrap_or(Value::String(text.into()));
        let out = ToolOutput::from_value(&value);
        let _ = out.shape().to_string();
        for contract in [None, Some(&required), Some(&absent)] {
            let reading = Reading::of(&out, contract);
            let _ = in_band::judge(contract, &reading, &out);
            let _ = read_result_emptiness(contract, &reading, &out);
        }
    });
    assert!(execs > 0);
}

/// The capability validator (issue 18): no panic on any input, and an
/// oracle: whatever it accepts is exactly the parser's canonical string,
/// on the trusted origin, with no userinfo or fragment.
#[test]
fn fuzz_capability_validator() {
    use turnstile::judge::capability::CapabilityRule;
    let template = "/api/lms/exports/{jobId}/download";
    let rules = [
        (
            "https://lms.example.com",
            CapabilityRule::new("https://lms.example.com", template, "token").unwrap(),
        ),
        (
            "http://127.0.0.1:8080",
            CapabilityRule::new("http://127.0.0.1:8080", template, "token").unwrap(),
        ),
    ];
    let mut terminals = turnstile::judge::capability::Terminals::default();
    for (i, (_, rule)) in rules.iter().enumerate() {
        let flow = turnstile::judge::capability::TerminalFlow {
            preview: "p".into(),
            rule: rule.clone(),
            label: "Download".into(),
            label_ko: None,
        };
        terminals.insert(&format!("confirm{i}"), flow);
    }
    let execs = fuzz("capability", |input| {
        let text = String::from_utf8_lossy(input);
        for (origin, rule) in &rules {
            if rule.validate_url(&text).is_ok() {
                let url = url::Url::parse(&text).expect("accepted, so it parses");
                assert_eq!(url.as_str(), text, "accepted a non-canonical URL");
                assert_eq!(url.origin().ascii_serialization(), *origin);
                assert!(url.username().is_empty() && url.password().is_none());
                assert!(url.fragment().is_none());
                // An oracle built from strings, not from the parser: the
                // accepted URL is the origin, the template with one plain
                // segment, and one plain token.
                let rest = text
                    .strip_prefix(origin)
                    .and_then(|r| r.strip_prefix("/api/lms/exports/"))
                    .expect("accepted, so it starts with the origin and path");
                let (job, token) = rest
                    .split_once("/download?token=")
                    .expect("accepted, so it has the download path and the token");
                let seg = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
                let tok = |c: char| c.is_ascii_alphanumeric() || "-._~".contains(c);
                assert!(!job.is_empty() && job.chars().all(seg), "job {job:?}");
                assert!(
                    !token.is_empty() && token.chars().all(tok),
                    "token {token:?}"
                );
            }
            if let Ok(answer) = serde_json::from_slice::<Value>(input) {
                let _ = rule.validate_answer(&answer);
            }
        }
        // The page's rule: each URL found in a text is one the validator
        // accepts, and stands in the text as written.
        for link in terminals.links_in(&text) {
            assert!(text.contains(&link.url));
            assert!(rules.iter().any(|(_, r)| r.validate_url(&link.url).is_ok()));
        }
    });
    assert!(execs > 0);
}

#[test]
fn fuzz_config_loader() {
    use turnstile::config::Config;
    let path = std::path::Path::new("fuzz.toml");
    let execs = fuzz("config", |input| {
        let text = String::from_utf8_lossy(input);
        let _ = Config::from_toml(&text, path, &|_| None);
    });
    assert!(execs > 0);
}

/// The adapter against a local provider that answers with the mutated
/// stream: the real HTTP client, SSE decoder, chunk parser and tool-call
/// assembly.
#[test]
fn fuzz_openai_stream_decoder() {
    use axum::routing::post;
    use futures::StreamExt;
    use turnstile::llm::prompt::{Prompt, PLANNER_FIXED, RESPONDER_FIXED};
    use turnstile::llm::{ApiKey, Model, OpenAi, OpenAiConfig, PlanRequest, RespondRequest};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let body: Arc<Mutex<Vec<u8>>> = Arc::default();
    let served = body.clone();
    let base = rt.block_on(async move {
        let app = axum::Router::new().route(
            "/chat/completions",
            post(move || {
                let b = served.lock().unwrap().clone();
                async move {
                    axum::response::Response::builder()
                        .header("content-type", "text/event-stream")
                        .body(axum::body::Body::from(b))
                        .unwrap()
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        base
    });
    let mut cfg = OpenAiConfig::new(base, "fuzz-model", Some(ApiKey::new("sk-fuzz-0000000000")));
    cfg.max_retries = 0;
    cfg.idle_timeout = Duration::from_secs(2);
    let model = OpenAi::new(cfg).unwrap();
    let plan = PlanRequest {
        prompt: Prompt::new(PLANNER_FIXED),
        user_text: "show safety issues on floor 3".into(),
        tools: vec![],
        context: None,
        history: vec![],
        steps: vec![],
    };
    let respond = RespondRequest {
        prompt: Prompt::new(RESPONDER_FIXED),
        user_text: "show safety issues on floor 3".into(),
        anchors: vec![],
        digests: vec![],
    };
    let mut flip = false;
    let execs = fuzz("openai", |input| {
        *body.lock().unwrap() = input.to_vec();
        flip = !flip;
        rt.block_on(async {
            if flip {
                let _ = model.plan(&plan).await;
            } else if let Ok(mut s) = model.respond(&respond).await {
                while s.next().await.is_some() {}
            }
        });
    });
    assert!(execs > 0);
}

/// The chat server, over a real socket, with the mutated bodies of `POST
/// /v1/threads/{id}/messages` and `/resume`: never a panic, never a 5xx.
#[test]
fn fuzz_http_request_bodies() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let http = crate::common::browser();
    let (s, thread) = rt.block_on(async {
        // No tool servers: the bodies are the point, not the tools.
        let s = common::server::TestServer::builder()
            .servers(vec![])
            .start()
            .await;
        let thread = s.new_thread().await;
        (s, thread)
    });
    let base = s.base.clone();
    let mut n = 0usize;
    let execs = fuzz("http", |input| {
        n += 1;
        let route = match n % 2 {
            0 => format!("{base}/v1/threads/{thread}/messages"),
            _ => format!("{base}/v1/threads/{thread}/resume"),
        };
        let status = rt.block_on(async {
            // A valid message starts a turn; its stream is dropped here
            // (the client went away), which the turn handles.
            http.post(route.as_str())
                .header("content-type", "application/json")
                .body(input.to_vec())
                .send()
                .await
                .map(|r| r.status())
        });
        match status {
            Ok(s) => assert!(
                !s.is_server_error(),
                "{route}: {s} for {:?}",
                String::from_utf8_lossy(input)
            ),
            Err(e) => panic!("{route}: no answer: {e}"),
        }
    });
    assert!(execs > 0);
    rt.block_on(async move { s.pass() });
}
