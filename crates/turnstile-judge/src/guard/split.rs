//! An incremental sentence splitter for streamed deltas.
//!
//! A sentence ends at `.`, `!`, `?`, `。`, `…` (a run of them, with any
//! closing quotes or brackets) followed by whitespace, or at a newline; the
//! whitespace after it belongs to it. A sentence is complete only once the
//! first non-whitespace character after it has been seen (or at
//! [`Splitter::finish`]), so where the deltas are cut never changes the
//! sentences: concatenated, they are the input exactly.
//!
//! Not a sentence end: a period inside a number, id, date or URL ("3.5",
//! "example.com/a"), one after an abbreviation ("e.g. "), or after a list
//! number at the start of a sentence ("1. ").

/// Abbreviations (lowercase, without the final period) after which a period
/// does not end a sentence.
const ABBREVIATIONS: &[&str] = &[
    "e.g", "i.e", "eg", "ie", "vs", "cf", "approx", "mr", "mrs", "ms", "dr", "nos", "fig", "pp",
    "ca", "incl", "viz", "al",
];

const TERMINATORS: &[char] = &['.', '!', '?', '。', '…', '！', '？'];
const CLOSERS: &[char] = &['"', '\'', '”', '’', ')', ']', '}', '」', '』', '》', '〉'];

/// Splits a stream of deltas into sentences.
#[derive(Debug, Default, Clone)]
pub struct Splitter {
    /// Text received but not yet returned.
    pending: String,
}

impl Splitter {
    pub fn new() -> Splitter {
        Splitter::default()
    }

    /// Takes one delta; returns the sentences it completed, in order.
    pub fn push(&mut self, delta: &str) -> Vec<String> {
        self.pending.push_str(delta);
        let mut done = Vec::new();
        while let Some(end) = boundary(&self.pending, false) {
            let rest = self.pending.split_off(end);
            done.push(std::mem::replace(&mut self.pending, rest));
        }
        done
    }

    /// The rest of the text, if any: the last sentence, ended or not.
    pub fn finish(self) -> Option<String> {
        match self.pending.is_empty() {
            true => None,
            false => Some(self.pending),
        }
    }

    /// The text held back, waiting for its sentence to end.
    pub fn pending(&self) -> &str {
        &self.pending
    }
}

/// Splits a whole text at once (what a stream of any cuts gives).
pub fn sentences(text: &str) -> Vec<String> {
    let mut s = Splitter::new();
    let mut out = s.push(text);
    out.extend(s.finish());
    out
}

/// The end (byte offset) of the first complete sentence of `text`, or
/// `None` when none is complete yet. `at_end`: no more text will come.
fn boundary(text: &str, at_end: bool) -> Option<usize> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let (at, c) = chars[i];
        let newline = c == '\n';
        if !newline && !TERMINATORS.contains(&c) {
            i += 1;
            continue;
        }
        if c == '.' && !ends_sentence(&text[..at]) {
            i += 1;
            continue;
        }
        // The run of terminators and closers.
        let mut j = i + 1;
        if !newline {
            while j < chars.len()
                && (TERMINATORS.contains(&chars[j].1) || CLOSERS.contains(&chars[j].1))
            {
                j += 1;
            }
            if j == chars.len() {
                // Unsure: the next delta says whether this ends a sentence.
                return match at_end {
                    true => Some(text.len()),
                    false => None,
                };
            }
            if !chars[j].1.is_whitespace() {
                i = j;
                continue;
            }
        }
        // The whitespace that follows belongs to this sentence.
        while j < chars.len() && chars[j].1.is_whitespace() {
            j += 1;
        }
        return match (j == chars.len(), at_end) {
            (false, _) => Some(chars[j].0),
            (true, true) => Some(text.len()),
            (true, false) => None,
        };
    }
    None
}

/// Whether a period after `before` (the sentence so far) can end it: not
/// after an abbreviation or a lone list number.
fn ends_sentence(before: &str) -> bool {
    let trimmed = before.trim_start();
    if !trimmed.is_empty() && trimmed.chars().all(|c| c.is_ascii_digit()) {
        return false;
    }
    let word = before
        .rsplit(|c: char| c.is_whitespace() || c == '(' || c == '"')
        .next()
        .unwrap_or("");
    let word = word.to_ascii_lowercase();
    !ABBREVIATIONS.contains(&word.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn split(text: &str) -> Vec<String> {
        sentences(text)
    }

    #[test]
    fn splits_at_terminators_with_their_whitespace() {
        assert_eq!(
            split("One. Two! Three? Four"),
            ["One. ", "Two! ", "Three? ", "Four"]
        );
        assert_eq!(split("A.  B.\n\nC"), ["A.  ", "B.\n\n", "C"]);
        assert_eq!(split("line one\nline two\n"), ["line one\n", "line two\n"]);
        assert_eq!(
            split("정확히 10건입니다. 위 카드에 있습니다."),
            ["정확히 10건입니다. ", "위 카드에 있습니다."]
        );
        assert_eq!(split("Wait… what?! Yes."), ["Wait… ", "what?! ", "Yes."]);
        assert_eq!(
            split("He said \"no.\" Then left."),
            ["He said \"no.\" ", "Then left."]
        );
        assert_eq!(split("完了。 次"), ["完了。 ", "次"]);
    }

    #[test]
    fn does_not_split_inside_numbers_ids_dates_urls_abbreviations() {
        for text in [
            "There are 3.5 of them.",
            "See TA-00412 for details.",
            "Captured on 2026-04-01 at 10:30.",
            "Open https://example.com/a.b?c=1 now.",
            "Some items, e.g. photos, are shown.",
            "That is, i.e. the first one, is shown.",
            "1. Open the card.",
            "PANO-003-0611 was captured on 2026-08-28.",
        ] {
            assert_eq!(split(text), [text], "{text}");
        }
    }

    #[test]
    fn waits_for_the_character_after_the_terminator() {
        let mut s = Splitter::new();
        assert!(s.push("There are 3").is_empty());
        assert!(s.push(".").is_empty());
        assert!(s.push("5 photos.").is_empty());
        assert!(s.push(" ").is_empty());
        assert_eq!(s.push("Next"), ["There are 3.5 photos. "]);
        assert_eq!(s.pending(), "Next");
        assert_eq!(s.finish().as_deref(), Some("Next"));
        assert_eq!(Splitter::new().finish(), None);
    }

    fn text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("There are 3.5 photos. ".to_string()),
            Just("e.g. ".to_string()),
            Just("TA-00412".to_string()),
            Just("2026-04-01".to_string()),
            Just("https://x.io/a.b ".to_string()),
            Just("정확히 10건입니다. ".to_string()),
            Just("…".to_string()),
            Just("?! ".to_string()),
            Just("\n".to_string()),
            Just("\"ok.\" ".to_string()),
            Just("1. ".to_string()),
            "[a-z .!?\n]{0,8}",
            any::<String>(),
        ];
        prop::collection::vec(piece, 0..8).prop_map(|v| v.concat())
    }

    proptest! {
        #[test]
        fn output_is_the_input_and_does_not_depend_on_the_cuts(
            text in text(),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        ) {
            let whole = split(&text);
            prop_assert_eq!(whole.concat(), text.clone());
            prop_assert!(whole.iter().all(|s| !s.is_empty()));
            let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
            let mut at: Vec<usize> = cuts.iter().map(|c| bounds[c.index(bounds.len())]).collect();
            at.push(0);
            at.push(text.len());
            at.sort_unstable();
            at.dedup();
            let mut s = Splitter::new();
            let mut out = Vec::new();
            for w in at.windows(2) {
                out.extend(s.push(&text[w[0]..w[1]]));
            }
            out.extend(s.finish());
            prop_assert_eq!(out, whole);
        }
    }
}
