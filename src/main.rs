//! The `turnstile` binary: a thin layer of argument parsing over the library.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use turnstile_cli as cli;
use turnstile_cli::demo::DemoFault;

#[derive(Parser)]
#[command(
    name = "turnstile",
    version,
    about = "Chat orchestration where every protocol is a reviewed transition table"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run everything on embedded defaults: demo tool server, scripted model, SQLite.
    Demo {
        /// Address the chat server listens on.
        #[arg(long, default_value = "127.0.0.1:8080")]
        addr: SocketAddr,
        /// Database: a SQLite file path, or a sqlite:// or postgres:// URL.
        /// Without it, a file per address in the current directory
        /// (`turnstile-demo-8080.db` for port 8080), so two demos in one
        /// folder never share one by accident.
        #[arg(long)]
        db: Option<String>,
        /// Inject a fault (repeatable). Into the demo tool server:
        /// upstream-502, auth-empty-object, cursor-rejected, cursor-drift.
        /// Into the model: lying-model (the scripted model mixes
        /// contradictions of the judge into its answers, to watch the
        /// narration guard replace them).
        #[arg(long = "fault", value_parser = DemoFault::parse)]
        faults: Vec<DemoFault>,
        /// Address of the demo MCP tool server (port 0: any free port). Fix it
        /// to point `turnstile serve` at the demo tools.
        #[arg(long, default_value = "127.0.0.1:0")]
        mcp_addr: SocketAddr,
        #[arg(long, env = "TURNSTILE_TABLES")]
        tables: Option<PathBuf>,
        /// Seconds a turn's claim on its thread (a lease in the database)
        /// holds without renewal; a crashed process's threads are free again
        /// after it. `turnstile serve` reads `limits.turn_lease_secs`.
        #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=86400))]
        turn_lease_secs: u64,
        /// Milliseconds the scripted model waits before each answer delta, to
        /// stream at a real model's pace (0: no delay).
        #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=60000))]
        model_delay_ms: u64,
        /// Seconds a turn whose client went away keeps running for it to
        /// reconnect (`http.reconnect_grace_secs`; 0: a disconnect cuts
        /// the turn at once).
        #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(0..=600))]
        reconnect_grace_secs: u64,
        /// Seconds a SIGTERM (or Ctrl-C) lets open turns run to their end
        /// before the demo stops (`http.drain_secs`).
        #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(0..=3600))]
        drain_secs: u64,
        /// Turn on the built-in safety checks: `secrets` (a credential in a
        /// message or an answer is blocked) and `pii` (e-mail addresses and
        /// phone numbers are redacted). `turnstile serve` reads
        /// `[[guardrails]]`.
        #[arg(long)]
        guardrails: bool,
        /// A word or phrase a `words` safety check blocks in messages and
        /// answers (repeatable).
        #[arg(long = "guardrail-word")]
        guardrail_words: Vec<String>,
        /// Export the turns' traces over OTLP/HTTP to this endpoint (the
        /// traces URL itself: http://127.0.0.1:6006/v1/traces for Arize
        /// Phoenix). The standard OTEL_EXPORTER_OTLP_* variables work too.
        #[arg(long)]
        otlp_endpoint: Option<String>,
        /// Seconds the demo tool server keeps an idle MCP session before it
        /// forgets it (default: rmcp's, 300). turnstile re-initialises an
        /// expired session (docs/adr/0011-mcp-reconnect.md).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=86400))]
        mcp_session_ttl: Option<u64>,
        /// The MCP revision turnstile speaks to the demo tool server:
        /// 2025-11-25 (initialize and a session), 2026-07-28 (stateless) or
        /// auto. With 2026-07-28 or auto the tool server offers 2026-07-28.
        #[arg(long, default_value = "2025-11-25", value_parser = |s: &str| turnstile::mcp::Revision::parse(s).ok_or_else(|| format!("`{s}` is not a revision: 2025-11-25, 2026-07-28 or auto")))]
        mcp_protocol: turnstile::mcp::Revision,
        /// Identity on: bearer tokens are checked by the demo tool server's
        /// verifier (/api/auth/me), threads belong to verified subjects, and
        /// tools that declare a licence tier are offered only to users who
        /// hold it. Prints a token for each of two demo users on two tiers.
        #[arg(long)]
        auth: bool,
        /// A fault of the demo's verifier (with --auth): slow:MILLIS,
        /// server-error, malformed.
        #[arg(long, value_parser = |s: &str| s.parse::<turnstile_demo::VerifierFault>().map_err(|e| e.to_string()))]
        verifier_fault: Option<turnstile_demo::VerifierFault>,
    },
    /// Serve chats with an OpenAI-compatible model and the configured MCP servers.
    Serve {
        /// The config file (TOML); environment variables override it. See
        /// docs/configuration.md.
        #[arg(long, default_value = "turnstile.toml")]
        config: PathBuf,
        /// Validate the config and the tables, print a summary and exit.
        #[arg(long)]
        check: bool,
    },
    /// Send one message to a running server and stream the turn's frames.
    Chat {
        /// Server base URL, e.g. http://127.0.0.1:8080/
        url: String,
        /// What to say; with `--more`, optional ("show more").
        #[arg(required_unless_present = "more")]
        message: Option<String>,
        /// Show more of the listing the thread showed last (the card's
        /// "show more"): the server continues it from its stored cursor,
        /// checked page by page. Needs `--thread`.
        #[arg(long, requires = "thread")]
        more: bool,
        /// Continue this thread (its id is printed on the first line)
        /// instead of starting a new one.
        #[arg(long)]
        thread: Option<String>,
        /// Host context to send, as JSON: '{"floor": 4, "project": "tower-a"}'.
        #[arg(long, value_name = "JSON")]
        context: Option<String>,
        /// The floor on the user's screen (context.floor), for "this floor".
        #[arg(long)]
        floor: Option<String>,
        /// How many rows of each card to print: a number or `all`.
        #[arg(long, default_value = "all")]
        rows: cli::chat::Rows,
        /// Call as this bearer token's subject (the server's verifier checks
        /// it). Without one, the caller is the anonymous session kept for
        /// this server in ~/.turnstile/sessions (TURNSTILE_SESSION_DIR).
        #[arg(long, env = "TURNSTILE_TOKEN", hide_env_values = true)]
        token: Option<String>,
    },
    /// Decide an interrupt a turn ended at, and stream the resumed turn:
    /// approve or deny an approval, or answer a tool server's question
    /// (accept with --field / --answers, decline, cancel).
    ///
    /// `turnstile chat` prints the interrupt with these commands filled in.
    /// A refused decision (an unknown interrupt, one decided already, an
    /// answer that does not fit the form) prints the server's status,
    /// reason and table row and exits non-zero.
    Resume(cli::chat::ResumeArgs),
    /// Connect to one MCP server, list its tools, and optionally call one.
    ///
    /// Prints the server's name, version and protocol, each tool (name,
    /// readOnlyHint, description), then the normalised result of the call.
    Mcp(cli::mcp::McpArgs),
    /// Validate, render and compare transition tables.
    Tables {
        #[command(subcommand)]
        command: TablesCommand,
    },
    /// Run events through a table; print each step, or the violated row and exit 1.
    Replay {
        /// Table name (e.g. `frame`) or path to a .ron file.
        name: String,
        /// Events, in order.
        events: Vec<String>,
        /// Load tables from this directory instead of the compiled-in ones.
        #[arg(long, env = "TURNSTILE_TABLES")]
        tables: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum TablesCommand {
    /// Validate every *.ron in DIR; located findings and a non-zero exit on any error.
    Check {
        #[arg(default_value = "tables")]
        dir: PathBuf,
    },
    /// Render a table: markdown matrix, mermaid or dot graph, json, or ron (every group expanded).
    Render {
        name: String,
        #[arg(long, default_value = "markdown")]
        format: String,
        #[arg(long, env = "TURNSTILE_TABLES")]
        tables: Option<PathBuf>,
    },
    /// Rows whose legality, target or effect changed between two table files.
    Diff { old: String, new: String },
}

/// The most rmcp may log: info (its debug and trace lines carry message
/// bodies).
const RMCP_CEILING: &str = "rmcp=info";

fn main() -> ExitCode {
    // `turnstile … | head -1`: a closed stdout ends the process quietly.
    cli::quiet_on_closed_stdout();
    let cli = Cli::parse();
    // `turnstile mcp` reports what happened itself, with URLs redacted;
    // the libraries' logs (which print full URLs) stay off unless RUST_LOG
    // asks for them.
    let default_filter = match cli.command {
        Command::Mcp(_) => "off",
        _ => "warn,turnstile=info",
    };
    // rmcp logs whole JSON-RPC messages at debug and trace: a server's
    // requestState and the user's answers to its questions among them. They
    // are never logged (ADR 0025), whatever RUST_LOG asks of rmcp.
    let filter = match tracing_subscriber::EnvFilter::try_from_default_env() {
        Ok(asked) => asked.add_directive(RMCP_CEILING.parse().expect("a valid directive")),
        Err(_) => default_filter.into(),
    };
    // Trace export, for the two commands that run a server (issue 39 §1).
    // `serve`'s config is read once, here: its `[telemetry]` decides the
    // exporter before logging starts, and `serve` runs on the same value.
    let serve_config = match &cli.command {
        Command::Serve { config, .. } => Some(turnstile::config::Config::load(config)),
        _ => None,
    };
    let exporter = match cli::otel::Exporter::start(telemetry(&cli, serve_config.as_ref()).as_ref())
    {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(2);
        }
    };
    let (exporter, tracer) = exporter.unzip();
    use tracing_subscriber::filter::FilterExt;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                // Every log line, ours and the libraries' (rmcp logs a
                // transport error with the full URL), has its URLs cut to
                // scheme, host and path.
                .with_writer(|| ScrubbedLine(Vec::new()))
                .with_filter(filter.and(tracing_subscriber::filter::filter_fn(|m| {
                    // The ceiling holds for every rmcp module, whatever a
                    // more specific RUST_LOG directive asks (its OAuth
                    // code logs the authorization code at debug).
                    !(m.target().starts_with("rmcp") && *m.level() > tracing::Level::INFO)
                }))),
        )
        .with(tracer.map(|t| {
            tracing_opentelemetry::layer()
                .with_tracer(t)
                .with_location(false)
                .with_threads(false)
                .with_tracked_inactivity(false)
                .with_target(false)
                .with_filter(tracing_subscriber::EnvFilter::new(cli::otel::FILTER))
        }))
        .init();
    let code = match run(cli, serve_config) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    };
    if let Some(e) = exporter {
        e.shutdown();
    }
    code
}

/// The trace export a command asks for: `demo --otlp-endpoint`, `serve`'s
/// `[telemetry]` (a config that does not load is reported by `serve`
/// itself), with the `OTEL_*` variables; none for a command that runs no
/// server, whatever the environment says.
fn telemetry(
    cli: &Cli,
    serve_config: Option<&Result<turnstile::config::Config, turnstile::config::ConfigError>>,
) -> Option<turnstile::config::TelemetryConfig> {
    match &cli.command {
        Command::Demo { otlp_endpoint, .. } => Some(turnstile::config::TelemetryConfig {
            otlp_endpoint: otlp_endpoint.clone(),
            project: Some("turnstile-demo".into()),
            ..Default::default()
        }),
        Command::Serve { check: false, .. } => Some(
            (serve_config.and_then(|c| c.as_ref().ok()))
                .map(|c| c.telemetry.clone())
                .unwrap_or_default(),
        ),
        _ => None,
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

fn run(
    cli: Cli,
    serve_config: Option<Result<turnstile::config::Config, turnstile::config::ConfigError>>,
) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Demo {
            addr,
            db,
            faults,
            mcp_addr,
            tables,
            turn_lease_secs,
            model_delay_ms,
            reconnect_grace_secs,
            drain_secs,
            guardrails,
            guardrail_words,
            otlp_endpoint: _,
            mcp_session_ttl,
            mcp_protocol,
            auth,
            verifier_fault,
        } => {
            let (faults, lying_model) = DemoFault::split(&faults);
            let opts = cli::demo::DemoRun {
                addr,
                mcp_addr,
                db: db.as_deref(),
                faults,
                lying_model,
                tables_dir: tables.as_deref(),
                turn_lease: std::time::Duration::from_secs(turn_lease_secs),
                model_delay: std::time::Duration::from_millis(model_delay_ms),
                reconnect_grace: std::time::Duration::from_secs(reconnect_grace_secs),
                drain: std::time::Duration::from_secs(drain_secs),
                mcp_session_ttl: mcp_session_ttl.map(std::time::Duration::from_secs),
                mcp_protocol,
                auth,
                verifier_fault: verifier_fault.unwrap_or_default(),
                guardrails,
                guardrail_words,
            };
            runtime()?.block_on(cli::demo::run(opts))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve { config, check } => {
            let config =
                serve_config.unwrap_or_else(|| turnstile::config::Config::load(&config))?;
            if check {
                write!(cli::stdout(), "{}", cli::serve::check(&config)?)?;
            } else {
                runtime()?.block_on(cli::serve::run(config))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Chat {
            url,
            message,
            thread,
            context,
            floor,
            rows,
            token,
            more,
        } => {
            let context = cli::chat::context(context.as_deref(), floor)?;
            let opts = cli::chat::ChatOptions {
                thread,
                context,
                rows,
                token,
                more,
            };
            let message = message.unwrap_or_else(|| "show more".to_string());
            runtime()?.block_on(cli::chat::run(&url, &message, &opts))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Resume(args) => {
            runtime()?.block_on(cli::chat::resume(&args))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Mcp(args) => runtime()?.block_on(cli::mcp::run(args)),
        Command::Tables { command } => match command {
            TablesCommand::Check { dir } => {
                let bad = cli::tables::check(&dir)?;
                Ok(if bad == 0 {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::FAILURE
                })
            }
            TablesCommand::Render {
                name,
                format,
                tables,
            } => {
                write!(
                    cli::stdout(),
                    "{}",
                    cli::tables::render(&name, &format, tables.as_deref())?
                )?;
                Ok(ExitCode::SUCCESS)
            }
            TablesCommand::Diff { old, new } => {
                write!(cli::stdout(), "{}", cli::tables::diff(&old, &new)?)?;
                Ok(ExitCode::SUCCESS)
            }
        },
        Command::Replay {
            name,
            events,
            tables,
        } => {
            let (out, violated) = cli::tables::replay(&name, &events, tables.as_deref())?;
            write!(cli::stdout(), "{out}")?;
            Ok(if violated {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
    }
}

/// One log line, written to stderr when dropped with every URL in it
/// redacted (`mcp::redact_url`): credentials and queries never reach the log,
/// whoever logged them.
struct ScrubbedLine(Vec<u8>);

impl std::io::Write for ScrubbedLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for ScrubbedLine {
    fn drop(&mut self) {
        use std::io::Write;
        let line = String::from_utf8_lossy(&self.0);
        let clean = turnstile::mcp::client::scrub_urls(&line);
        let _ = std::io::stderr().write_all(clean.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn resume_takes_url_thread_interrupt_and_decision() {
        let cli = Cli::try_parse_from(["turnstile", "resume", "http://h/", "th", "i1", "deny"])
            .expect("parses");
        let Command::Resume(args) = cli.command else {
            panic!("not resume");
        };
        assert_eq!(
            (
                args.url.as_str(),
                args.thread.as_str(),
                args.interrupt_id.as_str()
            ),
            ("http://h/", "th", "i1")
        );
        assert_eq!(args.decision, cli::chat::Decision::Deny);
        assert!(Cli::try_parse_from(["turnstile", "resume", "http://h/", "th", "i1"]).is_err());
    }
}
