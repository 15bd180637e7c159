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
//! The API key is read from the environment variable named by
//! `model.api_key_env` (default `OPENAI_API_KEY`). A literal `model.api_key`
//! in the file works but produces a warning; the key itself is never part of
//! a message or a `Debug` form.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::agent::{ContextLimits, Limits};
pub use crate::http::HttpConfig;
use crate::llm::{ApiKey, OpenAiConfig};
use crate::mcp::{ServerSpec, Transport};
use crate::store::Backend;

/// Environment variables that override the file.
pub const ENV_ADDR: &str = "TURNSTILE_ADDR";
pub const ENV_DATABASE_URL: &str = "DATABASE_URL";
pub const ENV_MODEL_BASE_URL: &str = "TURNSTILE_MODEL_BASE_URL";
pub const ENV_MODEL: &str = "TURNSTILE_MODEL";
pub const ENV_TABLES: &str = "TURNSTILE_TABLES";
/// Where the API key is read from unless `model.api_key_env` names another
/// variable.
pub const DEFAULT_API_KEY_ENV: &str = "OPENAI_API_KEY";

pub const DEFAULT_ADDR: &str = "127.0.0.1:8080";

/// The largest config file [`Config::load`] reads (1 MiB).
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// The longest `model.instructions` (or its file): it is sent with every
/// model request, so a runaway file would cost every turn.
pub const MAX_INSTRUCTIONS_BYTES: usize = 16 * 1024;

/// One thing wrong with a configuration, named by its key path
/// (`model.name`, `mcp_servers[1].url`) or by the variable that set it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub key: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`: {}", self.key, self.message)
    }
}

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
}

/// `[auth]`: the bearer verifier, the proxy mode and the production mode.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileAuth {
    mode: Option<String>,
    verifier_url: Option<String>,
    verifier_timeout_ms: Option<u64>,
    proxy_api_key_env: Option<String>,
    secure_cookies: Option<bool>,
}

/// `[licence]`: the tier order and what an anonymous caller holds.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLicence {
    tiers: Option<Vec<String>>,
    anonymous_tiers: Option<Vec<String>>,
}

/// `[http]`: connection timeouts, the head size limit, and which origins may
/// frame the page or read the API.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileHttp {
    header_read_timeout_secs: Option<u64>,
    body_read_timeout_secs: Option<u64>,
    idle_timeout_secs: Option<u64>,
    max_header_bytes: Option<u64>,
    frame_ancestors: Option<Vec<String>>,
    cors_origins: Option<Vec<String>>,
    link_origins: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileModel {
    base_url: Option<String>,
    name: Option<String>,
    api_key_env: Option<String>,
    /// `ApiKey`'s `Debug` is redacted, so this struct may derive `Debug`.
    api_key: Option<ApiKey>,
    connect_timeout_secs: Option<u64>,
    idle_timeout_secs: Option<u64>,
    max_retries: Option<u32>,
    backoff_initial_ms: Option<u64>,
    backoff_max_ms: Option<u64>,
    /// What the deployment's assistant is for, in the operator's words;
    /// code's fixed rules follow it in every prompt.
    instructions: Option<String>,
    /// The same, read from a file (relative to the config file's directory).
    instructions_file: Option<PathBuf>,
}

/// Most planning rounds a config may allow in one turn: each round is a
/// model request, and a loop that long is a runaway, not a plan.
const MAX_STEPS: u64 = 64;
/// The most calls one planning round may be configured to make.
const MAX_CALLS_PER_STEP: usize = 64;
/// The most asks of a status tool that may be configured.
const MAX_STATUS_POLLS: u64 = 100;
/// The longest pause between two asks of a status tool, in milliseconds.
const MAX_STATUS_POLL_MS: u64 = 60_000;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLimits {
    limit_sentinel: Option<u64>,
    page_cap: Option<usize>,
    max_string: Option<usize>,
    max_items: Option<usize>,
    turn_lease_secs: Option<u64>,
    max_steps: Option<u64>,
    max_calls_per_step: Option<usize>,
    history_bytes: Option<usize>,
    digest_items: Option<usize>,
    digest_bytes: Option<usize>,
    approval_ttl_secs: Option<u64>,
    task_wait_secs: Option<u64>,
    status_polls: Option<u64>,
    restart_status_polls: Option<u64>,
    status_poll_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileServer {
    name: Option<String>,
    url: Option<String>,
    command: Option<String>,
    args: Option<Vec<String>>,
    trusted_origin: Option<String>,
    /// `false`: the server's tool annotations exempt nothing, and a tool of
    /// it that declares none waits for approval of each call.
    trusted: Option<bool>,
    /// `2025-11-25` (default), `2026-07-28` or `auto` (ADR 0003).
    protocol: Option<String>,
    #[serde(default)]
    tools: BTreeMap<String, FileTool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTool {
    licence_tier: Option<String>,
    /// The tool's results have a result contract (see `judge::contracts`).
    #[serde(default)]
    result_contract: bool,
    #[serde(default)]
    fixed_prefixes: Vec<String>,
    #[serde(default)]
    stitch: bool,
    /// A call that hit an expired MCP session may be re-sent once on the new
    /// session (ADR 0011).
    #[serde(default)]
    retry_safe: bool,
    /// `required` (default) or `absent`: whether the server sends accounting.
    accounting: Option<String>,
    /// Dotted path to the items in the result JSON; detected when unset.
    items_path: Option<String>,
    /// Dotted path to the one object a record answer describes; the whole
    /// answer (its nested fields flattened) when unset.
    record_path: Option<String>,
    /// The item field that identifies an item (default `id`), a dotted path.
    id_field: Option<String>,
    /// The input parameter taking a list of item ids, for narrowing.
    scope_ids_param: Option<String>,
    /// Renames of the accounting keys.
    accounting_keys: Option<FileAccountingKeys>,
    /// The tool's role in the approval protocol: `prepare` (it prepares a
    /// backend action; `action_id`, `confirm` and `cancel` name the rest) or
    /// `before-call` (the exact call waits for the user's approval), or
    /// `none` (never held, whatever its annotations declare).
    approval: Option<String>,
    /// The result field carrying a prepared action's id: a dotted path,
    /// `actionId` or `data.bookingId`.
    action_id: Option<String>,
    /// The tool that confirms what this tool prepared; never run from a
    /// model's plan.
    confirm: Option<String>,
    /// The tool that cancels what this tool prepared (a denial's effect).
    cancel: Option<String>,
    /// The tool that says what became of a confirmed action.
    status: Option<String>,
    /// `capability`: this tool confirms an export whose answer is a
    /// capability URL code delivers (docs/export.md); `preview`,
    /// `path_template` and `token_param` describe it.
    terminal: Option<String>,
    /// The tool whose answer this confirm must follow, in an earlier step.
    preview: Option<String>,
    /// The capability's path, e.g. `/api/lms/exports/{jobId}/download`.
    path_template: Option<String>,
    /// The capability's token parameter (default `token`).
    token_param: Option<String>,
    /// The `data` field carrying the URL (default `downloadUrl`), a dotted
    /// path inside `data`.
    url_field: Option<String>,
    /// The download button's name (default "Download files").
    label: Option<String>,
    /// Its name for a Korean-speaking user (default: `label`).
    label_ko: Option<String>,
    /// The approval card's question in the user's terms, with `{field}`
    /// from the call's arguments, then from the prepare's result
    /// ("Reserve seat {seat} at {time}?").
    summary: Option<String>,
    /// Its Korean wording (default: `summary`).
    summary_ko: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileAccountingKeys {
    returned: Option<String>,
    total: Option<String>,
    total_lower_bound: Option<String>,
    has_more: Option<String>,
    next_cursor: Option<String>,
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
    pub tiers: crate::judge::tiers::Tiers,
    /// What an anonymous caller holds (`None`: the lowest tier).
    pub anonymous_tiers: Option<Vec<String>>,
    pub mcp_servers: Vec<McpServer>,
    /// Things that work but should be changed (a literal key in the file, …).
    /// Never contain a secret.
    pub warnings: Vec<Problem>,
}

#[derive(Debug, Clone)]
pub struct ModelConfig {
    pub base_url: String,
    pub name: String,
    pub api_key: ApiKey,
    pub key_source: KeySource,
    pub connect_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_retries: u32,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// `instructions` or the text of `instructions_file`: the deployment's
    /// description of its assistant, first in every prompt.
    pub instructions: crate::llm::prompt::Instructions,
}

/// Where the key came from, for the start-up summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// The named environment variable.
    Env(String),
    /// A literal `model.api_key` in the file.
    File,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    pub name: String,
    pub transport: Transport,
    /// The origin (`scheme://host[:port]`) trusted for links this server
    /// returns.
    pub trusted_origin: Option<String>,
    /// Whether its tools' annotations are believed (`trusted`, default
    /// true): an untrusted server's tool that declares no annotations
    /// waits for the user's approval of each call.
    pub trusted: bool,
    /// The MCP revision spoken to it (`protocol`, ADR 0003).
    pub protocol: crate::mcp::Revision,
    /// Per-tool settings, by tool name.
    pub tools: BTreeMap<String, ToolSettings>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolSettings {
    /// The licence tier a viewer needs for this tool's results.
    pub licence_tier: Option<String>,
    /// The result contract the judge holds this tool's answers to, if any.
    pub contract: Option<crate::judge::Contract>,
    /// A call that hit an expired MCP session may be re-sent once on the
    /// new session, as if the tool declared `readOnlyHint: true`.
    pub retry_safe: bool,
    /// Its role in the approval protocol, if any.
    pub approval: Option<crate::judge::approval::ToolRole>,
    /// The terminal flow it confirms, if it is an export's confirm.
    pub terminal: Option<TerminalFlow>,
    /// The approval card's wording (`summary`, `summary_ko`).
    pub summary: Option<crate::judge::card::Wording>,
}

/// An export's confirm tool whose answer is delivered by code (issue 18),
/// checked against its server's `trusted_origin` when the config loads.
pub use crate::judge::capability::TerminalFlow;

/// Why a text file the config names could not be read.
enum TextFile {
    Read(std::io::Error),
    /// A FIFO, a device or a directory: reading it could block or never end.
    NotAFile,
    TooLarge,
    NotUtf8,
}

/// The text of the regular file at `path`, of at most `max` bytes.
fn read_text(path: &Path, max: u64) -> Result<String, TextFile> {
    use std::io::Read;
    // Checked before opening: opening a FIFO blocks until a writer comes,
    // and a device may never end.
    if !std::fs::metadata(path).map_err(TextFile::Read)?.is_file() {
        return Err(TextFile::NotAFile);
    }
    let file = std::fs::File::open(path).map_err(TextFile::Read)?;
    // And on what was opened, in case the path changed in between.
    if !file.metadata().map_err(TextFile::Read)?.is_file() {
        return Err(TextFile::NotAFile);
    }
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(TextFile::Read)?;
    if bytes.len() as u64 > max {
        return Err(TextFile::TooLarge);
    }
    String::from_utf8(bytes).map_err(|_| TextFile::NotUtf8)
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
            ConfigError::Parse {
                path: shown.clone(),
                line,
                column,
                // One line: the message may hold a hint on a line of its own.
                // A type error never quotes the value: a key may be pasted
                // into any field (`model = "sk-…"`).
                message: hide_string_values(
                    &e.message()
                        .lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty())
                        .collect::<Vec<_>>()
                        .join("; "),
                ),
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
        let http = v.http(&file.http);
        let auth = v.auth(&file.auth, &http, &env);
        let (tiers, anonymous_tiers) = v.licence(&file.licence);
        let mcp_servers = v.servers(&file.mcp_servers);
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
    pub fn licences(&self) -> crate::judge::tiers::LicenceMap {
        let configured = (self.mcp_servers.iter())
            .flat_map(|s| s.tools.iter())
            .filter_map(|(tool, t)| Some((tool.clone(), t.licence_tier.clone()?)))
            .collect();
        crate::judge::tiers::LicenceMap::new(
            configured,
            self.tiers.clone(),
            self.anonymous_tiers.clone(),
        )
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
    pub fn roles(&self) -> crate::judge::approval::Roles {
        use crate::judge::approval::ToolRole;
        let mut out = crate::judge::approval::Roles::default();
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
    pub fn cards(&self) -> crate::judge::card::Cards {
        let mut out = crate::judge::card::Cards::default();
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
    pub fn terminal_flows(&self) -> crate::judge::capability::Terminals {
        let mut out = crate::judge::capability::Terminals::default();
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
    pub fn contracts(&self) -> crate::judge::Contracts {
        let mut out = crate::judge::Contracts::default();
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
            })
            .collect()
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

/// What `name` (a model's name) looks like if it looks like a secret: the
/// API key itself, a key's prefix (`sk-`, `sk_`, `xai-`, `gsk_`, `hf_`,
/// `AIza`, …), or a long random token (20 or more letters and digits,
/// both, without a separator, of 10 or more distinct characters).
fn secret_shape(name: &str, key: Option<&str>) -> Option<&'static str> {
    let name = name.trim();
    if key.is_some_and(|k| !k.trim().is_empty() && name.contains(k.trim())) {
        return Some("the API key");
    }
    const PREFIXES: [&str; 11] = [
        "sk-",
        "sk_",
        "pk-",
        "rk-",
        "xai-",
        "gsk_",
        "hf_",
        "r8_",
        "AIza",
        "ghp_",
        "github_pat_",
    ];
    if PREFIXES.iter().any(|p| name.starts_with(p))
        || name.to_ascii_lowercase().starts_with("bearer ")
    {
        return Some("an API key");
    }
    let random = name.split(|c: char| !c.is_ascii_alphanumeric()).any(|run| {
        let distinct: std::collections::BTreeSet<char> = run.chars().collect();
        run.len() >= 20
            && run.chars().any(|c| c.is_ascii_digit())
            && run.chars().any(|c| c.is_ascii_alphabetic())
            && distinct.len() >= 10
    });
    random.then_some("a key or token")
}

/// A serde/TOML error message without the string values it quotes:
/// `invalid type: string "sk-…", expected …` → `invalid type: a string,
/// expected …`.
fn hide_string_values(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find("string \"") {
        out += &rest[..at];
        out += "a string";
        let value = &rest[at + "string \"".len()..];
        // The closing quote: the first one not escaped.
        let mut escaped = false;
        let end = value.char_indices().find_map(|(i, c)| {
            let close = c == '"' && !escaped;
            escaped = c == '\\' && !escaped;
            close.then_some(i + 1)
        });
        rest = &value[end.unwrap_or(value.len())..];
    }
    out += rest;
    out
}

/// 1-based line and column (in characters) of a byte offset.
/// `o` as an origin (`scheme://host[:port]`, http or https, nothing else),
/// as browsers send it in `Origin`; `None` if it is not one.
fn origin(o: &str) -> Option<String> {
    let url = reqwest::Url::parse(o.trim()).ok()?;
    let bare = matches!(url.scheme(), "http" | "https")
        && url.has_host()
        && url.username().is_empty()
        && url.password().is_none()
        && url.path() == "/"
        && url.query().is_none()
        && url.fragment().is_none()
        && !o.trim().ends_with('/');
    bare.then(|| url.origin().ascii_serialization())
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

#[derive(Default)]
struct Validator {
    problems: Vec<Problem>,
    warnings: Vec<Problem>,
}

impl Validator {
    /// A tool's result contract, with how its answers are read.
    fn contract(&mut self, key: &str, t: &FileTool) -> crate::judge::Contract {
        use crate::judge::contracts::{AccountingKeys, AccountingMode, Shape};
        let accounting = match t.accounting.as_deref() {
            None => AccountingMode::Required,
            Some(s) => AccountingMode::parse(s).unwrap_or_else(|| {
                self.problem(
                    &format!("{key}.accounting"),
                    format!("must be \"required\" or \"absent\", not {s:?}"),
                );
                AccountingMode::Required
            }),
        };
        let mut name = |field: &str, v: &Option<String>| -> Option<String> {
            match v.as_deref().map(str::trim) {
                Some("") => {
                    self.problem(&format!("{key}.{field}"), "must not be empty".into());
                    None
                }
                other => other.map(str::to_string),
            }
        };
        let items_path = name("items_path", &t.items_path);
        let record_path = name("record_path", &t.record_path);
        let id_field = name("id_field", &t.id_field);
        let scope_ids_param = name("scope_ids_param", &t.scope_ids_param);
        let mut keys = AccountingKeys::default();
        if let Some(k) = &t.accounting_keys {
            let at = |f: &str| format!("accounting_keys.{f}");
            let mut set = |slot: &mut String, f: &str, v: &Option<String>| {
                if let Some(v) = name(&at(f), v) {
                    *slot = v;
                }
            };
            set(&mut keys.returned, "returned", &k.returned);
            set(&mut keys.total, "total", &k.total);
            set(
                &mut keys.total_lower_bound,
                "total_lower_bound",
                &k.total_lower_bound,
            );
            set(&mut keys.has_more, "has_more", &k.has_more);
            set(&mut keys.next_cursor, "next_cursor", &k.next_cursor);
        }
        // The paths a contract reads answers by: a malformed one would
        // never match, and is refused here rather than met in a turn.
        for (field, v) in [("record_path", &record_path), ("id_field", &id_field)] {
            if let Some(Err(e)) = v.as_deref().map(crate::judge::path::check) {
                self.problem(&format!("{key}.{field}"), e.to_string());
            }
        }
        crate::judge::Contract {
            fixed_prefixes: t.fixed_prefixes.clone(),
            stitch: t.stitch,
            accounting,
            shape: Shape {
                items_path,
                record_path,
                id_field,
                keys,
            },
            scope_ids_param,
        }
    }

    /// A tool's approval role: `prepare` needs `action_id`, `confirm` and
    /// `cancel` (and may name `status`); `before-call` takes none of them.
    fn approval(&mut self, key: &str, t: &FileTool) -> Option<crate::judge::approval::ToolRole> {
        use crate::judge::approval::{Prepare, ToolRole};
        fn named(v: &Option<String>) -> Option<&str> {
            v.as_deref().map(str::trim).filter(|v| !v.is_empty())
        }
        let settles = [
            ("action_id", &t.action_id),
            ("confirm", &t.confirm),
            ("cancel", &t.cancel),
            ("status", &t.status),
        ];
        match t.approval.as_deref().map(str::trim) {
            None => {
                for (k, v) in settles {
                    if v.is_some() {
                        self.problem(
                            &format!("{key}.{k}"),
                            "describes a prepare tool: set approval = \"prepare\"".into(),
                        );
                    }
                }
                None
            }
            Some("prepare") => {
                let mut need = |k: &str, v: &Option<String>| match named(v) {
                    Some(v) => v.to_string(),
                    None => {
                        self.problem(
                            &format!("{key}.{k}"),
                            format!(
                                "a prepare tool names its `{k}` (e.g. {k} = \"{}\")",
                                match k {
                                    "action_id" => "actionId",
                                    "confirm" => "confirm_action",
                                    _ => "cancel_action",
                                }
                            ),
                        );
                        String::new()
                    }
                };
                let action_id = need("action_id", &t.action_id);
                let confirm = need("confirm", &t.confirm);
                let cancel = need("cancel", &t.cancel);
                // A path that can never match is refused now: at run time
                // it would only ever be a missing field.
                if let (false, Err(e)) =
                    (action_id.is_empty(), crate::judge::path::check(&action_id))
                {
                    self.problem(&format!("{key}.action_id"), e.to_string());
                }
                Some(ToolRole::Prepare(Prepare {
                    action_id,
                    confirm,
                    cancel,
                    status: named(&t.status).map(str::to_string),
                }))
            }
            Some("before-call") => {
                for (k, v) in settles {
                    if v.is_some() {
                        self.problem(&format!("{key}.{k}"), "a before-call tool is approved as the call itself; it names no action to settle".into());
                    }
                }
                Some(ToolRole::BeforeCall)
            }
            Some("none") => {
                for (k, v) in settles {
                    if v.is_some() {
                        self.problem(
                            &format!("{key}.{k}"),
                            "a tool with approval = \"none\" names no action to settle".into(),
                        );
                    }
                }
                Some(ToolRole::Exempt)
            }
            Some(other) => {
                self.problem(
                    &format!("{key}.approval"),
                    format!(
                        "unknown approval role \"{other}\": use \"prepare\", \"before-call\" or \"none\""
                    ),
                );
                None
            }
        }
    }

    fn problem(&mut self, key: &str, message: String) {
        self.problems.push(Problem {
            key: key.to_string(),
            message,
        });
    }

    fn warn(&mut self, key: &str, message: String) {
        self.warnings.push(Problem {
            key: key.to_string(),
            message,
        });
    }

    fn missing(&mut self, key: &str, env: &str) {
        self.problem(
            key,
            format!("missing required value (set it in the file or in {env})"),
        );
    }

    fn parse_addr(&mut self, key: &str, a: &str) -> Option<SocketAddr> {
        match a.trim().parse() {
            Ok(addr) => Some(addr),
            Err(e) => {
                self.problem(
                    key,
                    format!("not a socket address like 127.0.0.1:8080 ({e})"),
                );
                None
            }
        }
    }

    /// An http(s) URL, or a problem.
    fn http_url(&mut self, key: &str, u: &str) -> Option<reqwest::Url> {
        match reqwest::Url::parse(u.trim()) {
            Ok(url) if matches!(url.scheme(), "http" | "https") && url.has_host() => Some(url),
            Ok(url) => {
                self.problem(
                    key,
                    format!("must be an http:// or https:// URL, not {}:", url.scheme()),
                );
                None
            }
            Err(e) => {
                self.problem(key, format!("not a URL ({e})"));
                None
            }
        }
    }

    /// `[auth]`: the mode, the verifier, the proxy's key (read from the
    /// variable it names, never from the file).
    fn auth(
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
            });
        let proxy_key = match f.proxy_api_key_env.as_deref().map(str::trim) {
            None => None,
            Some(name) if !is_env_name(name) => {
                self.problem(
                    "auth.proxy_api_key_env",
                    "must name an environment variable".into(),
                );
                None
            }
            Some(name) => match env(name) {
                Some(k) if k.trim().len() >= 16 => Some(ApiKey::new(k.trim())),
                Some(_) => {
                    self.problem(
                        "auth.proxy_api_key_env",
                        format!("the key in `{name}` is shorter than 16 characters"),
                    );
                    None
                }
                None => {
                    self.problem(
                        "auth.proxy_api_key_env",
                        format!("the variable `{name}` is not set"),
                    );
                    None
                }
            },
        };
        if mode == Mode::Production && verifier.is_none() && proxy_key.is_none() {
            self.warn(
                "auth.mode",
                "production mode with neither a verifier nor a proxy key: every caller is anonymous".into(),
            );
        }
        AuthConfig {
            mode,
            verifier,
            proxy_key,
            secure_cookies: f.secure_cookies.unwrap_or(false),
            origins: http.cors_origins.clone(),
        }
    }

    /// `[licence]`: the tier order (lowest first, no repeats) and the
    /// anonymous tiers (each one of them).
    fn licence(&mut self, f: &FileLicence) -> (crate::judge::tiers::Tiers, Option<Vec<String>>) {
        use crate::judge::tiers::Tiers;
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
    fn http(&mut self, f: &FileHttp) -> HttpConfig {
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
        HttpConfig {
            link_origins,
            header_read_timeout,
            body_read_timeout,
            idle_timeout,
            max_header_bytes,
            frame_ancestors,
            cors_origins,
        }
    }

    fn positive(&mut self, key: &str, value: Option<u64>, default: u64) -> u64 {
        match value {
            Some(0) => {
                self.problem(key, "must be at least 1".into());
                default
            }
            Some(n) => n,
            None => default,
        }
    }

    fn model(
        &mut self,
        m: &FileModel,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Option<ModelConfig> {
        let base_url = match (env(ENV_MODEL_BASE_URL), &m.base_url) {
            (Some(u), _) => self
                .http_url(
                    &format!("{ENV_MODEL_BASE_URL} (overrides `model.base_url`)"),
                    &u,
                )
                .map(|_| u),
            (None, Some(u)) => self.http_url("model.base_url", u).map(|_| u.clone()),
            (None, None) => {
                self.missing("model.base_url", ENV_MODEL_BASE_URL);
                None
            }
        };
        let name = env(ENV_MODEL)
            .or(m.name.clone())
            .filter(|n| !n.trim().is_empty());
        if name.is_none() {
            self.missing("model.name", ENV_MODEL);
        }

        let var = m.api_key_env.as_deref().unwrap_or(DEFAULT_API_KEY_ENV);
        let key = if !is_env_name(var) {
            // Do not echo it: a key pasted into the wrong field is a common slip.
            self.problem(
                "model.api_key_env",
                "must be the name of an environment variable (letters, digits and _); it should not hold the key itself".into(),
            );
            None
        } else if let Some(k) = env(var) {
            Some((ApiKey::new(k.trim()), KeySource::Env(var.to_string())))
        } else if let Some(k) = m.api_key.as_ref().filter(|k| !k.expose().trim().is_empty()) {
            Some((ApiKey::new(k.expose().trim()), KeySource::File))
        } else {
            // Name the variable only when it is the default: a key pasted into
            // `api_key_env` can look like a variable name, and must not be echoed.
            let which = if m.api_key_env.is_none() {
                format!("the environment variable {var} is not set")
            } else {
                "the environment variable named by `model.api_key_env` is not set".to_string()
            };
            self.problem(
                "model.api_key_env",
                format!("no API key: {which} and the file has no `model.api_key`"),
            );
            None
        };
        if m.api_key.is_some() {
            self.warn(
                "model.api_key",
                "the API key is written in the config file; prefer `model.api_key_env` naming an environment variable".into(),
            );
        }

        // A key pasted as the name would be printed at start: refused, and
        // never quoted.
        if let Some(why) = name
            .as_deref()
            .and_then(|n| secret_shape(n, key.as_ref().map(|(k, _)| k.expose())))
        {
            let field = match env(ENV_MODEL) {
                Some(_) => format!("{ENV_MODEL} (overrides `model.name`)"),
                None => "model.name".into(),
            };
            self.problem(
                &field,
                format!("looks like {why}, not a model's name (not shown); write the model's name (e.g. gpt-4o-mini) and keep the key in the variable `model.api_key_env` names"),
            );
        }

        let connect = self.positive("model.connect_timeout_secs", m.connect_timeout_secs, 10);
        let idle = self.positive("model.idle_timeout_secs", m.idle_timeout_secs, 60);
        let initial = self.positive("model.backoff_initial_ms", m.backoff_initial_ms, 500);
        let max = self.positive("model.backoff_max_ms", m.backoff_max_ms, 8000);
        if max < initial {
            self.problem(
                "model.backoff_max_ms",
                format!("must not be below `model.backoff_initial_ms` ({initial})"),
            );
        }
        let max_retries = m.max_retries.unwrap_or(3);
        if max_retries > 10 {
            self.problem("model.max_retries", "at most 10".into());
        }
        let (base_url, name, (api_key, key_source)) = (base_url?, name?, key?);
        Some(ModelConfig {
            base_url,
            name,
            api_key,
            key_source,
            connect_timeout: Duration::from_secs(connect),
            idle_timeout: Duration::from_secs(idle),
            max_retries,
            backoff_initial: Duration::from_millis(initial),
            backoff_max: Duration::from_millis(max),
            instructions: Default::default(),
        })
    }

    /// `model.instructions` or `model.instructions_file` (one of them, at
    /// most [`MAX_INSTRUCTIONS_BYTES`], UTF-8).
    fn instructions(&mut self, m: &FileModel, base_dir: &Path) -> crate::llm::prompt::Instructions {
        use crate::llm::prompt::Instructions;
        let text = match (&m.instructions, &m.instructions_file) {
            (Some(_), Some(_)) => {
                self.problem(
                    "model.instructions_file",
                    "set `model.instructions` or `model.instructions_file`, not both".into(),
                );
                return Instructions::default();
            }
            (Some(t), None) => ("model.instructions", t.clone()),
            (None, Some(f)) => {
                let path = match f.is_relative() {
                    true => base_dir.join(f),
                    false => f.clone(),
                };
                // Read as the config file is: a FIFO or a device is refused
                // before it is opened, and no more than the bound is read.
                let why = match read_text(&path, MAX_INSTRUCTIONS_BYTES as u64) {
                    Ok(t) => return self.instructions_text("model.instructions_file", t),
                    Err(TextFile::Read(e)) => format!("cannot read {}: {e}", path.display()),
                    Err(TextFile::NotAFile) => format!("{} is not a regular file", path.display()),
                    Err(TextFile::TooLarge) => format!(
                        "{} is larger than {MAX_INSTRUCTIONS_BYTES} bytes (they are sent with every model request)",
                        path.display()
                    ),
                    Err(TextFile::NotUtf8) => format!("{} is not UTF-8 text", path.display()),
                };
                self.problem("model.instructions_file", why);
                return Instructions::default();
            }
            (None, None) => return Instructions::default(),
        };
        let (key, text) = text;
        self.instructions_text(key, text)
    }

    /// Instructions as given: bounded, not blank.
    fn instructions_text(&mut self, key: &str, text: String) -> crate::llm::prompt::Instructions {
        if text.len() > MAX_INSTRUCTIONS_BYTES {
            self.problem(
                key,
                format!(
                    "{} bytes; at most {MAX_INSTRUCTIONS_BYTES} (they are sent with every model request)",
                    text.len()
                ),
            );
        } else if text.trim().is_empty() {
            self.problem(key, "is empty; leave it out for no instructions".into());
        }
        crate::llm::prompt::Instructions::new(&text)
    }

    /// `[limits]` into the agent's limits and the lease TTL: each key in
    /// its range (a problem names the key), a missing one at its default.
    fn limits(&mut self, l: &FileLimits) -> (Limits, Duration) {
        let d = Limits::default();
        let usize_positive = |v: &mut Self, key: &str, x: Option<usize>, def: usize| {
            v.positive(key, x.map(|n| n as u64), def as u64) as usize
        };
        if l.max_steps.is_some_and(|n| n > MAX_STEPS) {
            self.problem("limits.max_steps", format!("at most {MAX_STEPS}"));
        }
        if l.max_calls_per_step.is_some_and(|n| n > MAX_CALLS_PER_STEP) {
            self.problem(
                "limits.max_calls_per_step",
                format!("at most {MAX_CALLS_PER_STEP}"),
            );
        }
        for (key, v) in [
            ("limits.status_polls", l.status_polls),
            ("limits.restart_status_polls", l.restart_status_polls),
        ] {
            if v.is_some_and(|n| n > MAX_STATUS_POLLS) {
                self.problem(key, format!("at most {MAX_STATUS_POLLS}"));
            }
        }
        if l.status_poll_ms.is_some_and(|n| n > MAX_STATUS_POLL_MS) {
            self.problem(
                "limits.status_poll_ms",
                format!("at most {MAX_STATUS_POLL_MS} (a minute)"),
            );
        }
        let max_lease = crate::agent::thread_lease::MAX_TURN_LEASE.as_secs();
        if l.turn_lease_secs.is_some_and(|s| s > max_lease) {
            self.problem(
                "limits.turn_lease_secs",
                format!("at most {max_lease} (one day)"),
            );
        }
        let turn_lease = self.positive(
            "limits.turn_lease_secs",
            l.turn_lease_secs,
            crate::agent::thread_lease::DEFAULT_TURN_LEASE.as_secs(),
        );
        let secs = |v: &mut Self, key: &str, x: Option<u64>, def: Duration| {
            Duration::from_secs(v.positive(key, x, def.as_secs()))
        };
        let limits = Limits {
            limit_sentinel: self.positive(
                "limits.limit_sentinel",
                l.limit_sentinel,
                d.limit_sentinel,
            ),
            page_cap: usize_positive(self, "limits.page_cap", l.page_cap, d.page_cap),
            context: ContextLimits {
                max_string: usize_positive(
                    self,
                    "limits.max_string",
                    l.max_string,
                    d.context.max_string,
                ),
                max_items: usize_positive(
                    self,
                    "limits.max_items",
                    l.max_items,
                    d.context.max_items,
                ),
            },
            max_steps: self
                .positive("limits.max_steps", l.max_steps, d.max_steps.into())
                .min(MAX_STEPS) as u32,
            max_calls_per_step: usize_positive(
                self,
                "limits.max_calls_per_step",
                l.max_calls_per_step,
                d.max_calls_per_step,
            )
            .min(MAX_CALLS_PER_STEP),
            history_bytes: usize_positive(
                self,
                "limits.history_bytes",
                l.history_bytes,
                d.history_bytes,
            ),
            digest: crate::judge::digest::DigestLimits {
                items: usize_positive(self, "limits.digest_items", l.digest_items, d.digest.items),
                bytes: usize_positive(self, "limits.digest_bytes", l.digest_bytes, d.digest.bytes),
                ..d.digest
            },
            approval_ttl: secs(
                self,
                "limits.approval_ttl_secs",
                l.approval_ttl_secs,
                d.approval_ttl,
            ),
            task_wait: secs(self, "limits.task_wait_secs", l.task_wait_secs, d.task_wait),
            status: crate::agent::StatusPolls {
                per_turn: self
                    .positive(
                        "limits.status_polls",
                        l.status_polls,
                        d.status.per_turn.into(),
                    )
                    .min(MAX_STATUS_POLLS) as u32,
                after_restart: self
                    .positive(
                        "limits.restart_status_polls",
                        l.restart_status_polls,
                        d.status.after_restart.into(),
                    )
                    .min(MAX_STATUS_POLLS) as u32,
                gap: Duration::from_millis(
                    self.positive(
                        "limits.status_poll_ms",
                        l.status_poll_ms,
                        u64::try_from(d.status.gap.as_millis()).unwrap_or(u64::MAX),
                    )
                    .min(MAX_STATUS_POLL_MS),
                ),
            },
        };
        (limits, Duration::from_secs(turn_lease))
    }

    fn servers(&mut self, servers: &[FileServer]) -> Vec<McpServer> {
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
                let licence_tier = match t.licence_tier.as_deref().map(str::trim) {
                    Some("") => {
                        self.problem(&format!("{key}.licence_tier"), "must not be empty".into());
                        None
                    }
                    other => other.map(str::to_string),
                };
                let reading = t.accounting.is_some()
                    || t.items_path.is_some()
                    || t.record_path.is_some()
                    || t.id_field.is_some()
                    || t.scope_ids_param.is_some()
                    || t.accounting_keys.is_some();
                if !t.result_contract && (t.stitch || !t.fixed_prefixes.is_empty() || reading) {
                    self.problem(
                        &format!("{key}.result_contract"),
                        "`stitch`, `fixed_prefixes`, `accounting`, `items_path`, `record_path`, `id_field`, `scope_ids_param` and `accounting_keys` describe a result contract: set result_contract = true".into(),
                    );
                }
                let contract = t.result_contract.then(|| self.contract(&key, t));
                let approval = self.approval(&key, t);
                let terminal = self.terminal(&key, &at, trusted_origin.as_deref(), t);
                let summary = self.summary(&key, t, approval.as_ref());
                tools.insert(
                    tool.clone(),
                    ToolSettings {
                        licence_tier,
                        contract,
                        retry_safe: t.retry_safe,
                        approval,
                        terminal,
                        summary,
                    },
                );
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
            if let Some(transport) = transport {
                out.push(McpServer {
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

    /// A terminal flow's keys: `terminal = "capability"` needs `preview`,
    /// `path_template` and the server's `trusted_origin`, and they must
    /// make a rule `judge::capability` can hold answers to.
    fn terminal(
        &mut self,
        key: &str,
        server: &str,
        origin: Option<&str>,
        t: &FileTool,
    ) -> Option<TerminalFlow> {
        use crate::judge::capability::CapabilityRule;
        let describes = [
            ("preview", &t.preview),
            ("path_template", &t.path_template),
            ("token_param", &t.token_param),
            ("url_field", &t.url_field),
            ("label", &t.label),
            ("label_ko", &t.label_ko),
        ];
        match t.terminal.as_deref().map(str::trim) {
            None => {
                for (k, v) in describes {
                    if v.is_some() {
                        self.problem(
                            &format!("{key}.{k}"),
                            "describes a terminal flow: set terminal = \"capability\"".into(),
                        );
                    }
                }
                return None;
            }
            Some("capability") => {}
            Some(other) => {
                self.problem(
                    &format!("{key}.terminal"),
                    format!("unknown terminal flow \"{other}\": use \"capability\""),
                );
                return None;
            }
        }
        fn named(v: &Option<String>) -> Option<&str> {
            v.as_deref().map(str::trim).filter(|v| !v.is_empty())
        }
        let preview = named(&t.preview).map(str::to_string);
        if preview.is_none() {
            self.problem(
                &format!("{key}.preview"),
                "a terminal flow names the tool whose preview its confirm follows (e.g. preview = \"export_all_lms_materials\")".into(),
            );
        }
        let Some(template) = named(&t.path_template) else {
            self.problem(
                &format!("{key}.path_template"),
                "a terminal flow names its capability's path (e.g. path_template = \"/api/lms/exports/{jobId}/download\")".into(),
            );
            return None;
        };
        let Some(origin) = origin else {
            self.problem(
                &format!("{server}.trusted_origin"),
                "a terminal flow's capability is checked against its server's trusted_origin: set it".into(),
            );
            return None;
        };
        let token = named(&t.token_param).unwrap_or("token");
        let rule = match CapabilityRule::new(origin, template, token) {
            Ok(rule) => rule,
            Err(e) => {
                let k = match e {
                    crate::judge::capability::RuleError::Token(_) => "token_param",
                    crate::judge::capability::RuleError::Template(_) => "path_template",
                    crate::judge::capability::RuleError::Origin(_) => "terminal",
                };
                self.problem(&format!("{key}.{k}"), e.to_string());
                return None;
            }
        };
        let rule = match named(&t.url_field) {
            Some(f) => {
                if let Err(e) = crate::judge::path::check(f) {
                    self.problem(&format!("{key}.url_field"), e.to_string());
                }
                rule.with_url_field(f)
            }
            None => rule,
        };
        Some(TerminalFlow {
            preview: preview?,
            rule,
            label: named(&t.label).unwrap_or("Download files").to_string(),
            label_ko: named(&t.label_ko).map(str::to_string),
        })
    }

    /// A tool that confirms, cancels or reports on a prepared action is
    /// governed by that prepare tool: it may not also be `before-call`,
    /// `none` or a prepare tool itself (a confirm made runnable from a
    /// model's plan would send without a human's decision).
    fn settling_roles_stand(&mut self, servers: &[McpServer]) {
        use crate::judge::approval::ToolRole;
        let mut settles = BTreeMap::new();
        for s in servers {
            for (tool, t) in &s.tools {
                if let Some(ToolRole::Prepare(p)) = &t.approval {
                    let named = [Some(&p.confirm), Some(&p.cancel), p.status.as_ref()];
                    for n in named.into_iter().flatten() {
                        settles.insert(n.clone(), tool.clone());
                    }
                }
            }
        }
        for s in servers {
            for (tool, t) in &s.tools {
                if let (Some(prepare), Some(_)) = (settles.get(tool), &t.approval) {
                    self.problem(
                        &format!("mcp_servers.tools.{tool}.approval"),
                        format!("`{tool}` settles what `{prepare}` prepares (its confirm, cancel or status tool), so it takes no approval role of its own"),
                    );
                }
                if let (Some(prepare), Some(_)) = (settles.get(tool), &t.summary) {
                    self.problem(
                        &format!("mcp_servers.tools.{tool}.summary"),
                        format!("`{tool}` settles what `{prepare}` prepares, and its calls are never shown on a card: word the card on `{prepare}`"),
                    );
                }
            }
        }
    }

    /// A tool's card wording: `summary` (and `summary_ko`) read as
    /// templates. What can be known before any call is checked here: the
    /// templates' syntax, a field that names a secret or the action id (the
    /// detail line's), a wording that no card would show. A field the call
    /// and its result turn out not to have falls back to the default
    /// wording at run time, logged by this key.
    fn summary(
        &mut self,
        key: &str,
        t: &FileTool,
        approval: Option<&crate::judge::approval::ToolRole>,
    ) -> Option<crate::judge::card::Wording> {
        use crate::judge::approval::ToolRole;
        use crate::judge::card::{Template, Wording};
        let mut read = |which: &str, text: &Option<String>| -> Option<Template> {
            let text = text.as_ref()?;
            match Template::parse(text) {
                Ok(t) => Some(t),
                Err(e) => {
                    self.problem(&format!("{key}.{which}"), e.to_string());
                    None
                }
            }
        };
        let en = read("summary", &t.summary);
        let ko = read("summary_ko", &t.summary_ko);
        if t.summary.is_none() && t.summary_ko.is_some() {
            self.problem(
                &format!("{key}.summary_ko"),
                "a Korean wording needs the `summary` it translates".into(),
            );
        }
        if let Some(ToolRole::Prepare(p)) = approval {
            for (which, tpl) in [("summary", &en), ("summary_ko", &ko)] {
                let names_id = tpl
                    .iter()
                    .flat_map(|t| t.fields())
                    .any(|f| f == p.action_id || f == p.id_arg());
                if names_id {
                    self.problem(
                        &format!("{key}.{which}"),
                        format!("`{{{}}}` is the action id, which the card's detail line shows; word the question with the fields a user knows", p.action_id),
                    );
                }
            }
        }
        if t.summary.is_some() && matches!(approval, Some(ToolRole::Exempt)) {
            self.problem(
                &format!("{key}.summary"),
                "a tool with approval = \"none\" is never held, so no card shows this".into(),
            );
        }
        Some(Wording { en: en?, ko })
    }

    /// `scheme://host[:port]` with nothing after it, normalised.
    fn origin(&mut self, key: &str, o: &str) -> Option<String> {
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

fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;
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
        let src = include_str!("../../../turnstile.example.toml");
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
        use crate::judge::approval::ToolRole;
        let server = "[[mcp_servers]]\nname = \"lib\"\nurl = \"http://127.0.0.1:9/mcp\"\n";
        let src = format!(
            "{MINIMAL}\n{server}[mcp_servers.tools.prepare]\napproval = \"prepare\"\naction_id = \"actionId\"\nconfirm = \"confirm\"\ncancel = \"cancel\"\nstatus = \"status\"\n[mcp_servers.tools.send_mail]\napproval = \"before-call\"\n[mcp_servers.tools.wipe]\napproval = \"none\"\n"
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
            "{MINIMAL}\n{server}[mcp_servers.tools.hold_room]\napproval = \"prepare\"\naction_id = \"data.bookingId\"\nconfirm = \"book\"\ncancel = \"release\"\nresult_contract = true\nrecord_path = \"data\"\n"
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
            (
                "approval = \"prepare\"\naction_id = \"id\"\ncancel = \"c\"\n",
                "confirm",
            ),
            ("approval = \"later\"\n", "approval"),
            ("approval = \"none\"\nconfirm = \"c\"\n", "confirm"),
            ("confirm = \"c\"\n", "confirm"),
            // A path that can never match (issue 33 §4).
            (
                "approval = \"prepare\"\naction_id = \"data..bookingId\"\nconfirm = \"c\"\ncancel = \"x\"\n",
                "action_id",
            ),
            ("record_path = \"data\"\n", "result_contract"),
            (
                "result_contract = true\nrecord_path = \"data.\"\n",
                "record_path",
            ),
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
        // A confirm tool given a role of its own would be runnable from a
        // model's plan: refused, whatever the order of the tables.
        for own in ["none", "before-call"] {
            let src = format!(
                "{MINIMAL}\n{server}[mcp_servers.tools.book]\napproval = \"prepare\"\naction_id = \"id\"\nconfirm = \"a_confirm\"\ncancel = \"z_cancel\"\n[mcp_servers.tools.a_confirm]\napproval = \"{own}\"\n"
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
        let mut r = crate::judge::approval::Roles::default();
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
        let prepare = "[mcp_servers.tools.hold_seat]\napproval = \"prepare\"\naction_id = \"actionId\"\nconfirm = \"book\"\ncancel = \"release\"\n";
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
        let flow = "[mcp_servers.tools.confirm_lms_material_export]\nterminal = \"capability\"\npreview = \"export_all_lms_materials\"\npath_template = \"/api/lms/exports/{jobId}/download\"\n";
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
        let at = "mcp_servers[0].tools.confirm_lms_material_export";
        for (src, key) in [
            (
                format!("{MINIMAL}\n{server}{flow}"),
                "mcp_servers[0].trusted_origin".to_string(),
            ),
            (
                format!(
                    "{MINIMAL}\n{server}{origin}{}",
                    flow.replace("preview = \"export_all_lms_materials\"\n", "")
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
            (
                format!(
                    "{MINIMAL}\n{server}{origin}{}",
                    flow.replace("\"capability\"", "\"link\"")
                ),
                format!("{at}.terminal"),
            ),
            (
                format!(
                    "{MINIMAL}\n{server}{origin}[mcp_servers.tools.t]\npath_template = \"/a\"\n"
                ),
                "mcp_servers[0].tools.t.path_template".to_string(),
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
