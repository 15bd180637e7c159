//! The narrowing gate (seed 003 §4.2–§4.3; `tables/narrowing.ron`).
//!
//! A narrowing follow-up runs inside the population the previous turn
//! showed. The scope comes from turn state and is spread *last* over the
//! model's arguments, so whatever the model put in the same keys, the call
//! that goes out is narrowed. Results must be a subset of the scope; zero
//! inside the scope releases it at the end of the turn; a narrowed page that
//! fits with nothing beyond is the whole scope, so its count is exact.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::accounting::Accounting;
pub use super::continuation::PageMark;
use super::emptiness::Emptiness;
use super::grade::{Count, CountGrade};
use super::stitch::{StitchEnd, Stitched};
use crate::fsm::Violation;
use crate::protocols::narrowing::{Narrowing, NarrowingEffect, NarrowingEvent};
use crate::protocols::{Bound, Typed};

/// A population a previous turn showed: the tool and the arguments that
/// define it. Persisted with the turn; the model never writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scope {
    pub tool: String,
    pub args: Map<String, Value>,
    /// The population's item ids, when they are all known (a complete
    /// listing) or the tool takes an id list: the subset check compares ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ids: Option<IdScope>,
    /// Where the listing stopped, when more could be fetched with a cursor:
    /// a later turn's page is checked against it as page 2 would be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<PageMark>,
}

/// The ids of a population's items.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdScope {
    /// The input parameter that takes them (spread last), if the tool has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
    /// The item field that holds an id.
    pub field: String,
    pub ids: Vec<String>,
}

/// How a listing's pages came to be shown, for its [`PageMark`].
pub struct Shown<'a> {
    /// Everything shown before this turn, when this turn continued it.
    pub prior: Option<&'a PageMark>,
    /// Items shown so far, this turn's included.
    pub displayed: u64,
    /// Pages this turn fetched.
    pub pages: usize,
    pub narrowed: bool,
    /// The call's own arguments (its page size included), for continuing.
    pub call_args: &'a Map<String, Value>,
}

/// Populations larger than this keep no id list: the scope falls back to
/// its filters.
pub const MAX_SCOPE_IDS: usize = 1000;

fn ids_of(items: &[Value], field: &str) -> Option<Vec<String>> {
    let ids: Option<Vec<String>> = items
        .iter()
        .map(|i| super::result::id_in(i, field))
        .collect();
    ids.filter(|ids| ids.len() <= MAX_SCOPE_IDS)
}

/// A filter value in one comparable form: numbers and numeric strings alike
/// ("3" and 3), other strings trimmed and case-folded ("B1" and "b1").
fn norm(v: &Value) -> String {
    match v {
        Value::String(s) => {
            let s = s.trim();
            s.parse::<f64>()
                .map(|n| n.to_string())
                .unwrap_or_else(|_| s.to_lowercase())
        }
        Value::Number(n) => n
            .as_f64()
            .map(|n| n.to_string())
            .unwrap_or_else(|| n.to_string()),
        other => other.to_string(),
    }
}

/// How a narrowing follow-up's own arguments disagree with its scope.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Conflict {
    /// An equality filter asks for another value than the scope holds
    /// (floor 5 inside floor 3): nothing can match — zero after narrowing.
    Disjoint {
        key: String,
        scope: Value,
        asked: Value,
    },
    /// A new search term inside the previous results: not expressible as a
    /// subset with this tool.
    Unsupported { key: String },
}

impl Conflict {
    /// The refused call's tool result summary.
    pub fn describe(&self) -> String {
        match self {
            Conflict::Disjoint { key, scope, asked } => {
                format!("not run: {key} {asked} lies outside the previous results ({key} {scope})")
            }
            Conflict::Unsupported { key } => {
                format!("not run: the previous results cannot be narrowed by another {key}")
            }
        }
    }
}

/// Keys that select a page rather than a population; a scope never carries them.
const PAGING_KEYS: &[&str] = &["cursor", "limit"];

impl Scope {
    pub fn new(tool: &str, args: &Map<String, Value>) -> Scope {
        let args = args
            .iter()
            .filter(|(k, _)| !PAGING_KEYS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Scope {
            tool: tool.to_string(),
            args,
            ids: None,
            page: None,
        }
    }

    /// Keeps the shown items' ids: when the tool takes an id list (`param`,
    /// spread last by [`Scope::apply`]), or when `complete` says they are
    /// the whole population, so a subset check can compare ids.
    pub fn with_ids(
        mut self,
        param: Option<&str>,
        field: &str,
        items: &[Value],
        complete: bool,
    ) -> Scope {
        if param.is_none() && !complete {
            return self;
        }
        if let Some(p) = param {
            // The ids are the scope; an earlier id list is not a filter.
            self.args.remove(p);
        }
        self.ids = ids_of(items, field).map(|ids| IdScope {
            param: param.map(str::to_string),
            field: field.to_string(),
            ids,
        });
        self
    }

    /// Remembers where the listing stopped, when it can be continued: the
    /// accounting of its first page, the cursor of its last, and the ids of
    /// every page shown (this turn's `items` after the `prior` ones).
    pub fn with_page(
        mut self,
        acc: Option<&Accounting>,
        field: &str,
        items: &[Value],
        stitched: Option<&Stitched>,
        shown: Shown<'_>,
    ) -> Scope {
        let abandoned = stitched.is_some_and(|s| s.end == StitchEnd::Abandoned);
        // A stitch continues from its last page, not its first.
        let cursor = match stitched {
            Some(s) => s.next_cursor.clone(),
            None => acc.and_then(|a| a.next_cursor.clone()),
        };
        let prior_ids = shown.prior.map(|p| p.ids.clone()).unwrap_or_default();
        let prior_shown = shown.prior.map_or(0, PageMark::shown);
        let mut args = shown.call_args.clone();
        args.remove("cursor");
        self.page = acc
            .filter(|a| a.has_more && !abandoned)
            .zip(cursor)
            .and_then(|(a, cursor)| {
                // Every row this turn showed must have an id, or a next page
                // could repeat it unseen (I-b): pages whose rows carry no
                // structure are not continued.
                let page_ids = ids_of(items, field)?;
                if (page_ids.len() as u64) < shown.displayed.saturating_sub(prior_shown) {
                    return None;
                }
                let mut ids = prior_ids;
                ids.extend(page_ids);
                // Past the bound, the mark says so instead of holding them:
                // a continuation is never checked against less than all.
                let full = ids.len() > MAX_SCOPE_IDS;
                if full {
                    ids = Vec::new();
                }
                Some(PageMark {
                    accounting: Accounting {
                        next_cursor: Some(cursor),
                        ..a.clone()
                    },
                    ids,
                    field: field.to_string(),
                    args: Some(args),
                    shown: shown.displayed,
                    pages: shown.prior.map_or(0, |p| p.pages) + shown.pages.max(1),
                    listing: shown.prior.and_then(|p| p.listing.clone()),
                    narrowed: shown.narrowed,
                    full,
                })
            });
        self
    }

    /// Adds the ids earlier turns showed of this listing to a complete or
    /// id-listed scope, so a narrowing follows the whole shown population.
    pub fn with_prior_ids(mut self, prior: Option<&PageMark>) -> Scope {
        if let (Some(scope), Some(prior)) = (self.ids.as_mut(), prior) {
            let mut ids = prior.ids.clone();
            ids.retain(|id| !scope.ids.contains(id));
            ids.append(&mut scope.ids);
            scope.ids = ids;
            if scope.ids.len() > MAX_SCOPE_IDS {
                self.ids = None;
            }
        }
        self
    }

    /// The model's arguments with the scope spread over them last. A date
    /// range can only shrink: the later start and the earlier end win, so
    /// "January" inside an April scope is an empty range (zero after
    /// narrowing), never April again and never wider than the scope. An empty
    /// or null model value is simply overridden (the model cannot widen).
    /// A model value that *differs* from the scope's is a [`Conflict`]: the
    /// call is not made with the scope's value under the model's label.
    pub fn apply(&self, model_args: &Map<String, Value>) -> (Map<String, Value>, Option<Conflict>) {
        let mut out = model_args.clone();
        let mut conflict = None;
        for (k, v) in &self.args {
            let model = model_args
                .get(k)
                .filter(|m| !m.is_null() && m.as_str().is_none_or(|s| !s.trim().is_empty()));
            let narrowed = match (k.as_str(), model.and_then(Value::as_str), v.as_str()) {
                ("date_from", Some(m), Some(s)) => Value::from(m.max(s)),
                ("date_to", Some(m), Some(s)) => Value::from(m.min(s)),
                _ => {
                    if let Some(m) = model.filter(|m| norm(m) != norm(v)) {
                        conflict.get_or_insert(match k.as_str() {
                            // Another search term is not a subset we can
                            // express with this tool: refuse, never guess.
                            "query" | "question" => Conflict::Unsupported { key: k.clone() },
                            _ => Conflict::Disjoint {
                                key: k.clone(),
                                scope: v.clone(),
                                asked: m.clone(),
                            },
                        });
                    }
                    v.clone()
                }
            };
            out.insert(k.clone(), narrowed);
        }
        // An id list only shrinks: the model's ids inside the scope, or all
        // of the scope's when it named none.
        if let Some(IdScope {
            param: Some(param),
            ids,
            ..
        }) = &self.ids
        {
            let asked: Vec<String> = model_args
                .get(param)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|v| {
                            v.as_str()
                                .map(str::to_string)
                                .unwrap_or_else(|| v.to_string())
                        })
                        .collect()
                })
                .unwrap_or_default();
            let kept: Vec<String> = match asked.is_empty() {
                true => ids.clone(),
                false => asked.iter().filter(|a| ids.contains(a)).cloned().collect(),
            };
            if kept.is_empty() && !asked.is_empty() {
                conflict.get_or_insert(Conflict::Disjoint {
                    key: param.clone(),
                    scope: Value::from(format!("the {} ids shown", ids.len())),
                    asked: Value::from(asked),
                });
            }
            out.insert(param.clone(), Value::from(kept));
        }
        (out, conflict)
    }

    /// Whether an item lies inside the scope, for the filters an item can
    /// show: project, floor, capture date range. Filters an item cannot show
    /// (a semantic query's relevance) are not held against it: matching
    /// literal words would call correct semantic hits "outside".
    pub fn contains(&self, item: &Value) -> bool {
        if let Some(scope) = &self.ids {
            if let Some(id) = super::result::id_in(item, &scope.field) {
                if !scope.ids.contains(&id) {
                    return false;
                }
            }
        }
        let arg = |k: &str| self.args.get(k).filter(|v| !v.is_null());
        let field = |k: &str| item.get(k);
        if let (Some(want), Some(got)) = (arg("project"), field("project")) {
            if want != got {
                return false;
            }
        }
        if let (Some(want), Some(got)) = (arg("floor"), field("floor")) {
            if norm(want) != norm(got) {
                return false;
            }
        }
        let date = field("captured_at")
            .and_then(Value::as_str)
            .map(|d| d.get(..10).unwrap_or(d));
        if let Some(date) = date {
            if arg("date_from")
                .and_then(Value::as_str)
                .is_some_and(|from| date < from)
            {
                return false;
            }
            if arg("date_to")
                .and_then(Value::as_str)
                .is_some_and(|to| date > to)
            {
                return false;
            }
        }
        true
    }
}

/// What one page was, as far as the gate is concerned. "Empty" needs the
/// emptiness judgement (an accounted zero), not just zero items; a page is
/// the whole scope only if nothing lies beyond it and no total contradicts it.
pub fn classify(
    scope: Option<&Scope>,
    items: &[Value],
    count: &Count,
    emptiness: Emptiness,
    limit_sentinel: u64,
    accounted: bool,
) -> NarrowingEvent {
    if let Some(scope) = scope {
        if !items.iter().all(|i| scope.contains(i)) {
            return NarrowingEvent::PageOutsideScope;
        }
    }
    // A page at the upstream's cap never "fits": rows beyond it may exist
    // whatever `has_more` says.
    // Without accounting nothing says the page is the whole scope.
    let fits = accounted
        && count.displayed > 0
        && count.displayed < limit_sentinel
        && !count.has_more
        && count.grade != CountGrade::Unknown
        && count.total.is_none_or(|t| t == count.displayed);
    match emptiness {
        // Zero inside the scope only when nothing was delivered: a page with
        // items never releases the scope, whatever its total says.
        Emptiness::Empty if count.displayed == 0 && items.is_empty() => NarrowingEvent::PageEmpty,
        _ if fits => NarrowingEvent::PageExhaustive,
        _ => NarrowingEvent::PagePartial,
    }
}

/// A narrowed page that fits with nothing beyond is the whole scope: the
/// shown count *is* exact for that scope, and the card is complete.
pub fn upgrade(count: &mut Count) {
    count.grade = CountGrade::Exact;
    count.total = Some(count.displayed);
    count.total_is_lower_bound = false;
    count.has_more = false;
    count.complete = true;
}

/// One turn's gate: a `narrowing` machine.
pub struct Gate {
    machine: Typed<Narrowing>,
}

impl Gate {
    pub fn new(table: &Bound<Narrowing>) -> Gate {
        Gate {
            machine: table.machine(),
        }
    }

    /// Applies a scope; the table's effect says what applying means.
    pub fn narrow(&mut self) -> Result<Option<NarrowingEffect>, Box<Violation>> {
        self.machine.fire(NarrowingEvent::Narrow).map(|s| s.effect)
    }

    /// A call of a later step, under the scope an earlier step of the turn
    /// narrowed to: the table's `narrow_held` row says whether it holds.
    pub fn narrow_held(&mut self) -> Result<Option<NarrowingEffect>, Box<Violation>> {
        self.machine
            .fire(NarrowingEvent::NarrowHeld)
            .map(|s| s.effect)
    }

    /// The table's verdict on one classified page.
    pub fn verdict(
        &mut self,
        page: NarrowingEvent,
    ) -> Result<Option<NarrowingEffect>, Box<Violation>> {
        self.machine.fire(page).map(|s| s.effect)
    }

    pub fn snapshot(&self) -> crate::fsm::Snapshot {
        self.machine.snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scope() -> Scope {
        let args = json!({"query": "safety", "floor": 3, "limit": 10})
            .as_object()
            .cloned()
            .unwrap();
        Scope::new("search_photos", &args)
    }

    #[test]
    fn the_scope_is_applied_last_and_drops_paging_keys() {
        let s = scope();
        assert!(s.args.get("limit").is_none());
        // An empty or null value cannot widen the scope: it is overridden.
        let model = json!({"query": "", "floor": null, "date_from": "2026-04-01", "limit": 50})
            .as_object()
            .cloned()
            .unwrap();
        let (out, conflict) = s.apply(&model);
        assert_eq!(
            Value::Object(out),
            json!({"query": "safety", "floor": 3, "date_from": "2026-04-01", "limit": 50})
        );
        assert_eq!(conflict, None);
        // The same value, spelt differently, is no conflict.
        let same = json!({"floor": "3"}).as_object().cloned().unwrap();
        assert_eq!(s.apply(&same).1, None);
    }

    #[test]
    fn a_differing_value_is_a_conflict_not_an_override() {
        let s = scope();
        let floor5 = json!({"floor": 5}).as_object().cloned().unwrap();
        assert!(
            matches!(s.apply(&floor5).1, Some(Conflict::Disjoint { ref key, .. }) if key == "floor")
        );
        let other_term = json!({"query": "scaffolding"})
            .as_object()
            .cloned()
            .unwrap();
        assert!(
            matches!(s.apply(&other_term).1, Some(Conflict::Unsupported { ref key }) if key == "query")
        );
    }

    #[test]
    fn a_date_range_only_shrinks() {
        let april = json!({"query": "safety", "date_from": "2026-04-01", "date_to": "2026-04-30"});
        let s = Scope::new("search_photos", april.as_object().unwrap());
        let january = json!({"date_from": "2026-01-01", "date_to": "2026-01-31"});
        let (out, _) = s.apply(january.as_object().unwrap());
        assert_eq!(
            (out["date_from"].as_str(), out["date_to"].as_str()),
            (Some("2026-04-01"), Some("2026-01-31"))
        );
        let whole_year = json!({"date_from": "2026-01-01", "date_to": "2026-12-31"});
        let (out, _) = s.apply(whole_year.as_object().unwrap());
        assert_eq!(
            (out["date_from"].as_str(), out["date_to"].as_str()),
            (Some("2026-04-01"), Some("2026-04-30"))
        );
    }

    #[test]
    fn subset_checks() {
        let s = scope();
        let inside = json!({"floor": 3, "captured_at": "2026-04-02", "annotations": [{"kind": "safety", "title": "no hard hat"}]});
        let other_floor = json!({"floor": 4, "annotations": [{"kind": "safety"}]});
        assert!(s.contains(&inside));
        assert!(!s.contains(&other_floor));
        let mut april = s.clone();
        april.args.insert("date_from".into(), json!("2026-05-01"));
        assert!(!april.contains(&inside));
    }

    #[test]
    fn an_unaccounted_page_never_fits_its_scope() {
        let count = Count {
            grade: CountGrade::Shown,
            displayed: 3,
            total: None,
            total_is_lower_bound: false,
            has_more: false,
            complete: false,
        };
        let items = [
            json!({"floor": 3}),
            json!({"floor": 3}),
            json!({"floor": 3}),
        ];
        let s = scope();
        let at = |accounted| {
            classify(
                Some(&s),
                &items,
                &count,
                Emptiness::NonEmpty,
                3000,
                accounted,
            )
        };
        assert_eq!(at(true), NarrowingEvent::PageExhaustive);
        assert_eq!(at(false), NarrowingEvent::PagePartial);
    }
}
