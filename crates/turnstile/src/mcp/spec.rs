//! What an MCP server is and what it says about itself: how to reach it
//! ([`ServerSpec`], [`Transport`]), the protocol revision we ask for, and
//! what `initialize` and `tools/list` tell us ([`ServerInfo`], [`ToolInfo`]).
//!
//! Shared by the connection ([`super::session`]) and the client that keeps it
//! ([`super::client`]); it depends on neither, so the two do not import each
//! other's types.

use std::collections::BTreeMap;

use rmcp::model::ProtocolVersion;
use serde_json::Value;

use super::url::redact_url;

/// The protocol revision we ask for in `initialize` (see ADR 0003).
pub const PROTOCOL_VERSION: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// The stateless revision (SEP-2567): no `initialize`, no session; version
/// and capabilities travel in every request's `_meta`, and the server
/// answers `server/discover`.
pub const STATELESS_VERSION: ProtocolVersion = ProtocolVersion::V_2026_07_28;

/// Which MCP revision a server is spoken to in (config `protocol`, ADR 0003).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Revision {
    /// `initialize`, a session (`Mcp-Session-Id`), server-initiated
    /// requests nested in an open call.
    #[default]
    #[serde(rename = "2025-11-25")]
    Sessions,
    /// `server/discover`, no session; input requests come back as
    /// `InputRequiredResult` and the call is re-sent with the answers.
    #[serde(rename = "2026-07-28")]
    Stateless,
    /// `server/discover` first; a server that answers it as a legacy one
    /// (a JSON-RPC error) is spoken to in 2025-11-25.
    #[serde(rename = "auto")]
    Auto,
}

impl Revision {
    /// As the configuration spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Revision::Sessions => "2025-11-25",
            Revision::Stateless => "2026-07-28",
            Revision::Auto => "auto",
        }
    }

    /// The configuration's spelling back to a revision.
    pub fn parse(s: &str) -> Option<Revision> {
        [Revision::Sessions, Revision::Stateless, Revision::Auto]
            .into_iter()
            .find(|r| r.as_str() == s)
    }
}

/// How to reach an MCP server.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Transport {
    /// Streamable HTTP; `url` is the full MCP endpoint (e.g. `http://127.0.0.1:8080/mcp`).
    Http { url: String },
    /// A child process speaking MCP on stdin/stdout.
    Stdio {
        command: String,
        #[serde(default)]
        args: Vec<String>,
    },
}

/// What the configuration says about one tool of a server, known before
/// the server answers `tools/list`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ToolPolicy {
    /// The call may be re-sent once on a new session after it hit a session
    /// expiry, like a tool that declares `readOnlyHint: true` (ADR 0011).
    #[serde(default)]
    pub retry_safe: bool,
}

/// A named MCP server.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ServerSpec {
    /// Our name for the server (used in errors and logs).
    pub name: String,
    pub transport: Transport,
    /// Tools the configuration names for this server. Until the server has
    /// answered `tools/list` once, these are the tools it is taken to offer,
    /// so a call of one while the server is down fails as `server_down`,
    /// not as an unknown tool.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, ToolPolicy>,
    /// `false`: the server's annotations are not believed to exempt
    /// anything, and a tool of it that declares none waits for the user's
    /// approval of each call (issue 17).
    #[serde(default = "trusted_by_default")]
    pub trusted: bool,
    /// The revision to speak (config `protocol`).
    #[serde(default)]
    pub protocol: Revision,
    /// The access token an OAuth flow got for it (`mcp::oauth`), sent as
    /// `Authorization: Bearer`; never serialized, printed redacted.
    #[serde(skip)]
    pub bearer: Option<super::oauth::AccessToken>,
}

fn trusted_by_default() -> bool {
    true
}

impl ServerSpec {
    /// A streamable-HTTP server.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        ServerSpec {
            name: name.into(),
            transport: Transport::Http { url: url.into() },
            tools: BTreeMap::new(),
            trusted: true,
            protocol: Revision::default(),
            bearer: None,
        }
    }

    /// A stdio server started as `command args...`.
    pub fn stdio(
        name: impl Into<String>,
        command: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        ServerSpec {
            name: name.into(),
            transport: Transport::Stdio {
                command: command.into(),
                args: args.into_iter().map(Into::into).collect(),
            },
            tools: BTreeMap::new(),
            trusted: true,
            protocol: Revision::default(),
            bearer: None,
        }
    }

    /// Speaks `revision` to the server.
    pub fn with_protocol(mut self, revision: Revision) -> Self {
        self.protocol = revision;
        self
    }

    /// Marks the server untrusted: its tools' annotations exempt nothing.
    pub fn untrusted(mut self) -> Self {
        self.trusted = false;
        self
    }

    /// Marks `tool` as safe to re-send after a session expiry.
    pub fn retry_safe(mut self, tool: impl Into<String>) -> Self {
        self.tools.entry(tool.into()).or_default().retry_safe = true;
        self
    }
}

impl Transport {
    /// How the transport may be printed or logged: an HTTP URL as
    /// `scheme://host[:port]/path` ([`redact_url`]), a stdio server as its
    /// program and the number of its arguments — never the arguments, which
    /// may carry a token.
    pub fn shown(&self) -> String {
        match self {
            Transport::Http { url } => redact_url(url).unwrap_or_else(|| "<url>".into()),
            Transport::Stdio { command, args } => shown_command(command, args.len()),
        }
    }
}

/// `stdio: PROGRAM` and how many arguments it takes, not what they are.
pub fn shown_command(command: &str, args: usize) -> String {
    match args {
        0 => format!("stdio: {command}"),
        1 => format!("stdio: {command} (1 argument, not shown)"),
        n => format!("stdio: {command} ({n} arguments, not shown)"),
    }
}

/// A tool as advertised by `tools/list`.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ToolInfo {
    pub name: String,
    /// Empty when the server gave none.
    pub description: String,
    /// The tool's `inputSchema` (a JSON Schema object), shared: every turn
    /// takes the catalogue, and a schema copied per turn was ~8 KB of each
    /// open turn's heap (issue 35's heap profile).
    pub input_schema: std::sync::Arc<Value>,
}

/// What a server says about itself in `initialize` (`serverInfo`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transports_are_shown_without_tokens_or_args() {
        let http = ServerSpec::http("s", "https://u:pw@Tools.Example.com:8443/mcp?token=t#f");
        assert_eq!(http.transport.shown(), "https://tools.example.com:8443/mcp");
        let stdio = ServerSpec::stdio("f", "npx", ["-y", "srv", "--api-key=k"]);
        assert_eq!(
            stdio.transport.shown(),
            "stdio: npx (3 arguments, not shown)"
        );
        assert_eq!(
            ServerSpec::http("s", "not a url").transport.shown(),
            "<url>"
        );
    }

    #[test]
    fn spec_serde_shape() {
        let spec = ServerSpec::stdio("everything", "node", ["index.js", "stdio"]);
        let v = serde_json::to_value(&spec).unwrap_or_default();
        assert_eq!(v["transport"]["type"], "stdio");
        assert!(v.get("tools").is_none());
        let back: ServerSpec = serde_json::from_value(serde_json::json!({
            "name": "demo", "transport": {"type": "http", "url": "http://127.0.0.1:1/mcp"}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, ServerSpec::http("demo", "http://127.0.0.1:1/mcp"));
        let safe = ServerSpec::http("demo", "http://127.0.0.1:1/mcp").retry_safe("search");
        assert!(safe.tools["search"].retry_safe);
    }
}
