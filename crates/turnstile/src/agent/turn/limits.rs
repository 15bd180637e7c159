//! The turn's bounds and the external contracts it keeps, from
//! configuration.

use crate::agent::context::ContextLimits;
use crate::judge::digest::DigestLimits;

/// Bounds and external contracts that come from configuration.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The upstream query cap (`LIMIT 3000`): an external contract, not ours.
    pub limit_sentinel: u64,
    /// Most pages stitched into one listing.
    pub page_cap: usize,
    pub context: ContextLimits,
    /// Most planning rounds that may call tools in one turn.
    pub max_steps: u32,
    /// Most calls one planning round may make; the rest are refused by the
    /// `admission` table.
    pub max_calls_per_step: usize,
    /// How much of each result the models see.
    pub digest: DigestLimits,
    /// Bytes of earlier turns the planner sees (oldest dropped first).
    pub history_bytes: usize,
    /// How long an interrupt waits for a decision before it is denied by
    /// default (its cancel runs).
    pub approval_ttl: std::time::Duration,
    /// How long a turn follows a call its server made a task before it
    /// asks the server to cancel it (`tables/task.ron`'s `deadline`).
    pub task_wait: std::time::Duration,
    /// How often the status tool is asked about an accepted confirm, and
    /// how long apart.
    pub status: StatusPolls,
}

/// How often, at most, the status tool of an approved action is asked
/// what became of it, and how long apart (`limits.status_polls`,
/// `limits.status_poll_ms`, `limits.restart_status_polls`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusPolls {
    /// In one resumed turn, after the confirm was accepted.
    pub per_turn: u32,
    /// At start-up, for a confirm a dead process left in flight.
    pub after_restart: u32,
    /// The pause between two asks.
    pub gap: std::time::Duration,
}

impl Default for StatusPolls {
    fn default() -> Self {
        StatusPolls {
            per_turn: 5,
            after_restart: 8,
            gap: std::time::Duration::from_millis(250),
        }
    }
}

impl Limits {
    pub fn approval_ttl_ms(&self) -> i64 {
        i64::try_from(self.approval_ttl.as_millis()).unwrap_or(i64::MAX)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            limit_sentinel: 3000,
            page_cap: 5,
            context: ContextLimits::default(),
            max_steps: 6,
            max_calls_per_step: 8,
            digest: DigestLimits::default(),
            history_bytes: 4096,
            approval_ttl: std::time::Duration::from_secs(600),
            task_wait: crate::mcp::DEFAULT_TASK_WAIT,
            status: StatusPolls::default(),
        }
    }
}
