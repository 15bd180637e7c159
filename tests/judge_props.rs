//! Property tests of the count grade function and the stitcher invariants.

use std::collections::HashSet;

use proptest::prelude::*;
use serde_json::{json, Value};
use turnstile::judge::stitch::{StitchEnd, Stitcher};
use turnstile::judge::{grade, Accounting, CountGrade};
use turnstile::mcp::ToolOutput;
use turnstile::protocols::paging::Paging;
use turnstile::protocols::TableSet;

fn accounting() -> impl Strategy<Value = Option<Accounting>> {
    proptest::option::of(
        (
            0u64..100,
            proptest::option::of(0u64..6000),
            proptest::option::of(0u64..6000),
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
    fn grades_follow_the_seed(acc in accounting(), displayed in 0u64..100, sentinel in 1u64..5000) {
        let c = grade(acc.as_ref(), displayed, sentinel);
        match &acc {
            None => prop_assert_eq!(c.grade, CountGrade::Unknown),
            Some(a) => {
                if let Some(t) = a.total {
                    if t >= sentinel {
                        // Saturated: never EXACT, and more may exist whatever upstream said.
                        prop_assert_eq!(c.grade, CountGrade::LowerBound);
                        prop_assert!(c.has_more);
                    } else {
                        prop_assert_eq!(c.grade, CountGrade::Exact);
                    }
                } else if a.total_lower_bound.is_some() {
                    prop_assert_eq!(c.grade, CountGrade::LowerBound);
                } else {
                    prop_assert_eq!(c.grade, CountGrade::Shown);
                    prop_assert_eq!(c.total, None);
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
}

fn page() -> impl Strategy<Value = Page> {
    (
        proptest::collection::vec(0u32..40, 0..6),
        prop_oneof![Just(Some(30u64)), Just(Some(33u64)), Just(None)],
        prop_oneof![9 => Just(false), 1 => Just(true)],
        prop_oneof![9 => Just(true), 1 => Just(false)],
        prop_oneof![3 => Just(true), 1 => Just(false)],
    )
        .prop_map(|(ids, total, lower, accounted, has_more)| Page {
            ids,
            total,
            lower,
            accounted,
            has_more,
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
    let mut meta = json!({"returned": items.len(), "has_more": p.has_more, "next_cursor": p.has_more.then(|| format!("c{n}"))});
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
            match s.push(&output(p, n)).unwrap() {
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
            StitchEnd::Complete | StitchEnd::Capped => {
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
        if let Some(a) = &out.accounting {
            // A stitched count is never a sum of pages: the first page's total stands.
            let t = a.total.or(a.total_lower_bound);
            prop_assert_eq!(t, Some(first.total.unwrap_or(30)));
            prop_assert_eq!(a.returned as usize, out.items.len());
        }
    }
}
