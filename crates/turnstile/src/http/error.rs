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
    /// `Retry-After`, in seconds, for a refusal that passes.
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            row: None,
            retry_after: None,
        }
    }

    /// Names the table row that refused the request.
    pub fn with_row(mut self, table: &str, row_id: &str) -> Self {
        self.row = Some((table.to_string(), row_id.to_string()));
        self
    }

    /// The process is draining: the request goes to another instance.
    pub fn draining() -> Self {
        ApiError {
            retry_after: Some(5),
            ..Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "this server is draining before a restart: retry shortly (another instance takes it)",
            )
        }
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
        // serde quotes what it could not take (an unknown field's name, a
        // variant, a string of the wrong type), and the path names a field
        // the client wrote: never echoed whole.
        ApiError::new(status, without_client_values(&r.body_text()))
    }
}

/// The longest client value an error message may echo.
const SHOWN_VALUE_MAX: usize = 64;
/// The longest error message made from a library's text.
const SHOWN_MESSAGE_MAX: usize = 400;

/// `message` (a library's text, which may quote the client) with each
/// quoted value (in backticks or double quotes) and each bare word kept
/// only if it is plain — printable ASCII without `<>\` or quotes: one
/// longer than 64 characters is cut to 64 and `…`, one with anything else
/// (control characters, markup, non-ASCII) is replaced by `…`. The whole
/// is at most 400 characters.
pub(crate) fn without_client_values(message: &str) -> String {
    let plain = |c: char| (c.is_ascii_graphic() || c == ' ') && !"<>\\\"`".contains(c);
    let shown = |v: &str| -> String {
        if !v.chars().all(plain) {
            "…".into()
        } else if v.chars().count() > SHOWN_VALUE_MAX {
            v.chars().take(SHOWN_VALUE_MAX).chain(['…']).collect()
        } else {
            v.into()
        }
    };
    let mut out = String::new();
    let mut word = String::new();
    let mut chars = message.chars();
    let flush = |out: &mut String, word: &mut String| {
        // A bare word keeps the punctuation that ends it: `decision:`.
        let core = word.trim_end_matches([',', ';', ')', ':']);
        let tail = &word[core.len()..];
        *out += &shown(core);
        *out += tail;
        word.clear();
    };
    while let Some(c) = chars.next() {
        match c {
            '`' | '"' => {
                flush(&mut out, &mut word);
                let mut value = String::new();
                let mut escaped = false;
                for d in chars.by_ref() {
                    if d == c && !escaped {
                        break;
                    }
                    escaped = c == '"' && d == '\\' && !escaped;
                    value.push(d);
                }
                out.push(c);
                out += &shown(&value);
                out.push(c);
            }
            ' ' => {
                flush(&mut out, &mut word);
                out.push(' ');
            }
            c => word.push(c),
        }
    }
    flush(&mut out, &mut word);
    if out.chars().count() > SHOWN_MESSAGE_MAX {
        out = out.chars().take(SHOWN_MESSAGE_MAX).chain(['…']).collect();
    }
    out
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
        let mut r = (self.status, Json(body)).into_response();
        if let Some(secs) = self.retry_after {
            r.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, secs.into());
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::without_client_values as w;

    #[test]
    fn library_text_keeps_plain_words_and_drops_odd_or_long_values() {
        let m = "Failed to deserialize the JSON body into the target type: decision: unknown variant `maybe`, expected `approve` or `deny` at line 1 column 42";
        assert_eq!(w(m), m);
        assert_eq!(
            w("a\u{1}b<x>: unknown field `a\u{1}b<x>`, expected `text`"),
            "…: unknown field `…`, expected `text`"
        );
        let long = "A".repeat(70);
        assert_eq!(
            w(&format!(
                "invalid type: string \"{long}\", expected a sequence"
            )),
            format!(
                "invalid type: string \"{}…\", expected a sequence",
                &long[..64]
            )
        );
        assert_eq!(w("string \"a\\\"b\" x"), "string \"…\" x");
        assert_eq!(w("unclosed `abc"), "unclosed `abc`");
        assert!(w(&"word ".repeat(200)).chars().count() <= 401);
    }
}
