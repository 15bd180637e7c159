//! Model adapters behind one trait: the scripted planner/responder (the
//! embedded default, deterministic) and an OpenAI-compatible streaming
//! adapter ([`openai`]).
//!
//! **Architecture invariant:** a model only proposes tool calls and writes
//! sentences. Nothing a model returns becomes a count, a citation or a
//! permission decision.

pub mod moderation;
pub mod openai;
pub mod prompt;

use futures::stream::BoxStream;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::judge::digest::Digest;
use crate::judge::Anchor;
use crate::mcp::ToolInfo;

pub use openai::{ApiKey, OpenAi, OpenAiConfig, OpenAiError};
pub use prompt::Prompt;

#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("model request failed: {0}")]
    Request(String),
    #[error("model stream broke: {0}")]
    Stream(String),
    /// The model asked for tools after it had begun its answer: the text
    /// already shown stands, the calls are not run (turn row
    /// `calls-after-text-not-run`).
    #[error("the model asked for {} after it began answering", tools.join(", "))]
    CallsAfterText { tools: Vec<String> },
}

/// What the planner sees.
#[derive(Debug, Clone)]
pub struct PlanRequest {
    pub prompt: Prompt,
    pub user_text: String,
    pub tools: Vec<ToolInfo>,
    /// The bounded host context, as the agent prepared it.
    pub context: Option<Value>,
    /// The thread's earlier turns, oldest first, within the history budget.
    pub history: Vec<HistoryTurn>,
    /// This turn's earlier steps: each call and the digest of its result.
    /// Empty on the first step.
    pub steps: Vec<Vec<CallRecord>>,
}

/// One earlier turn of the thread as the planner sees it: what the user
/// said and what was shown (the answer's text and one line per card), with
/// capability URLs redacted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryTurn {
    pub user: String,
    pub answer: String,
    pub cards: Vec<String>,
}

/// A call made earlier in this turn and what came of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallRecord {
    /// The id the model gave the call (an OpenAI `tool_call_id`), or ours.
    pub id: String,
    pub tool: String,
    pub args: Map<String, Value>,
    pub digest: Digest,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlannedCall {
    /// The model's own id for the call, if it gives one (OpenAI does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
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
    /// The user wants more of the listing the previous answer showed
    /// ("show more"). Which listing, and where it stopped, come from turn
    /// state: the model never sees or writes a cursor.
    #[serde(default)]
    pub continues_previous: bool,
    /// Host-context fields the request refers to ("this floor" → `floor`).
    /// The model leaves them out of its calls: code fills them in from the
    /// host context, or asks the user when the context lacks one.
    #[serde(default)]
    pub from_context: Vec<String>,
    /// The user asks for a download link an earlier turn delivered ("show
    /// me the link again"). Code shows it from the stored delivery while it
    /// lives (tables/export.ron); the model never writes the link.
    #[serde(default)]
    pub shows_link: bool,
}

/// What the responder sees: the user's words and the anchors code derived.
#[derive(Debug, Clone)]
pub struct RespondRequest {
    pub prompt: Prompt,
    pub user_text: String,
    pub anchors: Vec<Anchor>,
    /// The digests of this turn's results, so the answer can describe what
    /// was found; every count still comes from the anchors.
    pub digests: Vec<Digest>,
}

pub type TextStream = BoxStream<'static, Result<String, LlmError>>;

/// What one planning round came to: calls (or markers) for code to act
/// on, or the answer itself, streaming.
pub enum Reply {
    Plan(Plan),
    /// The model answered in this round: the stream is the turn's answer,
    /// and goes through the narration guard like any other. It may end
    /// with [`LlmError::CallsAfterText`].
    Answer(TextStream),
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reply::Plan(p) => f.debug_tuple("Plan").field(p).finish(),
            Reply::Answer(_) => f.write_str("Answer(..)"),
        }
    }
}

impl Plan {
    /// Nothing for code to do: no call and no marker. Such a round's
    /// answer is the turn's answer.
    pub fn is_answer(&self) -> bool {
        self.calls.is_empty()
            && !self.shows_link
            && !self.narrows_previous
            && !self.continues_previous
            && self.from_context.is_empty()
    }
}

#[async_trait::async_trait]
pub trait Model: Send + Sync {
    /// `gen_ai.provider.name` of its requests' spans (`openai` for the
    /// OpenAI-compatible adapter).
    fn provider(&self) -> &str {
        "turnstile"
    }
    fn name(&self) -> &str;
    async fn plan(&self, req: &PlanRequest) -> Result<Plan, LlmError>;
    /// Streams the answer as text deltas.
    async fn respond(&self, req: &RespondRequest) -> Result<TextStream, LlmError>;
    /// One planning round that may answer (issue 19 §5): a turn of N tool
    /// steps asks N+1 times. `req` carries the directives as its last
    /// blocks; `answer` is the same turn as the responder would see it.
    ///
    /// The default asks twice (`plan`, then `respond` when the plan is an
    /// answer): right for a model whose planner cannot write the answer.
    /// The OpenAI adapter and the scripted model answer in one request.
    async fn step(&self, req: &PlanRequest, answer: &RespondRequest) -> Result<Reply, LlmError> {
        let plan = self.plan(req).await?;
        if !plan.is_answer() {
            return Ok(Reply::Plan(plan));
        }
        Ok(Reply::Answer(self.respond(answer).await?))
    }

    /// Requests a round that answers costs: 1 for a model that answers in
    /// its planning round, 2 for the default [`step`](Self::step). Turns
    /// count model requests by it.
    fn requests_to_answer(&self) -> u64 {
        2
    }
}
