//! `tables/paging.ron`: page stitching invariants.

use super::Protocol;
use crate::fsm::Invariant;

crate::names! {
    pub enum PagingState {
        Start = "Start",
        /// A listing an earlier turn showed, about to take its next page
        /// from the stored cursor.
        Continuing = "Continuing",
        Stitching = "Stitching",
        Complete = "Complete",
        Abandoned = "Abandoned",
        Capped = "Capped",
    }
}

crate::names! {
    pub enum PagingEvent {
        PageMore = "page_more",
        PageLast = "page_last",
        TotalMismatch = "total_mismatch",
        IdOverlap = "id_overlap",
        Unaccounted = "unaccounted",
        CapReached = "cap_reached",
        /// A later page's call failed (a transport error): no page at all.
        PageFailed = "page_failed",
        /// A continuation of a tool that is not stitched: one page, then stop.
        StopFollowing = "stop_following",
        /// "Show more": continue a listing an earlier turn showed.
        ContinueShown = "continue_shown",
        /// The server answered the page's call with a question for the
        /// user instead of a page.
        PageAsks = "page_asks",
    }
}

crate::names! {
    pub enum PagingEffect {
        KeepPage = "keep-page",
        AppendPage = "append-page",
        DiscardStitch = "discard-stitch",
        /// Discard the stitch, and the first page's total with it: the
        /// server contradicted it (I-a), so it grades nothing.
        DiscardContradicted = "discard-contradicted",
        StopAtCap = "stop-at-cap",
        StopFollowing = "stop-following",
        /// Take the shown pages as the reference for the next one.
        ResumeListing = "resume-listing",
        /// The server did not take the stored cursor: nothing is appended,
        /// and the listing cannot be continued.
        RejectCursor = "reject-cursor",
        /// The continued page's call failed: nothing is appended, and the
        /// listing stays where it stopped, to be asked for again.
        KeepShown = "keep-shown",
        /// Hold the call at an interrupt that shows the server's question
        /// (the approval table's `input_required`).
        HoldCall = "hold-call",
        /// The first page's call failed: the call failed, judged by the
        /// turn (there is no page to stand alone).
        FailCall = "fail-call",
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Paging;

impl Protocol for Paging {
    const NAME: &'static str = "paging";
    type State = PagingState;
    type Event = PagingEvent;
    type Effect = PagingEffect;
    const INVARIANTS: &'static [Invariant<'static>] = &[
        Invariant::RowIs {
            from: "Start",
            event: "page_failed",
            effect: "fail-call",
            why: "a first page that never came is the call's failure: read as no page, it would be an empty result, and an empty result is a claim of \"none\"",
        },
        Invariant::RowIs {
            from: "Start",
            event: "page_asks",
            effect: "hold-call",
            why: "a first page that is a question is held for the user: read as no page, it would be an empty result, and an empty result is a claim of \"none\"",
        },
        Invariant::EffectOnlyFrom {
            effect: "hold-call",
            from: &["Start"],
            why: "a held call is sent again from its arguments, which carry no page's cursor: holding a later page would fetch the first again and drop the pages shown",
        },
        Invariant::EffectOnlyFrom {
            effect: "fail-call",
            from: &["Start"],
            why: "only the first page's failure is the call's; a later page's leaves the pages shown standing",
        },
    ];
}
