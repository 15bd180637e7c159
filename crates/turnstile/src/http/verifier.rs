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
}

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

#[derive(Deserialize)]
struct Answer {
    subject: String,
    #[serde(default)]
    tiers: Vec<String>,
}

pub struct Verifier {
    cfg: VerifierConfig,
    client: reqwest::Client,
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
        Verifier { cfg, client }
    }

    /// Asks the verifier about `token`, within the limit.
    pub async fn verify(&self, token: &str) -> Verified {
        match tokio::time::timeout(self.cfg.timeout, self.ask(token)).await {
            Ok(v) => v,
            Err(_) => Verified::Unavailable("the verifier did not answer in time"),
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
        let mut body = Vec::new();
        loop {
            match res.chunk().await {
                Ok(Some(c)) => {
                    if body.len() + c.len() > MAX_ANSWER {
                        return Verified::Unavailable("the verifier's answer is too large");
                    }
                    body.extend_from_slice(&c);
                }
                Ok(None) => break,
                Err(_) => return Verified::Unavailable("the verifier's answer broke off"),
            }
        }
        let Ok(answer) = serde_json::from_slice::<Answer>(&body) else {
            return Verified::Unavailable("the verifier's answer is not a subject");
        };
        let subject = answer.subject.trim();
        let tiers_ok = answer.tiers.len() <= MAX_TIERS
            && (answer.tiers.iter()).all(|t| !t.is_empty() && t.len() <= MAX_TIER);
        if subject.is_empty() || subject.len() > MAX_SUBJECT || !tiers_ok {
            return Verified::Unavailable("the verifier's answer is not a subject");
        }
        Verified::Subject {
            subject: subject.to_string(),
            tiers: answer.tiers,
        }
    }
}
