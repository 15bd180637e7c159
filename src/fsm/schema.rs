//! The reviewer-facing RON schema: what a person writes in `tables/*.ron`.
//!
//! These types exist only at the boundary. They are deserialised, validated
//! into [`crate::fsm::Table`] and dropped; nothing at run time reads them.

use serde::{Deserialize, Serialize};

/// A transition table as written in RON, before validation.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename = "Table", deny_unknown_fields)]
pub struct RawTable {
    pub name: String,
    #[serde(default)]
    pub doc: String,
    pub initial: String,
    pub terminal: Vec<String>,
    pub states: Vec<String>,
    pub events: Vec<String>,
    #[serde(default)]
    pub effects: Vec<String>,
    pub rows: Vec<RawRow>,
}

/// One (state, event) pair. Forbidden rows are first-class data, not absences.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub enum RawRow {
    Legal {
        id: String,
        from: String,
        on: String,
        to: String,
        #[serde(default)]
        effect: Option<String>,
    },
    Forbidden {
        id: String,
        from: String,
        on: String,
        why: String,
    },
}

impl RawRow {
    pub fn id(&self) -> &str {
        match self {
            RawRow::Legal { id, .. } | RawRow::Forbidden { id, .. } => id,
        }
    }
    pub fn from(&self) -> &str {
        match self {
            RawRow::Legal { from, .. } | RawRow::Forbidden { from, .. } => from,
        }
    }
    pub fn on(&self) -> &str {
        match self {
            RawRow::Legal { on, .. } | RawRow::Forbidden { on, .. } => on,
        }
    }
}
