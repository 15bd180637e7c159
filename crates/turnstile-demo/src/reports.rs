//! `compile_site_report(project)`: the demo's long call (issue 22 §4). A
//! client that declares the MCP tasks extension (`io.modelcontextprotocol/
//! tasks`, SEP-2663) gets a task at once, runs through [`STEPS`] steps of
//! [`Reports::step`] each with a status message per step, and finds the
//! report in `tasks/get`; a client that does not gets the report when the
//! steps are done, on the call itself.
//!
//! The tasks live in one [`TaskManager`] for the whole server, not per MCP
//! session: a client that reconnects (a new session, or a restarted client)
//! still finds its task by id. Each run of the work is counted
//! ([`Reports::runs`]), and so is each `tasks/get` ([`Reports::polls`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock, CreateTaskResult, DetailedTask};
use rmcp::task_manager::{TaskContext, TaskExit, TaskManager, TaskOptions};
use rmcp::ErrorData;
use serde_json::json;

use super::data::dataset;

/// The steps a report goes through.
pub const STEPS: [&str; 4] = [
    "collecting the project's captures",
    "counting open issues by floor",
    "checking annotations against the schedule",
    "writing the report",
];

/// The default time one step takes.
pub const DEFAULT_STEP: Duration = Duration::from_millis(600);

/// The poll interval the demo suggests.
pub const POLL_INTERVAL_MS: u64 = 250;

/// The reports' tasks and counters.
pub struct Reports {
    manager: TaskManager,
    step: Duration,
    runs: Arc<AtomicU64>,
    polls: AtomicU64,
    cancels: AtomicU64,
    /// When each `tasks/get` arrived, so tests can see the interval kept.
    polled_at: std::sync::Mutex<Vec<std::time::Instant>>,
}

impl std::fmt::Debug for Reports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reports")
            .field("runs", &self.runs())
            .field("polls", &self.polls())
            .finish_non_exhaustive()
    }
}

impl Reports {
    pub fn new(step: Duration) -> Reports {
        Reports {
            manager: TaskManager::new(),
            step,
            runs: Arc::new(AtomicU64::new(0)),
            polls: AtomicU64::new(0),
            cancels: AtomicU64::new(0),
            polled_at: Default::default(),
        }
    }

    /// How many times a report's work started.
    pub fn runs(&self) -> u64 {
        self.runs.load(Ordering::SeqCst)
    }

    /// How many `tasks/get` requests reached the server.
    pub fn polls(&self) -> u64 {
        self.polls.load(Ordering::SeqCst)
    }

    /// The time between each two `tasks/get` requests, in arrival order.
    pub fn poll_gaps(&self) -> Vec<Duration> {
        let at = self.polled_at.lock().unwrap_or_else(|p| p.into_inner());
        at.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// How many `tasks/cancel` requests reached the server.
    pub fn cancels(&self) -> u64 {
        self.cancels.load(Ordering::SeqCst)
    }

    /// Tasks whose work has not ended.
    pub fn running(&self) -> usize {
        self.manager.running_task_count()
    }

    /// The call: a task for a client that follows tasks, else the report
    /// once its steps are done.
    pub async fn compile(&self, project: String, tasks: bool) -> CallToolResponse {
        if dataset().project(&project).is_none() {
            return refusal(&project).into();
        }
        let (runs, step) = (self.runs.clone(), self.step);
        if !tasks {
            return match work(project, step, runs, None).await {
                Ok(result) => result.into(),
                Err(_) => CallToolResult::error(vec![ContentBlock::text("cancelled")]).into(),
            };
        }
        let options = TaskOptions::new()
            .with_poll_interval_ms(POLL_INTERVAL_MS)
            .with_status_message("queued");
        let task = self.manager.spawn(options, move |context| {
            Box::pin(async move { work(project, step, runs, Some(context)).await })
        });
        CallToolResponse::Task(CreateTaskResult::new(task))
    }

    /// `tasks/get`.
    pub fn get(&self, task_id: &str) -> Result<DetailedTask, ErrorData> {
        self.polls.fetch_add(1, Ordering::SeqCst);
        (self.polled_at.lock().unwrap_or_else(|p| p.into_inner())).push(std::time::Instant::now());
        self.manager.get_task(task_id)
    }

    /// `tasks/cancel`.
    pub fn cancel(&self, task_id: &str) -> Result<(), ErrorData> {
        self.cancels.fetch_add(1, Ordering::SeqCst);
        self.manager.cancel_task(task_id)
    }
}

/// The report's work: each step with its status message, stopping at a
/// cancel between steps.
async fn work(
    project: String,
    step: Duration,
    runs: Arc<AtomicU64>,
    context: Option<TaskContext>,
) -> Result<CallToolResult, TaskExit> {
    runs.fetch_add(1, Ordering::SeqCst);
    for (n, what) in STEPS.iter().enumerate() {
        if let Some(c) = &context {
            c.set_status_message(format!("step {} of {}: {what}", n + 1, STEPS.len()));
        }
        match &context {
            Some(c) => tokio::select! {
                _ = tokio::time::sleep(step) => {}
                _ = c.cancelled() => return Err(TaskExit::Cancelled),
            },
            None => tokio::time::sleep(step).await,
        }
    }
    let data = dataset();
    let captures: Vec<_> = data
        .panoramas
        .iter()
        .filter(|p| p.project == project)
        .collect();
    let annotations: usize = captures.iter().map(|p| p.annotations.len()).sum();
    let record = json!({
        "status": "COMPILED",
        "project": project,
        "captures": captures.len(),
        "annotations": annotations,
        "steps": STEPS.len(),
    });
    Ok(CallToolResult::structured(record))
}

fn refusal(project: &str) -> CallToolResult {
    let record = json!({
        "error": "UNKNOWN_PROJECT",
        "message": format!("there is no project {project:?}; the projects are tower-a and annex"),
    });
    CallToolResult::error(vec![ContentBlock::text(record.to_string())])
}
