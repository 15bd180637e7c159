//! A call the server made a task, followed inside its turn (issue 22 §4):
//! stored before the first poll, polled at the server's interval with a
//! `progress` frame whenever what the server says of it changes, and
//! settled as `tables/task.ron` says. A turn that stops before the task
//! ends leaves it to a background follower (`agent::tasks`).

use std::time::Instant;

use super::{Stop, Turn};
use crate::agent::tasks::{Following, TaskPlace};
use crate::mcp::{Follow, McpError, Next, Progress, TaskTicket, ToolOutput};
use crate::wire;

impl Turn<'_> {
    /// Follows the task a call of `tool` became to its end: the tool's
    /// output, or the error that says how it ended without one; and the
    /// [`Following`], to be told once the result is shown (until then a
    /// stopped turn hands the telling on).
    pub(super) async fn follow_task(
        &mut self,
        call_id: &str,
        tool: &str,
        server: &str,
        ticket: TaskTicket,
        called: Instant,
    ) -> Result<(Result<ToolOutput, McpError>, Following), Stop> {
        let agent = self.agent;
        let (follow, next) = Follow::start(&agent.tables.task, ticket, agent.limits.task_wait)
            .map_err(Stop::Violation)?;
        let place = TaskPlace {
            tools: agent.tools.clone(),
            store: agent.store.clone(),
            table: agent.tables.task.clone(),
            wait: agent.limits.task_wait,
            key: format!("{}#{call_id}", self.turn_id),
            thread_id: self.thread_id.clone(),
            turn_id: self.turn_id.clone(),
            call_id: call_id.to_string(),
            server: server.to_string(),
            tool: tool.to_string(),
        };
        // Held from here: a turn dropped even while the task is being
        // stored hands it on.
        let mut following = Following::new(place, follow);
        following.next = Some(resume_point(&next));
        following.store().await?;
        let mut shown: Option<Progress> = None;
        let mut next = next;
        let settled = loop {
            // Between two steps the follower holds what comes next, so a
            // turn dropped here hands on exactly where it stood.
            next = match next {
                Next::Settled(s) => break s,
                Next::Poll(after) => {
                    let at = (call_id, tool, called);
                    self.poll_task(&mut following, after, at, &mut shown)
                        .await?
                }
                Next::Cancel => {
                    following.next = Some(Next::Cancel);
                    let follow = &mut following.follow;
                    if let Err(e) = agent.tools.task_cancel(tool, &follow.ticket.id).await {
                        tracing::warn!(tool, error_kind = e.kind(), "tasks/cancel failed");
                    }
                    let next = follow.cancel_sent();
                    following.next = Some(resume_point(&next));
                    following.store_cancelling().await?;
                    next
                }
            };
        };
        following.next = None;
        let snapshot = following.follow.snapshot();
        self.ledger
            .dirty
            .push((format!("task#{call_id}"), snapshot));
        let out = settled.clone().into_output(server, tool);
        // The store says it settled before the turn shows it; another
        // follower that won the swap first is logged (two processes on
        // one database), and the turn shows what it saw.
        if !following.settle(settled).await? {
            tracing::warn!(tool, "another follower settled this task first");
        }
        Ok((out, following))
    }
}

impl Turn<'_> {
    /// One poll of a followed task, after the server's interval: what
    /// comes next, and a progress frame when what the server says changed
    /// (not one per poll).
    async fn poll_task(
        &mut self,
        following: &mut Following,
        after: std::time::Duration,
        (call_id, tool, called): (&str, &str, Instant),
        shown: &mut Option<Progress>,
    ) -> Result<Next, Stop> {
        following.next = Some(Next::Poll(after));
        tokio::time::sleep(after).await;
        let follow = &mut following.follow;
        let poll = self.agent.tools.task_get(tool, &follow.ticket.id).await;
        let next = follow.seen(poll).map_err(Stop::Violation)?;
        let progress = follow.progress();
        following.next = Some(resume_point(&next));
        let changed = shown
            .as_ref()
            .is_none_or(|s| (s.status, &s.message) != (progress.status, &progress.message));
        if !matches!(next, Next::Settled(_)) && changed {
            let frame = wire::Progress {
                call_id: call_id.to_string(),
                tool: tool.to_string(),
                status: progress.status.to_string(),
                message: progress.message.clone(),
                polls: progress.polls,
                elapsed_ms: u64::try_from(called.elapsed().as_millis()).unwrap_or(u64::MAX),
            };
            *shown = Some(progress);
            self.emit_progress(frame).await?;
        }
        Ok(next)
    }
}

/// Where a follower that takes over picks up: the same poll or cancel (a
/// settled task is not handed on).
fn resume_point(next: &Next) -> Next {
    match next {
        Next::Poll(after) => Next::Poll(*after),
        Next::Cancel => Next::Cancel,
        Next::Settled(_) => Next::Poll(std::time::Duration::ZERO),
    }
}
