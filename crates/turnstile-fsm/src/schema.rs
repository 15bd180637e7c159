//! The reviewer-facing RON schema: what a person writes in `tables/*.ron`.
//!
//! These types exist only at the boundary. They are deserialised, validated
//! into [`crate::Table`] and dropped; nothing at run time reads them.
//! [`parse`] and [`RawTable::to_ron`] let a tool or a test edit a table as
//! data (load, change a row, write) rather than as text.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

pub use super::group::EventSet;

/// A transition table as written in RON, before validation.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
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
    /// When code finds several of these events true of one input at once,
    /// the first listed is the one fired (issue 36): the order of a
    /// classification is the table's, not an `if` chain's. Events not
    /// listed rank after every listed one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub precedence: Vec<String>,
    pub rows: Vec<RawRow>,
}

/// One entry of `rows`: a row for one (state, event) pair, or a group of
/// forbidden rows. Forbidden rows are first-class data, not absences.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
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
    /// One `Forbidden` row for each state of `from` and each event of `on`;
    /// `id` and `why` are templates (`{from}`, `{from-id}`, `{on}`,
    /// `{on-id}`). Expanded before validation: the hash, the machines and
    /// every rendering see only the rows it stands for.
    ForbiddenEach {
        id: String,
        from: Vec<String>,
        on: EventSet,
        why: String,
    },
}

impl RawRow {
    /// The row's id, or a group's id template.
    pub fn id(&self) -> &str {
        match self {
            RawRow::Legal { id, .. }
            | RawRow::Forbidden { id, .. }
            | RawRow::ForbiddenEach { id, .. } => id,
        }
    }

    /// The row's state, `None` for a group.
    pub fn from(&self) -> Option<&str> {
        match self {
            RawRow::Legal { from, .. } | RawRow::Forbidden { from, .. } => Some(from),
            RawRow::ForbiddenEach { .. } => None,
        }
    }

    /// The row's event, `None` for a group.
    pub fn on(&self) -> Option<&str> {
        match self {
            RawRow::Legal { on, .. } | RawRow::Forbidden { on, .. } => Some(on),
            RawRow::ForbiddenEach { .. } => None,
        }
    }

    pub fn is_group(&self) -> bool {
        matches!(self, RawRow::ForbiddenEach { .. })
    }
}

/// The RON options tables are read with (`effect: "x"` for `Some("x")`).
pub fn options() -> ron::Options {
    ron::Options::default().with_default_extension(ron::extensions::Extensions::IMPLICIT_SOME)
}

/// Parses a table file's text, without validating it.
pub fn parse(src: &str) -> Result<RawTable, ron::error::SpannedError> {
    options().from_str(src)
}

impl RawTable {
    /// The table as RON in the layout of `tables/*.ron` — one entry per
    /// line — which [`parse`] and [`crate::load`] read back as the same
    /// table. Comments are not kept.
    pub fn to_ron(&self) -> String {
        let list = |names: &[String]| {
            let items: Vec<String> = names.iter().map(|n| quote(n)).collect();
            format!("[{}]", items.join(", "))
        };
        let mut out = String::from("Table(\n");
        let _ = writeln!(out, "    name: {},", quote(&self.name));
        let _ = writeln!(out, "    doc: {},", quote(&self.doc));
        let _ = writeln!(out, "    initial: {},", quote(&self.initial));
        let _ = writeln!(out, "    terminal: {},", list(&self.terminal));
        let _ = writeln!(out, "    states: {},", list(&self.states));
        let _ = writeln!(out, "    events: {},", list(&self.events));
        let _ = writeln!(out, "    effects: {},", list(&self.effects));
        if !self.precedence.is_empty() {
            let _ = writeln!(out, "    precedence: {},", list(&self.precedence));
        }
        out += "    rows: [\n";
        for r in &self.rows {
            let entry = match r {
                RawRow::Legal {
                    id,
                    from,
                    on,
                    to,
                    effect,
                } => {
                    let effect = effect
                        .as_ref()
                        .map(|e| format!(", effect: {}", quote(e)))
                        .unwrap_or_default();
                    format!(
                        "Legal(id: {}, from: {}, on: {}, to: {}{effect})",
                        quote(id),
                        quote(from),
                        quote(on),
                        quote(to)
                    )
                }
                RawRow::Forbidden { id, from, on, why } => format!(
                    "Forbidden(id: {}, from: {}, on: {}, why: {})",
                    quote(id),
                    quote(from),
                    quote(on),
                    quote(why)
                ),
                RawRow::ForbiddenEach { id, from, on, why } => {
                    let on = match on {
                        EventSet::All => "All".to_string(),
                        EventSet::AllExcept(l) => format!("AllExcept({})", list(l)),
                        EventSet::Only(l) => format!("Only({})", list(l)),
                    };
                    format!(
                        "ForbiddenEach(id: {}, from: {}, on: {on}, why: {})",
                        quote(id),
                        list(from),
                        quote(why)
                    )
                }
            };
            let _ = writeln!(out, "        {entry},");
        }
        out += "    ],\n)\n";
        out
    }
}

/// A RON string literal.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn to_ron_reads_back_as_the_same_table() {
        let t = RawTable {
            name: "t".into(),
            doc: "A \"quoted\" doc,\nover two lines, with \\ and \u{7} and 한국어.".into(),
            initial: "A".into(),
            terminal: vec!["B".into()],
            states: vec!["A".into(), "B".into()],
            events: vec!["go".into(), "stop".into()],
            effects: vec![],
            precedence: vec!["stop".into(), "go".into()],
            rows: vec![
                RawRow::Legal {
                    id: "go".into(),
                    from: "A".into(),
                    on: "go".into(),
                    to: "B".into(),
                    effect: None,
                },
                RawRow::Legal {
                    id: "stay".into(),
                    from: "A".into(),
                    on: "stop".into(),
                    to: "A".into(),
                    effect: Some("x".into()),
                },
                RawRow::ForbiddenEach {
                    id: "{on-id}-after-b".into(),
                    from: vec!["B".into()],
                    on: EventSet::AllExcept(vec!["stop".into()]),
                    why: "B is {{final}}.".into(),
                },
                RawRow::ForbiddenEach {
                    id: "x".into(),
                    from: vec![],
                    on: EventSet::All,
                    why: "".into(),
                },
                RawRow::ForbiddenEach {
                    id: "y".into(),
                    from: vec!["B".into()],
                    on: EventSet::Only(vec!["stop".into()]),
                    why: "'".into(),
                },
            ],
        };
        let text = t.to_ron();
        assert_eq!(parse(&text).unwrap(), t, "{text}");
    }
}
