//! `turnstile demo`: the demo tool server, the scripted model and a SQLite
//! file, all on loopback; prints the URL to open.
//!
//! `--fault` takes the demo tool server's faults ([`Fault`]) and one model
//! fault, `lying-model`: the scripted model wrapped in [`Lying`], so that a
//! reviewer can watch the narration guard replace its contradictions.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use turnstile::agent::Limits;
use turnstile::app::{self, AppConfig};
use turnstile::llm::Model;
use turnstile::mcp::{ClientOptions, ServerSpec, DEFAULT_PROBE_AFTER};
use turnstile_demo::lying::Lying;
use turnstile_demo::scripted::Scripted;
use turnstile_demo::slow::Slowed;
use turnstile_demo::{DemoOptions, DemoServer, Fault};

/// A `--fault` of `turnstile demo`: a fault of the demo tool server, or
/// the model fault `lying-model`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DemoFault {
    Tool(Fault),
    /// The scripted model mixes contradictions of the judge into its
    /// answers ([`Lying`]); the narration guard replaces them.
    LyingModel,
}

impl DemoFault {
    pub const LYING_MODEL: &'static str = "lying-model";

    /// The CLI name: a tool fault's own, or `lying-model`.
    pub fn name(self) -> &'static str {
        match self {
            DemoFault::Tool(f) => f.name(),
            DemoFault::LyingModel => Self::LYING_MODEL,
        }
    }

    /// Parses a CLI name. Usable as a clap `value_parser`.
    pub fn parse(s: &str) -> Result<DemoFault, String> {
        if s.trim() == Self::LYING_MODEL {
            return Ok(DemoFault::LyingModel);
        }
        Fault::parse(s).map(DemoFault::Tool).map_err(|_| {
            let mut known: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
            known.push(Self::LYING_MODEL);
            format!("unknown fault '{}' (known: {})", s.trim(), known.join(", "))
        })
    }

    /// The tool server's faults, and whether the model lies.
    pub fn split(faults: &[DemoFault]) -> (Vec<Fault>, bool) {
        let tools = faults
            .iter()
            .filter_map(|f| match f {
                DemoFault::Tool(t) => Some(*t),
                DemoFault::LyingModel => None,
            })
            .collect();
        (tools, faults.contains(&DemoFault::LyingModel))
    }
}

/// What `turnstile demo` was asked for.
pub struct DemoRun<'a> {
    pub addr: SocketAddr,
    pub mcp_addr: SocketAddr,
    /// `--db`; without it, [`database_for`] the address the chat server
    /// bound.
    pub db: Option<&'a str>,
    pub faults: Vec<Fault>,
    /// `--fault lying-model`: the scripted model lies ([`Lying`]).
    pub lying_model: bool,
    pub tables_dir: Option<&'a Path>,
    /// How long a turn's claim on its thread holds without renewal.
    pub turn_lease: Duration,
    /// The pause before each answer delta of the scripted model (zero: none),
    /// to stream at a real model's pace.
    pub model_delay: Duration,
    /// `--reconnect-grace-secs`: how long a turn keeps running for a client
    /// that went away to reconnect.
    pub reconnect_grace: Duration,
    /// `--drain-secs`: how long a stop lets open turns finish.
    pub drain: Duration,
    /// How long the demo tool server keeps an idle MCP session (`None`:
    /// rmcp's default, 300 s).
    pub mcp_session_ttl: Option<Duration>,
    /// `--mcp-protocol`: the revision spoken to the demo tool server.
    pub mcp_protocol: turnstile::mcp::Revision,
    /// `--auth`: bearer verification, principal-owned threads, the licence
    /// gate on the tools' declared tiers.
    pub auth: bool,
    /// `--verifier-fault`: the demo verifier's fault at start.
    pub verifier_fault: turnstile_demo::VerifierFault,
    /// `--guardrails`: the built-in `secrets` (block) and `pii` (redact)
    /// checks on messages and answers.
    pub guardrails: bool,
    /// `--guardrail-word`: a `words` check with these words (block).
    pub guardrail_words: Vec<String>,
}

/// The demo's database when `--db` is not given: a SQLite file named for
/// the port the chat server bound (not the one asked for: two demos on port
/// 0 get two ports), so two demos in one folder never share one. Two processes on one database is a deployment choice
/// (`--db`), and each leaves the other's live questions alone.
pub fn database_for(addr: SocketAddr) -> String {
    format!("turnstile-demo-{}.db", addr.port())
}

/// A SQLite path as given; a PostgreSQL URL as scheme, host(:port) and path
/// (it may hold a password).
fn shown_database(db: &str) -> String {
    match turnstile::config::database_backend(db) {
        Ok(turnstile::store::Backend::Sqlite) => db.to_string(),
        _ => turnstile::llm::openai::shown_url(db),
    }
}

pub async fn run(opts: DemoRun<'_>) -> anyhow::Result<()> {
    let DemoRun {
        addr,
        mcp_addr,
        db,
        faults,
        lying_model,
        tables_dir,
        turn_lease,
        model_delay,
        reconnect_grace,
        drain,
        mcp_session_ttl,
        mcp_protocol,
        auth,
        verifier_fault,
        guardrails,
        guardrail_words,
    } = opts;
    // Bound first: the default database is named for the port it got.
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let named = database_for(listener.local_addr()?);
    let db = db.unwrap_or(&named);
    let demo = DemoServer::start(
        mcp_addr,
        DemoOptions {
            faults: faults.clone(),
            session_ttl: mcp_session_ttl,
            verifier_fault,
            stateless: mcp_protocol != turnstile::mcp::Revision::Sessions,
            ..DemoOptions::default()
        },
    )
    .await
    .context("cannot start the demo tool server")?;
    // The demo knows its tool server's session TTL: idle sessions are
    // probed before it runs out, so a pause never costs a turn.
    let client = ClientOptions {
        probe_after: Some(match mcp_session_ttl {
            Some(ttl) => (ttl / 2).min(DEFAULT_PROBE_AFTER),
            None => DEFAULT_PROBE_AFTER,
        }),
        ..ClientOptions::default()
    };
    let state = app::build_with(
        AppConfig {
            database_url: db,
            servers: vec![ServerSpec::http("demo", demo.url.clone()).with_protocol(mcp_protocol)],
            model: match lying_model {
                true => Arc::new(Slowed::new(Lying::new(Scripted::demo()), model_delay))
                    as Arc<dyn Model>,
                false => Arc::new(Slowed::new(Scripted::demo(), model_delay)),
            },
            limits: Limits::default(),
            turn_lease,
            tables_dir,
            contracts: turnstile_demo::contracts(),
            roles: turnstile_demo::roles(),
            terminals: turnstile_demo::terminals(&demo.url),
            cards: turnstile_demo::cards(),
            instructions: turnstile_demo::instructions(),
            auth: match auth {
                true => turnstile::http::AuthConfig {
                    verifier: Some(turnstile::http::VerifierConfig {
                        url: reqwest::Url::parse(&demo.verifier_url())
                            .context("the demo verifier's URL")?,
                        timeout: Duration::from_secs(3),
                        // The demo's verifier faults are switched at run
                        // time: every request asks it.
                        cache_ttl: Duration::ZERO,
                    }),
                    ..turnstile::http::AuthConfig::default()
                },
                false => turnstile::http::AuthConfig::default(),
            },
            // With --auth an anonymous caller holds the lowest tier and the
            // tools' own declarations count; without, every tool is
            // everybody's.
            guardrails: turnstile::agent::Guardrails::built_in(guardrails, &guardrail_words)
                .context("--guardrail-word")?,
            connections: None,
            licences: match auth {
                true => turnstile::judge::tiers::LicenceMap::new(
                    Default::default(),
                    Default::default(),
                    None,
                ),
                false => turnstile::judge::tiers::LicenceMap::open(),
            },
        },
        client,
    )
    .await?;
    let url = format!("http://{}/", listener.local_addr()?);
    println!("turnstile demo is running: open {url}");
    println!(
        "  the panel in a host app: {url}demo/host (a site viewer), {url}demo/console (a console)"
    );
    println!(
        "  demo tool server (MCP): {}",
        turnstile::llm::openai::shown_url(&demo.url)
    );
    // Its port is random unless --mcp-addr fixes it: a line that works now.
    println!(
        "  its tools: {} mcp {}",
        super::self_command(),
        turnstile::llm::openai::shown_url(&demo.url)
    );
    if auth {
        println!(
            "  auth: on (verifier {}, 3 s limit); anonymous callers hold the tier \"free\"",
            turnstile::llm::openai::shown_url(&demo.verifier_url())
        );
        for u in demo.demo_users() {
            println!(
                "  demo user {} (tiers {}): --token {}",
                u.name,
                u.tiers.join(", "),
                u.token
            );
        }
        if verifier_fault != turnstile_demo::VerifierFault::None {
            println!("  verifier fault: {}", verifier_fault.name());
        }
    }
    if let Some(ttl) = mcp_session_ttl {
        println!("  MCP session ttl: {} s", ttl.as_secs());
    }
    println!("  database: {}", shown_database(db));
    if !model_delay.is_zero() {
        println!("  model delay: {} ms per delta", model_delay.as_millis());
    }
    if !faults.is_empty() {
        let names: Vec<&str> = faults.iter().map(|f| f.name()).collect();
        println!("  faults injected: {}", names.join(", "));
    }
    if lying_model {
        println!(
            "  model fault: lying-model (the scripted model mixes contradictions of the judge into its answers; the narration guard replaces them)"
        );
    }
    // A line that runs as printed, from any directory.
    println!(
        "  try: {} chat {url} \"show safety issues on floor 3\"",
        super::self_command()
    );
    // The demo's host apps frame the page from this origin (issue 38): it
    // is the one origin the page may be framed by and listens to. A panel
    // that loses its connection mid-answer may reconnect for
    // `--reconnect-grace-secs` (30 s by default).
    let bound = listener.local_addr()?;
    let mut origins = vec![format!("http://{bound}")];
    if bound.ip().is_loopback() {
        origins.push(format!("http://localhost:{}", bound.port()));
    }
    let http = turnstile::http::HttpConfig {
        frame_ancestors: origins,
        reconnect_grace,
        drain,
        ..turnstile::http::HttpConfig::default()
    };
    let drain = state.drain.clone();
    let app = turnstile::http::router_with(state, &http).merge(turnstile_demo::host::routes());
    // SIGTERM or Ctrl-C drains: open turns run to their end first.
    turnstile::http::serve_draining(listener, app, &http, drain).await?;
    demo.shutdown().await;
    Ok(())
}
