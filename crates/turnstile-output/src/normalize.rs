//! The one normalisation seam for MCP tool results.
//!
//! Every tool result — whether it arrives as an rmcp [`CallToolResult`], as a
//! JSON value replayed from storage, or from an adapter that hands us "some
//! JSON" — passes through [`ToolOutput`] before anything judges it.
//!
//! Why this exists: a real MCP adapter returned
//! `[{"type":"text","text":"{\"status\":\"OK\",\"actionId\":66}"}]`. Code that
//! stored the whole list as a JSON string and later json-parsed it got a
//! *list*, never the `{"status": ...}` dict it was looking for. The fix is to
//! flatten content blocks first, in one place, and only then look for JSON:
//! [`ToolOutput::json`] returns `structuredContent` when present, otherwise
//! the single text block parsed as JSON.
//!
//! Shapes accepted by [`ToolOutput::from_value`]:
//!
//! | input                                             | result                                  |
//! |---------------------------------------------------|-----------------------------------------|
//! | `"plain string"`                                  | one text block                          |
//! | `[{"type":"text",...}, {"type":"image",...}]`     | one block per element                   |
//! | `{"type":"text","text":...}` (a single block)     | one block                               |
//! | `{"content":[...],"structuredContent":..,"isError":..,"_meta":..}` | a full `CallToolResult` |
//! | a JSON *string* holding one of the two list/result shapes above | decoded once, then as above (double-encoded results) |
//! | any other JSON (a bare object, number, ...)       | no blocks, the value as `structured`    |
//! | `null`                                            | empty, not an error                     |
//!
//! A list of content blocks is never treated as a JSON payload in its own
//! right.

use std::fmt;

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value};

/// A JSON object (`_meta` maps, arguments).
pub type JsonMap = Map<String, Value>;

/// Content-block `type` values defined by MCP 2025-11-25.
const KNOWN_BLOCK_KINDS: &[&str] = &["text", "image", "audio", "resource", "resource_link"];

/// Keys a serialized `CallToolResult` may carry.
const RESULT_KEYS: &[&str] = &[
    "content",
    "structuredContent",
    "isError",
    "_meta",
    "resultType",
];

/// A tool result, flattened into one shape.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ToolOutput {
    /// The server's `isError` flag (absent counts as `false`). A `true` here is
    /// a failed tool call even though the JSON-RPC request succeeded.
    pub is_error: bool,
    /// Content blocks in the order the server sent them.
    pub blocks: Vec<Block>,
    /// `structuredContent`, if the server sent any (an explicit `null` is
    /// normalised to `None`).
    pub structured: Option<Value>,
    /// Result-level `_meta`.
    pub meta: Option<JsonMap>,
}

/// One content block.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    /// A `text` block, with its block-level `_meta`.
    Text { text: String, meta: Option<JsonMap> },
    /// A `resource_link` block: what it points at (`uri`, `name`, `title`,
    /// `description`, `mimeType`), which is the item a link listing delivers.
    Link {
        link: JsonMap,
        meta: Option<JsonMap>,
    },
    /// An embedded `resource` block: its `uri`, `mimeType` and text (a blob
    /// is not kept: binary payloads are not our business).
    Resource {
        uri: String,
        mime: Option<String>,
        text: Option<String>,
        meta: Option<JsonMap>,
    },
    /// Any other block (`image`, `audio`, ...). Only its kind and `_meta`
    /// are kept.
    Other { kind: String, meta: Option<JsonMap> },
}

impl Block {
    /// The block's MCP `type` (`"text"`, `"image"`, ...).
    pub fn kind(&self) -> &str {
        match self {
            Block::Text { .. } => "text",
            Block::Link { .. } => "resource_link",
            Block::Resource { .. } => "resource",
            Block::Other { kind, .. } => kind,
        }
    }

    /// The block-level `_meta`, if any.
    pub fn meta(&self) -> Option<&JsonMap> {
        match self {
            Block::Text { meta, .. }
            | Block::Link { meta, .. }
            | Block::Resource { meta, .. }
            | Block::Other { meta, .. } => meta.as_ref(),
        }
    }

    /// The text of a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Block::Text { text, .. } => Some(text),
            _ => None,
        }
    }
}

/// What a result looked like, without any of its text — safe for logs.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ShapeSummary {
    pub is_error: bool,
    pub block_count: usize,
    /// Kind of each block, in order.
    pub block_kinds: Vec<String>,
    /// Names of the result-level `_meta` keys (sorted).
    pub result_meta_keys: Vec<String>,
    /// How many blocks carry a `_meta`.
    pub blocks_with_meta: usize,
    /// Union of the block-level `_meta` key names (sorted).
    pub block_meta_keys: Vec<String>,
    /// JSON type of `structuredContent` (`"object"`, `"array"`, ...), if present.
    pub structured: Option<String>,
    /// Top-level key names of `structuredContent` when it is an object (sorted).
    pub structured_keys: Vec<String>,
}

impl fmt::Display for ShapeSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "is_error={} blocks={} kinds=[{}] meta_keys=[{}] blocks_with_meta={} block_meta_keys=[{}] structured={}",
            self.is_error,
            self.block_count,
            self.block_kinds.join(","),
            self.result_meta_keys.join(","),
            self.blocks_with_meta,
            self.block_meta_keys.join(","),
            match &self.structured {
                Some(kind) if self.structured_keys.is_empty() => kind.clone(),
                Some(kind) => format!("{kind}{{{}}}", self.structured_keys.join(",")),
                None => "none".to_string(),
            }
        )
    }
}

impl ToolOutput {
    /// Flatten an rmcp `CallToolResult`.
    pub fn from_call_result(r: CallToolResult) -> Self {
        ToolOutput {
            is_error: r.is_error.unwrap_or(false),
            blocks: r.content.into_iter().map(block_from_content).collect(),
            structured: r.structured_content.filter(|v| !v.is_null()),
            meta: r.meta.map(|m| m.0),
        }
    }

    /// Flatten any of the JSON shapes a tool result is found in (see the
    /// module docs for the table).
    pub fn from_value(v: &Value) -> Self {
        Self::from_value_inner(v, true)
    }

    fn from_value_inner(v: &Value, may_decode_string: bool) -> Self {
        match v {
            Value::Null => ToolOutput::default(),
            Value::String(s) => {
                if may_decode_string {
                    if let Some(decoded) = decode_double_encoded(s) {
                        return Self::from_value_inner(&decoded, false);
                    }
                }
                ToolOutput {
                    blocks: vec![Block::Text {
                        text: s.clone(),
                        meta: None,
                    }],
                    ..ToolOutput::default()
                }
            }
            Value::Array(items) if is_block_list(items) => ToolOutput {
                blocks: items.iter().filter_map(block_from_value).collect(),
                ..ToolOutput::default()
            },
            Value::Object(map) if is_call_result(map) => result_from_map(map),
            Value::Object(_) if is_block(v) => ToolOutput {
                blocks: block_from_value(v).into_iter().collect(),
                ..ToolOutput::default()
            },
            other => ToolOutput {
                structured: Some(other.clone()),
                ..ToolOutput::default()
            },
        }
    }

    /// All text blocks joined with `"\n"`.
    pub fn text(&self) -> String {
        self.blocks
            .iter()
            .filter_map(Block::as_text)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The result as JSON: `structuredContent` if present, otherwise the
    /// single text block parsed as JSON. `None` when there is no structured
    /// content and not exactly one text block, or that block is not JSON.
    pub fn json(&self) -> Option<Value> {
        if let Some(structured) = &self.structured {
            return Some(structured.clone());
        }
        let mut texts = self.blocks.iter().filter_map(Block::as_text);
        let only = texts.next()?;
        if texts.next().is_some() {
            return None;
        }
        serde_json::from_str(only.trim()).ok()
    }

    /// Result-level `_meta` first, then each block's `_meta` in block order.
    pub fn metas(&self) -> impl Iterator<Item = &JsonMap> {
        self.meta
            .iter()
            .chain(self.blocks.iter().filter_map(Block::meta))
    }

    /// Block count, kinds and `_meta` key names — never any text.
    pub fn shape(&self) -> ShapeSummary {
        let mut block_meta_keys: Vec<String> = self
            .blocks
            .iter()
            .filter_map(Block::meta)
            .flat_map(|m| m.keys().cloned())
            .collect();
        block_meta_keys.sort();
        block_meta_keys.dedup();
        ShapeSummary {
            is_error: self.is_error,
            block_count: self.blocks.len(),
            block_kinds: self.blocks.iter().map(|b| b.kind().to_string()).collect(),
            result_meta_keys: self.meta.as_ref().map(sorted_keys).unwrap_or_default(),
            blocks_with_meta: self.blocks.iter().filter(|b| b.meta().is_some()).count(),
            block_meta_keys,
            structured: self.structured.as_ref().map(|v| json_type(v).to_string()),
            structured_keys: match &self.structured {
                Some(Value::Object(map)) => sorted_keys(map),
                _ => Vec::new(),
            },
        }
    }
}

fn sorted_keys(map: &JsonMap) -> Vec<String> {
    let mut keys: Vec<String> = map.keys().cloned().collect();
    keys.sort();
    keys
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn block_from_content(block: ContentBlock) -> Block {
    match block {
        ContentBlock::Text(t) => Block::Text {
            text: t.text,
            meta: t.meta.map(|m| m.0),
        },
        ContentBlock::Image(b) => other("image", b.meta),
        ContentBlock::Audio(b) => other("audio", b.meta),
        // Links and embedded resources are read from their wire form, the
        // same path as a result replayed from storage.
        b @ (ContentBlock::Resource(_) | ContentBlock::ResourceLink(_)) => serde_json::to_value(&b)
            .ok()
            .and_then(|v| block_from_value(&v))
            .unwrap_or(Block::Other {
                kind: "resource".into(),
                meta: None,
            }),
        // `ContentBlock` is non-exhaustive: keep whatever a newer rmcp adds,
        // named by its wire `type`.
        unknown => {
            let value = serde_json::to_value(&unknown).unwrap_or(Value::Null);
            Block::Other {
                kind: value
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown")
                    .to_string(),
                meta: meta_of(&value),
            }
        }
    }
}

fn other(kind: &str, meta: Option<rmcp::model::MetaObject>) -> Block {
    Block::Other {
        kind: kind.to_string(),
        meta: meta.map(|m| m.0),
    }
}

fn meta_of(v: &Value) -> Option<JsonMap> {
    v.get("_meta").and_then(Value::as_object).cloned()
}

/// A content block as MCP defines it: an object whose `type` is a known
/// block kind (a text block must carry a string `text`). Objects that merely
/// have a `type` key (GeoJSON, ...) are data, not blocks.
fn is_block(v: &Value) -> bool {
    let Some(kind) = v.get("type").and_then(Value::as_str) else {
        return false;
    };
    if !KNOWN_BLOCK_KINDS.contains(&kind) {
        return false;
    }
    kind != "text" || v.get("text").is_some_and(Value::is_string)
}

fn is_block_list(items: &[Value]) -> bool {
    items.iter().all(is_block)
}

/// An object is a serialized `CallToolResult` when it has at least one of
/// `content` / `structuredContent` / `isError`, no keys outside the result
/// schema, and `content` (if present) is a list of blocks.
fn is_call_result(map: &JsonMap) -> bool {
    let has_marker = ["content", "structuredContent", "isError"]
        .iter()
        .any(|k| map.contains_key(*k));
    let only_result_keys = map.keys().all(|k| RESULT_KEYS.contains(&k.as_str()));
    let content_ok = match map.get("content") {
        None => true,
        Some(Value::Array(items)) => is_block_list(items),
        Some(_) => false,
    };
    let is_error_ok = map.get("isError").is_none_or(Value::is_boolean);
    has_marker && only_result_keys && content_ok && is_error_ok
}

fn result_from_map(map: &JsonMap) -> ToolOutput {
    ToolOutput {
        is_error: map.get("isError").and_then(Value::as_bool).unwrap_or(false),
        blocks: match map.get("content") {
            Some(Value::Array(items)) => items.iter().filter_map(block_from_value).collect(),
            _ => Vec::new(),
        },
        structured: map
            .get("structuredContent")
            .filter(|v| !v.is_null())
            .cloned(),
        meta: map.get("_meta").and_then(Value::as_object).cloned(),
    }
}

fn block_from_value(v: &Value) -> Option<Block> {
    let kind = v.get("type").and_then(Value::as_str)?;
    let meta = meta_of(v);
    if kind == "text" {
        let text = v.get("text").and_then(Value::as_str)?;
        return Some(Block::Text {
            text: text.to_string(),
            meta,
        });
    }
    Some(match kind {
        "resource_link" => link_block(v, meta),
        "resource" => resource_block(v.get("resource").unwrap_or(&Value::Null), meta),
        _ => Block::Other {
            kind: kind.to_string(),
            meta,
        },
    })
}

/// Keys of a `resource_link` that describe what it points at.
const LINK_KEYS: &[&str] = &["uri", "name", "title", "description", "mimeType", "size"];

fn link_block(v: &Value, meta: Option<JsonMap>) -> Block {
    let link = LINK_KEYS
        .iter()
        .filter_map(|k| v.get(*k).map(|x| (k.to_string(), x.clone())))
        .collect();
    Block::Link { link, meta }
}

/// `resource` is the embedded resource's contents object (`uri`,
/// `mimeType`, `text` or `blob`).
fn resource_block(resource: &Value, meta: Option<JsonMap>) -> Block {
    let s = |k: &str| resource.get(k).and_then(Value::as_str).map(str::to_string);
    Block::Resource {
        uri: s("uri").unwrap_or_default(),
        mime: s("mimeType"),
        text: s("text"),
        meta,
    }
}

/// A string that is itself a serialized content-block list or a serialized
/// `CallToolResult` — the shape produced by code that stored a whole result as
/// a JSON string. Decoded once; a string holding ordinary JSON data (or a
/// single block) is left alone and stays text.
fn decode_double_encoded(s: &str) -> Option<Value> {
    let trimmed = s.trim_start();
    if !(trimmed.starts_with('[') || trimmed.starts_with('{')) {
        return None;
    }
    let value: Value = serde_json::from_str(s).ok()?;
    match &value {
        Value::Array(items) if !items.is_empty() && is_block_list(items) => Some(value),
        Value::Object(map) if map.contains_key("content") && is_call_result(map) => Some(value),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{MetaObject, TextContent};
    use serde_json::json;

    fn meta(v: Value) -> Option<JsonMap> {
        v.as_object().cloned()
    }

    fn text(t: &str) -> Block {
        Block::Text {
            text: t.to_string(),
            meta: None,
        }
    }

    struct Case {
        name: &'static str,
        input: Value,
        expected: ToolOutput,
        text: &'static str,
        json: Option<Value>,
        metas: usize,
    }

    fn cases() -> Vec<Case> {
        let accounting = json!({"returned": 1, "total_lower_bound": 189, "has_more": true, "next_cursor": "abc"});
        vec![
            Case {
                name: "plain string",
                input: json!("hello"),
                expected: ToolOutput {
                    blocks: vec![text("hello")],
                    ..Default::default()
                },
                text: "hello",
                json: None,
                metas: 0,
            },
            Case {
                name: "seed: list of blocks whose text is JSON",
                input: json!([{"type": "text", "text": "{\"status\":\"OK\",\"actionId\":66}"}]),
                expected: ToolOutput {
                    blocks: vec![text("{\"status\":\"OK\",\"actionId\":66}")],
                    ..Default::default()
                },
                text: "{\"status\":\"OK\",\"actionId\":66}",
                json: Some(json!({"status": "OK", "actionId": 66})),
                metas: 0,
            },
            Case {
                name: "seed anti-pattern: the block list stored as a JSON string",
                input: Value::String(
                    json!([{"type": "text", "text": "{\"status\":\"OK\",\"actionId\":66}"}])
                        .to_string(),
                ),
                expected: ToolOutput {
                    blocks: vec![text("{\"status\":\"OK\",\"actionId\":66}")],
                    ..Default::default()
                },
                text: "{\"status\":\"OK\",\"actionId\":66}",
                json: Some(json!({"status": "OK", "actionId": 66})),
                metas: 0,
            },
            Case {
                name: "single block",
                input: json!({"type": "text", "text": "[1,2]"}),
                expected: ToolOutput {
                    blocks: vec![text("[1,2]")],
                    ..Default::default()
                },
                text: "[1,2]",
                json: Some(json!([1, 2])),
                metas: 0,
            },
            Case {
                name: "JSON text in a plain string stays text (not double-encoded blocks)",
                input: json!("{\"a\":1}"),
                expected: ToolOutput {
                    blocks: vec![text("{\"a\":1}")],
                    ..Default::default()
                },
                text: "{\"a\":1}",
                json: Some(json!({"a": 1})),
                metas: 0,
            },
            Case {
                name: "two text blocks: no single JSON",
                input: json!([{"type": "text", "text": "1"}, {"type": "text", "text": "2"}]),
                expected: ToolOutput {
                    blocks: vec![text("1"), text("2")],
                    ..Default::default()
                },
                text: "1\n2",
                json: None,
                metas: 0,
            },
            Case {
                name: "structuredContent wins over text",
                input: json!({
                    "content": [{"type": "text", "text": "{\"temperature\":1}"}],
                    "structuredContent": {"temperature": 33}
                }),
                expected: ToolOutput {
                    blocks: vec![text("{\"temperature\":1}")],
                    structured: Some(json!({"temperature": 33})),
                    ..Default::default()
                },
                text: "{\"temperature\":1}",
                json: Some(json!({"temperature": 33})),
                metas: 0,
            },
            Case {
                name: "isError result",
                input: json!({"content": [{"type": "text", "text": "Tool nope not found"}], "isError": true}),
                expected: ToolOutput {
                    is_error: true,
                    blocks: vec![text("Tool nope not found")],
                    ..Default::default()
                },
                text: "Tool nope not found",
                json: None,
                metas: 0,
            },
            Case {
                name: "_meta on blocks and on the result",
                input: json!({
                    "content": [
                        {"type": "text", "text": "## Image #1", "_meta": accounting.clone()},
                        {"type": "image", "data": "AAAA", "mimeType": "image/png"}
                    ],
                    "_meta": accounting.clone()
                }),
                expected: ToolOutput {
                    blocks: vec![
                        Block::Text {
                            text: "## Image #1".into(),
                            meta: meta(accounting.clone()),
                        },
                        Block::Other {
                            kind: "image".into(),
                            meta: None,
                        },
                    ],
                    meta: meta(accounting.clone()),
                    ..Default::default()
                },
                text: "## Image #1",
                json: None,
                metas: 2,
            },
            Case {
                name: "_meta only on a block",
                input: json!([{"type": "text", "text": "x", "_meta": {"returned": 0}}]),
                expected: ToolOutput {
                    blocks: vec![Block::Text {
                        text: "x".into(),
                        meta: meta(json!({"returned": 0})),
                    }],
                    ..Default::default()
                },
                text: "x",
                json: None,
                metas: 1,
            },
            Case {
                name: "empty block list",
                input: json!([]),
                expected: ToolOutput::default(),
                text: "",
                json: None,
                metas: 0,
            },
            Case {
                name: "bare object that is data, not a result or block",
                input: json!({"type": "Feature", "status": "OK"}),
                expected: ToolOutput {
                    structured: Some(json!({"type": "Feature", "status": "OK"})),
                    ..Default::default()
                },
                text: "",
                json: Some(json!({"type": "Feature", "status": "OK"})),
                metas: 0,
            },
            Case {
                name: "object with a content key plus foreign keys is data",
                input: json!({"content": "article body", "author": "x"}),
                expected: ToolOutput {
                    structured: Some(json!({"content": "article body", "author": "x"})),
                    ..Default::default()
                },
                text: "",
                json: Some(json!({"content": "article body", "author": "x"})),
                metas: 0,
            },
            Case {
                name: "null is empty",
                input: Value::Null,
                expected: ToolOutput::default(),
                text: "",
                json: None,
                metas: 0,
            },
            Case {
                name: "explicit structuredContent null is normalised away",
                input: json!({"content": [], "structuredContent": null}),
                expected: ToolOutput::default(),
                text: "",
                json: None,
                metas: 0,
            },
        ]
    }

    #[test]
    fn from_value_cases() {
        for case in cases() {
            let out = ToolOutput::from_value(&case.input);
            assert_eq!(out, case.expected, "case: {}", case.name);
            assert_eq!(out.text(), case.text, "text() for case: {}", case.name);
            assert_eq!(out.json(), case.json, "json() for case: {}", case.name);
            assert_eq!(
                out.metas().count(),
                case.metas,
                "metas() for case: {}",
                case.name
            );
        }
    }

    #[test]
    fn call_result_and_its_json_form_agree() {
        // Every case that is a full result must normalise the same way from
        // the typed rmcp struct as from its JSON.
        let mut checked = 0;
        for case in cases() {
            let Ok(typed) = serde_json::from_value::<CallToolResult>(case.input.clone()) else {
                continue;
            };
            checked += 1;
            assert_eq!(
                ToolOutput::from_call_result(typed),
                case.expected,
                "case: {}",
                case.name
            );
        }
        assert!(checked >= 4, "only {checked} cases were full results");
    }

    #[test]
    fn from_call_result_keeps_metas_in_order() {
        let mut block_meta = MetaObject::new();
        block_meta.0.insert("has_more".into(), json!(false));
        let mut result_meta = MetaObject::new();
        result_meta.0.insert("returned".into(), json!(1));
        let r = CallToolResult::success(vec![ContentBlock::Text(
            TextContent::new("hit").with_meta(block_meta),
        )])
        .with_meta(Some(result_meta));
        let out = ToolOutput::from_call_result(r);
        let keys: Vec<Vec<&String>> = out.metas().map(|m| m.keys().collect()).collect();
        assert_eq!(keys, vec![vec!["returned"], vec!["has_more"]]);
        assert!(!out.is_error);
    }

    #[test]
    fn shape_never_contains_text() {
        let secret = "SECRET-PAYLOAD";
        let out = ToolOutput::from_value(&json!({
            "content": [
                {"type": "text", "text": secret, "_meta": {"returned": 1, "has_more": true}},
                {"type": "resource_link", "uri": "file:///x", "name": "x"}
            ],
            "structuredContent": {"items": [secret], "returned": 1},
            "_meta": {"total_lower_bound": 189}
        }));
        let shape = out.shape();
        assert_eq!(shape.block_count, 2);
        assert_eq!(shape.block_kinds, vec!["text", "resource_link"]);
        assert_eq!(shape.result_meta_keys, vec!["total_lower_bound"]);
        assert_eq!(shape.block_meta_keys, vec!["has_more", "returned"]);
        assert_eq!(shape.blocks_with_meta, 1);
        assert_eq!(shape.structured.as_deref(), Some("object"));
        assert_eq!(shape.structured_keys, vec!["items", "returned"]);
        let rendered = format!("{shape} {shape:?} {}", serde_json::json!(shape));
        assert!(!rendered.contains(secret), "{rendered}");
    }
}
