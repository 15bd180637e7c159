//! The right to say "none" (seed 003 §4.3). "No results" may be said only
//! when the server attached its accounting to the response. The checks run
//! in this order; the order is the argument.

use serde::Serialize;

use super::contracts::Contract;
use super::result::Reading;
use turnstile_output::ToolOutput;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Emptiness {
    Empty,
    NonEmpty,
    /// Not a failure to compute: "unknown" is itself the answer.
    Unknown,
}

pub fn read_result_emptiness(
    contract: Option<&Contract>,
    reading: &Reading,
    out: &ToolOutput,
) -> Emptiness {
    // 1. A tool without a result contract says nothing about how much exists.
    if contract.is_none() {
        return Emptiness::Unknown;
    }
    // 2. A result with findings in it is not empty whatever else it lacks.
    let acc = reading.accounting.as_ref();
    let counted = reading
        .items
        .as_ref()
        .map(|i| i.len() as u64)
        .unwrap_or(0)
        .max(acc.as_ref().map_or(0, |a| a.returned));
    if counted > 0 {
        return Emptiness::NonEmpty;
    }
    // 3. A tool-level failure is not a statement about how much data exists.
    if out.is_error {
        return Emptiness::Unknown;
    }
    // 4. Only a server that marked the answer as its result set with its
    //    accounting, and counted zero, may be taken to say "nothing". An
    //    empty page of a non-empty population (total 12, or more beyond) is
    //    not an absence.
    match acc {
        Some(a) if a.total == Some(0) => Emptiness::Empty,
        Some(a) if a.total.is_none() && a.total_lower_bound.unwrap_or(0) == 0 && !a.has_more => {
            Emptiness::Empty
        }
        _ => Emptiness::Unknown,
    }
}

/// Why something is absent. Each cause has its own notice and its own way
/// back; the screen may look the same for all four.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AbsenceCause {
    /// The call was refused before it was made.
    BlockedByPermission,
    /// The tool server refused our credentials.
    AuthenticationFailed,
    /// Nothing inside the scope we sent (our own record says we narrowed).
    ZeroAfterNarrowing,
    /// Nothing at all, with no scope.
    ZeroFromStart,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(contract: bool, result: serde_json::Value, expect: Emptiness) {
        let c = Contract {
            fixed_prefixes: vec![],
            stitch: false,
            ..Contract::default()
        };
        let out = ToolOutput::from_value(&result);
        let contract = contract.then_some(&c);
        let reading = Reading::of(&out, contract);
        assert_eq!(
            read_result_emptiness(contract, &reading, &out),
            expect,
            "{result}"
        );
    }

    #[test]
    fn in_the_seeds_order() {
        let acc0 = json!({"returned": 0, "total": 0, "has_more": false});
        check(
            false,
            json!({"content": [], "_meta": acc0}),
            Emptiness::Unknown,
        );
        check(
            true,
            json!({"content": [{"type": "text", "text": "x"}], "structuredContent": {"items": [{"id": 1}]}}),
            Emptiness::NonEmpty,
        );
        check(
            true,
            json!({"content": [], "isError": true, "_meta": {"returned": 3, "total": 3}}),
            Emptiness::NonEmpty,
        );
        check(
            true,
            json!({"content": [], "isError": true, "_meta": acc0}),
            Emptiness::Unknown,
        );
        check(
            true,
            json!({"content": [], "_meta": acc0}),
            Emptiness::Empty,
        );
        // An empty page of a population the server counted is not "none".
        check(
            true,
            json!({"content": [], "_meta": {"returned": 0, "total": 12, "has_more": true}}),
            Emptiness::Unknown,
        );
        check(
            true,
            json!({"content": [], "_meta": {"returned": 0, "has_more": true, "next_cursor": "c"}}),
            Emptiness::Unknown,
        );
        check(
            true,
            json!({"content": [{"type": "text", "text": "{}"}]}),
            Emptiness::Unknown,
        );
        check(
            true,
            json!({"content": [{"type": "text", "text": "Search API error: 502 Server Error"}]}),
            Emptiness::Unknown,
        );
        check(
            true,
            json!({"content": [], "structuredContent": {"items": []}}),
            Emptiness::Unknown,
        );
    }
}
