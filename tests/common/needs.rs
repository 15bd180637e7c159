//! What a test needs from outside this repository, and what happens when it
//! is not there (ADR 0015).
//!
//! A test that needs an outside piece (PostgreSQL; the npm/PyPI MCP servers
//! and the Python venvs; the MCP conformance suite; Chromium and node) is
//! `#[ignore = "needs …: <how to get it>"]`: a plain `cargo test` lists it as
//! `ignored, needs …` and counts it in its summary. Run with
//! `cargo test -- --include-ignored` (after `scripts/test-deps` and with
//! `TURNSTILE_TEST_DATABASE_URL` set), it runs; then the helpers here return
//! what it needs, or panic naming what is missing and how to install it. A
//! missing piece is never a pass.
//!

use std::path::{Path, PathBuf};
use std::process::Stdio;

/// The variable that names the PostgreSQL test database.
pub const PG_ENV: &str = "TURNSTILE_TEST_DATABASE_URL";
/// The URL to set it to on a machine with a local PostgreSQL (trust auth,
/// database `test`), as `scripts/test-deps` prints it.
pub const PG_EXAMPLE: &str = "postgres://postgres@127.0.0.1:5432/test";
/// How to install the npm/PyPI servers, the venvs, the conformance suite and
/// Chromium.
pub const INSTALL: &str = "run scripts/test-deps";

/// Fails the current test: `what` is missing; `how` gets it.
pub fn missing(what: &str, how: &str) -> ! {
    panic!("needs {what}, which is missing: {how}")
}

/// The PostgreSQL URL, if one is configured (no failure).
pub fn postgres_url() -> Option<String> {
    std::env::var(PG_ENV).ok().filter(|u| !u.trim().is_empty())
}

/// The PostgreSQL test database's URL; fails the test without one.
pub fn postgres() -> String {
    postgres_url().unwrap_or_else(|| no_postgres())
}

/// Fails the test for want of PostgreSQL.
pub fn no_postgres() -> ! {
    missing(
        "PostgreSQL",
        &format!(
            "{PG_ENV} is not set (export {PG_ENV}={PG_EXAMPLE}; scripts/test-deps checks the server)"
        ),
    )
}

/// The name the test harness gives the test `name` of the module
/// `module_path` (`module_path!()` there): its path inside the test binary,
/// which drops the crate's own name (`all::store` → `store::…`).
pub fn test_name(module_path: &str, name: &str) -> String {
    match module_path.split_once("::") {
        Some((_, module)) => format!("{module}::{name}"),
        None => name.to_string(),
    }
}

pub fn repo_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn interop_dir() -> PathBuf {
    repo_dir().join("tests/interop")
}

/// Whether `cmd args…` runs and exits 0 (output discarded).
pub fn runs(cmd: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> bool {
    std::process::Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The Python interpreter the tests run: `TURNSTILE_PYTHON`, else the venv
/// `scripts/test-deps` makes (`tests/interop/.venv/bin/python`), else
/// `python3`. Not checked.
pub fn python_path() -> String {
    if let Ok(py) = std::env::var("TURNSTILE_PYTHON") {
        return py;
    }
    let venv = interop_dir().join(".venv/bin/python");
    if venv.exists() {
        return venv.display().to_string();
    }
    "python3".to_string()
}

/// A runnable Python interpreter ([`python_path`]); fails the test without
/// one. The standard library is all it promises.
pub fn python() -> String {
    let py = python_path();
    if !runs(&py, &["--version"]) {
        missing(
            "a Python interpreter",
            &format!("`{py}` is not runnable (install python3, or set TURNSTILE_PYTHON)"),
        );
    }
    py
}

/// A Python interpreter with the official MCP Python SDK 2.x
/// (`tests/interop/requirements.txt`); fails the test without one.
pub fn python_sdk() -> String {
    let py = python();
    if !runs(&py, &["-c", "import mcp.server.mcpserver"]) {
        missing(
            "the MCP Python SDK 2.x",
            &format!("`{py}` cannot import `mcp.server.mcpserver` ({INSTALL}: it makes the venv tests/interop/.venv)"),
        );
    }
    py
}

/// The node binary: `NODE` (default `node`), runnable; fails the test
/// without one.
pub fn node() -> String {
    let node = std::env::var("NODE").unwrap_or_else(|_| "node".to_string());
    if !runs(&node, &["--version"]) {
        missing(
            "node",
            &format!("`{node}` is not runnable (install Node.js 20+, or set NODE)"),
        );
    }
    node
}

/// A file `npm ci` installs under `dir`'s `node_modules` (`rel` is relative
/// to it); fails the test without it.
pub fn npm_file(dir: &Path, rel: &str) -> PathBuf {
    let file = dir.join("node_modules").join(rel);
    if !file.exists() {
        missing(
            &format!("the npm packages of {}", dir.display()),
            &format!(
                "{} not found ({INSTALL}: it runs `npm ci` there)",
                file.display()
            ),
        );
    }
    file
}

/// A file of `tests/interop/node_modules`; fails the test without it.
pub fn interop_npm(rel: &str) -> PathBuf {
    npm_file(&interop_dir(), rel)
}

/// The reference SQLite MCP server (PyPI `mcp-server-sqlite`, in its own
/// venv `tests/interop/.venv-sqlite`; `TURNSTILE_SQLITE_SERVER` overrides);
/// fails the test without it.
pub fn sqlite_server() -> PathBuf {
    let bin = std::env::var("TURNSTILE_SQLITE_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|_| interop_dir().join(".venv-sqlite/bin/mcp-server-sqlite"));
    if !bin.exists() {
        missing(
            "the reference SQLite MCP server",
            &format!(
                "{} not found ({INSTALL}: it makes the venv tests/interop/.venv-sqlite)",
                bin.display()
            ),
        );
    }
    bin
}

/// The Chromium to drive: `TURNSTILE_CHROMIUM` (default `chromium`),
/// runnable; fails the test without one.
pub fn chromium() -> String {
    let chromium = std::env::var("TURNSTILE_CHROMIUM").unwrap_or_else(|_| "chromium".into());
    if !runs(&chromium, &["--version"]) {
        missing(
            "Chromium",
            &format!("`{chromium}` is not runnable ({INSTALL}: as root it installs Debian's chromium; or set TURNSTILE_CHROMIUM)"),
        );
    }
    chromium
}
