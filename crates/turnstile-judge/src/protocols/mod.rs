//! Protocol bindings: one small module per table in `tables/`.
//!
//! A protocol declares its states, events and effects as Rust enums. Loading
//! checks that the table names exactly the same sets, then renumbers the table
//! so that an enum's discriminant is the table index: typed dispatch costs no
//! lookup. Reviewers may retarget or forbid rows without recompiling; they
//! cannot invent an effect the code lacks.
//!
//! **Architecture invariant:** bindings hold no decisions. Which transition is
//! legal lives in the table; this module only names things.

pub mod admission;
pub mod agui;
pub mod approval;
pub mod connect;
pub mod connection;
pub mod export;
pub mod frame;
pub mod guardrail;
pub mod hold;
pub mod licence;
pub mod narration;
pub mod narrowing;
pub mod ownership;
pub mod paging;
pub mod panel;
mod registry;
pub mod task;
pub mod telemetry;
pub mod turn;
pub mod ui_stream;

use std::marker::PhantomData;
use std::sync::Arc;

use crate::fsm::{BindingNames, Invariant, Machine, RestoreError, Snapshot, Table, Violation};

pub use registry::{
    binding_for, check_dir, check_source as registry_check_source, read_table_file, LoadError,
    TableSet, BUILTIN,
};

/// A closed set of names bound to a table's states, events or effects.
pub trait Names: Copy + std::fmt::Debug + PartialEq + 'static {
    const ALL: &'static [Self];
    const NAMES: &'static [&'static str];
    fn index(self) -> u16;
    fn name(self) -> &'static str {
        Self::NAMES[self.index() as usize]
    }
}

/// Declares a `Names` enum whose variants carry their table spelling.
#[macro_export]
macro_rules! names {
    ($(#[$m:meta])* $vis:vis enum $name:ident { $($(#[$vm:meta])* $var:ident = $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u16)]
        $vis enum $name { $($(#[$vm])* $var),+ }
        impl $crate::protocols::Names for $name {
            const ALL: &'static [Self] = &[$($name::$var),+];
            const NAMES: &'static [&'static str] = &[$($s),+];
            fn index(self) -> u16 { self as u16 }
        }
    };
}

/// A protocol: a table name, its compiled-in source, and its typed names.
pub trait Protocol: 'static {
    const NAME: &'static str;
    type State: Names;
    type Event: Names;
    type Effect: Names;
    /// What the protocol's code guarantees whatever its table says (issue
    /// 36): checked when the table loads, so the code never second-guesses
    /// a row the table chose.
    const INVARIANTS: &'static [Invariant<'static>] = &[];

    fn binding() -> BindingNames<'static> {
        BindingNames {
            states: Self::State::NAMES,
            events: Self::Event::NAMES,
            effects: Self::Effect::NAMES,
            invariants: Self::INVARIANTS,
        }
    }
}

/// A table checked against protocol `P` and renumbered to its enums.
pub struct Bound<P: Protocol> {
    table: Arc<Table>,
    /// One counter per row, by row index: a legal row is counted when it
    /// is fired, never when a stored machine is restored (issue 34).
    counters: telemetry::RowCounters,
    _p: PhantomData<P>,
}

impl<P: Protocol> Clone for Bound<P> {
    fn clone(&self) -> Self {
        Bound {
            table: self.table.clone(),
            counters: self.counters.clone(),
            _p: PhantomData,
        }
    }
}

impl<P: Protocol> Bound<P> {
    /// Binds a validated table. The table set validated names against the
    /// binding already, so reordering cannot fail for a table from it.
    pub fn new(table: &Table) -> Result<Self, LoadError> {
        let t = table
            .reordered(P::State::NAMES, P::Event::NAMES, P::Effect::NAMES)
            .ok_or_else(|| LoadError::Binding(P::NAME.to_string()))?;
        let table = Arc::new(t);
        Ok(Bound {
            counters: telemetry::RowCounters::for_table(&table),
            table,
            _p: PhantomData,
        })
    }

    pub fn table(&self) -> &Arc<Table> {
        &self.table
    }

    /// Of events found true of one input at once, the one the table's
    /// `precedence` fires first (issue 36). `None` for no candidates.
    pub fn first_of(&self, candidates: &[P::Event]) -> Option<P::Event> {
        let idx: Vec<u16> = candidates.iter().map(|e| e.index()).collect();
        (self.table.first_of(&idx)).map(|e| P::Event::ALL[e as usize])
    }

    pub fn machine(&self) -> Typed<P> {
        Typed {
            inner: Machine::new(self.table.clone()),
            counters: self.counters.clone(),
            _p: PhantomData,
        }
    }

    /// The machine a snapshot stored. The rows in its trace were counted
    /// when they were fired; restoring counts nothing.
    pub fn restore(&self, snap: &Snapshot) -> Result<Typed<P>, RestoreError> {
        Ok(Typed {
            inner: Machine::restore(self.table.clone(), snap)?,
            counters: self.counters.clone(),
            _p: PhantomData,
        })
    }
}

/// A step taken by a typed machine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TypedStep<P: Protocol> {
    pub row: u16,
    pub from: P::State,
    pub to: P::State,
    pub effect: Option<P::Effect>,
}

impl<P: Protocol> TypedStep<P> {
    /// An engine step named by the protocol's enums.
    fn of(s: crate::fsm::Step) -> Self {
        TypedStep {
            row: s.row,
            from: P::State::ALL[s.from as usize],
            to: P::State::ALL[s.to as usize],
            effect: s.effect.map(|e| P::Effect::ALL[e as usize]),
        }
    }
}

/// A machine of protocol `P`, fired with typed events.
pub struct Typed<P: Protocol> {
    inner: Machine,
    counters: telemetry::RowCounters,
    _p: PhantomData<P>,
}

impl<P: Protocol> Clone for Typed<P> {
    fn clone(&self) -> Self {
        Typed {
            inner: self.inner.clone(),
            counters: self.counters.clone(),
            _p: PhantomData,
        }
    }
}

impl<P: Protocol> Typed<P> {
    #[inline]
    pub fn fire(&mut self, event: P::Event) -> Result<TypedStep<P>, Box<Violation>> {
        let s = self.inner.fire(event.index())?;
        // An atomic add on a counter made at bind time: no allocation.
        self.counters.fired(s.row);
        // Each row taken, as an event on the span it was taken in (the
        // turn's, in an OpenTelemetry trace). Target `rows`, off unless a
        // subscriber asks for it: a disabled callsite costs one load.
        tracing::event!(
            target: "rows",
            tracing::Level::TRACE,
            turnstile.table = P::NAME,
            turnstile.row_id = %self.inner.table().rows[s.row as usize].id,
            turnstile.from = P::State::NAMES[s.from as usize],
            turnstile.to = P::State::NAMES[s.to as usize],
            turnstile.row_kind = "legal",
            "table row"
        );
        Ok(TypedStep::of(s))
    }

    pub fn state(&self) -> P::State {
        P::State::ALL[self.inner.state() as usize]
    }

    pub fn is_terminal(&self) -> bool {
        self.inner.is_terminal()
    }

    /// Would `event` be legal now? Does not change the machine.
    pub fn allows(&self, event: P::Event) -> bool {
        self.inner.peek(event.index()).is_ok()
    }

    /// What `fire` would do now, without doing it or counting the row.
    pub fn peek(&self, event: P::Event) -> Result<TypedStep<P>, Box<Violation>> {
        self.inner.peek(event.index()).map(TypedStep::of)
    }

    pub fn row_id(&self, row: u16) -> &str {
        &self.inner.table().rows[row as usize].id
    }

    /// Where the machine is now ([`Machine::checkpoint`]).
    pub fn checkpoint(&self) -> crate::fsm::Checkpoint {
        self.inner.checkpoint()
    }

    /// Undoes the steps since `checkpoint` ([`Machine::rewind`]).
    pub fn rewind(&mut self, checkpoint: crate::fsm::Checkpoint) {
        self.inner.rewind(checkpoint)
    }

    /// The rows taken since `mark`, by id: what a step adds to the trace.
    pub fn trace_since(&self, len: usize) -> Vec<String> {
        self.inner
            .trace_ids()
            .skip(len)
            .map(str::to_string)
            .collect()
    }

    pub fn untyped(&self) -> &Machine {
        &self.inner
    }

    pub fn snapshot(&self) -> Snapshot {
        self.inner.snapshot()
    }
}
