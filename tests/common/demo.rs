//! A real `turnstile demo` process for the tests that need one: its host
//! pages, its signals, its restart on the same database.

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};

/// A real `turnstile demo` started in `dir` on a port of the OS's choosing
/// with `args`, and the lines it printed up to its `try:` line (the rest
/// is read and dropped, so it never blocks on a full pipe).
pub async fn spawn(dir: &std::path::Path, args: &[&str]) -> (tokio::process::Child, Vec<String>) {
    let mut demo = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnstile"))
        .args(["demo", "--addr", "127.0.0.1:0"])
        .args(args)
        .current_dir(dir)
        .env("RUST_LOG", "warn")
        .env_remove("TURNSTILE_TABLES")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("turnstile demo runs");
    let mut out = BufReader::new(demo.stdout.take().unwrap()).lines();
    let mut lines = Vec::new();
    let printed = tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(Some(line)) = out.next_line().await {
            let last = line.trim_start().starts_with("try:");
            lines.push(line);
            if last {
                return true;
            }
        }
        false
    })
    .await;
    assert!(
        matches!(printed, Ok(true)),
        "the demo printed its try: line: {lines:#?}"
    );
    tokio::spawn(async move { while let Ok(Some(_)) = out.next_line().await {} });
    (demo, lines)
}

/// The chat page's URL a demo printed.
pub fn url(lines: &[String]) -> String {
    lines
        .iter()
        .find_map(|l| l.strip_prefix("turnstile demo is running: open "))
        .unwrap_or_else(|| panic!("the demo prints its URL: {lines:#?}"))
        .trim()
        .to_string()
}
