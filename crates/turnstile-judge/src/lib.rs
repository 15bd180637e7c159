//! turnstile's judgement, as a crate of its own (issue 36 §5): what code
//! decides about a tool's answer and a model's sentence, with no I/O. It
//! takes values and tables and returns verdicts; it opens no socket, spawns
//! no task and touches no database, and the compiler holds that (none of
//! tokio, reqwest, sqlx, axum or rmcp is a dependency).
//!
//! - [`judge`]: accounting, count grades, anchors, the verdicts on a
//!   listing, a page and a planned call, the code's own sentences.
//! - [`guard`]: the narration guard — each sentence of a model's answer
//!   checked against what the judge warrants, through the `narration`
//!   table.
//! - [`protocols`]: one module per table, binding its names to Rust enums,
//!   and the built-in tables (a `--tables` directory is read here too: the
//!   one file read of this crate, at start-up).
//! - [`wire`]: the frames as they travel, and the one SSE parser.
//!
//! The server (`crates/turnstile`) re-exports the four modules, so
//! `turnstile::judge` names them wherever they are used.

pub mod guard;
pub mod judge;
pub mod protocols;
pub mod wire;

/// The generic engine, re-exported so `crate::fsm` names it here as in the
/// server.
pub use turnstile_fsm as fsm;
