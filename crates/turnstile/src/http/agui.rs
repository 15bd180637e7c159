//! AG-UI 1.0 (`@ag-ui/core` 1.0.0; issue 37, ADR 0036): a turn's frames
//! written as the events an AG-UI client reads. Each frame becomes its
//! events here; each event is fired through `tables/agui.ron` before it is
//! written. An approval or a tool server's question ends the run with
//! `RUN_FINISHED` and outcome `interrupt`, carrying the server's own
//! interrupt id and `expiresAt`; the next run's `resume[]` only asks to
//! decide that interrupt, through the same path as `/resume`.

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::Response;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::ApiError;
use super::relay::{self, Relay, StreamOrder};
use super::routes::{Decision, ResumeRequest};
use super::state::AppState;
use crate::agent::{OutFrame, TurnRequest};
use crate::protocols::agui::{Agui, AguiEvent};
use crate::protocols::Bound;
use crate::wire::{self, Frame};

/// One event: its table event and its JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct AguiOut {
    pub event: AguiEvent,
    pub body: Value,
}

fn ev(event: AguiEvent, body: Value) -> AguiOut {
    AguiOut { event, body }
}

/// A `CUSTOM` event under turnstile's own name: what AG-UI has no type for
/// (a card with its grade, a figure, a delivered capability, progress).
fn custom(name: &str, value: Value) -> AguiOut {
    ev(
        AguiEvent::Custom,
        json!({"type": "CUSTOM", "name": format!("turnstile.{name}"), "value": value}),
    )
}

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or_default()
}

/// What is open in the run.
#[derive(Debug, Default)]
struct Open {
    step: Option<String>,
    steps: u32,
    text: Option<String>,
    texts: u32,
    /// A call ended and awaiting its result.
    pending: Option<String>,
    /// RUN_FINISHED or RUN_ERROR was written.
    ended: bool,
}

/// Writes one run's frames as AG-UI events, through the `agui` table.
pub struct AguiWriter {
    order: StreamOrder<Agui>,
    thread_id: String,
    run_id: String,
    open: Open,
}

impl AguiWriter {
    pub fn new(table: &Bound<Agui>, thread_id: &str, run_id: &str) -> AguiWriter {
        AguiWriter {
            order: StreamOrder::new(table),
            thread_id: thread_id.to_string(),
            run_id: run_id.to_string(),
            open: Open::default(),
        }
    }

    /// The events one frame becomes, each let through by the table.
    pub fn frame(&mut self, out: &OutFrame) -> Vec<AguiOut> {
        let events = match Frame::parse(out.kind, &out.data.to_string()) {
            Ok(frame) => self.events(&frame),
            Err(e) => self.failed(&format!("a frame could not be read: {e}"), None),
        };
        self.order.through(events, |e| e.event)
    }

    fn events(&mut self, frame: &Frame) -> Vec<AguiOut> {
        let mut out = Vec::new();
        if self.open.ended {
            // After an interrupt ended the run, its `done` frame writes
            // nothing: the run is over.
            return out;
        }
        match frame {
            Frame::Start(_) => out.push(ev(
                AguiEvent::RunStarted,
                json!({"type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.run_id, "protocolVersion": "1.0"}),
            )),
            Frame::Plan(p) => {
                self.close_text(&mut out);
                self.finish_step(&mut out);
                self.start_step(&mut out);
                out.push(custom("plan", to_value(p)));
            }
            Frame::ToolCall(c) => {
                self.close_text(&mut out);
                self.start_step(&mut out);
                let args = Value::Object(c.args.clone()).to_string();
                out.push(ev(
                    AguiEvent::ToolCallStart,
                    json!({"type": "TOOL_CALL_START", "toolCallId": c.call_id, "toolCallName": c.tool}),
                ));
                out.push(ev(
                    AguiEvent::ToolCallArgs,
                    json!({"type": "TOOL_CALL_ARGS", "toolCallId": c.call_id, "delta": args}),
                ));
                out.push(ev(
                    AguiEvent::ToolCallEnd,
                    json!({"type": "TOOL_CALL_END", "toolCallId": c.call_id}),
                ));
                self.open.pending = Some(c.call_id.clone());
            }
            Frame::ToolResult(r) => out.push(self.tool_result(r)),
            Frame::Citation(c) => {
                self.close_text(&mut out);
                out.push(custom("citation", to_value(c)));
            }
            Frame::Figure(f) => {
                self.close_text(&mut out);
                out.push(custom("figure", to_value(f)));
            }
            Frame::Progress(p) => out.push(custom("progress", to_value(p))),
            Frame::Delta(d) => self.delta(d, &mut out),
            Frame::Interrupt(i) => self.interrupt(i, &mut out),
            Frame::Done(_) => {
                self.close_text(&mut out);
                self.finish_step(&mut out);
                out.push(ev(
                    AguiEvent::RunFinished,
                    json!({"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": self.run_id, "outcome": {"type": "success"}}),
                ));
                self.open.ended = true;
            }
            Frame::Error(e) => {
                let code = e.row_id.clone();
                let mut text = e.message.clone();
                if let (Some(table), Some(row)) = (&e.table, &e.row_id) {
                    text = format!("{text} ({table} row `{row}`)");
                }
                out.extend(self.failed(&text, code));
            }
        }
        out
    }

    fn tool_result(&mut self, r: &wire::ToolResult) -> AguiOut {
        self.open.pending = None;
        // A refusal is told as what it is, with its table and row; a
        // failure as a failure; never one for the other.
        let content = json!({
            "ok": r.ok,
            "summary": r.summary,
            "shape": r.shape,
            "refusal": r.refusal,
            "conflict": r.conflict,
        });
        ev(
            AguiEvent::ToolCallResult,
            json!({"type": "TOOL_CALL_RESULT", "messageId": format!("result-{}", r.call_id), "toolCallId": r.call_id, "content": content.to_string(), "role": "tool"}),
        )
    }

    fn delta(&mut self, d: &wire::Delta, out: &mut Vec<AguiOut>) {
        if d.text.is_empty() && d.capabilities.is_empty() && d.replaced.is_none() {
            return;
        }
        if !d.text.is_empty() {
            if self.open.text.is_none() {
                self.start_step(out);
                self.open.texts += 1;
                let id = format!("{}-text-{}", self.run_id, self.open.texts);
                out.push(ev(
                    AguiEvent::TextMessageStart,
                    json!({"type": "TEXT_MESSAGE_START", "messageId": id, "role": "assistant"}),
                ));
                self.open.text = Some(id);
            }
            let id = self.open.text.clone().unwrap_or_default();
            out.push(ev(
                AguiEvent::TextMessageContent,
                json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": id, "delta": d.text}),
            ));
        }
        if d.capabilities.is_empty() && d.replaced.is_none() {
            return;
        }
        self.close_text(out);
        for link in &d.capabilities {
            out.push(custom("capability", to_value(link)));
        }
        if let Some(r) = &d.replaced {
            out.push(custom("replaced", to_value(r)));
        }
    }

    /// The server holds a call for the user: the run ends with outcome
    /// `interrupt`, carrying the server's interrupt id, its expiry and the
    /// card; the next run's `resume[]` decides it.
    fn interrupt(&mut self, i: &wire::Interrupt, out: &mut Vec<AguiOut>) {
        self.close_text(out);
        self.finish_step(out);
        let expires = wire::time::iso_utc(i.expires_at);
        let reason = match i.input {
            Some(_) => "input_required",
            None => "tool_approval",
        };
        let mut interrupt = json!({
            "id": i.interrupt_id,
            "reason": reason,
            "message": i.summary,
            "expiresAt": expires,
            "metadata": {
                "tool": i.tool,
                "args": i.args,
                "detail": i.detail,
                "choices": i.choices,
                "action": i.action,
            },
        });
        if let Some(input) = &i.input {
            interrupt["metadata"]["input"] = to_value(input);
        }
        out.push(ev(
            AguiEvent::RunFinished,
            json!({"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": self.run_id, "outcome": {"type": "interrupt", "interrupts": [interrupt]}}),
        ));
        self.open.ended = true;
    }

    /// RUN_ERROR: an open text message is closed first; the run ends.
    fn failed(&mut self, text: &str, code: Option<String>) -> Vec<AguiOut> {
        let mut out = Vec::new();
        self.close_text(&mut out);
        let mut body = json!({"type": "RUN_ERROR", "message": text});
        if let Some(code) = code {
            body["code"] = Value::String(code);
        }
        out.push(ev(AguiEvent::RunError, body));
        self.open.ended = true;
        out
    }

    fn start_step(&mut self, out: &mut Vec<AguiOut>) {
        if self.open.step.is_none() {
            self.open.steps += 1;
            let name = format!("step {}", self.open.steps);
            out.push(ev(
                AguiEvent::StepStarted,
                json!({"type": "STEP_STARTED", "stepName": name}),
            ));
            self.open.step = Some(name);
        }
    }

    fn finish_step(&mut self, out: &mut Vec<AguiOut>) {
        if let Some(name) = self.open.step.take() {
            out.push(ev(
                AguiEvent::StepFinished,
                json!({"type": "STEP_FINISHED", "stepName": name}),
            ));
        }
    }

    fn close_text(&mut self, out: &mut Vec<AguiOut>) {
        if let Some(id) = self.open.text.take() {
            out.push(ev(
                AguiEvent::TextMessageEnd,
                json!({"type": "TEXT_MESSAGE_END", "messageId": id}),
            ));
        }
    }
}

// ---------------------------------------------------------------------------
// The route: `POST /v1/threads/{id}/agui`, an AG-UI `RunAgentInput`.
// ---------------------------------------------------------------------------

/// The fields of `RunAgentInput` turnstile reads; the rest (tools, state,
/// forwardedProps) are accepted and not used: the server's tools are its
/// own, and the thread keeps its own history.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunAgentInput {
    pub thread_id: String,
    pub run_id: String,
    #[serde(default)]
    pub messages: Vec<Value>,
    #[serde(default)]
    pub resume: Vec<ResumeEntry>,
    /// The host's screen state, as on the native route, under
    /// `forwardedProps.context`; `forwardedProps.more` is "show more".
    #[serde(default)]
    pub forwarded_props: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumeEntry {
    pub interrupt_id: String,
    pub status: String,
    #[serde(default)]
    pub payload: Option<Value>,
}

/// What the run asks for.
#[derive(Debug)]
pub enum Run {
    Turn(TurnRequest),
    Resume(ResumeRequest),
}

/// Reads a `RunAgentInput`: one `resume` entry decides the server's
/// interrupt (`resolved` with `payload.decision`, and `payload.answers` for
/// a question; `cancelled` denies); otherwise the last `user` message's
/// text is a new turn. `Err`: why not (a 400).
pub fn run_of(input: RunAgentInput) -> Result<Run, String> {
    if input.resume.len() > 1 {
        return Err("one interrupt is pending at a time: `resume` holds at most one entry".into());
    }
    if let Some(entry) = input.resume.into_iter().next() {
        let payload = entry.payload.unwrap_or(Value::Null);
        let decision = match (entry.status.as_str(), payload["decision"].as_str()) {
            // Abandoned: an approval is denied, as a new message would
            // withdraw it (a question: `resolved` with `cancel`).
            ("cancelled", None) => Decision::Deny,
            ("cancelled", Some(_)) => {
                return Err("a `cancelled` entry takes no `payload.decision`: it abandons the interrupt".into())
            }
            ("resolved", Some(word)) => {
                serde_json::from_value(Value::String(word.to_string())).map_err(|_| {
                    format!("`payload.decision` is `{word}`: use approve, deny, accept, decline or cancel")
                })?
            }
            ("resolved", None) => return Err("a resolved interrupt needs `payload.decision` (approve or deny; accept, decline or cancel for a question)".into()),
            (other, _) => return Err(format!("`status` is `{other}`: use resolved or cancelled")),
        };
        let answers = payload["answers"].as_object().cloned();
        return Ok(Run::Resume(ResumeRequest {
            interrupt_id: entry.interrupt_id,
            decision,
            answers,
        }));
    }
    // The last message only: a run whose last message is not the user's
    // asks nothing new, and an earlier request is never run again.
    let last = (input.messages.last())
        .filter(|m| m["role"] == "user")
        .ok_or("the last message is not a `user` message, and there is no `resume` entry")?;
    let text = match &last["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => (parts.iter())
            .filter(|p| p["type"] == "text")
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    };
    let props = input.forwarded_props.unwrap_or(Value::Null);
    let context = match props.get("context") {
        Some(c) => Some(
            serde_json::from_value(c.clone())
                .map_err(|e| format!("`forwardedProps.context`: {e}"))?,
        ),
        None => None,
    };
    Ok(Run::Turn(TurnRequest {
        text,
        context,
        more: props["more"].as_bool().unwrap_or(false),
        discarded_principal: None,
        access: None,
    }))
}

pub async fn post(
    State(st): State<AppState>,
    method: Method,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Result<Json<RunAgentInput>, JsonRejection>,
) -> Result<Response, ApiError> {
    let caller = super::routes::owner_of(&st, &headers, &method, &id).await?;
    let Json(input) = body?;
    if input.thread_id != id {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "`threadId` must be the thread of the URL",
        ));
    }
    if input.run_id.trim().is_empty() || input.run_id.len() > 128 {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "`runId` must name the run (1 to 128 characters)",
        ));
    }
    let run_id = input.run_id.clone();
    let run = run_of(input).map_err(|why| ApiError::new(StatusCode::BAD_REQUEST, why))?;
    let thread = id.clone();
    let (caller, rx) = match run {
        Run::Turn(turn) => super::routes::open_turn(&st, caller, id, turn).await?,
        Run::Resume(resume) => super::routes::open_resume(&st, caller, id, resume).await?,
    };
    let writer = AguiWriter::new(&st.agui, &thread, &run_id);
    Ok(relay::respond(writer, &caller, rx))
}

impl Relay for AguiWriter {
    fn lines(&mut self, frame: &OutFrame) -> Vec<String> {
        (self.frame(frame).iter())
            .map(|e| e.body.to_string())
            .collect()
    }

    fn close(&mut self) {
        self.order.close(AguiEvent::Close);
    }

    fn stopped(&self) -> bool {
        self.order.stopped()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocols::TableSet;

    fn out(f: Frame) -> OutFrame {
        OutFrame {
            seq: 0,
            kind: f.kind(),
            data: f.data(),
        }
    }

    fn writer() -> AguiWriter {
        AguiWriter::new(
            &TableSet::builtin().unwrap().bound().unwrap(),
            "th",
            "run-1",
        )
    }

    fn types(events: &[AguiOut]) -> Vec<&str> {
        events
            .iter()
            .map(|e| e.body["type"].as_str().unwrap_or_default())
            .collect()
    }

    fn start() -> Frame {
        Frame::Start(wire::Start {
            turn_id: "t".into(),
            thread_id: "th".into(),
        })
    }

    /// A call and an answer: the run opens, the step pairs, the call is
    /// written whole before its result, the text is closed before the run
    /// finishes once with `success`, and the table ends the run.
    #[test]
    fn a_turns_frames_become_one_run_through_the_table() {
        let mut w = writer();
        let call = Frame::ToolCall(wire::ToolCall {
            call_id: "c1".into(),
            tool: "search_photos".into(),
            server: None,
            args: serde_json::Map::new(),
        });
        let result = Frame::ToolResult(wire::ToolResult {
            call_id: "c1".into(),
            tool: "search_photos".into(),
            ok: true,
            summary: "10 shown".into(),
            shape: None,
            conflict: None,
            refusal: None,
        });
        let delta = Frame::Delta(wire::Delta {
            text: "Ten shown.".into(),
            replaced: None,
            capabilities: Vec::new(),
            links: Vec::new(),
        });
        let done = Frame::Done(wire::Done {
            turn_id: "t".into(),
        });
        let mut all = Vec::new();
        for f in [start(), call, result, delta, done] {
            all.extend(w.frame(&out(f)));
        }
        Relay::close(&mut w);
        assert_eq!(
            types(&all),
            [
                "RUN_STARTED",
                "STEP_STARTED",
                "TOOL_CALL_START",
                "TOOL_CALL_ARGS",
                "TOOL_CALL_END",
                "TOOL_CALL_RESULT",
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_END",
                "STEP_FINISHED",
                "RUN_FINISHED"
            ]
        );
        assert_eq!(all.last().unwrap().body["outcome"]["type"], "success");
        assert!(!w.order.stopped());
    }

    /// An approval ends the run with outcome `interrupt`, the server's id
    /// and expiry; the `done` after it writes nothing.
    #[test]
    fn an_interrupt_ends_the_run_once() {
        let mut w = writer();
        let interrupt = wire::Interrupt::of_call(
            "i-1",
            "confirm_action",
            &serde_json::Map::new(),
            "Reserve seat 12?".into(),
            &["approve", "deny"],
            0,
        );
        let mut all = w.frame(&out(start()));
        all.extend(w.frame(&out(Frame::Interrupt(interrupt))));
        let done = w.frame(&out(Frame::Done(wire::Done {
            turn_id: "t".into(),
        })));
        assert!(done.is_empty(), "{done:?}");
        let last = &all.last().unwrap().body;
        assert_eq!(last["outcome"]["type"], "interrupt");
        assert_eq!(last["outcome"]["interrupts"][0]["id"], "i-1");
        assert_eq!(
            last["outcome"]["interrupts"][0]["expiresAt"],
            "1970-01-01T00:00:00.000Z"
        );
        Relay::close(&mut w);
        assert!(!w.order.stopped());
    }

    #[test]
    fn a_run_reads_a_resume_entry_or_the_last_message_only() {
        let input = |v: Value| serde_json::from_value::<RunAgentInput>(v).unwrap();
        let resumed = run_of(input(json!({"threadId": "t", "runId": "r", "messages": [],
            "resume": [{"interruptId": "i", "status": "resolved", "payload": {"decision": "deny"}}]})));
        assert!(
            matches!(resumed, Ok(Run::Resume(r)) if r.interrupt_id == "i" && matches!(r.decision, Decision::Deny))
        );
        let turn = run_of(input(json!({"threadId": "t", "runId": "r", "messages": [
            {"id": "1", "role": "user", "content": "show photos"}]})));
        assert!(matches!(turn, Ok(Run::Turn(t)) if t.text == "show photos"));
        for bad in [
            json!({"threadId": "t", "runId": "r", "messages": [
                {"id": "1", "role": "user", "content": "show photos"},
                {"id": "2", "role": "assistant", "content": "Here."}]}),
            json!({"threadId": "t", "runId": "r", "messages": [], "resume": [
                {"interruptId": "i", "status": "cancelled", "payload": {"decision": "approve"}}]}),
            json!({"threadId": "t", "runId": "r", "messages": [], "resume": [
                {"interruptId": "i", "status": "resolved"}]}),
        ] {
            assert!(run_of(input(bad.clone())).is_err(), "{bad}");
        }
    }
}
