//! OAuth for a protected MCP server (issue 40 §1), on rmcp's
//! implementation of the MCP authorization spec: the server's `401` and its
//! protected resource metadata (RFC 9728), the authorization server's
//! metadata (RFC 8414 / OpenID discovery), a pre-registered client, a
//! Client ID Metadata Document or dynamic registration, in that order,
//! PKCE, the resource indicator (RFC 8707), and `iss` on the callback
//! (RFC 9207). What is turnstile's: where the authorization URL goes and
//! how the callback comes back — a loopback listener on 127.0.0.1 that
//! takes one redirect.
//!
//! The access token is a secret: [`AccessToken`] prints as `[redacted]`
//! and goes into one `Authorization` header and nowhere else.

use std::fmt;
use std::time::Duration;

use rmcp::transport::auth::{AuthorizationRequest, ClientCredentialsConfig, OAuthState};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A bearer token for one MCP server.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessToken(String);

impl AccessToken {
    pub fn new(token: impl Into<String>) -> AccessToken {
        AccessToken(token.into())
    }

    /// The token, for the one place that needs it: the request header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AccessToken([redacted])")
    }
}

/// Who the client is to the authorization server.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ClientIdentity {
    /// A pre-registered client id, and its secret (from the environment).
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    /// The URL of this client's metadata document (a Client ID Metadata
    /// Document), used as the client id where the server supports it.
    pub metadata_url: Option<String>,
    /// Scopes asked for; empty: the server's challenge or metadata decide.
    pub scopes: Vec<String>,
}

impl fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientIdentity")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[redacted]"),
            )
            .field("metadata_url", &self.metadata_url)
            .field("scopes", &self.scopes)
            .finish()
    }
}

/// Why no token was had. Never carries a token, a code or a secret.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error("the server did not ask for authorization (no 401)")]
    NotProtected,
    #[error("the callback listener: {0}")]
    Listener(String),
    #[error("authorization: {0}")]
    Flow(String),
    #[error("no callback arrived within {0:?}")]
    Timeout(Duration),
    /// The authorization server sent the user back with an `error`.
    #[error("the authorization server answered `{0}`")]
    Denied(String),
}

/// A server's `WWW-Authenticate` challenge, read back from the error a
/// request met: a `401` (no token, or one it no longer takes) or a `403`
/// with `error="insufficient_scope"` (a token without the scope the
/// request needs: the step-up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// The header as the server sent it, parameters only (`Bearer k="v", …`).
    pub header: String,
    /// A `403`: the token is good, its scope is not enough.
    pub insufficient_scope: bool,
}

impl Challenge {
    /// The scopes the challenge names (`scope="a b"`), if any.
    pub fn scopes(&self) -> Vec<String> {
        param(&self.header, "scope")
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default()
    }
}

/// The challenge carried in the text of an error the MCP transport
/// reported (rmcp's "authorization required: …" for a `401`,
/// "insufficient scope: …" for a `403`), or `None`.
pub fn challenge_in(text: &str) -> Option<Challenge> {
    let found = [
        ("authorization required: ", false),
        ("insufficient scope: ", true),
    ]
    .into_iter()
    .filter_map(|(marker, insufficient)| {
        text.find(marker)
            .map(|at| (at + marker.len(), insufficient))
    })
    .min_by_key(|(at, _)| *at)?;
    let (at, insufficient_scope) = found;
    let rest = text[at..].strip_prefix("Bearer")?;
    let mut params = Vec::new();
    let mut chars = rest.char_indices().peekable();
    loop {
        while chars.next_if(|(_, c)| *c == ' ' || *c == ',').is_some() {}
        let mut name = String::new();
        while let Some((_, c)) =
            chars.next_if(|(_, c)| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        {
            name.push(c);
        }
        if name.is_empty() || chars.next_if(|(_, c)| *c == '=').is_none() {
            break;
        }
        let mut value = String::new();
        if chars.next_if(|(_, c)| *c == '"').is_some() {
            let mut closed = false;
            while let Some((_, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, e)) = chars.next() {
                            value.push(e);
                        }
                    }
                    '"' => {
                        closed = true;
                        break;
                    }
                    c => value.push(c),
                }
            }
            if !closed {
                break;
            }
        } else {
            while let Some((_, c)) =
                chars.next_if(|(_, c)| !c.is_whitespace() && *c != ',' && *c != ')')
            {
                value.push(c);
            }
        }
        params.push(format!("{name}=\"{}\"", value.replace('"', "\\\"")));
    }
    Some(Challenge {
        header: format!("Bearer {}", params.join(", ")),
        insufficient_scope,
    })
}

/// The challenge of a failure the transport itself reported (connecting,
/// sending, a lost answer), never of a JSON-RPC error: that text is the
/// server's, and may say anything.
pub fn challenge_of(e: &super::McpError) -> Option<Challenge> {
    use super::McpError;
    match e {
        McpError::Connect { reason, .. }
        | McpError::Transport { reason, .. }
        | McpError::Unanswered { reason, .. } => challenge_in(reason),
        _ => None,
    }
}

/// One parameter's value in a challenge this module wrote.
fn param(header: &str, name: &str) -> Option<String> {
    let at = header.find(&format!("{name}=\""))? + name.len() + 2;
    let end = header[at..].find('"')?;
    Some(header[at..at + end].to_string())
}

/// The `WWW-Authenticate` challenge of `url`'s `401` to an unauthenticated
/// request, or `None` when it does not answer 401. An `initialize` first;
/// a server that lets `initialize` through and protects the rest (the MCP
/// spec allows it) is asked a `tools/list` too.
pub async fn challenge(url: &str, timeout: Duration) -> Result<Option<String>, OAuthError> {
    let initialize = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "turnstile", "version": env!("CARGO_PKG_VERSION")}}
    });
    let list = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|e| OAuthError::Flow(e.to_string()))?;
    for body in [initialize, list] {
        let res = client
            .post(url)
            .header(
                reqwest::header::ACCEPT,
                "application/json, text/event-stream",
            )
            .json(&body)
            .send()
            .await
            .map_err(|e| OAuthError::Flow(e.without_url().to_string()))?;
        if res.status() == reqwest::StatusCode::UNAUTHORIZED {
            return Ok(Some(
                (res.headers().get(reqwest::header::WWW_AUTHENTICATE))
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("Bearer")
                    .to_string(),
            ));
        }
    }
    Ok(None)
}

/// Runs the authorization code flow for `url` and returns its access
/// token. `open` is handed the authorization URL (a browser, or a fetch
/// for an authorization server that needs no user); the redirect comes
/// back to a listener on 127.0.0.1, within `wait`.
pub async fn authorize<F, Fut>(
    url: &str,
    challenge: Option<String>,
    client: &ClientIdentity,
    wait: Duration,
    open: F,
) -> Result<AccessToken, OAuthError>
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| OAuthError::Listener(e.to_string()))?;
    let port = listener
        .local_addr()
        .map_err(|e| OAuthError::Listener(e.to_string()))?
        .port();
    let redirect = format!("http://127.0.0.1:{port}/callback");
    let flow = |e: rmcp::transport::auth::AuthError| OAuthError::Flow(e.to_string());
    let mut state = OAuthState::new(url, None).await.map_err(flow)?;
    let mut request = AuthorizationRequest::new(redirect.clone()).with_client_name("turnstile");
    if let Some(c) = challenge {
        request = request.with_challenge(c);
    }
    if let Some(id) = &client.client_id {
        request = request.with_preregistered_client(id.clone());
        if let Some(secret) = &client.client_secret {
            request = request.with_client_secret(secret.clone());
        }
    }
    if let Some(m) = &client.metadata_url {
        request = request.with_client_metadata_url(m.clone());
    }
    if !client.scopes.is_empty() {
        request = request.with_scopes(client.scopes.iter().cloned());
    }
    state.start_authorization(request).await.map_err(flow)?;
    let authorization_url = state.get_authorization_url().await.map_err(flow)?;
    let callback = async {
        // The first request to /callback that carries a code or an error;
        // anything else (a browser's pre-connection, a favicon) is answered
        // 404 and the listener goes on.
        loop {
            let (mut conn, _) = listener
                .accept()
                .await
                .map_err(|e| OAuthError::Listener(e.to_string()))?;
            let Some(target) = request_target(&mut conn).await else {
                continue;
            };
            let Ok(parsed) = reqwest::Url::parse(&format!("http://127.0.0.1:{port}{target}"))
            else {
                continue;
            };
            let has = |k: &str| parsed.query_pairs().any(|(key, _)| key == k);
            if parsed.path() != "/callback" || !(has("code") || has("error")) {
                let _ = conn
                    .write_all(
                        b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    )
                    .await;
                continue;
            }
            let page = "turnstile: the authorization server answered. You may close this window.\n";
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
                page.len()
            );
            let _ = conn.write_all(reply.as_bytes()).await;
            if let Some((_, e)) = parsed.query_pairs().find(|(k, _)| k == "error") {
                // An OAuth error code is a short ASCII word; nothing else is shown.
                let word: String = e
                    .chars()
                    .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .take(40)
                    .collect();
                return Err(OAuthError::Denied(word));
            }
            return Ok::<_, OAuthError>(parsed.to_string());
        }
    };
    let called_back = tokio::time::timeout(wait, async {
        let (_, called_back) = tokio::join!(open(authorization_url), callback);
        called_back
    })
    .await;
    let callback_url = called_back.map_err(|_| OAuthError::Timeout(wait))??;
    state
        .handle_callback_url(&callback_url)
        .await
        .map_err(flow)?;
    let manager = state
        .into_authorization_manager()
        .ok_or_else(|| OAuthError::Flow("no authorization after the callback".into()))?;
    let token = manager.get_access_token().await.map_err(flow)?;
    Ok(AccessToken(token))
}

/// The request target of one HTTP request on `conn`: its first line, read
/// up to 8 KiB within 5 s; `None` for anything else.
async fn request_target(conn: &mut tokio::net::TcpStream) -> Option<String> {
    let mut line = Vec::new();
    let read = async {
        let mut byte = [0u8; 1];
        while line.len() < 8192 {
            if conn.read(&mut byte).await.ok()? == 0 {
                return None;
            }
            if byte[0] == b'\n' {
                return Some(());
            }
            line.push(byte[0]);
        }
        None
    };
    tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .ok()??;
    let line = String::from_utf8(line).ok()?;
    let mut parts = line.split_whitespace();
    (parts.next() == Some("GET")).then_some(())?;
    parts.next().map(str::to_string)
}

/// The client credentials grant (the MCP authorization extension for a
/// service identity, no user): discovery as for [`authorize`], then the
/// token endpoint with `client_id` and its secret, for the server as the
/// resource.
pub async fn client_credentials(
    url: &str,
    client: &ClientIdentity,
) -> Result<AccessToken, OAuthError> {
    let flow = |e: rmcp::transport::auth::AuthError| OAuthError::Flow(e.to_string());
    let (Some(client_id), Some(client_secret)) = (&client.client_id, &client.client_secret) else {
        return Err(OAuthError::Flow(
            "the client credentials grant needs a client id and its secret".into(),
        ));
    };
    let mut state = OAuthState::new(url, None).await.map_err(flow)?;
    let config = ClientCredentialsConfig::ClientSecret {
        client_id: client_id.clone(),
        client_secret: client_secret.clone(),
        scopes: client.scopes.clone(),
        resource: Some(url.to_string()),
    };
    state
        .authenticate_client_credentials(config)
        .await
        .map_err(flow)?;
    let manager = state
        .into_authorization_manager()
        .ok_or_else(|| OAuthError::Flow("no authorization after the token request".into()))?;
    let token = manager.get_access_token().await.map_err(flow)?;
    Ok(AccessToken(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_challenge_is_read_back_from_the_transports_error() {
        let text = "tools/list failed: MCP server 'x' got 'tools/list' and no answer came back (Auth required: \
                    authorization required: Bearer scope=\"mcp:basic\", resource_metadata=\"http://h/.well-known/oauth-protected-resource/mcp\"), when send";
        let c = challenge_in(text).unwrap();
        assert!(!c.insufficient_scope);
        assert_eq!(c.scopes(), ["mcp:basic"]);
        assert_eq!(
            c.header,
            "Bearer scope=\"mcp:basic\", resource_metadata=\"http://h/.well-known/oauth-protected-resource/mcp\""
        );
        let c = challenge_in("Insufficient scope: insufficient scope: Bearer error=\"insufficient_scope\", scope=\"a b\"").unwrap();
        assert!(c.insufficient_scope);
        assert_eq!(c.scopes(), ["a", "b"]);
        assert!(challenge_in("connection refused").is_none());
    }

    #[test]
    fn a_json_rpc_errors_text_is_never_read_as_a_challenge() {
        let said = "insufficient scope: Bearer scope=\"admin\"".to_string();
        let rpc = crate::mcp::McpError::Rpc {
            server: "s".into(),
            tool: "t".into(),
            code: -32000,
            message: said.clone(),
        };
        assert!(challenge_of(&rpc).is_none());
        let transport = crate::mcp::McpError::Transport {
            server: "s".into(),
            tool: "t".into(),
            reason: said,
        };
        assert_eq!(challenge_of(&transport).unwrap().scopes(), ["admin"]);
    }
}
