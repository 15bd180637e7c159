//! Route handlers.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::Json;
use futures::Stream;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tracing::Instrument;

use super::error::ApiError;
use super::{AppState, MAX_TEXT};
use crate::agent::{OutFrame, TurnRequest};
use crate::fsm::render;

const PAGE: &str = include_str!("page/index.html");

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

pub async fn not_found() -> ApiError {
    ApiError::not_found("route")
}

pub async fn create_thread(State(st): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    let t = st.store.create_thread(None).await?;
    Ok((StatusCode::CREATED, Json(json!({"thread_id": t.id}))))
}

pub async fn get_thread(
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let thread = st
        .store
        .thread(&id)
        .await?
        .ok_or_else(|| ApiError::not_found("thread"))?;
    let messages = st.store.messages(&id).await?;
    Ok(Json(json!({"thread": thread, "messages": messages})))
}

fn sse_event(f: OutFrame) -> Result<Event, Infallible> {
    Ok(Event::default()
        .id(f.seq.to_string())
        .event(f.kind)
        .data(f.data.to_string()))
}

pub async fn post_message(
    State(st): State<AppState>,
    Path(id): Path<String>,
    body: Result<Json<TurnRequest>, JsonRejection>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let Json(req) = body?;
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
    if st.store.thread(&id).await?.is_none() {
        return Err(ApiError::not_found("thread"));
    }
    let Some(claim) = st.agent.claims.claim(&id) else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "a turn is already running on this thread; wait for its done or error frame",
        ));
    };
    let turn_id = uuid::Uuid::new_v4().to_string();
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let agent = st.agent.clone();
    // The task ends when the turn does or when the client disconnects (the
    // receiver below is dropped with the response stream): no orphans.
    tokio::spawn(async move {
        agent.run_turn(&id, &turn_id, req, tx).await;
        drop(claim);
    });
    let stream = ReceiverStream::new(rx).map(sse_event);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(10))))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResumeRequest {
    pub interrupt_id: String,
    pub decision: Decision,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Approve,
    Deny,
}

pub async fn resume(
    State(st): State<AppState>,
    Path(id): Path<String>,
    body: Result<Json<ResumeRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(req) = body?;
    if st.store.thread(&id).await?.is_none() {
        return Err(ApiError::not_found("thread"));
    }
    // No tool in this build raises approvals yet, so nothing can be pending.
    let _ = req.decision;
    Err(ApiError::new(
        StatusCode::CONFLICT,
        format!(
            "interrupt \"{}\" is not pending on this thread",
            req.interrupt_id
        ),
    ))
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
