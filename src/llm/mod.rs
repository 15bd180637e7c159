//! Model adapters behind one trait: the scripted planner/responder (the
//! embedded default, deterministic) and an OpenAI-compatible streaming
//! adapter ([`openai`]).
//!
//! **Architecture invariant:** a model only proposes tool calls and writes
//! sentences. Nothing a model returns becomes a count, a citation or a
//! permission decision.

pub mod openai;
pub mod prompt;
pub mod scripted;

use futures::stream::BoxStream;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::judge::Anchor;
use crate::mcp::ToolInfo;

pub use openai::{ApiKey, OpenAi, OpenAiConfig, OpenAiError};
pub use prompt::Prompt;
pub use scripted::Scripted;

#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("model request failed: {0}")]
    Request(String),
    #[error("model stream broke: {0}")]
    Stream(String),
}

/// What the planner sees.
#[derive(Debug, Clone)]
pub struct PlanRequest {
    pub prompt: Prompt,
    pub user_text: String,
    pub tools: Vec<ToolInfo>,
    /// The bounded host context, as the agent prepared it.
    pub context: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlannedCall {
    pub tool: String,
    pub args: Map<String, Value>,
    /// Why the model's arguments could not be used (not a JSON object, …);
    /// such a call is answered with a structured tool error, never run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invalid_args: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub calls: Vec<PlannedCall>,
    /// A short note for the plan frame.
    pub note: String,
    /// The user narrows the population the previous answer showed ("only
    /// those from April"). The scope itself comes from turn state.
    #[serde(default)]
    pub narrows_previous: bool,
}

/// What the responder sees: the user's words and the anchors code derived.
#[derive(Debug, Clone)]
pub struct RespondRequest {
    pub prompt: Prompt,
    pub user_text: String,
    pub anchors: Vec<Anchor>,
}

pub type TextStream = BoxStream<'static, Result<String, LlmError>>;

#[async_trait::async_trait]
pub trait Model: Send + Sync {
    fn name(&self) -> &str;
    async fn plan(&self, req: &PlanRequest) -> Result<Plan, LlmError>;
    /// Streams the answer as text deltas.
    async fn respond(&self, req: &RespondRequest) -> Result<TextStream, LlmError>;
}
