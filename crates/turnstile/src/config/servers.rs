//! `[[mcp_servers]]`: each tool server, how to reach it, whom to trust,
//! and its tools' settings (`tools.rs`).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::mcp::Transport;

use super::settings::*;
use super::tools::FileTool;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileServer {
    pub(super) name: Option<String>,
    pub(super) url: Option<String>,
    pub(super) command: Option<String>,
    pub(super) args: Option<Vec<String>>,
    pub(super) trusted_origin: Option<String>,
    /// `false`: the server's tool annotations exempt nothing, and a tool of
    /// it that declares none waits for approval of each call.
    pub(super) trusted: Option<bool>,
    /// `2025-11-25` (default), `2026-07-28` or `auto` (ADR 0003).
    pub(super) protocol: Option<String>,
    #[serde(default)]
    pub(super) tools: BTreeMap<String, FileTool>,
    /// `none` (default), `static`, `client_credentials` or `user`.
    pub(super) auth: Option<String>,
    /// `auth = "static"`: the variable that holds the bearer token.
    pub(super) bearer_env: Option<String>,
    pub(super) oauth: Option<super::server_auth::FileOAuth>,
}

impl Validator {
    pub(super) fn servers(
        &mut self,
        servers: &[FileServer],
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Vec<McpServer> {
        let mut out: Vec<McpServer> = Vec::new();
        for (i, s) in servers.iter().enumerate() {
            let at = format!("mcp_servers[{i}]");
            let name = s.name.as_deref().map(str::trim).filter(|n| !n.is_empty());
            let Some(name) = name else {
                self.problem(&format!("{at}.name"), "missing required value".into());
                continue;
            };
            if out.iter().any(|o| o.name == name) {
                self.problem(
                    &format!("{at}.name"),
                    format!("\"{name}\" is used by another server"),
                );
            }
            let transport = match (&s.url, &s.command) {
                (Some(url), None) => {
                    if s.args.is_some() {
                        self.problem(
                            &format!("{at}.args"),
                            "only a `command` server takes args".into(),
                        );
                    }
                    self.http_url(&format!("{at}.url"), url)
                        .map(|_| Transport::Http {
                            url: url.trim().to_string(),
                        })
                }
                (None, Some(cmd)) if !cmd.trim().is_empty() => Some(Transport::Stdio {
                    command: cmd.clone(),
                    args: s.args.clone().unwrap_or_default(),
                }),
                (None, Some(_)) => {
                    self.problem(&format!("{at}.command"), "must not be empty".into());
                    None
                }
                (Some(_), Some(_)) => {
                    self.problem(
                        &at,
                        "has both `url` and `command`; a server is one or the other".into(),
                    );
                    None
                }
                (None, None) => {
                    self.problem(
                        &at,
                        "needs `url` (streamable HTTP) or `command` (stdio)".into(),
                    );
                    None
                }
            };
            let trusted_origin = s
                .trusted_origin
                .as_deref()
                .and_then(|o| self.origin(&format!("{at}.trusted_origin"), o));
            let mut tools = BTreeMap::new();
            for (tool, t) in &s.tools {
                let key = format!("{at}.tools.{tool}");
                if tool.trim().is_empty() {
                    self.problem(&key, "a tool name must not be empty".into());
                }
                let settings = self.tool(&key, &at, trusted_origin.as_deref(), t);
                tools.insert(tool.clone(), settings);
            }
            let protocol = match s.protocol.as_deref().map(str::trim) {
                None => crate::mcp::Revision::default(),
                Some(p) => crate::mcp::Revision::parse(p).unwrap_or_else(|| {
                    self.problem(
                        &format!("{at}.protocol"),
                        format!("`{p}` is not a revision: use \"2025-11-25\", \"2026-07-28\" or \"auto\""),
                    );
                    crate::mcp::Revision::default()
                }),
            };
            let auth = self.server_auth(
                &at,
                s.auth.as_deref(),
                s.bearer_env.as_deref(),
                s.oauth.as_ref(),
                s.url.is_some(),
                env,
            );
            if let Some(transport) = transport {
                out.push(McpServer {
                    auth,
                    name: name.to_string(),
                    transport,
                    trusted_origin,
                    protocol,
                    trusted: s.trusted.unwrap_or(true),
                    tools,
                });
            }
        }
        self.settling_roles_stand(&out);
        out
    }

    /// `scheme://host[:port]` with nothing after it, normalised.
    pub(super) fn origin(&mut self, key: &str, o: &str) -> Option<String> {
        let url = self.http_url(key, o)?;
        let bare = matches!(url.path(), "" | "/")
            && url.query().is_none()
            && url.fragment().is_none()
            && url.username().is_empty()
            && url.password().is_none();
        if !bare {
            self.problem(
                key,
                "must be an origin (scheme://host[:port]), without path, query or credentials"
                    .into(),
            );
            return None;
        }
        Some(url.origin().ascii_serialization())
    }
}
