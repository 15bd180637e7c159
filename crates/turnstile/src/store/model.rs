//! Row types of the store.

use std::fmt;
use std::str::FromStr;

/// Which database a [`Store`](super::Store) talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// A SQLite file (or `sqlite::memory:`).
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
}

/// Who wrote a message. Stored as its lowercase name.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The human (or client) side.
    User,
    /// The model's answer.
    Assistant,
    /// A tool result.
    Tool,
    /// A system prompt or notice.
    System,
}

impl Role {
    /// All roles, in declaration order.
    pub const ALL: [Role; 4] = [Role::User, Role::Assistant, Role::Tool, Role::System];

    /// The lowercase name stored in the database (same as the serde name).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::System => "system",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The name is not one of `user`, `assistant`, `tool`, `system`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown role `{0}`")]
pub struct UnknownRole(pub String);

impl FromStr for Role {
    type Err = UnknownRole;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| UnknownRole(s.to_owned()))
    }
}

/// A message to append in a [`Store::step`](super::Store::step).
#[derive(Clone, Debug, PartialEq)]
pub struct NewMessage {
    /// Who wrote it.
    pub role: Role,
    /// The message itself; stored as JSON text and returned unchanged.
    pub body: serde_json::Value,
    /// The thread's pointer this message moves to itself, if any.
    pub mark: Option<ThreadPointer>,
}

impl NewMessage {
    /// Shorthand for a message that moves no pointer.
    pub fn new(role: Role, body: serde_json::Value) -> Self {
        NewMessage {
            role,
            body,
            mark: None,
        }
    }
}

/// A pointer a thread keeps to one of its messages, so a turn reads that
/// message instead of scanning the thread (migration 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadPointer {
    /// The last record that decides what a narrowing follow-up narrows.
    Population,
    /// The last delivered capability.
    Delivery,
}

/// The messages a thread's pointers name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pointed {
    /// `false` for a thread from before the pointers: its population is
    /// found by a scan.
    pub population_known: bool,
    pub population: Option<Message>,
    pub delivery: Option<Message>,
}

/// A stored message.
#[derive(serde::Serialize, Clone, Debug, PartialEq)]
pub struct Message {
    /// Position in the thread: 1, 2, 3, … without gaps.
    pub seq: i64,
    /// The turn whose step appended it.
    pub turn_id: String,
    /// Who wrote it.
    pub role: Role,
    /// The body exactly as given to `step`.
    pub body: serde_json::Value,
    /// When it was appended, unix milliseconds.
    pub created_at: i64,
}

/// A stored thread.
#[derive(serde::Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Thread {
    /// UUID v4, lowercase hyphenated.
    pub id: String,
    /// Free-form owner (e.g. a user or API key id), if any.
    pub owner: Option<String>,
    /// When it was created, unix milliseconds.
    pub created_at: i64,
}

/// A pending interrupt, as the step that shows it inserts it.
#[derive(Debug, Clone)]
pub struct NewApproval {
    pub interrupt_id: String,
    /// The approval machine's state (`Awaiting`).
    pub state: String,
    /// Its snapshot, as JSON.
    pub machine: serde_json::Value,
    /// What code needs to settle it, as JSON.
    pub action: serde_json::Value,
    /// Unix milliseconds.
    pub expires_at: i64,
}

/// An approval as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredApproval {
    pub interrupt_id: String,
    pub thread_id: String,
    pub turn_id: String,
    pub state: String,
    pub machine: serde_json::Value,
    pub action: serde_json::Value,
    pub expires_at: i64,
    pub created_at: i64,
    pub updated_at: i64,
}
