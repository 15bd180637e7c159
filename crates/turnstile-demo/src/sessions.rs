//! Exact MCP sessions for the demo's private tools (issue 20; seed 002's
//! "ADR-0098").
//!
//! A private tool (the action tools, the export tools) acts on state that
//! belongs to one owner, so its call must name the session it means — or
//! name none and take the one it arrived on:
//!
//! * `_meta["turnstile/session"]` ([`SESSION_META`]) absent, `null` or `""`:
//!   the call uses its transport binding (the `Mcp-Session-Id` it arrived
//!   with). No transport binding: `INVALID_SESSION`.
//! * Any other value is looked up EXACTLY among the server's live MCP
//!   sessions (the ids rmcp's session manager issued and has not closed,
//!   by `DELETE` or by its idle timeout). Not live (unknown, random,
//!   closed, expired, not a string): `INVALID_SESSION` — never a fallback
//!   to the transport session.
//! * Live, but not the session the call arrived on: `SESSION_MISMATCH`.
//!
//! A refusal is a tool result with `isError: true` whose structured content
//! (and text, the same JSON) is `{"error": CODE, "message": SENTENCE}`:
//! a fixed sentence per code, never an id, never a URL.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{json, Map, Value};

pub use turnstile::mcp::SESSION_META;

/// The explicit session is not a live session of this server.
pub const INVALID_SESSION: &str = "INVALID_SESSION";
/// The explicit session is live, but the call did not arrive on it.
pub const SESSION_MISMATCH: &str = "SESSION_MISMATCH";

/// The tools whose state belongs to an owner, and which therefore resolve
/// their session exactly.
pub const PRIVATE_TOOLS: [&str; 6] = [
    "prepare_seat_reservation",
    "confirm_action",
    "cancel_action",
    "get_action",
    "export_all_lms_materials",
    "confirm_lms_material_export",
];

/// Is `tool` one of [`PRIVATE_TOOLS`]?
pub fn is_private(tool: &str) -> bool {
    PRIVATE_TOOLS.contains(&tool)
}

/// What a call's `_meta` says of its session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Explicit {
    /// No [`SESSION_META`] key, `null`, or `""`.
    Omitted,
    /// A non-empty string.
    Id(String),
    /// Something that cannot be a session id (a number, an object...).
    NotAnId,
}

/// Reads [`SESSION_META`] from a request's `_meta`.
pub fn explicit(meta: &Map<String, Value>) -> Explicit {
    match meta.get(SESSION_META) {
        None | Some(Value::Null) => Explicit::Omitted,
        Some(Value::String(s)) if s.is_empty() => Explicit::Omitted,
        Some(Value::String(s)) => Explicit::Id(s.clone()),
        Some(_) => Explicit::NotAnId,
    }
}

/// Why a private call was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    InvalidSession,
    SessionMismatch,
}

impl Refusal {
    /// `INVALID_SESSION` or `SESSION_MISMATCH`.
    pub fn code(self) -> &'static str {
        match self {
            Refusal::InvalidSession => INVALID_SESSION,
            Refusal::SessionMismatch => SESSION_MISMATCH,
        }
    }

    /// The fixed sentence that goes with the code.
    pub fn sentence(self) -> &'static str {
        match self {
            Refusal::InvalidSession => {
                "The session this call names is not a live session of this server; nothing was done."
            }
            Refusal::SessionMismatch => {
                "The session this call names is not the session it was sent on; nothing was done."
            }
        }
    }

    /// The tool result: `isError: true`, `{"error": CODE, "message":
    /// SENTENCE}` as structured content and as the one text block.
    pub fn result(self) -> CallToolResult {
        let body = json!({"error": self.code(), "message": self.sentence()});
        let mut result = CallToolResult::error(vec![ContentBlock::text(body.to_string())]);
        result.structured_content = Some(body);
        result
    }
}

/// Resolves a private call's session (ADR-0098): `explicit` is what its
/// `_meta` named, `transport` the session it arrived on (if any), and
/// `live` says whether an id is a live session of this server. `Ok` means
/// the call acts as its transport session.
pub fn resolve(
    explicit: &Explicit,
    transport: Option<&str>,
    live: impl Fn(&str) -> bool,
) -> Result<(), Refusal> {
    match explicit {
        Explicit::NotAnId => Err(Refusal::InvalidSession),
        Explicit::Id(id) if !live(id) => Err(Refusal::InvalidSession),
        Explicit::Id(id) if transport != Some(id.as_str()) => Err(Refusal::SessionMismatch),
        Explicit::Id(_) => Ok(()),
        Explicit::Omitted => match transport {
            Some(t) if live(t) => Ok(()),
            _ => Err(Refusal::InvalidSession),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resolution_table() {
        let live = |id: &str| id == "A" || id == "B";
        let id = |s: &str| Explicit::Id(s.into());
        let cases = [
            (Explicit::Omitted, Some("A"), Ok(())),
            (Explicit::Omitted, None, Err(Refusal::InvalidSession)),
            (
                Explicit::Omitted,
                Some("gone"),
                Err(Refusal::InvalidSession),
            ),
            (id("A"), Some("A"), Ok(())),
            (id("B"), Some("A"), Err(Refusal::SessionMismatch)),
            (id("B"), None, Err(Refusal::SessionMismatch)),
            (id("random"), Some("A"), Err(Refusal::InvalidSession)),
            (id("random"), None, Err(Refusal::InvalidSession)),
            // Exact: no trimming, no case folding.
            (id(" A"), Some("A"), Err(Refusal::InvalidSession)),
            (id("a"), Some("A"), Err(Refusal::InvalidSession)),
            (Explicit::NotAnId, Some("A"), Err(Refusal::InvalidSession)),
        ];
        for (explicit, transport, expected) in cases {
            assert_eq!(
                resolve(&explicit, transport, live),
                expected,
                "{explicit:?} on {transport:?}"
            );
        }
    }

    #[test]
    fn explicit_reads_the_meta_key() {
        let meta = |v: Value| {
            let mut m = Map::new();
            m.insert(SESSION_META.into(), v);
            m
        };
        assert_eq!(explicit(&Map::new()), Explicit::Omitted);
        assert_eq!(explicit(&meta(Value::Null)), Explicit::Omitted);
        assert_eq!(explicit(&meta(json!(""))), Explicit::Omitted);
        assert_eq!(explicit(&meta(json!("s-1"))), Explicit::Id("s-1".into()));
        assert_eq!(explicit(&meta(json!(7))), Explicit::NotAnId);
        assert_eq!(SESSION_META, "turnstile/session");
    }

    #[test]
    fn a_refusal_is_the_code_and_a_fixed_sentence() {
        for r in [Refusal::InvalidSession, Refusal::SessionMismatch] {
            let out = r.result();
            assert_eq!(out.is_error, Some(true));
            let body = out.structured_content.clone().unwrap_or_default();
            assert_eq!(body["error"], json!(r.code()));
            let keys: Vec<&String> = body
                .as_object()
                .map(|o| o.keys().collect())
                .unwrap_or_default();
            assert_eq!(keys, ["error", "message"]);
            assert!(!r.sentence().contains("://"));
        }
    }
}
