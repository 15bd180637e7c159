//! What travels on the wire, typed once for every side: the server writes
//! these frames, `turnstile chat` and the tests read them, and [`sse`] is
//! the one Server-Sent Events parser (also used by the OpenAI adapter).
//!
//! A renamed field breaks the build of every reader; no reader looks a field
//! up by a string key.

pub mod frames;
pub mod sse;
pub mod time;

pub use frames::*;
