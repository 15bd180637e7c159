//! The HTTP server against hostile and slow clients, over real sockets:
//!
//! - connection timeouts: a head sent one byte per second, a body that
//!   stalls after 10 of its declared 500 bytes, and a socket that says
//!   nothing are each closed within the configured time, while a normal
//!   turn completes and a live SSE turn slower than the idle timeout is
//!   not cut;
//! - edges: every 4xx is `{"error": "…"}` (405 and an undecodable path
//!   included), a head over the limit gets 431, and JSON nested too deep is
//!   refused wherever it is in the body, before parsing;
//! - browser headers: CSP with the page's hashes, `nosniff`,
//!   `no-referrer` on every response; CORS closed unless configured.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::frames::{is_done, kinds, read_frames};
use common::server::{Slow, TestServer};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use turnstile::http::HttpConfig;

/// The timeouts every test here runs with: short, and each distinct, so a
/// close time says which timer closed the connection.
fn short() -> HttpConfig {
    HttpConfig {
        header_read_timeout: Duration::from_secs(1),
        body_read_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(3),
        ..HttpConfig::default()
    }
}

/// Reads until the server closes the socket (EOF or reset); returns what
/// was read and when the close came, or `None` if it stayed open `limit`.
async fn until_closed(sock: &mut TcpStream, limit: Duration) -> Option<(Vec<u8>, Duration)> {
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = limit.checked_sub(start.elapsed())?;
        match tokio::time::timeout(left, sock.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some((got, start.elapsed())),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

#[tokio::test]
async fn a_head_sent_one_byte_per_second_is_closed_after_the_header_timeout() {
    let s = TestServer::builder().http(short()).start().await;
    let sock = TcpStream::connect(s.addr).await.unwrap();
    let (mut rd, mut wr) = sock.into_split();
    let started = Instant::now();
    // Never completes the head: one byte a second for 20 s.
    let writer = tokio::spawn(async move {
        for b in b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaa".iter() {
            if wr.write_all(&[*b]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    let mut buf = [0u8; 256];
    let closed = tokio::time::timeout(Duration::from_secs(8), async {
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => return started.elapsed(),
                Ok(_) => {}
            }
        }
    })
    .await;
    writer.abort();
    let took = closed.expect("the slow head's connection is closed");
    // The header timer (1 s) closed it, not the idle timer (3 s).
    assert!(took < Duration::from_millis(2_500), "closed after {took:?}");
    s.pass();
}

#[tokio::test]
async fn a_body_that_stalls_gets_408_and_is_closed_after_the_body_timeout() {
    let s = TestServer::builder().http(short()).start().await;
    let mut sock = TcpStream::connect(s.addr).await.unwrap();
    let head = "POST /v1/threads/none/messages HTTP/1.1\r\nHost: x\r\n\
                Content-Type: application/json\r\nContent-Length: 500\r\n\r\n";
    sock.write_all(head.as_bytes()).await.unwrap();
    sock.write_all(b"{\"text\": \"").await.unwrap(); // 10 of 500 bytes, then nothing
    let (got, took) = until_closed(&mut sock, Duration::from_secs(8))
        .await
        .expect("the stalled body's connection is closed");
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("{\"error\":"), "a JSON reason: {text}");
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_millis(2_500),
        "closed after {took:?}"
    );
    s.pass();
}

#[tokio::test]
async fn an_idle_socket_is_closed_after_the_idle_timeout() {
    let s = TestServer::builder().http(short()).start().await;
    // A socket that never sends a byte.
    let mut silent = TcpStream::connect(s.addr).await.unwrap();
    // A kept-alive socket after one answered request.
    let mut kept = TcpStream::connect(s.addr).await.unwrap();
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 1024];
    let n = kept.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    let (silent_closed, kept_closed) = tokio::join!(
        until_closed(&mut silent, Duration::from_secs(8)),
        until_closed(&mut kept, Duration::from_secs(8)),
    );
    for (what, closed) in [("silent", silent_closed), ("kept-alive", kept_closed)] {
        let (_, took) = closed.unwrap_or_else(|| panic!("the {what} socket is closed"));
        // The idle timer (3 s), not the header timer (1 s): no head began.
        assert!(
            took >= Duration::from_millis(2_500) && took < Duration::from_millis(5_000),
            "{what} closed after {took:?}"
        );
    }
    s.pass();
}

#[tokio::test]
async fn a_normal_turn_completes_under_short_timeouts() {
    let s = TestServer::builder().http(short()).start().await;
    let thread = s.new_thread().await;
    for prompt in ["hello", "show safety issues on floor 3"] {
        let started = Instant::now();
        let frames = s.say(&thread, prompt).await;
        let took = started.elapsed();
        assert!(is_done(&frames), "{prompt}: {:?}", kinds(&frames));
        assert!(took < Duration::from_secs(3), "{prompt} took {took:?}");
    }
    s.pass();
}

#[tokio::test]
async fn a_live_turn_silent_for_longer_than_the_idle_timeout_is_not_cut() {
    let cfg = short();
    let pause = cfg.idle_timeout + Duration::from_secs(1);
    let s = TestServer::builder()
        .http(cfg)
        .model(Slow::planning(pause))
        .start()
        .await;
    let thread = s.new_thread().await;
    let started = Instant::now();
    let frames = s.say(&thread, "hello").await;
    let took = started.elapsed();
    assert!(took >= pause, "the model paused: {took:?}");
    assert!(
        is_done(&frames),
        "the turn ended with done: {:?}",
        kinds(&frames)
    );
    s.pass();
}

// ---------------------------------------------------------------------------
// Edges

async fn error_json(r: reqwest::Response) -> (u16, String) {
    let status = r.status().as_u16();
    let ct = r
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let text = r.text().await.unwrap();
    assert!(
        ct.starts_with("application/json"),
        "{status}: content-type {ct:?}, body {text:?}"
    );
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    let reason = v["error"].as_str().unwrap_or_else(|| panic!("{text}"));
    assert!(!reason.is_empty(), "a reason: {text}");
    (status, reason.to_string())
}

#[tokio::test]
async fn a_405_is_json_with_a_reason() {
    let s = TestServer::builder().http(short()).start().await;
    let http = crate::common::browser();
    for (method, path) in [
        (reqwest::Method::DELETE, "/v1/tables"),
        (reqwest::Method::DELETE, "/v1/threads"),
        (reqwest::Method::PUT, "/"),
    ] {
        let r = http
            .request(method.clone(), format!("{}{path}", s.base))
            .send()
            .await
            .unwrap();
        let (status, reason) = error_json(r).await;
        assert_eq!(status, 405, "{method} {path}");
        assert!(reason.contains("not allowed"), "{reason}");
    }
    s.pass();
}

/// Issue 20 §6.3: a 405 names the route's methods, in its body and in its
/// `Allow` header alike.
#[tokio::test]
async fn a_405_names_the_methods_the_route_accepts() {
    let s = TestServer::builder().http(short()).start().await;
    let http = reqwest::Client::new();
    for (method, path, want) in [
        (reqwest::Method::POST, "/healthz", &["GET", "HEAD"][..]),
        (reqwest::Method::GET, "/v1/threads/x/messages", &["POST"]),
        (reqwest::Method::DELETE, "/v1/tables", &["GET", "HEAD"]),
        (reqwest::Method::PUT, "/v1/threads/x/resume", &["POST"]),
    ] {
        let r = http
            .request(method.clone(), format!("{}{path}", s.base))
            .send()
            .await
            .unwrap();
        let allow = r
            .headers()
            .get("allow")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let (status, reason) = error_json(r).await;
        assert_eq!(status, 405, "{method} {path}");
        let listed: Vec<&str> = reason
            .rsplit_once("accepts ")
            .map(|(_, l)| l.split(", ").map(str::trim).collect())
            .unwrap_or_default();
        let allowed: Vec<&str> = allow.split(',').map(str::trim).collect();
        for m in want {
            assert!(listed.contains(m), "{method} {path}: {reason:?}");
            assert!(allowed.contains(m), "{method} {path}: Allow {allow:?}");
        }
        let mut a = allowed.clone();
        let mut l = listed.clone();
        a.sort();
        l.sort();
        assert_eq!(a, l, "{method} {path}: body {reason:?}, Allow {allow:?}");
    }
    s.pass();
}

#[tokio::test]
async fn a_path_that_does_not_decode_is_a_json_400() {
    let s = TestServer::builder().http(short()).start().await;
    let r = reqwest::get(format!("{}/v1/tables/%ff", s.base))
        .await
        .unwrap();
    let (status, _) = error_json(r).await;
    assert_eq!(status, 400);
    s.pass();
}

#[tokio::test]
async fn a_head_over_the_limit_gets_431() {
    let s = TestServer::builder().http(short()).start().await;
    let http = crate::common::browser();
    for size in [17 * 1024, 100 * 1024] {
        let r = http
            .get(format!("{}/healthz", s.base))
            .header("x-big", "a".repeat(size))
            .send()
            .await
            .unwrap();
        let (status, reason) = error_json(r).await;
        assert_eq!(status, 431, "{size}");
        assert!(reason.contains("16384"), "{reason}");
    }
    // Just under the limit is fine.
    let r = http
        .get(format!("{}/healthz", s.base))
        .header("x-big", "a".repeat(15 * 1024))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    s.pass();
}

fn nested(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

#[tokio::test]
async fn deep_json_is_refused_in_unknown_and_known_keys_alike() {
    let s = TestServer::builder().http(short()).start().await;
    let http = crate::common::browser();
    let thread = s.new_thread().await;
    let url = format!("{}/v1/threads/{thread}/messages", s.base);
    let deep = nested(100);
    for body in [
        format!(r#"{{"text":"hello","context":{{"unknown":{deep}}}}}"#),
        format!(r#"{{"text":"hello","context":{{"floor":{deep}}}}}"#),
        format!(r#"{{"text":"hello","extra":{deep}}}"#),
    ] {
        let r = http
            .post(&url)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        let (status, reason) = error_json(r).await;
        assert_eq!(status, 400, "{body}");
        assert!(reason.contains("nested deeper than 32"), "{reason}");
    }
    // Shallow nesting in an unknown key is still a turn.
    let r = http
        .post(&url)
        .header("content-type", "application/json")
        .body(format!(
            r#"{{"text":"hello","context":{{"unknown":{}}}}}"#,
            nested(5)
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(is_done(&read_frames(&r.bytes().await.unwrap())));
    // The whole body is bounded in size, whatever key holds the bulk.
    let big = format!(
        r#"{{"text":"hello","context":{{"unknown":"{}"}}}}"#,
        "a".repeat(70 * 1024)
    );
    let r = http
        .post(&url)
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .unwrap();
    let (status, _) = error_json(r).await;
    assert_eq!(status, 413);
    s.pass();
}

// ---------------------------------------------------------------------------
// Browser-facing headers

#[tokio::test]
async fn every_response_carries_the_security_headers() {
    let s = TestServer::builder().http(short()).start().await;
    let http = crate::common::browser();
    let page = include_str!("../crates/turnstile/src/http/page/index.html");
    let expected = turnstile::http::csp(page, &[]);
    for path in ["/", "/v1/tables", "/healthz", "/nope", "/v1/tables/%ff"] {
        let r = http
            .get(format!("{}{path}", s.base))
            .header("origin", "https://evil.example")
            .send()
            .await
            .unwrap();
        let h = r.headers();
        let csp = h["content-security-policy"].to_str().unwrap();
        assert_eq!(csp, expected, "{path}");
        assert!(csp.contains("script-src 'sha256-"), "{csp}");
        assert!(csp.contains("style-src 'sha256-"), "{csp}");
        assert!(csp.contains("connect-src 'self'"), "{csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(h["referrer-policy"], "no-referrer", "{path}");
        assert!(
            h.get("access-control-allow-origin").is_none(),
            "CORS is closed by default ({path})"
        );
    }
    // A preflight from an origin nobody allowed gets no CORS headers.
    let r = http
        .request(reqwest::Method::OPTIONS, format!("{}/v1/threads", s.base))
        .header("origin", "https://evil.example")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert!(r.headers().get("access-control-allow-origin").is_none());
    s.pass();
}

#[tokio::test]
async fn cors_and_framing_follow_the_configured_origins() {
    let cfg = HttpConfig {
        cors_origins: vec!["https://host.example".into()],
        frame_ancestors: vec!["https://panel.example".into()],
        ..short()
    };
    let s = TestServer::builder().http(cfg).start().await;
    let http = crate::common::browser();
    let r = http
        .request(reqwest::Method::OPTIONS, format!("{}/v1/threads", s.base))
        .header("origin", "https://host.example")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://host.example"
    );
    let r = http
        .get(format!("{}/v1/tables", s.base))
        .header("origin", "https://host.example")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://host.example"
    );
    let csp = r.headers()["content-security-policy"].to_str().unwrap();
    assert!(
        csp.ends_with("frame-ancestors https://panel.example"),
        "{csp}"
    );
    let r = http
        .get(format!("{}/v1/tables", s.base))
        .header("origin", "https://other.example")
        .send()
        .await
        .unwrap();
    assert!(r.headers().get("access-control-allow-origin").is_none());
    s.pass();
}

use crate::common::BASE_TOML;

#[test]
fn the_http_section_is_read_and_checked() {
    use turnstile::config::Config;
    let c = Config::from_toml(BASE_TOML, Path::new("t.toml"), &|_| None).expect("valid");
    assert_eq!(c.http, HttpConfig::default());
    let src = format!(
        "{BASE_TOML}[http]\nheader_read_timeout_secs = 5\nbody_read_timeout_secs = 6\n\
         idle_timeout_secs = 7\nmax_header_bytes = 8192\n\
         frame_ancestors = [\"https://panel.example\"]\ncors_origins = [\"http://localhost:3000\"]\n\
         reconnect_grace_secs = 20\ndrain_secs = 45\nadmin_key_env = \"OPS_KEY\"\n"
    );
    let env = |k: &str| (k == "OPS_KEY").then(|| "an-operator-key-of-24ch".to_string());
    let c = Config::from_toml(&src, Path::new("t.toml"), &env).expect("valid");
    assert_eq!(c.http.reconnect_grace, Duration::from_secs(20));
    assert_eq!(c.http.drain, Duration::from_secs(45));
    let key = c.http.admin_key.as_ref().expect("the operator key");
    assert!(key.matches(b"an-operator-key-of-24ch") && !key.matches(b"an-operator-key"));
    assert_eq!(format!("{key:?}"), "AdminKey(…)", "never printed");
    assert_eq!(c.http.header_read_timeout, Duration::from_secs(5));
    assert_eq!(c.http.body_read_timeout, Duration::from_secs(6));
    assert_eq!(c.http.idle_timeout, Duration::from_secs(7));
    assert_eq!(c.http.max_header_bytes, 8192);
    assert_eq!(c.http.frame_ancestors, ["https://panel.example"]);
    assert_eq!(c.http.cors_origins, ["http://localhost:3000"]);
    for (bad, key) in [
        ("idle_timeout_secs = 0", "http.idle_timeout_secs"),
        ("max_header_bytes = 10", "http.max_header_bytes"),
        ("cors_origins = [\"*\"]", "http.cors_origins[0]"),
        (
            "cors_origins = [\"https://a.example/path\"]",
            "http.cors_origins[0]",
        ),
        (
            "frame_ancestors = [\"https://a.example; script-src *\"]",
            "http.frame_ancestors[0]",
        ),
        ("reconnect_grace_secs = 601", "http.reconnect_grace_secs"),
        ("drain_secs = 3601", "http.drain_secs"),
        ("admin_key_env = \"not a name\"", "http.admin_key_env"),
        ("admin_key_env = \"UNSET_OPS_KEY\"", "http.admin_key_env"),
    ] {
        let src = format!("{BASE_TOML}[http]\n{bad}\n");
        let err = Config::from_toml(&src, Path::new("t.toml"), &|_| None)
            .expect_err(bad)
            .to_string();
        assert!(err.contains(key), "{bad}: {err}");
    }
}

/// A client that resets its connection right after sending a message
/// never leaves the thread locked for the lease's length (issue 19: seen 2
/// in 50 before the claim ran on a task of its own). 50 tries, each reset
/// at another moment of the request's handling; after each, the thread's
/// lease is gone within 3 s although it would hold for 30.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_resets_after_sending_never_leaves_the_thread_locked() {
    let s = TestServer::builder()
        .model(Slow::planning(Duration::from_millis(20)))
        .turn_lease(Duration::from_secs(30))
        .start()
        .await;
    let body = r#"{"text":"show safety issues on floor 3"}"#;
    for i in 0..50u64 {
        let thread = s.new_thread().await;
        let request = format!(
            "POST /v1/threads/{thread}/messages HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        let mut sock = TcpStream::connect(s.addr).await.unwrap();
        sock.write_all(request.as_bytes()).await.unwrap();
        // From at once to a few milliseconds in: the claim, the spawn of
        // the turn and its first frame are each met by some try.
        tokio::time::sleep(Duration::from_micros(i * 97 % 4000)).await;
        sock.set_zero_linger().unwrap();
        drop(sock);
        let until = Instant::now() + Duration::from_secs(3);
        loop {
            let lease = s.store.turn_lease(&thread).await.unwrap();
            if lease.is_none() {
                break;
            }
            assert!(
                Instant::now() < until,
                "try {i}: the thread is still locked 3 s after the client reset: {lease:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    s.pass();
}

/// Under load, no turn that is making progress loses its lease: 48
/// concurrent turns whose answers take about three seconds, each delta a
/// commit, with a lease of 2 s (each turn outlives it, so it is renewed,
/// every third of it). With 300 ms, about 1 run in 10 of this debug build
/// on 2 CPUs lost a lease while the turn's first step waited behind the
/// writer (issue 19 §3); at 600 and 800 ms, with answers of one second, runs
/// of the whole suite lost one while the rest of the suite shared the 2
/// CPUs, the renewal timer waking after the lease had run out (issue 20). A load check: the background
/// renewal alone may keep these leases too; that a step renews its own
/// lease (ADR 0021) is checked in
/// `store::*::a_step_of_a_turn_that_lost_its_lease_writes_nothing`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_load_a_turn_making_progress_keeps_its_lease() {
    let s = TestServer::builder()
        .model(Slow::answering(Duration::from_millis(120)))
        .turn_lease(Duration::from_secs(2))
        .start()
        .await;
    let threads: Vec<String> = futures::future::join_all((0..48).map(|_| s.new_thread())).await;
    let turns = threads
        .iter()
        .map(|t| s.say(t, "show safety issues on floor 3"));
    let all = futures::future::join_all(turns).await;
    for (i, frames) in all.iter().enumerate() {
        assert!(
            is_done(frames),
            "turn {i} did not end with done: {:?} {:?}",
            kinds(frames),
            frames.last().map(|f| f.data())
        );
    }
    s.pass();
}

#[tokio::test]
async fn a_declared_body_over_the_limit_gets_413_at_once() {
    // The default body timeout (30 s): a 408 would come only after it.
    let s = TestServer::builder().start().await;
    for path in ["/v1/threads/none/messages", "/v1/threads"] {
        let mut sock = TcpStream::connect(s.addr).await.unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n",
            turnstile::http::MAX_BODY + 1
        );
        sock.write_all(head.as_bytes()).await.unwrap();
        let (got, took) = until_closed(&mut sock, Duration::from_secs(10))
            .await
            .expect("the connection is closed");
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("HTTP/1.1 413"), "{path}: {text}");
        assert!(text.contains("at most 65536"), "{path}: a reason: {text}");
        assert!(
            took < Duration::from_secs(2),
            "{path}: answered after {took:?}"
        );
    }
    s.pass();
}

/// Every route that takes an id or text, given a NUL (`%00` in the path,
/// `\u0000` in the body): the same 400, whatever the database.
async fn a_nul_is_refused_at_the_edge_on(db: &str) {
    let s = TestServer::builder().database(db).start().await;
    let t = s.new_thread().await;
    let resume = r#"{"interrupt_id":"int-1","decision":"approve"}"#;
    let cases: Vec<(&str, String, Option<String>)> = vec![
        ("GET", "/v1/threads/a%00b".into(), None),
        ("GET", "/v1/threads/%00".into(), None),
        (
            "POST",
            "/v1/threads/a%00b/messages".into(),
            Some(r#"{"text":"hi"}"#.into()),
        ),
        (
            "POST",
            "/v1/threads/a%00b/resume".into(),
            Some(resume.into()),
        ),
        ("GET", "/v1/tables/turn%00".into(), None),
        ("GET", "/v1/threads?after=%00".into(), None),
        (
            "POST",
            format!("/v1/threads/{t}/resume"),
            Some(r#"{"interrupt_id":"a\u0000b","decision":"approve"}"#.into()),
        ),
        (
            "POST",
            format!("/v1/threads/{t}/messages"),
            Some(r#"{"text":"photos of floor 2\u0000"}"#.into()),
        ),
        (
            "POST",
            format!("/v1/threads/{t}/messages"),
            Some("{\"text\":\"photos\u{0}\"}".into()),
        ),
    ];
    let client = reqwest::Client::new();
    let mut wrong = Vec::new();
    for (method, path, body) in &cases {
        let url = format!("{}{path}", s.base);
        let req = match method {
            &"GET" => client.get(url),
            _ => client
                .post(url)
                .header("content-type", "application/json")
                .body(body.clone().unwrap_or_default()),
        };
        let (status, error) = error_json(req.send().await.unwrap()).await;
        if status != 400 || !error.contains("NUL") {
            wrong.push(format!("{method} {path}: {status} {error}"));
        }
    }
    assert!(wrong.is_empty(), "not a 400 naming the NUL: {wrong:#?}");
    // Nothing was lost: the thread takes a turn as before.
    let frames = s.say(&t, "photos of floor 2").await;
    assert!(is_done(&frames), "{:?}", kinds(&frames));
    s.pass();
}

#[tokio::test]
async fn a_nul_is_refused_at_the_edge() {
    let tmp = tempfile::tempdir().unwrap();
    a_nul_is_refused_at_the_edge_on(&common::server::databases(&tmp)[0]).await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL: set TURNSTILE_TEST_DATABASE_URL, run with --include-ignored"]
async fn a_nul_is_refused_at_the_edge_on_postgres() {
    a_nul_is_refused_at_the_edge_on(&common::needs::postgres()).await;
}
