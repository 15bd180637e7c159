//! `tables/hold.ron`: the approval policy, which calls wait for the user's
//! approval of themselves.

use super::Protocol;
use crate::fsm::Invariant;

crate::names! {
    pub enum HoldState {
        Proposed = "Proposed",
        Sent = "Sent",
        Held = "Held",
    }
}

crate::names! {
    /// A fact about a planned call; the table's `precedence` says which
    /// one decides.
    pub enum HoldEvent {
        /// An approval decision sends this call (approve, cancel, status).
        DecisionCall = "decision_call",
        /// The call is an export flow's confirm (`tables/export.ron`).
        TerminalConfirm = "terminal_confirm",
        /// `approval = "before-call"`.
        ConfiguredBeforeCall = "configured_before_call",
        /// The tool prepares, confirms, cancels or tells the status of an
        /// action (`tables/approval.ron`).
        ApprovalRole = "approval_role",
        /// `approval = "none"`.
        ConfiguredNone = "configured_none",
        /// The tool's server is not trusted.
        ServerUntrusted = "server_untrusted",
        /// Annotations that do not say the tool is safe (MCP's defaults).
        DeclaredDestructive = "declared_destructive",
        /// `destructiveHint: false`, or `readOnlyHint: true` alone.
        DeclaredSafe = "declared_safe",
        /// No annotations at all.
        Undeclared = "undeclared",
    }
}

crate::names! {
    pub enum HoldEffect {
        /// Send the call now.
        Send = "send",
        /// Send exactly this call, once: never followed by further pages.
        SendOnce = "send-once",
        /// Hold it: the configuration says so.
        HoldConfigured = "hold-configured",
        /// Hold it: its server is untrusted.
        HoldUntrusted = "hold-untrusted",
        /// Hold it: it declares, or is read as, destructive.
        HoldDestructive = "hold-destructive",
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hold;

/// Facts a decision's call and an export's confirm must outrank: each is
/// sent once under its own protocol, so no other fact may hold it again.
const HOLDING: &[&str] = &[
    "configured_before_call",
    "approval_role",
    "configured_none",
    "server_untrusted",
    "declared_destructive",
    "declared_safe",
    "undeclared",
];

const OUTRANK_HOLDING: &str =
    "a call a decision sends, or an export's confirm, goes out once under its own protocol and is never held again";

impl Protocol for Hold {
    const NAME: &'static str = "hold";
    type State = HoldState;
    type Event = HoldEvent;
    type Effect = HoldEffect;
    const INVARIANTS: &'static [Invariant<'static>] = &[
        Invariant::Ranked {
            events: &[
                "decision_call",
                "terminal_confirm",
                "configured_before_call",
                "approval_role",
                "configured_none",
                "server_untrusted",
                "declared_destructive",
                "declared_safe",
                "undeclared",
            ],
            why: "several facts are true of one call at once; the table says which decides",
        },
        Invariant::RowIs {
            from: "Proposed",
            event: "decision_call",
            effect: "send-once",
            why: "an approved call is sent exactly once: holding or refusing it again would answer one decision twice, and a further page would send it again",
        },
        Invariant::RowIs {
            from: "Proposed",
            event: "terminal_confirm",
            effect: "send",
            why: "an export's confirm is the export table's to send or refuse, after its preview",
        },
        Invariant::Precedes {
            first: "decision_call",
            then: &["terminal_confirm"],
            why: "a decided call to an export's confirm tool is still a decided call: sent once, never followed by further pages",
        },
        Invariant::Precedes {
            first: "decision_call",
            then: HOLDING,
            why: OUTRANK_HOLDING,
        },
        Invariant::Precedes {
            first: "terminal_confirm",
            then: HOLDING,
            why: OUTRANK_HOLDING,
        },
    ];
}
