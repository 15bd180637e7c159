//! Start-up recovery of a confirm in flight (issue 17): a process killed
//! between approve and the confirm's answer left the approval in
//! `Confirming`. Its status is asked, never its confirm re-sent.

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
    pub async fn recover_approvals(&self) -> Result<usize, StoreError> {
        let mut n = 0;
        let now = crate::store::now_unix_ms();
        let states = [
            ApprovalState::Confirming.name(),
            ApprovalState::Accepted.name(),
            ApprovalState::Unknown.name(),
        ];
        for stored in self.store.approvals_in(&states).await? {
            let held = self.store.turn_lease(&stored.thread_id).await?;
            if held.is_some_and(|l| l.is_live_at(now)) {
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
            for _ in 0..STATUS_POLLS {
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
                match machine.fire(event) {
                    Ok(step) => ask = step.effect == Some(ApprovalEffect::AskStatus),
                    Err(_) => {
                        ask = from == ApprovalState::Accepted;
                    }
                }
                if machine.state() != from && !self.swap(&stored, from, &machine).await? {
                    break;
                }
                if ask {
                    tokio::time::sleep(STATUS_POLL_GAP).await;
                }
            }
        }
        // After the confirms: a lost question becomes Unknown, and is not
        // then mistaken for a confirm in flight.
        n += self.recover_questions().await?;
        Ok(n)
    }
}

impl Agent {
    /// Start-up on SQLite (one process by design): every 2025-11-25
    /// question still pending had its call open in the process that
    /// ended, so it can no longer be answered: `input_lost`, outcome
    /// unknown. On PostgreSQL another live process may hold the open call;
    /// such a question is found lost when it is answered instead
    /// (`decide`).
    async fn recover_questions(&self) -> Result<usize, StoreError> {
        if self.store.backend() != crate::store::Backend::Sqlite {
            return Ok(0);
        }
        let mut n = 0;
        for stored in self
            .store
            .approvals_in(&[ApprovalState::Awaiting.name()])
            .await?
        {
            let Ok((mut machine, action)) = self.restore_held(&stored) else {
                continue;
            };
            if !action.input.as_ref().is_some_and(|i| i.nested) {
                continue;
            }
            let from = machine.state();
            if machine.fire(ApprovalEvent::InputLost).is_err() {
                continue;
            }
            if self.swap(&stored, from, &machine).await? {
                n += 1;
                tracing::warn!("a question's open call ended with the process: outcome unknown");
            }
        }
        Ok(n)
    }
}

const STATUS_POLLS: u32 = 8;
const STATUS_POLL_GAP: std::time::Duration = std::time::Duration::from_millis(250);
