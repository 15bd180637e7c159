//! One serde type per frame kind. The kinds are the `frame` table's events;
//! [`Frame::kind`] is the SSE `event:` field and the JSON body is `data:`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `start`: the stream's first frame names the turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Start {
    pub turn_id: String,
    pub thread_id: String,
}

/// One planned call as announced in a `plan` frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanStep {
    pub tool: String,
    pub args: Map<String, Value>,
}

/// `plan`: what the model planned for one step of the loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The loop's step, from 1.
    pub step: u32,
    pub steps: Vec<PlanStep>,
    pub note: String,
    /// The narrowing scope applied to this step's calls, from turn state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Value>,
}

/// `tool_call`: a call about to go out (`server` is absent for a call that
/// is refused before it reaches any server).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub call_id: String,
    pub tool: String,
    #[serde(default)]
    pub server: Option<String>,
    pub args: Map<String, Value>,
}

/// `tool_result`: a text-free summary of what came back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub call_id: String,
    pub tool: String,
    pub ok: bool,
    pub summary: String,
    /// The result's shape (block count, kinds, `_meta` key names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<String>,
    /// A narrowing conflict that kept the call from running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict: Option<Value>,
    /// The licence gate's refusal that kept the call from being sent:
    /// `{table, row_id, lang, message}`, the message in code's copy
    /// (`judge::refusal`), never model prose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<Value>,
}

/// How a stitched listing ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StitchInfo {
    pub end: String,
    pub pages: usize,
    #[serde(default)]
    pub anomaly: Option<Value>,
}

/// `citation`: the card. Every number on it comes from the judge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Citation {
    pub source: String,
    pub items: Vec<Value>,
    pub displayed: u64,
    pub total: Option<u64>,
    pub total_is_lower_bound: bool,
    pub has_more: bool,
    /// `EXACT`, `LOWER_BOUND`, `SHOWN` or `UNKNOWN`.
    pub grade: String,
    pub complete: bool,
    pub narrowed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stitch: Option<StitchInfo>,
    /// The listing this card shows; a continuation ("show more") carries
    /// the id of the card it continues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listing: Option<String>,
    /// On a continuation: how many items earlier cards of this listing
    /// showed. `items` are only the new page(s), which follow them;
    /// `displayed` counts all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shown_before: Option<u64>,
    /// The listing can be continued from its stored cursor ("show more"
    /// is offered): more exists, a cursor was kept, and the ids shown still
    /// fit the check a next page is held to.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub more: bool,
    /// Each item's deep link, aligned with `items` (issue 38 §3): what a
    /// click on it asks the host app to show. Empty when the tool maps no
    /// link or no item has one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<Option<DeepLink>>,
}

/// A cited item as an app-state transition (seed 003 §4.11): the app
/// scope, the BIM axes where known and the camera where the tool gives
/// it. Never a URL: the host decides what showing it means.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeepLink {
    pub scope: LinkScope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub axes: Option<Axes>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub camera: Option<Camera>,
}

/// The app scope of a deep link: every part optional, each as the item
/// named it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkScope {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facility: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub surface: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub panorama: Option<String>,
}

impl LinkScope {
    pub fn is_empty(&self) -> bool {
        self.facility.is_none()
            && self.project.is_none()
            && self.surface.is_none()
            && self.panorama.is_none()
    }
}

/// BIM grid axes, as the item names them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Axes {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub y: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub z: Option<String>,
}

/// Where the viewer's camera stands, what it looks at, and its direction:
/// three vectors of three numbers, all or none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Camera {
    pub position: [f64; 3],
    pub look_at: [f64; 3],
    pub direction: [f64; 3],
}

/// `figure`: a single-value aggregate (a COUNT, a MAX), carried with its
/// grade so the number is on screen as data, not only in prose.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// The tool that answered.
    pub source: String,
    /// The column or key the value came under (`COUNT(*)`, `n`).
    pub label: String,
    pub value: Value,
    /// `EXACT` when the server is held to accounting; `SHOWN` when it sends
    /// none (the value is the server's word, not a checked count).
    pub grade: String,
    pub accounted: bool,
    /// The arguments of the call that produced it.
    pub query: Map<String, Value>,
}

/// `progress`: a call the server made a task still runs (issue 22 §4).
/// Sent when what the server says of it changes; the call's `tool_result`
/// follows when the task ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// The `tool_call` this is about.
    pub call_id: String,
    pub tool: String,
    /// `working`, or `cancelling` once cancel was asked (the wait ran out,
    /// or the task asked for input, which turnstile does not answer in a
    /// task).
    pub status: String,
    /// The server's own status message, cleaned; its words, not ours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `tasks/get` requests made so far.
    pub polls: u32,
    /// Since the call went out.
    pub elapsed_ms: u64,
}

/// `delta`: a piece of the answer's text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delta {
    pub text: String,
    /// The model's sentence here contradicted the judge and was replaced by
    /// the code's own (`text`); why, by the `narration` table's row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced: Option<Replaced>,
    /// The URLs in `text` that `judge::capability` accepted as a terminal
    /// flow's capability: only these become a download button in the page.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<CapabilityLink>,
    /// The URLs in `text` of an origin the operator allows links to
    /// (`http.link_origins`): plain links in the page. Any other URL is
    /// shown as inert text (issue 33).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<String>,
}

/// A URL the capability validator accepted, as the page may offer it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapabilityLink {
    /// Exactly the string that was checked.
    pub url: String,
    /// The button's name (the flow's `label`); never the URL or its token.
    pub label: String,
    /// When the capability stops working, as its tool said (RFC 3339), if
    /// it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

/// Why a sentence was replaced (by the narration guard, or by a safety
/// check of `tables/guardrail.ron`). The sentence itself is neither shown
/// nor stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replaced {
    /// The row: a forbidden row of `tables/narration.ron`, or the row of
    /// `tables/guardrail.ron` that blocked, redacted or refused.
    pub row_id: String,
    pub why: String,
    /// `count`, `attribute`, `absence`, `completeness`, …; `guardrail` for
    /// a safety check's.
    pub claim: String,
    /// The table whose row it is, when not `narration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// The safety check that found something (`secrets`, `pii`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
}

/// `interrupt`: the turn waits for a human decision on a prepared action.
/// `POST /v1/threads/{id}/resume` with its `interrupt_id` and one of its
/// `choices` continues the turn in a new stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interrupt {
    /// Minted by the server; the only handle a decision may name.
    pub interrupt_id: String,
    /// The tool that runs, once, on approve, and its exact arguments.
    pub tool: String,
    pub args: serde_json::Map<String, serde_json::Value>,
    /// What was prepared: the tool that prepared it, with the arguments it
    /// was called with, and the backend's action id (none for a call that
    /// itself waits for approval).
    pub action: ActionPreview,
    /// One line for the card, written by code in the user's terms ("Reserve
    /// seat 12 at 15:00?"): it asks, and never says that anything happened.
    pub summary: String,
    /// The line under it that names the tools: what prepared the action,
    /// what runs on approval, what a denial does. Empty in interrupts stored
    /// before it existed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// `["approve", "deny"]`.
    pub choices: Vec<String>,
    /// Unix milliseconds; after it the interrupt is denied by default.
    pub expires_at: i64,
    /// The tool's server asks the user for input (issue 22 §3): a form to
    /// fill or a URL to open. Its `choices` are then `["accept",
    /// "decline", "cancel"]`, and an `accept` carries the answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<InputPrompt>,
}

/// What a tool's server asks the user, as the interrupt shows it. The
/// server's opaque `requestState` is never part of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputPrompt {
    /// The server that asks (our name for it).
    pub server: String,
    /// Each thing it asks, in the server's order.
    pub requests: Vec<InputAsked>,
}

/// One input request: a form (`schema`) or a URL to open (`url`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputAsked {
    /// The server's key for the request; an answer names it.
    pub key: String,
    /// `"form"` or `"url"`.
    pub mode: String,
    /// The server's own words: shown as the server's, never as ours.
    pub message: String,
    /// Form: the requested schema (an object of primitive properties).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<serde_json::Value>,
    /// URL: the full URL, never fetched by turnstile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// URL: its host, to be shown highlighted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// URL: the host has a punycode (`xn--`) label, which may imitate
    /// another domain: warn.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub punycode: bool,
}

impl Interrupt {
    /// An interrupt about one call, held before it is sent or answered: the
    /// call is what runs, and its own preview (no action id).
    pub fn of_call(
        interrupt_id: &str,
        tool: &str,
        args: &serde_json::Map<String, serde_json::Value>,
        summary: String,
        choices: &[&str],
        expires_at: i64,
    ) -> Interrupt {
        Interrupt {
            interrupt_id: interrupt_id.to_string(),
            tool: tool.to_string(),
            args: args.clone(),
            action: ActionPreview {
                tool: tool.to_string(),
                args: args.clone(),
                action_id: None,
                prepared: serde_json::Map::new(),
            },
            summary,
            detail: String::new(),
            choices: choices.iter().map(|c| c.to_string()).collect(),
            expires_at,
            input: None,
        }
    }
}

/// The prepared action an interrupt asks about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionPreview {
    pub tool: String,
    pub args: serde_json::Map<String, serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_id: Option<u64>,
    /// The human fields of the prepare's result (`judge::card`: scalars,
    /// nested ones flattened as `data.seat`, bounded, never a secret, an
    /// opaque token or a URL that carries a query). Empty for a call held
    /// for itself, and in interrupts stored before it existed.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub prepared: serde_json::Map<String, serde_json::Value>,
}

/// `done`: the turn finished (or, after an interrupt, waits).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Done {
    pub turn_id: String,
}

/// `error`: the turn failed. A failure decided by a table names the table
/// and the row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Error {
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_id: Option<String>,
}

/// One frame of a response stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    Start(Start),
    Plan(Plan),
    ToolCall(ToolCall),
    ToolResult(ToolResult),
    Citation(Citation),
    Figure(Figure),
    Delta(Delta),
    Interrupt(Interrupt),
    Done(Done),
    Error(Error),
    Progress(Progress),
}

/// A frame that could not be read: an unknown kind or a body that does not
/// fit the kind's type.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("unknown frame kind `{0}`")]
    UnknownKind(String),
    #[error("`{kind}` frame body: {source}")]
    Body {
        kind: String,
        source: serde_json::Error,
    },
}

impl Frame {
    /// The SSE `event:` field; the same spelling as the `frame` table's event.
    pub fn kind(&self) -> &'static str {
        match self {
            Frame::Start(_) => "start",
            Frame::Plan(_) => "plan",
            Frame::ToolCall(_) => "tool_call",
            Frame::ToolResult(_) => "tool_result",
            Frame::Citation(_) => "citation",
            Frame::Figure(_) => "figure",
            Frame::Delta(_) => "delta",
            Frame::Interrupt(_) => "interrupt",
            Frame::Done(_) => "done",
            Frame::Error(_) => "error",
            Frame::Progress(_) => "progress",
        }
    }

    /// The JSON body (`data:`).
    pub fn data(&self) -> Value {
        let v = match self {
            Frame::Start(f) => serde_json::to_value(f),
            Frame::Plan(f) => serde_json::to_value(f),
            Frame::ToolCall(f) => serde_json::to_value(f),
            Frame::ToolResult(f) => serde_json::to_value(f),
            Frame::Citation(f) => serde_json::to_value(f),
            Frame::Figure(f) => serde_json::to_value(f),
            Frame::Delta(f) => serde_json::to_value(f),
            Frame::Interrupt(f) => serde_json::to_value(f),
            Frame::Done(f) => serde_json::to_value(f),
            Frame::Error(f) => serde_json::to_value(f),
            Frame::Progress(f) => serde_json::to_value(f),
        };
        // These types hold only strings, numbers, maps and JSON values:
        // serialising them cannot fail.
        v.unwrap_or(Value::Null)
    }

    /// Reads one frame from its SSE `event:` and `data:` fields.
    pub fn parse(kind: &str, data: &str) -> Result<Frame, FrameError> {
        fn body<T: serde::de::DeserializeOwned>(kind: &str, data: &str) -> Result<T, FrameError> {
            serde_json::from_str(data).map_err(|source| FrameError::Body {
                kind: kind.to_string(),
                source,
            })
        }
        Ok(match kind {
            "start" => Frame::Start(body(kind, data)?),
            "plan" => Frame::Plan(body(kind, data)?),
            "tool_call" => Frame::ToolCall(body(kind, data)?),
            "tool_result" => Frame::ToolResult(body(kind, data)?),
            "citation" => Frame::Citation(body(kind, data)?),
            "figure" => Frame::Figure(body(kind, data)?),
            "progress" => Frame::Progress(body(kind, data)?),
            "delta" => Frame::Delta(body(kind, data)?),
            "interrupt" => Frame::Interrupt(body(kind, data)?),
            "done" => Frame::Done(body(kind, data)?),
            "error" => Frame::Error(body(kind, data)?),
            other => return Err(FrameError::UnknownKind(other.to_string())),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_its_sse_fields() {
        let frames = vec![
            Frame::Start(Start {
                turn_id: "t".into(),
                thread_id: "th".into(),
            }),
            Frame::Delta(Delta {
                text: "hi".into(),
                replaced: None,
                capabilities: vec![],
                links: vec![],
            }),
            Frame::Error(Error {
                message: "m".into(),
                table: Some("turn".into()),
                row_id: Some("r".into()),
                ..Error::default()
            }),
        ];
        for f in frames {
            let back = Frame::parse(f.kind(), &f.data().to_string()).unwrap();
            assert_eq!(back, f);
        }
        assert!(matches!(
            Frame::parse("nope", "{}"),
            Err(FrameError::UnknownKind(_))
        ));
        assert!(matches!(
            Frame::parse("delta", "{}"),
            Err(FrameError::Body { .. })
        ));
    }

    /// An interrupt stored before cards spoke the user's terms (no
    /// `detail`, no `action.prepared`) still reads, and a new one keeps both.
    #[test]
    fn an_interrupt_stored_without_detail_or_prepared_fields_still_reads() {
        let old = r#"{"interrupt_id":"i","tool":"confirm_action","args":{"actionId":1},
            "action":{"tool":"prepare_seat_reservation","args":{"seat":"12"},"action_id":1},
            "summary":"Approve prepare_seat_reservation #1","choices":["approve","deny"],
            "expires_at":5}"#;
        let Frame::Interrupt(i) = Frame::parse("interrupt", old).unwrap() else {
            panic!("not an interrupt");
        };
        assert!(i.detail.is_empty() && i.action.prepared.is_empty());
        let mut new = i.clone();
        new.detail = "prepare_seat_reservation prepared action #1".into();
        new.action.prepared.insert("time".into(), "15:00".into());
        let f = Frame::Interrupt(new);
        assert_eq!(Frame::parse(f.kind(), &f.data().to_string()).unwrap(), f);
    }
}
