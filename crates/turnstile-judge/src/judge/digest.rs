//! The bounded digest of one call's result: what the planner (on its next
//! step) and the responder see of it. Built by code from the normalised
//! result and the judge's count, never the raw result: seed 003 §4.5 measured
//! 1,175,854 bytes for ten photos passed through verbatim.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::grade::{Count, CountGrade};

/// Bounds of a digest, from configuration (`[limits]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DigestLimits {
    /// Most items carried.
    pub items: usize,
    /// Most fields kept per item.
    pub fields: usize,
    /// Longest string value kept, in characters.
    pub chars: usize,
    /// The digest's JSON stays within this many bytes.
    pub bytes: usize,
}

impl Default for DigestLimits {
    fn default() -> Self {
        DigestLimits {
            items: 5,
            fields: 10,
            chars: 120,
            bytes: 2048,
        }
    }
}

/// What a call left behind, in a bounded form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Digest {
    pub tool: String,
    pub ok: bool,
    /// A failure's kind, or the judge's reason for distrusting a result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grade: Option<CountGrade>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub displayed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub total_is_lower_bound: bool,
    /// A single value (an aggregate), as text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// The first items, each cut to scalar fields of bounded length. A
    /// record's nested fields are flattened to dotted paths
    /// (`data.exportId`) and written after its top-level fields.
    #[serde(default, serialize_with = "items_in_order")]
    pub items: Vec<Map<String, Value>>,
    /// Items delivered but not carried here.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub items_omitted: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Digest {
    /// A call that produced nothing usable.
    pub fn failed(tool: &str, failure: impl Into<String>) -> Digest {
        Digest {
            tool: tool.to_string(),
            ok: false,
            failure: Some(failure.into()),
            grade: None,
            displayed: None,
            total: None,
            total_is_lower_bound: false,
            value: None,
            items: Vec::new(),
            items_omitted: 0,
        }
    }

    /// A single-value aggregate.
    pub fn value(
        tool: &str,
        value: Option<String>,
        grade: CountGrade,
        limits: DigestLimits,
    ) -> Digest {
        Digest {
            grade: value.as_ref().map(|_| grade),
            value: value.map(|v| bounded_text(&v, limits.chars)),
            ..Digest::failed(tool, "")
        }
        .ok()
        .fit(limits)
    }

    /// A listing: its graded count and its first items, within `limits`.
    pub fn listing(tool: &str, count: &Count, items: &[Value], limits: DigestLimits) -> Digest {
        let mut d = Digest {
            grade: Some(count.grade),
            displayed: Some(count.displayed),
            total: count.total,
            total_is_lower_bound: count.total_is_lower_bound,
            ..Digest::failed(tool, "")
        }
        .ok();
        d.items = items
            .iter()
            .take(limits.items)
            .map(|i| bounded_item(i, limits, Nesting::Drop))
            .collect();
        d.items_omitted = items.len().saturating_sub(d.items.len()) as u64;
        d.fit(limits)
    }

    /// One record: what a detail lookup opened, or what a prepare, a
    /// preview or another tool of a protocol answered. No grade, no count.
    /// Its nested objects' scalar fields are kept as dotted paths: an
    /// envelope (`{"status": "OK", "data": {"exportId": …}}`) keeps what it
    /// wraps, or the model is shown `{"status": "OK"}` and never the id it
    /// must confirm (issue 33 §4).
    pub fn record(tool: &str, record: &Map<String, Value>, limits: DigestLimits) -> Digest {
        let mut d = Digest::failed(tool, "").ok();
        d.items = vec![bounded_item(
            &Value::Object(record.clone()),
            limits,
            Nesting::Flatten,
        )];
        d.fit(limits)
    }

    /// The byte budget wins over everything else: items are dropped from
    /// the end, then the longest fields of the last item (the deepest
    /// first, so an envelope's top-level `status` outlives what it wraps),
    /// then the value is cut, until the digest fits.
    fn fit(mut self, limits: DigestLimits) -> Digest {
        while self.render().len() > limits.bytes {
            if self.items.len() > 1 {
                self.items.pop();
                self.items_omitted += 1;
                continue;
            }
            if let Some(item) = self.items.first_mut() {
                let longest = item
                    .iter()
                    .max_by_key(|(k, v)| (depth(k), k.len() + v.to_string().len()))
                    .map(|(k, _)| k.clone());
                if let Some(k) = longest {
                    item.remove(&k);
                    continue;
                }
                self.items.clear();
                self.items_omitted += 1;
                continue;
            }
            match self.value.take() {
                Some(v) if v.chars().count() > 16 => {
                    self.value = Some(v.chars().take(16).collect::<String>() + "…");
                }
                _ => break,
            }
        }
        self
    }

    fn ok(mut self) -> Digest {
        self.ok = true;
        self.failure = None;
        self
    }

    /// Compact JSON, as the models see it.
    pub fn render(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Keys a digest never carries (matched case-insensitively, as a part of
/// the key): permission and licence data decide nothing a model may see,
/// and credentials never reach a prompt.
const WITHHELD_KEYS: &[&str] = &[
    "tier",
    "licen",
    "subscription",
    "entitlement",
    "permission",
    "token",
    "secret",
    "password",
    "api_key",
    "auth",
];

fn withheld(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    // A nested field's key is as likely to name a credential as a top-level
    // one (`data.apiKey`, `data.sessionId`): the card's secret-key reading
    // is the one that splits `apiKey` and `X-Session-Id` into words.
    WITHHELD_KEYS.iter().any(|w| k.contains(w)) || super::card::secret_key(key)
}

/// Every URL becomes `[link]`: a capability URL is a bearer credential and
/// never goes to a model. Found by the one URL scanner, `mcp::url`, which
/// also scrubs URLs from logs and errors.
pub fn redact_urls(text: &str) -> String {
    turnstile_output::url::link_urls(text)
}

/// Whether an item's nested objects are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Nesting {
    /// A listing's items: nested objects are dropped (the card carries
    /// them; five items' worth of nested detail would crowd out the items).
    Drop,
    /// A record: their scalar fields are kept as dotted paths, down to
    /// [`NESTED_DEPTH`] levels, after the top-level fields.
    Flatten,
}

/// How many levels of nested objects a record digest follows
/// (`data.exportId` is one). Deeper objects are dropped: an answer nested
/// without end cannot spend the field budget on its skeleton.
const NESTED_DEPTH: usize = 3;

/// How deep a digest's key is: the number of objects it was flattened out
/// of. A top-level key is 0.
fn depth(key: &str) -> usize {
    key.matches('.').count()
}

/// Scalar fields only (strings cut to `chars`), arrays of scalars cut to
/// `items` entries, at most `fields` of them. Nested objects are dropped,
/// or (for a record) flattened breadth first: every top-level field before
/// any nested one, so the field cap takes the deepest first. Ids and dates
/// survive whole unless longer than `chars`.
fn bounded_item(item: &Value, limits: DigestLimits, nesting: Nesting) -> Map<String, Value> {
    let mut out = Map::new();
    let Some(obj) = item.as_object() else {
        out.insert("value".into(), bounded_scalar(item, limits.chars));
        return out;
    };
    // (the path to an object, the object, its depth), in the order its
    // fields are taken. A withheld key drops its whole subtree.
    let mut queue = std::collections::VecDeque::from([(String::new(), obj, 0usize)]);
    while let Some((prefix, obj, level)) = queue.pop_front() {
        for (k, v) in obj.iter().filter(|(k, _)| !withheld(k)) {
            if out.len() >= limits.fields {
                return out;
            }
            let path = match prefix.is_empty() {
                true => k.clone(),
                false => format!("{prefix}.{k}"),
            };
            let v = match v {
                Value::Object(inner) => {
                    if nesting == Nesting::Flatten && level < NESTED_DEPTH {
                        queue.push_back((path, inner, level + 1));
                    }
                    continue;
                }
                Value::Null => continue,
                Value::Array(a) => bounded_array(a, limits),
                scalar => bounded_scalar(scalar, limits.chars),
            };
            let key = match path.chars().count() > limits.chars {
                true => path.chars().take(limits.chars).collect::<String>() + "…",
                false => path,
            };
            out.insert(key, v);
        }
    }
    out
}

/// An array's first `items` entries: scalars as they are, and an entry
/// that is an object (an annotation, say) as one line of its scalar
/// values, so what it notes survives.
fn bounded_array(a: &[Value], limits: DigestLimits) -> Value {
    Value::Array(
        a.iter()
            .filter(|x| !x.is_array())
            .take(limits.items)
            .map(|x| match x.as_object() {
                Some(o) => {
                    let line: Vec<String> = o
                        .iter()
                        .filter(|(k, _)| !withheld(k))
                        .filter_map(|(k, v)| match v {
                            Value::String(s) => Some(format!("{k}: {s}")),
                            Value::Number(n) => Some(format!("{k}: {n}")),
                            Value::Bool(b) => Some(format!("{k}: {b}")),
                            _ => None,
                        })
                        .collect();
                    bounded_scalar(&Value::String(line.join(", ")), limits.chars)
                }
                None => bounded_scalar(x, limits.chars),
            })
            .collect(),
    )
}

/// Writes each item's fields top-level first, then by depth, each level in
/// path order. A `Map` sorts its keys as strings, which would put
/// `data.exportId` before `status`: the model reads an envelope's own
/// fields before what it wraps, and the order is the same every time.
fn items_in_order<S: serde::Serializer>(
    items: &[Map<String, Value>],
    ser: S,
) -> Result<S::Ok, S::Error> {
    struct Ordered<'a>(&'a Map<String, Value>);
    impl Serialize for Ordered<'_> {
        fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let mut keys: Vec<&String> = self.0.keys().collect();
            keys.sort_by(|a, b| {
                (depth(a).cmp(&depth(b))).then_with(|| a.split('.').cmp(b.split('.')))
            });
            let mut m = ser.serialize_map(Some(keys.len()))?;
            for k in keys {
                m.serialize_entry(k, &self.0[k])?;
            }
            m.end()
        }
    }
    ser.collect_seq(items.iter().map(Ordered))
}

/// A text as a model may see it: URLs redacted, at most `chars` long.
pub fn bounded_text(text: &str, chars: usize) -> String {
    let s = redact_urls(text);
    match s.chars().count() > chars {
        true => s.chars().take(chars).collect::<String>() + "…",
        false => s,
    }
}

fn bounded_scalar(v: &Value, chars: usize) -> Value {
    match v {
        Value::String(s) => {
            let s = redact_urls(s);
            match s.chars().count() > chars {
                true => Value::String(s.chars().take(chars).collect::<String>() + "…"),
                false => Value::String(s),
            }
        }
        Value::Object(_) | Value::Array(_) => Value::Null,
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn count(n: u64) -> Count {
        Count {
            grade: CountGrade::LowerBound,
            displayed: n,
            total: Some(189),
            total_is_lower_bound: true,
            has_more: true,
            complete: false,
        }
    }

    #[test]
    fn a_huge_result_is_cut_to_the_budget() {
        let blob = "x".repeat(100_000);
        let items: Vec<Value> = (0..10)
            .map(|i| json!({"id": format!("P-{i}"), "image": blob, "nested": {"a": blob}, "tags": [1, 2, 3, 4, 5, 6, 7]}))
            .collect();
        let limits = DigestLimits::default();
        let d = Digest::listing("search_photos", &count(10), &items, limits);
        let text = d.render();
        assert!(text.len() <= limits.bytes, "{} bytes", text.len());
        assert!(d.items.len() <= limits.items);
        assert_eq!(d.items.len() as u64 + d.items_omitted, 10);
        assert_eq!(d.items[0]["id"], json!("P-0"));
        assert!(d.items[0].get("nested").is_none());
        assert_eq!(d.items[0]["tags"].as_array().unwrap().len(), limits.items);
    }

    #[test]
    fn licence_fields_and_urls_never_reach_a_model() {
        let items = vec![json!({
            "id": "P-1",
            "tier": "safety-plus",
            "download_url": "https://x.example/dl?token=SECRET",
            "note": "see https://x.example/cap/SECRET2 for it",
            "annotations": [{"kind": "safety", "tier": "pro", "title": "edge"}],
        })];
        let d = Digest::listing("s", &count(1), &items, DigestLimits::default());
        let text = d.render();
        for word in ["tier", "pro\"", "SECRET", "safety-plus"] {
            assert!(!text.contains(word), "{word} in {text}");
        }
        assert!(
            text.contains("[link]") && text.contains("title: edge"),
            "{text}"
        );
    }

    #[test]
    fn every_digest_fits_its_budget() {
        let limits = DigestLimits::default();
        let big = "y".repeat(5000);
        let mut rec = Map::new();
        for i in 0..40 {
            rec.insert(format!("field_{i}_{}", "k".repeat(300)), json!(big));
        }
        rec.insert("id".into(), json!("R-1"));
        let d = Digest::record("get", &rec, limits);
        assert!(d.render().len() <= limits.bytes, "{}", d.render().len());
        let one = Digest::listing("s", &count(1), &[Value::Object(rec)], limits);
        assert!(one.render().len() <= limits.bytes, "{}", one.render().len());
        let v = Digest::value(
            "q",
            Some(format!("https://x.example/dl?token=CAPSECRET {big}")),
            CountGrade::Exact,
            limits,
        );
        assert!(v.render().len() <= limits.bytes);
        assert!(!v.render().contains("CAPSECRET"));
    }

    fn object(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            other => panic!("not an object: {other}"),
        }
    }

    /// The seed's export preview (issue 33): its envelope wraps the export
    /// id, and the model must be shown it, with no configuration.
    #[test]
    fn a_record_keeps_the_fields_its_envelope_wraps() {
        let rec = object(json!({
            "status": "OK",
            "data": {"exportId": "EXP-1", "fileCount": 3, "estimatedBytes": 48213},
        }));
        let d = Digest::record("export_all_lms_materials", &rec, DigestLimits::default());
        assert_eq!(
            d.render(),
            r#"{"tool":"export_all_lms_materials","ok":true,"items":[{"status":"OK","data.estimatedBytes":48213,"data.exportId":"EXP-1","data.fileCount":3}]}"#
        );
        // The same every time, whatever order the answer came in.
        let again = object(json!({
            "data": {"fileCount": 3, "estimatedBytes": 48213, "exportId": "EXP-1"},
            "status": "OK",
        }));
        assert_eq!(
            Digest::record("export_all_lms_materials", &again, DigestLimits::default()).render(),
            d.render()
        );
    }

    #[test]
    fn nested_fields_come_after_the_top_level_and_within_the_bounds() {
        let limits = DigestLimits {
            fields: 4,
            ..DigestLimits::default()
        };
        // Top-level scalars first: with room for four fields, the three
        // top-level ones and the shallowest nested one are kept.
        let rec = object(json!({
            "z_status": "OK",
            "a_kind": "booking",
            "m_note": "held",
            "data": {"bookingId": 101, "room": {"name": "B-2"}},
        }));
        let d = Digest::record("hold_room", &rec, limits);
        let keys: Vec<&String> = d.items[0].keys().collect();
        assert_eq!(keys.len(), 4, "{keys:?}");
        assert_eq!(d.items[0]["data.bookingId"], json!(101));
        assert!(d.items[0].get("data.room.name").is_none());
        let text = d.render();
        let at = |k: &str| text.find(k).unwrap_or_else(|| panic!("{k} in {text}"));
        assert!(at("z_status") < at("data.bookingId"), "{text}");

        // Deeper than three objects down is dropped; withheld keys drop
        // their whole subtree; URLs are redacted and long keys and values
        // cut, at any depth.
        let long = "k".repeat(200);
        let rec = object(json!({
            "a": {"b": {"c": {"kept": 1, "d": {"dropped": 2}}}},
            "auth": {"user": "ana"},
            "data": {
                "api_token": "T0KEN",
                "apiKey": "APIKEY1",
                "sessionId": "SESS1",
                "link": "https://x.example/dl?token=CAPSECRET",
                "note": "n".repeat(500),
                long.clone(): 1,
            },
        }));
        let limits = DigestLimits::default();
        let d = Digest::record("r", &rec, limits);
        let item = &d.items[0];
        assert_eq!(item["a.b.c.kept"], json!(1));
        assert!(!item.keys().any(|k| k.contains("dropped")), "{item:?}");
        let text = d.render();
        for word in ["ana", "T0KEN", "APIKEY1", "SESS1", "CAPSECRET"] {
            assert!(!text.contains(word), "{word} in {text}");
        }
        assert_eq!(item["data.link"], json!("[link]"));
        assert_eq!(
            item["data.note"].as_str().map(|s| s.chars().count()),
            Some(limits.chars + 1)
        );
        assert!(item.keys().all(|k| k.chars().count() <= limits.chars + 1));
    }

    #[test]
    fn a_nested_record_fits_its_byte_budget_deepest_first() {
        let limits = DigestLimits {
            bytes: 300,
            ..DigestLimits::default()
        };
        let big = "y".repeat(110);
        let rec = object(json!({
            "status": "OK",
            "data": {"a": big, "b": big, "c": big},
        }));
        let d = Digest::record("r", &rec, limits);
        assert!(d.render().len() <= limits.bytes, "{}", d.render());
        assert_eq!(d.items[0]["status"], json!("OK"), "{}", d.render());
        assert!(d.items[0].len() < 4);
    }

    #[test]
    fn a_listing_item_still_drops_its_nested_objects() {
        let d = Digest::listing(
            "s",
            &count(1),
            &[json!({"id": "P-1", "data": {"floor": 3}})],
            DigestLimits::default(),
        );
        assert_eq!(d.items[0].len(), 1, "{:?}", d.items[0]);
    }

    #[test]
    fn the_count_travels_with_its_grade() {
        let d = Digest::listing(
            "s",
            &count(2),
            &[json!({"id": 1}), json!({"id": 2})],
            DigestLimits::default(),
        );
        let v: Value = serde_json::from_str(&d.render()).unwrap();
        assert_eq!(v["grade"], json!("LOWER_BOUND"));
        assert_eq!(v["total"], json!(189));
        assert_eq!(v["total_is_lower_bound"], json!(true));
        let f = Digest::failed("s", "transport");
        assert_eq!(serde_json::to_value(&f).unwrap()["ok"], json!(false));
    }
}
