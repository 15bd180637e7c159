//! `tables/connect.ron`: one authorization flow of one subject with one
//! tool server configured `auth = "user"` (issue 40 §2, ADR 0043).

use super::Protocol;

crate::names! {
    pub enum ConnectState {
        /// No flow with this state exists in this process.
        Idle = "Idle",
        /// The authorization URL is shown; the held call waits.
        Asked = "Asked",
        /// One callback took the code; it is exchanged once.
        Exchanging = "Exchanging",
        Connected = "Connected",
        Denied = "Denied",
        Expired = "Expired",
        Failed = "Failed",
    }
}

crate::names! {
    /// What code found: a call that needs the user's authorization, or
    /// what one request to the callback route carried.
    pub enum ConnectEvent {
        /// A planned call to a `user` server, for a subject with no token.
        ConnectNeeded = "connect_needed",
        /// The server's resource metadata names another resource.
        MetadataMismatch = "metadata_mismatch",
        /// The callback: the flow's state, from its owner's browser, in time.
        Callback = "callback",
        /// The authorization server sent the user back with an `error`.
        CallbackDenied = "callback_denied",
        /// The callback did not come from the browser its owner started the
        /// sign-in in (no flow cookie, or another flow's).
        OtherSubject = "other_subject",
        /// The callback's `iss` is not the flow's issuer (RFC 9207).
        IssMismatch = "iss_mismatch",
        /// The token issued is for another resource (RFC 8707).
        WrongAudience = "wrong_audience",
        /// The token endpoint gave a token for this server.
        Exchanged = "exchanged",
        /// The token endpoint refused the code (or the callback had none).
        ExchangeFailed = "exchange_failed",
        /// The flow's time ran out.
        Expired = "expired",
    }
}

crate::names! {
    pub enum ConnectEffect {
        /// Hold the call at a Connect card.
        Ask = "ask",
        /// Exchange the code at the token endpoint, once.
        Exchange = "exchange",
        /// Seal and store the token; answer the held call's interrupt once.
        StoreAndResume = "store-and-resume",
        /// Answer the held call's interrupt as declined; nothing is sent.
        ResumeDeclined = "resume-declined",
        /// Answer it as failed: the call is not sent.
        ResumeFailed = "resume-failed",
        /// Forget the flow's secrets (its PKCE verifier).
        Forget = "forget",
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Connect;

impl Protocol for Connect {
    const NAME: &'static str = "connect";
    type State = ConnectState;
    type Event = ConnectEvent;
    type Effect = ConnectEffect;
}
