//! What a tool's server asks the user in the middle of a call (issue 22 §3),
//! as the MCP client hands it up: never answered here.
//!
//! Two revisions ask two ways:
//! * **2026-07-28** (SEP-2322): the `tools/call` answers with an
//!   `InputRequiredResult` — the requests and an opaque `requestState`. The
//!   call is over; answering is a new `tools/call` with the same arguments,
//!   the `inputResponses` and the same `requestState` ([`InputRound`]).
//! * **2025-11-25**: the server sends `elicitation/create` nested inside the
//!   open `tools/call`. The call stays open in memory, waiting; [`Nested`]
//!   holds it, and answering it lets the same call go on. It cannot outlive
//!   the process.
//!
//! Sampling and roots requests are not offered (the client declares only
//! the `elicitation` capability); a server that asks for them anyway gets
//! its call refused, never a silent answer.
//!
//! The `requestState` is the server's: [`RequestState`] keeps it out of
//! every `Debug`, log line and frame, and refuses one over
//! [`MAX_REQUEST_STATE`] bytes.

use std::collections::BTreeMap;

use rmcp::model::{ElicitRequestParams, ElicitResult, InputRequest};
use serde_json::Value;

/// The largest `requestState` held: it is stored with the interrupt and
/// echoed back once, so a server cannot make us store (or send) more.
pub const MAX_REQUEST_STATE: usize = 64 * 1024;

/// The most input requests one answer may carry.
pub const MAX_INPUT_REQUESTS: usize = 8;

/// The server's opaque state for a 2026-07-28 retry. Echoed back exactly as
/// received; never inspected, logged, shown or given to a model: its
/// `Debug` prints only its length.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct RequestState(String);

impl RequestState {
    /// Refuses a state over [`MAX_REQUEST_STATE`] bytes (its length is all
    /// the refusal says).
    pub fn new(state: String) -> Result<Self, String> {
        match state.len() {
            n if n > MAX_REQUEST_STATE => Err(format!(
                "the server's requestState is {n} bytes, over the {MAX_REQUEST_STATE} a client holds"
            )),
            _ => Ok(RequestState(state)),
        }
    }

    /// The state to send back.
    pub(crate) fn into_inner(self) -> String {
        self.0
    }
}

impl std::fmt::Debug for RequestState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RequestState(<{} bytes>)", self.0.len())
    }
}

/// One thing a server asks.
#[derive(Debug, Clone, PartialEq)]
pub enum Asked {
    /// A form: the server's message and its requested schema.
    Form { message: String, schema: Value },
    /// A URL for the user to open; `id` is the server's elicitation id
    /// (empty on 2026-07-28).
    Url {
        message: String,
        url: String,
        id: String,
    },
    /// turnstile's own request, never a server's: the user connects their
    /// account on a per-user server before the call goes out
    /// (`agent::connections`). `url` is turnstile's own flow address (a
    /// one-time sign-in link is asked for there); `site` is the host of the
    /// authorization server the user signs in at.
    Connect {
        server: String,
        url: String,
        site: String,
    },
    /// A request the client does not offer (sampling, roots).
    Unsupported { method: String },
}

impl Asked {
    /// An `elicitation/create`'s parameters.
    pub(crate) fn of_elicitation(params: &ElicitRequestParams) -> Asked {
        match params {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => Asked::Form {
                message: message.clone(),
                schema: serde_json::to_value(requested_schema).unwrap_or(Value::Null),
            },
            ElicitRequestParams::UrlElicitationParams {
                message,
                url,
                elicitation_id,
                ..
            } => Asked::Url {
                message: message.clone(),
                url: url.clone(),
                id: elicitation_id.clone(),
            },
            // rmcp may learn new modes; one we do not know is not shown.
            #[allow(unreachable_patterns)]
            _ => Asked::Unsupported {
                method: "elicitation/create (an unknown mode)".into(),
            },
        }
    }

    pub(crate) fn of_input_request(request: &InputRequest) -> Asked {
        match request {
            InputRequest::Elicitation(e) => Asked::of_elicitation(&e.params),
            InputRequest::CreateMessage(_) => Asked::Unsupported {
                method: "sampling/createMessage".into(),
            },
            InputRequest::ListRoots(_) => Asked::Unsupported {
                method: "roots/list".into(),
            },
            #[allow(unreachable_patterns)]
            _ => Asked::Unsupported {
                method: "an unknown input request".into(),
            },
        }
    }
}

/// The answers of one 2026-07-28 round: the responses by request key, and
/// the server's state, echoed back.
#[derive(Debug, Clone)]
pub struct InputRound {
    pub responses: BTreeMap<String, Value>,
    pub request_state: Option<RequestState>,
}

/// One `elicitation/create` routed to the call it arrived in (2025-11-25):
/// what it asks, and where its answer goes.
#[derive(Debug)]
pub(crate) struct Elicitation {
    pub(crate) params: ElicitRequestParams,
    pub(crate) reply: tokio::sync::oneshot::Sender<ElicitResult>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_state_shows_only_its_length() {
        let s = RequestState::new("sealed-secret-value".into()).unwrap();
        let shown = format!("{s:?}");
        assert_eq!(shown, "RequestState(<19 bytes>)");
        assert!(!shown.contains("secret"));
    }

    #[test]
    fn a_huge_request_state_is_refused_by_its_length() {
        let err = RequestState::new("x".repeat(MAX_REQUEST_STATE + 1)).unwrap_err();
        assert!(err.contains("65537 bytes"), "{err}");
        assert!(!err.contains("xx"), "{err}");
        assert!(RequestState::new("x".repeat(MAX_REQUEST_STATE)).is_ok());
    }
}
