//! `tables/narration.ron`: the narration guard — what kind of claim in a
//! model sentence meets what kind of warrant from the judge.

use super::Protocol;

crate::names! {
    pub enum NarrationState {
        Checking = "Checking",
        Passed = "Passed",
    }
}

crate::names! {
    /// One claim of a sentence, named by the warrant it has (or lacks).
    pub enum NarrationEvent {
        CountExact = "count_exact",
        CountShown = "count_shown",
        CountShownAsTotal = "count_shown_as_total",
        CountBound = "count_bound",
        CountBoundAsExact = "count_bound_as_exact",
        CountUserNamed = "count_user_named",
        CountFromAttribute = "count_from_attribute",
        CountUnlicensed = "count_unlicensed",
        AttributeLicensed = "attribute_licensed",
        AttributeUnlicensed = "attribute_unlicensed",
        AbsenceAccounted = "absence_accounted",
        AbsenceUnaccounted = "absence_unaccounted",
        CompletenessComplete = "completeness_complete",
        CompletenessOnSample = "completeness_on_sample",
        /// "searched", "found" after a call of this turn answered.
        SearchAnswered = "search_answered",
        /// "searched", "found" when no call answered: it failed, or none ran.
        SearchWithoutResult = "search_without_result",
        /// "reserved", "confirmed": an approval completed, a held call ran
        /// or an export was delivered in this turn.
        ActionDoneShown = "action_done_shown",
        /// "reserved", "confirmed" with no machine that took effect.
        ActionDoneUnshown = "action_done_unshown",
        /// "sent": a confirm, a held call or an answer left turnstile.
        ActionSentShown = "action_sent_shown",
        ActionSentUnshown = "action_sent_unshown",
        /// "cancelled": an approval was denied or expired.
        CancelShown = "cancel_shown",
        CancelUnshown = "cancel_unshown",
        /// "refused", "you don't have permission": a table, the licence
        /// gate or the user refused a call.
        RefusalShown = "refusal_shown",
        RefusalUnshown = "refusal_unshown",
        /// "failed": a call or an approved action failed.
        FailureShown = "failure_shown",
        /// "failed" of a call that was refused: it never ran.
        FailureForRefusal = "failure_for_refusal",
        /// "failed" with no failure (a success, an unknown outcome).
        FailureUnshown = "failure_unshown",
        /// A URL delivered on this thread that still validates (or of an
        /// allowed origin); an offer of a link delivered.
        LinkDelivered = "link_delivered",
        /// Any other URL, or an offer of a link nothing delivered.
        LinkUndelivered = "link_undelivered",
        SentenceEnd = "sentence_end",
    }
}

crate::names! {
    pub enum NarrationEffect {
        /// The claim is licensed; check the next one.
        Pass = "pass",
        /// Every claim passed: write the sentence as the model wrote it.
        EmitSentence = "emit-sentence",
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Narration;

impl Protocol for Narration {
    const NAME: &'static str = "narration";
    type State = NarrationState;
    type Event = NarrationEvent;
    type Effect = NarrationEffect;
}
