//! Request limits applied before any handler: the size of the head, the
//! time and size of the body, the nesting depth of JSON; and the net that
//! gives every error response the JSON shape of [`ApiError`].

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::state::{MAX_BODY, MAX_JSON_DEPTH};

#[derive(Clone, Copy)]
pub struct Limits {
    pub max_header_bytes: usize,
    pub body_read_timeout: Duration,
}

/// The size of a request head as sent: request line and header lines.
fn head_size(req: &Request) -> usize {
    let line =
        req.method().as_str().len() + req.uri().to_string().len() + " HTTP/1.1\r\n".len() + 1;
    line + req
        .headers()
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum::<usize>()
}

/// Refuses a head over the limit with 431 and closes the connection.
pub async fn head_limit(State(l): State<Limits>, req: Request, next: Next) -> Response {
    let size = head_size(&req);
    if size > l.max_header_bytes {
        let mut r = ApiError::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            format!(
                "the request head is {size} bytes; at most {} are accepted",
                l.max_header_bytes
            ),
        )
        .into_response();
        close(&mut r);
        return r;
    }
    next.run(req).await
}

fn close(r: &mut Response) {
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
}

/// Reads the whole body within `body_read_timeout` (408 when it does not
/// arrive in time), refuses one over [`MAX_BODY`] (413) and JSON nested
/// deeper than [`MAX_JSON_DEPTH`] (400), all before any handler parses it.
pub async fn read_body(State(l): State<Limits>, req: Request, next: Next) -> Response {
    // A declared length over the limit is refused before a byte of the body
    // is awaited: waiting would only turn it into a 408 later.
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if let Some(n) = declared.filter(|&n| n > MAX_BODY as u64) {
        let mut r = ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body declares {n} bytes; at most {MAX_BODY} are accepted"),
        )
        .into_response();
        close(&mut r);
        return r;
    }
    // A NUL is refused at the edge, the same on every database: PostgreSQL
    // cannot store one in text, SQLite would, and an id with one names
    // nothing either way.
    if let Some(at) = nul_in_uri(req.uri().path_and_query().map_or("", |p| p.as_str())) {
        return ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("the request's path or query holds a NUL character (%00) at byte {at}; ids and text may not hold one"),
        )
        .into_response();
    }
    let (parts, body) = req.into_parts();
    let read = axum::body::to_bytes(body, MAX_BODY);
    let bytes: Bytes = match tokio::time::timeout(l.body_read_timeout, read).await {
        Err(_) => {
            let mut r = ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body did not arrive within {} ms",
                    l.body_read_timeout.as_millis()
                ),
            )
            .into_response();
            close(&mut r);
            return r;
        }
        Ok(Err(e)) => {
            let too_large = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            let mut r = if too_large {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("the request body is larger than {MAX_BODY} bytes"),
                )
            } else {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "the request body could not be read",
                )
            }
            .into_response();
            close(&mut r);
            return r;
        }
        Ok(Ok(b)) => b,
    };
    match scan(&bytes, MAX_JSON_DEPTH) {
        Scan { nul: Some(at), .. } => {
            return ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("the request body holds a NUL character (U+0000) at byte {at}; ids and text may not hold one"),
            )
            .into_response();
        }
        Scan {
            too_deep: Some(depth),
            ..
        } => {
            return ApiError::new(
                StatusCode::BAD_REQUEST,
                format!(
                    "the JSON body is nested deeper than {MAX_JSON_DEPTH} levels (at byte {depth})"
                ),
            )
            .into_response();
        }
        _ => {}
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// What one pass over a body, read as JSON, found: where it first opens
/// more than `max` nested arrays or objects (brackets inside strings do not
/// count), and where it first holds U+0000 (a raw NUL byte, or the escape
/// `\u0000` inside a string; an escaped backslash before `u0000` is text).
/// Runs over raw bytes, before any parsing, so both bounds hold for every
/// key, known or not.
#[derive(Debug, Default, PartialEq)]
pub struct Scan {
    pub too_deep: Option<usize>,
    pub nul: Option<usize>,
}

pub fn scan(body: &[u8], max: usize) -> Scan {
    let mut found = Scan::default();
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, &b) in body.iter().enumerate() {
        if b == 0 {
            found.nul.get_or_insert(i);
        }
        if in_string {
            match (escaped, b) {
                (true, b'u') => {
                    escaped = false;
                    let hex = body.get(i + 1..i + 5);
                    if hex.is_some_and(|h| h.iter().all(|&c| c == b'0')) {
                        found.nul.get_or_insert(i - 1);
                    }
                }
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    found.too_deep.get_or_insert(i);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if found.nul.is_some() && found.too_deep.is_some() {
            break;
        }
    }
    found
}

/// The byte offset of the first `%00` in a request target, if any (the
/// percent-encoding of U+0000; a raw NUL never passes the HTTP parser).
fn nul_in_uri(target: &str) -> Option<usize> {
    let b = target.as_bytes();
    (0..b.len().saturating_sub(2)).find(|&i| b[i] == b'%' && b[i + 1] == b'0' && b[i + 2] == b'0')
}

/// Every 4xx and 5xx leaves as `{"error": "…"}`: responses made by axum
/// itself (405, a path that does not decode, …) get their text, or the
/// status's reason, as the `error`.
pub async fn json_errors(req: Request, next: Next) -> Response {
    let res = next.run(req).await;
    let status = res.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return res;
    }
    let is_json = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if is_json {
        return res;
    }
    let (mut parts, body) = res.into_parts();
    let text = axum::body::to_bytes(body, 4096)
        .await
        .ok()
        .and_then(|b| String::from_utf8(b.to_vec()).ok())
        .map(|t| t.trim().to_string())
        .unwrap_or_default();
    let reason = if status == StatusCode::METHOD_NOT_ALLOWED {
        // The route's own `Allow` header (`GET,HEAD`), so the two agree.
        let allowed: Vec<&str> = parts
            .headers
            .get(header::ALLOW)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .collect();
        match allowed.is_empty() {
            false => format!(
                "method not allowed; this route accepts {}",
                allowed.join(", ")
            ),
            true => "method not allowed".to_string(),
        }
    } else if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("request refused")
            .to_lowercase()
    } else {
        // axum's own texts may quote the request (a path segment).
        crate::http::error::without_client_values(&text)
    };
    parts.headers.remove(header::CONTENT_TYPE);
    parts.headers.remove(header::CONTENT_LENGTH);
    let fresh = ApiError::new(status, reason).into_response();
    let (fresh_parts, body) = fresh.into_parts();
    for (k, v) in fresh_parts.headers.iter() {
        parts.headers.insert(k.clone(), v.clone());
    }
    Response::from_parts(parts, body)
}

#[cfg(test)]
mod tests {
    use super::{nul_in_uri, scan};

    fn nul_at(body: &[u8]) -> Option<usize> {
        scan(body, usize::MAX).nul
    }

    fn too_deep(body: &[u8], max: usize) -> Option<usize> {
        scan(body, max).too_deep
    }

    #[test]
    fn a_nul_is_found_raw_or_escaped_but_not_as_escaped_text() {
        assert_eq!(nul_at(br#"{"a":"x\u0000"}"#), Some(7));
        assert_eq!(nul_at(b"{\"a\":\"x\0\"}"), Some(7));
        assert_eq!(nul_at(br#"{"a":"x\\u0000"}"#), None);
        assert_eq!(nul_at(br#"{"a":"\u0001\u00000"}"#), Some(12));
        assert_eq!(nul_at(br#"{"a":"u0000"}"#), None);
        assert_eq!(nul_in_uri("/v1/threads/a%00b/messages"), Some(13));
        assert_eq!(nul_in_uri("/v1/threads/a%2500"), None);
        assert_eq!(nul_in_uri("/v1/threads/%0"), None);
    }

    #[test]
    fn depth_counts_brackets_outside_strings_only() {
        assert_eq!(too_deep(br#"{"a":[1,{"b":2}]}"#, 3), None);
        assert_eq!(too_deep(br#"{"a":[1,{"b":2}]}"#, 2), Some(8));
        assert_eq!(too_deep(br#"{"a":"[[[[[[[[\"[[[["}"#, 1), None);
        assert_eq!(too_deep(b"[[[[", 3), Some(3));
    }
}
