//! No secret is ever echoed (issue 11, findings 2–4):
//!
//! - a model provider's error body (which may quote part of the key) reaches
//!   neither the `error` frame, nor the stored thread, nor the log — the user
//!   gets a fixed message with the status and a reference id, the log gets
//!   the body redacted under the same reference;
//! - URLs are printed as scheme, host(:port) and path only (`serve --check`,
//!   `serve` start-up output and logs), stdio `args` are counted, never
//!   printed, and a TOML type error never quotes the value;
//! - `serve --check` decides about `database_url` exactly as `serve` does.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::fake_openai::{Action, FakeOpenAi, Role, KEY};
use common::frames::{error, is_done, kinds, FrameKind};
use common::server::TestServer;
use serde_json::json;

// ---------------------------------------------------------------------------
// Captured logs (all levels of turnstile), as in tests/openai_adapter.rs.

fn capture_logs() {
    common::logs::capture();
}

fn logs() -> String {
    common::logs::text()
}

/// The first piece of `text` that is a substring of the key of 8 or more
/// characters.
fn key_fragment(text: &str) -> Option<&'static str> {
    let chars: Vec<(usize, char)> = KEY.char_indices().collect();
    for (i, &(start, _)) in chars.iter().enumerate() {
        if i + 8 > chars.len() {
            break;
        }
        let end = chars.get(i + 8).map_or(KEY.len(), |c| c.0);
        let piece = &KEY[start..end];
        if text.contains(piece) {
            return Some(piece);
        }
    }
    None
}

fn assert_no_key_fragment(what: &str, text: &str) {
    if let Some(piece) = key_fragment(text) {
        panic!("{what} holds a piece of the key ({piece:?}): {text}");
    }
}

/// What a provider answers to a wrong key: the key's first 16 characters,
/// and a later part of it that does not look like a key at all.
fn quoting_body() -> serde_json::Value {
    let prefix = &KEY[..16];
    let middle = &KEY[17..27];
    json!({"error": {
        "message": format!("Invalid API key: {prefix}... (ends {middle}); Authorization: Bearer abc.def-ghi"),
        "type": "invalid_request_error",
    }})
}

/// A turn answered by a 400 that quotes part of the key: the `error` frame's
/// reference, the frames and the stored thread.
async fn turn_with_a_quoting_400() -> (String, serde_json::Value, String) {
    let fake = FakeOpenAi::start().await;
    let s = TestServer::builder().model(fake.model()).start().await;
    let thread = s.new_thread().await;
    fake.on(Role::Planner, Action::Status(400, quoting_body()));
    let frames = s.say(&thread, "show safety issues on floor 3").await;
    assert_eq!(kinds(&frames), [FrameKind::Start, FrameKind::Error]);
    let data = frames[1].data();
    let message = error(&frames).unwrap().message.clone();
    // Searched as text: the key must be nowhere in it.
    let stored = s.thread_json(&thread).await;
    s.pass();
    (message, data, stored.to_string())
}

/// The reference id in a message `… (ref XXXXXXXX) …`.
fn reference(message: &str) -> &str {
    let at = message
        .find("(ref ")
        .unwrap_or_else(|| panic!("no reference in {message:?}"));
    let rest = &message[at + 5..];
    &rest[..rest.find(')').expect("closing parenthesis")]
}

#[tokio::test]
async fn a_partly_quoted_key_is_not_in_the_error_frame() {
    capture_logs();
    let (message, data, _) = turn_with_a_quoting_400().await;
    assert_no_key_fragment("the error frame", &data.to_string());
    assert!(
        message.contains("HTTP 400") && !reference(&message).is_empty(),
        "a fixed message with the status and a reference: {message}"
    );
    // The provider's words are not ours to show, redacted or not.
    assert!(!message.contains("Invalid API key"), "{message}");
    assert!(!data.to_string().contains("Bearer"), "{data}");
}

#[tokio::test]
async fn a_partly_quoted_key_is_not_in_the_stored_thread() {
    capture_logs();
    let (_, _, stored) = turn_with_a_quoting_400().await;
    assert_no_key_fragment("the stored thread", &stored);
    assert!(!stored.contains("Invalid API key"), "{stored}");
}

#[tokio::test]
async fn a_partly_quoted_key_is_not_in_the_log_which_has_the_body_under_the_reference() {
    capture_logs();
    let (message, _, _) = turn_with_a_quoting_400().await;
    let reference = reference(&message).to_string();
    let logs = logs();
    assert_no_key_fragment("the log", &logs);
    assert!(!logs.contains("abc.def-ghi"), "a bearer token is logged");
    // The body is logged, redacted, under the reference the user was shown.
    let line = logs
        .lines()
        .find(|l| l.contains(&reference) && l.contains("Invalid API key"))
        .unwrap_or_else(|| panic!("no log line with the body under ref {reference}:\n{logs}"));
    assert!(line.contains("[redacted]"), "{line}");
}

/// Issue 20 §6.1: a 401 that echoes the key the way providers do — a
/// prefix and the last characters with masking between, or a short piece
/// alone — leaves no piece of 4 or more of the key's characters on the log
/// line that holds the body.
#[tokio::test]
async fn a_key_echoed_in_short_masked_pieces_is_not_on_the_warn_line() {
    capture_logs();
    let (head, tail5, tail) = (&KEY[..6], &KEY[KEY.len() - 5..], &KEY[KEY.len() - 4..]);
    let body = json!({"error": {
        "message": format!(
            "Incorrect API key provided: {head}{stars}{tail}. Also seen as {first4}...{tail}, \
             ****{tail}, …{tail5} and ending in {tail}. You can find your API key at \
             https://platform.openai.com/account/api-keys.",
            stars = "*".repeat(22),
            first4 = &KEY[..4],
        ),
        "type": "invalid_request_error",
        "code": "invalid_api_key",
    }});
    let fake = FakeOpenAi::start().await;
    let s = TestServer::builder().model(fake.model()).start().await;
    let thread = s.new_thread().await;
    fake.on(Role::Planner, Action::Status(401, body));
    let frames = s.say(&thread, "show safety issues on floor 3").await;
    let message = error(&frames).expect("an error frame").message.clone();
    s.pass();
    let reference = reference(&message).to_string();
    let logs = logs();
    let line = logs
        .lines()
        .find(|l| l.contains(&reference) && l.contains("Incorrect API key provided"))
        .unwrap_or_else(|| panic!("no log line with the body under ref {reference}:\n{logs}"));
    // The body is the line's last field (the ids before it are random hex,
    // which may hold a hex piece of the key by chance).
    let body = &line[line.find(" body=").expect("a body field")..];
    let chars: Vec<char> = KEY.chars().collect();
    for w in chars.windows(4) {
        let piece: String = w.iter().collect();
        assert!(
            !body.contains(&piece),
            "the WARN line holds {piece:?}, a piece of the key:\n{line}"
        );
    }
    assert!(!line.contains("****"), "the masking is left: {line}");
    // The provider's ordinary words are kept.
    assert!(
        line.contains("You can find your API key at https://platform.openai.com/account/api-keys"),
        "{line}"
    );
}

/// Every piece of 4 or more characters of `key` that `text` holds,
/// compared without case: `[redacted]` itself is not text of the body.
fn key_pieces_in(key: &str, text: &str) -> Vec<String> {
    let text = text.replace("[redacted]", "\u{0}").to_ascii_lowercase();
    let key: Vec<char> = key.to_ascii_lowercase().chars().collect();
    let mut found: Vec<String> = key
        .windows(4.min(key.len()))
        .map(|w| w.iter().collect::<String>())
        .filter(|piece| text.contains(piece.as_str()))
        .collect();
    found.dedup();
    found
}

/// Issue 34 item 9: the key's pieces of 4–7 characters glued to other
/// characters — letters and digits on either side, a bracket, a quote, an
/// `=` — the shapes a provider's echo or a debugging dump can take. Each is
/// the body of one 401 from the (fake) provider, through the real server;
/// the WARN line that logs the body under the user's reference holds no
/// piece of 4 or more of the key's characters.
#[tokio::test]
async fn a_key_glued_to_other_characters_is_not_on_the_warn_line() {
    capture_logs();
    let tail4 = &KEY[KEY.len() - 4..]; // b41d
    let tail5 = &KEY[KEY.len() - 5..]; // -b41d
    let tail7 = &KEY[KEY.len() - 7..]; // LOG-b41d minus L
    let mid4 = &KEY[8..12]; // 7f3a
    let mid5 = &KEY[8..13]; // 7f3a9
    let mid6 = &KEY[10..16]; // 3a9c0e
    let mid7 = &KEY[9..16]; // f3a9c0e
    let head7 = &KEY[..7]; // sk-test
    let shapes = [
        format!("x{tail4}y"),
        format!("key{mid5}abc"),
        format!("(sk-te{})", &KEY[6..8]),
        format!("({head7}"),
        format!("ends-with{tail4}"),
        format!("{tail4}was"),
        format!("0x{mid4}ff"),
        format!("id={mid6}&x=1"),
        format!("ref#{mid7}z"),
        format!("k{tail5}k"),
        format!("'{mid4}'s"),
        format!("\"key\":\"Z{mid5}Z\""),
        format!("<{tail4}X>"),
        format!("[{mid6}]abc"),
        format!("{mid4}{tail4}"),
        format!("user@{mid5}host"),
        format!("token_{tail4}_v2"),
        format!("A{mid7}"),
        format!("{tail7}Q"),
        format!("abc{}", mid4.to_ascii_uppercase()),
        format!("path/{mid6}x/y"),
        format!("e{}e", &KEY[13..17]),
        format!("…x{tail4}…"),
        format!("sk-abc***x{tail4}"),
    ];
    let fake = FakeOpenAi::start().await;
    let s = TestServer::builder().model(fake.model()).start().await;
    let mut leaked = Vec::new();
    for shape in &shapes {
        let body = json!({"error": {
            "message": format!("Incorrect API key provided: {shape} was refused."),
            "type": "invalid_request_error",
        }});
        fake.on(Role::Planner, Action::Status(401, body));
        let thread = s.new_thread().await;
        let frames = s.say(&thread, "show safety issues on floor 3").await;
        let message = error(&frames).expect("an error frame").message.clone();
        let reference = reference(&message).to_string();
        let logs = logs();
        let line = logs
            .lines()
            .find(|l| l.contains(&reference) && l.contains(" body="))
            .unwrap_or_else(|| panic!("no log line with the body under ref {reference}:\n{logs}"));
        // The body is the line's last field (the ids before it are random
        // hex, which may hold a hex piece of the key by chance).
        let body = &line[line.find(" body=").expect("a body field")..];
        let pieces = key_pieces_in(KEY, body);
        if !pieces.is_empty() {
            leaked.push(format!("{shape:?} → {pieces:?} in {body}"));
        }
        // The provider's own words around the echo are kept.
        assert!(body.contains("Incorrect API key provided:"), "{line}");
    }
    s.pass();
    eprintln!(
        "glued key pieces on the WARN line: {} of {} shapes",
        leaked.len(),
        shapes.len()
    );
    assert!(leaked.is_empty(), "{leaked:#?}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

    /// Whatever a key piece of 4 or more characters is glued to, and
    /// wherever in the text it stands, no piece of 4 or more of the key's
    /// characters is left after redaction (compared without case).
    #[test]
    fn no_glued_piece_of_the_key_survives_redaction(
        secret in "[A-Za-z0-9]{20,40}",
        at in 0usize..1000,
        len in 4usize..=7,
        left in "[A-Za-z0-9_.:=(\\['\"/@#-]{0,6}",
        right in "[A-Za-z0-9_.:=)\\]'\"/&,-]{0,6}",
        before in "[a-z ]{0,20}",
        after in "[a-z ]{0,20}",
        upper in proptest::bool::ANY,
    ) {
        let key = format!("sk-proj-{secret}");
        let chars: Vec<char> = key.chars().collect();
        let start = at % (chars.len() - len + 1);
        let mut piece: String = chars[start..start + len].iter().collect();
        if upper {
            piece = piece.to_ascii_uppercase();
        }
        let text = format!("{before} error: {left}{piece}{right} rejected {after}");
        let out = turnstile::llm::openai::redact_secrets(&text, Some(&key));
        let kept = key_pieces_in(&key, &out);
        proptest::prop_assert!(kept.is_empty(), "{text:?} → {out:?} keeps {kept:?}");
    }
}

// ---------------------------------------------------------------------------
// The binary: what `serve --check` and `serve` print

const BIN: &str = env!("CARGO_BIN_EXE_turnstile");

/// Secrets typed into fields that are not secret.
const URL_SECRETS: &[&str] = &[
    "alice",
    "hunter2pw",
    "QUERYSECRET",
    "api-key=",
    "mcppw",
    "MCPTOKEN",
    "token=",
    "ARGSECRET",
    "--api-key",
];

fn config_with_url_secrets(dir: &Path, model_base: &str, mcp_host: &str) -> std::path::PathBuf {
    let path = dir.join("turnstile.toml");
    std::fs::write(
        &path,
        format!(
            "addr = \"127.0.0.1:0\"\n\
             database_url = \"sqlite://{db}?mode=rwc\"\n\
             [model]\n\
             base_url = \"http://alice:hunter2pw@{model_base}/v1?api-key=QUERYSECRET\"\n\
             name = \"m\"\n\
             [[mcp_servers]]\n\
             name = \"site\"\n\
             url = \"http://bob:mcppw@{mcp_host}/mcp?token=MCPTOKEN\"\n\
             [[mcp_servers]]\n\
             name = \"files\"\n\
             command = \"/nonexistent/turnstile-test-mcp-server\"\n\
             args = [\"-y\", \"server\", \"--api-key=ARGSECRET\"]\n",
            db = dir.join("s.db").display(),
        ),
    )
    .unwrap();
    path
}

fn assert_no_url_secret(what: &str, text: &str) {
    for s in URL_SECRETS {
        assert!(!text.contains(s), "{what} shows {s:?}:\n{text}");
    }
}

#[test]
fn serve_check_prints_urls_as_scheme_host_and_path_and_counts_args() {
    let tmp = tempfile::tempdir().unwrap();
    let config = config_with_url_secrets(tmp.path(), "api.example.com", "tools.example.com:8443");
    let out = std::process::Command::new(BIN)
        .args(["serve", "--check", "--config"])
        .arg(&config)
        .env("OPENAI_API_KEY", KEY)
        .env_remove("DATABASE_URL")
        .env_remove("TURNSTILE_MODEL_BASE_URL")
        .env_remove("TURNSTILE_TABLES")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_no_url_secret("serve --check", &format!("{stdout}{stderr}"));
    assert!(stdout.contains("http://api.example.com/v1"), "{stdout}");
    assert!(
        stdout.contains("http://tools.example.com:8443/mcp"),
        "{stdout}"
    );
    assert!(
        stdout.contains("turnstile-test-mcp-server (3 arguments, not shown)"),
        "{stdout}"
    );
}

/// `serve` with secrets in its URLs and stdio args: what it printed on
/// stdout until its MCP servers were listed, and its trace log (stderr).
async fn serve_start_up() -> (String, String) {
    use tokio::io::AsyncBufReadExt;
    let tmp = tempfile::tempdir().unwrap();
    // Nothing listens on port 1: the MCP server is down and is retried
    // (its errors are logged); the model is never called.
    let config = config_with_url_secrets(tmp.path(), "127.0.0.1:1", "127.0.0.1:1");
    let mut child = tokio::process::Command::new(BIN)
        .args(["serve", "--config"])
        .arg(&config)
        .env("OPENAI_API_KEY", KEY)
        .env("RUST_LOG", "trace")
        .env("NO_COLOR", "1")
        .env_remove("DATABASE_URL")
        .env_remove("TURNSTILE_MODEL_BASE_URL")
        .env_remove("TURNSTILE_TABLES")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stderr = child.stderr.take().unwrap();
    let errors = tokio::spawn(async move {
        let mut s = String::new();
        let _ = tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut s).await;
        s
    });
    let mut printed = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = stdout.next_line().await {
            printed += &line;
            printed += "\n";
            if line.trim_start().starts_with("mcp server: files") {
                break;
            }
        }
    })
    .await;
    assert!(printed.contains("turnstile is serving on"), "{printed}");
    // Let the failing MCP connections be logged (and retried once).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    child.kill().await.unwrap();
    (printed, errors.await.unwrap())
}

/// rmcp's own worker logs the reqwest error's `Debug`, which holds the URL
/// with its query; that line is not ours (see the ignored test below).
const RMCP_WORKER: &str = " rmcp::transport::worker: ";

#[tokio::test]
async fn serve_start_up_output_and_logs_show_no_url_secrets() {
    let (printed, logged) = serve_start_up().await;
    assert_no_url_secret("serve's start-up output", &printed);
    assert!(
        printed.contains("model: m at http://127.0.0.1:1/v1"),
        "{printed}"
    );
    assert!(
        printed.contains("mcp server: site (http://127.0.0.1:1/mcp)")
            && printed.contains("(3 arguments, not shown)"),
        "{printed}"
    );
    let ours: String = logged
        .lines()
        .filter(|l| !l.contains(RMCP_WORKER))
        .map(|l| format!("{l}\n"))
        .collect();
    // The down server's connect error quotes the URL it sent, scrubbed.
    assert!(
        ours.contains("mcp server is down at start server=site")
            && ours.contains("http://127.0.0.1:1/mcp"),
        "the MCP servers' failures are logged: {}",
        ours.lines()
            .filter(|l| l.contains("mcp"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_no_url_secret("serve's log", &ours);
    assert_no_key_fragment("serve's log", &ours);
}

#[tokio::test]
async fn serve_logs_show_no_url_secrets_even_in_rmcp_lines() {
    let (_, logged) = serve_start_up().await;
    assert_no_url_secret("serve's log", &logged);
}

/// Issue 20 §6.5: a key pasted as `model.name` (in the file or in
/// `TURNSTILE_MODEL`) stops `serve --check` with a problem that names the
/// field, and is printed nowhere.
#[test]
fn serve_check_refuses_a_key_pasted_as_the_model_name_without_printing_it() {
    let tmp = tempfile::tempdir().unwrap();
    let pasted = "sk-live-Zq8vN3rT5wXy7LmK0pA9bC2d";
    let run = |name_in_file: &str, name_in_env: Option<&str>| {
        let config = tmp.path().join("model.toml");
        std::fs::write(
            &config,
            format!(
                "database_url = \"sqlite://{}?mode=rwc\"\n[model]\nbase_url = \"http://127.0.0.1:1/v1\"\nname = \"{name_in_file}\"\n",
                tmp.path().join("m.db").display()
            ),
        )
        .unwrap();
        let mut c = std::process::Command::new(BIN);
        c.args(["serve", "--check", "--config"])
            .arg(&config)
            .env("OPENAI_API_KEY", KEY)
            .env_remove("DATABASE_URL")
            .env_remove("TURNSTILE_MODEL_BASE_URL")
            .env_remove("TURNSTILE_TABLES");
        match name_in_env {
            Some(n) => c.env("TURNSTILE_MODEL", n),
            None => c.env_remove("TURNSTILE_MODEL"),
        };
        let out = c.output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    for (file, env) in [(pasted, None), ("gpt-4o-mini", Some(pasted)), (KEY, None)] {
        let (ok, text) = run(file, env);
        assert!(!ok, "{file:?}/{env:?} is accepted:\n{text}");
        assert!(text.contains("model.name"), "{text}");
        for secret in [pasted, KEY] {
            let cs: Vec<char> = secret.chars().collect();
            for w in cs.windows(8) {
                let piece: String = w.iter().collect();
                assert!(!text.contains(&piece), "{piece:?} is printed:\n{text}");
            }
        }
    }
    let (ok, text) = run("gpt-4o-mini", None);
    assert!(ok && text.contains("model: gpt-4o-mini at"), "{text}");
}

#[test]
fn a_type_error_in_the_config_never_quotes_the_value() {
    let secret = "sk-live-0123456789abcdef";
    let cases = [
        format!("model = \"{secret}\"\n"),
        format!("[model]\nname = \"m\"\napi_key = [\"{secret}\"]\n"),
        format!("[model]\nmax_retries = \"{secret}\"\n"),
        format!("[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\nargs = \"--token={secret}\"\n"),
        format!("addr = [\"{secret}\"]\n"),
    ];
    for src in cases {
        let err = turnstile::config::Config::from_toml(&src, Path::new("t.toml"), &|_| None)
            .expect_err("a type error");
        let shown = err.to_string();
        assert!(
            shown.starts_with("t.toml:") && shown.contains("invalid type"),
            "a located type error: {shown}"
        );
        assert!(
            !shown.contains("sk-live") && !shown.contains("0123456789"),
            "{src:?} → {shown}"
        );
    }
}

// ---------------------------------------------------------------------------
// `database_url`: `--check` decides what `serve` decides

fn check_with_database(dir: &Path, url: &str) -> (bool, String) {
    let config = dir.join("db.toml");
    std::fs::write(
        &config,
        "[model]\nbase_url = \"http://127.0.0.1:1/v1\"\nname = \"m\"\n",
    )
    .unwrap();
    let out = std::process::Command::new(BIN)
        .args(["serve", "--check", "--config"])
        .arg(&config)
        .env("OPENAI_API_KEY", KEY)
        .env("DATABASE_URL", url)
        .env_remove("TURNSTILE_MODEL_BASE_URL")
        .env_remove("TURNSTILE_TABLES")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn serve_check_refuses_a_mysql_url_with_its_location() {
    let tmp = tempfile::tempdir().unwrap();
    let (ok, text) = check_with_database(tmp.path(), "mysql://u:p@h/db");
    assert!(!ok, "mysql is accepted by --check: {text}");
    assert!(
        text.contains("DATABASE_URL") && text.contains("database_url"),
        "{text}"
    );
    assert!(!text.contains("u:p@"), "the password is echoed: {text}");
    let (ok, text) = check_with_database(tmp.path(), "POSTGRES://u:p@127.0.0.1:1/db");
    assert!(ok && text.contains("database: PostgreSQL"), "{text}");
}

/// For each URL, what `serve --check` says and what the real start
/// (`Store::connect`, which `serve` runs) does must agree: refused by both,
/// or the same backend.
#[tokio::test]
async fn serve_check_and_the_real_start_agree_on_database_urls() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().display();
    let urls = [
        format!("sqlite://{d}/a.db?mode=rwc"),
        format!("sqlite:{d}/b.db"),
        format!("SQLITE://{d}/c.db?mode=rwc"),
        format!("Sqlite:{d}/d.db"),
        format!("{d}/e.db"),
        "sqlite::memory:".into(),
        "postgres://u:p@127.0.0.1:1/db".into(),
        "postgresql://u:p@127.0.0.1:1/db".into(),
        "POSTGRES://u:p@127.0.0.1:1/db".into(),
        "PostgreSQL://u:p@127.0.0.1:1/db".into(),
        "mysql://u:p@h/db".into(),
        "MYSQL://u:p@h/db".into(),
        "http://h/db".into(),
    ];
    let mut disagreements = Vec::new();
    for url in &urls {
        let (ok, text) = check_with_database(tmp.path(), url);
        let checked = match ok {
            true if text.contains("database: PostgreSQL") => "PostgreSQL",
            true if text.contains("database: SQLite") => "SQLite",
            true => panic!("{url}: no database line: {text}"),
            false => "refused",
        };
        // Nothing listens on port 1, and a refused PostgreSQL connection may
        // be retried until the pool's timeout: a wait means accepted.
        let connect = turnstile::store::Store::connect(url);
        let started = match tokio::time::timeout(Duration::from_secs(3), connect).await {
            Err(_) => "PostgreSQL",
            Ok(Ok(store)) => match store.backend() {
                turnstile::store::Backend::Postgres => "PostgreSQL",
                turnstile::store::Backend::Sqlite => "SQLite",
            },
            Ok(Err(turnstile::store::StoreError::UnsupportedUrl { .. })) => "refused",
            // Accepted, then the connection failed: only a PostgreSQL URL
            // here (nothing listens on port 1).
            Ok(Err(_)) => "PostgreSQL",
        };
        if checked != started {
            disagreements.push(format!("{url:?}: --check {checked}, serve {started}"));
        }
    }
    assert!(disagreements.is_empty(), "{disagreements:#?}");
}

// ---------------------------------------------------------------------------
// Message text and tool bodies stay out of the logs

/// Every string of 24 characters or more in `v`, but a result's shape.
fn long_strings(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) if s.chars().count() >= 24 => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|x| long_strings(x, out)),
        // A result's shape (block count, kinds, key names) is logged on
        // purpose: it holds no content.
        serde_json::Value::Object(m) => m
            .iter()
            .filter(|(k, _)| k.as_str() != "shape")
            .for_each(|(_, x)| long_strings(x, out)),
        _ => {}
    }
}

#[tokio::test]
async fn message_text_and_tool_bodies_stay_out_of_the_log() {
    capture_logs();
    let fake = FakeOpenAi::start().await;
    let s = TestServer::builder().model(fake.model()).start().await;
    let thread = s.new_thread().await;
    let said = "show safety issues on floor 3, marker zebra-quokka-7731";
    let frames = s.say(&thread, said).await;
    assert!(is_done(&frames), "{:?}", kinds(&frames));
    // The user's text, the model's answer, the tool's result bodies: every
    // long string the thread stores.
    let mut texts = Vec::new();
    for body in s.bodies(&thread).await {
        long_strings(&body, &mut texts);
    }
    s.pass();
    let logs = logs();
    assert!(logs.contains("model usage"), "trace logs were captured");
    assert!(
        !logs.contains("zebra-quokka-7731"),
        "the user's text is logged"
    );
    let kinds_seen: Vec<&str> = texts.iter().map(String::as_str).collect();
    assert!(texts.len() >= 3, "the thread stores texts: {kinds_seen:?}");
    for t in &texts {
        // Ids and URLs are not text; they may be logged (a call id is the
        // turn's id and a number: `gen_ai.tool.call.id` of its span).
        let call_id = t
            .rsplit_once('-')
            .is_some_and(|(u, n)| uuid::Uuid::parse_str(u).is_ok() && n.parse::<u32>().is_ok());
        if t.contains("://") || uuid::Uuid::parse_str(t).is_ok() || call_id {
            continue;
        }
        assert!(!logs.contains(t.as_str()), "logged: {t:?}");
    }
}
