//! Deterministic judgement: everything the user is told about counts,
//! absence and failure is decided here, from structured fields, before the
//! model speaks. The model never grades a number itself.
//!
//! **Architecture invariant:** nothing in this module reads model output.

pub mod accounting;
pub mod anchors;
pub mod grade;

pub use accounting::Accounting;
pub use anchors::Anchor;
pub use grade::{grade, Count, CountGrade};
