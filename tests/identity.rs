//! Who may see and do what (issue 20, seed 002), end to end over HTTP with
//! the real store: session-owned threads, the Origin check, the proxy mode
//! with the service API key, the production mode, the one-time promotion of
//! a session's thread to a verified principal, and a principal spoofed in
//! the body. Every refused thread path answers exactly like a thread that
//! does not exist. The bearer verifier's rows are in `tests/verifier.rs`;
//! the licence gate's in `tests/licence.rs`.

use std::time::Duration;

use proptest::prelude::*;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{json, Value};
use turnstile::http::{AuthConfig, Mode, API_KEY_HEADER, SUBJECT_HEADER, TIERS_HEADER};
use turnstile::llm::ApiKey;

use crate::common::server::TestServer;

pub(crate) const KEY: &str = "service-key-0123456789abcdef";

/// One caller: its own cookie jar (a browser, or none) and the headers it
/// sends with every request.
pub(crate) struct Caller {
    base: String,
    pub(crate) http: reqwest::Client,
    /// Headers sent on top of the client's own (a shared jar, other
    /// credentials).
    extra: HeaderMap,
}

impl Caller {
    pub(crate) fn new(s: &TestServer, headers: &[(&str, &str)]) -> Caller {
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            map.insert(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        Caller {
            base: s.base.clone(),
            http: reqwest::Client::builder()
                .cookie_store(true)
                .default_headers(map)
                .build()
                .unwrap(),
            extra: HeaderMap::new(),
        }
    }

    /// The same jar, with other headers (the same browser, signed in).
    pub(crate) fn with_jar_of(other: &Caller, s: &TestServer, headers: &[(&str, &str)]) -> Caller {
        // A clone of a client shares its cookie jar: the same browser.
        let mut c = Caller::new(s, &[]);
        c.http = other.http.clone();
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            map.insert(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        c.extra = map;
        c
    }

    pub(crate) async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, String) {
        let url = format!("{}{path}", self.base);
        let mut r = match method {
            "GET" => self.http.get(url),
            _ => self.http.post(url),
        };
        for (k, v) in &self.extra {
            r = r.header(k, v);
        }
        if let Some(b) = body {
            r = r.json(&b);
        }
        let res = r.send().await.unwrap();
        let status = res.status().as_u16();
        (status, res.text().await.unwrap())
    }

    pub(crate) async fn create(&self) -> (u16, String) {
        self.send("POST", "/v1/threads", Some(json!({}))).await
    }

    pub(crate) async fn thread(&self) -> String {
        let (status, body) = self.create().await;
        assert_eq!(status, 201, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        v["thread_id"].as_str().unwrap().to_string()
    }

    pub(crate) async fn listed_status(&self) -> u16 {
        self.send("GET", "/v1/threads", None).await.0
    }

    pub(crate) async fn listed(&self) -> Vec<String> {
        let (status, body) = self.send("GET", "/v1/threads", None).await;
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        (v["threads"].as_array().unwrap().iter())
            .map(|t| t["thread_id"].as_str().unwrap().to_string())
            .collect()
    }

    /// Every thread route: read, post, resume.
    pub(crate) async fn every_route(&self, thread: &str) -> Vec<(u16, String)> {
        vec![
            self.send("GET", &format!("/v1/threads/{thread}"), None)
                .await,
            self.send(
                "POST",
                &format!("/v1/threads/{thread}/messages"),
                Some(json!({"text": "show safety issues on floor 3"})),
            )
            .await,
            self.send(
                "POST",
                &format!("/v1/threads/{thread}/resume"),
                Some(json!({"interrupt_id": "i-1", "decision": "approve"})),
            )
            .await,
        ]
    }
}

/// What a thread that does not exist answers on every route, for `c`.
pub(crate) async fn missing(c: &Caller) -> Vec<(u16, String)> {
    c.every_route(&uuid::Uuid::new_v4().to_string()).await
}

pub(crate) fn proxy(subject: &str, tiers: &str) -> Vec<(&'static str, String)> {
    vec![
        (API_KEY_HEADER, KEY.to_string()),
        (SUBJECT_HEADER, subject.to_string()),
        (TIERS_HEADER, tiers.to_string()),
    ]
}

pub(crate) fn proxied(s: &TestServer, subject: &str, tiers: &str) -> Caller {
    let h = proxy(subject, tiers);
    let refs: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Caller::new(s, &refs)
}

pub(crate) fn proxy_auth(mode: Mode) -> AuthConfig {
    AuthConfig {
        mode,
        proxy_key: Some(ApiKey::new(KEY)),
        ..AuthConfig::default()
    }
}

fn row(body: &str) -> Option<String> {
    let v: Value = serde_json::from_str(body).ok()?;
    v["row_id"].as_str().map(str::to_string)
}

#[tokio::test]
async fn a_thread_belongs_to_its_session_and_is_hidden_from_every_other() {
    let s = TestServer::builder().start().await;
    let alice = Caller::new(&s, &[]);
    let mallory = Caller::new(&s, &[]);
    let thread = alice.thread().await;
    let (status, body) = alice
        .send("GET", &format!("/v1/threads/{thread}"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(alice.listed().await, vec![thread.clone()]);
    assert!(mallory.listed().await.is_empty());
    // Reading, posting and resuming someone else's thread answer exactly
    // what a thread that does not exist answers: no existence leak.
    let theirs = mallory.every_route(&thread).await;
    assert_eq!(theirs, missing(&mallory).await);
    assert!(theirs.iter().all(|(s, _)| *s == 404), "{theirs:?}");
    // Nothing reached the thread.
    let (_, body) = alice
        .send("GET", &format!("/v1/threads/{thread}"), None)
        .await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(v["messages"].as_array().unwrap().is_empty(), "{v}");
    // The owner hash is not shown.
    assert!(v["thread"]["owner"].is_null(), "{v}");
    // The metrics answer alike whoever asks.
    let (a, _) = alice.send("GET", "/v1/metrics", None).await;
    let (m, _) = mallory.send("GET", "/v1/metrics", None).await;
    assert_eq!((a, m), (200, 200));
    s.pass();
}

#[tokio::test]
async fn the_session_cookie_is_httponly_and_strict() {
    let s = TestServer::builder().start().await;
    let res = reqwest::Client::new()
        .post(format!("{}/v1/threads", s.base))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    let cookie = res.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.starts_with("turnstile_session="), "{cookie}");
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Strict"), "{cookie}");
    assert!(
        !cookie.contains("Secure"),
        "served over plain HTTP: {cookie}"
    );
    s.pass();
    // Production mode (or a TLS proxy in front) marks it Secure.
    let s = TestServer::builder()
        .auth(proxy_auth(Mode::Production))
        .start()
        .await;
    let res = reqwest::Client::new()
        .post(format!("{}/v1/threads", s.base))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    let cookie = res.headers()["set-cookie"].to_str().unwrap();
    assert!(cookie.contains("; Secure"), "{cookie}");
    s.pass();
}

#[tokio::test]
async fn a_page_of_another_origin_cannot_post_with_the_cookie() {
    let s = TestServer::builder().start().await;
    let alice = Caller::new(&s, &[]);
    let thread = alice.thread().await;
    let own = s.base.clone();
    let host = own.trim_start_matches("http://").to_string();
    let foreign = Caller::with_jar_of(&alice, &s, &[("origin", "http://evil.example")]);
    let (status, body) = foreign
        .send(
            "POST",
            &format!("/v1/threads/{thread}/messages"),
            Some(json!({"text": "hello"})),
        )
        .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(row(&body).as_deref(), Some("foreign-origin-write"));
    let (status, _) = foreign.create().await;
    assert_eq!(status, 403);
    // Reading is not a write; the page's own origin may write.
    let (status, _) = foreign
        .send("GET", &format!("/v1/threads/{thread}"), None)
        .await;
    assert_eq!(status, 200);
    let same = Caller::with_jar_of(&alice, &s, &[("origin", &format!("http://{host}"))]);
    let (status, body) = same
        .send(
            "POST",
            &format!("/v1/threads/{thread}/messages"),
            Some(json!({"text": "hello"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    s.pass();
}

#[tokio::test]
async fn a_keyed_proxy_injects_the_subject_and_an_unkeyed_one_is_ignored_or_refused() {
    let s = TestServer::builder()
        .auth(proxy_auth(Mode::Development))
        .start()
        .await;
    let ana = proxied(&s, "user-ana", "basic");
    let thread = ana.thread().await;
    // The same subject through a new connection (a new session): the
    // thread is still its own.
    let again = proxied(&s, "user-ana", "basic");
    assert_eq!(again.listed().await, vec![thread.clone()]);
    let (status, _) = again
        .send("GET", &format!("/v1/threads/{thread}"), None)
        .await;
    assert_eq!(status, 200);
    // Another subject: 404 on every route, like a missing thread.
    let bo = proxied(&s, "user-bo", "pro");
    assert_eq!(bo.every_route(&thread).await, missing(&bo).await);
    // A subject header without the key is ignored in development: the
    // caller is a fresh anonymous session, which owns nothing.
    let spoof = Caller::new(&s, &[(SUBJECT_HEADER, "user-ana")]);
    assert!(spoof.listed().await.is_empty());
    assert_eq!(spoof.every_route(&thread).await, missing(&spoof).await);
    // A wrong key is refused by its row, not ignored.
    let wrong = Caller::new(
        &s,
        &[
            (API_KEY_HEADER, "service-key-0123456789abcdeX"),
            (SUBJECT_HEADER, "user-ana"),
        ],
    );
    let (status, body) = wrong.create().await;
    assert_eq!(
        (status, row(&body).as_deref()),
        (401, Some("proxy-key-wrong")),
        "{body}"
    );
    // A malformed subject with the right key is refused, never anonymous.
    let blank = Caller::new(&s, &[(API_KEY_HEADER, KEY), (SUBJECT_HEADER, "   ")]);
    let (status, body) = blank.create().await;
    assert_eq!(
        (status, row(&body).as_deref()),
        (400, Some("subject-malformed")),
        "{body}"
    );
    s.pass();

    // In production the unkeyed subject header is refused.
    let s = TestServer::builder()
        .auth(proxy_auth(Mode::Production))
        .start()
        .await;
    let spoof = Caller::new(&s, &[(SUBJECT_HEADER, "user-ana")]);
    let (status, body) = spoof.create().await;
    assert_eq!(
        (status, row(&body).as_deref()),
        (401, Some("unkeyed-subject-in-production")),
        "{body}"
    );
    s.pass();
}

#[tokio::test]
async fn a_principal_in_the_body_is_discarded() {
    let s = TestServer::builder()
        .auth(proxy_auth(Mode::Development))
        .start()
        .await;
    let ana = proxied(&s, "user-ana", "basic");
    let bo = proxied(&s, "user-bo", "pro");
    let bos = bo.thread().await;
    // Ana names bo in the body of a post to bo's thread: still ana, 404.
    let (status, body) = ana
        .send(
            "POST",
            &format!("/v1/threads/{bos}/messages"),
            Some(json!({"text": "hello", "principal": "user-bo"})),
        )
        .await;
    assert_eq!(status, 404, "{body}");
    // On her own thread the field is accepted and changes nothing.
    let hers = ana.thread().await;
    let (status, body) = ana
        .send(
            "POST",
            &format!("/v1/threads/{hers}/messages"),
            Some(json!({"text": "hello", "principal": {"subject": "user-bo", "tiers": ["enterprise"]}})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(bo.listed().await, vec![bos]);
    assert_eq!(ana.listed().await, vec![hers]);
    s.pass();
}

#[tokio::test]
async fn a_session_thread_is_promoted_once_and_its_session_alone_is_then_refused() {
    let s = TestServer::builder()
        .auth(proxy_auth(Mode::Development))
        .start()
        .await;
    // Anonymous first: the browser's session owns the thread.
    let browser = Caller::new(&s, &[]);
    let thread = browser.thread().await;
    let said = browser
        .send(
            "POST",
            &format!("/v1/threads/{thread}/messages"),
            Some(json!({"text": "hello"})),
        )
        .await;
    assert_eq!(said.0, 200);
    // The same browser signs in: its session and the verified principal
    // arrive together, and the thread becomes the principal's, once. Eight
    // such requests at once promote it once (a compare-and-swap) and all
    // see it.
    let headers = proxy("user-ana", "basic");
    let refs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let signed_in = Caller::with_jar_of(&browser, &s, &refs);
    let path = format!("/v1/threads/{thread}");
    let reads = futures::future::join_all((0..8).map(|_| signed_in.send("GET", &path, None))).await;
    assert!(reads.iter().all(|(s, _)| *s == 200), "{reads:?}");
    // The principal keeps it through a new session (a re-login).
    let relogin = proxied(&s, "user-ana", "basic");
    assert_eq!(relogin.listed().await, vec![thread.clone()]);
    // The old session alone is refused now, like a missing thread.
    assert_eq!(browser.every_route(&thread).await, missing(&browser).await);
    // And the old session with another principal cannot promote it again.
    let headers = proxy("user-bo", "pro");
    let refs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let other = Caller::with_jar_of(&browser, &s, &refs);
    assert_eq!(other.every_route(&thread).await, missing(&other).await);
    assert_eq!(relogin.listed().await, vec![thread.clone()]);
    // The store holds hashes, never the subject or the session id, and
    // remembers the session the promotion replaced.
    let store = turnstile::store::Store::connect(&s.db_url).await.unwrap();
    let o = store.ownership(&thread).await.unwrap().unwrap();
    let owner = o.owner.unwrap();
    assert_eq!(owner.kind, turnstile::store::OwnerKind::Principal);
    assert_eq!(owner.key.len(), 64);
    assert!(!owner.key.contains("user-ana"));
    assert!(o
        .promoted_from
        .is_some_and(|p| p.len() == 64 && p != owner.key));
    s.pass();
}

/// A turn that a refused request would have started: nothing of it
/// exists, whatever the wait.
#[tokio::test]
async fn refused_requests_reach_no_agent() {
    let s = TestServer::builder()
        .auth(proxy_auth(Mode::Production))
        .start()
        .await;
    let ana = proxied(&s, "user-ana", "basic");
    let thread = ana.thread().await;
    let wrong = Caller::new(
        &s,
        &[
            (API_KEY_HEADER, "nope-nope-nope-nope-nope"),
            (SUBJECT_HEADER, "user-ana"),
        ],
    );
    let (status, _) = wrong
        .send(
            "POST",
            &format!("/v1/threads/{thread}/messages"),
            Some(json!({"text": "show safety issues on floor 3"})),
        )
        .await;
    assert_eq!(status, 401);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (_, body) = ana
        .send("GET", &format!("/v1/threads/{thread}"), None)
        .await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(v["messages"].as_array().unwrap().is_empty(), "{v}");
    s.pass();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Any Authorization, cookie, subject, tiers and key header: parsing
    /// never panics, and a request that carries an Authorization header is
    /// never read as one without credentials.
    #[test]
    fn credential_parsing_never_panics_and_never_goes_anonymous(
        auth in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..80)),
        scheme in prop_oneof![Just("Bearer "), Just("bearer "), Just("Basic "), Just(""), Just("Bearer  ")],
        cookie in proptest::collection::vec(any::<u8>(), 0..120),
        subject in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
        tiers in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
        key in proptest::option::of("[ -~]{0,40}"),
    ) {
        let mut h = HeaderMap::new();
        if let Some(a) = &auth {
            let mut v = scheme.as_bytes().to_vec();
            v.extend_from_slice(a);
            if let Ok(v) = HeaderValue::from_bytes(&v) {
                h.insert("authorization", v);
            }
        }
        if let Ok(v) = HeaderValue::from_bytes(&cookie) {
            h.insert("cookie", v);
        }
        if let Some(sub) = subject.as_ref().and_then(|s| HeaderValue::from_bytes(s).ok()) {
            h.insert(SUBJECT_HEADER, sub);
        }
        if let Some(t) = tiers.as_ref().and_then(|s| HeaderValue::from_bytes(s).ok()) {
            h.insert(TIERS_HEADER, t);
        }
        if let Some(k) = key.as_ref().and_then(|s| HeaderValue::from_str(s).ok()) {
            h.insert(API_KEY_HEADER, k);
        }
        let p = turnstile::http::presented(&h);
        if h.contains_key("authorization") {
            let bearer = matches!(
                p,
                turnstile::http::Presented::Bearer(_) | turnstile::http::Presented::BearerMalformed
            );
            prop_assert!(bearer, "{p:?}");
        }
        if let turnstile::http::Presented::Bearer(t) = p {
            prop_assert!(!t.is_empty() && !t.contains(' '));
        }
        if let Some(c) = turnstile::http::session_cookie(&h) {
            prop_assert_eq!(c.len(), 64);
        }
    }
}
