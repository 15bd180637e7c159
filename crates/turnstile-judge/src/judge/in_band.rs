//! Failures disguised as HTTP 200 (seed 003 §4.4). An upstream failure
//! relayed as text with `isError: false` is detected by the absence of the
//! marks every real answer carries — never by its wording. The error text is
//! never classified: keying the verdict on wording would put it one
//! rewording away from silently restoring the false green.
//!
//! A real answer of a tool with a result contract carries at least one of:
//! 1. (the contract itself — without one, plain text is the right answer)
//! 2. accounting in `_meta` (any block or the result), or structured content;
//! 3. a result structure: a result table (zero rows pass) or ≥ 1 counted hit;
//!    or one record: an object holding its id, the record the seed's envelope
//!    wraps (`{"status": "OK", "data": {"id": …}}`), or the object the
//!    contract's `record_path` names (an upstream's error text is none);
//! 4. a text block starting with the upstream program's fixed prefix — this
//!    mark may only clear a result, never condemn it.
//!
//! The predicate errs toward reading a failure as an answer: a false positive
//! would suppress a real answer and tell the user their data source is broken.
//!
//! A tool in `accounting = "absent"` mode never sends accounting, so its one
//! mark is a body that parses as data (or a fixed prefix): a failure is then
//! known only from `isError` or a body that does not parse.

use serde::Serialize;

use super::contracts::{AccountingMode, Contract};
use super::result::{Reading, Source};
use turnstile_output::{Block, ToolOutput};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Marks {
    pub accounting_or_structured: bool,
    pub structure: bool,
    /// One record was read (see [`Reading::record`]).
    pub record: bool,
    pub fixed_prefix: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerVerdict {
    /// A real answer (at least one mark).
    Answer,
    /// The tool has no result contract: plain text is its answer.
    NotJudged,
    /// No mark at all: an upstream failure relayed as data.
    InBandFailure,
}

pub fn judge(
    contract: Option<&Contract>,
    reading: &Reading,
    out: &ToolOutput,
) -> (AnswerVerdict, Marks) {
    let marks = Marks {
        accounting_or_structured: reading.accounting.is_some() || out.structured.is_some(),
        structure: reading.has_structure()
            || reading.accounting.as_ref().is_some_and(|a| a.returned > 0),
        record: reading.record.is_some(),
        fixed_prefix: contract.is_some_and(|c| {
            out.blocks.iter().any(|b| match b {
                Block::Text { text, .. } => c
                    .fixed_prefixes
                    .iter()
                    .any(|p| text.starts_with(p.as_str())),
                _ => false,
            })
        }),
    };
    let verdict = match contract {
        None => AnswerVerdict::NotJudged,
        Some(c) if c.accounting == AccountingMode::Absent => {
            if reading.source != Source::Unparsed || marks.fixed_prefix {
                AnswerVerdict::Answer
            } else {
                AnswerVerdict::InBandFailure
            }
        }
        Some(_)
            if marks.accounting_or_structured
                || marks.structure
                || marks.record
                || marks.fixed_prefix =>
        {
            AnswerVerdict::Answer
        }
        Some(_) => AnswerVerdict::InBandFailure,
    };
    (verdict, marks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(result: serde_json::Value, expect: AnswerVerdict) {
        let c = Contract {
            fixed_prefixes: vec!["## Image #".into()],
            stitch: false,
            ..Contract::default()
        };
        let out = ToolOutput::from_value(&result);
        let r = Reading::of(&out, Some(&c));
        assert_eq!(judge(Some(&c), &r, &out).0, expect, "{result}");
    }

    #[test]
    fn by_marks_not_by_wording() {
        use AnswerVerdict::*;
        // The measured 502: text, isError false, no _meta.
        check(
            json!({"content": [{"type": "text", "text": "Search API error: 502 Server Error: Bad Gateway"}]}),
            InBandFailure,
        );
        // The same failure reworded is still a failure; a reworded error is never read.
        check(
            json!({"content": [{"type": "text", "text": "upstream unavailable"}]}),
            InBandFailure,
        );
        // "{}" from a 401 is a failure, not an empty search.
        check(
            json!({"content": [{"type": "text", "text": "{}"}]}),
            InBandFailure,
        );
        // An accounted zero is an answer.
        check(
            json!({"content": [], "_meta": {"returned": 0, "total": 0, "has_more": false}}),
            Answer,
        );
        // A zero-row table is an answer.
        check(
            json!({"content": [], "structuredContent": {"columns": ["id"], "rows": []}}),
            Answer,
        );
        // The fixed prefix clears a result without _meta (a presentation the
        // upstream's program prints).
        check(
            json!({"content": [{"type": "text", "text": "## Image #1 — PANO-1"}]}),
            Answer,
        );
        // Reserved SDK keys are not accounting.
        check(
            json!({"content": [{"type": "text", "text": "x"}], "_meta": {"io.modelcontextprotocol/related-task": {}}}),
            InBandFailure,
        );
        let out = ToolOutput::from_value(&json!("plain text"));
        assert_eq!(judge(None, &Reading::of(&out, None), &out).0, NotJudged);
    }

    /// A record in JSON text, from a server held to accounting: the one
    /// its contract's `record_path` names, or the one the seed's envelope
    /// wraps, is a real answer; a path that names nothing is not.
    #[test]
    fn a_record_is_a_mark_of_a_real_answer() {
        use super::super::contracts::Shape;
        let at = |path: Option<&str>| Contract {
            shape: Shape {
                record_path: path.map(str::to_string),
                ..Shape::default()
            },
            ..Contract::default()
        };
        let verdict = |c: &Contract, body: &str| {
            let out = ToolOutput::from_value(&json!({"content": [{"type": "text", "text": body}]}));
            let (v, marks) = judge(Some(c), &Reading::of(&out, Some(c)), &out);
            (v, marks.record)
        };
        let nested = r#"{"result": {"booking": {"ref": 7}}}"#;
        assert_eq!(
            verdict(&at(Some("result.booking")), nested),
            (AnswerVerdict::Answer, true)
        );
        assert_eq!(
            verdict(&at(Some("data")), nested),
            (AnswerVerdict::InBandFailure, false)
        );
        assert_eq!(
            verdict(&at(None), r#"{"status": "OK", "data": {"id": "B-1"}}"#),
            (AnswerVerdict::Answer, true)
        );
        assert_eq!(
            verdict(&at(None), r#"{"status": 502, "data": {"error": "x"}}"#),
            (AnswerVerdict::InBandFailure, false)
        );
    }
}
