//! Configured result fields that a tool's answers do not have (issue 33
//! §4). `action_id = "data.bookingId"` passes `serve --check`: whether a
//! server's answers hold that field is known only when one arrives. Until
//! then a prepare that names no action looks like one that prepared
//! nothing, so a missing field is a located problem the operator sees — a
//! warning in the log and a `problems` entry on its server in
//! `GET /readyz` — never a quiet "nothing was prepared".
//!
//! A problem names the server, the tool, the configuration key and the
//! configured path, never a value of the answer (it may hold personal data
//! or a capability URL).

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use serde::Serialize;

/// One configured field a tool's answers missed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldProblem {
    pub tool: String,
    /// The configuration key that names the field, under the tool's table:
    /// `approval.prepare.action_id`, `terminal.capability.url_field` or
    /// `record_path`.
    pub key: String,
    /// The configured path, as written.
    pub path: String,
    /// What is wrong, in the operator's words.
    pub problem: String,
    /// How many answers missed it since the process started.
    pub times: u64,
}

/// One server's problems, by (tool, configuration key).
type OfServer = BTreeMap<(String, String), FieldProblem>;

/// Every problem met since start-up, by server name. A problem stays
/// listed until the process restarts: a configuration is read once, so
/// the key that caused it is still in force.
#[derive(Debug, Default)]
pub struct FieldProblems(Mutex<BTreeMap<String, OfServer>>);

/// What a problem says of a field the answer does not hold.
pub const NOT_FOUND: &str = "the configured path was not found in a result the tool answered";

impl FieldProblems {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, OfServer>> {
        // A panic elsewhere while holding it leaves a map that is still
        // whole: every write below is one insert or one increment.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that `tool` (on `server`) answered without the field its
    /// configuration key `key` names at `path`, and logs it.
    pub fn not_found(&self, server: &str, tool: &str, key: &str, path: &str) {
        tracing::warn!(
            server = %server,
            tool = %tool,
            key = %key,
            path = %path,
            "a configured result field was not found in a result the tool answered: check the path in [mcp_servers.tools.{tool}]"
        );
        let mut all = self.lock();
        let entry = all
            .entry(server.to_string())
            .or_default()
            .entry((tool.to_string(), key.to_string()))
            .or_insert_with(|| FieldProblem {
                tool: tool.to_string(),
                key: key.to_string(),
                path: path.to_string(),
                problem: NOT_FOUND.to_string(),
                times: 0,
            });
        entry.times += 1;
    }

    /// The problems met on `server`, by tool and key.
    pub fn of(&self, server: &str) -> Vec<FieldProblem> {
        self.lock()
            .get(server)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_problem_is_kept_per_server_tool_and_key_and_counted() {
        let p = FieldProblems::default();
        p.not_found("rooms", "hold_room", "action_id", "data.reservationId");
        p.not_found("rooms", "hold_room", "action_id", "data.reservationId");
        p.not_found("rooms", "preview", "record_path", "result");
        assert!(p.of("other").is_empty());
        let listed = p.of("rooms");
        assert_eq!(listed.len(), 2);
        assert_eq!(
            (
                listed[0].tool.as_str(),
                listed[0].path.as_str(),
                listed[0].times
            ),
            ("hold_room", "data.reservationId", 2)
        );
        assert_eq!(listed[1].key, "record_path");
    }
}
