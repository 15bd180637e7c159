//! The demo's identities (issue 20, seed 002): two demo users with bearer
//! tokens, the verifier endpoint `GET /api/auth/me` that turnstile asks
//! whose a bearer token is, and the fault switches that make that verifier
//! slow, fail or answer nonsense.
//!
//! * `GET /api/auth/me` with `Authorization: Bearer <token>` answers 200
//!   `{"subject": "user-ana", "tiers": ["basic"]}` for a valid token, and
//!   401 `{"error": "invalid_token"}` for anything else: no header, another
//!   scheme, an unknown token, an expired one.
//! * The users: `ana` (`user-ana`, tiers `["basic"]`) and `bo` (`user-bo`,
//!   tiers `["pro"]`), each with a token of 32 random bytes (64 hex
//!   characters) drawn when the server starts; and one more token of ana's
//!   that has expired (always 401).
//! * [`VerifierFault`]: `Slow(d)` waits `d` before answering as usual,
//!   `ServerError` answers 500, `Malformed` answers 200 with a body that is
//!   not the JSON shape above. Every request is counted first, whatever
//!   the fault.
//!
//! Tokens and subjects are never logged: [`DemoUser`]'s `Debug` shows only
//! the name and tiers, and the endpoint logs nothing of what it was sent.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// The verifier's path on the demo server's listener.
pub const VERIFIER_PATH: &str = "/api/auth/me";

/// The body of every 401 the verifier answers.
pub const INVALID_TOKEN: &str = "invalid_token";

/// The `_meta` key under which a tool in `tools/list` declares the licence
/// tier a caller needs: `{"turnstile/licence_tier": "pro"}`.
pub const LICENCE_TIER_META: &str = "turnstile/licence_tier";

/// The licence tiers, lowest first.
pub const TIERS: [&str; 4] = ["free", "basic", "pro", "enterprise"];

/// The tiers the demo tools declare (tool, tier); every other tool declares
/// none (a `turnstile serve` config may add more).
pub const DECLARED_TIERS: [(&str, &str); 2] = [("archive_query", "pro"), ("get_panorama", "basic")];

/// The tier `tool` declares in `tools/list`, if any.
pub fn licence_tier(tool: &str) -> Option<&'static str> {
    DECLARED_TIERS
        .iter()
        .find(|(name, _)| *name == tool)
        .map(|(_, tier)| *tier)
}

/// One demo user and the bearer token that proves it.
#[derive(Clone, PartialEq, Eq)]
pub struct DemoUser {
    /// `ana` or `bo`.
    pub name: String,
    /// What the verifier answers as `subject`: `user-ana`, `user-bo`.
    pub subject: String,
    /// What the verifier answers as `tiers`.
    pub tiers: Vec<String>,
    /// The bearer token (64 hex characters), new each server start.
    pub token: String,
}

/// Name and tiers only: a subject or token in a log line would leak it.
impl fmt::Debug for DemoUser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DemoUser")
            .field("name", &self.name)
            .field("tiers", &self.tiers)
            .finish_non_exhaustive()
    }
}

/// How the verifier misbehaves (settable at start through
/// [`DemoOptions::verifier_fault`](crate::DemoOptions::verifier_fault) and
/// at run time through
/// [`DemoServer::set_verifier_fault`](crate::DemoServer::set_verifier_fault)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum VerifierFault {
    /// Answers as it should.
    #[default]
    None,
    /// Waits this long, then answers as it should.
    Slow(Duration),
    /// Answers 500 `{"error": "server_error"}` to everything.
    ServerError,
    /// Answers 200 with a JSON body that has neither `subject` nor `tiers`
    /// (`{"status": "ok"}`), to everything.
    Malformed,
}

impl VerifierFault {
    /// The CLI name: `none`, `slow:MILLIS`, `server-error`, `malformed`.
    pub fn name(self) -> String {
        match self {
            VerifierFault::None => "none".into(),
            VerifierFault::Slow(d) => format!("slow:{}", d.as_millis()),
            VerifierFault::ServerError => "server-error".into(),
            VerifierFault::Malformed => "malformed".into(),
        }
    }

    /// Parse a CLI name (see [`VerifierFault::name`]).
    pub fn parse(s: &str) -> Result<VerifierFault, String> {
        let s = s.trim();
        match s {
            "none" => Ok(VerifierFault::None),
            "server-error" => Ok(VerifierFault::ServerError),
            "malformed" => Ok(VerifierFault::Malformed),
            _ => s
                .strip_prefix("slow:")
                .and_then(|ms| ms.parse::<u64>().ok())
                .map(|ms| VerifierFault::Slow(Duration::from_millis(ms)))
                .ok_or_else(|| {
                    format!(
                        "unknown verifier fault '{s}' (known: none, slow:MILLIS, server-error, malformed)"
                    )
                }),
        }
    }
}

impl fmt::Display for VerifierFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl std::str::FromStr for VerifierFault {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        VerifierFault::parse(s)
    }
}

/// What a bearer token proves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A demo user's live token.
    Valid(DemoUser),
    /// A token that was a user's and has expired.
    Expired,
    /// Anything else.
    Unknown,
}

/// Who owns private tool state (actions, exports): the subject a session
/// presented a valid bearer token for when it was initialised, or the one
/// shared anonymous owner. Its `Debug` never shows the subject.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub enum Owner {
    /// A session that presented no bearer token.
    #[default]
    Anonymous,
    /// A session initialised with a demo user's valid token.
    Subject(String),
}

impl fmt::Debug for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Owner::Anonymous => f.write_str("Anonymous"),
            Owner::Subject(_) => f.write_str("Subject(..)"),
        }
    }
}

/// 32 random bytes as 64 hex characters (two v4 UUIDs: the OS's randomness,
/// 244 random bits).
fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Equal without stopping at the first difference.
fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The demo users, their tokens, the verifier's fault switch and its
/// request counter.
pub struct Identities {
    users: Vec<DemoUser>,
    expired: String,
    fault: Mutex<VerifierFault>,
    requests: AtomicU64,
}

impl fmt::Debug for Identities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identities")
            .field("users", &self.users)
            .field("fault", &self.fault())
            .finish_non_exhaustive()
    }
}

impl Default for Identities {
    fn default() -> Self {
        Identities::new(VerifierFault::None)
    }
}

impl Identities {
    /// Fresh tokens for ana and bo, and an expired one for ana.
    pub fn new(fault: VerifierFault) -> Self {
        let user = |name: &str, tier: &str| DemoUser {
            name: name.into(),
            subject: format!("user-{name}"),
            tiers: vec![tier.into()],
            token: random_token(),
        };
        Identities {
            users: vec![user("ana", "basic"), user("bo", "pro")],
            expired: random_token(),
            fault: Mutex::new(fault),
            requests: AtomicU64::new(0),
        }
    }

    /// The demo users, ana first.
    pub fn users(&self) -> Vec<DemoUser> {
        self.users.clone()
    }

    /// A token of ana's that has expired.
    pub fn expired_token(&self) -> String {
        self.expired.clone()
    }

    /// What `token` proves.
    pub fn verify(&self, token: &str) -> Verdict {
        // Every candidate is compared, so the time taken says nothing of
        // which one (if any) matched.
        let mut found = None;
        for u in &self.users {
            if same_secret(&u.token, token) {
                found = Some(u.clone());
            }
        }
        let expired = same_secret(&self.expired, token);
        match (found, expired) {
            (Some(u), _) => Verdict::Valid(u),
            (None, true) => Verdict::Expired,
            (None, false) => Verdict::Unknown,
        }
    }

    /// The verifier's fault now.
    pub fn fault(&self) -> VerifierFault {
        *self.fault.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Switch the verifier's fault.
    pub fn set_fault(&self, fault: VerifierFault) {
        *self.fault.lock().unwrap_or_else(|e| e.into_inner()) = fault;
        tracing::info!(fault = %fault, "demo verifier fault switched");
    }

    /// How many requests reached the verifier.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    fn count(&self) {
        self.requests.fetch_add(1, Ordering::SeqCst);
    }
}

/// The token of an `Authorization: Bearer <token>` header; `None` for no
/// header, another scheme, or an empty or malformed token.
pub fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    let value = headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    let well_formed = !token.is_empty() && token.bytes().all(|b| b.is_ascii_graphic());
    (scheme.eq_ignore_ascii_case("bearer") && well_formed).then_some(token)
}

/// Is there an `Authorization` header at all (well-formed or not)?
pub fn presents_credentials(headers: &axum::http::HeaderMap) -> bool {
    headers.contains_key(axum::http::header::AUTHORIZATION)
}

/// What `GET /api/auth/me` answers to `headers` (the server's route calls
/// it): counted first, then the fault, then the token.
pub async fn respond(
    ids: &Identities,
    headers: &axum::http::HeaderMap,
) -> axum::response::Response {
    use axum::http::{header, StatusCode};
    use axum::response::IntoResponse;
    ids.count();
    let json = (header::CONTENT_TYPE, "application/json");
    let no_store = (header::CACHE_CONTROL, "no-store");
    match ids.fault() {
        VerifierFault::None => {}
        VerifierFault::Slow(d) => tokio::time::sleep(d).await,
        VerifierFault::ServerError => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                [json, no_store],
                r#"{"error":"server_error"}"#,
            )
                .into_response()
        }
        VerifierFault::Malformed => {
            return (StatusCode::OK, [json, no_store], r#"{"status":"ok"}"#).into_response()
        }
    }
    match bearer(headers).map(|t| ids.verify(t)) {
        Some(Verdict::Valid(user)) => {
            let body = serde_json::json!({"subject": user.subject, "tiers": user.tiers});
            (StatusCode::OK, [json, no_store], body.to_string()).into_response()
        }
        _ => (
            StatusCode::UNAUTHORIZED,
            [
                json,
                no_store,
                (header::WWW_AUTHENTICATE, r#"Bearer error="invalid_token""#),
            ],
            format!(r#"{{"error":"{INVALID_TOKEN}"}}"#),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{HeaderMap, HeaderValue};

    #[test]
    fn tokens_are_random_hex_and_verify_to_their_user() {
        let ids = Identities::default();
        let other = Identities::default();
        let users = ids.users();
        assert_eq!(
            users
                .iter()
                .map(|u| (u.name.as_str(), u.subject.as_str(), u.tiers.clone()))
                .collect::<Vec<_>>(),
            vec![
                ("ana", "user-ana", vec!["basic".to_string()]),
                ("bo", "user-bo", vec!["pro".to_string()])
            ]
        );
        for (u, o) in users.iter().zip(other.users()) {
            assert_eq!(u.token.len(), 64);
            assert!(u.token.bytes().all(|b| b.is_ascii_hexdigit()));
            assert_ne!(u.token, o.token, "new tokens each start");
            assert_eq!(ids.verify(&u.token), Verdict::Valid(u.clone()));
            assert_eq!(other.verify(&u.token), Verdict::Unknown);
        }
        assert_eq!(ids.verify(&ids.expired_token()), Verdict::Expired);
        assert_eq!(ids.verify(""), Verdict::Unknown);
        let debug = format!("{users:?} {ids:?} {:?}", Owner::Subject("user-ana".into()));
        for u in &users {
            assert!(
                !debug.contains(&u.token) && !debug.contains(&u.subject),
                "{debug}"
            );
        }
    }

    #[test]
    fn bearer_header_parsing() {
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert("authorization", HeaderValue::from_str(v).unwrap());
            h
        };
        assert_eq!(bearer(&with("Bearer abc")), Some("abc"));
        assert_eq!(bearer(&with("bearer  abc ")), Some("abc"));
        assert_eq!(bearer(&with("Basic abc")), None);
        assert_eq!(bearer(&with("Bearer")), None);
        assert_eq!(bearer(&with("Bearer ")), None);
        assert_eq!(bearer(&with("Bearer a b")), None);
        assert_eq!(bearer(&HeaderMap::new()), None);
    }

    #[test]
    fn fault_names_round_trip_and_tiers() {
        for f in [
            VerifierFault::None,
            VerifierFault::Slow(Duration::from_millis(1500)),
            VerifierFault::ServerError,
            VerifierFault::Malformed,
        ] {
            assert_eq!(VerifierFault::parse(&f.name()), Ok(f));
        }
        assert!(VerifierFault::parse("slow").is_err());
        assert_eq!(licence_tier("archive_query"), Some("pro"));
        assert_eq!(licence_tier("get_panorama"), Some("basic"));
        assert_eq!(licence_tier("search_photos"), None);
        for (_, tier) in DECLARED_TIERS {
            assert!(TIERS.contains(&tier));
        }
    }
}
