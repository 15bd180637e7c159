//! The harness itself (`tables/harness.ron`, run by `common::harness`): a
//! verdict exists only after the substrate passed its check, and the check
//! is real. Broken on purpose here:
//!
//! - a server started on an edited `frame` table, while the test checks
//!   frames with the built-in one, fails the probe naming the table and
//!   both hashes; the run is `Void` and the harness table refuses every
//!   verdict (and everything else) from there;
//! - the same edited table, loaded by the test as its own, passes the
//!   probe: the mismatch, not the edit, voided the run;
//! - a server dropped without a verdict fails the test.

use crate::common;

use std::path::Path;

use crate::common::harness_table::{HarnessEvent, HarnessState};
use common::frames::{has, FrameKind};
use common::server::TestServer;
use turnstile::protocols::TableSet;

/// A tables directory whose `frame.ron` forbids citing (`cite`, a legal row
/// of the built-in table, made forbidden under the same id).
fn edited_frame_table(dir: &Path) {
    let src =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tables/frame.ron"))
            .unwrap();
    let start = src
        .find("Legal(id: \"cite\"")
        .expect("frame.ron has a legal row `cite`");
    let end = start + src[start..].find("),").unwrap() + 2;
    let edited = format!(
        "{}Forbidden(id: \"cite\", from: \"Working\", on: \"citation\", why: \"Edited to break the substrate.\"),{}",
        &src[..start],
        &src[end..]
    );
    assert!(
        src[start..end].contains("from: \"Working\", on: \"citation\""),
        "the row edited is the one named: {}",
        &src[start..end]
    );
    std::fs::write(dir.join("frame.ron"), edited).unwrap();
}

#[tokio::test]
async fn a_server_on_another_frame_table_gets_no_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    edited_frame_table(tmp.path());
    let served = TableSet::load(Some(tmp.path())).expect("the edited table loads");
    let builtin = TableSet::builtin().unwrap();
    let (served_hash, own_hash) = (
        served.get("frame").unwrap().hash.clone(),
        builtin.get("frame").unwrap().hash.clone(),
    );
    assert_ne!(served_hash, own_hash, "the edit changes the table");

    // The server loads the edited table; the test would check its frames
    // with the built-in one.
    let broken = TestServer::builder()
        .tables_dir(tmp.path())
        .test_tables(TableSet::builtin().unwrap())
        .try_start()
        .await
        .err()
        .expect("the substrate check fails");
    let reason = &broken.reason;
    assert!(
        reason.contains("table `frame`: hash mismatch"),
        "the probe names the table: {reason}"
    );
    assert!(
        reason.contains(&format!(
            "the server serves {served_hash}, the test's own table is {own_hash}"
        )),
        "the probe names both hashes: {reason}"
    );
    assert!(
        !reason.contains("table `turn`"),
        "only the edited table is named: {reason}"
    );

    // The run is void through the table's own rows, and no verdict, nor
    // anything else, follows.
    let mut harness = broken.harness;
    assert_eq!(harness.state(), HarnessState::Void);
    assert_eq!(
        harness.untyped().trace_ids().collect::<Vec<_>>(),
        ["begin-probe", "substrate-void"]
    );
    for (event, row) in [
        (HarnessEvent::Pass, "pass-after-void"),
        (HarnessEvent::Fail, "fail-after-void"),
        (HarnessEvent::Run, "run-after-void"),
        (HarnessEvent::Probe, "probe-after-void"),
        (HarnessEvent::SubstrateOk, "ok-after-void"),
        (HarnessEvent::SubstrateBroken, "broken-after-void"),
    ] {
        let v = harness.fire(event).expect_err("a void run takes nothing");
        assert_eq!(v.row_id, row, "{event:?}");
        assert_eq!(harness.state(), HarnessState::Void);
    }

    // The same edited table, loaded by the test as its own: the probe
    // passes, and the turn runs under it (no citation may be sent).
    let s = TestServer::builder().tables_dir(tmp.path()).start().await;
    assert_eq!(s.tables().get("frame").unwrap().hash, served_hash);
    let thread = s.new_thread().await;
    let frames = s.say(&thread, "show safety issues on floor 3").await;
    assert!(!has(&frames, FrameKind::Citation), "{frames:?}");
    assert!(has(&frames, FrameKind::Error), "{frames:?}");
    s.pass();
}

/// `start` (not `try_start`) on a broken substrate fails the test itself.
#[tokio::test]
#[should_panic(expected = "substrate check failed: TestServer at http://")]
async fn starting_on_a_broken_substrate_fails_the_test() {
    let tmp = tempfile::tempdir().unwrap();
    edited_frame_table(tmp.path());
    let _never = TestServer::builder()
        .tables_dir(tmp.path())
        .test_tables(TableSet::builtin().unwrap())
        .start()
        .await;
}

/// A server whose scenario never gave its verdict fails the test when it
/// is dropped; one that did is `Verdict` by `scenario-passed`.
#[test]
fn a_server_dropped_without_a_verdict_fails_the_test() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _in = rt.enter();
    let s = rt.block_on(TestServer::builder().start());
    assert_eq!(s.harness_state(), HarnessState::Running);
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(s)));
    let message = dropped
        .expect_err("a server dropped without a verdict fails the test")
        .downcast::<String>()
        .map(|m| *m)
        .unwrap_or_default();
    assert!(
        message.contains("dropped without a verdict"),
        "the failure says why: {message}"
    );

    let s = rt.block_on(TestServer::builder().start());
    s.pass();
}
