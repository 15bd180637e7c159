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
    /// The first items, each cut to scalar fields of bounded length.
    #[serde(default)]
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
            .map(|i| bounded_item(i, limits))
            .collect();
        d.items_omitted = items.len().saturating_sub(d.items.len()) as u64;
        d.fit(limits)
    }

    /// One record a detail lookup opened: no grade, no count.
    pub fn record(tool: &str, record: &Map<String, Value>, limits: DigestLimits) -> Digest {
        let mut d = Digest::failed(tool, "").ok();
        d.items = vec![bounded_item(&Value::Object(record.clone()), limits)];
        d.fit(limits)
    }

    /// The byte budget wins over everything else: items are dropped from
    /// the end, then the longest fields of the last item, then the value
    /// is cut, until the digest fits.
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
                    .max_by_key(|(k, v)| k.len() + v.to_string().len())
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
    WITHHELD_KEYS.iter().any(|w| k.contains(w))
}

/// Every URL becomes `[link]`: a capability URL is a bearer credential and
/// never goes to a model. Found by the one URL scanner, `mcp::url`, which
/// also scrubs URLs from logs and errors.
pub fn redact_urls(text: &str) -> String {
    crate::mcp::url::link_urls(text)
}

/// Scalar fields only (strings cut to `chars`), arrays of scalars cut to
/// `items` entries; nested objects are dropped. Ids and dates survive whole
/// unless longer than `chars`.
fn bounded_item(item: &Value, limits: DigestLimits) -> Map<String, Value> {
    let mut out = Map::new();
    let Some(obj) = item.as_object() else {
        out.insert("value".into(), bounded_scalar(item, limits.chars));
        return out;
    };
    for (k, v) in obj.iter().filter(|(k, _)| !withheld(k)) {
        if out.len() >= limits.fields {
            break;
        }
        let v = match v {
            Value::Object(_) | Value::Null => continue,
            // An entry that is an object (an annotation, say) becomes one
            // line of its scalar values, so what it notes survives.
            Value::Array(a) => Value::Array(
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
            ),
            scalar => bounded_scalar(scalar, limits.chars),
        };
        let key = match k.chars().count() > limits.chars {
            true => k.chars().take(limits.chars).collect::<String>() + "…",
            false => k.clone(),
        };
        out.insert(key, v);
    }
    out
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
