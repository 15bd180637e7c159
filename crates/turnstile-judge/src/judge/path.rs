//! Dotted paths into a result's JSON (`data.bookingId`): the one syntax
//! every configured result field takes (a role's `action_id`, an export
//! flow's `url_field`, a contract's `items_path` and `record_path`), and
//! the one way each is resolved. Tool servers wrap their answers in
//! envelopes (`{"status": "OK", "data": {…}}`), so a field named by its
//! bare key alone would never be found in them.

use serde_json::{Map, Value};

/// Why a configured path cannot name a field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("must not be empty")]
    Empty,
    #[error(
        "`{0}` has an empty segment: write names joined by single dots, e.g. `data.bookingId`"
    )]
    EmptySegment(String),
}

/// Checks a configured path: non-empty names joined by single dots.
pub fn check(path: &str) -> Result<(), PathError> {
    if path.trim().is_empty() {
        return Err(PathError::Empty);
    }
    if path.split('.').any(|s| s.trim().is_empty()) {
        return Err(PathError::EmptySegment(path.to_string()));
    }
    Ok(())
}

/// The value at `path` in `root`. A key spelled with the whole path wins
/// (`{"data.id": 1}` answers `data.id`): a field name that holds a dot was
/// a bare key before paths existed, and must keep resolving. Otherwise each
/// segment steps into an object; an array, a scalar or a missing key on the
/// way is "not found".
pub fn get<'a>(root: &'a Map<String, Value>, path: &str) -> Option<&'a Value> {
    if let Some(v) = root.get(path) {
        return Some(v);
    }
    let mut segments = path.split('.');
    let mut here = root.get(segments.next()?)?;
    for s in segments {
        here = here.as_object()?.get(s)?;
    }
    Some(here)
}

/// [`get`] on any JSON value (a non-object root holds no field).
pub fn get_value<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    root.as_object().and_then(|m| get(m, path))
}

/// The name a path's field goes by where a name alone is wanted (the
/// argument a confirm tool takes the action id under): its last segment.
pub fn leaf(path: &str) -> &str {
    path.rsplit('.').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn a_path_steps_into_nested_objects() {
        let m = map(json!({"status": "OK", "data": {"bookingId": 101, "room": {"name": "B-2"}}}));
        assert_eq!(get(&m, "data.bookingId"), Some(&json!(101)));
        assert_eq!(get(&m, "data.room.name"), Some(&json!("B-2")));
        assert_eq!(get(&m, "status"), Some(&json!("OK")));
        assert_eq!(get(&m, "data.missing"), None);
        assert_eq!(get(&m, "status.deeper"), None, "a scalar holds no field");
        assert_eq!(get(&m, "bookingId"), None, "no search below the root");
    }

    #[test]
    fn a_key_spelled_with_the_whole_path_wins() {
        let m = map(json!({"data.id": 1, "data": {"id": 2}}));
        assert_eq!(get(&m, "data.id"), Some(&json!(1)));
        assert_eq!(get_value(&json!([1]), "0"), None);
    }

    #[test]
    fn configured_paths_are_checked() {
        assert_eq!(check("data.bookingId"), Ok(()));
        assert_eq!(check("actionId"), Ok(()));
        assert_eq!(check(" "), Err(PathError::Empty));
        for bad in ["data..id", ".id", "data."] {
            assert!(
                matches!(check(bad), Err(PathError::EmptySegment(_))),
                "{bad}"
            );
        }
        assert_eq!(leaf("data.bookingId"), "bookingId");
        assert_eq!(leaf("actionId"), "actionId");
    }
}
