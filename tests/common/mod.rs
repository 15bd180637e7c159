//! Shared test helpers.
#![allow(dead_code)]

/// insta settings that keep every snapshot under the top-level `snapshots/`.
pub fn snapshot_settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots"));
    s.set_prepend_module_to_snapshot(true);
    s
}

pub mod fake_openai;
pub mod server;
