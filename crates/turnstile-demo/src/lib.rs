//! Embedded demo MCP tool server (streamable HTTP on loopback).
//!
//! Serves a deterministic synthetic construction-site photo archive
//! ([`data`]) through six tools, and a seat-reservation desk ([`actions`])
//! through four more ([`tools`]):
//!
//! * `search_photos` — keyword search (a stand-in for semantic search) with
//!   accounting in `_meta`: `returned`, `total` (filters only, or at most
//!   [`EXACT_TOTAL_MAX`](tools::EXACT_TOTAL_MAX) hits) or `total_lower_bound`,
//!   `has_more`, `next_cursor`.
//! * `query_data` — a natural-language question translated into SQL
//!   ([`query`]) and run, the way the upstream data tool does: every listing
//!   gets `LIMIT` [`INJECTED_ROW_LIMIT`], so "list all panoramas" of tower-a
//!   (7,961) reports `total: 3000` and ends with `has_more: false` — confidently
//!   wrong, for the client to detect; single-value aggregates are exempt and
//!   exact. Its cursor carries the question, and every page re-runs it.
//! * `get_panorama` — one panorama in full detail (by label, e.g.
//!   `PANO-003-0611`, or id), so a model can search and then open a hit: one
//!   record as structured content, no accounting; an unknown id is a tool
//!   error.
//! * `archive_query` — the same questions asked of a legacy archive that
//!   answers Python-literal rows with no accounting.
//! * `get_photo`, `list_projects`.
//! * `prepare_seat_reservation(seat, time)` — a PENDING action that expires
//!   after 10 minutes: `{"status": "OK", "actionId": N, "seat", "time"}`,
//!   ids from 1. An
//!   unknown seat (not "1" to "40") or a time not `HH:MM` prepares nothing
//!   and answers the no-op sentinel `{"status": "NO_SUCH_SEAT" | "BAD_TIME",
//!   "actionId": 0}`.
//! * `confirm_action(actionId, idempotencyKey?)` — PENDING → ACCEPTED
//!   (`{"status": "ACCEPTED", "actionId": N}`), then a worker carries it out
//!   after [`DemoOptions::action_worker_delay`]: COMPLETED, or FAILED with
//!   reason "seat taken" when an action accepted earlier holds the seat and
//!   time. A retry with the first confirm's key answers the same; anything
//!   else not PENDING is a tool error.
//! * `cancel_action(actionId)` — PENDING → CANCELLED (again: the same
//!   answer); a confirmed action is a tool error.
//! * `get_action(actionId)` — `{"actionId", "status", "seat", "time",
//!   "reason"?}`; a PENDING action past its expiry reads EXPIRED.
//!
//! Every confirm and cancel is counted per action id
//! ([`DemoServer::action_counts`]).
//!
//! Two more tools, `export_all_lms_materials` (a preview) and
//! `confirm_lms_material_export` (its confirm, answering a capability URL),
//! are the lecture-file export ([`exports`]).
//!
//! **Asking the user (input requests as durable interrupts).** Two tools
//! ask the user something before they act ([`asks`]), on both revisions:
//! on 2026-07-28 the first call answers `InputRequiredResult` (one input
//! request under [`CONTACT_KEY`] or [`PORTAL_KEY`], an opaque
//! `requestState` `rs-<uuid>` kept server-side) and the retry with
//! `inputResponses` + `requestState` is answered once (a replay is
//! `REPLAYED`, an unknown state `UNKNOWN_REQUEST_STATE`); on 2025-11-25 the
//! tool sends `elicitation/create` on the session. A client without the
//! elicitation capability (the mode asked for) gets `NO_ELICITATION`.
//!
//! * `notify_site_contact(issue_id)` — a form: `name`, `email`, `role`
//!   (site manager, safety officer, foreman), `urgent`. Accepted:
//!   `{"status": "NOTIFIED", "issue_id", "contact": {"name", "email",
//!   "role", "urgent"}}` and one [`Notification`] recorded
//!   ([`DemoServer::notifications`]); declined: `{"status":
//!   "NOT_NOTIFIED", "reason": "declined", "issue_id"}`; cancelled:
//!   `{"status": "CANCELLED", "issue_id"}`.
//! * `open_permit_portal(permit)` — a URL,
//!   `http://<this server>/permits/<permit>?ticket=<random>`, whose page
//!   counts its visits ([`DemoServer::permit_visits`]). Accepted is
//!   consent, not a signature: `{"status": "CONSENTED", "permit", "note"}`;
//!   else `{"status": "NOT_OPENED" | "CANCELLED", "permit"}`.
//!
//! Their faults: `input-huge-state` (a `requestState` over 1 MiB) and
//! `input-asks-secret` (the form also asks for a password).
//!
//! **Identity (issue 20).** The same listener serves a bearer verifier
//! ([`auth`]): `GET /api/auth/me` with `Authorization: Bearer <token>`
//! answers 200 `{"subject": "user-ana", "tiers": ["basic"]}` for a valid
//! token and 401 `{"error": "invalid_token"}` for anything else (no header,
//! another scheme, an unknown or expired token). Two demo users, ana
//! (`user-ana`, tiers `["basic"]`) and bo (`user-bo`, `["pro"]`), get random
//! tokens each start ([`DemoServer::demo_users`]), and ana has an expired
//! one ([`DemoServer::expired_token`]); the URL is
//! [`DemoServer::verifier_url`]. Its fault switch [`VerifierFault`] (`Slow`,
//! `ServerError` → 500, `Malformed` → 200 with the wrong shape) is set at
//! start ([`DemoOptions::verifier_fault`]) or at run time
//! ([`DemoServer::set_verifier_fault`]); requests are counted
//! ([`DemoServer::verifier_requests`]). Tokens and subjects are never
//! logged.
//!
//! **Licence tiers.** A tool may declare the tier a caller needs in its
//! `tools/list` entry: `_meta: {"turnstile/licence_tier": "pro"}`
//! ([`LICENCE_TIER_META`]; tiers [`TIERS`], lowest first: free, basic, pro,
//! enterprise). `archive_query` declares `pro`, `get_panorama` `basic`; the
//! rest declare none. Every `tools/call` that reaches the server is counted
//! by tool name before anything else ([`DemoServer::tool_calls`]), so a test
//! can prove a blocked call never arrived.
//!
//! **Exact sessions (seed 002's ADR-0098).** The private tools
//! ([`PRIVATE_TOOLS`]: the four reservation tools and the two export tools)
//! resolve their session exactly ([`sessions`]): a non-empty
//! `_meta["turnstile/session"]` ([`SESSION_META`]) must be a live MCP
//! session of this server (else `INVALID_SESSION`, never a fallback) and
//! the one the call arrived on (else `SESSION_MISMATCH`); only an omitted
//! id takes the transport session. A refusal is `isError: true` with
//! `{"error": CODE, "message": SENTENCE}` — no session id, no URL — and the
//! tool does not run. Actions and exports belong to the session's
//! [`Owner`]: the demo user whose bearer token came with its `initialize`
//! (an invalid one fails the handshake), else one shared anonymous owner;
//! another owner sees them as unknown ids, and the same user's next session
//! sees them still.
//!
//! Both list tools can be made to misbehave like real adapters do with
//! [`Fault`]s (an in-band 502, an auth failure as `{}`, a rejected cursor, a
//! drifting cursor); the first two also hit `get_panorama`. No fault touches
//! the reservation tools; the asking tools have two of their own.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use turnstile_demo::{DemoOptions, DemoServer};
//! let server = DemoServer::start("127.0.0.1:0".parse()?, DemoOptions::default()).await?;
//! println!("MCP endpoint: {}", server.url);
//! server.shutdown().await;
//! # Ok(()) }
//! ```

pub mod actions;
pub mod asks;
pub mod auth;
pub mod data;
pub mod exports;
pub mod host;
pub mod lying;
pub mod query;
pub mod reports;
pub mod scripted;
pub mod server;
pub mod sessions;
pub mod slow;
pub mod tools;

pub use actions::{ActionCounts, ActionStatus, ActionStore, ActionView};
pub use asks::{Notification, CONTACT_KEY, PORTAL_KEY};
pub use auth::{DemoUser, Owner, VerifierFault, LICENCE_TIER_META, TIERS};
pub use data::dataset;
pub use query::INJECTED_ROW_LIMIT;
pub use scripted::Scripted;
pub use server::DemoServer;
pub use sessions::{INVALID_SESSION, PRIVATE_TOOLS, SESSION_META, SESSION_MISMATCH};
pub use tools::{DemoOptions, Fault};

/// The result contracts of the demo's tools, as a `turnstile serve` config
/// would declare them: both list tools are counted and cited; the judge may
/// clear a result by the prefix each tool's program prints; `query_data`
/// listings may be stitched across cursor pages. `get_panorama` has a
/// contract too, so a relayed upstream failure is judged an in-band failure;
/// its real answers are one record (see the comment at its entry).
pub fn contracts() -> turnstile::judge::Contracts {
    use turnstile::judge::Contract;
    let mut c = turnstile::judge::Contracts::default();
    // A cited panorama is a place in the host's viewer (issue 38 §3).
    let panorama_link = || turnstile::judge::contracts::Shape {
        deep_link: Some(turnstile::judge::deep_link::DeepLinkMap {
            facility: Some("site".into()),
            project: Some("project".into()),
            surface: Some("floor".into()),
            panorama: Some("id".into()),
            axes: Some("grid".into()),
            camera: Some("camera".into()),
        }),
        ..Default::default()
    };
    c.insert(
        "search_photos",
        Contract {
            fixed_prefixes: vec!["## Image #".into()],
            stitch: false,
            shape: panorama_link(),
            ..Contract::default()
        },
    );
    c.insert(
        "query_data",
        Contract {
            fixed_prefixes: vec!["Showing ".into()],
            stitch: true,
            ..Contract::default()
        },
    );
    // A detail result is ONE record: `structuredContent` is the panorama
    // object itself (no `items`, no `rows`/`columns`, no accounting `_meta`).
    // So the judge reads it as an answer (`in_band::judge` → `Answer`, by
    // the structured-content mark), not a listing (`result::items` → `None`),
    // not a single-value aggregate (`result::aggregate` → `None`), no count
    // (`accounting::read` → `None`, so no grade beyond `UNKNOWN`) and never
    // "none" (`read_result_emptiness` → `Unknown`); `result::record` returns
    // it. No fixed prefix: its text block is the record's JSON, and a prefix
    // like `{"id"` would be weak evidence — the structured content is the
    // mark. Nothing to stitch: there is no cursor.
    // The legacy archive answers like the reference SQLite server: Python-
    // literal rows in text, never any accounting. Its answers are shown as
    // the server's word (SHOWN, never EXACT, never "none"); a body that does
    // not parse is its failure.
    c.insert(
        "archive_query",
        Contract {
            accounting: turnstile::judge::contracts::AccountingMode::Absent,
            ..Contract::default()
        },
    );
    c.insert(
        "get_panorama",
        Contract {
            fixed_prefixes: vec![],
            stitch: false,
            shape: panorama_link(),
            ..Contract::default()
        },
    );
    // The tools that ask the user answer, like `get_panorama`, with ONE
    // record in structured content (`{"status", …}`): what was done is
    // that record's to say, never a count or "none".
    // So does the long `compile_site_report` (a task): one report record.
    for (tool, id_field) in [
        ("notify_site_contact", "issue_id"),
        ("open_permit_portal", "permit"),
        ("compile_site_report", "project"),
    ] {
        let shape = turnstile::judge::contracts::Shape {
            id_field: Some(id_field.into()),
            ..Default::default()
        };
        c.insert(
            tool,
            Contract {
                shape,
                ..Contract::default()
            },
        );
    }
    c
}

/// The demo tools' roles in the approval protocol (tables/approval.ron),
/// as `turnstile serve` would declare them in its config:
/// `prepare_seat_reservation` prepares an action named by `actionId`,
/// `confirm_action` confirms it (never from a model's plan),
/// `cancel_action` cancels it, `get_action` says how it ended.
///
/// `confirm_lms_material_export` has no approval role: it is the confirm
/// of a terminal flow ([`terminals`], `tables/export.ron`).
pub fn roles() -> turnstile::judge::approval::Roles {
    use turnstile::judge::approval::{Prepare, Roles};
    let mut r = Roles::default();
    r.prepare(
        "prepare_seat_reservation",
        Prepare {
            action_id: "actionId".into(),
            confirm: "confirm_action".into(),
            cancel: "cancel_action".into(),
            status: Some("get_action".into()),
        },
    );
    r
}

/// The demo's approval-card wording, as `turnstile serve` would declare it
/// in its config (`tools.prepare_seat_reservation.summary`, `summary_ko`):
/// the card asks "Reserve seat 12 at 15:00?", in the user's terms, and the
/// tool names go to its detail line.
pub fn cards() -> turnstile::judge::card::Cards {
    use turnstile::judge::card::{Cards, Template, Wording};
    let mut c = Cards::default();
    // Both templates are constants checked by this crate's tests: a typo
    // leaves the card at the default wording, never without one.
    if let (Ok(en), Ok(ko)) = (
        Template::parse("Reserve seat {seat} at {time}?"),
        Template::parse("{seat}번 좌석을 {time}에 예약할까요?"),
    ) {
        c.insert("prepare_seat_reservation", Wording { en, ko: Some(ko) });
    }
    c
}

/// What the demo's assistant is for, as `turnstile serve` would say it in
/// `[model] instructions`: a construction site's assistant, with the
/// errands the demo's other tools run. Code's fixed rules follow it.
pub const INSTRUCTIONS: &str = "You are the assistant of a construction-site team. \
You find the site's photos (panoramas of project tower-a, floors B1 to 12) and their annotations \
(safety, quality and progress issues), open one in full, count them, and help with the team's errands: \
reserving a reading-room seat, exporting lecture files, notifying a site contact, opening the permit \
portal and compiling site reports.";

/// [`INSTRUCTIONS`] as the agent holds them.
pub fn instructions() -> turnstile::llm::prompt::Instructions {
    turnstile::llm::prompt::Instructions::new(INSTRUCTIONS)
}

/// The demo's terminal flow, as `turnstile serve` would declare it in its
/// config: `confirm_lms_material_export` confirms what
/// `export_all_lms_materials` previewed, and its `downloadUrl` is a
/// capability of the demo tool server's origin (`mcp_url`'s) at
/// `/api/lms/exports/{jobId}/download?token=…`.
pub fn terminals(mcp_url: &str) -> turnstile::judge::capability::Terminals {
    use turnstile::judge::capability::{CapabilityRule, TerminalFlow, Terminals};
    let mut t = Terminals::default();
    // `http://127.0.0.1:41234/mcp` → `http://127.0.0.1:41234`; the rule
    // parses it as an origin and refuses anything else.
    let after = mcp_url.find("://").map_or(0, |i| i + 3);
    let end = mcp_url[after..]
        .find('/')
        .map_or(mcp_url.len(), |i| after + i);
    let origin = &mcp_url[..end];
    if let Ok(rule) = CapabilityRule::new(origin, "/api/lms/exports/{jobId}/download", "token") {
        t.insert(
            "confirm_lms_material_export",
            TerminalFlow {
                preview: "export_all_lms_materials".into(),
                rule,
                label: "Download lecture files".into(),
                label_ko: Some("강의 파일 받기".into()),
            },
        );
    }
    t
}
