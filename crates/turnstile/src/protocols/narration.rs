//! `tables/narration.ron`: the narration guard — what kind of claim in a
//! model sentence meets what kind of licence from the judge.

use super::Protocol;

crate::names! {
    pub enum NarrationState {
        Checking = "Checking",
        Passed = "Passed",
    }
}

crate::names! {
    /// One claim of a sentence, named by the licence it has (or lacks).
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
