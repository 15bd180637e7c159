//! The tables a turn runs on. Its own module, so that start-up recovery and
//! the turn both depend on it and not on each other.

use crate::protocols::admission::Admission;
use crate::protocols::approval::Approval;
use crate::protocols::export::Export;
use crate::protocols::frame::Frame;
use crate::protocols::guardrail::Guardrail;
use crate::protocols::hold::Hold;
use crate::protocols::licence::Licence;
use crate::protocols::narration::Narration;
use crate::protocols::narrowing::Narrowing;
use crate::protocols::paging::Paging;
use crate::protocols::task::Task;
use crate::protocols::turn::Turn;
use crate::protocols::{Bound, LoadError, TableSet};

/// The tables a turn runs on, bound to their protocols.
#[derive(Clone)]
pub struct TurnTables {
    pub admission: Bound<Admission>,
    pub approval: Bound<Approval>,
    pub export: Bound<Export>,
    pub frame: Bound<Frame>,
    pub guardrail: Bound<Guardrail>,
    pub hold: Bound<Hold>,
    pub licence: Bound<Licence>,
    pub narrowing: Bound<Narrowing>,
    pub paging: Bound<Paging>,
    pub task: Bound<Task>,
    pub turn: Bound<Turn>,
    pub narration: Bound<Narration>,
}

impl TurnTables {
    /// The turn's tables out of a loaded set, each bound to its protocol.
    pub fn bind(set: &TableSet) -> Result<TurnTables, LoadError> {
        Ok(TurnTables {
            admission: set.bound()?,
            approval: set.bound()?,
            export: set.bound()?,
            frame: set.bound()?,
            guardrail: set.bound()?,
            hold: set.bound()?,
            licence: set.bound()?,
            narrowing: set.bound()?,
            paging: set.bound()?,
            task: set.bound()?,
            turn: set.bound()?,
            narration: set.bound()?,
        })
    }
}
