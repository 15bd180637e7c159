//! What a turn stores: one typed record per message body. Each record is
//! committed before the frame that shows it is sent, so the stored thread
//! holds at least everything a client was sent (ADR 0010).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::judge::digest::Digest;
use crate::judge::narrowing::Scope;
use crate::judge::Anchor;
use crate::mcp::ToolOutput;
use crate::store::{NewMessage, Role, ThreadPointer};
use crate::wire;

/// What code delivered: stored with the frame that shows the link, so a
/// follow-up can show it again while it lives. The URL stays in the
/// user's own thread; prompts, logs and metrics never carry it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Delivery {
    /// The confirm tool that gave the capability.
    pub tool: String,
    pub url: String,
    pub label: String,
    pub expires_at: Option<String>,
    pub files: Option<u64>,
    pub bytes: Option<u64>,
}

/// A message body as written. `kind` tells the records apart.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record<'a> {
    User {
        text: &'a str,
        context: Option<Value>,
    },
    Plan(&'a wire::Plan),
    Call(&'a wire::ToolCall),
    Result {
        #[serde(flatten)]
        frame: &'a wire::ToolResult,
        args: &'a Map<String, Value>,
        result: Option<&'a ToolOutput>,
        /// What the models saw of a failed call; a result that is judged
        /// has its digest on its card.
        digest: Option<&'a Digest>,
        /// A refused narrowing released the scope: committed with the
        /// result that shows it, so a cut turn cannot bring the scope back.
        scope_released: bool,
    },
    Card {
        citation: &'a wire::Citation,
        /// The population this card showed, for a narrowing follow-up.
        population: Option<&'a Scope>,
        /// The narrowing machine that judged it (table hash included).
        narrowing: Option<&'a crate::fsm::Snapshot>,
        /// Zero inside the scope: the scope is released from here on.
        scope_released: bool,
        /// What the models saw of this result.
        digest: &'a Digest,
    },
    /// A single-value aggregate's figure.
    Figure {
        figure: &'a wire::Figure,
        digest: &'a Digest,
    },
    /// A batch of the answer's text, committed before it is sent. A
    /// sentence the narration guard replaced is stored as its replacement,
    /// with why; the model's sentence is not stored.
    Text {
        text: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        replaced: Option<&'a wire::Replaced>,
        /// The URLs in `text` the capability validator accepted, as the
        /// delta frame carried them.
        #[serde(skip_serializing_if = "<[_]>::is_empty")]
        capabilities: &'a [wire::CapabilityLink],
        /// The URLs in `text` of an allowed link origin.
        #[serde(skip_serializing_if = "<[_]>::is_empty")]
        links: &'a [String],
    },
    /// A capability delivered by code (tables/export.ron), committed with
    /// the delta that shows it: a follow-up shows it again from here while
    /// it lives. Never read into a prompt.
    Delivery {
        delivery: &'a Delivery,
        /// The export machine that delivered it.
        machine: Option<&'a crate::fsm::Snapshot>,
    },
    /// The whole answer at `done`.
    Answer {
        text: &'a str,
        anchors: &'a [Anchor],
        population: Option<&'a Scope>,
        narrowing: Option<&'a crate::fsm::Snapshot>,
        scope_released: bool,
    },
    Error(&'a wire::Error),
    /// The client went away: the answer, if any, was cut here.
    Cut,
    /// The approval request, as the interrupt frame shows it.
    Interrupt(&'a wire::Interrupt),
    /// The turn waits for the decision on this interrupt (its `done`).
    Awaiting {
        interrupt_id: &'a str,
    },
    /// The licence gate's decisions on a planning round's calls, one per
    /// row fired (each call's tier; then, in a round with a refused call,
    /// `round_refused` for each call let through), committed with the plan
    /// frame (`tables/licence.ron`): the thread's audit rows. A tool
    /// record: never read into a prompt.
    Licence {
        decisions: &'a [crate::store::LicenceAudit],
    },
    /// A long call's task still runs, as the progress frame shows it.
    Progress(&'a wire::Progress),
    /// A task that ended after its turn did (the client left, or the
    /// process restarted): what became of it, appended to its turn. An
    /// assistant record: later turns' history shows it.
    TaskSettled {
        call_id: &'a str,
        tool: &'a str,
        /// The task machine's settled state.
        state: &'a str,
        /// What the user is told, in code's words.
        text: &'a str,
        result: Option<&'a ToolOutput>,
    },
    /// The human's decision, which the resumed stream starts with.
    Decision {
        interrupt_id: &'a str,
        decision: &'a str,
        /// The approval machine's state after it (`Confirming`, `Denied`).
        state: &'a str,
    },
    /// An interrupt a new message withdrew (`new-turn-withdraws`), stored
    /// with that message: the thread shows why its card went away, and
    /// what became of the cancel. A tool record: never read into a prompt.
    Withdrawn {
        interrupt_id: &'a str,
        tool: &'a str,
        /// The approval machine's state after it (`Withdrawn`).
        state: &'a str,
        cancel: &'a CancelSent,
    },
}

impl Record<'_> {
    pub fn message(&self) -> NewMessage {
        let role = match self {
            Record::User { .. } | Record::Decision { .. } => Role::User,
            Record::Call(_)
            | Record::Result { .. }
            | Record::Licence { .. }
            | Record::Progress(_)
            | Record::Withdrawn { .. } => Role::Tool,
            _ => Role::Assistant,
        };
        // The records `last_population` and `last_delivery` stop at: the
        // thread points at the last of each, so a turn reads one message.
        let mark = match self {
            Record::Answer { .. }
            | Record::Card {
                population: Some(_),
                ..
            }
            | Record::Card {
                scope_released: true,
                ..
            }
            | Record::Result {
                scope_released: true,
                ..
            } => Some(ThreadPointer::Population),
            Record::Delivery { .. } => Some(ThreadPointer::Delivery),
            _ => None,
        };
        NewMessage {
            role,
            body: serde_json::to_value(self).unwrap_or(Value::Null),
            mark,
        }
    }
}

/// A stored body read back, with only what later turns need.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Stored {
    User {
        text: String,
    },
    Card {
        citation: Box<wire::Citation>,
        #[serde(default)]
        population: Option<Scope>,
        #[serde(default)]
        narrowing: Option<crate::fsm::Snapshot>,
        #[serde(default)]
        scope_released: bool,
    },
    Result {
        #[serde(default)]
        scope_released: bool,
    },
    Text {
        text: String,
    },
    Answer {
        text: String,
        #[serde(default)]
        population: Option<Scope>,
        #[serde(default)]
        narrowing: Option<crate::fsm::Snapshot>,
        #[serde(default)]
        scope_released: bool,
    },
    Error {
        message: String,
    },
    Delivery {
        delivery: Delivery,
        #[serde(default)]
        machine: Option<crate::fsm::Snapshot>,
    },
    Cut,
    TaskSettled {
        tool: String,
        text: String,
    },
    #[serde(other)]
    Other,
}

impl Stored {
    pub fn read(body: &Value) -> Stored {
        if body.get("kind").is_none() {
            return Self::legacy(body);
        }
        // Read from the borrowed value: a card's items are not copied twice.
        <Stored as serde::Deserialize>::deserialize(body).unwrap_or(Stored::Other)
    }

    /// A body stored before records had a `kind` (one user message, one
    /// tool message per result, one assistant message per answer), so
    /// older threads keep their history and their population.
    fn legacy(body: &Value) -> Stored {
        let text = || body.get("text").and_then(Value::as_str).map(str::to_string);
        if body.get("citations").is_some() {
            return Stored::Answer {
                text: text().unwrap_or_default(),
                population: body
                    .get("population")
                    .and_then(|p| serde_json::from_value(p.clone()).ok()),
                narrowing: None,
                scope_released: body.get("scope_released") == Some(&Value::Bool(true)),
            };
        }
        if body.get("context").is_some() {
            if let Some(text) = text() {
                return Stored::User { text };
            }
        }
        match body
            .get("error")
            .and_then(|e| e.get("message"))
            .and_then(Value::as_str)
        {
            Some(m) if body.get("call_id").is_none() => Stored::Error {
                message: m.to_string(),
            },
            _ => Stored::Other,
        }
    }
}

/// The population a narrowing follow-up may narrow: the last answer's (or,
/// for a turn cut after its card, the last card's), unless it was released.
/// With it, the narrowing machine that judged it.
pub fn last_population(bodies: &[Value]) -> Option<(Scope, Option<crate::fsm::Snapshot>)> {
    for body in bodies.iter().rev() {
        match Stored::read(body) {
            Stored::Answer {
                scope_released: true,
                ..
            } => return None,
            Stored::Answer {
                population,
                narrowing,
                ..
            } => return population.map(|p| (p, narrowing)),
            Stored::Card {
                scope_released: true,
                ..
            }
            | Stored::Result {
                scope_released: true,
            } => return None,
            Stored::Card {
                population: Some(p),
                narrowing,
                ..
            } => return Some((p, narrowing)),
            _ => {}
        }
    }
    None
}

/// The thread's last delivery, with the export machine that delivered it.
pub fn last_delivery(bodies: &[Value]) -> Option<(Delivery, crate::fsm::Snapshot)> {
    bodies.iter().rev().find_map(|b| match Stored::read(b) {
        Stored::Delivery {
            delivery,
            machine: Some(m),
        } => Some((delivery, m)),
        _ => None,
    })
}

/// A card in one line, for the planner's history.
pub fn card_line(c: &wire::Citation) -> String {
    let total = match (c.total, c.total_is_lower_bound) {
        (Some(t), true) => format!(" of at least {t}"),
        (Some(t), false) => format!(" of exactly {t}"),
        (None, _) => String::new(),
    };
    format!("{}: {} shown{total} [{}]", c.source, c.displayed, c.grade)
}

/// What became of the cancel a withdrawal or an expiry sent.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum CancelSent {
    /// Nothing to cancel at the backend (a held call, a question).
    Nothing,
    Cancelled {
        tool: String,
    },
    /// The cancel tool answered with an error: the action may still be
    /// pending at the backend.
    Refused {
        tool: String,
        reason: Option<String>,
    },
    /// No answer came (the server was unreachable, the call timed out).
    Failed {
        tool: String,
    },
}
