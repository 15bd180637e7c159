//! What a `tools/call` came back with (issue 22 §3): the tool's answer, or
//! a question its server asks the user first — a 2026-07-28
//! `InputRequiredResult`, or a 2025-11-25 `elicitation/create` inside the
//! call, which stays open ([`Nested`]).

use super::input::{Asked, RequestState, MAX_INPUT_REQUESTS};
use super::normalize::ToolOutput;
pub use super::session::Nested;

/// What a call came back with: the tool's answer, or a question for the
/// user.
#[derive(Debug)]
pub enum Answer {
    Output(ToolOutput),
    Asks(InputAsk),
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
