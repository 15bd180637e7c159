//! `turnstile demo`: the demo tool server, the scripted model and a SQLite
//! file, all on loopback; prints the URL to open.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use crate::agent::Limits;
use crate::app::{self, AppConfig};
use crate::demo::{DemoOptions, DemoServer, Fault};
use crate::llm::slow::Slowed;
use crate::llm::Scripted;
use crate::mcp::{ClientOptions, ServerSpec, DEFAULT_PROBE_AFTER};

/// What `turnstile demo` was asked for.
pub struct DemoRun<'a> {
    pub addr: SocketAddr,
    pub mcp_addr: SocketAddr,
    pub db: &'a str,
    pub faults: Vec<Fault>,
    pub tables_dir: Option<&'a Path>,
    /// How long a turn's claim on its thread holds without renewal.
    pub turn_lease: Duration,
    /// The pause before each answer delta of the scripted model (zero: none),
    /// to stream at a real model's pace.
    pub model_delay: Duration,
    /// How long the demo tool server keeps an idle MCP session (`None`:
    /// rmcp's default, 300 s).
    pub mcp_session_ttl: Option<Duration>,
}

pub async fn run(opts: DemoRun<'_>) -> anyhow::Result<()> {
    let DemoRun {
        addr,
        mcp_addr,
        db,
        faults,
        tables_dir,
        turn_lease,
        model_delay,
        mcp_session_ttl,
    } = opts;
    let demo = DemoServer::start(
        mcp_addr,
        DemoOptions {
            faults: faults.clone(),
            session_ttl: mcp_session_ttl,
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
            servers: vec![ServerSpec::http("demo", demo.url.clone())],
            model: Arc::new(Slowed::new(Scripted::demo(), model_delay)),
            limits: Limits::default(),
            turn_lease,
            tables_dir,
            contracts: crate::demo::contracts(),
        },
        client,
    )
    .await?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let url = format!("http://{}/", listener.local_addr()?);
    println!("turnstile demo is running: open {url}");
    println!("  demo tool server (MCP): {}", demo.url);
    if let Some(ttl) = mcp_session_ttl {
        println!("  MCP session ttl: {} s", ttl.as_secs());
    }
    println!("  database: {db}");
    if !model_delay.is_zero() {
        println!("  model delay: {} ms per delta", model_delay.as_millis());
    }
    if !faults.is_empty() {
        let names: Vec<&str> = faults.iter().map(|f| f.name()).collect();
        println!("  faults injected: {}", names.join(", "));
    }
    println!("  try: turnstile chat {url} \"show safety issues on floor 3\"");
    crate::http::serve(listener, state, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    demo.shutdown().await;
    Ok(())
}
