//! Prompt assembly. The fixed part comes first and is byte-identical across
//! turns so a provider's prompt cache is not broken; per-turn blocks (anchors,
//! host context) come after it.

use serde::Serialize;

pub const PLANNER_FIXED: &str = "You plan tool calls for a construction-site assistant. \
Choose tools and arguments from the tool list only. Do not answer the user yourself. \
Never promise counts or listings you have not retrieved.";

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
        let mut out = self.fixed.to_string();
        for b in &self.blocks {
            out += &format!("\n\n## {}\n{}", b.title, b.text);
        }
        out
    }
}
