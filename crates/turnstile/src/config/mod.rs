//! Configuration of `turnstile serve`: one TOML file, with environment
//! variables overriding it. Every key is documented in
//! `docs/configuration.md`; `turnstile.example.toml` is a complete example.
//!
//! Loading is two steps: the file is parsed into `File*` types that mirror
//! it (`deny_unknown_fields`, so a misspelt key is an error with its line and
//! column, not a silently ignored setting); then [`Config::from_toml`]
//! applies the environment, fills defaults and validates, collecting every
//! problem with its key path. Nothing is connected here.
//!
//! Each section is read by its own file (issue 36 §3): `model.rs`,
//! `limits.rs`, `http.rs` (`[http]`, `[auth]`, `[licence]`), `servers.rs`
//! and `tools.rs`, where a tool's role in a protocol is a typed variant;
//! each reports to the validator in `settings.rs`.
//!
//! The API key is read from the environment variable named by
//! `model.api_key_env` (default `OPENAI_API_KEY`). A literal `model.api_key`
//! in the file works but produces a warning; the key itself is never part of
//! a message or a `Debug` form.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::agent::Limits;
pub use crate::http::HttpConfig;
use crate::llm::OpenAiConfig;
use crate::mcp::ServerSpec;
use crate::store::Backend;
// What the file's sections become: the judge's own types.
use crate::judge::approval::{Roles, ToolRole};
use crate::judge::capability::Terminals;
use crate::judge::card::Cards;
use crate::judge::tiers::{LicenceMap, Tiers};
use crate::judge::Contracts;

mod guardrails;
mod http;
mod limits;
mod model;
mod server_auth;
mod servers;
mod settings;
mod telemetry;
mod tools;
use http::{FileAuth, FileHttp, FileLicence};
use limits::FileLimits;
use model::FileModel;
pub use server_auth::ConnectionsSettings;
use servers::FileServer;
pub use settings::ServerAuth;
use settings::{hide_string_values, read_text, TextFile, Validator};
pub use settings::{
    KeySource, McpServer, ModelConfig, Problem, TerminalFlow, ToolSettings, DEFAULT_ADDR,
    DEFAULT_API_KEY_ENV, ENV_ADDR, ENV_DATABASE_URL, ENV_MODEL, ENV_MODEL_BASE_URL, ENV_TABLES,
    MAX_INSTRUCTIONS_BYTES,
};
pub use telemetry::TelemetryConfig;

/// The largest config file [`Config::load`] reads (1 MiB).
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: cannot read the config file")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A FIFO, a device or a directory: reading it could block or never end.
    #[error("{path}: not a regular file; the config must be a file")]
    NotAFile { path: String },
    #[error("{path}: larger than {max} bytes; a config file is at most that")]
    TooLarge { path: String, max: u64 },
    /// TOML syntax, a wrong type or an unknown key, at its line and column.
    #[error("{path}:{line}:{column}: {message}")]
    Parse {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
    /// Every problem found by validation, each on its own line.
    #[error("{path}: invalid configuration:{}", problems.iter().map(|p| format!("\n  {p}")).collect::<String>())]
    Invalid {
        path: String,
        problems: Vec<Problem>,
    },
}

// ---------------------------------------------------------------------------
// The file as written

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    addr: Option<String>,
    database_url: Option<String>,
    tables_dir: Option<PathBuf>,
    #[serde(default)]
    model: FileModel,
    #[serde(default)]
    limits: FileLimits,
    #[serde(default)]
    http: FileHttp,
    #[serde(default)]
    auth: FileAuth,
    #[serde(default)]
    licence: FileLicence,
    #[serde(default)]
    mcp_servers: Vec<FileServer>,
    #[serde(default)]
    guardrails: Vec<guardrails::FileGuardrail>,
    #[serde(default)]
    telemetry: telemetry::FileTelemetry,
    connections: Option<server_auth::FileConnections>,
}

// ---------------------------------------------------------------------------
// The validated configuration

#[derive(Debug, Clone)]
pub struct Config {
    /// The file it came from (for messages).
    pub path: PathBuf,
    pub addr: SocketAddr,
    pub database_url: String,
    /// Table override directory (each `<name>.ron` in it replaces the
    /// compiled-in table). Relative paths in the file are relative to the
    /// file's directory.
    pub tables_dir: Option<PathBuf>,
    pub model: ModelConfig,
    /// `[limits]`, read straight into the agent's limits: the file's flat
    /// keys are validated (located) and land in one type.
    pub limits: Limits,
    /// `limits.turn_lease_secs`: how long a turn's lease on its thread
    /// holds without renewal (see [`Config::turn_lease`]).
    pub turn_lease: Duration,
    /// `[http]`: connection timeouts, head size, framing and CORS origins.
    pub http: HttpConfig,
    /// `[auth]`: who may call (the verifier, the proxy key, the mode).
    pub auth: crate::http::AuthConfig,
    /// `[licence]`: the tier order, lowest first.
    pub tiers: Tiers,
    /// What an anonymous caller holds (`None`: the lowest tier).
    pub anonymous_tiers: Option<Vec<String>>,
    pub mcp_servers: Vec<McpServer>,
    /// `[[guardrails]]`: the safety checks, in the order they run.
    pub guardrails: crate::agent::Guardrails,
    /// `[telemetry]`: OpenTelemetry trace export.
    pub telemetry: TelemetryConfig,
    /// `[connections]`, when a server authorizes per user.
    pub connections: Option<ConnectionsSettings>,
    /// Things that work but should be changed (a literal key in the file, …).
    /// Never contain a secret.
    pub warnings: Vec<Problem>,
}

impl Config {
    /// Reads `path` and the process environment. `path` must be a regular
    /// file of at most [`MAX_CONFIG_BYTES`].
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let shown = || path.display().to_string();
        let src = read_text(path, MAX_CONFIG_BYTES).map_err(|e| match e {
            TextFile::Read(source) => ConfigError::Read {
                path: shown(),
                source,
            },
            TextFile::NotAFile => ConfigError::NotAFile { path: shown() },
            TextFile::TooLarge => ConfigError::TooLarge {
                path: shown(),
                max: MAX_CONFIG_BYTES,
            },
            TextFile::NotUtf8 => ConfigError::Read {
                path: shown(),
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "the file is not UTF-8",
                ),
            },
        })?;
        Config::from_toml(&src, path, &|name| std::env::var(name).ok())
    }

    /// Parses and validates `src` (the text of `path`), with `env` standing
    /// for the environment. An empty variable counts as unset.
    pub fn from_toml(
        src: &str,
        path: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let shown = path.display().to_string();
        let file: FileConfig = toml::from_str(src).map_err(|e| {
            let (line, column) = e.span().map(|s| line_col(src, s.start)).unwrap_or((1, 1));
            // One line: the message may hold a hint on a line of its own.
            // A type error never quotes the value: a key may be pasted into
            // any field (`model = "sk-…"`).
            let mut message = hide_string_values(
                &e.message()
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .collect::<Vec<_>>()
                    .join("; "),
            );
            if let Some(hint) = tools::moved_key_hint(&message) {
                message = format!("{message}; {hint}");
            }
            ConfigError::Parse {
                path: shown.clone(),
                line,
                column,
                message,
            }
        })?;
        let env = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let mut v = Validator::default();
        let base_dir = path.parent().unwrap_or(Path::new(""));

        let addr = match (env(ENV_ADDR), &file.addr) {
            (Some(a), _) => v.parse_addr(&format!("{ENV_ADDR} (overrides `addr`)"), &a),
            (None, Some(a)) => v.parse_addr("addr", a),
            (None, None) => DEFAULT_ADDR.parse().ok(),
        };
        let database_url = env(ENV_DATABASE_URL)
            .or(file.database_url.clone())
            .filter(|u| !u.trim().is_empty());
        match &database_url {
            None => v.missing("database_url", ENV_DATABASE_URL),
            // Decided here, once, for `serve --check` and `serve` alike.
            Some(url) => {
                if let Err(why) = database_backend(url) {
                    let key = if env(ENV_DATABASE_URL).is_some() {
                        format!("{ENV_DATABASE_URL} (overrides `database_url`)")
                    } else {
                        "database_url".into()
                    };
                    v.problem(&key, why);
                }
            }
        }
        let tables_dir = match (env(ENV_TABLES), &file.tables_dir) {
            (Some(d), _) => Some(PathBuf::from(d)),
            (None, Some(d)) if d.is_relative() => Some(base_dir.join(d)),
            (None, Some(d)) => Some(d.clone()),
            (None, None) => None,
        };
        if let Some(d) = &tables_dir {
            if !d.is_dir() {
                let key = if env(ENV_TABLES).is_some() {
                    format!("{ENV_TABLES} (overrides `tables_dir`)")
                } else {
                    "tables_dir".into()
                };
                v.problem(&key, format!("{} is not a directory", d.display()));
            }
        }

        let instructions = v.instructions(&file.model, base_dir);
        let model = v
            .model(&file.model, &env)
            .map(|m| ModelConfig { instructions, ..m });
        let (limits, turn_lease) = v.limits(&file.limits);
        let http = v.http(&file.http, &env);
        let auth = v.auth(&file.auth, &http, &env);
        let (tiers, anonymous_tiers) = v.licence(&file.licence);
        let mcp_servers = v.servers(&file.mcp_servers, &env);
        let per_user = (mcp_servers.iter()).any(|s| matches!(s.auth, ServerAuth::User(_)));
        let connections = v.connections(file.connections.as_ref(), per_user, &env);
        let guardrails = v.guardrails(&file.guardrails, base_dir, &env);
        let telemetry = v.telemetry(&file.telemetry);
        for (i, server) in mcp_servers.iter().enumerate() {
            for (tool, t) in &server.tools {
                if let Some(tier) = &t.licence_tier {
                    if !tiers.names().contains(tier) {
                        v.problem(
                            &format!("mcp_servers[{i}].tools.{tool}.licence_tier"),
                            format!("not one of `licence.tiers` ({})", tiers.names().join(", ")),
                        );
                    }
                }
            }
        }
        if file.mcp_servers.is_empty() {
            v.warn(
                "mcp_servers",
                "no MCP servers are configured: the model can only talk".into(),
            );
        }

        match (v.problems.is_empty(), addr, database_url, model) {
            (true, Some(addr), Some(database_url), Some(model)) => Ok(Config {
                path: path.to_path_buf(),
                addr,
                database_url,
                tables_dir,
                model,
                limits,
                turn_lease,
                http,
                auth,
                tiers,
                anonymous_tiers,
                mcp_servers,
                guardrails,
                telemetry,
                connections,
                warnings: v.warnings,
            }),
            _ => Err(ConfigError::Invalid {
                path: shown,
                problems: v.problems,
            }),
        }
    }

    /// The database `database_url` names (validated by
    /// [`Config::from_toml`] with [`database_backend`]).
    pub fn database(&self) -> Backend {
        database_backend(&self.database_url).unwrap_or(Backend::Sqlite)
    }

    /// The one tool → required-tier map: every server's `licence_tier`s,
    /// read in `licence.tiers`' order.
    pub fn licences(&self) -> LicenceMap {
        let configured = (self.mcp_servers.iter())
            .flat_map(|s| s.tools.iter())
            .filter_map(|(tool, t)| Some((tool.clone(), t.licence_tier.clone()?)))
            .collect();
        LicenceMap::new(configured, self.tiers.clone(), self.anonymous_tiers.clone())
    }

    /// The agent's limits.
    pub fn agent_limits(&self) -> Limits {
        self.limits
    }

    /// How long a turn's claim on its thread (a lease row in the database)
    /// holds without renewal; the running turn renews it every third of
    /// this. A crashed process's threads are free again after it.
    pub fn turn_lease(&self) -> Duration {
        self.turn_lease
    }

    /// Every tool's role in the approval protocol; a prepare tool's
    /// confirm, cancel and status tools take theirs from it.
    pub fn roles(&self) -> Roles {
        let mut out = Roles::default();
        for s in &self.mcp_servers {
            for (tool, t) in &s.tools {
                match &t.approval {
                    Some(ToolRole::Prepare(p)) => out.prepare(tool, p.clone()),
                    Some(r) => out.insert(tool, r.clone()),
                    None => {}
                }
            }
        }
        out
    }

    /// Every tool's approval-card wording.
    pub fn cards(&self) -> Cards {
        let mut out = Cards::default();
        for s in &self.mcp_servers {
            for (tool, t) in &s.tools {
                if let Some(w) = &t.summary {
                    out.insert(tool, w.clone());
                }
            }
        }
        out
    }

    /// Every terminal flow, by its confirm tool.
    pub fn terminal_flows(&self) -> Terminals {
        let mut out = Terminals::default();
        out.allow_link_origins(self.http.link_origins.clone());
        for s in &self.mcp_servers {
            for (tool, t) in &s.tools {
                if let Some(flow) = &t.terminal {
                    out.insert(tool, flow.clone());
                }
            }
        }
        out
    }

    /// The MCP servers as the tool belt connects to them.
    /// The result contracts declared per tool.
    pub fn contracts(&self) -> Contracts {
        let mut out = Contracts::default();
        for s in &self.mcp_servers {
            for (tool, t) in &s.tools {
                if let Some(c) = &t.contract {
                    out.insert(tool, c.clone());
                }
            }
        }
        out
    }

    pub fn server_specs(&self) -> Vec<ServerSpec> {
        self.mcp_servers
            .iter()
            .map(|s| ServerSpec {
                name: s.name.clone(),
                transport: s.transport.clone(),
                // Every configured tool is named, so a call of one while its
                // server is down fails as `server_down`, not "unknown tool".
                tools: s
                    .tools
                    .iter()
                    .map(|(tool, t)| {
                        let policy = crate::mcp::ToolPolicy {
                            retry_safe: t.retry_safe,
                        };
                        (tool.clone(), policy)
                    })
                    .collect(),
                trusted: s.trusted,
                protocol: s.protocol,
                bearer: match &s.auth {
                    ServerAuth::Static(token) => Some(token.clone()),
                    _ => None,
                },
            })
            .collect()
    }

    /// The servers that authorize per user, and where their flows come
    /// back: `None` when no server is `auth = "user"`.
    pub fn connections_config(
        &self,
    ) -> anyhow::Result<Option<crate::agent::connections::ConnectionsConfig>> {
        let Some(c) = &self.connections else {
            return Ok(None);
        };
        let specs = self.server_specs();
        let servers = (self.mcp_servers.iter().zip(specs))
            .filter_map(|(s, spec)| match &s.auth {
                ServerAuth::User(client) => Some(crate::agent::connections::UserServer {
                    spec,
                    client: client.clone(),
                }),
                _ => None,
            })
            .collect();
        Ok(Some(crate::agent::connections::ConnectionsConfig {
            servers,
            callback_url: c.callback_url.clone(),
            client_metadata_url: c.client_metadata_url.clone(),
            flow_ttl: c.flow_ttl,
            key: crate::store::SealingKey::parse(c.key.expose())
                .map_err(|e| anyhow::anyhow!("{e}"))?,
        }))
    }

    /// The model adapter's settings.
    pub fn openai(&self) -> OpenAiConfig {
        let m = &self.model;
        OpenAiConfig {
            base_url: m.base_url.clone(),
            model: m.name.clone(),
            api_key: Some(m.api_key.clone()),
            connect_timeout: m.connect_timeout,
            idle_timeout: m.idle_timeout,
            max_retries: m.max_retries,
            backoff_initial: m.backoff_initial,
            backoff_max: m.backoff_max,
        }
    }
}

/// Which database a `database_url` names, by the rules of
/// [`Store::connect`](crate::store::Store::connect) (case-insensitive
/// scheme): `postgres://`/`postgresql://` is PostgreSQL, `sqlite:` or a path
/// without `://` is SQLite, any other scheme is refused. `serve --check` and
/// `serve` both decide through this function (in [`Config::from_toml`]); a
/// test holds it to the store's own decision on a table of URLs. The error
/// names the scheme at most, never the URL (it may hold a password).
pub fn database_backend(url: &str) -> Result<Backend, String> {
    let lower = url.trim_start().to_ascii_lowercase();
    if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
        return Ok(Backend::Postgres);
    }
    if lower.starts_with("sqlite:") {
        return Ok(Backend::Sqlite);
    }
    if let Some((scheme, _)) = url.split_once("://") {
        let scheme = scheme.trim();
        let plain = !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        let named = if plain {
            format!("`{scheme}:` is not a supported database")
        } else {
            "not a supported database URL".to_string()
        };
        return Err(format!(
            "{named}; use sqlite:PATH, a file path, or postgres://user:pass@host/db"
        ));
    }
    Ok(Backend::Sqlite)
}

fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(src.len());
    let before = src.get(..offset).unwrap_or(src);
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::Transport;
    use std::collections::HashMap;

    const KEY: &str = "sk-config-test-0123456789";

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    fn load(src: &str, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        Config::from_toml(src, Path::new("t.toml"), &env(vars))
    }

    const MINIMAL: &str = r#"
database_url = "sqlite://t.db?mode=rwc"
[model]
base_url = "https://api.example.com/v1"
name = "gpt-test"
"#;

    #[test]
    fn the_example_file_validates() {
        let src = include_str!("../../../../turnstile.example.toml");
        let path = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../turnstile.example.toml"
        ));
        let c = Config::from_toml(src, path, &env(&[("OPENAI_API_KEY", KEY)]))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.model.key_source, KeySource::Env("OPENAI_API_KEY".into()));
        assert!(!c.mcp_servers.is_empty());
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        // The example documents both transports and the per-server settings.
        assert!(c
            .mcp_servers
            .iter()
            .any(|s| matches!(s.transport, Transport::Http { .. })));
        assert!(c
            .mcp_servers
            .iter()
            .any(|s| matches!(s.transport, Transport::Stdio { .. })));
        assert!(c.mcp_servers.iter().any(|s| s.trusted_origin.is_some()));
        assert!(c
            .mcp_servers
            .iter()
            .any(|s| s.tools.values().any(|t| t.licence_tier.is_some())));
    }

    /// The status tool's asks are configuration (issue 36), bounded, and
    /// reach the agent's limits.
    #[test]
    fn status_polls_are_configured_and_bounded() {
        let src = format!(
            "{MINIMAL}\n[limits]\nstatus_polls = 2\nrestart_status_polls = 3\nstatus_poll_ms = 40\n"
        );
        let l = load(&src, &[("OPENAI_API_KEY", KEY)])
            .unwrap()
            .agent_limits();
        assert_eq!(
            l.status,
            crate::agent::StatusPolls {
                per_turn: 2,
                after_restart: 3,
                gap: Duration::from_millis(40),
            }
        );
        let src = format!("{MINIMAL}\n[limits]\nstatus_polls = 101\nstatus_poll_ms = 0\n");
        let Err(e) = load(&src, &[("OPENAI_API_KEY", KEY)]) else {
            panic!("101 polls are refused")
        };
        let e = e.to_string();
        assert!(
            e.contains("limits.status_polls") && e.contains("at most 100"),
            "{e}"
        );
        assert!(e.contains("limits.status_poll_ms"), "{e}");
    }

    #[test]
    fn defaults_and_limits_map_to_the_agent() {
        let c = load(MINIMAL, &[("OPENAI_API_KEY", KEY)]).unwrap();
        assert_eq!(c.addr, DEFAULT_ADDR.parse().unwrap());
        // A file without `[limits]` runs on the agent's own defaults.
        let l = &c.limits;
        assert_eq!(
            (
                l.limit_sentinel,
                l.page_cap,
                l.context.max_string,
                l.context.max_items
            ),
            (3000, 5, 200, 50)
        );
        assert_eq!(
            (l.max_steps, l.max_calls_per_step, l.history_bytes),
            (6, 8, 4096)
        );
        assert_eq!((l.digest.items, l.digest.bytes), (5, 2048));
        assert_eq!(
            (l.approval_ttl, l.task_wait),
            (Duration::from_secs(600), Duration::from_secs(900))
        );
        assert_eq!(
            (l.status.per_turn, l.status.after_restart, l.status.gap),
            (5, 8, Duration::from_millis(250))
        );
        assert_eq!(c.turn_lease(), Duration::from_secs(30));
        assert_eq!(c.model.idle_timeout, Duration::from_secs(60));
        let src = format!("{MINIMAL}\n[limits]\nlimit_sentinel = 1000\nmax_string = 20\nmax_items = 7\npage_cap = 2\n");
        let l = load(&src, &[("OPENAI_API_KEY", KEY)])
            .unwrap()
            .agent_limits();
        assert_eq!(
            (
                l.limit_sentinel,
                l.page_cap,
                l.context.max_string,
                l.context.max_items
            ),
            (1000, 2, 20, 7)
        );
        let src = format!("{MINIMAL}\n[limits]\nturn_lease_secs = 3\n");
        let c = load(&src, &[("OPENAI_API_KEY", KEY)]).unwrap();
        assert_eq!(c.turn_lease(), Duration::from_secs(3));
        for bad in ["0", "86401"] {
            let src = format!("{MINIMAL}\n[limits]\nturn_lease_secs = {bad}\n");
            let Err(ConfigError::Invalid { problems, .. }) = load(&src, &[("OPENAI_API_KEY", KEY)])
            else {
                panic!("a lease of {bad} s must be refused");
            };
            assert!(problems.iter().any(|p| p.key == "limits.turn_lease_secs"));
        }
        let src = format!(
            "{MINIMAL}\n[limits]\nmax_steps = 2\nhistory_bytes = 100\ndigest_items = 3\ndigest_bytes = 500\n"
        );
        let l = load(&src, &[("OPENAI_API_KEY", KEY)])
            .unwrap()
            .agent_limits();
        assert_eq!(
            (l.max_steps, l.history_bytes, l.digest.items, l.digest.bytes),
            (2, 100, 3, 500)
        );
        for bad in ["0", "65"] {
            let src = format!("{MINIMAL}\n[limits]\nmax_steps = {bad}\n");
            let Err(ConfigError::Invalid { problems, .. }) = load(&src, &[("OPENAI_API_KEY", KEY)])
            else {
                panic!("max_steps = {bad} must be refused");
            };
            assert!(problems.iter().any(|p| p.key == "limits.max_steps"));
        }
    }

    #[test]
    fn environment_overrides_the_file() {
        let src = format!("addr = \"127.0.0.1:1\"\ntables_dir = \"nowhere\"\n{MINIMAL}");
        let tables = env!("CARGO_MANIFEST_DIR").to_string() + "/../../tables";
        let c = load(
            &src,
            &[
                ("TURNSTILE_ADDR", "0.0.0.0:9999"),
                ("DATABASE_URL", "postgres://u@h/db"),
                ("TURNSTILE_MODEL_BASE_URL", "http://127.0.0.1:11434/v1"),
                ("TURNSTILE_MODEL", "local-model"),
                ("TURNSTILE_TABLES", &tables),
                ("OPENAI_API_KEY", KEY),
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.addr.port(), 9999);
        assert_eq!(c.database_url, "postgres://u@h/db");
        assert_eq!(c.model.base_url, "http://127.0.0.1:11434/v1");
        assert_eq!(c.model.name, "local-model");
        assert_eq!(c.tables_dir.as_deref(), Some(Path::new(&tables)));
        assert_eq!(c.model.api_key.expose(), KEY);
    }

    #[test]
    fn the_key_comes_from_the_named_variable_and_a_literal_is_warned_about() {
        let named = MINIMAL.replace("[model]", "[model]\napi_key_env = \"MY_KEY\"");
        let c = load(&named, &[("MY_KEY", KEY), ("OPENAI_API_KEY", "other")]).unwrap();
        assert_eq!(c.model.api_key.expose(), KEY);
        assert_eq!(c.model.key_source, KeySource::Env("MY_KEY".into()));

        let literal = MINIMAL.replace("[model]", &format!("[model]\napi_key = \"{KEY}\""));
        let c = load(&literal, &[]).unwrap();
        assert_eq!(c.model.key_source, KeySource::File);
        assert_eq!(c.warnings[0].key, "model.api_key");
        // The environment still wins over the literal.
        let c = load(&literal, &[("OPENAI_API_KEY", "from-env")]).unwrap();
        assert_eq!(c.model.api_key.expose(), "from-env");
        // No form of the config shows the key.
        assert!(!format!("{c:?}").contains("from-env"));
        let c = load(&literal, &[]).unwrap();
        assert!(!format!("{c:?}").contains(KEY));
        assert!(!format!("{:?}", c.openai()).contains(KEY));

        let err = load(MINIMAL, &[]).unwrap_err().to_string();
        assert!(
            err.contains("`model.api_key_env`") && err.contains("OPENAI_API_KEY"),
            "{err}"
        );
        // A key pasted into api_key_env is refused without being echoed.
        let pasted = MINIMAL.replace("[model]", &format!("[model]\napi_key_env = \"{KEY}\""));
        let err = load(&pasted, &[]).unwrap_err().to_string();
        assert!(
            err.contains("model.api_key_env") && !err.contains(KEY),
            "{err}"
        );
    }

    #[test]
    fn parse_errors_are_located() {
        let cases: &[(&str, (usize, usize), &str)] = &[
            ("database_url = \"x\"\n[model]\nname = \n", (3, 8), "string"),
            ("database_url = \"x\"\ncolour = 3\n", (2, 1), "unknown field `colour`"),
            ("[model]\nname = \"m\"\nbase_uri = \"x\"\n", (3, 1), "unknown field `base_uri`"),
            ("[limits]\npage_cap = \"five\"\n", (2, 12), "invalid type"),
            ("[[mcp_servers]]\nname = \"a\"\nurll = \"http://x\"\n", (3, 1), "unknown field `urll`"),
            ("[[mcp_servers]]\nname = \"a\"\n[mcp_servers.tools.search]\nlicense_tier = \"pro\"\n", (4, 1), "unknown field `license_tier`"),
        ];
        for (src, (line, col), msg) in cases {
            match load(src, &[]) {
                Err(ConfigError::Parse {
                    line: l,
                    column: c,
                    message,
                    ..
                }) => {
                    assert_eq!((l, c), (*line, *col), "{src:?}: {message}");
                    assert!(message.contains(msg), "{src:?}: {message}");
                }
                other => panic!("{src:?}: expected a parse error, got {other:?}"),
            }
        }
        let e = load("colour = 3\n", &[]).unwrap_err().to_string();
        assert!(e.starts_with("t.toml:1:1: unknown field `colour`"), "{e}");
    }

    #[test]
    fn missing_and_invalid_values_are_named_by_key_path() {
        let src = r#"
addr = "localhost"
[model]
base_url = "ftp://x"
[limits]
page_cap = 0
[[mcp_servers]]
url = "http://127.0.0.1:1/mcp"
[[mcp_servers]]
name = "both"
url = "http://127.0.0.1:1/mcp"
command = "x"
[[mcp_servers]]
name = "files"
command = "npx"
trusted_origin = "https://viewer.example.com/path"
[mcp_servers.tools.read]
licence_tier = ""
[[mcp_servers]]
name = "files"
url = "not a url"
"#;
        let Err(ConfigError::Invalid { problems, .. }) = load(src, &[]) else {
            panic!("expected problems");
        };
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        for expect in [
            "addr",
            "database_url",
            "model.base_url",
            "model.name",
            "model.api_key_env",
            "limits.page_cap",
            "mcp_servers[0].name",
            "mcp_servers[1]",
            "mcp_servers[2].trusted_origin",
            "mcp_servers[2].tools.read.licence_tier",
            "mcp_servers[3].name",
            "mcp_servers[3].url",
        ] {
            assert!(keys.contains(&expect), "{expect} not in {keys:?}");
        }
        let missing = problems.iter().find(|p| p.key == "model.name").unwrap();
        assert!(
            missing.message.contains("missing required value")
                && missing.message.contains("TURNSTILE_MODEL")
        );
    }

    /// Issue 20 §6.5: a key pasted as the model's name is a problem that
    /// does not quote it, from the file and from the environment alike.
    #[test]
    fn a_model_name_that_looks_like_a_key_is_refused_without_quoting_it() {
        let secrets = [
            "sk-proj-Zq8vN3rT5wXy7LmK0pA9bC2dE123",
            "sk-ant-api03-Zq8vN3rT5wXy7LmK0pA9",
            "sk-1",
            KEY,
            "AIzaSyD3x4mPl3K3yV4lu3Zq8vN3rT5wXy7Lm",
            "0123456789abcdef0123456789abcdef",
            "hf_Zq8vN3rT5wXy7LmK0pA9bC2dE123fghij",
            "gsk_Zq8vN3rT5wXy7LmK0pA9bC2dE123fghij",
            "xai-Zq8vN3rT5wXy7LmK0pA9bC2dE123fghij",
            "my-model:Zq8vN3rT5wXy7LmK0pA9bC2d",
        ];
        let shown_pieces = |name: &str, text: &str| {
            let cs: Vec<char> = name.chars().collect();
            cs.windows(8.min(cs.len()))
                .map(|w| w.iter().collect::<String>())
                .find(|p| text.contains(p.as_str()))
        };
        for name in secrets {
            let file = MINIMAL.replace("gpt-test", name);
            let from_env = [("OPENAI_API_KEY", KEY), (ENV_MODEL, name)];
            for (src, vars) in [
                (file.as_str(), &[("OPENAI_API_KEY", KEY)][..]),
                (MINIMAL, &from_env[..]),
            ] {
                let Err(e @ ConfigError::Invalid { .. }) = load(src, vars) else {
                    panic!("{name:?} is accepted as the model's name");
                };
                let shown = e.to_string();
                assert!(shown.contains("model.name"), "{shown}");
                assert!(shown.contains("looks like"), "{shown}");
                if let Some(p) = shown_pieces(name, &shown) {
                    panic!("{name:?} is quoted ({p:?}): {shown}");
                }
            }
        }
        // The model's name equal to the key, whatever the key looks like.
        let plain = "correcthorsebattery";
        let src = MINIMAL.replace("gpt-test", plain);
        assert!(load(&src, &[("OPENAI_API_KEY", plain)]).is_err());
        // Real model names pass.
        for name in [
            "gpt-4o-mini",
            "gpt-4o-2024-08-06",
            "o3-mini",
            "claude-3-5-sonnet-20241022",
            "meta-llama/Llama-3.3-70B-Instruct-Turbo",
            "mistralai/Mixtral-8x7B-Instruct-v0.1",
            "qwen2.5-coder:32b",
            "ft:gpt-4o-mini-2024-07-18:my-org:custom-suffix:9WY8Qz2d",
            "us.anthropic.claude-3-5-sonnet-20241022-v2:0",
            "accounts/fireworks/models/llama-v3p1-405b-instruct",
            "models/gemini-1.5-pro-002",
            "local-model",
            "task-model",
        ] {
            let src = MINIMAL.replace("gpt-test", name);
            let c = load(&src, &[("OPENAI_API_KEY", KEY)]).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(c.model.name, name);
        }
    }

    #[test]
    fn tools_declare_their_approval_roles() {
        let server = "[[mcp_servers]]\nname = \"lib\"\nurl = \"http://127.0.0.1:9/mcp\"\n";
        let src = format!(
            "{MINIMAL}\n{server}[mcp_servers.tools.prepare.approval.prepare]\naction_id = \"actionId\"\nconfirm = \"confirm\"\ncancel = \"cancel\"\nstatus = \"status\"\n[mcp_servers.tools.send_mail]\napproval = \"before-call\"\n[mcp_servers.tools.wipe]\napproval = \"none\"\n"
        );
        let c = load(&src, &[("OPENAI_API_KEY", KEY)]).unwrap();
        assert!(
            c.server_specs()[0].trusted,
            "servers are trusted by default"
        );
        let r = c.roles();
        assert_eq!(r.get("wipe"), Some(&ToolRole::Exempt));
        assert!(
            matches!(r.get("prepare"), Some(ToolRole::Prepare(p)) if p.action_id == "actionId" && p.status.as_deref() == Some("status"))
        );
        assert_eq!(r.get("confirm"), Some(&ToolRole::Confirm));
        assert_eq!(r.get("cancel"), Some(&ToolRole::Cancel));
        assert_eq!(r.get("status"), Some(&ToolRole::Status));
        assert_eq!(r.get("send_mail"), Some(&ToolRole::BeforeCall));
        // A role's field and a contract's record take dotted paths.
        let nested = format!(
            "{MINIMAL}\n{server}[mcp_servers.tools.hold_room]\nresult_contract = true\nrecord_path = \"data\"\napproval.prepare = {{ action_id = \"data.bookingId\", confirm = \"book\", cancel = \"release\" }}\n"
        );
        let c = load(&nested, &[("OPENAI_API_KEY", KEY)]).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            matches!(c.roles().get("hold_room"), Some(ToolRole::Prepare(p)) if p.action_id == "data.bookingId" && p.id_arg() == "bookingId")
        );
        assert_eq!(
            c.contracts()
                .get("hold_room")
                .and_then(|k| k.shape.record_path.as_deref()),
            Some("data")
        );
        for (bad, key) in [
            // A path that can never match (issue 33 §4).
            (
                "approval.prepare = { action_id = \"data..bookingId\", confirm = \"c\", cancel = \"x\" }\n",
                "approval.prepare.action_id",
            ),
            (
                "approval.prepare = { action_id = \"id\", confirm = \" \", cancel = \"x\" }\n",
                "approval.prepare.confirm",
            ),
            ("record_path = \"data\"\n", "result_contract"),
            (
                "result_contract = true\nrecord_path = \"data.\"\n",
                "record_path",
            ),
            // A deep link's parts are paths into a cited item (issue 38).
            ("deep_link = { panorama = \"id\" }\n", "result_contract"),
            (
                "result_contract = true\ndeep_link = { panorama = \"id\", camera = \"view..camera\" }\n",
                "deep_link.camera",
            ),
            ("result_contract = true\ndeep_link = {}\n", "deep_link"),
        ] {
            let src = format!("{MINIMAL}\n{server}[mcp_servers.tools.t]\n{bad}");
            let Err(ConfigError::Invalid { problems, .. }) = load(&src, &[("OPENAI_API_KEY", KEY)])
            else {
                panic!("{bad} must be refused");
            };
            let want = format!("mcp_servers[0].tools.t.{key}");
            assert!(
                problems.iter().any(|p| p.key == want),
                "{bad}: {problems:?}"
            );
        }
        // What the role's variant cannot hold is refused as it is read, at
        // its line: a missing key, an unknown role, a key of another
        // variant; a key written before roles were typed is told where it
        // moved (issue 36 §3).
        for (bad, said) in [
            (
                "approval.prepare = { action_id = \"id\", cancel = \"c\" }\n",
                "missing field `confirm`",
            ),
            ("approval = \"later\"\n", "unknown variant `later`"),
            ("approval = \"none\"\nconfirm = \"c\"\n", "approval.prepare = {"),
            ("approval = \"prepare\"\n", "this variant takes its keys"),
            ("confirm = \"c\"\n", "approval.prepare = {"),
            ("terminal = \"capability\"\n", "terminal.capability = {"),
            ("preview = \"p\"\n", "terminal.capability = {"),
            (
                "terminal.capability = { preview = \"p\", path_template = \"/a\", confirm = \"c\" }\n",
                "unknown field `confirm`",
            ),
        ] {
            let src = format!("{MINIMAL}\n{server}[mcp_servers.tools.t]\n{bad}");
            let Err(e @ ConfigError::Parse { .. }) = load(&src, &[("OPENAI_API_KEY", KEY)]) else {
                panic!("{bad} must be refused as it is read");
            };
            let shown = e.to_string();
            assert!(shown.contains(said), "{bad}: {shown}");
            // Located at a line of the tool's table, never at the file's top.
            let first = MINIMAL.lines().count() + server.lines().count() + 3;
            let lines = first..first + bad.lines().count();
            let at = shown.split(':').nth(1).and_then(|l| l.parse().ok());
            assert!(at.is_some_and(|l| lines.contains(&l)), "{bad}: {shown}");
        }
        // A confirm tool given a role of its own would be runnable from a
        // model's plan: refused, whatever the order of the tables.
        for own in ["none", "before-call"] {
            let src = format!(
                "{MINIMAL}\n{server}[mcp_servers.tools.book]\napproval.prepare = {{ action_id = \"id\", confirm = \"a_confirm\", cancel = \"z_cancel\" }}\n[mcp_servers.tools.a_confirm]\napproval = \"{own}\"\n"
            );
            let Err(ConfigError::Invalid { problems, .. }) = load(&src, &[("OPENAI_API_KEY", KEY)])
            else {
                panic!("a confirm with approval = {own} must be refused");
            };
            assert!(
                problems
                    .iter()
                    .any(|p| p.key == "mcp_servers.tools.a_confirm.approval"),
                "{problems:?}"
            );
        }
        // And the roles themselves never let a later role replace a confirm.
        let mut r = Roles::default();
        r.prepare(
            "book",
            crate::judge::approval::Prepare {
                action_id: "id".into(),
                confirm: "c".into(),
                cancel: "x".into(),
                status: None,
            },
        );
        r.insert("c", ToolRole::Exempt);
        assert!(r.is_confirm("c"));
    }

    /// Issue 33 §5: a card's wording is read at load; what can be known
    /// wrong before any call is a located problem.
    #[test]
    fn card_summaries_are_read_and_checked_at_load() {
        let server = "[[mcp_servers]]\nname = \"lib\"\nurl = \"http://127.0.0.1:9/mcp\"\n";
        let prepare = "[mcp_servers.tools.hold_seat]\napproval.prepare = { action_id = \"actionId\", confirm = \"book\", cancel = \"release\" }\n";
        let src = format!(
            "{MINIMAL}\n{server}{prepare}summary = \"Reserve seat {{seat}} at {{time}}?\"\nsummary_ko = \"{{seat}}번 좌석을 {{time}}에 예약할까요?\"\n"
        );
        let c = load(&src, &[("OPENAI_API_KEY", KEY)]).unwrap_or_else(|e| panic!("{e}"));
        let w = c.cards();
        let w = w.get("hold_seat").expect("the wording is kept");
        assert_eq!(w.en.fields().collect::<Vec<_>>(), ["seat", "time"]);
        assert!(w.ko.is_some());
        for (bad, key) in [
            ("summary = \"Reserve seat {seat\"\n", "hold_seat.summary"),
            ("summary = \"Reserve {}?\"\n", "hold_seat.summary"),
            ("summary = \"Use {accessToken}?\"\n", "hold_seat.summary"),
            ("summary = \"Confirm #{actionId}?\"\n", "hold_seat.summary"),
            ("summary_ko = \"예약할까요?\"\n", "hold_seat.summary_ko"),
        ] {
            let src = format!("{MINIMAL}\n{server}{prepare}{bad}");
            let Err(ConfigError::Invalid { problems, .. }) = load(&src, &[("OPENAI_API_KEY", KEY)])
            else {
                panic!("{bad} must be refused");
            };
            let want = format!("mcp_servers[0].tools.{key}");
            assert!(
                problems.iter().any(|p| p.key == want),
                "{bad}: {problems:?}"
            );
        }
        // The confirm's calls are never shown on a card.
        let src = format!(
            "{MINIMAL}\n{server}{prepare}[mcp_servers.tools.book]\nsummary = \"Book it?\"\n"
        );
        let Err(ConfigError::Invalid { problems, .. }) = load(&src, &[("OPENAI_API_KEY", KEY)])
        else {
            panic!("a confirm's summary must be refused");
        };
        assert!(
            problems
                .iter()
                .any(|p| p.key == "mcp_servers.tools.book.summary"),
            "{problems:?}"
        );
    }

    /// Issue 33 §6: `[model] instructions` or a file of them, not both.
    #[test]
    fn the_assistants_instructions_come_from_the_file_or_a_file_it_names() {
        let vars = [("OPENAI_API_KEY", KEY)];
        let c = load(MINIMAL, &vars).unwrap();
        assert!(c.model.instructions.is_empty());
        let src = format!("{MINIMAL}instructions = \"\"\"\nYou help a library's staff.\n\"\"\"\n");
        let c = load(&src, &vars).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.model.instructions.as_str(), "You help a library's staff.");

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("assistant.md"), "You book rooms.\n").unwrap();
        let path = dir.path().join("t.toml");
        let src = format!("{MINIMAL}instructions_file = \"assistant.md\"\n");
        let c = Config::from_toml(&src, &path, &env(&vars)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.model.instructions.as_str(), "You book rooms.");

        let too_long = "x".repeat(MAX_INSTRUCTIONS_BYTES + 1);
        for (bad, key) in [
            (
                "instructions = \"a\"\ninstructions_file = \"assistant.md\"\n".to_string(),
                "model.instructions_file",
            ),
            (
                "instructions_file = \"missing.md\"\n".to_string(),
                "model.instructions_file",
            ),
            // A directory (as a FIFO or a device) is refused before it is
            // opened, the way the config file itself is read.
            (
                "instructions_file = \".\"\n".to_string(),
                "model.instructions_file",
            ),
            (
                format!("instructions = \"{too_long}\"\n"),
                "model.instructions",
            ),
            ("instructions = \"  \"\n".to_string(), "model.instructions"),
        ] {
            let src = format!("{MINIMAL}{bad}");
            let Err(ConfigError::Invalid { problems, .. }) =
                Config::from_toml(&src, &path, &env(&vars))
            else {
                panic!("{bad:.60} must be refused");
            };
            assert!(problems.iter().any(|p| p.key == key), "{problems:?}");
        }
    }

    /// A terminal flow is checked when the config loads: against its
    /// server's trusted origin, with a path template and token the
    /// validator can hold answers to; each missing or bad key is named.
    #[test]
    fn terminal_flows_are_checked_at_load() {
        let server = "[[mcp_servers]]\nname = \"lms\"\nurl = \"http://127.0.0.1:9/mcp\"\n";
        let flow = "[mcp_servers.tools.confirm_lms_material_export.terminal.capability]\npreview = \"export_all_lms_materials\"\npath_template = \"/api/lms/exports/{jobId}/download\"\n";
        let origin = "trusted_origin = \"http://127.0.0.1:9\"\n";
        let src = format!("{MINIMAL}\n{server}{origin}{flow}");
        let c = load(&src, &[("OPENAI_API_KEY", KEY)]).unwrap();
        let flows = c.terminal_flows();
        let f = flows.confirmed_by("confirm_lms_material_export").unwrap();
        assert_eq!(f.label, "Download files");
        assert_eq!(f.preview, "export_all_lms_materials");
        assert_eq!(f.rule.origin(), "http://127.0.0.1:9");
        let url = "http://127.0.0.1:9/api/lms/exports/J1/download?token=abc";
        assert!(f.rule.validate_url(url).is_ok());
        assert!(f.rule.validate_url(&url.replace(":9/", ":10/")).is_err());
        let at = "mcp_servers[0].tools.confirm_lms_material_export.terminal.capability";
        for (src, key) in [
            (
                format!("{MINIMAL}\n{server}{flow}"),
                "mcp_servers[0].trusted_origin".to_string(),
            ),
            (
                format!(
                    "{MINIMAL}\n{server}{origin}{}",
                    flow.replace(
                        "preview = \"export_all_lms_materials\"\n",
                        "preview = \" \"\n"
                    )
                ),
                format!("{at}.preview"),
            ),
            (
                format!(
                    "{MINIMAL}\n{server}{origin}{}",
                    flow.replace("{jobId}/download", "{jobId}/../download")
                ),
                format!("{at}.path_template"),
            ),
            (
                format!("{MINIMAL}\n{server}{origin}{flow}token_param = \"to ken\"\n"),
                format!("{at}.token_param"),
            ),
        ] {
            let Err(ConfigError::Invalid { problems, .. }) = load(&src, &[("OPENAI_API_KEY", KEY)])
            else {
                panic!("must be refused:\n{src}");
            };
            assert!(problems.iter().any(|p| p.key == key), "{key}: {problems:?}");
        }
    }

    #[test]
    fn tools_declare_result_contracts() {
        let src = format!(
            "{MINIMAL}\n[[mcp_servers]]\nname = \"site\"\nurl = \"http://127.0.0.1:9/mcp\"\n[mcp_servers.tools.query_data]\nresult_contract = true\nfixed_prefixes = [\"Showing \"]\nstitch = true\n[mcp_servers.tools.notes]\nlicence_tier = \"pro\"\n"
        );
        let c = load(&src, &[("OPENAI_API_KEY", KEY)]).unwrap().contracts();
        let q = c.get("query_data").expect("declared contract");
        assert_eq!(
            (q.fixed_prefixes.as_slice(), q.stitch),
            (&["Showing ".to_string()][..], true)
        );
        assert!(c.get("notes").is_none(), "no contract unless declared");
        let bad = format!(
            "{MINIMAL}\n[[mcp_servers]]\nname = \"site\"\nurl = \"http://127.0.0.1:9/mcp\"\n[mcp_servers.tools.q]\nstitch = true\n"
        );
        let Err(ConfigError::Invalid { problems, .. }) = load(&bad, &[("OPENAI_API_KEY", KEY)])
        else {
            panic!("stitch without a contract must be refused");
        };
        assert!(problems
            .iter()
            .any(|p| p.key == "mcp_servers[0].tools.q.result_contract"));
    }

    #[test]
    fn servers_keep_their_settings() {
        let src = format!(
            "{MINIMAL}\n[[mcp_servers]]\nname = \"site\"\nurl = \"http://127.0.0.1:9/mcp\"\ntrusted_origin = \"HTTPS://Viewer.Example.com:443/\"\n[mcp_servers.tools.search_photos]\nlicence_tier = \"pro\"\n[[mcp_servers]]\nname = \"files\"\ncommand = \"npx\"\nargs = [\"-y\", \"server\"]\n"
        );
        let c = load(&src, &[("OPENAI_API_KEY", KEY)]).unwrap();
        assert_eq!(
            c.mcp_servers[0].trusted_origin.as_deref(),
            Some("https://viewer.example.com")
        );
        assert_eq!(
            c.mcp_servers[0].tools["search_photos"]
                .licence_tier
                .as_deref(),
            Some("pro")
        );
        let mut site = ServerSpec::http("site", "http://127.0.0.1:9/mcp");
        site.tools
            .insert("search_photos".into(), Default::default());
        assert_eq!(
            c.server_specs(),
            vec![site, ServerSpec::stdio("files", "npx", ["-y", "server"]),]
        );
    }

    #[test]
    fn the_database_is_decided_by_its_scheme_in_any_case() {
        for (url, want) in [
            ("postgres://u:p@h/db", Some(Backend::Postgres)),
            ("POSTGRES://u:p@h/db", Some(Backend::Postgres)),
            ("PostgreSQL://u@h/db", Some(Backend::Postgres)),
            ("sqlite://t.db?mode=rwc", Some(Backend::Sqlite)),
            ("SQLite:t.db", Some(Backend::Sqlite)),
            ("turnstile.db", Some(Backend::Sqlite)),
            ("mysql://u:p@h/db", None),
            ("u:secret@h://x", None),
        ] {
            assert_eq!(database_backend(url).ok(), want, "{url}");
        }
        let err = database_backend("u:secret@h://x").unwrap_err();
        assert!(!err.contains("secret"), "{err}");
        let src = MINIMAL.replace("sqlite://t.db?mode=rwc", "mysql://u:pw@h/db");
        let Err(ConfigError::Invalid { problems, .. }) = load(&src, &[("OPENAI_API_KEY", KEY)])
        else {
            panic!("mysql must be refused");
        };
        let p = problems.iter().find(|p| p.key == "database_url").unwrap();
        assert!(
            p.message.contains("`mysql:`") && !p.message.contains("pw"),
            "{p}"
        );
        let c = load(
            MINIMAL,
            &[("OPENAI_API_KEY", KEY), ("DATABASE_URL", "POSTGRES://h/db")],
        );
        assert_eq!(c.unwrap().database(), Backend::Postgres);
    }

    #[test]
    fn type_errors_never_quote_a_string_value() {
        assert_eq!(
            hide_string_values(r#"invalid type: string "sk-a\"b", expected u32"#),
            "invalid type: a string, expected u32"
        );
        assert_eq!(
            hide_string_values("invalid type: integer `3`, expected a string"),
            "invalid type: integer `3`, expected a string"
        );
        let Err(ConfigError::Parse { message, line, .. }) = load(
            "[model]\nname = \"m\"\nmax_retries = \"sk-live-123456789\"\n",
            &[],
        ) else {
            panic!("a type error");
        };
        assert_eq!(line, 3);
        assert!(
            message.contains("invalid type") && !message.contains("sk-live"),
            "{message}"
        );
    }

    #[test]
    fn a_tool_may_be_marked_retry_safe() {
        let src = format!(
            "{MINIMAL}\n[[mcp_servers]]\nname = \"site\"\nurl = \"http://127.0.0.1:9/mcp\"\n[mcp_servers.tools.search_photos]\nretry_safe = true\n[mcp_servers.tools.create_issue]\nlicence_tier = \"pro\"\n"
        );
        let c = load(&src, &[("OPENAI_API_KEY", KEY)]).unwrap();
        assert!(c.mcp_servers[0].tools["search_photos"].retry_safe);
        assert!(!c.mcp_servers[0].tools["create_issue"].retry_safe);
        let mut expected =
            ServerSpec::http("site", "http://127.0.0.1:9/mcp").retry_safe("search_photos");
        expected
            .tools
            .insert("create_issue".into(), Default::default());
        assert_eq!(c.server_specs(), vec![expected]);
        let untrusted = src.replace("name = \"site\"\n", "name = \"site\"\ntrusted = false\n");
        let c = load(&untrusted, &[("OPENAI_API_KEY", KEY)]).unwrap();
        assert!(!c.mcp_servers[0].trusted);
        assert!(!c.server_specs()[0].trusted);
    }

    #[test]
    fn a_server_names_its_mcp_revision() {
        let server = |extra: &str| {
            format!("{MINIMAL}\n[[mcp_servers]]\nname = \"site\"\nurl = \"http://127.0.0.1:9/mcp\"\n{extra}")
        };
        let c = load(&server(""), &[("OPENAI_API_KEY", KEY)]).unwrap();
        assert_eq!(c.server_specs()[0].protocol, crate::mcp::Revision::Sessions);
        for (word, revision) in [
            ("2025-11-25", crate::mcp::Revision::Sessions),
            ("2026-07-28", crate::mcp::Revision::Stateless),
            ("auto", crate::mcp::Revision::Auto),
        ] {
            let c = load(
                &server(&format!("protocol = \"{word}\"\n")),
                &[("OPENAI_API_KEY", KEY)],
            )
            .unwrap();
            assert_eq!(c.server_specs()[0].protocol, revision);
        }
        let err = load(&server("protocol = \"2026\"\n"), &[("OPENAI_API_KEY", KEY)])
            .expect_err("an unknown revision is refused");
        let text = err.to_string();
        assert!(
            text.contains("mcp_servers[0].protocol") && text.contains("2026-07-28"),
            "{text}"
        );
    }
}
