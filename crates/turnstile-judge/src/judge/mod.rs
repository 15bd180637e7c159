//! Deterministic judgement: everything the user is told about counts,
//! absence and failure is decided here, from structured fields, before the
//! model speaks. The model never grades a number itself.
//!
//! One file per judgement: [`accounting`] (reading `_meta`), [`grade`](mod@grade)
//! (count grades), [`emptiness`] (the right to say "none"), [`in_band`]
//! (failures disguised as 200), [`narrowing`] (the subset gate),
//! [`stitch`] (page stitching), [`anchors`] (what the narration may say),
//! [`contracts`] and [`result`] (what a tool's real answer looks like),
//! [`approval`] (tool roles, action ids), [`card`] (an approval card's
//! words in the user's terms), [`capability`] (whether a confirm's answer is
//! a capability URL code may deliver) and [`path`] (the dotted paths every
//! configured result field takes).
//!
//! **Architecture invariant:** nothing in this module reads model output.

pub mod accounting;
pub mod admission;
pub mod anchors;
pub mod approval;
pub mod capability;
pub mod card;
pub mod continuation;
pub mod contracts;
pub mod deep_link;
pub mod digest;
pub mod elicitation;
pub mod emptiness;
pub mod grade;
pub mod in_band;
pub mod lang;
pub mod listing;
pub mod narrowing;
pub mod page;
pub mod path;
pub mod refusal;
pub mod result;
pub mod sentences;
pub mod stitch;
pub mod tiers;

pub use accounting::Accounting;
pub use anchors::Anchor;
pub use contracts::{Contract, Contracts};
pub use grade::{grade, Count, CountGrade};
