//! Forbidden rows reached at run time. For every table the server runs
//! (`frame`, `turn`, `narrowing`, `paging`), an edited copy in a
//! `tables_dir` override forbids a row the normal code takes, and the same
//! server binary then ends the turn at that row: the user sees an `error`
//! frame naming the table and the row id, and the thread stores it like any
//! other frame. The unedited tables finish the same turn, so the table, not
//! the code, decided.
//!
//! Also: a narrowing follow-up restores the machine that judged the previous
//! results; a table edited between the two turns is reported with both
//! hashes and never reinterpreted.

use crate::common;

use std::path::Path;

use turnstile::wire::Frame;

use common::frames::{answer, has, is_done, kinds, tool_results, FrameKind};
use common::server::{sqlite_in, TestServer};

/// A copy of the built-in `table` with the legal row `row` replaced by a
/// forbidden row of the same id, in a fresh override directory.
fn forbid(dir: &Path, table: &str, row: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tables")
        .join(format!("{table}.ron"));
    let src = std::fs::read_to_string(path).unwrap();
    let start = src
        .find(&format!("Legal(id: \"{row}\""))
        .unwrap_or_else(|| panic!("{table}.ron has a legal row {row}"));
    let end = start + src[start..].find("),").unwrap() + 2;
    let line = &src[start..end];
    let from = field(line, "from");
    let on = field(line, "on");
    let forbidden = format!(
        "Forbidden(id: \"{row}\", from: \"{from}\", on: \"{on}\", why: \"Forbidden by a reviewer for this test.\"),"
    );
    let edited = format!("{}{}{}", &src[..start], forbidden, &src[end..]);
    std::fs::write(dir.join(format!("{table}.ron")), edited).unwrap();
}

fn field<'a>(line: &'a str, name: &str) -> &'a str {
    let i = line.find(&format!("{name}: \"")).unwrap() + name.len() + 3;
    &line[i..i + line[i..].find('"').unwrap()]
}

fn the_error(frames: &[Frame]) -> &turnstile::wire::Error {
    match frames.last() {
        Some(Frame::Error(e)) => e,
        other => panic!(
            "the turn ends with an error frame, not {other:?}: {:?}",
            kinds(frames)
        ),
    }
}

async fn ends_at_row(table: &str, row: &str, prompt: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let db = sqlite_in(tmp.path(), "t.db");

    // The built-in tables finish this turn.
    let s = TestServer::builder().database(&db).start().await;
    let thread = s.new_thread().await;
    let frames = s.say(&thread, prompt).await;
    assert!(is_done(&frames), "{table}: {:?}", kinds(&frames));
    s.pass_and_stop().await;

    // The same binary with the row forbidden ends it at that row (the
    // harness proved the server runs the edited table: the test loaded it
    // too, and checks the frames with its `frame` table).
    let dir = tmp.path().join("tables");
    std::fs::create_dir(&dir).unwrap();
    forbid(&dir, table, row);
    let s = TestServer::builder()
        .database(&db)
        .tables_dir(&dir)
        .start()
        .await;
    assert_ne!(
        s.tables().get(table).unwrap().hash,
        turnstile::protocols::TableSet::builtin()
            .unwrap()
            .get(table)
            .unwrap()
            .hash,
        "the server runs the edited {table} table"
    );
    let thread = s.new_thread().await;
    let frames = s.say(&thread, prompt).await;
    let e = the_error(&frames);
    assert_eq!(e.table.as_deref(), Some(table), "{e:?}");
    assert_eq!(e.row_id.as_deref(), Some(row), "{e:?}");
    assert!(e.message.contains("Forbidden by a reviewer"), "{e:?}");
    assert!(!has(&frames, FrameKind::Done));
    assert_eq!(
        s.stored_errors(&thread).await,
        [(Some(table.to_string()), Some(row.to_string()))],
        "the error frame is stored like any other"
    );
    let metrics = s
        .http
        .get(format!("{}/v1/metrics", s.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let line = format!("table=\"{table}\",row=\"{row}\",kind=\"forbidden\"");
    assert!(metrics.contains(&line), "{line} in\n{metrics}");
    s.pass();
}

#[tokio::test]
async fn the_turn_table_decides_whether_the_planner_is_asked_again() {
    ends_at_row("turn", "plan-again", "show safety issues on floor 3").await;
}

/// Whether a request that refers to what the turn lacks is asked back is
/// the turn table's row, not the model's or the agent's choice.
#[tokio::test]
async fn the_turn_table_decides_that_a_missing_reference_is_asked_back() {
    ends_at_row(
        "turn",
        "ask-for-missing-reference",
        "show quality issues on this floor",
    )
    .await;
    ends_at_row("turn", "ask-for-missing-reference", "only those from April").await;
}

/// A search claimed without a result is the narration table's row: a
/// reviewer who makes "searched" legal there changes what the guard lets
/// through, with the same binary.
#[tokio::test]
async fn the_narration_table_decides_whether_a_search_may_be_claimed() {
    use turnstile::guard::check::Guard;
    use turnstile::guard::vocab::Lang;
    use turnstile::guard::warrant::Warrants;
    use turnstile::judge::Anchor;
    use turnstile::protocols::narration::Narration;
    use turnstile::protocols::TableSet;

    let sentence = "There were no earlier results to narrow, so this searched everything.";
    let judge = |set: &TableSet| {
        let table = set.bound::<Narration>().expect("narration binds");
        let mut g = Guard::new(
            &table,
            Warrants::from_anchors(&[Anchor::NothingToNarrow]),
            Lang::En,
            "What should I search for?".into(),
        );
        g.judge(sentence.into()).replaced.map(|r| r.row_id)
    };
    assert_eq!(
        judge(&TableSet::builtin().unwrap()).as_deref(),
        Some("search-claimed-without-result")
    );
    let tmp = tempfile::tempdir().unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tables/narration.ron");
    let src = std::fs::read_to_string(path).unwrap();
    let start = src
        .find("Forbidden(id: \"search-claimed-without-result\"")
        .unwrap();
    let end = start + src[start..].find("\"),\n").unwrap() + 3;
    let legal = "Legal(id: \"search-claimed-without-result\", from: \"Checking\", on: \"search_without_result\", to: \"Checking\", effect: \"pass\"),";
    let edited = format!("{}{legal}{}", &src[..start], &src[end..]);
    std::fs::write(tmp.path().join("narration.ron"), edited).unwrap();
    let set = TableSet::load(Some(tmp.path())).expect("the edited table loads");
    assert_eq!(judge(&set), None, "the edited table lets the claim pass");
}

#[tokio::test]
async fn a_forbidden_frame_row_ends_the_turn() {
    ends_at_row("frame", "cite", "show safety issues on floor 3").await;
}

#[tokio::test]
async fn a_forbidden_narrowing_row_ends_the_turn() {
    ends_at_row(
        "narrowing",
        "unscoped-partial",
        "show safety issues on floor 3",
    )
    .await;
}

#[tokio::test]
async fn a_forbidden_paging_row_ends_the_turn() {
    ends_at_row("paging", "append-more", "list all panoramas").await;
}

#[tokio::test]
async fn a_narrowing_table_edited_between_two_turns_is_reported_not_reinterpreted() {
    let tmp = tempfile::tempdir().unwrap();
    let db = sqlite_in(tmp.path(), "t.db");
    let s = TestServer::builder().database(&db).start().await;
    let thread = s.new_thread().await;
    let frames = s.say(&thread, "show safety issues on floor 3").await;
    assert!(has(&frames, FrameKind::Citation));
    s.pass_and_stop().await;

    // A reviewer retargets a row of the narrowing table; the server restarts.
    let dir = tmp.path().join("tables");
    std::fs::create_dir(&dir).unwrap();
    let src =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tables/narrowing.ron"))
            .unwrap();
    let edited = src.replace(
        "Legal(id: \"narrowed-sample\", from: \"Scoped\", on: \"page_partial\", to: \"Settled\", effect: \"keep-sample\")",
        "Legal(id: \"narrowed-sample\", from: \"Scoped\", on: \"page_partial\", to: \"Released\", effect: \"keep-sample\")",
    );
    assert_ne!(edited, src, "the edit applies");
    std::fs::write(dir.join("narrowing.ron"), edited).unwrap();
    let s = TestServer::builder()
        .database(&db)
        .tables_dir(&dir)
        .start()
        .await;
    let frames = s.say(&thread, "only those from April").await;
    let results = tool_results(&frames);
    assert_eq!(results.len(), 1, "{:?}", kinds(&frames));
    let r = results[0];
    assert!(!r.ok);
    assert!(r.summary.contains("changed since"), "{}", r.summary);
    assert!(
        r.summary.contains("saved hash") && r.summary.contains("current"),
        "{}",
        r.summary
    );
    assert!(
        !has(&frames, FrameKind::Citation),
        "nothing is narrowed under the new table"
    );
    assert!(
        answer(&frames).contains("cannot narrow"),
        "{}",
        answer(&frames)
    );
    assert!(is_done(&frames), "{:?}", kinds(&frames));
    s.pass();
}

/// A table that `tables check` accepts but that loops (asking for a call
/// when none is pending) ends the turn naming the row, instead of spinning.
#[tokio::test]
async fn a_turn_table_that_loops_ends_the_turn_at_its_row() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("tables");
    std::fs::create_dir(&dir).unwrap();
    let src =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tables/turn.ron"))
            .unwrap();
    let edited = src.replace(
        "Legal(id: \"plan-again\", from: \"Judging\", on: \"step_done\", to: \"Planning\", effect: \"plan\")",
        "Legal(id: \"plan-again\", from: \"Judging\", on: \"step_done\", to: \"Calling\", effect: \"call\")",
    );
    assert_ne!(edited, src);
    std::fs::write(dir.join("turn.ron"), edited).unwrap();
    let s = TestServer::builder().tables_dir(&dir).start().await;
    let thread = s.new_thread().await;
    let frames = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        s.say(&thread, "show safety issues on floor 3"),
    )
    .await
    .expect("the turn ends instead of spinning");
    let e = the_error(&frames);
    assert_eq!(e.table.as_deref(), Some("turn"));
    assert_eq!(e.row_id.as_deref(), Some("plan-again"));
    assert!(e.message.contains("none is pending"), "{e:?}");
    assert!(
        has(&frames, FrameKind::Citation),
        "what was judged is shown"
    );
    s.pass();
}
