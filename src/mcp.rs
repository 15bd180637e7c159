//! `turnstile mcp URL [TOOL [ARGS_JSON]]`: connect to one MCP server with
//! turnstile's own [`ToolClient`], print who it is and what tools it offers,
//! and optionally call one tool and print the normalised result
//! ([`ToolOutput`]) — the view the judge gets. For people wiring up a server,
//! and the client the MCP conformance suite drives (`docs/conformance.md`).
//!
//! Exit codes: 0 ok; 1 the call failed or returned `isError: true`; 2 usage
//! or connection errors. Errors go to stderr. A URL is only ever printed as
//! `scheme://host[:port]/path` (no userinfo, no query, no fragment), also
//! inside error messages; a stdio command's arguments are not printed.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::{Map, Value};

/// Shared with everything that prints a URL (`serve`, the MCP client's
/// errors, the model adapter): scheme, host(:port) and path only.
pub use turnstile::mcp::client::redact_url;
use turnstile::mcp::client::{scrub_urls, shown_command};
use turnstile::mcp::{ClientOptions, McpError, ServerSpec, ToolClient, ToolOutput};

/// Descriptions are cut to this many characters in the tool list.
const DESCRIPTION_MAX: usize = 100;

/// What `turnstile mcp` was asked for.
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
#[command(
    override_usage = "turnstile mcp [OPTIONS] <URL> [TOOL [ARGS_JSON]]\n       \
                      turnstile mcp [OPTIONS] --stdio [TOOL [ARGS_JSON]] -- <CMD> [ARGS]...",
    after_help = "Exit codes: 0 ok; 1 the call failed or returned isError; 2 usage or connection error.\n\
                  URLs are printed as scheme://host[:port]/path only (no credentials, no query)."
)]
pub struct McpArgs {
    /// The server's streamable-HTTP endpoint (e.g. http://127.0.0.1:8090/mcp),
    /// then optionally a tool to call and its arguments as a JSON object
    /// (default `{}`). With --stdio there is no URL: only [TOOL [ARGS_JSON]].
    #[arg(value_name = "URL [TOOL [ARGS_JSON]]")]
    pub operands: Vec<String>,
    /// Start the server as a child process speaking MCP on stdin/stdout: the
    /// command and its arguments follow `--`.
    #[arg(long)]
    pub stdio: bool,
    /// Seconds allowed for connecting (initialize + tools/list) and for the call.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout: u64,
    /// The MCP revision to speak: 2025-11-25 (initialize and a session),
    /// 2026-07-28 (stateless: server/discover), or auto (discover, falling
    /// back to 2025-11-25). The revision the server agreed to is printed.
    #[arg(long, default_value = "2025-11-25", value_parser = parse_revision)]
    pub protocol: turnstile::mcp::Revision,
    /// With --stdio: the server command and its arguments.
    #[arg(last = true, value_name = "CMD [ARGS]")]
    pub command: Vec<String>,
    /// A server that answers 401 is authorized with OAuth (discovery, PKCE,
    /// resource indicator); its authorization URL is printed to open in a
    /// browser, which redirects back to a listener on 127.0.0.1. With
    /// --oauth-fetch turnstile follows the URL itself: for an authorization
    /// server that asks no user (a test server's, a session already signed in).
    #[arg(long)]
    pub oauth_fetch: bool,
    /// Authorize as a service with the client credentials grant (no user,
    /// no browser): needs --client-id and --client-secret-env.
    #[arg(long)]
    pub client_credentials: bool,
    /// A client id registered with the authorization server beforehand
    /// (otherwise: --client-metadata-url where supported, else dynamic
    /// registration).
    #[arg(long)]
    pub client_id: Option<String>,
    /// The environment variable holding --client-id's secret.
    #[arg(long)]
    pub client_secret_env: Option<String>,
    /// The URL of this client's metadata document, used as its client id
    /// where the authorization server supports Client ID Metadata Documents.
    #[arg(long)]
    pub client_metadata_url: Option<String>,
    /// A scope to ask for (repeatable); by default the server's challenge
    /// or its metadata decide.
    #[arg(long = "scope")]
    pub scopes: Vec<String>,
}

fn parse_revision(s: &str) -> Result<turnstile::mcp::Revision, String> {
    turnstile::mcp::Revision::parse(s)
        .ok_or_else(|| format!("`{s}` is not a revision: 2025-11-25, 2026-07-28 or auto"))
}

/// The server to reach, as parsed from the arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Http { url: String, shown: String },
    Stdio { command: String, args: Vec<String> },
}

impl Target {
    /// How the target is printed: never credentials or a query string.
    fn shown(&self) -> String {
        match self {
            Target::Http { shown, .. } => shown.clone(),
            Target::Stdio { command, args } => shown_command(command, args.len()),
        }
    }

    fn spec(&self) -> ServerSpec {
        match self {
            // Our name for the server appears in every error: the redacted URL.
            Target::Http { url, shown } => ServerSpec::http(shown.clone(), url.clone()),
            Target::Stdio { command, args } => {
                ServerSpec::stdio(program_name(command), command.clone(), args.clone())
            }
        }
    }

    /// Removes what must not be printed from an error text: the URL as
    /// given, and every other URL in it (the HTTP client prints the one it
    /// sent, query included) cut to `scheme://host[:port]/path`.
    fn scrub(&self, text: &str) -> String {
        match self {
            Target::Http { url, shown } => scrub_urls(&text.replace(url.as_str(), shown)),
            Target::Stdio { .. } => scrub_urls(text),
        }
    }
}

/// The request after validation: where, and what to call.
#[derive(Debug, Clone, PartialEq)]
struct Request {
    target: Target,
    call: Option<(String, Map<String, Value>)>,
}

fn program_name(command: &str) -> String {
    std::path::Path::new(command)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| command.to_string())
}

fn parse(args: &McpArgs) -> anyhow::Result<Request> {
    let mut operands = args.operands.iter();
    let target = if args.stdio {
        let Some((command, rest)) = args.command.split_first() else {
            bail!("--stdio needs the server command after `--`, e.g. `turnstile mcp --stdio -- node server.js`");
        };
        if command.trim().is_empty() {
            bail!("--stdio: the server command is empty");
        }
        Target::Stdio {
            command: command.clone(),
            args: rest.to_vec(),
        }
    } else {
        if !args.command.is_empty() {
            bail!("a command after `--` needs --stdio");
        }
        let Some(url) = operands.next() else {
            bail!("missing the server URL (e.g. http://127.0.0.1:8090/mcp), or --stdio -- CMD ARGS...");
        };
        let shown = redact_url(url).context("the URL does not parse")?;
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            bail!("not an http(s) URL: {shown}");
        }
        Target::Http {
            url: url.clone(),
            shown,
        }
    };
    let call = match operands.next() {
        None => None,
        Some(tool) => {
            let args = match operands.next() {
                None => Map::new(),
                Some(json) => match serde_json::from_str::<Value>(json) {
                    Ok(Value::Object(map)) => map,
                    Ok(other) => {
                        bail!("ARGS_JSON must be a JSON object, got {}", json_kind(&other))
                    }
                    Err(e) => bail!("ARGS_JSON is not JSON: {e}"),
                },
            };
            Some((tool.clone(), args))
        }
    };
    if let Some(extra) = operands.next() {
        bail!("unexpected argument '{extra}' (usage: turnstile mcp URL [TOOL [ARGS_JSON]])");
    }
    Ok(Request { target, call })
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Connects, lists, calls; prints to stdout, errors to stderr. An error
/// returned from here is a usage or connection error (exit 2).
pub async fn run(args: McpArgs) -> anyhow::Result<ExitCode> {
    let request = parse(&args)?;
    let target = &request.target;
    let timeout = Duration::from_secs(args.timeout);
    let options = ClientOptions {
        call_timeout: timeout,
        connect_timeout: timeout,
        // One short session: nothing to probe or watch.
        probe_after: None,
        watch_every: None,
        ..ClientOptions::default()
    };
    let mut spec = target.spec().with_protocol(args.protocol);
    let mut connected = ToolClient::connect_with(&spec, options.clone()).await;
    // A protected server: authorize with OAuth, then connect with the token.
    // The challenge is the one the failed request met (a `401` may come
    // only after `initialize`), else the `401` of a probe.
    let mut auth = Authorizer {
        args: &args,
        timeout,
        options: &options,
        authorizations: 0,
        scopes: args.scopes.clone(),
    };
    if let (Err(e), Target::Http { url, .. }) = (&connected, target) {
        let met = turnstile::mcp::oauth::challenge_of(e).map(|c| c.header);
        let challenge = match met {
            Some(c) => Some(c),
            None => (turnstile::mcp::oauth::challenge(url, timeout).await)
                .ok()
                .flatten(),
        };
        if let Some(challenge) = challenge {
            connected = auth.connect(url, challenge, &mut spec).await.map_err(|e| {
                anyhow::anyhow!(
                    "cannot authorize with {}: {}",
                    target.shown(),
                    target.scrub(&e)
                )
            })?;
        }
    }
    let client = match connected {
        Ok(client) => client,
        Err(e) => {
            let reason = match unreachable(target).await {
                Some(why) => why,
                None => match e {
                    McpError::Connect { reason, .. } => tidy(&reason),
                    other => tidy(&other.to_string()),
                },
            };
            bail!(
                "cannot connect to {}: {}",
                target.shown(),
                target.scrub(&reason)
            )
        }
    };
    print!("{}", describe_server(&client, target));
    let Some((tool, tool_args)) = &request.call else {
        client.shutdown().await;
        return Ok(ExitCode::SUCCESS);
    };
    let mut client = client;
    let mut answer = call(&client, target, tool, tool_args).await;
    // A `403` with `insufficient_scope` is a step-up: authorize again for
    // the scopes it names, then send the call again, within the limit.
    while let (Err(Failed::Called(e)), Target::Http { url, .. }) = (&answer, target) {
        let Some(step_up) = turnstile::mcp::oauth::challenge_of(e).filter(|c| c.insufficient_scope)
        else {
            break;
        };
        if auth.authorizations >= MAX_AUTHORIZATIONS {
            eprintln!("error: the server asks for more scope again after {MAX_AUTHORIZATIONS} authorizations; giving up");
            break;
        }
        client.shutdown().await;
        match auth.connect(url, step_up.header, &mut spec).await {
            Ok(Ok(c)) => client = c,
            Ok(Err(e)) => bail!(
                "cannot connect to {}: {}",
                target.shown(),
                target.scrub(&tidy(&e.to_string()))
            ),
            Err(e) => bail!(
                "cannot authorize with {}: {}",
                target.shown(),
                target.scrub(&e)
            ),
        }
        answer = call(&client, target, tool, tool_args).await;
    }
    if let Err(Failed::Called(e)) = &answer {
        eprintln!(
            "error: the call of {tool} failed ({}): {}",
            e.kind(),
            target.scrub(&tidy(&e.to_string()))
        );
    }
    client.shutdown().await;
    Ok(match answer {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    })
}

/// Authorizations one run makes at most: the first, and the step-ups a
/// server's `403`s ask for (a server that never accepts is not asked
/// forever).
const MAX_AUTHORIZATIONS: u32 = 3;

/// One run's authorizations with a server: how many were made, and the
/// scopes asked for so far (`--scope`, then what challenges named).
struct Authorizer<'a> {
    args: &'a McpArgs,
    timeout: Duration,
    options: &'a ClientOptions,
    authorizations: u32,
    scopes: Vec<String>,
}

impl Authorizer<'_> {
    /// Authorizes for `challenge` and connects with the token; each `401`
    /// or `403` the connection meets (a scope `tools/list` needs) is
    /// authorized again, within [`MAX_AUTHORIZATIONS`]. `Err`: the
    /// authorization failed.
    async fn connect(
        &mut self,
        url: &str,
        challenge: String,
        spec: &mut ServerSpec,
    ) -> Result<Result<ToolClient, McpError>, String> {
        let mut challenge = challenge;
        loop {
            self.authorizations += 1;
            // A re-authorization asks for what was asked before and what
            // the server's challenge names now (their union, SEP-2350).
            let named = turnstile::mcp::oauth::Challenge {
                header: challenge.clone(),
                insufficient_scope: false,
            }
            .scopes();
            for s in named {
                if !self.scopes.contains(&s) {
                    self.scopes.push(s);
                }
            }
            let token = authorize(url, challenge, self.args, &self.scopes, self.timeout)
                .await
                .map_err(|e| e.to_string())?;
            spec.bearer = Some(token);
            let connected = ToolClient::connect_with(spec, self.options.clone()).await;
            let again = match &connected {
                Err(e) => turnstile::mcp::oauth::challenge_of(e),
                Ok(_) => None,
            };
            match again {
                Some(c) if self.authorizations < MAX_AUTHORIZATIONS => challenge = c.header,
                _ => return Ok(connected),
            }
        }
    }
}

/// Why a call did not end well.
enum Failed {
    /// It answered with `isError: true` (already printed).
    IsError,
    /// The call itself failed (printed by the caller, after any step-up).
    Called(McpError),
}

/// The OAuth authorization code flow for `url` (`mcp::oauth`): the URL to
/// open is printed to stderr, or fetched with --oauth-fetch.
async fn authorize(
    url: &str,
    challenge: String,
    args: &McpArgs,
    scopes: &[String],
    timeout: Duration,
) -> Result<turnstile::mcp::oauth::AccessToken, turnstile::mcp::oauth::OAuthError> {
    let secret = match args.client_secret_env.as_deref() {
        None => None,
        Some(var) => match std::env::var(var) {
            Ok(s) if s.is_empty() => None,
            Ok(s) => Some(s),
            Err(_) => {
                return Err(turnstile::mcp::oauth::OAuthError::Flow(format!(
                    "--client-secret-env names `{var}`, which is not set"
                )))
            }
        },
    };
    let client = turnstile::mcp::oauth::ClientIdentity {
        client_id: args.client_id.clone(),
        client_secret: secret,
        metadata_url: args.client_metadata_url.clone(),
        scopes: scopes.to_vec(),
    };
    if args.client_credentials {
        return turnstile::mcp::oauth::client_credentials(url, &client).await;
    }
    let fetch = args.oauth_fetch;
    // A person signing in needs longer than a connection does.
    let wait = match fetch {
        true => timeout,
        false => timeout.max(Duration::from_secs(300)),
    };
    turnstile::mcp::oauth::authorize(url, Some(challenge), &client, wait, |auth_url| async move {
        if fetch {
            // Redirects are followed to the loopback listener.
            if let Ok(c) = reqwest::Client::builder().timeout(timeout).build() {
                let _ = c.get(auth_url).send().await;
            }
        } else {
            eprintln!("the server asks for authorization: open {auth_url}");
        }
    })
    .await
}

/// An rmcp error text without its transport's type name and phrasing:
/// `Send message error Transport [rmcp::…<…>] error: REASON, when send
/// initialize request` → `REASON (during initialize)`. Cosmetic only: text
/// it does not recognise is kept as it is.
fn tidy(reason: &str) -> String {
    let mut out = reason.to_string();
    while let Some(start) = out.find(" [rmcp::") {
        let Some(len) = out[start..].find(']') else {
            break;
        };
        out.replace_range(start..start + len + 1, "");
    }
    for noise in [
        "Send message error Transport error: ",
        "Transport send error: Transport error: ",
    ] {
        out = out.replace(noise, "");
    }
    match out.strip_suffix(", when send initialize request") {
        Some(r) => format!("{r} (during initialize)"),
        None => out,
    }
}

/// Why an HTTP server cannot be reached at all (no TCP connection to its
/// host and port), the clearest reason to give; `None` if it can be, or
/// for stdio.
async fn unreachable(target: &Target) -> Option<String> {
    let Target::Http { url, .. } = target else {
        return None;
    };
    let parsed = reqwest::Url::parse(url).ok()?;
    let host = parsed.host_str()?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let port = parsed.port_or_known_default()?;
    let attempt = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::net::TcpStream::connect((bare, port)),
    )
    .await;
    match attempt {
        Ok(Ok(_)) => None,
        Ok(Err(e)) => Some(format!("no connection to {host}:{port}: {e}")),
        Err(_) => Some(format!("no connection to {host}:{port} within 5 s")),
    }
}

async fn call(
    client: &ToolClient,
    target: &Target,
    tool: &str,
    args: &Map<String, Value>,
) -> Result<(), Failed> {
    let _ = target;
    if !client.offers(tool) {
        eprintln!("note: '{tool}' is not in the server's tools/list; calling it anyway");
    }
    println!("\ncall {tool} {}", Value::Object(args.clone()));
    match client.call(tool, args.clone()).await {
        Ok(output) => {
            print!("{}", render_output(&output));
            if output.is_error {
                eprintln!("error: {tool} returned isError: true");
                Err(Failed::IsError)
            } else {
                Ok(())
            }
        }
        Err(e) => Err(Failed::Called(e)),
    }
}

/// Server name, version, protocol, and one line per tool.
fn describe_server(client: &ToolClient, target: &Target) -> String {
    let mut out = String::new();
    match client.server_info() {
        Some(info) => out += &format!("server: {} {}\n", info.name, info.version),
        None => out += "server: (no serverInfo)\n",
    }
    out += &format!("protocol: {}\n", client.protocol_version());
    out += &format!("endpoint: {}\n", target.shown());
    let tools: Vec<(String, bool, String)> = client
        .tools()
        .into_iter()
        .map(|t| {
            let read_only = client.declares_read_only(&t.name);
            (t.name, read_only, t.description)
        })
        .collect();
    out += &tool_lines(&tools);
    out
}

/// `tools (N):` then `  name  readOnlyHint=…  description`, aligned.
fn tool_lines(tools: &[(String, bool, String)]) -> String {
    let mut out = format!("tools ({}):\n", tools.len());
    let width = tools.iter().map(|(n, _, _)| n.chars().count()).max();
    for (name, read_only, description) in tools {
        let pad = width.unwrap_or(0).saturating_sub(name.chars().count());
        let hint = if *read_only {
            "readOnlyHint=true "
        } else {
            "readOnlyHint=false"
        };
        let line = format!(
            "  {name}{}  {hint}  {}",
            " ".repeat(pad),
            one_line(description)
        );
        out += line.trim_end();
        out.push('\n');
    }
    out
}

/// The first line of `text`, cut to [`DESCRIPTION_MAX`] characters.
fn one_line(text: &str) -> String {
    let first = text.trim().lines().next().unwrap_or("").trim();
    let more = text.trim().lines().nth(1).is_some();
    match first.char_indices().nth(DESCRIPTION_MAX) {
        Some((cut, _)) => format!("{}…", &first[..cut]),
        None if more => format!("{first} …"),
        None => first.to_string(),
    }
}

/// The normalised result: `isError`, each block, `structuredContent` and
/// `_meta` (JSON pretty-printed).
pub fn render_output(output: &ToolOutput) -> String {
    let mut out = format!("isError: {}\n", output.is_error);
    out += &format!("content: {} block(s)\n", output.blocks.len());
    for (i, block) in output.blocks.iter().enumerate() {
        out += &format!("[{i}] {}\n", block.kind());
        match block.as_text() {
            Some(text) => out += &indent(text),
            // Every other kind as its normalised JSON, less what the
            // header line already says (an image or audio block keeps
            // nothing but its kind: the payload is not ours to show).
            None => {
                let mut value = serde_json::to_value(block).unwrap_or(Value::Null);
                if let Value::Object(map) = &mut value {
                    map.remove("type");
                    map.remove("meta");
                    if map.get("kind").and_then(Value::as_str) == Some(block.kind()) {
                        map.remove("kind");
                    }
                    if map.is_empty() {
                        block_meta(&mut out, i, block.meta());
                        continue;
                    }
                }
                out += &indent(&pretty(&value));
            }
        }
        block_meta(&mut out, i, block.meta());
    }
    match &output.structured {
        Some(v) => out += &format!("structuredContent:\n{}", indent(&pretty(v))),
        None => out += "structuredContent: (none)\n",
    }
    match &output.meta {
        Some(m) => out += &format!("_meta:\n{}", indent(&pretty(&Value::Object(m.clone())))),
        None => out += "_meta: (none)\n",
    }
    out
}

/// A block's own `_meta`, after the block.
fn block_meta(out: &mut String, i: usize, meta: Option<&turnstile::mcp::JsonMap>) {
    if let Some(meta) = meta {
        *out += &format!("[{i}] _meta:\n");
        *out += &indent(&pretty(&Value::Object(meta.clone())));
    }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

fn indent(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        out += "    ";
        out += line;
        out.push('\n');
    }
    if text.is_empty() {
        out += "    \n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use serde_json::json;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: McpArgs,
    }

    fn args(argv: &[&str]) -> McpArgs {
        let argv = std::iter::once("mcp").chain(argv.iter().copied());
        Cli::try_parse_from(argv)
            .unwrap_or_else(|e| panic!("{e}"))
            .args
    }

    #[test]
    fn urls_lose_credentials_query_and_fragment() {
        let cases = [
            (
                "https://user:secret@example.com:8443/mcp?token=abc#x",
                "https://example.com:8443/mcp",
            ),
            ("http://127.0.0.1:8090/mcp", "http://127.0.0.1:8090/mcp"),
            ("https://example.com/mcp?key=1", "https://example.com/mcp"),
            ("http://[::1]:9/x/y", "http://[::1]:9/x/y"),
            ("http://example.com:80/", "http://example.com/"),
        ];
        for (url, shown) in cases {
            assert_eq!(redact_url(url).as_deref(), Some(shown), "{url}");
        }
        assert_eq!(redact_url("not a url"), None);
    }

    #[test]
    fn errors_are_scrubbed_of_the_full_url() {
        let url = "http://user:pw@127.0.0.1:1/mcp?token=s3cret";
        let request = parse(&args(&[url])).unwrap_or_else(|e| panic!("{e}"));
        // reqwest moves the credentials out but prints the query.
        let sent = "http://127.0.0.1:1/mcp?token=s3cret";
        let text = format!(
            "error sending request for url ({url}); url: \"{sent}\", redirect to https://o.example/x?k=s3cret"
        );
        let scrubbed = request.target.scrub(&text);
        assert_eq!(
            scrubbed,
            "error sending request for url (http://127.0.0.1:1/mcp); url: \"http://127.0.0.1:1/mcp\", \
             redirect to https://o.example/x"
        );
        assert!(!request.target.spec().name.contains("s3cret"));
        assert_eq!(scrub_urls("see http://"), "see <url>");
        assert_eq!(scrub_urls("no urls here"), "no urls here");
    }

    #[test]
    fn connect_errors_lose_rmcp_type_names() {
        assert_eq!(
            tidy("Send message error Transport [rmcp::transport::worker::WorkerTransport<X<Y>>] error: unexpected server response: HTTP 404 Not Found, when send initialize request"),
            "unexpected server response: HTTP 404 Not Found (during initialize)"
        );
        assert_eq!(
            tidy("tools/list failed: transport failure talking to MCP server 'x' during 'tools/list': Transport send error: Transport [rmcp::transport::worker::WorkerTransport<W<C>>] error: Auth required"),
            "tools/list failed: transport failure talking to MCP server 'x' during 'tools/list': Auth required"
        );
        assert_eq!(
            tidy("no initialize response within 1s"),
            "no initialize response within 1s"
        );
    }

    #[test]
    fn operands_and_usage_errors() {
        let r =
            parse(&args(&["http://h/mcp", "add", r#"{"a":1}"#])).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            r.call,
            Some((
                "add".to_string(),
                json!({"a": 1}).as_object().cloned().unwrap_or_default()
            ))
        );
        let r = parse(&args(&["http://h/mcp", "ping_tool"])).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.call, Some(("ping_tool".to_string(), Map::new())));
        let r = parse(&args(&[
            "--stdio",
            "echo",
            "--",
            "node",
            "s.js",
            "--token=x",
        ]))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            r.target,
            Target::Stdio {
                command: "node".into(),
                args: vec!["s.js".into(), "--token=x".into()]
            }
        );
        assert_eq!(r.target.shown(), "stdio: node (2 arguments, not shown)");
        assert_eq!(r.call, Some(("echo".to_string(), Map::new())));

        for bad in [
            &[][..],
            &["ftp://h/mcp"][..],
            &["http://h/mcp", "t", "[1]"][..],
            &["http://h/mcp", "t", "{"][..],
            &["http://h/mcp", "t", "{}", "extra"][..],
            &["--stdio"][..],
            &["http://h/mcp", "--", "node"][..],
        ] {
            assert!(
                parse(&args(bad)).is_err(),
                "{bad:?} should be a usage error"
            );
        }
    }

    #[test]
    fn tool_list_is_aligned_one_line_each() {
        let tools = vec![
            (
                "search".to_string(),
                true,
                "Search photos.\nLong help.".to_string(),
            ),
            ("get_photo".to_string(), false, "x".repeat(150)),
            ("t".to_string(), false, String::new()),
        ];
        let out = tool_lines(&tools);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "tools (3):");
        assert_eq!(
            lines[1],
            "  search     readOnlyHint=true   Search photos. …"
        );
        assert!(lines[2].starts_with("  get_photo  readOnlyHint=false  xxx"));
        assert!(lines[2].ends_with("x…") && lines[2].chars().count() < 140);
        assert_eq!(lines[3], "  t          readOnlyHint=false");
    }

    #[test]
    fn output_shows_every_part() {
        let output = ToolOutput::from_value(&json!({
            "content": [
                {"type": "text", "text": "The sum is 5", "_meta": {"page": 1}},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"}
            ],
            "structuredContent": {"sum": 5},
            "isError": false,
            "_meta": {"returned": 1}
        }));
        let out = render_output(&output);
        for part in [
            "isError: false",
            "content: 2 block(s)",
            "[0] text\n    The sum is 5\n",
            "[0] _meta:\n    {\n      \"page\": 1\n    }\n",
            "[1] image\nstructuredContent:",
            "structuredContent:\n    {\n      \"sum\": 5\n    }\n",
            "_meta:\n    {\n      \"returned\": 1\n    }\n",
        ] {
            assert!(out.contains(part), "missing {part:?} in\n{out}");
        }
        let empty = render_output(&ToolOutput {
            is_error: true,
            ..ToolOutput::default()
        });
        assert_eq!(
            empty,
            "isError: true\ncontent: 0 block(s)\nstructuredContent: (none)\n_meta: (none)\n"
        );
    }
}
