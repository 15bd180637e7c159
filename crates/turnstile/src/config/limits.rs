//! `[limits]`: a turn's bounds, each defaulted and capped, into the one
//! `agent::Limits` (and the thread lease's length).

use std::time::Duration;

use serde::Deserialize;

use crate::agent::{ContextLimits, Limits};
use crate::judge::digest::DigestLimits;

use super::settings::*;

/// Most planning rounds a config may allow in one turn: each round is a
/// model request, and a loop that long is a runaway, not a plan.
const MAX_STEPS: u64 = 64;
/// The most calls one planning round may be configured to make.
const MAX_CALLS_PER_STEP: usize = 64;
/// The most asks of a status tool that may be configured.
const MAX_STATUS_POLLS: u64 = 100;
/// The longest pause between two asks of a status tool, in milliseconds.
const MAX_STATUS_POLL_MS: u64 = 60_000;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileLimits {
    pub(super) limit_sentinel: Option<u64>,
    pub(super) page_cap: Option<usize>,
    pub(super) max_string: Option<usize>,
    pub(super) max_items: Option<usize>,
    pub(super) turn_lease_secs: Option<u64>,
    pub(super) max_steps: Option<u64>,
    pub(super) max_calls_per_step: Option<usize>,
    pub(super) history_bytes: Option<usize>,
    pub(super) digest_items: Option<usize>,
    pub(super) digest_bytes: Option<usize>,
    pub(super) approval_ttl_secs: Option<u64>,
    pub(super) task_wait_secs: Option<u64>,
    pub(super) status_polls: Option<u64>,
    pub(super) restart_status_polls: Option<u64>,
    pub(super) status_poll_ms: Option<u64>,
}

impl Validator {
    /// `[limits]` into the agent's limits and the lease TTL: each key in
    /// its range (a problem names the key), a missing one at its default.
    pub(super) fn limits(&mut self, l: &FileLimits) -> (Limits, Duration) {
        let d = Limits::default();
        let usize_positive = |v: &mut Self, key: &str, x: Option<usize>, def: usize| {
            v.positive(key, x.map(|n| n as u64), def as u64) as usize
        };
        if l.max_steps.is_some_and(|n| n > MAX_STEPS) {
            self.problem("limits.max_steps", format!("at most {MAX_STEPS}"));
        }
        if l.max_calls_per_step.is_some_and(|n| n > MAX_CALLS_PER_STEP) {
            self.problem(
                "limits.max_calls_per_step",
                format!("at most {MAX_CALLS_PER_STEP}"),
            );
        }
        for (key, v) in [
            ("limits.status_polls", l.status_polls),
            ("limits.restart_status_polls", l.restart_status_polls),
        ] {
            if v.is_some_and(|n| n > MAX_STATUS_POLLS) {
                self.problem(key, format!("at most {MAX_STATUS_POLLS}"));
            }
        }
        if l.status_poll_ms.is_some_and(|n| n > MAX_STATUS_POLL_MS) {
            self.problem(
                "limits.status_poll_ms",
                format!("at most {MAX_STATUS_POLL_MS} (a minute)"),
            );
        }
        let max_lease = crate::agent::thread_lease::MAX_TURN_LEASE.as_secs();
        if l.turn_lease_secs.is_some_and(|s| s > max_lease) {
            self.problem(
                "limits.turn_lease_secs",
                format!("at most {max_lease} (one day)"),
            );
        }
        let turn_lease = self.positive(
            "limits.turn_lease_secs",
            l.turn_lease_secs,
            crate::agent::thread_lease::DEFAULT_TURN_LEASE.as_secs(),
        );
        let secs = |v: &mut Self, key: &str, x: Option<u64>, def: Duration| {
            Duration::from_secs(v.positive(key, x, def.as_secs()))
        };
        let limits = Limits {
            limit_sentinel: self.positive(
                "limits.limit_sentinel",
                l.limit_sentinel,
                d.limit_sentinel,
            ),
            page_cap: usize_positive(self, "limits.page_cap", l.page_cap, d.page_cap),
            context: ContextLimits {
                max_string: usize_positive(
                    self,
                    "limits.max_string",
                    l.max_string,
                    d.context.max_string,
                ),
                max_items: usize_positive(
                    self,
                    "limits.max_items",
                    l.max_items,
                    d.context.max_items,
                ),
            },
            max_steps: self
                .positive("limits.max_steps", l.max_steps, d.max_steps.into())
                .min(MAX_STEPS) as u32,
            max_calls_per_step: usize_positive(
                self,
                "limits.max_calls_per_step",
                l.max_calls_per_step,
                d.max_calls_per_step,
            )
            .min(MAX_CALLS_PER_STEP),
            history_bytes: usize_positive(
                self,
                "limits.history_bytes",
                l.history_bytes,
                d.history_bytes,
            ),
            digest: DigestLimits {
                items: usize_positive(self, "limits.digest_items", l.digest_items, d.digest.items),
                bytes: usize_positive(self, "limits.digest_bytes", l.digest_bytes, d.digest.bytes),
                ..d.digest
            },
            approval_ttl: secs(
                self,
                "limits.approval_ttl_secs",
                l.approval_ttl_secs,
                d.approval_ttl,
            ),
            task_wait: secs(self, "limits.task_wait_secs", l.task_wait_secs, d.task_wait),
            status: crate::agent::StatusPolls {
                per_turn: self
                    .positive(
                        "limits.status_polls",
                        l.status_polls,
                        d.status.per_turn.into(),
                    )
                    .min(MAX_STATUS_POLLS) as u32,
                after_restart: self
                    .positive(
                        "limits.restart_status_polls",
                        l.restart_status_polls,
                        d.status.after_restart.into(),
                    )
                    .min(MAX_STATUS_POLLS) as u32,
                gap: Duration::from_millis(
                    self.positive(
                        "limits.status_poll_ms",
                        l.status_poll_ms,
                        u64::try_from(d.status.gap.as_millis()).unwrap_or(u64::MAX),
                    )
                    .min(MAX_STATUS_POLL_MS),
                ),
            },
        };
        (limits, Duration::from_secs(turn_lease))
    }

    pub(super) fn positive(&mut self, key: &str, value: Option<u64>, default: u64) -> u64 {
        match value {
            Some(0) => {
                self.problem(key, "must be at least 1".into());
                default
            }
            Some(n) => n,
            None => default,
        }
    }
}
