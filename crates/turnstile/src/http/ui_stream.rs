//! The AI SDK's UI message stream (`ai` 7.0.x, `useChat`; issue 37, ADR
//! 0036): a turn's frames written as the chunks that protocol's client
//! reads. Each frame becomes its chunks here; each chunk is fired through
//! `tables/ui_stream.ron` before it is written, as each frame is fired
//! through `tables/frame.ron`. The frames are already judged: a sentence the
//! narration guard replaced arrives replaced, a capability is delivered by
//! code as a `data-capability` part, and nothing shown is retracted (the
//! table has no `reset-step` or `abort`).

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::Response;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::error::ApiError;
use super::relay::{self, Relay, StreamOrder};
use super::routes::{Decision, ResumeRequest};
use super::state::AppState;
use crate::agent::{OutFrame, TurnRequest};
use crate::protocols::ui_stream::{UiStream, UiStreamEvent};
use crate::protocols::Bound;
use crate::wire::{self, Frame};

/// The header the AI SDK's transport checks (`UI_MESSAGE_STREAM_HEADERS`).
pub const HEADER: (&str, &str) = ("x-vercel-ai-ui-message-stream", "v1");

/// One chunk of the stream: its table event and its JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub event: UiStreamEvent,
    /// The `data:` line's JSON; `None` for `[DONE]` and the stream's end.
    pub body: Option<Value>,
}

impl Chunk {
    fn new(event: UiStreamEvent, body: Value) -> Chunk {
        Chunk {
            event,
            body: Some(body),
        }
    }

    /// The SSE `data:` field: the chunk's JSON, or `[DONE]`.
    pub fn data(&self) -> Option<String> {
        match (self.event, &self.body) {
            (UiStreamEvent::Done, _) => Some("[DONE]".into()),
            (_, Some(body)) => Some(body.to_string()),
            (_, None) => None,
        }
    }
}

/// A data part: `data-{name}`, reconciled by `id` on the client when it
/// has one (a later part with the same id replaces the earlier: progress).
fn data(name: &str, id: Option<&str>, value: Value) -> Chunk {
    let mut body = Map::new();
    body.insert("type".into(), Value::String(format!("data-{name}")));
    if let Some(id) = id {
        body.insert("id".into(), Value::String(id.to_string()));
    }
    body.insert("data".into(), value);
    Chunk::new(UiStreamEvent::Data, Value::Object(body))
}

/// A refusal's words: its own message when it has one (a licence
/// refusal's, in the user's language), and the table and row that refused.
fn refused_text(summary: &str, refusal: &Value) -> String {
    let said = refusal["message"].as_str().unwrap_or(summary);
    match (refusal["table"].as_str(), refusal["row_id"].as_str()) {
        (Some(table), Some(row)) => format!("{said} (refused by the {table} table, row `{row}`)"),
        _ => format!("{said} (refused)"),
    }
}

/// What is open in the stream, so each frame's chunks close it first.
#[derive(Debug, Default)]
struct Open {
    step: bool,
    /// The open text part's id.
    text: Option<String>,
    /// The open tool call's id (input shown, outcome awaited).
    tool: Option<String>,
    texts: usize,
}

/// Writes one turn's frames as UI message stream chunks, through the
/// `ui_stream` table.
pub struct UiStreamWriter {
    order: StreamOrder<UiStream>,
    open: Open,
}

impl UiStreamWriter {
    pub fn new(table: &Bound<UiStream>) -> UiStreamWriter {
        UiStreamWriter {
            order: StreamOrder::new(table),
            open: Open::default(),
        }
    }

    /// The chunks one frame becomes, each let through by the table. A frame
    /// that does not read is written as the stream's error.
    pub fn frame(&mut self, out: &OutFrame) -> Vec<Chunk> {
        let chunks = match Frame::parse(out.kind, &out.data.to_string()) {
            Ok(frame) => self.chunks(&frame),
            Err(e) => self.failed(&format!("a frame could not be read: {e}")),
        };
        self.order.through(chunks, |c| c.event)
    }

    fn chunks(&mut self, frame: &Frame) -> Vec<Chunk> {
        let mut out = Vec::new();
        match frame {
            Frame::Start(s) => out.push(Chunk::new(
                UiStreamEvent::Start,
                json!({"type": "start", "messageId": s.turn_id}),
            )),
            Frame::Plan(p) => {
                self.close_text(&mut out);
                self.finish_step(&mut out);
                self.start_step(&mut out);
                out.push(data(
                    "plan",
                    None,
                    serde_json::to_value(p).unwrap_or_default(),
                ));
            }
            Frame::ToolCall(c) => {
                self.close_text(&mut out);
                self.start_step(&mut out);
                out.push(Chunk::new(
                    UiStreamEvent::ToolInputStart,
                    json!({"type": "tool-input-start", "toolCallId": c.call_id, "toolName": c.tool}),
                ));
                out.push(Chunk::new(
                    UiStreamEvent::ToolInputAvailable,
                    json!({"type": "tool-input-available", "toolCallId": c.call_id, "toolName": c.tool, "input": c.args}),
                ));
                self.open.tool = Some(c.call_id.clone());
            }
            Frame::ToolResult(r) => out.push(self.tool_result(r)),
            Frame::Citation(c) => {
                self.close_text(&mut out);
                self.start_step(&mut out);
                out.push(data(
                    "citation",
                    None,
                    serde_json::to_value(c).unwrap_or_default(),
                ));
            }
            Frame::Figure(f) => {
                self.close_text(&mut out);
                self.start_step(&mut out);
                out.push(data(
                    "figure",
                    None,
                    serde_json::to_value(f).unwrap_or_default(),
                ));
            }
            Frame::Progress(p) => {
                let id = format!("progress-{}", p.call_id);
                out.push(data(
                    "progress",
                    Some(&id),
                    serde_json::to_value(p).unwrap_or_default(),
                ));
            }
            Frame::Delta(d) => self.delta(d, &mut out),
            Frame::Interrupt(i) => self.interrupt(i, &mut out),
            Frame::Done(_) => {
                self.close_text(&mut out);
                self.finish_step(&mut out);
                out.push(Chunk::new(
                    UiStreamEvent::Finish,
                    json!({"type": "finish", "finishReason": "stop"}),
                ));
                out.push(Chunk {
                    event: UiStreamEvent::Done,
                    body: None,
                });
            }
            Frame::Error(e) => out.extend(self.error(e)),
        }
        out
    }

    fn tool_result(&mut self, r: &wire::ToolResult) -> Chunk {
        self.open.tool = None;
        if r.ok {
            let output = json!({
                "summary": r.summary,
                "shape": r.shape,
                "conflict": r.conflict,
            });
            return Chunk::new(
                UiStreamEvent::ToolOutputAvailable,
                json!({"type": "tool-output-available", "toolCallId": r.call_id, "output": output}),
            );
        }
        // A refusal is told as what it is (the table and row that refused),
        // never as a failure of the tool.
        let text = match &r.refusal {
            Some(refusal) => refused_text(&r.summary, refusal),
            None => r.summary.clone(),
        };
        Chunk::new(
            UiStreamEvent::ToolOutputError,
            json!({"type": "tool-output-error", "toolCallId": r.call_id, "errorText": text}),
        )
    }

    /// A question of a tool's server: the card only (its requests in
    /// `data-interrupt`). The AI SDK's approval carries no answers, so no
    /// approval request is written for it: it is answered with `/resume`.
    fn question(&mut self, i: &wire::Interrupt, out: &mut Vec<Chunk>) {
        self.close_text(out);
        self.start_step(out);
        out.push(data(
            "interrupt",
            Some(&i.interrupt_id),
            serde_json::to_value(i).unwrap_or_default(),
        ));
        self.finish_step(out);
    }

    fn delta(&mut self, d: &wire::Delta, out: &mut Vec<Chunk>) {
        if self.open.text.is_none() {
            self.start_step(out);
            self.open.texts += 1;
            let id = format!("text-{}", self.open.texts);
            out.push(Chunk::new(
                UiStreamEvent::TextStart,
                json!({"type": "text-start", "id": id}),
            ));
            self.open.text = Some(id);
        }
        let id = self.open.text.clone().unwrap_or_default();
        out.push(Chunk::new(
            UiStreamEvent::TextDelta,
            json!({"type": "text-delta", "id": id, "delta": d.text}),
        ));
        // What code delivered (a capability) and what the guard replaced
        // travel as data parts after the sentence that carries them; the
        // text is closed first, since nothing interleaves with open text.
        if d.capabilities.is_empty() && d.replaced.is_none() {
            return;
        }
        self.close_text(out);
        for link in &d.capabilities {
            out.push(data(
                "capability",
                None,
                serde_json::to_value(link).unwrap_or_default(),
            ));
        }
        if let Some(r) = &d.replaced {
            out.push(data(
                "replaced",
                None,
                serde_json::to_value(r).unwrap_or_default(),
            ));
        }
    }

    /// The server holds a call for the user's decision: the held call's
    /// input, the card, and the approval request by the server's own
    /// interrupt id; the step and the message then end, and the next
    /// request carries the decision.
    fn interrupt(&mut self, i: &wire::Interrupt, out: &mut Vec<Chunk>) {
        if i.input.is_some() {
            return self.question(i, out);
        }
        self.close_text(out);
        self.start_step(out);
        let call_id = format!("held-{}", i.interrupt_id);
        out.push(Chunk::new(
            UiStreamEvent::ToolInputStart,
            json!({"type": "tool-input-start", "toolCallId": call_id, "toolName": i.tool}),
        ));
        out.push(Chunk::new(
            UiStreamEvent::ToolInputAvailable,
            json!({"type": "tool-input-available", "toolCallId": call_id, "toolName": i.tool, "input": i.args}),
        ));
        out.push(data(
            "interrupt",
            Some(&i.interrupt_id),
            serde_json::to_value(i).unwrap_or_default(),
        ));
        out.push(Chunk::new(
            UiStreamEvent::ToolApprovalRequest,
            json!({"type": "tool-approval-request", "approvalId": i.interrupt_id, "toolCallId": call_id}),
        ));
        out.push(Chunk::new(
            UiStreamEvent::FinishStep,
            json!({"type": "finish-step"}),
        ));
        self.open.step = false;
        self.open.tool = None;
    }

    fn error(&mut self, e: &wire::Error) -> Vec<Chunk> {
        let mut text = e.message.clone();
        if let (Some(table), Some(row)) = (&e.table, &e.row_id) {
            text = format!("{text} ({table} row `{row}`)");
        }
        self.failed(&text)
    }

    /// The stream's error: what is open is closed first (a call still open
    /// is told as not answered), then `error`, `finish` and `[DONE]`.
    fn failed(&mut self, text: &str) -> Vec<Chunk> {
        let mut out = Vec::new();
        self.close_text(&mut out);
        if let Some(call) = self.open.tool.take() {
            out.push(Chunk::new(
                UiStreamEvent::ToolOutputError,
                json!({"type": "tool-output-error", "toolCallId": call, "errorText": "the turn ended with no result shown for this call"}),
            ));
        }
        self.finish_step(&mut out);
        out.push(Chunk::new(
            UiStreamEvent::Error,
            json!({"type": "error", "errorText": text}),
        ));
        out.push(Chunk::new(
            UiStreamEvent::Finish,
            json!({"type": "finish", "finishReason": "error"}),
        ));
        out.push(Chunk {
            event: UiStreamEvent::Done,
            body: None,
        });
        out
    }

    fn start_step(&mut self, out: &mut Vec<Chunk>) {
        if !self.open.step {
            out.push(Chunk::new(
                UiStreamEvent::StartStep,
                json!({"type": "start-step"}),
            ));
            self.open.step = true;
        }
    }

    fn finish_step(&mut self, out: &mut Vec<Chunk>) {
        if self.open.step {
            out.push(Chunk::new(
                UiStreamEvent::FinishStep,
                json!({"type": "finish-step"}),
            ));
            self.open.step = false;
        }
    }

    fn close_text(&mut self, out: &mut Vec<Chunk>) {
        if let Some(id) = self.open.text.take() {
            out.push(Chunk::new(
                UiStreamEvent::TextEnd,
                json!({"type": "text-end", "id": id}),
            ));
        }
    }
}

// ---------------------------------------------------------------------------
// The route: `POST /v1/threads/{id}/ui-message-stream`, what `useChat`'s
// transport sends.
// ---------------------------------------------------------------------------

/// What `useChat`'s `DefaultChatTransport` posts: the chat's messages, of
/// which turnstile reads the last (the thread keeps its own history), and
/// whatever the page adds to the body (`context`, `more`).
#[derive(Debug, Deserialize)]
pub struct UiChatRequest {
    pub messages: Vec<UiMessage>,
    /// The host's screen state, as on the native route.
    #[serde(default)]
    pub context: Option<crate::agent::context::RawContext>,
    /// "Show more" as a structured marker.
    #[serde(default)]
    pub more: bool,
}

/// One `UIMessage` as the client sends it; only its role and parts are
/// read.
#[derive(Debug, Deserialize)]
pub struct UiMessage {
    pub role: String,
    #[serde(default)]
    pub parts: Vec<Value>,
}

/// What the last message asks for.
#[derive(Debug, PartialEq)]
pub enum Asked {
    /// A user message: a new turn with its text.
    Turn(String),
    /// An assistant message carrying the user's approval response: a
    /// decision on the server's interrupt of that id.
    Decision {
        interrupt_id: String,
        approved: bool,
    },
}

/// Reads the last message: a user's text, or an assistant message with
/// exactly one approval response (`state: "approval-responded"`). `Err`:
/// why the request asks for nothing turnstile can do (a 400).
pub fn asked(req: &UiChatRequest) -> Result<Asked, String> {
    let last = req
        .messages
        .last()
        .ok_or("`messages` is empty: the last one is what is asked")?;
    match last.role.as_str() {
        "user" => {
            let text: String = (last.parts.iter())
                .filter(|p| p["type"] == "text")
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n");
            Ok(Asked::Turn(text))
        }
        "assistant" => {
            // useChat writes a resumed stream into the same assistant
            // message, so an earlier response stays beside the new one: the
            // latest is what is asked (an earlier one's interrupt is decided
            // already, and deciding it again is the approval table's 409).
            let Some(part) = (last.parts.iter())
                .rev()
                .find(|p| p["state"] == "approval-responded")
            else {
                return Err(
                    "the last message is the assistant's: it must carry an approval response"
                        .into(),
                );
            };
            let id = part["approval"]["id"].as_str();
            let approved = part["approval"]["approved"].as_bool();
            match (id, approved) {
                (Some(id), Some(approved)) => Ok(Asked::Decision {
                    interrupt_id: id.to_string(),
                    approved,
                }),
                _ => Err("an approval response needs `approval.id` and `approval.approved`".into()),
            }
        }
        other => Err(format!(
            "the last message's role is `{other}`: a turn answers a `user` message or an `assistant` message with an approval response"
        )),
    }
}

pub async fn post(
    State(st): State<AppState>,
    method: Method,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Result<Json<UiChatRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let caller = super::routes::owner_of(&st, &headers, &method, &id).await?;
    let Json(req) = body?;
    let asked = asked(&req).map_err(|why| ApiError::new(StatusCode::BAD_REQUEST, why))?;
    let (caller, rx) = match asked {
        Asked::Turn(text) => {
            let turn = TurnRequest {
                text,
                context: req.context,
                more: req.more,
                discarded_principal: None,
                access: None,
            };
            super::routes::open_turn(&st, caller, id, turn).await?
        }
        // The approval id is the server's interrupt id: deciding it is the
        // same compare-and-swap as `/resume`, refused by the same rows.
        Asked::Decision {
            interrupt_id,
            approved,
        } => {
            let decision = match approved {
                true => Decision::Approve,
                false => Decision::Deny,
            };
            let resume = ResumeRequest {
                interrupt_id,
                decision,
                answers: None,
            };
            super::routes::open_resume(&st, caller, id, resume).await?
        }
    };
    let mut res = relay::respond(UiStreamWriter::new(&st.ui_stream), &caller, rx);
    res.headers_mut().insert(
        HeaderName::from_static(HEADER.0),
        HeaderValue::from_static(HEADER.1),
    );
    Ok(res)
}

impl Relay for UiStreamWriter {
    fn lines(&mut self, frame: &OutFrame) -> Vec<String> {
        (self.frame(frame).iter()).filter_map(Chunk::data).collect()
    }

    fn close(&mut self) {
        self.order.close(UiStreamEvent::Close);
    }

    fn stopped(&self) -> bool {
        self.order.stopped()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocols::TableSet;

    fn frame(f: Frame) -> OutFrame {
        OutFrame {
            seq: 0,
            kind: f.kind(),
            data: f.data(),
        }
    }

    fn writer() -> UiStreamWriter {
        UiStreamWriter::new(&TableSet::builtin().unwrap().bound().unwrap())
    }

    fn types(chunks: &[Chunk]) -> Vec<String> {
        (chunks.iter())
            .map(|c| match &c.body {
                Some(b) => b["type"].as_str().unwrap_or_default().to_string(),
                None => "[DONE]".into(),
            })
            .collect()
    }

    fn start() -> Frame {
        Frame::Start(wire::Start {
            turn_id: "t".into(),
            thread_id: "th".into(),
        })
    }

    fn delta(text: &str) -> Frame {
        Frame::Delta(wire::Delta {
            text: text.into(),
            replaced: None,
            capabilities: Vec::new(),
            links: Vec::new(),
        })
    }

    /// A turn that calls a tool and answers: each frame's chunks, in the
    /// table's order, with what was open closed before the next part.
    #[test]
    fn a_turns_frames_become_paired_chunks_through_the_table() {
        let mut w = writer();
        let call = Frame::ToolCall(wire::ToolCall {
            call_id: "c1".into(),
            tool: "search_photos".into(),
            server: None,
            args: Map::new(),
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
        let done = Frame::Done(wire::Done {
            turn_id: "t".into(),
        });
        let mut all = Vec::new();
        for f in [start(), call, result, delta("Ten "), delta("shown."), done] {
            all.extend(w.frame(&frame(f)));
        }
        Relay::close(&mut w);
        assert_eq!(
            types(&all),
            [
                "start",
                "start-step",
                "tool-input-start",
                "tool-input-available",
                "tool-output-available",
                "text-start",
                "text-delta",
                "text-delta",
                "text-end",
                "finish-step",
                "finish",
                "[DONE]"
            ]
        );
        assert_eq!(w.order.state(), "Done");
        assert!(!w.order.stopped());
    }

    /// An error while a call is open: the call is told as unanswered, never
    /// as done, then the error, one finish and `[DONE]`.
    #[test]
    fn an_error_closes_what_is_open_and_finishes_once() {
        let mut w = writer();
        let call = Frame::ToolCall(wire::ToolCall {
            call_id: "c1".into(),
            tool: "t".into(),
            server: None,
            args: Map::new(),
        });
        let err = Frame::Error(wire::Error {
            message: "the model did not answer".into(),
            ..wire::Error::default()
        });
        let mut all = Vec::new();
        for f in [start(), call, err] {
            all.extend(w.frame(&frame(f)));
        }
        assert_eq!(
            types(&all)[4..],
            [
                "tool-output-error",
                "finish-step",
                "error",
                "finish",
                "[DONE]"
            ]
        );
        assert_eq!(w.order.state(), "Done");
    }

    /// A frame the table forbids here (text after the message finished)
    /// is not written: the stream stops at the last chunk it let through.
    #[test]
    fn a_chunk_the_table_forbids_is_never_written() {
        let mut w = writer();
        let done = Frame::Done(wire::Done {
            turn_id: "t".into(),
        });
        w.frame(&frame(start()));
        w.frame(&frame(done));
        let late = w.frame(&frame(delta("late")));
        assert!(late.is_empty(), "{late:?}");
        assert!(w.order.stopped());
    }

    #[test]
    fn the_last_message_says_what_is_asked() {
        let req = |v: Value| serde_json::from_value::<UiChatRequest>(v).unwrap();
        let user = req(json!({"messages": [
            {"role": "user", "parts": [{"type": "text", "text": "show photos"}]}
        ]}));
        assert_eq!(asked(&user), Ok(Asked::Turn("show photos".into())));
        let approval = req(json!({"messages": [
            {"role": "user", "parts": [{"type": "text", "text": "reserve"}]},
            {"role": "assistant", "parts": [
                {"type": "tool-confirm_action", "toolCallId": "held-i1", "state": "approval-responded",
                 "approval": {"id": "i1", "approved": false}}
            ]}
        ]}));
        assert_eq!(
            asked(&approval),
            Ok(Asked::Decision {
                interrupt_id: "i1".into(),
                approved: false
            })
        );
        let two = req(json!({"messages": [
            {"role": "assistant", "parts": [
                {"state": "approval-responded", "approval": {"id": "i1", "approved": true}},
                {"type": "text", "text": "done"},
                {"state": "approval-responded", "approval": {"id": "i2", "approved": false}}
            ]}
        ]}));
        assert_eq!(
            asked(&two),
            Ok(Asked::Decision {
                interrupt_id: "i2".into(),
                approved: false
            }),
            "the latest response"
        );
        for bad in [
            json!({"messages": []}),
            json!({"messages": [{"role": "assistant", "parts": []}]}),
            json!({"messages": [{"role": "system", "parts": []}]}),
            json!({"messages": [{"role": "assistant", "parts": [{"state": "approval-responded", "approval": {"id": 3}}]}]}),
        ] {
            assert!(asked(&req(bad.clone())).is_err(), "{bad}");
        }
    }
}
