//! turnstile — a chat-orchestration server for LLM agents in which every
//! protocol is an explicit finite-state machine loaded from a reviewed RON
//! transition table. The model writes sentences; code decides counts,
//! absence, failure, permission, approval and delivery.
//!
//! # Layout
//!
//! - [`http`]: axum routes; turns requests into turns and frames into SSE.
//!   Makes no protocol decision.
//! - [`agent`]: the turn loop (planner → tools → responder), the frame
//!   writer that fires every frame through the `frame` table, host context.
//! - [`judge`]: deterministic judgement — accounting, count grades, anchors.
//! - [`mcp`]: MCP client (rmcp) and the one tool-result normalisation seam.
//! - [`llm`]: model adapters (the scripted embedded default).
//! - [`store`]: sqlx persistence, SQLite or PostgreSQL.
//! - [`protocols`]: one module per table, binding names to Rust enums.
//! - [`fsm`]: the generic core — table schema, loader, validator, machine,
//!   renderer. Knows no protocol.
//! - [`demo`]: the embedded demo MCP tool server with fault switches.
//! - [`app`], [`cli`]: assembly and command-line front ends.
//! - [`config`]: the `turnstile serve` config file and its environment
//!   overrides, validated with located messages.
//!
//! Imports point one way: `http → agent → {judge, mcp, llm, store} →
//! protocols → fsm`. See `docs/architecture.md` for the invariants.

pub mod agent;
pub mod app;
pub mod cli;
pub mod config;
pub mod demo;
pub mod fsm;
pub mod guard;
pub mod http;
pub mod judge;
pub mod llm;
pub mod mcp;
pub mod protocols;
pub mod store;
pub mod wire;
