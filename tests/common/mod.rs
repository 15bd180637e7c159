//! Shared test helpers.
#![allow(dead_code)]

/// insta settings that keep every snapshot under the top-level `snapshots/`.
pub fn snapshot_settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots"));
    s.set_prepend_module_to_snapshot(true);
    s
}

pub mod custom;
pub mod fake_openai;
pub mod frames;
pub mod logs;
pub mod needs;
pub mod server;

/// Test logs to the test writer, filtered by RUST_LOG (default warn).
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
}
