//! Issue 11, finding 7: a log line names each field once. A turn's lines get
//! `thread_id` and `turn_id` from the turn's span only; the store's and the
//! lease's spans add counts, never the ids again. The user's text is never
//! logged.

use crate::common;

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex};

use common::server::TestServer;
use tracing_subscriber::fmt::MakeWriter;

/// Everything the subscriber writes, kept for the test.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

/// The names of `key=value` fields on a formatted line (span fields inside
/// `{…}` and event fields after the message).
fn field_names(line: &str) -> Vec<&str> {
    let bytes = line.as_bytes();
    let mut names = Vec::new();
    for (i, _) in line.match_indices('=') {
        let mut start = i;
        while start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
            start -= 1;
        }
        if start == i {
            continue;
        }
        // A field starts a span's braces or follows a space.
        if start == 0 || matches!(bytes[start - 1], b'{' | b' ') {
            names.push(&line[start..i]);
        }
    }
    names
}

const SECRET_TEXT: &str = "show safety issues on floor 3 zebra-marker-7";

/// Runs one turn (and a thread creation) under a subscriber with `filter`,
/// and returns the log text.
fn one_turn_logged(filter: &str) -> String {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_ansi(false)
        .with_writer(captured.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    // One thread for the server and the client: the subscriber set above
    // is this thread's default, so every task logs into it.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let tmp = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", tmp.path().join("t.db").display());
        let s = TestServer::builder().database(&url).start().await;
        let thread = s.new_thread().await;
        let frames = s.say(&thread, SECRET_TEXT).await;
        assert!(common::frames::is_done(&frames), "the turn ran");
        s.pass_and_stop().await;
    });
    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    text
}

fn assert_each_field_once(log: &str, filter: &str) {
    let turn_lines: Vec<&str> = log.lines().filter(|l| l.contains("turn{")).collect();
    assert!(
        !turn_lines.is_empty(),
        "[{filter}] the turn logged nothing; log:\n{log}"
    );
    for line in log.lines() {
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for name in field_names(line) {
            *seen.entry(name).or_default() += 1;
        }
        let repeated: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
        assert!(
            repeated.is_empty(),
            "[{filter}] fields repeated {repeated:?} on line:\n{line}"
        );
    }
    // The turn's lines name the thread and the turn, once each.
    for line in &turn_lines {
        assert_eq!(line.matches("thread_id=").count(), 1, "{line}");
        assert_eq!(line.matches("turn_id=").count(), 1, "{line}");
    }
    assert!(
        !log.contains("zebra-marker-7"),
        "[{filter}] the user's text reached the log"
    );
}

#[test]
fn turn_log_lines_name_each_field_once_at_info() {
    let filter = "info";
    let log = one_turn_logged(filter);
    assert_each_field_once(&log, filter);
}

#[test]
fn turn_log_lines_name_each_field_once_at_debug() {
    let filter = "warn,turnstile=debug";
    let log = one_turn_logged(filter);
    // The store's spans are on at debug: their lines sit inside the turn's.
    assert!(
        log.contains("store.step{"),
        "store.step spans are logged at debug; log:\n{log}"
    );
    assert_each_field_once(&log, filter);
}
