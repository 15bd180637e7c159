//! The narration's warrants (issue 36 §4: "licence" is the caller's tier
//! permission, `tables/licence.ron`; the table's events keep the word
//! "licensed" for a claim a warrant covers): what the judge lets a turn's
//! narration say, built from the turn's
//! anchors (counts, bounds, single values, accounted zeros), the cards it
//! showed (complete or a sample), the items the model was shown (their
//! attributes), and what the user and the tool arguments named.
//!
//! A claim is classified into one `narration` table event here; the table
//! decides whether it passes.

use std::collections::BTreeSet;

use serde_json::Value;

use super::claims::{claims, Claim, ClaimKind};
use super::vocab::Vocab;
use crate::judge::anchors::ActionOutcome;
use crate::judge::digest::Digest;
use crate::judge::emptiness::AbsenceCause;
use crate::judge::Anchor;
use crate::protocols::narration::NarrationEvent;

/// What one turn decided and showed, for [`Warrants::of_turn`].
pub struct TurnFacts<'a> {
    pub anchors: &'a [Anchor],
    pub digests: &'a [Digest],
    /// Each citation card shown: whether it was the whole population.
    pub cards: &'a [bool],
    pub user_text: &'a str,
    /// The arguments of every call the turn made.
    pub args: Vec<&'a serde_json::Map<String, Value>>,
    /// The capability URLs delivered on this thread that still validate:
    /// the only URLs the narration may write.
    pub links: Vec<String>,
    /// Origins an operator allows links to (documentation); none by default.
    pub link_origins: &'a [String],
}

/// How a count is said: as the population ("exactly 10", "there are 10"),
/// as a lower bound ("at least 189"), or neither ("these 10").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Qualifier {
    Exact,
    AtLeast,
    Plain,
}

/// The numbers and facts one turn's narration may state.
#[derive(Debug, Clone, Default)]
pub struct Warrants {
    /// Exact totals, complete cards' sizes, accounted single values, and
    /// the facts the judge stated (page counts, anomalies' totals).
    exact: BTreeSet<u64>,
    /// Lower bounds.
    bounds: BTreeSet<u64>,
    /// The sizes of samples (shown, not the population) and unaccounted
    /// single values (the server's word).
    shown: BTreeSet<u64>,
    /// Numbers the judge stated in its own words (an anomaly's totals, a
    /// page cap, a step limit): said plainly, never as a population.
    stated: BTreeSet<u64>,
    /// Numbers the user or the tool arguments named as quantities.
    named: BTreeSet<u64>,
    /// Numbers inside the attributes of shown items (ids, dates, floors).
    attributes: BTreeSet<u64>,
    /// Text an attribute may be quoted from (lower case).
    corpus: String,
    /// The largest sample shown: a plain "3 of them" within it is a part
    /// of what the user sees, not a population claim.
    largest_sample: u64,
    /// "None" is backed by an accounted zero.
    accounted_zero: bool,
    /// A call of this turn answered with a result the judge read (a count,
    /// a value, a record, an accounted zero): "searched", "found" may be
    /// said. A failure, an in-band failure or a question asked back is none.
    searched: bool,
    /// Cards shown this turn, and how many of them are complete.
    cards: usize,
    complete_cards: usize,
    /// How this turn's actions ended, as their machines' states show it
    /// (issue 33): one took effect, was sent, was cancelled; a table, the
    /// licence gate or the user refused one; one failed.
    done: bool,
    sent: bool,
    cancelled: bool,
    refused: bool,
    failed: bool,
    /// Something of this turn was an action, or did not answer (a failure,
    /// a refusal, an unknown outcome): "confirmed", "sent", "cancelled" are
    /// then about it. In a turn that only read data ("the server confirmed
    /// zero results") they are not judged, and a "failed" or "denied" the
    /// data itself carries ("blocked fire exit", "inspection failed") is a
    /// quotation.
    at_stake: bool,
    /// An action whose outcome is its tool's own result (an approved call
    /// that ran, an answered question): the result's words ("CANCELLED",
    /// "CONFIRMED") say how it ended.
    tool_says: bool,
    /// A capability was delivered in this turn: the link may be offered.
    link_offered: bool,
    /// Capability URLs delivered on this thread that still validate.
    links: BTreeSet<String>,
    /// Origins an operator allows links to.
    link_origins: Vec<String>,
}

/// Every integer written with digits in `text` (`PANO-003-0611` → 3, 611;
/// `2026-04-01` → 2026, 4, 1).
pub fn numbers_in(text: &str) -> impl Iterator<Item = u64> + '_ {
    text.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse::<u64>().ok())
}

fn number_of(text: &str) -> Option<u64> {
    let t = text.trim();
    t.parse::<u64>().ok().or_else(|| {
        t.parse::<f64>()
            .ok()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0)
            .map(|f| f as u64)
    })
}

impl Warrants {
    /// The warrants of what the judge decided (its anchors).
    pub fn from_anchors(anchors: &[Anchor]) -> Warrants {
        let mut l = Warrants {
            // Zero after narrowing may be decided without a call (a
            // disjoint filter): it licenses no search claim.
            searched: anchors.iter().any(Anchor::answered),
            ..Warrants::default()
        };
        for a in anchors {
            l.outcome(a);
            match a {
                Anchor::CountExact {
                    total,
                    displayed,
                    complete,
                    ..
                } => {
                    l.exact.insert(*total);
                    if *complete {
                        l.exact.insert(*displayed);
                    } else {
                        l.sample(*displayed);
                    }
                }
                Anchor::CountLowerBound {
                    at_least,
                    displayed,
                    ..
                } => {
                    l.bounds.insert(*at_least);
                    l.sample(*displayed);
                }
                Anchor::CountShown { displayed, .. } => l.sample(*displayed),
                Anchor::Aggregate { value, .. } => l.exact.extend(number_of(value)),
                Anchor::ValueUnaccounted { value, .. } => l.shown.extend(number_of(value)),
                Anchor::Absent {
                    cause: AbsenceCause::ZeroFromStart | AbsenceCause::ZeroAfterNarrowing,
                } => {
                    l.accounted_zero = true;
                    l.exact.insert(0);
                }
                // The judge itself says there was nothing earlier to narrow;
                // the export table, that there is no live link to show.
                // (Not "more of that list cannot be fetched": more may
                // exist.)
                Anchor::NothingToNarrow
                | Anchor::NothingToContinue { shown: false }
                | Anchor::ListComplete
                | Anchor::LinkUnavailable { .. } => l.accounted_zero = true,
                Anchor::Record { id, .. } => {
                    // One record: "one record" is its count.
                    l.exact.insert(1);
                    l.attribute_text(id);
                }
                // Facts the judge states in its own words (a changed total,
                // a page cap, a step limit).
                Anchor::StitchAbandoned { anomaly } | Anchor::ContinuationDrifted { anomaly } => {
                    l.stated.extend(numbers_in(anomaly));
                    // Its words may be quoted ("a later page failed").
                    l.corpus.push_str(&anomaly.to_lowercase());
                    l.corpus.push('\n');
                }
                Anchor::StitchCapped { pages } => {
                    l.stated.insert(*pages as u64);
                }
                Anchor::ContinuationCapped { shown } => {
                    l.stated.insert(*shown);
                }
                Anchor::StepLimit { steps } => {
                    l.stated.insert(u64::from(*steps));
                }
                // The delivery's facts, as the code's sentence states them
                // (file count, size, expiry).
                // (file count, size, expiry): the count is stated, the
                // size and the instant are attributes of the export.
                a @ Anchor::Delivered { .. } => {
                    for korean in [false, true] {
                        let said = crate::judge::sentences::sentence(a, korean);
                        l.stated.extend(numbers_in(&said));
                        l.attribute_text(&said);
                    }
                }
                _ => {}
            }
        }
        l
    }

    /// The warrants of one turn: what the judge decided, the cards it
    /// showed, the items the model was shown, and what the user and the
    /// tool arguments named.
    pub fn of_turn(facts: TurnFacts<'_>, vocab: &Vocab) -> Warrants {
        let mut l = Warrants::from_anchors(facts.anchors);
        for d in facts.digests {
            for item in &d.items {
                for v in item.values() {
                    l.value(v);
                }
            }
        }
        for complete in facts.cards {
            l.card(*complete);
        }
        // What the user wrote: its ids, dates and floors may be quoted;
        // only the quantities it named ("12 photos") may be said back as
        // counts.
        l.quoted(facts.user_text);
        for c in claims(facts.user_text, vocab) {
            if let (ClaimKind::Count, Some(v)) = (c.kind, c.value) {
                l.named_value(v);
            }
        }
        for args in facts.args {
            l.arguments(args);
        }
        l.links.extend(facts.links);
        l.link_origins = facts.link_origins.to_vec();
        if l.tool_says {
            l.results_say();
        }
        l
    }

    /// An action whose outcome is its tool's result: a status word of the
    /// result (English, as servers write them: "CANCELLED") licenses the
    /// same claim in any language ("요청이 취소되었습니다").
    fn results_say(&mut self) {
        let en = &super::vocab::vocab(super::vocab::Lang::En).actions;
        let says = |words: &[String]| {
            (words.iter())
                .filter(|w| !w.contains(' '))
                .any(|w| self.corpus.lines().any(|line| line.trim() == w))
        };
        let (done, cancelled, sent) = (says(&en.done), says(&en.cancelled), says(&en.sent));
        self.done |= done;
        self.cancelled |= cancelled;
        self.sent |= sent;
    }

    /// What an anchor says of how an action ended: the machines' states are
    /// the only warrant for "done", "sent", "cancelled", "refused",
    /// "failed" and an offered link.
    fn outcome(&mut self, a: &Anchor) {
        use ActionOutcome as O;
        // Code tells these endings; a delivery, a missing link and a failed
        // read are at stake as well.
        self.at_stake |= a.is_outcome()
            || matches!(
                a,
                Anchor::Delivered { .. }
                    | Anchor::LinkUnavailable { .. }
                    | Anchor::ToolFailed { .. }
                    | Anchor::InBandFailure { .. }
                    | Anchor::CursorRejected { .. }
                    | Anchor::Absent {
                        cause: AbsenceCause::AuthenticationFailed
                            | AbsenceCause::BlockedByPermission,
                    }
            );
        match a {
            Anchor::Action { outcome, .. } => {
                let (done, sent, cancelled, refused, failed) = match outcome {
                    O::Completed => (true, true, false, false, false),
                    O::Ran => {
                        self.tool_says = true;
                        (true, true, false, false, false)
                    }
                    O::Accepted | O::Unknown => (false, true, false, false, false),
                    O::Answered | O::Connected => {
                        self.tool_says = true;
                        (false, true, false, false, false)
                    }
                    O::Failed | O::CallFailed | O::AnswerFailed | O::ConnectCallFailed => {
                        (false, true, false, false, true)
                    }
                    // The user denied it: cancelled as they decided.
                    O::Cancelled => (false, false, true, true, false),
                    O::Expired | O::Withdrawn => (false, false, true, false, false),
                    O::NotSent | O::Withheld | O::QuestionRefused | O::ConnectDeclined => {
                        (false, false, false, true, false)
                    }
                    O::NothingPrepared
                    | O::PrepareUnread
                    | O::NotSentExpired
                    | O::QuestionWithdrawn
                    | O::WithdrawnUncancelled
                    | O::CallWithdrawn
                    | O::QuestionExpired
                    | O::ConnectExpired => (false, false, false, false, false),
                };
                self.done |= done;
                self.sent |= sent;
                self.cancelled |= cancelled;
                self.refused |= refused;
                self.failed |= failed;
            }
            Anchor::Delivered { .. } => {
                self.done = true;
                self.sent = true;
                self.link_offered = true;
            }
            Anchor::OutcomeUnknown { .. } => self.sent = true,
            Anchor::Refused { .. }
            | Anchor::NotRun { .. }
            | Anchor::Absent {
                cause: AbsenceCause::BlockedByPermission,
            } => self.refused = true,
            Anchor::ToolFailed { .. }
            | Anchor::InBandFailure { .. }
            | Anchor::CursorRejected { .. }
            | Anchor::Absent {
                cause: AbsenceCause::AuthenticationFailed,
            } => self.failed = true,
            _ => {}
        }
    }

    /// Whether `url` is a link the narration may write: a capability
    /// delivered on this thread that still validates, or one of an origin
    /// the operator allows.
    fn link_licensed(&self, url: &str) -> bool {
        self.links.contains(url)
            || (self.link_origins.iter()).any(|o| crate::judge::capability::of_origin(url, o))
    }

    fn sample(&mut self, displayed: u64) {
        self.shown.insert(displayed);
        self.largest_sample = self.largest_sample.max(displayed);
    }

    /// The cards shown this turn: whether each was the whole population.
    pub fn card(&mut self, complete: bool) {
        self.cards += 1;
        if complete {
            self.complete_cards += 1;
        }
    }

    /// Items the model was shown (digest items, a record): their scalar
    /// fields are attributes it may quote.
    pub fn items<'a>(&mut self, items: impl IntoIterator<Item = &'a Value>) {
        for item in items {
            self.value(item);
        }
    }

    fn value(&mut self, v: &Value) {
        match v {
            Value::String(s) => self.attribute_text(s),
            Value::Number(n) => self.attribute_text(&n.to_string()),
            Value::Array(a) => a.iter().for_each(|v| self.value(v)),
            Value::Object(m) => m.values().for_each(|v| self.value(v)),
            _ => {}
        }
    }

    fn attribute_text(&mut self, s: &str) {
        self.attributes.extend(numbers_in(s));
        self.corpus.push_str(&s.to_lowercase());
        self.corpus.push('\n');
    }

    /// Text the user or the tool arguments carry (ids, dates, floors): it
    /// may be quoted back as attributes, never used as a count.
    pub fn quoted(&mut self, text: &str) {
        self.attribute_text(text);
    }

    /// A quantity the user or the tool arguments named ("12 photos", a
    /// `limit` of 12): said back, it is not a claim about the data.
    pub fn named_value(&mut self, n: u64) {
        self.named.insert(n);
    }

    /// The tool arguments of this turn's calls: attributes the answer may
    /// quote (a floor, a date range, an id), never counts — a `floor: 3`
    /// does not license "there are 3".
    pub fn arguments(&mut self, args: &serde_json::Map<String, Value>) {
        for v in args.values() {
            self.argument(v);
        }
    }

    fn argument(&mut self, v: &Value) {
        match v {
            Value::Number(n) => self.attribute_text(&n.to_string()),
            Value::String(s) => self.attribute_text(s),
            Value::Array(a) => a.iter().for_each(|v| self.argument(v)),
            Value::Object(m) => m.values().for_each(|v| self.argument(v)),
            _ => {}
        }
    }

    /// The `narration` table event for one claim.
    pub fn classify(&self, claim: &Claim, qualifier: Qualifier) -> NarrationEvent {
        self.classify_in("", claim, qualifier)
    }

    /// Whether the claim, with the two words before it, is quoted from what
    /// the model was shown or the user wrote ("the request was cancelled"
    /// in a tool's own record): the data's words, not a claim about an
    /// action. "Your seat is reserved" is no quotation of "seat 12 will be
    /// reserved on confirmation".
    fn quotes_data(&self, sentence: &str, claim: &Claim) -> bool {
        let Some(before) = sentence.get(..claim.span.start) else {
            return false;
        };
        let words: Vec<&str> = before.split_whitespace().collect();
        if words.is_empty() {
            return false;
        }
        let lead = words[words.len().saturating_sub(2)..].join(" ");
        let quoted = format!("{lead} {}", claim.text.trim()).to_lowercase();
        self.corpus.contains(&quoted)
    }

    /// The `narration` table event for one claim of `sentence`.
    pub fn classify_in(
        &self,
        sentence: &str,
        claim: &Claim,
        qualifier: Qualifier,
    ) -> NarrationEvent {
        use NarrationEvent as E;
        let shown = |licensed: bool, yes: E, no: E| if licensed { yes } else { no };
        // Not about an action: nothing of the turn acted or went unanswered.
        let idle = !self.at_stake;
        // The data's own words: a phrase quoted from it, or, in a turn that
        // only read data, its word.
        let quoted = self.quotes_data(sentence, claim)
            || (idle && {
                let word = claim.text.trim().to_lowercase();
                !word.is_empty() && self.corpus.contains(&word)
            });
        let free = idle || quoted;
        match claim.kind {
            ClaimKind::ActionDone => {
                shown(self.done || free, E::ActionDoneShown, E::ActionDoneUnshown)
            }
            ClaimKind::ActionSent => {
                shown(self.sent || free, E::ActionSentShown, E::ActionSentUnshown)
            }
            ClaimKind::Cancelled => shown(self.cancelled || free, E::CancelShown, E::CancelUnshown),
            ClaimKind::Refusal => shown(self.refused || quoted, E::RefusalShown, E::RefusalUnshown),
            ClaimKind::Failure => match (self.failed || quoted, self.refused) {
                (true, _) => E::FailureShown,
                (false, true) => E::FailureForRefusal,
                (false, false) => E::FailureUnshown,
            },
            ClaimKind::Link => {
                let text = claim.text.trim();
                let is_url = text
                    .get(..4)
                    .is_some_and(|p| p.eq_ignore_ascii_case("http"));
                let licensed = match is_url {
                    true => self.link_licensed(text),
                    false => self.link_offered || !self.links.is_empty(),
                };
                shown(licensed, E::LinkDelivered, E::LinkUndelivered)
            }
            ClaimKind::Search => match self.searched {
                true => E::SearchAnswered,
                false => E::SearchWithoutResult,
            },
            ClaimKind::Absence => match self.accounted_zero {
                true => E::AbsenceAccounted,
                false => E::AbsenceUnaccounted,
            },
            ClaimKind::Completeness => match self.cards > 0 && self.complete_cards == self.cards {
                true => E::CompletenessComplete,
                false => E::CompletenessOnSample,
            },
            ClaimKind::Attribute => {
                // A Korean particle may be attached ("PANO-003-0611은").
                let text = claim
                    .text
                    .trim()
                    .trim_end_matches(|c: char| {
                        !c.is_ascii_alphanumeric() && !c.is_ascii_punctuation()
                    })
                    .to_lowercase();
                let quoted = !text.is_empty() && self.corpus.contains(&text);
                // An id or a date without one value must be quoted from
                // what the model was shown or the user named.
                let valued = claim
                    .value
                    .is_some_and(|v| self.attributes.contains(&v) || self.named.contains(&v));
                match quoted || valued {
                    true => E::AttributeLicensed,
                    false => E::AttributeUnlicensed,
                }
            }
            ClaimKind::Count => {
                let Some(v) = claim.value else {
                    return E::CountUnlicensed;
                };
                if self.exact.contains(&v) {
                    E::CountExact
                } else if self.bounds.contains(&v) {
                    match qualifier {
                        Qualifier::Exact => E::CountBoundAsExact,
                        _ => E::CountBound,
                    }
                } else if self.shown.contains(&v) || self.stated.contains(&v) {
                    // A sample's size, or a number the judge stated: said
                    // plainly, never as the population.
                    match qualifier {
                        Qualifier::Exact => E::CountShownAsTotal,
                        _ => E::CountShown,
                    }
                } else if self.named.contains(&v) {
                    E::CountUserNamed
                } else if qualifier == Qualifier::Plain && v > 0 && v <= self.largest_sample {
                    // "3 of them show …": a part of the sample on screen.
                    E::CountShown
                } else if self.attributes.contains(&v) {
                    E::CountFromAttribute
                } else {
                    E::CountUnlicensed
                }
            }
        }
    }
}

/// How the count at `span` is said, from the words around it: the vocab's
/// exact and at-least cues before it (or, for Korean, right after it).
///
/// `from` is where the previous claim ended: a cue before it belongs to
/// that claim ("exactly 613; twelve of them …" — "exactly" is 613's).
pub fn qualifier(
    sentence: &str,
    claim: &Claim,
    from: usize,
    exact: &[String],
    at_least: &[String],
) -> Qualifier {
    let start = claim.span.start.min(sentence.len());
    let end = claim.span.end.min(sentence.len());
    let before = sentence
        .get(from.min(start)..start)
        .unwrap_or("")
        .to_lowercase();
    let after = sentence.get(end..).unwrap_or("").to_lowercase();
    // The few words right before the number, and the few right after it.
    let near_before: String = before
        .chars()
        .rev()
        .take(24)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let near_after: String = after.chars().take(12).collect();
    let cue = |cues: &[String]| {
        cues.iter().any(|c| {
            let c = c.to_lowercase();
            match c.strip_prefix('~') {
                // `~cue`: a cue that follows the number ("189건 이상").
                Some(c) => near_after.contains(c),
                None => near_before.contains(&c),
            }
        })
    };
    if cue(at_least) {
        Qualifier::AtLeast
    } else if cue(exact) {
        Qualifier::Exact
    } else {
        Qualifier::Plain
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::claims::Claim;

    fn search_claim() -> Claim {
        Claim {
            kind: ClaimKind::Search,
            value: None,
            text: "searched".into(),
            span: 0..8,
        }
    }

    fn claim(kind: ClaimKind, text: &str) -> Claim {
        Claim {
            kind,
            value: None,
            text: text.into(),
            span: 0..text.len(),
        }
    }

    /// Issue 33: how an action ended licenses what may be said of it, and
    /// nothing else does.
    #[test]
    fn only_the_machines_states_license_an_outcome() {
        use ActionOutcome as O;
        use ClaimKind as K;
        use NarrationEvent as E;
        let ev = |anchors: &[Anchor], kind: ClaimKind| {
            Warrants::from_anchors(anchors).classify(&claim(kind, "x"), Qualifier::Plain)
        };
        let action = |outcome| Anchor::Action {
            tool: "prepare".into(),
            outcome,
        };
        let refused = Anchor::Refused {
            tool: "confirm".into(),
            table: "approval".into(),
            row_id: "confirm-without-approval".into(),
        };
        let unknown = Anchor::OutcomeUnknown { tool: "t".into() };
        let failed = Anchor::ToolFailed { tool: "t".into() };
        // Success after a deny, an expiry, a refused, failed or unknown
        // confirm.
        for a in [
            action(O::Cancelled),
            action(O::Expired),
            action(O::NotSent),
            action(O::Failed),
            action(O::CallFailed),
            action(O::Unknown),
            action(O::NothingPrepared),
            action(O::PrepareUnread),
            refused.clone(),
            unknown.clone(),
            failed.clone(),
        ] {
            assert_eq!(
                ev(std::slice::from_ref(&a), K::ActionDone),
                E::ActionDoneUnshown,
                "{a:?}"
            );
        }
        for a in [action(O::Completed), action(O::Ran)] {
            assert_eq!(
                ev(std::slice::from_ref(&a), K::ActionDone),
                E::ActionDoneShown,
                "{a:?}"
            );
        }
        assert_eq!(ev(&[action(O::Cancelled)], K::Cancelled), E::CancelShown);
        assert_eq!(ev(&[action(O::Completed)], K::Cancelled), E::CancelUnshown);
        assert_eq!(ev(&[action(O::Unknown)], K::ActionSent), E::ActionSentShown);
        assert_eq!(
            ev(std::slice::from_ref(&refused), K::ActionSent),
            E::ActionSentUnshown
        );
        // "Failed" for a refused call; for an unknown outcome.
        assert_eq!(
            ev(std::slice::from_ref(&refused), K::Failure),
            E::FailureForRefusal
        );
        assert_eq!(
            ev(std::slice::from_ref(&unknown), K::Failure),
            E::FailureUnshown
        );
        assert_eq!(ev(&[action(O::Failed)], K::Failure), E::FailureShown);
        // "No permission" when the call simply failed.
        assert_eq!(
            ev(std::slice::from_ref(&failed), K::Refusal),
            E::RefusalUnshown
        );
        assert_eq!(ev(&[refused], K::Refusal), E::RefusalShown);
        assert_eq!(ev(&[action(O::Cancelled)], K::Refusal), E::RefusalShown);
    }

    /// A URL is a link only when delivered on the thread (and still valid)
    /// or of an allowed origin; an offer of a link needs a delivery.
    #[test]
    fn only_a_delivered_capability_is_a_link() {
        use NarrationEvent as E;
        let url = "https://lms.example.com/api/lms/exports/J1/download?token=t";
        let mut l = Warrants::from_anchors(&[Anchor::ToolFailed { tool: "t".into() }]);
        let link =
            |l: &Warrants, text: &str| l.classify(&claim(ClaimKind::Link, text), Qualifier::Plain);
        assert_eq!(link(&l, url), E::LinkUndelivered);
        assert_eq!(link(&l, "link below"), E::LinkUndelivered);
        l.links.insert(url.into());
        assert_eq!(link(&l, url), E::LinkDelivered);
        assert_eq!(
            link(
                &l,
                "https://lms.example.com/api/lms/exports/J2/download?token=t"
            ),
            E::LinkUndelivered
        );
        l.link_origins = vec!["https://docs.example.com".into()];
        assert_eq!(link(&l, "https://docs.example.com/guide"), E::LinkDelivered);
        assert_eq!(
            link(&l, "https://docs.example.com.evil.example/guide"),
            E::LinkUndelivered
        );
    }

    /// "Searched" needs a call that answered; a zero the narrowing decided
    /// by set logic, a failure or a question asked back is none.
    #[test]
    fn a_search_claim_needs_an_answered_call() {
        let event = |anchors: &[Anchor]| {
            Warrants::from_anchors(anchors).classify(&search_claim(), Qualifier::Plain)
        };
        let zero = Anchor::Absent {
            cause: AbsenceCause::ZeroFromStart,
        };
        assert_eq!(event(&[zero]), NarrationEvent::SearchAnswered);
        for none in [
            Anchor::Absent {
                cause: AbsenceCause::ZeroAfterNarrowing,
            },
            Anchor::ToolFailed { tool: "t".into() },
            Anchor::NothingToNarrow,
        ] {
            assert_eq!(
                event(std::slice::from_ref(&none)),
                NarrationEvent::SearchWithoutResult,
                "{none:?}"
            );
        }
    }
}
