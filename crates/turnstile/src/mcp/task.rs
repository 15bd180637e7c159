//! A long call the server made a task (issue 22 §4; the MCP tasks
//! extension `io.modelcontextprotocol/tasks`, SEP-2663).
//!
//! turnstile declares the extension, so a server may answer `tools/call`
//! with a task instead of the result. The call went out once; from then on
//! the only way to its result is the task id: `tasks/get` at the server's
//! poll interval until the task says how it ended. [`Follow`] runs one
//! task's machine of `tables/task.ron`: it classifies each poll (or its
//! failure, or a clock, or a restart) into an event, and the row says
//! whether to poll again, to ask the server to cancel, or to settle.
//!
//! The task id is held opaque: never logged, never shown to a model (it is
//! all it takes to read the task's result on some servers).

use std::time::{Duration, Instant};

use rmcp::model::{CallToolResult, DetailedTask, TaskPayload};
use serde::{Deserialize, Serialize};

use super::error::McpError;
use super::normalize::ToolOutput;
use crate::fsm::{Snapshot, Violation};
use crate::protocols::task::{Task, TaskEffect, TaskEvent, TaskState};
use crate::protocols::{Bound, Names, Typed};

/// The longest task id held (a server's id longer than this is refused).
pub const MAX_TASK_ID: usize = 512;
/// The poll interval when the server suggests none.
pub const DEFAULT_POLL: Duration = Duration::from_secs(1);
/// The shortest poll interval honoured: a server that suggests less is
/// polled this often.
pub const MIN_POLL: Duration = Duration::from_millis(100);
/// The longest poll interval honoured, so a progress line moves at least
/// this often while the wait lasts.
pub const MAX_POLL: Duration = Duration::from_secs(30);
/// How long `tasks/get` may keep failing (the server down, restarting)
/// before the task is settled as unreachable, outcome unknown.
pub const UNREACHABLE_AFTER: Duration = Duration::from_secs(60);
/// How long a task asked to cancel is polled for the server's last word.
pub const CANCEL_GRACE: Duration = Duration::from_secs(30);
/// The longest status message shown.
pub const MAX_STATUS_MESSAGE: usize = 300;
/// The JSON-RPC error a server answers for a task id it does not know
/// (SEP-2663: invalid params).
pub const UNKNOWN_TASK: i64 = -32602;
/// What stands for the task id wherever a server's text names it.
const TASK_ID_SHOWN: &str = "<task>";

/// A server's task id: opaque. `Debug` prints its length only.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TaskId(String);

impl TaskId {
    pub fn new(id: String) -> Result<TaskId, String> {
        if id.is_empty() {
            return Err("the server made the call a task with an empty id".into());
        }
        if id.len() > MAX_TASK_ID {
            return Err(format!(
                "the server's task id is {} bytes, over the {MAX_TASK_ID} a client holds",
                id.len()
            ));
        }
        Ok(TaskId(id))
    }

    /// The id as the server gave it: for `tasks/*` and the store only.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for TaskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TaskId({} bytes)", self.0.len())
    }
}

/// What a server said when it made a call a task.
#[derive(Debug, Clone)]
pub struct TaskTicket {
    pub id: TaskId,
    /// The server's suggested poll interval.
    pub poll_every: Option<Duration>,
    /// The server's status message, cleaned ([`clean_message`]).
    pub message: Option<String>,
}

impl TaskTicket {
    pub(crate) fn from_task(task: rmcp::model::Task) -> Result<TaskTicket, String> {
        Ok(TaskTicket {
            id: TaskId::new(task.task_id)?,
            poll_every: task.poll_interval_ms.map(Duration::from_millis),
            message: task.status_message.as_deref().and_then(clean_message),
        })
    }
}

/// What one `tasks/get` said.
#[derive(Debug, Clone)]
pub enum TaskPoll {
    Working {
        message: Option<String>,
        poll_every: Option<Duration>,
    },
    /// The task asks the user something (`inputRequests`); how many.
    InputRequired {
        requests: usize,
    },
    /// The call's result.
    Completed(Box<ToolOutput>),
    /// The JSON-RPC error the task failed with, as text.
    Failed {
        reason: String,
    },
    Cancelled,
}

impl TaskPoll {
    pub(crate) fn from_detailed(task: DetailedTask) -> Result<TaskPoll, String> {
        let message = task.task.status_message.as_deref().and_then(clean_message);
        let poll_every = task.task.poll_interval_ms.map(Duration::from_millis);
        Ok(match task.payload {
            TaskPayload::Working => TaskPoll::Working {
                message,
                poll_every,
            },
            TaskPayload::InputRequired { input_requests } => TaskPoll::InputRequired {
                requests: input_requests.len(),
            },
            TaskPayload::Completed { result } => {
                let result: CallToolResult =
                    serde_json::from_value(serde_json::Value::Object(result)).map_err(|e| {
                        format!("the completed task's result is not a tool result: {e}")
                    })?;
                TaskPoll::Completed(Box::new(ToolOutput::from_call_result(result)))
            }
            TaskPayload::Failed { error } => {
                let text = error
                    .get("message")
                    .and_then(serde_json::Value::as_str)
                    .and_then(clean_message)
                    .unwrap_or_else(|| "no reason given".into());
                let code = error.get("code").and_then(serde_json::Value::as_i64);
                TaskPoll::Failed {
                    reason: match code {
                        Some(code) => format!("JSON-RPC error {code}: {text}"),
                        None => text,
                    },
                }
            }
            TaskPayload::Cancelled => TaskPoll::Cancelled,
            // A status this client does not know is no answer it can act on.
            _ => return Err("a task status this client does not know".into()),
        })
    }
}

/// A server's status message as shown: control characters dropped,
/// whitespace collapsed, at most [`MAX_STATUS_MESSAGE`] characters.
pub fn clean_message(raw: &str) -> Option<String> {
    let words: Vec<&str> = raw
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect();
    let joined = words.join(" ");
    let mut out: String = joined.chars().take(MAX_STATUS_MESSAGE).collect();
    if out.len() < joined.len() {
        out.push('…');
    }
    (!out.is_empty()).then_some(out)
}

/// What the follower does next (the effect of the row it took).
#[derive(Debug)]
pub enum Next {
    /// `tasks/get` after this long.
    Poll(Duration),
    /// `tasks/cancel`, then [`Follow::cancel_sent`].
    Cancel,
    /// The task is over.
    Settled(Settled),
}

/// How a task ended, as the user is told.
#[derive(Debug, Clone)]
pub enum Settled {
    /// The call's result (which may itself be `isError`).
    Completed(Box<ToolOutput>),
    /// The task failed with a JSON-RPC error.
    Failed(String),
    /// The server cancelled it (or took the cancel turnstile asked for).
    Cancelled,
    /// Whether it ran is not known: the server forgot it, it stayed
    /// unreachable, or a cancel went unanswered.
    Unknown(String),
}

impl Settled {
    /// The call's outcome: the tool's output, or the error that says how
    /// the task ended without one. A cancelled task may have done part of
    /// its work, so it is outcome unknown, like one the server forgot.
    pub fn into_output(self, server: &str, tool: &str) -> Result<ToolOutput, McpError> {
        let (server, tool) = (server.to_string(), tool.to_string());
        match self {
            Settled::Completed(out) => Ok(*out),
            Settled::Failed(reason) => Err(McpError::Rpc {
                server,
                tool,
                code: 0,
                message: format!("the task failed: {reason}"),
            }),
            Settled::Cancelled => Err(McpError::Unanswered {
                server,
                tool,
                reason: "the task was cancelled".into(),
            }),
            Settled::Unknown(reason) => Err(McpError::Unanswered {
                server,
                tool,
                reason,
            }),
        }
    }
}

/// What the last poll showed, for a progress line.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// `working`, `input_required` or `cancelling`.
    pub status: &'static str,
    pub message: Option<String>,
    /// Polls made so far.
    pub polls: u32,
}

/// One task's machine of `tables/task.ron` and its clocks.
#[derive(Clone)]
pub struct Follow {
    machine: Typed<Task>,
    pub ticket: TaskTicket,
    /// When the wait runs out (then cancel is asked, and the grace runs).
    deadline: Instant,
    /// Since when `tasks/get` has been failing, if it is.
    failing_since: Option<Instant>,
    poll_every: Duration,
    polls: u32,
    message: Option<String>,
    last_status: &'static str,
    /// Why the task is settled as unknown, if it is.
    unknown_reason: Option<String>,
    pending: Option<Settled>,
}

impl std::fmt::Debug for Follow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follow")
            .field("state", &self.machine.state())
            .field("polls", &self.polls)
            .finish_non_exhaustive()
    }
}

impl Follow {
    /// A call answered with a task: fires `created`. `wait` is how long
    /// the task is followed before cancel is asked.
    pub fn start(
        table: &Bound<Task>,
        ticket: TaskTicket,
        wait: Duration,
    ) -> Result<(Follow, Next), Box<Violation>> {
        Self::from_machine(table.machine(), TaskEvent::Created, ticket, wait)
    }

    /// A task stored as unsettled, after a restart: fires `restart` on its
    /// stored machine. `wait` runs from now.
    pub fn restore(
        table: &Bound<Task>,
        snapshot: &Snapshot,
        ticket: TaskTicket,
        wait: Duration,
    ) -> Result<(Follow, Next), String> {
        let machine = table.restore(snapshot).map_err(|e| e.to_string())?;
        // A task cancel was asked for gets what is left of its grace, not a
        // new wait (and no second cancel: its restart row polls).
        let wait = match machine.state() {
            TaskState::Cancelling => CANCEL_GRACE,
            _ => wait,
        };
        Self::from_machine(machine, TaskEvent::Restart, ticket, wait).map_err(|v| v.to_string())
    }

    fn from_machine(
        machine: Typed<Task>,
        event: TaskEvent,
        ticket: TaskTicket,
        wait: Duration,
    ) -> Result<(Follow, Next), Box<Violation>> {
        let message = ticket.message.as_deref().map(|m| scrub(m, &ticket.id));
        let mut follow = Follow {
            machine,
            poll_every: clamp(ticket.poll_every),
            ticket,
            deadline: Instant::now() + wait,
            failing_since: None,
            polls: 0,
            message,
            last_status: "working",
            unknown_reason: None,
            pending: None,
        };
        let next = follow.fire(event)?;
        Ok((follow, next))
    }

    pub fn state(&self) -> TaskState {
        self.machine.state()
    }

    pub fn snapshot(&self) -> Snapshot {
        self.machine.snapshot()
    }

    /// The rows taken, by id.
    pub fn trace(&self) -> Vec<String> {
        self.machine.trace_since(0)
    }

    /// What the last poll showed.
    pub fn progress(&self) -> Progress {
        let status = if self.machine.state() == TaskState::Cancelling {
            "cancelling"
        } else {
            self.last_status
        };
        Progress {
            status,
            message: self.message.clone(),
            polls: self.polls,
        }
    }

    /// Classifies one `tasks/get` (or its failure) and fires it. The
    /// server's word on how the task ended is taken even past the wait; a
    /// task still running (or a poll that failed) past it fires `deadline`
    /// instead.
    pub fn seen(&mut self, poll: Result<TaskPoll, McpError>) -> Result<Next, Box<Violation>> {
        self.polls += 1;
        let event = match poll {
            Ok(poll) => {
                self.failing_since = None;
                self.classify(poll)
            }
            // SEP-2663: a task id the server does not know is -32602. Its
            // message is left out: servers name the task id in it
            // ("Unknown taskId …"), and this reason is shown and stored.
            Err(McpError::Rpc {
                code: UNKNOWN_TASK, ..
            }) => {
                self.unknown_reason = Some(format!(
                    "the server no longer knows the task (JSON-RPC error {UNKNOWN_TASK})"
                ));
                TaskEvent::TaskUnknown
            }
            // Any other failure (another JSON-RPC error, a transport error,
            // a timeout, an answer that does not parse) is a poll that
            // failed, polled again within the budget.
            Err(e) => {
                let since = *self.failing_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= UNREACHABLE_AFTER {
                    self.unknown_reason = Some(format!(
                        "the task's server gave no usable answer for {} s ({})",
                        UNREACHABLE_AFTER.as_secs(),
                        e.kind()
                    ));
                    TaskEvent::Unreachable
                } else {
                    TaskEvent::PollFailed
                }
            }
        };
        let running = matches!(
            event,
            TaskEvent::Working | TaskEvent::InputRequired | TaskEvent::PollFailed
        );
        if running && Instant::now() >= self.deadline {
            return self.deadline_passed();
        }
        self.fire(event)
    }

    /// The wait ran out before a poll: fires `deadline`.
    pub fn deadline_passed(&mut self) -> Result<Next, Box<Violation>> {
        self.unknown_reason = Some(match self.machine.state() {
            TaskState::Cancelling => format!(
                "cancel was asked and the server did not say how the task ended within {} s",
                CANCEL_GRACE.as_secs()
            ),
            _ => "the wait for the task ran out".into(),
        });
        self.fire(TaskEvent::Deadline)
    }

    /// `tasks/cancel` went out (or failed: cancellation is the server's
    /// to take either way); the task is polled for its last word.
    pub fn cancel_sent(&mut self) -> Next {
        self.deadline = Instant::now() + CANCEL_GRACE;
        Next::Poll(self.poll_every)
    }

    /// When the next poll is due at the latest.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    fn classify(&mut self, poll: TaskPoll) -> TaskEvent {
        match poll {
            TaskPoll::Working {
                message,
                poll_every,
            } => {
                if poll_every.is_some() {
                    self.poll_every = clamp(poll_every);
                }
                let message = message.map(|m| scrub(&m, &self.ticket.id));
                self.message = message.or(self.message.take());
                self.last_status = "working";
                TaskEvent::Working
            }
            TaskPoll::InputRequired { .. } => {
                self.last_status = "input_required";
                TaskEvent::InputRequired
            }
            TaskPoll::Completed(out) => {
                self.pending = Some(Settled::Completed(out));
                TaskEvent::Completed
            }
            TaskPoll::Failed { reason } => {
                self.pending = Some(Settled::Failed(scrub(&reason, &self.ticket.id)));
                TaskEvent::Failed
            }
            TaskPoll::Cancelled => TaskEvent::Cancelled,
        }
    }

    fn fire(&mut self, event: TaskEvent) -> Result<Next, Box<Violation>> {
        let step = self.machine.fire(event)?;
        tracing::info!(
            row = self.machine.row_id(step.row),
            from = step.from.name(),
            to = step.to.name(),
            "task"
        );
        Ok(match step.effect {
            Some(TaskEffect::Cancel) => Next::Cancel,
            Some(TaskEffect::Settle) => Next::Settled(self.settled()),
            // A row without an effect polls on: nothing else keeps a task.
            Some(TaskEffect::Poll) | None => {
                let left = self.deadline.saturating_duration_since(Instant::now());
                Next::Poll(self.poll_every.min(left))
            }
        })
    }

    /// What the settled state means, with the payload its poll carried.
    fn settled(&mut self) -> Settled {
        let pending = self.pending.take();
        match (self.machine.state(), pending) {
            (TaskState::Completed, Some(Settled::Completed(out))) => Settled::Completed(out),
            (TaskState::Failed, Some(Settled::Failed(reason))) => Settled::Failed(reason),
            (TaskState::Cancelled, _) => Settled::Cancelled,
            // Unknown, or a settled state whose answer carried no payload to
            // show (the task binding's invariant keeps `settle` to these four
            // states): nothing is claimed that cannot be shown.
            _ => Settled::Unknown(
                self.unknown_reason
                    .take()
                    .unwrap_or_else(|| "the task ended without a result to show".into()),
            ),
        }
    }
}

/// A server's text with the task id taken out: servers name it in their
/// messages, and these are shown and stored.
fn scrub(text: &str, id: &TaskId) -> String {
    text.replace(id.as_str(), TASK_ID_SHOWN)
}

/// The server's interval, within [`MIN_POLL`]..=[`MAX_POLL`].
fn clamp(every: Option<Duration>) -> Duration {
    every.unwrap_or(DEFAULT_POLL).clamp(MIN_POLL, MAX_POLL)
}

/// What follows a task to its end: one `tasks/get`, one `tasks/cancel`.
#[async_trait::async_trait]
pub trait TaskPoller: Send + Sync {
    async fn task_get(&self, id: &TaskId) -> Result<TaskPoll, McpError>;
    async fn task_cancel(&self, id: &TaskId) -> Result<(), McpError>;
}

/// Follows a task to its end without showing progress (a caller with no
/// user to show it to, such as `turnstile mcp call`).
pub async fn drive(
    poller: &dyn TaskPoller,
    follow: &mut Follow,
    mut next: Next,
) -> Result<Settled, Box<Violation>> {
    loop {
        next = match next {
            Next::Settled(s) => return Ok(s),
            Next::Poll(after) => {
                tokio::time::sleep(after).await;
                let poll = poller.task_get(&follow.ticket.id).await;
                follow.seen(poll)?
            }
            Next::Cancel => {
                if let Err(e) = poller.task_cancel(&follow.ticket.id).await {
                    tracing::warn!(error_kind = e.kind(), "tasks/cancel failed");
                }
                follow.cancel_sent()
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocols::TableSet;
    use serde_json::json;

    fn table() -> Bound<Task> {
        TableSet::builtin().unwrap().bound::<Task>().unwrap()
    }

    fn ticket() -> TaskTicket {
        TaskTicket {
            id: TaskId::new("t-1".into()).unwrap(),
            poll_every: Some(Duration::from_millis(5)),
            message: None,
        }
    }

    fn detailed(v: serde_json::Value) -> TaskPoll {
        TaskPoll::from_detailed(serde_json::from_value(v).unwrap()).unwrap()
    }

    #[test]
    fn a_task_id_is_opaque_in_debug() {
        let id = TaskId::new("secret-task-7f3a".into()).unwrap();
        assert_eq!(format!("{id:?}"), "TaskId(16 bytes)");
        assert!(TaskId::new(String::new()).is_err());
        assert!(TaskId::new("x".repeat(MAX_TASK_ID + 1)).is_err());
    }

    #[test]
    fn working_polls_at_the_servers_interval_then_completed_settles() {
        let (mut f, next) = Follow::start(&table(), ticket(), Duration::from_secs(60)).unwrap();
        assert!(matches!(next, Next::Poll(d) if d == Duration::from_millis(100)));
        let poll = detailed(
            json!({"taskId": "t-1", "status": "working", "statusMessage": "step\n2 of 5",
            "createdAt": "x", "lastUpdatedAt": "x", "ttlMs": null, "pollIntervalMs": 700}),
        );
        assert!(
            matches!(f.seen(Ok(poll)).unwrap(), Next::Poll(d) if d == Duration::from_millis(700))
        );
        assert_eq!(f.progress().message.as_deref(), Some("step 2 of 5"));
        let done = detailed(
            json!({"taskId": "t-1", "status": "completed", "createdAt": "x",
            "lastUpdatedAt": "x", "ttlMs": null,
            "result": {"content": [{"type": "text", "text": "42 rows"}]}}),
        );
        match f.seen(Ok(done)).unwrap() {
            Next::Settled(Settled::Completed(out)) => assert!(!out.is_error),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            f.trace(),
            ["follow-created-task", "still-working", "task-completed"]
        );
    }

    #[test]
    fn a_forgotten_task_is_outcome_unknown_and_a_failed_one_says_why() {
        let (mut f, _) = Follow::start(&table(), ticket(), Duration::from_secs(60)).unwrap();
        let forgot = McpError::Rpc {
            server: "s".into(),
            tool: "tasks/get".into(),
            code: -32602,
            message: "unknown task".into(),
        };
        assert!(matches!(
            f.seen(Err(forgot)).unwrap(),
            Next::Settled(Settled::Unknown(r)) if r.contains("-32602")
        ));
        let (mut f, _) = Follow::start(&table(), ticket(), Duration::from_secs(60)).unwrap();
        let failed = detailed(
            json!({"taskId": "t-1", "status": "failed", "createdAt": "x",
            "lastUpdatedAt": "x", "ttlMs": null, "error": {"code": -32603, "message": "disk full"}}),
        );
        assert!(matches!(
            f.seen(Ok(failed)).unwrap(),
            Next::Settled(Settled::Failed(r)) if r == "JSON-RPC error -32603: disk full"
        ));
    }

    #[test]
    fn a_task_that_asks_is_asked_to_cancel_and_polled_for_its_last_word() {
        let (mut f, _) = Follow::start(&table(), ticket(), Duration::from_secs(60)).unwrap();
        let asks = TaskPoll::InputRequired { requests: 1 };
        assert!(matches!(f.seen(Ok(asks)).unwrap(), Next::Cancel));
        assert!(matches!(f.cancel_sent(), Next::Poll(_)));
        assert_eq!(f.progress().status, "cancelling");
        assert!(matches!(
            f.seen(Ok(TaskPoll::Cancelled)).unwrap(),
            Next::Settled(Settled::Cancelled)
        ));
    }

    #[test]
    fn a_wait_that_runs_out_asks_cancel_then_settles_unknown() {
        let (mut f, _) = Follow::start(&table(), ticket(), Duration::ZERO).unwrap();
        let working = TaskPoll::Working {
            message: None,
            poll_every: None,
        };
        assert!(matches!(f.seen(Ok(working.clone())).unwrap(), Next::Cancel));
        f.cancel_sent();
        f.deadline = Instant::now();
        assert!(matches!(
            f.seen(Ok(working)).unwrap(),
            Next::Settled(Settled::Unknown(r)) if r.contains("cancel was asked")
        ));
    }

    /// The server's last word is taken even past the wait: a task that
    /// says it completed after the grace ran out is completed, not unknown.
    #[test]
    fn an_ending_the_server_reports_late_is_still_taken() {
        let (mut f, _) = Follow::start(&table(), ticket(), Duration::ZERO).unwrap();
        let working = TaskPoll::Working {
            message: None,
            poll_every: None,
        };
        assert!(matches!(f.seen(Ok(working)).unwrap(), Next::Cancel));
        f.cancel_sent();
        f.deadline = Instant::now();
        let done = TaskPoll::Completed(Box::default());
        assert!(matches!(
            f.seen(Ok(done)).unwrap(),
            Next::Settled(Settled::Completed(_))
        ));
        assert_eq!(
            f.trace(),
            [
                "follow-created-task",
                "deadline-asks-cancel",
                "completed-despite-cancel"
            ]
        );
    }

    /// Only -32602 says the server forgot the task; another JSON-RPC error
    /// is a poll that failed, polled again.
    #[test]
    fn only_an_unknown_task_error_forgets_the_task() {
        let (mut f, _) = Follow::start(&table(), ticket(), Duration::from_secs(60)).unwrap();
        let busy = McpError::Rpc {
            server: "s".into(),
            tool: "tasks/get".into(),
            code: -32603,
            message: "internal error".into(),
        };
        assert!(matches!(f.seen(Err(busy)).unwrap(), Next::Poll(_)));
        assert_eq!(f.state(), TaskState::Working);
    }

    /// A server that names the task id in its words has it taken out of
    /// what is shown and stored.
    #[test]
    fn the_task_id_is_taken_out_of_the_servers_words() {
        let ticket = TaskTicket {
            id: TaskId::new("tid-9c1e".into()).unwrap(),
            poll_every: None,
            message: Some("task tid-9c1e queued".into()),
        };
        let (mut f, _) = Follow::start(&table(), ticket, Duration::from_secs(60)).unwrap();
        assert_eq!(f.progress().message.as_deref(), Some("task <task> queued"));
        let failed = TaskPoll::Failed {
            reason: "tid-9c1e ran out of disk".into(),
        };
        match f.seen(Ok(failed)).unwrap() {
            Next::Settled(Settled::Failed(r)) => assert_eq!(r, "<task> ran out of disk"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_restart_follows_the_stored_task() {
        let (f, _) = Follow::start(&table(), ticket(), Duration::from_secs(60)).unwrap();
        let snap = f.snapshot();
        let (g, next) =
            Follow::restore(&table(), &snap, ticket(), Duration::from_secs(60)).unwrap();
        assert!(matches!(next, Next::Poll(_)));
        assert_eq!(g.state(), TaskState::Working);
    }
}
