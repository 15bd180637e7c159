//! The table tools on hostile files (issue 11, finding 5): a file whose name
//! and table name disagree, a file of one protocol holding another's table,
//! a file that is not UTF-8, a named pipe called `*.ron`, and an override
//! directory that does not exist; and `tables render --format ron`, the
//! expansion of a table with row groups.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use turnstile::fsm::Code;
use turnstile::protocols::{registry_check_source, TableSet, BUILTIN};

fn builtin(name: &str) -> &'static str {
    BUILTIN
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, _, src)| *src)
        .expect("a built-in table")
}

/// Runs the binary; kills it and fails if it has not ended within `secs`.
fn run(args: &[&str], secs: u64) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_turnstile"))
        .args(args)
        .env_remove("TURNSTILE_TABLES")
        .env("RUST_LOG", "off")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(secs) {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "turnstile {args:?} still running after {secs} s; stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn mkfifo(path: &Path) {
    let ok = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(ok.success(), "mkfifo {}", path.display());
}

/// `harness.ron` declaring `name: "frame"` would make `/v1/tables` list two
/// tables named "frame": it is a located error at the `name` value.
#[test]
fn a_file_name_and_its_table_name_must_agree() {
    let src =
        crate::common::harness_table::SOURCE.replacen("name: \"harness\"", "name: \"frame\"", 1);
    let (line, col) = src
        .lines()
        .enumerate()
        .find_map(|(i, l)| l.find("\"frame\"").map(|c| (i as u32 + 1, c as u32 + 1)))
        .unwrap();
    let findings = registry_check_source(&src, "tables/harness.ron")
        .expect_err("a table named unlike its file must not load");
    let f = findings
        .0
        .iter()
        .find(|f| f.code == Code::NameMismatch)
        .unwrap_or_else(|| panic!("no name-mismatch finding:\n{findings}"));
    assert_eq!((f.pos.line, f.pos.col), (line, col), "{f}");
    assert_eq!(f.file, "tables/harness.ron");
    assert!(f.message.contains("\"frame\"") && f.message.contains("harness.ron"));
    assert!(f.hint.contains("name: \"harness\""), "{f}");
    assert!(f.to_string().starts_with(&format!(
        "error[T018 name-mismatch]: tables/harness.ron:{line}:{col}: "
    )));
    // The same file under its own name is fine, and so are all built-ins.
    let own = crate::common::harness_table::SOURCE;
    registry_check_source(own, "tables/harness.ron").unwrap();
    for (name, file, src) in BUILTIN {
        let t = registry_check_source(src, file).unwrap();
        assert_eq!(&t.name, name);
    }
}

/// `frame.ron` holding the harness table is checked against the `frame`
/// binding, and its findings say so.
#[test]
fn findings_name_the_protocol_of_the_file() {
    let findings = registry_check_source(crate::common::harness_table::SOURCE, "frame.ron")
        .expect_err("the harness table is not a frame table");
    let binding: Vec<_> = findings
        .0
        .iter()
        .filter(|f| matches!(f.code, Code::NotInBinding | Code::MissingFromTable))
        .collect();
    assert!(!binding.is_empty(), "{findings}");
    for f in binding {
        assert!(
            f.message.contains("the `frame` protocol's Rust binding"),
            "{f}"
        );
        assert!(!f.message.contains("`harness` protocol"), "{f}");
    }
}

/// A file that is not UTF-8 is reported with the offset of its first bad
/// byte, and the other files are still checked.
#[test]
fn a_file_that_is_not_utf8_is_located_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = builtin("frame").as_bytes().to_vec();
    let at = bytes.len() / 2;
    bytes.insert(at, 0xff);
    std::fs::write(dir.path().join("aaa.ron"), &bytes).unwrap();
    std::fs::write(dir.path().join("turn.ron"), builtin("turn")).unwrap();
    let d = dir.path().to_str().unwrap();
    let out = run(&["tables", "check", d], 60);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!("{d}/aaa.ron: not UTF-8 at byte {at}")),
        "{stderr}"
    );
    assert!(stdout.contains(&format!("ok  {d}/turn.ron")), "{stdout}");
}

/// A named pipe called `*.ron` is not read: `tables check` skips it with a
/// notice, `tables diff` refuses it, and neither hangs.
#[test]
fn a_named_pipe_does_not_hang_the_table_tools() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("x.ron");
    mkfifo(&fifo);
    std::fs::write(dir.path().join("frame.ron"), builtin("frame")).unwrap();
    let d = dir.path().to_str().unwrap();
    let out = run(&["tables", "check", d], 60);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stderr.contains("x.ron: not a regular file"), "{stderr}");
    assert!(stdout.contains("frame.ron"), "{stdout}");

    let frame = dir.path().join("frame.ron");
    for args in [
        [fifo.to_str().unwrap(), frame.to_str().unwrap()],
        [frame.to_str().unwrap(), fifo.to_str().unwrap()],
    ] {
        let out = run(&["tables", "diff", args[0], args[1]], 60);
        assert_eq!(out.status.code(), Some(2));
        assert!(
            text(&out.stderr).contains("x.ron: not a regular file"),
            "{}",
            text(&out.stderr)
        );
    }
    // An override directory holding a pipe named after a protocol.
    let over = tempfile::tempdir().unwrap();
    mkfifo(&over.path().join("frame.ron"));
    let err = TableSet::load(Some(over.path())).unwrap_err().to_string();
    assert!(err.contains("frame.ron: not a regular file"), "{err}");
}

/// `--tables DIR` with no such directory is an error, never a silent
/// fall-back to the compiled-in tables.
#[test]
fn a_missing_tables_directory_is_an_error() {
    let err = TableSet::load(Some(Path::new("/nonexistent/tables")))
        .unwrap_err()
        .to_string();
    assert!(err.contains("/nonexistent/tables"), "{err}");

    for args in [
        &[
            "replay",
            "frame",
            "start",
            "--tables",
            "/nonexistent/tables",
        ][..],
        &[
            "replay",
            "tables/frame.ron",
            "start",
            "--tables",
            "/nonexistent/tables",
        ],
        &[
            "tables",
            "render",
            "frame",
            "--tables",
            "/nonexistent/tables",
        ],
    ] {
        let out = run(args, 60);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(text(&out.stdout).is_empty(), "{args:?}");
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("table directory /nonexistent/tables: No such file"),
            "{args:?}: {stderr}"
        );
    }
    // `demo` would otherwise start serving on the built-in tables.
    let db = tempfile::tempdir().unwrap();
    let db = db.path().join("demo.db");
    let out = run(
        &[
            "demo",
            "--addr",
            "127.0.0.1:0",
            "--db",
            db.to_str().unwrap(),
            "--tables",
            "/nonexistent/tables",
        ],
        60,
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("table directory /nonexistent/tables"),
        "{stderr}"
    );
}

/// `tables render NAME --format ron` prints the table with every group
/// expanded into its rows: a file that `tables check` accepts, in which
/// `tables diff` finds no behavioural change, with the hash `--format json`
/// reports for the grouped file.
#[test]
fn the_ron_rendering_is_the_table_with_every_row_explicit() {
    assert!(builtin("narration").contains("ForbiddenEach("));
    let out = run(&["tables", "render", "narration", "--format", "ron"], 60);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ron = text(&out.stdout);
    assert!(!ron.contains("ForbiddenEach"), "{ron}");
    assert!(
        ron.contains("        Forbidden(id: \"after-verdict-sentence-end\", from: \"Passed\", on: \"sentence_end\", why: \"A sentence is judged once"),
        "{ron}"
    );

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("narration.ron");
    std::fs::write(&path, &ron).unwrap();
    let d = dir.path().to_str().unwrap();
    let check = run(&["tables", "check", d], 60);
    assert!(check.status.success(), "{}", text(&check.stderr));

    let json = run(&["tables", "render", "narration", "--format", "json"], 60);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let expanded = registry_check_source(&ron, "narration.ron").unwrap();
    assert_eq!(json["hash"], expanded.hash.as_str());

    let diff = run(
        &[
            "tables",
            "diff",
            "tables/narration.ron",
            path.to_str().unwrap(),
        ],
        60,
    );
    assert!(diff.status.success(), "{}", text(&diff.stderr));
    assert_eq!(text(&diff.stdout), "no behavioural change\n");
}
