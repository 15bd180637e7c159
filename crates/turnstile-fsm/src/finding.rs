//! Validation findings: a stable code, where, what, and how to fix it.

use std::fmt;

use super::spans::Pos;

/// Every rule the validator enforces has one stable code. Codes are never
/// reused: reviewers and CI logs may grep for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Code {
    /// The file is not valid RON for the table schema.
    Syntax,
    /// A row or declaration names a state that is not declared.
    UnknownState,
    /// A row names an event that is not declared.
    UnknownEvent,
    /// A (state, event) pair has no row: the table is not total.
    MissingPair,
    /// A (state, event) pair has more than one row.
    DuplicatePair,
    /// Two rows share an id.
    DuplicateId,
    /// A row id is not kebab-case.
    MalformedId,
    /// `initial` is not a declared state.
    UndeclaredInitial,
    /// A `terminal` entry is not a declared state.
    UndeclaredTerminal,
    /// A legal row leaves a terminal state.
    LegalFromTerminal,
    /// A state cannot be reached from the initial state by legal rows.
    UnreachableState,
    /// A non-terminal state from which no terminal state can be reached.
    TrapState,
    /// A legal row's effect is not declared in `effects`.
    UnknownEffect,
    /// The table names a state, event or effect the Rust binding does not know.
    NotInBinding,
    /// The Rust binding names a state, event or effect the table lacks.
    MissingFromTable,
    /// A state, event or effect is declared twice.
    DuplicateDeclaration,
    /// A forbidden row has no reason.
    EmptyReason,
    /// The table's `name` is not its file's name (`harness.ron` declaring
    /// `name: "frame"`): two files could then claim one protocol.
    NameMismatch,
    /// An open group (`on: All` or `AllExcept`) lists a state that is not
    /// terminal: an event added later would be forbidden there silently,
    /// instead of being a missing pair someone must decide.
    OpenGroupOnWorkingState,
    /// A group covers a pair that an explicit row or another group covers.
    GroupOverlap,
    /// A group's `id` or `why` template has an unknown placeholder or an
    /// unmatched brace.
    UnknownPlaceholder,
    /// A group covers no pair at all.
    EmptyGroup,
    /// A legal row breaks a guarantee the protocol's code states about
    /// every table it runs (a pair it must forbid, an effect a row must
    /// carry, the states an effect may end in).
    InvariantBroken,
}

impl Code {
    pub fn id(self) -> &'static str {
        match self {
            Code::Syntax => "T001",
            Code::UnknownState => "T002",
            Code::UnknownEvent => "T003",
            Code::MissingPair => "T004",
            Code::DuplicatePair => "T005",
            Code::DuplicateId => "T006",
            Code::MalformedId => "T007",
            Code::UndeclaredInitial => "T008",
            Code::UndeclaredTerminal => "T009",
            Code::LegalFromTerminal => "T010",
            Code::UnreachableState => "T011",
            Code::TrapState => "T012",
            Code::UnknownEffect => "T013",
            Code::NotInBinding => "T014",
            Code::MissingFromTable => "T015",
            Code::DuplicateDeclaration => "T016",
            Code::EmptyReason => "T017",
            Code::NameMismatch => "T018",
            Code::OpenGroupOnWorkingState => "T019",
            Code::GroupOverlap => "T020",
            Code::UnknownPlaceholder => "T021",
            Code::EmptyGroup => "T022",
            Code::InvariantBroken => "T023",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Code::Syntax => "syntax",
            Code::UnknownState => "unknown-state",
            Code::UnknownEvent => "unknown-event",
            Code::MissingPair => "missing-pair",
            Code::DuplicatePair => "duplicate-pair",
            Code::DuplicateId => "duplicate-id",
            Code::MalformedId => "malformed-id",
            Code::UndeclaredInitial => "undeclared-initial",
            Code::UndeclaredTerminal => "undeclared-terminal",
            Code::LegalFromTerminal => "legal-from-terminal",
            Code::UnreachableState => "unreachable-state",
            Code::TrapState => "trap-state",
            Code::UnknownEffect => "unknown-effect",
            Code::NotInBinding => "not-in-binding",
            Code::MissingFromTable => "missing-from-table",
            Code::DuplicateDeclaration => "duplicate-declaration",
            Code::EmptyReason => "empty-reason",
            Code::NameMismatch => "name-mismatch",
            Code::OpenGroupOnWorkingState => "open-group-on-working-state",
            Code::GroupOverlap => "group-overlap",
            Code::UnknownPlaceholder => "unknown-placeholder",
            Code::EmptyGroup => "empty-group",
            Code::InvariantBroken => "invariant-broken",
        }
    }
}

/// One problem in one table file, located.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub code: Code,
    pub file: String,
    pub pos: Pos,
    pub message: String,
    pub hint: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "error[{} {}]: {}:{}:{}: {}\n  hint: {}",
            self.code.id(),
            self.code.name(),
            self.file,
            self.pos.line,
            self.pos.col,
            self.message,
            self.hint
        )
    }
}

/// All findings of one file; a file with any finding does not load.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Findings(pub Vec<Finding>);

impl fmt::Display for Findings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, finding) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{finding}")?;
        }
        Ok(())
    }
}

/// The closest candidate by edit distance, for "did you mean" hints.
pub(crate) fn closest<'a>(word: &str, candidates: &'a [String]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (edit_distance(word, c), c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c.as_str())
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}
