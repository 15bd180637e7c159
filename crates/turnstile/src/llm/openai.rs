//! An OpenAI-compatible chat-completions adapter behind the [`Model`] seam.
//!
//! Both roles stream (`stream: true`, `stream_options.include_usage`):
//!
//! - **planner**: the system message is the planner prompt (`Prompt::render`,
//!   fixed part first so a provider's prompt cache holds across turns), the
//!   user message is the user's text, the tools are OpenAI function
//!   definitions. Tool calls are assembled from deltas (arguments arrive in
//!   pieces, several calls interleave by `index`) and become a [`Plan`] only
//!   when the stream has finished. One extra function,
//!   [`NARROW_PREVIOUS_TOOL`], lets the model say that the user narrows the
//!   previous answer's results ([`Plan::narrows_previous`]); it is never run
//!   and carries nothing: the scope itself comes from turn state.
//! - **responder**: the responder prompt, no tools; content deltas are
//!   forwarded as they arrive.
//!
//! Failure policy (ADR 0007): connect errors, 429 and 5xx are retried with
//! exponential backoff, but only while no byte of a success response has
//! been read — once a stream is open nothing is ever re-sent, so a delta the
//! user has seen is never repeated. A connect timeout and a per-chunk idle
//! timeout bound every wait; a broken or stalled stream is an
//! [`LlmError::Stream`], never a hang.
//!
//! The API key is only ever written into the `Authorization` header (marked
//! sensitive). It has no `Display`, its `Debug` is redacted, and every error
//! message is scrubbed of it before it leaves this module.
//!
//! What the provider says in an error (an HTTP error body, an `error` event
//! mid-stream) is the provider's words, not ours: it may quote part of the
//! key. The user (the `error` frame, the stored thread) gets a fixed message
//! with the status and a reference id; the text is logged, redacted
//! ([`redact_secrets`]), under the same reference. The base URL is printed
//! as scheme, host(:port) and path only: it may hold `user:pass@` or an
//! `?api-key=`.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::{LlmError, Model, Plan, PlanRequest, PlannedCall, Reply, RespondRequest, TextStream};
use crate::mcp::ToolInfo;
use crate::wire::sse::SseDecoder;

/// The function offered to the planner besides the MCP tools. Calling it
/// sets [`Plan::narrows_previous`]; it takes no arguments, because which
/// results are meant is the agent's knowledge, never the model's.
pub const NARROW_PREVIOUS_TOOL: &str = "narrow_previous_results";

/// The function that lets the model say the user wants more of the listing
/// the previous answer showed ([`Plan::continues_previous`]). It takes no
/// arguments: which listing, and where it stopped, are the agent's stored
/// state, so the model never sees or writes a cursor.
pub const SHOW_MORE_TOOL: &str = "show_more_results";

const SHOW_MORE_DESCRIPTION: &str =
    "Call this, alone, when the user asks for more of the list the \
previous answer showed (\"show more\", \"next page\", \"더 보여줘\"). It takes no arguments and \
runs nothing itself: the server fetches the next page of that same list from where it stopped. \
Do not search again for it.";

/// The function that lets the model say the user refers to something on
/// their screen ("this floor"): it names the host-context field and runs
/// nothing. Code fills the field into the calls from the host context, or
/// asks the user which one is meant ([`Plan::from_context`]); the model
/// never guesses it.
pub const HOST_CONTEXT_TOOL: &str = "from_host_context";

const HOST_CONTEXT_DESCRIPTION: &str = "Call this together with the search when the user refers to \
what is on their screen (\"this one\", \"the one I have open\"), once per such field. Leave that argument out \
of the search: the server fills it in from the user's screen, or asks the user which one is meant.";

/// The function that lets the model say the user asks for a download link
/// an earlier answer delivered ([`Plan::shows_link`]). It runs nothing and
/// carries nothing: code shows the stored link while it lives, and the
/// model never sees or writes it.
pub const SHOW_LINK_TOOL: &str = "show_delivered_link";

const SHOW_LINK_DESCRIPTION: &str = "Call this, alone, when the user asks to see again a download \
link that an earlier answer in this conversation gave (\"show me the link again\"). It takes no \
arguments: the server shows the stored link itself, or says it has expired.";

const NARROW_PREVIOUS_DESCRIPTION: &str = "Call this together with the search when the user \
restricts the results of the previous answer (\"only those from April\", \"just the open ones\"). \
It takes no arguments and runs nothing: which results are meant is already known.";

/// An API key. Deliberately not `Display` and not `Serialize`; `Debug`
/// prints a placeholder, so a key cannot reach a log line or an error by
/// accident. It can be deserialised (a literal key in a config file).
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }

    /// The key itself, for the one place that needs it: the request header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

/// Endpoint, model and failure-handling knobs. Its `Debug` shows the base
/// URL as scheme, host and path only.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// The API base, e.g. `https://api.openai.com/v1`; `/chat/completions`
    /// is appended.
    pub base_url: String,
    pub model: String,
    /// Sent as `Authorization: Bearer …`; `None` sends no header (local
    /// servers without authentication).
    pub api_key: Option<ApiKey>,
    /// Bound on opening the TCP/TLS connection.
    pub connect_timeout: Duration,
    /// Bound on the wait for the response headers and for each chunk of the
    /// stream after them.
    pub idle_timeout: Duration,
    /// Extra attempts after the first, for connect errors, 429 and 5xx.
    pub max_retries: u32,
    /// First backoff delay; doubled per attempt, capped at `backoff_max`.
    pub backoff_initial: Duration,
    /// Largest delay we wait before a retry. A `Retry-After` longer than this
    /// ends the retries: the user's turn should fail, not sit silent.
    pub backoff_max: Duration,
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &shown_url(&self.base_url))
            .field("model", &self.model)
            .field("api_key", &self.api_key)
            .field("connect_timeout", &self.connect_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("max_retries", &self.max_retries)
            .field("backoff_initial", &self.backoff_initial)
            .field("backoff_max", &self.backoff_max)
            .finish()
    }
}

impl OpenAiConfig {
    /// Defaults: connect 10 s, idle 60 s, 3 retries, backoff 0.5 s … 8 s.
    pub fn new(
        base_url: impl Into<String>,
        model: impl Into<String>,
        api_key: Option<ApiKey>,
    ) -> Self {
        OpenAiConfig {
            base_url: base_url.into(),
            model: model.into(),
            api_key,
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_retries: 3,
            backoff_initial: Duration::from_millis(500),
            backoff_max: Duration::from_secs(8),
        }
    }
}

/// What went wrong talking to the model endpoint. Messages never contain
/// the API key.
#[derive(Debug, thiserror::Error)]
pub enum OpenAiError {
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
    #[error("cannot reach the model endpoint: {0}")]
    Connect(String),
    #[error("the model request failed: {0}")]
    Send(String),
    #[error("the model endpoint sent no response within {0:?}")]
    HeaderTimeout(Duration),
    /// The provider's error body, as read; only inside this module, until
    /// [`Redactor::error`] logs it (redacted) and turns it into
    /// [`OpenAiError::Status`]. Its message never shows the body.
    #[error("the model provider answered HTTP {status}")]
    StatusBody { status: u16, body: Option<String> },
    /// An HTTP error answer; the provider's text is in the log under
    /// `reference`, redacted.
    #[error("the model provider answered HTTP {status} (ref {reference}); its own words are [redacted] here and logged under that ref")]
    Status { status: u16, reference: String },
    #[error("no data from the model for {0:?}")]
    IdleTimeout(Duration),
    #[error("the connection to the model broke: {0}")]
    Broken(String),
    #[error("the model sent a malformed chunk: {0}")]
    Malformed(String),
    /// An `error` event mid-stream, as read; only inside this module, like
    /// [`OpenAiError::StatusBody`].
    #[error("the model provider reported an error mid-stream")]
    ProviderBody(String),
    /// An `error` event mid-stream; its text is in the log under `reference`.
    #[error("the model provider reported an error mid-stream (ref {reference})")]
    Provider { reference: String },
    #[error("the model stream ended before the model finished")]
    Unfinished,
    #[error("the model stopped at its length limit in the middle of a tool call")]
    TruncatedToolCall,
    #[error("the answer was cut at the model's length limit")]
    TruncatedAnswer,
    #[error("the model's content filter stopped the output")]
    ContentFilter,
    #[error("the model asked for {} after it began answering", .0.join(", "))]
    CallsAfterText(Vec<String>),
}

impl OpenAiError {
    /// True when the error happened after a response stream was opened.
    fn is_stream(&self) -> bool {
        matches!(
            self,
            OpenAiError::IdleTimeout(_)
                | OpenAiError::Broken(_)
                | OpenAiError::Malformed(_)
                | OpenAiError::ProviderBody(_)
                | OpenAiError::Provider { .. }
                | OpenAiError::Unfinished
                | OpenAiError::TruncatedAnswer
                | OpenAiError::TruncatedToolCall
                | OpenAiError::ContentFilter
        )
    }
}

impl From<OpenAiError> for LlmError {
    fn from(e: OpenAiError) -> Self {
        if let OpenAiError::CallsAfterText(tools) = e {
            return LlmError::CallsAfterText { tools };
        }
        if e.is_stream() {
            LlmError::Stream(e.to_string())
        } else {
            LlmError::Request(e.to_string())
        }
    }
}

/// The adapter. Cheap to share behind an `Arc<dyn Model>`.
pub struct OpenAi {
    http: reqwest::Client,
    endpoint: String,
    cfg: OpenAiConfig,
}

impl fmt::Debug for OpenAi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAi")
            .field("endpoint", &shown_url(&self.endpoint))
            .field("model", &self.cfg.model)
            .finish_non_exhaustive()
    }
}

impl OpenAi {
    pub fn new(cfg: OpenAiConfig) -> Result<OpenAi, OpenAiError> {
        let http = reqwest::Client::builder()
            .connect_timeout(cfg.connect_timeout)
            .build()
            .map_err(|e| OpenAiError::Client(describe(e)))?;
        let endpoint = endpoint(&cfg.base_url);
        Ok(OpenAi {
            http,
            endpoint,
            cfg,
        })
    }

    pub fn config(&self) -> &OpenAiConfig {
        &self.cfg
    }

    fn scrub(&self, text: String) -> String {
        self.redactor().text(text)
    }

    fn scrub_err(&self, e: OpenAiError) -> OpenAiError {
        self.redactor().error(e)
    }

    fn redactor(&self) -> Redactor {
        Redactor {
            key: self.cfg.api_key.clone(),
        }
    }

    fn body(&self, messages: Vec<Value>, tools: &[WireTool]) -> Value {
        let mut body = json!({
            "model": self.cfg.model,
            "stream": true,
            "stream_options": {"include_usage": true},
            "messages": messages,
        });
        // An empty `tools` array is rejected by some providers; no tools
        // means no key at all.
        if !tools.is_empty() {
            let mut defs: Vec<Value> = tools.iter().map(WireTool::definition).collect();
            // Last, after the MCP tools, so the list is stable per tool set.
            defs.push(json!({"type": "function", "function": {
                "name": NARROW_PREVIOUS_TOOL,
                "description": NARROW_PREVIOUS_DESCRIPTION,
                "parameters": {"type": "object", "properties": {}},
            }}));
            defs.push(json!({"type": "function", "function": {
                "name": SHOW_MORE_TOOL,
                "description": SHOW_MORE_DESCRIPTION,
                "parameters": {"type": "object", "properties": {}},
            }}));
            defs.push(json!({"type": "function", "function": {
                "name": SHOW_LINK_TOOL,
                "description": SHOW_LINK_DESCRIPTION,
                "parameters": {"type": "object", "properties": {}},
            }}));
            defs.push(json!({"type": "function", "function": {
                "name": HOST_CONTEXT_TOOL,
                "description": HOST_CONTEXT_DESCRIPTION,
                "parameters": {"type": "object", "properties": {
                    "field": {"type": "string", "enum": ["floor", "project"]},
                }, "required": ["field"]},
            }}));
            body["tools"] = Value::Array(defs);
            body["tool_choice"] = json!("auto");
        }
        body
    }

    /// Sends the request, retrying connect errors, 429 and 5xx before any
    /// byte of a success response is read; returns the open stream.
    async fn open(&self, body: &Value, role: &'static str) -> Result<ChunkReader, OpenAiError> {
        let mut attempt: u32 = 0;
        loop {
            let mut req = self.http.post(&self.endpoint).json(body);
            if let Some(key) = &self.cfg.api_key {
                // `bearer_auth` marks the header sensitive (hidden from Debug).
                req = req.bearer_auth(key.expose());
            }
            // The turn's trace (W3C `traceparent`), for a gateway's spans.
            for (key, value) in crate::mcp::trace_context::current() {
                req = req.header(key, value);
            }
            let sent = tokio::time::timeout(self.cfg.idle_timeout, req.send()).await;
            let (err, retry_after) = match sent {
                Err(_) => return Err(OpenAiError::HeaderTimeout(self.cfg.idle_timeout)),
                Ok(Err(e)) if e.is_connect() => {
                    (OpenAiError::Connect(self.scrub(describe(e))), None)
                }
                Ok(Err(e)) => return Err(self.scrub_err(OpenAiError::Send(describe(e)))),
                Ok(Ok(resp)) if resp.status().is_success() => {
                    return Ok(ChunkReader::new(resp, self.cfg.idle_timeout));
                }
                Ok(Ok(resp)) => {
                    let status = resp.status();
                    let retry_after = retry_after(&resp);
                    // Providers quote (parts of) the rejected key here: the
                    // body goes to the log only, redacted, under a reference.
                    let body = error_detail(resp, self.cfg.idle_timeout).await;
                    let err = self.scrub_err(OpenAiError::StatusBody {
                        status: status.as_u16(),
                        body,
                    });
                    if !(status.as_u16() == 429 || status.is_server_error()) {
                        return Err(err);
                    }
                    (err, retry_after)
                }
            };
            if attempt >= self.cfg.max_retries {
                return Err(err);
            }
            let delay = match retry_after {
                Some(d) if d > self.cfg.backoff_max => {
                    tracing::warn!(
                        role,
                        attempt,
                        retry_after_ms = d.as_millis() as u64,
                        "model endpoint asks to wait longer than backoff_max; giving up"
                    );
                    return Err(err);
                }
                Some(d) => d,
                None => backoff(attempt, self.cfg.backoff_initial, self.cfg.backoff_max),
            };
            attempt += 1;
            tracing::warn!(role, attempt, delay_ms = delay.as_millis() as u64, error = %err, "retrying the model request");
            tokio::time::sleep(delay).await;
        }
    }

    /// One planning round. With `may_answer`, a response whose first
    /// words come before any tool call is the turn's answer: it is returned
    /// streaming, as the responder's would be (issue 19 §5).
    async fn step_inner(&self, req: &PlanRequest, may_answer: bool) -> Result<Reply, OpenAiError> {
        let tools = wire_tools(&req.tools);
        let body = self.body(plan_messages(req, &tools), &tools);
        let mut reader = self.open(&body, "planner").await?;
        let mut calls = ToolCallAssembler::default();
        let mut content = String::new();
        let mut finish: Option<String> = None;
        let mut usage = None;
        let mut done = false;
        while let Some(event) = reader.next().await? {
            let chunk = match event {
                Event::Done => {
                    done = true;
                    break;
                }
                Event::Chunk(c) => c,
            };
            if chunk.usage.is_some() {
                usage = chunk.usage;
            }
            for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
                if let Some(text) = choice.delta.content {
                    content += &text;
                }
                // A refusal is a sentence for the user like any other.
                if let Some(text) = choice.delta.refusal {
                    content += &text;
                }
                for d in choice.delta.tool_calls.unwrap_or_default() {
                    calls.push(&d);
                }
                if choice.finish_reason.is_some() {
                    finish = choice.finish_reason;
                }
            }
            // Words before any call: the model is answering. Leading
            // whitespace alone decides nothing (some models send "\n\n"
            // before their calls).
            if may_answer && calls.calls.is_empty() && !content.trim().is_empty() {
                let state = Responding {
                    reader,
                    pending: Some(content),
                    late: ToolCallAssembler::default(),
                    finish,
                    usage,
                    redactor: self.redactor(),
                    model: self.cfg.model.clone(),
                };
                return Ok(Reply::Answer(answer_stream(state)));
            }
        }
        log_usage(
            &self.cfg.model,
            "planner",
            usage.as_ref(),
            finish.as_deref(),
        );
        match finish.as_deref() {
            // A plan cut at the length limit may have lost calls (or the
            // narrowing marker) even if every call it has is complete: a
            // truncated plan is never read as "no tool needed".
            Some("length") => return Err(OpenAiError::TruncatedToolCall),
            Some("content_filter") => return Err(OpenAiError::ContentFilter),
            None if !done => return Err(OpenAiError::Unfinished),
            _ => {}
        }
        Ok(Reply::Plan(self.read_plan(calls, &content, &tools)))
    }

    /// The calls and markers of a finished planning round.
    fn read_plan(&self, calls: ToolCallAssembler, content: &str, tools: &[WireTool]) -> Plan {
        let (marks, calls): (Vec<PlannedCall>, Vec<PlannedCall>) =
            calls.into_calls().into_iter().partition(|c| {
                c.tool == NARROW_PREVIOUS_TOOL
                    || c.tool == HOST_CONTEXT_TOOL
                    || c.tool == SHOW_LINK_TOOL
                    || c.tool == SHOW_MORE_TOOL
            });
        let narrows_previous = marks.iter().any(|c| c.tool == NARROW_PREVIOUS_TOOL);
        let continues_previous = marks.iter().any(|c| c.tool == SHOW_MORE_TOOL);
        let shows_link = marks.iter().any(|c| c.tool == SHOW_LINK_TOOL);
        let mut from_context: Vec<String> = marks
            .iter()
            .filter(|c| c.tool == HOST_CONTEXT_TOOL)
            .filter_map(|c| c.args.get("field").and_then(Value::as_str))
            .map(str::to_string)
            .collect();
        from_context.dedup();
        let calls: Vec<PlannedCall> = calls
            .into_iter()
            .map(|mut c| {
                // Back from the wire name to the tool's own name.
                if let Some(t) = tools.iter().find(|t| t.wire == c.tool) {
                    c.tool = t.name.clone();
                }
                c
            })
            .collect();
        let note = if calls.is_empty() && continues_previous {
            "show more of the previous listing".to_string()
        } else if calls.is_empty() && shows_link {
            "show the delivered link".to_string()
        } else if calls.is_empty() {
            "no tool needed".to_string()
        } else {
            let text: String = content.trim().chars().take(200).collect();
            if text.is_empty() {
                format!("tool calls proposed by {}", self.cfg.model)
            } else {
                text
            }
        };
        Plan {
            calls,
            note,
            narrows_previous,
            continues_previous,
            from_context,
            shows_link,
        }
    }
}

#[async_trait::async_trait]
impl Model for OpenAi {
    fn name(&self) -> &str {
        &self.cfg.model
    }

    fn provider(&self) -> &str {
        "openai"
    }

    async fn plan(&self, req: &PlanRequest) -> Result<Plan, LlmError> {
        match self.step_inner(req, false).await {
            Ok(Reply::Plan(p)) => Ok(p),
            Ok(Reply::Answer(_)) => Err(LlmError::Request(
                "a planning round that may not answer answered".into(),
            )),
            Err(e) => Err(LlmError::from(self.scrub_err(e))),
        }
    }

    fn requests_to_answer(&self) -> u64 {
        1
    }

    async fn step(&self, req: &PlanRequest, _answer: &RespondRequest) -> Result<Reply, LlmError> {
        self.step_inner(req, true)
            .await
            .map_err(|e| LlmError::from(self.scrub_err(e)))
    }

    async fn respond(&self, req: &RespondRequest) -> Result<TextStream, LlmError> {
        let messages = vec![
            json!({"role": "system", "content": req.prompt.render()}),
            json!({"role": "user", "content": req.user_text}),
        ];
        let body = self.body(messages, &[]);
        let reader = self
            .open(&body, "responder")
            .await
            .map_err(|e| LlmError::from(self.scrub_err(e)))?;
        let state = Responding {
            reader,
            pending: None,
            late: ToolCallAssembler::default(),
            finish: None,
            usage: None,
            redactor: self.redactor(),
            model: self.cfg.model.clone(),
        };
        Ok(answer_stream(state))
    }
}

fn answer_stream(state: Responding) -> TextStream {
    Box::pin(futures::stream::unfold(Some(state), |st| async move {
        let mut st = st?;
        match st.next_text().await {
            Ok(Some(text)) => Some((Ok(text), Some(st))),
            Ok(None) => None,
            Err(e) => Some((Err(LlmError::from(st.redactor.error(e))), None)),
        }
    }))
}

/// Removes the key from messages that may quote something the server or a
/// library said, and turns the provider's own words into a reference.
#[derive(Clone)]
struct Redactor {
    key: Option<ApiKey>,
}

impl Redactor {
    fn text(&self, text: String) -> String {
        redact_secrets(&text, self.key.as_ref().map(ApiKey::expose))
    }

    fn error(&self, e: OpenAiError) -> OpenAiError {
        use OpenAiError::*;
        match e {
            Client(m) => Client(self.text(m)),
            Connect(m) => Connect(self.text(m)),
            Send(m) => Send(self.text(m)),
            StatusBody { status, body } => {
                let reference = self.log_provider_text(Some(status), body);
                Status { status, reference }
            }
            ProviderBody(m) => Provider {
                reference: self.log_provider_text(None, Some(m)),
            },
            Broken(m) => Broken(self.text(m)),
            Malformed(m) => Malformed(self.text(m)),
            other => other,
        }
    }

    /// Logs the provider's text, redacted, under a new reference id, and
    /// returns the id: the user is shown the id, never the text.
    fn log_provider_text(&self, status: Option<u16>, body: Option<String>) -> String {
        let reference = reference_id();
        let body = body.map(|b| self.text(b)).unwrap_or_default();
        match status {
            Some(status) => tracing::warn!(
                reference = %reference,
                status,
                body = %body,
                "the model provider answered with an error (its body, redacted)"
            ),
            None => tracing::warn!(
                reference = %reference,
                body = %body,
                "the model provider reported an error mid-stream (its text, redacted)"
            ),
        }
        reference
    }
}

/// A short random id that ties what the user is shown to a log line.
fn reference_id() -> String {
    let hex = uuid::Uuid::new_v4().simple().to_string();
    hex[..8].to_string()
}

/// The shortest piece of the key that takes its whole word with it:
/// providers echo the last 4 or 5 characters (`…E123`, `****E123`), and a
/// piece as short as that, glued to anything, is still a piece of the key.
const KEY_WORD_MIN: usize = 4;

const REDACTED: &str = "[redacted]";

/// `text` with every secret it may quote replaced by `[redacted]`:
///
/// - every whitespace-delimited word that holds a piece of `key` of
///   [`KEY_WORD_MIN`] characters or more (the whole key if it is shorter)
///   anywhere inside it, compared without ASCII case, goes **whole**,
///   whatever its neighbours: `xE123y`, `keyE1234abc`, `(sk-ab12`,
///   `"id":"E1234"` (issue 34 item 9). The word, not the piece: what stands
///   glued to a piece of the key is not ours to judge as harmless, and a
///   boundary drawn inside a word is one a provider's next format crosses;
/// - a provider's masked echo: a masking span (`**`, `••`, `xxxx`, `..`,
///   `…`) with the key characters on either side of it (`sk-abc***E123`,
///   `sk-...E123`, `****E123`), when a side is a piece of the key or an
///   `sk-` token — the span and both sides together;
/// - any `sk-…`-shaped token (`sk-` at a word start, then key characters);
/// - the token after any `Bearer ` (case-insensitive).
///
/// What stays: pieces of 1–3 characters (`sk-`, a last-3 echo: no secret
/// on their own), and a key spread out with whitespace inside it.
pub fn redact_secrets(text: &str, key: Option<&str>) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut masked = vec![false; chars.len()];
    let token_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_');
    let lower: Vec<char> = chars.iter().map(|c| c.to_ascii_lowercase()).collect();
    let starts = |i: usize, word: &str| {
        word.chars()
            .enumerate()
            .all(|(k, w)| lower.get(i + k) == Some(&w))
    };
    let word_start = |i: usize| i == 0 || !token_char(chars[i - 1]);
    let key: Vec<char> = key.unwrap_or_default().chars().collect();
    // Whether `piece` is a piece of the key.
    let in_key = |piece: &[char]| {
        !piece.is_empty()
            && piece.len() <= key.len()
            && key.windows(piece.len()).any(|w| w == piece)
    };
    if !key.is_empty() {
        let n = KEY_WORD_MIN.min(key.len());
        let key_lower: Vec<char> = key.iter().map(|c| c.to_ascii_lowercase()).collect();
        let pieces: std::collections::HashSet<&[char]> = key_lower.windows(n).collect();
        let mut i = 0;
        while i < chars.len() {
            if chars[i].is_whitespace() {
                i += 1;
                continue;
            }
            let end = (i..chars.len())
                .find(|&k| chars[k].is_whitespace())
                .unwrap_or(chars.len());
            if lower[i..end].windows(n).any(|w| pieces.contains(w)) {
                masked[i..end].iter_mut().for_each(|m| *m = true);
            }
            i = end;
        }
    }
    // Masked echoes: a span of masking with the key characters beside it.
    let word_min = KEY_WORD_MIN.min(key.len().max(1));
    let mut i = 0;
    while i < chars.len() {
        let Some(end) = masking_span(&chars, i) else {
            i += 1;
            continue;
        };
        let strong = chars[i..end]
            .iter()
            .any(|c| matches!(c, '*' | '•' | 'x' | 'X'));
        let beside = |k: usize| token_char(chars[k]) && masking_span(&chars, k).is_none();
        let mut from = i;
        while from > 0 && beside(from - 1) {
            from -= 1;
        }
        let mut to = end;
        while to < chars.len() && beside(to) {
            to += 1;
        }
        let (left, right) = (&chars[from..i], &chars[end..to]);
        let left_key = in_key(left) || (word_start(from) && starts(from, "sk-"));
        let right_key = in_key(right);
        let echo = if strong {
            left_key || right_key
        } else {
            (left_key && (left.len() >= word_min || right_key))
                || (right_key && (right.len() >= word_min || left_key))
        };
        if echo {
            masked[from..to].iter_mut().for_each(|m| *m = true);
        }
        i = end;
    }
    let bearer_char = |c: char| c.is_ascii_alphanumeric() || "-._~+/=".contains(c);
    for i in 0..chars.len() {
        if word_start(i) && starts(i, "sk-") {
            let end = (i + 3..chars.len())
                .find(|&k| !token_char(chars[k]))
                .unwrap_or(chars.len());
            if end > i + 3 {
                masked[i..end].iter_mut().for_each(|m| *m = true);
            }
        }
        if word_start(i) && starts(i, "bearer ") {
            let from = i + "bearer ".len();
            let end = (from..chars.len())
                .find(|&k| !bearer_char(chars[k]))
                .unwrap_or(chars.len());
            masked[from..end].iter_mut().for_each(|m| *m = true);
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut in_mask = false;
    for (c, m) in chars.iter().zip(&masked) {
        match (m, in_mask) {
            (true, false) => out += REDACTED,
            (false, _) => out.push(*c),
            (true, true) => {}
        }
        in_mask = *m;
    }
    out
}

/// The end of the masking span that starts at `i`, if one does: `*` or `•`
/// twice or more, `x` or `X` four times or more, `.` twice or more, or
/// `…`; runs of these next to each other make one span.
fn masking_span(chars: &[char], i: usize) -> Option<usize> {
    let run = |k: usize| {
        let c = *chars.get(k)?;
        let n = chars[k..].iter().take_while(|&&d| d == c).count();
        let least = match c {
            '*' | '•' | '.' => 2,
            'x' | 'X' => 4,
            '…' => 1,
            _ => return None,
        };
        (n >= least).then_some(k + n)
    };
    let mut end = run(i)?;
    while let Some(next) = run(end) {
        end = next;
    }
    Some(end)
}

/// `…/chat/completions` under the base URL; a query (`?api-version=…`,
/// `?api-key=…`) stays a query, after the path.
fn endpoint(base_url: &str) -> String {
    match reqwest::Url::parse(base_url.trim()) {
        Ok(mut url) => {
            let path = format!("{}/chat/completions", url.path().trim_end_matches('/'));
            url.set_path(&path);
            url.to_string()
        }
        Err(_) => format!("{}/chat/completions", base_url.trim_end_matches('/')),
    }
}

/// `url` as scheme, host(:port) and path: never `user:pass@` or a query.
pub fn shown_url(url: &str) -> String {
    crate::mcp::client::redact_url(url).unwrap_or_else(|| "<url>".into())
}

struct Responding {
    reader: ChunkReader,
    /// Text read before the answer was known to be one.
    pending: Option<String>,
    /// Calls the model asked for after its text began (not run).
    late: ToolCallAssembler,
    finish: Option<String>,
    usage: Option<Usage>,
    redactor: Redactor,
    model: String,
}

impl Responding {
    /// The next non-empty text delta; `None` at a clean end.
    async fn next_text(&mut self) -> Result<Option<String>, OpenAiError> {
        if let Some(text) = self.pending.take() {
            return Ok(Some(text));
        }
        loop {
            let chunk = match self.reader.next().await? {
                Some(Event::Chunk(c)) => c,
                Some(Event::Done) => return self.end(true),
                None => return self.end(false),
            };
            if chunk.usage.is_some() {
                self.usage = chunk.usage;
            }
            let mut text = String::new();
            for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
                if let Some(t) = choice.delta.content {
                    text += &t;
                }
                // A refusal is a sentence for the user like any other.
                if let Some(t) = choice.delta.refusal {
                    text += &t;
                }
                // A call after the text began is not run; it is read only
                // to say what was dropped.
                for d in choice.delta.tool_calls.unwrap_or_default() {
                    self.late.push(&d);
                }
                if choice.finish_reason.is_some() {
                    self.finish = choice.finish_reason;
                }
            }
            if !text.is_empty() {
                return Ok(Some(text));
            }
        }
    }

    fn end(&mut self, done: bool) -> Result<Option<String>, OpenAiError> {
        let finish = self.finish.as_deref();
        log_usage(&self.model, "responder", self.usage.as_ref(), finish);
        let late = std::mem::take(&mut self.late).into_calls();
        if !late.is_empty() {
            let mut tools: Vec<String> = late.into_iter().map(|c| c.tool).collect();
            tools.dedup();
            return Err(OpenAiError::CallsAfterText(tools));
        }
        match finish {
            Some("length") => Err(OpenAiError::TruncatedAnswer),
            Some("content_filter") => Err(OpenAiError::ContentFilter),
            None if !done => Err(OpenAiError::Unfinished),
            _ => Ok(None),
        }
    }
}

// ---------------------------------------------------------------------------
// Tools on the wire

/// A tool as the provider sees it. OpenAI function names must match
/// `^[a-zA-Z0-9_-]{1,64}$`; MCP tool names need not, so names are mapped and
/// mapped back.
struct WireTool {
    wire: String,
    name: String,
    description: String,
    parameters: Value,
}

impl WireTool {
    fn definition(&self) -> Value {
        let mut f = json!({"name": self.wire, "parameters": self.parameters});
        if !self.description.is_empty() {
            f["description"] = json!(self.description);
        }
        json!({"type": "function", "function": f})
    }
}

/// The planner's conversation in the standard tools-loop form: the system
/// prompt, the thread's earlier turns (user text, the answer shown and one
/// line per card), the user's message, then for each earlier step of this
/// turn an assistant message with `tool_calls` and one `tool` message per
/// call, carrying the judge's bounded digest (never the raw result) under
/// the matching `tool_call_id`.
fn plan_messages(req: &PlanRequest, tools: &[WireTool]) -> Vec<Value> {
    let mut out = vec![json!({"role": "system", "content": req.prompt.head()})];
    for turn in &req.history {
        out.push(json!({"role": "user", "content": turn.user}));
        let mut answer = turn.answer.clone();
        for card in &turn.cards {
            answer += &format!("\n[card] {card}");
        }
        out.push(json!({"role": "assistant", "content": answer}));
    }
    out.push(json!({"role": "user", "content": req.user_text}));
    let wire_name = |tool: &str| {
        tools
            .iter()
            .find(|t| t.name == tool)
            .map(|t| t.wire.clone())
            .unwrap_or_else(|| tool.to_string())
    };
    for step in &req.steps {
        let calls: Vec<Value> = step
            .iter()
            .map(|c| {
                json!({"id": c.id, "type": "function", "function": {
                    "name": wire_name(&c.tool),
                    "arguments": Value::Object(c.args.clone()).to_string(),
                }})
            })
            .collect();
        out.push(json!({"role": "assistant", "content": null, "tool_calls": calls}));
        for c in step {
            out.push(json!({"role": "tool", "tool_call_id": c.id, "content": c.digest.render()}));
        }
    }
    // The turn's own blocks (host context, directives, digests) last: the
    // fixed prompt, the tools and the history before them stay a
    // byte-identical prefix for the provider's prompt cache (ADR 0022).
    let blocks = req.prompt.render_blocks();
    if !blocks.is_empty() {
        out.push(json!({"role": "system", "content": blocks.trim_start()}));
    }
    out
}

fn wire_tools(tools: &[ToolInfo]) -> Vec<WireTool> {
    let mut out: Vec<WireTool> = Vec::with_capacity(tools.len());
    let taken = |out: &[WireTool], w: &str| {
        w == NARROW_PREVIOUS_TOOL
            || w == HOST_CONTEXT_TOOL
            || w == SHOW_MORE_TOOL
            || w == SHOW_LINK_TOOL
            || out.iter().any(|t| t.wire == w)
    };
    for t in tools {
        let mut base: String = t
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .take(60)
            .collect();
        if base.is_empty() {
            base = "tool".into();
        }
        let mut wire = base.clone();
        let mut n = 2;
        while taken(&out, &wire) {
            wire = format!("{base}_{n}");
            n += 1;
        }
        // The provider requires an object schema; MCP promises one, but a
        // server that sends something else should not break every request.
        let parameters = match &*t.input_schema {
            Value::Object(m) if m.get("type").and_then(Value::as_str) == Some("object") => {
                (*t.input_schema).clone()
            }
            _ => json!({"type": "object", "properties": {}}),
        };
        out.push(WireTool {
            wire,
            name: t.name.clone(),
            description: t.description.clone(),
            parameters,
        });
    }
    out
}

// ---------------------------------------------------------------------------
// Tool-call assembly

#[derive(Debug, Default, Clone, Deserialize)]
struct ToolCallDelta {
    /// Which call this piece belongs to; absent with some providers.
    index: Option<usize>,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Debug, Default, Clone, Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Debug, Default)]
struct PartialCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Collects tool-call pieces: a call's name and arguments arrive split over
/// many chunks, and calls of one response interleave by `index`.
#[derive(Debug, Default)]
struct ToolCallAssembler {
    calls: Vec<PartialCall>,
    by_index: HashMap<usize, usize>,
}

impl ToolCallAssembler {
    fn push(&mut self, d: &ToolCallDelta) {
        let slot = match d.index {
            Some(i) => *self.by_index.entry(i).or_insert_with(|| {
                self.calls.push(PartialCall::default());
                self.calls.len() - 1
            }),
            // Without an index, an id starts a new call; anything else
            // continues the last one.
            None if d.id.is_some() || self.calls.is_empty() => {
                self.calls.push(PartialCall::default());
                self.calls.len() - 1
            }
            None => self.calls.len() - 1,
        };
        let call = &mut self.calls[slot];
        if let (None, Some(id)) = (&call.id, &d.id) {
            call.id = Some(id.clone());
        }
        if let Some(f) = &d.function {
            if let Some(n) = &f.name {
                call.name += n;
            }
            if let Some(a) = &f.arguments {
                call.arguments += a;
            }
        }
    }

    /// Whether every call's arguments are a complete JSON value (a call cut
    /// at the length limit is not).
    #[cfg(test)]
    fn arguments_complete(&self) -> bool {
        self.calls.iter().all(|c| {
            c.arguments.trim().is_empty() || serde_json::from_str::<Value>(&c.arguments).is_ok()
        })
    }

    fn into_calls(self) -> Vec<PlannedCall> {
        self.calls
            .into_iter()
            .map(|c| {
                let (args, invalid_args) = parse_arguments(&c.arguments);
                PlannedCall {
                    id: c.id,
                    tool: c.name,
                    args,
                    invalid_args,
                }
            })
            .collect()
    }
}

/// A call's arguments must be a JSON object; empty means no arguments.
fn parse_arguments(raw: &str) -> (Map<String, Value>, Option<String>) {
    if raw.trim().is_empty() {
        return (Map::new(), None);
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(m)) => (m, None),
        Ok(other) => (
            Map::new(),
            Some(format!(
                "the arguments are a JSON {}, not an object",
                json_kind(&other)
            )),
        ),
        Err(e) => (
            Map::new(),
            Some(format!("the arguments are not valid JSON ({e})")),
        ),
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

// ---------------------------------------------------------------------------
// The stream: bytes → SSE events → chunks

#[derive(Debug, Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    #[serde(default)]
    index: u32,
    #[serde(default)]
    delta: Delta,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Debug, Clone, Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    total_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptTokensDetails>,
}

#[derive(Debug, Clone, Deserialize)]
struct PromptTokensDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

enum Event {
    Chunk(Chunk),
    Done,
}

struct ChunkReader {
    body: BoxStream<'static, reqwest::Result<Vec<u8>>>,
    sse: SseDecoder,
    idle: Duration,
    /// When the silence since the last *event* becomes too long. Comment
    /// lines (`: keep-alive`, a proxy's "processing") do not move it, so a
    /// stalled generation behind a chatty proxy still times out.
    deadline: tokio::time::Instant,
    eof: bool,
}

impl ChunkReader {
    fn new(resp: reqwest::Response, idle: Duration) -> Self {
        ChunkReader {
            body: resp.bytes_stream().map(|r| r.map(|b| b.to_vec())).boxed(),
            sse: SseDecoder::new(),
            idle,
            deadline: tokio::time::Instant::now() + idle,
            eof: false,
        }
    }

    /// The next chunk or `[DONE]`; `None` when the body ended.
    async fn next(&mut self) -> Result<Option<Event>, OpenAiError> {
        loop {
            // Only an event (never a comment line) moves the deadline.
            if let Some(event) = self.sse.next_event() {
                self.deadline = tokio::time::Instant::now() + self.idle;
                return parse_event(&event.data).map(Some);
            }
            if self.eof {
                return Ok(None);
            }
            match tokio::time::timeout_at(self.deadline, self.body.next()).await {
                Err(_) => return Err(OpenAiError::IdleTimeout(self.idle)),
                Ok(None) => {
                    self.eof = true;
                    self.sse.finish();
                }
                Ok(Some(Err(e))) => return Err(OpenAiError::Broken(describe(e))),
                Ok(Some(Ok(bytes))) => self.sse.push(&bytes),
            }
        }
    }
}

fn parse_event(data: &str) -> Result<Event, OpenAiError> {
    if data.trim() == "[DONE]" {
        return Ok(Event::Done);
    }
    let value: Value =
        serde_json::from_str(data).map_err(|e| OpenAiError::Malformed(e.to_string()))?;
    if let Some(err) = value.get("error") {
        let msg = err
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| err.to_string());
        return Err(OpenAiError::ProviderBody(bounded(&msg)));
    }
    serde_json::from_value(value)
        .map(Event::Chunk)
        .map_err(|e| OpenAiError::Malformed(e.to_string()))
}

// ---------------------------------------------------------------------------
// Helpers

/// A reqwest error as one line: its chain of causes, without the URL.
fn describe(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut out = e.to_string();
    let mut cur = std::error::Error::source(&e);
    while let Some(err) = cur {
        out += ": ";
        out += &err.to_string();
        cur = err.source();
    }
    out
}

/// Token usage as fields only: no prompt or answer text.
fn log_usage(model: &str, role: &'static str, usage: Option<&Usage>, finish: Option<&str>) {
    let Some(u) = usage else {
        tracing::debug!(role, model, "the model sent no usage figures");
        return;
    };
    // On the request's `chat` span (agent::spans), as the GenAI
    // conventions name them.
    let span = tracing::Span::current();
    span.record("gen_ai.usage.input_tokens", u.prompt_tokens);
    span.record("gen_ai.usage.output_tokens", u.completion_tokens);
    let cached = u
        .prompt_tokens_details
        .as_ref()
        .and_then(|d| d.cached_tokens)
        .unwrap_or(0);
    tracing::info!(
        role,
        model,
        prompt_tokens = u.prompt_tokens,
        completion_tokens = u.completion_tokens,
        total_tokens = u.total_tokens,
        cached_tokens = cached,
        finish_reason = finish.unwrap_or(""),
        "model usage"
    );
}

/// Provider error text, at most 300 characters, on one line.
fn bounded(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(300)
        .collect()
}

fn retry_after(resp: &reqwest::Response) -> Option<Duration> {
    resp.headers()
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

/// The provider's `error.message`, if the body says one (else the body),
/// bounded — for the log, after redaction, never for the user.
async fn error_detail(resp: reqwest::Response, wait: Duration) -> Option<String> {
    let text = tokio::time::timeout(wait, resp.text()).await.ok()?.ok()?;
    let msg = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or(text);
    let msg = bounded(msg.trim());
    (!msg.is_empty()).then_some(msg)
}

/// Exponential backoff with jitter: `initial · 2^attempt`, capped, then a
/// random point in its upper half so that clients rate-limited together do
/// not come back together.
fn backoff(attempt: u32, initial: Duration, max: Duration) -> Duration {
    let exp = initial.saturating_mul(1u32.checked_shl(attempt.min(16)).unwrap_or(u32::MAX));
    let capped = exp.min(max);
    let jitter = (uuid::Uuid::new_v4().as_u128() % 1000) as u32; // 0..1000
    capped / 2 + (capped / 2) * jitter / 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(
        index: Option<usize>,
        id: Option<&str>,
        name: Option<&str>,
        args: Option<&str>,
    ) -> ToolCallDelta {
        ToolCallDelta {
            index,
            id: id.map(str::to_string),
            function: Some(FunctionDelta {
                name: name.map(str::to_string),
                arguments: args.map(str::to_string),
            }),
        }
    }

    #[test]
    fn assembles_two_interleaved_calls_from_pieces() {
        let mut a = ToolCallAssembler::default();
        a.push(&delta(
            Some(0),
            Some("call_a"),
            Some("search_photos"),
            Some(""),
        ));
        a.push(&delta(Some(0), None, None, Some("{\"que")));
        a.push(&delta(
            Some(1),
            Some("call_b"),
            Some("get_photo"),
            Some("{\"id\":"),
        ));
        a.push(&delta(
            Some(0),
            None,
            None,
            Some("ry\": \"safety\", \"floor\": 3}"),
        ));
        a.push(&delta(Some(1), None, None, Some(" \"PANO-1\"}")));
        assert!(a.arguments_complete());
        let calls = a.into_calls();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].tool, "search_photos");
        assert_eq!(
            Value::Object(calls[0].args.clone()),
            json!({"query": "safety", "floor": 3})
        );
        assert_eq!(calls[1].tool, "get_photo");
        assert_eq!(
            Value::Object(calls[1].args.clone()),
            json!({"id": "PANO-1"})
        );
        assert!(calls.iter().all(|c| c.invalid_args.is_none()));
    }

    #[test]
    fn calls_without_index_follow_their_id() {
        let mut a = ToolCallAssembler::default();
        a.push(&delta(None, Some("x"), Some("a"), Some("{\"k\":")));
        a.push(&delta(None, None, None, Some("1}")));
        a.push(&delta(None, Some("y"), Some("b"), Some("{}")));
        let calls = a.into_calls();
        assert_eq!(
            calls.iter().map(|c| c.tool.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(calls[0].args.get("k"), Some(&json!(1)));
    }

    #[test]
    fn arguments_that_are_not_an_object_are_marked_not_run() {
        let cases = [
            ("{not json", "not valid JSON"),
            ("[1, 2]", "JSON array, not an object"),
            ("\"floor 3\"", "JSON string"),
            ("null", "JSON null"),
        ];
        for (raw, why) in cases {
            let (args, invalid) = parse_arguments(raw);
            assert!(args.is_empty(), "{raw}");
            let invalid = invalid.unwrap_or_default();
            assert!(invalid.contains(why), "{raw}: {invalid}");
        }
        assert_eq!(parse_arguments("  "), (Map::new(), None));
        let mut cut = ToolCallAssembler::default();
        cut.push(&delta(
            Some(0),
            Some("c"),
            Some("search_photos"),
            Some("{\"query\": \"saf"),
        ));
        assert!(!cut.arguments_complete());
    }

    /// The provider's stream through the shared decoder and `parse_event`:
    /// CRLF lines, a keep-alive comment, a split UTF-8 sequence and `[DONE]`
    /// give the same events for any chunking of the bytes.
    #[test]
    fn a_provider_stream_survives_any_split_of_the_bytes() {
        let wire = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"안녕 하세요\"}}]}\r\n\r\n\
                    : keep-alive\n\n\
                    event: message\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}\n\n\
                    data: [DONE]\n\n";
        let bytes = wire.as_bytes();
        for step in 1..=bytes.len() {
            let mut d = SseDecoder::new();
            let mut events = Vec::new();
            for piece in bytes.chunks(step) {
                d.push(piece);
                while let Some(e) = d.next_event() {
                    events.push(parse_event(&e.data).expect("a well-formed chunk"));
                }
            }
            d.finish();
            while let Some(e) = d.next_event() {
                events.push(parse_event(&e.data).expect("a well-formed chunk"));
            }
            assert_eq!(events.len(), 3, "split every {step} bytes");
            match &events[0] {
                Event::Chunk(c) => assert_eq!(
                    c.choices[0].delta.content.as_deref(),
                    Some("안녕 하세요"),
                    "split every {step} bytes"
                ),
                Event::Done => panic!("split every {step} bytes: content chunk expected"),
            }
            match &events[1] {
                Event::Chunk(c) => {
                    assert_eq!(c.usage.as_ref().map(|u| u.total_tokens), Some(5))
                }
                Event::Done => panic!("split every {step} bytes: usage chunk expected"),
            }
            assert!(matches!(events[2], Event::Done), "split every {step} bytes");
        }
    }

    #[test]
    fn a_provider_error_mid_stream_is_not_a_chunk() {
        let err = parse_event("{\"error\":{\"message\":\"overloaded\"}}");
        assert!(matches!(err, Err(OpenAiError::ProviderBody(m)) if m == "overloaded"));
        assert!(matches!(
            parse_event("{not json"),
            Err(OpenAiError::Malformed(_))
        ));
        assert!(matches!(parse_event(" [DONE] "), Ok(Event::Done)));
    }

    #[test]
    fn tool_names_are_mapped_to_the_wire_and_schemas_are_objects() {
        let tools = [
            ToolInfo {
                name: "files.read/v2".into(),
                description: String::new(),
                input_schema: json!({}).into(),
            },
            ToolInfo {
                name: "files_read_v2".into(),
                description: "d".into(),
                input_schema: json!({"type": "object", "properties": {"x": {"type": "string"}}})
                    .into(),
            },
            ToolInfo {
                name: NARROW_PREVIOUS_TOOL.into(),
                description: String::new(),
                input_schema: json!({"type": "object"}).into(),
            },
        ];
        let w = wire_tools(&tools);
        assert_eq!(w[0].wire, "files_read_v2");
        assert_eq!(w[1].wire, "files_read_v2_2");
        assert_eq!(
            w[2].wire,
            format!("{NARROW_PREVIOUS_TOOL}_2"),
            "the marker name is reserved"
        );
        assert_eq!(
            w[0].definition()["function"]["parameters"]["type"],
            "object"
        );
        assert!(w[0].definition()["function"].get("description").is_none());
        assert_eq!(
            w[1].definition()["function"]["parameters"]["properties"]["x"]["type"],
            "string"
        );
    }

    #[test]
    fn backoff_doubles_within_its_cap() {
        let (i, m) = (Duration::from_millis(100), Duration::from_millis(1000));
        for attempt in 0..40 {
            let d = backoff(attempt, i, m);
            let full = (i * 2u32.saturating_pow(attempt.min(16))).min(m);
            assert!(d >= full / 2 && d <= full, "attempt {attempt}: {d:?}");
        }
    }

    #[test]
    fn every_piece_of_the_key_of_8_or_more_and_every_token_shape_is_redacted() {
        let key = "sk-proj-ABCDEFGH12345678-tail";
        let r = |t: &str| redact_secrets(t, Some(key));
        // A prefix, a middle piece and a suffix of 8+ characters.
        // The masking after a prefix goes with it.
        assert_eq!(
            r("Invalid API key: sk-proj-ABC..."),
            "Invalid API key: [redacted]"
        );
        assert_eq!(
            r("key ending EFGH1234 given"),
            "key ending [redacted] given"
        );
        assert_eq!(r("(5678-tail)"), "[redacted]");
        // Four characters of the key inside a longer word take the word.
        assert_eq!(r("ref ABCDEFGZ."), "ref [redacted]");
        assert_eq!(r("ref xEFGHy, ok"), "ref [redacted] ok");
        // Token shapes, whatever the key.
        assert_eq!(
            redact_secrets("got sk-other_9f8e7d, task-force ok", None),
            "got [redacted], task-force ok"
        );
        assert_eq!(
            redact_secrets("Authorization: Bearer eyJ.abc-def/x= and more", None),
            "Authorization: Bearer [redacted] and more"
        );
        assert_eq!(redact_secrets("bearer tok3n", None), "bearer [redacted]");
        // Pieces of 4 take their word, whatever is glued to them; 3
        // characters are not a piece.
        assert_eq!(
            redact_secrets("k=abc12 abc1 abc", Some("abc12")),
            "[redacted] [redacted] abc"
        );
        assert_eq!(
            redact_secrets("안녕 sk-x 하세요", None),
            "안녕 [redacted] 하세요"
        );
    }

    /// The shapes providers echo a rejected key in (issue 20 §6.1): a
    /// prefix and/or a suffix with masking between, or a short piece alone.
    #[test]
    fn no_piece_of_the_key_a_provider_echoes_survives_whatever_the_shape() {
        let key = "sk-proj-Zq8vN3rT5wXy7LmK0pA9bC2dE123";
        let r = |t: &str| redact_secrets(t, Some(key));
        let echoes = [
            // OpenAI
            "Incorrect API key provided: sk-proj-*************************E123.",
            "Incorrect API key provided: sk-abc***********E123. You can find your API key at https://platform.openai.com/account/api-keys.",
            "Incorrect API key provided: sk-proj-Zq8v********E123",
            // Anthropic-style, Azure-style
            "invalid x-api-key: sk-p...E123",
            "Access denied: key 'sk-proj-...E123' is invalid for this resource",
            "the key ending in ...E123 is not valid",
            "the key ending in …E123 is not valid",
            "key sk-...E123 rejected",
            "key sk-…E123 rejected",
            "key ****E123 rejected",
            "key ****dE123 rejected",
            "key •••••E123 rejected",
            "key sk-pxxxxxxxxxxE123 rejected",
            "key sk-pXXXXXXXXXXE123 rejected",
            // First 4 + last 4, last 4, last 5, first 5 alone
            "key sk-p****E123 rejected",
            "key (sk-p...E123) rejected",
            "key ending in E123 rejected",
            "key ending in 'E123'.",
            "key ending in dE123, rejected",
            "key=E123",
            "key starting with Zq8v and ending with E123",
            "prefix \"sk-pr\" unknown",
            "Zq8v**** rejected",
            "Zq8v...",
        ];
        // Every piece of 4 or more characters of the key.
        let chars: Vec<char> = key.chars().collect();
        let pieces: Vec<String> = (0..chars.len())
            .flat_map(|i| (i + 4..=chars.len()).map(move |j| (i, j)))
            .map(|(i, j)| chars[i..j].iter().collect())
            .collect();
        for echo in echoes {
            let out = r(echo);
            for piece in &pieces {
                assert!(
                    !out.contains(piece.as_str()),
                    "{echo:?} → {out:?} keeps {piece:?}"
                );
            }
            // The masking is gone too: nothing shows where the key was cut.
            assert!(
                !out.contains("**") && !out.contains("••") && !out.contains("xxxx"),
                "{echo:?} → {out:?}"
            );
            assert!(out.contains("[redacted]"), "{echo:?} → {out:?}");
        }
        // What is not a piece of the key survives, masking or not.
        for ordinary in [
            "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.",
            "Rate limit reached for requests... please retry",
            "Loading… the model is overloaded",
            "error code 0x0000 (xxxx placeholder) at E124",
            "**Note**: this model is deprecated",
            "2*3 = 6; v1.2.3; etc.",
            "quota exceeded for org-ABCD on 2026-12-02",
        ] {
            assert_eq!(r(ordinary), ordinary, "an ordinary message is kept");
        }
        // Shapes that are masked but hold no piece of the key keep their words.
        assert_eq!(
            r("Incorrect API key provided: sk-abc***********E124."),
            "Incorrect API key provided: [redacted]."
        );
    }

    #[test]
    fn a_provider_error_body_becomes_a_reference() {
        let a = OpenAi::new(OpenAiConfig::new(
            "https://u:pw@api.example.com/v1?api-key=q",
            "m",
            Some(ApiKey::new("sk-abcdefgh-12345678")),
        ))
        .expect("client builds");
        let e = a.scrub_err(OpenAiError::StatusBody {
            status: 400,
            body: Some("Invalid API key: sk-abcdefgh...".into()),
        });
        let OpenAiError::Status { status, reference } = &e else {
            panic!("{e:?}");
        };
        assert_eq!((*status, reference.len()), (400, 8));
        let shown = e.to_string();
        assert!(
            shown.starts_with("the model provider answered HTTP 400 (ref ")
                && !shown.contains("Invalid")
                && !shown.contains("abcdefgh"),
            "{shown}"
        );
        let e = a.scrub_err(OpenAiError::ProviderBody("quota for sk-abcdefgh-1".into()));
        assert!(matches!(&e, OpenAiError::Provider { .. }), "{e:?}");
        assert!(!e.to_string().contains("sk-"), "{e}");
        // Even unconverted, the raw variants never show the body.
        let raw = OpenAiError::StatusBody {
            status: 401,
            body: Some("sk-abcdefgh".into()),
        };
        assert!(!raw.to_string().contains("sk-"));
        // The query stays a query after the path.
        assert_eq!(
            a.endpoint,
            "https://u:pw@api.example.com/v1/chat/completions?api-key=q"
        );
        // The endpoint is shown without credentials or query.
        let debug = format!("{a:?} {:?}", a.config());
        assert!(
            debug.contains("https://api.example.com/v1/chat/completions")
                && debug.contains("base_url: \"https://api.example.com/v1\"")
                && !debug.contains("pw")
                && !debug.contains("api-key"),
            "{debug}"
        );
    }

    #[test]
    fn the_key_has_no_visible_form() {
        let k = ApiKey::new("sk-very-secret");
        let cfg = OpenAiConfig::new("http://x", "m", Some(k));
        assert!(!format!("{cfg:?}").contains("sk-very-secret"));
        let a = OpenAi::new(cfg).expect("client builds");
        assert!(!format!("{a:?}").contains("sk-very-secret"));
        let scrubbed = a.scrub("echo: sk-very-secret!".into());
        // The word goes whole, what is glued to the key with it.
        assert_eq!(scrubbed, "echo: [redacted]");
    }
}
