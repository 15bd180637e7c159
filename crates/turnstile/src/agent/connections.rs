//! Tool servers that authorize per user (`auth = "user"`, issue 40 §2–3,
//! ADR 0043): each call to one goes out with the token its thread's owner
//! connected, and a call for an owner with none is held at a Connect card.
//!
//! One authorization flow is one machine of `tables/connect.ron`: started
//! when a call needs it (discovery from the server's 401, PKCE, the
//! resource indicator, the callback URL turnstile serves), ended by one
//! request to the callback route, which code classifies into one event.
//! The card's link is turnstile's own: its owner asks for a one-time
//! ticket (`POST /v1/connections/flows/{id}/ticket`), whose start route
//! sets a cookie bound to the flow in that browser and sends it on to the
//! authorization server; the callback must carry it, so a sign-in link
//! that leaked cannot bring back another account's token for this user.
//! Only the `callback` row stores a token: sealed with the deployment's key
//! per owner and server (`store::SealingKey`), never in a prompt, a frame,
//! a log, a metric or an error. The held call is the approval table's
//! `input_required` interrupt; the callback answers it once (its one
//! compare-and-swap), and the resumed call goes out with the new token.
//!
//! Flows live in this process's memory: a callback that reaches another
//! process, or this one after a restart, is `callback-without-flow`, and
//! the user is asked again by the next call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rmcp::transport::auth::{AuthError, AuthorizationRequest, OAuthState, StoredCredentials};
use serde_json::{Map, Value};

use crate::judge::tiers::Access;
use crate::mcp::oauth::{AccessToken, ClientIdentity};
use crate::mcp::{
    Answer, Asked, ClientOptions, InputAsk, InputRound, McpError, ServerSpec, ToolClient, Transport,
};
use crate::protocols::connect::{Connect, ConnectEffect, ConnectEvent};
use crate::protocols::{telemetry, Bound, Typed};
use crate::store::{Owner, SealingKey, Store};

/// The request key of the Connect card's one request (a server's own
/// question never names its keys so: they are its own words).
pub const CONNECT_KEY: &str = "turnstile.connect";

/// Where turnstile serves its Client ID Metadata Document.
pub const CLIENT_METADATA_PATH: &str = "/oauth/client-metadata.json";

/// The cookie the start route sets: the flow's browser nonce.
pub const FLOW_COOKIE: &str = "turnstile_connect";

/// How long a ticket for the start route holds.
pub const TICKET_TTL: Duration = Duration::from_secs(300);

/// The most flows held at once (waiting, or ended and remembered for
/// replays): a caller cannot grow the map without bound.
const MAX_FLOWS: usize = 10_000;

/// The most live per-user sessions kept open.
const MAX_SESSIONS: usize = 1_000;

/// How long a flow waits for its callback by default.
pub const DEFAULT_FLOW_TTL: Duration = Duration::from_secs(600);

/// One server configured `auth = "user"`.
#[derive(Clone, Debug)]
pub struct UserServer {
    pub spec: ServerSpec,
    /// Who turnstile is to the server's authorization server.
    pub client: ClientIdentity,
}

impl UserServer {
    fn url(&self) -> Option<&str> {
        match &self.spec.transport {
            Transport::Http { url } => Some(url),
            Transport::Stdio { .. } => None,
        }
    }
}

/// What `[connections]` and the environment give.
pub struct ConnectionsConfig {
    pub servers: Vec<UserServer>,
    /// turnstile's own callback route as the authorization server's
    /// redirect reaches it (`…/v1/connections/callback`).
    pub callback_url: String,
    /// turnstile's own Client ID Metadata Document's URL, used as the
    /// client id of a server configured with neither `client_id` nor a
    /// `client_metadata_url` of its own (where its authorization server
    /// supports them).
    pub client_metadata_url: Option<String>,
    pub flow_ttl: Duration,
    pub key: SealingKey,
}

/// Who a call is made for: the thread (its owner's token) and the tiers
/// its turn holds, kept with a flow so the resumed turn holds them too.
#[derive(Clone, Debug)]
pub struct OnBehalf {
    pub thread: String,
    pub access: Access,
}

/// One authorization flow.
struct Flow {
    /// The id the card names (`/v1/connections/flows/{id}`): not a secret.
    id: String,
    owner: String,
    server: String,
    thread: String,
    access: Access,
    machine: Typed<Connect>,
    /// The PKCE verifier and client: taken by the exchange, dropped on
    /// expiry (`forget`).
    oauth: Option<OAuthState>,
    /// The authorization server's URL for this flow (its `state` and PKCE
    /// challenge): given only to the start route, never in a frame.
    auth_url: String,
    /// The cookie value the start route sets and the callback must carry.
    nonce: String,
    /// A ticket the owner asked for, and when it was issued.
    ticket: Option<(String, Instant)>,
    started: Instant,
    /// When a callback took the flow (its code), or it ended.
    ended: Option<Instant>,
}

impl Flow {
    /// Still waiting for its callback.
    fn waiting(&self) -> bool {
        self.ended.is_none()
    }
}

/// A fresh random token (URL-safe, 256 bits).
fn random_token() -> String {
    use base64::Engine as _;
    let mut bytes = [0u8; 32];
    aws_lc_rs::rand::fill(&mut bytes).unwrap_or_else(|_| {
        // The system's random source failing is not survivable here; two
        // UUIDv4s carry 244 random bits from another source.
        let a = uuid::Uuid::new_v4();
        let b = uuid::Uuid::new_v4();
        bytes[..16].copy_from_slice(a.as_bytes());
        bytes[16..].copy_from_slice(b.as_bytes());
    });
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Whether two secrets are equal, compared in constant time.
fn same_secret(a: &str, b: &str) -> bool {
    aws_lc_rs::constant_time::verify_slices_are_equal(a.as_bytes(), b.as_bytes()).is_ok()
}

/// What one callback request came to.
#[derive(Debug)]
pub enum CallbackOutcome {
    /// Stored; the held call of `thread` is to be answered `accept`.
    Connected(Resume),
    /// The user refused at the authorization server, or the exchange
    /// failed: the held call is answered `decline`, and nothing is sent.
    Declined { resume: Resume, row: String },
    /// Refused by a forbidden row; nothing stored, nothing resumed.
    Refused { row: String, why: String },
}

/// The held call a callback answers.
#[derive(Debug, Clone)]
pub struct Resume {
    pub thread: String,
    pub server: String,
    pub access: Access,
}

/// What the callback route read from its request. Its `Debug` shows no
/// code, state or nonce.
#[derive(Default)]
pub struct CallbackQuery {
    pub state: Option<String>,
    pub code: Option<String>,
    pub error: Option<String>,
    pub iss: Option<String>,
    /// The flow cookies the request carried, by flow id
    /// (`turnstile_connect_{id}`).
    pub nonces: HashMap<String, String>,
}

impl std::fmt::Debug for CallbackQuery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallbackQuery")
            .field("error", &self.error)
            .field("iss", &self.iss)
            .finish_non_exhaustive()
    }
}

pub struct Connections {
    servers: Vec<UserServer>,
    callback_url: String,
    client_metadata_url: Option<String>,
    flow_ttl: Duration,
    key: Arc<SealingKey>,
    store: Store,
    table: Bound<Connect>,
    options: ClientOptions,
    flows: Mutex<HashMap<String, Flow>>,
    /// One live session per owner and server, opened with its token.
    sessions: tokio::sync::Mutex<HashMap<(String, String), Arc<ToolClient>>>,
    /// Each server's last session opened, whoever's: its `tools/list` is
    /// what the planner is shown of the server.
    listed: Mutex<HashMap<String, Arc<ToolClient>>>,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections")
            .field("servers", &self.servers.len())
            .finish_non_exhaustive()
    }
}

impl Connections {
    pub fn new(
        cfg: ConnectionsConfig,
        store: Store,
        table: Bound<Connect>,
        options: ClientOptions,
    ) -> Connections {
        Connections {
            servers: cfg.servers,
            callback_url: cfg.callback_url,
            client_metadata_url: cfg.client_metadata_url,
            flow_ttl: cfg.flow_ttl,
            key: Arc::new(cfg.key),
            store,
            table,
            options,
            flows: Mutex::new(HashMap::new()),
            sessions: tokio::sync::Mutex::new(HashMap::new()),
            listed: Mutex::new(HashMap::new()),
        }
    }

    /// The per-user server that offers `tool`: in a session's last
    /// `tools/list`, else in the configuration.
    pub fn server_of(&self, tool: &str) -> Option<String> {
        let listed = self.listed.lock().unwrap_or_else(PoisonError::into_inner);
        self.servers
            .iter()
            .find(|s| match listed.get(&s.spec.name) {
                Some(c) => c.offers(tool),
                None => s.spec.tools.contains_key(tool),
            })
            .map(|s| s.spec.name.clone())
    }

    /// Every per-user server's tools: a session's last listing, else the
    /// configured names, described as what they are until someone connects.
    pub fn tools(&self) -> Vec<crate::mcp::ToolInfo> {
        let listed = self.listed.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = Vec::new();
        for s in &self.servers {
            match listed.get(&s.spec.name) {
                Some(c) => out.extend(c.tools()),
                None => out.extend(s.spec.tools.keys().map(|name| crate::mcp::ToolInfo {
                    name: name.clone(),
                    description: format!(
                        "Offered by '{}', which each user connects with their own account; a call asks the user to connect first.",
                        s.spec.name
                    ),
                    input_schema: serde_json::json!({"type": "object"}).into(),
                })),
            }
        }
        out
    }

    /// What a turn may believe about `tool` of `server`.
    pub fn trust(&self, server: &str, tool: &str) -> crate::mcp::ToolTrust {
        let listed = self.listed.lock().unwrap_or_else(PoisonError::into_inner);
        match listed.get(server) {
            Some(c) => c.trust(tool),
            None => crate::mcp::ToolTrust {
                server_trusted: self.server(server).is_some_and(|s| s.spec.trusted),
                ..Default::default()
            },
        }
    }

    /// The configured server named `name`, if it authorizes per user.
    pub fn server(&self, name: &str) -> Option<&UserServer> {
        self.servers.iter().find(|s| s.spec.name == name)
    }

    /// Every per-user server's name.
    pub fn server_names(&self) -> impl Iterator<Item = &str> {
        self.servers.iter().map(|s| s.spec.name.as_str())
    }

    /// The owner of `thread` (a hash, never the subject).
    async fn owner_of(&self, thread: &str, server: &str) -> Result<Owner, McpError> {
        let refused = |reason: &str| McpError::InvalidSpec {
            server: server.to_string(),
            reason: reason.to_string(),
        };
        match self.store.ownership(thread).await {
            Ok(Some(o)) => match o.owner {
                Some(owner) => Ok(owner),
                None => Err(refused(
                    "the thread has no owner, and a per-user server needs one",
                )),
            },
            Ok(None) => Err(refused("no such thread")),
            Err(e) => Err(refused(&format!("the store: {e}"))),
        }
    }

    /// Calls `tool` of the per-user server `server` for `who`: with the
    /// owner's token, or held at a Connect card when there is none (or the
    /// server refused the one stored: revoked or expired).
    pub async fn call(
        &self,
        server: &str,
        who: &OnBehalf,
        tool: &str,
        args: Map<String, Value>,
        round: Option<InputRound>,
    ) -> Result<Answer, McpError> {
        let Some(user_server) = self.server(server).cloned() else {
            return Err(McpError::InvalidSpec {
                server: server.to_string(),
                reason: "not a per-user server".into(),
            });
        };
        let owner = self.owner_of(&who.thread, server).await?;
        let owner = owner.key;
        // The Connect card's own answer is turnstile's, never the server's:
        // a decline sends nothing; an accept goes on with the stored token.
        let round = match round {
            Some(r) if r.responses.contains_key(CONNECT_KEY) => {
                let action = (r.responses.get(CONNECT_KEY))
                    .and_then(|v| v.get("action"))
                    .and_then(Value::as_str)
                    .unwrap_or("cancel");
                if action != "accept" {
                    return Err(McpError::Protocol {
                        server: server.to_string(),
                        tool: tool.to_string(),
                        reason: format!(
                            "the user did not connect {server} ({action}): the call was not sent"
                        ),
                    });
                }
                None
            }
            other => other,
        };
        let configured = user_server.client.scopes.clone();
        let Some(token) = self.token(&owner, server).await else {
            return (self.ask(&user_server, &owner, who, configured)).await;
        };
        // Kept for one re-send after a refresh: a call the server refused
        // for its token was not processed.
        let (retry_args, retry_round) = (args.clone(), round.clone());
        let session = self.session(&owner, &user_server, token).await;
        let answer = match session {
            Ok(s) => s.call_round(tool, args, round).await,
            Err(e) => Err(e),
        };
        let step_up = answer.as_ref().err().and_then(step_up_of);
        match answer {
            Err(_) if step_up.is_some() => {
                // The token is good and its scope is not enough (a 403 with
                // insufficient_scope): the user connects again, asked for
                // what was asked before and what the server names now.
                tracing::info!(
                    server,
                    "a per-user server asks for more scope; asking the user to connect again"
                );
                let mut scopes = configured;
                let granted = (self.store.connections(&owner).await.unwrap_or_default())
                    .into_iter()
                    .filter(|r| r.server == server)
                    .flat_map(|r| {
                        r.scopes
                            .split_whitespace()
                            .map(str::to_string)
                            .collect::<Vec<_>>()
                    });
                let named = step_up.map(|c| c.scopes()).unwrap_or_default();
                for s in granted.chain(named) {
                    if !scopes.contains(&s) {
                        scopes.push(s);
                    }
                }
                self.ask(&user_server, &owner, who, scopes).await
            }
            Err(e) if refused_token(&e) => {
                // The server no longer takes the token: refreshed once if a
                // refresh token is stored, and the call sent with the new
                // one (it was not processed); else (revoked, no refresh) it
                // is forgotten, and the user is asked again.
                if let Some(fresh) = self.refresh(&owner, &user_server).await {
                    let old =
                        (self.sessions.lock().await).remove(&(owner.clone(), server.to_string()));
                    if let Some(old) = old {
                        old.shutdown().await;
                    }
                    let again = match self.session(&owner, &user_server, fresh).await {
                        Ok(s) => s.call_round(tool, retry_args, retry_round).await,
                        Err(e) => Err(e),
                    };
                    if !again.as_ref().err().is_some_and(refused_token) {
                        return again;
                    }
                }
                tracing::info!(
                    server,
                    "a per-user server refused the stored token; asking again"
                );
                let _ = e;
                self.forget(&owner, server).await;
                self.ask(&user_server, &owner, who, configured).await
            }
            other => other,
        }
    }

    /// A live session for `owner` on `server`, opened with `token`. The
    /// sessions' lock is not held while one connects: a slow server holds
    /// up only its own callers.
    async fn session(
        &self,
        owner: &str,
        server: &UserServer,
        token: AccessToken,
    ) -> Result<Arc<ToolClient>, McpError> {
        let key = (owner.to_string(), server.spec.name.clone());
        let live = (self.sessions.lock().await).get(&key).cloned();
        if let Some(s) = live.filter(|s| s.carries_calls()) {
            return Ok(s);
        }
        let mut spec = server.spec.clone();
        spec.bearer = Some(token);
        let client = Arc::new(ToolClient::connect_with(&spec, self.options.clone()).await?);
        let mut closing = Vec::new();
        {
            let mut sessions = self.sessions.lock().await;
            if sessions.len() >= MAX_SESSIONS && !sessions.contains_key(&key) {
                // At the bound, one other session is closed to make room (it
                // reconnects when its user calls again).
                let other = sessions.keys().next().cloned();
                closing.extend(other.and_then(|k| sessions.remove(&k)));
            }
            closing.extend(sessions.insert(key, client.clone()));
        }
        for old in closing {
            old.shutdown().await;
        }
        (self.listed.lock().unwrap_or_else(PoisonError::into_inner))
            .insert(server.spec.name.clone(), client.clone());
        Ok(client)
    }

    /// The owner's stored access token for `server`, if one opens.
    async fn token(&self, owner: &str, server: &str) -> Option<AccessToken> {
        use rmcp::transport::auth::CredentialStore as _;
        let creds = self.sealed(owner, server).load().await.ok()??;
        let token = creds.token_response.as_ref()?;
        use oauth2::TokenResponse as _;
        Some(AccessToken::new(token.access_token().secret().clone()))
    }

    /// The owner's sealed row for `server`, as rmcp's credential store.
    fn sealed(&self, owner: &str, server: &str) -> SealedCredentials {
        SealedCredentials {
            store: self.store.clone(),
            key: self.key.clone(),
            owner: owner.to_string(),
            server: server.to_string(),
        }
    }

    /// A new access token from the stored refresh token (rmcp's refresh,
    /// with the resource indicator), stored sealed in place of the old
    /// one; `None`: there is no refresh token, or the authorization server
    /// refused it.
    async fn refresh(&self, owner: &str, server: &UserServer) -> Option<AccessToken> {
        let url = server.url()?;
        let name = server.spec.name.as_str();
        let refreshed = async {
            let mut manager = rmcp::transport::auth::AuthorizationManager::new(url).await?;
            manager.set_credential_store(self.sealed(owner, name));
            if !manager.initialize_from_store().await? {
                return Ok(None);
            }
            if let (Some(id), Some(secret)) =
                (&server.client.client_id, &server.client.client_secret)
            {
                manager.configure_client(
                    rmcp::transport::auth::OAuthClientConfig::new(
                        id.clone(),
                        self.callback_url.clone(),
                    )
                    .with_client_secret(secret.clone()),
                )?;
            }
            manager.refresh_token().await.map(Some)
        };
        match tokio::time::timeout(self.options.connect_timeout * 2, refreshed).await {
            Ok(Ok(Some(token))) => {
                use oauth2::TokenResponse as _;
                tracing::info!(server = name, "a per-user server's token was refreshed");
                Some(AccessToken::new(token.access_token().secret().clone()))
            }
            Ok(Ok(None)) => None,
            Ok(Err(e)) => {
                tracing::info!(server = name, error = %e, "a per-user server's token could not be refreshed");
                None
            }
            Err(_) => None,
        }
    }

    /// Forgets the owner's token and session for `server`.
    async fn forget(&self, owner: &str, server: &str) {
        if let Some(s) =
            (self.sessions.lock().await).remove(&(owner.to_string(), server.to_string()))
        {
            s.shutdown().await;
        }
        if let Err(e) = self.store.delete_connection(owner, server).await {
            tracing::warn!(server, error = %e, "forgetting a stored connection");
        }
    }

    /// `DELETE /v1/connections/{server}`: `false` when there was none.
    pub async fn revoke(
        &self,
        owner: &str,
        server: &str,
    ) -> Result<bool, crate::store::StoreError> {
        if let Some(s) =
            (self.sessions.lock().await).remove(&(owner.to_string(), server.to_string()))
        {
            s.shutdown().await;
        }
        self.store.delete_connection(owner, server).await
    }

    /// Starts a flow and holds the call at its Connect card.
    async fn ask(
        &self,
        server: &UserServer,
        owner: &str,
        who: &OnBehalf,
        scopes: Vec<String>,
    ) -> Result<Answer, McpError> {
        let name = server.spec.name.clone();
        let fail = |reason: String| McpError::Connect {
            server: name.clone(),
            reason,
        };
        let Some(url) = server.url() else {
            return Err(fail("a per-user server is reached over HTTP".into()));
        };
        let mut machine = self.table.machine();
        let challenge = crate::mcp::oauth::challenge(url, self.options.connect_timeout)
            .await
            .map_err(|e| fail(e.to_string()))?;
        // The resource metadata is the server's own: a challenge that sends
        // us to another origin for it is not followed (nothing is fetched
        // there, and no URL is shown).
        let elsewhere = challenge
            .as_deref()
            .and_then(metadata_url)
            .is_some_and(|m| !same_origin(&m, url));
        if elsewhere {
            let row = fire(&mut machine, ConnectEvent::MetadataMismatch).unwrap_or_default();
            tracing::warn!(server = %name, row = %row, "a server's resource metadata points at another origin");
            return Err(fail(format!(
                "its resource metadata points at another origin: refused by row `{row}` of the connect table"
            )));
        }
        let started = async {
            let mut state = OAuthState::new(url, None).await?;
            let mut request =
                AuthorizationRequest::new(self.callback_url.clone()).with_client_name("turnstile");
            if let Some(c) = challenge {
                request = request.with_challenge(c);
            }
            if let Some(id) = &server.client.client_id {
                request = request.with_preregistered_client(id.clone());
                if let Some(secret) = &server.client.client_secret {
                    request = request.with_client_secret(secret.clone());
                }
            }
            if let Some(m) = &server.client.metadata_url {
                request = request.with_client_metadata_url(m.clone());
            } else if let (None, Some(m)) = (&server.client.client_id, &self.client_metadata_url) {
                // turnstile's own document (`client_metadata_document`).
                request = request
                    .with_client_metadata_url(m.clone())
                    .with_application_type("web");
            }
            if !scopes.is_empty() {
                request = request.with_scopes(scopes.iter().cloned());
            }
            state.start_authorization(request).await?;
            let auth_url = state.get_authorization_url().await?;
            Ok::<_, AuthError>((state, auth_url))
        };
        let (state, auth_url) =
            match tokio::time::timeout(self.options.connect_timeout * 4, started).await {
                Ok(Ok(s)) => s,
                Ok(Err(AuthError::ProtectedResourceMetadataInvalid { .. })) => {
                    let v = fire(&mut machine, ConnectEvent::MetadataMismatch);
                    return Err(fail(format!(
                        "its resource metadata was refused by row `{}` of the connect table",
                        v.unwrap_or_default()
                    )));
                }
                Ok(Err(e)) => return Err(fail(format!("authorization discovery: {e}"))),
                Err(_) => {
                    return Err(fail(
                        "authorization discovery did not finish in time".into(),
                    ))
                }
            };
        let Some(csrf) = reqwest::Url::parse(&auth_url).ok().and_then(|u| {
            u.query_pairs()
                .find(|(k, _)| k == "state")
                .map(|(_, v)| v.into_owned())
        }) else {
            return Err(fail("the authorization URL carries no state".into()));
        };
        if let Some(row) = fire(&mut machine, ConnectEvent::ConnectNeeded) {
            return Err(fail(format!("refused by row `{row}` of the connect table")));
        }
        let site = reqwest::Url::parse(&auth_url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            .unwrap_or_default();
        let id = uuid::Uuid::new_v4().to_string();
        let flow = Flow {
            id: id.clone(),
            owner: owner.to_string(),
            server: name.clone(),
            thread: who.thread.clone(),
            access: who.access.clone(),
            machine,
            oauth: Some(state),
            auth_url,
            nonce: random_token(),
            ticket: None,
            started: Instant::now(),
            ended: None,
        };
        {
            let mut flows = self.flows.lock().unwrap_or_else(PoisonError::into_inner);
            self.sweep(&mut flows);
            // A new card for the same user and server supersedes a waiting
            // one: its sign-in can no longer bring a token back.
            for old in flows.values_mut() {
                if old.waiting() && old.owner == owner && old.server == name {
                    let _ = fire(&mut old.machine, ConnectEvent::Expired);
                    old.oauth = None;
                    old.ended = Some(Instant::now());
                }
            }
            if flows.len() >= MAX_FLOWS {
                return Err(fail(format!(
                    "{MAX_FLOWS} sign-ins are waiting already; try again when some have ended"
                )));
            }
            flows.insert(csrf, flow);
        }
        tracing::info!(server = %name, "a call waits for the user to connect the server");
        let origin = reqwest::Url::parse(&self.callback_url)
            .map(|u| u.origin().ascii_serialization())
            .unwrap_or_default();
        Ok(Answer::Asks(InputAsk {
            requests: vec![(
                CONNECT_KEY.to_string(),
                Asked::Connect {
                    server: name,
                    url: format!("{origin}/v1/connections/flows/{id}"),
                    site,
                },
            )],
            request_state: None,
            nested: None,
        }))
    }

    /// Expires flows past their time and drops ended ones kept for replay
    /// detection past theirs.
    fn sweep(&self, flows: &mut HashMap<String, Flow>) {
        let ttl = self.flow_ttl;
        for flow in flows.values_mut() {
            if flow.waiting() && flow.started.elapsed() > ttl {
                let _ = fire(&mut flow.machine, ConnectEvent::Expired);
                flow.oauth = None;
                flow.ended = Some(Instant::now());
            }
        }
        flows.retain(|_, f| f.ended.is_none_or(|e| e.elapsed() <= ttl));
    }

    /// A one-time ticket for the start route of flow `id`, for its owner
    /// only (`None`: no such waiting flow of this owner).
    pub fn ticket(&self, id: &str, owner: &str) -> Option<String> {
        let mut flows = self.flows.lock().unwrap_or_else(PoisonError::into_inner);
        self.sweep(&mut flows);
        let flow = flows
            .values_mut()
            .find(|f| f.id == id && f.waiting() && same_secret(&f.owner, owner))?;
        let ticket = random_token();
        flow.ticket = Some((ticket.clone(), Instant::now()));
        Some(ticket)
    }

    /// turnstile's Client ID Metadata Document, when it serves one: the
    /// client its authorization servers read (a web client whose one
    /// redirect is the callback, public, with PKCE).
    pub fn client_metadata(&self) -> Option<Value> {
        let id = self.client_metadata_url.as_ref()?;
        let origin = reqwest::Url::parse(id).ok()?.origin().ascii_serialization();
        Some(serde_json::json!({
            "client_id": id,
            "client_name": "turnstile",
            "client_uri": origin,
            "redirect_uris": [self.callback_url],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            "application_type": "web",
        }))
    }

    /// Whether the flow cookie is sent over HTTPS only (the callback is).
    pub fn secure_cookie(&self) -> bool {
        self.callback_url.starts_with("https://")
    }

    /// The start route: a ticket, used once within [`TICKET_TTL`], gives
    /// the authorization server's URL, the flow's id and its cookie value.
    pub fn start(&self, ticket: &str) -> Option<(String, String, String)> {
        let mut flows = self.flows.lock().unwrap_or_else(PoisonError::into_inner);
        self.sweep(&mut flows);
        let flow = flows.values_mut().find(|f| {
            f.waiting()
                && f.ticket
                    .as_ref()
                    .is_some_and(|(t, at)| same_secret(t, ticket) && at.elapsed() <= TICKET_TTL)
        })?;
        flow.ticket = None;
        Some((flow.auth_url.clone(), flow.id.clone(), flow.nonce.clone()))
    }

    /// How long the flow cookie needs to live.
    pub fn flow_ttl(&self) -> Duration {
        self.flow_ttl
    }

    /// One request to the callback route: its query and the flow cookie it
    /// carried. Code classifies it into one event of `tables/connect.ron`;
    /// only `exchanged` stores a token.
    pub async fn callback(&self, q: CallbackQuery) -> CallbackOutcome {
        let refused = |row: String, why: &str| CallbackOutcome::Refused {
            row,
            why: why.to_string(),
        };
        let event = match q.error.is_some() {
            true => ConnectEvent::CallbackDenied,
            false => ConnectEvent::Callback,
        };
        // Which flow, and what it is now: everything that needs no network.
        let (mut oauth, server, owner, resume) = {
            let mut flows = self.flows.lock().unwrap_or_else(PoisonError::into_inner);
            self.sweep(&mut flows);
            let flow = q.state.as_deref().and_then(|s| flows.get_mut(s));
            let Some(flow) = flow else {
                let mut idle = self.table.machine();
                let row = fire_row(&mut idle, event)
                    .map(|r| r.id)
                    .unwrap_or_else(|r| r);
                return refused(row, "no sign-in with this state is waiting here");
            };
            if !flow.waiting() {
                // Replayed, or a second callback while the first is exchanged.
                let row = fire_row(&mut flow.machine, event)
                    .map(|r| r.id)
                    .unwrap_or_else(|r| r);
                return refused(row, "this sign-in's callback was already used");
            }
            let own = (q.nonces.get(&flow.id)).is_some_and(|n| same_secret(n, &flow.nonce));
            if !own {
                let row = fire_row(&mut flow.machine, ConnectEvent::OtherSubject)
                    .map(|r| r.id)
                    .unwrap_or_else(|r| r);
                return refused(
                    row,
                    "the callback did not come from the browser in which this user opened their Connect card",
                );
            }
            let resume = Resume {
                thread: flow.thread.clone(),
                server: flow.server.clone(),
                access: flow.access.clone(),
            };
            // What the row's effect says is done: the code exchanged, or
            // the held call answered without a token (the denial).
            match fire_row(&mut flow.machine, event) {
                Err(row) => return refused(row, "refused by the connect table"),
                Ok(Row {
                    effect: Some(ConnectEffect::Exchange),
                    ..
                }) => {}
                Ok(row) => {
                    flow.oauth = None;
                    flow.ended = Some(Instant::now());
                    return without_token(Ok(row), resume);
                }
            }
            // Taken: the code is exchanged once, by this request only.
            flow.ended = Some(Instant::now());
            let Some(oauth) = flow.oauth.take() else {
                return refused("unknown".into(), "this sign-in has no verifier left");
            };
            (oauth, flow.server.clone(), flow.owner.clone(), resume)
        };
        // The flow's row for `event`, now that it is Exchanging.
        let settle = |event: ConnectEvent| {
            let mut flows = self.flows.lock().unwrap_or_else(PoisonError::into_inner);
            match q.state.as_deref().and_then(|s| flows.get_mut(s)) {
                Some(f) => fire_row(&mut f.machine, event),
                None => Err("unknown".to_string()),
            }
        };
        let (Some(code), Some(state)) = (q.code.as_deref(), q.state.as_deref()) else {
            return without_token(settle(ConnectEvent::ExchangeFailed), resume);
        };
        let exchanged = oauth
            .handle_callback_with_issuer(code, state, q.iss.as_deref())
            .await;
        match exchanged {
            Err(AuthError::AuthorizationServerMismatch { .. })
            | Err(AuthError::AuthorizationServerMissingIssuer { .. }) => {
                let row = settle(ConnectEvent::IssMismatch)
                    .map(|r| r.id)
                    .unwrap_or_else(|r| r);
                return refused(
                    row,
                    "the callback's issuer is not the flow's authorization server",
                );
            }
            Err(e) => {
                tracing::warn!(server = %server, error = %e, "the token exchange failed");
                return without_token(settle(ConnectEvent::ExchangeFailed), resume);
            }
            Ok(_) => {}
        }
        let (client_id, token) = match oauth.get_credentials().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(server = %server, error = %e, "reading the exchanged credentials");
                return without_token(settle(ConnectEvent::ExchangeFailed), resume);
            }
        };
        let Some(token) = token else {
            return without_token(settle(ConnectEvent::ExchangeFailed), resume);
        };
        use oauth2::TokenResponse as _;
        let resource = self.server(&server).and_then(|s| s.url());
        if let Some(url) = resource {
            if !audience_fits(token.access_token().secret(), url) {
                let row = settle(ConnectEvent::WrongAudience)
                    .map(|r| r.id)
                    .unwrap_or_else(|r| r);
                return refused(row, "the token was issued for another resource");
            }
        }
        let scopes = (token.scopes())
            .map(|s| {
                s.iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        let granted: Vec<String> = scopes.split_whitespace().map(str::to_string).collect();
        let received = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .ok();
        let stored = StoredCredentials::new(client_id, Some(token), granted, received);
        let Ok(plain) = serde_json::to_vec(&stored) else {
            return refused("unknown".into(), "the credentials could not be written");
        };
        // The row first: what it forbids stores nothing.
        match settle(ConnectEvent::Exchanged) {
            Err(row) => return refused(row, "refused by the connect table"),
            Ok(Row {
                effect: Some(ConnectEffect::StoreAndResume),
                ..
            }) => {}
            Ok(row) => return without_token(Ok(row), resume),
        }
        let sealed = match self.key.seal(&owner, &server, &plain) {
            Ok(s) => s,
            Err(e) => return refused("unknown".into(), &e.to_string()),
        };
        if let Err(e) = (self.store)
            .put_connection(&owner, &server, &sealed, &scopes)
            .await
        {
            tracing::warn!(server = %server, error = %e, "storing a connection");
            return refused("unknown".into(), "the connection could not be stored");
        }
        // A session opened with an older token is closed.
        let old = (self.sessions.lock().await).remove(&(owner.clone(), server.clone()));
        if let Some(s) = old {
            s.shutdown().await;
        }
        tracing::info!(server = %server, "a user connected a per-user server");
        CallbackOutcome::Connected(resume)
    }

    /// The owner's connected servers (`GET /v1/connections`).
    pub async fn list(
        &self,
        owner: &str,
    ) -> Result<Vec<crate::store::ConnectionRow>, crate::store::StoreError> {
        self.store.connections(owner).await
    }
}

/// One owner's sealed row for one server, as rmcp's credential store: a
/// refresh loads and saves through it, so a refreshed token is sealed as
/// the first one was.
struct SealedCredentials {
    store: Store,
    key: Arc<SealingKey>,
    owner: String,
    server: String,
}

#[async_trait::async_trait]
impl rmcp::transport::auth::CredentialStore for SealedCredentials {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let failed =
            |what: &str| AuthError::InternalError(format!("the stored connection: {what}"));
        let sealed = (self.store.connection(&self.owner, &self.server).await)
            .map_err(|e| failed(&e.to_string()))?;
        let Some(sealed) = sealed else {
            return Ok(None);
        };
        let plain = (self.key.open(&self.owner, &self.server, &sealed))
            .map_err(|e| failed(&e.to_string()))?;
        serde_json::from_slice(&plain)
            .map(Some)
            .map_err(|_| failed("not credentials"))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let failed =
            |what: String| AuthError::InternalError(format!("storing a connection: {what}"));
        let plain = serde_json::to_vec(&credentials).map_err(|e| failed(e.to_string()))?;
        let sealed = (self.key.seal(&self.owner, &self.server, &plain))
            .map_err(|e| failed(e.to_string()))?;
        let scopes = credentials.granted_scopes.join(" ");
        (self
            .store
            .put_connection(&self.owner, &self.server, &sealed, &scopes)
            .await)
            .map_err(|e| failed(e.to_string()))
    }

    async fn clear(&self) -> Result<(), AuthError> {
        (self
            .store
            .delete_connection(&self.owner, &self.server)
            .await)
            .map(|_| ())
            .map_err(|e| AuthError::InternalError(format!("forgetting a connection: {e}")))
    }
}

/// A callback that ends the flow without a token, as its row's effect
/// says: `resume-declined` or `resume-failed` answers the held call
/// `decline`; a forbidden row, or one whose effect answers nothing,
/// refuses the request.
fn without_token(row: Result<Row, String>, resume: Resume) -> CallbackOutcome {
    match row {
        Ok(Row {
            id,
            effect: Some(ConnectEffect::ResumeDeclined | ConnectEffect::ResumeFailed),
        }) => CallbackOutcome::Declined { resume, row: id },
        Ok(Row { id, .. }) => CallbackOutcome::Refused {
            row: id,
            why: "the connect table's row answers no held call here".into(),
        },
        Err(row) => CallbackOutcome::Refused {
            row,
            why: "refused by the connect table".into(),
        },
    }
}

/// A legal row taken: its id and its effect.
struct Row {
    id: String,
    effect: Option<ConnectEffect>,
}

/// Fires `event`; the forbidden row's id (counted and logged), or `None`.
fn fire(machine: &mut Typed<Connect>, event: ConnectEvent) -> Option<String> {
    fire_row(machine, event).err()
}

/// Fires `event`: the legal row taken, or the forbidden one's id (counted
/// and logged).
fn fire_row(machine: &mut Typed<Connect>, event: ConnectEvent) -> Result<Row, String> {
    match machine.fire(event) {
        Ok(t) => Ok(Row {
            id: machine.row_id(t.row).to_string(),
            effect: t.effect,
        }),
        Err(v) => {
            telemetry::violation(&v);
            Err(v.row_id.to_string())
        }
    }
}

/// The `resource_metadata` URL a `WWW-Authenticate` challenge names.
fn metadata_url(challenge: &str) -> Option<String> {
    let at = challenge.find("resource_metadata=\"")? + "resource_metadata=\"".len();
    let end = challenge[at..].find('"')?;
    Some(challenge[at..at + end].to_string())
}

/// Whether two URLs share scheme, host and port.
fn same_origin(a: &str, b: &str) -> bool {
    match (reqwest::Url::parse(a), reqwest::Url::parse(b)) {
        (Ok(a), Ok(b)) => a.origin() == b.origin(),
        _ => false,
    }
}

/// Whether the server refused the token the call carried (a `401`, with
/// or without its challenge). Only the transport's own failures count: a
/// JSON-RPC error's text is the server's, and may say anything.
fn refused_token(e: &McpError) -> bool {
    let (McpError::Connect { reason, .. }
    | McpError::Transport { reason, .. }
    | McpError::Unanswered { reason, .. }) = e
    else {
        return false;
    };
    crate::mcp::oauth::challenge_of(e).is_some_and(|c| !c.insufficient_scope)
        || reason.contains("Auth required")
        || reason.contains("401 Unauthorized")
}

/// The step-up challenge of a transport failure (a `403` with
/// `insufficient_scope`).
fn step_up_of(e: &McpError) -> Option<crate::mcp::oauth::Challenge> {
    crate::mcp::oauth::challenge_of(e).filter(|c| c.insufficient_scope)
}

/// Whether a JWT access token's `aud` names `resource` (RFC 8707). A token
/// that is not a JWT cannot be read here: the server checks it.
fn audience_fits(token: &str, resource: &str) -> bool {
    use base64::Engine as _;
    let mut parts = token.split('.');
    let (Some(_), Some(payload), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return true;
    };
    let Ok(bytes) =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload.trim_end_matches('='))
    else {
        return true;
    };
    let Ok(claims) = serde_json::from_slice::<Value>(&bytes) else {
        return true;
    };
    let same = |a: &str| a.trim_end_matches('/') == resource.trim_end_matches('/');
    match claims.get("aud") {
        Some(Value::String(a)) => same(a),
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).any(same),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    fn jwt(claims: Value) -> String {
        let b = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        format!(
            "{}.{}.sig",
            b(&serde_json::json!({"alg": "RS256"})),
            b(&claims)
        )
    }

    #[test]
    fn metadata_is_the_servers_own_origin() {
        let c = r#"Bearer error="invalid_token", resource_metadata="http://evil.example:9/.well-known/oauth-protected-resource/mcp""#;
        let m = metadata_url(c).unwrap();
        assert!(!same_origin(&m, "http://127.0.0.1:8/mcp"));
        assert!(same_origin(
            "http://127.0.0.1:8/.well-known/x",
            "http://127.0.0.1:8/mcp"
        ));
        assert!(metadata_url("Bearer").is_none());
    }

    #[test]
    fn a_tokens_audience_must_name_the_server() {
        let url = "http://127.0.0.1:9/mcp";
        assert!(audience_fits(&jwt(serde_json::json!({"aud": url})), url));
        assert!(audience_fits(
            &jwt(serde_json::json!({"aud": ["x", "http://127.0.0.1:9/mcp/"]})),
            url
        ));
        assert!(!audience_fits(
            &jwt(serde_json::json!({"aud": "http://other/mcp"})),
            url
        ));
        assert!(audience_fits("opaque-token", url));
    }
}
