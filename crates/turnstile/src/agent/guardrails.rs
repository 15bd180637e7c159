//! The deployment's safety checks (`[[guardrails]]`, issue 39 §3): which
//! checkers run on the user's message and on each sentence of the answer,
//! what a finding becomes, and what an outage of a checker means. Running
//! them gives one verdict per check; `tables/guardrail.ron` decides what
//! the turn does with them (`agent::turn::guardrail`).

use std::sync::Arc;

use crate::guard::safety::{Action, Builtin, Found, Verdict};
use crate::llm::moderation::Moderation;

/// What a checker's outage means for the text it could not check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailMode {
    /// Refuse the message, withhold the sentence.
    Closed,
    /// Let it through unchecked (logged and counted by its row).
    Open,
}

#[derive(Debug, Clone)]
pub enum Checker {
    Builtin(Builtin),
    /// An OpenAI-compatible moderation endpoint: a flagged text is a
    /// finding.
    External(Moderation),
}

impl From<Builtin> for Checker {
    fn from(b: Builtin) -> Checker {
        Checker::Builtin(b)
    }
}

/// One configured check.
#[derive(Debug, Clone)]
pub struct Check {
    /// Its name in code's sentences, frames, logs and the table's rows'
    /// reports (`secrets`, `pii`, `words`, …).
    pub name: String,
    pub checker: Checker,
    pub action: Action,
    /// Runs on the user's message.
    pub input: bool,
    /// Runs on each sentence of the answer.
    pub output: bool,
    pub unavailable: FailMode,
}

impl Check {
    /// Whether it reads the texts of `side`.
    fn reads(&self, side: Side) -> bool {
        match side {
            Side::Input => self.input,
            Side::Output => self.output,
        }
    }
}

/// Which text a check reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Input,
    Output,
}

/// One check's verdict on one text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub check: String,
    pub verdict: Verdict,
    pub unavailable: FailMode,
}

impl Finding {
    /// What was found, for code's sentence (none for an outage).
    pub fn found(&self) -> Option<&Found> {
        match &self.verdict {
            Verdict::Redact { found, .. } | Verdict::Block { found } => Some(found),
            Verdict::Pass | Verdict::Unavailable { .. } => None,
        }
    }
}

/// The checks of a deployment, in the order configured.
#[derive(Debug, Clone, Default)]
pub struct Guardrails {
    checks: Arc<Vec<Check>>,
}

impl Guardrails {
    pub fn new(checks: Vec<Check>) -> Guardrails {
        Guardrails {
            checks: Arc::new(checks),
        }
    }

    pub fn checks(&self) -> &[Check] {
        &self.checks
    }

    /// The built-in checks on messages and answers: with `builtins`,
    /// `secrets` (block) and `pii` (redact); with `words`, a `words` check
    /// (block). What `turnstile demo --guardrails` runs.
    pub fn built_in(
        builtins: bool,
        words: &[String],
    ) -> Result<Guardrails, crate::guard::safety::WordListError> {
        let check = |name: &str, b: Builtin, action| Check {
            name: name.into(),
            checker: b.into(),
            action,
            input: true,
            output: true,
            unavailable: FailMode::Closed,
        };
        let mut checks = Vec::new();
        if builtins {
            checks.push(check("secrets", Builtin::Secrets, Action::Block));
            checks.push(check("pii", Builtin::Pii, Action::Redact));
        }
        if !words.is_empty() {
            let list = crate::guard::safety::WordList::new(words)?;
            checks.push(check("words", Builtin::Words(list), Action::Block));
        }
        Ok(Guardrails::new(checks))
    }

    /// Whether any check reads `side`.
    pub fn runs_on(&self, side: Side) -> bool {
        (self.checks.iter()).any(|c| c.reads(side))
    }

    /// Whether a check of `side` asks an outside endpoint.
    pub fn waits_on_the_network(&self, side: Side) -> bool {
        (self.checks.iter()).any(|c| matches!(c.checker, Checker::External(_)) && c.reads(side))
    }

    /// Runs every check of `side` on `text`, in order: each reads the text
    /// as the redactions before it left it, so what a built-in check took
    /// out never reaches an external one, and once a check blocked the text
    /// no external check is sent it at all. A check named in `down` (it
    /// could not answer earlier in this turn) is not asked again: its
    /// outage stands for the turn, so a dead endpoint costs one timeout,
    /// not one per sentence. One finding per check run, and the text with
    /// every redaction applied.
    pub async fn run(
        &self,
        side: Side,
        text: &str,
        down: &mut Vec<String>,
    ) -> (Vec<Finding>, String) {
        let mut findings: Vec<Finding> = Vec::new();
        let mut current = text.to_string();
        for check in self.checks.iter().filter(|c| c.reads(side)) {
            let blocked = (findings.iter()).any(|f| matches!(f.verdict, Verdict::Block { .. }));
            let verdict = match &check.checker {
                Checker::Builtin(b) => b.check(&current, check.action),
                // A blocked text goes to no outside service.
                Checker::External(_) if blocked => continue,
                Checker::External(_) if down.contains(&check.name) => Verdict::Unavailable {
                    why: "it could not answer earlier in this turn".into(),
                },
                Checker::External(m) => match m.check(&current).await {
                    Ok(r) if !r.flagged => Verdict::Pass,
                    // A moderation endpoint says whether, not where: a
                    // flagged text cannot be redacted (the config allows
                    // only `block` for it).
                    Ok(r) => Verdict::Block {
                        found: Found::Flagged(r.categories),
                    },
                    Err(e) => {
                        down.push(check.name.clone());
                        Verdict::Unavailable { why: e.to_string() }
                    }
                },
            };
            if let Verdict::Redact { text, .. } = &verdict {
                current = text.clone();
            }
            findings.push(Finding {
                check: check.name.clone(),
                verdict,
                unavailable: check.unavailable,
            });
        }
        (findings, current)
    }
}
