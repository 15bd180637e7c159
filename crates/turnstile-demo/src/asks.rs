//! The two demo tools that ask the user something before they act (issue:
//! "a server's input requests as durable interrupts"):
//!
//! * `notify_site_contact(issue_id)` asks in **form** mode who should be
//!   told about an issue ([`contact_schema`]: `name`, `email`, `role`,
//!   `urgent`), and records a [`Notification`] when the user accepts.
//! * `open_permit_portal(permit)` asks in **URL** mode to open the permit
//!   portal at `http://<the demo server's origin>/permits/<permit>?ticket=…`
//!   ([`PERMIT_PATH`]); an accept is the user's consent to open it, never a
//!   signed permit.
//!
//! How each revision asks:
//!
//! * **2026-07-28** (stateless): the first call answers
//!   `InputRequiredResult` with one input request under [`CONTACT_KEY`] or
//!   [`PORTAL_KEY`] and an opaque `requestState` (`rs-<uuid>`): a handle
//!   of the ask kept here ([`AskStore`]) that carries nothing itself. The
//!   retry (same tool, same arguments, `inputResponses` + `requestState`)
//!   is answered from the response under the same key and consumes the
//!   handle, so a replay is refused (`REPLAYED`) and nothing is done twice.
//! * **2025-11-25** (sessions): the tool sends `elicitation/create` to the
//!   client on the call's session and waits for the user's answer.
//!
//! Either way a client that did not declare the elicitation capability (the
//! mode asked for) is not asked: `NO_ELICITATION`, nothing done. Every
//! refusal is `isError: true` with `{"error": CODE, "message": SENTENCE}`
//! ([`Refusal`]); every answer is one record (`structuredContent` and the
//! same JSON as the one text block).
//!
//! Faults ([`AskFaults`]): `input-huge-state` makes a 2026 ask's
//! `requestState` over 1 MiB; `input-asks-secret` adds a `password`
//! property to the form, which a client must refuse to show.
//!
//! The handlers take the [`AskStore`] and the faults, not the server's
//! state: this module imports nothing of the tool handlers
//! ([`tools`](crate::tools)), which call it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use rmcp::model::{
    CallToolResponse, CallToolResult, ClientCapabilities, ClientResult, ContentBlock,
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, InputRequests, InputRequiredResult, InputResponses, ServerRequest,
};
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use serde::Serialize;
use serde_json::{json, Value};

/// The input-request key of `notify_site_contact`'s form.
pub const CONTACT_KEY: &str = "contact";
/// The input-request key of `open_permit_portal`'s URL ask.
pub const PORTAL_KEY: &str = "portal";
/// The roles a site contact may have (the form's `role` enum).
pub const ROLES: [&str; 3] = ["site manager", "safety officer", "foreman"];
/// The permit portal's page on the demo server (axum path syntax).
pub const PERMIT_PATH: &str = "/permits/{permit}";
/// What `open_permit_portal` says of an accept: consent, not completion.
pub const CONSENT_NOTE: &str =
    "the user agreed to open the portal; the permit is signed only when the portal says so";
/// How many bytes of padding `input-huge-state` appends to a
/// `requestState` (after its `rs-<uuid>` handle).
pub const HUGE_STATE_PADDING: usize = 1 << 20;
/// Longest permit number accepted (`HW-12`).
const PERMIT_MAX_CHARS: usize = 32;

/// A notification `notify_site_contact` recorded: who was told about
/// which issue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Notification {
    pub issue_id: String,
    pub name: String,
    pub email: String,
    pub role: String,
    pub urgent: bool,
}

/// The asking tools' faults (`--fault input-huge-state`,
/// `--fault input-asks-secret`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AskFaults {
    /// A 2026 ask's `requestState` is its handle followed by
    /// [`HUGE_STATE_PADDING`] `x`s.
    pub huge_state: bool,
    /// The contact form also asks for a required `password`.
    pub asks_secret: bool,
}

/// What a pending 2026 ask is waiting for: the tool and its arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ask {
    Contact { issue_id: String },
    Portal { permit: String },
}

impl Ask {
    /// The tool that asked.
    pub fn tool(&self) -> &'static str {
        match self {
            Ask::Contact { .. } => "notify_site_contact",
            Ask::Portal { .. } => "open_permit_portal",
        }
    }

    /// The key of its one input request.
    pub fn key(&self) -> &'static str {
        match self {
            Ask::Contact { .. } => CONTACT_KEY,
            Ask::Portal { .. } => PORTAL_KEY,
        }
    }
}

/// Why an ask was refused or could not be answered: nothing was done.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The client did not declare the elicitation mode the tool needs, or
    /// the `elicitation/create` request failed.
    NoElicitation,
    /// The request state was answered already.
    Replayed,
    /// No pending ask has this request state (or the retry carried none).
    UnknownRequestState,
    /// The request state is another tool's.
    OtherToolsState,
    /// The retry's arguments are not the ones the ask was made for.
    ArgumentsChanged,
    /// The retry carries no response under the ask's key.
    MissingResponse(&'static str),
    /// The response is not a valid answer to the ask (the detail says why).
    InvalidContent(String),
    /// `notify_site_contact` without an issue.
    MissingIssueId,
    /// `open_permit_portal` without a permit number like `HW-12`.
    BadPermit,
}

impl Refusal {
    /// The machine code.
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::NoElicitation => "NO_ELICITATION",
            Refusal::Replayed => "REPLAYED",
            Refusal::UnknownRequestState | Refusal::OtherToolsState => "UNKNOWN_REQUEST_STATE",
            Refusal::ArgumentsChanged => "ARGUMENTS_CHANGED",
            Refusal::MissingResponse(_) => "MISSING_INPUT_RESPONSE",
            Refusal::InvalidContent(_) => "INVALID_CONTENT",
            Refusal::MissingIssueId => "MISSING_ISSUE_ID",
            Refusal::BadPermit => "BAD_PERMIT",
        }
    }

    /// The sentence for the caller.
    pub fn sentence(&self) -> String {
        match self {
            Refusal::NoElicitation => "the client cannot ask the user; nothing was done".into(),
            Refusal::Replayed => "this request was already answered; nothing was done".into(),
            Refusal::UnknownRequestState => {
                "no pending request has this request state; nothing was done".into()
            }
            Refusal::OtherToolsState => {
                "this request state belongs to another tool's request; nothing was done".into()
            }
            Refusal::ArgumentsChanged => {
                "the retry's arguments differ from the request that asked; nothing was done".into()
            }
            Refusal::MissingResponse(key) => {
                format!("the retry carries no response under \"{key}\"; nothing was done")
            }
            Refusal::InvalidContent(why) => format!("{why}; nothing was done"),
            Refusal::MissingIssueId => {
                "issue_id is empty: name the issue, e.g. PANO-003-0611; nobody was asked".into()
            }
            Refusal::BadPermit => {
                "permit must be a permit number like HW-12; nothing was asked".into()
            }
        }
    }

    /// The tool result: `isError: true`, `{"error": CODE, "message":
    /// SENTENCE}` as structured content and as the one text block.
    pub fn result(&self) -> CallToolResult {
        let body = json!({"error": self.code(), "message": self.sentence()});
        let mut result = CallToolResult::error(vec![ContentBlock::text(body.to_string())]);
        result.structured_content = Some(body);
        result
    }
}

/// How the user answered `notify_site_contact`'s form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContactAnswer {
    Notify(Notification),
    Declined,
    Cancelled,
}

/// How the user answered `open_permit_portal`'s URL ask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortalAnswer {
    Consented,
    NotOpened,
    Cancelled,
}

/// The asks' server-side state: pending 2026 asks by request state, the
/// states already answered, the notifications recorded and the permit
/// portal's visits.
#[derive(Debug, Default)]
pub struct AskStore {
    origin: Mutex<String>,
    pending: Mutex<HashMap<String, Ask>>,
    answered: Mutex<HashSet<String>>,
    notifications: Mutex<Vec<Notification>>,
    permit_visits: AtomicU64,
}

impl AskStore {
    /// The origin portal URLs are minted on (`http://127.0.0.1:41234`).
    pub fn set_origin(&self, origin: &str) {
        *self.origin.lock().unwrap_or_else(|e| e.into_inner()) = origin.to_string();
    }

    /// The origin portal URLs are minted on; empty until the server binds.
    pub fn origin(&self) -> String {
        self.origin
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// A new portal URL for `permit`, with a fresh random ticket.
    pub fn portal_url(&self, permit: &str) -> String {
        format!(
            "{}/permits/{permit}?ticket={}",
            self.origin(),
            uuid::Uuid::new_v4().simple()
        )
    }

    /// Opens a pending 2026 ask and returns its request state: `rs-<uuid>`,
    /// or with `huge` that handle followed by [`HUGE_STATE_PADDING`] `x`s.
    pub fn open(&self, ask: Ask, huge: bool) -> String {
        let mut state = format!("rs-{}", uuid::Uuid::new_v4());
        if huge {
            state.push_str(&"x".repeat(HUGE_STATE_PADDING));
        }
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(state.clone(), ask);
        state
    }

    /// How many 2026 asks are waiting for their retry.
    pub fn pending(&self) -> usize {
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Settles the pending ask `state` names, at most once: `answer` reads
    /// the retry against it; when it answers `Ok` the ask is consumed (a
    /// later retry with the same state is [`Refusal::Replayed`]), when it
    /// refuses the ask stays pending and nothing was done. An unknown state
    /// is [`Refusal::UnknownRequestState`].
    pub fn settle<T>(
        &self,
        state: &str,
        answer: impl FnOnce(&Ask) -> Result<T, Refusal>,
    ) -> Result<T, Refusal> {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let Some(ask) = pending.get(state) else {
            let answered = self.answered.lock().unwrap_or_else(|e| e.into_inner());
            return Err(match answered.contains(state) {
                true => Refusal::Replayed,
                false => Refusal::UnknownRequestState,
            });
        };
        let out = answer(ask)?;
        pending.remove(state);
        self.answered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(state.to_string());
        Ok(out)
    }

    /// Records a notification.
    pub fn record(&self, n: Notification) {
        self.notifications
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(n);
    }

    /// Every notification recorded, oldest first.
    pub fn notifications(&self) -> Vec<Notification> {
        self.notifications
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Counts one visit of the permit portal's page.
    pub fn visit_permit(&self) {
        self.permit_visits.fetch_add(1, Ordering::SeqCst);
    }

    /// How many times the permit portal's page was fetched.
    pub fn permit_visits(&self) -> u64 {
        self.permit_visits.load(Ordering::SeqCst)
    }
}

/// The form `notify_site_contact` asks for `issue_id`: `name` (string,
/// required, at least one character), `email` (string, format email,
/// required), `role` (one of [`ROLES`], required), `urgent` (boolean,
/// default false). With `secret` it also asks for a required `password`.
pub fn contact_schema(secret: bool) -> ElicitationSchema {
    let mut properties = json!({
        "name": {"type": "string", "title": "Name", "description": "Who should be told", "minLength": 1},
        "email": {"type": "string", "title": "Email", "description": "Where to reach them", "format": "email"},
        "role": {"type": "string", "title": "Role", "description": "Their role on site", "enum": ROLES},
        "urgent": {"type": "boolean", "title": "Urgent", "description": "Tell them at once", "default": false},
    });
    let mut required = vec!["name", "email", "role"];
    // The form's fields in the order a person fills them in.
    let mut order = vec!["name", "email", "role", "urgent"];
    if secret {
        // rmcp's typed schema has no `password` string format (only email,
        // uri, date, date-time), and a request with one would not parse on
        // an rmcp client at all: the secret is the property's name, title
        // and description.
        properties["password"] = json!({
            "type": "string",
            "title": "Password",
            "description": "Your site portal password",
            "minLength": 1,
        });
        required.push("password");
        order.push("password");
    }
    let schema = json!({"type": "object", "properties": properties, "required": required});
    match serde_json::from_value::<ElicitationSchema>(schema) {
        Ok(mut s) => {
            s.property_order = Some(order.into_iter().map(str::to_string).collect());
            s
        }
        // The JSON above is a valid elicitation schema (a unit test checks
        // it round-trips); an empty one is never sent in its place.
        Err(e) => unreachable!("the contact form's schema is invalid: {e}"),
    }
}

/// The form-mode ask of `notify_site_contact`.
pub fn contact_request(issue_id: &str, secret: bool) -> ElicitRequestParams {
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!("Who should be told about {issue_id}?"),
        requested_schema: contact_schema(secret),
    }
}

/// The URL-mode ask of `open_permit_portal`.
pub fn portal_request(permit: &str, url: String, elicitation_id: String) -> ElicitRequestParams {
    ElicitRequestParams::UrlElicitationParams {
        meta: None,
        message: format!("Sign hot-work permit {permit} in the permit portal"),
        url,
        elicitation_id,
    }
}

fn is_email(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.contains('@')
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !s.chars().any(char::is_whitespace)
}

/// Reads the user's answer to the contact form, checking accepted content
/// against the form's schema (only its four fields are read: anything else,
/// a password included, is ignored and never echoed).
pub fn read_contact(issue_id: &str, r: &ElicitResult) -> Result<ContactAnswer, Refusal> {
    match r.action {
        ElicitationAction::Decline => return Ok(ContactAnswer::Declined),
        ElicitationAction::Cancel => return Ok(ContactAnswer::Cancelled),
        _ => {}
    }
    let invalid = |why: &str| Refusal::InvalidContent(why.to_string());
    let content = r
        .content
        .as_ref()
        .and_then(Value::as_object)
        .ok_or_else(|| invalid("the accepted form carries no content"))?;
    let text = |field: &str| -> Result<String, Refusal> {
        match content.get(field) {
            Some(Value::String(s)) => Ok(s.clone()),
            None | Some(Value::Null) => Err(invalid(&format!("{field} is required"))),
            Some(_) => Err(invalid(&format!("{field} must be a string"))),
        }
    };
    let name = text("name")?;
    if name.is_empty() {
        return Err(invalid("name must not be empty"));
    }
    let email = text("email")?;
    if !is_email(&email) {
        return Err(invalid("email must be an email address"));
    }
    let role = text("role")?;
    if !ROLES.contains(&role.as_str()) {
        return Err(invalid(&format!(
            "role must be one of {}",
            ROLES.join(", ")
        )));
    }
    let urgent = match content.get("urgent") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(invalid("urgent must be true or false")),
    };
    Ok(ContactAnswer::Notify(Notification {
        issue_id: issue_id.to_string(),
        name,
        email,
        role,
        urgent,
    }))
}

/// Reads the user's answer to the portal ask: accept is consent to open
/// it, nothing more.
pub fn read_portal(r: &ElicitResult) -> PortalAnswer {
    match r.action {
        ElicitationAction::Accept => PortalAnswer::Consented,
        ElicitationAction::Decline => PortalAnswer::NotOpened,
        _ => PortalAnswer::Cancelled,
    }
}

/// A record as the detail tools answer it: `structuredContent`, and the
/// same JSON as the one text block.
fn record(value: Value) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
    result.structured_content = Some(value);
    result
}

/// `notify_site_contact`'s answer: `{"status": "NOTIFIED", "issue_id",
/// "contact": {"name", "email", "role", "urgent"}}`, `{"status":
/// "NOT_NOTIFIED", "reason": "declined", "issue_id"}` or `{"status":
/// "CANCELLED", "issue_id"}`.
pub fn contact_result(issue_id: &str, answer: &ContactAnswer) -> CallToolResult {
    record(match answer {
        ContactAnswer::Notify(n) => json!({
            "status": "NOTIFIED",
            "issue_id": n.issue_id,
            "contact": {"name": n.name, "email": n.email, "role": n.role, "urgent": n.urgent},
        }),
        ContactAnswer::Declined => {
            json!({"status": "NOT_NOTIFIED", "reason": "declined", "issue_id": issue_id})
        }
        ContactAnswer::Cancelled => json!({"status": "CANCELLED", "issue_id": issue_id}),
    })
}

/// `open_permit_portal`'s answer: `{"status": "CONSENTED", "permit",
/// "note"}`, `{"status": "NOT_OPENED", "permit"}` or `{"status":
/// "CANCELLED", "permit"}`.
pub fn portal_result(permit: &str, answer: PortalAnswer) -> CallToolResult {
    record(match answer {
        PortalAnswer::Consented => {
            json!({"status": "CONSENTED", "permit": permit, "note": CONSENT_NOTE})
        }
        PortalAnswer::NotOpened => json!({"status": "NOT_OPENED", "permit": permit}),
        PortalAnswer::Cancelled => json!({"status": "CANCELLED", "permit": permit}),
    })
}

/// Does the client declare the elicitation mode (form, else URL)? A bare
/// `elicitation: {}` declares form mode only, as the spec reads it.
pub fn declares(caps: Option<&ClientCapabilities>, url: bool) -> bool {
    let Some(e) = caps.and_then(|c| c.elicitation.as_ref()) else {
        return false;
    };
    match url {
        true => e.url.is_some(),
        false => e.form.is_some() || e.url.is_none(),
    }
}

/// The call's MRTR round: what a 2026 retry carries.
#[derive(Debug, Default)]
pub struct Round {
    pub request_state: Option<String>,
    pub input_responses: Option<InputResponses>,
}

/// Reads the retry's response under `key` as an elicitation result.
fn response(round: &Round, key: &'static str) -> Result<ElicitResult, Refusal> {
    let value = round
        .input_responses
        .as_ref()
        .and_then(|r| r.get(key))
        .ok_or(Refusal::MissingResponse(key))?;
    serde_json::from_value(value.clone()).map_err(|_| {
        Refusal::InvalidContent(format!(
            "the response under \"{key}\" is not an elicitation result"
        ))
    })
}

fn input_required(key: &str, params: ElicitRequestParams, state: String) -> CallToolResponse {
    let mut requests = InputRequests::new();
    requests.insert(
        key.to_string(),
        InputRequest::Elicitation(ElicitRequest::new(params)),
    );
    InputRequiredResult::new(Some(requests), Some(state)).into()
}

/// Sends `elicitation/create` on the call's session and waits for the
/// answer; any failure is [`Refusal::NoElicitation`].
async fn elicit(
    context: &RequestContext<RoleServer>,
    params: ElicitRequestParams,
) -> Result<ElicitResult, Refusal> {
    let sent = context
        .peer
        .send_request(ServerRequest::ElicitRequest(ElicitRequest::new(params)))
        .await;
    match sent {
        Ok(ClientResult::ElicitResult(r)) => Ok(r),
        Ok(_) => Err(Refusal::NoElicitation),
        Err(e) => {
            tracing::info!(error = %e, "demo elicitation/create failed");
            Err(Refusal::NoElicitation)
        }
    }
}

/// The issue a call names, trimmed; empty is refused.
fn issue(issue_id: &str) -> Result<String, Refusal> {
    let id = issue_id.trim();
    match id.is_empty() {
        true => Err(Refusal::MissingIssueId),
        false => Ok(id.to_string()),
    }
}

/// The permit a call names, trimmed: letters, digits and dashes, e.g.
/// `HW-12` (it goes into the portal URL's path as it is).
fn permit(permit: &str) -> Result<String, Refusal> {
    let p = permit.trim();
    let ok = !p.is_empty()
        && p.chars().count() <= PERMIT_MAX_CHARS
        && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && p.starts_with(|c: char| c.is_ascii_alphanumeric());
    match ok {
        true => Ok(p.to_string()),
        false => Err(Refusal::BadPermit),
    }
}

/// The `notify_site_contact` handler (`stateless`: the call is a 2026-07-28
/// request; else it came on a 2025-11-25 session).
pub async fn notify_site_contact(
    asks: &AskStore,
    faults: AskFaults,
    issue_id: &str,
    round: Round,
    stateless: bool,
    context: &RequestContext<RoleServer>,
) -> CallToolResponse {
    let issue_id = match issue(issue_id) {
        Ok(id) => id,
        Err(r) => return r.result().into(),
    };
    if stateless {
        if let Some(rs) = &round.request_state {
            let settled = asks.settle(rs, |ask| match ask {
                Ask::Contact { issue_id: asked } if *asked == issue_id => {
                    read_contact(&issue_id, &response(&round, CONTACT_KEY)?)
                }
                Ask::Contact { .. } => Err(Refusal::ArgumentsChanged),
                Ask::Portal { .. } => Err(Refusal::OtherToolsState),
            });
            return answer_contact(asks, &issue_id, settled).into();
        }
        if round.input_responses.is_some() {
            return Refusal::UnknownRequestState.result().into();
        }
    }
    if !declares(context.client_capabilities().as_ref(), false) {
        return Refusal::NoElicitation.result().into();
    }
    let params = contact_request(&issue_id, faults.asks_secret);
    if stateless {
        let rs = asks.open(
            Ask::Contact {
                issue_id: issue_id.clone(),
            },
            faults.huge_state,
        );
        return input_required(CONTACT_KEY, params, rs);
    }
    let answered = elicit(context, params)
        .await
        .and_then(|r| read_contact(&issue_id, &r));
    answer_contact(asks, &issue_id, answered).into()
}

fn answer_contact(
    asks: &AskStore,
    issue_id: &str,
    answered: Result<ContactAnswer, Refusal>,
) -> CallToolResult {
    match answered {
        Ok(answer) => {
            if let ContactAnswer::Notify(n) = &answer {
                asks.record(n.clone());
            }
            contact_result(issue_id, &answer)
        }
        Err(r) => r.result(),
    }
}

/// The `open_permit_portal` handler (see [`notify_site_contact`]).
pub async fn open_permit_portal(
    asks: &AskStore,
    faults: AskFaults,
    permit_arg: &str,
    round: Round,
    stateless: bool,
    context: &RequestContext<RoleServer>,
) -> CallToolResponse {
    let permit = match permit(permit_arg) {
        Ok(p) => p,
        Err(r) => return r.result().into(),
    };
    if stateless {
        if let Some(rs) = &round.request_state {
            let settled = asks.settle(rs, |ask| match ask {
                Ask::Portal { permit: asked } if *asked == permit => {
                    Ok(read_portal(&response(&round, PORTAL_KEY)?))
                }
                Ask::Portal { .. } => Err(Refusal::ArgumentsChanged),
                Ask::Contact { .. } => Err(Refusal::OtherToolsState),
            });
            return match settled {
                Ok(answer) => portal_result(&permit, answer).into(),
                Err(r) => r.result().into(),
            };
        }
        if round.input_responses.is_some() {
            return Refusal::UnknownRequestState.result().into();
        }
    }
    if !declares(context.client_capabilities().as_ref(), true) {
        return Refusal::NoElicitation.result().into();
    }
    // 2026-07-28 dropped the elicitation id; rmcp would send it empty, a
    // real one is harmless there and needed on 2025-11-25.
    let params = portal_request(
        &permit,
        asks.portal_url(&permit),
        uuid::Uuid::new_v4().to_string(),
    );
    if stateless {
        let rs = asks.open(
            Ask::Portal {
                permit: permit.clone(),
            },
            faults.huge_state,
        );
        return input_required(PORTAL_KEY, params, rs);
    }
    match elicit(context, params).await {
        Ok(r) => portal_result(&permit, read_portal(&r)).into(),
        Err(r) => r.result().into(),
    }
}

/// The permit portal's page: a tiny HTML page naming the permit (escaped).
pub fn permit_page(permit: &str) -> String {
    let escaped: String = permit
        .chars()
        .take(PERMIT_MAX_CHARS)
        .map(|c| match c {
            '&' => "&amp;".to_string(),
            '<' => "&lt;".to_string(),
            '>' => "&gt;".to_string(),
            '"' => "&quot;".to_string(),
            '\'' => "&#39;".to_string(),
            c => c.to_string(),
        })
        .collect();
    format!(
        "<!doctype html><meta charset=utf-8><title>Permit {escaped}</title>\
         <p>Permit {escaped} — signing happens here.</p>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(content: Value) -> ElicitResult {
        ElicitResult::new(ElicitationAction::Accept).with_content(content)
    }

    #[test]
    fn the_contact_form_is_the_schema_on_the_wire() {
        let wire = serde_json::to_value(contact_schema(false)).unwrap_or_default();
        assert_eq!(
            wire,
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "title": "Name", "description": "Who should be told", "minLength": 1},
                    "email": {"type": "string", "title": "Email", "description": "Where to reach them", "format": "email"},
                    "role": {"type": "string", "title": "Role", "description": "Their role on site", "enum": ["site manager", "safety officer", "foreman"]},
                    "urgent": {"type": "boolean", "title": "Urgent", "description": "Tell them at once", "default": false},
                },
                "required": ["name", "email", "role"],
            })
        );
        // On the wire the fields come in the order a person fills them in.
        let order = |secret: bool| -> Vec<usize> {
            let text = serde_json::to_string(&contact_schema(secret)).unwrap_or_default();
            let keys: &[&str] = match secret {
                false => &["name", "email", "role", "urgent"],
                true => &["name", "email", "role", "urgent", "password"],
            };
            keys.iter()
                .map(|k| text.find(&format!("\"{k}\":{{")).unwrap_or(usize::MAX))
                .collect()
        };
        for secret in [false, true] {
            let at = order(secret);
            assert!(
                at.windows(2).all(|w| w[0] < w[1] && w[1] != usize::MAX),
                "{at:?}"
            );
        }
        let secret = serde_json::to_value(contact_schema(true)).unwrap_or_default();
        assert_eq!(secret["properties"]["password"]["title"], json!("Password"));
        assert_eq!(
            secret["required"],
            json!(["name", "email", "role", "password"])
        );
    }

    /// Why `input-asks-secret` marks its secret by name and title:
    /// rmcp's typed schema (which a client parses every ask with) has no
    /// `password` string format, so a form carrying one would not parse.
    #[test]
    fn rmcp_cannot_carry_a_password_format() {
        let with_format = json!({
            "type": "object",
            "properties": {"password": {"type": "string", "format": "password"}},
        });
        assert!(serde_json::from_value::<ElicitationSchema>(with_format).is_err());
    }

    #[test]
    fn accepted_content_is_checked() {
        let good = json!({"name": "Mina Park", "email": "mina@example.com", "role": "foreman"});
        assert_eq!(
            read_contact("PANO-1", &accept(good.clone())),
            Ok(ContactAnswer::Notify(Notification {
                issue_id: "PANO-1".into(),
                name: "Mina Park".into(),
                email: "mina@example.com".into(),
                role: "foreman".into(),
                urgent: false,
            }))
        );
        let with = |k: &str, v: Value| {
            let mut c = good.clone();
            match (v, c.as_object_mut()) {
                (Value::Null, Some(o)) => {
                    o.remove(k);
                }
                (v, _) => c[k] = v,
            }
            read_contact("PANO-1", &accept(c))
        };
        for (k, v) in [
            ("name", Value::Null),
            ("name", json!("")),
            ("email", Value::Null),
            ("email", json!("not an email")),
            ("email", json!("a@b")),
            ("role", json!("architect")),
            ("role", json!(3)),
            ("urgent", json!("yes")),
        ] {
            assert!(
                matches!(with(k, v.clone()), Err(Refusal::InvalidContent(_))),
                "{k}: {v}"
            );
        }
        assert!(matches!(
            with("urgent", json!(true)),
            Ok(ContactAnswer::Notify(Notification { urgent: true, .. }))
        ));
        assert!(matches!(
            read_contact("PANO-1", &ElicitResult::new(ElicitationAction::Accept)),
            Err(Refusal::InvalidContent(_))
        ));
        assert_eq!(
            read_contact("PANO-1", &ElicitResult::new(ElicitationAction::Decline)),
            Ok(ContactAnswer::Declined)
        );
        assert_eq!(
            read_contact("PANO-1", &ElicitResult::new(ElicitationAction::Cancel)),
            Ok(ContactAnswer::Cancelled)
        );
    }

    #[test]
    fn a_state_settles_once() {
        let store = AskStore::default();
        let ask = Ask::Contact {
            issue_id: "PANO-1".into(),
        };
        let rs = store.open(ask.clone(), false);
        assert!(rs.starts_with("rs-") && rs.len() == 3 + 36, "{rs}");
        // A refused answer leaves it pending.
        assert_eq!(
            store.settle(&rs, |_| Err::<(), _>(Refusal::ArgumentsChanged)),
            Err(Refusal::ArgumentsChanged)
        );
        assert_eq!(store.pending(), 1);
        assert_eq!(store.settle(&rs, |a| Ok(a.clone())), Ok(ask));
        assert_eq!(store.pending(), 0);
        assert_eq!(store.settle(&rs, |a| Ok(a.clone())), Err(Refusal::Replayed));
        assert_eq!(
            store.settle("rs-nope", |a| Ok(a.clone())),
            Err(Refusal::UnknownRequestState)
        );
        let huge = store.open(
            Ask::Portal {
                permit: "HW-12".into(),
            },
            true,
        );
        assert_eq!(huge.len(), 3 + 36 + HUGE_STATE_PADDING);
    }

    #[test]
    fn permits_and_their_page() {
        assert_eq!(permit(" HW-12 "), Ok("HW-12".to_string()));
        for bad in ["", "  ", "HW 12", "../x", "-x", "HW-12?a=b"] {
            assert_eq!(permit(bad), Err(Refusal::BadPermit), "{bad}");
        }
        assert!(permit_page("HW-12").contains("Permit HW-12 — signing happens here"));
        assert!(!permit_page("<b>").contains("<b>"));
    }

    #[test]
    fn refusals_are_tool_errors_with_a_code() {
        let r = Refusal::Replayed.result();
        assert_eq!(r.is_error, Some(true));
        assert_eq!(
            r.structured_content,
            Some(
                json!({"error": "REPLAYED", "message": "this request was already answered; nothing was done"})
            )
        );
        assert_eq!(
            Refusal::NoElicitation.sentence(),
            "the client cannot ask the user; nothing was done"
        );
    }
}
