//! Result contracts: what a tool's real answer looks like. A tool with a
//! contract is one whose results can be cited and counted; its answers are
//! judged for emptiness and in-band failure. A tool without one answers in
//! plain text, which is then the right answer and is not judged.

use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contract {
    /// Prefixes the upstream's *program* prints at the start of a real
    /// answer's text. Used only to clear a result, never to condemn one.
    pub fixed_prefixes: Vec<String>,
    /// Whether a listing may be stitched across cursor pages.
    pub stitch: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Contracts {
    by_tool: HashMap<String, Contract>,
}

impl Contracts {
    pub fn insert(&mut self, tool: &str, contract: Contract) {
        self.by_tool.insert(tool.to_string(), contract);
    }

    pub fn get(&self, tool: &str) -> Option<&Contract> {
        self.by_tool.get(tool)
    }
}
