//! A tool's result as turnstile reads it, whatever form the server sent.
//!
//! **Architecture invariant:** this crate depends on no other crate of the
//! workspace. The judge reads tool results through it and never through
//! the MCP client (`turnstile::mcp`), which re-exports it for everything
//! else; the compiler, not an import scan, holds that.
//!
//! * [`ToolOutput`] — **the one normalisation seam**: every tool result,
//!   whatever its shape, is flattened into blocks + structured content +
//!   `_meta` here before anything judges it. See [`normalize`].
//! * [`pyliteral`] — results printed as a Python literal (`{'a': 1}`) read
//!   as the JSON they stand for.
//! * [`url`] — the one scanner for URLs in text, and the two ways a URL is
//!   shown: `scheme://host[:port]/path` in logs and errors, `[link]` to a
//!   model.
//! * [`ToolTrust`], [`Hints`] — what a tool declares about itself, and
//!   whether its server is trusted to say it.

pub mod normalize;
pub mod pyliteral;
mod trust;
pub mod url;

pub use normalize::{Block, JsonMap, ShapeSummary, ToolOutput};
pub use trust::{Hints, ToolTrust};
