//! Start-up recovery: a turn whose process died (`kill -9`, a crash, a lost
//! machine) stays stored as unfinished (`turn` in Planning…Responding, `frame`
//! Open/Working/Narrating) and can never continue. Recovery closes each such
//! turn through its tables, as a client leaving would: the `turn` table's
//! `client_gone` row (to Cancelled) and the `frame` table's `close`. A row
//! the table forbids (the frame table forbids closing an unterminated
//! stream) is not bypassed: its id is stored in the `cut` record and the
//! machine keeps its state. What the client was shown is already stored
//! (ADR 0010); the `cut` record marks where it ends.
//!
//! A turn is closed only while recovery holds its thread's lease (claimed
//! with the dead turn's id, so only an expired or released lease is taken):
//! a turn whose lease another live process still renews is left alone and
//! retried once that lease has expired. A turn that started on the thread
//! (and so holds the lease) closes the thread's leftovers first. Closing is
//! idempotent: a turn that is terminal or already has a `cut` record is
//! never touched again. See `docs/adr/0014-start-up-recovery.md`.

use std::time::Duration;

use serde_json::{json, Value};
use tracing::Instrument;

use super::tables::TurnTables;
use crate::fsm::Snapshot;
use crate::protocols::frame::FrameEvent;
use crate::protocols::turn::TurnEvent;
use crate::store::{NewMessage, Role, Store, StoreError, TurnMachines};

/// What one recovery pass did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Recovery {
    /// `(thread, turn)` closed as cut in this pass.
    pub closed: Vec<(String, String)>,
    /// `(thread, turn, lease expiry in unix ms)`: unfinished, but the thread's
    /// lease is live (another process may be running the turn); retried
    /// after the expiry.
    pub deferred: Vec<(String, String, i64)>,
}

/// How one machine was closed: the row taken, or the forbidden row (or the
/// reason the snapshot could not be run) that stopped it.
fn outcome_json(from: &str, result: Result<(String, String), String>, forbidden: bool) -> Value {
    match result {
        Ok((row, to)) => json!({ "from": from, "row_id": row, "to": to }),
        Err(e) if forbidden => json!({ "from": from, "forbidden": e }),
        Err(e) => json!({ "from": from, "error": e }),
    }
}

/// Whether the stored `turn` machine is in a terminal state of the current
/// table (by state name, so a snapshot of an older table version is read
/// too).
fn is_finished(tables: &TurnTables, turn: &Value) -> bool {
    let Ok(snap) = serde_json::from_value::<Snapshot>(turn.clone()) else {
        return false;
    };
    let table = tables.turn.table();
    table
        .state_index(&snap.state)
        .is_some_and(|i| table.is_terminal(i))
}

/// Closes every unfinished turn in the store whose thread is free (no live
/// lease). Run before serving; see [`spawn_deferred`] for the rest.
pub async fn recover(
    store: &Store,
    tables: &TurnTables,
    ttl: Duration,
) -> Result<Recovery, StoreError> {
    let span = tracing::info_span!("recovery");
    async {
        let mut out = Recovery::default();
        for thread in store.leased_threads().await? {
            // One thread's failure (a corrupt row, a lost connection) does
            // not keep the others open, nor the server from starting.
            if let Err(e) = recover_thread(store, tables, &thread, ttl, &mut out).await {
                tracing::warn!(thread_id = %thread, error = %e, "cannot close the thread's unfinished turns");
            }
        }
        if !out.closed.is_empty() || !out.deferred.is_empty() {
            tracing::info!(
                closed = out.closed.len(),
                deferred = out.deferred.len(),
                "unfinished turns closed as cut"
            );
        }
        Ok(out)
    }
    .instrument(span)
    .await
}

/// Closes the unfinished turns of one leased thread; an expired lease left
/// by a turn that never stored a step is dropped, so the next start does
/// not look at the thread again.
async fn recover_thread(
    store: &Store,
    tables: &TurnTables,
    thread: &str,
    ttl: Duration,
    out: &mut Recovery,
) -> Result<(), StoreError> {
    let mut open = 0;
    for m in store.turn_machines(thread).await? {
        if is_finished(tables, &m.turn) {
            continue;
        }
        open += 1;
        close_claimed(store, tables, &m.thread_id, &m.turn_id, ttl, out).await?;
    }
    if open == 0 {
        if let Some(lease) = store.turn_lease(thread).await? {
            if !lease.is_live_at(crate::store::now_unix_ms()) {
                // Deletes only this holder's row: a turn that claimed the
                // thread meanwhile keeps its lease.
                let _ = store.release_turn_lease(thread, &lease.turn_id).await;
            }
        }
    }
    Ok(())
}

/// Retries the deferred turns of `first` in the background, each after its
/// lease's expiry, until every one is closed or found finished.
pub fn spawn_deferred(store: Store, tables: TurnTables, ttl: Duration, first: Recovery) {
    if first.deferred.is_empty() {
        return;
    }
    let span = tracing::info_span!("recovery");
    tokio::spawn(
        async move {
            let mut deferred = first.deferred;
            while !deferred.is_empty() {
                let now = crate::store::now_unix_ms();
                let next = deferred.iter().map(|d| d.2).min().unwrap_or(now);
                let wait = u64::try_from(next.saturating_sub(now)).unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(wait.saturating_add(50))).await;
                let mut out = Recovery::default();
                for (thread, turn, _) in std::mem::take(&mut deferred) {
                    if let Err(e) =
                        close_claimed(&store, &tables, &thread, &turn, ttl, &mut out).await
                    {
                        tracing::warn!(error = %e, "recovery retry failed; trying again");
                        out.deferred
                            .push((thread, turn, crate::store::now_unix_ms() + 1_000));
                    }
                }
                if !out.closed.is_empty() {
                    tracing::info!(closed = out.closed.len(), "unfinished turns closed as cut");
                }
                deferred = out.deferred;
            }
        }
        .instrument(span),
    );
}

/// Closes the unfinished turns of `thread_id` other than `current`, for a
/// turn that holds the thread's lease (so no other turn can be running).
/// Returns how many were closed.
pub async fn close_leftovers(
    store: &Store,
    tables: &TurnTables,
    thread_id: &str,
    current: &str,
) -> Result<usize, StoreError> {
    // One turn runs on a thread at a time, and each closes what the one
    // before it left (before it stores anything): only the latest earlier
    // turn can be unfinished here (start-up recovery reads every turn). Two
    // reads, not the thread.
    let Some(m) = store.latest_turn_machines(thread_id, current).await? else {
        return Ok(0);
    };
    if m.turn_id == current || is_finished(tables, &m.turn) {
        return Ok(0);
    }
    // Inside the running turn's span, which names the thread and the turn
    // already: the closed turn's id gets its own field name.
    let span = tracing::info_span!("recover_turn", cut_turn_id = %m.turn_id);
    Ok(usize::from(close(store, tables, &m, span).await?))
}

/// The stored machines of one turn, if it is still unfinished.
async fn unfinished(
    store: &Store,
    tables: &TurnTables,
    thread_id: &str,
    turn_id: &str,
) -> Result<Option<TurnMachines>, StoreError> {
    Ok(store
        .turn_machines(thread_id)
        .await?
        .into_iter()
        .find(|m| m.turn_id == turn_id && !is_finished(tables, &m.turn)))
}

/// Claims the thread for the dead turn (only an expired or released lease is
/// taken), re-reads the turn under the lease, closes it and releases the
/// lease. A turn that finished meanwhile is not claimed for.
async fn close_claimed(
    store: &Store,
    tables: &TurnTables,
    thread_id: &str,
    turn_id: &str,
    ttl: Duration,
    out: &mut Recovery,
) -> Result<(), StoreError> {
    if unfinished(store, tables, thread_id, turn_id)
        .await?
        .is_none()
    {
        return Ok(());
    }
    match store.claim_turn_lease(thread_id, turn_id, ttl).await {
        Ok(_) => {}
        Err(StoreError::LeaseHeld(_)) => {
            let expires = store
                .turn_lease(thread_id)
                .await?
                .map_or(0, |l| l.expires_at);
            tracing::info!(%thread_id, %turn_id, "unfinished turn's thread is leased; retried after expiry");
            out.deferred
                .push((thread_id.to_owned(), turn_id.to_owned(), expires));
            return Ok(());
        }
        Err(e) => return Err(e),
    }
    // Under the lease: the stored state is final; read it again (the turn
    // may have finished between the scan and the claim).
    let result = async {
        match unfinished(store, tables, thread_id, turn_id).await? {
            Some(m) => {
                let span = tracing::info_span!(
                    "recover_turn",
                    thread_id = %m.thread_id,
                    turn_id = %m.turn_id
                );
                close(store, tables, &m, span).await
            }
            None => Ok(false),
        }
    }
    .await;
    if let Err(e) = store.release_turn_lease(thread_id, turn_id).await {
        tracing::warn!(%thread_id, %turn_id, error = %e, "releasing the recovery lease");
    }
    if result? {
        out.closed.push((thread_id.to_owned(), turn_id.to_owned()));
    }
    Ok(())
}

/// Fires the turn table's `client_gone` and the frame table's `close` on the
/// stored machines and commits a `cut` record with the machines, in one
/// step. Returns whether the turn was closed (false: already cut, or the
/// table keeps it open, e.g. Suspended waits for a decision).
async fn close(
    store: &Store,
    tables: &TurnTables,
    m: &TurnMachines,
    span: tracing::Span,
) -> Result<bool, StoreError> {
    async {
        if store
            .turn_has_record(&m.thread_id, &m.turn_id, "cut")
            .await?
        {
            return Ok(false);
        }
        let mut machines: Vec<(&str, Value)> = Vec::new();
        let turn_snap = serde_json::from_value::<Snapshot>(m.turn.clone());
        let from = turn_snap
            .as_ref()
            .map(|s| s.state.clone())
            .unwrap_or_default();
        let turn = match turn_snap.map_err(|e| e.to_string()).and_then(|s| {
            tables.turn.restore(&s).map_err(|e| e.to_string())
        }) {
            Err(e) => outcome_json(&from, Err(e), false),
            Ok(mut machine) => match machine.fire(TurnEvent::ClientGone) {
                Ok(step) => {
                    if !machine.is_terminal() {
                        // The table keeps the turn alive without its client
                        // (an approval outlives it): not a leftover.
                        return Ok(false);
                    }
                    let row = machine.row_id(step.row).to_string();
                    let to = machine.snapshot().state;
                    machines.push(("turn", serde_json::to_value(machine.snapshot())?));
                    outcome_json(&from, Ok((row, to)), false)
                }
                Err(v) => {
                    tracing::error!(table = %v.table, row_id = %v.row_id, "turn table forbids closing the turn");
                    outcome_json(&from, Err(v.row_id.clone()), true)
                }
            },
        };
        let frame = match &m.frame {
            None => Value::Null,
            Some(f) => {
                let snap = serde_json::from_value::<Snapshot>(f.clone());
                let from = snap.as_ref().map(|s| s.state.clone()).unwrap_or_default();
                match snap
                    .map_err(|e| e.to_string())
                    .and_then(|s| tables.frame.restore(&s).map_err(|e| e.to_string()))
                {
                    Err(e) => outcome_json(&from, Err(e), false),
                    Ok(mut machine) => match machine.fire(FrameEvent::Close) {
                        Ok(step) => {
                            let row = machine.row_id(step.row).to_string();
                            let to = machine.snapshot().state;
                            machines.push(("frame", serde_json::to_value(machine.snapshot())?));
                            outcome_json(&from, Ok((row, to)), false)
                        }
                        // The stream was cut before a terminal frame: the
                        // table forbids closing it, and the client never saw
                        // one, so none is invented. The row says so.
                        Err(v) => outcome_json(&from, Err(v.row_id.clone()), true),
                    },
                }
            }
        };
        let cut = NewMessage::new(
            Role::Assistant,
            json!({ "kind": "cut", "cause": "restart", "turn": turn, "frame": frame }),
        );
        store
            .step(&m.thread_id, &m.turn_id, &[cut], &machines)
            .await?;
        tracing::info!("unfinished turn closed as cut");
        Ok(true)
    }
    .instrument(span)
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::records::Stored;

    /// A restart's `cut` carries the rows it took; readers see a cut.
    #[test]
    fn a_restart_cut_reads_as_a_cut() {
        let body = json!({
            "kind": "cut",
            "cause": "restart",
            "turn": {"from": "Calling", "row_id": "gone-while-calling", "to": "Cancelled"},
            "frame": {"from": "Working", "forbidden": "unterminated-working"},
        });
        assert!(matches!(Stored::read(&body), Stored::Cut));
    }

    #[test]
    fn outcomes_name_the_row_or_the_forbidden_row() {
        assert_eq!(
            outcome_json(
                "Calling",
                Ok(("gone-while-calling".into(), "Cancelled".into())),
                false
            ),
            json!({"from": "Calling", "row_id": "gone-while-calling", "to": "Cancelled"})
        );
        assert_eq!(
            outcome_json("Working", Err("unterminated-working".into()), true),
            json!({"from": "Working", "forbidden": "unterminated-working"})
        );
    }
}
