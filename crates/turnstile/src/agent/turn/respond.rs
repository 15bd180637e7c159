//! The `respond` effect: stream the responder's answer through the
//! narration guard, committing each batch before it is sent (ADR 0010).

use super::{Stop, Turn};
use crate::agent::records::Record;
use crate::guard::check::{Guard, Piece};
use crate::guard::vocab;
use crate::guard::vocab::Lang;
use crate::guard::warrant::{TurnFacts, Warrants};
use crate::llm::prompt::RESPONDER_FIXED;
use crate::llm::{LlmError, Prompt, RespondRequest, TextStream};
use crate::protocols::telemetry;
use crate::protocols::turn::TurnEvent;
use crate::wire;
use futures::stream::Fuse;
use futures::{FutureExt, StreamExt};
use tracing::Instrument;

/// The title of the block of directives code derived, in the responder's
/// prompt and a planning round's.
pub(super) const DIRECTIVES: &str = "Directives";

impl Turn<'_> {
    /// Asks the responder (after the step limit, or to ask for a missing
    /// reference), streams its answer, and classifies how it ended.
    pub(super) async fn respond(&mut self) -> Result<TurnEvent, Stop> {
        self.export_model_call()?;
        let req = self.responder_request();
        let asked = std::time::Instant::now();
        telemetry::model_requests(1);
        self.flush().await?;
        let model = &self.agent.model;
        let span = crate::agent::spans::chat(model.provider(), model.name());
        let opened = model.respond(&req).instrument(span.clone()).await;
        telemetry::phase(telemetry::Phase::Model, asked.elapsed());
        match opened {
            Ok(s) => self.stream(crate::agent::spans::in_span(s, span)).await,
            Err(e) => {
                // The model's silence does not hide how an action ended.
                let mut guard = self.guard();
                self.tell_outcomes(&mut guard).await?;
                Ok(self.responder_failed(format!("the model could not answer: {e}")))
            }
        }
    }

    /// The code's sentences for how this turn's approvals, refusals and
    /// calls of unknown outcome ended (issue 33): each anchor is the state a
    /// machine ended in (the approval table's, a table's refusal, a call
    /// unanswered), said in the user's language, before the model's text.
    fn outcome_sentences(&self) -> Option<String> {
        let korean = vocab::detect(&self.user_text) == Lang::Ko;
        let told: Vec<String> = (self.evidence.anchors.iter())
            .filter(|a| a.is_outcome())
            .map(|a| crate::judge::sentences::sentence(a, korean))
            .filter(|s| !s.is_empty())
            .fold(Vec::new(), |mut out, s| {
                if !out.contains(&s) {
                    out.push(s);
                }
                out
            });
        (!told.is_empty()).then(|| told.join(" ") + " ")
    }

    /// Tells how the turn's actions ended, through the guard like any
    /// sentence; the model's own repetition of it is then not said twice.
    async fn tell_outcomes(&mut self, guard: &mut Guard) -> Result<(), Stop> {
        let pieces = guard.tell_outcome();
        self.say(pieces).await
    }

    /// The `explain` effect: what the turn lacks ("this floor" with no
    /// floor on the screen, "those" with nothing before, a link that is not
    /// there) is said in code's own sentences for the anchors, through the
    /// narration guard like a model's; no second model request.
    pub(super) async fn explain(&mut self) -> Result<TurnEvent, Stop> {
        let korean = vocab::detect(&self.user_text) == Lang::Ko;
        let text = (self.evidence.anchors.iter())
            .map(|a| crate::judge::sentences::sentence(a, korean))
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        let mut guard = self.guard();
        let mut pieces = guard.push(&text);
        pieces.extend(guard.finish());
        self.say(pieces).await?;
        if self.evidence.answer.is_empty() {
            return Ok(self.responder_failed("code has no sentence for what is missing".into()));
        }
        Ok(TurnEvent::ResponderFinished)
    }

    /// The `stream` effect: the answer a planning round began.
    pub(super) async fn stream_begun(&mut self) -> Result<TurnEvent, Stop> {
        match self.cursor.answer.take() {
            Some(s) => self.stream(s).await,
            None => Ok(self.responder_failed("the model's answer was not kept".into())),
        }
    }

    /// Streams an answer, and classifies how it ended.
    async fn stream(&mut self, stream: TextStream) -> Result<TurnEvent, Stop> {
        // Fused: a batch may have seen the stream end, and an ended stream
        // (an `unfold`, say) must not be polled again.
        match self.stream_answer(stream.fuse()).await? {
            Some(LlmError::CallsAfterText { tools }) => {
                // The text shown stands; the calls are not run: a plan
                // after a delta is the frame table's `plan-after-delta`.
                tracing::warn!(tools = ?tools, "the model asked for tools after it began answering; not run");
                return Ok(TurnEvent::CallsAfterText);
            }
            Some(e) => return Ok(self.responder_failed(format!("the model stream broke: {e}"))),
            None => {}
        }
        if self.evidence.answer.is_empty() {
            return Ok(self.responder_failed("the model returned no answer".into()));
        }
        Ok(TurnEvent::ResponderFinished)
    }

    fn responder_failed(&mut self, message: String) -> TurnEvent {
        self.evidence.failure = Some(wire::Error {
            message,
            ..wire::Error::default()
        });
        TurnEvent::ResponderFailed
    }

    /// What the responder sees: the directives code derived (with where
    /// each came from) and the digests, never a raw result.
    pub(super) fn responder_request(&self) -> RespondRequest {
        let mut prompt = Prompt::new(RESPONDER_FIXED).with_instructions(&self.agent.instructions);
        let evidence = &self.evidence;
        if !evidence.anchors.is_empty() {
            let lines: Vec<String> = (evidence.anchors.iter().zip(&evidence.origins))
                .map(|(a, o)| format!("- ({o}) {}", a.text()))
                .collect();
            prompt = prompt.block(DIRECTIVES, lines.join("\n"));
        }
        if !evidence.digests.is_empty() {
            let lines: Vec<String> = (evidence.digests.iter())
                .map(|d| format!("- {}", d.render()))
                .collect();
            prompt = prompt.block(
                "What the tools returned (digests; counts come only from the directives)",
                lines.join("\n"),
            );
        }
        RespondRequest {
            prompt,
            user_text: self.user_text.clone(),
            anchors: evidence.anchors.clone(),
            digests: evidence.digests.clone(),
        }
    }

    /// Sentence by sentence through the narration guard (a sentence's
    /// deltas are held until it ends), in batches committed before they are
    /// sent: whatever is ready when the previous batch is out forms the next
    /// one (ADR 0010), so a fast model costs one commit and a slow one never
    /// waits on a timer. The stream's error, if it broke.
    async fn stream_answer(
        &mut self,
        mut stream: Fuse<TextStream>,
    ) -> Result<Option<LlmError>, Stop> {
        let mut broken = None;
        let mut guard = self.guard();
        // How the turn's actions ended is code's to tell, first.
        self.tell_outcomes(&mut guard).await?;
        let mut ended = false;
        loop {
            let waited = std::time::Instant::now();
            // What is ready joins what is held; before waiting on the model
            // the held deltas are committed and sent (ADR 0031).
            let next = match stream.next().now_or_never() {
                Some(next) => next,
                None => {
                    self.flush().await?;
                    stream.next().await
                }
            };
            telemetry::phase(telemetry::Phase::Model, waited.elapsed());
            let Some(first) = next else { break };
            let mut batch = String::new();
            let mut item = Some(first);
            // Everything that is ready now joins this batch.
            while let Some(next) = item.take() {
                match next {
                    Ok(d) => batch += &d,
                    Err(e) => {
                        broken = Some(e);
                        break;
                    }
                }
                item = match stream.next().now_or_never() {
                    Some(None) => {
                        ended = true;
                        None
                    }
                    ready => ready.flatten(),
                };
            }
            let checked = std::time::Instant::now();
            let mut pieces = guard.push(&batch);
            // The stream's end is in this batch (or the model turned to
            // tool calls after its text): its last sentence goes with it.
            if (ended || broken.is_some()) && whole(&broken) {
                pieces.extend(guard.finish());
            }
            telemetry::phase(telemetry::Phase::Guard, checked.elapsed());
            self.say(pieces).await?;
            if ended || broken.is_some() {
                return Ok(broken);
            }
        }
        // A stream that broke mid-sentence leaves that sentence unchecked:
        // it is not shown.
        if whole(&broken) {
            let pieces = guard.finish();
            self.say(pieces).await?;
        }
        Ok(broken)
    }

    /// The narration guard for this turn's answer: what the judge decided,
    /// the cards shown, the items the model was shown, and what the user and
    /// the tool arguments named.
    pub(super) fn guard(&self) -> Guard {
        let lang = vocab::detect(&self.user_text);
        let facts = TurnFacts {
            anchors: &self.evidence.anchors,
            digests: &self.evidence.digests,
            cards: &self.evidence.cards,
            user_text: &self.user_text,
            args: self
                .ledger
                .steps
                .iter()
                .flatten()
                .chain(&self.ledger.current)
                .map(|c| &c.args)
                .collect(),
            links: self.delivered_links(),
            link_origins: self.agent.terminals.link_origins(),
        };
        let l = Warrants::of_turn(facts, vocab::vocab(lang));
        let korean = lang == Lang::Ko;
        let replacement = crate::guard::check::primary_anchor(&self.evidence.anchors)
            .map(|a| crate::judge::sentences::sentence(a, korean))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| match korean {
                true => "위 카드에 표시된 내용만 말씀드릴 수 있습니다.".into(),
                false => "I can only tell you what the card above shows.".into(),
            });
        Guard::new(&self.agent.tables.narration, l, lang, replacement)
            .with_outcome(self.outcome_sentences())
    }

    /// The capability URLs delivered on this thread that still validate:
    /// the only URLs a narration may write (issue 33).
    pub(super) fn delivered_links(&self) -> Vec<String> {
        let now = crate::store::now_unix_ms();
        let stored = self.exports.stored.as_ref().map(|(d, _)| d);
        (stored.into_iter().chain(self.exports.delivery.as_ref()))
            .filter(|d| !d.expired(now))
            .filter(|d| !self.agent.terminals.links_in(&d.url).is_empty())
            .map(|d| d.url.clone())
            .collect()
    }

    /// Writes judged pieces of the answer, each through the output safety
    /// checks: sentences that passed in one delta, each replacement (the
    /// narration guard's or a check's) in its own, marked.
    pub(super) async fn say(&mut self, pieces: Vec<Piece>) -> Result<(), Stop> {
        let mut passed = String::new();
        let waits =
            (self.agent.guardrails).waits_on_the_network(crate::agent::guardrails::Side::Output);
        for mut piece in pieces {
            if waits && !passed.is_empty() {
                // What passed is sent before the turn waits on an outside
                // checker for the next sentence.
                self.delta(std::mem::take(&mut passed), None).await?;
            }
            let note = piece.replaced.take().map(narration_note);
            match self.check_output(piece, note).await? {
                (text, None) => passed += &text,
                (text, Some(note)) => {
                    self.delta(std::mem::take(&mut passed), None).await?;
                    self.delta(text, Some(note)).await?;
                }
            }
        }
        self.delta(passed, None).await
    }

    pub(super) async fn delta(
        &mut self,
        text: String,
        replaced: Option<wire::Replaced>,
    ) -> Result<(), Stop> {
        if text.is_empty() && replaced.is_none() {
            return Ok(());
        }
        // The page's rule for links: only a URL the capability validator
        // accepts may become a download button.
        let capabilities = self.agent.terminals.links_in(&text);
        let links = self.agent.terminals.allowed_links_in(&text);
        let record = Record::Text {
            text: &text,
            replaced: replaced.as_ref(),
            capabilities: &capabilities,
            links: &links,
        }
        .message();
        self.evidence.answer += &text;
        let frame = wire::Delta {
            text,
            replaced,
            capabilities,
            links,
        };
        // Held until the next commit: the turn's next wait on the model, its
        // next call, or its terminal frame (ADR 0031).
        self.stage(wire::Frame::Delta(frame), vec![record]).await
    }
}

/// Whether the text read so far is whole: the stream ended, or the model
/// went on to ask for tools after it (the text before stands).
fn whole(broken: &Option<LlmError>) -> bool {
    matches!(broken, None | Some(LlmError::CallsAfterText { .. }))
}

/// A narration guard's replacement as the frame notes it, logged and counted
/// by its row: the row, not the sentence (the model's words stay out of the
/// log as they stay out of the store).
pub(super) fn narration_note(r: crate::guard::check::Replaced) -> wire::Replaced {
    tracing::warn!(row_id = %r.row_id, claim = r.claim, "narration guard replaced a sentence");
    telemetry::forbidden("narration", &r.row_id);
    wire::Replaced {
        row_id: r.row_id,
        why: r.why,
        claim: r.claim.to_string(),
        table: None,
        check: None,
    }
}
