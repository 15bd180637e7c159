//! The tool belt: the configured MCP servers and which server offers which
//! tool.
//!
//! Each server is a [`ToolClient`] whose connection is a machine of
//! `tables/connection.ron`: a server that is down at start, or goes down
//! later, does not stop the process. Its tools stay listed (the last
//! `tools/list`, or the tools the configuration names if it never answered
//! one), and a call of one fails at once as `server_down` while the client
//! retries in the background.

use std::collections::HashSet;
use std::sync::Arc;

use crate::mcp::{
    builtin_connection_table, ClientOptions, McpError, ServerSpec, ServerStatus, ToolClient,
    ToolInfo,
};
use crate::protocols::connection::{Connection, ConnectionState};
use crate::protocols::Bound;

pub struct ToolBelt {
    clients: Vec<Arc<ToolClient>>,
}

impl ToolBelt {
    /// [`start`](Self::start) with the compiled-in connection table and
    /// default client options.
    pub async fn connect(specs: &[ServerSpec]) -> Result<ToolBelt, McpError> {
        Self::start(specs, builtin_connection_table()?, ClientOptions::default()).await
    }

    /// Starts every server's connection (concurrently) and waits for each
    /// first attempt. A server that is down is not an error: it is retried
    /// in the background. Errors: a spec that can never work, or a tool name
    /// offered by two servers that are both up (the planner could not say
    /// which one it means).
    pub async fn start(
        specs: &[ServerSpec],
        table: Bound<Connection>,
        options: ClientOptions,
    ) -> Result<ToolBelt, McpError> {
        let started = futures::future::join_all(
            specs
                .iter()
                .map(|spec| ToolClient::start(spec, options.clone(), table.clone())),
        )
        .await;
        let mut clients = Vec::new();
        let mut failure = None;
        for client in started {
            match client {
                Ok(c) => clients.push(Arc::new(c)),
                Err(e) => failure = failure.or(Some(e)),
            }
        }
        let belt = ToolBelt { clients };
        if failure.is_none() {
            failure = belt.duplicate();
        }
        if let Some(e) = failure {
            belt.shutdown().await;
            return Err(e);
        }
        Ok(belt)
    }

    /// A tool listed by two servers.
    fn duplicate(&self) -> Option<McpError> {
        let mut seen = HashSet::new();
        for client in self.clients.iter().filter(|c| c.has_listed()) {
            for tool in client.tools() {
                if !seen.insert(tool.name.clone()) {
                    return Some(McpError::InvalidSpec {
                        server: client.name().to_string(),
                        reason: format!("tool \"{}\" is offered by two servers", tool.name),
                    });
                }
            }
        }
        None
    }

    /// Every server's published tools, in server order. A name a later
    /// server also lists (it came up after start) stays the earlier one's.
    pub fn tools(&self) -> Vec<ToolInfo> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for client in &self.clients {
            for tool in client.tools() {
                if seen.insert(tool.name.clone()) {
                    out.push(tool);
                }
            }
        }
        out
    }

    /// The client serving `tool`, if any server offers it (see
    /// [`ToolClient::offers`]); the first in configuration order.
    pub fn client_for(&self, tool: &str) -> Option<&Arc<ToolClient>> {
        self.clients.iter().find(|c| c.offers(tool))
    }

    /// Every server, in configuration order.
    pub fn clients(&self) -> &[Arc<ToolClient>] {
        &self.clients
    }

    /// Each server's name and connection state (`GET /readyz`).
    pub fn servers(&self) -> Vec<ServerStatus> {
        self.clients.iter().map(|c| c.status()).collect()
    }

    /// Is every server's connection `Ready`?
    pub fn ready(&self) -> bool {
        self.clients
            .iter()
            .all(|c| c.state() == ConnectionState::Ready)
    }

    /// Closes every connection and stops every retry.
    pub async fn shutdown(&self) {
        futures::future::join_all(self.clients.iter().map(|c| c.shutdown())).await;
    }
}
