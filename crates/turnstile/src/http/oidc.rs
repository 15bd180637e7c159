//! Bearer tokens verified locally, the way an OpenID Connect provider
//! expects (issue 40 §5): the issuer's discovery document names its JWKS,
//! the keys are fetched and cached, and each token is checked here —
//! signature, `iss`, `aud`, `exp`/`nbf` with a small leeway, and the
//! algorithm against an allowlist (never `none`, never an HMAC: a token
//! "signed" with the public key as a shared secret is refused by name).
//!
//! A key the token names that the cache lacks refreshes the JWKS once
//! (rotation), at most every [`MIN_REFRESH`]; a JWKS that cannot be
//! fetched with no usable cached key is `Unavailable` (503), as the
//! verifier URL's outage is. The token and the subject never reach a log.

use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::Mutex;

use super::verifier::{bounded_subject, read_bounded, Body, Verified};

/// Largest discovery document or JWKS read.
const MAX_DOCUMENT: usize = 256 * 1024;
/// A JWKS is fetched again at most this often for an unknown `kid`.
const MIN_REFRESH: Duration = Duration::from_secs(2);
/// Keys are fetched again after this long even if every `kid` is known.
const MAX_AGE: Duration = Duration::from_secs(15 * 60);
/// How long a key set is trusted while the issuer cannot be reached.
const MAX_STALE: Duration = Duration::from_secs(24 * 60 * 60);

/// `[auth.oidc]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OidcConfig {
    /// The issuer, exactly as its tokens' `iss` says it.
    pub issuer: String,
    /// The audience this server is (`aud` must contain it).
    pub audience: String,
    /// The algorithms accepted (asymmetric only).
    pub algorithms: Vec<Algorithm>,
    /// The claim that names the subject (`sub`).
    pub subject_claim: String,
    /// The claim that lists the tiers (`tiers`): a list of strings, or one
    /// space-separated string.
    pub tiers_claim: String,
    pub leeway: Duration,
    /// Each fetch of the discovery document or the JWKS.
    pub timeout: Duration,
}

/// The algorithms allowed by default, and the only ones allowed at all.
pub const ASYMMETRIC: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

struct Keys {
    set: JwkSet,
    fetched: Instant,
    /// The last attempt to fetch the set again failed.
    stale: bool,
}

pub struct OidcVerifier {
    cfg: OidcConfig,
    client: reqwest::Client,
    keys: Mutex<Option<Keys>>,
    /// When the JWKS was last asked for (fetched or not). Held for the
    /// whole fetch: one request fetches, the others wait for its result.
    last_try: Mutex<Option<Instant>>,
}

#[derive(Deserialize)]
struct Discovery {
    issuer: String,
    jwks_uri: String,
}

impl OidcVerifier {
    pub fn new(cfg: OidcConfig) -> OidcVerifier {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(cfg.timeout)
            .build()
            .unwrap_or_default();
        OidcVerifier {
            cfg,
            client,
            keys: Mutex::new(None),
            last_try: Mutex::new(None),
        }
    }

    /// Checks `token` against the issuer's keys.
    pub async fn verify(&self, token: &str) -> Verified {
        let header = match jsonwebtoken::decode_header(token) {
            Ok(h) => h,
            // `alg: none` (no such algorithm here), not a JWT at all.
            Err(_) => return reject("the token is not a signed JWT"),
        };
        if !self.cfg.algorithms.contains(&header.alg) {
            return reject("the token's algorithm is not allowed");
        }
        let key = match self.key_for(header.kid.as_deref()).await {
            Ok(Some(k)) => k,
            Ok(None) => return reject("no key of the issuer signs this token"),
            Err(why) => return Verified::Unavailable(why),
        };
        let key = match DecodingKey::from_jwk(&key) {
            Ok(k) => k,
            Err(_) => return reject("the issuer's key is not usable"),
        };
        let mut v = Validation::new(header.alg);
        v.algorithms = vec![header.alg];
        v.set_issuer(&[&self.cfg.issuer]);
        v.set_audience(&[&self.cfg.audience]);
        v.leeway = self.cfg.leeway.as_secs();
        v.validate_nbf = true;
        v.set_required_spec_claims(&["exp", "iss", "aud"]);
        let claims = match jsonwebtoken::decode::<Value>(token, &key, &v) {
            Ok(d) => d.claims,
            Err(e) => {
                use jsonwebtoken::errors::ErrorKind as K;
                return reject(match e.kind() {
                    K::ExpiredSignature => "the token has expired",
                    K::ImmatureSignature => "the token is not valid yet",
                    K::InvalidAudience => "the token is for another audience",
                    K::InvalidIssuer => "the token is from another issuer",
                    K::InvalidSignature => "the token's signature does not verify",
                    K::InvalidAlgorithm => "the token's algorithm does not match its key",
                    K::MissingRequiredClaim(_) => "the token lacks a required claim",
                    _ => "the token does not verify",
                });
            }
        };
        let subject = (claims.get(&self.cfg.subject_claim))
            .and_then(Value::as_str)
            .unwrap_or("");
        let tiers: Vec<String> = match claims.get(&self.cfg.tiers_claim) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => s.split_whitespace().map(str::to_string).collect(),
            Some(Value::Array(a)) => (a.iter())
                .filter_map(|t| t.as_str().map(str::to_string))
                .collect(),
            Some(_) => return reject("the token's tiers are not a list"),
        };
        bounded_subject(subject, tiers)
            .unwrap_or_else(|| reject("the token names no subject, or tiers out of bounds"))
    }

    /// The issuer's key `kid` names (the only key when the token names
    /// none and the set has one): from the cache, or after one refresh.
    /// `Err` when no key set could be had at all.
    async fn key_for(
        &self,
        kid: Option<&str>,
    ) -> Result<Option<jsonwebtoken::jwk::Jwk>, &'static str> {
        let find = |set: &JwkSet| match kid {
            Some(k) => set.find(k).cloned(),
            None if set.keys.len() == 1 => set.keys.first().cloned(),
            None => None,
        };
        let cached = |keys: &Option<Keys>| {
            (keys.as_ref())
                .filter(|k| k.fetched.elapsed() < MAX_AGE)
                .and_then(|k| find(&k.set))
        };
        if let Some(key) = cached(&*self.keys.lock().await) {
            return Ok(Some(key));
        }
        // Unknown kid (a rotation), a stale set, or none yet: one request
        // fetches (not more often than MIN_REFRESH) while the others wait.
        let mut last = self.last_try.lock().await;
        if let Some(key) = cached(&*self.keys.lock().await) {
            return Ok(Some(key));
        }
        if last.is_none_or(|t| t.elapsed() >= MIN_REFRESH) {
            *last = Some(Instant::now());
            match self.fetch().await {
                Ok(set) => {
                    *self.keys.lock().await = Some(Keys {
                        set,
                        fetched: Instant::now(),
                        stale: false,
                    });
                }
                Err(why) => {
                    tracing::warn!(why, "the issuer's keys could not be fetched");
                    if let Some(k) = self.keys.lock().await.as_mut() {
                        k.stale = true;
                    }
                }
            }
        }
        drop(last);
        let keys = self.keys.lock().await;
        let unavailable = "the issuer's keys could not be fetched";
        match keys.as_ref() {
            // A stale set still verifies what it holds while the issuer
            // cannot be reached, for a day; a kid it lacks then may be a
            // rotation nobody could read: unavailable, not refused.
            Some(k) if k.stale && k.fetched.elapsed() >= MAX_STALE => Err(unavailable),
            Some(k) => match find(&k.set) {
                Some(key) => Ok(Some(key)),
                None if k.stale => Err(unavailable),
                None => Ok(None),
            },
            None => Err(unavailable),
        }
    }

    async fn fetch(&self) -> Result<JwkSet, &'static str> {
        let url = format!(
            "{}/.well-known/openid-configuration",
            self.cfg.issuer.trim_end_matches('/')
        );
        let discovery: Discovery = self.get_json(&url).await?;
        if discovery.issuer != self.cfg.issuer {
            return Err("the discovery document names another issuer");
        }
        let jwks_uri =
            reqwest::Url::parse(&discovery.jwks_uri).map_err(|_| "the jwks_uri is not a URL")?;
        // Keys over plain HTTP only from an issuer that is itself plain
        // HTTP (a loopback test issuer): never a downgrade.
        let issuer_is_https = self.cfg.issuer.starts_with("https://");
        match (jwks_uri.scheme(), issuer_is_https) {
            ("https", _) | ("http", false) => {}
            _ => return Err("the jwks_uri is not https"),
        }
        self.get_json(jwks_uri.as_str()).await
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, &'static str> {
        let mut res = (self.client.get(url))
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|_| "the issuer could not be reached")?;
        if !res.status().is_success() {
            return Err("the issuer answered an error");
        }
        let body = read_bounded(&mut res, MAX_DOCUMENT)
            .await
            .map_err(|e| match e {
                Body::TooLarge => "the issuer's answer is too large",
                Body::BrokeOff => "the issuer's answer broke off",
            })?;
        serde_json::from_slice(&body).map_err(|_| "the issuer's answer is not what OIDC says")
    }
}

fn reject(why: &'static str) -> Verified {
    tracing::info!(why, "a bearer token was refused");
    Verified::Rejected(why)
}
