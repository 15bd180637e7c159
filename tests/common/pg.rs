//! PostgreSQL for tests: the database named by `TURNSTILE_TEST_DATABASE_URL`,
//! or a reported skip.
//!
//! A test that cannot reach PostgreSQL has not passed: it says so on the
//! terminal (past the test harness's capture) as
//! `skipped: <test>: TURNSTILE_TEST_DATABASE_URL is not set`, one line per
//! test, so that `grep -c '^skipped:'` counts them. With
//! `TURNSTILE_REQUIRE_POSTGRES=1` (`.ci/run` sets it) a skip is a failure.
//!
//! The tests that need PostgreSQL: `store::postgres::*` (every store check),
//! `lease::a_thread_runs_one_turn_across_two_processes_and_a_dead_holder_expires`,
//! and the PostgreSQL half of every test that loops over
//! `server::databases()` (`http_turns`, `honesty`).
#![allow(dead_code)]

use std::io::Write;

pub const PG_ENV: &str = "TURNSTILE_TEST_DATABASE_URL";
pub const REQUIRE_ENV: &str = "TURNSTILE_REQUIRE_POSTGRES";

/// The PostgreSQL URL, if one is configured.
pub fn url() -> Option<String> {
    std::env::var(PG_ENV).ok().filter(|u| !u.trim().is_empty())
}

/// Whether PostgreSQL tests must run (CI).
pub fn required() -> bool {
    std::env::var(REQUIRE_ENV).is_ok_and(|v| v == "1")
}

/// The PostgreSQL URL; without one, the current test is reported as
/// skipped ([`skip`]) and `None` returned.
pub fn url_or_skip() -> Option<String> {
    let url = url();
    if url.is_none() {
        skip("");
    }
    url
}

/// Reports the current test (`part` of it, if not empty) as skipped for want
/// of PostgreSQL; panics instead when PostgreSQL is required.
pub fn skip(part: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("<unnamed test>")
        .to_string();
    let test = if part.is_empty() {
        test
    } else {
        format!("{test} ({part})")
    };
    assert!(
        !required(),
        "{REQUIRE_ENV}=1 but {PG_ENV} is not set: {test} cannot run"
    );
    // Straight to the process's stderr: `eprintln!` would be captured, and
    // shown only for a failing test.
    let _ = writeln!(
        std::io::stderr().lock(),
        "skipped: {test}: {PG_ENV} is not set"
    );
}
