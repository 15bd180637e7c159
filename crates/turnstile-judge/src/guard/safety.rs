//! The built-in safety checkers (issue 39 §3) and code's sentences for their
//! verdicts. A checker reads one text (the user's message, or one sentence
//! of the answer) and finds what it looks for; the check's configured
//! action makes a finding a block or a redaction. Which verdict wins and
//! what the turn does next is `tables/guardrail.ron`'s to decide.
//!
//! The patterns are deliberately plain: what a credential scanner
//! (gitleaks, detect-secrets) flags first, the e-mail addresses and phone
//! numbers of English and Korean text, and the operator's own words. They
//! run on every message and every sentence, so each is one compiled regex.

use std::sync::OnceLock;

use regex::Regex;

/// What a check does with what it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The message is refused, or the sentence replaced.
    Block,
    /// What was found is taken out, and the rest goes on.
    Redact,
}

/// A kind of thing a checker found, named in code's sentences.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Credential,
    Email,
    Phone,
    ListedWord,
    /// An external moderation endpoint flagged the text, in these
    /// categories (as it named them).
    Flagged(Vec<String>),
}

impl Found {
    /// What was found, as a sentence says it.
    pub fn said(&self, korean: bool) -> String {
        match (self, korean) {
            (Found::Credential, false) => "what looks like a password, key or token".into(),
            (Found::Credential, true) => "비밀번호, 키 또는 토큰으로 보이는 내용".into(),
            (Found::Email, false) => "an e-mail address".into(),
            (Found::Email, true) => "이메일 주소".into(),
            (Found::Phone, false) => "a phone number".into(),
            (Found::Phone, true) => "전화번호".into(),
            (Found::ListedWord, false) => "a term this deployment does not allow".into(),
            (Found::ListedWord, true) => "이 서비스에서 허용하지 않는 용어".into(),
            (Found::Flagged(c), false) if c.is_empty() => {
                "content the moderation service flagged".into()
            }
            (Found::Flagged(c), true) if c.is_empty() => "검토 서비스가 표시한 내용".into(),
            (Found::Flagged(c), false) => {
                format!("content the moderation service flagged ({})", c.join(", "))
            }
            (Found::Flagged(c), true) => format!("검토 서비스가 표시한 내용({})", c.join(", ")),
        }
    }

    /// What a redaction puts in place of the found text.
    fn mark(&self) -> &'static str {
        match self {
            Found::Credential => "[credential]",
            Found::Email => "[email]",
            Found::Phone => "[phone]",
            Found::ListedWord | Found::Flagged(_) => "[removed]",
        }
    }
}

/// One checker's verdict on one text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// The text with what was found taken out.
    Redact {
        text: String,
        found: Found,
    },
    Block {
        found: Found,
    },
    /// The checker could not answer (an external one's timeout, error or
    /// malformed answer); the check's configuration says closed or open.
    Unavailable {
        why: String,
    },
}

/// A checker that needs no network: it runs in the turn's task.
#[derive(Debug, Clone)]
pub enum Builtin {
    /// Credentials: cloud and forge keys, private keys, bearer tokens,
    /// JWTs, and `password = …` assignments (English and Korean).
    Secrets,
    /// E-mail addresses and phone numbers.
    Pii,
    /// The operator's words, case-insensitive; an ASCII word matches as a
    /// whole word, any other (Korean) as written.
    Words(WordList),
}

impl Builtin {
    /// Runs the checker on `text`; `action` says what a finding becomes.
    pub fn check(&self, text: &str, action: Action) -> Verdict {
        let patterns: Vec<(&Regex, Found)> = match self {
            Builtin::Secrets => vec![(secrets(), Found::Credential)],
            Builtin::Pii => vec![(email(), Found::Email), (phone(), Found::Phone)],
            Builtin::Words(w) => match &w.regex {
                Some(r) => vec![(r, Found::ListedWord)],
                None => vec![],
            },
        };
        let mut first: Option<Found> = None;
        let mut out = text.to_string();
        for (re, found) in patterns {
            if !re.is_match(&out) {
                continue;
            }
            if action == Action::Redact {
                out = re.replace_all(&out, found.mark()).into_owned();
            }
            first.get_or_insert(found);
        }
        match (first, action) {
            (None, _) => Verdict::Pass,
            (Some(found), Action::Block) => Verdict::Block { found },
            (Some(found), Action::Redact) => Verdict::Redact { text: out, found },
        }
    }
}

/// A word list that does not compile (too large for the regex engine's
/// limits).
#[derive(Debug, thiserror::Error)]
#[error("the word list does not compile: {0}")]
pub struct WordListError(#[from] regex::Error);

/// The operator's word list, compiled once into one regex.
#[derive(Debug, Clone)]
pub struct WordList {
    regex: Option<Regex>,
    len: usize,
}

impl WordList {
    /// The list's words; empty or blank ones are skipped. An error only
    /// for a list too large to compile.
    pub fn new<S: AsRef<str>>(words: &[S]) -> Result<WordList, WordListError> {
        let alternatives: Vec<String> = (words.iter())
            .map(|w| w.as_ref().trim())
            .filter(|w| !w.is_empty())
            .map(|w| match w.is_ascii() {
                // A whole word: "secret" does not match "secretary". The
                // boundary goes only on a side that is a word character
                // ("c++" and ".env" end or start with none).
                true => {
                    let word =
                        |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
                    let before = if word(w.chars().next()) {
                        r"(?-u:\b)"
                    } else {
                        ""
                    };
                    let after = if word(w.chars().last()) {
                        r"(?-u:\b)"
                    } else {
                        ""
                    };
                    format!("{before}{}{after}", regex::escape(w))
                }
                // Korean words are inflected by particles written onto
                // them ("기밀은"): matched as written.
                false => regex::escape(w),
            })
            .collect();
        let len = alternatives.len();
        let regex = match alternatives.is_empty() {
            true => None,
            false => Some(Regex::new(&format!("(?i)(?:{})", alternatives.join("|")))?),
        };
        Ok(WordList { regex, len })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

fn compiled(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    // The patterns are constants of this file, checked by its tests: a
    // proven invariant.
    cell.get_or_init(|| Regex::new(pattern).expect("a built-in pattern compiles"))
}

fn secrets() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    compiled(
        &RE,
        concat!(
            r"(?:(?-u:\b)(?:AKIA|ASIA)[0-9A-Z]{16}(?-u:\b)",
            r"|(?-u:\b)gh[pousr]_[A-Za-z0-9]{36,}(?-u:\b)",
            r"|(?-u:\b)github_pat_[A-Za-z0-9_]{22,}(?-u:\b)",
            r"|(?-u:\b)sk-(?:proj-)?[A-Za-z0-9_-]{20,}",
            r"|(?-u:\b)[rs]k_live_[0-9A-Za-z]{16,}(?-u:\b)",
            r"|(?-u:\b)xox[abprs]-[A-Za-z0-9-]{10,}",
            r"|(?-u:\b)AIza[0-9A-Za-z_-]{35}(?-u:\b)",
            r"|-----BEGIN [A-Z ]*PRIVATE KEY-----",
            r"|(?-u:\b)eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
            r"|(?i:(?-u:\b)bearer\s+[A-Za-z0-9._~+/=-]{16,})",
            r"|(?i:(?-u:\b)(?:password|passwd|pwd|passphrase|secret|api[_-]?key|access[_-]?token)\s*[:=]\s*\S{6,})",
            // "비밀번호는 hunter2…", "암호: …": the value is printable ASCII
            // after a separator, so "암호화폐" or "비밀번호 재설정" is no finding.
            r"|(?:비밀번호|패스워드|암호)(?:\s*[:=]\s*|(?:은|는|가|이)?\s+)[\x21-\x7E]{6,})",
        ),
    )
}

fn email() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    compiled(
        &RE,
        r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}",
    )
}

fn phone() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    // Three groups with separators, the last of four digits: 010-1234-5678,
    // 02-123-4567, (555) 123-4567, +82 10 1234 5678. A date (2026-12-03)
    // or an id of one group is not a phone number.
    compiled(
        &RE,
        r"(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,4}\)|(?-u:\b)\d{2,4})[ .-]\d{3,4}[ .-]\d{4}(?-u:\b)",
    )
}

/// Code's sentence for a refused message: which check, what it found (never
/// the text itself), the table's row, and what the user can do.
pub fn refusal(check: &str, found: Option<&Found>, row: &str, korean: bool) -> String {
    match (found, korean) {
        (Some(f), false) => format!(
            "Your message did not go to the assistant: the `{check}` check saw {} in it (guardrail table, row `{row}`). Take it out and write the message again.",
            f.said(false)
        ),
        (Some(f), true) => format!(
            "메시지를 어시스턴트에게 전달하지 않았습니다. `{check}` 검사 결과 메시지에 {}이(가) 들어 있습니다(guardrail 표, 행 `{row}`). 그 부분을 빼고 다시 써 주세요.",
            f.said(true)
        ),
        (None, false) => format!(
            "Your message did not go to the assistant: the `{check}` check could not be run, and this deployment does not go on without it (guardrail table, row `{row}`). Try again later."
        ),
        (None, true) => format!(
            "메시지를 어시스턴트에게 전달하지 않았습니다. `{check}` 검사를 실행할 수 없었고, 이 서비스는 검사 없이 진행하지 않습니다(guardrail 표, 행 `{row}`). 잠시 후 다시 시도해 주세요."
        ),
    }
}

/// Code's sentence in place of a blocked sentence of the answer.
pub fn withheld(check: &str, found: Option<&Found>, row: &str, korean: bool) -> String {
    match (found, korean) {
        (Some(f), false) => format!(
            "A sentence was withheld: the `{check}` check saw {} in it (guardrail table, row `{row}`).",
            f.said(false)
        ),
        (Some(f), true) => format!(
            "문장 하나를 표시하지 않았습니다. `{check}` 검사 결과 그 문장에 {}이(가) 들어 있습니다(guardrail 표, 행 `{row}`).",
            f.said(true)
        ),
        (None, false) => format!(
            "A sentence was withheld: the `{check}` check could not be run on it (guardrail table, row `{row}`)."
        ),
        (None, true) => format!(
            "문장 하나를 표시하지 않았습니다. `{check}` 검사를 실행할 수 없었습니다(guardrail 표, 행 `{row}`)."
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finds(b: &Builtin, text: &str) -> bool {
        b.check(text, Action::Block) != Verdict::Pass
    }

    #[test]
    fn secrets_are_found_in_english_and_korean() {
        let s = Builtin::Secrets;
        for t in [
            "my key is AKIAIOSFODNN7EXAMPLE ok",
            "token ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "use sk-proj-abcdefghijklmnopqrstuv please",
            "-----BEGIN RSA PRIVATE KEY-----",
            "Authorization: Bearer abcdefghijklmnop1234",
            "password = hunter2hunter2",
            "제 비밀번호는 qwerty1234! 입니다",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
        ] {
            assert!(finds(&s, t), "{t}");
        }
        for t in [
            "How many open issues are on floor 3?",
            "The password policy says twelve characters.",
            "비밀번호 정책이 어떻게 되나요?",
            "암호화폐거래소에서 샀어요",
            "암호화 알고리즘은 무엇인가요?",
            "비밀번호 재설정방법을 알려줘",
            "skip the first 20 items",
        ] {
            assert!(!finds(&s, t), "{t}");
        }
    }

    #[test]
    fn pii_is_redacted_and_dates_are_not_phone_numbers() {
        let p = Builtin::Pii;
        let v = p.check(
            "Mail ana@example.com or call 010-1234-5678 by 2026-12-03.",
            Action::Redact,
        );
        assert_eq!(
            v,
            Verdict::Redact {
                text: "Mail [email] or call [phone] by 2026-12-03.".into(),
                found: Found::Email
            }
        );
        let v = p.check(
            "김민수 님(minsu.kim@example.co.kr, 02-123-4567)께 연락",
            Action::Redact,
        );
        assert!(
            matches!(v, Verdict::Redact { ref text, .. } if text == "김민수 님([email], [phone])께 연락")
        );
        for t in [
            "on 2026-12-03",
            "issue 1234",
            "floor 3 of 12",
            "call +82 10 1234 5678",
        ] {
            let found = finds(&p, t);
            assert_eq!(found, t.starts_with("call"), "{t}");
        }
    }

    #[test]
    fn words_match_whole_in_english_and_as_written_in_korean() {
        let w =
            Builtin::Words(WordList::new(&["Project Falcon", "기밀", " ", "c++", ".env"]).unwrap());
        assert!(finds(&w, "what about project falcon?"));
        assert!(finds(&w, "is c++ allowed?") && finds(&w, "read the .env file"));
        assert!(finds(&w, "이 문서는 기밀입니다"));
        assert!(!finds(&w, "project falconry"));
        let empty = Builtin::Words(WordList::new::<&str>(&[]).unwrap());
        assert!(!finds(&empty, "anything"));
    }

    #[test]
    fn sentences_name_the_check_and_row_and_never_the_text() {
        let s = refusal("secrets", Some(&Found::Credential), "input-blocked", false);
        assert!(s.contains("`secrets`") && s.contains("`input-blocked`"));
        let k = withheld("pii", Some(&Found::Email), "output-blocked", true);
        assert!(k.contains("이메일 주소") && k.contains("`output-blocked`"));
    }
}
