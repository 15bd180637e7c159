//! Shared test helpers.
#![allow(dead_code)]

/// One test per flow and per MCP revision: `mod sessions` (2025-11-25)
/// and `mod stateless` (2026-07-28), each calling `super::flow(revision)`,
/// so the same flow is seen side by side on both.
#[macro_export]
macro_rules! on_both_revisions {
    ($($flow:ident),* $(,)?) => {
        mod sessions {
            $(
                #[tokio::test]
                async fn $flow() {
                    super::$flow(turnstile::mcp::Revision::Sessions).await
                }
            )*
        }
        mod stateless {
            $(
                #[tokio::test]
                async fn $flow() {
                    super::$flow(turnstile::mcp::Revision::Stateless).await
                }
            )*
        }
    };
}

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

pub mod demo;
pub mod fake_openai;
pub mod frames;
pub mod harness;
pub mod harness_table;
pub mod logs;
pub mod needs;
pub mod remote;
pub mod server;
pub mod thread;

/// Test logs to the test writer, filtered by RUST_LOG (default warn); the
/// same subscriber captures them for the tests that read the log
/// ([`logs::capture`]).
pub fn init_tracing() {
    logs::capture();
}

/// A port nothing listens on now (the OS's pick; another process may take
/// it before the caller binds it: prefer port 0 and a printed address where
/// the process prints one).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// The smallest valid `turnstile serve` config: a database and a model.
/// Tests append the section they check and load it with
/// `Config::from_toml` (see [`config_with`]).
pub const BASE_TOML: &str = "database_url = \"sqlite://x.db\"\n\
    [model]\nbase_url = \"http://127.0.0.1:9/v1\"\nname = \"m\"\napi_key = \"k\"\n";

/// [`BASE_TOML`] with `section` appended, loaded with `env` as the
/// environment.
pub fn config_with(
    section: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<turnstile::config::Config, turnstile::config::ConfigError> {
    let src = format!("{BASE_TOML}{section}");
    turnstile::config::Config::from_toml(&src, std::path::Path::new("t.toml"), env)
}
