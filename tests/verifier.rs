//! The bearer verifier's rows (issue 20 §1, seed 002), against the demo
//! tool server's real `/api/auth/me` over HTTP: a verified subject owns
//! its threads across logins, a rejection is 401, a verifier that is slow,
//! failing or answering nonsense is 503, and no refused request reaches
//! the agent or becomes anonymous. Promotion with a real bearer, and an
//! approval decided only by the thread's owner, who is recorded.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use turnstile::http::{AuthConfig, VerifierConfig};
use turnstile_demo::{DemoOptions, DemoServer, VerifierFault};

use crate::common::frames::{is_done, read_frames};
use crate::common::server::TestServer;
use crate::identity::{missing, Caller};

async fn with_verifier() -> (TestServer, Vec<String>, String) {
    let demo = DemoServer::start("127.0.0.1:0".parse().unwrap(), DemoOptions::default())
        .await
        .unwrap();
    let tokens: Vec<String> = demo.demo_users().into_iter().map(|u| u.token).collect();
    let expired = demo.expired_token();
    let auth = AuthConfig {
        verifier: Some(VerifierConfig {
            url: demo.verifier_url().parse().unwrap(),
            timeout: Duration::from_secs(3),
            cache_ttl: Duration::ZERO,
        }),
        ..AuthConfig::default()
    };
    let s = TestServer::builder().demo(demo).auth(auth).start().await;
    (s, tokens, expired)
}

fn bearer(s: &TestServer, token: &str) -> Caller {
    Caller::new(s, &[("authorization", &format!("Bearer {token}"))])
}

fn row(body: &str) -> Option<String> {
    let v: Value = serde_json::from_str(body).ok()?;
    v["row_id"].as_str().map(str::to_string)
}

#[tokio::test]
async fn a_verified_subject_owns_its_threads_across_logins() {
    let (s, tokens, _) = with_verifier().await;
    let ana = bearer(&s, &tokens[0]);
    let thread = ana.thread().await;
    let (status, body) = ana
        .send(
            "POST",
            &format!("/v1/threads/{thread}/messages"),
            Some(json!({"text": "show safety issues on floor 3"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(is_done(&read_frames(body.as_bytes())));
    // A new client with the same token: a new login, the same subject.
    let again = bearer(&s, &tokens[0]);
    assert_eq!(again.listed().await, vec![thread.clone()]);
    // Bo's takeover attempt: 404 on every route, like a missing thread.
    let bo = bearer(&s, &tokens[1]);
    assert_eq!(bo.every_route(&thread).await, missing(&bo).await);
    assert!(bo.listed().await.is_empty());
    s.pass();
}

#[tokio::test]
async fn a_rejected_or_malformed_bearer_is_401_and_never_anonymous() {
    let (s, tokens, expired) = with_verifier().await;
    let ana = bearer(&s, &tokens[0]);
    let thread = ana.thread().await;
    let cases: Vec<(String, &str)> = vec![
        (format!("Bearer {expired}"), "bearer-rejected"),
        (
            "Bearer 0123456789abcdef0123456789abcdef".into(),
            "bearer-rejected",
        ),
        (format!("Basic {}", tokens[0]), "bearer-malformed"),
        ("Bearer".into(), "bearer-malformed"),
        (format!("Bearer {} extra", tokens[0]), "bearer-malformed"),
    ];
    for (header, want) in cases {
        let c = Caller::new(&s, &[("authorization", &header)]);
        for (status, body) in c
            .every_route(&thread)
            .await
            .into_iter()
            .chain([c.create().await])
        {
            assert_eq!(status, 401, "{header}: {body}");
            assert_eq!(row(&body).as_deref(), Some(want), "{header}: {body}");
        }
    }
    // Nothing reached the agent: the thread has no message.
    let (_, body) = ana
        .send("GET", &format!("/v1/threads/{thread}"), None)
        .await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(v["messages"].as_array().unwrap().is_empty(), "{v}");
    s.pass();
}

#[tokio::test]
async fn a_slow_failing_or_nonsense_verifier_is_503_and_reaches_no_agent() {
    let (s, tokens, _) = with_verifier().await;
    let ana = bearer(&s, &tokens[0]);
    let thread = ana.thread().await;
    let demo = s.demo.as_ref().unwrap();
    let searches = demo.tool_calls("search_photos");
    for fault in [
        VerifierFault::Slow(Duration::from_secs(5)),
        VerifierFault::ServerError,
        VerifierFault::Malformed,
    ] {
        demo.set_verifier_fault(fault);
        let asked = Instant::now();
        let (status, body) = ana
            .send(
                "POST",
                &format!("/v1/threads/{thread}/messages"),
                Some(json!({"text": "show safety issues on floor 3"})),
            )
            .await;
        let took = asked.elapsed();
        assert_eq!(status, 503, "{fault:?}: {body}");
        assert_eq!(
            row(&body).as_deref(),
            Some("verifier-unavailable"),
            "{body}"
        );
        // The limit is 3 s, whatever the verifier does.
        assert!(
            took < Duration::from_millis(4500),
            "{fault:?} took {took:?}"
        );
    }
    demo.set_verifier_fault(VerifierFault::None);
    // No turn ran: no message stored, no tool called.
    let (status, body) = ana
        .send("GET", &format!("/v1/threads/{thread}"), None)
        .await;
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(v["messages"].as_array().unwrap().is_empty(), "{v}");
    assert_eq!(demo.tool_calls("search_photos"), searches);
    s.pass();
}

#[tokio::test]
async fn a_session_thread_is_promoted_by_a_real_bearer_once() {
    let (s, tokens, _) = with_verifier().await;
    let browser = Caller::new(&s, &[]);
    let thread = browser.thread().await;
    let auth = format!("Bearer {}", tokens[0]);
    let signed_in = Caller::with_jar_of(&browser, &s, &[("authorization", &auth)]);
    let (status, body) = signed_in
        .send("GET", &format!("/v1/threads/{thread}"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    // Ana from anywhere keeps it; the old session alone no longer reaches it.
    assert_eq!(bearer(&s, &tokens[0]).listed().await, vec![thread.clone()]);
    assert_eq!(browser.every_route(&thread).await, missing(&browser).await);
    // Bo with the old session cookie: no second promotion.
    let bo = format!("Bearer {}", tokens[1]);
    let other = Caller::with_jar_of(&browser, &s, &[("authorization", &bo)]);
    assert_eq!(other.every_route(&thread).await, missing(&other).await);
    assert_eq!(bearer(&s, &tokens[0]).listed().await, vec![thread]);
    s.pass();
}

#[tokio::test]
async fn only_the_owner_decides_an_approval_and_is_recorded_as_its_approver() {
    let (s, tokens, _) = with_verifier().await;
    let ana = bearer(&s, &tokens[0]);
    let thread = ana.thread().await;
    let (status, body) = ana
        .send(
            "POST",
            &format!("/v1/threads/{thread}/messages"),
            Some(json!({"text": "reserve seat 12 at 15:00"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let frames = read_frames(body.as_bytes());
    let interrupt = (frames.iter())
        .find_map(|f| match f {
            turnstile::wire::Frame::Interrupt(i) => Some(i.interrupt_id.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no interrupt: {frames:?}"));
    let decision = json!({"interrupt_id": interrupt, "decision": "approve"});
    let path = format!("/v1/threads/{thread}/resume");
    let bo = bearer(&s, &tokens[1]);
    let (status, _) = bo.send("POST", &path, Some(decision.clone())).await;
    assert_eq!(status, 404);
    let (status, body) = ana.send("POST", &path, Some(decision)).await;
    assert_eq!(status, 200, "{body}");
    assert!(is_done(&read_frames(body.as_bytes())));
    let store = turnstile::store::Store::connect(&s.db_url).await.unwrap();
    let approver = store
        .approver(&interrupt)
        .await
        .unwrap()
        .expect("an approver");
    let owner = store
        .ownership(&thread)
        .await
        .unwrap()
        .unwrap()
        .owner
        .unwrap();
    assert_eq!(approver, owner.key);
    assert!(!approver.contains("user-ana"));
    s.pass();
}

/// Tokens, subjects, session ids and the service key never reach a log
/// line: every identity path is run with the whole log captured (turnstile
/// and the HTTP client at trace), then the log is searched for each value.
#[tokio::test]
async fn no_token_subject_session_or_key_reaches_the_log() {
    crate::common::init_tracing();
    let (s, tokens, expired) = with_verifier().await;
    let ana = bearer(&s, &tokens[0]);
    let thread = ana.thread().await;
    let said = ana
        .send(
            "POST",
            &format!("/v1/threads/{thread}/messages"),
            Some(json!({"text": "show safety issues on floor 3"})),
        )
        .await;
    assert_eq!(said.0, 200);
    let _ = bearer(&s, &tokens[1]).every_route(&thread).await;
    let _ = bearer(&s, &expired).create().await;
    s.demo
        .as_ref()
        .unwrap()
        .set_verifier_fault(VerifierFault::ServerError);
    let _ = bearer(&s, &tokens[0]).listed_status().await;
    s.demo
        .as_ref()
        .unwrap()
        .set_verifier_fault(VerifierFault::None);
    // A session cookie, as the server issued it.
    let res = reqwest::Client::new()
        .post(format!("{}/v1/threads", s.base))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    let cookie = res.headers()["set-cookie"].to_str().unwrap().to_string();
    let session = cookie
        .split(';')
        .next()
        .and_then(|c| c.split_once('='))
        .map(|(_, v)| v.to_string())
        .unwrap();
    s.pass();
    // The proxy mode, with its key.
    let p = TestServer::builder()
        .auth(crate::identity::proxy_auth(
            turnstile::http::Mode::Production,
        ))
        .start()
        .await;
    let proxied = crate::identity::proxied(&p, "user-carol", "pro");
    let _ = proxied.thread().await;
    let _ = Caller::new(
        &p,
        &[
            ("x-turnstile-api-key", "wrong-wrong-wrong-wrong"),
            ("x-turnstile-subject", "user-carol"),
        ],
    )
    .create()
    .await;
    p.pass();
    let log = crate::common::logs::text();
    assert!(!log.is_empty());
    for secret in tokens.iter().chain([&expired, &session]) {
        assert!(
            !log.contains(secret.as_str()),
            "a token or session id is in the log"
        );
    }
    for value in [
        "user-ana",
        "user-bo",
        "user-carol",
        crate::identity::KEY,
        "wrong-wrong-wrong-wrong",
    ] {
        assert!(!log.contains(value), "`{value}` is in the log");
    }
}

/// The verifier URL's cache (issue 40 §5): a subject it verified is
/// remembered by a hash of its token for `cache_ttl`, so a second request
/// with the same token asks nobody; a refusal is asked again every time;
/// past the TTL the verifier is asked again.
#[tokio::test]
async fn a_verified_token_is_remembered_for_the_caches_ttl() {
    let demo = DemoServer::start("127.0.0.1:0".parse().unwrap(), DemoOptions::default())
        .await
        .unwrap();
    let tokens: Vec<String> = demo.demo_users().into_iter().map(|u| u.token).collect();
    let url = demo.verifier_url().parse().unwrap();
    let verifier = turnstile::http::Verifier::new(VerifierConfig {
        url,
        timeout: Duration::from_secs(3),
        cache_ttl: Duration::from_millis(800),
    });
    let before = demo.verifier_requests();
    for _ in 0..3 {
        assert!(matches!(
            verifier.verify(&tokens[0]).await,
            turnstile::http::Verified::Subject { .. }
        ));
    }
    assert_eq!(
        demo.verifier_requests() - before,
        1,
        "asked once for three requests"
    );
    assert!(matches!(
        verifier.verify(&tokens[1]).await,
        turnstile::http::Verified::Subject { .. }
    ));
    assert_eq!(
        demo.verifier_requests() - before,
        2,
        "another token is asked about"
    );
    for _ in 0..2 {
        assert!(matches!(
            verifier
                .verify("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
                .await,
            turnstile::http::Verified::Rejected(_)
        ));
    }
    assert_eq!(
        demo.verifier_requests() - before,
        4,
        "a refusal is never remembered"
    );
    tokio::time::sleep(Duration::from_millis(900)).await;
    verifier.verify(&tokens[0]).await;
    assert_eq!(
        demo.verifier_requests() - before,
        5,
        "past the TTL the verifier is asked again"
    );
}
