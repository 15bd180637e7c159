//! `turnstile serve --config FILE`: the chat server with an OpenAI-compatible
//! model and the configured MCP servers. The config and the tables are
//! validated before anything is connected; `--check` stops there.

use std::sync::Arc;

use anyhow::Context;

use turnstile::app::{self, AppConfig};
use turnstile::config::{Config, KeySource};
use turnstile::llm::openai::shown_url;
use turnstile::llm::OpenAi;
use turnstile::protocols::TableSet;
use turnstile::store::Backend;

/// Loads the tables (compiled-in, or the override directory) and describes
/// what `run` would start. Never prints a secret: the database by its kind,
/// URLs as scheme, host(:port) and path, a stdio server as its program and
/// the number of its arguments.
pub fn check(config: &Config) -> anyhow::Result<String> {
    let tables =
        TableSet::load(config.tables_dir.as_deref()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut out = format!("{}: ok\n", config.path.display());
    out += &format!("  listen: {}\n", config.addr);
    out += &format!("  database: {}\n", database_kind(config));
    let key = match &config.model.key_source {
        KeySource::Env(var) => format!("from ${var}"),
        KeySource::File => "written in the file".into(),
    };
    out += &format!(
        "  model: {} at {} (key {key})\n",
        config.model.name,
        shown_url(&config.model.base_url)
    );
    let names: Vec<&str> = tables.names().collect();
    match &config.tables_dir {
        Some(d) => {
            out += &format!(
                "  tables: {} (overrides from {})\n",
                names.join(", "),
                d.display()
            )
        }
        None => out += &format!("  tables: {} (compiled in)\n", names.join(", ")),
    }
    for s in &config.mcp_servers {
        out += &format!("  mcp server {}: {}\n", s.name, s.transport.shown());
    }
    for w in &config.warnings {
        out += &format!("  warning: {w}\n");
    }
    Ok(out)
}

/// The database's kind only (a URL may hold a password), as the config
/// decided it: the same decision for `--check` and `run`.
fn database_kind(config: &Config) -> &'static str {
    match config.database() {
        Backend::Postgres => "PostgreSQL",
        Backend::Sqlite => "SQLite",
    }
}

/// The servers' specs, each `client_credentials` server's with the token
/// turnstile got as itself at start-up (issue 40 §1).
async fn authorized_specs(config: &Config) -> anyhow::Result<Vec<turnstile::mcp::ServerSpec>> {
    let mut specs = config.server_specs();
    for (server, spec) in config.mcp_servers.iter().zip(specs.iter_mut()) {
        let turnstile::config::ServerAuth::ClientCredentials(client) = &server.auth else {
            continue;
        };
        let turnstile::mcp::Transport::Http { url } = &spec.transport else {
            continue;
        };
        let token = turnstile::mcp::oauth::client_credentials(url, client)
            .await
            .with_context(|| format!("mcp server {}: the client credentials grant", spec.name))?;
        spec.bearer = Some(token);
    }
    Ok(specs)
}

pub async fn run(config: Config) -> anyhow::Result<()> {
    for w in &config.warnings {
        tracing::warn!(key = %w.key, "{}", w.message);
    }
    // Tables first: a broken override stops start-up before any connection.
    check(&config)?;
    let model = OpenAi::new(config.openai()).context("cannot set up the model client")?;
    let state = app::build(AppConfig {
        database_url: &config.database_url,
        servers: authorized_specs(&config).await?,
        model: Arc::new(model),
        limits: config.agent_limits(),
        turn_lease: config.turn_lease(),
        tables_dir: config.tables_dir.as_deref(),
        contracts: config.contracts(),
        roles: config.roles(),
        terminals: config.terminal_flows(),
        cards: config.cards(),
        instructions: config.model.instructions.clone(),
        auth: config.auth.clone(),
        licences: config.licences(),
        guardrails: config.guardrails.clone(),
        connections: config.connections_config()?,
    })
    .await?;
    let listener = tokio::net::TcpListener::bind(config.addr)
        .await
        .with_context(|| format!("cannot listen on {}", config.addr))?;
    let url = format!("http://{}/", listener.local_addr()?);
    println!("turnstile is serving on {url}");
    println!(
        "  model: {} at {}",
        config.model.name,
        shown_url(&config.model.base_url)
    );
    println!("  database: {}", database_kind(&config));
    for s in &config.mcp_servers {
        println!("  mcp server: {} ({})", s.name, s.transport.shown());
    }
    // SIGTERM, Ctrl-C or `POST /v1/admin/drain` drains before the stop.
    let drain = state.drain.clone();
    let app = turnstile::http::router_with(state, &config.http);
    turnstile::http::serve_draining(listener, app, &config.http, drain).await?;
    Ok(())
}
