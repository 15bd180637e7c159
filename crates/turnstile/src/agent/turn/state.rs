//! A turn's state in four named parts, its part in the export protocol,
//! and a call's outcome waiting to be judged.

use std::collections::VecDeque;

use crate::agent::context::BoundedContext;
use crate::fsm::Snapshot;
use crate::judge::digest::Digest;
use crate::judge::narrowing::{Gate, Scope};
use crate::judge::result::Reading;
use crate::judge::stitch::Stitched;
use crate::judge::Anchor;
use crate::llm::{CallRecord, HistoryTurn, PlannedCall};
use crate::mcp::ToolOutput;
use crate::wire;

/// One call's outcome, waiting to be judged.
pub(super) enum Outcome {
    /// Not run (unknown tool, bad arguments, a narrowing refusal): its
    /// result frame is out already.
    Refused {
        call: CallRecord,
        anchor: Option<Anchor>,
        /// A disjoint narrowing: zero inside the scope, decided by the table.
        gate: Option<Gate>,
    },
    /// The call failed or its answer is not trusted.
    Failed { call: CallRecord, anchor: Anchor },
    /// A result to judge.
    Returned {
        call: CallRecord,
        scoped: Option<Box<Scope>>,
        gate: Gate,
        first: Box<ToolOutput>,
        /// The first page as read with the tool's contract.
        reading: Box<Reading>,
        stitched: Option<Box<Stitched>>,
    },
}

/// What the turn found and will say: the judge's anchors and where each
/// came from, the digests the models see, the cards shown, the answer.
#[derive(Default)]
pub(super) struct Evidence {
    pub(super) anchors: Vec<Anchor>,
    /// Where each anchor came from ("step 1, call 2"), for the responder.
    pub(super) origins: Vec<String>,
    pub(super) digests: Vec<Digest>,
    /// Each citation card shown: whether it was the whole population.
    pub(super) cards: Vec<bool>,
    pub(super) answer: String,
    /// The error frame the turn ends with, when it fails.
    pub(super) failure: Option<wire::Error>,
}

/// Where the loop stands: the planning round, its calls, the outcome
/// waiting to be judged.
#[derive(Default)]
pub(super) struct Cursor {
    pub(super) step: u32,
    /// Tool calls sent (pages included): the next call id.
    pub(super) calls: usize,
    /// Calls run in the current step.
    pub(super) calls_this_step: usize,
    /// Planned calls taken so far in this turn.
    pub(super) planned_calls: usize,
    pub(super) pending: VecDeque<PlannedCall>,
    pub(super) outcome: Option<Outcome>,
    /// The answer a planning round began, until the `stream` effect takes
    /// it (turn row `answer-in-the-planning-round`).
    pub(super) answer: Option<crate::llm::TextStream>,
}

/// What ran: each step's call records, and the listing machines
/// (`narrowing#N`, `paging#N`) to persist with the next step.
#[derive(Default)]
pub(super) struct Ledger {
    pub(super) steps: Vec<Vec<CallRecord>>,
    pub(super) current: Vec<CallRecord>,
    pub(super) dirty: Vec<(String, Snapshot)>,
    pub(super) listing_machines: usize,
    /// How many rows of the frame and turn machines' traces are stored: a
    /// step stores only the rows after them.
    pub(super) committed: (usize, usize),
    /// Frames held for the next commit (ADR 0031): fired, not yet stored
    /// or sent; their records wait with them.
    pub(super) held: Vec<wire::Frame>,
    pub(super) held_records: Vec<crate::store::NewMessage>,
    /// The frame machine before the first frame held since the last
    /// commit: where a failed commit puts it back.
    pub(super) held_from: Option<crate::fsm::Checkpoint>,
}

/// What the turn knows of its thread and the user's screen: the bounded
/// host context, the earlier turns, the population the previous answer
/// showed, and this turn's narrowing of it.
#[derive(Default)]
pub(super) struct ThreadScope {
    pub(super) context: Option<BoundedContext>,
    pub(super) history: Vec<HistoryTurn>,
    /// The previous answer's population and the narrowing machine that
    /// judged it, as stored.
    pub(super) previous: Option<(Scope, Option<Snapshot>)>,
    /// The turn's narrowing scope, set by the first step that narrows.
    pub(super) scope: Option<Scope>,
    /// The step that first narrowed. Whether the scope applies to the
    /// population's tool in a later step is the narrowing table's
    /// `narrow_held` row (as shipped, it does).
    pub(super) scope_step: Option<u32>,
    pub(super) population: Option<(Scope, Snapshot)>,
    pub(super) released: bool,
}
