//! The "show more" driver (issue 36 §2): whether this turn continues the
//! listing its thread showed last, from the stored page mark, and the
//! paging machine resumed for it. It sends nothing and says nothing:
//! `plan.rs` plans the continuation's call and `call.rs` sends it with the
//! stitcher handed back here. It imports nothing of the turn but its state.

use serde_json::{Map, Value};

use crate::fsm::Violation;
use crate::judge::narrowing::{PageMark, Scope};
use crate::judge::stitch::Stitcher;
use crate::judge::Anchor;
use crate::llm::PlannedCall;
use crate::protocols::paging::Paging;
use crate::protocols::turn::TurnEvent;
use crate::protocols::Bound;

/// A listing an earlier turn showed, continued from its stored cursor.
struct Continuing {
    tool: String,
    mark: PageMark,
    stitcher: Stitcher,
}

/// What a planning round is, for "show more".
pub(super) enum Round {
    /// Ask the planner.
    Plan,
    /// The request carried the marker: the plan is the continuation, made
    /// by code (no model is asked what the user meant).
    Marker,
    /// The round after the continuation: the turn table's event for it.
    After(TurnEvent),
}

/// The turn's part in "show more".
#[derive(Default)]
pub(super) struct ShowMore {
    /// The request came with the "show more" marker.
    marker: bool,
    /// This turn continued a listing: its one round is the continuation,
    /// and the next is the turn table's `continued` row.
    continued: bool,
    /// The listing being continued, its paging machine already resumed.
    continuing: Option<Continuing>,
}

impl ShowMore {
    pub(super) fn new(marker: bool) -> ShowMore {
        ShowMore {
            marker,
            ..ShowMore::default()
        }
    }

    /// A planning round begins (`step` counts from 1). A continuation not
    /// sent in its round is not kept for a later one.
    pub(super) fn on_round(&mut self, step: u32) -> Round {
        self.continuing = None;
        match (self.continued, self.marker && step == 1) {
            (true, _) => Round::After(TurnEvent::Continued),
            (false, true) => Round::Marker,
            (false, false) => Round::Plan,
        }
    }

    /// The plan asks to continue the listing shown last (`previous`, the
    /// thread's population). Its one call, with the arguments the listing
    /// went out with and its paging machine resumed from the stored mark;
    /// or the anchor that says why nothing is continued. `sends_at_once`:
    /// whether the approval policy sends the listing's tool without a
    /// decision (a held call has no paging machine waiting for it).
    pub(super) fn continue_from(
        &mut self,
        previous: Option<&Scope>,
        sends_at_once: impl Fn(&str) -> bool,
        paging: &Bound<Paging>,
        page_cap: usize,
    ) -> Result<Result<PlannedCall, Anchor>, Box<Violation>> {
        let Some(scope) = previous else {
            return Ok(Err(Anchor::NothingToContinue { shown: false }));
        };
        let Some(mark) = scope.page.clone().filter(|m| m.cursor().is_some()) else {
            // A scope keeps its ids without an id parameter only when they
            // are the whole population (`Scope::with_ids`): that list was
            // shown to its end, which is not "cannot fetch more".
            let complete = scope.ids.as_ref().is_some_and(|i| i.param.is_none());
            return Ok(Err(match complete {
                true => Anchor::ListComplete,
                false => Anchor::NothingToContinue { shown: true },
            }));
        };
        // Past the ids the I-b check can hold, a listing is not continued.
        if mark.full {
            let shown = mark.shown();
            return Ok(Err(Anchor::ContinuationCapped { shown }));
        }
        let tool = scope.tool.clone();
        if !sends_at_once(&tool) {
            return Ok(Err(Anchor::NothingToContinue { shown: true }));
        }
        let args: Map<String, Value> = mark.args.clone().unwrap_or_else(|| scope.args.clone());
        let mut stitcher = Stitcher::new(paging, page_cap).with_id_field(&mark.field);
        stitcher.resume(&mark)?;
        tracing::info!(tool = %tool, pages = mark.pages, "continuing the listing the thread showed last");
        self.continued = true;
        self.continuing = Some(Continuing {
            tool: tool.clone(),
            mark,
            stitcher,
        });
        Ok(Ok(PlannedCall {
            id: None,
            tool,
            args,
            invalid_args: None,
        }))
    }

    /// The paging machine for a call of `tool`, when it is the listing
    /// being continued, and the stored cursor it goes on from (taken: one
    /// call continues it).
    pub(super) fn take_for(&mut self, tool: &str) -> Option<(Stitcher, Option<String>)> {
        let c = self.continuing.take_if(|c| c.tool == tool)?;
        let cursor = c.mark.cursor().map(str::to_string);
        Some((c.stitcher, cursor))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::narrowing::IdScope;
    use crate::protocols::TableSet;

    fn scope(ids: Option<IdScope>) -> Scope {
        Scope {
            tool: "list_issues".into(),
            args: Map::new(),
            ids,
            page: None,
        }
    }

    /// The rounds of a "show more" turn: the marker's plan first, then
    /// the turn table's `continued` event once a listing was continued.
    #[test]
    fn a_marker_turn_is_the_continuation_then_the_continued_row() {
        let mut plain = ShowMore::new(false);
        assert!(matches!(plain.on_round(1), Round::Plan));
        let mut marked = ShowMore::new(true);
        assert!(matches!(marked.on_round(1), Round::Marker));
        assert!(matches!(marked.on_round(2), Round::Plan));
        marked.continued = true;
        assert!(matches!(
            marked.on_round(3),
            Round::After(TurnEvent::Continued)
        ));
    }

    /// What cannot be continued is told by its own anchor, and nothing is
    /// planned: no listing shown, one shown to its end, one with no cursor.
    #[test]
    fn what_cannot_be_continued_is_told_and_not_planned() {
        let paging: Bound<Paging> = TableSet::builtin().unwrap().bound().unwrap();
        let mut more = ShowMore::new(true);
        let send = |_: &str| true;
        let none = more.continue_from(None, send, &paging, 5).unwrap();
        assert_eq!(
            none.unwrap_err(),
            Anchor::NothingToContinue { shown: false }
        );
        let whole = scope(Some(IdScope {
            param: None,
            field: "id".into(),
            ids: vec!["a".into()],
        }));
        let complete = more.continue_from(Some(&whole), send, &paging, 5).unwrap();
        assert_eq!(complete.unwrap_err(), Anchor::ListComplete);
        let cursorless = more
            .continue_from(Some(&scope(None)), send, &paging, 5)
            .unwrap();
        assert_eq!(
            cursorless.unwrap_err(),
            Anchor::NothingToContinue { shown: true }
        );
        assert!(!more.continued && more.take_for("list_issues").is_none());
    }
}
