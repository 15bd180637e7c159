//! Both MCP revisions side by side (issue 22 §1): the same honesty flows,
//! through HTTP/SSE and the real demo tool server, once spoken to in
//! 2025-11-25 (`initialize`, a session) and once in 2026-07-28 (rmcp's
//! stateless server mode: `server/discover`, no session). `auto` discovers
//! a stateless server and falls back on a server that offers 2025-11-25
//! only. A broken response stream on a destructive stateless call is
//! reported as outcome unknown, and the server's own counter proves it was
//! not re-sent.

use std::net::SocketAddr;
use std::time::Duration;

use crate::common;

use common::frames::{answer, citation, tool_results};
use common::server::TestServer;
use serde_json::{json, Map, Value};
use turnstile::judge::CountGrade;
use turnstile::mcp::{ClientOptions, McpError, Revision, ServerSpec, ToolClient};
use turnstile::protocols::connection::ConnectionState;
use turnstile_demo::{DemoOptions, DemoServer, Fault};

/// A server for `revision`, with the demo's faults; it says which revision
/// the connection negotiated before the flow runs.
async fn server(revision: Revision, faults: Vec<Fault>) -> TestServer {
    let s = TestServer::builder()
        .faults(faults)
        .revision(revision)
        .start()
        .await;
    let (status, body) = s.get("/readyz").await;
    assert_eq!(status, 200, "{body}");
    let demo = &body["servers"][0];
    let (protocol, state) = match revision {
        Revision::Stateless => ("2026-07-28", "Stateless"),
        _ => ("2025-11-25", "Ready"),
    };
    assert_eq!(demo["protocol"], protocol, "{body}");
    assert_eq!(demo["state"], state, "{body}");
    s
}

/// A requested page of a larger population: at least N, these n.
async fn lower_bound(revision: Revision) {
    let s = server(revision, vec![]).await;
    let t = s.new_thread().await;
    let frames = s.say(&t, "show me 12 safety issues on floor 3").await;
    let c = citation(&frames).unwrap();
    assert_eq!((c.displayed, c.complete), (12, false));
    assert_eq!(c.grade, CountGrade::LowerBound.as_str());
    let text = answer(&frames);
    assert!(
        text.contains("At least 189") && text.contains("These 12"),
        "{text}"
    );
    s.pass();
}

/// A counted listing narrowed to a scope that fits: EXACT and complete.
async fn counted_listing(revision: Revision) {
    let s = server(revision, vec![]).await;
    let t = s.new_thread().await;
    s.say(&t, "show safety issues on floor 3").await;
    let frames = s.say(&t, "only those from April").await;
    let c = citation(&frames).unwrap();
    assert_eq!(c.grade, CountGrade::Exact.as_str());
    assert!(c.complete && c.narrowed);
    assert_eq!(c.total, Some(c.displayed));
    for item in &c.items {
        assert_eq!(item["floor"], 3);
    }
    // Narrowing to nothing is an accounted zero after narrowing.
    let frames = s.say(&t, "only those from January").await;
    assert!(
        answer(&frames).contains("None of the previous results match"),
        "{}",
        answer(&frames)
    );
    s.pass();
}

/// An accounted zero is "none", with an EXACT 0.
async fn accounted_zero(revision: Revision) {
    let s = server(revision, vec![]).await;
    let t = s.new_thread().await;
    let frames = s.say(&t, "show photos from 1999").await;
    let c = citation(&frames).unwrap();
    assert_eq!(
        (c.grade.as_str(), c.total, c.displayed),
        (CountGrade::Exact.as_str(), Some(0), 0)
    );
    assert!(answer(&frames).contains("There are none"));
    s.pass();
}

/// A failure that arrives as HTTP 200 and `isError: false` is a failure:
/// no card, no number, no "none".
async fn in_band_failure(revision: Revision) {
    let s = server(revision, vec![Fault::Upstream502]).await;
    let t = s.new_thread().await;
    let frames = s.say(&t, "show safety issues on floor 3").await;
    assert!(!tool_results(&frames)[0].ok);
    assert!(citation(&frames).is_none());
    let text = answer(&frames);
    assert!(text.contains("did not return a usable answer"), "{text}");
    assert!(!text.chars().any(|c| c.is_ascii_digit()), "{text}");
    s.pass();
}

/// A single-value aggregate is EXACT.
async fn aggregate(revision: Revision) {
    let s = server(revision, vec![]).await;
    let t = s.new_thread().await;
    let frames = s.say(&t, "how many photos are on floor 3?").await;
    assert!(answer(&frames).contains("613"), "{}", answer(&frames));
    s.pass();
}

crate::on_both_revisions!(
    lower_bound,
    counted_listing,
    accounted_zero,
    in_band_failure,
    aggregate
);

fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// `auto` discovers a server that offers 2026-07-28 and falls back to
/// 2025-11-25 (with a session) on one that does not; `2026-07-28` alone
/// refuses a legacy server rather than guess.
#[tokio::test]
async fn auto_discovers_or_falls_back() {
    let modern = DemoServer::start(
        loopback(),
        DemoOptions {
            stateless: true,
            ..DemoOptions::default()
        },
    )
    .await
    .unwrap();
    let legacy = DemoServer::start(loopback(), DemoOptions::default())
        .await
        .unwrap();
    for (demo, protocol, state, session) in [
        (&modern, "2026-07-28", ConnectionState::Stateless, false),
        (&legacy, "2025-11-25", ConnectionState::Ready, true),
    ] {
        let spec = ServerSpec::http("demo", demo.url.clone()).with_protocol(Revision::Auto);
        let client = ToolClient::connect(&spec).await.expect("auto connects");
        assert_eq!(client.protocol_version(), protocol);
        assert_eq!(client.state(), state);
        assert_eq!(client.session_id().is_some(), session, "{protocol}");
        let out = client
            .call("get_panorama", obj(json!({"id": "PANO-003-0611"})))
            .await
            .expect("a call answers");
        assert!(!out.is_error, "{protocol}");
        client.shutdown().await;
    }
    let spec = ServerSpec::http("demo", legacy.url.clone()).with_protocol(Revision::Stateless);
    let err = ToolClient::connect(&spec)
        .await
        .expect_err("2026-07-28 alone does not speak to a legacy server");
    assert_eq!(err.kind(), "connect", "{err}");
    modern.shutdown().await;
    legacy.shutdown().await;
}

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

/// A destructive call whose response stream breaks after it went out (the
/// stateless server is killed mid-call): the call is reported as outcome
/// unknown, never re-sent, and the connection table took
/// `stream-broken-outcome-unknown`. The tool server's counter saw it once.
#[tokio::test]
async fn a_broken_stream_on_a_destructive_call_is_outcome_unknown() {
    let options = DemoOptions {
        stateless: true,
        call_delay: Duration::from_millis(800),
        ..DemoOptions::default()
    };
    let demo = DemoServer::start(loopback(), options).await.unwrap();
    let spec = ServerSpec::http("demo", demo.url.clone()).with_protocol(Revision::Stateless);
    let opts = ClientOptions {
        watch_every: None,
        ..ClientOptions::default()
    };
    let client = ToolClient::connect_with(&spec, opts).await.unwrap();
    assert_eq!(client.state(), ConnectionState::Stateless);
    // `prepare_seat_reservation` changes the backend: it is not read-only.
    assert!(!client.retry_safe("prepare_seat_reservation"));
    let call = client.call(
        "prepare_seat_reservation",
        obj(json!({"seat": "12", "time": "15:00"})),
    );
    let kill = async {
        // The request is out and the handler waits (`call_delay`).
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while demo.tool_calls("prepare_seat_reservation") == 0 {
            assert!(std::time::Instant::now() < deadline, "the call arrived");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let counted = demo.tool_calls("prepare_seat_reservation");
        demo.shutdown().await;
        counted
    };
    let (result, counted) = tokio::join!(call, kill);
    let err = result.expect_err("no answer came back");
    assert!(matches!(err, McpError::Unanswered { .. }), "{err:?}");
    assert_eq!(err.kind(), "outcome_unknown");
    assert!(
        err.to_string().contains("whether it ran is unknown"),
        "{err}"
    );
    assert_eq!(counted, 1, "the server saw the call once");
    let trace = client.trace();
    assert!(
        trace.iter().any(|r| r == "stream-broken-outcome-unknown"),
        "{trace:?}"
    );
    assert!(!trace.iter().any(|r| r.contains("resend")), "{trace:?}");
    client.shutdown().await;
}

/// `turnstile mcp --protocol` speaks the revision asked for and prints the
/// one the server agreed to.
#[tokio::test]
async fn turnstile_mcp_prints_the_negotiated_revision() {
    let demo = DemoServer::start(
        loopback(),
        DemoOptions {
            stateless: true,
            ..DemoOptions::default()
        },
    )
    .await
    .unwrap();
    for (asked, agreed) in [
        ("2026-07-28", "protocol: 2026-07-28"),
        ("auto", "protocol: 2026-07-28"),
        ("2025-11-25", "protocol: 2025-11-25"),
    ] {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnstile"))
            .args(["mcp", "--protocol", asked, &demo.url])
            .output()
            .await
            .expect("turnstile mcp runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{asked}: {stdout}");
        assert!(stdout.contains(agreed), "{asked}: {stdout}");
    }
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnstile"))
        .args(["mcp", "--protocol", "2027-01-01", &demo.url])
        .output()
        .await
        .expect("turnstile mcp runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a revision"));
    demo.shutdown().await;
}
