//! The validator: one broken fixture per rule, each with its full error
//! output as a snapshot, and mutations of the real tables.

mod common;

use turnstile::fsm::{self, BindingNames, Code};
use turnstile::protocols::{registry_check_source, BUILTIN};

const DOOR: BindingNames<'static> = BindingNames {
    states: &["Closed", "Open", "Gone"],
    events: &["open", "close", "remove"],
    effects: &["creak"],
};

fn check_fixture(name: &str, expect: Code) {
    let path = format!("tests/fixtures/broken/{name}.ron");
    let src = std::fs::read_to_string(&path).expect("fixture exists");
    let findings = fsm::load(&src, &path, Some(DOOR)).expect_err("a broken fixture must not load");
    assert!(
        findings.0.iter().any(|f| f.code == expect),
        "{name}: expected a {} finding, got:\n{findings}",
        expect.name()
    );
    common::snapshot_settings()
        .bind(|| insta::assert_snapshot!(format!("broken-{name}"), findings.to_string()));
}

#[test]
fn the_base_fixture_is_valid() {
    let src = std::fs::read_to_string("tests/fixtures/door.ron").unwrap();
    let t = fsm::load(&src, "door.ron", Some(DOOR)).unwrap();
    assert_eq!(t.rows.len(), 9);
}

#[test]
fn syntax() {
    check_fixture("syntax", Code::Syntax)
}
#[test]
fn unknown_state() {
    check_fixture("unknown-state", Code::UnknownState)
}
#[test]
fn unknown_event() {
    check_fixture("unknown-event", Code::UnknownEvent)
}
#[test]
fn missing_pair() {
    check_fixture("missing-pair", Code::MissingPair)
}
#[test]
fn duplicate_pair() {
    check_fixture("duplicate-pair", Code::DuplicatePair)
}
#[test]
fn duplicate_id() {
    check_fixture("duplicate-id", Code::DuplicateId)
}
#[test]
fn malformed_id() {
    check_fixture("malformed-id", Code::MalformedId)
}
#[test]
fn undeclared_initial() {
    check_fixture("undeclared-initial", Code::UndeclaredInitial)
}
#[test]
fn undeclared_terminal() {
    check_fixture("undeclared-terminal", Code::UndeclaredTerminal)
}
#[test]
fn legal_from_terminal() {
    check_fixture("legal-from-terminal", Code::LegalFromTerminal)
}
#[test]
fn unreachable_state() {
    check_fixture("unreachable-state", Code::UnreachableState)
}
#[test]
fn trap_state() {
    check_fixture("trap-state", Code::TrapState)
}
#[test]
fn unknown_effect() {
    check_fixture("unknown-effect", Code::UnknownEffect)
}
#[test]
fn not_in_binding() {
    check_fixture("not-in-binding", Code::NotInBinding)
}
#[test]
fn missing_from_table() {
    check_fixture("missing-from-table", Code::MissingFromTable)
}
#[test]
fn duplicate_declaration() {
    check_fixture("duplicate-declaration", Code::DuplicateDeclaration)
}
#[test]
fn empty_reason() {
    check_fixture("empty-reason", Code::EmptyReason)
}
#[test]
fn many_findings_are_all_reported() {
    check_fixture("many-findings", Code::UndeclaredInitial);
    let src = std::fs::read_to_string("tests/fixtures/broken/many-findings.ron").unwrap();
    let codes: Vec<Code> = fsm::load(&src, "x", Some(DOOR))
        .unwrap_err()
        .0
        .iter()
        .map(|f| f.code)
        .collect();
    for c in [
        Code::UndeclaredInitial,
        Code::UnknownState,
        Code::MalformedId,
    ] {
        assert!(codes.contains(&c), "{c:?} missing from {codes:?}");
    }
}

/// Every fixture in the folder is covered by a test above.
#[test]
fn every_fixture_has_a_test() {
    let src = std::fs::read_to_string(file!()).unwrap();
    for e in std::fs::read_dir("tests/fixtures/broken").unwrap() {
        let name = e
            .unwrap()
            .path()
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .to_string();
        assert!(
            src.contains(&format!("\"{name}\"")),
            "fixture {name} has no test"
        );
    }
}

/// Lines of a table's source that hold a row, with their 1-based numbers.
fn row_lines(src: &str) -> Vec<(usize, &str)> {
    src.lines()
        .enumerate()
        .filter(|(_, l)| {
            let t = l.trim_start();
            t.starts_with("Legal(") || t.starts_with("Forbidden(")
        })
        .map(|(i, l)| (i + 1, l))
        .collect()
}

fn mutate(src: &str, line: usize, f: impl Fn(&str) -> String) -> String {
    src.lines()
        .enumerate()
        .map(|(i, l)| if i + 1 == line { f(l) } else { l.to_string() })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Deleting any one row of a real table makes it fail to load.
#[test]
fn deleting_any_row_fails() {
    for (_, file, src) in BUILTIN {
        for (line, text) in row_lines(src) {
            let broken = mutate(src, line, |_| String::new());
            let f = registry_check_source(&broken, file).expect_err("a deleted row must not load");
            assert!(
                f.0.iter().any(|x| x.code == Code::MissingPair),
                "{file}:{line} deleted ({text}) but got:\n{f}"
            );
        }
    }
}

/// Duplicating any one row fails, pointing at the copy's line.
#[test]
fn duplicating_any_row_fails_at_the_copy() {
    for (_, file, src) in BUILTIN {
        for (line, text) in row_lines(src) {
            let broken = mutate(src, line, |l| format!("{l}\n{l}"));
            let f =
                registry_check_source(&broken, file).expect_err("a duplicated row must not load");
            assert!(
                f.0.iter()
                    .any(|x| x.code == Code::DuplicatePair && x.pos.line as usize == line + 1),
                "{file}:{line} duplicated ({text}) but got:\n{f}"
            );
        }
    }
}

/// Misspelling the `from` state of any row fails at that row's line.
#[test]
fn misspelling_a_state_in_any_row_fails_at_that_line() {
    for (_, file, src) in BUILTIN {
        for (line, text) in row_lines(src) {
            let broken = mutate(src, line, |l| l.replacen("from: \"", "from: \"X", 1));
            let f =
                registry_check_source(&broken, file).expect_err("a misspelt state must not load");
            assert!(
                f.0.iter()
                    .any(|x| x.code == Code::UnknownState && x.pos.line as usize == line),
                "{file}:{line} misspelt ({text}) but got:\n{f}"
            );
        }
    }
}
