//! What a turn holds of the approval protocol: the action it suspended at
//! or settles, the calls a decision queued, and a decision that won.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::protocols::approval::{Approval, ApprovalEffect, ApprovalState};
use crate::protocols::Typed;
use crate::store::{NewApproval, StoredApproval};
use crate::wire;

/// What is held: an action a prepare tool named (settled by its confirm,
/// cancel and status tools), or a planned call held before it was sent
/// (it is its own confirm, and nothing is sent on a denial).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    #[default]
    Prepared,
    Call,
    /// A call whose server asked the user something (issue 22 §3): the
    /// answer is its confirm; nothing is cancelled at the backend.
    Input,
}

/// What a question of a tool's server needs to be answered, stored with
/// its interrupt. The `requestState` is here and nowhere a frame, a log
/// line or a model reads.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InputHeld {
    /// The server that asked.
    pub server: String,
    /// What it asked, as the interrupt shows it (an answer is validated
    /// against these).
    pub requests: Vec<wire::InputAsked>,
    /// 2026-07-28: the server's state, echoed back once with the answers.
    #[serde(default)]
    pub request_state: Option<crate::mcp::RequestState>,
    /// 2025-11-25: the call is open in this process's memory, waiting.
    #[serde(default)]
    pub nested: bool,
    /// 2025-11-25: the id of the process whose memory holds the open call
    /// (`None` in a question stored before issue 34: its holder is
    /// unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    /// Questions this call asked so far (a server that keeps asking is
    /// refused after [`MAX_INPUT_ROUNDS`]).
    #[serde(default)]
    pub rounds: u32,
}

impl InputHeld {
    /// turnstile's own Connect card (a per-user server's sign-in), not a
    /// server's question.
    pub fn is_connect(&self) -> bool {
        self.requests.iter().any(|r| r.mode == "connect")
    }
}

/// The most questions one call may ask in a row.
pub const MAX_INPUT_ROUNDS: u32 = 3;

/// What code needs to settle a held action, stored with its interrupt
/// (`approvals.action`): the tools and their exact arguments.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Action {
    #[serde(default)]
    pub kind: ActionKind,
    /// The user message of the turn that prepared it.
    pub user_text: String,
    pub prepare: String,
    pub prepare_args: Map<String, Value>,
    pub action_id: u64,
    pub confirm: String,
    pub confirm_args: Map<String, Value>,
    pub cancel: String,
    pub cancel_args: Map<String, Value>,
    pub status: Option<String>,
    pub status_args: Map<String, Value>,
    /// Call ids the suspended stream used, so the resumed one goes on.
    pub calls_before: usize,
    pub step: u32,
    /// The interrupt frame as it was shown.
    pub interrupt: wire::Interrupt,
    /// The question, when a tool's server asked one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<InputHeld>,
}

impl Action {
    /// A call held before it is answered: it is its own confirm, and it has
    /// no cancel (a denial or a withdrawn question sends nothing further).
    pub(crate) fn of_call(
        kind: ActionKind,
        user_text: &str,
        tool: &str,
        args: &Map<String, Value>,
        step: u32,
        interrupt: wire::Interrupt,
    ) -> Action {
        Action {
            kind,
            user_text: user_text.to_string(),
            prepare: tool.to_string(),
            prepare_args: args.clone(),
            action_id: 0,
            confirm: tool.to_string(),
            confirm_args: args.clone(),
            cancel: String::new(),
            cancel_args: Map::new(),
            status: None,
            status_args: Map::new(),
            calls_before: 0,
            step,
            interrupt,
            input: None,
        }
    }

    /// The call that withdraws the action at the backend on a denial or an
    /// expiry: the cancel tool, or nothing for a held call (nothing was
    /// sent).
    pub fn cancel_call(&self) -> Option<(&str, &Map<String, Value>)> {
        match self.kind {
            ActionKind::Prepared => Some((&self.cancel, &self.cancel_args)),
            ActionKind::Call | ActionKind::Input => None,
        }
    }
}

/// What the user decided on an interrupt: an approval's approve or deny,
/// or the answer to a server's question (accept with the answers by
/// request key, decline, or cancel).
#[derive(Debug, Clone, PartialEq)]
pub enum UserDecision {
    Approve,
    Deny,
    Answer {
        /// `accept`, `decline` or `cancel`.
        action: &'static str,
        answers: Map<String, Value>,
    },
}

impl UserDecision {
    /// As the user said it.
    pub fn word(&self) -> &'static str {
        match self {
            UserDecision::Approve => "approve",
            UserDecision::Deny => "deny",
            UserDecision::Answer { action, .. } => action,
        }
    }
}

/// A decision that won: the turn resumes with its effect.
pub struct Decided {
    pub approval: StoredApproval,
    pub action: Action,
    pub machine: Typed<Approval>,
    /// `approve` or `deny`, as the user said it.
    pub decision: &'static str,
    /// The effect the table gave the decision: `confirm` or `cancel`.
    pub effect: ApprovalEffect,
    /// An answer to a question: what is sent (2026-07-28: each request's
    /// response; 2025-11-25: the open call's answer). Never stored, never
    /// shown to a model.
    pub answer: Option<crate::mcp::InputRound>,
}

/// A call queued by a decision, not by the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DecisionCall {
    Confirm,
    Cancel,
    Status,
}

/// The action this turn holds or settles.
pub(crate) struct Held {
    pub(crate) interrupt_id: String,
    pub(crate) machine: Typed<Approval>,
    /// Its state as stored (`None`: not stored yet).
    pub(crate) stored: Option<ApprovalState>,
    pub(crate) action: Action,
}

/// The turn's part in the approval protocol.
#[derive(Default)]
pub(crate) struct Approvals {
    pub(crate) held: Option<Held>,
    /// The current step plans a prepare tool: a confirm in it is
    /// `model_confirm_same_step`.
    pub(crate) step_prepares: bool,
    /// A Connect card's answer, as the user (or the sign-in's callback)
    /// gave it: `accept`, `decline` or `cancel`.
    pub(crate) connect_answer: Option<String>,
    /// The decision's calls at the front of `cursor.pending`, in order.
    pub(crate) queued: VecDeque<DecisionCall>,
    /// The call now running, if a decision queued it.
    pub(crate) running: Option<DecisionCall>,
    /// The pending interrupt to insert with the next step.
    pub(crate) write: Option<NewApproval>,
    pub(crate) polls: u32,
    /// The answer the decided call carries, taken by the call it goes out
    /// with.
    pub(crate) answer: Option<crate::mcp::InputRound>,
}
