//! The command line's output (issue 11, finding 9): a closed stdout
//! (`turnstile chat URL "…" | head -1`) ends the process quietly, and every
//! line `turnstile chat` prints is whole, the `thread …` line included.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::server::{databases, TestServer};
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_turnstile");
const PROMPT: &str = "show safety issues on floor 3";

fn turnstile(args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args)
        .env_remove("TURNSTILE_TABLES")
        .env("RUST_LOG", "off")
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    c
}

/// Runs a command whose stdout is closed before it writes anything, as a
/// reader like `head -1` leaves it; returns its exit code and stderr.
async fn with_closed_stdout(args: &[&str]) -> (Option<i32>, String) {
    let mut child = turnstile(args).spawn().expect("the binary starts");
    drop(child.stdout.take());
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("turnstile {args:?} did not end"))
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_quiet(args: &[&str], (code, stderr): (Option<i32>, String)) {
    assert!(
        !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
        "turnstile {args:?} on a closed stdout:\n{stderr}"
    );
    assert_eq!(
        code,
        Some(0),
        "turnstile {args:?} on a closed stdout:\n{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stdout_ends_every_command_quietly() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&databases(&tmp)[0], vec![]).await;
    let base = format!("{}/", s.base);
    let chat = ["chat", base.as_str(), PROMPT];
    assert_quiet(&chat, with_closed_stdout(&chat).await);
    let mcp_url = s.demo.as_ref().expect("the demo tool server").url.clone();
    let mcp = ["mcp", mcp_url.as_str()];
    assert_quiet(&mcp, with_closed_stdout(&mcp).await);
    for args in [
        &["tables", "check", "tables"][..],
        &["tables", "render", "turn", "--format", "json"],
        &["tables", "diff", "tables/frame.ron", "tables/frame.ron"],
        &["replay", "frame", "start", "plan"],
    ] {
        assert_quiet(args, with_closed_stdout(args).await);
    }
    s.stop().await;
}

/// The thread id is on stdout with the frames, on a line of its own; the
/// card's rows and the text each end their line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_prints_whole_lines_the_thread_line_included() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&databases(&tmp)[0], vec![]).await;
    let thread = s.new_thread().await;
    let base = format!("{}/", s.base);
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        turnstile(&["chat", &base, PROMPT, "--thread", &thread]).output(),
    )
    .await
    .expect("chat ends")
    .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.ends_with('\n'), "{stdout:?}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], format!("thread {thread}"), "{stdout}");
    assert_eq!(
        stdout.matches("thread ").count(),
        1,
        "one thread line:\n{stdout}"
    );
    assert!(
        !stderr.contains(&thread),
        "the thread id belongs on stdout:\n{stderr}"
    );
    let rows: Vec<&&str> = lines.iter().filter(|l| l.starts_with("    ")).collect();
    assert!(!rows.is_empty(), "a card with rows:\n{stdout}");
    for row in rows {
        assert!(row.contains(" · floor "), "a whole card row: {row:?}");
    }
    assert_eq!(lines.last(), Some(&"· done"), "{stdout}");
    s.stop().await;
}
