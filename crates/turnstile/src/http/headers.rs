//! Browser-facing headers on every response: the Content-Security-Policy
//! that lets only the page's own script and style run, `nosniff`,
//! `no-referrer`, and CORS for the configured origins only.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

/// What the header middleware adds, computed once when the router is built.
#[derive(Clone)]
pub struct Headers {
    csp: HeaderValue,
    cors_origins: Arc<Vec<String>>,
}

impl Headers {
    /// `page` is the HTML served at `/`; each inline `<script>` and
    /// `<style>` block in it is allowed by its hash, nothing else is.
    pub fn new(page: &str, frame_ancestors: &[String], cors_origins: &[String]) -> Headers {
        let csp = csp(page, frame_ancestors);
        Headers {
            csp: HeaderValue::from_str(&csp).expect("the CSP is a valid header value"),
            cors_origins: Arc::new(cors_origins.to_vec()),
        }
    }
}

/// The policy for `page`. `frame_ancestors` are origins (already checked
/// by the config); empty means `'none'`.
pub fn csp(page: &str, frame_ancestors: &[String]) -> String {
    let hashes = |tag: &str| {
        inline_blocks(page, tag)
            .into_iter()
            .map(|b| format!("'sha256-{}'", base64(&Sha256::digest(b.as_bytes()))))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let or_none = |s: String| {
        if s.is_empty() {
            "'none'".to_string()
        } else {
            s
        }
    };
    let ancestors = or_none(frame_ancestors.join(" "));
    format!(
        "default-src 'none'; script-src {}; style-src {}; connect-src 'self'; img-src 'self'; \
         base-uri 'none'; form-action 'self'; frame-ancestors {ancestors}",
        or_none(hashes("script")),
        or_none(hashes("style")),
    )
}

/// The text of each inline `<tag>…</tag>` block (one without `src`).
fn inline_blocks<'a>(page: &'a str, tag: &str) -> Vec<&'a str> {
    let open = format!("<{tag}");
    let close = format!("</{tag}>");
    let mut out = Vec::new();
    let mut rest = page;
    while let Some(at) = rest.find(&open) {
        let after = &rest[at + open.len()..];
        // `<scripts>` or `<style-x>` are other tags.
        if !after.starts_with(['>', ' ', '\t', '\n', '\r']) {
            rest = after;
            continue;
        }
        let Some(gt) = after.find('>') else { break };
        let attrs = &after[..gt];
        let body = &after[gt + 1..];
        let Some(end) = body.find(&close) else { break };
        if !attrs.contains("src=") {
            out.push(&body[..end]);
        }
        rest = &body[end + close.len()..];
    }
    out
}

fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Adds the security headers to every response, answers CORS preflights
/// from allowed origins, and marks responses readable by them.
pub async fn security(State(h): State<Headers>, req: Request, next: Next) -> Response {
    let origin = req
        .headers()
        .get(header::ORIGIN)
        .and_then(|o| o.to_str().ok())
        .filter(|o| h.cors_origins.iter().any(|a| a == o))
        .and_then(|o| HeaderValue::from_str(o).ok());
    let preflight = req.method() == Method::OPTIONS
        && req
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let mut res = match (&origin, preflight) {
        (Some(_), true) => {
            let mut r = StatusCode::NO_CONTENT.into_response();
            let hs = r.headers_mut();
            hs.insert(
                header::ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static("GET, POST"),
            );
            hs.insert(
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_static("content-type, last-event-id"),
            );
            hs.insert(
                header::ACCESS_CONTROL_MAX_AGE,
                HeaderValue::from_static("600"),
            );
            r
        }
        _ => next.run(req).await,
    };
    let hs = res.headers_mut();
    hs.insert(header::CONTENT_SECURITY_POLICY, h.csp.clone());
    hs.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    hs.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if let Some(o) = origin {
        hs.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, o);
    }
    if !h.cors_origins.is_empty() {
        hs.append(header::VARY, HeaderValue::from_static("origin"));
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard_alphabet() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn the_policy_hashes_each_inline_block_and_nothing_else() {
        let page = "<style>a{}</style><script src=\"x.js\"></script><script>1</script><scripts>";
        let p = csp(page, &[]);
        let h = |s: &str| format!("'sha256-{}'", base64(&Sha256::digest(s.as_bytes())));
        assert!(p.contains(&format!("script-src {};", h("1"))), "{p}");
        assert!(p.contains(&format!("style-src {};", h("a{}"))), "{p}");
        assert!(p.contains("frame-ancestors 'none'"), "{p}");
        assert!(!p.contains("unsafe-inline"), "{p}");
        let p = csp(page, &["https://host.example".into()]);
        assert!(p.ends_with("frame-ancestors https://host.example"), "{p}");
    }

    #[test]
    fn the_served_page_has_one_script_and_one_style() {
        let page = include_str!("page/index.html");
        assert_eq!(inline_blocks(page, "script").len(), 1);
        assert_eq!(inline_blocks(page, "style").len(), 1);
    }
}
