//! The narration guard: the model's answer, sentence by sentence, through
//! the `narration` table. A sentence's deltas are held until it ends; then
//! each of its claims is classified by its warrant and fired. A forbidden
//! row means the sentence is neither shown nor stored: the code's own anchor
//! sentence takes its place, and the row id is reported.

use serde::Serialize;

use super::claims::{claims, ClaimKind};
use super::split::Splitter;
use super::vocab::{self, Lang, Vocab};
use super::warrant::{qualifier, Warrants};
use crate::judge::Anchor;
use crate::protocols::narration::{Narration, NarrationEffect, NarrationEvent};
use crate::protocols::Bound;

/// Why a sentence was replaced: the table's row, its reason, the kind of
/// claim. Never the sentence itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Replaced {
    pub row_id: String,
    pub why: String,
    pub claim: &'static str,
}

/// A piece of the answer ready to send: a sentence that passed, or the
/// replacement of one that did not.
#[derive(Debug, Clone, PartialEq)]
pub struct Piece {
    pub text: String,
    pub replaced: Option<Replaced>,
}

pub struct Guard {
    table: Bound<Narration>,
    vocab: &'static Vocab,
    warrants: Warrants,
    splitter: Splitter,
    /// The code's own sentence for this turn, in the user's language.
    replacement: String,
    /// The code's sentence for how this turn's actions ended: it takes the
    /// place of a sentence that claims another outcome, a refusal, a
    /// failure or a link (issue 33). `None`: the turn's `replacement`.
    outcome: Option<String>,
    /// What code told before the model's text (how actions ended): a model
    /// sentence that repeats it is not said twice.
    told: String,
    /// Replacements made.
    replaced: usize,
    /// What was let through or put in place so far, so the anchor sentence
    /// is said once.
    said: String,
    /// A quotation left open by the previous sentence: its closing mark.
    quote: Option<char>,
}

/// The anchor whose sentence stands in for a replaced one: the turn's first
/// statement of a count, a value, an absence or a failure, else its first
/// anchor.
pub fn primary_anchor(anchors: &[Anchor]) -> Option<&Anchor> {
    anchors
        .iter()
        .find(|a| {
            // A record's sentence is built from its digest, not from the
            // anchor: it cannot stand in.
            (a.answered() && !matches!(a, Anchor::Record { .. }))
                || matches!(
                    a,
                    Anchor::Absent { .. }
                        | Anchor::ToolFailed { .. }
                        | Anchor::OutcomeUnknown { .. }
                        | Anchor::InBandFailure { .. }
                        | Anchor::ContinuationDrifted { .. }
                        | Anchor::CursorRejected { .. }
                )
        })
        .or(anchors.first())
}

/// Byte ranges inside straight or curly double quotes (the quotes
/// included). A quotation may span sentences: `open` carries the closing
/// mark still awaited from the previous sentence, and is left with the one
/// this sentence leaves open.
fn quoted_spans(s: &str, open: &mut Option<char>) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = open.map(|_| 0);
    for (i, c) in s.char_indices() {
        match (*open, c) {
            (None, '"') => {
                *open = Some('"');
                start = Some(i);
            }
            (None, '“') => {
                *open = Some('”');
                start = Some(i);
            }
            (Some(close), c) if c == close => {
                out.push(start.unwrap_or(0)..i + c.len_utf8());
                *open = None;
                start = None;
            }
            _ => {}
        }
    }
    if let Some(from) = start {
        out.push(from..s.len());
    }
    out
}

impl Guard {
    pub fn new(
        table: &Bound<Narration>,
        warrants: Warrants,
        lang: Lang,
        replacement: String,
    ) -> Guard {
        Guard {
            table: table.clone(),
            vocab: vocab::vocab(lang),
            warrants,
            splitter: Splitter::new(),
            replacement,
            outcome: None,
            told: String::new(),
            replaced: 0,
            said: String::new(),
            quote: None,
        }
    }

    /// The code's sentence for how the turn's actions ended, which replaces
    /// a sentence that claims another outcome.
    pub fn with_outcome(mut self, outcome: Option<String>) -> Guard {
        self.outcome = outcome.filter(|s| !s.trim().is_empty());
        self
    }

    /// The code's sentence for how the turn's actions ended ([`Guard::with_outcome`]),
    /// told before the model's text and judged like any sentence; the
    /// model's sentences that repeat it are then not said twice.
    pub fn tell_outcome(&mut self) -> Vec<Piece> {
        let Some(text) = self.outcome.clone() else {
            return Vec::new();
        };
        let mut pieces = self.push(&text);
        pieces.extend(self.finish());
        for p in &pieces {
            self.told.push_str(&p.text);
        }
        pieces
    }

    /// Takes one delta; returns the sentences it completed, judged.
    pub fn push(&mut self, delta: &str) -> Vec<Piece> {
        let done = self.splitter.push(delta);
        done.into_iter().map(|s| self.judge(s)).collect()
    }

    /// The rest of the answer, judged. The guard is empty afterwards.
    pub fn finish(&mut self) -> Vec<Piece> {
        let rest = std::mem::replace(&mut self.splitter, Splitter::new()).finish();
        rest.into_iter().map(|s| self.judge(s)).collect()
    }

    /// How many sentences were replaced.
    pub fn replacements(&self) -> usize {
        self.replaced
    }

    /// A sentence of the code's replacement that the replacement has said
    /// already: the model may say the anchor's own words too.
    fn said_already(&self, sentence: &str) -> bool {
        let s = sentence.trim();
        if s.is_empty() {
            return false;
        }
        if self.told.contains(s) {
            return true;
        }
        [Some(&self.replacement), self.outcome.as_ref()]
            .into_iter()
            .flatten()
            .map(|r| r.trim())
            .any(|r| r.contains(s) && self.said.contains(r))
    }

    /// One sentence through its own `narration` machine.
    pub fn judge(&mut self, sentence: String) -> Piece {
        let mut machine = self.table.machine();
        // Words in quotation marks are quoted, not claimed (an example
        // prompt, a phrase the judge allows).
        let quoted = quoted_spans(&sentence, &mut self.quote);
        let found: Vec<_> = claims(&sentence, self.vocab)
            .into_iter()
            .filter(|c| {
                // A URL in quotes is still a link on the page.
                c.kind == ClaimKind::Link
                    || !quoted
                        .iter()
                        .any(|q| q.start <= c.span.start && c.span.end <= q.end)
            })
            .collect();
        let mut verdict: Result<(), (String, String, ClaimKind)> = Ok(());
        let mut from = 0;
        for claim in &found {
            let q = qualifier(
                &sentence,
                claim,
                from,
                &self.vocab.exact_cues,
                &self.vocab.at_least_cues,
            );
            from = claim.span.end;
            let event = self.warrants.classify_in(&sentence, claim, q);
            if let Err(v) = machine.fire(event) {
                verdict = Err((v.row_id.clone(), v.why.clone(), claim.kind));
                break;
            }
        }
        let mut verdict =
            verdict.map_err(|(row, why, kind)| (row, why, kind.name(), kind.is_outcome()));
        if verdict.is_ok() {
            verdict = match machine.fire(NarrationEvent::SentenceEnd) {
                Ok(step) if step.effect == Some(NarrationEffect::EmitSentence) => Ok(()),
                Ok(_) => Err((
                    "sentence_end".to_string(),
                    "the table's sentence_end row does not emit the sentence".into(),
                    "sentence",
                    false,
                )),
                Err(v) => Err((v.row_id.clone(), v.why.clone(), "sentence", false)),
            };
        }
        match verdict {
            // A sentence the code's replacement said already (the anchor's
            // own words, which the model may say too) is not said twice.
            Ok(())
                if (self.replaced > 0 || !self.told.is_empty()) && self.said_already(&sentence) =>
            {
                Piece {
                    text: String::new(),
                    replaced: None,
                }
            }
            Ok(()) => {
                self.said.push_str(&sentence);
                Piece {
                    text: sentence,
                    replaced: None,
                }
            }
            Err((row_id, why, claim, outcome)) => {
                self.replaced += 1;
                // The whitespace after the sentence stays, so the answer
                // reads on.
                let tail: String = sentence
                    .chars()
                    .rev()
                    .take_while(|c| c.is_whitespace())
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                // The anchor sentence once; a sentence replaced when it was
                // said already is dropped (marked, not repeated).
                let anchor = match (outcome, &self.outcome) {
                    (true, Some(o)) => o.trim(),
                    _ => self.replacement.trim(),
                };
                let text = match self.said.contains(anchor) {
                    true => String::new(),
                    false => format!("{anchor}{}", if tail.is_empty() { " " } else { &tail }),
                };
                self.said.push_str(&text);
                Piece {
                    text,
                    replaced: Some(Replaced { row_id, why, claim }),
                }
            }
        }
    }
}
