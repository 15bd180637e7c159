//! `tables/narrowing.ron`: the subset-narrowing gate.

use super::Protocol;

crate::names! {
    pub enum NarrowingState {
        Unscoped = "Unscoped",
        Scoped = "Scoped",
        Settled = "Settled",
        Released = "Released",
    }
}

crate::names! {
    pub enum NarrowingEvent {
        Narrow = "narrow",
        PageExhaustive = "page_exhaustive",
        PagePartial = "page_partial",
        PageEmpty = "page_empty",
        PageOutsideScope = "page_outside_scope",
        /// A narrowing follow-up called another tool than the one that
        /// showed the population.
        NarrowOtherTool = "narrow_other_tool",
        /// A later step of the turn calls the narrowed population's tool
        /// again (an earlier step narrowed): whether the scope still holds
        /// is the row's.
        NarrowHeld = "narrow_held",
    }
}

crate::names! {
    pub enum NarrowingEffect {
        ApplyScope = "apply-scope",
        /// The narrowed page is the whole scope: SHOWN becomes EXACT and the
        /// citation card switches from sample to complete.
        UpgradeExact = "upgrade-exact",
        KeepSample = "keep-sample",
        /// Nothing in the scope matched: release it at the end of the turn
        /// and say so.
        ReleaseScope = "release-scope",
        PassThrough = "pass-through",
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Narrowing;

impl Protocol for Narrowing {
    const NAME: &'static str = "narrowing";
    type State = NarrowingState;
    type Event = NarrowingEvent;
    type Effect = NarrowingEffect;
}
