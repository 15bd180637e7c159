//! A stored thread as the tests read it: `GET /v1/threads/{id}` (and the
//! store's machine rows) deserialised into types, so a test asserts on
//! `Record::Card { citation, .. }` and `turn.machine("turn").state`, never on
//! `v["messages"][4]["body"]["citation"]` or `turns[0].machines.turn.trace`
//! looked up by key. A renamed or retyped field fails the read, naming the
//! record, instead of comparing `null` with something.
//!
//! The records are the agent's (`turnstile::agent::records::Record`, which
//! is written, never read back whole): the wire types where a record carries
//! a frame, JSON values where it carries the judge's internals.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};
use turnstile::fsm::Snapshot;
use turnstile::store::Role;
use turnstile::wire;

/// `GET /v1/threads/{id}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThreadView {
    pub thread: ThreadInfo,
    pub messages: Vec<Message>,
    /// Each turn's machines, in the order the turns began.
    pub turns: Vec<TurnView>,
    /// Each interrupt's approval state.
    pub approvals: Vec<ApprovalView>,
    /// The licence gate's decisions on this thread's calls, in order.
    pub licence_audit: Vec<LicenceAuditView>,
    /// Each call a server made a task, and how it settled.
    pub tasks: Vec<TaskView>,
}

/// One call a server made a task, as the thread shows it (never its id).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskView {
    pub call_id: String,
    pub turn_id: String,
    pub tool: String,
    pub state: String,
    pub outcome: Option<Value>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// One licence decision (`tables/licence.ron`) as the thread shows it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LicenceAuditView {
    pub turn_id: String,
    pub tool: String,
    pub required_tier: Option<String>,
    pub held_tiers: Vec<String>,
    pub event: String,
    pub row_id: String,
    pub allowed: bool,
    pub created_at: i64,
}

/// One interrupt as the thread shows it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalView {
    pub interrupt_id: String,
    pub turn_id: String,
    /// The approval machine's state (`Awaiting`, `Completed`, `Denied`, …).
    pub state: String,
    pub expires_at: i64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThreadInfo {
    pub id: String,
    pub owner: Option<String>,
    pub created_at: i64,
}

/// One stored message: its record is the typed body.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Message {
    pub seq: i64,
    pub turn_id: String,
    pub role: Role,
    pub body: Record,
    pub created_at: i64,
}

/// One turn's machines by name (`turn`, `frame`, `narrowing#1`, …).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnView {
    pub turn_id: String,
    pub machines: BTreeMap<String, Snapshot>,
}

impl TurnView {
    /// The machine `name` of this turn; fails the test if it has none.
    #[track_caller]
    pub fn machine(&self, name: &str) -> &Snapshot {
        self.machines.get(name).unwrap_or_else(|| {
            panic!(
                "turn {} has no `{name}` machine (it has {:?})",
                self.turn_id,
                self.machines.keys().collect::<Vec<_>>()
            )
        })
    }
}

/// A stored message body, by its `kind`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    User {
        text: String,
        #[serde(default)]
        context: Option<Context>,
    },
    Plan(wire::Plan),
    Call(wire::ToolCall),
    Result {
        #[serde(flatten)]
        frame: wire::ToolResult,
        args: Map<String, Value>,
        #[serde(default)]
        result: Option<Value>,
        #[serde(default)]
        digest: Option<Value>,
        #[serde(default)]
        scope_released: bool,
    },
    Card {
        citation: wire::Citation,
        #[serde(default)]
        population: Option<Value>,
        #[serde(default)]
        narrowing: Option<Snapshot>,
        #[serde(default)]
        scope_released: bool,
        digest: Value,
    },
    Figure {
        figure: wire::Figure,
        digest: Value,
    },
    Text {
        text: String,
        #[serde(default)]
        replaced: Option<wire::Replaced>,
        /// The URLs of `text` the capability validator accepted.
        #[serde(default)]
        capabilities: Vec<wire::CapabilityLink>,
    },
    /// A capability delivered by code, with the export machine that
    /// delivered it.
    Delivery {
        delivery: Value,
        #[serde(default)]
        machine: Option<Snapshot>,
    },
    Answer {
        text: String,
        anchors: Vec<Value>,
        #[serde(default)]
        population: Option<Value>,
        #[serde(default)]
        narrowing: Option<Snapshot>,
        #[serde(default)]
        scope_released: bool,
    },
    Error(wire::Error),
    /// The one shape of a cut: a turn whose client left (no fields) and a
    /// turn a restart closed (`cause: "restart"`, the rows each machine
    /// took) are both this.
    Cut(Cut),
    /// The approval request, as the interrupt frame showed it.
    Interrupt(wire::Interrupt),
    /// The licence gate's decisions on a round's calls (committed with the
    /// plan frame).
    Licence {
        decisions: Vec<Value>,
    },
    /// A long call's task still ran, as the progress frame showed it.
    Progress(wire::Progress),
    /// A task that ended after its turn did.
    TaskSettled {
        call_id: String,
        tool: String,
        state: String,
        text: String,
        #[serde(default)]
        result: Option<Value>,
    },
    /// The suspended stream's `done`: the turn waits for this decision.
    Awaiting {
        interrupt_id: String,
    },
    /// The decision the resumed stream starts with.
    Decision {
        interrupt_id: String,
        decision: String,
        state: String,
    },
    /// An interrupt a new message withdrew, stored with that message, and
    /// what became of its cancel.
    Withdrawn {
        interrupt_id: String,
        tool: String,
        state: String,
        cancel: Value,
    },
}

/// The host context a user record keeps, as bounded (the agent's
/// `BoundedContext`).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Context {
    #[serde(default)]
    pub project: Option<String>,
    #[serde(default)]
    pub floor: Option<String>,
    pub selected_items: Vec<String>,
    pub visible_items: Vec<String>,
    /// Fields that were cut, or lists that arrived at their bound.
    pub truncated: Vec<String>,
}

/// Why and where a turn was cut.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cut {
    /// `None`: the client left mid-turn. `Some("restart")`: a start-up
    /// closed the turn a dead process left unfinished.
    #[serde(default)]
    pub cause: Option<String>,
    /// The `turn` machine's closing step (restart only).
    #[serde(default)]
    pub turn: Option<Outcome>,
    /// The `frame` machine's closing step (restart only).
    #[serde(default)]
    pub frame: Option<Outcome>,
}

/// A machine's closing step: the row it took and where it went, or the
/// forbidden row that kept it where it was, or why it could not be read.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outcome {
    pub from: String,
    #[serde(default)]
    pub row_id: Option<String>,
    #[serde(default)]
    pub to: Option<String>,
    #[serde(default)]
    pub forbidden: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
}

/// A record's kind, for comparing a thread's records in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordKind {
    User,
    Plan,
    Call,
    Result,
    Card,
    Figure,
    Text,
    Answer,
    Error,
    Cut,
    Interrupt,
    Awaiting,
    Decision,
    Delivery,
    Licence,
    Progress,
    TaskSettled,
    Withdrawn,
}

impl Record {
    /// Reads one stored body; fails the test, naming the body, if it is not
    /// a record of this shape.
    #[track_caller]
    pub fn read(body: &Value) -> Record {
        serde_json::from_value(body.clone())
            .unwrap_or_else(|e| panic!("not a stored record: {e}: {body}"))
    }

    pub fn kind(&self) -> RecordKind {
        match self {
            Record::User { .. } => RecordKind::User,
            Record::Plan(_) => RecordKind::Plan,
            Record::Call(_) => RecordKind::Call,
            Record::Result { .. } => RecordKind::Result,
            Record::Card { .. } => RecordKind::Card,
            Record::Figure { .. } => RecordKind::Figure,
            Record::Text { .. } => RecordKind::Text,
            Record::Answer { .. } => RecordKind::Answer,
            Record::Error(_) => RecordKind::Error,
            Record::Cut(_) => RecordKind::Cut,
            Record::Interrupt(_) => RecordKind::Interrupt,
            Record::Awaiting { .. } => RecordKind::Awaiting,
            Record::Decision { .. } => RecordKind::Decision,
            Record::Delivery { .. } => RecordKind::Delivery,
            Record::Licence { .. } => RecordKind::Licence,
            Record::Progress(_) => RecordKind::Progress,
            Record::TaskSettled { .. } => RecordKind::TaskSettled,
            Record::Withdrawn { .. } => RecordKind::Withdrawn,
        }
    }

    /// The text of a `text` or `answer` record.
    pub fn text(&self) -> Option<&str> {
        match self {
            Record::Text { text, .. } | Record::Answer { text, .. } => Some(text),
            _ => None,
        }
    }
}

impl ThreadView {
    /// Reads `GET /v1/threads/{id}`'s body; fails the test, naming the
    /// body, if it does not have this shape.
    #[track_caller]
    pub fn read(body: &Value) -> ThreadView {
        serde_json::from_value(body.clone())
            .unwrap_or_else(|e| panic!("not a thread of this shape: {e}: {body}"))
    }

    /// Every record, in order.
    pub fn records(&self) -> Vec<&Record> {
        self.messages.iter().map(|m| &m.body).collect()
    }

    /// The records of one turn, in order.
    pub fn records_of(&self, turn: &str) -> Vec<&Record> {
        self.messages
            .iter()
            .filter(|m| m.turn_id == turn)
            .map(|m| &m.body)
            .collect()
    }

    /// The kind of every record, in order.
    pub fn kinds(&self) -> Vec<RecordKind> {
        self.messages.iter().map(|m| m.body.kind()).collect()
    }

    /// The turn `turn_id`; fails the test if the thread has no such turn.
    #[track_caller]
    pub fn turn(&self, turn_id: &str) -> &TurnView {
        self.turns
            .iter()
            .find(|t| t.turn_id == turn_id)
            .unwrap_or_else(|| panic!("the thread has no turn {turn_id}"))
    }

    /// Every card, in order.
    pub fn cards(&self) -> Vec<&wire::Citation> {
        cards(&self.records())
    }

    /// The text of every `text` record, joined: every sentence the client
    /// was sent.
    pub fn text(&self) -> String {
        text(&self.records())
    }

    /// The text of the first stored answer.
    pub fn answer_text(&self) -> Option<String> {
        self.records().into_iter().find_map(|r| match r {
            Record::Answer { text, .. } => Some(text.clone()),
            _ => None,
        })
    }

    /// Whether a record of `kind` is stored.
    pub fn has(&self, kind: RecordKind) -> bool {
        self.messages.iter().any(|m| m.body.kind() == kind)
    }

    /// How many records of `kind` are stored.
    pub fn count(&self, kind: RecordKind) -> usize {
        self.messages
            .iter()
            .filter(|m| m.body.kind() == kind)
            .count()
    }

    /// The last `answer` record's anchors.
    pub fn last_anchors(&self) -> Vec<Value> {
        match self.messages.last().map(|m| &m.body) {
            Some(Record::Answer { anchors, .. }) => anchors.clone(),
            _ => Vec::new(),
        }
    }
}

/// The cards among `records`, in order.
pub fn cards<'a>(records: &[&'a Record]) -> Vec<&'a wire::Citation> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Card { citation, .. } => Some(citation),
            _ => None,
        })
        .collect()
}

/// The text of the `text` records among `records`, joined.
pub fn text(records: &[&Record]) -> String {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// How many of `records` are of `kind`.
pub fn count(records: &[&Record], kind: RecordKind) -> usize {
    records.iter().filter(|r| r.kind() == kind).count()
}

/// A stored machine snapshot read as the FSM's own type.
#[track_caller]
pub fn snapshot(v: &Value) -> Snapshot {
    serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("not a machine snapshot: {e}: {v}"))
}

/// `Store::machine`, typed.
pub async fn machine(
    store: &turnstile::store::Store,
    thread: &str,
    turn: &str,
    name: &str,
) -> Option<Snapshot> {
    store
        .machine(thread, turn, name)
        .await
        .expect("the store reads the machine")
        .map(|v| snapshot(&v))
}
