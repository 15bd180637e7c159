//! Shared test helpers.
#![allow(dead_code)]

/// insta settings that keep every snapshot under the top-level `snapshots/`,
/// named `all__<test file>__<name>.snap` (the module path in the `all`
/// binary).
pub fn snapshot_settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots"));
    s.set_prepend_module_to_snapshot(true);
    s
}

/// One browser for the tests: an HTTP client with the process's one
/// cookie jar. The session cookie the server issues with a new thread owns
/// it (tables/ownership.ron); cookies are kept per host, not per port, so
/// the same "browser" reaches its threads on a server restarted on another
/// port, as a user's browser would.
pub fn browser() -> reqwest::Client {
    static JAR: std::sync::LazyLock<std::sync::Arc<reqwest::cookie::Jar>> =
        std::sync::LazyLock::new(Default::default);
    reqwest::Client::builder()
        .cookie_provider(JAR.clone())
        .build()
        .expect("an HTTP client")
}

pub mod fake_openai;
pub mod frames;
pub mod harness;
pub mod harness_table;
pub mod logs;
pub mod needs;
pub mod server;
pub mod thread;

/// Test logs to the test writer, filtered by RUST_LOG (default warn); the
/// same subscriber captures them for the tests that read the log
/// ([`logs::capture`]).
pub fn init_tracing() {
    logs::capture();
}
