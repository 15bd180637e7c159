//! The narration guard: checks the model's sentences against the judge.

pub mod check;
pub mod claims;
pub mod safety;
pub mod split;
pub mod vocab;
pub mod warrant;
