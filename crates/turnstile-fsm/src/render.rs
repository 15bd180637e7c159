//! Renders a table for reviewers: a matrix in Markdown, the legal graph in
//! Mermaid or Graphviz, JSON for programs (the chat page reads it), and RON
//! with every group expanded into its rows (a table file that loads again,
//! with the same hash).

use serde::Serialize;

use super::table::{RowKind, Table};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Markdown,
    Mermaid,
    Dot,
    Json,
    Ron,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "markdown" | "md" => Ok(Format::Markdown),
            "mermaid" => Ok(Format::Mermaid),
            "dot" => Ok(Format::Dot),
            "json" => Ok(Format::Json),
            "ron" => Ok(Format::Ron),
            other => Err(format!(
                "unknown format \"{other}\": use markdown, mermaid, dot, json or ron"
            )),
        }
    }
}

pub fn render(table: &Table, format: Format) -> String {
    match format {
        Format::Markdown => markdown(table),
        Format::Mermaid => mermaid(table),
        Format::Dot => dot(table),
        Format::Json => serde_json::to_string_pretty(&json(table)).unwrap_or_default(),
        Format::Ron => ron(table),
    }
}

/// The table file with every row explicit: each group replaced by the rows
/// it stands for, in place. It loads again, with the same hash; comments are
/// not kept.
pub fn ron(t: &Table) -> String {
    t.raw.to_ron()
}

/// The matrix: one line per state, one column per event; a legal cell shows
/// `→ Target`, a forbidden one `✗ row-id`. Then every row with its reason.
pub fn markdown(t: &Table) -> String {
    let mut out = format!("# `{}`\n\n{}\n\n", t.name, t.doc.trim());
    let term: Vec<&str> = t
        .states
        .iter()
        .enumerate()
        .filter(|(i, _)| t.terminal[*i])
        .map(|(_, s)| s.as_str())
        .collect();
    out += &format!(
        "initial: `{}` · terminal: {} · {} states × {} events = {} rows, {} legal, {} forbidden\n\n",
        t.states[t.initial as usize],
        term.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", "),
        t.states.len(),
        t.events.len(),
        t.rows.len(),
        t.legal_count(),
        t.rows.len() - t.legal_count()
    );
    if !t.precedence.is_empty() {
        let order: Vec<String> = (t.precedence.iter())
            .map(|&e| format!("`{}`", t.events[e as usize]))
            .collect();
        out += &format!(
            "precedence (of events found true at once, the first fires): {}\n\n",
            order.join(" > ")
        );
    }
    out += "| state \\ event |";
    for e in &t.events {
        out += &format!(" {e} |");
    }
    out += "\n|---|";
    out += &"---|".repeat(t.events.len());
    out += "\n";
    for (s, name) in t.states.iter().enumerate() {
        out += &format!("| **{name}** |");
        for e in 0..t.events.len() {
            let r = t.row_for(s as u16, e as u16);
            match &r.kind {
                RowKind::Legal { to, effect } => {
                    out += &format!(" → {}", t.states[*to as usize]);
                    if let Some(fx) = effect {
                        out += &format!(" ({})", t.effects[*fx as usize]);
                    }
                    out += " |";
                }
                RowKind::Forbidden { .. } => out += &format!(" ✗ `{}` |", r.id),
            }
        }
        out += "\n";
    }
    out += "\n| id | from | on | outcome |\n|---|---|---|---|\n";
    for r in &t.rows {
        let outcome = match &r.kind {
            RowKind::Legal { to, effect } => match effect {
                Some(fx) => format!("→ {} ({})", t.states[*to as usize], t.effects[*fx as usize]),
                None => format!("→ {}", t.states[*to as usize]),
            },
            RowKind::Forbidden { why } => format!("forbidden: {why}"),
        };
        out += &format!(
            "| `{}` | {} | {} | {} |\n",
            r.id, t.states[r.from as usize], t.events[r.on as usize], outcome
        );
    }
    out
}

/// The legal graph as a Mermaid state diagram.
pub fn mermaid(t: &Table) -> String {
    let mut out = String::from("stateDiagram-v2\n");
    out += &format!("    [*] --> {}\n", t.states[t.initial as usize]);
    for r in &t.rows {
        if let RowKind::Legal { to, .. } = r.kind {
            out += &format!(
                "    {} --> {}: {} [{}]\n",
                t.states[r.from as usize], t.states[to as usize], t.events[r.on as usize], r.id
            );
        }
    }
    for (i, s) in t.states.iter().enumerate() {
        if t.terminal[i] {
            out += &format!("    {s} --> [*]\n");
        }
    }
    out
}

/// The legal graph for Graphviz.
pub fn dot(t: &Table) -> String {
    let mut out = format!("digraph \"{}\" {{\n    rankdir=LR;\n", t.name);
    for (i, s) in t.states.iter().enumerate() {
        let shape = if t.terminal[i] {
            "doublecircle"
        } else {
            "circle"
        };
        out += &format!("    \"{s}\" [shape={shape}];\n");
    }
    out += &format!(
        "    \"__start\" [shape=point];\n    \"__start\" -> \"{}\";\n",
        t.states[t.initial as usize]
    );
    for r in &t.rows {
        if let RowKind::Legal { to, .. } = r.kind {
            out += &format!(
                "    \"{}\" -> \"{}\" [label=\"{} [{}]\"];\n",
                t.states[r.from as usize], t.states[to as usize], t.events[r.on as usize], r.id
            );
        }
    }
    out += "}\n";
    out
}

#[derive(Debug, Serialize)]
pub struct JsonTable<'a> {
    pub name: &'a str,
    pub doc: &'a str,
    pub hash: &'a str,
    pub initial: &'a str,
    pub terminal: Vec<&'a str>,
    pub states: &'a [String],
    pub events: &'a [String],
    pub effects: &'a [String],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub precedence: Vec<&'a str>,
    pub rows: Vec<JsonRow<'a>>,
}

#[derive(Debug, Serialize)]
pub struct JsonRow<'a> {
    pub id: &'a str,
    pub from: &'a str,
    pub on: &'a str,
    pub legal: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effect: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<&'a str>,
}

pub fn json(t: &Table) -> JsonTable<'_> {
    JsonTable {
        name: &t.name,
        doc: &t.doc,
        hash: &t.hash,
        initial: &t.states[t.initial as usize],
        terminal: t
            .states
            .iter()
            .enumerate()
            .filter(|(i, _)| t.terminal[*i])
            .map(|(_, s)| s.as_str())
            .collect(),
        states: &t.states,
        events: &t.events,
        effects: &t.effects,
        precedence: (t.precedence.iter())
            .map(|&e| t.events[e as usize].as_str())
            .collect(),
        rows: t
            .rows
            .iter()
            .map(|r| {
                let (legal, to, effect, why) = match &r.kind {
                    RowKind::Legal { to, effect } => (
                        true,
                        Some(t.states[*to as usize].as_str()),
                        effect.map(|e| t.effects[e as usize].as_str()),
                        None,
                    ),
                    RowKind::Forbidden { why } => (false, None, None, Some(why.as_str())),
                };
                JsonRow {
                    id: &r.id,
                    from: &t.states[r.from as usize],
                    on: &t.events[r.on as usize],
                    legal,
                    to,
                    effect,
                    why,
                }
            })
            .collect(),
    }
}
