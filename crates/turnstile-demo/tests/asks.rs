//! The asking tools (`notify_site_contact`, `open_permit_portal`) driven
//! through real rmcp clients over streamable HTTP: on 2026-07-28 as an
//! `InputRequiredResult` and its retry (the request state consumed once, a
//! replay refused), on 2025-11-25 as `elicitation/create` on the session.
//! What the server did is read from the demo's own counters: the
//! notifications it recorded and the permit portal's visits.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
    FormElicitationCapability, Implementation, InputRequest, InputRequiredResult, InputResponses,
    ProtocolVersion, UrlElicitationCapability,
};
use rmcp::service::{RequestContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData, ServiceExt};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use turnstile_demo::{DemoOptions, DemoServer, Fault, Notification, CONTACT_KEY, PORTAL_KEY};

const ISSUE: &str = "PANO-003-0611";

/// A client and its user: the capabilities it declares, and what the user
/// answers an `elicitation/create` (`None`: the handler fails).
#[derive(Clone)]
struct User {
    caps: ClientCapabilities,
    answer: Option<ElicitResult>,
    asked: Arc<Mutex<Vec<ElicitRequestParams>>>,
}

impl User {
    fn new(caps: ClientCapabilities, answer: Option<ElicitResult>) -> Self {
        User {
            caps,
            answer,
            asked: Arc::default(),
        }
    }

    fn asked(&self) -> Vec<ElicitRequestParams> {
        self.asked.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl ClientHandler for User {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(self.caps.clone(), Implementation::new("asks-test", "0"))
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.asked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(request);
        self.answer
            .clone()
            .ok_or_else(|| ErrorData::internal_error("the user is away", None))
    }
}

/// Elicitation in form mode, URL mode, both, or not at all.
fn caps(form: bool, url: bool) -> ClientCapabilities {
    let mut caps = ClientCapabilities::default();
    if form || url {
        let mut e = ElicitationCapability::new();
        if form {
            e = e.with_form(FormElicitationCapability::new());
        }
        if url {
            e = e.with_url(UrlElicitationCapability::new());
        }
        caps.elicitation = Some(e);
    }
    caps
}

fn accept(content: Value) -> ElicitResult {
    ElicitResult::new(ElicitationAction::Accept).with_content(content)
}

fn contact() -> Value {
    json!({"name": "Mina Park", "email": "mina@example.com", "role": "safety officer", "urgent": true})
}

async fn start(stateless: bool, faults: Vec<Fault>) -> DemoServer {
    let opts = DemoOptions {
        stateless,
        faults,
        ..DemoOptions::default()
    };
    DemoServer::start(SocketAddr::from(([127, 0, 0, 1], 0)), opts)
        .await
        .unwrap_or_else(|e| panic!("demo server starts: {e}"))
}

/// A 2026-07-28 client: `server/discover`, no session.
async fn stateless_client(server: &DemoServer, user: User) -> RunningService<RoleClient, User> {
    user.serve_with_lifecycle(
        StreamableHttpClientTransport::from_uri(server.url.clone()),
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    )
    .await
    .unwrap_or_else(|e| panic!("2026-07-28 client connects: {e}"))
}

/// A 2025-11-25 client: `initialize`, a session.
async fn session_client(server: &DemoServer, user: User) -> RunningService<RoleClient, User> {
    user.serve(StreamableHttpClientTransport::from_uri(server.url.clone()))
        .await
        .unwrap_or_else(|e| panic!("2025-11-25 client connects: {e}"))
}

fn params(tool: &'static str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(tool).with_arguments(args.as_object().cloned().unwrap_or_default())
}

fn retry(
    tool: &'static str,
    args: Value,
    key: &str,
    answer: &ElicitResult,
    state: &str,
) -> CallToolRequestParams {
    let mut responses = InputResponses::new();
    responses.insert(
        key.to_string(),
        serde_json::to_value(answer).unwrap_or_default(),
    );
    params(tool, args)
        .with_input_responses(responses)
        .with_request_state(state)
}

async fn once(
    client: &RunningService<RoleClient, User>,
    p: CallToolRequestParams,
) -> CallToolResponse {
    client
        .call_tool_once(p)
        .await
        .unwrap_or_else(|e| panic!("tools/call answers: {e}"))
}

fn complete(r: CallToolResponse) -> CallToolResult {
    match r {
        CallToolResponse::Complete(r) => r,
        other => panic!("expected a complete result, got {other:?}"),
    }
}

fn input_required(r: CallToolResponse) -> InputRequiredResult {
    match r {
        CallToolResponse::InputRequired(r) => r,
        other => panic!("expected input_required, got {other:?}"),
    }
}

/// `(isError, structuredContent)`; the text block is the same JSON.
fn body(r: &CallToolResult) -> (bool, Value) {
    let structured = r.structured_content.clone().unwrap_or(Value::Null);
    let text = r
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default();
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap_or(Value::Null),
        structured
    );
    (r.is_error.unwrap_or(false), structured)
}

/// The one input request under `key`, and the request state.
fn the_ask(r: &InputRequiredResult, key: &str) -> (ElicitRequestParams, String) {
    let requests = r.input_requests.clone().unwrap_or_default();
    assert_eq!(
        requests.keys().collect::<Vec<_>>(),
        [key],
        "one input request, under {key}"
    );
    let params = match requests.get(key) {
        Some(InputRequest::Elicitation(e)) => e.params.clone(),
        other => panic!("an elicitation under {key}, got {other:?}"),
    };
    (params, r.request_state.clone().unwrap_or_default())
}

fn form(p: &ElicitRequestParams) -> (String, Value) {
    match p {
        ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } => (
            message.clone(),
            serde_json::to_value(requested_schema).unwrap_or_default(),
        ),
        other => panic!("a form, got {other:?}"),
    }
}

fn url(p: &ElicitRequestParams) -> (String, String, String) {
    match p {
        ElicitRequestParams::UrlElicitationParams {
            message,
            url,
            elicitation_id,
            ..
        } => (message.clone(), url.clone(), elicitation_id.clone()),
        other => panic!("a URL ask, got {other:?}"),
    }
}

fn expected_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name", "description": "Who should be told", "minLength": 1},
            "email": {"type": "string", "title": "Email", "description": "Where to reach them", "format": "email"},
            "role": {"type": "string", "title": "Role", "description": "Their role on site", "enum": ["site manager", "safety officer", "foreman"]},
            "urgent": {"type": "boolean", "title": "Urgent", "description": "Tell them at once", "default": false},
        },
        "required": ["name", "email", "role"],
    })
}

fn notified() -> Value {
    json!({
        "status": "NOTIFIED",
        "issue_id": ISSUE,
        "contact": {"name": "Mina Park", "email": "mina@example.com", "role": "safety officer", "urgent": true},
    })
}

fn refusal(code: &str, message: &str) -> (bool, Value) {
    (true, json!({"error": code, "message": message}))
}

/// A plain HTTP GET on the demo server, as a browser would open the
/// portal: the status line and the body.
async fn get(server: &DemoServer, url: &str) -> (String, String) {
    let origin = format!("http://{}", server.addr());
    let path = url
        .strip_prefix(&origin)
        .unwrap_or_else(|| panic!("{url} is on {origin}"));
    let mut stream = tokio::net::TcpStream::connect(server.addr())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        server.addr()
    );
    stream
        .write_all(request.as_bytes())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    )
}

// ------------------------------------------------------------ 2026-07-28 --

#[tokio::test]
async fn stateless_form_ask_is_answered_once_and_a_replay_is_refused() {
    let server = start(true, vec![]).await;
    let user = User::new(caps(true, true), None);
    let client = stateless_client(&server, user.clone()).await;
    let args = json!({"issue_id": ISSUE});

    let asked = input_required(once(&client, params("notify_site_contact", args.clone())).await);
    let (ask, state) = the_ask(&asked, CONTACT_KEY);
    assert_eq!(
        form(&ask),
        (
            format!("Who should be told about {ISSUE}?"),
            expected_schema()
        )
    );
    assert!(state.starts_with("rs-"), "{state}");
    assert_eq!(server.pending_asks(), 1);
    assert!(
        server.notifications().is_empty(),
        "nothing before the answer"
    );

    let answered = complete(
        once(
            &client,
            retry(
                "notify_site_contact",
                args.clone(),
                CONTACT_KEY,
                &accept(contact()),
                &state,
            ),
        )
        .await,
    );
    assert_eq!(body(&answered), (false, notified()));
    assert_eq!(
        server.notifications(),
        [Notification {
            issue_id: ISSUE.into(),
            name: "Mina Park".into(),
            email: "mina@example.com".into(),
            role: "safety officer".into(),
            urgent: true,
        }]
    );
    assert_eq!(server.pending_asks(), 0);

    // The same retry again: a replay, refused; still one notification.
    let replay = complete(
        once(
            &client,
            retry(
                "notify_site_contact",
                args.clone(),
                CONTACT_KEY,
                &accept(contact()),
                &state,
            ),
        )
        .await,
    );
    assert_eq!(
        body(&replay),
        refusal(
            "REPLAYED",
            "this request was already answered; nothing was done"
        )
    );
    assert_eq!(server.notifications().len(), 1);

    // A state this server never gave.
    let unknown = complete(
        once(
            &client,
            retry(
                "notify_site_contact",
                args.clone(),
                CONTACT_KEY,
                &accept(contact()),
                "rs-forged",
            ),
        )
        .await,
    );
    assert_eq!(body(&unknown).1["error"], json!("UNKNOWN_REQUEST_STATE"));
    assert!(body(&unknown).0);
    assert_eq!(server.notifications().len(), 1);
    assert_eq!(server.tool_calls("notify_site_contact"), 4);
    assert!(
        user.asked().is_empty(),
        "2026-07-28 never sends elicitation/create"
    );
    let _ = client.cancel().await;
    server.shutdown().await;
}

#[tokio::test]
async fn stateless_decline_cancel_and_bad_answers_notify_nobody() {
    let server = start(true, vec![]).await;
    let client = stateless_client(&server, User::new(caps(true, false), None)).await;
    let args = json!({"issue_id": ISSUE});
    let ask = |client| async move {
        let asked = input_required(
            once(
                client,
                params("notify_site_contact", json!({"issue_id": ISSUE})),
            )
            .await,
        );
        the_ask(&asked, CONTACT_KEY).1
    };
    let answer = |state: String, r: ElicitResult| {
        let args = args.clone();
        let client = &client;
        async move {
            body(&complete(
                once(
                    client,
                    retry("notify_site_contact", args, CONTACT_KEY, &r, &state),
                )
                .await,
            ))
        }
    };

    let state = ask(&client).await;
    let declined = ElicitResult::new(ElicitationAction::Decline);
    assert_eq!(
        answer(state.clone(), declined.clone()).await,
        (
            false,
            json!({"status": "NOT_NOTIFIED", "reason": "declined", "issue_id": ISSUE})
        )
    );
    assert_eq!(answer(state, declined).await.1["error"], json!("REPLAYED"));

    let state = ask(&client).await;
    assert_eq!(
        answer(state, ElicitResult::new(ElicitationAction::Cancel)).await,
        (false, json!({"status": "CANCELLED", "issue_id": ISSUE}))
    );

    // Accepted content is checked here too; a refused answer does nothing
    // and leaves the ask open for a good one.
    let state = ask(&client).await;
    let no_email = json!({"name": "Mina Park", "role": "foreman"});
    assert_eq!(
        answer(state.clone(), accept(no_email)).await,
        refusal("INVALID_CONTENT", "email is required; nothing was done")
    );
    let bad_role = json!({"name": "Mina Park", "email": "mina@example.com", "role": "mayor"});
    assert_eq!(
        answer(state.clone(), accept(bad_role)).await.1["error"],
        json!("INVALID_CONTENT")
    );
    // A retry for another issue with this state: refused, still open.
    let other = complete(
        once(
            &client,
            retry(
                "notify_site_contact",
                json!({"issue_id": "PANO-001-0001"}),
                CONTACT_KEY,
                &accept(contact()),
                &state,
            ),
        )
        .await,
    );
    assert_eq!(body(&other).1["error"], json!("ARGUMENTS_CHANGED"));
    // The other tool with this state: not its state.
    let portal = complete(
        once(
            &client,
            retry(
                "open_permit_portal",
                json!({"permit": "HW-12"}),
                PORTAL_KEY,
                &ElicitResult::new(ElicitationAction::Accept),
                &state,
            ),
        )
        .await,
    );
    assert_eq!(body(&portal).1["error"], json!("UNKNOWN_REQUEST_STATE"));
    // No response under "contact".
    let missing = complete(
        once(
            &client,
            retry(
                "notify_site_contact",
                args.clone(),
                "someone-else",
                &accept(contact()),
                &state,
            ),
        )
        .await,
    );
    assert_eq!(body(&missing).1["error"], json!("MISSING_INPUT_RESPONSE"));
    assert!(server.notifications().is_empty());
    assert_eq!(server.pending_asks(), 1);
    assert_eq!(answer(state, accept(contact())).await, (false, notified()));
    assert_eq!(server.notifications().len(), 1);
    assert_eq!(server.pending_asks(), 0);
    let _ = client.cancel().await;
    server.shutdown().await;
}

#[tokio::test]
async fn stateless_client_without_elicitation_is_not_asked() {
    let server = start(true, vec![]).await;
    let client = stateless_client(&server, User::new(caps(false, false), None)).await;
    let r = complete(
        once(
            &client,
            params("notify_site_contact", json!({"issue_id": ISSUE})),
        )
        .await,
    );
    assert_eq!(
        body(&r),
        refusal(
            "NO_ELICITATION",
            "the client cannot ask the user; nothing was done"
        )
    );
    // Form mode only: no URL ask either.
    let client = stateless_client(&server, User::new(caps(true, false), None)).await;
    let r = complete(
        once(
            &client,
            params("open_permit_portal", json!({"permit": "HW-12"})),
        )
        .await,
    );
    assert_eq!(body(&r).1["error"], json!("NO_ELICITATION"));
    assert_eq!(server.pending_asks(), 0);
    // An empty issue asks nobody.
    let r = complete(
        once(
            &client,
            params("notify_site_contact", json!({"issue_id": " "})),
        )
        .await,
    );
    assert_eq!(body(&r).1["error"], json!("MISSING_ISSUE_ID"));
    let _ = client.cancel().await;
    server.shutdown().await;
}

#[tokio::test]
async fn stateless_portal_ask_is_a_link_on_the_demo_origin_never_fetched_by_the_server() {
    let server = start(true, vec![]).await;
    let client = stateless_client(&server, User::new(caps(true, true), None)).await;
    let args = json!({"permit": "HW-12"});
    let asked = input_required(once(&client, params("open_permit_portal", args.clone())).await);
    let (ask, state) = the_ask(&asked, PORTAL_KEY);
    let (message, link, _) = url(&ask);
    assert_eq!(message, "Sign hot-work permit HW-12 in the permit portal");
    let prefix = format!("http://{}/permits/HW-12?ticket=", server.addr());
    assert!(link.starts_with(&prefix), "{link}");
    assert!(link.len() > prefix.len() + 16, "a random ticket: {link}");
    assert_eq!(server.permit_visits(), 0);

    let consented = complete(
        once(
            &client,
            retry(
                "open_permit_portal",
                args.clone(),
                PORTAL_KEY,
                &ElicitResult::new(ElicitationAction::Accept),
                &state,
            ),
        )
        .await,
    );
    assert_eq!(
        body(&consented),
        (
            false,
            json!({
                "status": "CONSENTED",
                "permit": "HW-12",
                "note": "the user agreed to open the portal; the permit is signed only when the portal says so",
            })
        )
    );
    assert_eq!(server.permit_visits(), 0, "accepting opens nothing");

    // The user opens it.
    let (status, page) = get(&server, &link).await;
    assert!(status.contains("200"), "{status}");
    assert!(
        page.contains("Permit HW-12 — signing happens here"),
        "{page}"
    );
    assert_eq!(server.permit_visits(), 1);

    for (action, status) in [
        (ElicitationAction::Decline, "NOT_OPENED"),
        (ElicitationAction::Cancel, "CANCELLED"),
    ] {
        let asked = input_required(once(&client, params("open_permit_portal", args.clone())).await);
        let (_, state) = the_ask(&asked, PORTAL_KEY);
        let r = complete(
            once(
                &client,
                retry(
                    "open_permit_portal",
                    args.clone(),
                    PORTAL_KEY,
                    &ElicitResult::new(action),
                    &state,
                ),
            )
            .await,
        );
        assert_eq!(
            body(&r),
            (false, json!({"status": status, "permit": "HW-12"}))
        );
    }
    let bad = complete(
        once(
            &client,
            params("open_permit_portal", json!({"permit": "../x"})),
        )
        .await,
    );
    assert_eq!(body(&bad).1["error"], json!("BAD_PERMIT"));
    assert_eq!(server.permit_visits(), 1);
    let _ = client.cancel().await;
    server.shutdown().await;
}

#[tokio::test]
async fn input_huge_state_is_over_a_mebibyte_and_still_names_the_ask() {
    let server = start(true, vec![Fault::InputHugeState]).await;
    let client = stateless_client(&server, User::new(caps(true, true), None)).await;
    let args = json!({"issue_id": ISSUE});
    let asked = input_required(once(&client, params("notify_site_contact", args.clone())).await);
    let (_, state) = the_ask(&asked, CONTACT_KEY);
    assert!(state.starts_with("rs-"));
    assert!(state.len() > 1 << 20, "{} bytes", state.len());
    let answered = complete(
        once(
            &client,
            retry(
                "notify_site_contact",
                args,
                CONTACT_KEY,
                &accept(contact()),
                &state,
            ),
        )
        .await,
    );
    assert_eq!(body(&answered), (false, notified()));
    let asked = input_required(
        once(
            &client,
            params("open_permit_portal", json!({"permit": "HW-12"})),
        )
        .await,
    );
    assert!(the_ask(&asked, PORTAL_KEY).1.len() > 1 << 20);
    let _ = client.cancel().await;
    server.shutdown().await;
}

#[tokio::test]
async fn input_asks_secret_adds_a_password_to_the_form_on_both_revisions() {
    let server = start(true, vec![Fault::InputAsksSecret]).await;
    let client = stateless_client(&server, User::new(caps(true, true), None)).await;
    let asked = input_required(
        once(
            &client,
            params("notify_site_contact", json!({"issue_id": ISSUE})),
        )
        .await,
    );
    let (_, schema) = form(&the_ask(&asked, CONTACT_KEY).0);
    assert_eq!(schema["properties"]["password"]["title"], json!("Password"));
    assert_eq!(
        schema["required"],
        json!(["name", "email", "role", "password"])
    );
    let _ = client.cancel().await;

    let user = User::new(
        caps(true, false),
        Some(ElicitResult::new(ElicitationAction::Decline)),
    );
    let client = session_client(&server, user.clone()).await;
    let r = complete(
        once(
            &client,
            params("notify_site_contact", json!({"issue_id": ISSUE})),
        )
        .await,
    );
    assert_eq!(body(&r).1["status"], json!("NOT_NOTIFIED"));
    let asked = user.asked();
    assert_eq!(asked.len(), 1);
    let (_, schema) = form(&asked[0]);
    assert!(schema["properties"]["password"].is_object());
    let _ = client.cancel().await;
    server.shutdown().await;
}

// ------------------------------------------------------------ 2025-11-25 --

#[tokio::test]
async fn session_form_ask_is_elicitation_create() {
    // A server that speaks both revisions asks a session client on its
    // session; one that speaks 2025-11-25 only, the same way.
    for stateless in [false, true] {
        let server = start(stateless, vec![]).await;
        let user = User::new(caps(true, false), Some(accept(contact())));
        let client = session_client(&server, user.clone()).await;
        let r = complete(
            once(
                &client,
                params("notify_site_contact", json!({"issue_id": ISSUE})),
            )
            .await,
        );
        assert_eq!(body(&r), (false, notified()), "stateless: {stateless}");
        let asked = user.asked();
        assert_eq!(asked.len(), 1);
        assert_eq!(
            form(&asked[0]),
            (
                format!("Who should be told about {ISSUE}?"),
                expected_schema()
            )
        );
        assert_eq!(server.notifications().len(), 1);
        assert_eq!(server.pending_asks(), 0);
        let _ = client.cancel().await;
        server.shutdown().await;
    }
}

#[tokio::test]
async fn session_decline_cancel_bad_content_and_no_capability_notify_nobody() {
    let server = start(false, vec![]).await;
    let cases = [
        (
            caps(true, false),
            Some(ElicitResult::new(ElicitationAction::Decline)),
            (
                false,
                json!({"status": "NOT_NOTIFIED", "reason": "declined", "issue_id": ISSUE}),
            ),
            1,
        ),
        (
            caps(true, false),
            Some(ElicitResult::new(ElicitationAction::Cancel)),
            (false, json!({"status": "CANCELLED", "issue_id": ISSUE})),
            1,
        ),
        (
            caps(true, false),
            Some(accept(
                json!({"name": "", "email": "mina@example.com", "role": "foreman"}),
            )),
            refusal(
                "INVALID_CONTENT",
                "name must not be empty; nothing was done",
            ),
            1,
        ),
        (
            caps(false, false),
            Some(accept(contact())),
            refusal(
                "NO_ELICITATION",
                "the client cannot ask the user; nothing was done",
            ),
            0,
        ),
        // The user's client fails to ask.
        (
            caps(true, false),
            None,
            refusal(
                "NO_ELICITATION",
                "the client cannot ask the user; nothing was done",
            ),
            1,
        ),
    ];
    for (caps, answer, expected, asks) in cases {
        let user = User::new(caps, answer.clone());
        let client = session_client(&server, user.clone()).await;
        let r = complete(
            once(
                &client,
                params("notify_site_contact", json!({"issue_id": ISSUE})),
            )
            .await,
        );
        assert_eq!(body(&r), expected, "{answer:?}");
        assert_eq!(user.asked().len(), asks, "{answer:?}");
        let _ = client.cancel().await;
    }
    assert!(server.notifications().is_empty());
    server.shutdown().await;
}

#[tokio::test]
async fn session_portal_ask_is_a_url_elicitation() {
    let server = start(false, vec![]).await;
    let user = User::new(
        caps(true, true),
        Some(ElicitResult::new(ElicitationAction::Accept)),
    );
    let client = session_client(&server, user.clone()).await;
    let r = complete(
        once(
            &client,
            params("open_permit_portal", json!({"permit": "HW-12"})),
        )
        .await,
    );
    assert_eq!(body(&r).1["status"], json!("CONSENTED"));
    let asked = user.asked();
    assert_eq!(asked.len(), 1);
    let (message, link, id) = url(&asked[0]);
    assert_eq!(message, "Sign hot-work permit HW-12 in the permit portal");
    assert!(
        link.starts_with(&format!("http://{}/permits/HW-12?ticket=", server.addr())),
        "{link}"
    );
    assert!(!id.is_empty(), "2025-11-25 URL asks carry an elicitationId");
    assert_eq!(server.permit_visits(), 0);
    let _ = client.cancel().await;

    // A client that declares form mode only is not asked to open a link.
    let user = User::new(
        caps(true, false),
        Some(ElicitResult::new(ElicitationAction::Accept)),
    );
    let client = session_client(&server, user.clone()).await;
    let r = complete(
        once(
            &client,
            params("open_permit_portal", json!({"permit": "HW-12"})),
        )
        .await,
    );
    assert_eq!(body(&r).1["error"], json!("NO_ELICITATION"));
    assert!(user.asked().is_empty());
    let _ = client.cancel().await;
    server.shutdown().await;
}

#[tokio::test]
async fn both_tools_are_listed_with_their_hints_and_schemas() {
    let server = start(false, vec![]).await;
    let client = session_client(&server, User::new(caps(false, false), None)).await;
    let tools = client
        .peer()
        .list_all_tools()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    for (name, field) in [
        ("notify_site_contact", "issue_id"),
        ("open_permit_portal", "permit"),
    ] {
        let tool = tools
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("{name} listed"));
        let a = tool.annotations.clone().unwrap_or_default();
        assert_eq!(
            (a.read_only_hint, a.destructive_hint, a.idempotent_hint),
            (Some(false), Some(false), Some(false)),
            "{name}"
        );
        assert_eq!(tool.input_schema.get("required"), Some(&json!([field])));
        assert!(tool
            .input_schema
            .get("properties")
            .and_then(|p| p.get(field))
            .is_some_and(Value::is_object));
    }
    let _ = client.cancel().await;
    server.shutdown().await;
}
