//! `tables/admission.ron`: whether a planned call may run.

use super::Protocol;
use crate::fsm::Invariant;

crate::names! {
    pub enum AdmissionState {
        Proposed = "Proposed",
        Admitted = "Admitted",
    }
}

crate::names! {
    /// What code found about a planned call; the table decides.
    pub enum AdmissionEvent {
        /// Nothing stands against it.
        Admit = "admit",
        /// No connected server offers the tool.
        UnknownTool = "unknown_tool",
        /// The arguments are not a JSON object.
        InvalidArguments = "invalid_arguments",
        /// The narrowing it runs under was judged by a table changed since.
        NarrowingStale = "narrowing_stale",
        /// The planning round is past `limits.max_calls_per_step`.
        OverCallBudget = "over_call_budget",
    }
}

crate::names! {
    pub enum AdmissionEffect {
        /// Send the call.
        Run = "run",
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Admission;

impl Protocol for Admission {
    const NAME: &'static str = "admission";
    type State = AdmissionState;
    type Event = AdmissionEvent;
    type Effect = AdmissionEffect;
    const INVARIANTS: &'static [Invariant<'static>] = &[
        Invariant::Forbid {
            event: "unknown_tool",
            from: &[],
            why: "a tool no connected server offers has nowhere to be sent",
        },
        Invariant::Ranked {
            events: &[
                "unknown_tool",
                "invalid_arguments",
                "narrowing_stale",
                "over_call_budget",
            ],
            why: "several reasons can stand against one call; the table says which one is told",
        },
        Invariant::Precedes {
            first: "unknown_tool",
            then: &["invalid_arguments", "narrowing_stale", "over_call_budget"],
            why: "a tool nobody offers is refused as such, whatever row the other reasons have",
        },
        Invariant::Forbid {
            event: "invalid_arguments",
            from: &[],
            why:
                "arguments that are not a JSON object are never sent with a guess at what was meant",
        },
        Invariant::Precedes {
            first: "invalid_arguments",
            then: &["narrowing_stale", "over_call_budget"],
            why: "a reason a table may let through never hides arguments that cannot be sent",
        },
    ];
}
