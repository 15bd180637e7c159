//! `[model]`: which model answers, where, with which key, and the
//! assistant's own instructions.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::llm::ApiKey;

use super::settings::*;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileModel {
    pub(super) base_url: Option<String>,
    pub(super) name: Option<String>,
    pub(super) api_key_env: Option<String>,
    /// `ApiKey`'s `Debug` is redacted, so this struct may derive `Debug`.
    pub(super) api_key: Option<ApiKey>,
    pub(super) connect_timeout_secs: Option<u64>,
    pub(super) idle_timeout_secs: Option<u64>,
    pub(super) max_retries: Option<u32>,
    pub(super) backoff_initial_ms: Option<u64>,
    pub(super) backoff_max_ms: Option<u64>,
    /// What the deployment's assistant is for, in the operator's words;
    /// code's fixed rules follow it in every prompt.
    pub(super) instructions: Option<String>,
    /// The same, read from a file (relative to the config file's directory).
    pub(super) instructions_file: Option<PathBuf>,
}

impl Validator {
    pub(super) fn model(
        &mut self,
        m: &FileModel,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Option<ModelConfig> {
        let base_url = match (env(ENV_MODEL_BASE_URL), &m.base_url) {
            (Some(u), _) => self
                .http_url(
                    &format!("{ENV_MODEL_BASE_URL} (overrides `model.base_url`)"),
                    &u,
                )
                .map(|_| u),
            (None, Some(u)) => self.http_url("model.base_url", u).map(|_| u.clone()),
            (None, None) => {
                self.missing("model.base_url", ENV_MODEL_BASE_URL);
                None
            }
        };
        let name = env(ENV_MODEL)
            .or(m.name.clone())
            .filter(|n| !n.trim().is_empty());
        if name.is_none() {
            self.missing("model.name", ENV_MODEL);
        }

        let var = m.api_key_env.as_deref().unwrap_or(DEFAULT_API_KEY_ENV);
        let key = if !is_env_name(var) {
            // Do not echo it: a key pasted into the wrong field is a common slip.
            self.problem(
                "model.api_key_env",
                "must be the name of an environment variable (letters, digits and _); it should not hold the key itself".into(),
            );
            None
        } else if let Some(k) = env(var) {
            Some((ApiKey::new(k.trim()), KeySource::Env(var.to_string())))
        } else if let Some(k) = m.api_key.as_ref().filter(|k| !k.expose().trim().is_empty()) {
            Some((ApiKey::new(k.expose().trim()), KeySource::File))
        } else {
            // Name the variable only when it is the default: a key pasted into
            // `api_key_env` can look like a variable name, and must not be echoed.
            let which = if m.api_key_env.is_none() {
                format!("the environment variable {var} is not set")
            } else {
                "the environment variable named by `model.api_key_env` is not set".to_string()
            };
            self.problem(
                "model.api_key_env",
                format!("no API key: {which} and the file has no `model.api_key`"),
            );
            None
        };
        if m.api_key.is_some() {
            self.warn(
                "model.api_key",
                "the API key is written in the config file; prefer `model.api_key_env` naming an environment variable".into(),
            );
        }

        // A key pasted as the name would be printed at start: refused, and
        // never quoted.
        if let Some(why) = name
            .as_deref()
            .and_then(|n| secret_shape(n, key.as_ref().map(|(k, _)| k.expose())))
        {
            let field = match env(ENV_MODEL) {
                Some(_) => format!("{ENV_MODEL} (overrides `model.name`)"),
                None => "model.name".into(),
            };
            self.problem(
                &field,
                format!("looks like {why}, not a model's name (not shown); write the model's name (e.g. gpt-4o-mini) and keep the key in the variable `model.api_key_env` names"),
            );
        }

        let connect = self.positive("model.connect_timeout_secs", m.connect_timeout_secs, 10);
        let idle = self.positive("model.idle_timeout_secs", m.idle_timeout_secs, 60);
        let initial = self.positive("model.backoff_initial_ms", m.backoff_initial_ms, 500);
        let max = self.positive("model.backoff_max_ms", m.backoff_max_ms, 8000);
        if max < initial {
            self.problem(
                "model.backoff_max_ms",
                format!("must not be below `model.backoff_initial_ms` ({initial})"),
            );
        }
        let max_retries = m.max_retries.unwrap_or(3);
        if max_retries > 10 {
            self.problem("model.max_retries", "at most 10".into());
        }
        let (base_url, name, (api_key, key_source)) = (base_url?, name?, key?);
        Some(ModelConfig {
            base_url,
            name,
            api_key,
            key_source,
            connect_timeout: Duration::from_secs(connect),
            idle_timeout: Duration::from_secs(idle),
            max_retries,
            backoff_initial: Duration::from_millis(initial),
            backoff_max: Duration::from_millis(max),
            instructions: Default::default(),
        })
    }

    /// `model.instructions` or `model.instructions_file` (one of them, at
    /// most [`MAX_INSTRUCTIONS_BYTES`], UTF-8).
    pub(super) fn instructions(
        &mut self,
        m: &FileModel,
        base_dir: &Path,
    ) -> crate::llm::prompt::Instructions {
        use crate::llm::prompt::Instructions;
        let text = match (&m.instructions, &m.instructions_file) {
            (Some(_), Some(_)) => {
                self.problem(
                    "model.instructions_file",
                    "set `model.instructions` or `model.instructions_file`, not both".into(),
                );
                return Instructions::default();
            }
            (Some(t), None) => ("model.instructions", t.clone()),
            (None, Some(f)) => {
                let path = match f.is_relative() {
                    true => base_dir.join(f),
                    false => f.clone(),
                };
                // Read as the config file is: a FIFO or a device is refused
                // before it is opened, and no more than the bound is read.
                let why = match read_text(&path, MAX_INSTRUCTIONS_BYTES as u64) {
                    Ok(t) => return self.instructions_text("model.instructions_file", t),
                    Err(TextFile::Read(e)) => format!("cannot read {}: {e}", path.display()),
                    Err(TextFile::NotAFile) => format!("{} is not a regular file", path.display()),
                    Err(TextFile::TooLarge) => format!(
                        "{} is larger than {MAX_INSTRUCTIONS_BYTES} bytes (they are sent with every model request)",
                        path.display()
                    ),
                    Err(TextFile::NotUtf8) => format!("{} is not UTF-8 text", path.display()),
                };
                self.problem("model.instructions_file", why);
                return Instructions::default();
            }
            (None, None) => return Instructions::default(),
        };
        let (key, text) = text;
        self.instructions_text(key, text)
    }

    /// Instructions as given: bounded, not blank.
    pub(super) fn instructions_text(
        &mut self,
        key: &str,
        text: String,
    ) -> crate::llm::prompt::Instructions {
        if text.len() > MAX_INSTRUCTIONS_BYTES {
            self.problem(
                key,
                format!(
                    "{} bytes; at most {MAX_INSTRUCTIONS_BYTES} (they are sent with every model request)",
                    text.len()
                ),
            );
        } else if text.trim().is_empty() {
            self.problem(key, "is empty; leave it out for no instructions".into());
        }
        crate::llm::prompt::Instructions::new(&text)
    }
}
