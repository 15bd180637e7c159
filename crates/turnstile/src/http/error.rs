//! API errors: a status and a reason, as JSON `{"error": "…"}`; a refusal a
//! table decided also names the table and its row (`"table"`, `"row_id"`).

use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// The table and forbidden row that decided the refusal, if one did.
    pub row: Option<(String, String)>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            row: None,
        }
    }

    /// Names the table row that refused the request.
    pub fn with_row(mut self, table: &str, row_id: &str) -> Self {
        self.row = Some((table.to_string(), row_id.to_string()));
        self
    }

    pub fn not_found(what: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, format!("{what} not found"))
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        // axum's rejection knows the right status (400, 413, 415, 422); we
        // report 422s as 400 since a missing or mistyped field is a bad request.
        let status = match r.status() {
            StatusCode::UNPROCESSABLE_ENTITY => StatusCode::BAD_REQUEST,
            s => s,
        };
        ApiError::new(status, r.body_text())
    }
}

impl From<crate::store::StoreError> for ApiError {
    fn from(e: crate::store::StoreError) -> Self {
        tracing::error!(error = %e, "store error");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "storage is unavailable")
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = match &self.row {
            Some((table, row_id)) => {
                json!({"error": self.message, "table": table, "row_id": row_id})
            }
            None => json!({"error": self.message}),
        };
        (self.status, Json(body)).into_response()
    }
}
