//! turnstile — a chat-orchestration server for LLM agents in which every
//! protocol is an explicit finite-state machine loaded from a reviewed RON
//! transition table. The model writes sentences; code decides counts,
//! absence, failure, permission, approval and delivery.
//!
//! # Layout
//!
//! - [`http`]: axum routes; turns requests into turns and frames into SSE.
//!   Makes no protocol decision.
//! - [`agent`]: the turn loop (planner → tools → responder) run by the `turn`
//!   table, the frame writer that fires every frame through the `frame`
//!   table, host context, start-up recovery.
//! - [`guard`]: the narration guard — each sentence of the model's answer
//!   checked against what the judge warrants, through the `narration` table.
//! - [`judge`]: deterministic judgement — accounting, count grades, anchors,
//!   the verdicts on a listing, a page and a planned call, the code's own
//!   sentences.
//! - [`mcp`]: MCP client (rmcp), the one tool-result normalisation seam and
//!   the one URL scanner.
//! - [`llm`]: model adapters (the scripted embedded default, an
//!   OpenAI-compatible one).
//! - [`store`]: sqlx persistence, SQLite or PostgreSQL.
//! - [`protocols`]: one module per table, binding names to Rust enums.
//! - [`fsm`]: the generic core — table schema, loader, validator, machine,
//!   renderer. Knows no protocol.
//! - [`wire`]: the frames as they travel, and the one SSE parser.
//! - [`app`]: assembly of a server from its parts.
//! - [`config`]: the `turnstile serve` config file and its environment
//!   overrides, validated with located messages.
//!
//! Not in this crate: the command-line front ends (`src/`, the binary's
//! crate) and the demo tool server and models (`crates/turnstile-demo`),
//! which depend on this library like any tool server would.
//!
//! Imports point one way: `cli → {app, config} → http → agent → {guard,
//! llm} → judge → mcp → protocols → fsm`, with `store` below the agent,
//! `wire` a leaf, and `demo` imported only by the front ends.
//! `tests/architecture.rs` checks the edges and that no module's files
//! import each other in a circle; see `docs/architecture.md` for the
//! invariants.

pub mod agent;
pub mod app;
pub mod config;
pub mod http;
pub mod llm;
pub mod mcp;
pub mod store;

/// The pure layer, its own crate (`crates/turnstile-judge`, issue 36 §5):
/// re-exported so that `turnstile::judge` (and `crate::judge` here) name it.
pub use turnstile_judge::{guard, judge, names, protocols, wire};

/// The generic engine, its own crate (`crates/turnstile-fsm`): re-exported so
/// that `turnstile::fsm` names it wherever the server's tables are used.
pub use turnstile_fsm as fsm;
