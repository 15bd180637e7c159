//! Start-up recovery of a confirm in flight (issue 17): a process killed
//! between approve and the confirm's answer left the approval in
//! `Confirming`. Its status is asked, never its confirm re-sent.

use std::collections::{HashMap, HashSet};

use super::decide::Holder;
use super::Agent;
use crate::protocols::approval::{ApprovalEffect, ApprovalEvent, ApprovalState};
use crate::protocols::Names;
use crate::store::StoreError;

impl Agent {
    /// Start-up: every approval whose confirm was sent and whose outcome
    /// was never stored (a process killed between approve and the
    /// confirm's answer), on a thread no live turn holds, is classified as
    /// `restart_in_flight`. The status tool, if one is configured, is asked
    /// what became of it; without one it stays **outcome unknown**. The
    /// confirm is never sent again.
    ///
    /// One whose thread's lease is still live (a process restarted at once
    /// finds its dead turn's lease; on PostgreSQL another process may be
    /// running the confirm) is come back to when that lease expires, and
    /// again while a live turn keeps renewing it (issue 34): left alone,
    /// it would stay `Confirming` until a second restart.
    pub async fn recover_approvals(&self) -> Result<usize, StoreError> {
        let (mut n, mut deferred) = self.recover_confirms(None).await?;
        // After the first pass over the confirms: a lost question becomes
        // Unknown, and is not then mistaken for a confirm in flight (the
        // retries below look at the deferred interrupts only).
        let (settled, questions) = self.recover_questions(None).await?;
        n += settled;
        let mut questions = questions;
        while let Some(next) = deferred.values().chain(questions.values()).copied().min() {
            let wait = next.saturating_sub(crate::store::now_unix_ms()).max(0);
            let wait = u64::try_from(wait).unwrap_or(0).saturating_add(50);
            tracing::info!(
                confirms = deferred.len(),
                questions = questions.len(),
                wait_ms = wait,
                "interrupts another turn or process may hold: looked at again when its lease expires"
            );
            tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
            if !deferred.is_empty() {
                let ids: HashSet<String> = deferred.into_keys().collect();
                let (settled, again) = self.recover_confirms(Some(&ids)).await?;
                n += settled;
                deferred = again;
            }
            if !questions.is_empty() {
                let ids: HashSet<String> = questions.into_keys().collect();
                let (settled, again) = self.recover_questions(Some(&ids)).await?;
                n += settled;
                questions = again;
            }
        }
        Ok(n)
    }

    /// One pass over the confirms in flight (all, or those of `only`):
    /// how many it settled, and those it left for a live lease, each with
    /// that lease's expiry (unix ms).
    async fn recover_confirms(
        &self,
        only: Option<&HashSet<String>>,
    ) -> Result<(usize, HashMap<String, i64>), StoreError> {
        let mut n = 0;
        let mut deferred = HashMap::new();
        let now = crate::store::now_unix_ms();
        let states = [
            ApprovalState::Confirming.name(),
            ApprovalState::Accepted.name(),
            ApprovalState::Unknown.name(),
        ];
        for stored in self.store.approvals_in(&states).await? {
            if only.is_some_and(|ids| !ids.contains(&stored.interrupt_id)) {
                continue;
            }
            let held = self.store.turn_lease(&stored.thread_id).await?;
            if let Some(lease) = held.filter(|l| l.is_live_at(now)) {
                deferred.insert(stored.interrupt_id.clone(), lease.expires_at);
                continue;
            }
            let Ok((mut machine, action)) = self.restore_held(&stored) else {
                continue;
            };
            let mut from = machine.state();
            let Ok(step) = machine.fire(ApprovalEvent::RestartInFlight) else {
                continue;
            };
            let mut ask = step.effect == Some(ApprovalEffect::AskStatus);
            if !self.swap(&stored, from, &machine).await? {
                continue;
            }
            n += 1;
            tracing::warn!(
                state = machine.state().name(),
                "a confirm was in flight at a restart"
            );
            let Some(status) = action.status.clone() else {
                continue;
            };
            for _ in 0..self.limits.status.after_restart {
                if !ask {
                    break;
                }
                let Ok(out) = self.tools.call(&status, action.status_args.clone()).await else {
                    break;
                };
                let Some(event) = crate::judge::approval::recovered_event(&out) else {
                    break;
                };
                from = machine.state();
                // A forbidden row ends the asking; the stored state stays.
                match machine.fire(event) {
                    Ok(step) => ask = step.effect == Some(ApprovalEffect::AskStatus),
                    Err(_) => break,
                }
                if machine.state() != from && !self.swap(&stored, from, &machine).await? {
                    break;
                }
                if ask {
                    tokio::time::sleep(self.limits.status.gap).await;
                }
            }
        }
        Ok((n, deferred))
    }
}

impl Agent {
    /// Start-up: every 2025-11-25 question still pending whose open call
    /// was held by a process that is gone can no longer be answered:
    /// `input_lost`, outcome unknown. A question whose holder still renews
    /// its row in `process_leases` is left alone and returned with the
    /// row's expiry, to be looked at again then (issue 34 item 10: a second
    /// process on the same SQLite file or PostgreSQL database once settled
    /// the first one's live questions). A question stored before holders
    /// were recorded is settled on SQLite only, as before.
    async fn recover_questions(
        &self,
        only: Option<&HashSet<String>>,
    ) -> Result<(usize, HashMap<String, i64>), StoreError> {
        let mut n = 0;
        let mut held = HashMap::new();
        for stored in self
            .store
            .approvals_in(&[ApprovalState::Awaiting.name()])
            .await?
        {
            if only.is_some_and(|ids| !ids.contains(&stored.interrupt_id)) {
                continue;
            }
            let Ok((mut machine, action)) = self.restore_held(&stored) else {
                continue;
            };
            let Some(input) = action.input.as_ref().filter(|i| i.nested) else {
                continue;
            };
            match self.holder(input.holder.as_deref()).await? {
                Holder::Gone => {}
                Holder::Here | Holder::Unknown => continue,
                Holder::Live(until) => {
                    held.insert(stored.interrupt_id.clone(), until);
                    continue;
                }
            }
            let from = machine.state();
            if machine.fire(ApprovalEvent::InputLost).is_err() {
                continue;
            }
            if self.swap(&stored, from, &machine).await? {
                n += 1;
                tracing::warn!("a question's open call ended with its process: outcome unknown");
            }
        }
        Ok((n, held))
    }
}
