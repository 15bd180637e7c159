//! `tables/export.ron`: one export, from the preview that names it to the
//! capability code delivers (issue 18).

use super::Protocol;
use crate::fsm::Invariant;

crate::names! {
    pub enum ExportState {
        Idle = "Idle",
        Previewed = "Previewed",
        Confirming = "Confirming",
        Delivered = "Delivered",
        Failed = "Failed",
        Expired = "Expired",
    }
}

crate::names! {
    /// What code found about the export; the table decides.
    pub enum ExportEvent {
        /// The preview tool answered with an export to confirm.
        PreviewOk = "preview_ok",
        PreviewFailed = "preview_failed",
        /// The model planned the confirm tool in a step after the preview.
        ConfirmPlanned = "confirm_planned",
        /// The model planned the confirm tool in the step that previews.
        ConfirmSameStep = "confirm_same_step",
        /// The confirm's answer passed `judge::capability`.
        CapabilityValid = "capability_valid",
        /// The confirm answered, and the validator refused what it gave.
        CapabilityInvalid = "capability_invalid",
        /// The confirm call failed or answered an error.
        ConfirmFailed = "confirm_failed",
        /// A model call in the turn.
        ModelCall = "model_call",
        /// A follow-up asks for the delivered link again.
        LinkRequested = "link_requested",
        /// The delivered link's expiry passed.
        LinkExpired = "link_expired",
        /// Something tried to deliver a capability the validator did not
        /// accept.
        DeliverUnvalidated = "deliver_unvalidated",
    }
}

crate::names! {
    pub enum ExportEffect {
        /// Send the confirm, once.
        SendConfirm = "send-confirm",
        /// Format the accepted capability into the final message, commit
        /// it, send it; the turn ends with no model call.
        Deliver = "deliver",
        /// Show the stored link again, from the stored delivery.
        Redeliver = "redeliver",
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Export;

impl Protocol for Export {
    const NAME: &'static str = "export";
    type State = ExportState;
    type Event = ExportEvent;
    type Effect = ExportEffect;
    const INVARIANTS: &'static [Invariant<'static>] = &[
        Invariant::LegalOnlyWith {
            event: "confirm_planned",
            effect: "send-confirm",
            why: "a confirm the table lets through is the one sent and validated",
        },
        Invariant::LegalOnlyWith {
            event: "confirm_same_step",
            effect: "send-confirm",
            why: "a confirm the table lets through is the one sent and validated",
        },
    ];
}
