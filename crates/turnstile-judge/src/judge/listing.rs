//! The judgement of one listing, as a pure function: given what a call
//! returned (its first page, or the stitched pages), the scope it ran in and
//! its narrowing machine, decide the grade, the anchors, the card, the
//! population a follow-up may narrow, and whether the scope is released.
//! Every count, absence and failure decision of a turn is made here.

use serde_json::{Map, Value};

use super::contracts::AccountingMode;
use super::digest::{Digest, DigestLimits};
use super::emptiness::{read_result_emptiness, AbsenceCause, Emptiness};
use super::grade::CountGrade;
use super::narrowing::{self, Gate, Scope};
use super::result::Reading;
use super::stitch::{StitchEnd, Stitched};
use super::{grade, Accounting, Anchor, Contract, Count};
use crate::protocols::narrowing::{NarrowingEffect, NarrowingEvent};
use crate::wire;
use turnstile_output::ToolOutput;

/// What the judge is given about one listing.
pub struct Input<'a> {
    pub tool: &'a str,
    pub contract: Option<&'a Contract>,
    /// The arguments that went out (with any scope applied).
    pub args: &'a Map<String, Value>,
    pub first: &'a ToolOutput,
    /// The first page as read with the tool's contract.
    pub reading: &'a Reading,
    pub stitched: Option<&'a Stitched>,
    /// The input parameter that takes a list of item ids (configured, or
    /// detected from the tool's input schema): the population keeps the
    /// shown ids so a narrowing follow-up can be held to them.
    pub ids_param: Option<&'a str>,
    /// The scope the call ran in, when the narrowing table applied one.
    pub scope: Option<&'a Scope>,
    pub limit_sentinel: u64,
    pub digest: DigestLimits,
}

/// What the judge decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub anchors: Vec<Anchor>,
    /// The card to show; `None` for an aggregate or a discarded page.
    pub card: Option<wire::Citation>,
    /// A single-value aggregate's structured carrier.
    pub figure: Option<wire::Figure>,
    /// The population this listing showed, for a later narrowing follow-up.
    pub population: Option<Scope>,
    /// The listing released its scope: the thread's population is cleared.
    pub release: bool,
    /// What the planner and the responder see of it.
    pub digest: Digest,
    /// The narrowing table refused a page outside the scope (its row id):
    /// the page was discarded.
    pub refused_row: Option<String>,
    /// The narrowing table refused a page for another reason: a table edit
    /// the code does not expect. The agent ends the turn naming the row.
    pub violation: Option<Box<crate::fsm::Violation>>,
}

impl Judgement {
    fn new(digest: Digest) -> Judgement {
        Judgement {
            anchors: Vec::new(),
            card: None,
            figure: None,
            population: None,
            release: false,
            digest,
            refused_row: None,
            violation: None,
        }
    }

    /// Nothing inside the scope: say so, and clear the population.
    fn released(mut self) -> Judgement {
        self.release = true;
        self.population = None;
        self.anchors.push(Anchor::Absent {
            cause: AbsenceCause::ZeroAfterNarrowing,
        });
        self.anchors.push(Anchor::NarrowingReleased);
        self
    }
}

/// Judges one listing. `gate` is this listing's narrowing machine; its
/// verdict decides upgrades and releases.
pub fn judge(input: Input<'_>, gate: &mut Gate) -> Judgement {
    let reading = input.reading;
    // A continuation of an earlier turn's listing that did not continue
    // it (the data moved, or the server did not take the stored cursor):
    // its page is not a continuation of what the user saw, and whatever it
    // holds is not shown as one.
    if let Some(s) = input.stitched.filter(|s| s.resumed && s.nothing_continued) {
        return drifted(&input, s);
    }
    // A single-value aggregate needs no card: it is carried by a figure.
    if let Some((column, value)) = &reading.aggregate {
        return aggregate(&input, column, value);
    }
    // One record from a detail lookup: described, never counted.
    if let Some(rec) = &reading.record {
        return record(&input, rec);
    }
    listing(input, gate)
}

/// A single value: exact when the server is held to accounting, "as the
/// server said" when it sends none.
fn aggregate(input: &Input<'_>, column: &str, value: &Value) -> Judgement {
    let tool = input.tool;
    let accounted = input.reading.mode == AccountingMode::Required;
    let grade = if accounted {
        CountGrade::Exact
    } else {
        CountGrade::Shown
    };
    let (anchor, shown) = match value {
        // NULL says neither "none" nor a number (MAX over no rows, or
        // over empty values): nothing is claimed either way.
        Value::Null => (
            Anchor::NoValue {
                source: tool.to_string(),
            },
            None,
        ),
        v => {
            let text = v
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string());
            // What goes into a directive is bounded and redacted like
            // a digest: a value may be a capability URL.
            let column = super::digest::bounded_text(column, input.digest.chars);
            let value = super::digest::bounded_text(&text, input.digest.chars);
            let anchor = match accounted {
                true => Anchor::Aggregate {
                    source: tool.to_string(),
                    column,
                    value,
                },
                false => Anchor::ValueUnaccounted {
                    source: tool.to_string(),
                    column,
                    value,
                },
            };
            (anchor, Some(text))
        }
    };
    let mut j = Judgement::new(Digest::value(tool, shown, grade, input.digest));
    j.anchors.push(anchor);
    j.figure = (!value.is_null()).then(|| wire::Figure {
        source: tool.to_string(),
        label: column.to_string(),
        value: value.clone(),
        grade: grade.as_str().to_string(),
        accounted,
        query: input.args.clone(),
    });
    j
}

fn record(input: &Input<'_>, rec: &serde_json::Map<String, Value>) -> Judgement {
    let tool = input.tool;
    let reading = input.reading;
    let id = reading
        .id(&Value::Object(rec.clone()))
        .map(|id| super::digest::bounded_text(&id, input.digest.chars))
        .unwrap_or_default();
    let mut j = Judgement::new(Digest::record(tool, rec, input.digest));
    j.anchors.push(Anchor::Record {
        source: tool.to_string(),
        id,
    });
    let items = vec![Value::Object(rec.clone())];
    let links = links(input, &items);
    j.card = Some(wire::Citation {
        source: tool.to_string(),
        items,
        displayed: 1,
        total: None,
        total_is_lower_bound: false,
        has_more: false,
        grade: super::CountGrade::Shown.as_str().to_string(),
        complete: false,
        narrowed: false,
        stitch: None,
        listing: None,
        shown_before: None,
        more: false,
        links,
    });
    j
}

/// A continuation that did not continue: nothing of its page is shown.
/// The card it emits is the listing as it now stands, for the card the
/// user saw: no new items, and no further "show more". When the data moved
/// since (the total changed, or ids repeat), the total shown then is
/// contradicted and grades nothing: SHOWN. When the server did not take the
/// stored cursor, what was shown stands as it was.
fn drifted(input: &Input<'_>, s: &Stitched) -> Judgement {
    let tool = input.tool;
    let anomaly = s.anomaly.as_ref().map(|a| a.describe()).unwrap_or_default();
    let mut j = Judgement::new(Digest::failed(
        tool,
        format!("next page discarded: {anomaly}"),
    ));
    j.anchors.push(if s.keep_shown {
        Anchor::ToolFailed {
            tool: tool.to_string(),
        }
    } else if s.cursor_rejected {
        Anchor::CursorRejected {
            tool: tool.to_string(),
        }
    } else {
        Anchor::ContinuationDrifted { anomaly }
    });
    let Some(prior) = &s.prior else {
        return j;
    };
    let shown = prior.shown();
    let mut count = grade(Some(&prior.accounting), shown, input.limit_sentinel);
    if s.contradicted {
        grade::contradicted(&mut count);
    }
    // What the user saw stays the population a follow-up narrows. It can
    // be continued again only when the call failed (`keep-shown`): a
    // failure says nothing of the cursor.
    let mut population = Scope::new(tool, input.args);
    if s.keep_shown {
        population.page = Some(prior.clone());
    }
    j.population = Some(population);
    j.card = Some(wire::Citation {
        source: tool.to_string(),
        items: Vec::new(),
        displayed: count.displayed,
        total: count.total,
        total_is_lower_bound: count.total_is_lower_bound,
        has_more: count.has_more,
        grade: count.grade.as_str().to_string(),
        complete: false,
        narrowed: prior.narrowed,
        stitch: Some(stitch_info(s)),
        listing: prior.listing.clone(),
        shown_before: Some(shown),
        more: false,
        links: Vec::new(),
    });
    j
}

/// A listing: its items (stitched or one page), its count, the narrowing
/// table's verdict, the anchor that says it, and its card.
fn listing(input: Input<'_>, gate: &mut Gate) -> Judgement {
    let tool = input.tool;
    let reading = input.reading;
    let accounted = reading.mode == AccountingMode::Required;
    let (anchors, items, accounting) = pages(&input);
    let displayed = items
        .as_ref()
        .map(|v| v.len() as u64)
        .or(accounting.as_ref().map(|a| a.returned))
        .unwrap_or(0);
    let mut count = listing_count(&input, accounting.as_ref(), displayed);
    let items = items.unwrap_or_default();

    // The listing's narrowing verdict, decided by the table. Emptiness is
    // read from the first page; a listing that delivered items (a later
    // stitched page) is never "none", whatever its first page said.
    let emptiness = match read_result_emptiness(input.contract, reading, input.first) {
        Emptiness::Empty if count.displayed > 0 || !items.is_empty() => Emptiness::NonEmpty,
        e => e,
    };
    let page = narrowing::classify(
        input.scope,
        &items,
        &count,
        emptiness,
        input.limit_sentinel,
        accounted,
    );
    let effect = match gate.verdict(page) {
        Ok(effect) => effect,
        Err(v) if page != NarrowingEvent::PageOutsideScope => {
            let mut j = Judgement::new(Digest::failed(tool, "refused by the narrowing table"));
            j.violation = Some(v);
            return j;
        }
        Err(v) => {
            // A page outside the scope reaches the forbidden row the table
            // names for it: another population, discarded, never shown as
            // the answer.
            let mut j = Judgement::new(Digest::failed(
                tool,
                "discarded: outside the narrowing scope",
            ));
            j.anchors.push(Anchor::OutsideScope {
                tool: tool.to_string(),
            });
            j.refused_row = Some(v.row_id.clone());
            return j;
        }
    };
    let released = effect == Some(NarrowingEffect::ReleaseScope);
    if effect == Some(NarrowingEffect::UpgradeExact) {
        narrowing::upgrade(&mut count);
    }
    let digest = Digest::listing(tool, &count, &items, input.digest);
    let mut j = Judgement::new(digest);
    j.anchors = anchors;
    if released {
        j = j.released();
    } else {
        j.anchors.push(count_anchor(tool, emptiness, &count));
        j.population = Some(population(&input, accounting.as_ref(), &items, &count));
    }
    j.card = Some(card(&input, items, &count));
    j
}

/// The listing's count, graded. A continuation adds its pages to what
/// earlier turns showed of the listing: `displayed` adds up, the total
/// stays the first page's verified total, and the listing is complete only
/// when the pages shown reach it and nothing more exists.
fn listing_count(input: &Input<'_>, accounting: Option<&Accounting>, displayed: u64) -> Count {
    let mut count = match input.reading.mode {
        AccountingMode::Required => grade(accounting, displayed, input.limit_sentinel),
        AccountingMode::Absent => grade::unaccounted(displayed, input.limit_sentinel),
    };
    if let Some(p) = input.stitched.and_then(|s| s.prior.as_ref()) {
        count.displayed += p.shown();
        // An exact total below what the pages delivered is contradicted by
        // them, as `grade` treats one page's delivery.
        if count.grade == CountGrade::Exact && count.total.is_some_and(|t| t < count.displayed) {
            count.grade = CountGrade::Shown;
            count.total = None;
        }
        count.complete = count.grade == CountGrade::Exact
            && !count.has_more
            && count.total == Some(count.displayed);
    }
    // A total the server contradicted between pages is its word, not a
    // verified count (paging row `total-changed`): what is shown is shown.
    if input.stitched.is_some_and(|s| s.contradicted) {
        grade::contradicted(&mut count);
    }
    count
}

/// The population a listing showed, for a narrowing follow-up and for
/// "show more": its tool and arguments, its ids, and where it stopped.
fn population(
    input: &Input<'_>,
    accounting: Option<&Accounting>,
    items: &[Value],
    count: &Count,
) -> Scope {
    let prior = input.stitched.and_then(|s| s.prior.as_ref());
    let reading = input.reading;
    let shown = narrowing::Shown {
        prior,
        displayed: count.displayed,
        pages: input.stitched.map_or(1, |s| s.pages),
        narrowed: narrowed(input),
        call_args: input.args,
    };
    Scope::new(input.tool, input.args)
        .with_ids(input.ids_param, &reading.id_field, items, count.complete)
        .with_prior_ids(prior)
        .with_page(accounting, &reading.id_field, items, input.stitched, shown)
}

/// The listing's items and accounting, stitched or one page, and what the
/// stitch says of itself (abandoned, capped).
fn pages(input: &Input<'_>) -> (Vec<Anchor>, Option<Vec<Value>>, Option<Accounting>) {
    let reading = input.reading;
    let mut anchors = Vec::new();
    let (items, accounting) = match input.stitched {
        Some(s) => {
            match s.end {
                StitchEnd::Abandoned => anchors.push(Anchor::StitchAbandoned {
                    anomaly: s.anomaly.as_ref().map(|a| a.describe()).unwrap_or_default(),
                }),
                // A continuation that took one page stopped by design.
                StitchEnd::Capped if s.resumed => {}
                StitchEnd::Capped => anchors.push(Anchor::StitchCapped { pages: s.pages }),
                // More exists beyond the last page but cannot be fetched:
                // the stitch keeps `has_more`, so the count anchors speak
                // of "these N", never of the whole listing.
                StitchEnd::Complete | StitchEnd::NoCursor => {}
            }
            // Pages without a structure hold no items; their count is what
            // they said they returned, as for an unstitched page.
            let items = reading.items.is_some().then(|| s.items.clone());
            (items, s.accounting.clone())
        }
        None => (reading.items.clone(), reading.accounting.clone()),
    };
    (anchors, items, accounting)
}

/// The anchor that says a judged count. "None" only with the right to
/// say it; a zero without that right is no count at all.
fn count_anchor(tool: &str, emptiness: Emptiness, count: &Count) -> Anchor {
    match (emptiness, count.displayed) {
        // The right to say "none": an accounted zero, nothing delivered.
        (Emptiness::Empty, 0) => Anchor::Absent {
            cause: AbsenceCause::ZeroFromStart,
        },
        // Without that right, a zero is no count at all: never "none" (a
        // result that delivered rows it did not structure is not "exactly 0"
        // either).
        (Emptiness::Unknown, 0) => Anchor::CountUnknown {
            source: tool.to_string(),
        },
        (Emptiness::NonEmpty, 0) if count.total == Some(0) => Anchor::CountUnknown {
            source: tool.to_string(),
        },
        _ => Anchor::for_count(tool, count),
    }
}

/// The listing ran inside a narrowing scope (or continues one that did).
fn narrowed(input: &Input<'_>) -> bool {
    input.scope.is_some()
        || input
            .stitched
            .and_then(|s| s.prior.as_ref())
            .is_some_and(|p| p.narrowed)
}

fn stitch_info(s: &Stitched) -> wire::StitchInfo {
    wire::StitchInfo {
        end: match (s.resumed, s.end) {
            // A page that continues an earlier turn's listing.
            (true, StitchEnd::Capped) => "continued".to_string(),
            (_, end) => serde_json::to_value(end)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
        },
        pages: s.pages,
        anomaly: s
            .anomaly
            .as_ref()
            .and_then(|a| serde_json::to_value(a).ok()),
    }
}

/// Each item's deep link, by the tool's configured map (none without one).
fn links(input: &Input<'_>, items: &[Value]) -> Vec<Option<wire::DeepLink>> {
    (input.contract.and_then(|c| c.shape.deep_link.as_ref()))
        .map(|m| m.links(items))
        .unwrap_or_default()
}

/// The citation card of a judged listing.
fn card(input: &Input<'_>, items: Vec<Value>, count: &Count) -> wire::Citation {
    let tool = input.tool;
    let prior = input.stitched.and_then(|s| s.prior.as_ref());
    let links = links(input, &items);
    wire::Citation {
        source: tool.to_string(),
        items,
        displayed: count.displayed,
        total: count.total,
        total_is_lower_bound: count.total_is_lower_bound,
        has_more: count.has_more,
        grade: count.grade.as_str().to_string(),
        complete: count.complete,
        narrowed: narrowed(input),
        stitch: input.stitched.map(stitch_info),
        listing: prior.and_then(|p| p.listing.clone()),
        shown_before: prior.map(|p| p.shown()),
        // Decided by the agent, which knows the page cap.
        more: false,
        links,
    }
}
