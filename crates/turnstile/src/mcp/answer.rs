//! What a `tools/call` came back with (issue 22 §3): the tool's answer, or
//! a question its server asks the user first — a 2026-07-28
//! `InputRequiredResult`, or a 2025-11-25 `elicitation/create` inside the
//! call, which stays open ([`Nested`]).

use super::input::{Asked, RequestState, MAX_INPUT_REQUESTS};
use super::normalize::ToolOutput;
pub use super::session::Nested;
use super::task::TaskTicket;

/// What a call came back with: the tool's answer, or a question for the
/// user.
#[derive(Debug)]
pub enum Answer {
    Output(ToolOutput),
    Asks(InputAsk),
    /// The server made the call a task: its result comes by `tasks/get`
    /// (`mcp::task`).
    Task(TaskTicket),
}

/// What a server asked before it would answer a call.
#[derive(Debug)]
pub struct InputAsk {
    /// Each request by the server's key, in key order.
    pub requests: Vec<(String, Asked)>,
    /// 2026-07-28: the state to echo back with the answers.
    pub request_state: Option<RequestState>,
    /// 2025-11-25: the call, still open, waiting for the answer.
    pub nested: Option<Nested>,
}

impl InputAsk {
    /// A 2026-07-28 `InputRequiredResult`, or why it is refused (its
    /// `requestState` is never part of the reason).
    pub(crate) fn from_result(r: rmcp::model::InputRequiredResult) -> Result<InputAsk, String> {
        let requests = r.input_requests.unwrap_or_default();
        if requests.is_empty() {
            return Err("the server asked for input without saying what".into());
        }
        if requests.len() > MAX_INPUT_REQUESTS {
            return Err(format!(
                "the server asked {} things at once, over the {MAX_INPUT_REQUESTS} a client shows",
                requests.len()
            ));
        }
        let request_state = r.request_state.map(RequestState::new).transpose()?;
        Ok(InputAsk {
            requests: requests
                .iter()
                .map(|(k, v)| (k.clone(), Asked::of_input_request(v)))
                .collect(),
            request_state,
            nested: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::input::MAX_REQUEST_STATE;
    use super::*;

    fn result(state: Value) -> rmcp::model::InputRequiredResult {
        serde_json::from_value(serde_json::json!({
            "resultType": "input_required",
            "inputRequests": {
                "q": {"method": "elicitation/create", "params": {
                    "mode": "form", "message": "Who?",
                    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}
                }}
            },
            "requestState": state
        }))
        .expect("an InputRequiredResult")
    }

    use serde_json::Value;

    /// A state of control characters, NULs and non-ASCII is opaque: held
    /// byte for byte, round-tripped through the store's JSON, and its
    /// `Debug` shows only its length.
    #[test]
    fn a_binary_request_state_is_held_opaque() {
        let raw = "\u{0}\u{1}\u{7f}\u{fffd}é\"\\\n";
        let ask = InputAsk::from_result(result(Value::String(raw.into()))).unwrap();
        let state = ask.request_state.expect("a state");
        assert!(!format!("{state:?}").contains('é'));
        let stored = serde_json::to_string(&state).unwrap();
        let back: RequestState = serde_json::from_str(&stored).unwrap();
        assert_eq!(back.into_inner(), raw);
    }

    /// A state that is not a string is not an `InputRequiredResult` at all:
    /// rmcp refuses it before anything holds it.
    #[test]
    fn a_request_state_that_is_not_a_string_is_refused() {
        let parsed: Result<rmcp::model::InputRequiredResult, _> =
            serde_json::from_value(serde_json::json!({
                "resultType": "input_required",
                "inputRequests": {},
                "requestState": [1, 2, 3]
            }));
        assert!(parsed.is_err());
    }

    #[test]
    fn a_huge_request_state_is_refused_by_its_length_only() {
        let huge = "A".repeat(MAX_REQUEST_STATE + 10);
        let err = InputAsk::from_result(result(Value::String(huge))).unwrap_err();
        assert!(
            err.contains(&format!("{} bytes", MAX_REQUEST_STATE + 10)),
            "{err}"
        );
        assert!(!err.contains("AAAA"), "{err}");
    }
}
