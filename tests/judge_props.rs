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

// ---------------------------------------------------------------------------
// The whole judgement of a listing, called as the pure function it is: no
// server, no async.

mod listing_props {
    use super::*;
    use serde_json::Map;
    use turnstile::judge::digest::DigestLimits;
    use turnstile::judge::emptiness::AbsenceCause;
    use turnstile::judge::listing::{self, Input};
    use turnstile::judge::narrowing::Gate;
    use turnstile::judge::{Anchor, Contract};
    use turnstile::protocols::narrowing::Narrowing;

    fn output(acc: &Option<Accounting>, items: usize, structured: bool) -> ToolOutput {
        let list: Vec<Value> = (0..items)
            .map(|i| json!({"id": format!("P-{i}"), "floor": 3, "note": "x".repeat(i * 40)}))
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
            v["_meta"] = meta;
        }
        ToolOutput::from_value(&v)
    }

    proptest! {
        #[test]
        fn a_judgement_claims_only_what_the_accounting_supports(
            acc in accounting(),
            items in 0usize..30,
            structured in any::<bool>(),
            contract in any::<bool>(),
            sentinel in 1u64..5000,
        ) {
            let out = output(&acc, items, structured);
            let contract = contract.then(|| Contract { fixed_prefixes: vec!["## Image #".into()], stitch: false });
            let table = TableSet::builtin().unwrap().bound::<Narrowing>().unwrap();
            let mut gate = Gate::new(&table);
            let args = Map::new();
            let limits = DigestLimits::default();
            let j = listing::judge(
                Input {
                    tool: "search",
                    contract: contract.as_ref(),
                    args: &args,
                    first: &out,
                    stitched: None,
                    scope: None,
                    limit_sentinel: sentinel,
                    digest: limits,
                },
                &mut gate,
            );
            prop_assert!(j.violation.is_none());
            let card = j.card.expect("a listing always has a card");
            if structured {
                prop_assert_eq!(card.displayed, items as u64);
                prop_assert_eq!(card.items.len(), items);
            }
            // "none" only for an accounted zero with nothing delivered.
            let absent = j.anchors.iter().any(|a| matches!(a, Anchor::Absent { cause: AbsenceCause::ZeroFromStart }));
            if absent {
                prop_assert!(contract.is_some());
                prop_assert!(card.items.is_empty());
                let a = acc.as_ref().expect("accounting behind every 'none'");
                prop_assert!(a.total == Some(0) || (a.total.is_none() && !a.has_more));
            }
            // "complete" only when exact, and then the card is the whole population.
            if card.complete {
                prop_assert_eq!(card.grade.as_str(), "EXACT");
                prop_assert_eq!(card.total, Some(card.displayed));
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
