//! The turn loop: planner → tool calls → results → responder, every frame
//! fired through the `frame` table before it is written.
//!
//! **Architecture invariant:** no model output reaches a citation. Counts,
//! grades and absence come from `judge`; the model only proposes calls and
//! writes sentences.

pub mod connections;
pub mod context;
pub mod frames;
pub mod guardrails;
pub mod history;
pub mod problems;
pub mod records;
pub mod recovery;
pub mod spans;
pub mod stopping;
pub mod tables;
pub mod tasks;
pub mod thread_lease;
pub mod tools;
pub mod turn;

pub use crate::judge::tiers::Access;
pub use context::{BoundedContext, ContextLimits};
pub use frames::{FrameWriter, OutFrame};
pub use guardrails::Guardrails;
pub use problems::{FieldProblem, FieldProblems};
pub use stopping::Stopping;
pub use thread_lease::{ThreadLease, ThreadLeases};
pub use tools::{ToolBelt, Tools};
pub use turn::{
    Agent, DecideError, Decided, Limits, StatusPolls, TurnRequest, TurnTables, UserDecision,
};
