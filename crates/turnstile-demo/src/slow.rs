//! A model slowed down to a real model's pace: [`Slowed`] delegates to
//! another model and releases the answer's deltas on a fixed schedule, one
//! every `delay`, as a provider streams tokens over seconds. Used by
//! `turnstile demo --model-delay-ms N` and the chat benchmark's slow mode.
//!
//! The schedule is anchored when `respond` returns: delta `i` (from 0) is
//! due at `start + (i + 1) × delay`. A consumer that falls behind gets the
//! deltas already due at once, as it would from a network stream that kept
//! arriving; the pace never drifts with the consumer. Waiting is a tokio
//! timer per stream: no busy loop, no thread.

use std::time::Duration;

use futures::{stream, StreamExt};
use tokio::time::Instant;

use turnstile::llm::{LlmError, Model, Plan, PlanRequest, Reply, RespondRequest, TextStream};

/// `inner`, with every answer delta released `delay` after the previous
/// one was due. Plans are not delayed.
pub struct Slowed<M> {
    inner: M,
    delay: Duration,
}

impl<M: Model> Slowed<M> {
    pub fn new(inner: M, delay: Duration) -> Self {
        Slowed { inner, delay }
    }

    /// The pause before each delta.
    pub fn delay(&self) -> Duration {
        self.delay
    }
}

/// Releases the items of `inner` on the schedule `start + (i + 1) × delay`.
pub fn paced(inner: TextStream, delay: Duration) -> TextStream {
    let start = Instant::now();
    stream::unfold((inner, 1u32), move |(mut inner, i)| async move {
        let item = inner.next().await?;
        let due = start + delay * i;
        // A deadline already passed is not awaited: the timer would only
        // notice it on its next tick.
        if Instant::now() < due {
            tokio::time::sleep_until(due).await;
        }
        Some((item, (inner, i.saturating_add(1))))
    })
    // Polling again after the end answers `None` (an unfused `unfold` would
    // panic; the turn loop may poll once more after `now_or_never` saw it).
    .fuse()
    .boxed()
}

#[async_trait::async_trait]
impl<M: Model> Model for Slowed<M> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn plan(&self, req: &PlanRequest) -> Result<Plan, LlmError> {
        self.inner.plan(req).await
    }

    fn requests_to_answer(&self) -> u64 {
        self.inner.requests_to_answer()
    }

    async fn step(&self, req: &PlanRequest, answer: &RespondRequest) -> Result<Reply, LlmError> {
        match self.inner.step(req, answer).await? {
            Reply::Answer(inner) if !self.delay.is_zero() => {
                Ok(Reply::Answer(paced(inner, self.delay)))
            }
            reply => Ok(reply),
        }
    }

    async fn respond(&self, req: &RespondRequest) -> Result<TextStream, LlmError> {
        let inner = self.inner.respond(req).await?;
        if self.delay.is_zero() {
            return Ok(inner);
        }
        Ok(paced(inner, self.delay))
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    fn words(n: usize) -> TextStream {
        stream::iter((0..n).map(|i| Ok(format!("w{i} ")))).boxed()
    }

    #[tokio::test]
    async fn deltas_follow_the_schedule() {
        let delay = Duration::from_millis(40);
        let t0 = Instant::now();
        let mut s = paced(words(3), delay);
        let mut at = Vec::new();
        while let Some(item) = s.next().await {
            item.unwrap();
            at.push(t0.elapsed());
        }
        assert_eq!(at.len(), 3);
        for (i, t) in at.iter().enumerate() {
            assert!(*t >= delay * (i as u32 + 1), "delta {i} early: {t:?}");
        }
        assert!(at[2] < Duration::from_secs(2), "far too slow: {at:?}");
    }

    #[tokio::test]
    async fn a_late_consumer_gets_what_is_due_at_once() {
        let delay = Duration::from_millis(100);
        let t0 = Instant::now();
        let mut s = paced(words(4), delay);
        tokio::time::sleep(Duration::from_millis(250)).await;
        // The deltas due at 100 ms and 200 ms are ready without waiting.
        assert!(s.next().now_or_never().is_some());
        assert!(s.next().now_or_never().is_some());
        // The one due at 300 ms is not (unless this machine stalled past it).
        if t0.elapsed() < Duration::from_millis(290) {
            assert!(s.next().now_or_never().is_none());
        }
    }

    #[tokio::test]
    async fn polling_after_the_end_is_harmless() {
        let mut s = paced(words(1), Duration::from_millis(1));
        assert!(s.next().await.is_some());
        assert!(s.next().await.is_none());
        assert!(s.next().await.is_none());
    }

    #[tokio::test]
    async fn zero_delay_is_the_inner_model() {
        let mut s = paced(words(2), Duration::ZERO);
        assert!(s.next().now_or_never().is_some());
        assert!(s.next().now_or_never().is_some());
    }
}
