//! Assembles a running server from its parts: tables, store, tool servers,
//! model. Used by `turnstile demo`, `turnstile serve` and the tests.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use crate::agent::{Agent, Limits, ThreadLeases, ToolBelt, TurnTables};
use crate::http::AppState;
use crate::judge::approval::Roles;
use crate::judge::Contracts;
use crate::llm::Model;
use crate::mcp::{ClientOptions, ServerSpec};
use crate::protocols::connection::Connection;
use crate::protocols::TableSet;
use crate::store::Store;

pub struct AppConfig<'a> {
    pub database_url: &'a str,
    pub servers: Vec<ServerSpec>,
    pub model: Arc<dyn Model>,
    pub limits: Limits,
    /// How long a turn's claim on its thread holds without renewal
    /// (`limits.turn_lease_secs`); renewed every third of it while the turn
    /// runs. A crashed process's threads are free again after it.
    pub turn_lease: Duration,
    pub tables_dir: Option<&'a Path>,
    /// Which tools' results are judged for emptiness and in-band failure,
    /// and which listings may be stitched.
    pub contracts: Contracts,
    /// The tools' roles in the approval protocol (tables/approval.ron).
    pub roles: Roles,
    /// The export flows whose capability code delivers (tables/export.ron).
    pub terminals: crate::judge::capability::Terminals,
    /// The approval cards' wording per tool (`tools.<tool>.summary`).
    pub cards: crate::judge::card::Cards,
    /// What the deployment's assistant is for (`[model] instructions`).
    pub instructions: crate::llm::prompt::Instructions,
    /// Who may call: the bearer verifier, the proxy mode, the session
    /// cookie (tables/ownership.ron).
    pub auth: crate::http::AuthConfig,
    /// The one tool → required-tier map (tables/licence.ron).
    pub licences: crate::judge::tiers::LicenceMap,
    /// The safety checks (`[[guardrails]]`, tables/guardrail.ron).
    pub guardrails: crate::agent::Guardrails,
    /// The servers that authorize per user (`auth = "user"`): not started
    /// with the others; each call goes out with its user's token.
    pub connections: Option<crate::agent::connections::ConnectionsConfig>,
}

pub async fn build(cfg: AppConfig<'_>) -> anyhow::Result<AppState> {
    build_with(cfg, ClientOptions::default()).await
}

/// [`build`], with these options for every MCP server's client (timeouts,
/// idle probe, backoff).
pub async fn build_with(cfg: AppConfig<'_>, client: ClientOptions) -> anyhow::Result<AppState> {
    let tables = TableSet::load(cfg.tables_dir).map_err(|e| anyhow::anyhow!("{e}"))?;
    let bind = |e: crate::protocols::LoadError| anyhow::anyhow!("{e}");
    let turn_tables = TurnTables::bind(&tables).map_err(bind)?;
    let store = Store::connect(cfg.database_url)
        .await
        .with_context(|| "cannot open the database")?;
    // Turns a dead process left unfinished are closed as cut through their
    // tables before anything is served; those whose thread another live
    // process still leases are retried once the lease expires (ADR 0014).
    let recovered = crate::agent::recovery::recover(&store, &turn_tables, cfg.turn_lease)
        .await
        .with_context(|| "cannot close the turns left unfinished")?;
    crate::agent::recovery::spawn_deferred(
        store.clone(),
        turn_tables.clone(),
        cfg.turn_lease,
        recovered,
    );
    // A server that is down does not stop start-up: its connection machine
    // (tables/connection.ron) retries it in the background, and `/readyz`
    // says so. Only a spec that can never work, or a tool offered twice,
    // is an error here.
    let connection = tables.bound::<Connection>().map_err(bind)?;
    // A question asked inside an open call waits as long as an approval
    // may: the interrupt and the open call expire together.
    let client = ClientOptions {
        input_wait: cfg.limits.approval_ttl,
        ..client
    };
    let per_user: Vec<String> = (cfg.connections.iter())
        .flat_map(|c| c.servers.iter().map(|s| s.spec.name.clone()))
        .collect();
    let shared: Vec<ServerSpec> = (cfg.servers.into_iter())
        .filter(|s| !per_user.contains(&s.name))
        .collect();
    let mut tools = ToolBelt::start(&shared, connection, client.clone())
        .await
        .with_context(|| "cannot start the MCP tool servers")?;
    let connections = match cfg.connections {
        Some(c) => {
            let table = tables.bound().map_err(bind)?;
            let c = Arc::new(crate::agent::connections::Connections::new(
                c,
                store.clone(),
                table,
                client,
            ));
            tools = tools.with_connections(c.clone());
            Some(c)
        }
        None => None,
    };
    let agent = Agent {
        model: cfg.model,
        tools: Arc::new(tools),
        store: store.clone(),
        tables: turn_tables,
        contracts: cfg.contracts,
        roles: cfg.roles,
        terminals: cfg.terminals,
        cards: cfg.cards,
        instructions: cfg.instructions,
        leases: Arc::new(ThreadLeases::new(store.clone(), cfg.turn_lease)),
        limits: cfg.limits,
        licences: cfg.licences,
        parked: Default::default(),
        problems: Default::default(),
        stopping: Default::default(),
        guardrails: cfg.guardrails,
    };
    let identity = crate::http::Identity::new(
        cfg.auth,
        tables.bound().map_err(bind)?,
        store.clone(),
        agent.licences.anonymous(),
    );
    let agent = Arc::new(agent);
    // This process's row in `process_leases`, before recovery reads anyone
    // else's: what it holds in memory is settled by no other process while
    // it renews the row (issue 34 item 10).
    let row =
        crate::store::ProcessRow::start(store.clone(), agent.parked.process(), cfg.turn_lease)
            .await
            .with_context(|| "cannot record this process in the database")?;
    agent.parked.keep_row(row);
    // Confirms in flight when a process died: their status is asked in the
    // background (a tool server may still be starting), never re-sent.
    let recovering = agent.clone();
    tokio::spawn(async move {
        match recovering.recover_approvals().await {
            Ok(0) => {}
            Ok(n) => tracing::warn!(approvals = n, "approvals in flight at a restart recovered"),
            Err(e) => tracing::warn!(error = %e, "recovering approvals in flight"),
        }
    });
    // Tasks a dead process was following: followed again by their stored
    // ids, each in its own background follower, beside the approvals (a
    // status tool that is slow to answer holds up neither).
    let started = crate::store::now_unix_ms();
    let following = agent.clone();
    tokio::spawn(async move {
        let a = &following;
        let recovered = crate::agent::tasks::recover_tasks(
            a.tools.clone(),
            &a.store,
            &a.tables.task,
            a.limits.task_wait,
            started,
        )
        .await;
        match recovered {
            Ok(0) => {}
            Ok(n) => tracing::warn!(tasks = n, "tasks unsettled at a restart followed again"),
            Err(e) => tracing::warn!(error = %e, "recovering unsettled tasks"),
        }
    });
    let ui_stream = tables.bound().map_err(bind)?;
    let agui = tables.bound().map_err(bind)?;
    Ok(AppState {
        agent,
        store,
        ui_stream,
        agui,
        tables: Arc::new(tables),
        identity: Arc::new(identity),
        live: Default::default(),
        drain: Default::default(),
        admin_key: None,
        connections,
    })
}
