//! turnstile — a chat-orchestration server for LLM agents in which every
//! protocol is an explicit finite-state machine loaded from a reviewed RON
//! transition table. The model writes sentences; code decides counts,
//! absence, failure, permission, approval and delivery.
//!
//! # Layout
//!
//! - [`fsm`]: the generic core — table schema, loader, validator, machine,
//!   renderer. Knows no protocol.
//! - [`protocols`]: one module per table, binding its states, events and
//!   effects to Rust enums by name.
//!
//! Imports point one way: `http → agent → {judge, mcp, llm, store} →
//! protocols → fsm`. See `docs/architecture.md` for the invariants.

pub mod cli;
pub mod demo;
pub mod fsm;
pub mod mcp;
pub mod protocols;
