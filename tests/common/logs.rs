//! Everything the test binary logs, captured as text, so a test can look
//! for what must never be there (a key, a user's sentence) and for what must
//! be. One subscriber per process (every test is in one binary): the first
//! [`capture`] or [`super::init_tracing`] installs it, and it captures every
//! test's logs at [`CAPTURED`], so a property checked on the log ("the key
//! is never logged") is checked on every test's log lines.

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

/// What the capture keeps: turnstile at trace, the HTTP client and
/// connection layers at trace, the rest at info.
pub const CAPTURED: &str = "info,turnstile=trace,reqwest=trace,hyper_util=trace";

/// Installs the process's one subscriber (the first call wins): everything
/// at [`CAPTURED`] into the capture, and what `RUST_LOG` asks for (default
/// `warn`) to the test writer.
pub fn capture() {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{EnvFilter, Layer};
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let shown = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
        tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(false)
                    .with_writer(|| Capture)
                    .with_filter(EnvFilter::new(CAPTURED)),
            )
            .with(
                tracing_subscriber::fmt::layer()
                    .with_test_writer()
                    .with_filter(shown),
            )
            .init();
    });
}

/// Everything captured so far.
pub fn text() -> String {
    String::from_utf8_lossy(&LOGS.lock().unwrap()).into_owned()
}
