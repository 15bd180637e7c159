//! Host context (seed 003 §4.8): what the user's screen shows, sent by the
//! host app. Every field is optional; every string and list is bounded so a
//! hostile or buggy host cannot balloon the prompt. A list that arrives at
//! its bound is marked as possibly truncated: its length is a shown count,
//! never a total.

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Copy)]
pub struct ContextLimits {
    pub max_string: usize,
    pub max_items: usize,
}

impl Default for ContextLimits {
    fn default() -> Self {
        ContextLimits {
            max_string: 200,
            max_items: 50,
        }
    }
}

/// The context as it arrives. Unknown fields are ignored.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RawContext {
    /// The host's facility (`getFacilityKey`).
    pub facility: Option<String>,
    pub project: Option<String>,
    pub floor: Option<Value>,
    /// The surface the viewer shows (`getCurrentSurfaceId`).
    pub surface: Option<String>,
    /// The panorama open in the viewer.
    pub panorama: Option<String>,
    #[serde(default)]
    pub selected_items: Vec<Value>,
    #[serde(default)]
    pub visible_items: Vec<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BoundedContext {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub facility: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub surface: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub panorama: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor: Option<String>,
    pub selected_items: Vec<String>,
    pub visible_items: Vec<String>,
    /// Fields that were cut, or lists that arrived at their bound.
    pub truncated: Vec<String>,
}

fn cut(s: &str, max: usize, field: &str, truncated: &mut Vec<String>) -> String {
    if s.chars().count() > max {
        if !truncated.iter().any(|t| t == field) {
            truncated.push(field.to_string());
        }
        s.chars().take(max).collect()
    } else {
        s.to_string()
    }
}

fn item_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Object(o) => o
            .get("label")
            .or_else(|| o.get("id"))
            .map(|x| {
                x.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| x.to_string())
            })
            .unwrap_or_else(|| v.to_string()),
        other => other.to_string(),
    }
}

impl BoundedContext {
    /// A named field as a tool argument: a floor that reads as a number is
    /// one ("4" → 4), as the tools' schemas take it.
    pub fn field(&self, name: &str) -> Option<Value> {
        let text = match name {
            "floor" => self.floor.as_deref(),
            "project" => self.project.as_deref(),
            _ => None,
        }?;
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        Some(match (name, text.parse::<i64>()) {
            ("floor", Ok(n)) => Value::from(n),
            _ => Value::from(text),
        })
    }

    pub fn bound(raw: RawContext, limits: ContextLimits) -> Self {
        let mut truncated = Vec::new();
        let mut text = |v: Option<String>, field: &str| {
            v.map(|p| cut(&p, limits.max_string, field, &mut truncated))
        };
        let facility = text(raw.facility, "facility");
        let project = text(raw.project, "project");
        let surface = text(raw.surface, "surface");
        let panorama = text(raw.panorama, "panorama");
        let floor = raw.floor.map(|f| {
            let s = f
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| f.to_string());
            cut(&s, limits.max_string, "floor", &mut truncated)
        });
        let list = |items: Vec<Value>, field: &str, truncated: &mut Vec<String>| {
            if items.len() >= limits.max_items {
                truncated.push(field.to_string());
            }
            items
                .iter()
                .take(limits.max_items)
                .map(|v| cut(&item_text(v), limits.max_string, field, truncated))
                .collect::<Vec<_>>()
        };
        let selected_items = list(raw.selected_items, "selected_items", &mut truncated);
        let visible_items = list(raw.visible_items, "visible_items", &mut truncated);
        BoundedContext {
            facility,
            project,
            surface,
            panorama,
            floor,
            selected_items,
            visible_items,
            truncated,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.facility.is_none()
            && self.project.is_none()
            && self.surface.is_none()
            && self.panorama.is_none()
            && self.floor.is_none()
            && self.selected_items.is_empty()
            && self.visible_items.is_empty()
    }

    /// The per-turn prompt block describing the host's screen.
    pub fn prompt_text(&self) -> String {
        let mut out = String::new();
        if let Some(f) = &self.facility {
            out += &format!("facility: {f}\n");
        }
        if let Some(p) = &self.project {
            out += &format!("project: {p}\n");
        }
        if let Some(f) = &self.floor {
            out += &format!("floor: {f}\n");
        }
        if let Some(s) = &self.surface {
            out += &format!("surface: {s}\n");
        }
        if let Some(p) = &self.panorama {
            out += &format!("panorama: {p}\n");
        }
        if !self.selected_items.is_empty() {
            out += &format!("selected: {}\n", self.selected_items.join(", "));
        }
        if !self.visible_items.is_empty() {
            out += &format!(
                "visible ({} shown{}): {}\n",
                self.visible_items.len(),
                if self.truncated.iter().any(|t| t == "visible_items") {
                    ", possibly truncated"
                } else {
                    ""
                },
                self.visible_items.join(", ")
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(raw: Value, expect_truncated: &[&str]) -> BoundedContext {
        let raw: RawContext = serde_json::from_value(raw).unwrap();
        let b = BoundedContext::bound(
            raw,
            ContextLimits {
                max_string: 5,
                max_items: 3,
            },
        );
        assert_eq!(b.truncated, expect_truncated);
        b
    }

    #[test]
    fn bounds_and_marks() {
        check(json!({}), &[]);
        let b = check(json!({"project": "tower-a-long"}), &["project"]);
        assert_eq!(b.project.as_deref(), Some("tower"));
        check(json!({"visible_items": ["a", "b"]}), &[]);
        let b = check(
            json!({"visible_items": ["a", "b", "c"]}),
            &["visible_items"],
        );
        assert_eq!(b.visible_items.len(), 3);
        let b = check(
            json!({"visible_items": ["a", "b", "c", "d", "e"]}),
            &["visible_items"],
        );
        assert_eq!(b.visible_items.len(), 3);
        let b = check(
            json!({"floor": 3, "selected_items": [{"id": "P-1", "label": "PANO"}]}),
            &[],
        );
        assert_eq!(
            (b.floor.as_deref(), b.selected_items[0].as_str()),
            (Some("3"), "PANO")
        );
    }

    /// What a host app's panel sends (issue 38): every name bounded like
    /// the others, and each in the prompt block under its own name.
    #[test]
    fn a_hosts_names_are_bounded_and_told() {
        let b = check(
            json!({"facility": "demo-site", "surface": "7", "panorama": "TA-04898", "project": "tower"}),
            &["facility", "panorama"],
        );
        assert_eq!(
            b.prompt_text(),
            "facility: demo-\nproject: tower\nsurface: 7\npanorama: TA-04\n"
        );
        assert!(!b.is_empty());
        assert!(check(json!({"camera": [1, 2, 3]}), &[]).is_empty());
    }
}
