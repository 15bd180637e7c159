//! Route handlers.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tracing::Instrument;

use super::error::ApiError;
use super::identity::{Caller, Granted};
use super::state::{AppState, MAX_TEXT};
use crate::agent::{OutFrame, TurnRequest};
use crate::fsm::render;

pub(super) const PAGE: &str = include_str!("page/index.html");

/// One span per request; paths carry thread ids, never tokens or text.
pub async fn request_span(req: Request, next: Next) -> Response {
    let span = tracing::info_span!("request", method = %req.method(), path = %req.uri().path());
    async move {
        let res = next.run(req).await;
        tracing::info!(status = res.status().as_u16(), "response");
        res
    }
    .instrument(span)
    .await
}

pub async fn page() -> Html<&'static str> {
    Html(PAGE)
}

pub async fn healthz() -> &'static str {
    "ok"
}

/// Readiness: each MCP server's connection state (`tables/connection.ron`);
/// 200 when every one would send a call now (its `call_asked` row), else 503. `/healthz` stays liveness.
/// A server whose answers missed a configured result field also lists
/// those `problems` (issue 33 §4): they are the operator's to fix, but a
/// server that answers is still ready, so they never change the status.
pub async fn readyz(State(st): State<AppState>) -> Response {
    let servers = st.agent.tools.servers();
    // A draining process takes no new traffic, whatever its servers say.
    let ready = servers.iter().all(|s| s.carries_calls) && !st.drain.is_draining();
    let status = match ready {
        true => StatusCode::OK,
        false => StatusCode::SERVICE_UNAVAILABLE,
    };
    let shown: Vec<Value> = servers
        .iter()
        .map(|s| {
            let mut v = json!(s);
            let problems = st.agent.problems.of(&s.name);
            if let (false, Some(o)) = (problems.is_empty(), v.as_object_mut()) {
                o.insert("problems".into(), json!(problems));
            }
            v
        })
        .collect();
    let mut body = json!({ "servers": shown });
    if st.drain.is_draining() {
        body["draining"] = json!(true);
        body["open_turns"] = json!(st.drain.open_turns());
    }
    (status, Json(body)).into_response()
}

pub async fn not_found() -> ApiError {
    ApiError::not_found("route")
}

/// The caller, identified through the ownership table, and its access to
/// thread `id`; a thread that is not theirs is a 404 like a missing one.
pub(super) async fn owner_of(
    st: &AppState,
    headers: &HeaderMap,
    method: &Method,
    id: &str,
) -> Result<Caller, ApiError> {
    let mut caller = st.identity.identify(headers, method).await?;
    st.identity.thread(&mut caller, id).await?;
    Ok(caller)
}

pub async fn create_thread(
    State(st): State<AppState>,
    method: Method,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let mut caller = st.identity.identify(&headers, &method).await?;
    let Granted::Created(t) = st.identity.create(&mut caller).await? else {
        return Err(ApiError::not_found("thread"));
    };
    Ok(caller.respond((StatusCode::CREATED, Json(json!({"thread_id": t.id})))))
}

/// `GET /v1/threads`: the caller's own threads, newest first.
pub async fn list_threads(
    State(st): State<AppState>,
    method: Method,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let mut caller = st.identity.identify(&headers, &method).await?;
    let threads = match st.identity.list(&mut caller).await? {
        Granted::List(t) => t,
        _ => Vec::new(),
    };
    let listed: Vec<Value> = (threads.iter())
        .map(|t| json!({"thread_id": t.id, "created_at": t.created_at}))
        .collect();
    Ok(caller.respond(Json(json!({"threads": listed}))))
}

pub async fn get_thread(
    State(st): State<AppState>,
    method: Method,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let caller = owner_of(&st, &headers, &method, &id).await?;
    let mut thread = st
        .store
        .thread(&id)
        .await?
        .ok_or_else(|| ApiError::not_found("thread"))?;
    // The owner is a hash; it is nobody's business but the store's.
    thread.owner = None;
    let messages = st.store.messages(&id).await?;
    let turns = turn_traces(st.store.machines(&id).await?, &messages);
    // Each interrupt's approval state, so a reload shows a decided card
    // decided.
    let approvals: Vec<Value> = st
        .store
        .approvals(&id)
        .await?
        .into_iter()
        .map(|a| {
            json!({"interrupt_id": a.interrupt_id, "turn_id": a.turn_id, "state": a.state, "expires_at": a.expires_at})
        })
        .collect();
    // The licence gate's decisions, one row each, from the records that
    // hold them.
    let audit: Vec<Value> = (messages.iter())
        .filter(|m| m.body["kind"] == "licence")
        .flat_map(|m| {
            let at = m.created_at;
            (m.body["decisions"].as_array().cloned().unwrap_or_default())
                .into_iter()
                .map(move |mut d| {
                    d["created_at"] = json!(at);
                    d["turn_id"] = json!(m.turn_id);
                    d
                })
        })
        .collect();
    // Each call a server made a task: how it settled (never its task id).
    let tasks = crate::agent::tasks::view(&st.store.tasks(&id).await?);
    Ok(caller.respond(Json(
        json!({"thread": thread, "messages": messages, "turns": turns, "approvals": approvals, "tasks": tasks, "licence_audit": audit}),
    )))
}

/// Each turn's machines with the rows they took, in the order the turns
/// began, so a reviewer can see which rows a real conversation took.
fn turn_traces(
    machines: Vec<(String, String, Value)>,
    messages: &[crate::store::Message],
) -> Vec<Value> {
    let mut order: Vec<&str> = Vec::new();
    for m in messages {
        if !order.contains(&m.turn_id.as_str()) {
            order.push(&m.turn_id);
        }
    }
    order
        .into_iter()
        .map(|turn| {
            let ms: serde_json::Map<String, Value> = machines
                .iter()
                .filter(|(t, _, _)| t == turn)
                .map(|(_, name, snap)| (name.clone(), snap.clone()))
                .collect();
            json!({"turn_id": turn, "machines": ms})
        })
        .collect()
}

/// `POST /v1/admin/drain` with `x-turnstile-admin-key`: begins the drain a
/// SIGTERM begins (`drain.rs`). 404 when no operator key is configured, 401
/// for a missing or wrong key; 202 with the open turns otherwise.
pub async fn drain(State(st): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    let Some(key) = &st.admin_key else {
        return Err(ApiError::not_found("route"));
    };
    let presented = headers
        .get(ADMIN_KEY_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    if !key.matches(presented) {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            format!("`{ADMIN_KEY_HEADER}` must be the operator key"),
        ));
    }
    let first = st.drain.begin();
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({
            "draining": true,
            "began_now": first,
            "open_turns": st.drain.open_turns(),
            "drain_secs": st.drain.window().as_secs(),
        })),
    )
        .into_response())
}

/// The operator key's header for the admin routes.
pub const ADMIN_KEY_HEADER: &str = "x-turnstile-admin-key";

/// Row counters in Prometheus text format, with the store's commits and
/// committed bytes.
pub async fn metrics(State(st): State<AppState>) -> impl IntoResponse {
    let store = [
        (
            "turnstile_store_commits",
            "Transactions committed: each group commit of steps once, and each lease claim, renewal, release, approval swap and thread creation",
            st.store.commits(),
        ),
        (
            "turnstile_store_committed_bytes",
            "Payload bytes the step writer committed: message bodies, machine heads and trace rows",
            st.store.committed_bytes(),
        ),
        (
            "turnstile_store_batch_fallbacks",
            "Group commits written again one step per savepoint after the one-statement-per-table path failed (a step that violates a constraint)",
            st.store.batch_fallbacks(),
        ),
    ];
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        crate::protocols::telemetry::render_with(&store),
    )
}

fn sse_event(f: OutFrame) -> Result<Event, Infallible> {
    Ok(Event::default()
        .id(f.seq.to_string())
        .event(f.kind)
        .data(f.data.to_string()))
}

pub async fn post_message(
    State(st): State<AppState>,
    method: Method,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Result<Json<TurnRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    // Who asks, before anything is read of what they ask: a refused
    // credential reaches no agent.
    let caller = owner_of(&st, &headers, &method, &id).await?;
    let Json(req) = body?;
    let (caller, rx) = open_turn(&st, caller, id.clone(), req).await?;
    let rx = st.live.relay(&id, rx);
    let stream = ReceiverStream::new(rx).map(sse_event);
    Ok(caller
        .respond(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(10)))))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReattachQuery {
    /// The turn id its `start` frame gave; without one (the connection
    /// broke before `start` was read), the thread's running turn.
    #[serde(default)]
    pub turn: Option<String>,
}

/// `GET /v1/threads/{id}/stream?turn=T` with `Last-Event-ID`: the frames
/// of the running turn after that id, then the live rest (issue 38 §5,
/// `live.rs`). 204 when no such turn runs in this process any more: the
/// stored thread (`GET /v1/threads/{id}`) has what was sent.
pub async fn reattach(
    State(st): State<AppState>,
    method: Method,
    headers: HeaderMap,
    Path(id): Path<String>,
    query: Result<axum::extract::Query<ReattachQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let caller = owner_of(&st, &headers, &method, &id).await?;
    let axum::extract::Query(q) = query.map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("`turn` names the turn to reconnect to: {e}"),
        )
    })?;
    let last = match headers.get("last-event-id").map(|v| v.to_str()) {
        None => None,
        Some(Ok(v)) => Some(v),
        Some(Err(_)) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "`Last-Event-ID` is not text",
            ))
        }
    };
    let turn = q.turn.as_deref().filter(|t| !t.is_empty());
    match st.live.attach(&id, turn, last) {
        Ok((missed, rx)) => {
            tracing::debug!(missed = missed.len(), "a client reconnected to its turn");
            let stream = tokio_stream::iter(missed)
                .chain(ReceiverStream::new(rx))
                .map(sse_event);
            Ok(caller.respond(
                Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(10))),
            ))
        }
        Err(super::live::Missing::NoLiveTurn) => Ok(caller.respond(StatusCode::NO_CONTENT)),
        Err(super::live::Missing::BadLastEventId) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "`Last-Event-ID` must be the id of a frame this turn sent (a number)",
        )),
    }
}

/// A user turn on thread `id`, for whatever wire format the route writes:
/// the request checked, the thread's lease claimed, the turn started. The
/// frames it writes (already through the `frame` table) come on the
/// receiver.
pub(super) async fn open_turn(
    st: &AppState,
    caller: Caller,
    id: String,
    mut req: TurnRequest,
) -> Result<(Caller, tokio::sync::mpsc::Receiver<OutFrame>), ApiError> {
    if st.drain.is_draining() {
        return Err(ApiError::draining());
    }
    req.access = Some(caller.access.clone());
    if req.text.trim().is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "`text` must not be empty",
        ));
    }
    if req.text.chars().count() > MAX_TEXT {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("`text` is longer than {MAX_TEXT} characters"),
        ));
    }
    let turn_id = uuid::Uuid::new_v4().to_string();
    // One turn per thread, across processes: the claim is a lease in the
    // database, renewed while the turn runs.
    let mut caller = caller;
    let claim = claim_thread(st, &mut caller, &id, &turn_id).await?;
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let agent = st.agent.clone();
    // Counted until the turn ends: a drain waits for it.
    let open = st.drain.turn_opened();
    // The task ends when the turn does or when the client disconnects (the
    // receiver below is dropped with the response stream): no orphans. If
    // the lease is lost mid-turn (another process took the thread over
    // after it expired), the turn is cancelled.
    // The turn releases the lease before it sends its terminal frame, so a
    // client that has read `done` can start the next turn at once.
    tokio::spawn(async move {
        agent.run_turn(&id, &turn_id, req, tx, Some(claim)).await;
        drop(open);
    });
    Ok((caller, rx))
}

/// The thread's lease for a new stream. What the claim found is fired on
/// the caller's ownership machine: a held lease is refused by its row
/// (`thread-busy`, 409); a thread that does not exist is a 404.
async fn claim_thread(
    st: &AppState,
    caller: &mut Caller,
    id: &str,
    turn_id: &str,
) -> Result<crate::agent::ThreadLease, ApiError> {
    match st.agent.leases.claim(id, turn_id).await {
        Ok(Some(claim)) => match st.identity.lease_claimed(caller) {
            Ok(()) => Ok(claim),
            Err(e) => {
                claim.release().await;
                Err(e)
            }
        },
        Ok(None) => Err(st.identity.lease_held(caller)),
        Err(crate::store::StoreError::UnknownThread(_)) => Err(ApiError::not_found("thread")),
        Err(e) => Err(e.into()),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResumeRequest {
    pub interrupt_id: String,
    pub decision: Decision,
    /// The answers to a question's forms, by request key (with `accept`).
    #[serde(default)]
    pub answers: Option<serde_json::Map<String, Value>>,
}

/// One of an interrupt's `choices`: `approve` / `deny` for an approval,
/// `accept` / `decline` / `cancel` for a question of a tool's server.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Approve,
    Deny,
    Accept,
    Decline,
    Cancel,
}

pub async fn resume(
    State(st): State<AppState>,
    method: Method,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Result<Json<ResumeRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    // Only the thread's owner decides its interrupts.
    let caller = owner_of(&st, &headers, &method, &id).await?;
    let Json(req) = body?;
    let (caller, rx) = open_resume(&st, caller, id.clone(), req).await?;
    let rx = st.live.relay(&id, rx);
    let stream = ReceiverStream::new(rx).map(sse_event);
    Ok(caller
        .respond(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(10)))))
}

/// A decision on thread `id`'s interrupt, for whatever wire format the
/// route writes: one compare-and-swap through the approval table (409 by
/// row, 404 for an interrupt the thread does not have), then the resumed
/// turn's frames on the receiver.
pub(super) async fn open_resume(
    st: &AppState,
    caller: Caller,
    id: String,
    req: ResumeRequest,
) -> Result<(Caller, tokio::sync::mpsc::Receiver<OutFrame>), ApiError> {
    use crate::agent::DecideError;
    if st.drain.is_draining() {
        return Err(ApiError::draining());
    }
    if req.interrupt_id.trim().is_empty() || req.interrupt_id.len() > 128 {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "`interrupt_id` must be the id an interrupt frame gave",
        ));
    }
    // The thread's lease first: a decision that wins must be followed by
    // its effect, so nothing is decided while another turn runs.
    let turn_id = uuid::Uuid::new_v4().to_string();
    let mut caller = caller;
    let claim = claim_thread(st, &mut caller, &id, &turn_id).await?;
    use crate::agent::UserDecision;
    let answers = req.answers.unwrap_or_default();
    let answer = |action| UserDecision::Answer {
        action,
        answers: answers.clone(),
    };
    let user = match req.decision {
        Decision::Approve => UserDecision::Approve,
        Decision::Deny => UserDecision::Deny,
        Decision::Accept => answer("accept"),
        Decision::Decline => answer("decline"),
        Decision::Cancel => answer("cancel"),
    };
    if !answers.is_empty() && !matches!(user, UserDecision::Answer { .. }) {
        claim.release().await;
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "`answers` go with `accept`, to a question of a tool's server",
        ));
    }
    // Who decided is recorded with the winning swap, in its statement.
    let approver = caller.owner().map(|o| o.key);
    let decided = match (st.agent)
        .decide_as(&id, &req.interrupt_id, user, approver.as_deref())
        .await
    {
        Ok(d) => d,
        Err(e) => {
            claim.release().await;
            return Err(match e {
                // The id is the client's: not echoed.
                DecideError::NotFound { row_id } => ApiError::new(
                    StatusCode::NOT_FOUND,
                    "no interrupt with this id is pending on this thread",
                )
                .with_row("approval", &row_id),
                DecideError::Refused { row_id, why, state } => ApiError::new(
                    StatusCode::CONFLICT,
                    format!("the interrupt is {state}: {why}"),
                )
                .with_row("approval", &row_id),
                DecideError::Restore(m) => ApiError::new(StatusCode::CONFLICT, m),
                DecideError::Unchecked(m) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, m),
                DecideError::Choice(m) | DecideError::Invalid(m) => {
                    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, m)
                }
                DecideError::Store(e) => e.into(),
            });
        }
    };
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let agent = st.agent.clone();
    let access = Some(caller.access.clone());
    let open = st.drain.turn_opened();
    tokio::spawn(async move {
        agent
            .resume_turn(&id, decided, access, tx, Some(claim))
            .await;
        drop(open);
    });
    Ok((caller, rx))
}

pub async fn list_tables(State(st): State<AppState>) -> Json<Value> {
    let tables: Vec<Value> = st
        .tables
        .names()
        .filter_map(|n| st.tables.get(n))
        .map(|t| serde_json::to_value(render::json(t)).unwrap_or(Value::Null))
        .collect();
    Json(Value::Array(tables))
}

pub async fn get_table(
    State(st): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let t = st
        .tables
        .get(&name)
        .ok_or_else(|| ApiError::not_found("table"))?;
    Ok(Json(
        serde_json::to_value(render::json(t)).unwrap_or(Value::Null),
    ))
}
