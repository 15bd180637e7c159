//! The validator, on a small table of its own (`tests/fixtures/door.ron`):
//! one broken fixture per rule, each with its full error output as a
//! snapshot (`snapshots/`), and row groups. The product's tables are
//! validated with their bindings in the workspace's suite
//! (`tests/table_validation.rs` at the root).

use turnstile_fsm::schema::{self, EventSet, RawRow};
use turnstile_fsm::{self as fsm, spans, BindingNames, Code, RowKind, Table};

fn snapshot_settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots"));
    s.set_prepend_module_to_snapshot(true);
    s
}

const DOOR: BindingNames<'static> = BindingNames {
    states: &["Closed", "Open", "Gone"],
    events: &["open", "close", "remove"],
    effects: &["creak"],
    invariants: &[],
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
    snapshot_settings()
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
fn open_group_on_working_state() {
    check_fixture("open-group-on-working-state", Code::OpenGroupOnWorkingState)
}
#[test]
fn group_overlap() {
    check_fixture("group-overlap", Code::GroupOverlap);
    let f = findings_of("group-overlap");
    let overlaps: Vec<_> = f.iter().filter(|f| f.code == Code::GroupOverlap).collect();
    assert_eq!(
        overlaps.len(),
        2,
        "a group over a row, a group over a group"
    );
    assert!(overlaps[0].message.contains("row \"open-gone\""));
    assert!(overlaps[1].message.contains("group \"{on-id}-gone\""));
    // No second finding for the same pairs, no duplicate ids from them.
    assert_eq!(f.len(), 2, "{f:?}");
}
#[test]
fn unknown_placeholder() {
    check_fixture("unknown-placeholder", Code::UnknownPlaceholder);
    let f = findings_of("unknown-placeholder");
    assert_eq!(
        f.iter().map(|f| f.code).collect::<Vec<_>>(),
        [Code::UnknownPlaceholder, Code::UnknownPlaceholder],
        "one for `id`, one for `why`, and no malformed ids from the literal template: {f:?}"
    );
}
#[test]
fn empty_group() {
    check_fixture("empty-group", Code::EmptyGroup)
}

fn findings_of(name: &str) -> Vec<fsm::Finding> {
    let path = format!("tests/fixtures/broken/{name}.ron");
    let src = std::fs::read_to_string(&path).unwrap();
    fsm::load(&src, &path, Some(DOOR)).unwrap_err().0
}

/// Lines of a source that hold a group.
fn group_lines(src: &str) -> Vec<u32> {
    src.lines()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with("ForbiddenEach("))
        .map(|(i, _)| i as u32 + 1)
        .collect()
}

/// The rules every row follows hold for the rows of a group, and each such
/// finding is said once per group, located in the group's entry.
#[test]
fn findings_inside_groups_are_located_at_the_group() {
    check_fixture("group-findings", Code::MalformedId);
    let src = std::fs::read_to_string("tests/fixtures/broken/group-findings.ron").unwrap();
    let groups = group_lines(&src);
    let f = findings_of("group-findings");
    let mut codes: Vec<Code> = f.iter().map(|f| f.code).collect();
    codes.sort();
    assert_eq!(
        codes,
        [
            Code::UnknownState,
            Code::UnknownEvent,
            Code::DuplicateId,
            Code::MalformedId,
            Code::EmptyReason
        ],
        "{f:?}"
    );
    for finding in &f {
        assert!(groups.contains(&finding.pos.line), "{finding}");
    }
}

/// `door-grouped.ron` says the removed door's three rows as one group: it is
/// the same table as `door.ron`, row for row, with the same hash, so a
/// machine stored under one restores under the other (ADR 0002).
#[test]
fn a_grouped_table_and_its_hand_expanded_equivalent_have_one_hash() {
    let load = |path: &str| {
        let src = std::fs::read_to_string(path).unwrap();
        fsm::load(&src, path, Some(DOOR)).unwrap()
    };
    let (grouped, expanded) = (
        load("tests/fixtures/door-grouped.ron"),
        load("tests/fixtures/door.ron"),
    );
    assert_eq!(grouped.hash, expanded.hash);
    assert_eq!(behaviour(&grouped), behaviour(&expanded));
    assert_eq!(grouped.raw, expanded.raw);
    // The group's rows are located at the group.
    let src = std::fs::read_to_string("tests/fixtures/door-grouped.ron").unwrap();
    let line = group_lines(&src)[0];
    for id in ["open-gone", "close-gone", "remove-gone"] {
        let r = &grouped.rows[grouped.row_index(id).unwrap() as usize];
        assert_eq!(r.pos.line, line, "{id}");
    }
    // A machine stored under the expanded table restores under the grouped one.
    let expanded = std::sync::Arc::new(expanded);
    let mut m = fsm::Machine::new(expanded.clone());
    m.fire(expanded.event_index("open").unwrap()).unwrap();
    let snap = m.snapshot();
    fsm::Machine::restore(std::sync::Arc::new(grouped), &snap).expect("same hash restores");
}

/// What decides behaviour, row by row: (id, from, on, kind).
fn behaviour(t: &Table) -> Vec<(String, String, String, RowKind)> {
    t.rows
        .iter()
        .map(|r| {
            (
                r.id.clone(),
                t.states[r.from as usize].clone(),
                t.events[r.on as usize].clone(),
                r.kind.clone(),
            )
        })
        .collect()
}

/// A closed group (`Only`) may forbid events in a working state; opening it
/// there is refused at the working state's name.
#[test]
fn only_a_closed_group_may_cover_a_working_state() {
    let src = std::fs::read_to_string("tests/fixtures/door.ron").unwrap();
    let mut raw = schema::parse(&src).unwrap();
    // The closed door's two forbidden rows, as one closed group.
    raw.rows
        .retain(|r| !matches!(r.id(), "close-closed" | "remove-closed"));
    raw.rows.insert(
        1,
        RawRow::ForbiddenEach {
            id: "{on-id}-{from-id}".into(),
            from: vec!["Closed".into()],
            on: EventSet::Only(vec!["close".into(), "remove".into()]),
            why: "The door is closed.".into(),
        },
    );
    let t = fsm::load(&raw.to_ron(), "door.ron", Some(DOOR)).unwrap();
    assert!(t.row_index("close-closed").is_some() && t.row_index("remove-closed").is_some());
    // The same group, open: refused, at "Closed".
    if let RawRow::ForbiddenEach { on, .. } = &mut raw.rows[1] {
        *on = EventSet::AllExcept(vec!["open".into()]);
    }
    let text = raw.to_ron();
    let f = fsm::load(&text, "door.ron", Some(DOOR)).unwrap_err().0;
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].code, Code::OpenGroupOnWorkingState);
    let at = spans::index(&text).row_value(1, "from", 0);
    assert_eq!(f[0].pos, at);
}

/// Any one character of a group's entry replaced by punctuation or a
/// letter never panics the loader: the table loads or gives findings.
#[test]
fn no_edit_of_a_group_panics_the_loader() {
    let src = std::fs::read_to_string("tests/fixtures/door-grouped.ron").unwrap();
    let line = group_lines(&src)[0] as usize;
    let start: usize = src.lines().take(line - 1).map(|l| l.len() + 1).sum();
    let end = start + src.lines().nth(line - 1).unwrap().len();
    let mut loaded = 0;
    for at in start..end {
        for c in ['{', '}', '"', '[', ']', '(', ')', ',', 'X', '_'] {
            let mut edited = src.clone();
            edited.replace_range(at..at + 1, &c.to_string());
            if fsm::load(&edited, "door.ron", Some(DOOR)).is_ok() {
                loaded += 1;
            }
        }
    }
    assert!(loaded > 0, "some edits (inside `why`) still load");
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
    let src = include_str!("validator.rs");
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

/// A binding's invariants (issue 36): a table that keeps them loads; one
/// whose legal row breaks one fails, located at the row, whatever else the
/// table says.
#[test]
fn invariants_are_checked_at_load_and_located_at_the_row() {
    use fsm::Invariant;
    let src = std::fs::read_to_string("tests/fixtures/door.ron").unwrap();
    let kept = BindingNames {
        invariants: &[
            Invariant::Forbid {
                event: "open",
                from: &["Open"],
                why: "an open door is never opened again",
            },
            Invariant::LegalOnlyWith {
                event: "close",
                effect: "creak",
                why: "closing is heard",
            },
            Invariant::EffectEndsIn {
                effect: "creak",
                to: &["Open", "Closed"],
                why: "a creak is a door that stays",
            },
        ],
        ..DOOR
    };
    fsm::load(&src, "door.ron", Some(kept)).expect("a table that keeps its invariants loads");

    let broken = BindingNames {
        invariants: &[
            Invariant::Forbid {
                event: "remove",
                from: &[],
                why: "a door is never removed",
            },
            Invariant::LegalOnlyWith {
                event: "open",
                effect: "creak",
                why: "opening is heard",
            },
            Invariant::EffectEndsIn {
                effect: "creak",
                to: &["Open"],
                why: "only opening creaks",
            },
        ],
        ..DOOR
    };
    let findings = fsm::load(&src, "door.ron", Some(broken)).expect_err("broken invariants");
    let got: Vec<(u32, &str)> = findings
        .0
        .iter()
        .map(|f| (f.pos.line, f.code.id()))
        .collect();
    // `remove-door` (line 16) is legal; `close-door` (line 15) creaks into
    // Closed. `open-door` creaks, as required.
    assert_eq!(got, vec![(15, "T023"), (16, "T023")], "{findings}");
    let text = findings.to_string();
    assert!(
        text.contains("row \"remove-door\" makes (Open, remove) legal"),
        "{text}"
    );
    assert!(text.contains("a door is never removed"), "{text}");
    assert!(text.contains("ends in \"Closed\""), "{text}");

    // An edited table that forbids the pair loads again.
    let edited = src.replace(
        r#"Legal(id: "remove-door", from: "Open", on: "remove", to: "Gone"),"#,
        r#"Forbidden(id: "remove-door", from: "Open", on: "remove", why: "Doors stay."),"#,
    );
    let only_forbid = BindingNames {
        invariants: &broken.invariants[..1],
        ..DOOR
    };
    // `Gone` is then unreachable: that finding, not the invariant's.
    let findings = fsm::load(&edited, "door.ron", Some(only_forbid)).expect_err("unreachable");
    assert!(
        findings.0.iter().all(|f| f.code != Code::InvariantBroken),
        "{findings}"
    );
}

#[test]
fn precedence_orders_events_found_at_once_and_is_checked_at_load() {
    use fsm::Invariant;
    let src = std::fs::read_to_string("tests/fixtures/door.ron").unwrap();
    let ranked = src.replace(
        "    effects: [\"creak\"],\n",
        "    effects: [\"creak\"],\n    precedence: [\"remove\", \"close\"],\n",
    );
    // Line 10 is the `precedence` list.
    assert!(ranked.lines().nth(9).unwrap().contains("precedence"));
    let t = fsm::load(&ranked, "door.ron", Some(DOOR)).expect("a ranked table loads");
    let ev = |n: &str| t.event_index(n).unwrap();
    // Listed events by rank; an unlisted one after every listed one.
    assert_eq!(t.first_of(&[ev("close"), ev("remove")]), Some(ev("remove")));
    assert_eq!(t.first_of(&[ev("open"), ev("close")]), Some(ev("close")));
    assert_eq!(t.first_of(&[ev("open")]), Some(ev("open")));
    assert_eq!(t.first_of(&[]), None);
    // Renumbered for a binding, the ranks follow their events.
    let r = t
        .reordered(
            &["Gone", "Open", "Closed"],
            &["remove", "open", "close"],
            &["creak"],
        )
        .unwrap();
    assert_eq!(
        r.first_of(&[2, 0]),
        Some(0),
        "remove is index 0 after renumbering"
    );
    // It renders, and reads back the same.
    let md = fsm::render::markdown(&t);
    assert!(md.contains("`remove` > `close`"), "{md}");
    assert_eq!(
        fsm::schema::parse(&t.raw.to_ron()).unwrap().precedence,
        ["remove", "close"]
    );
    // The hash covers it: the order decides behaviour.
    let plain = fsm::load(&src, "door.ron", Some(DOOR)).unwrap();
    assert_ne!(plain.hash, t.hash);
    // And `tables diff` reports it: a reviewer sees a reordering.
    let changes: Vec<String> = fsm::diff::diff(&plain, &t)
        .iter()
        .map(|c| c.to_string())
        .collect();
    assert_eq!(
        changes,
        ["~ (precedence, -): (none)\n      now: remove > close"],
        "{changes:?}"
    );

    // An undeclared or repeated name is located in the list.
    let bad = src.replace(
        "    effects: [\"creak\"],\n",
        "    effects: [\"creak\"],\n    precedence: [\"close\", \"slam\", \"close\"],\n",
    );
    let f = fsm::load(&bad, "door.ron", Some(DOOR)).expect_err("bad precedence");
    let got: Vec<(u32, u32, &str)> =
        f.0.iter()
            .map(|f| (f.pos.line, f.pos.col, f.code.id()))
            .collect();
    assert_eq!(got, vec![(10, 27, "T003"), (10, 35, "T016")], "{f}");

    // The binding's ranking invariants.
    let needs = BindingNames {
        invariants: &[
            Invariant::Ranked {
                events: &["open", "close"],
                why: "opening and closing can be asked at once",
            },
            Invariant::Precedes {
                first: "close",
                then: &["remove"],
                why: "a door is closed before it goes",
            },
        ],
        ..DOOR
    };
    let f = fsm::load(&ranked, "door.ron", Some(needs)).expect_err("broken ranking");
    let text = f.to_string();
    assert!(
        f.0.iter()
            .all(|f| f.code == Code::InvariantBroken && f.pos.line == 10),
        "{text}"
    );
    assert!(text.contains("does not rank \"open\""), "{text}");
    assert!(
        text.contains("must rank \"close\" before \"remove\""),
        "{text}"
    );
    let kept = ranked.replace(r#"["remove", "close"]"#, r#"["open", "close", "remove"]"#);
    fsm::load(&kept, "door.ron", Some(needs)).expect("a table that keeps its ranking loads");
}

#[test]
fn a_required_row_is_checked_whether_legal_or_forbidden() {
    use fsm::Invariant;
    let src = std::fs::read_to_string("tests/fixtures/door.ron").unwrap();
    let kept = BindingNames {
        invariants: &[Invariant::RowIs {
            from: "Closed",
            event: "open",
            effect: "creak",
            why: "a closed door creaks open",
        }],
        ..DOOR
    };
    fsm::load(&src, "door.ron", Some(kept)).expect("the row is as required");
    let broken = BindingNames {
        invariants: &[
            Invariant::RowIs {
                from: "Open",
                event: "remove",
                effect: "creak",
                why: "removing is heard",
            },
            Invariant::RowIs {
                from: "Closed",
                event: "close",
                effect: "creak",
                why: "closing a closed door is heard",
            },
        ],
        ..DOOR
    };
    let f = fsm::load(&src, "door.ron", Some(broken)).expect_err("two rows not as required");
    let got: Vec<(u32, &str)> = f.0.iter().map(|f| (f.pos.line, f.code.id())).collect();
    assert_eq!(got, vec![(12, "T023"), (16, "T023")], "{f}");
    let text = f.to_string();
    assert!(text.contains("makes (Closed, close) forbidden"), "{text}");
    assert!(
        text.contains("makes (Open, remove) legal with effect none"),
        "{text}"
    );
}
