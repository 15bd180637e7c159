//! Reading what a result delivered: the one seam between the many shapes
//! tool servers answer in and the judge. A [`Reading`] is made once per
//! result; every judgement (in-band failure, emptiness, grade, stitch,
//! narrowing) reads the same one.
//!
//! For a tool with a result contract, the logical result is found in this
//! order (first that applies):
//!
//! | where | example | [`Source`] |
//! |---|---|---|
//! | `structuredContent` | `{"items": [...]}` | `structured` |
//! | JSON in one or several text blocks | `{"photos": [...], "count": 10}` | `json_text` |
//! | a Python literal in text (parsed, never evaluated) | `[{'n': 651}]` | `literal_text` |
//! | the text of an embedded `resource` block | `{"rows": [...]}` | `embedded_resource` |
//! | `resource_link` blocks, one item each | `{"uri": "file:///a", "name": "a"}` | `resource_links` |
//!
//! Within it, items are found at the configured `items_path`, else under
//! `items`, else as a row/column table (`columns` + `rows`), else as the
//! top-level array, else under the one top-level key that holds an array.
//! A tool without a contract is read from `structuredContent` only (its text
//! is its answer and is not judged).

use serde::Serialize;
use serde_json::{Map, Value};

use super::accounting::{self, Accounting};
use super::contracts::{AccountingMode, Contract, Shape};
use super::path;
use turnstile_output::{pyliteral, Block, ToolOutput};

/// Where the logical result was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Structured,
    JsonText,
    LiteralText,
    EmbeddedResource,
    ResourceLinks,
    /// Nothing parsed: plain text, or nothing at all.
    Unparsed,
}

/// A result as the judge reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub source: Source,
    /// The delivered items, when the result has a structure that holds
    /// them (an empty table counts: "the server answered with a result set").
    pub items: Option<Vec<Value>>,
    /// A single-value aggregate: its label and value.
    pub aggregate: Option<(String, Value)>,
    /// The one record a detail lookup delivered.
    pub record: Option<Map<String, Value>>,
    /// The server's accounting (always `None` in `absent` mode).
    pub accounting: Option<Accounting>,
    pub mode: AccountingMode,
    /// The item field that identifies an item.
    pub id_field: String,
}

/// Keys that make a structured result a listing (or its accounting), never
/// one record.
const LISTING_KEYS: &[&str] = &["items", "rows", "columns", "returned"];

impl Reading {
    pub fn of(out: &ToolOutput, contract: Option<&Contract>) -> Reading {
        let default = Shape::default();
        let shape = contract.map_or(&default, |c| &c.shape);
        let mode = contract.map_or(AccountingMode::Required, |c| c.accounting);
        let (json, source) = match contract {
            Some(_) => logical(out),
            None => match &out.structured {
                Some(v) => (Some(v.clone()), Source::Structured),
                None => (None, Source::Unparsed),
            },
        };
        let accounting = match mode {
            // Whatever such a server puts in `_meta` is not held to the
            // seed's accounting rules, so it is not read as accounting.
            AccountingMode::Absent => None,
            AccountingMode::Required => accounting::read(out, &shape.keys, json.as_ref()),
        };
        let detect = contract.is_some();
        let mut items = json.as_ref().and_then(|j| find_items(j, shape, detect));
        if items.is_none() && source == Source::Unparsed && detect {
            let links: Vec<Value> = out
                .blocks
                .iter()
                .filter_map(|b| match b {
                    Block::Link { link, .. } => Some(Value::Object(link.clone())),
                    _ => None,
                })
                .collect();
            if !links.is_empty() {
                items = Some(links);
            }
        }
        let source = match (&items, source) {
            (Some(_), Source::Unparsed) => Source::ResourceLinks,
            (_, s) => s,
        };
        let id_field = shape.id_field().to_string();
        let aggregate = json.as_ref().and_then(|j| {
            aggregate_of(j, items.as_deref(), &id_field, detect, source, mode)
                .filter(|_| accounting.as_ref().is_none_or(|a| !a.has_more))
        });
        let record = match (&json, &aggregate, out.is_error) {
            (Some(Value::Object(s)), None, false) => record_of(s, shape, items.is_some()),
            _ => None,
        };
        // The logical result itself is not kept: the items, the aggregate
        // and the record are what is judged, and a copy of the whole result
        // held until then cost a result's size per open turn (issue 19 §4).
        drop(json);
        Reading {
            source,
            items,
            aggregate,
            record,
            accounting,
            mode,
            id_field,
        }
    }

    /// Whether the result carries a result structure at all.
    pub fn has_structure(&self) -> bool {
        self.items.is_some() || self.aggregate.is_some()
    }

    /// An item's id, for overlap and subset checks.
    pub fn id(&self, item: &Value) -> Option<String> {
        id_in(item, &self.id_field)
    }
}

/// The one record an object answer is, if it is one: the object at the
/// contract's `record_path` when one is configured; else the answer
/// itself when it holds its id and is no listing, or the record the seed's
/// envelope wraps (`{"status": "OK", "data": {"id": …}}`), which works
/// with no configuration.
fn record_of(
    answer: &Map<String, Value>,
    shape: &Shape,
    has_items: bool,
) -> Option<Map<String, Value>> {
    if shape.record_path.is_some() {
        return shape.record_in(answer).cloned();
    }
    let id_field = shape.id_field();
    let listing = LISTING_KEYS.iter().any(|k| answer.contains_key(*k))
        || has_items
        || path::get(answer, &shape.keys.returned).is_some();
    if listing {
        return None;
    }
    if path::get(answer, id_field).is_some() {
        return Some(answer.clone());
    }
    answer
        .get("data")
        .and_then(Value::as_object)
        .filter(|d| path::get(d, id_field).is_some())
        .cloned()
}

/// An item's value at `field` (a dotted path), as a comparable string.
pub fn id_in(item: &Value, field: &str) -> Option<String> {
    path::get_value(item, field)
        .filter(|v| !v.is_null())
        .map(|v| {
            v.as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string())
        })
}

/// An item's `id` (the default id field).
pub fn id(item: &Value) -> Option<String> {
    id_in(item, "id")
}

/// Text parsed as data: JSON first, then a Python literal. Only arrays,
/// objects and numbers count as data; a quoted string is prose.
fn parse_text(text: &str) -> Option<(Value, Source)> {
    let t = text.trim();
    if t.is_empty() {
        return None;
    }
    let parsed = match serde_json::from_str::<Value>(t) {
        Ok(v) => Some((v, Source::JsonText)),
        Err(_) if pyliteral::looks_like_literal(t) => {
            pyliteral::parse(t).ok().map(|v| (v, Source::LiteralText))
        }
        Err(_) => None,
    };
    parsed.filter(|(v, _)| v.is_array() || v.is_object() || v.is_number())
}

/// The logical result of a tool with a contract (see the module table).
fn logical(out: &ToolOutput) -> (Option<Value>, Source) {
    if let Some(v) = &out.structured {
        return (Some(v.clone()), Source::Structured);
    }
    let mut found: Vec<(Value, Source)> = Vec::new();
    for b in &out.blocks {
        match b {
            Block::Text { text, .. } => found.extend(parse_text(text)),
            Block::Resource {
                text: Some(text), ..
            } => found.extend(parse_text(text).map(|(v, _)| (v, Source::EmbeddedResource))),
            _ => {}
        }
    }
    match found.len() {
        0 => (None, Source::Unparsed),
        1 => {
            let (v, s) = found.remove(0);
            (Some(v), s)
        }
        _ => {
            let source = found[0].1;
            // Several data blocks: one item each, or one batch of items each.
            if found.iter().all(|(v, _)| v.is_object()) {
                (
                    Some(Value::Array(found.into_iter().map(|(v, _)| v).collect())),
                    source,
                )
            } else if found.iter().all(|(v, _)| v.is_array()) {
                let all = found
                    .into_iter()
                    .flat_map(|(v, _)| match v {
                        Value::Array(a) => a,
                        _ => Vec::new(),
                    })
                    .collect();
                (Some(Value::Array(all)), source)
            } else {
                // Mixed shapes: no one logical result to read.
                (None, Source::Unparsed)
            }
        }
    }
}

/// Rows keyed by column, so cards and subset checks read one shape.
fn table(columns: &[Value], rows: &[Value]) -> Vec<Value> {
    let columns: Vec<&str> = columns.iter().filter_map(Value::as_str).collect();
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
        .collect()
}

/// The items inside an array-holding object: a `columns`/`rows` table or
/// a plain array.
fn items_at(parent: &Map<String, Value>, key: &str) -> Option<Vec<Value>> {
    let arr = parent.get(key)?.as_array()?;
    match parent.get("columns").and_then(Value::as_array) {
        Some(cols) if key != "columns" => Some(table(cols, arr)),
        _ => Some(arr.clone()),
    }
}

fn find_items(json: &Value, shape: &Shape, detect: bool) -> Option<Vec<Value>> {
    let id_field = shape.id_field();
    // A tool configured to answer one record keeps its lists inside it.
    if shape.record_path.is_some() && shape.items_path.is_none() {
        return None;
    }
    if let Some(path) = &shape.items_path {
        let mut parent: Option<&Map<String, Value>> = None;
        let mut here = json;
        let mut last = "";
        for part in path.split('.').filter(|p| !p.is_empty()) {
            parent = here.as_object();
            here = parent?.get(part)?;
            last = part;
        }
        return match parent {
            Some(p) => items_at(p, last),
            None => here.as_array().cloned(),
        };
    }
    match json {
        Value::Array(a) if detect => Some(a.clone()),
        Value::Object(map) => {
            if map.get("items").is_some_and(Value::is_array) {
                return items_at(map, "items");
            }
            if map.get("rows").is_some_and(Value::is_array) {
                return items_at(map, "rows");
            }
            // A record (it has an id) keeps lists inside it: its
            // annotations are not a listing.
            if !detect || path::get(map, id_field).is_some() {
                return None;
            }
            // The one top-level key holding an array (of objects, if several
            // hold arrays).
            let arrays: Vec<&String> = map
                .iter()
                .filter(|(k, v)| v.is_array() && k.as_str() != "columns")
                .map(|(k, _)| k)
                .collect();
            let pick = match arrays.as_slice() {
                [one] => Some(*one),
                _ => {
                    let of_objects: Vec<&&String> = arrays
                        .iter()
                        .filter(|k| {
                            map[k.as_str()]
                                .as_array()
                                .is_some_and(|a| !a.is_empty() && a.iter().all(Value::is_object))
                        })
                        .collect();
                    match of_objects.as_slice() {
                        [one] => Some(**one),
                        _ => None,
                    }
                }
            };
            pick.and_then(|k| items_at(map, k))
        }
        _ => None,
    }
}

/// A scalar a single-value aggregate may hold.
fn aggregate_value(v: &Value, label: &str) -> bool {
    v.is_number() || v.is_null() || (v.is_string() && label.contains('('))
}

/// A single-value aggregate, however it arrives: a one-row, one-column
/// table; a one-row result with one field (`[{'n': 651}]`); a one-key
/// object (`{"count": 613}`, from structured content or a server without
/// accounting); a bare number.
fn aggregate_of(
    json: &Value,
    items: Option<&[Value]>,
    id_field: &str,
    detect: bool,
    source: Source,
    mode: AccountingMode,
) -> Option<(String, Value)> {
    // The row/column table: exactly one row with exactly one column.
    if let (Some(cols), Some(rows)) = (
        json.get("columns").and_then(Value::as_array),
        json.get("rows").and_then(Value::as_array),
    ) {
        return match (cols.as_slice(), rows.as_slice()) {
            ([c], [row]) => {
                let v = row
                    .as_array()
                    .and_then(|r| r.first())
                    .cloned()
                    .unwrap_or_else(|| row.clone());
                Some((c.as_str().unwrap_or("value").to_string(), v))
            }
            _ => None,
        };
    }
    if !detect {
        return None;
    }
    if let Some(n) = json.as_number() {
        return Some(("value".into(), Value::Number(n.clone())));
    }
    // One row with one field. An id alone is a one-item listing, not a value.
    if let Some([Value::Object(row)]) = items {
        if let (1, Some((k, v))) = (row.len(), row.iter().next()) {
            if k != id_field && aggregate_value(v, k) {
                return Some((k.clone(), v.clone()));
            }
        }
        return None;
    }
    // A one-key object. From text in `required` mode it must still be a
    // table or a row: a bare `{"status": 502}` is not taken for an answer.
    let trusted = source == Source::Structured || mode == AccountingMode::Absent;
    match json.as_object() {
        Some(map) if trusted && map.len() == 1 && items.is_none() => {
            let (k, v) = map.iter().next()?;
            (k != id_field && v.is_number()).then(|| (k.clone(), v.clone()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn contract() -> Contract {
        Contract::default()
    }

    fn read(v: Value) -> Reading {
        Reading::of(&ToolOutput::from_value(&v), Some(&contract()))
    }

    #[test]
    fn a_record_is_not_a_listing_nor_an_aggregate() {
        let one = read(json!({
            "content": [{"type": "text", "text": "{\"id\":\"TA-1\"}"}],
            "structuredContent": {"id": "TA-1", "floor": 3, "annotations": []},
        }));
        assert_eq!(
            one.record.as_ref().and_then(|r| r.get("id")),
            Some(&json!("TA-1"))
        );
        assert_eq!(one.aggregate, None);

        let listing = read(json!({
            "content": [],
            "structuredContent": {"items": [{"id": "TA-1"}], "returned": 1},
        }));
        assert!(listing.record.is_none());
        assert_eq!(listing.aggregate, None, "an id alone is not a value");
        let table = read(json!({
            "content": [],
            "structuredContent": {"id": "x", "columns": ["count"], "rows": [[3]]},
        }));
        assert!(table.record.is_none());
        let failed = read(json!({
            "content": [],
            "isError": true,
            "structuredContent": {"id": "TA-1"},
        }));
        assert!(failed.record.is_none());
    }

    /// Issue 33 §4: a record wrapped in the seed's envelope is read with
    /// no configuration; `record_path` points at any other layout; a path
    /// that names nothing in the answer reads no record.
    #[test]
    fn a_record_is_found_inside_an_envelope_or_at_its_path() {
        let seed = read(json!({
            "content": [{"type": "text", "text": "{\"status\":\"OK\",\"data\":{\"id\":\"B-101\",\"room\":\"B-2\"}}"}],
        }));
        let rec = seed.record.as_ref().expect("the envelope's record");
        assert_eq!(rec.get("room"), Some(&json!("B-2")));
        assert_eq!(
            seed.id(&Value::Object(rec.clone())).as_deref(),
            Some("B-101")
        );

        let at = |path: &str| Contract {
            shape: Shape {
                record_path: Some(path.into()),
                id_field: Some("meta.ref".into()),
                ..Shape::default()
            },
            ..Contract::default()
        };
        let payload = ToolOutput::from_value(&json!({
            "content": [{"type": "text", "text": "{\"result\":{\"booking\":{\"meta\":{\"ref\":7},\"rooms\":[1,2]}}}"}],
        }));
        let r = Reading::of(&payload, Some(&at("result.booking")));
        let rec = r.record.as_ref().expect("the record at its path");
        assert_eq!(r.id(&Value::Object(rec.clone())).as_deref(), Some("7"));
        assert!(r.items.is_none(), "its lists are its own, not a listing");
        let missing = Reading::of(&payload, Some(&at("data")));
        assert!(missing.record.is_none() && !missing.has_structure());
        // An upstream's error object is still no record.
        assert!(read(text(r#"{"status": 502, "data": {"error": "x"}}"#))
            .record
            .is_none());
    }

    /// One detection rule per row, each with a payload as a real server
    /// sent it (the server is named). `items`: how many items are read;
    /// `agg`: the single value, if any.
    struct Row {
        rule: &'static str,
        server: &'static str,
        contract: Contract,
        payload: Value,
        source: Source,
        items: Option<usize>,
        agg: Option<(&'static str, Value)>,
        accounted: Option<(u64, Option<u64>)>,
    }

    fn absent() -> Contract {
        Contract {
            accounting: AccountingMode::Absent,
            ..Contract::default()
        }
    }

    fn text(t: &str) -> Value {
        json!({"content": [{"type": "text", "text": t}]})
    }

    /// A contract whose accounting keys and item path are renamed.
    fn renamed() -> Contract {
        use super::super::contracts::AccountingKeys;
        Contract {
            shape: Shape {
                items_path: Some("photos".into()),
                record_path: None,
                id_field: Some("photo_id".into()),
                keys: AccountingKeys {
                    returned: "count".into(),
                    total: "total_count".into(),
                    total_lower_bound: "at_least".into(),
                    has_more: "more".into(),
                    next_cursor: "next".into(),
                },
                deep_link: None,
            },
            ..Contract::default()
        }
    }

    fn rows() -> Vec<Row> {
        vec![
            Row {
                rule: "structuredContent.items with _meta accounting",
                server: "turnstile demo search_photos",
                contract: contract(),
                payload: json!({"content": [{"type": "text", "text": "## Image #1"}], "structuredContent": {"items": [{"id": "TA-1"}, {"id": "TA-2"}]}, "_meta": {"returned": 2, "total": 12, "has_more": true, "next_cursor": "c2"}}),
                source: Source::Structured,
                items: Some(2),
                agg: None,
                accounted: Some((2, Some(12))),
            },
            Row {
                rule: "items under another top-level key, in structuredContent",
                server: "TypeScript SDK server (tests/interop/ts_server.mjs)",
                contract: contract(),
                payload: json!({"content": [{"type": "text", "text": "2 photos"}], "structuredContent": {"results": [{"uid": "p1"}, {"uid": "p2"}]}, "_meta": {"returned": 2, "total": 2, "has_more": false}}),
                source: Source::Structured,
                items: Some(2),
                agg: None,
                accounted: Some((2, Some(2))),
            },
            Row {
                rule: "JSON in a text block, items and accounting under configured keys",
                server: "Python SDK JSON-in-text server (tests/interop/py_text_server.py)",
                contract: renamed(),
                payload: text(r#"{"photos": [{"photo_id": "F3-0001"}], "count": 1, "total_count": 651, "at_least": null, "more": true, "next": "1"}"#),
                source: Source::JsonText,
                items: Some(1),
                agg: None,
                accounted: Some((1, Some(651))),
            },
            Row {
                rule: "JSON in several text blocks, one item each",
                server: "a server printing one JSON object per hit",
                contract: contract(),
                payload: json!({"content": [{"type": "text", "text": "{\"id\": 1}"}, {"type": "text", "text": "{\"id\": 2}"}, {"type": "text", "text": "{\"id\": 3}"}]}),
                source: Source::JsonText,
                items: Some(3),
                agg: None,
                accounted: None,
            },
            Row {
                rule: "a one-row, one-column table in text is a single value, not a listing of 1",
                server: "Python SDK JSON-in-text server count_photos",
                contract: contract(),
                payload: text(r#"{"columns": ["COUNT(*)"], "rows": [[613]]}"#),
                source: Source::JsonText,
                items: Some(1),
                agg: Some(("COUNT(*)", json!(613))),
                accounted: None,
            },
            Row {
                rule: "Python-literal rows (str() of a list of dicts)",
                server: "reference SQLite server (mcp-server-sqlite) read_query",
                contract: absent(),
                payload: text("[{'id': 'TA-00001', 'floor': 3, 'note': None, 'ok': True}, {'id': \"O'Brien\", 'floor': 3, 'note': 'x', 'ok': False}]"),
                source: Source::LiteralText,
                items: Some(2),
                agg: None,
                accounted: None,
            },
            Row {
                rule: "one Python-literal row with one field is a single value",
                server: "reference SQLite server (mcp-server-sqlite) read_query COUNT",
                contract: absent(),
                payload: text("[{'n': 651}]"),
                source: Source::LiteralText,
                items: Some(1),
                agg: Some(("n", json!(651))),
                accounted: None,
            },
        ]
        .into_iter()
        .chain(more_rows())
        .collect()
    }

    /// The rows of servers that send no accounting, or text.
    fn more_rows() -> Vec<Row> {
        vec![
            Row {
                rule: "an empty Python-literal list is a result set of zero rows",
                server: "reference SQLite server (mcp-server-sqlite) read_query",
                contract: absent(),
                payload: text("[]"),
                // `[]` is JSON as well as a Python literal.
                source: Source::JsonText,
                items: Some(0),
                agg: None,
                accounted: None,
            },
            Row {
                rule: "a database error in text does not parse: nothing is read",
                server: "reference SQLite server (mcp-server-sqlite) read_query",
                contract: absent(),
                payload: text("Database error: no such table: photo"),
                source: Source::Unparsed,
                items: None,
                agg: None,
                accounted: None,
            },
            Row {
                rule: "a one-key object in structuredContent is a single value",
                server: "TypeScript SDK server count_photos",
                contract: contract(),
                payload: json!({"content": [{"type": "text", "text": "613"}], "structuredContent": {"count": 613}}),
                source: Source::Structured,
                items: None,
                agg: Some(("count", json!(613))),
                accounted: None,
            },
            Row {
                rule: "a one-key object in text from a server held to accounting is not taken for an answer",
                server: "an upstream's error object relayed as text",
                contract: contract(),
                payload: text(r#"{"status": 502}"#),
                source: Source::JsonText,
                items: None,
                agg: None,
                accounted: None,
            },
            Row {
                rule: "a bare number in text is a single value",
                server: "a counting tool printing only the number",
                contract: contract(),
                payload: text("651"),
                source: Source::JsonText,
                items: None,
                agg: Some(("value", json!(651))),
                accounted: None,
            },
        ]
        .into_iter()
        .chain(last_rows())
        .collect()
    }

    /// The last rows of the table.
    fn last_rows() -> Vec<Row> {
        vec![
            Row {
                rule: "JSON in an embedded resource",
                server: "a server returning its rows as an application/json resource",
                contract: contract(),
                payload: json!({"content": [{"type": "resource", "resource": {"uri": "mem://rows", "mimeType": "application/json", "text": "{\"rows\": [[1], [2]], \"columns\": [\"id\"]}"}}]}),
                source: Source::EmbeddedResource,
                items: Some(2),
                agg: None,
                accounted: None,
            },
            Row {
                rule: "resource_link blocks, one item each",
                server: "server-everything style links",
                contract: contract(),
                payload: json!({"content": [{"type": "resource_link", "uri": "file:///a.jpg", "name": "a.jpg"}, {"type": "resource_link", "uri": "file:///b.jpg", "name": "b.jpg"}]}),
                source: Source::ResourceLinks,
                items: Some(2),
                agg: None,
                accounted: None,
            },
            Row {
                rule: "plain text from a server held to accounting: nothing read",
                server: "the demo's upstream-502 fault",
                contract: contract(),
                payload: text("Search API error: 502 Server Error: Bad Gateway"),
                source: Source::Unparsed,
                items: None,
                agg: None,
                accounted: None,
            },
        ]
    }

    #[test]
    fn detection_rules_one_row_each() {
        for row in rows() {
            let out = ToolOutput::from_value(&row.payload);
            let r = Reading::of(&out, Some(&row.contract));
            let ctx = format!("{} ({})", row.rule, row.server);
            assert_eq!(r.source, row.source, "{ctx}");
            assert_eq!(r.items.as_ref().map(Vec::len), row.items, "{ctx}");
            assert_eq!(
                r.aggregate.clone(),
                row.agg.map(|(k, v)| (k.to_string(), v)),
                "{ctx}"
            );
            assert_eq!(
                r.accounting.as_ref().map(|a| (a.returned, a.total)),
                row.accounted,
                "{ctx}"
            );
        }
    }

    #[test]
    fn without_a_contract_only_structured_content_is_read() {
        let out = ToolOutput::from_value(&text("[{'n': 651}]"));
        let r = Reading::of(&out, None);
        assert_eq!(
            (r.source, r.items, r.aggregate),
            (Source::Unparsed, None, None)
        );
    }

    #[test]
    fn absent_mode_ignores_whatever_meta_says() {
        let out = ToolOutput::from_value(
            &json!({"content": [{"type": "text", "text": "[{'id': 1}]"}], "_meta": {"returned": 1, "total": 1}}),
        );
        assert!(Reading::of(&out, Some(&absent())).accounting.is_none());
        assert!(Reading::of(&out, Some(&contract())).accounting.is_some());
    }
}
