//! Property tests of the count grade function and the stitcher invariants.

use std::collections::HashSet;
use turnstile::judge::result::Reading;

use proptest::prelude::*;
use serde_json::{json, Value};
use turnstile::judge::stitch::{StitchEnd, Stitcher};
use turnstile::judge::{grade, Accounting, CountGrade};
use turnstile::mcp::ToolOutput;
use turnstile::protocols::paging::Paging;
use turnstile::protocols::TableSet;

/// A count as servers send them: often zero or small (so that zeros, totals
/// beside items and pages at a small cap all occur), sometimes large.
fn count() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), 0u64..40, 0u64..6000]
}

fn accounting() -> impl Strategy<Value = Option<Accounting>> {
    proptest::option::of(
        (
            prop_oneof![Just(0u64), 0u64..100],
            proptest::option::of(count()),
            proptest::option::of(count()),
            any::<bool>(),
        )
            .prop_map(|(returned, total, lb, has_more)| Accounting {
                returned,
                total,
                total_lower_bound: lb,
                has_more,
                next_cursor: None,
            }),
    )
}

proptest! {
    #[test]
    fn grades_follow_the_seed(
        acc in accounting(),
        displayed in 0u64..100,
        // Small caps too, so that pages saturate them.
        sentinel in prop_oneof![1u64..120, 1u64..5000],
    ) {
        let c = grade(acc.as_ref(), displayed, sentinel);
        match &acc {
            None => prop_assert_eq!(c.grade, CountGrade::Unknown),
            Some(a) => {
                // What was delivered; a total below it is contradicted by
                // the delivery and never repeated.
                let delivered = displayed.max(a.returned);
                let total = a.total.filter(|&t| t >= delivered);
                if let Some(t) = total {
                    if t >= sentinel {
                        // Saturated: never EXACT, and more may exist whatever upstream said.
                        prop_assert_eq!(c.grade, CountGrade::LowerBound);
                        prop_assert!(c.has_more);
                    } else {
                        prop_assert_eq!(c.grade, CountGrade::Exact);
                        prop_assert_eq!(c.total, Some(t));
                    }
                } else if delivered >= sentinel {
                    // A page at the cap, without a credible total: at least
                    // what was delivered, and more may exist.
                    prop_assert_eq!(c.grade, CountGrade::LowerBound);
                    prop_assert!(c.has_more && !c.complete);
                    prop_assert!(c.total.is_some_and(|t| t >= delivered));
                } else if a.total_lower_bound.is_some() {
                    prop_assert_eq!(c.grade, CountGrade::LowerBound);
                } else {
                    prop_assert_eq!(c.grade, CountGrade::Shown);
                    prop_assert_eq!(c.total, None);
                }
                if a.has_more {
                    prop_assert!(c.has_more && !c.complete, "more beyond is never lost");
                }
                // An exact total is never below what was delivered: a result
                // that delivered items is never "exactly 0".
                if c.grade == CountGrade::Exact {
                    prop_assert!(c.total.is_some_and(|t| t >= delivered));
                }
            }
        }
        if c.grade == CountGrade::Unknown {
            prop_assert_eq!(c.total, None, "UNKNOWN allows no number");
        }
        if c.complete {
            prop_assert!(c.grade == CountGrade::Exact && !c.has_more && c.total == Some(displayed));
        }
        if c.grade == CountGrade::LowerBound {
            prop_assert!(c.total_is_lower_bound);
        }
    }
}

#[derive(Debug, Clone)]
struct Page {
    ids: Vec<u32>,
    total: Option<u64>,
    lower: bool,
    accounted: bool,
    has_more: bool,
    /// Whether the page carries a `next_cursor` (a `has_more` page without
    /// one cannot be followed).
    cursor: bool,
}

fn page() -> impl Strategy<Value = Page> {
    (
        proptest::collection::vec(0u32..40, 0..6),
        prop_oneof![Just(Some(30u64)), Just(Some(33u64)), Just(None)],
        prop_oneof![9 => Just(false), 1 => Just(true)],
        prop_oneof![9 => Just(true), 1 => Just(false)],
        prop_oneof![3 => Just(true), 1 => Just(false)],
        prop_oneof![4 => Just(true), 1 => Just(false)],
    )
        .prop_map(|(ids, total, lower, accounted, has_more, cursor)| Page {
            ids,
            total,
            lower,
            accounted,
            has_more,
            cursor,
        })
}

fn output(p: &Page, n: usize) -> ToolOutput {
    let items: Vec<Value> = p
        .ids
        .iter()
        .map(|i| json!({"id": format!("P-{i}")}))
        .collect();
    if !p.accounted {
        // Rows, but no accounting: an untrusted page.
        return ToolOutput::from_value(
            &json!({"content": [{"type": "text", "text": "rows"}], "structuredContent": {"items": items}}),
        );
    }
    let mut meta = json!({"returned": items.len(), "has_more": p.has_more, "next_cursor": p.cursor.then(|| format!("c{n}"))});
    let total = p.total.unwrap_or(30);
    meta[if p.lower {
        "total_lower_bound"
    } else {
        "total"
    }] = json!(total);
    ToolOutput::from_value(
        &json!({"content": [], "structuredContent": {"items": items}, "_meta": meta}),
    )
}

proptest! {
    #[test]
    fn stitching_never_blends(pages in proptest::collection::vec(page(), 1..8), cap in 1usize..6) {
        let bound = TableSet::builtin().unwrap().bound::<Paging>().unwrap();
        let mut s = Stitcher::new(&bound, cap);
        let mut fed = Vec::new();
        // The caller stopped while the table still said "fetch on".
        let mut interrupted = false;
        for (n, p) in pages.iter().enumerate() {
            fed.push(p.clone());
            match s.push(&Reading::of(&output(p, n), None)).unwrap() {
                Some(_) => interrupted = true,
                None => {
                    interrupted = false;
                    break;
                }
            }
        }
        let out = s.finish();
        prop_assert!(out.pages <= cap, "never past the page cap");
        prop_assert_eq!(out.pages, fed.len());
        let first = &fed[0];
        let first_ids: Vec<String> = first.ids.iter().map(|i| format!("P-{i}")).collect();
        match out.end {
            StitchEnd::Abandoned => {
                // The first page alone, never a blend — with or without
                // accounting, its rows survive.
                let ids: Vec<String> = out.items.iter().map(|i| i["id"].as_str().unwrap().to_string()).collect();
                prop_assert_eq!(ids, first_ids);
                prop_assert_eq!(out.accounting.is_none(), !first.accounted);
                prop_assert!(out.anomaly.is_some() || interrupted);
            }
            StitchEnd::Complete | StitchEnd::Capped | StitchEnd::NoCursor => {
                // No page after the first disagreed, so no id repeats across pages.
                prop_assert!(out.anomaly.is_none());
                let mut earlier: HashSet<u32> = HashSet::new();
                for p in &fed {
                    prop_assert!(p.ids.iter().all(|id| !earlier.contains(id)), "a repeated id was stitched");
                    earlier.extend(p.ids.iter().copied());
                }
                prop_assert_eq!(out.items.len(), fed.iter().map(|p| p.ids.len()).sum::<usize>());
            }
        }
        // The stitch is the whole listing only if its last page said so; a
        // last page that says more exists, with or without a cursor to
        // follow, leaves more beyond it.
        let last = fed.last().unwrap();
        match out.end {
            StitchEnd::Complete => {
                prop_assert!(last.accounted && !last.has_more, "complete, but the last page said more: {:?}", last);
                prop_assert!(out.accounting.as_ref().is_some_and(|a| !a.has_more));
            }
            StitchEnd::NoCursor => {
                prop_assert!(last.accounted && last.has_more && !last.cursor, "{:?}", last);
            }
            StitchEnd::Abandoned | StitchEnd::Capped => {}
        }
        if out.end != StitchEnd::Complete {
            prop_assert!(out.accounting.as_ref().is_none_or(|a| a.has_more));
        }
        if out.anomaly.is_none() && last.accounted && last.has_more && !last.cursor {
            prop_assert_eq!(out.end, StitchEnd::NoCursor, "a cursorless has_more page ends the stitch as a sample");
        }
        if let Some(a) = &out.accounting {
            // A stitched count is never a sum of pages: the first page's total stands.
            let t = a.total.or(a.total_lower_bound);
            prop_assert_eq!(t, Some(first.total.unwrap_or(30)));
            prop_assert_eq!(a.returned as usize, out.items.len());
        }
    }
}

// ---------------------------------------------------------------------------
// The whole judgement of a listing, called as the pure function it is: no
// server, no async.

mod listing_props {
    use super::*;
    use serde_json::Map;
    use turnstile::judge::digest::DigestLimits;
    use turnstile::judge::emptiness::AbsenceCause;
    use turnstile::judge::listing::{self, Input};
    use turnstile::judge::narrowing::{Gate, Scope};
    use turnstile::judge::stitch::Stitched;
    use turnstile::judge::{Anchor, Contract};
    use turnstile::protocols::narrowing::Narrowing;

    /// One page: its accounting (with a cursor when `cursor`), `items`
    /// delivered items with ids from `first_id`.
    fn output(
        acc: &Option<Accounting>,
        cursor: Option<&str>,
        items: usize,
        first_id: usize,
        structured: bool,
    ) -> ToolOutput {
        let list: Vec<Value> = (first_id..first_id + items)
            .map(|i| json!({"id": format!("P-{i}"), "floor": 3, "note": "x".repeat((i - first_id) * 40)}))
            .collect();
        let mut v = json!({"content": [{"type": "text", "text": "## Image #1"}]});
        if structured {
            v["structuredContent"] = json!({ "items": list });
        }
        if let Some(a) = acc {
            let mut meta = json!({"returned": a.returned, "has_more": a.has_more});
            if let Some(t) = a.total {
                meta["total"] = json!(t);
            }
            if let Some(lb) = a.total_lower_bound {
                meta["total_lower_bound"] = json!(lb);
            }
            if let Some(c) = cursor {
                meta["next_cursor"] = json!(c);
            }
            v["_meta"] = meta;
        }
        ToolOutput::from_value(&v)
    }

    /// A second page of the same listing (same total), when stitching goes on.
    #[derive(Debug, Clone)]
    struct Tail {
        items: usize,
        has_more: bool,
        cursor: bool,
    }

    fn tail() -> impl Strategy<Value = Tail> {
        (0usize..10, any::<bool>(), any::<bool>()).prop_map(|(items, has_more, cursor)| Tail {
            items,
            has_more,
            cursor,
        })
    }

    proptest! {
        #[test]
        fn a_judgement_claims_only_what_the_accounting_supports(
            acc in accounting(),
            cursor in any::<bool>(),
            items in 0usize..30,
            structured in any::<bool>(),
            contract in any::<bool>(),
            // Small caps too, so that pages saturate them.
            sentinel in prop_oneof![1u64..40, 1u64..5000],
            stitching in any::<bool>(),
            tail in tail(),
            scoped in any::<bool>(),
        ) {
            let out = output(&acc, cursor.then_some("c1"), items, 0, structured);
            let contract = contract.then(|| Contract { fixed_prefixes: vec!["## Image #".into()], stitch: stitching, ..Contract::default() });
            // The stitch, as the agent drives it: pages while the table says
            // "fetch on", up to a cap of two. `last` is the last page fed.
            let mut last = (acc.as_ref().map(|a| a.has_more), cursor);
            let stitched: Option<Stitched> = stitching.then(|| {
                let paging = TableSet::builtin().unwrap().bound::<Paging>().unwrap();
                let mut s = Stitcher::new(&paging, 2);
                if s.push(&Reading::of(&out, contract.as_ref())).unwrap().is_some() {
                    let second = acc.clone().map(|a| Accounting {
                        returned: tail.items as u64,
                        has_more: tail.has_more,
                        ..a
                    });
                    let page = output(&second, tail.cursor.then_some("c2"), tail.items, 1000, structured);
                    last = (Some(tail.has_more), tail.cursor);
                    s.push(&Reading::of(&page, contract.as_ref())).unwrap();
                }
                s.finish()
            });
            let scope = scoped.then(|| {
                Scope::new("search", json!({"floor": 3}).as_object().unwrap())
            });
            let table = TableSet::builtin().unwrap().bound::<Narrowing>().unwrap();
            let mut gate = Gate::new(&table);
            if scoped {
                gate.narrow().unwrap();
            }
            let args = Map::new();
            let limits = DigestLimits::default();
            let reading = Reading::of(&out, contract.as_ref());
            let j = listing::judge(
                Input {
                    tool: "search",
                    contract: contract.as_ref(),
                    args: &args,
                    first: &out,
                    reading: &reading,
                    ids_param: None,
                    stitched: stitched.as_ref(),
                    scope: scope.as_ref(),
                    limit_sentinel: sentinel,
                    digest: limits,
                },
                &mut gate,
            );
            prop_assert!(j.violation.is_none());
            let card = j.card.expect("a listing always has a card");
            if structured && stitched.is_none() {
                prop_assert_eq!(card.displayed, items as u64);
                prop_assert_eq!(card.items.len(), items);
            }
            if let Some(s) = &stitched {
                prop_assert_eq!(card.items.len(), s.items.len());
            }
            // "none" only for an accounted zero with nothing delivered.
            let absent = j.anchors.iter().any(|a| matches!(a, Anchor::Absent { .. }));
            if absent {
                prop_assert!(contract.is_some());
                prop_assert!(card.items.is_empty(), "'none' with items delivered");
                prop_assert_eq!(card.displayed, 0, "'none' with items delivered");
                let a = acc.as_ref().expect("accounting behind every 'none'");
                prop_assert!(a.total == Some(0) || (a.total.is_none() && !a.has_more));
            }
            if j.anchors.iter().any(|a| matches!(a, Anchor::Absent { cause: AbsenceCause::ZeroFromStart })) {
                prop_assert!(!scoped);
            }
            if j.release {
                prop_assert!(scoped && card.displayed == 0 && card.items.is_empty());
            }
            // An exact zero is only ever a zero that was delivered.
            if card.grade == "EXACT" && card.total == Some(0) {
                prop_assert_eq!(card.displayed, 0);
            }
            // "complete" only when exact with nothing beyond, and then the
            // card is the whole population.
            if card.complete {
                prop_assert_eq!(card.grade.as_str(), "EXACT");
                prop_assert_eq!(card.total, Some(card.displayed));
                prop_assert!(!card.has_more, "complete with more beyond");
            }
            // A last page that says more exists is never the end of the
            // population, with or without a cursor, stitched or narrowed.
            if last.0 == Some(true) {
                prop_assert!(card.has_more, "has_more lost: {:?}", card);
                prop_assert!(!card.complete, "a page with more beyond called complete: {:?}", card);
            }
            // Saturated at the upstream's cap, with or without a total: at
            // least that many, more may exist, never exact or complete.
            let returned = match &stitched {
                Some(_) => 0,
                None => acc.as_ref().map_or(0, |a| a.returned),
            };
            if acc.is_some() && card.displayed.max(returned) >= sentinel {
                prop_assert_eq!(card.grade.as_str(), "LOWER_BOUND", "saturated: {:?}", card);
                prop_assert!(card.has_more && !card.complete);
            }
            if card.grade == "LOWER_BOUND" {
                prop_assert!(!card.complete);
                prop_assert!(card.total_is_lower_bound);
            }
            if acc.is_none() {
                prop_assert_eq!(card.grade.as_str(), "UNKNOWN");
                prop_assert_eq!(card.total, None);
            }
            // The digest carries the card's grade and count, within its bounds.
            prop_assert_eq!(j.digest.grade.map(|g| g.as_str()), Some(card.grade.as_str()));
            prop_assert_eq!(j.digest.total, card.total);
            prop_assert!(j.digest.items.len() <= limits.items);
            prop_assert!(j.digest.render().len() <= limits.bytes);
            prop_assert_eq!(j.digest.items.len() as u64 + j.digest.items_omitted, card.items.len() as u64);
        }
    }
}
