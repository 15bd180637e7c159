//! Calls a server made tasks, followed to their end (issue 22 §4,
//! `tables/task.ron`).
//!
//! A turn follows its task and shows progress (`turn::task`). The task is
//! stored before the first poll; if the turn stops first (its client left,
//! the process died), the task is followed here instead, by its stored id:
//! the [`Following`] a dropped turn leaves behind hands itself to a
//! background follower, and start-up follows every task a dead process left
//! unsettled ([`recover_tasks`]). Settling is one compare-and-swap on the
//! stored state, so the user is told once; a task that ended after its turn
//! is appended to that turn as a `task_settled` record. Nothing is ever
//! re-sent: the call went out once.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::records::Record;
use super::tools::{ToolTasks, Tools};
use crate::mcp::task::drive;
use crate::mcp::{Follow, Next, Settled, TaskId, TaskTicket, ToolOutput};
use crate::protocols::task::{Task, TaskState};
use crate::protocols::{Bound, Names};
use crate::store::{NewTask, Store, StoreError, StoredTask};

/// Where a task is stored and followed.
#[derive(Clone)]
pub struct TaskPlace {
    pub tools: Arc<dyn Tools>,
    pub store: Store,
    pub table: Bound<Task>,
    pub wait: Duration,
    pub key: String,
    pub thread_id: String,
    pub turn_id: String,
    pub call_id: String,
    pub server: String,
    pub tool: String,
}

/// A task a turn follows, and how far the store and the user have come
/// with it. Dropped before the user was told (the turn stopped at any
/// await), it hands what is left to a background task: storing it, if that
/// had not happened; following it, if it had not settled; settling it, if
/// the swap had not landed; telling the turn, if its result was not shown.
pub struct Following {
    place: TaskPlace,
    pub follow: Follow,
    /// The state the store holds (the compare-and-swap's `from`); `None`:
    /// not stored yet.
    stored: Option<TaskState>,
    /// What to do next, if the turn stopped between two steps.
    pub next: Option<Next>,
    /// How the task ended, once it did.
    settled: Option<Settled>,
    /// Whether the settling swap was made (won, or lost to another
    /// follower's).
    swapped: bool,
    /// Whether the turn showed the call's result.
    shown: bool,
}

impl Following {
    pub fn new(place: TaskPlace, follow: Follow) -> Following {
        Following {
            place,
            follow,
            stored: None,
            next: None,
            settled: None,
            swapped: false,
            shown: false,
        }
    }

    /// Stores the task before it is polled.
    pub async fn store(&mut self) -> Result<(), StoreError> {
        insert(&self.place, &self.follow).await?;
        self.stored = Some(self.follow.state());
        Ok(())
    }

    /// Stores that cancel was asked for (so a restart gives it the grace,
    /// not a new wait, and no second cancel).
    pub async fn store_cancelling(&mut self) -> Result<(), StoreError> {
        let (follow, Some(from)) = (&self.follow, self.stored) else {
            return Ok(());
        };
        let to = follow.state();
        let snapshot = json!(follow.snapshot());
        if to != from
            && (self.place.store)
                .swap_task(&self.place.key, from.name(), to.name(), &snapshot, None)
                .await?
        {
            self.stored = Some(to);
        }
        Ok(())
    }

    /// Settles the stored task as `settled` (if no other follower did
    /// first). `false`: another follower settled it. A turn stopped before
    /// the swap landed leaves it to [`Drop`].
    pub async fn settle(&mut self, settled: Settled) -> Result<bool, StoreError> {
        let settled = self.settled.insert(settled);
        let Some(stored) = self.stored else {
            return Ok(false);
        };
        let won = store_settled(&self.place, &self.follow, stored, settled).await?;
        self.swapped = true;
        Ok(won)
    }

    /// The turn showed the call's result: nothing is left to tell.
    pub fn shown(&mut self) {
        self.shown = true;
    }
}

impl Drop for Following {
    fn drop(&mut self) {
        if self.shown {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (place, follow) = (self.place.clone(), self.follow.clone());
        let left = match (self.settled.take(), self.swapped) {
            // Settled and swapped: only the telling is left.
            (Some(settled), true) => Left::Tell(follow, settled),
            (Some(settled), false) => Left::Settle(follow, settled),
            (None, _) => Left::Follow(
                follow,
                self.next.take().unwrap_or(Next::Poll(Duration::ZERO)),
            ),
        };
        let stored = self.stored;
        tracing::info!(tool = %place.tool, "the turn stopped; its task is handed on");
        runtime.spawn(hand_on(place, stored, left));
    }
}

/// What a stopped turn left to do for its task.
enum Left {
    Follow(Follow, Next),
    Settle(Follow, Settled),
    Tell(Follow, Settled),
}

async fn hand_on(place: TaskPlace, stored: Option<TaskState>, left: Left) {
    let stored = match (stored, &left) {
        (Some(s), _) => s,
        (None, Left::Follow(follow, _) | Left::Settle(follow, _)) => {
            if let Err(e) = insert(&place, follow).await {
                tracing::warn!(error = %e, "a task could not be stored");
                return;
            }
            follow.state()
        }
        // Swapped means stored.
        (None, Left::Tell(..)) => return,
    };
    match left {
        Left::Follow(follow, next) => follow_to_end(place, follow, next, stored).await,
        Left::Settle(follow, settled) => {
            match store_settled(&place, &follow, stored, &settled).await {
                Ok(true) => tell(&place, &follow, &settled).await,
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "a settled task could not be stored"),
            }
        }
        Left::Tell(follow, settled) => tell(&place, &follow, &settled).await,
    }
}

/// Stores a task that was just created, before it is polled.
async fn insert(place: &TaskPlace, follow: &Follow) -> Result<(), StoreError> {
    place
        .store
        .insert_task(&NewTask {
            task_key: &place.key,
            thread_id: &place.thread_id,
            turn_id: &place.turn_id,
            call_id: &place.call_id,
            server: &place.server,
            tool: &place.tool,
            task_id: follow.ticket.id.as_str(),
            state: follow.state().name(),
            machine: &json!(follow.snapshot()),
        })
        .await
}

/// Follows a task with no one watching, and tells its turn how it ended.
async fn follow_to_end(place: TaskPlace, follow: Follow, next: Next, stored: TaskState) {
    let poller = ToolTasks {
        tools: place.tools.as_ref(),
        tool: &place.tool,
    };
    let mut follow = follow;
    let settled = match drive(&poller, &mut follow, next).await {
        Ok(s) => s,
        Err(reason) => {
            tracing::warn!(%reason, "a task could not be followed to its end");
            return;
        }
    };
    match store_settled(&place, &follow, stored, &settled).await {
        Ok(true) => tell(&place, &follow, &settled).await,
        Ok(false) => {}
        Err(e) => tracing::warn!(error = %e, "a settled task could not be stored"),
    }
}

/// Appends how the task ended to its turn, with its machine.
async fn tell(place: &TaskPlace, follow: &Follow, settled: &Settled) {
    let (text, result) = told(settled);
    let record = Record::TaskSettled {
        call_id: &place.call_id,
        tool: &place.tool,
        state: follow.state().name(),
        text: &text,
        result,
    }
    .message();
    let name = format!("task#{}", place.call_id);
    let machine = [(name.as_str(), json!(follow.snapshot()))];
    let written = place
        .store
        .step(&place.thread_id, &place.turn_id, &[record], &machine)
        .await;
    if let Err(e) = written {
        tracing::warn!(error = %e, "a settled task could not be appended to its turn");
    }
}

/// The compare-and-swap that settles a stored task.
async fn store_settled(
    place: &TaskPlace,
    follow: &Follow,
    stored: TaskState,
    settled: &Settled,
) -> Result<bool, StoreError> {
    let (text, _) = told(settled);
    let outcome = json!({"state": follow.state().name(), "text": text, "reason": reason(settled)});
    let won = place
        .store
        .swap_task(
            &place.key,
            stored.name(),
            follow.state().name(),
            &json!(follow.snapshot()),
            Some(&outcome),
        )
        .await?;
    if won {
        tracing::info!(tool = %place.tool, state = follow.state().name(), "task settled");
    }
    Ok(won)
}

/// What the user is told of a settled task, in code's words: only what the
/// task machine's state shows (the server's own failure text is kept in
/// the stored outcome's `reason`, never in this sentence, which later
/// turns' planners read). The tool's result, if it returned one.
pub fn told(settled: &Settled) -> (String, Option<&ToolOutput>) {
    match settled {
        Settled::Completed(out) if out.is_error => (
            "the task ended, and the tool answered with an error".into(),
            Some(out.as_ref()),
        ),
        Settled::Completed(out) => (
            "the task ended, and the tool returned a result".into(),
            Some(out.as_ref()),
        ),
        Settled::Failed(_) => ("the task failed with an error from its server".into(), None),
        Settled::Cancelled => (
            "the task was cancelled; whether it had an effect is not known".into(),
            None,
        ),
        Settled::Unknown(_) => (
            "whether the task ran is unknown; the call was not sent again".into(),
            None,
        ),
    }
}

/// Why, in the stored outcome: the server's failure (task id taken out),
/// or code's reason for an unknown outcome.
fn reason(settled: &Settled) -> Option<&str> {
    match settled {
        Settled::Failed(r) | Settled::Unknown(r) => Some(r),
        _ => None,
    }
}

/// Start-up: every task a dead process left unsettled — stored before
/// `started` (unix ms), so never one a turn of this process follows — is
/// followed again by its stored id (`restart`), in the background. A
/// thread whose lease is still live (its turn may run in another process,
/// or the dead one's lease has not expired yet) is waited for; a task
/// settled meanwhile is left alone. The call is never sent again.
pub async fn recover_tasks(
    tools: Arc<dyn Tools>,
    store: &Store,
    table: &Bound<Task>,
    wait: Duration,
    started: i64,
) -> Result<usize, StoreError> {
    let states = [TaskState::Working.name(), TaskState::Cancelling.name()];
    let stored: Vec<StoredTask> = (store.tasks_in(&states).await?.into_iter())
        .filter(|t| t.created_at < started)
        .collect();
    let n = stored.len();
    for task in stored {
        let (tools, store, table) = (tools.clone(), store.clone(), table.clone());
        tokio::spawn(async move {
            if let Err(e) = recover_one(tools, store, table, wait, task).await {
                tracing::warn!(error = %e, "a stored task cannot be followed again");
            }
        });
    }
    Ok(n)
}

/// One unsettled task: once no live turn holds its thread, followed again
/// if it is still unsettled.
async fn recover_one(
    tools: Arc<dyn Tools>,
    store: Store,
    table: Bound<Task>,
    wait: Duration,
    task: StoredTask,
) -> Result<(), StoreError> {
    loop {
        let now = crate::store::now_unix_ms();
        match store.turn_lease(&task.thread_id).await? {
            Some(l) if l.is_live_at(now) => {
                let left = u64::try_from(l.expires_at - now).unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(left.clamp(50, 5_000))).await;
            }
            _ => break,
        }
    }
    let states = [TaskState::Working.name(), TaskState::Cancelling.name()];
    let Some(stored) = store
        .tasks(&task.thread_id)
        .await?
        .into_iter()
        .find(|t| t.task_key == task.task_key && states.contains(&t.state.as_str()))
    else {
        return Ok(());
    };
    match restore(&stored, &table, wait) {
        Ok((follow, next, state)) => {
            let place = TaskPlace {
                tools,
                store,
                table,
                wait,
                key: stored.task_key.clone(),
                thread_id: stored.thread_id.clone(),
                turn_id: stored.turn_id.clone(),
                call_id: stored.call_id.clone(),
                server: stored.server.clone(),
                tool: stored.tool.clone(),
            };
            tracing::warn!(tool = %stored.tool, "a task was unsettled at a restart: followed again by its stored id");
            follow_to_end(place, follow, next, state).await;
        }
        Err(reason) => tracing::warn!(%reason, "a stored task cannot be followed again"),
    }
    Ok(())
}

fn restore(
    stored: &StoredTask,
    table: &Bound<Task>,
    wait: Duration,
) -> Result<(Follow, Next, TaskState), String> {
    let snapshot = serde_json::from_value(stored.machine.clone()).map_err(|e| e.to_string())?;
    let ticket = TaskTicket {
        id: TaskId::new(stored.task_id.clone())?,
        poll_every: None,
        message: None,
    };
    let state = TaskState::ALL
        .iter()
        .copied()
        .find(|s| s.name() == stored.state)
        .ok_or_else(|| format!("unknown stored task state {}", stored.state))?;
    let (follow, next) = Follow::restore(table, &snapshot, ticket, wait)?;
    Ok((follow, next, state))
}

/// The stored outcome of each of a thread's tasks (`GET /v1/threads/{id}`);
/// never the server's task id.
pub fn view(tasks: &[StoredTask]) -> Vec<Value> {
    tasks
        .iter()
        .map(|t| {
            json!({
                "call_id": t.call_id,
                "turn_id": t.turn_id,
                "tool": t.tool,
                "state": t.state,
                "outcome": t.outcome,
                "created_at": t.created_at,
                "updated_at": t.updated_at,
            })
        })
        .collect()
}
