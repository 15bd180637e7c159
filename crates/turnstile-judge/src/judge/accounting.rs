//! Reading a tool result's accounting: `returned`, `total` or
//! `total_lower_bound`, `has_more`, `next_cursor`.
//!
//! `_meta` is read for these keys, not for its mere presence: newer MCP SDKs
//! put reserved `io.modelcontextprotocol/*` keys into every result's `_meta`,
//! so "no `_meta`" in the seed means "no accounting from the server".

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::contracts::AccountingKeys;
use super::path;
use turnstile_output::{JsonMap, ToolOutput};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accounting {
    pub returned: u64,
    /// Exact population size, when the server knows it.
    pub total: Option<u64>,
    /// A conservative lower bound, when the server cannot count exactly.
    pub total_lower_bound: Option<u64>,
    pub has_more: bool,
    pub next_cursor: Option<String>,
}

/// The accounting under `k`'s names, each a dotted path (`meta.total`),
/// in `m`.
fn from_map(m: &JsonMap, k: &AccountingKeys) -> Option<Accounting> {
    let get = |key: &str| path::get(m, key);
    let returned = get(&k.returned)?.as_u64()?;
    let total = get(&k.total).and_then(Value::as_u64);
    let total_lower_bound = get(&k.total_lower_bound).and_then(Value::as_u64);
    if total.is_none() && total_lower_bound.is_none() && get(&k.has_more).is_none() {
        return None;
    }
    Some(Accounting {
        returned,
        total,
        total_lower_bound,
        has_more: get(&k.has_more).and_then(Value::as_bool).unwrap_or(false),
        next_cursor: get(&k.next_cursor)
            .and_then(Value::as_str)
            .filter(|c| !c.is_empty())
            .map(str::to_string),
    })
}

/// The server's accounting for this result, under the tool's key names:
/// the result-level `_meta` first, then any block's, then the top level of
/// the logical result (`structuredContent`, or JSON found in its text).
pub fn read(out: &ToolOutput, keys: &AccountingKeys, json: Option<&Value>) -> Option<Accounting> {
    out.metas().find_map(|m| from_map(m, keys)).or_else(|| {
        json.and_then(Value::as_object)
            .and_then(|m| from_map(m, keys))
    })
}

/// [`read`] with the seed's key names, from `_meta` and `structuredContent`.
pub fn read_default(out: &ToolOutput) -> Option<Accounting> {
    read(out, &AccountingKeys::default(), out.structured.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(result: Value, expect: Option<(u64, Option<u64>, Option<u64>, bool)>) {
        let out = ToolOutput::from_value(&result);
        let got =
            read_default(&out).map(|a| (a.returned, a.total, a.total_lower_bound, a.has_more));
        assert_eq!(got, expect, "{result}");
    }

    #[test]
    fn reads_accounting_keys_not_meta_presence() {
        check(
            json!({"content": [], "_meta": {"returned": 10, "total_lower_bound": 189, "has_more": true}}),
            Some((10, None, Some(189), true)),
        );
        check(
            json!({"content": [{"type": "text", "text": "x", "_meta": {"returned": 0, "total": 0, "has_more": false}}]}),
            Some((0, Some(0), None, false)),
        );
        check(
            json!({"content": [{"type": "text", "text": "x"}], "_meta": {"io.modelcontextprotocol/server": "x"}}),
            None,
        );
        check(
            json!({"content": [{"type": "text", "text": "Search API error: 502"}]}),
            None,
        );
        check(json!("{}"), None);
    }

    #[test]
    fn accounting_keys_take_paths() {
        let keys = AccountingKeys {
            returned: "page.count".into(),
            total: "page.of".into(),
            ..AccountingKeys::default()
        };
        let body = json!({"page": {"count": 2, "of": 9}, "items": []});
        let out = ToolOutput::from_value(&json!({"content": []}));
        let a = read(&out, &keys, Some(&body)).expect("accounting under its paths");
        assert_eq!((a.returned, a.total), (2, Some(9)));
    }
}
