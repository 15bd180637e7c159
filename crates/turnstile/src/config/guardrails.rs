//! `[[guardrails]]`: the safety checks on the user's message and on each
//! sentence of the answer (issue 39 §3), in the order they run.
//!
//! ```toml
//! [[guardrails]]
//! name = "secrets"        # built-in: credentials; block by default
//! [[guardrails]]
//! name = "pii"            # built-in: e-mail addresses, phone numbers; redact by default
//! [[guardrails]]
//! name = "words"
//! words = ["project falcon", "기밀"]   # or words_file = "words.txt"
//! [[guardrails]]
//! name = "moderation"
//! kind = "moderation"     # an OpenAI-compatible moderation endpoint
//! url = "https://api.openai.com/v1/moderations"
//! api_key_env = "OPENAI_API_KEY"
//! unavailable = "closed"  # or "open"
//! ```

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use super::settings::{is_env_name, read_text, Validator};
use crate::agent::guardrails::{Check, Checker, FailMode, Guardrails};
use crate::guard::safety::{Action, Builtin, WordList};
use crate::llm::moderation::{Moderation, ModerationConfig};
use crate::llm::ApiKey;

/// The largest `words_file` read (256 KiB).
const MAX_WORDS_BYTES: u64 = 256 * 1024;

/// A moderation request's default bound: a checker that is slower than
/// this costs every sentence of every answer.
const DEFAULT_TIMEOUT_MS: u64 = 2_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileGuardrail {
    name: String,
    /// `secrets`, `pii`, `words` or `moderation`; defaults to `name` when
    /// that is one of them.
    kind: Option<String>,
    /// `block` or `redact`.
    action: Option<String>,
    /// Which texts it reads: `input`, `output` (default both).
    on: Option<Vec<String>>,
    /// `closed` (default) or `open`: what an outage of the checker means.
    unavailable: Option<String>,
    words: Option<Vec<String>>,
    words_file: Option<std::path::PathBuf>,
    url: Option<String>,
    model: Option<String>,
    api_key_env: Option<String>,
    timeout_ms: Option<u64>,
}

impl Validator {
    pub(super) fn guardrails(
        &mut self,
        file: &[FileGuardrail],
        base_dir: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Guardrails {
        let mut checks = Vec::new();
        let mut names = std::collections::BTreeSet::new();
        for (i, g) in file.iter().enumerate() {
            let key = |k: &str| format!("guardrails[{i}].{k}");
            if g.name.trim().is_empty()
                || !(g.name.chars()).all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                self.problem(
                    &key("name"),
                    "a check's name is letters, digits, `-` and `_`".into(),
                );
                continue;
            }
            if !names.insert(g.name.clone()) {
                self.problem(&key("name"), format!("`{}` is named twice", g.name));
                continue;
            }
            let kind = g.kind.clone().unwrap_or_else(|| g.name.clone());
            let default_action = match kind.as_str() {
                "pii" => Action::Redact,
                _ => Action::Block,
            };
            let action = match g.action.as_deref() {
                None => default_action,
                Some("block") => Action::Block,
                Some("redact") => Action::Redact,
                Some(_) => {
                    self.problem(&key("action"), "`block` or `redact`".into());
                    continue;
                }
            };
            let (mut input, mut output) = (true, true);
            if let Some(on) = &g.on {
                input = on.iter().any(|s| s == "input");
                output = on.iter().any(|s| s == "output");
                let unknown = on.iter().any(|s| s != "input" && s != "output");
                if unknown || on.is_empty() {
                    self.problem(&key("on"), "a list of `input` and `output`".into());
                    continue;
                }
            }
            let unavailable = match g.unavailable.as_deref() {
                None | Some("closed") => FailMode::Closed,
                Some("open") => FailMode::Open,
                Some(_) => {
                    self.problem(&key("unavailable"), "`closed` or `open`".into());
                    continue;
                }
            };
            let external_keys = [
                ("url", g.url.is_some()),
                ("model", g.model.is_some()),
                ("api_key_env", g.api_key_env.is_some()),
                ("timeout_ms", g.timeout_ms.is_some()),
            ];
            let word_keys = [
                ("words", g.words.is_some()),
                ("words_file", g.words_file.is_some()),
            ];
            let misplaced = |keys: &[(&str, bool)]| {
                keys.iter()
                    .find(|(_, set)| *set)
                    .map(|(k, _)| k.to_string())
            };
            let checker = match kind.as_str() {
                "secrets" | "pii" | "words" => {
                    if let Some(k) = misplaced(&external_keys) {
                        self.problem(&key(&k), format!("only a `moderation` check has `{k}`"));
                        continue;
                    }
                    match kind.as_str() {
                        "secrets" => Builtin::Secrets,
                        "pii" => Builtin::Pii,
                        _ => match self.word_list(g, base_dir, &key) {
                            Some(w) => Builtin::Words(w),
                            None => continue,
                        },
                    }
                    .into()
                }
                "moderation" => {
                    if let Some(k) = misplaced(&word_keys) {
                        self.problem(&key(&k), format!("only a `words` check has `{k}`"));
                        continue;
                    }
                    if action == Action::Redact {
                        self.problem(
                            &key("action"),
                            "a moderation endpoint says whether a text is flagged, not where: only `block`".into(),
                        );
                        continue;
                    }
                    match self.moderation(g, env, &key) {
                        Some(m) => Checker::External(m),
                        None => continue,
                    }
                }
                other => {
                    self.problem(
                        &key("kind"),
                        format!(
                            "`{other}` is not a checker: `secrets`, `pii`, `words` or `moderation`"
                        ),
                    );
                    continue;
                }
            };
            checks.push(Check {
                name: g.name.clone(),
                checker,
                action,
                input,
                output,
                unavailable,
            });
        }
        Guardrails::new(checks)
    }

    fn word_list(
        &mut self,
        g: &FileGuardrail,
        base_dir: &Path,
        key: &dyn Fn(&str) -> String,
    ) -> Option<WordList> {
        let mut words = g.words.clone().unwrap_or_default();
        if let Some(f) = &g.words_file {
            let path = match f.is_relative() {
                true => base_dir.join(f),
                false => f.clone(),
            };
            match read_text(&path, MAX_WORDS_BYTES) {
                // One word or phrase per line; `#` starts a comment line.
                Ok(text) => words.extend(
                    (text.lines())
                        .map(str::trim)
                        .filter(|l| !l.is_empty() && !l.starts_with('#'))
                        .map(str::to_string),
                ),
                Err(_) => {
                    self.problem(
                        &key("words_file"),
                        format!(
                            "{} cannot be read (a UTF-8 file of at most {MAX_WORDS_BYTES} bytes)",
                            path.display()
                        ),
                    );
                    return None;
                }
            }
        }
        match WordList::new(&words) {
            Ok(w) if w.is_empty() => {
                self.problem(
                    &key("words"),
                    "a `words` check needs `words` or `words_file` with at least one word".into(),
                );
                None
            }
            Ok(w) => Some(w),
            Err(_) => {
                self.problem(
                    &key("words"),
                    "the word list is too large to compile".into(),
                );
                None
            }
        }
    }

    fn moderation(
        &mut self,
        g: &FileGuardrail,
        env: &dyn Fn(&str) -> Option<String>,
        key: &dyn Fn(&str) -> String,
    ) -> Option<Moderation> {
        let Some(url) = &g.url else {
            self.problem(
                &key("url"),
                "a `moderation` check needs the endpoint's `url`".into(),
            );
            return None;
        };
        let url = self.http_url(&key("url"), url)?;
        let api_key = match &g.api_key_env {
            None => None,
            Some(name) if !is_env_name(name) => {
                self.problem(
                    &key("api_key_env"),
                    "the name of an environment variable".into(),
                );
                return None;
            }
            Some(name) => match env(name) {
                Some(k) => Some(ApiKey::new(k)),
                None => {
                    self.problem(&key("api_key_env"), format!("`{name}` is not set"));
                    return None;
                }
            },
        };
        let timeout = Duration::from_millis(g.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS).max(1));
        let cfg = ModerationConfig {
            url: url.to_string(),
            model: g.model.clone(),
            api_key,
            timeout,
        };
        match Moderation::new(cfg) {
            Ok(m) => Some(m),
            Err(e) => {
                self.problem(&key("url"), format!("cannot build its client: {e}"));
                None
            }
        }
    }
}
