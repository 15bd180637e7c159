//! A cited item's deep link (issue 38 §3, seed 003 §4.11): clicking a
//! citation is an app-state transition, not a URL. The payload names the
//! app scope (facility, project, surface, panorama), the BIM axes where the
//! item knows them, and the camera (position, look-at point, direction)
//! where the tool provides it.
//!
//! The server never branches per app: which item field is which part is
//! the tool's configuration ([`DeepLinkMap`], `tools.NAME.deep_link`), and
//! a part that is missing or malformed is left out, never guessed. A camera
//! is all three vectors of three finite numbers, or no camera.

use serde_json::{Map, Value};

use super::path;
use crate::wire::{Axes, Camera, DeepLink, LinkScope};

/// Where a tool's items keep each part of a deep link: dotted paths into
/// one item.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeepLinkMap {
    pub facility: Option<String>,
    pub project: Option<String>,
    pub surface: Option<String>,
    pub panorama: Option<String>,
    /// An object with `x`, `y` and `z` (each a string or a number).
    pub axes: Option<String>,
    /// An object with `position`, `look_at` and `direction`, each `[x, y, z]`.
    pub camera: Option<String>,
}

impl DeepLinkMap {
    /// Every configured path, by its key, for the config's checks.
    pub fn paths(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("facility", &self.facility),
            ("project", &self.project),
            ("surface", &self.surface),
            ("panorama", &self.panorama),
            ("axes", &self.axes),
            ("camera", &self.camera),
        ]
        .into_iter()
        .filter_map(|(k, p)| p.as_deref().map(|p| (k, p)))
    }

    /// The link of one cited item; `None` when the item names no scope at
    /// all (nothing to go to).
    pub fn link(&self, item: &Value) -> Option<DeepLink> {
        let item = item.as_object()?;
        let scope = LinkScope {
            facility: self.text(item, &self.facility),
            project: self.text(item, &self.project),
            surface: self.text(item, &self.surface),
            panorama: self.text(item, &self.panorama),
        };
        if scope.is_empty() {
            return None;
        }
        let axes = self
            .axes
            .as_deref()
            .and_then(|p| path::get(item, p))
            .and_then(Value::as_object)
            .map(|o| Axes {
                x: o.get("x").and_then(scalar),
                y: o.get("y").and_then(scalar),
                z: o.get("z").and_then(scalar),
            })
            .filter(|a| a.x.is_some() || a.y.is_some() || a.z.is_some());
        let camera = self
            .camera
            .as_deref()
            .and_then(|p| path::get(item, p))
            .and_then(Value::as_object)
            .and_then(camera);
        Some(DeepLink {
            scope,
            axes,
            camera,
        })
    }

    /// The links of a card's items, aligned with them; empty when no item
    /// has one.
    pub fn links(&self, items: &[Value]) -> Vec<Option<DeepLink>> {
        let links: Vec<_> = items.iter().map(|i| self.link(i)).collect();
        if links.iter().all(Option::is_none) {
            Vec::new()
        } else {
            links
        }
    }

    fn text(&self, item: &Map<String, Value>, p: &Option<String>) -> Option<String> {
        path::get(item, p.as_deref()?).and_then(scalar)
    }
}

/// A scope or axis value: a non-empty string, or a number written as one;
/// bounded like a digest's text.
fn scalar(v: &Value) -> Option<String> {
    let s = match v {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    (!s.is_empty() && s.chars().count() <= 200 && !s.chars().any(char::is_control)).then_some(s)
}

fn vector(v: Option<&Value>) -> Option<[f64; 3]> {
    let a = v?.as_array()?;
    if a.len() != 3 {
        return None;
    }
    let mut out = [0.0; 3];
    for (o, x) in out.iter_mut().zip(a) {
        *o = x.as_f64().filter(|f| f.is_finite())?;
    }
    Some(out)
}

fn camera(o: &Map<String, Value>) -> Option<Camera> {
    Some(Camera {
        position: vector(o.get("position"))?,
        look_at: vector(o.get("look_at"))?,
        direction: vector(o.get("direction"))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map() -> DeepLinkMap {
        DeepLinkMap {
            facility: Some("site".into()),
            project: Some("project".into()),
            surface: Some("floor".into()),
            panorama: Some("id".into()),
            axes: Some("grid".into()),
            camera: Some("camera".into()),
        }
    }

    #[test]
    fn every_part_the_item_has_and_nothing_it_lacks() {
        let full = json!({"id": "TA-1", "project": "tower-a", "floor": 3, "site": "yard",
            "grid": {"x": "C", "y": 4, "z": "L3"},
            "camera": {"position": [1, 2, 3], "look_at": [4.5, 5, 6], "direction": [0, 1, 0]}});
        let l = map().link(&full).unwrap();
        assert_eq!(
            serde_json::to_value(&l).unwrap(),
            json!({"scope": {"facility": "yard", "project": "tower-a", "surface": "3", "panorama": "TA-1"},
                "axes": {"x": "C", "y": "4", "z": "L3"},
                "camera": {"position": [1.0, 2.0, 3.0], "look_at": [4.5, 5.0, 6.0], "direction": [0.0, 1.0, 0.0]}})
        );
        // A camera with a short or non-numeric vector is no camera; no
        // axes are no axes; a scope part that is missing is left out.
        let partial = json!({"id": "TA-2", "grid": {}, "camera": {"position": [1, 2], "look_at": [1, 2, 3], "direction": [0, 1, 0]}});
        let l = map().link(&partial).unwrap();
        assert_eq!(
            serde_json::to_value(&l).unwrap(),
            json!({"scope": {"panorama": "TA-2"}})
        );
        let nan = json!({"id": "TA-3", "camera": {"position": ["1", 2, 3], "look_at": [1, 2, 3], "direction": [0, 1, 0]}});
        assert!(map().link(&nan).unwrap().camera.is_none());
    }

    #[test]
    fn an_item_with_no_scope_has_no_link_and_a_card_without_links_carries_none() {
        assert!(map().link(&json!({"title": "x"})).is_none());
        assert!(map().link(&json!("TA-1")).is_none());
        assert!(map().links(&[json!({"title": "x"}), json!(3)]).is_empty());
        let links = map().links(&[json!({"title": "x"}), json!({"id": "TA-9"})]);
        assert_eq!(links.len(), 2);
        assert!(links[0].is_none() && links[1].is_some());
        // Control characters and empty strings never reach the host.
        assert!(map().link(&json!({"id": "a\nb"})).is_none());
        assert!(map().link(&json!({"id": "  "})).is_none());
    }
}
