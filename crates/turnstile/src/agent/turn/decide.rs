//! Deciding a pending interrupt (issue 17): the approval machine restored
//! from the store with its table-hash check, the decision classified into
//! one event and fired, and the new state committed by one compare-and-swap
//! on the stored state. Exactly one of any number of concurrent decisions
//! (two tabs, a retried request, another process on the same database)
//! wins; every other is refused with the row that forbids it.

use serde_json::Value;

use super::approvals::{Action as HeldAction, ActionKind, Decided, UserDecision};
use super::Agent;
use super::CancelSent;
use crate::fsm::{Snapshot, Violation};
use crate::judge::anchors::ActionOutcome;
use crate::judge::approval::StillPrepared;
use crate::protocols::approval::{Approval, ApprovalEvent, ApprovalState};
use crate::protocols::{telemetry, Names, Typed};
use crate::store::{StoreError, StoredApproval};

#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    /// No interrupt of this thread has the id (404), with the row a decision
    /// on nothing takes.
    #[error("no interrupt with this id is pending on this thread ({row_id})")]
    NotFound { row_id: String },
    /// The approval table forbids the decision (409).
    #[error("{why}")]
    Refused {
        row_id: String,
        why: String,
        state: String,
    },
    /// The decision is not one this interrupt offers (422): an approve on
    /// a question, an answer on an approval.
    #[error("{0}")]
    Choice(String),
    /// The answers do not fit what the question asked (422); nothing was
    /// decided and the question still waits. Never echoes a value.
    #[error("{0}")]
    Invalid(String),
    /// The status check before a confirm could not be made (503): nothing
    /// was decided, and the interrupt still waits.
    #[error("{0}")]
    Unchecked(String),
    /// The stored machine no longer restores (its table changed).
    #[error("the pending interrupt was stored under another approval table: {0}")]
    Restore(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An interrupt a new message withdrew (`new-turn-withdraws`): the new
/// turn records it in the thread and tells the user how it ended.
#[derive(Debug, Clone)]
pub struct Withdrawal {
    pub interrupt_id: String,
    pub kind: ActionKind,
    /// The tool whose action was held (the prepare, or the held call).
    pub tool: String,
    pub state: ApprovalState,
    pub cancel: CancelSent,
}

impl Withdrawal {
    /// How it ended, as code tells it.
    pub fn outcome(&self) -> ActionOutcome {
        match (self.kind, &self.cancel) {
            (ActionKind::Input, _) => ActionOutcome::QuestionWithdrawn,
            (ActionKind::Call, _) => ActionOutcome::CallWithdrawn,
            (ActionKind::Prepared, CancelSent::Cancelled { .. } | CancelSent::Nothing) => {
                ActionOutcome::Withdrawn
            }
            (ActionKind::Prepared, _) => ActionOutcome::WithdrawnUncancelled,
        }
    }
}

impl Agent {
    /// Decides interrupt `interrupt_id` of `thread_id`.
    pub async fn decide(
        &self,
        thread_id: &str,
        interrupt_id: &str,
        user: UserDecision,
    ) -> Result<Decided, DecideError> {
        self.decide_as(thread_id, interrupt_id, user, None).await
    }

    /// [`decide`](Self::decide), recording `approver` (the caller's owner
    /// hash) with the winning swap, in the same statement.
    pub async fn decide_as(
        &self,
        thread_id: &str,
        interrupt_id: &str,
        user: UserDecision,
        approver: Option<&str>,
    ) -> Result<Decided, DecideError> {
        let decision = match &user {
            UserDecision::Approve => ApprovalEvent::Approve,
            UserDecision::Deny => ApprovalEvent::Deny,
            UserDecision::Answer { .. } => ApprovalEvent::Answered,
        };
        let stored = match self.store.approval(interrupt_id).await? {
            Some(a) if a.thread_id == thread_id => a,
            // An unknown id, or another thread's: a decision on nothing.
            _ => return Err(self.not_found(decision)),
        };
        let answer = self.checked_answer(&stored, &user).await?;
        // Two attempts: a lost swap re-reads the state that won and fires
        // the decision on it, which the table then refuses by name.
        let mut stored = stored;
        for _ in 0..2 {
            let (mut machine, action) = self.restore_held(&stored)?;
            let (event, changed) = self
                .classify(&stored, &mut machine, &action, decision)
                .await?;
            let from = machine.state();
            let step = machine.fire(event).map_err(|v| refused(&v))?;
            let to = machine.state();
            if self.swap_as(&stored, from, &machine, approver).await? {
                // A legal row with no effect sends nothing, so nothing
                // resumes (`approve_changed` → Voided): the refusal names
                // the row and says why. Which decisions must send what is
                // the approval binding's invariant, checked at load.
                let Some(effect) = step.effect else {
                    return Err(sends_nothing(&machine, step.row, changed));
                };
                // The decision and that it won the swap, on the request's
                // span (an OpenTelemetry event).
                tracing::info!(
                    decision = decision.name(),
                    state = to.name(),
                    turnstile.approval.row_id = machine.row_id(step.row),
                    turnstile.approval.won = true,
                    "interrupt decided"
                );
                stored.state = to.name().to_string();
                return Ok(Decided {
                    approval: stored,
                    action,
                    machine,
                    decision: user.word(),
                    effect,
                    answer,
                });
            }
            stored = match self.store.approval(interrupt_id).await? {
                Some(a) => a,
                None => break,
            };
        }
        // Two other decisions won while this one retried: the table's row
        // for the state the last of them left.
        let (mut machine, _) = self.restore_held(&stored)?;
        let state = machine.state().name().to_string();
        tracing::info!(
            decision = decision.name(),
            state = %state,
            turnstile.approval.won = false,
            "another decision on this interrupt won"
        );
        Err(match machine.fire(decision) {
            Err(v) => refused(&v),
            Ok(step) => DecideError::Refused {
                row_id: machine.row_id(step.row).to_string(),
                why: "another decision on this interrupt won".into(),
                state,
            },
        })
    }

    /// Whether the decision is one the interrupt offers, and an answer's
    /// content fits what was asked (the round to send). A 2025-11-25
    /// question whose open call this process no longer holds is lost: it
    /// is settled as outcome unknown, and the answer refused by that row.
    async fn checked_answer(
        &self,
        stored: &StoredApproval,
        user: &UserDecision,
    ) -> Result<Option<crate::mcp::InputRound>, DecideError> {
        let (mut machine, action) = self.restore_held(stored)?;
        let asks = action.kind == super::approvals::ActionKind::Input;
        let input = match (asks, user, action.input.as_ref()) {
            (false, UserDecision::Answer { .. }, _) => {
                return Err(DecideError::Choice(
                    "this interrupt asks for approval: decide with `approve` or `deny`".into(),
                ))
            }
            (false, _, _) => return Ok(None),
            (true, UserDecision::Answer { .. }, Some(input)) => input,
            (true, _, _) => {
                return Err(DecideError::Choice(
                    "this interrupt is a question from the tool's server: answer with `accept` (and `answers`), `decline` or `cancel`".into(),
                ))
            }
        };
        // A question this process does not hold whose table would still
        // let it be lost (it waits).
        if input.nested
            && machine.allows(ApprovalEvent::InputLost)
            && !self.parked.holds(&stored.interrupt_id)
        {
            // Another live process holds the open call: the question is
            // not lost, only not answerable here.
            if let Holder::Live(_) = self.holder(input.holder.as_deref()).await? {
                // The table's row says why, and that nothing is decided.
                let mut here = machine.clone();
                let Err(v) = here.fire(ApprovalEvent::AnsweredElsewhere) else {
                    unreachable!(
                        "the approval binding forbids answered_elsewhere everywhere (checked at load)"
                    )
                };
                return Err(refused(&v));
            }
            let from = machine.state();
            if let Ok(step) = machine.fire(ApprovalEvent::InputLost) {
                let row_id = machine.row_id(step.row).to_string();
                if !self.swap(stored, from, &machine).await? {
                    // Another decision settled it first: the table's
                    // verdict on the state that won is the answer's.
                    return Ok(None);
                }
                tracing::warn!("a question's open call is gone: outcome unknown");
                return Err(DecideError::Refused {
                    row_id,
                    why: "the call that asked was open in a process that has since stopped (or another process); it can no longer be answered, and whether it did anything is unknown".into(),
                    state: machine.state().name().to_string(),
                });
            }
        }
        let UserDecision::Answer {
            action: word,
            answers,
        } = user
        else {
            return Ok(None);
        };
        super::ask::answer_round(input, word, answers)
            .map(Some)
            .map_err(DecideError::Invalid)
    }

    /// A decision on an interrupt this thread does not have: the row a
    /// decision on nothing takes.
    fn not_found(&self, decision: ApprovalEvent) -> DecideError {
        let mut m = self.tables.approval.machine();
        let row_id = match m.fire(decision) {
            Err(v) => {
                telemetry::violation(&v);
                v.row_id.clone()
            }
            Ok(step) => m.row_id(step.row).to_string(),
        };
        DecideError::NotFound { row_id }
    }

    /// The event a decision on `stored` is: an interrupt past its expiry
    /// is expired first (its cancel sent); a pending one of an earlier user
    /// turn is stale; a settled one's own row says why it is refused.
    async fn classify(
        &self,
        stored: &StoredApproval,
        machine: &mut Typed<Approval>,
        action: &HeldAction,
        decision: ApprovalEvent,
    ) -> Result<(ApprovalEvent, Option<String>), DecideError> {
        // Whether the interrupt can still expire, and whether it still
        // waits for this decision, are the table's rows, not a state read.
        if crate::store::now_unix_ms() > stored.expires_at && machine.allows(ApprovalEvent::Expired)
        {
            self.expire(stored, machine, action).await?;
        }
        let pending = machine.allows(decision);
        if pending && self.is_stale(stored).await? {
            return Ok((ApprovalEvent::ApproveStale, None));
        }
        if pending && decision == ApprovalEvent::Approve {
            return self.check_action(action).await;
        }
        Ok((decision, None))
    }

    /// Before an approve's confirm: where a status tool exists, whether
    /// the id still names the action prepared (issue 34). A server that
    /// forgot it (a restart) may have given the number to another action;
    /// a confirm by number alone would confirm that one.
    async fn check_action(
        &self,
        action: &HeldAction,
    ) -> Result<(ApprovalEvent, Option<String>), DecideError> {
        let approve = Ok((ApprovalEvent::Approve, None));
        let Some(status) = action.status.as_deref() else {
            return approve;
        };
        if action.kind != ActionKind::Prepared {
            return approve;
        }
        let out = self
            .tools
            .call(status, action.status_args.clone())
            .await
            .map_err(|e| {
                tracing::warn!(kind = e.kind(), "the status check before a confirm failed");
                DecideError::Unchecked(format!(
                    "the {status} tool could not be asked whether the action is still the one prepared ({}); nothing was sent, and the approval still waits",
                    e.kind()
                ))
            })?;
        let id_field = self
            .roles
            .get(&action.prepare)
            .and_then(|r| match r {
                crate::judge::approval::ToolRole::Prepare(p) => Some(p.action_id.clone()),
                _ => None,
            })
            .unwrap_or_default();
        let preview = &action.interrupt.action;
        let found = crate::judge::approval::still_prepared(
            &out,
            &action.prepare_args,
            &preview.prepared,
            &id_field,
        );
        match found {
            StillPrepared::Same => approve,
            StillPrepared::Unchecked => {
                tracing::warn!(
                    tool = status,
                    "the status answer shares no field with the prepared action; the confirm goes by its id alone"
                );
                approve
            }
            StillPrepared::Changed(why) => {
                tracing::warn!(tool = status, %why, "the approved action changed at the server");
                Ok((ApprovalEvent::ApproveChanged, Some(why)))
            }
        }
    }

    /// The stored approval's machine (table hash checked) and its action.
    pub(super) fn restore_held(
        &self,
        stored: &StoredApproval,
    ) -> Result<(Typed<Approval>, HeldAction), DecideError> {
        let action = serde_json::from_value(stored.action.clone())
            .map_err(|e| DecideError::Restore(e.to_string()))?;
        Ok((self.restore(stored)?, action))
    }

    fn restore(&self, stored: &StoredApproval) -> Result<Typed<Approval>, DecideError> {
        let snap: Snapshot = serde_json::from_value(stored.machine.clone())
            .map_err(|e| DecideError::Restore(e.to_string()))?;
        self.tables
            .approval
            .restore(&snap)
            .map_err(|e| DecideError::Restore(e.to_string()))
    }

    /// Whether the interrupt belongs to an earlier user turn than the
    /// thread's latest: the search for an approvable action stops at the
    /// latest user message.
    ///
    /// A decision record counts as user-side too: it carries the turn of
    /// the interrupt it decided, and a decision is only ever recorded on
    /// the thread's current turn (a new message supersedes what is
    /// pending first).
    async fn is_stale(&self, stored: &StoredApproval) -> Result<bool, StoreError> {
        let latest = self.store.latest_user_turn(&stored.thread_id).await?;
        Ok(latest.is_some_and(|t| t != stored.turn_id))
    }

    /// An interrupt past its expiry: denied by default, its cancel sent.
    async fn expire(
        &self,
        stored: &StoredApproval,
        machine: &mut Typed<Approval>,
        action: &HeldAction,
    ) -> Result<(), DecideError> {
        let before = machine.state();
        if let Err(v) = machine.fire(ApprovalEvent::Expired) {
            telemetry::violation(&v);
            return Ok(());
        }
        self.settle_directly(stored, before, machine, action)
            .await
            .map(drop)
    }

    /// Before a new user turn starts: every interrupt still pending on the
    /// thread is withdrawn (`new_user_turn`), and its cancel sent, so a
    /// later turn can never approve an older action. What was withdrawn is
    /// returned, for the new turn to record and tell (issue 34).
    pub async fn supersede_pending(&self, thread_id: &str) -> Result<Vec<Withdrawal>, StoreError> {
        let mut out = Vec::new();
        for stored in self.store.approvals(thread_id).await? {
            let Ok((mut machine, action)) = self.restore_held(&stored) else {
                continue;
            };
            // Which interrupts a new message withdraws is the table's
            // `new_user_turn` rows (Awaiting, as shipped), not a state read.
            if !machine.allows(ApprovalEvent::NewUserTurn) {
                continue;
            }
            let before = machine.state();
            if machine.fire(ApprovalEvent::NewUserTurn).is_err() {
                continue;
            }
            match self
                .settle_directly(&stored, before, &mut machine, &action)
                .await
            {
                Ok(Some(cancel)) => out.push(Withdrawal {
                    interrupt_id: stored.interrupt_id.clone(),
                    kind: action.kind,
                    tool: action.prepare.clone(),
                    state: machine.state(),
                    cancel,
                }),
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "superseding a pending interrupt"),
            }
        }
        Ok(out)
    }

    /// Commits a state the table reached without a turn (expiry, a new
    /// user turn) and, if it won the swap, sends the cancel. `None`: the
    /// swap was lost (another decision settled it); otherwise what became
    /// of the cancel.
    async fn settle_directly(
        &self,
        stored: &StoredApproval,
        before: ApprovalState,
        machine: &mut Typed<Approval>,
        action: &HeldAction,
    ) -> Result<Option<CancelSent>, DecideError> {
        let snap = serde_json::to_value(machine.snapshot()).unwrap_or(Value::Null);
        let won = self
            .store
            .swap_approval(
                &stored.interrupt_id,
                before.name(),
                machine.state().name(),
                &snap,
            )
            .await?;
        if !won {
            return Ok(None);
        }
        // A question's open call is let go: its server is answered
        // `cancel` (2025-11-25); a 2026-07-28 one holds nothing.
        drop(self.parked.take(&stored.interrupt_id));
        let Some((tool, args)) = action.cancel_call() else {
            return Ok(Some(CancelSent::Nothing));
        };
        let sent = match self.tools.call(tool, args.clone()).await {
            Ok(out) if !out.is_error => {
                tracing::info!(state = machine.state().name(), "pending action cancelled");
                CancelSent::Cancelled { tool: tool.into() }
            }
            Ok(out) => {
                tracing::warn!("the cancel tool refused; the action stays uncancelled");
                let reason = crate::judge::approval::failure_reason(&out);
                CancelSent::Refused {
                    tool: tool.into(),
                    reason,
                }
            }
            Err(e) => {
                tracing::warn!(kind = e.kind(), "the cancel tool failed");
                CancelSent::Failed { tool: tool.into() }
            }
        };
        Ok(Some(sent))
    }

    pub(super) async fn swap(
        &self,
        stored: &StoredApproval,
        from: ApprovalState,
        machine: &Typed<Approval>,
    ) -> Result<bool, StoreError> {
        self.swap_as(stored, from, machine, None).await
    }

    /// [`swap`](Self::swap), recording who decided (`approver`) in the same
    /// statement.
    async fn swap_as(
        &self,
        stored: &StoredApproval,
        from: ApprovalState,
        machine: &Typed<Approval>,
        approver: Option<&str>,
    ) -> Result<bool, StoreError> {
        let snap = serde_json::to_value(machine.snapshot()).unwrap_or(Value::Null);
        self.store
            .swap_approval_as(
                &stored.interrupt_id,
                from.name(),
                machine.state().name(),
                &snap,
                approver,
            )
            .await
    }
}

impl Agent {
    /// Where the open call of a question held by process `holder` is.
    pub(super) async fn holder(&self, holder: Option<&str>) -> Result<Holder, StoreError> {
        let Some(h) = holder else {
            // Stored before holders were: one process per SQLite file was
            // the rule then; on PostgreSQL nobody can tell.
            return Ok(match self.store.backend() {
                crate::store::Backend::Sqlite => Holder::Gone,
                _ => Holder::Unknown,
            });
        };
        if h == self.parked.process() {
            return Ok(Holder::Here);
        }
        Ok(match self.store.process_expiry(h).await? {
            Some(until) if crate::store::now_unix_ms() < until => Holder::Live(until),
            _ => Holder::Gone,
        })
    }
}

/// Where a 2025-11-25 question's open call is held.
pub(super) enum Holder {
    /// In this process.
    Here,
    /// In another process whose row holds until then (unix ms).
    Live(i64),
    /// In a process whose row expired or is gone: the call ended with it.
    Gone,
    /// Not recorded, on a database several processes may share.
    Unknown,
}

/// A decision the table forbids: refused, naming the row.
fn refused(v: &Violation) -> DecideError {
    telemetry::violation(v);
    DecideError::Refused {
        row_id: v.row_id.clone(),
        why: v.why.clone(),
        state: v.state.clone(),
    }
}

/// A legal row with no effect sends nothing, so nothing resumes
/// (`approve_changed` → Voided): the refusal names the row and says why.
fn sends_nothing(machine: &Typed<Approval>, row: u16, changed: Option<String>) -> DecideError {
    let to = machine.state();
    tracing::info!(
        state = to.name(),
        "decision taken by a row that sends nothing"
    );
    let why = match changed {
        Some(why) => format!("{why}; nothing was sent, neither the confirm nor a cancel, for the id now names something else"),
        None => "the table's row for this decision sends nothing; nothing was sent, neither the confirm nor a cancel".into(),
    };
    DecideError::Refused {
        row_id: machine.row_id(row).to_string(),
        why,
        state: to.name().to_string(),
    }
}
