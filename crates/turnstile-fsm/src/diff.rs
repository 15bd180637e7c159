//! What changed between two versions of a table, for reviewers: rows whose
//! legality, target or effect changed, and pairs that appeared or vanished.

use std::collections::BTreeMap;
use std::fmt;

use super::table::{RowKind, Table};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Added {
        pair: (String, String),
        now: String,
    },
    Removed {
        pair: (String, String),
        was: String,
    },
    Changed {
        pair: (String, String),
        was: String,
        now: String,
    },
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Added { pair, now } => write!(f, "+ ({}, {}): {now}", pair.0, pair.1),
            Change::Removed { pair, was } => write!(f, "- ({}, {}): {was}", pair.0, pair.1),
            Change::Changed { pair, was, now } => {
                write!(f, "~ ({}, {}): {was}\n      now: {now}", pair.0, pair.1)
            }
        }
    }
}

/// One row, described by what decides behaviour (its reason is shown but a
/// reworded reason alone is not a change).
fn describe(t: &Table, kind: &RowKind, id: &str) -> (String, String) {
    match kind {
        RowKind::Legal { to, effect } => {
            let fx = effect
                .map(|e| format!(" ({})", t.effects[e as usize]))
                .unwrap_or_default();
            let key = format!("legal → {}{fx}", t.states[*to as usize]);
            (key.clone(), format!("{key} [{id}]"))
        }
        RowKind::Forbidden { why } => ("forbidden".into(), format!("forbidden [{id}]: {why}")),
    }
}

/// Rows whose legality, target or effect changed, pairs added or removed,
/// and a changed `initial`, `terminal` set or `precedence` (each changes
/// behaviour: a reordered precedence fires another event for one input).
pub fn diff(old: &Table, new: &Table) -> Vec<Change> {
    let mut out = Vec::new();
    let terminal = |t: &Table| -> Vec<String> {
        t.states
            .iter()
            .enumerate()
            .filter(|(i, _)| t.terminal[*i])
            .map(|(_, s)| s.clone())
            .collect()
    };
    let (a_init, b_init) = (
        &old.states[old.initial as usize],
        &new.states[new.initial as usize],
    );
    if a_init != b_init {
        out.push(Change::Changed {
            pair: ("initial".into(), "-".into()),
            was: a_init.clone(),
            now: b_init.clone(),
        });
    }
    let (a_term, b_term) = (terminal(old), terminal(new));
    if a_term != b_term {
        out.push(Change::Changed {
            pair: ("terminal".into(), "-".into()),
            was: a_term.join(", "),
            now: b_term.join(", "),
        });
    }
    let precedence = |t: &Table| -> Vec<String> {
        (t.precedence.iter())
            .map(|&e| t.events[e as usize].clone())
            .collect()
    };
    let (a_prec, b_prec) = (precedence(old), precedence(new));
    if a_prec != b_prec {
        let show = |p: &[String]| match p.is_empty() {
            true => "(none)".to_string(),
            false => p.join(" > "),
        };
        out.push(Change::Changed {
            pair: ("precedence".into(), "-".into()),
            was: show(&a_prec),
            now: show(&b_prec),
        });
    }
    out.extend(diff_rows(old, new));
    out
}

fn diff_rows(old: &Table, new: &Table) -> Vec<Change> {
    let index = |t: &Table| -> BTreeMap<(String, String), (String, String)> {
        t.rows
            .iter()
            .map(|r| {
                let pair = (
                    t.states[r.from as usize].clone(),
                    t.events[r.on as usize].clone(),
                );
                (pair, describe(t, &r.kind, &r.id))
            })
            .collect()
    };
    let (a, b) = (index(old), index(new));
    let mut out = Vec::new();
    for (pair, (key, text)) in &a {
        match b.get(pair) {
            None => out.push(Change::Removed {
                pair: pair.clone(),
                was: text.clone(),
            }),
            Some((key2, text2)) if key2 != key => out.push(Change::Changed {
                pair: pair.clone(),
                was: text.clone(),
                now: text2.clone(),
            }),
            _ => {}
        }
    }
    for (pair, (_, text)) in &b {
        if !a.contains_key(pair) {
            out.push(Change::Added {
                pair: pair.clone(),
                now: text.clone(),
            });
        }
    }
    out
}
