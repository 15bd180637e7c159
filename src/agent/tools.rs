//! The tool belt: connected MCP servers and which server offers which tool.

use std::collections::HashMap;
use std::sync::Arc;

use crate::mcp::{McpError, ServerSpec, ToolClient, ToolInfo};

pub struct ToolBelt {
    clients: Vec<Arc<ToolClient>>,
    tools: Vec<ToolInfo>,
    index: HashMap<String, usize>,
}

impl ToolBelt {
    /// Connects to every server and lists its tools. A tool name offered by
    /// two servers is an error: the planner could not say which one it means.
    pub async fn connect(specs: &[ServerSpec]) -> Result<ToolBelt, McpError> {
        let mut belt = ToolBelt {
            clients: Vec::new(),
            tools: Vec::new(),
            index: HashMap::new(),
        };
        for spec in specs {
            let client = Arc::new(ToolClient::connect(spec).await?);
            for tool in client.list_tools().await? {
                if belt.index.contains_key(&tool.name) {
                    return Err(McpError::InvalidSpec {
                        server: spec.name.clone(),
                        reason: format!("tool \"{}\" is offered by two servers", tool.name),
                    });
                }
                belt.index.insert(tool.name.clone(), belt.clients.len());
                belt.tools.push(tool);
            }
            belt.clients.push(client);
        }
        Ok(belt)
    }

    pub fn tools(&self) -> &[ToolInfo] {
        &self.tools
    }

    /// The client serving `tool`, if any server offers it.
    pub fn client_for(&self, tool: &str) -> Option<&Arc<ToolClient>> {
        self.index.get(tool).map(|i| &self.clients[*i])
    }
}
