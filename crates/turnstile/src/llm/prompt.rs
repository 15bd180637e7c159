//! Prompt assembly. The fixed part comes first and is byte-identical across
//! turns so a provider's prompt cache is not broken; per-turn blocks (anchors,
//! host context) come after it. A planning round's request puts them last of
//! all, after the thread's history and the turn's tool loop (ADR 0022), so
//! consecutive requests of a turn share everything but that last message.
//!
//! The fixed part is the deployment's own description of its assistant
//! (`[model] instructions`, issue 33 §6) followed by code's rules, which no
//! configuration changes. Neither names a domain: what the assistant is for
//! is the deployment's to say.

use std::sync::Arc;

use serde::Serialize;

/// Every planning round's system prompt. A round either asks for tools or,
/// once the tools' results are enough, answers: that answer is the turn's
/// answer (issue 19 §5), so the responder's rules are here too.
pub const PLANNER_FIXED: &str = "You plan tool calls for this assistant. \
Choose tools and arguments from the tool list only. \
Never promise counts or listings you have not retrieved. \
Either call tools, or answer the user in text; never both. \
When you answer: data reaches the user through citation cards, not through your text. \
Follow every directive given after the conversation exactly: it states which numbers you may say and how. \
Keep the subject of the whole population separate from the subject of the shown items: \
say \"these N\" for what is shown, never \"the results\".";

pub const RESPONDER_FIXED: &str = "You narrate tool results for this assistant. \
Data reaches the user through citation cards, not through your text. \
Follow every directive below exactly: it states which numbers you may say and how. \
Keep the subject of the whole population separate from the subject of the shown items: \
say \"these N\" for what is shown, never \"the results\".";

/// The deployment's description of its assistant (`[model] instructions`
/// or `instructions_file`): what it is for, in the operator's words. Shared
/// by every request of the process, so a prompt copies a pointer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Instructions(Option<Arc<str>>);

impl Instructions {
    /// `text` trimmed; blank is none.
    pub fn new(text: &str) -> Self {
        let t = text.trim();
        Instructions((!t.is_empty()).then(|| Arc::from(t)))
    }

    pub fn as_str(&self) -> &str {
        self.0.as_deref().unwrap_or("")
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

impl Serialize for Instructions {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Block {
    pub title: String,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Prompt {
    /// The deployment's description of its assistant; first of all.
    pub instructions: Instructions,
    /// Code's rules, after the instructions, so that no configuration can
    /// come after them and change what they say.
    pub fixed: &'static str,
    pub blocks: Vec<Block>,
}

impl Prompt {
    pub fn new(fixed: &'static str) -> Self {
        Prompt {
            instructions: Instructions::default(),
            fixed,
            blocks: Vec::new(),
        }
    }

    /// This prompt, after the deployment's `instructions`.
    pub fn with_instructions(mut self, instructions: &Instructions) -> Self {
        self.instructions = instructions.clone();
        self
    }

    /// The fixed prefix every request of the process repeats byte for
    /// byte: the instructions, a blank line, code's rules.
    pub fn head(&self) -> String {
        match self.instructions.is_empty() {
            true => self.fixed.to_string(),
            false => format!("{}\n\n{}", self.instructions.as_str(), self.fixed),
        }
    }

    pub fn block(mut self, title: &str, text: impl Into<String>) -> Self {
        self.blocks.push(Block {
            title: title.to_string(),
            text: text.into(),
        });
        self
    }

    /// The system prompt as one string: the fixed prefix ([`Prompt::head`])
    /// first, then each block.
    pub fn render(&self) -> String {
        self.head() + &self.render_blocks()
    }

    /// The blocks alone, each as `\n\n## Title\ntext`.
    pub fn render_blocks(&self) -> String {
        let mut out = String::new();
        for b in &self.blocks {
            out += &format!("\n\n## {}\n{}", b.title, b.text);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Words of one deployment (the demo's construction site, its seat
    /// reservations and lecture files): what an assistant is for is the
    /// deployment's `[model] instructions`, never a constant of `llm/`.
    const DOMAIN_WORDS: &[&str] = &[
        "construction",
        "site",
        "floor",
        "photo",
        "panorama",
        "seat",
        "reservation",
        "lecture",
        "project",
        "safety",
        "tower",
    ];

    /// Every `const NAME: &str = "…";` in `src`, with its text.
    fn string_constants(src: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut rest = src;
        while let Some(at) = rest.find("const ") {
            rest = &rest[at + "const ".len()..];
            let Some((name, after)) = rest.split_once(':') else {
                break;
            };
            let after = after.trim_start();
            if !after.starts_with("&str") {
                continue;
            }
            let Some(open) = after.find('"') else { break };
            let body = &after[open + 1..];
            let Some(close) = body.find("\";") else { break };
            out.push((name.trim().to_string(), body[..close].to_string()));
        }
        out
    }

    #[test]
    fn no_prompt_constant_of_llm_names_a_domain() {
        let sources = [
            ("prompt.rs", include_str!("prompt.rs")),
            ("openai.rs", include_str!("openai.rs")),
            ("mod.rs", include_str!("mod.rs")),
        ];
        let mut seen = 0;
        for (file, src) in sources {
            // The tests' own fixtures are not prompts.
            let src = src.split("#[cfg(test)]").next().unwrap_or(src);
            for (name, text) in string_constants(src) {
                seen += 1;
                let lower = text.to_lowercase();
                for word in DOMAIN_WORDS {
                    assert!(
                        !lower.contains(word),
                        "{file}: `{name}` names the domain word {word:?}: {text}"
                    );
                }
            }
        }
        // The scan found the prompts (the two fixed parts, the functions'
        // descriptions), so an empty pass proves nothing is missed.
        assert!(seen >= 6, "only {seen} string constants found");
        for fixed in [PLANNER_FIXED, RESPONDER_FIXED] {
            let lower = fixed.to_lowercase();
            assert!(DOMAIN_WORDS.iter().all(|w| !lower.contains(w)), "{fixed}");
        }
    }

    #[test]
    fn the_instructions_come_first_then_the_fixed_rules_then_the_blocks() {
        let text = "You help the staff of a library book reading-room seats.";
        let instructions = Instructions::new(&format!("  {text}\n"));
        for fixed in [PLANNER_FIXED, RESPONDER_FIXED] {
            let p = Prompt::new(fixed)
                .with_instructions(&instructions)
                .block("Directives", "- say 3");
            let rendered = p.render();
            assert!(
                rendered.starts_with(&format!("{text}\n\n{fixed}")),
                "{rendered}"
            );
            assert_eq!(p.head(), format!("{text}\n\n{fixed}"));
            assert!(rendered.ends_with("\n\n## Directives\n- say 3"));
            // The prefix is the same bytes for every request: the blocks
            // change, the head does not.
            let other = Prompt::new(fixed)
                .with_instructions(&instructions)
                .block("Directives", "- say 4");
            assert_eq!(other.head(), p.head());
        }
        // No instructions: the fixed rules alone, as before.
        assert_eq!(Prompt::new(PLANNER_FIXED).head(), PLANNER_FIXED);
        assert!(Instructions::new(" \n ").is_empty());
    }
}
