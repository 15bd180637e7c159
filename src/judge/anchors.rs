//! Narration anchors: the directives code gives the responder. The server
//! never prints the answer itself; it tells the model which facts hold and
//! which phrasings they permit. Each kind is a variant with its text.

use serde::Serialize;

use super::grade::{Count, CountGrade};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Anchor {
    /// The population is known exactly.
    CountExact {
        source: String,
        total: u64,
        displayed: u64,
        complete: bool,
    },
    /// Only a lower bound of the population is known.
    CountLowerBound {
        source: String,
        at_least: u64,
        displayed: u64,
    },
    /// Only what was returned is known.
    CountShown { source: String, displayed: u64 },
    /// No accounting: no number may be uttered.
    CountUnknown { source: String },
    /// The server accounted for its answer and found nothing.
    Empty { source: String },
    /// The tool failed; nothing about the data may be inferred.
    ToolFailed { tool: String },
    /// A host-context field arrived at or over its bound.
    ContextTruncated { field: String },
}

impl Anchor {
    /// The anchor for one graded result.
    pub fn for_count(source: &str, c: &Count) -> Anchor {
        let source = source.to_string();
        match c.grade {
            CountGrade::Exact if c.total == Some(0) => Anchor::Empty { source },
            CountGrade::Exact => Anchor::CountExact {
                source,
                total: c.total.unwrap_or(c.displayed),
                displayed: c.displayed,
                complete: c.complete,
            },
            CountGrade::LowerBound => Anchor::CountLowerBound {
                source,
                at_least: c.total.unwrap_or(c.displayed),
                displayed: c.displayed,
            },
            CountGrade::Shown => Anchor::CountShown {
                source,
                displayed: c.displayed,
            },
            CountGrade::Unknown => Anchor::CountUnknown { source },
        }
    }

    /// The directive as the responder reads it.
    pub fn text(&self) -> String {
        match self {
            Anchor::CountExact { source, total, displayed, complete: true } => format!(
                "[{source}] The population is exactly {total} and all {displayed} are shown: you may say \"exactly {total}\" and call the list complete."
            ),
            Anchor::CountExact { source, total, displayed, .. } => format!(
                "[{source}] The population is exactly {total}; {displayed} are shown. Say \"exactly {total}\" of the population and speak of the shown ones as \"these {displayed}\"."
            ),
            Anchor::CountLowerBound { source, at_least, displayed } => format!(
                "[{source}] At least {at_least} match; the exact number is unknown. Say \"at least {at_least}\", never an exact total. Speak of the shown ones as \"these {displayed}\", never as all results."
            ),
            Anchor::CountShown { source, displayed } => format!(
                "[{source}] Only the {displayed} shown are known. Say \"these {displayed}\"; claim no total."
            ),
            Anchor::CountUnknown { source } => format!(
                "[{source}] The server gave no accounting. Utter no count at all."
            ),
            Anchor::Empty { source } => format!(
                "[{source}] The server accounted for its answer and found nothing: you may say there are none for this query."
            ),
            Anchor::ToolFailed { tool } => format!(
                "[{tool}] The tool failed. Say so; infer nothing about the data and do not answer from it."
            ),
            Anchor::ContextTruncated { field } => format!(
                "The host context field `{field}` arrived at its size bound and may be truncated: its length is a shown count, never a total."
            ),
        }
    }
}
