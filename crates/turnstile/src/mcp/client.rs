//! [`ToolClient`]: one MCP server (streamable HTTP or stdio), for as long as
//! the process runs. Its connection is a machine of `tables/connection.ron`
//! (ADR 0011): the client classifies what happened on the wire into one
//! event, fires it, and performs the row's effect — re-initialise an expired
//! session, reconnect, restart a stdio child, retry a server that is down
//! with backoff. Nothing of this happens inside a transport.
//!
//! Two rmcp 3.x defaults are overridden on purpose (see [`super::session`]):
//!
//! * **Protocol version** (ADR 0003). rmcp's `ProtocolVersion::default()` is
//!   `LATEST` = `2026-07-28`, a revision without the `initialize` handshake
//!   that today's servers do not speak. We pin `initialize` to
//!   [`PROTOCOL_VERSION`] and take whatever older revision a server
//!   negotiates down to.
//! * **Silent re-initialisation** (ADR 0004). rmcp's streamable-HTTP client
//!   would, on an HTTP 404 for an expired session, open a new session and
//!   *re-send the failed request*, unseen. We turn that off: the 404 becomes
//!   an event and the table re-initialises. A 404 answering a call's own
//!   POST is `session_expired_on_call`: the transport's word that the server
//!   did not process it, so the row re-sends it once on the new session,
//!   whatever the tool (ADR 0029); a 404 answering a ping or a listing is
//!   `session_expired`, with nothing to re-send. A call whose answer was
//!   lost after it was delivered is never re-sent on a session.
//!
//! Also turned off: rmcp's client response cache, whose default
//! `serve_stale_on_error` would answer a failing `tools/list` with an old list.
//!
//! A session that has been idle for [`ClientOptions::probe_after`] is probed
//! with a `ping` before the next call, so an expiry (or a restarted server)
//! costs the ping, not the call. A server seen to expire sessions sooner is
//! probed after half the idle time at which a call met the expiry.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::answer::{Answer, InputAsk, Nested};
use super::error::McpError;
use super::input::InputRound;
use super::normalize::ToolOutput;
use super::session::{self, Failure, Listing, Reply, Session};
use super::spec::{ServerInfo, ServerSpec, ToolInfo, Transport};
use super::task::{Follow, TaskId, TaskPoll, TaskPoller, TaskTicket};
use super::ToolTrust;
// Where `cli::mcp`, `llm::openai` and `main` have always found them.
pub use super::spec::shown_command;
pub use super::url::{redact_url, scrub_urls};
use crate::fsm::Snapshot;
use crate::protocols::connection::{
    Connection, ConnectionEffect, ConnectionEvent, ConnectionState,
};
use crate::protocols::{telemetry, Bound, Names, TableSet, Typed};

/// The event a new connection's opening is: a first connection or a
/// reconnect, to a session or to a discovered stateless server.
fn opened_event(session: &Session, reconnect: bool) -> ConnectionEvent {
    match (reconnect, session.stateless) {
        (false, false) => ConnectionEvent::ConnectOk,
        (false, true) => ConnectionEvent::Discovered,
        (true, false) => ConnectionEvent::ReconnectOk,
        (true, true) => ConnectionEvent::Rediscovered,
    }
}

/// The key a question asked inside an open 2025-11-25 call goes by (the
/// revision gives it none: one is asked at a time).
pub const NESTED_KEY: &str = "elicitation";

/// What a failed request was, for its event: a `tools/call` (a 404 on its
/// own POST is `session_expired_on_call`; its lost answer on a stateless
/// connection is `stream_broken`), or anything else (`ping`, `tools/list`,
/// a call already re-sent once: a 404 is `session_expired`, a lost answer a
/// transport error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Request {
    Call { retry_safe: bool },
    Other,
}

/// Default [`ClientOptions::input_wait`]: ten minutes, the approval TTL's
/// default.
pub const DEFAULT_INPUT_WAIT: Duration = Duration::from_secs(600);

/// How long a call that became a task is followed before cancel is asked,
/// when no turn says otherwise (`limits.task_wait_secs` does for a turn).
pub const DEFAULT_TASK_WAIT: Duration = Duration::from_secs(900);

/// Default timeout for one `tools/call` (and for each `tools/list` page).
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Default timeout for opening the transport plus the `initialize` handshake.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Default idle time after which a session is pinged before the next call.
pub const DEFAULT_PROBE_AFTER: Duration = Duration::from_secs(30);

/// Default first delay before retrying a server that is down.
pub const DEFAULT_BACKOFF_INITIAL: Duration = Duration::from_millis(500);

/// Default longest delay between two attempts to reach a server.
pub const DEFAULT_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// A connection that broke sooner than this after it opened is reopened
/// only after a backoff delay, so a stdio child that keeps crashing is not
/// restarted in a tight loop.
const STABLE_AFTER: Duration = Duration::from_secs(10);

/// Default interval at which an idle, Ready HTTP connection is pinged in the
/// background, so a restarted or killed server is noticed (and the session
/// re-initialised, or the connection marked Down) before a call meets it.
pub const DEFAULT_WATCH_EVERY: Duration = Duration::from_secs(2);

/// Longest wait for the answer to a probing `ping`.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The connection machine keeps at most this many rows of trace; when it
/// grows past it, the oldest are dropped down to [`TRACE_KEEP`]. Every row
/// is counted in the row telemetry (`/v1/metrics`) as it fires.
const TRACE_MAX: usize = 256;
const TRACE_KEEP: usize = 64;

/// Knobs for [`ToolClient::connect_with`] and [`ToolClient::start`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientOptions {
    /// Timeout for one `tools/call` and for each `tools/list` page.
    pub call_timeout: Duration,
    /// Timeout for opening the transport and completing `initialize`; also
    /// the longest a call waits for a reconnect that is under way.
    pub connect_timeout: Duration,
    /// A session idle this long is pinged before the next call (`None`:
    /// never).
    pub probe_after: Option<Duration>,
    /// An HTTP session idle this long is pinged in the background, every
    /// such interval, while the connection is Ready (`None`: never). A
    /// failed ping is classified like a call's failure and fired, so a
    /// restart costs no call and `/readyz` follows within seconds; a ping
    /// that answers fires nothing.
    pub watch_every: Option<Duration>,
    /// How long a call whose server asked the user something inside it
    /// (2025-11-25 `elicitation/create`) stays open for the answer; then
    /// the server is answered `cancel`. The interrupt's own expiry is the
    /// shorter of this and the approval TTL.
    pub input_wait: Duration,
    /// First delay before retrying a server that is down; doubled per
    /// failed attempt up to `backoff_max`.
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            call_timeout: DEFAULT_CALL_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            probe_after: Some(DEFAULT_PROBE_AFTER),
            watch_every: Some(DEFAULT_WATCH_EVERY),
            input_wait: DEFAULT_INPUT_WAIT,
            backoff_initial: DEFAULT_BACKOFF_INITIAL,
            backoff_max: DEFAULT_BACKOFF_MAX,
        }
    }
}

/// A server's name, its connection's state and the MCP revision it
/// negotiated, for `GET /readyz`.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ServerStatus {
    pub name: String,
    #[serde(serialize_with = "state_name")]
    pub state: ConnectionState,
    /// Whether a call would be sent now (the connection table's row).
    #[serde(skip)]
    pub carries_calls: bool,
    /// The revision the server agreed to (empty until it first answered).
    pub protocol: String,
}

/// Whether the connection table sends a call asked in the machine's state.
fn carries_calls(machine: &Typed<Connection>) -> bool {
    (machine.peek(ConnectionEvent::CallAsked))
        .is_ok_and(|s| s.effect == Some(ConnectionEffect::Send))
}

fn state_name<S: serde::Serializer>(s: &ConnectionState, ser: S) -> Result<S::Ok, S::Error> {
    ser.serialize_str(s.name())
}

/// The compiled-in connection table, loaded once.
pub fn builtin_connection_table() -> Result<Bound<Connection>, McpError> {
    static TABLE: OnceLock<Result<Bound<Connection>, String>> = OnceLock::new();
    TABLE
        .get_or_init(|| {
            TableSet::builtin()
                .and_then(|t| t.bound::<Connection>())
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(|reason| McpError::InvalidSpec {
            server: "(all)".into(),
            reason: format!("the connection table does not load: {reason}"),
        })
}

/// The compiled-in `tables/task.ron`, bound once.
pub fn builtin_task_table() -> Result<Bound<crate::protocols::task::Task>, McpError> {
    static TABLE: OnceLock<Result<Bound<crate::protocols::task::Task>, String>> = OnceLock::new();
    TABLE
        .get_or_init(|| {
            TableSet::builtin()
                .and_then(|t| t.bound())
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(|reason| McpError::InvalidSpec {
            server: "(all)".into(),
            reason: format!("the task table does not load: {reason}"),
        })
}

#[async_trait::async_trait]
impl TaskPoller for ToolClient {
    async fn task_get(&self, id: &TaskId) -> Result<TaskPoll, McpError> {
        let got = self
            .task_request("tasks/get", |s, t| async move {
                s.get_task(id.as_str(), t).await
            })
            .await?;
        TaskPoll::from_detailed(got.task).map_err(|reason| McpError::Protocol {
            server: self.shared.spec.name.clone(),
            tool: "tasks/get".into(),
            reason,
        })
    }

    async fn task_cancel(&self, id: &TaskId) -> Result<(), McpError> {
        self.task_request("tasks/cancel", |s, t| async move {
            s.cancel_task(id.as_str(), t).await
        })
        .await
    }
}

/// One MCP server. `Send + Sync`; share it via `Arc`. Concurrent calls are
/// fine (they are multiplexed over the one connection). Dropping it stops
/// every reconnect attempt and closes the connection.
pub struct ToolClient {
    shared: Arc<Shared>,
    call_timeout: Duration,
    _stop: DropGuard,
}

impl std::fmt::Debug for ToolClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolClient")
            .field("name", &self.shared.spec.name)
            .field("state", &self.state())
            .field("call_timeout", &self.call_timeout)
            .finish_non_exhaustive()
    }
}

struct Shared {
    spec: ServerSpec,
    options: ClientOptions,
    table: Bound<Connection>,
    inner: Mutex<Inner>,
    state: tokio::sync::watch::Sender<ConnectionState>,
    cancel: CancellationToken,
}

struct Inner {
    machine: Typed<Connection>,
    /// The current session: set by `publish-tools`, kept while a
    /// re-initialisation or reconnect is under way (calls already out on
    /// it still report), dropped in Down and Closed.
    session: Option<Arc<Session>>,
    generation: u64,
    /// The last `tools/list` (`None`: never answered).
    listing: Option<Listing>,
    protocol_version: String,
    /// The `serverInfo` of the last `initialize`.
    server_info: Option<ServerInfo>,
    /// Failed attempts in a row (the backoff exponent).
    failures: u32,
    /// Reopens in a row of connections that broke soon after they opened.
    restarts: u32,
    last_error: Option<McpError>,
    /// A reconnect loop is running.
    recovering: bool,
    /// The shortest idle time after which a call met an expired session:
    /// the server's session TTL is at most this, so sessions idle for half
    /// of it are probed too (see [`Shared::probe`]).
    expired_idle: Option<Duration>,
}

impl Inner {
    fn new(machine: Typed<Connection>) -> Inner {
        Inner {
            machine,
            session: None,
            generation: 0,
            listing: None,
            protocol_version: String::new(),
            server_info: None,
            failures: 0,
            restarts: 0,
            last_error: None,
            recovering: false,
            expired_idle: None,
        }
    }
}

impl ToolClient {
    /// Connect with [`ClientOptions::default`]; fails if the first attempt
    /// fails (nothing is retried).
    pub async fn connect(spec: &ServerSpec) -> Result<Self, McpError> {
        Self::connect_with(spec, ClientOptions::default()).await
    }

    /// Open the transport, run `initialize` and `tools/list`; fails if that
    /// first attempt fails. Once connected, the client re-initialises and
    /// reconnects as `tables/connection.ron` says.
    pub async fn connect_with(spec: &ServerSpec, options: ClientOptions) -> Result<Self, McpError> {
        let client = Self::start(spec, options, builtin_connection_table()?).await?;
        if client.carries_calls() {
            return Ok(client);
        }
        let err = client.shared.lock().last_error.clone();
        client.shutdown().await;
        Err(err.unwrap_or_else(|| McpError::Connect {
            server: spec.name.clone(),
            reason: "the first connection failed".into(),
        }))
    }

    /// Starts the connection machine of `table` and makes the first attempt.
    /// A server that cannot be reached is not an error: the client is then
    /// `Down` and retries with backoff in the background; its calls fail as
    /// `server_down`. Only a spec that can never work is an error.
    pub async fn start(
        spec: &ServerSpec,
        options: ClientOptions,
        table: Bound<Connection>,
    ) -> Result<Self, McpError> {
        session::validate(spec)?;
        let machine = table.machine();
        let (state, _) = tokio::sync::watch::channel(machine.state());
        let cancel = CancellationToken::new();
        let shared = Arc::new(Shared {
            spec: spec.clone(),
            options: options.clone(),
            table,
            inner: Mutex::new(Inner::new(machine)),
            state,
            cancel: cancel.clone(),
        });
        let client = ToolClient {
            shared: shared.clone(),
            call_timeout: options.call_timeout,
            _stop: cancel.drop_guard(),
        };
        shared.first_attempt().await;
        // A stdio child's exit is read from its pipe; an HTTP server's
        // restart or death is only seen by asking.
        if let (Some(every), false) = (options.watch_every, shared.is_stdio()) {
            tokio::spawn(shared.clone().watch(every));
        }
        Ok(client)
    }

    /// Our name for this server.
    pub fn name(&self) -> &str {
        &self.shared.spec.name
    }

    /// The protocol revision the server agreed to in the last `initialize`.
    pub fn protocol_version(&self) -> String {
        self.shared.lock().protocol_version.clone()
    }

    /// The server's name and version from the last `initialize` (`None`:
    /// never connected, or the server sent no `serverInfo`).
    pub fn server_info(&self) -> Option<ServerInfo> {
        self.shared.lock().server_info.clone()
    }

    /// The `Mcp-Session-Id` of the current session (streamable HTTP), which
    /// every `tools/call` names in `_meta["turnstile/session"]`
    /// ([`SESSION_META`](super::SESSION_META)); a reconnect's calls name the
    /// new one. `None`: stdio, not connected, or the server issued none.
    pub fn session_id(&self) -> Option<String> {
        let session = self.shared.lock().session.clone();
        session.and_then(|s| s.session_id())
    }

    /// The timeout applied to each call.
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout
    }

    /// Change the per-call timeout.
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// The connection machine's state.
    pub fn state(&self) -> ConnectionState {
        self.shared.lock().machine.state()
    }

    /// Would a call be sent now (the table's `call_asked` row is `send`)?
    pub fn carries_calls(&self) -> bool {
        carries_calls(&self.shared.lock().machine)
    }

    /// Name and state, for `GET /readyz`.
    pub fn status(&self) -> ServerStatus {
        // One look at the connection: the state shown and whether it
        // carries calls (the readiness status) are of the same moment.
        let inner = self.shared.lock();
        ServerStatus {
            name: self.name().to_string(),
            state: inner.machine.state(),
            carries_calls: carries_calls(&inner.machine),
            protocol: inner.protocol_version.clone(),
        }
    }

    /// The connection machine's recent rows, oldest first (at most
    /// 256; every row is also counted in `/v1/metrics`).
    pub fn trace(&self) -> Vec<String> {
        let inner = self.shared.lock();
        inner
            .machine
            .untyped()
            .trace_ids()
            .map(str::to_string)
            .collect()
    }

    /// The connection machine as a snapshot (state and recent trace).
    pub fn snapshot(&self) -> Snapshot {
        self.shared.lock().machine.snapshot()
    }

    /// Waits until the connection is in `state`, up to `timeout`. For tests
    /// and start-up checks; calls wait by themselves.
    pub async fn wait_for(&self, state: ConnectionState, timeout: Duration) -> bool {
        let mut rx = self.shared.state.subscribe();
        let wanted = async {
            loop {
                if self.state() == state {
                    return;
                }
                if rx.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::time::timeout(timeout, wanted).await.is_ok()
    }

    /// The tools of the last `tools/list`. A server that never answered one
    /// offers the tools the configuration names, each described as
    /// unavailable (no schema is known), so a planner can see that the tool
    /// exists and that its server is down; a call of one fails as
    /// `server_down`.
    pub fn tools(&self) -> Vec<ToolInfo> {
        let inner = self.shared.lock();
        match &inner.listing {
            Some(l) => l.tools.clone(),
            None => self
                .shared
                .spec
                .tools
                .keys()
                .map(|name| ToolInfo {
                    name: name.clone(),
                    description: format!(
                        "Unavailable: the MCP server '{}' that offers this tool is down; a call fails.",
                        self.shared.spec.name
                    ),
                    input_schema: serde_json::json!({"type": "object"}).into(),
                })
                .collect(),
        }
    }

    /// Has the server answered `tools/list` at least once?
    pub fn has_listed(&self) -> bool {
        self.shared.lock().listing.is_some()
    }

    /// Does this server offer `tool`: in its last `tools/list`, or — if it
    /// never answered one — in the configuration?
    pub fn offers(&self, tool: &str) -> bool {
        let inner = self.shared.lock();
        match &inner.listing {
            Some(l) => l.tools.iter().any(|t| t.name == tool),
            None => self.shared.spec.tools.contains_key(tool),
        }
    }

    /// May a call of `tool` whose answer was lost on a stateless connection
    /// be re-sent once? Yes if the tool declared `readOnlyHint: true` or the
    /// configuration marks it `retry_safe`. (A call met by a session expiry
    /// is re-sent whatever this says: it was not processed, ADR 0029.)
    pub fn retry_safe(&self, tool: &str) -> bool {
        self.shared.retry_safe(tool)
    }

    /// Did `tool` declare `readOnlyHint: true` in the last `tools/list`?
    /// (Unlike [`retry_safe`](Self::retry_safe), the configuration does not
    /// count.)
    pub fn declares_read_only(&self, tool: &str) -> bool {
        self.shared
            .lock()
            .listing
            .as_ref()
            .is_some_and(|l| l.read_only.contains(tool))
    }

    /// What a turn may believe about `tool` before calling it: whether this
    /// server is trusted, and the annotations `tool` declared in the last
    /// `tools/list` (`None`: none, or no listing yet).
    pub fn trust(&self, tool: &str) -> ToolTrust {
        let shared = self.shared.lock();
        let listing = shared.listing.as_ref();
        ToolTrust {
            server_trusted: self.shared.spec.trusted,
            hints: listing.and_then(|l| l.hints.get(tool).copied()),
            declared_tier: listing.and_then(|l| l.tiers.get(tool).cloned()),
        }
    }

    /// All tools, following `nextCursor` until the server stops sending one.
    pub async fn list_tools(&self) -> Result<Vec<ToolInfo>, McpError> {
        const METHOD: &str = "tools/list";
        let shared = &self.shared;
        let session = shared.ready_session(METHOD).await?;
        match session.list_tools(self.call_timeout).await {
            Ok(listing) => {
                shared.report(&session, ConnectionEvent::CallOk);
                let tools = listing.tools.clone();
                let mut inner = shared.lock();
                if inner.session.as_ref().map(|s| s.generation) == Some(session.generation) {
                    inner.listing = Some(listing);
                }
                Ok(tools)
            }
            Err(f) => {
                if let Some(event) = shared.event_for(&session, &f, Request::Other) {
                    shared.report(&session, event);
                }
                Err(shared.error_for(f, METHOD))
            }
        }
    }

    /// Call `tool`, with the configured timeout.
    ///
    /// * JSON-RPC error → `Err(McpError::Rpc)`.
    /// * `isError: true` → `Ok(ToolOutput { is_error: true, .. })` — also a failure.
    /// * No answer in time → `Err(McpError::Timeout)`; the request is
    ///   abandoned and `notifications/cancelled` is sent (best effort).
    /// * Server down (or still reconnecting after the connect timeout) →
    ///   `Err(McpError::Down)`; nothing was sent.
    /// * Session expired: the call's own POST answered HTTP 404 for our
    ///   session id, so the server did not process it → the session is
    ///   re-initialised and the call re-sent once on it, whatever the tool
    ///   (`tables/connection.ron`, ADR 0029). A second 404 on the re-sent
    ///   call → `Err(McpError::Transport)`; it ran on neither.
    /// * Answer lost after the call went out (a stream that broke, a
    ///   resumption that failed) → `Err(McpError::Unanswered)`: whether it
    ///   ran is unknown, and it is not re-sent (a stateless read-only or
    ///   `retry_safe` tool's is, once). Nothing else is ever re-sent.
    /// * The server asks the user something first →
    ///   `Err(McpError::Protocol)`: this caller cannot ask anyone (a
    ///   question inside a 2025-11-25 call is answered `cancel`). A turn
    ///   uses [`ToolClient::call_round`] instead.
    pub async fn call(&self, tool: &str, args: Map<String, Value>) -> Result<ToolOutput, McpError> {
        match self.call_round(tool, args, None).await? {
            Answer::Output(out) => Ok(out),
            // A task is followed to its end here, by the built-in table.
            Answer::Task(ticket) => self.follow(tool, ticket).await,
            Answer::Asks(_) => Err(McpError::Protocol {
                server: self.shared.spec.name.clone(),
                tool: tool.to_string(),
                reason: "the server asked the user for input, and this caller cannot ask".into(),
            }),
        }
    }

    /// Call `tool` as [`ToolClient::call`] does, with the answers of a
    /// 2026-07-28 input round if `round` is given, and hand up a question
    /// the server asks instead of answering ([`Answer::Asks`]).
    pub async fn call_round(
        &self,
        tool: &str,
        args: Map<String, Value>,
        round: Option<InputRound>,
    ) -> Result<Answer, McpError> {
        let started = Instant::now();
        let outcome = self.call_once(tool, args, round).await;
        self.answered(tool, started, outcome)
    }

    /// Answers the question a server asked inside an open 2025-11-25 call,
    /// and waits (the call timeout) for what the call does next: its
    /// result, or another question.
    pub async fn answer_nested(
        &self,
        tool: &str,
        nested: Nested,
        answer: rmcp::model::ElicitResult,
    ) -> Result<Answer, McpError> {
        let started = Instant::now();
        let Nested { reply, open, .. } = nested;
        let generation = open.generation;
        if reply.send(answer).is_err() {
            // The server's question stopped waiting (its wait ran out, or
            // the server withdrew it): it was answered `cancel`, and this
            // answer never left.
            return self.answered(
                tool,
                started,
                Err(McpError::Unanswered {
                    server: self.shared.spec.name.clone(),
                    tool: tool.to_string(),
                    reason:
                        "the server's question had stopped waiting; your answer was not delivered"
                            .into(),
                }),
            );
        }
        let outcome = match open.wait(self.call_timeout).await {
            Ok(reply) => {
                self.shared
                    .report_generation(generation, ConnectionEvent::CallOk);
                self.reply(tool, reply)
            }
            Err(f) => Err(self.shared.error_for(f, tool)),
        };
        self.answered(tool, started, outcome)
    }

    /// What a call's reply is: the tool's result, or a question.
    fn reply(&self, tool: &str, reply: Reply) -> Result<Answer, McpError> {
        let protocol = |reason: String| McpError::Protocol {
            server: self.shared.spec.name.clone(),
            tool: tool.to_string(),
            reason,
        };
        Ok(match reply {
            Reply::Result(r) => Answer::Output(ToolOutput::from_call_result(r)),
            Reply::Input(r) => Answer::Asks(InputAsk::from_result(r).map_err(protocol)?),
            Reply::Nested(n) => Answer::Asks(InputAsk {
                requests: vec![(NESTED_KEY.to_string(), n.asked.clone())],
                request_state: None,
                nested: Some(n),
            }),
            Reply::Task(t) => Answer::Task(TaskTicket::from_task(t).map_err(protocol)?),
        })
    }

    /// Follows the task a call of `tool` became to its end, without
    /// progress, for as long as a call may take (`tables/task.ron`, the
    /// built-in table; a turn follows its tasks with the configured one,
    /// for `limits.task_wait_secs`, and shows progress). A task that did
    /// not complete is an error that says how it ended.
    async fn follow(&self, tool: &str, ticket: TaskTicket) -> Result<ToolOutput, McpError> {
        let table = builtin_task_table()?;
        let protocol = |reason: String| McpError::Protocol {
            server: self.shared.spec.name.clone(),
            tool: tool.to_string(),
            reason,
        };
        // A caller with no user to show progress to (a status or cancel
        // tool, `turnstile mcp`) waits no longer than for a call.
        let (mut follow, next) = Follow::start(&table, ticket, self.call_timeout)
            .map_err(|v| protocol(v.to_string()))?;
        crate::mcp::task::drive(self, &mut follow, next)
            .await
            .map_err(|v| protocol(v.to_string()))?
            .into_output(&self.shared.spec.name, tool)
    }

    /// One request about a task (`tasks/get`, `tasks/cancel`) on the ready
    /// session. Never re-sent here: the follower polls again.
    async fn task_request<T, F, Fut>(&self, method: &str, send: F) -> Result<T, McpError>
    where
        F: FnOnce(Arc<Session>, Duration) -> Fut,
        Fut: std::future::Future<Output = Result<T, Failure>>,
    {
        let shared = &self.shared;
        let session = shared.ready_session(method).await?;
        match send(session.clone(), self.call_timeout).await {
            Ok(r) => {
                shared.report(&session, ConnectionEvent::CallOk);
                Ok(r)
            }
            Err(f) => {
                if let Some(event) = shared.event_for(&session, &f, Request::Other) {
                    shared.report(&session, event);
                }
                Err(shared.error_for(f, method))
            }
        }
    }

    fn answered(
        &self,
        tool: &str,
        started: Instant,
        outcome: Result<Answer, McpError>,
    ) -> Result<Answer, McpError> {
        let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let name = &self.shared.spec.name;
        match &outcome {
            Ok(Answer::Output(output)) => {
                tracing::info!(
                    server = %name,
                    tool,
                    elapsed_ms,
                    is_error = output.is_error,
                    blocks = output.blocks.len(),
                    "mcp tool call returned"
                );
                tracing::debug!(server = %name, tool, shape = %output.shape(), "mcp tool result shape");
            }
            // The task id is the server's: never in a log.
            Ok(Answer::Task(ticket)) => tracing::info!(
                server = %name,
                tool,
                elapsed_ms,
                poll_ms = ticket.poll_every.map(|d| d.as_millis() as u64),
                "mcp tool call became a task"
            ),
            // What it asks is the server's and the user's: only how many.
            Ok(Answer::Asks(ask)) => tracing::info!(
                server = %name,
                tool,
                elapsed_ms,
                requests = ask.requests.len(),
                nested = ask.nested.is_some(),
                "mcp tool call asks the user for input"
            ),
            Err(err) => {
                tracing::warn!(server = %name, tool, elapsed_ms, error_kind = err.kind(), error = %err, "mcp tool call failed");
            }
        }
        outcome
    }

    async fn call_once(
        &self,
        tool: &str,
        args: Map<String, Value>,
        round: Option<InputRound>,
    ) -> Result<Answer, McpError> {
        let shared = &self.shared;
        let mut session = shared.ready_session(tool).await?;
        let idle = session.idle();
        if shared.probe(&session).await {
            // The probe found the session gone; the table's row is under
            // way. This call was not sent, so it goes on the next session.
            session = shared.ready_session(tool).await?;
        }
        // An answer to a question is the user's, sent once under the
        // approval table's swap: a lost answer is never re-sent below it,
        // whatever the tool. (A 404 on the call is re-sent whatever it
        // carries: it was not processed. Rounds are 2026-07-28's, which has
        // no session to expire.)
        let retry_safe = shared.retry_safe(tool) && round.is_none();
        let sent = session
            .call(tool, args.clone(), round.clone(), self.call_timeout)
            .await;
        let failure = match sent {
            Ok(reply) => {
                shared.report(&session, ConnectionEvent::CallOk);
                return self.reply(tool, reply);
            }
            Err(f) => f,
        };
        if matches!(failure, Failure::Expired(_)) {
            shared.learn_expiry(idle);
        }
        let event = shared.event_for(&session, &failure, Request::Call { retry_safe });
        let effect = event.and_then(|event| shared.report(&session, event));
        if matches!(
            effect,
            Some(ConnectionEffect::ReinitializeAndResend | ConnectionEffect::Resend)
        ) {
            let why = match event {
                Some(ConnectionEvent::SessionExpiredOnCall) => {
                    "its POST was answered 404 for the old session, so it was not processed"
                }
                _ => "the tool is read-only or retry_safe",
            };
            tracing::info!(
                server = %shared.spec.name,
                tool,
                why,
                "re-sending the call once on the new session"
            );
            let session = shared.ready_session(tool).await?;
            return match session.call(tool, args, round, self.call_timeout).await {
                Ok(reply) => {
                    shared.report(&session, ConnectionEvent::CallOk);
                    self.reply(tool, reply)
                }
                Err(f) => {
                    // Re-sent once: a second expiry is never re-sent again.
                    if let Some(event) = shared.event_for(&session, &f, Request::Other) {
                        shared.report(&session, event);
                    }
                    Err(match f {
                        Failure::Expired(reason) => McpError::Transport {
                            server: shared.spec.name.clone(),
                            tool: tool.to_string(),
                            reason: format!(
                                "{reason}, twice: the call was re-sent once on a new session and met an expiry again; it was not processed either time and is not sent again"
                            ),
                        },
                        other => shared.error_for(other, tool),
                    })
                }
            };
        }
        Err(shared.error_for(failure, tool))
    }

    /// Fires `shutdown`: closes the session (HTTP: `DELETE` it; stdio: close
    /// stdin, then terminate the child) and stops every retry.
    pub async fn shutdown(&self) {
        let shared = &self.shared;
        let retired = {
            let mut inner = shared.lock();
            match shared.fire(&mut inner, ConnectionEvent::Shutdown) {
                Some(ConnectionEffect::Close) => {
                    shared.cancel.cancel();
                    inner.session.take()
                }
                _ => None,
            }
        };
        if let Some(s) = retired {
            s.close().await;
        }
        tracing::debug!(server = %shared.spec.name, "mcp server closed");
    }

    /// [`shutdown`](Self::shutdown), consuming the client.
    pub async fn close(self) {
        self.shutdown().await;
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn is_stdio(&self) -> bool {
        matches!(self.spec.transport, Transport::Stdio { .. })
    }

    fn retry_safe(&self, tool: &str) -> bool {
        if self.spec.tools.get(tool).is_some_and(|p| p.retry_safe) {
            return true;
        }
        let inner = self.lock();
        inner
            .listing
            .as_ref()
            .is_some_and(|l| l.read_only.contains(tool))
    }

    /// Fires one event on the machine (under the lock) and returns the
    /// row's effect. A forbidden row is logged and counted; the state does
    /// not move.
    fn fire(&self, inner: &mut Inner, event: ConnectionEvent) -> Option<ConnectionEffect> {
        let step = match inner.machine.fire(event) {
            Ok(step) => step,
            Err(v) => {
                telemetry::violation(&v);
                tracing::warn!(server = %self.spec.name, violation = %v, "mcp connection: forbidden row");
                return None;
            }
        };
        let row = inner.machine.row_id(step.row).to_string();
        let effect = step.effect.map(|e| e.name()).unwrap_or("-");
        if step.from != step.to || step.effect.is_some() {
            tracing::info!(
                server = %self.spec.name,
                row = %row,
                from = step.from.name(),
                to = step.to.name(),
                effect,
                "mcp connection"
            );
        } else {
            tracing::trace!(server = %self.spec.name, row = %row, "mcp connection");
        }
        if inner.machine.untyped().trace().len() > TRACE_MAX {
            let mut snap = inner.machine.snapshot();
            let cut = snap.trace.len() - TRACE_KEEP;
            snap.trace.drain(..cut);
            if let Ok(m) = self.table.restore(&snap) {
                inner.machine = m;
            }
        }
        let to = step.to;
        self.state.send_if_modified(|s| {
            let changed = *s != to;
            *s = to;
            changed
        });
        step.effect
    }

    /// Fires an event that `session` caused. An event of a session that is
    /// no longer current is not the connection's any more: it is dropped.
    /// Recovery effects start the reconnect loop.
    fn report(
        self: &Arc<Self>,
        session: &Session,
        event: ConnectionEvent,
    ) -> Option<ConnectionEffect> {
        self.report_generation(session.generation, event)
    }

    fn report_generation(
        self: &Arc<Self>,
        generation: u64,
        event: ConnectionEvent,
    ) -> Option<ConnectionEffect> {
        let mut inner = self.lock();
        let opened = match &inner.session {
            Some(s) if s.generation == generation => s.opened,
            _ => {
                tracing::debug!(server = %self.spec.name, generation, event = event.name(), "event of a replaced session dropped");
                return None;
            }
        };
        let effect = self.fire(&mut inner, event);
        if let Some(
            e @ (ConnectionEffect::Reinitialize
            | ConnectionEffect::ReinitializeAndResend
            | ConnectionEffect::Reconnect
            | ConnectionEffect::RestartChild),
        ) = effect
        {
            let delay = match e {
                // The server forgot the session; it is up: ask again at once.
                ConnectionEffect::Reinitialize | ConnectionEffect::ReinitializeAndResend => {
                    Duration::ZERO
                }
                // A connection that breaks soon after it opened waits for a
                // backoff, so a crashing child is not restarted in a loop.
                _ if opened.elapsed() < STABLE_AFTER => {
                    inner.restarts += 1;
                    self.backoff(inner.restarts)
                }
                _ => {
                    inner.restarts = 0;
                    Duration::ZERO
                }
            };
            self.begin_recovery(&mut inner, delay);
        }
        effect
    }

    /// Starts the reconnect loop unless one runs.
    fn begin_recovery(self: &Arc<Self>, inner: &mut Inner, delay: Duration) {
        if inner.recovering || self.cancel.is_cancelled() {
            return;
        }
        inner.recovering = true;
        tokio::spawn(self.clone().recover(delay));
    }

    /// The event a failed request is, or `None` for a timeout (which says
    /// nothing about the connection: the request was abandoned).
    fn event_for(
        &self,
        session: &Session,
        failure: &Failure,
        request: Request,
    ) -> Option<ConnectionEvent> {
        let retry_safe = request == Request::Call { retry_safe: true };
        Some(match failure {
            // rmcp reports an expiry only for a POST that carried our session
            // id and was answered 404 (`session::Failure::Expired`): on a
            // call, that POST was the call itself, which the server did not
            // process (ADR 0029). The tool's flags do not enter into it.
            Failure::Expired(_) if matches!(request, Request::Call { .. }) => {
                ConnectionEvent::SessionExpiredOnCall
            }
            Failure::Expired(_) => ConnectionEvent::SessionExpired,
            // A stateless request that went out and lost its answer: the
            // revision cannot resume the stream, so the outcome is unknown.
            Failure::Transport { sent: true, .. }
                if session.stateless && request != Request::Other && retry_safe =>
            {
                ConnectionEvent::StreamBrokenRetrySafe
            }
            Failure::Transport { sent: true, .. }
                if session.stateless && request != Request::Other =>
            {
                ConnectionEvent::StreamBroken
            }
            // A stdio pipe that closed is the child's end.
            Failure::Transport { closed: true, .. } if self.is_stdio() => {
                ConnectionEvent::ChildExited
            }
            Failure::Transport { .. } => ConnectionEvent::TransportError,
            // The server answered: the connection works.
            Failure::Rpc { .. } | Failure::Protocol(_) => ConnectionEvent::CallOk,
            Failure::Timeout => return None,
        })
    }

    fn error_for(&self, failure: Failure, tool: &str) -> McpError {
        match failure {
            Failure::Expired(reason) => McpError::Transport {
                server: self.spec.name.clone(),
                tool: tool.to_string(),
                reason: format!(
                    "{reason}; the call was not re-sent, the next call uses a new session"
                ),
            },
            other => other.into_error(&self.spec.name, tool),
        }
    }

    fn down(&self, tool: &str, inner: &Inner) -> McpError {
        let reason = match (&inner.last_error, inner.machine.state()) {
            (_, ConnectionState::Closed) => "the connection was shut down".to_string(),
            (Some(e), _) => format!("retrying in the background; last attempt: {e}"),
            (None, _) => "retrying in the background".to_string(),
        };
        McpError::Down {
            server: self.spec.name.clone(),
            tool: tool.to_string(),
            reason,
        }
    }

    /// The session to send on: at once when Ready; after the re-initialisation
    /// or reconnect under way (up to the connect timeout); never when Down or
    /// Closed — those fail at once, nothing sent.
    async fn ready_session(&self, tool: &str) -> Result<Arc<Session>, McpError> {
        let mut rx = self.state.subscribe();
        let deadline = tokio::time::Instant::now() + self.options.connect_timeout;
        loop {
            let waiting_in = {
                let inner = self.lock();
                // The connection table's `call_asked` row decides: send,
                // wait for the session under way, or fail at once.
                let asked = inner.machine.peek(ConnectionEvent::CallAsked);
                match (asked.map(|s| s.effect), &inner.session) {
                    (Ok(Some(ConnectionEffect::Send)), Some(s)) => return Ok(s.clone()),
                    (Err(_), _) => return Err(self.down(tool, &inner)),
                    _ => inner.machine.state(),
                }
            };
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => continue,
                Ok(Err(_)) | Err(_) => {
                    return Err(McpError::Down {
                        server: self.spec.name.clone(),
                        tool: tool.to_string(),
                        reason: format!(
                            "still {} after {:?}",
                            waiting_in.name(),
                            self.options.connect_timeout
                        ),
                    })
                }
            }
        }
    }

    /// Pings a session that has been idle for `probe_after`. Returns true if
    /// the ping found it gone (its event was fired; a new session is under
    /// way).
    async fn probe(self: &Arc<Self>, session: &Session) -> bool {
        let Some(after) = self.options.probe_after else {
            return false;
        };
        // A server whose sessions expired sooner than `probe_after` is
        // probed after half the idle time at which that was seen.
        let after = match self.lock().expired_idle {
            Some(seen) => after.min(seen / 2),
            None => after,
        };
        if session.idle() < after {
            return false;
        }
        let failure = match session.ping(PROBE_TIMEOUT).await {
            Ok(()) => {
                self.report(session, ConnectionEvent::CallOk);
                return false;
            }
            Err(f) => f,
        };
        tracing::debug!(server = %self.spec.name, ?failure, "probe of an idle session failed");
        match self.event_for(session, &failure, Request::Other) {
            Some(ConnectionEvent::CallOk) => {
                // The server answered (some do not implement ping).
                self.report(session, ConnectionEvent::CallOk);
                false
            }
            Some(event) => {
                self.report(session, event);
                true
            }
            None => false,
        }
    }

    /// The background watch of an HTTP connection: every `every`, a Ready
    /// session idle that long is pinged. A session the server no longer
    /// knows (a restart: 404) is re-initialised now, and a server that does
    /// not answer the connection (killed) sends the connection into the
    /// reconnect loop (Down while it fails), so the next call finds a fresh
    /// session or a clear `server_down`, never a stale one. Calls in
    /// flight show liveness by themselves, so a busy session is not pinged.
    async fn watch(self: Arc<Self>, every: Duration) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = self.cancel.cancelled() => return,
            }
            let session = {
                let inner = self.lock();
                match (carries_calls(&inner.machine), &inner.session) {
                    (true, Some(s)) => s.clone(),
                    _ => continue,
                }
            };
            if session.busy() || session.idle() < every {
                continue;
            }
            let failure = match session.ping(PROBE_TIMEOUT.min(every)).await {
                Ok(()) => continue,
                Err(f) => f,
            };
            // A server that answers the ping with an error is up (some do
            // not implement ping); a timeout says nothing. Neither fires.
            match self.event_for(&session, &failure, Request::Other) {
                Some(ConnectionEvent::CallOk) | None => {}
                Some(event) => {
                    tracing::info!(server = %self.spec.name, event = event.name(), "mcp watch: the connection changed while idle");
                    self.report(&session, event);
                }
            }
        }
    }

    /// A call met an expired session after `idle` without traffic.
    fn learn_expiry(&self, idle: Duration) {
        // Under the watch no session stays idle past its interval, so an
        // expiry met sooner is a restart the watch had not seen yet, not
        // the server's session lifetime.
        if self.options.watch_every.is_some_and(|w| idle < w) {
            return;
        }
        let mut inner = self.lock();
        let seen = inner.expired_idle.map_or(idle, |d| d.min(idle));
        if inner.expired_idle != Some(seen) {
            tracing::info!(server = %self.spec.name, idle_ms = seen.as_millis() as u64, "mcp session expired after this idle time; idle sessions are probed after half of it");
        }
        inner.expired_idle = Some(seen);
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let factor = 1u32 << attempt.saturating_sub(1).min(16);
        self.options
            .backoff_initial
            .saturating_mul(factor)
            .min(self.options.backoff_max)
    }

    /// Opens a new session and lists its tools.
    async fn open(self: &Arc<Self>) -> Result<(Arc<Session>, Listing), McpError> {
        let generation = {
            let mut inner = self.lock();
            inner.generation += 1;
            inner.generation
        };
        let weak = Arc::downgrade(self);
        let session = Session::open(
            &self.spec,
            generation,
            self.options.connect_timeout,
            self.options.input_wait,
            &self.cancel,
            move |reason| {
                if let Some(shared) = weak.upgrade() {
                    shared.ended(generation, reason);
                }
            },
        )
        .await?;
        let session = Arc::new(session);
        match session.list_tools(self.options.call_timeout).await {
            Ok(listing) => Ok((session, listing)),
            Err(f) => {
                session.close().await;
                Err(McpError::Connect {
                    server: self.spec.name.clone(),
                    reason: format!(
                        "tools/list failed: {}",
                        f.into_error(&self.spec.name, "tools/list")
                    ),
                })
            }
        }
    }

    /// The connection ended without being asked to.
    fn ended(self: &Arc<Self>, generation: u64, reason: String) {
        let event = match self.is_stdio() {
            true => ConnectionEvent::ChildExited,
            false => ConnectionEvent::TransportError,
        };
        tracing::warn!(server = %self.spec.name, generation, %reason, event = event.name(), "mcp connection ended");
        self.report_generation(generation, event);
    }

    /// Makes `session` current with its tools (`publish-tools`); returns the
    /// session it replaces, to be closed.
    fn publish(
        &self,
        inner: &mut Inner,
        session: Arc<Session>,
        listing: Listing,
    ) -> Option<Arc<Session>> {
        tracing::info!(
            server = %self.spec.name,
            generation = session.generation,
            tools = listing.tools.len(),
            read_only = listing.read_only.len(),
            "mcp tools published"
        );
        inner.protocol_version = session.protocol_version.clone();
        inner.server_info = session.server_info.clone();
        inner.listing = Some(listing);
        inner.failures = 0;
        inner.last_error = None;
        inner.session.replace(session)
    }

    async fn first_attempt(self: &Arc<Self>) {
        let attempt = self.open().await;
        let to_close = {
            let mut inner = self.lock();
            match attempt {
                Ok((session, listing)) => {
                    match self.fire(&mut inner, opened_event(&session, false)) {
                        Some(ConnectionEffect::PublishTools) => {
                            self.publish(&mut inner, session, listing)
                        }
                        _ => Some(session),
                    }
                }
                Err(e) => {
                    tracing::warn!(server = %self.spec.name, error = %e, "mcp server is down at start");
                    inner.last_error = Some(e);
                    if let Some(ConnectionEffect::RetryWithBackoff) =
                        self.fire(&mut inner, ConnectionEvent::ConnectFailed)
                    {
                        inner.failures += 1;
                        let delay = self.backoff(inner.failures);
                        self.begin_recovery(&mut inner, delay);
                    }
                    None
                }
            }
        };
        if let Some(s) = to_close {
            s.close().await;
        }
    }

    /// The reconnect loop: wait, attempt, fire `reconnect_ok` or
    /// `reconnect_failed`, and go on while the table says
    /// `retry-with-backoff`.
    async fn recover(self: Arc<Self>, mut delay: Duration) {
        loop {
            if !delay.is_zero() {
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = self.cancel.cancelled() => return,
                }
            }
            if self.cancel.is_cancelled() {
                return;
            }
            let attempt = self.open().await;
            if self.cancel.is_cancelled() {
                // Shut down while the attempt was out: nothing to fire.
                if let Ok((session, _)) = attempt {
                    session.close().await;
                }
                return;
            }
            let (to_close, again) = {
                let mut inner = self.lock();
                match attempt {
                    Ok((session, listing)) => {
                        inner.recovering = false;
                        match self.fire(&mut inner, opened_event(&session, true)) {
                            Some(ConnectionEffect::PublishTools) => {
                                (self.publish(&mut inner, session, listing), None)
                            }
                            // Closed meanwhile (or the row was edited): the
                            // new session is not published.
                            _ => (Some(session), None),
                        }
                    }
                    Err(e) => {
                        tracing::warn!(server = %self.spec.name, error = %e, "mcp reconnect failed");
                        inner.last_error = Some(e);
                        let effect = self.fire(&mut inner, ConnectionEvent::ReconnectFailed);
                        // Down has no session.
                        let old = match inner.machine.state() {
                            ConnectionState::Down | ConnectionState::Closed => inner.session.take(),
                            _ => None,
                        };
                        match effect {
                            Some(ConnectionEffect::RetryWithBackoff) => {
                                inner.failures += 1;
                                (old, Some(self.backoff(inner.failures)))
                            }
                            _ => {
                                inner.recovering = false;
                                (old, None)
                            }
                        }
                    }
                }
            };
            if let Some(s) = to_close {
                s.close().await;
            }
            match again {
                Some(d) => {
                    tracing::info!(server = %self.spec.name, retry_in_ms = d.as_millis() as u64, "mcp server down; retrying with backoff");
                    delay = d;
                }
                None => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_client_is_send_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<ToolClient>();
    }

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let table = builtin_connection_table().unwrap_or_else(|e| panic!("{e}"));
        let machine = table.machine();
        let (state, _) = tokio::sync::watch::channel(machine.state());
        let shared = Shared {
            spec: ServerSpec::http("x", "http://127.0.0.1:1/mcp"),
            options: ClientOptions {
                backoff_initial: Duration::from_millis(100),
                backoff_max: Duration::from_millis(700),
                ..ClientOptions::default()
            },
            table,
            inner: Mutex::new(Inner::new(machine)),
            state,
            cancel: CancellationToken::new(),
        };
        let delays: Vec<u128> = (1..=5).map(|n| shared.backoff(n).as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 700, 700]);
        assert_eq!(shared.backoff(1000), Duration::from_millis(700));
    }
}
