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
}

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
}

impl Action {
    /// The call that withdraws the action at the backend on a denial or an
    /// expiry: the cancel tool, or nothing for a held call (nothing was
    /// sent).
    pub fn cancel_call(&self) -> Option<(&str, &Map<String, Value>)> {
        match self.kind {
            ActionKind::Prepared => Some((&self.cancel, &self.cancel_args)),
            ActionKind::Call => None,
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
    /// The decision's calls at the front of `cursor.pending`, in order.
    pub(crate) queued: VecDeque<DecisionCall>,
    /// The call now running, if a decision queued it.
    pub(crate) running: Option<DecisionCall>,
    /// The pending interrupt to insert with the next step.
    pub(crate) write: Option<NewApproval>,
    pub(crate) polls: u32,
}
