//! `/v1/connections` (issue 40 §2–3): the caller's connected per-user
//! servers, revoking one, and the callback route the authorization servers
//! send users' browsers back to. What a callback may do is the connect
//! table's (`agent::connections`); this layer reads the request, answers
//! the held call's interrupt once, and says what happened. No response, log
//! line or error here carries a token, a code or a subject.

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::error::ApiError;
use super::state::AppState;
use std::sync::Arc;

use crate::agent::connections::{
    CallbackOutcome, CallbackQuery, Connections, Resume, CONNECT_KEY, FLOW_COOKIE,
};
use crate::agent::UserDecision;

fn not_configured() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no server here authorizes per user (`auth = \"user\"`)",
    )
}

/// The per-user servers, the caller, and the owner the caller is: a
/// caller's connections and Connect cards are their own.
async fn own(
    st: &AppState,
    headers: &HeaderMap,
    method: &Method,
) -> Result<
    (
        Arc<Connections>,
        super::identity::Caller,
        crate::store::Owner,
    ),
    ApiError,
> {
    let Some(c) = st.connections.clone() else {
        return Err(not_configured());
    };
    let caller = st.identity.identify(headers, method).await?;
    let Some(owner) = caller.owner() else {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "connections are a caller's own: sign in",
        ));
    };
    Ok((c, caller, owner))
}

/// `GET /oauth/client-metadata.json`: turnstile's Client ID Metadata
/// Document, when `[connections] client_metadata_document` asks for one.
pub async fn client_metadata(State(st): State<AppState>) -> Result<Response, ApiError> {
    let doc = (st.connections.as_ref()).and_then(|c| c.client_metadata());
    match doc {
        Some(doc) => Ok(Json(doc).into_response()),
        None => Err(ApiError::not_found("client metadata document")),
    }
}

/// `GET /v1/connections`: each per-user server, and whether the caller
/// connected it (never a token).
pub async fn list(
    State(st): State<AppState>,
    method: Method,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (c, caller, owner) = own(&st, &headers, &method).await?;
    let rows = c.list(&owner.key).await?;
    let servers: Vec<Value> = c
        .server_names()
        .map(|name| match rows.iter().find(|r| r.server == name) {
            Some(r) => json!({"server": name, "connected": true, "scopes": r.scopes, "connected_at": r.updated_at}),
            None => json!({"server": name, "connected": false}),
        })
        .collect();
    Ok(caller.respond(Json(json!({"connections": servers}))))
}

/// `DELETE /v1/connections/{server}`: forgets the caller's token for it
/// (204), or 404 when they had none.
pub async fn revoke(
    State(st): State<AppState>,
    method: Method,
    headers: HeaderMap,
    Path(server): Path<String>,
) -> Result<Response, ApiError> {
    let (c, caller, owner) = own(&st, &headers, &method).await?;
    if c.server(&server).is_none() {
        return Err(ApiError::not_found("per-user server"));
    }
    match c.revoke(&owner.key, &server).await? {
        true => Ok(caller.respond(StatusCode::NO_CONTENT)),
        false => Err(ApiError::not_found("connection")),
    }
}

/// `POST /v1/connections/flows/{id}/ticket`: a one-time sign-in link for
/// the caller's own Connect card (404 for a flow that is not theirs, or no
/// longer waits). The card's link is this, never the authorization
/// server's URL: a link that leaked gives nobody a way to bring back
/// another account's token for this user.
pub async fn ticket(
    State(st): State<AppState>,
    method: Method,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let (c, caller, owner) = own(&st, &headers, &method).await?;
    let Some(ticket) = c.ticket(&id, &owner.key) else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "no Connect card of yours with this id is waiting",
        ));
    };
    let url = format!("/v1/connections/start?ticket={ticket}");
    let body = json!({"url": url, "expires_in": crate::agent::connections::TICKET_TTL.as_secs()});
    Ok(caller.respond(private(Json(body).into_response())))
}

#[derive(serde::Deserialize)]
pub struct StartParams {
    ticket: Option<String>,
}

/// `GET /v1/connections/start?ticket=T`: the ticket, used once, sets the
/// flow's cookie in this browser and sends it to the authorization server.
pub async fn start(
    State(st): State<AppState>,
    Query(q): Query<StartParams>,
) -> Result<Response, ApiError> {
    let Some(c) = st.connections.clone() else {
        return Err(not_configured());
    };
    let Some((auth_url, id, nonce)) = q.ticket.as_deref().and_then(|t| c.start(t)) else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "this sign-in link was used already or has expired: open the Connect card again",
        ));
    };
    let secure = if c.secure_cookie() { "; Secure" } else { "" };
    let cookie = format!(
        "{FLOW_COOKIE}_{id}={nonce}; HttpOnly; SameSite=Lax; Path=/v1/connections/callback; Max-Age={}{secure}",
        c.flow_ttl().as_secs()
    );
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, auth_url)]).into_response();
    if let Ok(v) = header::HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, v);
    }
    Ok(private(response))
}

#[derive(serde::Deserialize)]
pub struct CallbackParams {
    state: Option<String>,
    code: Option<String>,
    error: Option<String>,
    iss: Option<String>,
}

/// `GET /v1/connections/callback`: where an authorization server sends the
/// user back. It must carry the flow's cookie (set by the start route in
/// the browser the user opened their card in). A refusal is 400 naming the
/// connect table's row; nothing is stored for it. No caller identity is
/// read or issued here: the flow cookie is what binds the callback.
pub async fn callback(
    State(st): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<CallbackParams>,
) -> Result<Response, ApiError> {
    let Some(c) = st.connections.clone() else {
        return Err(not_configured());
    };
    let prefix = format!("{FLOW_COOKIE}_");
    let nonces = (headers.get_all(header::COOKIE).iter())
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter_map(|(k, v)| {
            k.strip_prefix(&prefix)
                .map(|id| (id.to_string(), v.to_string()))
        })
        .collect();
    let query = CallbackQuery {
        state: q.state,
        code: q.code,
        error: q.error,
        iss: q.iss,
        nonces,
    };
    let outcome = c.callback(query).await;
    let (title, text) = match outcome {
        CallbackOutcome::Refused { row, why } => {
            tracing::warn!(row = %row, "a connect callback was refused");
            let body = format!("Not connected: {why}. Refused by row `{row}` of the connect table; nothing was stored.");
            return Err(ApiError::new(StatusCode::BAD_REQUEST, body).with_row("connect", &row));
        }
        CallbackOutcome::Connected(resume) => {
            let resumed = resume_held(&st, &resume, "accept").await;
            let server = resume.server;
            let text = match resumed {
                Ok(true) => format!("Connected {server}. The call that waited for it is being sent, once, with your account; its answer will be in the chat."),
                Ok(false) => format!("Connected {server}. No call waits for it now."),
                Err(why) => format!("Connected {server}. The waiting call was not sent from here ({why}): answer its card in the chat."),
            };
            ("Connected", text)
        }
        CallbackOutcome::Declined { resume, row } => {
            let resumed = resume_held(&st, &resume, "decline").await;
            let server = resume.server;
            let sent = match resumed {
                Ok(true) => "The call that waited for it is not sent, and the chat says so.",
                _ => "No call was sent.",
            };
            (
                "Not connected",
                format!("{server} was not connected (row `{row}` of the connect table). {sent}"),
            )
        }
    };
    let page = format!(
        "<!doctype html><meta charset=utf-8><title>turnstile: {title}</title>\
         <p data-testid=connect-result>{}</p><p><a href=\"/\">Back to the chat</a></p>",
        escape(&text)
    );
    Ok(private((StatusCode::OK, Html(page)).into_response()))
}

/// Answers the thread's Connect card for `resume.server` with `action`,
/// once (the approval table's compare-and-swap), and runs the resumed turn
/// to its end; nobody reads its stream here: every frame is stored, and
/// the chat shows the stored thread. `Ok(false)`: no such card waits.
async fn resume_held(st: &AppState, resume: &Resume, action: &'static str) -> Result<bool, String> {
    let approvals = (st.store.approvals(&resume.thread).await).map_err(|e| e.to_string())?;
    let waiting = approvals.iter().rev().find(|a| {
        let input = &a.action["input"];
        a.state == "Awaiting"
            && input["server"] == resume.server.as_str()
            && (input["requests"].as_array()).is_some_and(|r| {
                r.iter()
                    .any(|r| r["key"] == CONNECT_KEY && r["mode"] == "connect")
            })
    });
    let Some(waiting) = waiting else {
        return Ok(false);
    };
    let turn_id = uuid::Uuid::new_v4().to_string();
    let claim = match st.agent.leases.claim(&resume.thread, &turn_id).await {
        Ok(Some(c)) => c,
        Ok(None) => return Err("another turn runs on the thread".into()),
        Err(e) => return Err(e.to_string()),
    };
    let user = UserDecision::Answer {
        action,
        answers: Default::default(),
    };
    let decided = match (st.agent)
        .decide_as(&resume.thread, &waiting.interrupt_id, user, None)
        .await
    {
        Ok(d) => d,
        Err(e) => {
            claim.release().await;
            return Err(e.to_string());
        }
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let agent = st.agent.clone();
    let open = st.drain.turn_opened();
    let thread = resume.thread.clone();
    let access = Some(resume.access.clone());
    tokio::spawn(async move {
        agent
            .resume_turn(&thread, decided, access, tx, Some(claim))
            .await;
        drop(open);
    });
    tokio::spawn(async move { while rx.recv().await.is_some() {} });
    Ok(true)
}

/// A response that carries a one-time link, a flow cookie or a sign-in's
/// outcome: never cached, and never named in a `Referer`.
fn private(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        header::HeaderValue::from_static("no-referrer"),
    );
    response
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
