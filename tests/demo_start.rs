//! What `turnstile demo` says at start (issue 34, a newcomer's findings):
//! its database is a file per address unless `--db` is given, so two demos
//! in one folder do not share one; and it prints its tool server's URL as a
//! `turnstile mcp` line that works as printed, whatever port the tool
//! server took.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};

const BIN: &str = env!("CARGO_BIN_EXE_turnstile");

/// A demo started in `dir` on a port of the OS's choosing, and the lines
/// it printed up to its `try:` line.
async fn start(dir: &Path) -> (tokio::process::Child, Vec<String>) {
    let mut child = tokio::process::Command::new(BIN)
        .args(["demo", "--addr", "127.0.0.1:0"])
        .current_dir(dir)
        .env("RUST_LOG", "warn")
        .env_remove("TURNSTILE_TABLES")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("turnstile demo runs");
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let next = tokio::time::timeout(Duration::from_secs(60), out.next_line()).await;
        let Ok(Ok(Some(line))) = next else { break };
        let last = line.trim_start().starts_with("try:");
        lines.push(line);
        if last {
            return (child, lines);
        }
    }
    panic!("the demo did not print its try: line: {lines:#?}");
}

fn line<'a>(lines: &'a [String], prefix: &str) -> &'a str {
    lines
        .iter()
        .map(|l| l.trim_start())
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` line in {lines:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_demos_in_one_folder_get_a_database_each() {
    let dir = tempfile::tempdir().unwrap();
    let (_first, first) = start(dir.path()).await;
    let (_second, second) = start(dir.path()).await;
    for lines in [&first, &second] {
        // The port the demo bound, from the address it prints.
        let url = line(lines, "turnstile demo is running: open ");
        let port = url.trim_end_matches('/').rsplit(':').next().unwrap();
        let db = format!("turnstile-demo-{port}.db");
        assert_eq!(line(lines, "database: "), db, "{lines:#?}");
        assert!(dir.path().join(&db).is_file(), "{db} was created");
    }
    assert_ne!(
        line(&first, "database: "),
        line(&second, "database: "),
        "two demos, two files"
    );
    assert!(
        !dir.path().join("turnstile-demo.db").exists(),
        "no shared default file"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_printed_tools_line_works_as_printed() {
    let dir = tempfile::tempdir().unwrap();
    let (_demo, lines) = start(dir.path()).await;
    let command = line(&lines, "its tools: ");
    let url = command
        .split_whitespace()
        .last()
        .expect("a URL")
        .to_string();
    assert!(
        command.split_whitespace().nth(1) == Some("mcp") && url.starts_with("http://127.0.0.1:"),
        "{command}"
    );
    let out = tokio::task::spawn_blocking(move || {
        Command::new(BIN)
            .args(["mcp", &url])
            .stdin(Stdio::null())
            .output()
            .expect("turnstile mcp runs")
    })
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{command}: {text}");
    assert!(text.contains("search_photos"), "{text}");
}
