//! An in-process OpenAI-compatible model server (axum on 127.0.0.1:0) that
//! speaks the chat-completions streaming wire format byte for byte:
//! `data: {json}\n\n` chunks of `chat.completion.chunk` objects, tool-call
//! arguments split over several chunks, a finish chunk, a usage chunk, then
//! `data: [DONE]\n\n`. Each SSE event is written as two body chunks cut at
//! an arbitrary byte (inside JSON, sometimes inside a UTF-8 sequence).
//!
//! By default it answers the way the scripted model would:
//! - a planning round (system prompt not the responder's) is planned by
//!   the real `turnstile_demo::Scripted` planner (as the demo configures
//!   it), fed with the user message, the request's `tools` and the floor of
//!   the host-context block; a plan that narrows the previous results calls
//!   the adapter's `narrow_previous_results` function;
//! - a round the scripted planner would not call anything in is answered,
//!   as a tools-loop model answers: text built from the directive lines of
//!   the request's last system message. Such a request counts as the
//!   turn's [`Role::Responder`] request, as does a responder request (the
//!   responder's prompt, no tools).
//!
//! Tests queue [`Action`]s per role to make one request misbehave: a
//! planner action is taken by the next planning round; a responder action
//! by the next request that answers. Every request is captured for
//! inspection.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use futures::StreamExt;
use serde_json::{json, Value};
use turnstile::llm::openai::{
    HOST_CONTEXT_TOOL, NARROW_PREVIOUS_TOOL, SHOW_LINK_TOOL, SHOW_MORE_TOOL,
};
use turnstile::llm::prompt::{PLANNER_FIXED, RESPONDER_FIXED};
use turnstile::llm::{ApiKey, Model, OpenAi, OpenAiConfig, PlanRequest, Prompt};
use turnstile::mcp::ToolInfo;
use turnstile_demo::Scripted;

/// The key the tests configure; it must reach the `Authorization` header
/// and nothing else.
pub const KEY: &str = "sk-test-7f3a9c0e-DO-NOT-LOG-b41d";
pub const FAKE_MODEL: &str = "fake-model-1";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Planner,
    Responder,
}

/// One request as the fake received it.
#[derive(Debug, Clone)]
pub struct Captured {
    pub role: Role,
    pub authorization: Option<String>,
    /// The W3C `traceparent` header, when the request carried one.
    pub traceparent: Option<String>,
    pub raw: String,
    pub body: Value,
}

impl Captured {
    /// The last message of `role` (the current user message comes after
    /// the thread's history).
    pub fn message(&self, role: &str) -> &str {
        self.body["messages"]
            .as_array()
            .and_then(|m| m.iter().rev().find(|m| m["role"] == role))
            .and_then(|m| m["content"].as_str())
            .unwrap_or("")
    }

    /// The last system message: a planning round's turn blocks (host
    /// context, directives), or the responder's whole prompt.
    pub fn system(&self) -> &str {
        self.message("system")
    }

    /// The first message: the fixed system prompt.
    pub fn fixed(&self) -> &str {
        self.body["messages"][0]["content"].as_str().unwrap_or("")
    }

    pub fn user(&self) -> &str {
        self.message("user")
    }
}

#[derive(Debug, Clone)]
pub enum Action {
    /// Answer with this status and JSON body instead of a stream.
    Status(u16, Value),
    /// HTTP 429 with a `Retry-After` of this many seconds.
    RateLimited { retry_after_secs: u64 },
    /// Plan exactly these calls: (function name, raw arguments text).
    ToolCalls(Vec<(String, String)>),
    /// A tool call whose arguments stop halfway, `finish_reason: "length"`.
    LengthMidArguments,
    /// Send this many content chunks, then break the connection.
    CutAfter(usize),
    /// Send this many content chunks, then send only keep-alive comments
    /// with the connection open.
    StallAfter(usize),
    /// Answer with exactly this text (a model's own words, honest or not).
    Text(String),
    /// Write this text, then ask for these calls in the same response (a
    /// model that narrates "let me look" and then calls a tool).
    TextThenCalls(String, Vec<(String, String)>),
}

#[derive(Default)]
struct Shared {
    requests: Mutex<Vec<Captured>>,
    planner: Mutex<VecDeque<Action>>,
    responder: Mutex<VecDeque<Action>>,
}

pub struct FakeOpenAi {
    /// The API base (`…/v1`) to configure the adapter with.
    pub base_url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeOpenAi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeOpenAi {
    pub async fn start() -> FakeOpenAi {
        let shared = Arc::new(Shared::default());
        let app = Router::new()
            .route("/v1/chat/completions", post(completions))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeOpenAi {
            base_url,
            shared,
            task,
        }
    }

    /// The adapter configured for this fake: short timeouts and backoff.
    pub fn config(&self) -> OpenAiConfig {
        let mut c = OpenAiConfig::new(&self.base_url, FAKE_MODEL, Some(ApiKey::new(KEY)));
        c.connect_timeout = Duration::from_secs(2);
        c.idle_timeout = Duration::from_secs(5);
        c.max_retries = 2;
        c.backoff_initial = Duration::from_millis(10);
        c.backoff_max = Duration::from_millis(200);
        c
    }

    pub fn model(&self) -> Arc<dyn Model> {
        Arc::new(OpenAi::new(self.config()).expect("adapter builds"))
    }

    /// The next request of `role` gets `action` instead of the default.
    pub fn on(&self, role: Role, action: Action) {
        let q = match role {
            Role::Planner => &self.shared.planner,
            Role::Responder => &self.shared.responder,
        };
        q.lock().unwrap().push_back(action);
    }

    pub fn requests(&self) -> Vec<Captured> {
        self.shared.requests.lock().unwrap().clone()
    }
}

async fn completions(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    raw: String,
) -> Response {
    let body: Value = match serde_json::from_str(&raw) {
        Ok(v) => v,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    let captured = Captured {
        role: Role::Planner,
        authorization: headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        traceparent: headers
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        raw: raw.clone(),
        body,
    };
    // A responder request; else a planning round: a queued planner action,
    // or what the scripted planner makes of it, which answers when it has
    // nothing to call.
    // The deployment's instructions come first; code's rules after them.
    let responder = captured.fixed().contains(RESPONDER_FIXED);
    let planned = match responder {
        true => None,
        false => shared.planner.lock().unwrap().pop_front(),
    };
    let (role, queued, plan) = if responder {
        let queued = shared.responder.lock().unwrap().pop_front();
        (Role::Responder, queued, None)
    } else if let Some(action) = planned {
        (Role::Planner, Some(action), None)
    } else {
        let plan = plan_like_scripted(&captured).await;
        if plan.is_answer() {
            let queued = shared.responder.lock().unwrap().pop_front();
            (Role::Responder, queued, None)
        } else {
            (Role::Planner, None, Some(plan))
        }
    };
    let captured = Captured { role, ..captured };
    shared.requests.lock().unwrap().push(captured.clone());
    match (role, queued) {
        (_, Some(Action::Status(status, body))) => (
            StatusCode::from_u16(status).unwrap(),
            [("content-type", "application/json")],
            body.to_string(),
        )
            .into_response(),
        (_, Some(Action::RateLimited { retry_after_secs })) => (
            StatusCode::TOO_MANY_REQUESTS,
            [
                ("content-type", "application/json".to_string()),
                ("retry-after", retry_after_secs.to_string()),
            ],
            json!({"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}})
                .to_string(),
        )
            .into_response(),
        (_, Some(Action::Text(text))) => sse(text_events(&text), End::Clean),
        (_, Some(Action::TextThenCalls(text, calls))) => {
            let mut events = text_events(&text);
            // Without the text's finish and usage chunks.
            events.truncate(events.len() - 2);
            events.extend(tool_call_events(&calls, "tool_calls"));
            sse(events, End::Clean)
        }
        (_, Some(Action::ToolCalls(calls))) => {
            sse(tool_call_events(&calls, "tool_calls"), End::Clean)
        }
        (_, Some(Action::LengthMidArguments)) => {
            let args = r#"{"query": "safety", "flo"#.to_string();
            sse(
                tool_call_events(&[("search_photos".into(), args)], "length"),
                End::Clean,
            )
        }
        (_, Some(Action::CutAfter(n))) => sse(
            text_events(&responder_text(&captured))
                .into_iter()
                .take(n + 1)
                .collect(),
            End::Cut,
        ),
        (_, Some(Action::StallAfter(n))) => sse(
            text_events(&responder_text(&captured))
                .into_iter()
                .take(n + 1)
                .collect(),
            End::Stall,
        ),
        (_, None) => match plan {
            Some(plan) => plan_events(&captured, &plan),
            None => sse(text_events(&responder_text(&captured)), End::Clean),
        },
    }
}

/// The real scripted planner, run on what the request says.
async fn plan_like_scripted(req: &Captured) -> turnstile::llm::Plan {
    let tools: Vec<ToolInfo> = req.body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| ToolInfo {
                    name: t["function"]["name"].as_str().unwrap_or("").into(),
                    description: t["function"]["description"].as_str().unwrap_or("").into(),
                    input_schema: t["function"]["parameters"].clone().into(),
                })
                .collect()
        })
        .unwrap_or_default();
    let plan_req = PlanRequest {
        prompt: Prompt::new(PLANNER_FIXED),
        user_text: req.user().to_string(),
        tools,
        context: host_floor(req.system()).map(|f| json!({"floor": f})),
        history: vec![],
        steps: earlier_steps(&req.body),
    };
    Scripted::demo()
        .plan(&plan_req)
        .await
        .expect("scripted plans")
}

/// A plan as a tools-loop model writes it: tool calls, the markers as the
/// adapter's functions.
fn plan_events(req: &Captured, plan: &turnstile::llm::Plan) -> Response {
    let offered = |name: &str| {
        req.body["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["function"]["name"] == name))
    };
    let narrow_offered = offered(NARROW_PREVIOUS_TOOL);
    let mut calls: Vec<(String, String)> = plan
        .calls
        .iter()
        .map(|c| (c.tool.clone(), Value::Object(c.args.clone()).to_string()))
        .collect();
    // A model says "these narrow the previous results" with the function
    // the adapter offers for it; if it is not offered, it cannot be said.
    if plan.narrows_previous && narrow_offered {
        calls.insert(0, (NARROW_PREVIOUS_TOOL.to_string(), "{}".to_string()));
    }
    // "This floor" is said with the adapter's host-context function; the
    // floor itself is the server's to fill in.
    if offered(HOST_CONTEXT_TOOL) {
        for field in &plan.from_context {
            calls.insert(
                0,
                (
                    HOST_CONTEXT_TOOL.to_string(),
                    json!({"field": field}).to_string(),
                ),
            );
        }
    }
    if plan.shows_link && offered(SHOW_LINK_TOOL) {
        calls.push((SHOW_LINK_TOOL.to_string(), "{}".to_string()));
    }
    // "Show more" is said with its function, which carries nothing.
    if plan.continues_previous && offered(SHOW_MORE_TOOL) {
        calls.push((SHOW_MORE_TOOL.to_string(), "{}".to_string()));
    }
    sse(tool_call_events(&calls, "tool_calls"), End::Clean)
}

/// This turn's earlier steps, read back from the standard tools loop: after
/// the last user message, each assistant message with `tool_calls` and the
/// `tool` messages answering them (their content is the digest).
fn earlier_steps(body: &Value) -> Vec<Vec<turnstile::llm::CallRecord>> {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let start = messages
        .iter()
        .rposition(|m| m["role"] == "user")
        .map_or(0, |i| i + 1);
    let mut steps = Vec::new();
    for m in &messages[start..] {
        if m["role"] == "assistant" {
            let calls = m["tool_calls"].as_array().cloned().unwrap_or_default();
            let step = calls
                .iter()
                .map(|c| {
                    let id = c["id"].as_str().unwrap_or("").to_string();
                    let digest = messages[start..]
                        .iter()
                        .find(|t| t["role"] == "tool" && t["tool_call_id"] == id.as_str())
                        .and_then(|t| t["content"].as_str())
                        .and_then(|t| serde_json::from_str(t).ok())
                        .expect("every tool call is answered by a tool message with a digest");
                    turnstile::llm::CallRecord {
                        id,
                        tool: c["function"]["name"].as_str().unwrap_or("").to_string(),
                        args: serde_json::from_str(
                            c["function"]["arguments"].as_str().unwrap_or("{}"),
                        )
                        .unwrap_or_default(),
                        digest,
                    }
                })
                .collect();
            steps.push(step);
        }
    }
    steps
}

/// `floor: X` from the request's host-context block.
fn host_floor(system: &str) -> Option<String> {
    let system = format!("\n\n{system}");
    let block = system.split("\n\n## Host context\n").nth(1)?;
    let block = block.split("\n\n## ").next()?;
    block
        .lines()
        .find_map(|l| l.strip_prefix("floor: "))
        .map(str::to_string)
}

/// The directive lines of the responder prompt.
pub fn directives(system: &str) -> Vec<String> {
    let system = format!("\n\n{system}");
    let Some(block) = system.split("\n\n## Directives\n").nth(1) else {
        return vec![];
    };
    let block = block.split("\n\n## ").next().unwrap_or("");
    block
        .lines()
        .filter_map(|l| l.strip_prefix("- "))
        .map(str::to_string)
        .collect()
}

/// One quotation per directive, so the answer visibly follows them. The
/// directives are quoted, as a model reciting its instructions would: their
/// numbers are the judge's words, not claims of this model's own, and the
/// narration guard does not judge quoted text.
fn responder_text(req: &Captured) -> String {
    let korean = turnstile::judge::lang::detect(req.user()) == turnstile::judge::lang::Lang::Ko;
    let lead = if korean { "알겠습니다. " } else { "" };
    let d = directives(req.system());
    if d.is_empty() {
        return format!("{lead}I can search the site's panoramas.");
    }
    let quoted: Vec<String> = d.iter().map(|x| format!("“{x}”")).collect();
    format!("{lead}{}", quoted.join(" "))
}

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-fake0001",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": FAKE_MODEL,
        "service_tier": "default",
        "system_fingerprint": "fp_fake01",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        "usage": null,
    })
}

fn usage_chunk() -> Value {
    json!({
        "id": "chatcmpl-fake0001",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": FAKE_MODEL,
        "service_tier": "default",
        "system_fingerprint": "fp_fake01",
        "choices": [],
        "usage": {
            "prompt_tokens": 123,
            "completion_tokens": 45,
            "total_tokens": 168,
            "prompt_tokens_details": {"cached_tokens": 64, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
        },
    })
}

/// Calls the way OpenAI streams them: one call after another, each opened
/// by a chunk with its index, id, type and name, then its arguments in
/// pieces of a few characters.
fn tool_call_events(calls: &[(String, String)], finish: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for (i, (name, args)) in calls.iter().enumerate() {
        let head = json!({"index": i, "id": format!("call_fake{i:02}"), "type": "function", "function": {"name": name, "arguments": ""}});
        if i == 0 {
            out.push(chunk(
                json!({"role": "assistant", "content": null, "tool_calls": [head], "refusal": null}),
                None,
            ));
        } else {
            out.push(chunk(json!({"tool_calls": [head]}), None));
        }
        let chars: Vec<char> = args.chars().collect();
        for piece in chars.chunks(4) {
            let piece: String = piece.iter().collect();
            out.push(chunk(
                json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}),
                None,
            ));
        }
    }
    out.push(chunk(json!({}), Some(finish)));
    out.push(usage_chunk());
    out
}

/// Word-sized content deltas, then the finish and usage chunks.
fn text_events(text: &str) -> Vec<Value> {
    let mut out = vec![chunk(
        json!({"role": "assistant", "content": "", "refusal": null}),
        None,
    )];
    let mut cur = String::new();
    for c in text.chars() {
        cur.push(c);
        if c == ' ' {
            out.push(chunk(json!({"content": std::mem::take(&mut cur)}), None));
        }
    }
    if !cur.is_empty() {
        out.push(chunk(json!({"content": cur}), None));
    }
    out.push(chunk(json!({}), Some("stop")));
    out.push(usage_chunk());
    out
}

enum End {
    /// `data: [DONE]` and a proper end of the body.
    Clean,
    /// The connection breaks after the events.
    Cut,
    /// No more events; the connection stays open and, like a chatty proxy,
    /// sends an SSE comment every 100 ms.
    Stall,
}

fn sse(events: Vec<Value>, end: End) -> Response {
    let mut pieces: Vec<Bytes> = Vec::new();
    let mut wire: Vec<Vec<u8>> = events
        .iter()
        .map(|e| format!("data: {e}\n\n").into_bytes())
        .collect();
    if matches!(end, End::Clean) {
        wire.push(b"data: [DONE]\n\n".to_vec());
    }
    for (i, bytes) in wire.into_iter().enumerate() {
        // Cut each event at an arbitrary byte: the client must buffer.
        let at = (bytes.len() * (i % 5 + 1) / 7).max(1);
        pieces.push(Bytes::copy_from_slice(&bytes[..at]));
        pieces.push(Bytes::copy_from_slice(&bytes[at..]));
    }
    let paced = !matches!(end, End::Clean);
    let body = futures::stream::iter(pieces).then(move |b| async move {
        if paced {
            // Let each piece leave before the break, so the client really
            // sees deltas first.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok::<Bytes, std::io::Error>(b)
    });
    let body = match end {
        End::Clean => Body::from_stream(body),
        End::Cut => Body::from_stream(body.chain(futures::stream::once(async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            Err(std::io::Error::other("connection cut by the fake"))
        }))),
        End::Stall => Body::from_stream(body.chain(futures::stream::unfold((), |_| async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Some((Ok(Bytes::from_static(b": keep-alive\n\n")), ()))
        }))),
    };
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(body)
        .unwrap()
}
