//! The command line's output (issue 11, finding 9): a closed stdout
//! (`turnstile chat URL "…" | head -1`) ends the process quietly, and every
//! line `turnstile chat` prints is whole, the `thread …` line included.

use crate::common;

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
        // Sessions the CLI keeps per server land here, not in ~.
        .env(
            "TURNSTILE_SESSION_DIR",
            std::env::temp_dir().join("turnstile-cli-test-sessions"),
        )
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
    let s = TestServer::builder()
        .database(&databases(&tmp)[0])
        .start()
        .await;
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
    s.pass_and_stop().await;
}

/// The thread id is on stdout with the frames, on a line of its own; the
/// card's rows and the text each end their line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_prints_whole_lines_the_thread_line_included() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::builder()
        .database(&databases(&tmp)[0])
        .start()
        .await;
    let base = format!("{}/", s.base);
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        turnstile(&["chat", &base, PROMPT]).output(),
    )
    .await
    .expect("chat ends")
    .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.ends_with('\n'), "{stdout:?}");
    let lines: Vec<&str> = stdout.lines().collect();
    let thread = (lines[0].strip_prefix("thread "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(
        lines[0],
        format!("thread {thread}  (follow up with --thread {thread})"),
        "{stdout}"
    );
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("thread ")).count(),
        1,
        "one thread line:\n{stdout}"
    );
    assert!(
        !stderr.contains(thread),
        "the thread id belongs on stdout:\n{stderr}"
    );
    // The card's "show more" is one whole line: the command, ending with
    // the thread and `--more`.
    let more = format!("--thread {thread} --more");
    let (hints, rows): (Vec<&&str>, Vec<&&str>) = lines
        .iter()
        .filter(|l| l.starts_with("    "))
        .partition(|l| l.starts_with("    ⋯ more: "));
    assert_eq!(hints.len(), 1, "{stdout}");
    assert!(hints[0].ends_with(&more), "{stdout}");
    assert!(!rows.is_empty(), "a card with rows:\n{stdout}");
    for row in rows {
        assert!(row.contains(" · floor "), "a whole card row: {row:?}");
    }
    assert_eq!(lines.last(), Some(&"· done"), "{stdout}");
    s.pass_and_stop().await;
}

async fn chat(args: &[&str]) -> String {
    let out = tokio::time::timeout(Duration::from_secs(60), turnstile(args).output())
        .await
        .expect("chat ends")
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "turnstile {args:?}:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The README's follow-up, typed as printed: the first chat prints the
/// thread, `--thread` continues it, and the card of "all 25" prints all 25
/// rows the answer points at. `--rows` prints fewer and says how many it
/// left out. `--floor` is what "this floor" means; without it, a question.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_follows_up_prints_every_row_and_sends_the_floor() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::builder()
        .database(&databases(&tmp)[0])
        .start()
        .await;
    let base = format!("{}/", s.base);
    let first = chat(&["chat", &base, PROMPT]).await;
    let thread = first
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("thread "))
        .and_then(|l| l.split_whitespace().next())
        .expect("a thread line")
        .to_string();
    let rows = |out: &str| out.lines().filter(|l| l.starts_with("    PANO-")).count();
    assert_eq!(rows(&first), 10, "{first}");
    let narrowed = chat(&["chat", &base, "only those from April", "--thread", &thread]).await;
    assert!(
        narrowed.contains("▣ search_photos — all 25 [EXACT]"),
        "{narrowed}"
    );
    assert!(
        narrowed.contains("all of them are in the card above"),
        "{narrowed}"
    );
    assert_eq!(
        rows(&narrowed),
        25,
        "every row the answer points at:\n{narrowed}"
    );

    let capped = chat(&["chat", &base, "list all panoramas", "--rows", "5"]).await;
    assert!(
        capped.contains("    … 245 more rows of this card not printed (--rows all prints them)"),
        "{capped}"
    );

    let floor = chat(&[
        "chat",
        &base,
        "show quality issues on this floor",
        "--floor",
        "4",
    ])
    .await;
    assert!(floor.contains(r#""floor":4"#), "{floor}");
    let context = chat(&[
        "chat",
        &base,
        "show quality issues on this floor",
        "--context",
        r#"{"floor": 4}"#,
    ])
    .await;
    assert!(context.contains(r#""floor":4"#), "{context}");
    let ask = chat(&["chat", &base, "show quality issues on this floor"]).await;
    assert!(!ask.contains("· plan"), "nothing is searched:\n{ask}");
    assert!(ask.contains("Which floor do you mean?"), "{ask}");
    s.pass_and_stop().await;
}

/// A command's stdout and whether it succeeded, whatever its status.
async fn run(args: &[&str]) -> (bool, String, String) {
    let out = tokio::time::timeout(Duration::from_secs(60), turnstile(args).output())
        .await
        .expect("turnstile ends")
        .unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The thread id of `chat`'s first line.
fn thread_of(out: &str) -> String {
    out.lines()
        .next()
        .and_then(|l| l.strip_prefix("thread "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("a thread line:\n{out}"))
        .to_string()
}

/// The interrupt id of `chat`'s approval card
/// (`? approval requested: … (interrupt ID)`).
fn interrupt_of(out: &str) -> String {
    out.lines()
        .find(|l| l.starts_with("? approval requested: "))
        .and_then(|l| l.rsplit_once("(interrupt "))
        .and_then(|(_, id)| id.strip_suffix(')'))
        .unwrap_or_else(|| panic!("an approval card:\n{out}"))
        .to_string()
}

/// Issue 34: a confirm the approval table refuses never goes out, and the
/// terminal says so: one line naming the table and the row, never
/// "calling confirm_action" and never "FAILED", as if it had been sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_prints_a_refused_confirm_as_refused_and_never_sent() {
    let tmp = tempfile::tempdir().unwrap();
    // The lying model confirms in the prepare's own plan.
    let model = std::sync::Arc::new(turnstile_demo::lying::Lying::new(
        turnstile_demo::Scripted::demo(),
    ));
    let s = TestServer::builder()
        .database(&databases(&tmp)[0])
        .model(model)
        .start()
        .await;
    let base = format!("{}/", s.base);
    let out = chat(&["chat", &base, "reserve seat 12 at 15:00"]).await;
    assert!(
        out.lines().any(|l| l
            == "✗ confirm_action refused by approval:prepare-and-confirm-in-one-step — never sent"),
        "{out}"
    );
    assert!(!out.contains("calling confirm_action"), "{out}");
    assert!(!out.contains("FAILED"), "{out}");
    // The prepare itself did go out, and says so.
    assert!(
        out.contains("· calling prepare_seat_reservation on demo"),
        "{out}"
    );
    s.pass_and_stop().await;
}

/// Issue 34: `turnstile resume` on a decision the table refuses prints the
/// row, and what the interrupt is now in words: withdrawn by a newer
/// message; voided when the tool server renumbered its actions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_prints_a_refused_decision_with_its_row_and_the_interrupts_state() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = TestServer::builder()
        .database(&databases(&tmp)[0])
        .start()
        .await;
    let base = format!("{}/", s.base);

    // Withdrawn: a new message while the card waits.
    let first = chat(&["chat", &base, "reserve seat 12 at 15:00"]).await;
    let (thread, interrupt) = (thread_of(&first), interrupt_of(&first));
    chat(&["chat", &base, PROMPT, "--thread", &thread]).await;
    let (ok, out, err) = run(&["resume", &base, &thread, &interrupt, "approve"]).await;
    assert!(!ok, "a refused approve fails:\n{out}\n{err}");
    assert!(
        out.lines().any(|l| l
            == "✗ approve refused by approval:approve-after-withdrawal (409 Conflict) — nothing was sent"),
        "{out}\n{err}"
    );
    assert!(
        out.lines().any(|l| l
            == format!("  interrupt {interrupt} is Withdrawn: withdrawn by a newer message; its cancel was sent")),
        "{out}"
    );

    // Voided: the tool server restarts and gives the number to another
    // reservation; the approve checks first and sends nothing.
    let second = chat(&["chat", &base, "reserve seat 12 at 15:00"]).await;
    let (thread, interrupt) = (thread_of(&second), interrupt_of(&second));
    let before = s.demo.take().expect("the demo tool server");
    let addr = before.addr();
    before.shutdown().await;
    s.demo = Some(
        turnstile_demo::DemoServer::start(addr, Default::default())
            .await
            .expect("the tool server starts again on its address"),
    );
    let mut renumbered = false;
    for _ in 0..40 {
        let (_, out, _) = run(&["chat", &base, "reserve seat 7 at 10:00"]).await;
        if out.contains("? approval requested: ") {
            renumbered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(renumbered, "the restarted tool server prepares again");
    let (ok, out, err) = run(&["resume", &base, &thread, &interrupt, "approve"]).await;
    assert!(!ok, "a voided approve fails:\n{out}\n{err}");
    assert!(
        out.lines().any(|l| l
            == "✗ approve refused by approval:approve-of-changed-action (409 Conflict) — nothing was sent"),
        "{out}\n{err}"
    );
    assert!(
        out.contains(&format!("  interrupt {interrupt} is Voided: voided: the server no longer holds this request under its number; nothing was sent")),
        "{out}"
    );
    s.pass_and_stop().await;
}

/// `serve --check --config PATH` with `PATH` given: exit code, output, and
/// how long it took (killed after 20 s).
async fn serve_check(path: &std::path::Path) -> (Option<i32>, String, Duration) {
    let started = std::time::Instant::now();
    let mut c = turnstile(&["serve", "--config"]);
    c.arg(path)
        .arg("--check")
        .env("OPENAI_API_KEY", "sk-test-key")
        .env("DATABASE_URL", "sqlite://unused.db")
        .env_remove("TURNSTILE_MODEL_BASE_URL");
    let out = tokio::time::timeout(Duration::from_secs(20), c.output())
        .await
        .unwrap_or_else(|_| panic!("`serve --check --config {}` hangs", path.display()))
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text, started.elapsed())
}

/// Issue 20 §6.2: a config that is not a regular file (a FIFO would block
/// the read forever) or is larger than the bound is refused at once, by
/// its path.
#[tokio::test]
async fn serve_check_refuses_a_fifo_or_an_oversized_config_promptly() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("config.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success(), "mkfifo {}", fifo.display());
    let (code, text, took) = serve_check(&fifo).await;
    assert!(code.is_some_and(|c| c != 0), "{code:?}: {text}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(
        text.contains(&fifo.display().to_string()) && text.contains("not a regular file"),
        "{text}"
    );

    // Over 1 MiB: a comment, so only the size can be wrong with it.
    let big = tmp.path().join("big.toml");
    let mut src = String::from("[model]\nbase_url = \"http://127.0.0.1:1/v1\"\nname = \"m\"\n");
    while src.len() <= 1024 * 1024 {
        src += "# padding padding padding padding padding padding padding padding\n";
    }
    std::fs::write(&big, &src).unwrap();
    let (code, text, _) = serve_check(&big).await;
    assert!(code.is_some_and(|c| c != 0), "{code:?}: {text}");
    assert!(
        text.contains(&big.display().to_string()) && text.contains("larger than"),
        "{text}"
    );

    // The same file under the bound is read.
    let small = tmp.path().join("small.toml");
    std::fs::write(&small, &src[..4096]).unwrap();
    let (code, text, _) = serve_check(&small).await;
    assert_eq!(code, Some(0), "{text}");
}
