//! `[http]`, `[auth]` and `[licence]`: what the server lets in, who a
//! caller is, and the tiers a caller holds.

use std::time::Duration;

use serde::Deserialize;

use crate::http::HttpConfig;
use crate::judge::tiers::Tiers;
use crate::llm::ApiKey;

use super::settings::*;

/// `[auth]`: the bearer verifier, the proxy mode and the production mode.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileAuth {
    pub(super) mode: Option<String>,
    pub(super) verifier_url: Option<String>,
    pub(super) verifier_timeout_ms: Option<u64>,
    pub(super) verifier_cache_secs: Option<u64>,
    pub(super) proxy_api_key_env: Option<String>,
    pub(super) secure_cookies: Option<bool>,
    pub(super) oidc: Option<FileOidc>,
}

/// `[auth.oidc]`: bearer tokens verified locally against an OIDC issuer.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileOidc {
    pub(super) issuer: Option<String>,
    pub(super) audience: Option<String>,
    pub(super) algorithms: Option<Vec<String>>,
    pub(super) subject_claim: Option<String>,
    pub(super) tiers_claim: Option<String>,
    pub(super) leeway_secs: Option<u64>,
}

/// `[licence]`: the tier order and what an anonymous caller holds.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileLicence {
    pub(super) tiers: Option<Vec<String>>,
    pub(super) anonymous_tiers: Option<Vec<String>>,
}

/// `[http]`: connection timeouts, the head size limit, and which origins may
/// frame the page or read the API.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileHttp {
    pub(super) header_read_timeout_secs: Option<u64>,
    pub(super) body_read_timeout_secs: Option<u64>,
    pub(super) idle_timeout_secs: Option<u64>,
    pub(super) max_header_bytes: Option<u64>,
    pub(super) frame_ancestors: Option<Vec<String>>,
    pub(super) cors_origins: Option<Vec<String>>,
    pub(super) link_origins: Option<Vec<String>>,
    pub(super) reconnect_grace_secs: Option<u64>,
    pub(super) drain_secs: Option<u64>,
    pub(super) admin_key_env: Option<String>,
}

impl Validator {
    /// `[auth]`: the mode, the verifier, the proxy's key (read from the
    /// variable it names, never from the file).
    pub(super) fn auth(
        &mut self,
        f: &FileAuth,
        http: &HttpConfig,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> crate::http::AuthConfig {
        use crate::http::{AuthConfig, Mode, VerifierConfig};
        let mode = match f.mode.as_deref().map(str::trim) {
            None | Some("development") => Mode::Development,
            Some("production") => Mode::Production,
            Some(_) => {
                self.problem(
                    "auth.mode",
                    "must be \"development\" or \"production\"".into(),
                );
                Mode::Development
            }
        };
        let timeout_ms = match f.verifier_timeout_ms {
            None => 3000,
            Some(0) => {
                self.problem("auth.verifier_timeout_ms", "must be at least 1".into());
                3000
            }
            Some(ms) if ms > 60_000 => {
                self.problem("auth.verifier_timeout_ms", "at most 60000".into());
                3000
            }
            Some(ms) => ms,
        };
        let verifier = (f.verifier_url.as_deref())
            .and_then(|u| self.http_url("auth.verifier_url", u))
            .map(|url| VerifierConfig {
                url,
                timeout: Duration::from_millis(timeout_ms),
                cache_ttl: Duration::from_secs(f.verifier_cache_secs.unwrap_or(30)),
            });
        if f.verifier_cache_secs.is_some_and(|s| s > 3600) {
            self.problem("auth.verifier_cache_secs", "at most 3600".into());
        }
        let proxy_key = self
            .key_from_env(
                "auth.proxy_api_key_env",
                f.proxy_api_key_env.as_deref(),
                env,
            )
            .map(|k| ApiKey::new(&k));
        let oidc = f.oidc.as_ref().and_then(|o| self.oidc(o, timeout_ms));
        if oidc.is_some() && verifier.is_some() {
            self.problem(
                "auth.oidc",
                "`auth.verifier_url` and `[auth.oidc]` both verify bearer tokens: keep one".into(),
            );
        }
        if mode == Mode::Production && verifier.is_none() && oidc.is_none() && proxy_key.is_none() {
            self.warn(
                "auth.mode",
                "production mode with neither a verifier nor a proxy key: every caller is anonymous".into(),
            );
        }
        AuthConfig {
            mode,
            verifier,
            oidc,
            proxy_key,
            secure_cookies: f.secure_cookies.unwrap_or(false),
            origins: http.cors_origins.clone(),
        }
    }

    /// `[auth.oidc]`: the issuer (kept exactly as its tokens' `iss` says
    /// it), the audience, the asymmetric algorithms allowed, the claims.
    fn oidc(&mut self, f: &FileOidc, timeout_ms: u64) -> Option<crate::http::OidcConfig> {
        let issuer = match f.issuer.as_deref().map(str::trim) {
            Some(i) if self.http_url("auth.oidc.issuer", i).is_some() => i.to_string(),
            Some(_) => return None,
            None => {
                self.problem("auth.oidc.issuer", "the issuer's URL is required".into());
                return None;
            }
        };
        let Some(audience) = f
            .audience
            .as_deref()
            .map(str::trim)
            .filter(|a| !a.is_empty())
        else {
            self.problem(
                "auth.oidc.audience",
                "the audience this server is (its tokens' `aud`) is required".into(),
            );
            return None;
        };
        let allowed = crate::http::OIDC_ALGORITHMS;
        let algorithms = match &f.algorithms {
            None => vec![
                jsonwebtoken::Algorithm::RS256,
                jsonwebtoken::Algorithm::ES256,
            ],
            Some(names) => {
                let mut out = Vec::new();
                for n in names {
                    match n.parse::<jsonwebtoken::Algorithm>() {
                        Ok(a) if allowed.contains(&a) => out.push(a),
                        _ => {
                            self.problem(
                                "auth.oidc.algorithms",
                                format!("`{n}` is not an asymmetric JWS algorithm (RS256, ES256, PS256, EdDSA, …); `none` and HMAC are never accepted"),
                            );
                            return None;
                        }
                    }
                }
                if out.is_empty() {
                    self.problem("auth.oidc.algorithms", "at least one algorithm".into());
                    return None;
                }
                out
            }
        };
        let leeway = f.leeway_secs.unwrap_or(30);
        if leeway > 300 {
            self.problem("auth.oidc.leeway_secs", "at most 300".into());
            return None;
        }
        let claim = |c: &Option<String>, default: &str| {
            c.as_deref()
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .unwrap_or(default)
                .to_string()
        };
        Some(crate::http::OidcConfig {
            issuer,
            audience: audience.to_string(),
            algorithms,
            subject_claim: claim(&f.subject_claim, "sub"),
            tiers_claim: claim(&f.tiers_claim, "tiers"),
            leeway: Duration::from_secs(leeway),
            timeout: Duration::from_millis(timeout_ms),
        })
    }

    /// `[licence]`: the tier order (lowest first, no repeats) and the
    /// anonymous tiers (each one of them).
    pub(super) fn licence(&mut self, f: &FileLicence) -> (Tiers, Option<Vec<String>>) {
        let tiers = match &f.tiers {
            None => Tiers::default(),
            Some(t) => {
                let names: Vec<String> = t.iter().map(|s| s.trim().to_string()).collect();
                let mut seen = std::collections::BTreeSet::new();
                if names.is_empty() {
                    self.problem("licence.tiers", "must name at least one tier".into());
                } else if names
                    .iter()
                    .any(|n| n.is_empty() || !seen.insert(n.clone()))
                {
                    self.problem(
                        "licence.tiers",
                        "tier names must be non-empty and distinct".into(),
                    );
                }
                Tiers::new(names)
            }
        };
        let anonymous = f.anonymous_tiers.as_ref().map(|a| {
            let names: Vec<String> = a.iter().map(|s| s.trim().to_string()).collect();
            for n in &names {
                if !tiers.names().contains(n) {
                    self.problem(
                        "licence.anonymous_tiers",
                        format!("not one of `licence.tiers` ({})", tiers.names().join(", ")),
                    );
                }
            }
            names
        });
        (tiers, anonymous)
    }

    /// `[http]`, over [`HttpConfig::default`].
    pub(super) fn http(
        &mut self,
        f: &FileHttp,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> HttpConfig {
        let d = HttpConfig::default();
        let secs = |v: &mut Self, key: &str, value: Option<u64>, default: Duration| {
            Duration::from_secs(v.positive(key, value, default.as_secs()))
        };
        let header_read_timeout = secs(
            self,
            "http.header_read_timeout_secs",
            f.header_read_timeout_secs,
            d.header_read_timeout,
        );
        let body_read_timeout = secs(
            self,
            "http.body_read_timeout_secs",
            f.body_read_timeout_secs,
            d.body_read_timeout,
        );
        let idle_timeout = secs(
            self,
            "http.idle_timeout_secs",
            f.idle_timeout_secs,
            d.idle_timeout,
        );
        let max_header_bytes = match f.max_header_bytes {
            Some(n) if !(1024..=1024 * 1024).contains(&n) => {
                self.problem(
                    "http.max_header_bytes",
                    format!("must be between 1024 and 1048576, not {n}"),
                );
                d.max_header_bytes
            }
            Some(n) => n as usize,
            None => d.max_header_bytes,
        };
        let mut origins = |key: &str, list: &Option<Vec<String>>| -> Vec<String> {
            let mut out = Vec::new();
            for (i, o) in list.iter().flatten().enumerate() {
                match origin(o) {
                    Some(o) => out.push(o),
                    None => self.problem(
                        &format!("{key}[{i}]"),
                        format!(
                            "must be an origin like https://host.example[:port] \
                             (scheme, host and port only), not {o:?}"
                        ),
                    ),
                }
            }
            out
        };
        let frame_ancestors = origins("http.frame_ancestors", &f.frame_ancestors);
        let cors_origins = origins("http.cors_origins", &f.cors_origins);
        let link_origins = origins("http.link_origins", &f.link_origins);
        let reconnect_grace = match f.reconnect_grace_secs {
            Some(n) if n > 600 => {
                self.problem(
                    "http.reconnect_grace_secs",
                    format!("must be at most 600 (0 turns reconnecting off), not {n}"),
                );
                d.reconnect_grace
            }
            Some(n) => Duration::from_secs(n),
            None => d.reconnect_grace,
        };
        let drain = match f.drain_secs {
            Some(n) if n > 3600 => {
                self.problem("http.drain_secs", format!("must be at most 3600, not {n}"));
                d.drain
            }
            Some(n) => Duration::from_secs(n),
            None => d.drain,
        };
        let admin_key = self
            .key_from_env("http.admin_key_env", f.admin_key_env.as_deref(), env)
            .map(crate::http::AdminKey::new);
        HttpConfig {
            link_origins,
            reconnect_grace,
            drain,
            admin_key,
            header_read_timeout,
            body_read_timeout,
            idle_timeout,
            max_header_bytes,
            frame_ancestors,
            cors_origins,
        }
    }
}

impl Validator {
    /// A key read from the variable `name` names (configured at `key`): 16
    /// characters or more, never echoed; a problem at `key` otherwise.
    fn key_from_env(
        &mut self,
        key: &str,
        name: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Option<String> {
        let name = name.map(str::trim)?;
        if !is_env_name(name) {
            self.problem(key, "must name an environment variable".into());
            return None;
        }
        match env(name) {
            Some(k) if k.trim().len() >= 16 => Some(k.trim().to_string()),
            Some(_) => {
                self.problem(
                    key,
                    format!("the key in `{name}` is shorter than 16 characters"),
                );
                None
            }
            None => {
                self.problem(key, format!("the variable `{name}` is not set"));
                None
            }
        }
    }
}
