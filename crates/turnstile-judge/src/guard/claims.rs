//! The claim extractor: what a sentence claims about the data, read with a
//! language's [`Vocab`]. Pure: it reports claims and decides no warrant.
//!
//! - A number is a digit run ("3,000"), an English number word or compound
//!   ("twenty-five", "a hundred and eighty-nine") or a Korean numeral
//!   attached to a counter ("열 장", "613건"). It is an
//!   [`ClaimKind::Attribute`] when it is part of an id, a date or time, a
//!   floor, a year, an ordinal or a unit, and a [`ClaimKind::Count`]
//!   otherwise.
//! - [`ClaimKind::Absence`]: "no photos", "none", "nothing was found",
//!   "0건", "없습니다" (not "할 수 없습니다").
//! - [`ClaimKind::Completeness`]: "all 651", "the complete list", "전부".
//! - [`ClaimKind::Search`]: "this searched everything", "I found", "검색했습니다":
//!   a search ran and answered. Checked after the sentence's other claims, so
//!   a number or an absence is refused by its own row first.
//! - How an action ended (issue 33): [`ClaimKind::ActionDone`] ("reserved",
//!   "예약되었습니다"), [`ClaimKind::ActionSent`] ("sent"),
//!   [`ClaimKind::Cancelled`] ("cancelled", "취소했습니다"), each unless a
//!   negator comes within the three words before it;
//!   [`ClaimKind::Refusal`] ("you don't have permission", "refused", "권한");
//!   [`ClaimKind::Failure`] ("failed", "실패").
//! - [`ClaimKind::Link`]: an http(s) URL (judged whole: the numbers inside
//!   it are no counts or attributes) or an offer of one ("the link below").

use std::ops::Range;

use super::vocab::{is_hangul, Lang, Vocab};

/// What a claim is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ClaimKind {
    Count,
    Attribute,
    Absence,
    Completeness,
    Search,
    ActionDone,
    ActionSent,
    Cancelled,
    Refusal,
    Failure,
    Link,
}

impl ClaimKind {
    /// The name a replacement reports (`replaced.claim`).
    pub fn name(self) -> &'static str {
        match self {
            ClaimKind::Count => "count",
            ClaimKind::Attribute => "attribute",
            ClaimKind::Absence => "absence",
            ClaimKind::Completeness => "completeness",
            ClaimKind::Search => "search",
            ClaimKind::ActionDone => "action_done",
            ClaimKind::ActionSent => "action_sent",
            ClaimKind::Cancelled => "cancelled",
            ClaimKind::Refusal => "refusal",
            ClaimKind::Failure => "failure",
            ClaimKind::Link => "link",
        }
    }

    /// A claim about how an action ended, a refusal, a failure or a link
    /// (issue 33): licensed only by the machines' states.
    pub fn is_outcome(self) -> bool {
        matches!(
            self,
            ClaimKind::ActionDone
                | ClaimKind::ActionSent
                | ClaimKind::Cancelled
                | ClaimKind::Refusal
                | ClaimKind::Failure
                | ClaimKind::Link
        )
    }
}

/// One claim of a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub kind: ClaimKind,
    /// The number, for counts and simple attributes.
    pub value: Option<u64>,
    /// The matched words (the sentence's text at `span`).
    pub text: String,
    /// Byte range in the sentence, on char boundaries.
    pub span: Range<usize>,
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    /// ASCII letters (and symbols); `lower` is lowercased.
    Word,
    /// Holds Hangul.
    Hangul,
    /// Starts with a digit run: its value and the Korean text right after
    /// it (a counter, a particle), with the byte where the number ends.
    Num {
        value: Option<u64>,
        end: usize,
        suffix: String,
    },
    /// An id, a date, a time, an ordinal, a unit: "TA-00412", "2nd".
    Attr { value: Option<u64> },
}

#[derive(Debug, Clone)]
struct Tok {
    start: usize,
    end: usize,
    lower: String,
    kind: Kind,
    /// Punctuation (not only whitespace) separates it from the token before.
    gap: bool,
}

/// Characters that separate tokens as whitespace does.
fn separator(c: char) -> bool {
    c.is_whitespace() || "()[]{}\"“”「」『』<>《》〈〉/|".contains(c)
}

/// Punctuation stripped from the ends of a token.
fn edge_punct(c: char) -> bool {
    ".,;:!?…。、'‘’+~*—–-·！？，".contains(c)
}

fn tokens(s: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut gap = false;
    let mut chunk_start: Option<usize> = None;
    let bytes_end = s.len();
    let flush = |a: usize, b: usize, gap: &mut bool, out: &mut Vec<Tok>| {
        let chunk = &s[a..b];
        let lead = chunk.len() - chunk.trim_start_matches(edge_punct).len();
        let core = chunk
            .trim_start_matches(edge_punct)
            .trim_end_matches(edge_punct);
        if core.is_empty() {
            *gap = true;
            return;
        }
        let start = a + lead;
        let end = start + core.len();
        out.push(Tok {
            start,
            end,
            lower: core.to_lowercase().replace('’', "'"),
            kind: classify_core(core, start),
            gap: *gap || lead > 0,
        });
        *gap = end < b;
    };
    for (i, c) in s.char_indices() {
        if separator(c) {
            if let Some(a) = chunk_start.take() {
                flush(a, i, &mut gap, &mut out);
            }
            if !c.is_whitespace() {
                gap = true;
            }
        } else if chunk_start.is_none() {
            chunk_start = Some(i);
        }
    }
    if let Some(a) = chunk_start {
        flush(a, bytes_end, &mut gap, &mut out);
    }
    out
}

/// The leading number of `core`: its value (None on overflow) and length.
fn leading_number(core: &str) -> (Option<u64>, usize) {
    let b = core.as_bytes();
    let run = |from: usize| b[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let mut len = run(0);
    if len <= 3 {
        // Thousands separators: "3,000", "1,234,567".
        while b.get(len) == Some(&b',') && run(len + 1) == 3 {
            len += 4;
        }
    }
    let digits: String = core[..len].chars().filter(char::is_ascii_digit).collect();
    (digits.parse().ok(), len)
}

const KO_DIGIT_MULTIPLIERS: &[(char, u64)] = &[
    ('십', 10),
    ('백', 100),
    ('천', 1000),
    ('만', 10_000),
    ('억', 100_000_000),
];

fn classify_core(core: &str, start: usize) -> Kind {
    let has_digit = core.chars().any(|c| c.is_ascii_digit());
    let has_hangul = core.chars().any(is_hangul);
    if !has_digit {
        return match has_hangul {
            true => Kind::Hangul,
            false => Kind::Word,
        };
    }
    if core.starts_with(|c: char| c.is_ascii_digit()) {
        let (mut value, mut len) = leading_number(core);
        let mut rest = &core[len..];
        // "10만", "3천"
        while let Some(c) = rest.chars().next() {
            let Some(&(_, m)) = KO_DIGIT_MULTIPLIERS.iter().find(|(k, _)| *k == c) else {
                break;
            };
            value = value.and_then(|v| v.checked_mul(m));
            len += c.len_utf8();
            rest = &rest[c.len_utf8()..];
        }
        if rest.is_empty() || rest.chars().all(|c| is_hangul(c) || c == '(' || c == ')') {
            return Kind::Num {
                value,
                end: start + len,
                suffix: rest.to_string(),
            };
        }
        // A unit or an ordinal after one number ("25%", "2nd", "10km"):
        // an attribute with that number; an id, date or time otherwise.
        let more_digits = rest.chars().any(|c| c.is_ascii_digit());
        return Kind::Attr {
            value: if more_digits { None } else { value },
        };
    }
    // Letters around digits: an id ("TA-00412", "B1", "제3").
    let runs: Vec<&str> = core
        .split(|c: char| !c.is_ascii_digit())
        .filter(|r| !r.is_empty())
        .collect();
    Kind::Attr {
        value: match runs.as_slice() {
            [one] => one.parse().ok(),
            _ => None,
        },
    }
}

/// Whether `word` is in `list`: equal for English, a prefix for Korean.
fn is_in(lang: Lang, word: &str, list: &[String]) -> bool {
    match lang {
        Lang::En => list.iter().any(|w| w == word),
        Lang::Ko => list
            .iter()
            .any(|w| !w.is_empty() && word.starts_with(w.as_str())),
    }
}

struct Reader<'a> {
    s: &'a str,
    v: &'a Vocab,
    toks: Vec<Tok>,
    out: Vec<Claim>,
}

/// The claims of one sentence.
pub fn claims(sentence: &str, vocab: &Vocab) -> Vec<Claim> {
    let mut r = Reader {
        s: sentence,
        v: vocab,
        toks: tokens(sentence),
        out: Vec::new(),
    };
    r.numbers();
    r.absence();
    r.completeness();
    r.search();
    r.outcomes();
    // A URL is one claim, a link: its digits are neither counts nor ids.
    let urls = crate::judge::capability::url_spans(sentence);
    r.out.retain(|c| {
        !urls
            .iter()
            .any(|u| u.start <= c.span.start && c.span.end <= u.end)
    });
    for u in urls {
        r.push(ClaimKind::Link, None, u);
    }
    let mut out = r.out;
    out.sort_by_key(|c| {
        (
            c.kind == ClaimKind::Search,
            c.span.start,
            c.kind,
            c.span.end,
        )
    });
    // One claim of a kind per place: overlapping matches of the same kind
    // are the same claim.
    let mut kept: Vec<Claim> = Vec::new();
    for c in out {
        let dup = kept
            .iter()
            .any(|k| k.kind == c.kind && k.span.start < c.span.end && c.span.start < k.span.end);
        if !dup {
            kept.push(c);
        }
    }
    kept
}

impl Reader<'_> {
    fn push(&mut self, kind: ClaimKind, value: Option<u64>, span: Range<usize>) {
        self.out.push(Claim {
            kind,
            value,
            text: self.s[span.clone()].to_string(),
            span,
        });
    }

    fn word(&self, i: usize) -> Option<&str> {
        self.toks.get(i).map(|t| t.lower.as_str())
    }

    /// The token after `i`, when no punctuation separates them.
    fn next_joined(&self, i: usize) -> Option<&Tok> {
        self.toks.get(i + 1).filter(|t| !t.gap)
    }

    fn is_number_word(&self, i: usize) -> bool {
        let Some(t) = self.toks.get(i) else {
            return false;
        };
        t.kind == Kind::Word
            && !t.lower.is_empty()
            && t.lower
                .split('-')
                .all(|p| self.v.number_words.contains_key(p))
    }

    fn numbers(&mut self) {
        let mut i = 0;
        while i < self.toks.len() {
            let t = self.toks[i].clone();
            match &t.kind {
                Kind::Num { value, end, suffix } => {
                    self.digit_number(i, *value, t.start..*end, suffix);
                    i += 1;
                }
                Kind::Attr { value } => {
                    self.push(ClaimKind::Attribute, *value, t.start..t.end);
                    i += 1;
                }
                Kind::Word => i = self.english_number(i),
                Kind::Hangul => i = self.korean_number(i),
            }
        }
    }

    /// A Korean counter at the start of `text`: `Some(true)` for an
    /// attribute counter (층, 년), `Some(false)` for a count counter (건).
    fn counter(&self, text: &str) -> Option<(bool, usize)> {
        let attr = self
            .v
            .attribute_cues
            .counters
            .iter()
            .filter(|c| text.starts_with(c.as_str()))
            .map(|c| c.len())
            .max();
        let count = self
            .v
            .counters
            .iter()
            .filter(|c| text.starts_with(c.as_str()))
            .map(|c| c.len())
            .max();
        match (attr, count) {
            (Some(a), Some(c)) if c > a => Some((false, c)),
            (Some(a), _) => Some((true, a)),
            (None, Some(c)) => Some((false, c)),
            (None, None) => None,
        }
    }

    fn digit_number(&mut self, i: usize, value: Option<u64>, span: Range<usize>, suffix: &str) {
        let suffix = suffix.trim_start_matches(['(', ')']);
        let counted = match self.counter(suffix) {
            Some(c) => Some(c),
            None if suffix.is_empty() => self
                .next_joined(i)
                .filter(|t| t.kind == Kind::Hangul)
                .and_then(|t| self.counter(&t.lower))
                .map(|(attr, _)| (attr, 0)),
            None => None,
        };
        match counted {
            Some((true, len)) => {
                let end = span.end + len;
                self.push(ClaimKind::Attribute, value, span.start..end);
            }
            Some((false, _)) => self.count(value, span, i, true),
            None => match self.attribute_context(i, i + 1, value) {
                true => self.push(ClaimKind::Attribute, value, span),
                false => self.count(value, span, i, false),
            },
        }
    }

    /// A count; a zero count is an absence claim too ("0건", "zero photos").
    fn count(&mut self, value: Option<u64>, span: Range<usize>, last: usize, countered: bool) {
        self.push(ClaimKind::Count, value, span.clone());
        if value == Some(0) {
            let excluded = match self.next_joined(last) {
                Some(t) if !countered => {
                    is_in(self.v.lang, &t.lower, &self.v.absence.zero_not_before)
                }
                _ => false,
            };
            if !excluded {
                self.push(ClaimKind::Absence, value, span);
            }
        }
    }

    /// Whether the number in tokens `a..b` is an attribute by its context:
    /// "floor 3", "3 am", "April 2", "in 2026", "지하 1".
    fn attribute_context(&self, a: usize, b: usize, value: Option<u64>) -> bool {
        let cues = &self.v.attribute_cues;
        let lang = self.v.lang;
        let prev = a.checked_sub(1).and_then(|p| self.word(p));
        let prev2 = a.checked_sub(2).and_then(|p| self.word(p));
        let next = self.next_joined(b - 1).map(|t| t.lower.as_str());
        if next.is_some_and(|w| is_in(Lang::En, w, &self.v.count_nouns)) {
            return false;
        }
        if prev.is_some_and(|w| is_in(lang, w, &cues.before)) {
            return true;
        }
        if next.is_some_and(|w| is_in(Lang::En, w, &cues.after)) {
            return true;
        }
        let month = |w: Option<&str>| w.is_some_and(|w| is_in(Lang::En, w, &cues.months));
        let Some(v) = value else { return false };
        let year = (cues.year_min..=cues.year_max).contains(&v);
        if (1..=31).contains(&v) && (month(prev) || month(next)) {
            return true;
        }
        year && (month(prev)
            || month(prev2)
            || month(next)
            || prev.is_some_and(|w| is_in(Lang::En, w, &cues.year_prepositions)))
    }

    /// An English number word or compound at `i`; returns the next index.
    fn english_number(&mut self, i: usize) -> usize {
        let v = self.v;
        let mut parts: Vec<(String, u64)> = Vec::new();
        let mut j = i;
        loop {
            if j > i && self.toks.get(j).is_none_or(|t| t.gap) {
                break;
            }
            let Some(w) = self.word(j) else { break };
            if self.is_number_word(j) {
                for p in w.split('-') {
                    parts.push((p.to_string(), v.number_words[p]));
                }
                j += 1;
            } else if w == "and"
                && !parts.is_empty()
                && self.is_number_word(j + 1)
                && !self.toks[j + 1].gap
            {
                j += 1;
            } else if (w == "a" || w == "an")
                && parts.is_empty()
                && self.next_joined(j).is_some_and(|t| {
                    is_in(Lang::En, &t.lower, &v.multipliers)
                        || is_in(Lang::En, &t.lower, &v.big_multipliers)
                })
            {
                parts.push((w.to_string(), 1));
                j += 1;
            } else {
                break;
            }
        }
        if parts.is_empty() {
            return i + 1;
        }
        // Do not end on a dangling "and" (handled above) or start on "a"
        // alone.
        let value = evaluate(&parts, v);
        let span = self.toks[i].start..self.toks[j - 1].end;
        if parts.len() == 1 && is_in(Lang::En, &parts[0].0, &v.weak_numbers) {
            let prev = i.checked_sub(1).and_then(|p| self.word(p));
            let cued = prev.is_some_and(|w| is_in(Lang::En, w, &v.quantity_cues));
            let noun = self
                .next_joined(j - 1)
                .is_some_and(|t| is_in(Lang::En, &t.lower, &v.count_nouns));
            if !cued && !noun {
                return j;
            }
        }
        match self.attribute_context(i, j, value) {
            true => self.push(ClaimKind::Attribute, value, span),
            false => self.count(value, span, j - 1, false),
        }
        j
    }

    /// The numerals at the start of a Korean word (longest match first) and
    /// where they end.
    fn segment(&self, text: &str) -> (Vec<(String, u64)>, usize) {
        let mut parts: Vec<(String, u64)> = Vec::new();
        let mut at = 0;
        while at < text.len() {
            let best = self
                .v
                .number_words
                .iter()
                .filter(|(w, _)| !w.is_empty() && text[at..].starts_with(w.as_str()))
                .max_by_key(|(w, _)| w.len());
            let Some((w, n)) = best else { break };
            parts.push((w.clone(), *n));
            at += w.len();
        }
        (parts, at)
    }

    /// A Korean numeral at the start of token `i`, if a counter follows.
    /// Groups spaced after 만 or 억 read as one number ("삼만 오천 장").
    fn korean_number(&mut self, i: usize) -> usize {
        let v = self.v;
        let (mut parts, mut at) = self.segment(&self.toks[i].lower);
        if parts.is_empty() {
            return i + 1;
        }
        let mut last = i;
        while at == self.toks[last].lower.len()
            && parts
                .last()
                .is_some_and(|(w, _)| v.big_multipliers.contains(w))
        {
            let Some(n) = self.next_joined(last).filter(|n| n.kind == Kind::Hangul) else {
                break;
            };
            let (more, end) = self.segment(&n.lower);
            if more.is_empty() || (end < n.lower.len() && self.counter(&n.lower[end..]).is_none()) {
                break;
            }
            parts.extend(more);
            at = end;
            last += 1;
        }
        let t = self.toks[last].clone();
        let text = t.lower.as_str();
        let suffix = &text[at..];
        let attached = !suffix.is_empty();
        let counted = match attached {
            true => self.counter(suffix),
            false => self
                .next_joined(last)
                .filter(|n| n.kind == Kind::Hangul)
                .and_then(|n| self.counter(&n.lower))
                .map(|(attr, _)| (attr, 0)),
        };
        let Some((attr, len)) = counted else {
            return i + 1;
        };
        if parts.len() == 1 {
            let word = &parts[0].0;
            if attached && v.spaced_numbers.contains(word) {
                return i + 1;
            }
            if v.ambiguous_numbers.contains(word) {
                let prev = i.checked_sub(1).and_then(|p| self.word(p));
                if !prev.is_some_and(|w| is_in(Lang::Ko, w, &v.quantity_cues)) {
                    return i + 1;
                }
            }
        }
        let value = evaluate(&parts, v);
        let start = self.toks[i].start;
        let end = t.start + at;
        let prev = i.checked_sub(1).and_then(|p| self.word(p));
        match attr || prev.is_some_and(|w| is_in(Lang::Ko, w, &v.attribute_cues.before)) {
            true => self.push(ClaimKind::Attribute, value, start..end + len),
            false => self.count(value, start..end, last, true),
        }
        last + 1
    }

    /// Whether the words of `phrase` match from token `i` (no punctuation
    /// inside); returns the index after the match.
    fn phrase_at(&self, i: usize, phrase: &str) -> Option<usize> {
        let mut j = i;
        for (k, w) in phrase.split_whitespace().enumerate() {
            let t = self.toks.get(j)?;
            if k > 0 && t.gap {
                return None;
            }
            let hit = match self.v.lang {
                Lang::En => t.lower == w,
                Lang::Ko => t.lower.starts_with(w),
            };
            if !hit {
                return None;
            }
            j += 1;
        }
        (j > i).then_some(j)
    }

    fn phrases(&mut self, phrases: &[String], kind: ClaimKind) {
        for i in 0..self.toks.len() {
            for p in phrases {
                if let Some(j) = self.phrase_at(i, p) {
                    let span = self.toks[i].start..self.toks[j - 1].end;
                    self.push(kind, None, span);
                }
            }
        }
    }

    /// How an action ended, a refusal, a failure, an offered link.
    fn outcomes(&mut self) {
        let v = self.v;
        let a = &v.actions;
        for (words, kind) in [
            (&a.done, ClaimKind::ActionDone),
            (&a.sent, ClaimKind::ActionSent),
            (&a.cancelled, ClaimKind::Cancelled),
        ] {
            self.words_unless_negated(words, &a.negators, kind);
        }
        self.phrases(&v.refusal.phrases, ClaimKind::Refusal);
        self.phrases(&v.failure.phrases, ClaimKind::Failure);
        self.phrases(&v.links.phrases, ClaimKind::Link);
    }

    /// Each of `words` (a word, or a phrase of several) that no negator
    /// precedes within three words, not across punctuation.
    fn words_unless_negated(&mut self, words: &[String], negators: &[String], kind: ClaimKind) {
        for i in 0..self.toks.len() {
            let Some(end) = words
                .iter()
                .find_map(|w| match w.split_whitespace().count() {
                    1 => is_in(self.v.lang, &self.toks[i].lower, std::slice::from_ref(w))
                        .then_some(i + 1),
                    _ => self.phrase_at(i, w),
                })
            else {
                continue;
            };
            if !self.negated_before(i, negators) {
                self.push(kind, None, self.toks[i].start..self.toks[end - 1].end);
            }
        }
    }

    /// Whether one of `negators` comes within the three words before token
    /// `i`, not across punctuation ("No problem, I found 12" claims a
    /// search; "it was not sent" claims nothing).
    fn negated_before(&self, i: usize, negators: &[String]) -> bool {
        let mut at = i;
        for _ in 0..3 {
            if self.toks[at].gap || at == 0 {
                return false;
            }
            at -= 1;
            if negators.contains(&self.toks[at].lower) {
                return true;
            }
        }
        false
    }

    /// "searched", "found", unless negated ("nothing was searched").
    fn search(&mut self) {
        let v = self.v;
        self.words_unless_negated(&v.search.verbs, &v.search.negators, ClaimKind::Search);
    }

    fn absence(&mut self) {
        let v = self.v;
        let a = &v.absence;
        self.phrases(&a.phrases, ClaimKind::Absence);
        for i in 0..self.toks.len() {
            let w = self.toks[i].lower.clone();
            let prev = i
                .checked_sub(1)
                .and_then(|p| self.word(p))
                .map(str::to_string);
            if a.negators.contains(&w) {
                // "no safety issues": a count noun within three words.
                let mut noun_at = None;
                for k in 1..=3 {
                    let Some(t) = self.toks.get(i + k).filter(|t| !t.gap) else {
                        break;
                    };
                    if a.exempt.contains(&t.lower) || t.kind != Kind::Word {
                        break;
                    }
                    if v.count_nouns.contains(&t.lower) {
                        noun_at = Some(i + k);
                        break;
                    }
                }
                // "there are no X", "found no X"
                if noun_at.is_none() && prev.as_ref().is_some_and(|p| a.existential.contains(p)) {
                    noun_at = self
                        .next_joined(i)
                        .filter(|t| t.kind == Kind::Word && !a.exempt.contains(&t.lower))
                        .map(|_| i + 1);
                }
                if let Some(n) = noun_at {
                    self.push(
                        ClaimKind::Absence,
                        None,
                        self.toks[i].start..self.toks[n].end,
                    );
                }
            } else if a.nothing.contains(&w) {
                let verb = (1..=3)
                    .map_while(|k| self.toks.get(i + k).filter(|t| !t.gap))
                    .any(|t| a.nothing_verbs.contains(&t.lower));
                let after = prev.as_ref().is_some_and(|p| a.nothing_after.contains(p));
                if verb || after {
                    self.push(
                        ClaimKind::Absence,
                        None,
                        self.toks[i].start..self.toks[i].end,
                    );
                }
            } else if v.lang == Lang::Ko && is_in(Lang::Ko, &w, &a.negative_forms) {
                let before = i
                    .checked_sub(1)
                    .map(|p| &self.toks[p])
                    .filter(|_| !self.toks[i].gap);
                let exempt = before.is_some_and(|b| {
                    a.exempt.iter().any(|e| {
                        b.lower
                            .strip_prefix(e.as_str())
                            .is_some_and(|rest| a.particles.iter().any(|p| p == rest))
                    })
                });
                if !exempt {
                    let start = before.map_or(self.toks[i].start, |b| b.start);
                    self.push(ClaimKind::Absence, None, start..self.toks[i].end);
                }
            }
        }
    }

    fn completeness(&mut self) {
        let v = self.v;
        let c = &v.completeness;
        let mut blocked = vec![false; self.toks.len()];
        for i in 0..self.toks.len() {
            for p in &c.not_phrases {
                if let Some(j) = self.phrase_at(i, p) {
                    blocked[i..j].iter_mut().for_each(|b| *b = true);
                }
            }
        }
        self.phrases(&c.phrases, ClaimKind::Completeness);
        for (i, blocked) in blocked.into_iter().enumerate() {
            if blocked {
                continue;
            }
            let w = self.toks[i].lower.clone();
            let prev = i.checked_sub(1).and_then(|p| self.word(p));
            let Some(next) = self.next_joined(i) else {
                continue;
            };
            let follows_number =
                matches!(next.kind, Kind::Num { .. }) || self.is_number_word(i + 1);
            let noun = v.count_nouns.contains(&next.lower);
            let hit = if c.all_words.contains(&w) {
                !prev.is_some_and(|p| c.all_not_after.iter().any(|x| x == p))
                    && (follows_number || noun || c.all_followers.contains(&next.lower))
            } else if c.every_words.contains(&w) {
                noun || c.every_followers.contains(&next.lower)
            } else {
                false
            };
            if hit {
                let span = self.toks[i].start..next.end;
                self.push(ClaimKind::Completeness, None, span);
            }
        }
    }
}

/// The value of number words: units add up, `multipliers` scale the group
/// ("twenty-five hundred", 삼백), `big_multipliers` close it ("two
/// thousand", 삼만).
fn evaluate(parts: &[(String, u64)], v: &Vocab) -> Option<u64> {
    let (mut total, mut group, mut unit) = (0u64, 0u64, 0u64);
    for (w, n) in parts {
        if v.multipliers.contains(w) {
            group = group.checked_add(unit.max(1).checked_mul(*n)?)?;
            unit = 0;
        } else if v.big_multipliers.contains(w) {
            total = total.checked_add(group.checked_add(unit)?.max(1).checked_mul(*n)?)?;
            group = 0;
            unit = 0;
        } else {
            unit = unit.checked_add(*n)?;
        }
    }
    total.checked_add(group)?.checked_add(unit)
}

#[cfg(test)]
mod tests;
