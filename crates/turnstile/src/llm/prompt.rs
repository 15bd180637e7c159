//! Prompt assembly. The fixed part comes first and is byte-identical across
//! turns so a provider's prompt cache is not broken; per-turn blocks (anchors,
//! host context) come after it. A planning round's request puts them last of
//! all, after the thread's history and the turn's tool loop (ADR 0022), so
//! consecutive requests of a turn share everything but that last message.

use serde::Serialize;

/// Every planning round's system prompt. A round either asks for tools or,
/// once the tools' results are enough, answers: that answer is the turn's
/// answer (issue 19 §5), so the responder's rules are here too.
pub const PLANNER_FIXED: &str = "You plan tool calls for a construction-site assistant. \
Choose tools and arguments from the tool list only. \
Never promise counts or listings you have not retrieved. \
Either call tools, or answer the user in text; never both. \
When you answer: data reaches the user through citation cards, not through your text. \
Follow every directive given after the conversation exactly: it states which numbers you may say and how. \
Keep the subject of the whole population separate from the subject of the shown items: \
say \"these N\" for what is shown, never \"the results\".";

pub const RESPONDER_FIXED: &str = "You narrate tool results for a construction-site assistant. \
Data reaches the user through citation cards, not through your text. \
Follow every directive below exactly: it states which numbers you may say and how. \
Keep the subject of the whole population separate from the subject of the shown items: \
say \"these N\" for what is shown, never \"the results\".";

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Block {
    pub title: String,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Prompt {
    pub fixed: &'static str,
    pub blocks: Vec<Block>,
}

impl Prompt {
    pub fn new(fixed: &'static str) -> Self {
        Prompt {
            fixed,
            blocks: Vec::new(),
        }
    }

    pub fn block(mut self, title: &str, text: impl Into<String>) -> Self {
        self.blocks.push(Block {
            title: title.to_string(),
            text: text.into(),
        });
        self
    }

    /// The system prompt as one string: fixed part first, then each block.
    pub fn render(&self) -> String {
        self.fixed.to_string() + &self.render_blocks()
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
