//! Result contracts: what a tool's real answer looks like. A tool with a
//! contract is one whose results can be cited and counted; its answers are
//! judged for emptiness and in-band failure. A tool without one answers in
//! plain text, which is then the right answer and is not judged.
//!
//! A contract also says how to *read* the tool's answers ([`Shape`]): where
//! its items are, which field is an item's id, and what its accounting keys
//! are called. Left unset, each is detected (see [`super::result`]).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Contract {
    /// Prefixes the upstream's *program* prints at the start of a real
    /// answer's text. Used only to clear a result, never to condemn one.
    pub fixed_prefixes: Vec<String>,
    /// Whether a listing may be stitched across cursor pages.
    pub stitch: bool,
    /// Whether the server is held to sending accounting.
    pub accounting: AccountingMode,
    /// How the tool's answers are read.
    pub shape: Shape,
    /// The input parameter that takes a list of item ids, so a narrowing
    /// follow-up can be held to the previous population's ids. `None`:
    /// detected from the tool's input schema.
    pub scope_ids_param: Option<String>,
}

/// Whether a tool's server sends accounting (`returned`, `total`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AccountingMode {
    /// The seed's rule: a result without accounting or a result structure is
    /// a failure disguised as success; counts are graded from accounting.
    #[default]
    Required,
    /// The server never sends accounting (the reference SQLite server):
    /// what it delivered is shown, graded SHOWN (LOWER_BOUND at the cap),
    /// never EXACT and never "none". A failure is known only from `isError`
    /// or a body that does not parse.
    Absent,
}

/// Where a tool's answers keep what the judge reads. Every path here takes
/// the one dotted syntax of [`super::path`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Shape {
    /// Dotted path to the item array inside the result JSON (`"data.rows"`).
    pub items_path: Option<String>,
    /// Dotted path to the one object a record answer describes
    /// (`"result.booking"`): a detail lookup's record, a prepare's or a
    /// preview's fields. Unset: the whole answer, whose nested objects the
    /// digest flattens (`data.exportId`).
    pub record_path: Option<String>,
    /// The item field that identifies an item (default `id`).
    pub id_field: Option<String>,
    /// The names of the accounting keys.
    pub keys: AccountingKeys,
    /// Where an item keeps each part of its deep link (issue 38 §3);
    /// `None`: the tool's citations carry no links.
    pub deep_link: Option<super::deep_link::DeepLinkMap>,
}

impl Shape {
    pub fn id_field(&self) -> &str {
        self.id_field.as_deref().unwrap_or("id")
    }

    /// The object a record answer describes: the one at `record_path`, or
    /// the whole answer when none is configured. `None` when the path
    /// names no object in it.
    pub fn record_in<'a>(&self, answer: &'a Map<String, Value>) -> Option<&'a Map<String, Value>> {
        match &self.record_path {
            None => Some(answer),
            Some(p) => super::path::get(answer, p)?.as_object(),
        }
    }
}

/// The accounting keys' names, the seed's by default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountingKeys {
    pub returned: String,
    pub total: String,
    pub total_lower_bound: String,
    pub has_more: String,
    pub next_cursor: String,
}

impl Default for AccountingKeys {
    fn default() -> Self {
        AccountingKeys {
            returned: "returned".into(),
            total: "total".into(),
            total_lower_bound: "total_lower_bound".into(),
            has_more: "has_more".into(),
            next_cursor: "next_cursor".into(),
        }
    }
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
