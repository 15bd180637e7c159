//! `turnstile demo`: the demo tool server, the scripted model and a SQLite
//! file, all on loopback; prints the URL to open.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;

use crate::agent::Limits;
use crate::app::{self, AppConfig};
use crate::demo::{DemoOptions, DemoServer, Fault};
use crate::judge::Contracts;
use crate::llm::Scripted;
use crate::mcp::ServerSpec;

pub async fn run(
    addr: SocketAddr,
    db: &str,
    faults: Vec<Fault>,
    tables_dir: Option<&Path>,
) -> anyhow::Result<()> {
    let demo = DemoServer::start(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        DemoOptions {
            faults: faults.clone(),
        },
    )
    .await
    .context("cannot start the demo tool server")?;
    let state = app::build(AppConfig {
        database_url: db,
        servers: vec![ServerSpec::http("demo", demo.url.clone())],
        model: Arc::new(Scripted::demo()),
        limits: Limits::default(),
        tables_dir,
        contracts: Contracts::demo(),
    })
    .await?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let url = format!("http://{}/", listener.local_addr()?);
    println!("turnstile demo is running: open {url}");
    println!("  demo tool server (MCP): {}", demo.url);
    println!("  database: {db}");
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
