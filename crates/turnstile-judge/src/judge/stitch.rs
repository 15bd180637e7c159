//! Page stitching (seed 003 §4.9; `tables/paging.ron`).
//!
//! Invariants checked on every page against the first: I-a equal totals,
//! including whether the total is a lower bound; I-b no id overlap; a page
//! without accounting is untrusted. On any anomaly the stitch is discarded
//! and the first page alone is answered, with the fact stated — never a
//! blended population. A stitched count is never a sum of pages: the
//! verified per-page total is kept and only "displayed" accumulates.

use std::collections::HashSet;

use serde::Serialize;
use serde_json::Value;

use super::accounting::Accounting;
use super::continuation::PageMark;
use super::result::Reading;
use crate::fsm::Violation;
use crate::protocols::paging::{Paging, PagingEffect, PagingEvent, PagingState};
use crate::protocols::{Bound, Typed};

/// The five ways a stitch goes wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Anomaly {
    /// I-a: the total changed between pages.
    TotalChanged { first: u64, now: u64 },
    /// I-a: one page called its total exact and another a lower bound.
    BoundKindChanged,
    /// I-b: a page repeated ids an earlier page already delivered.
    IdOverlap { repeated: usize },
    /// A page came without accounting: it cannot be trusted to continue.
    Unaccounted,
    /// A later page's call failed (a transport error, a JSON-RPC error):
    /// there is no page to check, so the stitch cannot go on.
    PageFailed { error: String },
}

impl Anomaly {
    pub fn describe(&self) -> String {
        match self {
            Anomaly::TotalChanged { first, now } => {
                format!("the total changed between pages ({first} → {now})")
            }
            Anomaly::BoundKindChanged => {
                "one page gave an exact total and another a lower bound".into()
            }
            Anomaly::IdOverlap { repeated } => {
                format!("a later page repeated {repeated} items of an earlier one")
            }
            Anomaly::Unaccounted => "a page arrived without accounting".into(),
            Anomaly::PageFailed { error } => format!("the call for a later page failed ({error})"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StitchEnd {
    /// The last page said nothing more exists.
    Complete,
    Abandoned,
    Capped,
    /// The last page said more exists but gave no cursor to fetch it:
    /// stitching ends (the table's `page_last`), but the stitch is a sample,
    /// never the whole listing.
    NoCursor,
}

/// What a stitch produced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stitched {
    pub end: StitchEnd,
    pub pages: usize,
    /// On `Abandoned`, the first page only.
    pub items: Vec<Value>,
    /// The first page's accounting: the population's verified total.
    pub accounting: Option<Accounting>,
    pub anomaly: Option<Anomaly>,
    /// It continued a listing an earlier turn showed: `items` hold only
    /// this turn's pages (none when abandoned).
    pub resumed: bool,
    /// What the earlier turns showed of the listing this stitch continued.
    pub prior: Option<PageMark>,
    /// The server did not take the stored cursor (paging effect
    /// `reject-cursor`): nothing new, and the listing cannot go on.
    pub cursor_rejected: bool,
    /// A continuation whose first page was not taken (drifted, rejected or
    /// failed): nothing of this turn is shown. A later page's anomaly
    /// leaves the continuation's first page standing, as a stitch's first
    /// page stands within one turn.
    pub nothing_continued: bool,
    /// The continued page's call failed (paging effect `keep-shown`): the
    /// listing stays where it stopped, and may be asked for again.
    pub keep_shown: bool,
    /// The last kept page's cursor: where a later turn may continue.
    pub next_cursor: Option<String>,
    /// The server contradicted the first page's total (the table's
    /// `discard-contradicted`): that total is its word, not a verified
    /// count, and grades nothing.
    pub contradicted: bool,
}

pub struct Stitcher {
    machine: Typed<Paging>,
    cap: usize,
    pages: usize,
    first: Option<Accounting>,
    first_items: Vec<Value>,
    items: Vec<Value>,
    ids: HashSet<String>,
    anomaly: Option<Anomaly>,
    next_cursor: Option<String>,
    /// The last page said `has_more` without a cursor: more exists that
    /// this stitch cannot reach.
    more_unreachable: bool,
    /// What the kept pages delivered: their items, or what each page said
    /// it returned when it carried no structure to hold them in.
    returned: u64,
    /// The item field that identifies an item.
    id_field: String,
    /// What earlier turns showed of the listing ([`Stitcher::resume`]).
    prior: Option<PageMark>,
    cursor_rejected: bool,
    /// The continuation's first page was not taken: nothing continued.
    nothing_continued: bool,
    /// The table's `keep-shown`: nothing was added, and the listing may be
    /// asked for again from where it stopped.
    keep_shown: bool,
    /// The table discarded the stitch because the server contradicted its
    /// first page's total.
    contradicted: bool,
}

impl Stitcher {
    pub fn new(table: &Bound<Paging>, cap: usize) -> Stitcher {
        Stitcher {
            machine: table.machine(),
            cap: cap.max(1),
            pages: 0,
            first: None,
            first_items: Vec::new(),
            items: Vec::new(),
            ids: HashSet::new(),
            anomaly: None,
            next_cursor: None,
            more_unreachable: false,
            returned: 0,
            id_field: "id".into(),
            prior: None,
            cursor_rejected: false,
            nothing_continued: false,
            keep_shown: false,
            contradicted: false,
        }
    }

    /// The item field that identifies an item (`id` unless configured).
    pub fn with_id_field(mut self, field: &str) -> Stitcher {
        self.id_field = field.to_string();
        self
    }

    /// The ids delivered by the kept pages.
    pub fn ids(&self) -> impl Iterator<Item = &String> {
        self.ids.iter()
    }

    fn classify(&mut self, acc: Option<&Accounting>, items: &[Value]) -> PagingEvent {
        let Some(acc) = acc else {
            self.anomaly = Some(Anomaly::Unaccounted);
            return PagingEvent::Unaccounted;
        };
        if let Some(first) = &self.first {
            let lb = |a: &Accounting| a.total.is_none() && a.total_lower_bound.is_some();
            let value = |a: &Accounting| a.total.or(a.total_lower_bound);
            if lb(first) != lb(acc) {
                self.anomaly = Some(Anomaly::BoundKindChanged);
                return PagingEvent::TotalMismatch;
            }
            if value(first) != value(acc) {
                self.anomaly = Some(Anomaly::TotalChanged {
                    first: value(first).unwrap_or(0),
                    now: value(acc).unwrap_or(0),
                });
                return PagingEvent::TotalMismatch;
            }
            let repeated = items
                .iter()
                .filter_map(|i| self.id_of(i))
                .filter(|id| self.ids.contains(id))
                .count();
            if repeated > 0 {
                self.anomaly = Some(Anomaly::IdOverlap { repeated });
                return PagingEvent::IdOverlap;
            }
        }
        // Stitching goes on only with a cursor to follow. A page that says
        // more exists but gives no cursor ends the stitch (nothing more can
        // be fetched) without making it the whole listing: `finish` keeps
        // `has_more` for it.
        match (acc.has_more, acc.next_cursor.is_some()) {
            (true, true) => PagingEvent::PageMore,
            (true, false) => {
                self.more_unreachable = true;
                PagingEvent::PageLast
            }
            (false, _) => PagingEvent::PageLast,
        }
    }

    fn id_of(&self, item: &Value) -> Option<String> {
        super::result::id_in(item, &self.id_field)
    }

    /// Continues a listing earlier turns showed ("show more", the table's
    /// `continue_shown`): the next page pushed is checked against the first
    /// page's accounting (I-a) and every id shown so far (I-b), as a later
    /// page would be within one turn. The cap counts this turn's pages. The
    /// shown pages are not repeated: an abandoned continuation delivers
    /// nothing.
    pub fn resume(&mut self, mark: &PageMark) -> Result<(), Box<Violation>> {
        self.machine.fire(PagingEvent::ContinueShown)?;
        self.first = Some(mark.accounting.clone());
        self.ids.extend(mark.ids.iter().cloned());
        self.prior = Some(mark.clone());
        Ok(())
    }

    /// Takes one page, read with the tool's contract; returns the cursor of
    /// the next page to fetch, if the table says stitching goes on.
    pub fn push(&mut self, reading: &Reading) -> Result<Option<String>, Box<Violation>> {
        let acc = reading.accounting.clone();
        let items = reading.items.clone().unwrap_or_default();
        let event = self.classify(acc.as_ref(), &items);
        if self.pages == 0 {
            // The first page is what an abandoned stitch falls back to, so it
            // is kept whatever the table decides about stitching. A
            // continuation's reference stays the listing's first page.
            if self.prior.is_none() {
                self.first = acc.clone();
            }
            self.first_items = items.clone();
        }
        let from = self.machine.state();
        let step = self.machine.fire(event)?;
        if from == PagingState::Continuing && self.machine.state() == PagingState::Abandoned {
            self.nothing_continued = true;
        }
        self.pages += 1;
        let returned = (items.len() as u64).max(acc.as_ref().map_or(0, |a| a.returned));
        match step.effect {
            Some(PagingEffect::KeepPage) | Some(PagingEffect::AppendPage) => {
                self.returned += returned;
                self.append(items)
            }
            Some(PagingEffect::DiscardContradicted) => self.contradicted = true,
            Some(PagingEffect::RejectCursor) => self.cursor_rejected = true,
            Some(PagingEffect::DiscardStitch)
            | Some(PagingEffect::KeepShown)
            | Some(PagingEffect::ResumeListing)
            | Some(PagingEffect::StopAtCap)
            | Some(PagingEffect::StopFollowing)
            // A page that came holds nothing: only a question can be held.
            | Some(PagingEffect::HoldCall)
            | Some(PagingEffect::FailCall)
            | None => {}
        }
        self.next_cursor = acc.and_then(|a| a.next_cursor);
        if self.machine.state() == PagingState::Stitching && self.pages >= self.cap {
            self.machine.fire(PagingEvent::CapReached)?;
        }
        Ok(match self.machine.state() {
            PagingState::Stitching => self.next_cursor.clone(),
            _ => None,
        })
    }

    fn append(&mut self, items: Vec<Value>) {
        for i in &items {
            if let Some(id) = self.id_of(i) {
                self.ids.insert(id);
            }
        }
        self.items.extend(items);
    }

    /// Stops following the cursor before the listing's end (a continuation
    /// of a tool that is not stitched): the table's `stop_following` row.
    pub fn stop_here(&mut self) -> Result<(), Box<Violation>> {
        if self.machine.state() == PagingState::Stitching {
            self.machine.fire(PagingEvent::StopFollowing)?;
        }
        Ok(())
    }

    /// The server answered a page's call with a question for the user: the
    /// table's `page_asks` row says whether the call is held for it (true)
    /// or the page is no page, like a failed one (false).
    pub fn page_asks(&mut self) -> Result<bool, Box<Violation>> {
        self.no_page(PagingEvent::PageAsks, "input_required")
            .map(|effect| effect == Some(PagingEffect::HoldCall))
    }

    /// A page's call failed (`kind` names how, never the text): the
    /// table's `page_failed` row says whether that fails the call (true: a
    /// first page, as shipped) or the first page stands alone.
    pub fn page_failed(&mut self, kind: &str) -> Result<bool, Box<Violation>> {
        self.no_page(PagingEvent::PageFailed, kind)
            .map(|effect| effect == Some(PagingEffect::FailCall))
    }

    /// A page that did not come: the row's effect, applied.
    fn no_page(
        &mut self,
        event: PagingEvent,
        kind: &str,
    ) -> Result<Option<PagingEffect>, Box<Violation>> {
        let from = self.machine.state();
        let step = self.machine.fire(event)?;
        if matches!(
            step.effect,
            Some(PagingEffect::HoldCall | PagingEffect::FailCall)
        ) {
            return Ok(step.effect);
        }
        if from == PagingState::Continuing {
            self.nothing_continued = true;
        }
        match step.effect {
            Some(PagingEffect::RejectCursor) => self.cursor_rejected = true,
            Some(PagingEffect::KeepShown) => self.keep_shown = true,
            _ => {}
        }
        self.anomaly = Some(Anomaly::PageFailed {
            error: kind.to_string(),
        });
        Ok(step.effect)
    }

    /// The paging machine as it is now.
    pub fn snapshot(&self) -> crate::fsm::Snapshot {
        self.machine.snapshot()
    }

    pub fn finish(self) -> Stitched {
        let end = match self.machine.state() {
            // A stitch left mid-way (a refused page) falls back like an
            // abandoned one: never a blend.
            PagingState::Abandoned | PagingState::Stitching | PagingState::Continuing => {
                StitchEnd::Abandoned
            }
            PagingState::Capped => StitchEnd::Capped,
            PagingState::Complete | PagingState::Start if self.more_unreachable => {
                StitchEnd::NoCursor
            }
            PagingState::Complete | PagingState::Start => StitchEnd::Complete,
        };
        let (items, accounting, returned) = match end {
            // Discard the stitch; the first page stands alone.
            StitchEnd::Abandoned => (self.first_items, self.first, None),
            _ => (self.items, self.first, Some(self.returned)),
        };
        let accounting = accounting.map(|mut a| {
            // The population's total is the verified first-page total; only
            // what is displayed accumulates. More may exist unless the stitch
            // reached the listing's end. Pages without a structure deliver
            // rows the stitch cannot hold: what they said they returned is
            // kept, so a stitch of them is never mistaken for zero.
            a.returned = returned.unwrap_or(a.returned).max(items.len() as u64);
            a.has_more = end != StitchEnd::Complete;
            a
        });
        Stitched {
            end,
            pages: self.pages,
            items,
            accounting,
            anomaly: self.anomaly,
            resumed: self.prior.is_some(),
            prior: self.prior,
            cursor_rejected: self.cursor_rejected,
            nothing_continued: self.nothing_continued,
            keep_shown: self.keep_shown,
            contradicted: self.contradicted,
            next_cursor: match end {
                StitchEnd::Abandoned => None,
                _ => self.next_cursor,
            },
        }
    }
}
