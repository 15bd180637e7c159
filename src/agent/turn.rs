//! One turn: start → plan → tool calls and results → citations → narration
//! → done. Each step's messages and the frame machine's state are written to
//! the store in one transaction, so a dropped connection loses nothing that
//! was already said.

use std::sync::Arc;

use futures::StreamExt;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tracing::Instrument;

use super::context::{BoundedContext, ContextLimits, RawContext};
use super::frames::{EmitError, FrameWriter, OutFrame};
use super::tools::ToolBelt;
use crate::judge::{self, Anchor};
use crate::llm::prompt::{PLANNER_FIXED, RESPONDER_FIXED};
use crate::llm::{Model, PlanRequest, Prompt, RespondRequest};
use crate::mcp::ToolOutput;
use crate::protocols::frame::{Frame, FrameEvent};
use crate::protocols::Bound;
use crate::store::{NewMessage, Role, Store};

/// Bounds and external contracts that come from configuration.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The upstream query cap (`LIMIT 3000`): an external contract, not ours.
    pub limit_sentinel: u64,
    pub context: ContextLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            limit_sentinel: 3000,
            context: ContextLimits::default(),
        }
    }
}

/// A user message as the HTTP layer received it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnRequest {
    pub text: String,
    #[serde(default)]
    pub context: Option<RawContext>,
}

pub struct Agent {
    pub model: Arc<dyn Model>,
    pub tools: ToolBelt,
    pub store: Store,
    pub frame_table: Bound<Frame>,
    pub limits: Limits,
}

/// Why a turn stopped early. Every variant has already been reported to the
/// client where the connection allowed it.
#[derive(Debug, thiserror::Error)]
enum Stop {
    #[error(transparent)]
    Emit(#[from] EmitError),
    #[error("store: {0}")]
    Store(#[from] crate::store::StoreError),
}

struct Turn<'a> {
    agent: &'a Agent,
    thread_id: String,
    turn_id: String,
    frames: FrameWriter,
}

impl Agent {
    /// Runs one turn, writing frames into `tx`. Returns when the turn is
    /// over or the client went away (the receiver was dropped), whichever
    /// comes first; nothing keeps running after it returns.
    pub async fn run_turn(
        &self,
        thread_id: &str,
        turn_id: &str,
        req: TurnRequest,
        tx: tokio::sync::mpsc::Sender<OutFrame>,
    ) {
        let span = tracing::info_span!("turn", thread_id = %thread_id, turn_id = %turn_id);
        let closed = tx.clone();
        let mut turn = Turn {
            agent: self,
            thread_id: thread_id.to_string(),
            turn_id: turn_id.to_string(),
            frames: FrameWriter::new(&self.frame_table, tx),
        };
        let work = async {
            tokio::select! {
                r = turn.run(req) => {
                    if let Err(e) = r {
                        tracing::warn!(error = %e, "turn stopped early");
                    }
                    if let Err(e) = turn.frames.close().await {
                        tracing::warn!(error = %e, "closing the stream");
                    }
                }
                _ = closed.closed() => tracing::info!("client disconnected; turn cancelled"),
            }
        };
        work.instrument(span).await
    }
}

impl Turn<'_> {
    async fn persist(&self, messages: Vec<NewMessage>) -> Result<(), Stop> {
        let snap = serde_json::to_value(self.frames.snapshot()).unwrap_or(Value::Null);
        self.agent
            .store
            .step(
                &self.thread_id,
                &self.turn_id,
                &messages,
                &[("frame", snap)],
            )
            .await?;
        Ok(())
    }

    /// A frame whose step is durable before the client sees it: the
    /// machine moves, the messages and the machine state are written in one
    /// transaction, then the frame is sent.
    async fn step(
        &mut self,
        event: FrameEvent,
        data: Value,
        messages: Vec<NewMessage>,
    ) -> Result<(), Stop> {
        self.frames.fire(event).await?;
        self.persist(messages).await?;
        self.frames.send(event, data).await?;
        Ok(())
    }

    /// Ends the turn with an error frame and records it.
    async fn fail(&mut self, message: String, tool: Option<&str>) -> Result<(), Stop> {
        let mut data = json!({"message": message});
        if let Some(t) = tool {
            data["tool"] = json!(t);
        }
        let body = json!({"error": data});
        self.step(
            FrameEvent::Error,
            data,
            vec![NewMessage {
                role: Role::Assistant,
                body,
            }],
        )
        .await
    }

    async fn run(&mut self, req: TurnRequest) -> Result<(), Stop> {
        let limits = self.agent.limits;
        let context = req
            .context
            .map(|c| BoundedContext::bound(c, limits.context));
        let start = json!({"turn_id": self.turn_id, "thread_id": self.thread_id});
        let user = NewMessage {
            role: Role::User,
            body: json!({"text": req.text, "context": context}),
        };
        self.step(FrameEvent::Start, start, vec![user]).await?;

        let mut anchors: Vec<Anchor> = Vec::new();
        let mut planner = Prompt::new(PLANNER_FIXED);
        if let Some(c) = context.as_ref().filter(|c| !c.is_empty()) {
            planner = planner.block("Host context", c.prompt_text());
            for field in &c.truncated {
                anchors.push(Anchor::ContextTruncated {
                    field: field.clone(),
                });
            }
        }
        let plan_req = PlanRequest {
            prompt: planner,
            user_text: req.text.clone(),
            tools: self.agent.tools.tools().to_vec(),
            context: context.as_ref().and_then(|c| serde_json::to_value(c).ok()),
        };
        let plan = match self.agent.model.plan(&plan_req).await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "planner failed");
                return self
                    .fail(format!("the model could not plan this turn: {e}"), None)
                    .await;
            }
        };
        if !plan.calls.is_empty() {
            let steps: Vec<Value> = plan
                .calls
                .iter()
                .map(|c| json!({"tool": c.tool, "args": c.args}))
                .collect();
            self.frames
                .emit(FrameEvent::Plan, json!({"steps": steps, "note": plan.note}))
                .await?;
        }

        let mut citations = Vec::new();
        for (i, call) in plan.calls.iter().enumerate() {
            let call_id = format!("{}-{}", self.turn_id, i + 1);
            let server = self.agent.tools.client_for(&call.tool).cloned();
            self.frames
                .emit(
                    FrameEvent::ToolCall,
                    json!({"call_id": call_id, "tool": call.tool, "server": server.as_ref().map(|s| s.name()), "args": call.args}),
                )
                .await?;
            let Some(server) = server else {
                // A model that names a tool nobody offers gets a structured
                // tool error, not a crash.
                self.frames
                    .emit(
                        FrameEvent::ToolResult,
                        json!({"call_id": call_id, "tool": call.tool, "ok": false, "summary": "unknown tool"}),
                    )
                    .await?;
                anchors.push(Anchor::ToolFailed {
                    tool: call.tool.clone(),
                });
                continue;
            };
            let out = match server.call(&call.tool, call.args.clone()).await {
                Ok(out) => out,
                Err(e) => {
                    tracing::warn!(tool = %call.tool, kind = e.kind(), "tool call failed");
                    let data = json!({"call_id": call_id, "tool": call.tool, "ok": false, "summary": e.kind()});
                    let msg = tool_message(&call_id, &call.tool, &call.args, None, Some(e.kind()));
                    self.step(FrameEvent::ToolResult, data, vec![msg]).await?;
                    return self
                        .fail(
                            format!("the tool {} failed: {}", call.tool, e.kind()),
                            Some(&call.tool),
                        )
                        .await;
                }
            };
            let shape = out.shape();
            tracing::info!(tool = %call.tool, shape = %shape, "tool result");
            let ok = !out.is_error;
            let data = json!({"call_id": call_id, "tool": call.tool, "ok": ok, "summary": summary(&out), "shape": shape.to_string()});
            let msg = tool_message(&call_id, &call.tool, &call.args, Some(&out), None);
            self.step(FrameEvent::ToolResult, data, vec![msg]).await?;
            if !ok {
                anchors.push(Anchor::ToolFailed {
                    tool: call.tool.clone(),
                });
                continue;
            }
            let items = items(&out);
            let accounting = judge::accounting::read(&out);
            let displayed = items
                .as_ref()
                .map(|v| v.len() as u64)
                .or(accounting.as_ref().map(|a| a.returned))
                .unwrap_or(0);
            let count = judge::grade(accounting.as_ref(), displayed, limits.limit_sentinel);
            anchors.push(Anchor::for_count(&call.tool, &count));
            if items.is_some() || accounting.is_some() {
                let citation = json!({
                    "source": call.tool,
                    "items": items.unwrap_or_default(),
                    "displayed": count.displayed,
                    "total": count.total,
                    "total_is_lower_bound": count.total_is_lower_bound,
                    "has_more": count.has_more,
                    "grade": count.grade,
                    "complete": count.complete,
                });
                self.frames
                    .emit(FrameEvent::Citation, citation.clone())
                    .await?;
                citations.push(citation);
            }
        }

        let mut responder = Prompt::new(RESPONDER_FIXED);
        if !anchors.is_empty() {
            responder = responder.block(
                "Directives",
                anchors
                    .iter()
                    .map(|a| format!("- {}", a.text()))
                    .collect::<Vec<_>>()
                    .join("\n"),
            );
        }
        let respond_req = RespondRequest {
            prompt: responder,
            user_text: req.text.clone(),
            anchors: anchors.clone(),
        };
        let mut text = String::new();
        let stream = self.agent.model.respond(&respond_req).await;
        let mut stream = match stream {
            Ok(s) => s,
            Err(e) => {
                return self
                    .fail(format!("the model could not answer: {e}"), None)
                    .await
            }
        };
        while let Some(delta) = stream.next().await {
            match delta {
                Ok(d) if d.is_empty() => {}
                Ok(d) => {
                    self.frames
                        .emit(FrameEvent::Delta, json!({"text": d}))
                        .await?;
                    text += &d;
                }
                Err(e) => {
                    return self
                        .fail(format!("the model stream broke: {e}"), None)
                        .await
                }
            }
        }
        if text.is_empty() {
            return self.fail("the model returned no answer".into(), None).await;
        }
        let assistant = NewMessage {
            role: Role::Assistant,
            body: json!({"text": text, "citations": citations, "anchors": anchors}),
        };
        let done = json!({"turn_id": self.turn_id});
        self.step(FrameEvent::Done, done, vec![assistant]).await
    }
}

fn tool_message(
    call_id: &str,
    tool: &str,
    args: &Map<String, Value>,
    out: Option<&ToolOutput>,
    error: Option<&str>,
) -> NewMessage {
    NewMessage {
        role: Role::Tool,
        body: json!({"call_id": call_id, "tool": tool, "args": args, "result": out, "error": error}),
    }
}

/// Structured items, when the result has them (`structuredContent.items`).
fn items(out: &ToolOutput) -> Option<Vec<Value>> {
    out.structured
        .as_ref()
        .and_then(|s| s.get("items"))
        .and_then(Value::as_array)
        .cloned()
}

/// A one-line, text-free description for the tool_result frame.
fn summary(out: &ToolOutput) -> String {
    if out.is_error {
        return "the tool reported an error".into();
    }
    match items(out) {
        Some(items) => format!("{} items", items.len()),
        None => format!("{} content blocks", out.blocks.len()),
    }
}
