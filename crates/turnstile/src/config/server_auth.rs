//! How turnstile authorizes with one tool server (`[[mcp_servers]] auth`,
//! issue 40 §1): `none`, `static` (a bearer token from an environment
//! variable), `client_credentials` (turnstile's own service identity) or
//! `user` (each user connects their own account; `agent::connections`).
//! Secrets are read from the environment here and held in types whose
//! `Debug` is redacted.

use std::time::Duration;

use serde::Deserialize;

use crate::mcp::oauth::{AccessToken, ClientIdentity};

use super::settings::{is_env_name, ServerAuth, Validator};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileOAuth {
    client_id: Option<String>,
    client_secret_env: Option<String>,
    client_metadata_url: Option<String>,
    #[serde(default)]
    scopes: Vec<String>,
}

/// `[connections]`: where the authorization servers send users back.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileConnections {
    callback_url: Option<String>,
    flow_ttl_secs: Option<u64>,
    client_metadata_document: Option<bool>,
}

/// `[connections]`, validated; the key comes from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionsSettings {
    pub callback_url: String,
    pub flow_ttl: Duration,
    /// turnstile's own Client ID Metadata Document, served at
    /// `/oauth/client-metadata.json` of the callback's origin: its URL.
    pub client_metadata_url: Option<String>,
    /// The sealing key's text (`TURNSTILE_CONNECTIONS_KEY`), redacted.
    pub key: AccessToken,
}

const MODES: &str = "\"none\", \"static\", \"client_credentials\" or \"user\"";

impl Validator {
    pub(super) fn server_auth(
        &mut self,
        at: &str,
        mode: Option<&str>,
        bearer_env: Option<&str>,
        oauth: Option<&FileOAuth>,
        is_http: bool,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> ServerAuth {
        let mode = mode.map(str::trim).unwrap_or("none");
        if bearer_env.is_some() && mode != "static" {
            self.problem(
                &format!("{at}.bearer_env"),
                "only `auth = \"static\"` takes a bearer_env".into(),
            );
        }
        if oauth.is_some() && !matches!(mode, "client_credentials" | "user") {
            self.problem(
                &format!("{at}.oauth"),
                "only `auth = \"client_credentials\"` or `\"user\"` takes [oauth]".into(),
            );
        }
        if mode != "none" && !is_http {
            self.problem(
                &format!("{at}.auth"),
                "only an HTTP server (`url`) authorizes".into(),
            );
            return ServerAuth::None;
        }
        match mode {
            "none" => ServerAuth::None,
            "static" => {
                match bearer_env {
                    None => {
                        self.problem(&format!("{at}.bearer_env"), "`auth = \"static\"` needs the name of the variable that holds the token".into());
                        ServerAuth::None
                    }
                    Some(var) if !is_env_name(var) => {
                        self.problem(
                            &format!("{at}.bearer_env"),
                            "must be the name of an environment variable, not the token".into(),
                        );
                        ServerAuth::None
                    }
                    Some(var) => match env(var) {
                        Some(t) => ServerAuth::Static(AccessToken::new(t.trim())),
                        None => {
                            self.problem(
                                &format!("{at}.bearer_env"),
                                format!("the environment variable {var} is not set"),
                            );
                            ServerAuth::None
                        }
                    },
                }
            }
            "client_credentials" => {
                let client = self.oauth_client(at, oauth, env);
                if client.client_id.is_none() || client.client_secret.is_none() {
                    self.problem(
                        &format!("{at}.oauth"),
                        "the client credentials grant needs `client_id` and `client_secret_env`"
                            .into(),
                    );
                }
                ServerAuth::ClientCredentials(client)
            }
            "user" => ServerAuth::User(self.oauth_client(at, oauth, env)),
            other => {
                self.problem(
                    &format!("{at}.auth"),
                    format!("`{other}` is not a mode: use {MODES}"),
                );
                ServerAuth::None
            }
        }
    }

    fn oauth_client(
        &mut self,
        at: &str,
        oauth: Option<&FileOAuth>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> ClientIdentity {
        let Some(o) = oauth else {
            return ClientIdentity::default();
        };
        let client_secret = match o.client_secret_env.as_deref() {
            None => None,
            Some(var) if !is_env_name(var) => {
                self.problem(
                    &format!("{at}.oauth.client_secret_env"),
                    "must be the name of an environment variable, not the secret".into(),
                );
                None
            }
            Some(var) => {
                let got = env(var);
                if got.is_none() {
                    self.problem(
                        &format!("{at}.oauth.client_secret_env"),
                        format!("the environment variable {var} is not set"),
                    );
                }
                got
            }
        };
        let metadata_url = o.client_metadata_url.as_deref().and_then(|u| {
            self.http_url(&format!("{at}.oauth.client_metadata_url"), u)
                .map(|u| u.to_string())
        });
        ClientIdentity {
            client_id: o
                .client_id
                .as_ref()
                .map(|c| c.trim().to_string())
                .filter(|c| !c.is_empty()),
            client_secret,
            metadata_url,
            scopes: o.scopes.clone(),
        }
    }

    /// `[connections]`, needed (with the key) once a server is `user`.
    pub(super) fn connections(
        &mut self,
        file: Option<&FileConnections>,
        needed: bool,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Option<ConnectionsSettings> {
        if !needed {
            return None;
        }
        let f = file.map_or_else(FileConnections::default, |f| FileConnections {
            callback_url: f.callback_url.clone(),
            flow_ttl_secs: f.flow_ttl_secs,
            client_metadata_document: f.client_metadata_document,
        });
        let callback_url = match f.callback_url.as_deref() {
            Some(u) => self
                .http_url("connections.callback_url", u)
                .map(|u| u.to_string()),
            None => {
                self.problem(
                    "connections.callback_url",
                    "a server with `auth = \"user\"` needs the URL its users' browsers reach turnstile's `/v1/connections/callback` at".into(),
                );
                None
            }
        };
        let flow_ttl = match f.flow_ttl_secs {
            Some(0) => {
                self.problem("connections.flow_ttl_secs", "must be at least 1".into());
                Duration::from_secs(1)
            }
            Some(n) => Duration::from_secs(n),
            None => crate::agent::connections::DEFAULT_FLOW_TTL,
        };
        let var = crate::store::CONNECTIONS_KEY_ENV;
        let key = match env(var) {
            Some(k) => match crate::store::SealingKey::parse(&k) {
                Ok(_) => Some(AccessToken::new(k.trim())),
                Err(e) => {
                    self.problem("connections", e.to_string());
                    None
                }
            },
            None => {
                self.problem(
                    "connections",
                    format!("a server with `auth = \"user\"` stores its users' tokens sealed: set {var} to 32 random bytes (64 hex digits)"),
                );
                None
            }
        };
        let callback_url = callback_url?;
        let client_metadata_url = match f.client_metadata_document {
            Some(true) if !callback_url.starts_with("https://") => {
                self.problem(
                    "connections.client_metadata_document",
                    "a Client ID Metadata Document is served over https: `callback_url` must be an https URL".into(),
                );
                None
            }
            Some(true) => reqwest::Url::parse(&callback_url).ok().map(|u| {
                let path = crate::agent::connections::CLIENT_METADATA_PATH;
                format!("{}{path}", u.origin().ascii_serialization())
            }),
            _ => None,
        };
        Some(ConnectionsSettings {
            callback_url,
            flow_ttl,
            client_metadata_url,
            key: key?,
        })
    }
}
