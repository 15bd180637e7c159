//! Tool handlers of the demo server: `search_photos`, `query_data`,
//! `get_panorama`, `get_photo`, `list_projects`, plus the injectable
//! [`Fault`]s for the two list tools (`search_photos` and `query_data`) and
//! the detail tool `get_panorama`; and the seat-reservation tools
//! `prepare_seat_reservation`, `confirm_action`, `cancel_action` and
//! `get_action` over the server's [`ActionStore`] (no fault applies to
//! them); and the asking tools `notify_site_contact` and
//! `open_permit_portal` ([`asks`], with their own two faults).
//!
//! Both list tools page with an opaque `cursor` and report their accounting
//! (`returned`, `total` or `total_lower_bound`, `has_more`, `next_cursor`) in
//! the result's `_meta` and in `structuredContent`:
//!
//! * `search_photos` cursors are bound to the result set (query words and
//!   filters). A keyword search reports `total_lower_bound` unless it has at
//!   most [`EXACT_TOTAL_MAX`] hits, which the server enumerates and counts
//!   exactly (`total`); a filters-only search always reports `total`.
//! * `query_data` cursors carry the *question* and an offset, not the SQL:
//!   every page re-translates and re-runs the question, as the upstream does.
//!   Its listings are capped by
//!   [`INJECTED_ROW_LIMIT`](query::INJECTED_ROW_LIMIT) and report the capped
//!   count as `total` with `has_more: false` on the last page — the
//!   upstream's confidently wrong completion signal, which the client has to
//!   detect.

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::{
    InputResponses as ToolInputResponses, RequestState, ToolCallContext,
};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeRequestParams, InitializeResult, ListToolsResult, MetaObject, PaginatedRequestParams,
    ProtocolVersion, ServerCapabilities, ServerConfig, TextContent,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{SessionId, SessionManager as _};
use rmcp::{schemars, tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::actions::{ActionError, ActionStore, ActionView, Prepared};
use super::asks::{self, AskFaults, AskStore, Round};
use super::auth::{Identities, Owner, Verdict, VerifierFault};
use super::data::{self, floor_name, Date, Filter, Hit};
use super::query;
use super::sessions;

/// Default `limit` for `search_photos`.
pub const DEFAULT_LIMIT: usize = 10;
/// Largest `limit` honoured by `search_photos` (larger values are clamped).
pub const MAX_LIMIT: usize = 50;
/// A keyword search with at most this many hits reports an exact `total`
/// (the server can enumerate them); more hits get a `total_lower_bound`.
pub const EXACT_TOTAL_MAX: usize = 50;
/// Default `limit` (page size) for `query_data`.
pub const QUERY_DEFAULT_LIMIT: usize = 50;
/// Largest `limit` honoured by `query_data` (larger values are clamped).
pub const QUERY_MAX_LIMIT: usize = 200;
/// Page size of the server's own `tools/list` (small on purpose, so clients
/// have to follow `nextCursor`).
pub const TOOLS_PAGE_SIZE: usize = 2;
/// How far [`Fault::CursorDrift`] shifts a page back (and inflates the total).
pub const DRIFT: usize = 3;

/// Failure modes seen in real search adapters, injectable for tests.
/// The first four apply to both list tools, `search_photos` and
/// `query_data`; the two that need no cursor (`Upstream502`,
/// `AuthEmptyObject`) also apply to the detail tool `get_panorama`, which
/// takes no cursor. The last two (`InputHugeState`, `InputAsksSecret`)
/// apply only to the asking tools ([`asks`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The upstream API failed, and the adapter passed the error text on as a
    /// *successful* result: one text block, `isError: false`, no `_meta`, no
    /// structured content.
    Upstream502,
    /// An auth failure swallowed into a single text block `{}`
    /// (`isError: false`, no `_meta`).
    AuthEmptyObject,
    /// Every call with a cursor answers the text `invalid cursor`
    /// (`isError: false`, no `_meta`).
    CursorRejected,
    /// A call with a cursor re-runs with the offset shifted back by
    /// [`DRIFT`], so ids overlap the previous page, and the reported total
    /// grows by [`DRIFT`]. For `query_data` the re-translated SQL also
    /// differs (its `ORDER BY` loses the `p.id` tiebreak).
    CursorDrift,
    /// The asking tools' 2026-07-28 ask carries a `requestState` of over
    /// 1 MiB: its `rs-<uuid>` handle followed by
    /// [`HUGE_STATE_PADDING`](asks::HUGE_STATE_PADDING) `x`s (it
    /// still names the pending ask).
    InputHugeState,
    /// `notify_site_contact`'s form also asks for a required `password`
    /// (title "Password"), which a client must refuse to show.
    InputAsksSecret,
}

impl Fault {
    /// Every fault, in a stable order.
    pub const ALL: [Fault; 6] = [
        Fault::Upstream502,
        Fault::AuthEmptyObject,
        Fault::CursorRejected,
        Fault::CursorDrift,
        Fault::InputHugeState,
        Fault::InputAsksSecret,
    ];

    /// The CLI name: `upstream-502`, `auth-empty-object`, `cursor-rejected`,
    /// `cursor-drift`, `input-huge-state`, `input-asks-secret`.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Upstream502 => "upstream-502",
            Fault::AuthEmptyObject => "auth-empty-object",
            Fault::CursorRejected => "cursor-rejected",
            Fault::CursorDrift => "cursor-drift",
            Fault::InputHugeState => "input-huge-state",
            Fault::InputAsksSecret => "input-asks-secret",
        }
    }

    /// Parse a CLI name (see [`Fault::name`]). Usable as a clap `value_parser`.
    pub fn parse(s: &str) -> Result<Fault, String> {
        let wanted = s.trim();
        Fault::ALL
            .into_iter()
            .find(|f| f.name() == wanted)
            .ok_or_else(|| {
                let known: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
                format!("unknown fault '{wanted}' (known: {})", known.join(", "))
            })
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Fault {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Fault::parse(s)
    }
}

/// Demo server behaviour.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DemoOptions {
    pub faults: Vec<Fault>,
    /// How long an MCP session may stay idle before the server forgets it
    /// (the next request on it gets HTTP 404). `None`: rmcp's default,
    /// `SessionConfig::DEFAULT_KEEP_ALIVE` (300 s). `turnstile demo
    /// --mcp-session-ttl SECS`.
    pub session_ttl: Option<std::time::Duration>,
    /// Every tool call waits this long before it answers (zero: none), so
    /// tests can have a call out when the server goes away.
    pub call_delay: std::time::Duration,
    /// How long after `confirm_action` accepts an action the worker carries
    /// it out (default
    /// [`DEFAULT_ACTION_WORKER_DELAY`](super::actions::DEFAULT_ACTION_WORKER_DELAY),
    /// 300 ms), so a client can see it ACCEPTED before it is COMPLETED.
    pub action_worker_delay: std::time::Duration,
    /// How long a prepared action stays PENDING before it reads EXPIRED
    /// (default [`ACTION_TTL`](super::actions::ACTION_TTL), 10 minutes).
    pub action_ttl: std::time::Duration,
    /// How long a confirmed lecture-file export is BUILDING before its ZIP
    /// is served (default
    /// [`DEFAULT_BUILD_DELAY`](super::exports::DEFAULT_BUILD_DELAY)).
    pub export_build_delay: std::time::Duration,
    /// How long a confirmed export's download link works (default
    /// [`EXPORT_TTL`](super::exports::EXPORT_TTL), 20 minutes).
    pub export_ttl: std::time::Duration,
    /// How the bearer verifier `GET /api/auth/me` misbehaves from the
    /// start (default: it does not); switchable at run time with
    /// [`DemoServer::set_verifier_fault`](crate::DemoServer::set_verifier_fault).
    pub verifier_fault: VerifierFault,
    /// Also speak MCP 2026-07-28 (stateless: `server/discover`, no
    /// session) to a client that asks for it; `false`: revisions up to
    /// 2025-11-25 only, like most deployed servers (ADR 0003).
    /// `turnstile demo --mcp-stateless`.
    pub stateless: bool,
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            faults: Vec::new(),
            session_ttl: None,
            call_delay: std::time::Duration::ZERO,
            action_worker_delay: super::actions::DEFAULT_ACTION_WORKER_DELAY,
            action_ttl: super::actions::ACTION_TTL,
            export_build_delay: super::exports::DEFAULT_BUILD_DELAY,
            export_ttl: super::exports::EXPORT_TTL,
            verifier_fault: VerifierFault::None,
            stateless: false,
        }
    }
}

/// State shared by every session of one demo server.
#[derive(Debug)]
pub struct DemoState {
    options: DemoOptions,
    search_calls: AtomicU64,
    query_calls: AtomicU64,
    /// Calls that reached each tool's handler, by tool name.
    calls: std::sync::Mutex<std::collections::BTreeMap<&'static str, u64>>,
    /// In an `Arc` of its own: a confirmed action's worker outlives the call.
    actions: Arc<ActionStore>,
    /// Lecture-file exports and their downloads.
    exports: Arc<super::exports::ExportStore>,
    /// Every `tools/call` that reached the server's handler, by the tool
    /// name it asked for, counted before anything else is looked at.
    tool_calls: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
    /// The demo users, the bearer verifier's switch and counter.
    identities: Identities,
    /// The live MCP sessions (rmcp's session manager), once the server is
    /// bound; unset for handlers used without a transport (no session is
    /// live then).
    sessions: std::sync::OnceLock<Arc<LocalSessionManager>>,
    /// Private-tool calls that named their session explicitly (refused or
    /// not).
    explicit_session_calls: AtomicU64,
    /// The asking tools' pending asks, notifications and portal visits.
    asks: AskStore,
    /// `compile_site_report`'s tasks, shared by every session.
    reports: super::reports::Reports,
}

impl Default for DemoState {
    fn default() -> Self {
        DemoState::new(DemoOptions::default())
    }
}

impl DemoState {
    pub fn new(options: DemoOptions) -> Self {
        let actions = Arc::new(ActionStore::new(
            options.action_ttl,
            options.action_worker_delay,
        ));
        let exports = Arc::new(super::exports::ExportStore::new(
            options.export_build_delay,
            options.export_ttl,
        ));
        let identities = Identities::new(options.verifier_fault);
        DemoState {
            options,
            search_calls: AtomicU64::new(0),
            query_calls: AtomicU64::new(0),
            calls: Default::default(),
            actions,
            exports,
            tool_calls: Default::default(),
            identities,
            sessions: std::sync::OnceLock::new(),
            explicit_session_calls: AtomicU64::new(0),
            asks: AskStore::default(),
            reports: super::reports::Reports::new(super::reports::DEFAULT_STEP),
        }
    }

    /// `compile_site_report`'s tasks and counters.
    pub fn reports(&self) -> &super::reports::Reports {
        &self.reports
    }

    /// The asking tools' state: pending 2026 asks, the notifications
    /// recorded, the permit portal's visits.
    pub fn asks(&self) -> &AskStore {
        &self.asks
    }

    /// The demo users and the bearer verifier.
    pub fn identities(&self) -> &Identities {
        &self.identities
    }

    /// Binds the state to the server's session manager (once).
    pub fn set_sessions(&self, sessions: Arc<LocalSessionManager>) {
        let _ = self.sessions.set(sessions);
    }

    /// Is `id` a live MCP session of this server: issued by its session
    /// manager and not closed (by `DELETE`, its idle timeout or
    /// [`DemoServer::expire_sessions`](crate::DemoServer::expire_sessions))?
    /// Exact: the id as issued, byte for byte.
    pub async fn is_live_session(&self, id: &str) -> bool {
        match self.sessions.get() {
            Some(sessions) => sessions
                .has_session(&SessionId::from(id))
                .await
                .unwrap_or(false),
            None => false,
        }
    }

    /// How many `tools/call` requests for `tool` reached the server's
    /// handler, whatever became of them (unknown tools, bad arguments and
    /// session refusals included).
    pub fn tool_calls(&self, tool: &str) -> u64 {
        let calls = self.tool_calls.lock().unwrap_or_else(|e| e.into_inner());
        calls.get(tool).copied().unwrap_or(0)
    }

    /// How many private-tool calls named their session explicitly in
    /// `_meta["turnstile/session"]`, refused or not.
    pub fn explicit_session_calls(&self) -> u64 {
        self.explicit_session_calls.load(Ordering::SeqCst)
    }

    fn count_tool_call(&self, tool: &str) {
        let mut calls = self.tool_calls.lock().unwrap_or_else(|e| e.into_inner());
        *calls.entry(tool.to_string()).or_default() += 1;
    }

    /// The lecture-file exports.
    pub fn exports(&self) -> &Arc<super::exports::ExportStore> {
        &self.exports
    }

    /// The seat-reservation actions.
    pub fn actions(&self) -> &Arc<ActionStore> {
        &self.actions
    }

    /// The server's options.
    pub fn options(&self) -> &DemoOptions {
        &self.options
    }

    /// How many calls of `tool` reached its handler (for tests that must
    /// prove a call ran at most once).
    pub fn calls(&self, tool: &str) -> u64 {
        let calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        calls.get(tool).copied().unwrap_or(0)
    }

    /// Counts one call of `tool`, then waits the configured call delay.
    async fn enter(&self, tool: &'static str) {
        {
            let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
            *calls.entry(tool).or_default() += 1;
        }
        if !self.options.call_delay.is_zero() {
            tokio::time::sleep(self.options.call_delay).await;
        }
    }

    fn has(&self, fault: Fault) -> bool {
        self.options.faults.contains(&fault)
    }

    /// The asking tools' faults, from the injected ones.
    pub fn ask_faults(&self) -> AskFaults {
        AskFaults {
            huge_state: self.has(Fault::InputHugeState),
            asks_secret: self.has(Fault::InputAsksSecret),
        }
    }

    /// The injected faults.
    pub fn faults(&self) -> &[Fault] {
        &self.options.faults
    }

    /// How many `search_photos` calls reached the handler (for tests that
    /// must prove a call did, or did not, run).
    pub fn search_calls(&self) -> u64 {
        self.search_calls.load(Ordering::SeqCst)
    }

    /// How many `query_data` calls reached the handler.
    pub fn query_calls(&self) -> u64 {
        self.query_calls.load(Ordering::SeqCst)
    }
}

/// Arguments of `search_photos`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SearchPhotosArgs {
    /// Keywords matched against annotation kind/title and panorama label. Empty string = filters only.
    pub query: String,
    /// Project id (default "tower-a"; see list_projects).
    #[serde(default)]
    pub project: Option<String>,
    /// Floor number; basement B1 is -1.
    #[serde(default)]
    pub floor: Option<i32>,
    /// Earliest capture date, inclusive, YYYY-MM-DD.
    #[serde(default)]
    pub date_from: Option<String>,
    /// Latest capture date, inclusive, YYYY-MM-DD.
    #[serde(default)]
    pub date_to: Option<String>,
    /// Hits per page (default 10, max 50).
    #[serde(default)]
    pub limit: Option<i64>,
    /// next_cursor from the previous page of the same search.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// Arguments of `query_data`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct QueryDataArgs {
    /// The question in plain language, e.g. "how many photos are on floor 3?" or "safety issues on floor 3 from April". It is translated into SQL over panoramas and their annotations.
    pub question: String,
    /// Project id (default "tower-a"; see list_projects).
    #[serde(default)]
    pub project: Option<String>,
    /// Rows per page (default 50, max 200).
    #[serde(default)]
    pub limit: Option<i64>,
    /// next_cursor from the previous page of the same question.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// Arguments of `archive_query`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ArchiveQueryArgs {
    /// The question in plain language, as for query_data.
    pub question: String,
    /// Project id (default "tower-a"; see list_projects).
    #[serde(default)]
    pub project: Option<String>,
}

/// Arguments of `get_photo`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct GetPhotoArgs {
    /// Panorama id, e.g. "TA-00412".
    pub id: String,
}

/// Arguments of `get_panorama`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct GetPanoramaArgs {
    /// The panorama to open: its label as search_photos shows it (e.g. "PANO-003-0611") or its id (e.g. "TA-00412").
    pub id: String,
    /// Project id (default "tower-a"; see list_projects). Labels are unique within a project.
    #[serde(default)]
    pub project: Option<String>,
}

/// Arguments of `prepare_seat_reservation`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct PrepareSeatReservationArgs {
    /// Seat number, "1" to "40" (digits only).
    pub seat: String,
    /// Time, HH:MM on the 24-hour clock, e.g. "15:00".
    pub time: String,
}

/// Arguments of `confirm_action`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfirmActionArgs {
    /// The actionId prepare_seat_reservation returned.
    pub action_id: u64,
    /// Any string unique to this confirmation; a retry with the same key returns the same answer instead of confirming twice.
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// Arguments of `confirm_lms_material_export`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExportIdArgs {
    /// The exportId export_all_lms_materials returned.
    pub export_id: String,
}

/// Arguments of `notify_site_contact`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct NotifySiteContactArgs {
    /// The issue to tell someone about, e.g. "PANO-003-0611".
    pub issue_id: String,
}

/// Arguments of `open_permit_portal`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct OpenPermitPortalArgs {
    /// The permit number, e.g. "HW-12" (letters, digits and dashes).
    pub permit: String,
}

/// Arguments of `cancel_action` and `get_action`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActionIdArgs {
    /// The actionId prepare_seat_reservation returned.
    pub action_id: u64,
}

/// The `status` of a prepare, confirm or cancel answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReplyStatus {
    /// A pending action was prepared.
    Ok,
    /// No such seat: nothing was prepared (actionId 0).
    NoSuchSeat,
    /// The time is not HH:MM: nothing was prepared (actionId 0).
    BadTime,
    /// The seat is already reserved at that time: nothing was prepared
    /// (actionId 0, `reason` "seat taken").
    SeatTaken,
    /// The action was confirmed.
    Accepted,
    /// The action is cancelled.
    Cancelled,
}

/// What `prepare_seat_reservation`, `confirm_action` and `cancel_action`
/// answer: `{"status": "OK", "actionId": 1}`. A prepare that held a seat
/// also says which, as a real backend tells its client what it holds:
/// `{"status": "OK", "actionId": 1, "seat": "12", "time": "15:00"}` (the
/// approval card asks about these, issue 33 §5).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActionReply {
    pub status: ReplyStatus,
    /// The action's id; 0 when nothing was prepared.
    pub action_id: u64,
    /// The seat a prepared reservation holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seat: Option<String>,
    /// Its time, HH:MM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// Why nothing was prepared, when the desk says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One annotation of a panorama, in `get_panorama`'s result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct AnnotationDetail {
    /// `safety`, `quality` or `progress`.
    pub kind: String,
    /// What was noted, e.g. "unprotected floor edge".
    pub title: String,
    /// Access level a viewer needs to see this annotation: basic, pro, enterprise or safety-plus.
    pub tier: String,
}

/// `get_panorama`'s structured content: one panorama in full. Its fields
/// are a superset of a `search_photos` item's (`id`, `project`, `floor`,
/// `captured_at`, `label`, `annotations` carry the same values), and it is
/// bounded: a panorama has at most four annotations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct PanoramaDetail {
    /// Panorama id, e.g. "TA-00412" (unique across projects).
    pub id: String,
    /// Human label, e.g. "PANO-003-0611" (floor, then sequence on that floor; unique within a project).
    pub label: String,
    /// Project id, e.g. "tower-a".
    pub project: String,
    /// The project's name.
    pub project_name: String,
    /// Floor number; basement B1 is -1.
    pub floor: i32,
    /// The floor as people write it: "B1", "3".
    pub floor_name: String,
    /// Capture date, YYYY-MM-DD.
    pub captured_at: String,
    /// Every annotation on the panorama, in the order search_photos lists them.
    pub annotations: Vec<AnnotationDetail>,
    /// A one-paragraph description composed from the fields above.
    pub description: String,
}

/// The MCP handler: one instance per session, all sharing one [`DemoState`].
#[derive(Clone)]
pub struct DemoTools {
    state: Arc<DemoState>,
    tool_router: ToolRouter<Self>,
    /// Whose private state this session's calls act on: fixed when the
    /// session is initialised (see [`DemoTools::owner`]).
    owner: Arc<std::sync::OnceLock<Owner>>,
}

impl fmt::Debug for DemoTools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DemoTools")
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

#[tool_router(router = tool_router)]
impl DemoTools {
    pub fn new(state: Arc<DemoState>) -> Self {
        let mut tool_router = Self::tool_router();
        // The licence tiers some tools declare in `tools/list`.
        for (name, route) in tool_router.map.iter_mut() {
            if let Some(tier) = super::auth::licence_tier(name) {
                let mut meta = route.attr.meta.clone().unwrap_or_default();
                meta.insert(super::auth::LICENCE_TIER_META.into(), json!(tier));
                route.attr.meta = Some(meta);
            }
        }
        DemoTools {
            state,
            tool_router,
            owner: Arc::default(),
        }
    }

    /// Whose private state this session's calls act on: the subject of the
    /// demo user whose valid bearer token came with the session's
    /// `initialize` (the `Authorization` header of that HTTP request), else
    /// the shared anonymous owner. Fixed for the session's life; a new
    /// session of the same user has the same owner, so state outlives a
    /// client's reconnects.
    pub fn owner(&self) -> Owner {
        self.owner.get().cloned().unwrap_or_default()
    }

    #[tool(
        description = "Keyword search over construction-site panoramas (matches annotation kind/title and panorama label; a stand-in for semantic search). Filters: project (default tower-a), floor (B1 = -1), date_from/date_to (YYYY-MM-DD, inclusive). One text block per hit. _meta reports returned, total (filters only, or a keyword query with at most 50 hits) or total_lower_bound (other keyword queries), has_more and next_cursor; pass next_cursor back with the same filters for the next page."
    )]
    async fn search_photos(
        &self,
        Parameters(args): Parameters<SearchPhotosArgs>,
    ) -> CallToolResult {
        self.state.enter("search_photos").await;
        search_photos(&self.state, args)
    }

    #[tool(
        description = "Answer a question about the site's data by translating it into SQL over panoramas and their annotations and running it. Understands filters (floor, month, year, annotation kind safety/quality/progress) and single-value aggregates (how many / count, sum, average, earliest/latest capture, lowest/highest floor). Listings return columns id, label, floor, captured_at and an annotation count; a LIMIT 3000 is added to every listing (aggregates are not limited). structuredContent has sql, columns, rows, returned, total, has_more, next_cursor; _meta has the accounting. Pass next_cursor back with the same question for the next page."
    )]
    async fn query_data(&self, Parameters(args): Parameters<QueryDataArgs>) -> CallToolResult {
        self.state.enter("query_data").await;
        query_data(&self.state, args)
    }

    #[tool(
        description = "Ask the site's legacy archive database (a stand-in for the reference SQLite MCP server). Understands the same questions as query_data. Rows come back as one text block in Python-literal form, e.g. [{'n': 651}] or [{'id': 'TA-00412', 'floor': 3}], at most 100 rows, with no accounting, no structured content and no cursor.",
        annotations(read_only_hint = true)
    )]
    async fn archive_query(
        &self,
        Parameters(args): Parameters<ArchiveQueryArgs>,
    ) -> CallToolResult {
        self.state.enter("archive_query").await;
        archive_query(&self.state, args)
    }

    #[tool(description = "Get one panorama and all its annotations by id (e.g. TA-00412).")]
    async fn get_photo(&self, Parameters(args): Parameters<GetPhotoArgs>) -> CallToolResult {
        self.state.enter("get_photo").await;
        get_photo(&args.id)
    }

    #[tool(
        description = "Open one panorama in full detail: id, label, project, floor, capture date, every annotation with its kind and title, and a description. id is the label search_photos shows (e.g. PANO-003-0611) or the panorama id (e.g. TA-00412); labels are unique within a project (default tower-a). Returns one record, not a listing: there is no cursor and no accounting. An unknown id is a tool error.",
        output_schema = rmcp::handler::server::tool::schema_for_output::<PanoramaDetail>(),
        annotations(read_only_hint = true)
    )]
    async fn get_panorama(&self, Parameters(args): Parameters<GetPanoramaArgs>) -> CallToolResult {
        self.state.enter("get_panorama").await;
        get_panorama(&self.state, args)
    }

    #[tool(
        description = "List projects with their floors, panorama counts and capture date range."
    )]
    async fn list_projects(&self) -> CallToolResult {
        self.state.enter("list_projects").await;
        list_projects()
    }

    #[tool(
        description = "Prepare a seat reservation without making it: seat is a seat number \"1\" to \"40\", time is HH:MM on the 24-hour clock. Answers {\"status\": \"OK\", \"actionId\": N, \"seat\": \"12\", \"time\": \"15:00\"}: a PENDING action that reserves nothing until confirm_action confirms it, and expires after 10 minutes. An unknown seat or a malformed time prepares nothing and answers status NO_SUCH_SEAT or BAD_TIME with actionId 0; a seat already reserved at that time prepares nothing and answers status SEAT_TAKEN, actionId 0, reason \"seat taken\".",
        output_schema = rmcp::handler::server::tool::schema_for_output::<ActionReply>(),
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false
        )
    )]
    async fn prepare_seat_reservation(
        &self,
        Parameters(args): Parameters<PrepareSeatReservationArgs>,
    ) -> CallToolResult {
        self.state.enter("prepare_seat_reservation").await;
        prepare_seat_reservation(&self.state, &self.owner(), args)
    }

    #[tool(
        description = "Confirm a prepared action, which then cannot be undone: PENDING becomes ACCEPTED and the answer is {\"status\": \"ACCEPTED\", \"actionId\": N}; the action is carried out shortly after (get_action then reads COMPLETED, or FAILED with a reason such as \"seat taken\"). Confirm only what the user approved. A retry with the same idempotencyKey answers the same without confirming twice. Confirming an unknown, cancelled, expired or already confirmed action is an error.",
        output_schema = rmcp::handler::server::tool::schema_for_output::<ActionReply>(),
        annotations(read_only_hint = false, destructive_hint = true)
    )]
    async fn confirm_action(
        &self,
        Parameters(args): Parameters<ConfirmActionArgs>,
    ) -> CallToolResult {
        self.state.enter("confirm_action").await;
        confirm_action(&self.state, &self.owner(), args)
    }

    #[tool(
        description = "Cancel a prepared action that is still PENDING: answers {\"status\": \"CANCELLED\", \"actionId\": N}, and the same again for an action already cancelled. A confirmed action can no longer be cancelled (an error), nor can an unknown or expired one.",
        output_schema = rmcp::handler::server::tool::schema_for_output::<ActionReply>(),
        annotations(read_only_hint = false, destructive_hint = true)
    )]
    async fn cancel_action(&self, Parameters(args): Parameters<ActionIdArgs>) -> CallToolResult {
        self.state.enter("cancel_action").await;
        cancel_action(&self.state, &self.owner(), args)
    }

    #[tool(
        description = "Preview an export of every lecture file of the user's current courses, without starting it: answers {\"status\": \"OK\", \"exportId\": \"EXP-N\", \"fileCount\": n, \"estimatedBytes\": b}. Nothing is exported until confirm_lms_material_export confirms this exportId, in a later step, after the user has seen the preview.",
        annotations(read_only_hint = true)
    )]
    async fn export_all_lms_materials(&self) -> CallToolResult {
        self.state.enter("export_all_lms_materials").await;
        let p = self.state.exports.preview_as(&self.owner());
        record(&serde_json::json!({
            "status": "OK",
            "exportId": p.export_id,
            "fileCount": p.file_count,
            "estimatedBytes": p.estimated_bytes,
        }))
    }

    #[tool(
        description = "Start the export a preview named (exportId from export_all_lms_materials). Answers at once {\"status\": \"OK\", \"data\": {\"jobId\", \"downloadUrl\", \"expiresAt\"}}: the ZIP is built in the background and the download link (valid 20 minutes) shows a page that waits while it is BUILDING. An unknown exportId answers status NOT_FOUND.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true
        )
    )]
    async fn confirm_lms_material_export(
        &self,
        Parameters(args): Parameters<ExportIdArgs>,
    ) -> CallToolResult {
        self.state.enter("confirm_lms_material_export").await;
        match self
            .state
            .exports
            .confirm_as(&self.owner(), &args.export_id)
        {
            Some(s) => record(&serde_json::json!({
                "status": "OK",
                "data": {"jobId": s.job_id, "downloadUrl": s.download_url, "expiresAt": s.expires_at},
            })),
            None => record(&serde_json::json!({"status": "NOT_FOUND", "data": null})),
        }
    }

    #[tool(
        description = "Read one action: actionId, status (PENDING, ACCEPTED, COMPLETED, FAILED, CANCELLED or EXPIRED), seat, time, and the reason when it FAILED. An unknown actionId is an error.",
        output_schema = rmcp::handler::server::tool::schema_for_output::<ActionView>(),
        annotations(read_only_hint = true)
    )]
    async fn get_action(&self, Parameters(args): Parameters<ActionIdArgs>) -> CallToolResult {
        self.state.enter("get_action").await;
        get_action(&self.state, &self.owner(), args)
    }

    #[tool(
        description = "Tell a site contact about an issue (e.g. PANO-003-0611). The user is asked, in a form, who should be told: name, email, role (site manager, safety officer or foreman) and whether it is urgent. Answers {\"status\": \"NOTIFIED\", \"issue_id\", \"contact\": {...}} when the user filled it in, {\"status\": \"NOT_NOTIFIED\", \"reason\": \"declined\", \"issue_id\"} when they declined and {\"status\": \"CANCELLED\", \"issue_id\"} when they cancelled; nobody is told then. A client that cannot ask the user gets the error NO_ELICITATION and nothing is done.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false
        )
    )]
    async fn notify_site_contact(
        &self,
        Parameters(args): Parameters<NotifySiteContactArgs>,
        RequestState(request_state): RequestState,
        ToolInputResponses(input_responses): ToolInputResponses,
        context: RequestContext<RoleServer>,
    ) -> CallToolResponse {
        self.state.enter("notify_site_contact").await;
        let round = Round {
            request_state,
            input_responses,
        };
        let stateless = speaks_stateless(&context);
        asks::notify_site_contact(
            &self.state.asks,
            self.state.ask_faults(),
            &args.issue_id,
            round,
            stateless,
            &context,
        )
        .await
    }

    #[tool(
        description = "Compile the weekly site report for a project (\"tower-a\" or \"annex\") and file it. It takes a few seconds: a client that follows MCP tasks gets a task and its progress. Answers {\"status\": \"COMPILED\", \"project\", \"captures\", \"annotations\", \"steps\"}; an unknown project is the error UNKNOWN_PROJECT.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false
        )
    )]
    async fn compile_site_report(
        &self,
        Parameters(args): Parameters<CompileSiteReportArgs>,
        context: RequestContext<RoleServer>,
    ) -> CallToolResponse {
        self.state.enter("compile_site_report").await;
        // A task only for a client that said it follows tasks (SEP-2663):
        // in the request's `_meta` (2026-07-28) or at `initialize`.
        let tasks = context
            .client_capabilities()
            .is_some_and(|c| c.supports_tasks());
        self.state.reports.compile(args.project, tasks).await
    }

    #[tool(
        description = "Ask the user to open the permit portal for a hot-work permit (e.g. HW-12), where the permit is signed. The user is shown the portal's link and asked to open it. Answers {\"status\": \"CONSENTED\", \"permit\", \"note\"} when the user agreed to open it (the permit is signed only when the portal says so, never by this answer), {\"status\": \"NOT_OPENED\", \"permit\"} when they declined and {\"status\": \"CANCELLED\", \"permit\"} when they cancelled. A client that cannot show the user a link gets the error NO_ELICITATION.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false
        )
    )]
    async fn open_permit_portal(
        &self,
        Parameters(args): Parameters<OpenPermitPortalArgs>,
        RequestState(request_state): RequestState,
        ToolInputResponses(input_responses): ToolInputResponses,
        context: RequestContext<RoleServer>,
    ) -> CallToolResponse {
        self.state.enter("open_permit_portal").await;
        let round = Round {
            request_state,
            input_responses,
        };
        let stateless = speaks_stateless(&context);
        asks::open_permit_portal(
            &self.state.asks,
            self.state.ask_faults(),
            &args.permit,
            round,
            stateless,
            &context,
        )
        .await
    }
}

/// Arguments of `compile_site_report`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct CompileSiteReportArgs {
    /// The project: "tower-a" or "annex".
    pub project: String,
}

/// Is the request a 2026-07-28 one (stateless: no session, SEP-2567)? Its
/// HTTP request says so in `mcp-protocol-version`; without HTTP parts, the
/// version the request's `_meta` (or the session) names.
fn speaks_stateless(context: &RequestContext<RoleServer>) -> bool {
    match context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|p| p.headers.get("mcp-protocol-version"))
    {
        Some(v) => v.as_bytes() == b"2026-07-28",
        None => context
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28),
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for DemoTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tasks().build())
            .with_server_info(Implementation::new(
                "turnstile-demo",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "Synthetic construction-site photo archive (projects tower-a and annex). Data is generated, not real.",
            )
    }

    /// The default handshake, plus the session's owner: the demo user whose
    /// bearer token the `initialize` request carried (`Authorization:
    /// Bearer …` on its HTTP request), or the anonymous owner when it
    /// carried no `Authorization` header. A token presented but not valid
    /// (unknown, expired, malformed) fails the handshake: it is never
    /// downgraded to anonymous (seed 002).
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        let parts = context.extensions.get::<axum::http::request::Parts>();
        let owner = match parts {
            Some(parts) if super::auth::presents_credentials(&parts.headers) => {
                match super::auth::bearer(&parts.headers).map(|t| self.state.identities.verify(t)) {
                    Some(Verdict::Valid(user)) => Owner::Subject(user.subject),
                    _ => {
                        return Err(ErrorData::invalid_request(
                            "invalid_token: the bearer token is not valid",
                            None,
                        ))
                    }
                }
            }
            _ => Owner::Anonymous,
        };
        let _ = self.owner.set(owner);
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    /// Counts the call ([`DemoState::tool_calls`]) before anything else,
    /// then resolves a private tool's session exactly ([`sessions`]): a
    /// refusal answers `INVALID_SESSION` or `SESSION_MISMATCH` and the tool
    /// does not run.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.state.count_tool_call(&request.name);
        // A 2026-07-28 request has no session (SEP-2567), so there is none
        // for a private tool to belong to: it serves the one client of a
        // stateless demo, as a stdio server serves its one client.
        let stateless = speaks_stateless(&context);
        if sessions::is_private(&request.name) && !stateless {
            // rmcp moves the request's `_meta` into the context.
            let mut explicit = sessions::explicit(&context.meta.0 .0);
            if explicit == sessions::Explicit::Omitted {
                if let Some(meta) = &request.meta {
                    explicit = sessions::explicit(&meta.0 .0);
                }
            }
            if explicit != sessions::Explicit::Omitted {
                self.state
                    .explicit_session_calls
                    .fetch_add(1, Ordering::SeqCst);
            }
            let transport = context
                .extensions
                .get::<axum::http::request::Parts>()
                .and_then(|p| p.headers.get("mcp-session-id"))
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let mut live = std::collections::HashSet::new();
            for id in [&explicit_id(&explicit), &transport].into_iter().flatten() {
                if self.state.is_live_session(id).await {
                    live.insert(id.clone());
                }
            }
            if let Err(refusal) =
                sessions::resolve(&explicit, transport.as_deref(), |id| live.contains(id))
            {
                tracing::info!(tool = %request.name, code = refusal.code(), "demo private tool call refused");
                return Ok(refusal.result().into());
            }
        }
        let tcc = ToolCallContext::new(self, request, context);
        self.tool_router.call(tcc).await
    }

    /// `tasks/get` for `compile_site_report`'s tasks.
    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, ErrorData> {
        let task = self.state.reports.get(&request.task_id)?;
        Ok(rmcp::model::GetTaskResult::new(task))
    }

    /// `tasks/cancel`: cooperative; the report stops between two steps.
    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.state.reports.cancel(&request.task_id)
    }

    /// Like today's deployed servers, the demo speaks revisions up to
    /// 2025-11-25 (see docs/adr/0003-mcp-protocol-version.md); with
    /// `stateless`, 2026-07-28 too, which rmcp serves without a session.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        let newest = match self.state.options.stateless {
            true => ProtocolVersion::V_2026_07_28,
            false => ProtocolVersion::V_2025_11_25,
        };
        Cow::Borrowed(ProtocolVersion::known_up_to(&newest))
    }

    /// Paginated on purpose ([`TOOLS_PAGE_SIZE`] per page) so clients must
    /// follow `nextCursor`.
    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools = self.tool_router.list_all();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(cursor) => cursor
                .strip_prefix("tools:")
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|&n| n <= tools.len())
                .ok_or_else(|| ErrorData::invalid_params("invalid tools/list cursor", None))?,
        };
        let end = (start + TOOLS_PAGE_SIZE).min(tools.len());
        let next_cursor = (end < tools.len()).then(|| format!("tools:{end}"));
        Ok(ListToolsResult {
            tools: tools[start..end].to_vec(),
            next_cursor,
            ..ListToolsResult::default()
        })
    }
}

fn explicit_id(explicit: &sessions::Explicit) -> Option<String> {
    match explicit {
        sessions::Explicit::Id(id) => Some(id.clone()),
        _ => None,
    }
}

/// One text block, `isError: false`, nothing else — what a sloppy adapter
/// returns for an upstream failure.
/// What every list tool checks first, in the upstream's order: the faults
/// that replace a real answer, then the project.
struct Opening<'a> {
    project: String,
    cursor: Option<&'a str>,
    drift: bool,
    data: &'static data::Dataset,
}

fn open_call<'a>(
    state: &DemoState,
    project: Option<&str>,
    cursor: Option<&'a str>,
    endpoint: &str,
) -> Result<Opening<'a>, CallToolResult> {
    let project = project
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .unwrap_or("tower-a")
        .to_string();
    let cursor = cursor.filter(|c| !c.is_empty());
    if state.has(Fault::Upstream502) {
        return Err(bare_text(format!(
            "Search API error: 502 Server Error: Bad Gateway for url: https://search.upstream.invalid/v2/projects/{project}/{endpoint}"
        )));
    }
    if state.has(Fault::AuthEmptyObject) {
        return Err(bare_text("{}"));
    }
    if cursor.is_some() && state.has(Fault::CursorRejected) {
        return Err(bare_text("invalid cursor"));
    }
    let drift = cursor.is_some() && state.has(Fault::CursorDrift);
    let data = data::dataset();
    if data.project(&project).is_none() {
        let known: Vec<&str> = data.projects.iter().map(|p| p.id).collect();
        return Err(tool_error(format!(
            "unknown project '{project}' (known: {})",
            known.join(", ")
        )));
    }
    Ok(Opening {
        project,
        cursor,
        drift,
        data,
    })
}

fn bare_text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

/// A tool-level error the caller should see.
fn tool_error(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

fn parse_date(field: &str, value: Option<&str>) -> Result<Option<Date>, CallToolResult> {
    match value {
        None => Ok(None),
        Some(s) if s.trim().is_empty() => Ok(None),
        Some(s) => Date::parse(s)
            .map(Some)
            .ok_or_else(|| tool_error(format!("{field} must be a date YYYY-MM-DD, got '{s}'"))),
    }
}

fn hex_encode(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

fn hex_decode(hex: &str) -> Option<String> {
    if !hex.len().is_multiple_of(2) || !hex.is_ascii() {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

/// Cursor = `hex("v1.<offset>.<fingerprint>")` — opaque to clients, bound to the
/// result set (query words + filters, not the page size).
pub fn encode_cursor(offset: usize, fingerprint: u64) -> String {
    hex_encode(&format!("v1.{offset}.{fingerprint:016x}"))
}

/// Inverse of [`encode_cursor`]; `None` for anything malformed.
pub fn decode_cursor(cursor: &str) -> Option<(usize, u64)> {
    let text = hex_decode(cursor)?;
    let mut parts = text.split('.');
    if parts.next()? != "v1" {
        return None;
    }
    let offset = parts.next()?.parse().ok()?;
    let fingerprint = u64::from_str_radix(parts.next()?, 16).ok()?;
    parts.next().is_none().then_some((offset, fingerprint))
}

fn describe(hit: &Hit<'_>) -> String {
    if hit.matched.is_empty() {
        return "no annotations".to_string();
    }
    hit.matched
        .iter()
        .map(|a| format!("{} ({})", a.title, a.kind))
        .collect::<Vec<_>>()
        .join("; ")
}

fn panorama_json(p: &data::Panorama) -> Value {
    let mut v = json!({
        "id": p.id,
        "project": p.project,
        "site": data::SITE,
        "floor": p.floor,
        "captured_at": p.captured_at.to_string(),
        "label": p.label,
        "camera": data::camera(p),
        "annotations": p.annotations.iter().map(|a| json!({
            "kind": a.kind,
            "title": a.title,
            "tier": a.tier,
        })).collect::<Vec<_>>(),
    });
    // The grid axes are known for most captures, not all (issue 38 §3).
    if let (Some((x, y)), Value::Object(m)) = (data::grid(p), &mut v) {
        m.insert(
            "grid".into(),
            json!({"x": x, "y": y, "z": floor_name(p.floor)}),
        );
    }
    v
}

/// The `search_photos` handler, transport-free.
pub fn search_photos(state: &DemoState, args: SearchPhotosArgs) -> CallToolResult {
    state.search_calls.fetch_add(1, Ordering::SeqCst);
    let Opening {
        project,
        cursor,
        drift,
        data,
    } = match open_call(
        state,
        args.project.as_deref(),
        args.cursor.as_deref(),
        "photos/search",
    ) {
        Ok(o) => o,
        Err(result) => return result,
    };
    let date_from = match parse_date("date_from", args.date_from.as_deref()) {
        Ok(d) => d,
        Err(e) => return e,
    };
    let date_to = match parse_date("date_to", args.date_to.as_deref()) {
        Ok(d) => d,
        Err(e) => return e,
    };
    let limit = args
        .limit
        .map_or(DEFAULT_LIMIT, |l| {
            usize::try_from(l.max(1)).unwrap_or(MAX_LIMIT)
        })
        .min(MAX_LIMIT);
    let filter = Filter {
        query: args.query,
        project,
        floor: args.floor,
        date_from,
        date_to,
    };
    let fingerprint = filter.fingerprint();
    let mut offset = match cursor {
        None => 0,
        Some(c) => match decode_cursor(c) {
            None => return tool_error("malformed cursor; start again without a cursor"),
            Some((_, fp)) if fp != fingerprint => {
                return tool_error(
                    "cursor belongs to a different search; start again without a cursor",
                )
            }
            Some((offset, _)) => offset,
        },
    };
    if drift {
        offset = offset.saturating_sub(DRIFT);
    }

    let hits = data::search(data, &filter);
    let exact = hits.len() + if drift { DRIFT } else { 0 };
    let page: Vec<&Hit<'_>> = hits.iter().skip(offset).take(limit).collect();
    let returned = page.len();
    let end = offset + returned;
    let has_more = end < hits.len();
    let next_cursor = has_more.then(|| encode_cursor(end, fingerprint));

    // A keyword ("semantic") search cannot count exactly; it reports a
    // conservative lower bound. Filters-only searches, and keyword searches
    // narrow enough to enumerate (at most EXACT_TOTAL_MAX hits, zero
    // included), know their total.
    let mut accounting = Map::new();
    accounting.insert("returned".into(), json!(returned));
    if filter.tokens().is_empty() || hits.len() <= EXACT_TOTAL_MAX {
        accounting.insert("total".into(), json!(exact));
    } else {
        let lower_bound = (exact - exact / 64).max(end);
        accounting.insert("total_lower_bound".into(), json!(lower_bound));
    }
    accounting.insert("has_more".into(), json!(has_more));
    accounting.insert("next_cursor".into(), json!(next_cursor));

    let blocks = page
        .iter()
        .enumerate()
        .map(|(i, hit)| {
            let p = hit.panorama;
            ContentBlock::Text(
                TextContent::new(format!(
                    "## Image #{} — {}, floor {}, {}: {}",
                    offset + i + 1,
                    p.label,
                    floor_name(p.floor),
                    p.captured_at,
                    describe(hit)
                ))
                .with_meta(MetaObject(accounting.clone())),
            )
        })
        .collect();
    let mut structured = accounting.clone();
    structured.insert(
        "items".into(),
        Value::Array(page.iter().map(|h| panorama_json(h.panorama)).collect()),
    );
    let mut result = CallToolResult::success(blocks).with_meta(Some(MetaObject(accounting)));
    result.structured_content = Some(Value::Object(structured));
    result
}

/// What a `query_data` cursor carries: the question to re-run and where the
/// next page starts. Never the SQL.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueryCursor {
    pub offset: usize,
    pub project: String,
    pub question: String,
}

const QUERY_CURSOR_VERSION: &str = "q1";

/// `query_data` cursor = hex("q1:" + JSON of [`QueryCursor`]).
pub fn encode_query_cursor(cursor: &QueryCursor) -> String {
    let body = serde_json::to_string(cursor).unwrap_or_default();
    hex_encode(&format!("{QUERY_CURSOR_VERSION}:{body}"))
}

/// Inverse of [`encode_query_cursor`]; `None` for anything malformed.
pub fn decode_query_cursor(cursor: &str) -> Option<QueryCursor> {
    let text = hex_decode(cursor)?;
    let body = text.strip_prefix(QUERY_CURSOR_VERSION)?.strip_prefix(':')?;
    serde_json::from_str(body).ok()
}

/// Questions that differ only in case and spacing are the same question.
fn same_question(a: &str, b: &str) -> bool {
    let norm = |s: &str| {
        s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase()
    };
    norm(a) == norm(b)
}

fn cell_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "NULL".to_string(),
        other => other.to_string(),
    }
}

/// The `query_data` handler, transport-free.
///
/// Every call (first page or not) translates the question into SQL and runs
/// it; a cursor only says which question and from which row. Listings are
/// capped at [`INJECTED_ROW_LIMIT`](query::INJECTED_ROW_LIMIT) by the
/// generated SQL, and the capped row count is reported as `total`.
pub fn query_data(state: &DemoState, args: QueryDataArgs) -> CallToolResult {
    state.query_calls.fetch_add(1, Ordering::SeqCst);
    let Opening {
        project,
        cursor,
        drift,
        data,
    } = match open_call(
        state,
        args.project.as_deref(),
        args.cursor.as_deref(),
        "query",
    ) {
        Ok(o) => o,
        Err(result) => return result,
    };
    let limit = args
        .limit
        .map_or(QUERY_DEFAULT_LIMIT, |l| {
            usize::try_from(l.max(1)).unwrap_or(QUERY_MAX_LIMIT)
        })
        .min(QUERY_MAX_LIMIT);
    // The question to run: the cursor's (it re-runs the natural-language
    // question), which must be the one this call asks.
    let (question, mut offset) = match cursor {
        None => (args.question, 0),
        Some(c) => match decode_query_cursor(c) {
            None => return tool_error("malformed cursor; start again without a cursor"),
            Some(qc) if qc.project != project || !same_question(&qc.question, &args.question) => {
                return tool_error(
                    "cursor belongs to a different question; start again without a cursor",
                )
            }
            Some(qc) => (qc.question, qc.offset),
        },
    };
    let mut translated = match query::translate(&question, &project) {
        Ok(q) => q,
        Err(message) => return tool_error(message),
    };
    if drift {
        // The re-translation came out differently this time.
        translated.tiebreak = false;
        offset = offset.saturating_sub(DRIFT);
    }
    let sql = translated.sql();
    let table = query::execute(data, &translated);

    let available = table.rows.len();
    let total = available + if drift { DRIFT } else { 0 };
    let page: Vec<&Vec<Value>> = table.rows.iter().skip(offset).take(limit).collect();
    let returned = page.len();
    let end = offset + returned;
    let has_more = end < available;
    let next_cursor = has_more.then(|| {
        encode_query_cursor(&QueryCursor {
            offset: end,
            project: project.clone(),
            question: question.clone(),
        })
    });

    let mut accounting = Map::new();
    accounting.insert("returned".into(), json!(returned));
    accounting.insert("total".into(), json!(total));
    accounting.insert("has_more".into(), json!(has_more));
    accounting.insert("next_cursor".into(), json!(next_cursor));

    let mut text = if returned == 0 {
        format!("Showing 0 rows of {total}.")
    } else if translated.aggregate.is_some() {
        format!("Showing {returned} row.")
    } else {
        format!(
            "Showing {returned} rows (rows {}–{end} of {total}).",
            offset + 1
        )
    };
    text.push_str(&format!("\nSQL: {sql}\n{}", table.columns.join(" | ")));
    for row in &page {
        let cells: Vec<String> = row.iter().map(cell_text).collect();
        text.push('\n');
        text.push_str(&cells.join(" | "));
    }
    if has_more {
        text.push_str("\nMore rows: pass next_cursor with the same question.");
    }

    let mut structured = Map::new();
    structured.insert("sql".into(), json!(sql));
    structured.insert("columns".into(), json!(table.columns));
    structured.insert(
        "rows".into(),
        Value::Array(page.iter().map(|r| Value::Array(r.to_vec())).collect()),
    );
    structured.extend(accounting.clone());
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)])
        .with_meta(Some(MetaObject(accounting)));
    result.structured_content = Some(Value::Object(structured));
    result
}

/// Most rows the archive prints for one question.
pub const ARCHIVE_MAX_ROWS: usize = 100;

/// The legacy archive: the same questions as `query_data`, answered the way
/// the reference SQLite MCP server answers — `str()` of a list of row
/// dicts, nothing else. A question it cannot run is a text error with
/// `isError: false`, as that server reports its database errors.
pub fn archive_query(state: &DemoState, args: ArchiveQueryArgs) -> CallToolResult {
    let Opening { project, data, .. } =
        match open_call(state, args.project.as_deref(), None, "archive") {
            Ok(o) => o,
            Err(result) => return result,
        };
    let translated = match query::translate(&args.question, &project) {
        Ok(q) => q,
        Err(message) => return bare_text(format!("Database error: {message}")),
    };
    let table = query::execute(data, &translated);
    let rows: Vec<String> = table
        .rows
        .iter()
        .take(ARCHIVE_MAX_ROWS)
        .map(|row| {
            let cells: Vec<String> = table
                .columns
                .iter()
                .zip(row)
                .map(|(c, v)| format!("{}: {}", py_repr(&Value::from(c.as_str())), py_repr(v)))
                .collect();
            format!("{{{}}}", cells.join(", "))
        })
        .collect();
    bare_text(format!("[{}]", rows.join(", ")))
}

/// A JSON value as Python's `repr()` prints it.
fn py_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => {
            let quote = if s.contains('\'') && !s.contains('"') {
                '"'
            } else {
                '\''
            };
            let mut out = String::from(quote);
            for ch in s.chars() {
                match ch {
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    c if c == quote => {
                        out.push('\\');
                        out.push(c);
                    }
                    c => out.push(c),
                }
            }
            out.push(quote);
            out
        }
        Value::Array(a) => format!("[{}]", a.iter().map(py_repr).collect::<Vec<_>>().join(", ")),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{}: {}", py_repr(&Value::from(k.as_str())), py_repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Longest `id` echoed back in an error message.
const ECHO_MAX_CHARS: usize = 80;

/// The detail of one panorama (see [`PanoramaDetail`]).
pub fn panorama_detail(data: &data::Dataset, p: &data::Panorama) -> PanoramaDetail {
    let project_name = data.project(p.project).map_or(p.project, |pr| pr.name);
    let floor_name = floor_name(p.floor);
    let mut description = format!(
        "{} in {project_name}, floor {floor_name}, captured {}.",
        p.label, p.captured_at
    );
    if p.annotations.is_empty() {
        description.push_str(" No annotations.");
    }
    for (kind, heading) in [
        ("safety", "Safety"),
        ("quality", "Quality"),
        ("progress", "Progress"),
    ] {
        let titles: Vec<&str> = p
            .annotations
            .iter()
            .filter(|a| a.kind == kind)
            .map(|a| a.title)
            .collect();
        if !titles.is_empty() {
            description.push_str(&format!(" {heading}: {}.", titles.join("; ")));
        }
    }
    PanoramaDetail {
        id: p.id.clone(),
        label: p.label.clone(),
        project: p.project.to_string(),
        project_name: project_name.to_string(),
        floor: p.floor,
        floor_name,
        captured_at: p.captured_at.to_string(),
        annotations: p
            .annotations
            .iter()
            .map(|a| AnnotationDetail {
                kind: a.kind.to_string(),
                title: a.title.to_string(),
                tier: a.tier.to_string(),
            })
            .collect(),
        description,
    }
}

/// The `get_panorama` handler, transport-free.
///
/// One record, found by label or id within the project: `structuredContent`
/// is a [`PanoramaDetail`] and the one text block is the same JSON (the MCP
/// spec's backwards-compatible rendering). There is deliberately no
/// accounting `_meta`: a lookup by id has no population to count, and
/// `returned`/`total` would make the judge grade it as a listing of one
/// (`EXACT`, "exactly 1", "complete"). The structured content alone is the
/// mark of a real answer for the in-band judgement. An unknown id is a
/// tool error (`isError: true`), never an empty success. The faults that
/// need no cursor (an in-band 502, auth as `{}`) replace the answer exactly
/// as they do for the list tools.
pub fn get_panorama(state: &DemoState, args: GetPanoramaArgs) -> CallToolResult {
    let Opening { project, data, .. } =
        match open_call(state, args.project.as_deref(), None, "panoramas") {
            Ok(o) => o,
            Err(result) => return result,
        };
    let wanted = args.id.trim();
    if wanted.is_empty() {
        return tool_error(
            "id is empty: pass a label from search_photos (e.g. PANO-003-0611) or a panorama id (e.g. TA-00412)",
        );
    }
    let is_wanted = |p: &data::Panorama| {
        p.id.eq_ignore_ascii_case(wanted) || p.label.eq_ignore_ascii_case(wanted)
    };
    let Some(p) = data
        .panoramas
        .iter()
        .find(|p| p.project == project && is_wanted(p))
    else {
        let echo: String = wanted.chars().take(ECHO_MAX_CHARS).collect();
        let mut elsewhere: Vec<&str> = data
            .panoramas
            .iter()
            .filter(|p| p.project != project && is_wanted(p))
            .map(|p| p.project)
            .collect();
        elsewhere.dedup();
        let hint = if elsewhere.is_empty() {
            String::new()
        } else {
            format!(
                " (project {} has one; pass \"project\")",
                elsewhere.join(", ")
            )
        };
        return tool_error(format!("no panorama '{echo}' in project {project}{hint}"));
    };
    let detail = panorama_detail(data, p);
    let value = match serde_json::to_value(&detail) {
        Ok(v) => v,
        Err(e) => return tool_error(format!("could not encode panorama {}: {e}", p.id)),
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
    result.structured_content = Some(value);
    result
}

/// A record as the detail tools answer it: `structuredContent`, and the
/// same JSON as the one text block.
fn record(value: &impl Serialize) -> CallToolResult {
    let value = match serde_json::to_value(value) {
        Ok(v) => v,
        Err(e) => return tool_error(format!("could not encode the answer: {e}")),
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
    result.structured_content = Some(value);
    result
}

fn reply(status: ReplyStatus, action_id: u64) -> CallToolResult {
    record(&ActionReply {
        status,
        action_id,
        seat: None,
        time: None,
        reason: None,
    })
}

/// The `prepare_seat_reservation` handler, transport-free. An unknown seat
/// or a malformed time is an answer, not an error: the no-op sentinel
/// (`NO_SUCH_SEAT` / `BAD_TIME`, `actionId: 0`), nothing prepared.
pub fn prepare_seat_reservation(
    state: &DemoState,
    owner: &Owner,
    args: PrepareSeatReservationArgs,
) -> CallToolResult {
    match state.actions.prepare_as(owner, &args.seat, &args.time) {
        Prepared::Created(id) => record(&ActionReply {
            status: ReplyStatus::Ok,
            action_id: id,
            seat: Some(args.seat.trim().to_string()),
            time: Some(args.time.trim().to_string()),
            reason: None,
        }),
        Prepared::SeatTaken => record(&ActionReply {
            status: ReplyStatus::SeatTaken,
            action_id: 0,
            seat: Some(args.seat.trim().to_string()),
            time: Some(args.time.trim().to_string()),
            reason: Some(crate::actions::SEAT_TAKEN.to_string()),
        }),
        Prepared::NoSuchSeat => reply(ReplyStatus::NoSuchSeat, 0),
        Prepared::BadTime => reply(ReplyStatus::BadTime, 0),
    }
}

fn action_error(e: &ActionError) -> CallToolResult {
    tool_error(e.to_string())
}

/// The `confirm_action` handler, transport-free: accepts the action and
/// leaves it to the store's worker (which needs a tokio runtime to wait
/// in; without one it completes at once).
pub fn confirm_action(state: &DemoState, owner: &Owner, args: ConfirmActionArgs) -> CallToolResult {
    match state
        .actions
        .confirm_as(owner, args.action_id, args.idempotency_key.as_deref())
    {
        Ok(c) => reply(ReplyStatus::Accepted, c.action_id),
        Err(e) => action_error(&e),
    }
}

/// The `cancel_action` handler, transport-free.
pub fn cancel_action(state: &DemoState, owner: &Owner, args: ActionIdArgs) -> CallToolResult {
    match state.actions.cancel_as(owner, args.action_id) {
        Ok(id) => reply(ReplyStatus::Cancelled, id),
        Err(e) => action_error(&e),
    }
}

/// The `get_action` handler, transport-free: one [`ActionView`].
pub fn get_action(state: &DemoState, owner: &Owner, args: ActionIdArgs) -> CallToolResult {
    match state.actions.get_as(owner, args.action_id) {
        Ok(view) => record(&view),
        Err(e) => action_error(&e),
    }
}

/// The `get_photo` handler.
pub fn get_photo(id: &str) -> CallToolResult {
    let Some(p) = data::dataset().panorama(id.trim()) else {
        return tool_error(format!("no panorama with id '{id}'"));
    };
    let annotations = if p.annotations.is_empty() {
        "no annotations".to_string()
    } else {
        p.annotations
            .iter()
            .map(|a| format!("{} ({}, tier {})", a.title, a.kind, a.tier))
            .collect::<Vec<_>>()
            .join("; ")
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(format!(
        "{} ({}), {} floor {}, {}: {}",
        p.label,
        p.id,
        p.project,
        floor_name(p.floor),
        p.captured_at,
        annotations
    ))]);
    result.structured_content = Some(panorama_json(p));
    result
}

/// The `list_projects` handler.
pub fn list_projects() -> CallToolResult {
    let data = data::dataset();
    let lines: Vec<String> = data
        .projects
        .iter()
        .map(|p| {
            let floors: Vec<String> = p.floors.iter().map(|&f| floor_name(f)).collect();
            format!(
                "{}: {} — {} panoramas, floors {}, {}..{}",
                p.id,
                p.name,
                p.panoramas,
                floors.join(","),
                p.first_capture,
                p.last_capture
            )
        })
        .collect();
    let projects: Vec<Value> = data
        .projects
        .iter()
        .map(|p| {
            json!({
                "id": p.id,
                "name": p.name,
                "floors": p.floors,
                "panoramas": p.panoramas,
                "first_capture": p.first_capture.to_string(),
                "last_capture": p.last_capture.to_string(),
            })
        })
        .collect();
    let mut result = CallToolResult::success(vec![ContentBlock::text(lines.join("\n"))]);
    result.structured_content = Some(json!({ "projects": projects }));
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnstile::mcp::ToolOutput;

    fn args(v: Value) -> SearchPhotosArgs {
        serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"))
    }

    fn run(state: &DemoState, v: Value) -> ToolOutput {
        ToolOutput::from_call_result(search_photos(state, args(v)))
    }

    fn meta_of(out: &ToolOutput) -> Map<String, Value> {
        out.meta.clone().unwrap_or_default()
    }

    #[test]
    fn fault_names_round_trip() {
        for f in Fault::ALL {
            assert_eq!(Fault::parse(f.name()), Ok(f));
        }
        assert!(Fault::parse("nope").is_err());
    }

    #[test]
    fn query_cursor_carries_the_question_not_the_sql() {
        let qc = QueryCursor {
            offset: 150,
            project: "tower-a".into(),
            question: "list all panoramas: \"every\" one".into(),
        };
        let encoded = encode_query_cursor(&qc);
        assert!(encoded.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(decode_query_cursor(&encoded), Some(qc));
        // A search_photos cursor is not a query_data cursor, and vice versa.
        assert_eq!(decode_query_cursor(&encode_cursor(1, 2)), None);
        assert_eq!(decode_cursor(&encoded), None);
        assert!(same_question("How many  photos?", " how many photos? "));
        assert!(!same_question("how many photos?", "how many images?"));
    }

    #[test]
    fn query_data_pages_re_run_the_question() {
        let state = DemoState::default();
        let call = |v: Value| {
            let args: QueryDataArgs = serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"));
            ToolOutput::from_call_result(query_data(&state, args))
        };
        let q = "panoramas on floor 3 in April";
        let first = call(json!({"question": q, "limit": 60}));
        let m = meta_of(&first);
        assert_eq!(
            (&m["returned"], &m["total"], &m["has_more"]),
            (&json!(60), &json!(81), &json!(true))
        );
        assert!(first
            .text()
            .starts_with("Showing 60 rows (rows 1–60 of 81)."));
        let cursor = m["next_cursor"].as_str().unwrap_or_default().to_string();
        assert_eq!(
            decode_query_cursor(&cursor).map(|c| (c.offset, c.question)),
            Some((60, q.to_string()))
        );
        let second = call(json!({"question": q, "limit": 60, "cursor": cursor}));
        let m = meta_of(&second);
        assert_eq!(
            (
                &m["returned"],
                &m["total"],
                &m["has_more"],
                &m["next_cursor"]
            ),
            (&json!(21), &json!(81), &json!(false), &Value::Null)
        );
        let other = call(json!({"question": "list all panoramas", "cursor": cursor}));
        assert!(other.is_error && other.meta.is_none());
        let nonsense = call(json!({"question": "what's the weather?"}));
        assert!(nonsense.is_error && nonsense.meta.is_none());
        assert_eq!(state.query_calls(), 4);
        assert_eq!(state.search_calls(), 0);
    }

    #[test]
    fn cursor_round_trip() {
        let c = encode_cursor(20, 0xdead_beef);
        assert_eq!(decode_cursor(&c), Some((20, 0xdead_beef)));
        assert_eq!(decode_cursor("zz"), None);
        assert_eq!(decode_cursor(""), None);
    }

    #[test]
    fn floor3_safety_accounting_and_paging() {
        let state = DemoState::default();
        let first = run(&state, json!({"query": "safety", "floor": 3}));
        let m = meta_of(&first);
        assert_eq!(m["returned"], json!(10));
        assert_eq!(m["total_lower_bound"], json!(189));
        assert_eq!(m["has_more"], json!(true));
        assert!(!m.contains_key("total"));
        assert_eq!(first.blocks.len(), 10);
        assert!(first.blocks.iter().all(|b| b.meta() == Some(&m)));
        assert!(first.text().starts_with("## Image #1 — PANO-003-"));
        let cursor = m["next_cursor"].as_str().map(str::to_string);
        let second = run(
            &state,
            json!({"query": "safety", "floor": 3, "cursor": cursor, "limit": 50}),
        );
        assert!(second.text().starts_with("## Image #11 — "));
        let first_ids: Vec<Value> = first
            .json()
            .map(|v| v["items"].clone())
            .into_iter()
            .collect();
        let second_ids: Vec<Value> = second
            .json()
            .map(|v| v["items"].clone())
            .into_iter()
            .collect();
        assert_ne!(first_ids, second_ids);
        // A cursor replayed against another query is refused.
        let other = run(
            &state,
            json!({"query": "quality", "floor": 3, "cursor": cursor}),
        );
        assert!(other.is_error);
        assert_eq!(state.search_calls(), 3);
    }

    #[test]
    fn filters_only_is_exact_and_1999_is_honestly_empty() {
        let state = DemoState::default();
        let all = run(&state, json!({"query": "", "project": "annex", "limit": 5}));
        assert_eq!(meta_of(&all)["total"], json!(data::ANNEX_PANORAMAS));
        let empty = run(
            &state,
            json!({"query": "safety", "date_from": "1999-01-01", "date_to": "1999-12-31"}),
        );
        assert!(!empty.is_error);
        assert!(empty.blocks.is_empty());
        let m = meta_of(&empty);
        assert_eq!(m["total"], json!(0));
        assert_eq!(m["returned"], json!(0));
        assert_eq!(m["has_more"], json!(false));
        assert_eq!(m["next_cursor"], Value::Null);
    }

    #[test]
    fn faults() {
        let with = |f: Fault| {
            DemoState::new(DemoOptions {
                faults: vec![f],
                ..DemoOptions::default()
            })
        };
        let q = json!({"query": "safety", "floor": 3});

        let out = run(&with(Fault::Upstream502), q.clone());
        assert!(!out.is_error && out.metas().count() == 0 && out.structured.is_none());
        assert!(out
            .text()
            .starts_with("Search API error: 502 Server Error: Bad Gateway for url: "));

        let out = run(&with(Fault::AuthEmptyObject), q.clone());
        assert_eq!(
            (out.text().as_str(), out.is_error, out.metas().count()),
            ("{}", false, 0)
        );

        let state = with(Fault::CursorRejected);
        let first = run(&state, q.clone());
        let cursor = meta_of(&first)["next_cursor"].clone();
        let out = run(
            &state,
            json!({"query": "safety", "floor": 3, "cursor": cursor}),
        );
        assert_eq!(
            (out.text().as_str(), out.is_error, out.metas().count()),
            ("invalid cursor", false, 0)
        );

        let state = with(Fault::CursorDrift);
        let first = run(&state, q.clone());
        let cursor = meta_of(&first)["next_cursor"].clone();
        let second = run(
            &state,
            json!({"query": "safety", "floor": 3, "cursor": cursor}),
        );
        let ids = |o: &ToolOutput| -> Vec<String> {
            o.json()
                .and_then(|v| v["items"].as_array().cloned())
                .unwrap_or_default()
                .iter()
                .filter_map(|i| i["id"].as_str().map(str::to_string))
                .collect()
        };
        let overlap = ids(&second)
            .iter()
            .filter(|id| ids(&first).contains(id))
            .count();
        assert_eq!(overlap, DRIFT);
        assert_eq!(meta_of(&second)["total_lower_bound"], json!(195 - 195 / 64));
    }

    #[tokio::test]
    async fn seat_reservation_through_the_handlers() {
        let state = DemoState::new(DemoOptions {
            action_worker_delay: std::time::Duration::from_millis(20),
            ..DemoOptions::default()
        });
        fn parse<T: serde::de::DeserializeOwned>(v: Value) -> T {
            serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"))
        }
        let answer = |r: CallToolResult| {
            let out = ToolOutput::from_call_result(r);
            let structured = out.structured.clone().unwrap_or(Value::Null);
            // The text block is the same JSON as the structured content.
            let text: Value = serde_json::from_str(&out.text()).unwrap_or(Value::Null);
            assert_eq!(text, structured);
            (out.is_error, structured)
        };
        let prepare = |v: Value| {
            answer(prepare_seat_reservation(
                &state,
                &Owner::Anonymous,
                parse(v),
            ))
        };
        assert_eq!(
            prepare(json!({"seat": "12", "time": "15:00"})),
            (
                false,
                json!({"status": "OK", "actionId": 1, "seat": "12", "time": "15:00"})
            )
        );
        assert_eq!(
            prepare(json!({"seat": "41", "time": "15:00"})),
            (false, json!({"status": "NO_SUCH_SEAT", "actionId": 0}))
        );
        assert_eq!(
            prepare(json!({"seat": "12", "time": "3pm"})),
            (false, json!({"status": "BAD_TIME", "actionId": 0}))
        );
        let get = |id: u64| {
            answer(get_action(
                &state,
                &Owner::Anonymous,
                parse(json!({"actionId": id})),
            ))
        };
        assert_eq!(
            get(1),
            (
                false,
                json!({"actionId": 1, "status": "PENDING", "seat": "12", "time": "15:00"})
            )
        );
        let confirm = |v: Value| {
            ToolOutput::from_call_result(confirm_action(&state, &Owner::Anonymous, parse(v)))
        };
        let first = confirm(json!({"actionId": 1, "idempotencyKey": "k"}));
        assert!(!first.is_error);
        assert_eq!(
            first.structured,
            Some(json!({"status": "ACCEPTED", "actionId": 1}))
        );
        assert_eq!(get(1).1["status"], json!("ACCEPTED"));
        let replay = confirm(json!({"actionId": 1, "idempotencyKey": "k"}));
        assert_eq!(replay.structured, first.structured);
        let twice = confirm(json!({"actionId": 1}));
        assert!(twice.is_error && twice.structured.is_none());
        assert!(
            twice.text().contains("already confirmed"),
            "{}",
            twice.text()
        );
        let zero = confirm(json!({"actionId": 0}));
        assert!(zero.is_error, "{}", zero.text());
        let cancel = |id: u64| {
            ToolOutput::from_call_result(cancel_action(
                &state,
                &Owner::Anonymous,
                parse(json!({"actionId": id})),
            ))
        };
        assert!(cancel(1).is_error);
        prepare(json!({"seat": "3", "time": "09:00"}));
        for _ in 0..2 {
            assert_eq!(
                cancel(2).structured,
                Some(json!({"status": "CANCELLED", "actionId": 2}))
            );
        }
        assert!(
            ToolOutput::from_call_result(get_action(
                &state,
                &Owner::Anonymous,
                parse(json!({"actionId": 9}))
            ))
            .is_error
        );
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while get(1).1["status"] == json!("ACCEPTED") && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(get(1).1["status"], json!("COMPLETED"));
        let counts = state.actions().counts(1);
        assert_eq!((counts.confirms, counts.cancels), (3, 1));
        assert_eq!(state.actions().counts(0).confirms, 1);
        assert_eq!(state.actions().counts(2).cancels, 2);
    }

    #[test]
    fn the_reservation_tools_are_listed_with_their_hints() {
        let tools = DemoTools::new(Arc::new(DemoState::default()))
            .tool_router
            .list_all();
        let hints = |name: &str| {
            let tool = tools
                .iter()
                .find(|t| t.name == name)
                .unwrap_or_else(|| panic!("{name} listed"));
            let a = tool.annotations.clone().unwrap_or_default();
            (
                a.read_only_hint,
                a.destructive_hint,
                a.idempotent_hint,
                tool.input_schema.get("required").cloned(),
            )
        };
        assert_eq!(
            hints("prepare_seat_reservation"),
            (
                Some(false),
                Some(false),
                Some(false),
                Some(json!(["seat", "time"]))
            )
        );
        assert_eq!(
            hints("confirm_action"),
            (Some(false), Some(true), None, Some(json!(["actionId"])))
        );
        assert_eq!(
            hints("cancel_action"),
            (Some(false), Some(true), None, Some(json!(["actionId"])))
        );
        assert_eq!(
            hints("get_action"),
            (Some(true), None, None, Some(json!(["actionId"])))
        );
    }

    #[test]
    fn licence_tiers_are_declared_in_the_tools_meta() {
        let tools = DemoTools::new(Arc::new(DemoState::default()))
            .tool_router
            .list_all();
        let declared: Vec<(String, Value)> = tools
            .iter()
            .filter_map(|t| {
                let tier = t.meta.as_ref()?.get(crate::auth::LICENCE_TIER_META)?;
                Some((t.name.to_string(), tier.clone()))
            })
            .collect();
        assert_eq!(
            declared,
            vec![
                ("archive_query".to_string(), json!("pro")),
                ("get_panorama".to_string(), json!("basic")),
            ]
        );
    }
}
