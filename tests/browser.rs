//! The chat page in headless Chromium against the real server: the honest
//! count on the card, narrowing to a complete card, no frame violation, a
//! reload that renders the stored thread. Driven by tests/browser/e2e.mjs.
//!
//! Needs `chromium` and `node` (20+). Without them the test prints a notice
//! and passes, unless TURNSTILE_REQUIRE_BROWSER=1 (CI sets it).

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::server::{databases, TestServer};

fn have(cmd: &str) -> bool {
    std::process::Command::new(cmd)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[tokio::test]
async fn the_chat_page_in_chromium() {
    let chromium = std::env::var("TURNSTILE_CHROMIUM").unwrap_or_else(|_| "chromium".into());
    if !have(&chromium) || !have("node") {
        if std::env::var("TURNSTILE_REQUIRE_BROWSER").as_deref() == Ok("1") {
            panic!("chromium and node are required (TURNSTILE_REQUIRE_BROWSER=1)");
        }
        eprintln!("skipping the browser test: chromium or node is not installed");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&databases(&tmp)[0], vec![]).await;
    let shot = tmp.path().join("page.png");
    let run = tokio::process::Command::new("node")
        .args([
            "--experimental-websocket",
            "tests/browser/e2e.mjs",
            &format!("{}/", s.base),
        ])
        .arg(&shot)
        .env("TURNSTILE_CHROMIUM", &chromium)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(90), run)
        .await
        .expect("the browser check finishes")
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "browser check failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(shot.exists(), "the screenshot was taken");
    s.pass();
}
