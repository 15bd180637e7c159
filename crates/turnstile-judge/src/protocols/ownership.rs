//! `tables/ownership.ron`: who a request's caller is, and whether the
//! thread it names is the caller's.

use super::Protocol;

crate::names! {
    pub enum OwnershipState {
        Arrived = "Arrived",
        Identified = "Identified",
        Granted = "Granted",
    }
}

crate::names! {
    /// What code found about a request's credentials, then about the
    /// thread it names; the table decides.
    pub enum OwnershipEvent {
        /// No bearer and no subject header: the session-owned flow.
        Anonymous = "anonymous",
        /// The verifier answered a subject for the bearer.
        BearerVerified = "bearer_verified",
        /// The verifier refused the bearer.
        BearerRejected = "bearer_rejected",
        /// An Authorization header that is not `Bearer <token>`.
        BearerMalformed = "bearer_malformed",
        /// The verifier timed out, failed or answered no subject.
        VerifierUnavailable = "verifier_unavailable",
        /// A subject injected by a caller with the service API key.
        ProxySubject = "proxy_subject",
        /// A service API key that does not match.
        ProxyKeyWrong = "proxy_key_wrong",
        /// A subject header without the key (development mode).
        UnkeyedSubject = "unkeyed_subject",
        /// A subject header without the key, in production mode.
        UnkeyedSubjectInProduction = "unkeyed_subject_in_production",
        /// A keyed proxy's subject or tiers header that is malformed.
        SubjectMalformed = "subject_malformed",
        /// A cookie-borne write from another origin.
        ForeignOrigin = "foreign_origin",
        /// The caller creates a thread.
        CreateThread = "create_thread",
        /// The caller lists its threads.
        ListThreads = "list_threads",
        /// The thread is the caller's.
        OwnThread = "own_thread",
        /// A session-owned thread met with its session and a principal.
        Promote = "promote",
        /// The thread is someone else's.
        OtherOwner = "other_owner",
        /// A promoted thread reached by its old session alone.
        SessionOnlyAfterPromotion = "session_only_after_promotion",
        /// No thread has this id.
        NoSuchThread = "no_such_thread",
        /// The thread was stored with no owner.
        UnownedThread = "unowned_thread",
        /// The thread's lease was claimed for this request's turn.
        LeaseClaimed = "lease_claimed",
        /// Another turn holds the thread's lease.
        LeaseHeld = "lease_held",
    }
}

crate::names! {
    pub enum OwnershipEffect {
        /// The caller is its session (issued now if it had none).
        Session = "session",
        /// The caller is a verified principal.
        Principal = "principal",
        /// Create the thread, owned by the caller.
        Create = "create",
        /// List the caller's threads.
        List = "list",
        /// Serve the request.
        Allow = "allow",
        /// Move the thread to the caller's principal, once, then serve.
        Promote = "promote",
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ownership;

impl Protocol for Ownership {
    const NAME: &'static str = "ownership";
    type State = OwnershipState;
    type Event = OwnershipEvent;
    type Effect = OwnershipEffect;
}
