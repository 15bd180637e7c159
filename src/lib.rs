//! Command-line front ends. Each command parses its input, calls the library
//! and decides output and exit codes; none holds a protocol decision.

pub mod chat;
pub mod client;
pub mod demo;
pub mod mcp;
pub mod otel;
pub mod serve;
pub mod tables;

use std::io::{self, Write};

/// The CLI's standard output. A write to a closed pipe (`turnstile chat … |
/// head -1`) ends the process quietly with exit 0: the reader stopped
/// reading by choice, so there is nothing to report.
pub struct Stdout(io::Stdout);

/// [`Stdout`].
pub fn stdout() -> Stdout {
    Stdout(io::stdout())
}

fn quiet<T>(r: io::Result<T>) -> io::Result<T> {
    if let Err(e) = &r {
        if e.kind() == io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
    }
    r
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        quiet(self.0.write(buf))
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        quiet(self.0.write_all(buf))
    }
    fn flush(&mut self) -> io::Result<()> {
        quiet(self.0.flush())
    }
}

/// Whether a panic is `print!`'s on a closed stdout ("failed printing to
/// stdout: Broken pipe (os error 32)").
fn is_closed_stdout_panic(payload: &(dyn std::any::Any + Send)) -> bool {
    let msg = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("");
    msg.starts_with("failed printing to stdout")
        && (msg.contains("Broken pipe") || msg.contains(&format!("os error {}", EPIPE)))
}

const EPIPE: i32 = 32;

/// For the `print!`s that do not go through [`Stdout`]: their panic on a
/// closed stdout also ends the process quietly with exit 0. Every other
/// panic is reported as before.
pub fn quiet_on_closed_stdout() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if is_closed_stdout_panic(info.payload()) {
            std::process::exit(0);
        }
        report(info)
    }));
}

/// How to run this binary again, as a line a user can paste: `turnstile`
/// when that name on `PATH` is this very binary, else this binary's path
/// (`cargo run` builds it under `target/`, which is not on `PATH`).
pub fn self_command() -> String {
    let exe = std::env::current_exe().ok();
    let exe = exe.and_then(|e| e.canonicalize().ok());
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("turnstile"))
            .find(|p| p.is_file())
            .and_then(|p| p.canonicalize().ok())
    });
    match exe {
        Some(exe) if on_path.as_ref() == Some(&exe) => "turnstile".into(),
        Some(exe) => shell_word(&exe.to_string_lossy()),
        None => "turnstile".into(),
    }
}

/// A word the shell reads back as itself: single-quoted unless it is plain.
pub fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-:+=@,%".contains(c));
    match plain {
        true => s.to_string(),
        false => format!("'{}'", s.replace('\'', r"'\''")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_closed_stdout_is_quiet() {
        let closed: Box<dyn std::any::Any + Send> =
            Box::new("failed printing to stdout: Broken pipe (os error 32)".to_string());
        assert!(is_closed_stdout_panic(closed.as_ref()));
        let other: Box<dyn std::any::Any + Send> = Box::new("index out of bounds");
        assert!(!is_closed_stdout_panic(other.as_ref()));
        let stderr: Box<dyn std::any::Any + Send> =
            Box::new("failed printing to stderr: Broken pipe (os error 32)".to_string());
        assert!(!is_closed_stdout_panic(stderr.as_ref()));
    }
}
