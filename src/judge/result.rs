//! Reading what a result delivered: items (objects from `structuredContent.items`,
//! or rows from `structuredContent.rows`), their ids, and how many there are.

use serde_json::Value;

use crate::mcp::ToolOutput;

/// The delivered items, when the result has a structure.
pub fn items(out: &ToolOutput) -> Option<Vec<Value>> {
    let s = out.structured.as_ref()?;
    if let Some(items) = s.get("items").and_then(Value::as_array) {
        return Some(items.clone());
    }
    let rows = s.get("rows").and_then(Value::as_array)?;
    let columns: Vec<&str> = s
        .get("columns")
        .and_then(Value::as_array)
        .map(|c| c.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // Rows become objects keyed by column, so cards and subset checks read
    // one shape.
    Some(
        rows.iter()
            .map(|r| match r.as_array() {
                Some(cells) if !columns.is_empty() => Value::Object(
                    columns
                        .iter()
                        .zip(cells)
                        .map(|(c, v)| (c.to_string(), v.clone()))
                        .collect(),
                ),
                _ => r.clone(),
            })
            .collect(),
    )
}

/// An item's id, for overlap checks.
pub fn id(item: &Value) -> Option<String> {
    item.get("id").map(|v| {
        v.as_str()
            .map(str::to_string)
            .unwrap_or_else(|| v.to_string())
    })
}

/// Whether the result carries a result structure at all (a table with zero
/// rows counts: "a table is the server having answered with a result set").
pub fn has_structure(out: &ToolOutput) -> bool {
    out.structured.as_ref().is_some_and(|s| {
        s.get("items").is_some_and(Value::is_array) || s.get("rows").is_some_and(Value::is_array)
    })
}

/// A single-value aggregate: exactly one row with exactly one column.
pub fn aggregate(out: &ToolOutput) -> Option<(String, Value)> {
    let s = out.structured.as_ref()?;
    let columns = s.get("columns")?.as_array()?;
    let rows = s.get("rows")?.as_array()?;
    match (columns.as_slice(), rows.as_slice()) {
        ([c], [row]) => {
            let v = row
                .as_array()
                .and_then(|r| r.first())
                .cloned()
                .unwrap_or_else(|| row.clone());
            Some((c.as_str().unwrap_or("value").to_string(), v))
        }
        _ => None,
    }
}

/// Keys that make a structured result a listing (or its accounting), never
/// one record.
const LISTING_KEYS: &[&str] = &["items", "rows", "columns", "returned"];

/// The one record a detail lookup delivered (e.g. the demo's
/// `get_panorama`): `structuredContent` is an object with an `id` and none
/// of [`LISTING_KEYS`]. A record is neither a listing ([`items`] is `None`:
/// nothing to count, no total) nor a single-value aggregate ([`aggregate`]
/// is `None`). A tool-level error delivers no record.
pub fn record(out: &ToolOutput) -> Option<&serde_json::Map<String, Value>> {
    if out.is_error {
        return None;
    }
    let s = out.structured.as_ref()?.as_object()?;
    let listing = LISTING_KEYS.iter().any(|k| s.contains_key(*k));
    (!listing && s.contains_key("id")).then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_record_is_not_a_listing_nor_an_aggregate() {
        let one = ToolOutput::from_value(&json!({
            "content": [{"type": "text", "text": "{\"id\":\"TA-1\"}"}],
            "structuredContent": {"id": "TA-1", "floor": 3, "annotations": []},
        }));
        assert_eq!(record(&one).and_then(|r| r.get("id")), Some(&json!("TA-1")));
        assert_eq!((items(&one), aggregate(&one)), (None, None));
        assert!(!has_structure(&one));

        let listing = ToolOutput::from_value(&json!({
            "content": [],
            "structuredContent": {"items": [{"id": "TA-1"}], "returned": 1},
        }));
        assert!(record(&listing).is_none());
        let table = ToolOutput::from_value(&json!({
            "content": [],
            "structuredContent": {"id": "x", "columns": ["count"], "rows": [[3]]},
        }));
        assert!(record(&table).is_none());
        let no_id = ToolOutput::from_value(&json!({
            "content": [],
            "structuredContent": {"projects": []},
        }));
        assert!(record(&no_id).is_none());
        let failed = ToolOutput::from_value(&json!({
            "content": [],
            "isError": true,
            "structuredContent": {"id": "TA-1"},
        }));
        assert!(record(&failed).is_none());
    }
}
