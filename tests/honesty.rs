//! The honesty layer through the real path: HTTP/SSE, the real demo MCP
//! server (with its fault switches), SQLite. The seed's measured cases.
//! `narrowing_upgrades_and_releases_on_postgres` runs one of them on
//! PostgreSQL: ignored unless `--include-ignored`, where it needs
//! TURNSTILE_TEST_DATABASE_URL (ADR 0015).

use crate::common;

use common::frames::{answer, assert_done, citation, plan, stable, tool_calls, tool_results};
use common::server::{databases, TestServer};
use serde_json::{json, Value};
use turnstile::judge::narrowing::{Conflict, Scope};
use turnstile::judge::stitch::Anomaly;
use turnstile::judge::CountGrade;
use turnstile_demo::Fault;

/// A JSON-valued frame field (the plan's scope) read as the
/// judge's own type.
fn typed<T: serde::de::DeserializeOwned>(v: &Option<Value>) -> T {
    let v = v.clone().expect("the field is present");
    serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{e}: {v}"))
}

#[tokio::test]
async fn a_requested_page_is_never_called_all() {
    let s = TestServer::builder().start().await;
    let t = s.new_thread().await;
    let frames = s.say(&t, "show me 12 safety issues on floor 3").await;
    let c = citation(&frames).unwrap();
    assert_eq!((c.displayed, c.complete), (12, false));
    assert_eq!(c.grade, CountGrade::LowerBound.as_str());
    let text = answer(&frames);
    assert!(
        text.contains("At least 189") && text.contains("These 12"),
        "{text}"
    );
    assert!(!text.to_lowercase().contains("all of them"), "{text}");
    s.pass();
}

#[tokio::test]
async fn an_accounted_zero_is_empty() {
    let s = TestServer::builder().start().await;
    let t = s.new_thread().await;
    for prompt in ["show photos from 1999", "1999년 사진 보여줘"] {
        let frames = s.say(&t, prompt).await;
        let c = citation(&frames).unwrap();
        assert_eq!(
            (c.grade.as_str(), c.total, c.displayed),
            (CountGrade::Exact.as_str(), Some(0), 0)
        );
        let text = answer(&frames);
        assert!(
            text.contains("There are none") || text.contains("해당하는 항목이 없습니다"),
            "{text}"
        );
    }
    s.pass();
}

/// Each fault gives its own notice and no invented answer: no citation, no
/// number, no "none".
#[tokio::test]
async fn failures_disguised_as_200_are_failures() {
    for (fault, name) in [
        (Fault::Upstream502, "upstream-502"),
        (Fault::AuthEmptyObject, "auth-empty-object"),
    ] {
        let s = TestServer::builder().faults(vec![fault]).start().await;
        let t = s.new_thread().await;
        let frames = s.say(&t, "show safety issues on floor 3").await;
        let result = tool_results(&frames)[0];
        assert!(!result.ok, "{name}");
        assert!(
            citation(&frames).is_none(),
            "{name}: a failure must not produce a card"
        );
        let text = answer(&frames);
        assert!(
            text.contains("did not return a usable answer"),
            "{name}: {text}"
        );
        assert!(
            !text.chars().any(|c| c.is_ascii_digit()),
            "{name}: no number may be uttered: {text}"
        );
        assert!(
            !text.contains("none"),
            "{name}: a failure is not an absence: {text}"
        );
        assert_done(&frames, name);
        common::snapshot_settings()
            .bind(|| insta::assert_snapshot!(format!("fault-{name}"), stable(&frames)));
        s.pass();
    }
}

/// Narrowing a lower-bound population to a scope that fits upgrades the
/// count to EXACT with a complete card; narrowing to nothing releases it.
#[tokio::test]
async fn narrowing_upgrades_and_releases() {
    let tmp = tempfile::tempdir().unwrap();
    narrowing_upgrades_and_releases_on(&databases(&tmp)[0]).await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL: set TURNSTILE_TEST_DATABASE_URL, run with --include-ignored"]
async fn narrowing_upgrades_and_releases_on_postgres() {
    narrowing_upgrades_and_releases_on(&common::needs::postgres()).await;
}

async fn narrowing_upgrades_and_releases_on(db: &str) {
    let s = TestServer::builder().database(db).start().await;
    let t = s.new_thread().await;
    let wide = s.say(&t, "show safety issues on floor 3").await;
    assert_eq!(
        citation(&wide).unwrap().grade,
        CountGrade::LowerBound.as_str()
    );

    for (name, prompt) in [("en", "only those from April"), ("ko", "그중 4월 것만")] {
        let frames = s.say(&t, prompt).await;
        let p = plan(&frames).unwrap();
        // The scope came from turn state, not from the model.
        let scope: Scope = typed(&p.scope);
        assert_eq!(scope.args.get("floor"), Some(&json!(3)));
        assert_eq!(p.steps[0].args.get("query"), Some(&json!("safety")));
        let c = citation(&frames).unwrap();
        assert_eq!(c.grade, CountGrade::Exact.as_str(), "{prompt}");
        assert!(c.complete, "{prompt}");
        assert!(c.narrowed);
        assert_eq!(c.total, Some(c.displayed));
        // Items are the tool's own records, not frame fields.
        for item in &c.items {
            assert_eq!(item["floor"], 3);
            assert!(
                item["captured_at"].as_str().unwrap().starts_with("2026-04"),
                "{item}"
            );
        }
        common::snapshot_settings()
            .bind(|| insta::assert_snapshot!(format!("narrowed-april-{name}"), stable(&frames)));
    }
    // January inside the April scope is empty: zero after narrowing.
    let frames = s.say(&t, "only those from January").await;
    let text = answer(&frames);
    assert!(
        text.contains("None of the previous results match"),
        "{text}"
    );
    assert!(
        text.contains("next search covers the whole project"),
        "{text}"
    );
    // The scope was released: the next follow-up has nothing to narrow, so
    // it searches nothing and asks.
    let frames = s.say(&t, "only those from April").await;
    assert!(
        plan(&frames).is_none(),
        "released scope must not come back: {:?}",
        plan(&frames)
    );
    assert!(answer(&frames).contains("no earlier results to narrow"));
    s.pass();
}

/// The model cannot widen a scope, and cannot relabel it either: a follow-up
/// whose own filter disagrees with the scope (floor 5 inside floor 3) is not
/// sent with the scope's floor under its own label; it is an empty
/// intersection, through the narrowing table (zero after narrowing).
#[tokio::test]
async fn the_scope_is_applied_last() {
    let s = TestServer::builder().start().await;
    let t = s.new_thread().await;
    s.say(&t, "show safety issues on floor 3").await;
    let frames = s.say(&t, "only those on floor 5 from April").await;
    let result = tool_results(&frames)[0];
    assert!(!result.ok);
    // Compared with the judge's own type, serialised: a renamed field fails.
    let disjoint = Conflict::Disjoint {
        key: "floor".into(),
        scope: json!(3),
        asked: json!(5),
    };
    assert_eq!(
        result.conflict,
        Some(serde_json::to_value(disjoint).unwrap())
    );
    assert!(
        citation(&frames).is_none(),
        "nothing was searched, so nothing is cited"
    );
    let text = answer(&frames);
    assert!(
        text.contains("None of the previous results match"),
        "{text}"
    );
    // An empty or missing model value cannot widen: the April follow-up is
    // still inside floor 3 and the safety query.
    let t2 = s.new_thread().await;
    s.say(&t2, "show safety issues on floor 3").await;
    let frames = s.say(&t2, "only those from April").await;
    let call = tool_calls(&frames)[0];
    assert_eq!(
        (call.args.get("floor"), call.args.get("query")),
        (Some(&json!(3)), Some(&json!("safety")))
    );
    s.pass();
}

/// Narrowing with nothing to narrow says so and asks what to search,
/// instead of answering a search of everything as "of those": nothing runs
/// (the turn table's `ask-for-missing-reference`).
#[tokio::test]
async fn narrowing_without_previous_results_says_so() {
    let s = TestServer::builder().start().await;
    let t = s.new_thread().await;
    let frames = s.say(&t, "only those from April").await;
    assert!(plan(&frames).is_none(), "{:?}", plan(&frames));
    assert!(tool_calls(&frames).is_empty());
    assert!(answer(&frames).contains("What should I search for?"));
    assert!(
        answer(&frames).contains("no earlier results to narrow"),
        "{}",
        answer(&frames)
    );
    s.pass();
}

#[tokio::test]
async fn a_saturated_listing_is_a_lower_bound() {
    let s = TestServer::builder().start().await;
    let t = s.new_thread().await;
    for prompt in ["list all panoramas", "모든 파노라마 목록 보여줘"] {
        let frames = s.say(&t, prompt).await;
        let c = citation(&frames).unwrap();
        assert_eq!(c.grade, CountGrade::LowerBound.as_str(), "{prompt}");
        assert_eq!(c.total, Some(3000));
        assert!(c.total_is_lower_bound);
        assert!(
            c.has_more,
            "a saturated page's has_more: false is overridden"
        );
        // Stitched up to the page cap; the count is the verified total, not a sum.
        let stitch = c.stitch.as_ref().expect("a stitched listing");
        assert_eq!(stitch.pages, 5);
        assert_eq!(stitch.end, "capped");
        assert_eq!(c.displayed, 250);
        let text = answer(&frames);
        assert!(
            text.contains("At least 3000") || text.contains("최소 3000"),
            "{text}"
        );
        assert!(
            !text.contains("7961") && !text.contains("Exactly"),
            "{text}"
        );
    }
    s.pass();
}

/// A single-value aggregate is exempt from the cap and EXACT.
#[tokio::test]
async fn counting_uses_an_exact_aggregate() {
    let s = TestServer::builder().start().await;
    let t = s.new_thread().await;
    for prompt in ["how many photos are on floor 3?", "3층 사진은 몇 장이야?"] {
        let frames = s.say(&t, prompt).await;
        assert_eq!(tool_calls(&frames)[0].tool, "query_data");
        assert!(citation(&frames).is_none(), "an aggregate needs no card");
        let text = answer(&frames);
        assert!(text.contains("613"), "{prompt}: {text}");
        common::snapshot_settings().bind(|| {
            insta::assert_snapshot!(format!("count-floor-3-{}", prompt.len()), stable(&frames))
        });
    }
    s.pass();
}

/// A cursor that re-runs the query and drifts: stitching is abandoned with
/// the anomaly named, and the first page is answered alone. A rejected
/// cursor (no accounting) is an untrusted page: the same. When the total
/// itself changed, the first page's total was contradicted by the server:
/// it is shown as SHOWN, never as a bound or an exact count (issue 21 §3);
/// an untrusted later page leaves the first page's grade as it was.
#[tokio::test]
async fn cursor_anomalies_abandon_the_stitch() {
    for (fault, anomaly, words, grade) in [
        (
            Fault::CursorDrift,
            Anomaly::TotalChanged {
                first: 3000,
                now: 3000 + turnstile_demo::tools::DRIFT as u64,
            },
            "the total changed between pages",
            "SHOWN",
        ),
        (
            Fault::CursorRejected,
            Anomaly::Unaccounted,
            "a page arrived without accounting",
            "LOWER_BOUND",
        ),
    ] {
        let s = TestServer::builder().faults(vec![fault]).start().await;
        let t = s.new_thread().await;
        let frames = s.say(&t, "list all panoramas").await;
        let c = citation(&frames).unwrap();
        let stitch = c.stitch.as_ref().expect("a stitched listing");
        assert_eq!(stitch.end, "abandoned");
        assert_eq!(
            stitch.anomaly,
            Some(serde_json::to_value(&anomaly).unwrap()),
            "{fault:?}"
        );
        assert_eq!(c.displayed, 50, "the first page alone, never a blend");
        assert_eq!(c.total, Some(3000), "the first page's total, never a sum");
        assert_eq!(c.grade, grade, "{fault:?}");
        assert!(!c.complete);
        let text = answer(&frames);
        assert!(text.contains(words), "{text}");
        if grade == "SHOWN" {
            // No sentence of the answer leans on the contradicted total.
            assert!(!text.contains("at least 3000"), "{text}");
            assert!(!text.to_lowercase().contains("exactly 3000"), "{text}");
        }
        s.pass();
    }
}
