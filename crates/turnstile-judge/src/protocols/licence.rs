//! `tables/licence.ron`: whether a planned call may leave turnstile, given
//! the tier its tool requires and the tiers the caller holds.

use super::Protocol;
use crate::fsm::Invariant;

crate::names! {
    pub enum LicenceState {
        Proposed = "Proposed",
        Allowed = "Allowed",
        Withheld = "Withheld",
    }
}

crate::names! {
    /// What code found about a call's tool and the caller's tiers; the
    /// table decides.
    pub enum LicenceEvent {
        /// The tool requires no tier.
        Unrestricted = "unrestricted",
        /// The caller holds the required tier or a higher one.
        TierHeld = "tier_held",
        /// The caller does not, and no other call of the round is allowed.
        TierNotHeld = "tier_not_held",
        /// The caller does not, but other calls of the round are allowed.
        TierNotHeldInPart = "tier_not_held_in_part",
        /// The tool requires a tier the configuration does not know.
        TierUnknown = "tier_unknown",
        /// Another call of the same planning round was refused (issue 36:
        /// what that means for this one is the table's row).
        RoundRefused = "round_refused",
    }
}

crate::names! {
    pub enum LicenceEffect {
        /// Send the call.
        Run = "run",
        /// Hold the call back with its round: it is offered, not sent.
        Withhold = "withhold",
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Licence;

impl Protocol for Licence {
    const NAME: &'static str = "licence";
    type State = LicenceState;
    type Event = LicenceEvent;
    type Effect = LicenceEffect;
    const INVARIANTS: &'static [Invariant<'static>] = &[Invariant::LegalOnlyWith {
        event: "round_refused",
        effect: "withhold",
        why: "a round with a refused call runs none of its calls: half a request is never done silently (seed 003 §4.6)",
    }];
}
