//! Who a request's caller is, and whether the thread it names is theirs
//! (issue 20 §1–3, seed 002), through `tables/ownership.ron`.
//!
//! Code classifies; the table decides:
//! - the credentials into one event: a bearer (verified, rejected,
//!   malformed, verifier unavailable), a keyed proxy's injected subject, a
//!   subject header without the key, a cookie-borne write from another
//!   origin, or none (the session-owned anonymous flow);
//! - then what the request asks of a thread: create, list, its own, a
//!   session-owned thread met with a verified principal (promoted once), or
//!   someone else's.
//!
//! A request that presented a bearer is never downgraded to the anonymous
//! flow. A principal is stored as sha256(subject), a session as
//! sha256(session id) (docs/identity.md); raw tokens, subjects, session ids
//! and the service API key never reach a log line.
//!
//! A thread that is not the caller's is answered exactly like one that does
//! not exist: the same 404 body, no row id (which would tell them apart).

use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::error::ApiError;
use super::verifier::{Verified, Verifier, VerifierConfig, MAX_SUBJECT, MAX_TIER, MAX_TIERS};
use crate::agent::Access;
use crate::fsm::Violation;
use crate::protocols::ownership::{Ownership, OwnershipEffect, OwnershipEvent};
use crate::protocols::{telemetry, Bound, Typed, TypedStep};
use crate::store::{Owner, OwnerKind, Store};

/// The session cookie of the anonymous flow.
pub const SESSION_COOKIE: &str = "turnstile_session";
/// Default header names of the proxy mode.
pub const SUBJECT_HEADER: &str = "x-turnstile-subject";
pub const TIERS_HEADER: &str = "x-turnstile-tiers";
pub const API_KEY_HEADER: &str = "x-turnstile-api-key";
/// Longest bearer token read.
const MAX_TOKEN: usize = 4096;

/// How strict the edge is (`auth.mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Mode {
    /// A subject header without the service API key is ignored.
    #[default]
    Development,
    /// It is refused (row `unkeyed-subject-in-production`), and session
    /// cookies are `Secure`.
    Production,
}

/// The identity settings of the server (`[auth]` in the config file).
#[derive(Clone, Default)]
pub struct AuthConfig {
    pub mode: Mode,
    /// The bearer verifier; `None`: a bearer is refused (401) unless
    /// `oidc` verifies it.
    pub verifier: Option<VerifierConfig>,
    /// Bearer tokens verified locally against an OIDC issuer's keys
    /// (`[auth.oidc]`); exclusive with `verifier`.
    pub oidc: Option<super::oidc::OidcConfig>,
    /// The service API key a proxy presents to inject a subject; `None`:
    /// no proxy is trusted.
    pub proxy_key: Option<crate::llm::ApiKey>,
    /// `Secure` on the session cookie in development mode too (served
    /// over TLS by a proxy in front).
    pub secure_cookies: bool,
    /// Origins besides the server's own whose pages may write with the
    /// session cookie (`http.cors_origins`).
    pub origins: Vec<String>,
}

impl std::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthConfig")
            .field("mode", &self.mode)
            .field("verifier", &self.verifier)
            .field("oidc", &self.oidc)
            .field("proxy_key", &self.proxy_key.as_ref().map(|_| "[redacted]"))
            .field("secure_cookies", &self.secure_cookies)
            .field("origins", &self.origins)
            .finish()
    }
}

/// Who checks a bearer token: the verifier URL, or the OIDC issuer's keys.
enum Bearer {
    Url(Verifier),
    Oidc(super::oidc::OidcVerifier),
}

impl Bearer {
    async fn verify(&self, token: &str) -> Verified {
        match self {
            Bearer::Url(v) => v.verify(token).await,
            Bearer::Oidc(v) => v.verify(token).await,
        }
    }
}

/// The edge: the settings, the verifier, the table and the store.
pub struct Identity {
    cfg: AuthConfig,
    verifier: Option<Bearer>,
    table: Bound<Ownership>,
    store: Store,
    /// What an anonymous caller holds.
    anonymous: Access,
}

/// The credentials of one request, as read from its headers.
#[derive(Debug, PartialEq, Eq)]
pub enum Presented<'a> {
    Bearer(&'a str),
    BearerMalformed,
    Proxy {
        key: &'a [u8],
        subject: Option<Result<&'a str, ()>>,
        tiers: Result<Vec<String>, ()>,
    },
    UnkeyedSubject,
    None,
}

/// Reads the credentials a request presents. Never fails: a malformed
/// header is its own answer, never "no credential".
pub fn presented(headers: &HeaderMap) -> Presented<'_> {
    let mut auth = headers.get_all(header::AUTHORIZATION).iter();
    if let Some(first) = auth.next() {
        if auth.next().is_some() {
            return Presented::BearerMalformed;
        }
        return match bearer(first) {
            Some(t) => Presented::Bearer(t),
            None => Presented::BearerMalformed,
        };
    }
    let key = single(headers, API_KEY_HEADER);
    let subject = single(headers, SUBJECT_HEADER);
    match key {
        Some(Ok(k)) => Presented::Proxy {
            key: k.as_bytes(),
            subject: subject.map(|s| s.and_then(subject_text)),
            tiers: tiers(headers),
        },
        Some(Err(())) => Presented::Proxy {
            key: b"",
            subject: None,
            tiers: Err(()),
        },
        None if subject.is_some() => Presented::UnkeyedSubject,
        None => Presented::None,
    }
}

/// A header that appears at most once; `Err` when repeated.
fn single<'a>(headers: &'a HeaderMap, name: &str) -> Option<Result<&'a HeaderValue, ()>> {
    let mut all = headers.get_all(name).iter();
    let first = all.next()?;
    Some(match all.next() {
        Some(_) => Err(()),
        None => Ok(first),
    })
}

/// `Bearer <token>`: the scheme in any case, one or more spaces, an RFC
/// 6750 `b64token` of at most [`MAX_TOKEN`] bytes.
pub fn bearer(value: &HeaderValue) -> Option<&str> {
    let s = value.to_str().ok()?;
    let (scheme, rest) = s.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = rest.trim_start_matches(' ');
    let body = token.trim_end_matches('=');
    let ok = !body.is_empty()
        && token.len() <= MAX_TOKEN
        && (body.bytes()).all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b));
    ok.then_some(token)
}

fn subject_text(v: &HeaderValue) -> Result<&str, ()> {
    let s = v.to_str().map_err(|_| ())?.trim();
    let ok = !s.is_empty() && s.len() <= MAX_SUBJECT && !s.chars().any(char::is_control);
    ok.then_some(s).ok_or(())
}

/// The proxy's tiers header: comma-separated names; absent is none.
fn tiers(headers: &HeaderMap) -> Result<Vec<String>, ()> {
    let Some(v) = single(headers, TIERS_HEADER) else {
        return Ok(Vec::new());
    };
    let s = v?.to_str().map_err(|_| ())?;
    let names: Vec<String> = (s.split(','))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect();
    let ok = names.len() <= MAX_TIERS
        && (names.iter()).all(|t| t.len() <= MAX_TIER && !t.chars().any(char::is_control));
    ok.then_some(names).ok_or(())
}

/// The session id in the request's cookie, if it is one this server could
/// have issued (64 lowercase hex digits).
pub fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    (headers.get_all(header::COOKIE).iter())
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value.trim())
        .filter(|v| v.len() == 64 && v.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// sha256 of a kind-tagged value, lowercase hex.
fn hash(kind: &str, value: &str) -> String {
    let digest = Sha256::new()
        .chain_update(kind.as_bytes())
        .chain_update(b":")
        .chain_update(value.as_bytes())
        .finalize();
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A fresh session id: 256 bits from two v4 UUIDs' random parts (244 bits).
fn new_session() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// The caller of one request, once identified.
pub struct Caller {
    /// The session's hash, if the caller has a session.
    session: Option<String>,
    /// A session issued with this response (its raw id, for the cookie).
    issued: Option<String>,
    /// sha256 of the verified subject.
    principal: Option<String>,
    pub access: Access,
    machine: Typed<Ownership>,
    secure: bool,
}

/// What a thread request was granted.
pub enum Granted {
    /// The caller's own thread (promoted now, if it was the session's).
    Thread,
    /// A thread created for the caller.
    Created(crate::store::Thread),
    /// The caller's threads.
    List(Vec<crate::store::Thread>),
}

impl Identity {
    pub fn new(
        cfg: AuthConfig,
        table: Bound<Ownership>,
        store: Store,
        anonymous: Access,
    ) -> Identity {
        let verifier = match (&cfg.oidc, &cfg.verifier) {
            (Some(o), _) => Some(Bearer::Oidc(super::oidc::OidcVerifier::new(o.clone()))),
            (None, Some(v)) => Some(Bearer::Url(Verifier::new(v.clone()))),
            (None, None) => None,
        };
        Identity {
            cfg,
            verifier,
            table,
            store,
            anonymous,
        }
    }

    /// Identifies the caller: the `Arrived → Identified` half of the table.
    pub async fn identify(&self, headers: &HeaderMap, method: &Method) -> Result<Caller, ApiError> {
        let mut machine = self.table.machine();
        let mut access = self.anonymous.clone();
        let mut principal = None;
        let mut detail = "";
        let event = match presented(headers) {
            Presented::BearerMalformed => OwnershipEvent::BearerMalformed,
            Presented::Bearer(token) => match &self.verifier {
                None => {
                    detail = "this server has no bearer verifier configured";
                    OwnershipEvent::BearerRejected
                }
                Some(v) => match v.verify(token).await {
                    Verified::Subject { subject, tiers } => {
                        principal = Some(hash("principal", &subject));
                        access = Access::new(tiers);
                        OwnershipEvent::BearerVerified
                    }
                    Verified::Rejected(why) => {
                        detail = why;
                        OwnershipEvent::BearerRejected
                    }
                    Verified::Unavailable(why) => {
                        detail = why;
                        OwnershipEvent::VerifierUnavailable
                    }
                },
            },
            Presented::Proxy {
                key,
                subject,
                tiers,
            } => match self.key_matches(key) {
                false => OwnershipEvent::ProxyKeyWrong,
                true => match (subject, tiers) {
                    (None, _) => self.anonymous_event(headers, method),
                    (Some(Ok(subject)), Ok(tiers)) => {
                        principal = Some(hash("principal", subject));
                        access = Access::new(tiers);
                        OwnershipEvent::ProxySubject
                    }
                    _ => OwnershipEvent::SubjectMalformed,
                },
            },
            Presented::UnkeyedSubject => match self.cfg.mode {
                Mode::Production => OwnershipEvent::UnkeyedSubjectInProduction,
                Mode::Development => match self.anonymous_event(headers, method) {
                    OwnershipEvent::Anonymous => OwnershipEvent::UnkeyedSubject,
                    other => other,
                },
            },
            Presented::None => self.anonymous_event(headers, method),
        };
        let effect = fire(&mut machine, event).map_err(|v| refused(&v, event, detail))?;
        let cookie = session_cookie(headers);
        let (session, issued) = match (effect, cookie) {
            (Some(OwnershipEffect::Session), Some(c)) => (Some(hash("session", c)), None),
            (Some(OwnershipEffect::Session), None) => {
                let id = new_session();
                (Some(hash("session", &id)), Some(id))
            }
            // A principal may bring the session whose threads it takes
            // over (promotion).
            (_, c) => (c.map(|c| hash("session", c)), None),
        };
        Ok(Caller {
            session,
            issued,
            principal,
            access,
            machine,
            secure: self.cfg.secure_cookies || self.cfg.mode == Mode::Production,
        })
    }

    /// `anonymous`, or `foreign_origin` for a write carried by the session
    /// cookie from a page of another origin. A request without `Origin` is
    /// not a browser's cross-origin write (browsers send it on every
    /// cross-origin POST), so it passes.
    fn anonymous_event(&self, headers: &HeaderMap, method: &Method) -> OwnershipEvent {
        let writes = !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
        let cookie = session_cookie(headers).is_some();
        let Some(origin) = headers.get(header::ORIGIN) else {
            return OwnershipEvent::Anonymous;
        };
        if !writes || !cookie {
            return OwnershipEvent::Anonymous;
        }
        match self.own_origin(origin, headers) {
            true => OwnershipEvent::Anonymous,
            false => OwnershipEvent::ForeignOrigin,
        }
    }

    fn own_origin(&self, origin: &HeaderValue, headers: &HeaderMap) -> bool {
        let Ok(origin) = origin.to_str() else {
            return false;
        };
        let origin = origin.trim_end_matches('/').to_ascii_lowercase();
        let host = (headers.get(header::HOST))
            .and_then(|h| h.to_str().ok())
            .map(str::to_ascii_lowercase);
        let same = host
            .is_some_and(|h| origin == format!("http://{h}") || origin == format!("https://{h}"));
        same || self
            .cfg
            .origins
            .iter()
            .any(|o| o.eq_ignore_ascii_case(&origin))
    }

    /// Constant time: both sides are hashed first, so neither the key's
    /// length nor its first differing byte shows in the timing.
    fn key_matches(&self, presented: &[u8]) -> bool {
        let Some(key) = &self.cfg.proxy_key else {
            return false;
        };
        let a = Sha256::digest(presented);
        let b = Sha256::digest(key.expose().as_bytes());
        bool::from(a.as_slice().ct_eq(b.as_slice()))
    }

    /// After the grant, the thread's lease was claimed for the request's
    /// turn: the table's row decides whether the turn runs.
    pub fn lease_claimed(&self, caller: &mut Caller) -> Result<(), ApiError> {
        let event = OwnershipEvent::LeaseClaimed;
        fire(&mut caller.machine, event).map_err(|v| refused(&v, event, ""))?;
        Ok(())
    }

    /// After the grant, another turn holds the thread's lease: the answer
    /// names the row taken (`thread-busy`). No turn can run without the
    /// lease, so a table edited to make the row legal still gets a 409,
    /// naming the legal row it took.
    pub fn lease_held(&self, caller: &mut Caller) -> ApiError {
        let event = OwnershipEvent::LeaseHeld;
        match fire_step(&mut caller.machine, event) {
            Err(v) => refused(&v, event, ""),
            Ok(s) => busy().with_row("ownership", caller.machine.row_id(s.row)),
        }
    }

    /// The `Identified → Granted` half for thread `id`.
    pub async fn thread(&self, caller: &mut Caller, id: &str) -> Result<Granted, ApiError> {
        let stored = self.store.ownership(id).await?;
        let event = match &stored {
            None => OwnershipEvent::NoSuchThread,
            Some(o) => match &o.owner {
                None => OwnershipEvent::UnownedThread,
                Some(Owner {
                    kind: OwnerKind::Principal,
                    key,
                }) => match (&caller.principal, &caller.session) {
                    (Some(p), _) if p == key => OwnershipEvent::OwnThread,
                    (None, Some(s)) if o.promoted_from.as_ref() == Some(s) => {
                        OwnershipEvent::SessionOnlyAfterPromotion
                    }
                    _ => OwnershipEvent::OtherOwner,
                },
                Some(Owner {
                    kind: OwnerKind::Session,
                    key,
                }) => match (&caller.session, &caller.principal) {
                    (Some(s), Some(_)) if s == key => OwnershipEvent::Promote,
                    (Some(s), None) if s == key => OwnershipEvent::OwnThread,
                    _ => OwnershipEvent::OtherOwner,
                },
            },
        };
        let effect = fire(&mut caller.machine, event).map_err(|v| refused(&v, event, ""))?;
        match effect {
            Some(OwnershipEffect::Allow) => Ok(Granted::Thread),
            Some(OwnershipEffect::Promote) => {
                let (Some(s), Some(p)) = (&caller.session, &caller.principal) else {
                    return Err(hidden());
                };
                if self.store.promote(id, s, p).await? {
                    tracing::info!("a session-owned thread was promoted to its principal");
                    return Ok(Granted::Thread);
                }
                // Another request promoted it first: it is the caller's only
                // if it went to the same principal.
                match self.store.ownership(id).await?.and_then(|o| o.owner) {
                    Some(o) if o.kind == OwnerKind::Principal && &o.key == p => Ok(Granted::Thread),
                    _ => Err(hidden()),
                }
            }
            _ => Err(hidden()),
        }
    }

    /// Creates a thread owned by the caller.
    pub async fn create(&self, caller: &mut Caller) -> Result<Granted, ApiError> {
        let effect = fire(&mut caller.machine, OwnershipEvent::CreateThread)
            .map_err(|v| refused(&v, OwnershipEvent::CreateThread, ""))?;
        match (effect, caller.owner()) {
            (Some(OwnershipEffect::Create), Some(owner)) => Ok(Granted::Created(
                self.store.create_owned_thread(&owner).await?,
            )),
            _ => Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the ownership table granted no thread creation",
            )),
        }
    }

    /// The caller's threads.
    pub async fn list(&self, caller: &mut Caller) -> Result<Granted, ApiError> {
        let effect = fire(&mut caller.machine, OwnershipEvent::ListThreads)
            .map_err(|v| refused(&v, OwnershipEvent::ListThreads, ""))?;
        match (effect, caller.owner()) {
            (Some(OwnershipEffect::List), Some(owner)) => {
                Ok(Granted::List(self.store.threads_of(&owner, 200).await?))
            }
            _ => Ok(Granted::List(Vec::new())),
        }
    }
}

impl Caller {
    /// Who owns what this caller creates: its principal, else its session.
    pub fn owner(&self) -> Option<Owner> {
        match (&self.principal, &self.session) {
            (Some(p), _) => Some(Owner {
                kind: OwnerKind::Principal,
                key: p.clone(),
            }),
            (None, Some(s)) => Some(Owner {
                kind: OwnerKind::Session,
                key: s.clone(),
            }),
            (None, None) => None,
        }
    }

    /// The response with the session cookie it issued, if any.
    pub fn respond(&self, res: impl IntoResponse) -> Response {
        let mut res = res.into_response();
        if let Some(id) = &self.issued {
            let secure = if self.secure { "; Secure" } else { "" };
            let cookie =
                format!("{SESSION_COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict{secure}");
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                res.headers_mut().append(header::SET_COOKIE, v);
            }
        }
        res
    }
}

fn fire(
    machine: &mut Typed<Ownership>,
    event: OwnershipEvent,
) -> Result<Option<OwnershipEffect>, Box<Violation>> {
    fire_step(machine, event).map(|s| s.effect)
}

/// Fires `event`; a forbidden row is counted.
fn fire_step(
    machine: &mut Typed<Ownership>,
    event: OwnershipEvent,
) -> Result<TypedStep<Ownership>, Box<Violation>> {
    let fired = machine.fire(event);
    if let Err(v) = &fired {
        telemetry::violation(v);
    }
    fired
}

/// The answer to a forbidden row: its status by what was refused, named by
/// its row, except a thread that is not the caller's, which is answered
/// like a thread that does not exist.
fn refused(v: &Violation, event: OwnershipEvent, detail: &str) -> ApiError {
    use OwnershipEvent::*;
    let (status, message) = match event {
        BearerRejected if !detail.is_empty() => (StatusCode::UNAUTHORIZED, detail.to_string()),
        BearerRejected => (
            StatusCode::UNAUTHORIZED,
            "the bearer token was refused".into(),
        ),
        BearerMalformed => (
            StatusCode::UNAUTHORIZED,
            "the Authorization header is not `Bearer <token>`".into(),
        ),
        VerifierUnavailable => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the bearer token could not be verified: {detail}"),
        ),
        ProxyKeyWrong => (
            StatusCode::UNAUTHORIZED,
            "the service API key does not match".into(),
        ),
        UnkeyedSubjectInProduction => (
            StatusCode::UNAUTHORIZED,
            format!("`{SUBJECT_HEADER}` is accepted only with the service API key"),
        ),
        SubjectMalformed => (
            StatusCode::BAD_REQUEST,
            format!("`{SUBJECT_HEADER}` or `{TIERS_HEADER}` is malformed"),
        ),
        ForeignOrigin => (
            StatusCode::FORBIDDEN,
            "a page of another origin may not write with this session".into(),
        ),
        LeaseHeld => return busy().with_row("ownership", &v.row_id),
        OtherOwner | SessionOnlyAfterPromotion | NoSuchThread | UnownedThread => {
            tracing::debug!(row_id = %v.row_id, "thread refused");
            return hidden();
        }
        _ => (StatusCode::FORBIDDEN, v.why.clone()),
    };
    ApiError::new(status, message).with_row("ownership", &v.row_id)
}

/// The answer to a request whose turn finds the thread's lease held.
fn busy() -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "a turn is already running on this thread; wait for its done or error frame",
    )
}

/// The one answer for a thread that is not the caller's or not there.
fn hidden() -> ApiError {
    ApiError::not_found("thread")
}
