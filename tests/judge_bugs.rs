//! Regression tests for the review findings of issue 9 ("Review found these
//! bugs"). Each calls the judge as the pure code it is: no server, no async.

use serde_json::{json, Map, Value};
use turnstile::judge::digest::DigestLimits;
use turnstile::judge::emptiness::AbsenceCause;
use turnstile::judge::listing::{self, Input, Judgement};
use turnstile::judge::narrowing::{Gate, Scope};
use turnstile::judge::result::Reading;
use turnstile::judge::stitch::{StitchEnd, Stitched, Stitcher};
use turnstile::judge::{grade, Accounting, Anchor, Contract, Count, CountGrade};
use turnstile::mcp::ToolOutput;
use turnstile::protocols::narrowing::Narrowing;
use turnstile::protocols::paging::Paging;
use turnstile::protocols::TableSet;

const SENTINEL: u64 = 3000;

fn page(ids: std::ops::Range<u32>, meta: Value) -> ToolOutput {
    let items: Vec<Value> = ids
        .map(|i| json!({"id": format!("P-{i}"), "floor": 3}))
        .collect();
    ToolOutput::from_value(&json!({
        "content": [],
        "structuredContent": {"items": items},
        "_meta": meta,
    }))
}

fn scope() -> Scope {
    let args = json!({"query": "safety", "floor": 3});
    Scope::new("search_photos", args.as_object().unwrap())
}

fn judge(first: &ToolOutput, stitched: Option<&Stitched>, scope: Option<&Scope>) -> Judgement {
    let table = TableSet::builtin().unwrap().bound::<Narrowing>().unwrap();
    let mut gate = Gate::new(&table);
    if scope.is_some() {
        gate.narrow().unwrap();
    }
    let contract = Contract {
        fixed_prefixes: vec![],
        stitch: stitched.is_some(),
        ..Contract::default()
    };
    let reading = Reading::of(first, Some(&contract));
    listing::judge(
        Input {
            tool: "search_photos",
            contract: Some(&contract),
            args: &Map::new(),
            first,
            reading: &reading,
            ids_param: None,
            stitched,
            scope,
            limit_sentinel: SENTINEL,
            digest: DigestLimits::default(),
        },
        &mut gate,
    )
}

fn stitch(pages: &[ToolOutput]) -> Stitched {
    let bound = TableSet::builtin().unwrap().bound::<Paging>().unwrap();
    let mut s = Stitcher::new(&bound, 5);
    for p in pages {
        if s.push(&Reading::of(p, None)).unwrap().is_none() {
            break;
        }
    }
    s.finish()
}

fn says_none(j: &Judgement) -> bool {
    j.anchors.iter().any(|a| matches!(a, Anchor::Absent { .. }))
}

// ---------------------------------------------------------------------------
// 1. `has_more: true` without a cursor is not the end of the listing.

#[test]
fn a_cursorless_has_more_page_ends_the_stitch_but_is_never_complete() {
    // The listing says more exists but gives no way to fetch it.
    let first = page(0..20, json!({"returned": 20, "has_more": true}));
    let stitched = stitch(std::slice::from_ref(&first));

    // Narrowed: never upgraded to EXACT.
    let j = judge(&first, Some(&stitched), Some(&scope()));
    let card = j.card.unwrap();
    assert!(!card.complete, "narrowing upgraded a sample: {card:?}");
    assert_ne!(card.grade, "EXACT", "narrowing upgraded a sample: {card:?}");
    assert!(card.has_more, "{card:?}");

    // Unscoped: at most a sample.
    let j = judge(&first, Some(&stitched), None);
    let card = j.card.unwrap();
    assert!(!card.complete, "card called complete: {card:?}");
    assert!(card.has_more, "card lost has_more: {card:?}");
    assert_ne!(card.grade, "EXACT", "{card:?}");

    // The stitch itself ends (there is no cursor) but not as complete.
    assert_eq!(stitched.pages, 1, "stitching ends: there is no cursor");
    assert_ne!(
        stitched.end,
        StitchEnd::Complete,
        "a listing that says more exists did not end"
    );
    let acc = stitched.accounting.as_ref().unwrap();
    assert!(acc.has_more, "more exists beyond the stitch: {acc:?}");
}

#[test]
fn a_cursorless_has_more_page_after_stitched_pages_is_never_complete() {
    let p1 = page(
        0..10,
        json!({"returned": 10, "total": 40, "has_more": true, "next_cursor": "c1"}),
    );
    // The second page says more exists but drops the cursor.
    let p2 = page(
        10..20,
        json!({"returned": 10, "total": 40, "has_more": true}),
    );
    let stitched = stitch(&[p1.clone(), p2]);
    assert_eq!(stitched.pages, 2);
    assert_eq!(stitched.items.len(), 20, "both consistent pages are kept");
    assert_ne!(stitched.end, StitchEnd::Complete);
    let j = judge(&p1, Some(&stitched), Some(&scope()));
    let card = j.card.unwrap();
    assert!(!card.complete && card.has_more, "{card:?}");
    assert_eq!((card.grade.as_str(), card.total), ("EXACT", Some(40)));
}

// ---------------------------------------------------------------------------
// 2. A page that returned exactly the upstream's LIMIT cap is saturated.

fn acc(returned: u64, total: Option<u64>, lb: Option<u64>, has_more: bool) -> Accounting {
    Accounting {
        returned,
        total,
        total_lower_bound: lb,
        has_more,
        next_cursor: None,
    }
}

#[test]
fn returned_at_the_cap_without_a_total_is_a_lower_bound() {
    for a in [
        acc(SENTINEL, None, None, false),
        acc(SENTINEL, None, None, true),
        acc(SENTINEL, None, Some(120), false),
    ] {
        let c = grade(Some(&a), SENTINEL, SENTINEL);
        assert_eq!(c.grade, CountGrade::LowerBound, "{a:?} → {c:?}");
        assert!(c.has_more, "{a:?} → {c:?}");
        assert!(!c.complete, "{a:?} → {c:?}");
        assert!(c.total_is_lower_bound, "{a:?} → {c:?}");
        assert_eq!(c.total, Some(SENTINEL), "at least what was delivered");
    }
    // One below the cap is not saturated.
    let c = grade(
        Some(&acc(SENTINEL - 1, None, None, false)),
        SENTINEL - 1,
        SENTINEL,
    );
    assert_eq!(c.grade, CountGrade::Shown);
}

#[test]
fn a_listing_at_the_cap_without_a_total_is_never_exact_even_narrowed() {
    let first = ToolOutput::from_value(&json!({
        "content": [],
        "structuredContent": {"items": (0..SENTINEL).map(|i| json!({"id": i, "floor": 3})).collect::<Vec<_>>()},
        "_meta": {"returned": SENTINEL, "has_more": false},
    }));
    for scope in [None, Some(scope())] {
        let j = judge(&first, None, scope.as_ref());
        let card = j.card.unwrap();
        assert_eq!(card.grade, "LOWER_BOUND", "{:?}", card.grade);
        assert!(card.has_more && !card.complete && card.total_is_lower_bound);
        assert!(j.anchors.iter().any(|a| matches!(
            a,
            Anchor::CountLowerBound {
                at_least: SENTINEL,
                ..
            }
        )));
    }
}

// ---------------------------------------------------------------------------
// 3. A result that delivered items is never "none".

#[test]
fn the_anchor_for_an_inconsistent_zero_total_with_items_is_not_none() {
    let c = Count {
        grade: CountGrade::Exact,
        displayed: 4,
        total: Some(0),
        total_is_lower_bound: false,
        has_more: false,
        complete: false,
    };
    let a = Anchor::for_count("search_photos", &c);
    assert!(
        !matches!(a, Anchor::Absent { .. }),
        "items were delivered, yet: {a:?}"
    );
}

#[test]
fn a_zero_total_with_items_is_graded_as_shown() {
    let c = grade(Some(&acc(4, Some(0), None, false)), 4, SENTINEL);
    assert_eq!(c.grade, CountGrade::Shown, "{c:?}");
    assert_eq!(c.total, None, "the contradicted total is not repeated");
    assert!(!c.complete);

    let first = page(0..4, json!({"returned": 4, "total": 0, "has_more": false}));
    for scope in [None, Some(scope())] {
        let j = judge(&first, None, scope.as_ref());
        assert!(!says_none(&j), "{:?}", j.anchors);
        assert!(!j.release, "a narrowing with items is not released");
        let card = j.card.unwrap();
        assert_eq!(card.displayed, 4);
        assert_ne!(card.total, Some(0), "{card:?}");
        assert!(j
            .anchors
            .iter()
            .all(|a| !matches!(a, Anchor::CountExact { total: 0, .. })));
    }
}

#[test]
fn a_stitch_whose_first_page_is_an_accounted_zero_but_later_pages_deliver_is_not_none() {
    // The first page says total 0 and empty, but points to more; the second
    // page delivers rows under the same (contradicted) total.
    let p1 = page(
        0..0,
        json!({"returned": 0, "total": 0, "has_more": true, "next_cursor": "c1"}),
    );
    let p2 = page(0..5, json!({"returned": 5, "total": 0, "has_more": false}));
    let stitched = stitch(&[p1.clone(), p2]);
    assert_eq!(stitched.items.len(), 5);
    for scope in [None, Some(scope())] {
        let j = judge(&p1, Some(&stitched), scope.as_ref());
        assert!(!says_none(&j), "{:?}", j.anchors);
        assert!(!j.release);
        let card = j.card.unwrap();
        assert_eq!(card.displayed, 5);
        assert_ne!(card.total, Some(0), "{card:?}");
    }
}

#[test]
fn an_accounted_zero_with_nothing_delivered_is_still_none() {
    let first = page(0..0, json!({"returned": 0, "total": 0, "has_more": false}));
    let j = judge(&first, None, None);
    assert!(j.anchors.iter().any(|a| matches!(
        a,
        Anchor::Absent {
            cause: AbsenceCause::ZeroFromStart
        }
    )));
    let card = j.card.unwrap();
    assert_eq!(
        (card.grade.as_str(), card.total, card.complete),
        ("EXACT", Some(0), true)
    );
}

// ---------------------------------------------------------------------------
// Review findings of issue 21 ("show more"): a continuation judged as the
// pure code it is.

/// The mark a first page of 10 (P-0..P-9, exactly 651) leaves.
fn mark_after_first_page() -> turnstile::judge::narrowing::PageMark {
    let first = page(
        0..10,
        json!({"returned": 10, "total": 651, "has_more": true, "next_cursor": "c1"}),
    );
    let j = judge(&first, None, None);
    j.population
        .and_then(|p| p.page)
        .expect("a listing with a cursor can be continued")
}

fn resumed(mark: &turnstile::judge::narrowing::PageMark, pages: &[ToolOutput]) -> Stitched {
    let bound = TableSet::builtin().unwrap().bound::<Paging>().unwrap();
    let mut s = Stitcher::new(&bound, 5);
    s.resume(mark).unwrap();
    for p in pages {
        if s.push(&Reading::of(p, None)).unwrap().is_none() {
            break;
        }
    }
    s.finish()
}

/// A stitched continuation whose *later* page drifts keeps its first page,
/// which was checked against everything shown: the anomaly is the stitch's,
/// the verified page is not thrown away, and the total is counted from the
/// listing's first page — never the sum, never "all".
#[test]
fn a_later_page_of_a_continuation_drifting_keeps_the_verified_page() {
    let mark = mark_after_first_page();
    assert_eq!((mark.shown, mark.pages), (10, 1));
    let p2 = page(
        10..20,
        json!({"returned": 10, "total": 651, "has_more": true, "next_cursor": "c2"}),
    );
    // Page 3 repeats P-15.. (rows shifted under the cursor), same total.
    let p3 = page(
        15..25,
        json!({"returned": 10, "total": 651, "has_more": true, "next_cursor": "c3"}),
    );
    let s = resumed(&mark, &[p2.clone(), p3]);
    assert!(!s.nothing_continued, "page 2 continued the listing");
    assert_eq!(s.end, StitchEnd::Abandoned);
    assert_eq!(s.items.len(), 10, "page 2 stands alone");
    let j = judge(&p2, Some(&s), None);
    let card = j.card.unwrap();
    assert_eq!((card.displayed, card.total), (20, Some(651)), "{card:?}");
    assert_eq!(card.shown_before, Some(10));
    assert!(!card.complete && !card.more);
    assert!(j
        .anchors
        .iter()
        .any(|a| matches!(a, Anchor::StitchAbandoned { .. })));
    assert!(
        j.population.unwrap().page.is_none(),
        "no further continuation"
    );
}

/// A continued page whose call failed (a transport error) says nothing of
/// the cursor: nothing is added, and the listing can be asked for again
/// from where it stopped (paging row `cursor-failed`, effect `keep-shown`).
#[test]
fn a_failed_continued_call_keeps_the_listing_where_it_stopped() {
    let mark = mark_after_first_page();
    let bound = TableSet::builtin().unwrap().bound::<Paging>().unwrap();
    let mut s = Stitcher::new(&bound, 5);
    s.resume(&mark).unwrap();
    s.page_failed("timeout").unwrap();
    assert_eq!(s.snapshot().trace, ["continue-shown", "cursor-failed"]);
    let s = s.finish();
    assert!(s.nothing_continued && s.keep_shown && !s.cursor_rejected);
    let dummy = page(0..0, json!({}));
    let j = judge(&dummy, Some(&s), None);
    assert!(j
        .anchors
        .iter()
        .any(|a| matches!(a, Anchor::ToolFailed { .. })));
    let card = j.card.unwrap();
    assert!(card.items.is_empty());
    assert_eq!((card.displayed, card.grade.as_str()), (10, "EXACT"));
    assert_eq!(
        j.population.unwrap().page,
        Some(mark),
        "asked again from c1"
    );
}

/// A listing whose rows carry no ids (text blocks beside the accounting)
/// cannot be held to I-b: it offers no "show more".
#[test]
fn rows_without_ids_are_not_continued() {
    let text_rows = ToolOutput::from_value(&json!({
        "content": [{"type": "text", "text": "row 1"}, {"type": "text", "text": "row 2"}],
        "_meta": {"returned": 2, "total": 651, "has_more": true, "next_cursor": "c1"},
    }));
    let j = judge(&text_rows, None, None);
    let card = j.card.unwrap();
    assert_eq!((card.displayed, card.total), (2, Some(651)), "{card:?}");
    assert!(j.population.and_then(|p| p.page).is_none());
}

/// Pages that together delivered more than an exact total claims: the
/// total is contradicted by them, never "30 shown of exactly 25".
#[test]
fn a_continuation_past_an_exact_total_drops_it() {
    let first = page(
        0..10,
        json!({"returned": 10, "total": 15, "has_more": true, "next_cursor": "c1"}),
    );
    let mark = judge(&first, None, None).population.unwrap().page.unwrap();
    let p2 = page(
        10..20,
        json!({"returned": 10, "total": 15, "has_more": false}),
    );
    let s = resumed(&mark, std::slice::from_ref(&p2));
    let card = judge(&p2, Some(&s), None).card.unwrap();
    assert_eq!(card.displayed, 20);
    assert_ne!(card.grade, "EXACT", "{card:?}");
    assert!(!card.complete, "{card:?}");
}
