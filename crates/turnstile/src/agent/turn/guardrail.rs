//! The turn's safety checks, as `tables/guardrail.ron` runs them: the
//! user's message before anything stores it for a model or sends it to one,
//! and each sentence of the answer before it is sent. Code runs the
//! configured checks (`agent::guardrails`) and classifies their verdicts
//! into events; the table's precedence picks the one to fire, and its row's
//! effect is what happens to the text.

use super::{Stop, Turn, TurnRequest};
use crate::agent::guardrails::{FailMode, Finding, Side};
use crate::guard::check::Piece;
use crate::guard::safety::{self, Verdict};
use crate::guard::vocab::{self, Lang};
use crate::protocols::guardrail::{GuardrailEffect, GuardrailEvent};
use crate::wire;

/// What the checks made of one text.
struct Judged {
    effect: Option<GuardrailEffect>,
    row_id: String,
    /// The finding the fired event came from (none for a plain pass).
    finding: Option<Finding>,
    /// The text with every redaction applied.
    redacted: String,
}

fn event(side: Side, f: &Finding) -> GuardrailEvent {
    use GuardrailEvent as E;
    match (side, &f.verdict, f.unavailable) {
        (Side::Input, Verdict::Pass, _) => E::InputPass,
        (Side::Input, Verdict::Redact { .. }, _) => E::InputRedact,
        (Side::Input, Verdict::Block { .. }, _) => E::InputBlock,
        (Side::Input, Verdict::Unavailable { .. }, FailMode::Open) => E::InputUnavailableOpen,
        (Side::Input, Verdict::Unavailable { .. }, FailMode::Closed) => E::InputUnavailableClosed,
        (Side::Output, Verdict::Pass, _) => E::OutputPass,
        (Side::Output, Verdict::Redact { .. }, _) => E::OutputRedact,
        (Side::Output, Verdict::Block { .. }, _) => E::OutputBlock,
        (Side::Output, Verdict::Unavailable { .. }, FailMode::Open) => E::OutputUnavailableOpen,
        (Side::Output, Verdict::Unavailable { .. }, FailMode::Closed) => E::OutputUnavailableClosed,
    }
}

impl Turn<'_> {
    /// Runs the checks of `side` on `text` and fires the verdict the table
    /// ranks first (a plain pass when no check runs).
    async fn judge_text(&mut self, side: Side, text: &str) -> Result<Judged, Stop> {
        let guardrails = self.agent.guardrails.clone();
        let (findings, redacted) = guardrails.run(side, text, &mut self.checks_down).await;
        let events: Vec<GuardrailEvent> = findings.iter().map(|f| event(side, f)).collect();
        let pass = match side {
            Side::Input => GuardrailEvent::InputPass,
            Side::Output => GuardrailEvent::OutputPass,
        };
        let fired = (self.agent.tables.guardrail.first_of(&events)).unwrap_or(pass);
        let finding = (events.iter().position(|e| *e == fired)).map(|i| findings[i].clone());
        let step = self.guardrail.fire(fired).map_err(Stop::Violation)?;
        let row_id = self.guardrail.row_id(step.row).to_string();
        // A verdict other than a pass, on the turn's span (the row itself
        // is a `table row` event): the row and the check, never the text.
        // No released GenAI convention names guardrail attributes yet, so
        // they are turnstile's (ADR 0040).
        if let Some(f) = &finding {
            let side = match side {
                Side::Input => "input",
                Side::Output => "output",
            };
            match &f.verdict {
                Verdict::Pass => {}
                Verdict::Unavailable { why } => tracing::warn!(
                    turnstile.guardrail.side = side,
                    turnstile.guardrail.row_id = %row_id,
                    turnstile.guardrail.check = %f.check,
                    why = %why,
                    "a safety check could not run"
                ),
                _ => tracing::info!(
                    turnstile.guardrail.side = side,
                    turnstile.guardrail.row_id = %row_id,
                    turnstile.guardrail.check = %f.check,
                    "a safety check found something"
                ),
            }
        }
        Ok(Judged {
            effect: step.effect,
            row_id,
            finding,
            redacted,
        })
    }

    fn korean(&self) -> bool {
        vocab::detect(&self.user_text) == Lang::Ko
    }

    /// Checks the user's message before it is stored and before any model
    /// or tool sees it. A redaction changes what is stored and what the
    /// model reads; a refusal stores a placeholder in its place (a secret
    /// kept in the thread would reach the model in the next turn's
    /// history) and returns code's sentence for it.
    pub(super) async fn check_input(
        &mut self,
        req: &mut TurnRequest,
    ) -> Result<Option<(String, wire::Replaced)>, Stop> {
        let judged = self.judge_text(Side::Input, &req.text).await?;
        let korean = self.korean();
        let check = judged.finding.as_ref().map(|f| f.check.clone());
        match judged.effect {
            Some(GuardrailEffect::AskModel) => Ok(None),
            Some(GuardrailEffect::AskModelRedacted) => {
                req.text = judged.redacted;
                self.user_text = req.text.clone();
                Ok(None)
            }
            Some(GuardrailEffect::RefuseInput) => {
                let name = check.clone().unwrap_or_default();
                let found = judged.finding.as_ref().and_then(|f| f.found());
                let sentence = safety::refusal(&name, found, &judged.row_id, korean);
                // In the user's language: the turn's sentences (and their
                // judge's vocabulary) follow it.
                req.text = match korean {
                    true => format!(
                        "[보류된 메시지: `{name}` 검사(guardrail 표, 행 `{}`)]",
                        judged.row_id
                    ),
                    false => format!(
                        "[message withheld: the `{name}` check refused it (guardrail table, row `{}`)]",
                        judged.row_id
                    ),
                };
                self.user_text = req.text.clone();
                let note = wire::Replaced {
                    row_id: judged.row_id,
                    why: why(&name, found, korean),
                    claim: "guardrail".into(),
                    table: Some("guardrail".into()),
                    check,
                };
                Ok(Some((sentence, note)))
            }
            other => Err(self.unexpected(other, &judged.row_id)),
        }
    }

    /// The `refuse` effect: code says why the message was refused, with the
    /// row, through the narration guard like any sentence; no model is
    /// asked.
    pub(super) async fn refuse_input(&mut self) -> Result<super::TurnEvent, Stop> {
        let Some((sentence, note)) = self.refused.take() else {
            return Ok(self.refusal_missing());
        };
        let step = self
            .guardrail
            .fire(GuardrailEvent::Refusal)
            .map_err(Stop::Violation)?;
        if step.effect != Some(GuardrailEffect::Show) {
            let row = self.guardrail.row_id(step.row).to_string();
            return Err(self.unexpected(step.effect, &row));
        }
        let text = self.judged_by_the_guard(&sentence);
        self.delta(text, Some(note)).await?;
        Ok(super::TurnEvent::ResponderFinished)
    }

    /// Code's own sentence through the turn's narration guard, like any
    /// sentence; a replacement of it is reported as a model's would be.
    fn judged_by_the_guard(&self, sentence: &str) -> String {
        let mut guard = self.guard();
        let mut pieces = guard.push(sentence);
        pieces.extend(guard.finish());
        (pieces.into_iter())
            .map(|p| {
                // Code's sentence stands in its own note; a replacement of
                // it is still logged and counted by its row.
                if let Some(r) = p.replaced {
                    let _logged = super::respond::narration_note(r);
                }
                p.text
            })
            .collect()
    }

    fn refusal_missing(&mut self) -> super::TurnEvent {
        self.evidence.failure = Some(wire::Error {
            message: "the turn table asked for a refusal, but no check refused the message".into(),
            table: Some("turn".into()),
            row_id: Some(self.last_row.clone()),
            ..wire::Error::default()
        });
        super::TurnEvent::ResponderFailed
    }

    /// One piece of the answer, judged by the narration guard (`note`: its
    /// replacement, if it made one), through the output checks: the text
    /// to send and its note (the narration guard's, or the check's).
    pub(super) async fn check_output(
        &mut self,
        piece: Piece,
        note: Option<wire::Replaced>,
    ) -> Result<(String, Option<wire::Replaced>), Stop> {
        if piece.text.trim().is_empty() {
            return Ok((piece.text, note));
        }
        let step = self
            .guardrail
            .fire(GuardrailEvent::Sentence)
            .map_err(Stop::Violation)?;
        if step.effect != Some(GuardrailEffect::CheckOutput) {
            let row = self.guardrail.row_id(step.row).to_string();
            return Err(self.unexpected(step.effect, &row));
        }
        if self.agent.guardrails.waits_on_the_network(Side::Output) {
            // What passed before is sent before the turn waits on an
            // outside checker (ADR 0031).
            self.flush().await?;
        }
        // A capability code delivered on this thread is code's, not the
        // model's: the checks read the sentence without it, and it is put
        // back as it was (its token is not a leaked credential). Any other
        // URL, an allowed origin's included, is checked like the rest.
        // Without an output check there is nothing to mask (the stored
        // delivery is not validated again for every sentence).
        let mut urls: Vec<String> = match self.agent.guardrails.runs_on(Side::Output) {
            false => Vec::new(),
            true => (self.delivered_links().into_iter())
                .filter(|u| piece.text.contains(u.as_str()))
                .collect(),
        };
        urls.sort_by_key(|u| std::cmp::Reverse(u.len()));
        urls.dedup();
        let masked = mask(&piece.text, &urls);
        let mut judged = self.judge_text(Side::Output, &masked).await?;
        judged.redacted = unmask(&judged.redacted, &urls);
        let korean = self.korean();
        let check = judged.finding.as_ref().map(|f| f.check.clone());
        let found = judged.finding.as_ref().and_then(|f| f.found()).cloned();
        let name = check.clone().unwrap_or_default();
        let guardrail_note = |row_id: String| wire::Replaced {
            row_id,
            why: why(&name, found.as_ref(), korean),
            claim: "guardrail".into(),
            table: Some("guardrail".into()),
            check: check.clone(),
        };
        match judged.effect {
            Some(GuardrailEffect::Show) => Ok((piece.text, note)),
            Some(GuardrailEffect::ShowRedacted) => {
                Ok((judged.redacted, Some(guardrail_note(judged.row_id))))
            }
            Some(GuardrailEffect::ReplaceOutput) => {
                let withheld = safety::withheld(&name, found.as_ref(), &judged.row_id, korean);
                let mut text = self.judged_by_the_guard(&withheld);
                // The sentence's own spacing is kept, so the next one does
                // not run into it.
                if piece.text.ends_with(char::is_whitespace) {
                    text.push(' ');
                }
                Ok((text, Some(guardrail_note(judged.row_id))))
            }
            other => Err(self.unexpected(other, &judged.row_id)),
        }
    }

    /// The answer is over: its checks are done.
    pub(super) fn answer_checked(&mut self) {
        if self.guardrail.allows(GuardrailEvent::AnswerEnd) {
            let _ = self.guardrail.fire(GuardrailEvent::AnswerEnd);
        }
    }

    /// A row whose effect the check's code cannot do here.
    fn unexpected(&self, effect: Option<GuardrailEffect>, row: &str) -> Stop {
        Stop::Internal {
            table: "guardrail",
            row: row.to_string(),
            message: format!(
                "the guardrail table's row `{row}` asks for {}, which this step cannot do",
                effect.map_or("nothing", |e| crate::protocols::Names::name(e))
            ),
        }
    }
}

/// `text` with each of `urls` (longest first) in place of a mark made of
/// private-use characters only: no checker's pattern (a word, a digit, a
/// run of non-space) can take part of it.
fn mask(text: &str, urls: &[String]) -> String {
    (urls.iter().enumerate()).fold(text.to_string(), |t, (i, u)| {
        t.replace(u.as_str(), &marker(i))
    })
}

fn unmask(text: &str, urls: &[String]) -> String {
    (urls.iter().enumerate()).fold(text.to_string(), |t, (i, u)| t.replace(&marker(i), u))
}

/// The mark of the `i`-th link: U+E000, one private-use character per
/// index (U+E100 + i), U+E001.
fn marker(i: usize) -> String {
    let index = char::from_u32(0xE100 + (i as u32 % 0x0E00)).unwrap_or('\u{E100}');
    format!("\u{E000}{index}\u{E001}")
}

/// Why, for the frame's note: the check and what it found (never the text).
fn why(check: &str, found: Option<&safety::Found>, korean: bool) -> String {
    match found {
        Some(f) => format!("the `{check}` check saw {}", f.said(korean)),
        None => format!("the `{check}` check could not be run"),
    }
}
