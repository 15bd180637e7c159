//! Everything a test binary logs, captured as text, so a test can look for
//! what must never be there (a key, a user's sentence) and for what must be.
//! One subscriber per binary: the first `capture` installs it.

use std::io::Write;
use std::sync::{Mutex, OnceLock};

static LOGS: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct Capture;

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        LOGS.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs the capturing subscriber with `filter` (the first call wins).
pub fn capture(filter: &str) {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_ansi(false)
            .with_writer(|| Capture)
            .init();
    });
}

/// Everything captured so far.
pub fn text() -> String {
    String::from_utf8_lossy(&LOGS.lock().unwrap()).into_owned()
}
