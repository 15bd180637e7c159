//! The bearer verifier (issue 20 §1, seed 002): `GET {verifier_url}` with
//! the caller's token, such as the demo tool server's `/api/auth/me`. It
//! answers the subject and the tiers it holds.
//!
//! Three outcomes and no fourth: a subject, a rejection (401/403), or
//! unavailable (a timeout past the limit, a 5xx, any other status, a body
//! that is not `{"subject": "...", "tiers": [...]}`). The caller of
//! [`Verifier::verify`] turns them into `ownership` table events; nothing
//! here decides what a failure means for the request.
//!
//! The token and the subject never reach a log line.

use std::time::Duration;

use serde::Deserialize;

/// Largest verifier answer read.
const MAX_ANSWER: usize = 64 * 1024;
/// Longest subject accepted.
pub const MAX_SUBJECT: usize = 512;
/// Most tiers one subject may hold, and the longest tier name.
pub const MAX_TIERS: usize = 32;
pub const MAX_TIER: usize = 64;

/// Where and how long to ask.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifierConfig {
    pub url: reqwest::Url,
    /// The whole exchange, connect to last byte (`auth.verifier_timeout_ms`,
    /// 3 s by default).
    pub timeout: Duration,
    /// How long a verified subject is remembered for its token
    /// (`auth.verifier_cache_secs`, 30 s by default; zero: never): a
    /// revoked token is refused at most this late.
    pub cache_ttl: Duration,
}

/// The most tokens remembered at once.
const MAX_CACHED: usize = 10_000;

/// Verified subjects by a hash of their token: never the token itself.
type Cache = std::collections::HashMap<[u8; 32], (std::time::Instant, String, Vec<String>)>;

/// The verifier's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verified {
    Subject {
        subject: String,
        tiers: Vec<String>,
    },
    /// Why, in words without the token.
    Rejected(&'static str),
    /// Why, in words without the token or the answer's body.
    Unavailable(&'static str),
}

/// The cache's key for a token: SHA-256 of a label and the token.
fn cache_key(token: &str) -> [u8; 32] {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(b"turnstile verifier cache\0");
    h.update(token.as_bytes());
    h.finalize().into()
}

#[derive(Deserialize)]
struct Answer {
    subject: String,
    #[serde(default)]
    tiers: Vec<String>,
}

pub struct Verifier {
    cfg: VerifierConfig,
    client: reqwest::Client,
    cache: std::sync::Mutex<Cache>,
}

impl Verifier {
    pub fn new(cfg: VerifierConfig) -> Verifier {
        let client = reqwest::Client::builder()
            // A verifier that redirects is misconfigured; the token is not
            // carried anywhere else.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(cfg.timeout)
            .build()
            .unwrap_or_default();
        Verifier {
            cfg,
            client,
            cache: Default::default(),
        }
    }

    /// Asks the verifier about `token`, within the limit; a subject it
    /// verified within `cache_ttl` is answered from memory. Only subjects
    /// are remembered: a refusal or an outage is asked again.
    pub async fn verify(&self, token: &str) -> Verified {
        let key = cache_key(token);
        if let Some(v) = self.cached(&key) {
            return v;
        }
        let verified = match tokio::time::timeout(self.cfg.timeout, self.ask(token)).await {
            Ok(v) => v,
            Err(_) => Verified::Unavailable("the verifier did not answer in time"),
        };
        if let Verified::Subject { subject, tiers } = &verified {
            self.remember(key, subject, tiers);
        }
        verified
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Verified> {
        let cache = self.cache.lock().ok()?;
        let (at, subject, tiers) = cache.get(key)?;
        (at.elapsed() < self.cfg.cache_ttl).then(|| Verified::Subject {
            subject: subject.clone(),
            tiers: tiers.clone(),
        })
    }

    fn remember(&self, key: [u8; 32], subject: &str, tiers: &[String]) {
        if self.cfg.cache_ttl.is_zero() {
            return;
        }
        let Ok(mut cache) = self.cache.lock() else {
            return;
        };
        if cache.len() >= MAX_CACHED {
            let ttl = self.cfg.cache_ttl;
            cache.retain(|_, (at, _, _)| at.elapsed() < ttl);
        }
        // Still full of live entries: this one is asked again next time.
        if cache.len() < MAX_CACHED {
            cache.insert(
                key,
                (
                    std::time::Instant::now(),
                    subject.to_string(),
                    tiers.to_vec(),
                ),
            );
        }
    }

    async fn ask(&self, token: &str) -> Verified {
        let sent = (self.client.get(self.cfg.url.clone()))
            .bearer_auth(token)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await;
        let mut res = match sent {
            Ok(r) => r,
            Err(_) => return Verified::Unavailable("the verifier could not be reached"),
        };
        let status = res.status();
        if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
            return Verified::Rejected("the verifier refused the bearer token");
        }
        if !status.is_success() {
            return Verified::Unavailable("the verifier answered an error");
        }
        let body = match read_bounded(&mut res, MAX_ANSWER).await {
            Ok(b) => b,
            Err(Body::TooLarge) => {
                return Verified::Unavailable("the verifier's answer is too large")
            }
            Err(Body::BrokeOff) => return Verified::Unavailable("the verifier's answer broke off"),
        };
        let Ok(answer) = serde_json::from_slice::<Answer>(&body) else {
            return Verified::Unavailable("the verifier's answer is not a subject");
        };
        bounded_subject(&answer.subject, answer.tiers).unwrap_or(Verified::Unavailable(
            "the verifier's answer is not a subject",
        ))
    }
}

/// A subject and its tiers as the edge accepts them (trimmed, non-empty,
/// within [`MAX_SUBJECT`], at most [`MAX_TIERS`] of at most [`MAX_TIER`]),
/// whoever vouched for them: the verifier URL or an OIDC token.
pub(super) fn bounded_subject(subject: &str, tiers: Vec<String>) -> Option<Verified> {
    let subject = subject.trim();
    let tiers_ok =
        tiers.len() <= MAX_TIERS && (tiers.iter()).all(|t| !t.is_empty() && t.len() <= MAX_TIER);
    (!subject.is_empty() && subject.len() <= MAX_SUBJECT && tiers_ok).then(|| Verified::Subject {
        subject: subject.to_string(),
        tiers,
    })
}

/// Why a body could not be read whole.
pub(super) enum Body {
    TooLarge,
    BrokeOff,
}

/// The body of `res`, at most `max` bytes.
pub(super) async fn read_bounded(res: &mut reqwest::Response, max: usize) -> Result<Vec<u8>, Body> {
    let mut body = Vec::new();
    while let Some(c) = res.chunk().await.map_err(|_| Body::BrokeOff)? {
        if body.len() + c.len() > max {
            return Err(Body::TooLarge);
        }
        body.extend_from_slice(&c);
    }
    Ok(body)
}
