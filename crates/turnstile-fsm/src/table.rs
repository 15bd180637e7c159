//! The validated, indexed table the machines run on.
//!
//! States, events and effects are dense `u16` indices; the (state, event)
//! matrix is a flat array of [`Cell`]s so that firing an event is one index
//! computation and one load — no string is hashed or allocated per event.

use super::schema::RawTable;
use super::spans::Pos;

/// Marks a forbidden cell in [`Cell::to`].
pub const FORBIDDEN: u16 = u16::MAX;
/// Marks "no effect" in [`Cell::effect`].
pub const NO_EFFECT: u16 = u16::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    /// Index of the row in [`Table::rows`].
    pub row: u16,
    /// Target state, or [`FORBIDDEN`].
    pub to: u16,
    /// Effect index, or [`NO_EFFECT`].
    pub effect: u16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowKind {
    Legal { to: u16, effect: Option<u16> },
    Forbidden { why: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub id: String,
    pub from: u16,
    pub on: u16,
    pub kind: RowKind,
    /// Where the row starts in its source file.
    pub pos: Pos,
}

impl Row {
    pub fn is_legal(&self) -> bool {
        matches!(self.kind, RowKind::Legal { .. })
    }
}

/// A total, validated transition table.
#[derive(Debug, Clone)]
pub struct Table {
    pub name: String,
    pub doc: String,
    /// Where the table was loaded from (a path, or `builtin:NAME`).
    pub origin: String,
    pub states: Vec<String>,
    pub events: Vec<String>,
    pub effects: Vec<String>,
    pub initial: u16,
    pub terminal: Vec<bool>,
    /// Event indices in the table's `precedence` order.
    pub precedence: Vec<u16>,
    /// Rows in source order.
    pub rows: Vec<Row>,
    /// `states.len() * events.len()` cells, row-major by state.
    pub(crate) cells: Vec<Cell>,
    /// Hex SHA-256 of the table's canonical content (not of its formatting):
    /// of [`Table::raw`], so a group and the rows it stands for hash alike.
    pub hash: String,
    /// The table as written, every group expanded into its rows, in source
    /// order (not renumbered by [`Table::reordered`]): what the hash covers
    /// and what `tables render --format ron` prints.
    pub raw: RawTable,
}

impl Table {
    pub fn n_events(&self) -> usize {
        self.events.len()
    }

    #[inline]
    pub fn cell(&self, state: u16, event: u16) -> Cell {
        self.cells[state as usize * self.events.len() + event as usize]
    }

    /// The row for a (state, event) pair. Total by construction.
    pub fn row_for(&self, state: u16, event: u16) -> &Row {
        &self.rows[self.cell(state, event).row as usize]
    }

    pub fn state_index(&self, name: &str) -> Option<u16> {
        self.states.iter().position(|s| s == name).map(|i| i as u16)
    }

    pub fn event_index(&self, name: &str) -> Option<u16> {
        self.events.iter().position(|s| s == name).map(|i| i as u16)
    }

    pub fn effect_index(&self, name: &str) -> Option<u16> {
        self.effects
            .iter()
            .position(|s| s == name)
            .map(|i| i as u16)
    }

    pub fn row_index(&self, id: &str) -> Option<u16> {
        self.rows.iter().position(|r| r.id == id).map(|i| i as u16)
    }

    pub fn is_terminal(&self, state: u16) -> bool {
        self.terminal[state as usize]
    }

    /// Of events code found true of one input at once, the one to fire:
    /// the first in the table's `precedence`; an unlisted event ranks after
    /// every listed one, in the order given. `None` for no candidates.
    pub fn first_of(&self, candidates: &[u16]) -> Option<u16> {
        let rank = |e: u16| {
            (self.precedence.iter().position(|&p| p == e)).unwrap_or(self.precedence.len())
        };
        // `min_by_key` keeps the first of equal keys: unlisted events stay
        // in the order given.
        candidates.iter().copied().min_by_key(|&e| rank(e))
    }

    pub fn legal_count(&self) -> usize {
        self.rows.iter().filter(|r| r.is_legal()).count()
    }

    /// The same table with states, events and effects renumbered to the given
    /// orders (each a permutation of the current names). Bindings use this so
    /// that a Rust enum's discriminant *is* the table index.
    pub fn reordered(&self, states: &[&str], events: &[&str], effects: &[&str]) -> Option<Table> {
        let perm = |old: &[String], new: &[&str]| -> Option<Vec<u16>> {
            if old.len() != new.len() {
                return None;
            }
            old.iter()
                .map(|o| new.iter().position(|n| n == o).map(|i| i as u16))
                .collect()
        };
        let sp = perm(&self.states, states)?;
        let ep = perm(&self.events, events)?;
        let fp = perm(&self.effects, effects)?;
        let rows: Vec<Row> = self
            .rows
            .iter()
            .map(|r| Row {
                id: r.id.clone(),
                from: sp[r.from as usize],
                on: ep[r.on as usize],
                kind: match &r.kind {
                    RowKind::Legal { to, effect } => RowKind::Legal {
                        to: sp[*to as usize],
                        effect: effect.map(|e| fp[e as usize]),
                    },
                    other => other.clone(),
                },
                pos: r.pos,
            })
            .collect();
        let mut terminal = vec![false; states.len()];
        for (old, t) in self.terminal.iter().enumerate() {
            terminal[sp[old] as usize] = *t;
        }
        Some(Table {
            name: self.name.clone(),
            doc: self.doc.clone(),
            origin: self.origin.clone(),
            states: states.iter().map(|s| s.to_string()).collect(),
            events: events.iter().map(|s| s.to_string()).collect(),
            effects: effects.iter().map(|s| s.to_string()).collect(),
            initial: sp[self.initial as usize],
            terminal,
            precedence: self.precedence.iter().map(|&e| ep[e as usize]).collect(),
            cells: build_cells(&rows, states.len(), events.len()),
            rows,
            hash: self.hash.clone(),
            raw: self.raw.clone(),
        })
    }
}

pub(crate) fn build_cells(rows: &[Row], n_states: usize, n_events: usize) -> Vec<Cell> {
    let mut cells = vec![
        Cell {
            row: 0,
            to: FORBIDDEN,
            effect: NO_EFFECT
        };
        n_states * n_events
    ];
    for (i, r) in rows.iter().enumerate() {
        let (to, effect) = match &r.kind {
            RowKind::Legal { to, effect } => (*to, effect.unwrap_or(NO_EFFECT)),
            RowKind::Forbidden { .. } => (FORBIDDEN, NO_EFFECT),
        };
        cells[r.from as usize * n_events + r.on as usize] = Cell {
            row: i as u16,
            to,
            effect,
        };
    }
    cells
}
