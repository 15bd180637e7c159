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

use serde_json::{Map, Value};

use crate::judge::Contract;

use crate::mcp::{
    builtin_connection_table, Answer, ClientOptions, InputRound, McpError, Nested, ServerSpec,
    ServerStatus, TaskId, TaskPoll, TaskPoller, ToolClient, ToolInfo, ToolOutput, ToolTrust,
};
use crate::protocols::connection::Connection;
use crate::protocols::Bound;

/// What a turn needs of its tools: the list the planner is shown, which
/// server offers a tool, the call, and each server's state. The live
/// implementation is [`ToolBelt`] (MCP servers); the loop's unit tests give
/// a script of outputs instead (`agent::turn::script`).
#[async_trait::async_trait]
pub trait Tools: Send + Sync {
    /// Every offered tool, in a stable order.
    fn list(&self) -> Vec<ToolInfo>;
    /// The name of the server that offers `tool`, if one does.
    fn server_of(&self, tool: &str) -> Option<String>;
    /// Calls `tool`; its result, or how the call failed.
    async fn call(&self, tool: &str, args: Map<String, Value>) -> Result<ToolOutput, McpError>;
    /// Calls `tool` (with a 2026-07-28 round's answers), handing up a
    /// question its server asks instead of answering. Tools that never ask
    /// answer as [`Tools::call`] does.
    async fn call_round(
        &self,
        tool: &str,
        args: Map<String, Value>,
        round: Option<InputRound>,
    ) -> Result<Answer, McpError> {
        let _ = round;
        self.call(tool, args).await.map(Answer::Output)
    }
    /// [`Tools::call_round`] on behalf of `who`: a server that authorizes
    /// per user (`auth = "user"`) is called with the thread owner's token,
    /// or holds the call at a Connect card (`agent::connections`). Every
    /// other server answers as `call_round`.
    async fn call_for(
        &self,
        who: &super::connections::OnBehalf,
        tool: &str,
        args: Map<String, Value>,
        round: Option<InputRound>,
    ) -> Result<Answer, McpError> {
        let _ = who;
        self.call_round(tool, args, round).await
    }
    /// Answers the question asked inside an open 2025-11-25 call of `tool`.
    async fn answer_nested(
        &self,
        tool: &str,
        nested: Nested,
        answer: rmcp::model::ElicitResult,
    ) -> Result<Answer, McpError> {
        let _ = (nested, answer);
        Err(McpError::InvalidSpec {
            server: String::new(),
            reason: format!("no open call of \"{tool}\" waits for an answer"),
        })
    }
    /// `tasks/get` on the server of `tool`, for a call it made a task.
    async fn task_get(&self, tool: &str, id: &TaskId) -> Result<TaskPoll, McpError> {
        let _ = id;
        Err(nobody_offers(tool))
    }
    /// `tasks/cancel` on the server of `tool`.
    async fn task_cancel(&self, tool: &str, id: &TaskId) -> Result<(), McpError> {
        let _ = id;
        Err(nobody_offers(tool))
    }
    /// The parameter of `tool` that takes a list of item ids, if any.
    fn ids_param(&self, tool: &str, contract: Option<&Contract>) -> Option<String>;
    /// Each server's name and connection state (`GET /readyz`).
    fn servers(&self) -> Vec<ServerStatus>;
    /// Whether `tool`'s server is trusted and what `tool` declared about
    /// its effects.
    fn trust(&self, tool: &str) -> ToolTrust {
        let _ = tool;
        ToolTrust::default()
    }
}

#[async_trait::async_trait]
impl Tools for ToolBelt {
    fn list(&self) -> Vec<ToolInfo> {
        self.tools()
    }

    fn server_of(&self, tool: &str) -> Option<String> {
        match self.client_for(tool) {
            Some(c) => Some(c.name().to_string()),
            None => self.user_server_of(tool),
        }
    }

    async fn call_for(
        &self,
        who: &super::connections::OnBehalf,
        tool: &str,
        args: Map<String, Value>,
        round: Option<InputRound>,
    ) -> Result<Answer, McpError> {
        match (self.user_server_of(tool), &self.connections) {
            (Some(server), Some(c)) if self.client_for(tool).is_none() => {
                c.call(&server, who, tool, args, round).await
            }
            _ => self.call_round(tool, args, round).await,
        }
    }

    async fn call(&self, tool: &str, args: Map<String, Value>) -> Result<ToolOutput, McpError> {
        match self.client_for(tool) {
            Some(client) => client.call(tool, args).await,
            None => Err(nobody_offers(tool)),
        }
    }

    async fn call_round(
        &self,
        tool: &str,
        args: Map<String, Value>,
        round: Option<InputRound>,
    ) -> Result<Answer, McpError> {
        match self.client_for(tool) {
            Some(client) => client.call_round(tool, args, round).await,
            None => Err(nobody_offers(tool)),
        }
    }

    async fn answer_nested(
        &self,
        tool: &str,
        nested: Nested,
        answer: rmcp::model::ElicitResult,
    ) -> Result<Answer, McpError> {
        match self.client_for(tool) {
            Some(client) => client.answer_nested(tool, nested, answer).await,
            None => Err(nobody_offers(tool)),
        }
    }

    async fn task_get(&self, tool: &str, id: &TaskId) -> Result<TaskPoll, McpError> {
        match self.client_for(tool) {
            Some(client) => client.task_get(id).await,
            None => Err(nobody_offers(tool)),
        }
    }

    async fn task_cancel(&self, tool: &str, id: &TaskId) -> Result<(), McpError> {
        match self.client_for(tool) {
            Some(client) => client.task_cancel(id).await,
            None => Err(nobody_offers(tool)),
        }
    }

    fn ids_param(&self, tool: &str, contract: Option<&Contract>) -> Option<String> {
        ToolBelt::ids_param(self, tool, contract)
    }

    fn servers(&self) -> Vec<ServerStatus> {
        ToolBelt::servers(self)
    }

    fn trust(&self, tool: &str) -> ToolTrust {
        if let Some(c) = self.client_for(tool) {
            return c.trust(tool);
        }
        match (self.user_server_of(tool), &self.connections) {
            (Some(server), Some(c)) => c.trust(&server, tool),
            _ => ToolTrust::default(),
        }
    }
}

/// A call of a tool no connected server offers.
fn nobody_offers(tool: &str) -> McpError {
    McpError::InvalidSpec {
        server: String::new(),
        reason: format!("no server offers the tool \"{tool}\""),
    }
}

pub struct ToolBelt {
    clients: Vec<Arc<ToolClient>>,
    /// The servers that authorize per user: not connected at start, each
    /// call made with its thread owner's token.
    connections: Option<Arc<super::connections::Connections>>,
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
        let belt = ToolBelt {
            clients,
            connections: None,
        };
        if failure.is_none() {
            failure = belt.duplicate();
        }
        if let Some(e) = failure {
            belt.shutdown().await;
            return Err(e);
        }
        Ok(belt)
    }

    /// The servers that authorize per user, called through `connections`.
    pub fn with_connections(mut self, connections: Arc<super::connections::Connections>) -> Self {
        self.connections = Some(connections);
        self
    }

    /// The per-user server that offers `tool`, if one does.
    fn user_server_of(&self, tool: &str) -> Option<String> {
        self.connections.as_ref()?.server_of(tool)
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
        let per_user = self.connections.iter().flat_map(|c| c.tools());
        for tool in self.clients.iter().flat_map(|c| c.tools()).chain(per_user) {
            if seen.insert(tool.name.clone()) {
                out.push(tool);
            }
        }
        out
    }

    /// The client serving `tool`, if any server offers it (see
    /// [`ToolClient::offers`]); the first in configuration order.
    pub fn client_for(&self, tool: &str) -> Option<&Arc<ToolClient>> {
        self.clients.iter().find(|c| c.offers(tool))
    }

    /// The input parameter of `tool` that takes a list of item ids, for
    /// narrowing by id: the contract's `scope_ids_param`, else an array
    /// property of its input schema named `ids` or `…_ids`.
    pub fn ids_param(&self, tool: &str, contract: Option<&Contract>) -> Option<String> {
        if let Some(p) = contract.and_then(|c| c.scope_ids_param.clone()) {
            return Some(p);
        }
        let info = self
            .client_for(tool)?
            .tools()
            .into_iter()
            .find(|t| t.name == tool)?;
        detect_ids_param(&info.input_schema)
    }

    /// Every server, in configuration order.
    pub fn clients(&self) -> &[Arc<ToolClient>] {
        &self.clients
    }

    /// Each server's name and connection state (`GET /readyz`).
    pub fn servers(&self) -> Vec<ServerStatus> {
        self.clients.iter().map(|c| c.status()).collect()
    }

    /// Does every server's connection carry calls now?
    pub fn ready(&self) -> bool {
        self.clients.iter().all(|c| c.carries_calls())
    }

    /// Closes every connection and stops every retry.
    pub async fn shutdown(&self) {
        futures::future::join_all(self.clients.iter().map(|c| c.shutdown())).await;
    }
}

/// Whether a property schema admits an array: `"type": "array"`, a type
/// list holding `"array"` (`["array", "null"]`), or an `anyOf`/`oneOf`
/// branch that does (the Python SDK's `list[str] | None`).
fn is_array_schema(p: &Value) -> bool {
    let typed = match p.get("type") {
        Some(Value::String(t)) => t == "array",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "array"),
        _ => false,
    };
    typed
        || ["anyOf", "oneOf"].iter().any(|k| {
            p.get(*k)
                .and_then(Value::as_array)
                .is_some_and(|branches| branches.iter().any(is_array_schema))
        })
}

/// An array property named `ids`, `…_ids` or `…Ids` in a JSON Schema.
fn detect_ids_param(schema: &Value) -> Option<String> {
    let props = schema.get("properties")?.as_object()?;
    let mut names: Vec<&String> = props
        .iter()
        .filter(|(name, p)| {
            let named = name.as_str() == "ids" || name.ends_with("_ids") || name.ends_with("Ids");
            named && is_array_schema(p)
        })
        .map(|(name, _)| name)
        .collect();
    names.sort();
    match names.as_slice() {
        [one] => Some((*one).clone()),
        // Two id lists: which one scopes the population is not ours to guess.
        _ => None,
    }
}

/// The tasks of `tool`'s server, as a follower asks them.
pub struct ToolTasks<'a> {
    pub tools: &'a dyn Tools,
    pub tool: &'a str,
}

#[async_trait::async_trait]
impl TaskPoller for ToolTasks<'_> {
    async fn task_get(&self, id: &TaskId) -> Result<TaskPoll, McpError> {
        self.tools.task_get(self.tool, id).await
    }
    async fn task_cancel(&self, id: &TaskId) -> Result<(), McpError> {
        self.tools.task_cancel(self.tool, id).await
    }
}

/// Calls whose server asked the user something inside them (2025-11-25),
/// open in this process's memory until the answer, by interrupt id.
/// Dropping one (an expiry, a new message) answers its server `cancel`; a
/// process that ends drops them all, and the questions can no longer be
/// answered (`input_lost`).
///
/// Each holds them under this process's id (random, one per process): it
/// is stored with each question, and the process renews its row in
/// `process_leases` while it runs, so another process settles a question
/// only once its holder is gone (issue 34 item 10).
pub struct Parked {
    process: String,
    open: std::sync::Mutex<std::collections::HashMap<String, Nested>>,
    /// The process's row, kept while these calls can be held.
    row: std::sync::OnceLock<crate::store::ProcessRow>,
}

impl Default for Parked {
    fn default() -> Self {
        Parked {
            process: uuid::Uuid::new_v4().to_string(),
            open: Default::default(),
            row: Default::default(),
        }
    }
}

impl Parked {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Nested>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The id of the process that holds these calls.
    pub fn process(&self) -> &str {
        &self.process
    }

    /// Keeps the process's row (renewed while it is kept) as long as these
    /// calls are: dropped with them.
    pub fn keep_row(&self, row: crate::store::ProcessRow) {
        let _ = self.row.set(row);
    }

    /// Keeps `nested` open for the interrupt `id`. Calls whose server
    /// stopped waiting meanwhile (the input wait ran out: it was answered
    /// `cancel`) are let go here, so the map holds live questions only.
    pub fn park(&self, id: &str, nested: Nested) {
        let mut parked = self.lock();
        parked.retain(|_, n| n.waiting());
        parked.insert(id.to_string(), nested);
    }

    /// The open call of interrupt `id`, taken out to be answered.
    pub fn take(&self, id: &str) -> Option<Nested> {
        self.lock().remove(id)
    }

    /// Whether interrupt `id`'s call is open here.
    pub fn holds(&self, id: &str) -> bool {
        self.lock().contains_key(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn id_list_parameters_are_detected_in_each_sdks_spelling() {
        // The TypeScript SDK (zod): a plain array.
        let ts = json!({"type": "object", "properties": {"floor": {"type": "integer"}, "uids": {"type": "array"}, "photo_ids": {"type": "array", "items": {"type": "string"}}}});
        assert_eq!(detect_ids_param(&ts).as_deref(), Some("photo_ids"));
        // The Python SDK (pydantic): `list[str] | None`.
        let py = json!({"type": "object", "properties": {"photo_ids": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}], "default": null}}});
        assert_eq!(detect_ids_param(&py).as_deref(), Some("photo_ids"));
        let nullable = json!({"properties": {"ids": {"type": ["array", "null"]}}});
        assert_eq!(detect_ids_param(&nullable).as_deref(), Some("ids"));
        // Not a list, or two candidates: nothing is guessed.
        let scalar = json!({"properties": {"ids": {"type": "string"}}});
        assert_eq!(detect_ids_param(&scalar), None);
        let two = json!({"properties": {"a_ids": {"type": "array"}, "b_ids": {"type": "array"}}});
        assert_eq!(detect_ids_param(&two), None);
    }
}
