//! Running a table: fire events, record the trace, snapshot and restore.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::table::{Table, FORBIDDEN, NO_EFFECT};

/// A legal step that was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub row: u16,
    pub from: u16,
    pub to: u16,
    /// Effect index into [`Table::effects`], if the row has one.
    pub effect: Option<u16>,
}

/// A forbidden transition: the machine's state did not change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
pub struct Violation {
    pub table: String,
    pub row_id: String,
    pub state: String,
    pub event: String,
    pub why: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: forbidden row \"{}\": event \"{}\" in state \"{}\": {}",
            self.table, self.row_id, self.event, self.state, self.why
        )
    }
}

/// What a persisted machine looks like: enough to resume, and to notice that
/// the table changed underneath it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub table: String,
    pub table_hash: String,
    pub state: String,
    pub trace: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestoreError {
    #[error("snapshot is of table \"{found}\", not \"{expected}\"")]
    WrongTable { expected: String, found: String },
    /// The policy: a machine persisted under another version of its table is
    /// never reinterpreted under the new one. See docs/adr/0002-table-hash-policy.md.
    #[error("table \"{table}\" changed since this machine was saved (saved hash {saved}, current {current}); refusing to reinterpret it")]
    TableChanged {
        table: String,
        saved: String,
        current: String,
    },
    #[error("snapshot names state \"{0}\", which the table does not declare")]
    UnknownState(String),
    #[error("snapshot trace names row \"{0}\", which the table does not have")]
    UnknownRow(String),
}

/// A point in a machine's run to go back to: its state and how long its
/// trace was. Two words; taking one copies nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkpoint {
    state: u16,
    len: usize,
}

/// A running instance of a table. Cheap to create; the table is shared.
#[derive(Debug, Clone)]
pub struct Machine {
    table: Arc<Table>,
    state: u16,
    trace: Vec<u16>,
}

impl Machine {
    pub fn new(table: Arc<Table>) -> Self {
        let state = table.initial;
        Machine {
            table,
            state,
            trace: Vec::new(),
        }
    }

    pub fn table(&self) -> &Arc<Table> {
        &self.table
    }

    pub fn state(&self) -> u16 {
        self.state
    }

    pub fn state_name(&self) -> &str {
        &self.table.states[self.state as usize]
    }

    pub fn is_terminal(&self) -> bool {
        self.table.is_terminal(self.state)
    }

    /// Row indices of the legal steps taken, in order.
    pub fn trace(&self) -> &[u16] {
        &self.trace
    }

    pub fn trace_ids(&self) -> impl Iterator<Item = &str> {
        self.trace
            .iter()
            .map(|r| self.table.rows[*r as usize].id.as_str())
    }

    /// Fires one event (an index into [`Table::events`]). On a forbidden row
    /// the state is unchanged and the violation names the row.
    ///
    /// The violation is boxed so that the hot, legal path returns a small
    /// value in registers.
    #[inline]
    pub fn fire(&mut self, event: u16) -> Result<Step, Box<Violation>> {
        let cell = self.table.cell(self.state, event);
        if cell.to == FORBIDDEN {
            return Err(Box::new(self.violation(cell.row, event)));
        }
        let step = Step {
            row: cell.row,
            from: self.state,
            to: cell.to,
            effect: (cell.effect != NO_EFFECT).then_some(cell.effect),
        };
        self.state = cell.to;
        self.trace.push(cell.row);
        Ok(step)
    }

    /// Where the machine is now, to [`rewind`](Self::rewind) to.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            state: self.state,
            len: self.trace.len(),
        }
    }

    /// Undoes every step taken since `mark` (a mark of this machine, taken
    /// earlier in this run): the state and trace are as they were then.
    pub fn rewind(&mut self, mark: Checkpoint) {
        debug_assert!(mark.len <= self.trace.len(), "a mark from the future");
        self.state = mark.state;
        self.trace.truncate(mark.len);
    }

    /// Back to the initial state with an empty trace (capacity is kept).
    pub fn reset(&mut self) {
        self.state = self.table.initial;
        self.trace.clear();
    }

    /// What `fire` would do, without doing it.
    pub fn peek(&self, event: u16) -> Result<Step, Box<Violation>> {
        self.clone_shallow().fire(event)
    }

    fn clone_shallow(&self) -> Machine {
        Machine {
            table: self.table.clone(),
            state: self.state,
            trace: Vec::new(),
        }
    }

    #[cold]
    fn violation(&self, row: u16, event: u16) -> Violation {
        let r = &self.table.rows[row as usize];
        let why = match &r.kind {
            super::table::RowKind::Forbidden { why } => why.clone(),
            super::table::RowKind::Legal { .. } => String::new(),
        };
        Violation {
            table: self.table.name.clone(),
            row_id: r.id.clone(),
            state: self.table.states[self.state as usize].clone(),
            event: self.table.events[event as usize].clone(),
            why,
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            table: self.table.name.clone(),
            table_hash: self.table.hash.clone(),
            state: self.state_name().to_string(),
            trace: self.trace_ids().map(str::to_string).collect(),
        }
    }

    /// Restores a snapshot taken under the same table version; any other
    /// version is an explicit error, never a silent reinterpretation.
    pub fn restore(table: Arc<Table>, snap: &Snapshot) -> Result<Machine, RestoreError> {
        if snap.table != table.name {
            return Err(RestoreError::WrongTable {
                expected: table.name.clone(),
                found: snap.table.clone(),
            });
        }
        if snap.table_hash != table.hash {
            return Err(RestoreError::TableChanged {
                table: table.name.clone(),
                saved: snap.table_hash.clone(),
                current: table.hash.clone(),
            });
        }
        let state = table
            .state_index(&snap.state)
            .ok_or_else(|| RestoreError::UnknownState(snap.state.clone()))?;
        let trace = snap
            .trace
            .iter()
            .map(|id| {
                table
                    .row_index(id)
                    .ok_or_else(|| RestoreError::UnknownRow(id.clone()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Machine {
            table,
            state,
            trace,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOOR: &str = r#"Table(
        name: "door", doc: "d", initial: "Closed", terminal: ["Gone"],
        states: ["Closed", "Open", "Gone"], events: ["open", "close", "remove"],
        effects: [],
        rows: [
            Legal(id: "open-door", from: "Closed", on: "open", to: "Open"),
            Forbidden(id: "close-closed", from: "Closed", on: "close", why: "It is closed."),
            Legal(id: "remove-closed", from: "Closed", on: "remove", to: "Gone"),
            Forbidden(id: "open-open", from: "Open", on: "open", why: "It is open."),
            Legal(id: "close-door", from: "Open", on: "close", to: "Closed"),
            Forbidden(id: "remove-open", from: "Open", on: "remove", why: "Close it first."),
            Forbidden(id: "gone-open", from: "Gone", on: "open", why: "Gone."),
            Forbidden(id: "gone-close", from: "Gone", on: "close", why: "Gone."),
            Forbidden(id: "gone-remove", from: "Gone", on: "remove", why: "Gone."),
        ],
    )"#;

    #[test]
    fn rewind_undoes_the_steps_since_the_mark() {
        let table = Arc::new(super::super::load(DOOR, "door.ron", None).unwrap());
        let mut m = Machine::new(table);
        m.fire(0).unwrap();
        let mark = m.checkpoint();
        m.fire(1).unwrap();
        m.fire(0).unwrap();
        assert_eq!(m.trace().len(), 3);
        m.rewind(mark);
        assert_eq!((m.state_name(), m.trace().len()), ("Open", 1));
        assert_eq!(m.trace_ids().collect::<Vec<_>>(), ["open-door"]);
    }
}
