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
