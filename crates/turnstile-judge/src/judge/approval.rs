//! Approval verdicts (issue 17, seed 004): which role a tool plays, the
//! action id a prepare result names, and what a confirm's or a status
//! tool's answer says. Each is read through the one reading seam
//! ([`ToolOutput`]): a result given as structured content, as a JSON text
//! block, as content blocks printed into a string, or as a Python literal
//! yields the same action id.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::fsm::Violation;
use crate::protocols::approval::ApprovalEvent;
use crate::protocols::hold::{Hold, HoldEffect, HoldEvent};
use crate::protocols::{Bound, TypedStep};
use turnstile_output::Block;
use turnstile_output::{pyliteral, ToolOutput};

/// The role a tool plays in the approval protocol, from configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolRole {
    /// Prepares a backend action and names it by id; the turn suspends at
    /// a positive id.
    Prepare(Prepare),
    /// Confirms a prepared action. Never run from a model's plan.
    Confirm,
    /// Cancels a prepared action (a denial's effect).
    Cancel,
    /// Says what became of a confirmed action.
    Status,
    /// Needs the user's approval of the exact call before it is sent.
    BeforeCall,
    /// `approval = "none"`: the operator's word that the tool's calls run
    /// without approval, whatever its annotations declare.
    Exempt,
}

/// Why a planned call waits for the user's approval of itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldReason {
    /// `approval = "before-call"` in the configuration.
    Configured,
    /// The tool declares `destructiveHint: true`.
    Destructive,
    /// The tool's server is untrusted: whatever its annotations declare,
    /// they decide nothing, and MCP's defaults (`readOnlyHint: false`,
    /// `destructiveHint: true`) stand.
    Untrusted,
}

impl HoldReason {
    /// Why, in the interrupt's words.
    pub fn why(self) -> &'static str {
        match self {
            HoldReason::Configured => "the configuration holds every call of this tool",
            HoldReason::Destructive => {
                "the tool declares that it is destructive, or declares annotations without saying it is read-only"
            }
            HoldReason::Untrusted => {
                "the tool's server is untrusted, so what it declares about its effects decides nothing"
            }
        }
    }
}

/// What is known about a planned call when the approval policy
/// (`tables/hold.ron`) is asked whether it waits for approval of itself.
#[derive(Debug, Clone, Copy)]
pub struct HoldFacts<'a> {
    /// An approval decision sends it (approve, cancel, status).
    pub decision_call: bool,
    /// It is an export flow's confirm.
    pub terminal_confirm: bool,
    pub role: Option<&'a ToolRole>,
    pub trust: &'a turnstile_output::ToolTrust,
}

impl HoldFacts<'_> {
    /// Every fact true of the call, in no particular order: which one
    /// decides is the hold table's `precedence`. A trusted server's
    /// annotations are read with MCP's defaults: a tool that declares any
    /// is destructive unless it says `destructiveHint: false`, or says
    /// `readOnlyHint: true` and nothing about `destructiveHint`.
    pub fn events(&self) -> Vec<HoldEvent> {
        let mut found = Vec::with_capacity(4);
        found.extend(self.decision_call.then_some(HoldEvent::DecisionCall));
        found.extend(self.terminal_confirm.then_some(HoldEvent::TerminalConfirm));
        found.extend(self.role.map(|r| match r {
            ToolRole::BeforeCall => HoldEvent::ConfiguredBeforeCall,
            ToolRole::Exempt => HoldEvent::ConfiguredNone,
            ToolRole::Prepare(_) | ToolRole::Confirm | ToolRole::Cancel | ToolRole::Status => {
                HoldEvent::ApprovalRole
            }
        }));
        found.extend((!self.trust.server_trusted).then_some(HoldEvent::ServerUntrusted));
        found.push(match self.trust.hints {
            None => HoldEvent::Undeclared,
            Some(h) if h.destructive.unwrap_or(h.read_only != Some(true)) => {
                HoldEvent::DeclaredDestructive
            }
            Some(_) => HoldEvent::DeclaredSafe,
        });
        found
    }
}

/// What the approval policy decided for one call.
#[derive(Debug, Clone, PartialEq)]
pub enum HoldVerdict {
    Send,
    /// Send exactly this call, once: never followed by further pages (a
    /// call a decision sends).
    SendOnce,
    /// Held for approval of the exact call, for this reason.
    Hold(HoldReason),
    /// A row the table forbids: the call is not sent at all.
    Refused(Box<Violation>),
}

/// Asks the approval policy (`tables/hold.ron`) about one call: the fact
/// its `precedence` ranks first, fired on a machine of its own (its row is
/// counted in `/v1/metrics`).
pub fn hold_verdict(table: &Bound<Hold>, facts: &HoldFacts<'_>) -> HoldVerdict {
    match table.first_of(&facts.events()) {
        Some(event) => verdict(table.machine().fire(event)),
        None => HoldVerdict::Send,
    }
}

/// [`hold_verdict`] for a call that is not being made (whether a listing
/// could be continued): asked, not fired, so no row is counted.
pub fn would_hold(table: &Bound<Hold>, facts: &HoldFacts<'_>) -> HoldVerdict {
    match table.first_of(&facts.events()) {
        Some(event) => verdict(table.machine().peek(event)),
        None => HoldVerdict::Send,
    }
}

fn verdict(step: Result<TypedStep<Hold>, Box<Violation>>) -> HoldVerdict {
    match step {
        Ok(step) => match step.effect {
            Some(HoldEffect::HoldConfigured) => HoldVerdict::Hold(HoldReason::Configured),
            Some(HoldEffect::HoldUntrusted) => HoldVerdict::Hold(HoldReason::Untrusted),
            Some(HoldEffect::HoldDestructive) => HoldVerdict::Hold(HoldReason::Destructive),
            Some(HoldEffect::SendOnce) => HoldVerdict::SendOnce,
            Some(HoldEffect::Send) | None => HoldVerdict::Send,
        },
        Err(v) => HoldVerdict::Refused(v),
    }
}

/// A prepare tool and the tools that settle what it prepared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepare {
    /// The result field that carries the action id: a dotted path
    /// ([`super::path`]), `actionId` or `data.bookingId`. The confirm,
    /// cancel and status tools take the id under its last segment
    /// ([`Prepare::id_arg`]).
    pub action_id: String,
    pub confirm: String,
    pub cancel: String,
    pub status: Option<String>,
}

impl Prepare {
    /// The argument the confirm, cancel and status tools take the action
    /// id under: the path's last segment (`data.bookingId` → `bookingId`),
    /// the name the id goes by inside the envelope that carried it.
    pub fn id_arg(&self) -> &str {
        super::path::leaf(&self.action_id)
    }
}

/// Every tool's role, by tool name.
#[derive(Debug, Clone, Default)]
pub struct Roles {
    by_tool: HashMap<String, ToolRole>,
}

impl Roles {
    /// Gives `tool` its role. A tool that settles a prepared action
    /// (confirm, cancel, status) keeps that role: nothing configured later
    /// may make a confirm tool runnable from a model's plan.
    pub fn insert(&mut self, tool: &str, role: ToolRole) {
        let settling = matches!(
            self.by_tool.get(tool),
            Some(ToolRole::Confirm | ToolRole::Cancel | ToolRole::Status)
        );
        if !settling {
            self.by_tool.insert(tool.to_string(), role);
        }
    }

    pub fn get(&self, tool: &str) -> Option<&ToolRole> {
        self.by_tool.get(tool)
    }

    pub fn is_empty(&self) -> bool {
        self.by_tool.is_empty()
    }

    /// Declares `prepare` with its confirm, cancel and status tools, each
    /// in its role.
    pub fn prepare(&mut self, prepare: &str, role: Prepare) {
        // The settling roles win over any other role the tools were given.
        self.by_tool.insert(role.confirm.clone(), ToolRole::Confirm);
        self.by_tool.insert(role.cancel.clone(), ToolRole::Cancel);
        if let Some(s) = &role.status {
            self.by_tool.insert(s.clone(), ToolRole::Status);
        }
        self.insert(prepare, ToolRole::Prepare(role));
    }

    /// The prepare role whose confirm tool is `confirm`.
    pub fn prepare_of_confirm(&self, confirm: &str) -> Option<&Prepare> {
        self.by_tool.values().find_map(|r| match r {
            ToolRole::Prepare(p) if p.confirm == confirm => Some(p),
            _ => None,
        })
    }

    pub fn is_confirm(&self, tool: &str) -> bool {
        matches!(self.get(tool), Some(ToolRole::Confirm))
    }
}

/// What a prepare result names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionId {
    /// A positive id: an action to decide.
    Positive(u64),
    /// 0, a negative number, or a value that is no id: the server's no-op
    /// sentinel (`{"status": "NO_SUCH_SEAT", "actionId": 0}`). A failed
    /// call names no action either.
    None,
    /// The configured field is not in the answer at all. Nothing is held,
    /// as for the sentinel, but the server did not say "nothing": the
    /// configuration does not match its answers, which the operator must
    /// be shown (issue 33 §4).
    Missing,
}

impl ActionId {
    /// The approval event a prepare result classifies into: nothing is
    /// held unless an action was named.
    pub fn event(self) -> ApprovalEvent {
        match self {
            ActionId::Positive(_) => ApprovalEvent::Prepared,
            ActionId::None => ApprovalEvent::PrepareNoop,
            ActionId::Missing => ApprovalEvent::PrepareUnread,
        }
    }
}

/// The action id at a prepare result's `field` (a dotted path, resolved
/// in the object the result answers with, whatever shape carried it);
/// only a positive integer (or a string of one) counts. A failed call
/// names no action.
pub fn action_id(out: &ToolOutput, field: &str) -> ActionId {
    if out.is_error {
        return ActionId::None;
    }
    let Some(id) = fields(out).and_then(|f| super::path::get(&f, field).cloned()) else {
        return ActionId::Missing;
    };
    match id {
        Value::Number(n) => n
            .as_u64()
            .filter(|n| *n > 0)
            .map_or(ActionId::None, ActionId::Positive),
        Value::String(s) => s
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|n| *n > 0)
            .map_or(ActionId::None, ActionId::Positive),
        _ => ActionId::None,
    }
}

/// The object a result answers with, whatever shape carried it:
/// `structuredContent`, a JSON text block, content blocks serialised into
/// a text block (`[{"type":"text","text":"{…}"}]`, seed 004), a JSON string
/// holding JSON, or a Python literal.
pub fn fields(out: &ToolOutput) -> Option<Map<String, Value>> {
    if let Some(Value::Object(m)) = &out.structured {
        return Some(m.clone());
    }
    out.blocks.iter().find_map(|b| match b {
        Block::Text { text, .. } => object_in(text, 3),
        _ => None,
    })
}

fn object_in(text: &str, depth: u8) -> Option<Map<String, Value>> {
    let t = text.trim();
    let v = serde_json::from_str::<Value>(t)
        .ok()
        .or_else(|| pyliteral::parse(t).ok())?;
    unwrap_object(v, depth)
}

fn unwrap_object(v: Value, depth: u8) -> Option<Map<String, Value>> {
    if depth == 0 {
        return None;
    }
    match v {
        Value::Object(m) if m.get("type").and_then(Value::as_str) == Some("text") => m
            .get("text")
            .and_then(Value::as_str)
            .and_then(|t| object_in(t, depth - 1)),
        Value::Object(m) => Some(m),
        Value::String(s) => object_in(&s, depth - 1),
        Value::Array(items) => items.into_iter().find_map(|i| unwrap_object(i, depth - 1)),
        _ => None,
    }
}

/// A confirm's answer: accepted, or failed (a tool error, or a status that
/// says it was refused).
pub fn confirm_event(out: &ToolOutput) -> ApprovalEvent {
    if out.is_error {
        return ApprovalEvent::ConfirmFailed;
    }
    match status_word(out).as_deref() {
        Some("FAILED" | "REJECTED" | "ERROR" | "DENIED" | "CANCELLED" | "EXPIRED") => {
            ApprovalEvent::ConfirmFailed
        }
        // An answer without a refusal is an acceptance: the backend took
        // the confirm; what its worker made of it is the status tool's.
        _ => ApprovalEvent::ConfirmAccepted,
    }
}

/// What a status tool's answer says: the worker succeeded, failed, still
/// runs (`status_pending`), or the answer says nothing of it
/// (`status_unsaid`; a tool error says nothing of the action).
pub fn status_event(out: &ToolOutput) -> ApprovalEvent {
    let word = status_word(out).filter(|_| !out.is_error);
    match word.as_deref() {
        Some("COMPLETED" | "SUCCEEDED" | "SUCCESS" | "DONE") => ApprovalEvent::WorkerSucceeded,
        Some("FAILED" | "ERROR" | "REJECTED" | "CANCELLED" | "EXPIRED") => {
            ApprovalEvent::WorkerFailed
        }
        Some("ACCEPTED" | "CONFIRMED" | "RUNNING" | "PROCESSING") => ApprovalEvent::StatusPending,
        // Not said: the table's `status_unsaid` row.
        _ => ApprovalEvent::StatusUnsaid,
    }
}

/// What a status answer says of a confirm a restart found in flight: its
/// worker finished, or the backend accepted it and it still runs.
/// `None`: it says nothing the confirm can be known by (a pending action
/// never got the confirm, or cannot say), and the outcome stays unknown.
pub fn recovered_event(out: &ToolOutput) -> Option<ApprovalEvent> {
    match status_event(out) {
        ApprovalEvent::StatusUnsaid => None,
        said => Some(said),
    }
}

/// What an approve's status check, before the confirm, found of the action
/// (issue 34): a server may give a number to another action once it has
/// forgotten the first (a restart of an in-memory desk), and a confirm by
/// number alone would then confirm that one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StillPrepared {
    /// Pending, and every field it shares with what was prepared agrees.
    Same,
    /// Not the action prepared, or no longer waiting for a confirm; why, in
    /// field names and the server's status word (never a value).
    Changed(String),
    /// Pending as far as it says, but it shares no field with what was
    /// prepared: nothing to compare.
    Unchecked,
}

/// The status words that say an action is past its confirm (or never was):
/// the ones the confirm, status and restart classifiers read.
const PAST_CONFIRM: [&str; 13] = [
    "ACCEPTED",
    "CONFIRMED",
    "RUNNING",
    "PROCESSING",
    "COMPLETED",
    "SUCCEEDED",
    "SUCCESS",
    "DONE",
    "FAILED",
    "ERROR",
    "REJECTED",
    "CANCELLED",
    "EXPIRED",
];

/// Whether a status answer still describes the action prepared: not an
/// error (an id the server does not know, or another owner's), not past
/// its confirm, and every scalar field of the prepare's arguments and
/// result (`prepared`) that the answer also names, by its last segment,
/// holds the same value.
pub fn still_prepared(
    status: &ToolOutput,
    args: &Map<String, Value>,
    prepared: &Map<String, Value>,
    action_id_field: &str,
) -> StillPrepared {
    if status.is_error {
        return StillPrepared::Changed("the server no longer knows the action's id".into());
    }
    let Some(f) = fields(status) else {
        return StillPrepared::Unchecked;
    };
    if let Some(word) = status_word(status) {
        if PAST_CONFIRM.contains(&word.as_str()) {
            return StillPrepared::Changed(format!(
                "the server says the action under this id is {word}, no longer waiting for a confirm"
            ));
        }
    }
    let mut now = HashMap::new();
    leaves(&f, 4, &mut now);
    let id_leaf = super::path::leaf(action_id_field);
    let mut compared = 0;
    for (key, value) in args.iter().chain(prepared.iter()) {
        let leaf = super::path::leaf(key);
        if leaf == "status" || leaf == id_leaf {
            continue;
        }
        let (Some(was), Some(is)) = (scalar(value), now.get(leaf)) else {
            continue;
        };
        // A preview value cut for the card is compared by what it kept.
        let same = match was.strip_suffix('…') {
            Some(kept) => is.starts_with(kept),
            None => &was == is,
        };
        if !same {
            return StillPrepared::Changed(format!(
                "the action under this id has another `{leaf}` than the one prepared"
            ));
        }
        compared += 1;
    }
    match compared {
        0 => StillPrepared::Unchecked,
        _ => StillPrepared::Same,
    }
}

/// Every scalar under `m`, by its key (nested objects flattened to their
/// own keys; the first of a repeated key wins).
fn leaves(m: &Map<String, Value>, depth: u8, out: &mut HashMap<String, String>) {
    for (k, v) in m {
        match v {
            Value::Object(inner) if depth > 0 => leaves(inner, depth - 1, out),
            v => {
                if let Some(s) = scalar(v) {
                    out.entry(k.clone()).or_insert(s);
                }
            }
        }
    }
}

/// A scalar as compared: trimmed, case-folded text; numbers and booleans
/// as written. Arrays, objects and null compare as nothing.
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.trim().to_lowercase()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The reason a server gave for an action that failed or prepared nothing,
/// fit to be told in quotes after code's outcome sentence (issue 34): its
/// `reason`, `error` or `message` field, or an error result's first text;
/// one line, without quotation marks, at most 120 characters. A reason
/// that carries a link is not told (links are code's alone, ADR 0027).
pub fn told_reason(out: &ToolOutput) -> Option<String> {
    let raw = failure_reason(out).or_else(|| {
        out.is_error
            .then(|| {
                out.blocks.iter().find_map(|b| match b {
                    Block::Text { text, .. } => Some(text.clone()),
                    _ => None,
                })
            })
            .flatten()
    })?;
    if raw.contains("://") {
        return None;
    }
    let one_line: String = raw
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .filter(|c| !matches!(c, '"' | '\u{201c}' | '\u{201d}' | '`'))
        .collect();
    let one_line = one_line.trim();
    if one_line.is_empty() {
        return None;
    }
    Some(match one_line.chars().count() > 120 {
        true => one_line.chars().take(119).chain(['…']).collect(),
        false => one_line.to_string(),
    })
}

/// Why a status answer says the action failed, if it says.
pub fn failure_reason(out: &ToolOutput) -> Option<String> {
    let f = fields(out)?;
    ["reason", "error", "message"]
        .iter()
        .find_map(|k| f.get(*k).and_then(Value::as_str).map(str::to_string))
}

fn status_word(out: &ToolOutput) -> Option<String> {
    let f = fields(out)?;
    f.get("status")
        .and_then(Value::as_str)
        .map(|s| s.trim().to_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(t: &str) -> ToolOutput {
        ToolOutput {
            is_error: false,
            blocks: vec![Block::Text {
                text: t.to_string(),
                meta: None,
            }],
            structured: None,
            meta: None,
        }
    }

    #[test]
    fn every_shape_of_a_prepare_result_names_the_same_id() {
        let structured = ToolOutput {
            structured: Some(json!({"status": "OK", "actionId": 66})),
            ..text("Prepared.")
        };
        let shapes = [
            structured,
            text(r#"{"status":"OK","actionId":66}"#),
            // The seed's adapter: content blocks serialised into one string.
            text(r#"[{"type":"text","text":"{\"status\":\"OK\",\"actionId\":66}"}]"#),
            // A JSON string holding JSON.
            text(r#""{\"status\":\"OK\",\"actionId\":66}""#),
            // Python's str() of a dict.
            text("{'status': 'OK', 'actionId': 66}"),
            text(r#"{"status":"OK","actionId":"66"}"#),
        ];
        for s in &shapes {
            assert_eq!(action_id(s, "actionId"), ActionId::Positive(66), "{s:?}");
        }
    }

    #[test]
    fn only_a_positive_id_is_an_action() {
        for t in [
            r#"{"status":"OK","actionId":0}"#,
            r#"{"status":"OK","actionId":-3}"#,
            r#"{"status":"OK","actionId":null}"#,
            r#"{"status":"OK","actionId":"abc"}"#,
            r#"{"status":"OK","actionId":1.5}"#,
        ] {
            assert_eq!(action_id(&text(t), "actionId"), ActionId::None, "{t}");
        }
        // No such field at all is not the sentinel: the configuration
        // does not match the answer.
        for t in [r#"{"status":"OK"}"#, "Prepared action 66."] {
            assert_eq!(action_id(&text(t), "actionId"), ActionId::Missing, "{t}");
        }
        let failed = ToolOutput {
            is_error: true,
            ..text(r#"{"actionId":5}"#)
        };
        assert_eq!(action_id(&failed, "actionId"), ActionId::None);
    }

    /// Issue 33 §4: `action_id = "data.bookingId"` against the seed's
    /// envelope, in every shape the reading seam knows.
    #[test]
    fn a_dotted_action_id_is_found_inside_the_envelope() {
        let body = r#"{"status":"OK","data":{"bookingId":101,"room":"B-2"}}"#;
        let structured = ToolOutput {
            structured: Some(serde_json::from_str(body).unwrap()),
            ..text("Held.")
        };
        let escaped = body.replace('"', "\\\"");
        let shapes = [
            structured,
            text(body),
            text(&format!(r#"[{{"type":"text","text":"{escaped}"}}]"#)),
            text("{'status': 'OK', 'data': {'bookingId': '101'}}"),
        ];
        for s in &shapes {
            assert_eq!(
                action_id(s, "data.bookingId"),
                ActionId::Positive(101),
                "{s:?}"
            );
        }
        // The bare key it used to be configured as is not at the top.
        assert_eq!(action_id(&text(body), "bookingId"), ActionId::Missing);
        assert_eq!(
            action_id(&text(body), "data.reservationId"),
            ActionId::Missing
        );
        assert_eq!(
            action_id(
                &text(r#"{"status":"OK","data":{"bookingId":0}}"#),
                "data.bookingId"
            ),
            ActionId::None
        );
        let role = Prepare {
            action_id: "data.bookingId".into(),
            confirm: "c".into(),
            cancel: "x".into(),
            status: None,
        };
        assert_eq!(role.id_arg(), "bookingId");
    }

    /// The hold policy, row by row: configuration first, then hints that
    /// may hold but never exempt.
    #[test]
    fn which_calls_wait_for_approval_of_themselves() {
        use turnstile_output::{Hints, ToolTrust};
        let hints = |read_only, destructive| {
            Some(Hints {
                read_only,
                destructive,
            })
        };
        let trust = |server_trusted, hints| ToolTrust {
            server_trusted,
            hints,
            declared_tier: None,
        };
        let prepare = ToolRole::Prepare(Prepare {
            action_id: "id".into(),
            confirm: "c".into(),
            cancel: "x".into(),
            status: None,
        });
        let destructive = hints(Some(false), Some(true));
        let cases = [
            (None, trust(true, None), None),
            (None, trust(false, None), Some(HoldReason::Untrusted)),
            (
                None,
                trust(true, destructive),
                Some(HoldReason::Destructive),
            ),
            (None, trust(false, destructive), Some(HoldReason::Untrusted)),
            // Contradictory hints hold (destructive wins).
            (
                None,
                trust(true, hints(Some(true), Some(true))),
                Some(HoldReason::Destructive),
            ),
            // Annotations read with MCP's defaults: destructive unless said.
            (
                None,
                trust(true, hints(Some(false), None)),
                Some(HoldReason::Destructive),
            ),
            (
                None,
                trust(true, hints(None, None)),
                Some(HoldReason::Destructive),
            ),
            (None, trust(true, hints(Some(true), None)), None),
            (None, trust(true, hints(Some(false), Some(false))), None),
            // An untrusted server's read-only claim exempts nothing.
            (
                None,
                trust(false, hints(Some(true), Some(false))),
                Some(HoldReason::Untrusted),
            ),
            (
                Some(ToolRole::BeforeCall),
                trust(true, hints(Some(true), Some(false))),
                Some(HoldReason::Configured),
            ),
            (Some(ToolRole::Exempt), trust(false, destructive), None),
            (Some(ToolRole::Cancel), trust(true, destructive), None),
            (Some(prepare), trust(false, None), None),
        ];
        let table: Bound<Hold> = crate::protocols::TableSet::builtin()
            .unwrap()
            .bound()
            .unwrap();
        for (role, t, want) in cases {
            let facts = HoldFacts {
                decision_call: false,
                terminal_confirm: false,
                role: role.as_ref(),
                trust: &t,
            };
            let got = match hold_verdict(&table, &facts) {
                HoldVerdict::Send => None,
                HoldVerdict::Hold(r) => Some(r),
                HoldVerdict::SendOnce => panic!("sent once without a decision"),
                HoldVerdict::Refused(v) => panic!("refused by {}", v.row_id),
            };
            assert_eq!(got, want, "{role:?} {t:?}");
            // A decision's own call and an export's confirm are sent,
            // whatever else is true of them.
            for (decision_call, terminal_confirm) in [(true, false), (false, true), (true, true)] {
                let facts = HoldFacts {
                    decision_call,
                    terminal_confirm,
                    ..facts
                };
                let want = match decision_call {
                    true => HoldVerdict::SendOnce,
                    false => HoldVerdict::Send,
                };
                assert_eq!(hold_verdict(&table, &facts), want);
            }
        }
    }

    #[test]
    fn an_action_is_still_the_one_prepared_only_if_its_shared_fields_agree() {
        let args: Map<String, Value> =
            serde_json::from_value(json!({"seat": "12", "time": "15:00"})).unwrap();
        let prepared: Map<String, Value> =
            serde_json::from_value(json!({"seat": "12", "time": "15:00", "data.room": "Hall A"}))
                .unwrap();
        let check = |body: &str| still_prepared(&text(body), &args, &prepared, "actionId");
        assert_eq!(
            check(r#"{"actionId":1,"status":"PENDING","seat":"12","time":"15:00"}"#),
            StillPrepared::Same
        );
        // Numbers and strings, case and padding compare alike; a nested
        // field is found by its last segment.
        assert_eq!(
            check(r#"{"actionId":1,"status":"pending","data":{"seat":12,"room":" hall a "}}"#),
            StillPrepared::Same
        );
        for changed in [
            r#"{"actionId":1,"status":"PENDING","seat":"7","time":"15:00"}"#,
            r#"{"actionId":1,"status":"PENDING","data":{"room":"Hall B"}}"#,
            r#"{"actionId":1,"status":"COMPLETED","seat":"12","time":"15:00"}"#,
            r#"{"actionId":1,"status":"cancelled"}"#,
        ] {
            assert!(
                matches!(check(changed), StillPrepared::Changed(_)),
                "{changed}"
            );
        }
        let mut unknown = text("unknown action 1");
        unknown.is_error = true;
        assert!(matches!(
            still_prepared(&unknown, &args, &prepared, "actionId"),
            StillPrepared::Changed(_)
        ));
        // Nothing shared (or no object at all): nothing to compare.
        assert_eq!(
            check(r#"{"actionId":1,"status":"PENDING"}"#),
            StillPrepared::Unchecked
        );
        assert_eq!(check("pending"), StillPrepared::Unchecked);
        // The reason names the field, never its value.
        let StillPrepared::Changed(why) = check(r#"{"actionId":1,"status":"PENDING","seat":"7"}"#)
        else {
            panic!("changed");
        };
        assert!(why.contains("`seat`") && !why.contains('7'), "{why}");
    }

    #[test]
    fn confirm_and_status_answers() {
        assert_eq!(
            confirm_event(&text(r#"{"status":"ACCEPTED"}"#)),
            ApprovalEvent::ConfirmAccepted
        );
        assert_eq!(
            confirm_event(&text(r#"{"status":"rejected"}"#)),
            ApprovalEvent::ConfirmFailed
        );
        let err = ToolOutput {
            is_error: true,
            ..text("no such action")
        };
        assert_eq!(confirm_event(&err), ApprovalEvent::ConfirmFailed);
        assert_eq!(
            status_event(&text(r#"{"status":"COMPLETED"}"#)),
            ApprovalEvent::WorkerSucceeded
        );
        let failed = text(r#"{"status":"FAILED","reason":"seat taken"}"#);
        assert_eq!(status_event(&failed), ApprovalEvent::WorkerFailed);
        assert_eq!(failure_reason(&failed).as_deref(), Some("seat taken"));
        let running = text(r#"{"status":"ACCEPTED"}"#);
        assert_eq!(status_event(&running), ApprovalEvent::StatusPending);
        assert_eq!(
            recovered_event(&running),
            Some(ApprovalEvent::StatusPending)
        );
        let said_nothing = text(r#"{"status":"PENDING_CONFIRM"}"#);
        assert_eq!(status_event(&said_nothing), ApprovalEvent::StatusUnsaid);
        assert_eq!(recovered_event(&said_nothing), None);
        let tool_error = ToolOutput {
            is_error: true,
            ..running.clone()
        };
        assert_eq!(status_event(&tool_error), ApprovalEvent::StatusUnsaid);
    }
}
