//! Each language's vocabulary for the claim extractor, as data.
//!
//! The words live in `vocab/<lang>.ron` at the repository root and are
//! embedded at build time, so a reviewer adds a word by editing the RON file
//! alone. Every list is matched case-insensitively (English words are
//! compared lowercased); for Korean, a list entry matches a word that starts
//! with it, so particles and endings ("없습니다", "전부를") need no entries.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

pub use crate::judge::lang::{detect, is_hangul, Lang};

/// One language's words. See `vocab/en.ron` for what each list means.
#[derive(Debug, Clone, Deserialize)]
pub struct Vocab {
    pub lang: Lang,
    /// Number words and their values, including the multipliers.
    pub number_words: BTreeMap<String, u64>,
    /// Multipliers of the current group ("hundred", "dozen"; 십 백 천).
    #[serde(default)]
    pub multipliers: Vec<String>,
    /// Multipliers that close a group ("thousand", "million"; 만 억).
    #[serde(default)]
    pub big_multipliers: Vec<String>,
    /// Number words that are numbers only next to a count noun or a
    /// quantity cue ("the top one" is not a count).
    #[serde(default)]
    pub weak_numbers: Vec<String>,
    /// Korean: numerals that are also everyday words (이 "this", 일 "work"):
    /// numbers only after a quantity cue.
    #[serde(default)]
    pub ambiguous_numbers: Vec<String>,
    /// Korean: single-syllable Sino numerals, numbers only when a space
    /// separates them from their counter ("천 장", not "천장" = ceiling).
    #[serde(default)]
    pub spaced_numbers: Vec<String>,
    /// Words that make a nearby weak or ambiguous number word a number.
    #[serde(default)]
    pub quantity_cues: Vec<String>,
    /// Korean counters: a numeral attached to one is a count (건 장 개 …).
    #[serde(default)]
    pub counters: Vec<String>,
    /// Nouns that are counted ("photos", "issues"); they make "no …",
    /// "every …", "all …" and a weak number word claims.
    #[serde(default)]
    pub count_nouns: Vec<String>,
    pub absence: Absence,
    pub completeness: Completeness,
    pub attribute_cues: AttributeCues,
    #[serde(default)]
    pub search: Search,
    #[serde(default)]
    pub actions: Actions,
    #[serde(default)]
    pub refusal: Phrases,
    #[serde(default)]
    pub failure: Phrases,
    /// Offers of a link ("the link below"); any http(s) URL is a link
    /// claim too, found by the URL scanner.
    #[serde(default)]
    pub links: Phrases,
    /// Cues before a count that say it is exact (`~cue`: after it). Read by
    /// the guard's warrant check, not by the extractor.
    #[serde(default)]
    pub exact_cues: Vec<String>,
    /// Cues before a count that say it is a lower bound (`~cue`: after it).
    #[serde(default)]
    pub at_least_cues: Vec<String>,
}

/// Words and patterns that claim nothing exists.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Absence {
    /// Word sequences that claim absence wherever they occur.
    pub phrases: Vec<String>,
    /// "no": an absence claim when a count noun follows within three words,
    /// or when an existential verb precedes it.
    pub negators: Vec<String>,
    /// Verbs before a negator that make it an existence claim ("are no").
    pub existential: Vec<String>,
    /// Words after a negator (or, in Korean, before a negative form) that
    /// make it no absence claim: "no number", "no value", "수 없습니다".
    pub exempt: Vec<String>,
    /// "nothing": an absence claim only with one of `nothing_verbs` within
    /// three words after it, or one of `nothing_after` right before it.
    pub nothing: Vec<String>,
    pub nothing_verbs: Vec<String>,
    pub nothing_after: Vec<String>,
    /// Korean: the forms of "there is none" (없습니다, 없어요, 없음 …). A
    /// word starting with one is an absence claim unless the word before
    /// it is exempt (with or without one of `particles`).
    pub negative_forms: Vec<String>,
    pub particles: Vec<String>,
    /// Count words after which a zero count is an absence claim too
    /// ("zero photos"); a number 0 followed by a counter always is.
    pub zero_not_before: Vec<String>,
}

/// Words that say a search ran and answered.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Search {
    /// "searched", "found"; Korean: word stems ("검색했").
    pub verbs: Vec<String>,
    /// Within three words before a verb, these make it no claim.
    pub negators: Vec<String>,
}

/// Words that say how an action ended (issue 33).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Actions {
    /// It took effect ("reserved", "confirmed"; "예약되었").
    pub done: Vec<String>,
    /// It was sent ("sent", "submitted"; "보냈").
    pub sent: Vec<String>,
    /// It was cancelled ("cancelled"; "취소했").
    pub cancelled: Vec<String>,
    /// Within three words before a word or phrase, these make it no claim.
    pub negators: Vec<String>,
}

/// Words or phrases that make a claim wherever they occur.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Phrases {
    pub phrases: Vec<String>,
}

/// Words and patterns that call a list the whole population.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Completeness {
    /// Word sequences that claim completeness wherever they occur.
    pub phrases: Vec<String>,
    /// "all": a claim when followed by a number, a count noun or one of
    /// `all_followers`, and not preceded by one of `all_not_after`.
    pub all_words: Vec<String>,
    pub all_followers: Vec<String>,
    pub all_not_after: Vec<String>,
    /// "every": a claim when followed by a count noun or `every_followers`.
    pub every_words: Vec<String>,
    pub every_followers: Vec<String>,
    /// Phrases that look like completeness but are not ("all right").
    pub not_phrases: Vec<String>,
}

/// What makes a number an attribute (an id, a date, a floor) and not a count.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct AttributeCues {
    /// Words right before a number: "floor 3", "step 2", "page 2", "지하 1층".
    pub before: Vec<String>,
    /// Words right after a number: "3 floor", "10 am", "5 percent".
    pub after: Vec<String>,
    /// Month names: "April 2", "2 April", "April 2026".
    pub months: Vec<String>,
    /// Words before a year: "in 2026", "from 1999".
    pub year_prepositions: Vec<String>,
    /// Smallest and largest year read as a year.
    pub year_min: u64,
    pub year_max: u64,
    /// Suffixes of an ordinal: "2nd", "3rd".
    pub ordinal_suffixes: Vec<String>,
    /// Korean counters that make an attribute: 층 년 월 일 시 분 번째.
    pub counters: Vec<String>,
}

static EN: OnceLock<Vocab> = OnceLock::new();
static KO: OnceLock<Vocab> = OnceLock::new();

const EN_RON: &str = include_str!("../../../../vocab/en.ron");
const KO_RON: &str = include_str!("../../../../vocab/ko.ron");

/// Parses one embedded vocabulary file.
pub fn parse(text: &str) -> Result<Vocab, ron::error::SpannedError> {
    ron::from_str(text)
}

/// The vocabulary of `lang`, parsed once.
pub fn vocab(lang: Lang) -> &'static Vocab {
    // The data is embedded at build time and the tests parse both files, so
    // a parse error here is a bug in the shipped data, not a runtime
    // condition: panicking with the located error is the right report.
    #[allow(clippy::expect_used)]
    match lang {
        Lang::En => EN.get_or_init(|| parse(EN_RON).expect("embedded vocab/en.ron parses")),
        Lang::Ko => KO.get_or_init(|| parse(KO_RON).expect("embedded vocab/ko.ron parses")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(v: &Vocab, lang: Lang) {
        assert_eq!(v.lang, lang);
        for m in v.multipliers.iter().chain(&v.big_multipliers) {
            assert!(
                v.number_words.contains_key(m),
                "{lang:?}: multiplier {m} has no value"
            );
        }
        for w in v
            .weak_numbers
            .iter()
            .chain(&v.ambiguous_numbers)
            .chain(&v.spaced_numbers)
        {
            assert!(
                v.number_words.contains_key(w),
                "{lang:?}: {w} is no number word"
            );
        }
        assert!(v.attribute_cues.year_min < v.attribute_cues.year_max);
    }

    #[test]
    fn both_embedded_vocabularies_parse() {
        let en = parse(EN_RON).unwrap_or_else(|e| panic!("vocab/en.ron: {e}"));
        let ko = parse(KO_RON).unwrap_or_else(|e| panic!("vocab/ko.ron: {e}"));
        check(&en, Lang::En);
        check(&ko, Lang::Ko);
        assert_eq!(en.number_words["twenty"], 20);
        assert_eq!(ko.number_words["스무"], 20);
        assert_eq!(ko.number_words["십"], 10);
        check(vocab(Lang::En), Lang::En);
        check(vocab(Lang::Ko), Lang::Ko);
    }

    #[test]
    fn detects_hangul() {
        assert_eq!(detect("There are 10."), Lang::En);
        assert_eq!(detect("정확히 10건입니다."), Lang::Ko);
        assert_eq!(detect("PANO-003 사진"), Lang::Ko);
        assert_eq!(detect(""), Lang::En);
    }
}
