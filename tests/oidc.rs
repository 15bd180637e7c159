//! Callers' OIDC tokens verified locally (issue 40 §5), against a real
//! OpenID Connect provider run on loopback: panva's `oidc-provider` (npm,
//! OpenID-certified; tests/interop/oidc_provider.mjs starts it). The
//! server reads the issuer's discovery document and JWKS and checks each
//! bearer itself: a valid token is accepted and owns its threads; a key
//! rotated away, another audience, an expired token, `alg: none` and a
//! token "signed" with the public key as an HMAC secret each get 401 with
//! the ownership table's row and the reason; an issuer that cannot be
//! reached with no cached key is 503. No token reaches the log.

use crate::common;

use std::time::Duration;

use common::server::TestServer;
use serde_json::{json, Value};

const AUDIENCE: &str = "https://turnstile.test";

struct Provider {
    _child: tokio::process::Child,
    issuer: String,
    http: reqwest::Client,
}

impl Provider {
    async fn start() -> Provider {
        let (child, issuer) =
            common::remote::oidc_provider("oidc_provider.mjs", &["0".to_string()]).await;
        Provider {
            _child: child,
            issuer,
            http: reqwest::Client::new(),
        }
    }

    /// An access token for `aud` and `sub`, with `claims` and a lifetime.
    async fn token(&self, aud: &str, sub: &str, claims: Value, ttl: u64) -> String {
        let r = self
            .http
            .post(format!("{}/token", self.issuer))
            .basic_auth("test", Some("secret"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form(&[
                ("grant_type", "client_credentials"),
                ("resource", aud),
                ("scope", "read"),
                ("x_sub", sub),
                ("x_claims", &claims.to_string()),
                ("x_ttl", &ttl.to_string()),
            ]))
            .send()
            .await
            .unwrap();
        let body: Value = r.json().await.unwrap();
        body["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("a token: {body}"))
            .to_string()
    }

    /// A new signing key; the old one leaves the JWKS.
    async fn rotate(&self) {
        let r = (self.http.post(format!("{}/admin/rotate", self.issuer)))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success());
    }

    /// The issuer's published keys.
    async fn jwks(&self) -> Value {
        let d: Value = reqwest::get(format!("{}/.well-known/openid-configuration", self.issuer))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        reqwest::get(d["jwks_uri"].as_str().unwrap())
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }
}

/// `application/x-www-form-urlencoded`: every byte but `[A-Za-z0-9]`
/// percent-encoded.
fn form(pairs: &[(&str, &str)]) -> String {
    let enc = |s: &str| {
        s.bytes()
            .map(|b| match b.is_ascii_alphanumeric() {
                true => (b as char).to_string(),
                false => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

fn auth(issuer: &str) -> turnstile::http::AuthConfig {
    let section = format!(
        "[auth.oidc]\nissuer = \"{issuer}\"\naudience = \"{AUDIENCE}\"\nleeway_secs = 0\ntiers_claim = \"tiers\"\n"
    );
    common::config_with(&section, &|_| None)
        .unwrap_or_else(|e| panic!("{e}"))
        .auth
}

/// `POST /v1/threads` with `token`: the status and the body.
async fn create(base: &str, token: &str) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{base}/v1/threads"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn b64(v: &Value) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
}

fn payload(token: &str) -> Value {
    use base64::Engine;
    let part = token.split('.').nth(1).unwrap();
    serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(part)
            .unwrap(),
    )
    .unwrap()
}

#[tokio::test]
#[ignore = "needs node and the npm oidc-provider: scripts/test-deps, run with --include-ignored"]
async fn oidc_tokens_are_verified_locally_against_a_real_provider() {
    common::logs::capture();
    let idp = Provider::start().await;
    let s = TestServer::builder().auth(auth(&idp.issuer)).start().await;
    let base = s.base.clone();

    // A valid token: accepted; its subject owns the thread.
    let ana = idp
        .token(AUDIENCE, "user-ana", json!({"tiers": ["basic"]}), 300)
        .await;
    let (status, body) = create(&base, &ana).await;
    assert_eq!(status, 201, "{body}");
    let thread = body["thread_id"].as_str().unwrap().to_string();
    let bo = idp.token(AUDIENCE, "user-bo", json!({}), 300).await;
    let read = |token: String| {
        let url = format!("{base}/v1/threads/{thread}");
        async move {
            (reqwest::Client::new()
                .get(url)
                .bearer_auth(token)
                .send()
                .await
                .unwrap())
            .status()
            .as_u16()
        }
    };
    assert_eq!(read(ana.clone()).await, 200);
    assert_eq!(
        read(bo.clone()).await,
        404,
        "another subject's thread is not found"
    );

    // Each hostile token: 401, with the reason.
    let refused = |what: &'static str, token: String, why: &'static str| {
        let base = base.clone();
        async move {
            let (status, body) = create(&base, &token).await;
            assert_eq!(status, 401, "{what}: {body}");
            assert!(body.to_string().contains(why), "{what}: {body}");
            assert_eq!(body["table"], "ownership", "{what}: {body}");
            assert!(body["row_id"].is_string(), "{what}: {body}");
        }
    };
    let other = idp
        .token("https://another.api", "user-ana", json!({}), 300)
        .await;
    refused("another audience", other, "another audience").await;
    let short = idp.token(AUDIENCE, "user-ana", json!({}), 1).await;
    tokio::time::sleep(Duration::from_millis(2200)).await;
    refused("an expired token", short, "expired").await;
    let none = format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "typ": "JWT"})),
        b64(&payload(&ana))
    );
    refused("alg none", none, "not a signed JWT").await;
    // HS256 "signed" with the issuer's public key as the shared secret.
    let jwks = idp.jwks().await;
    let public = &jwks["keys"][0];
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    header.kid = public["kid"].as_str().map(str::to_string);
    let forged = jsonwebtoken::encode(
        &header,
        &payload(&ana),
        &jsonwebtoken::EncodingKey::from_secret(public.to_string().as_bytes()).unwrap(),
    )
    .unwrap();
    refused(
        "HMAC with the public key",
        forged,
        "algorithm is not allowed",
    )
    .await;

    // A key rotated away: a token of the new key refreshes the keys, and
    // one of the old key is refused from then on.
    idp.rotate().await;
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let fresh = idp.token(AUDIENCE, "user-ana", json!({}), 300).await;
    assert_eq!(create(&base, &fresh).await.0, 201, "a token of the new key");
    refused("a key rotated away", ana.clone(), "no key of the issuer").await;

    let log = common::logs::text();
    for t in [&ana, &bo, &fresh] {
        assert!(!log.contains(t.as_str()), "a token is in the log");
    }
    s.pass();

    // An issuer that cannot be reached, no key cached: 503.
    let dead = format!("http://127.0.0.1:{}", common::free_port());
    let s = TestServer::builder().auth(auth(&dead)).start().await;
    let (status, body) = create(&s.base, &fresh).await;
    assert_eq!(status, 503, "{body}");
    s.pass();
}

#[test]
fn a_bad_oidc_section_is_refused_with_its_key() {
    let ok = "[auth.oidc]\nissuer = \"https://id.example\"\naudience = \"api\"\n";
    let c = common::config_with(ok, &|_| None).expect("valid");
    let oidc = c.auth.oidc.expect("the oidc settings");
    assert_eq!(
        oidc.issuer, "https://id.example",
        "the issuer is kept as written"
    );
    assert_eq!(oidc.subject_claim, "sub");
    assert_eq!(oidc.leeway, Duration::from_secs(30));
    for (section, key) in [
        ("[auth.oidc]\naudience = \"api\"\n", "auth.oidc.issuer"),
        ("[auth.oidc]\nissuer = \"https://id.example\"\n", "auth.oidc.audience"),
        ("[auth.oidc]\nissuer = \"https://id.example\"\naudience = \"api\"\nalgorithms = [\"HS256\"]\n", "auth.oidc.algorithms"),
        ("[auth.oidc]\nissuer = \"https://id.example\"\naudience = \"api\"\nalgorithms = [\"none\"]\n", "auth.oidc.algorithms"),
        ("[auth.oidc]\nissuer = \"https://id.example\"\naudience = \"api\"\nleeway_secs = 900\n", "auth.oidc.leeway_secs"),
        ("[auth]\nverifier_url = \"https://v.example/me\"\n[auth.oidc]\nissuer = \"https://id.example\"\naudience = \"api\"\n", "auth.oidc"),
    ] {
        let err = common::config_with(section, &|_| None)
            .expect_err(section)
            .to_string();
        assert!(err.contains(&format!("`{key}`")), "{section}: {err}");
    }
}
