//! The generic finite-state-machine core.
//!
//! **Architecture invariant:** this crate knows no protocol and depends on
//! no other crate of the workspace. It loads total transition tables from RON,
//! validates them with located findings, runs machines, records traces and
//! renders tables for reviewers.
//!
//! The pipeline is parse → validate → index, as in ripgrep's low/high args:
//! [`schema`] is what a reviewer writes, [`Table`] is what code runs.

// The README's example is a doctest: it cannot rot.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

pub mod diff;
pub mod finding;
pub mod group;
pub mod machine;
pub mod render;
pub mod schema;
pub mod spans;
pub mod table;
pub mod validate;

pub use finding::{Code, Finding, Findings};
pub use machine::{Checkpoint, Machine, RestoreError, Snapshot, Step, Violation};
pub use table::{Row, RowKind, Table};
pub use validate::{load, load_with, BindingNames, Expect, Invariant};
