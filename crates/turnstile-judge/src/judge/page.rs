//! One returned page as the frames show it: a real answer and its text-free
//! summary ("10 items"), or a failure (`isError`, or the seed's failure
//! disguised as 200) with the summary, the digest's note and the anchor the
//! user is told. The verdict itself is [`in_band::judge`]'s.

use super::contracts::{AccountingMode, Contract};
use super::in_band::{self, AnswerVerdict};
use super::result::Reading;
use super::Anchor;
use turnstile_output::ToolOutput;

/// A page that is not a real answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The tool_result frame's summary.
    pub summary: String,
    /// What the models' digest says of it.
    pub note: &'static str,
    /// What the user is told, when it is the listing's first page.
    pub anchor: Anchor,
}

/// The failure `out` is, if it is one.
pub fn failure(
    tool: &str,
    contract: Option<&Contract>,
    reading: &Reading,
    out: &ToolOutput,
) -> Option<Failure> {
    if out.is_error {
        return Some(Failure {
            summary: "the tool reported an error".into(),
            note: "the tool reported an error",
            anchor: Anchor::ToolFailed { tool: tool.into() },
        });
    }
    let (verdict, _) = in_band::judge(contract, reading, out);
    if verdict != AnswerVerdict::InBandFailure {
        return None;
    }
    let summary = match contract.map(|c| c.accounting) {
        Some(AccountingMode::Absent) => {
            "the answer did not parse as data: treated as a failed data source"
        }
        _ => "no accounting and no result structure: treated as a failed data source",
    };
    Some(Failure {
        summary: summary.into(),
        note: "in-band failure: not a real answer",
        anchor: Anchor::InBandFailure { tool: tool.into() },
    })
}

/// A one-line, text-free description of a real answer.
pub fn summary(reading: &Reading, out: &ToolOutput) -> String {
    match (&reading.aggregate, &reading.items, &reading.record) {
        (Some(_), _, _) => "one value".to_string(),
        (None, Some(items), _) => format!("{} items", items.len()),
        (None, None, Some(_)) => "one record".to_string(),
        (None, None, None) => format!("{} content blocks", out.blocks.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_200_without_marks_is_a_failure_and_an_error_is_one_too() {
        let c = Contract::default();
        let text = ToolOutput::from_value(
            &json!({"content": [{"type": "text", "text": "Search API error: 502"}]}),
        );
        let f = failure("search", Some(&c), &Reading::of(&text, Some(&c)), &text).unwrap();
        assert_eq!(
            f.anchor,
            Anchor::InBandFailure {
                tool: "search".into()
            }
        );
        assert!(f.summary.contains("treated as a failed data source"));
        let err = ToolOutput::from_value(
            &json!({"content": [{"type": "text", "text": "boom"}], "isError": true}),
        );
        let f = failure("search", None, &Reading::of(&err, None), &err).unwrap();
        assert_eq!(
            f.anchor,
            Anchor::ToolFailed {
                tool: "search".into()
            }
        );
        let ok = ToolOutput::from_value(
            &json!({"content": [], "_meta": {"returned": 0, "total": 0, "has_more": false}}),
        );
        let r = Reading::of(&ok, Some(&c));
        assert_eq!(failure("search", Some(&c), &r, &ok), None);
        assert_eq!(summary(&r, &ok), "0 content blocks");
    }
}
