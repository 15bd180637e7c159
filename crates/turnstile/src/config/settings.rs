//! What the configuration becomes (the validated settings the server
//! reads), and the validator every section reports its problems to. The
//! sections import this; `mod.rs` imports the sections: one direction.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use crate::judge::approval::ToolRole;
use crate::judge::card::Wording;
use crate::judge::Contract;
use crate::llm::ApiKey;
use crate::mcp::Transport;

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

/// How turnstile authorizes with one server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ServerAuth {
    #[default]
    None,
    /// `Authorization: Bearer` with the token from `bearer_env`.
    Static(crate::mcp::oauth::AccessToken),
    /// The client credentials grant, at start-up, as turnstile itself.
    ClientCredentials(crate::mcp::oauth::ClientIdentity),
    /// Each user's own token, connected through a Connect card.
    User(crate::mcp::oauth::ClientIdentity),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    pub name: String,
    /// How turnstile authorizes with it (`auth`).
    pub auth: ServerAuth,
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
    pub contract: Option<Contract>,
    /// A call that hit an expired MCP session may be re-sent once on the
    /// new session, as if the tool declared `readOnlyHint: true`.
    pub retry_safe: bool,
    /// Its role in the approval protocol, if any.
    pub approval: Option<ToolRole>,
    /// The terminal flow it confirms, if it is an export's confirm.
    pub terminal: Option<TerminalFlow>,
    /// The approval card's wording (`summary`, `summary_ko`).
    pub summary: Option<Wording>,
}

/// An export's confirm tool whose answer is delivered by code (issue 18),
/// checked against its server's `trusted_origin` when the config loads.
pub use crate::judge::capability::TerminalFlow;

/// Why a text file the config names could not be read.
pub(super) enum TextFile {
    Read(std::io::Error),
    /// A FIFO, a device or a directory: reading it could block or never end.
    NotAFile,
    TooLarge,
    NotUtf8,
}

/// The text of the regular file at `path`, of at most `max` bytes.
pub(super) fn read_text(path: &Path, max: u64) -> Result<String, TextFile> {
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

/// What `name` (a model's name) looks like if it looks like a secret: the
/// API key itself, a key's prefix (`sk-`, `sk_`, `xai-`, `gsk_`, `hf_`,
/// `AIza`, …), or a long random token (20 or more letters and digits,
/// both, without a separator, of 10 or more distinct characters).
pub(super) fn secret_shape(name: &str, key: Option<&str>) -> Option<&'static str> {
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
pub(super) fn hide_string_values(message: &str) -> String {
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
pub(super) fn origin(o: &str) -> Option<String> {
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

#[derive(Default)]
pub(super) struct Validator {
    pub(super) problems: Vec<Problem>,
    pub(super) warnings: Vec<Problem>,
}

impl Validator {
    pub(super) fn problem(&mut self, key: &str, message: String) {
        self.problems.push(Problem {
            key: key.to_string(),
            message,
        });
    }

    pub(super) fn warn(&mut self, key: &str, message: String) {
        self.warnings.push(Problem {
            key: key.to_string(),
            message,
        });
    }

    pub(super) fn missing(&mut self, key: &str, env: &str) {
        self.problem(
            key,
            format!("missing required value (set it in the file or in {env})"),
        );
    }

    pub(super) fn parse_addr(&mut self, key: &str, a: &str) -> Option<SocketAddr> {
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
    pub(super) fn http_url(&mut self, key: &str, u: &str) -> Option<reqwest::Url> {
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
}

pub(super) fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
