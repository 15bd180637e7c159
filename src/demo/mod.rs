//! Embedded demo MCP tool server (streamable HTTP on loopback).
//!
//! Serves a deterministic synthetic construction-site photo archive
//! ([`data`]) through three tools ([`tools`]): `search_photos`, `get_photo`,
//! `list_projects`. `search_photos` reports its accounting (`returned`,
//! `total` or `total_lower_bound`, `has_more`, `next_cursor`) in `_meta`, and
//! can be made to misbehave like real adapters do with [`Fault`]s.
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
pub mod server;
pub mod tools;

pub use data::dataset;
pub use server::DemoServer;
pub use tools::{DemoOptions, Fault};
