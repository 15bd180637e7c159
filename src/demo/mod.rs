//! Embedded demo MCP tool server (streamable HTTP on loopback).
//!
//! Serves a deterministic synthetic construction-site photo archive
//! ([`data`]) through four tools ([`tools`]):
//!
//! * `search_photos` — keyword search (a stand-in for semantic search) with
//!   accounting in `_meta`: `returned`, `total` (filters only, or at most
//!   [`EXACT_TOTAL_MAX`](tools::EXACT_TOTAL_MAX) hits) or `total_lower_bound`,
//!   `has_more`, `next_cursor`.
//! * `query_data` — a natural-language question translated into SQL
//!   ([`query`]) and run, the way the upstream data tool does: every listing
//!   gets `LIMIT` [`INJECTED_ROW_LIMIT`], so "list all panoramas" of tower-a
//!   (7,961) reports `total: 3000` and ends with `has_more: false` — confidently
//!   wrong, for the client to detect; single-value aggregates are exempt and
//!   exact. Its cursor carries the question, and every page re-runs it.
//! * `get_photo`, `list_projects`.
//!
//! Both list tools can be made to misbehave like real adapters do with
//! [`Fault`]s (an in-band 502, an auth failure as `{}`, a rejected cursor, a
//! drifting cursor).
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use turnstile::demo::{DemoOptions, DemoServer};
//! let server = DemoServer::start("127.0.0.1:0".parse()?, DemoOptions::default()).await?;
//! println!("MCP endpoint: {}", server.url);
//! server.shutdown().await;
//! # Ok(()) }
//! ```

pub mod data;
pub mod query;
pub mod server;
pub mod tools;

pub use data::dataset;
pub use query::INJECTED_ROW_LIMIT;
pub use server::DemoServer;
pub use tools::{DemoOptions, Fault};

/// The result contracts of the demo's tools, as a `turnstile serve` config
/// would declare them: both list tools are counted and cited; the judge may
/// clear a result by the prefix each tool's program prints; `query_data`
/// listings may be stitched across cursor pages.
pub fn contracts() -> crate::judge::Contracts {
    use crate::judge::Contract;
    let mut c = crate::judge::Contracts::default();
    c.insert(
        "search_photos",
        Contract {
            fixed_prefixes: vec!["## Image #".into()],
            stitch: false,
        },
    );
    c.insert(
        "query_data",
        Contract {
            fixed_prefixes: vec!["Showing ".into()],
            stitch: true,
        },
    );
    c
}
