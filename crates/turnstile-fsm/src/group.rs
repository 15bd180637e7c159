//! Row groups: one `ForbiddenEach` entry that stands for many `Forbidden`
//! rows (docs/tables.md, docs/adr/0016-row-groups.md).
//!
//! A group is expanded into ordinary rows before validation; everything after
//! that — totality, reachability, the hash, rendering — sees only rows. This
//! module holds the pure parts: which events a group covers and how its `id`
//! and `why` templates are filled in for one (state, event) pair.

use serde::{Deserialize, Serialize};

/// The events a group covers, for each of its `from` states.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub enum EventSet {
    /// Every declared event. Open: only over terminal states.
    All,
    /// Every declared event but these. Open: only over terminal states.
    AllExcept(Vec<String>),
    /// Exactly these events, in this order. Closed: allowed over any state.
    Only(Vec<String>),
}

impl EventSet {
    /// An open set grows when an event is declared; a closed one does not.
    pub fn is_open(&self) -> bool {
        !matches!(self, EventSet::Only(_))
    }

    /// The names the set lists (empty for `All`).
    pub fn listed(&self) -> &[String] {
        match self {
            EventSet::All => &[],
            EventSet::AllExcept(l) | EventSet::Only(l) => l,
        }
    }

    /// The events covered, given the declared ones: for `All` and `AllExcept`
    /// in declaration order, for `Only` in the list's order, each with its
    /// index in the list (`Only` only). Names are not checked here: an
    /// `Only` name that is not declared is returned as is.
    pub fn select<'a>(&'a self, declared: &'a [String]) -> Vec<(Option<usize>, &'a str)> {
        match self {
            EventSet::All => declared.iter().map(|e| (None, e.as_str())).collect(),
            EventSet::AllExcept(l) => declared
                .iter()
                .filter(|e| !l.contains(e))
                .map(|e| (None, e.as_str()))
                .collect(),
            EventSet::Only(l) => l
                .iter()
                .enumerate()
                .map(|(i, e)| (Some(i), e.as_str()))
                .collect(),
        }
    }
}

/// A name in kebab-case: `count_exact` → `count-exact`, `Done` → `done`,
/// `WaitingApproval` → `waiting-approval`.
pub fn kebab(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c == '_' || c == '-' || c.is_whitespace() {
            if !out.is_empty() && !out.ends_with('-') {
                out.push('-');
            }
            continue;
        }
        if c.is_uppercase() {
            let prev = i.checked_sub(1).map(|j| chars[j]);
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let boundary = match prev {
                Some(p) if p.is_lowercase() || p.is_numeric() => true,
                Some(p) if p.is_uppercase() => next_lower,
                _ => false,
            };
            if boundary && !out.is_empty() && !out.ends_with('-') {
                out.push('-');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The placeholders a template may use.
pub const PLACEHOLDERS: &[&str] = &["{from}", "{from-id}", "{on}", "{on-id}"];

/// Fills a group's `id` or `why` template for one pair: `{from}` / `{on}`
/// are the state and event names as declared, `{from-id}` / `{on-id}` the
/// same in kebab-case; `{{` and `}}` are literal braces. An unknown
/// placeholder or an unmatched brace is an error naming it.
pub fn fill(template: &str, from: &str, on: &str) -> Result<String, String> {
    let mut out = String::with_capacity(template.len() + 16);
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("{{") {
            out.push('{');
            rest = after;
        } else if let Some(after) = tail.strip_prefix("}}") {
            out.push('}');
            rest = after;
        } else if tail.starts_with('}') {
            return Err("a '}' without its '{' (write \"}}\" for a literal brace)".into());
        } else {
            let Some(end) = tail.find('}') else {
                return Err("a '{' without its '}' (write \"{{\" for a literal brace)".into());
            };
            let name = &tail[..=end];
            match name {
                "{from}" => out.push_str(from),
                "{from-id}" => out.push_str(&kebab(from)),
                "{on}" => out.push_str(on),
                "{on-id}" => out.push_str(&kebab(on)),
                _ => {
                    return Err(format!(
                        "unknown placeholder \"{name}\" (known: {})",
                        PLACEHOLDERS.join(", ")
                    ))
                }
            }
            rest = &tail[end + 1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Whether a template names the event (`{on}` or `{on-id}`), or the state.
pub(crate) fn mentions(template: &str, what: &str) -> bool {
    template.contains(&format!("{{{what}}}")) || template.contains(&format!("{{{what}-id}}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kebab_case() {
        assert_eq!(kebab("count_exact"), "count-exact");
        assert_eq!(kebab("Done"), "done");
        assert_eq!(kebab("WaitingApproval"), "waiting-approval");
        assert_eq!(kebab("HTTPError"), "http-error");
        assert_eq!(kebab("step2_done"), "step2-done");
        assert_eq!(kebab("already-kebab"), "already-kebab");
    }

    #[test]
    fn templates() {
        let f = |t: &str| fill(t, "Done", "count_exact");
        assert_eq!(
            f("{from-id}-then-{on-id}").as_deref(),
            Ok("done-then-count-exact")
        );
        assert_eq!(
            f("`{on}` after {from}.").as_deref(),
            Ok("`count_exact` after Done.")
        );
        assert_eq!(f("no placeholder").as_deref(), Ok("no placeholder"));
        assert_eq!(f("{{literal}}").as_deref(), Ok("{literal}"));
        assert!(f("{event}").unwrap_err().contains("\"{event}\""));
        assert!(f("open {").is_err());
        assert!(f("close }").is_err());
        assert!(mentions("x-{on-id}", "on") && !mentions("x-{on-id}", "from"));
    }

    #[test]
    fn event_sets() {
        let declared: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let names = |s: &EventSet| -> Vec<String> {
            s.select(&declared)
                .into_iter()
                .map(|(_, e)| e.to_string())
                .collect()
        };
        assert_eq!(names(&EventSet::All), ["a", "b", "c"]);
        assert_eq!(names(&EventSet::AllExcept(vec!["b".into()])), ["a", "c"]);
        assert_eq!(
            names(&EventSet::Only(vec!["c".into(), "a".into()])),
            ["c", "a"]
        );
        assert!(EventSet::All.is_open() && !EventSet::Only(vec![]).is_open());
    }
}
