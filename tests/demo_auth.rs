//! Issue 20, the demo tool server's side, over the real wire: rmcp's MCP
//! client over streamable HTTP (and plain HTTP for the verifier) against a
//! real [`DemoServer`], no mocks.
//!
//! * The bearer verifier `GET /api/auth/me`: each demo user, 401 for an
//!   expired, unknown or malformed credential, each fault switch, the
//!   request counter.
//! * Licence tiers declared in `tools/list` `_meta`.
//! * Exact MCP sessions (seed 002's "ADR-0098") for every private demo tool:
//!   a random, an invalidated (closed with `DELETE`, or forgotten by the
//!   server) and a valid-but-other explicit session id are each refused
//!   with the right code, and the
//!   refusal carries no session id and no URL, and the tool never ran; an
//!   omitted id, or the call's own, works. A call with no transport binding
//!   at all is refused by the transport before it reaches a handler.
//! * Private state belongs to the bearer subject a session was opened with:
//!   invisible to another user and to anonymous sessions, visible to the
//!   same user's next session.
//! * Our [`ToolClient`] names its session in every call, and the new one
//!   after a reconnect.

use crate::common;

use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
    RequestMetaObject,
};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Map, Value};
use turnstile::mcp::{ServerSpec, ToolClient, PROTOCOL_VERSION};
use turnstile_demo::{
    DemoOptions, DemoServer, VerifierFault, INVALID_SESSION, LICENCE_TIER_META, PRIVATE_TOOLS,
    SESSION_META, SESSION_MISMATCH, TIERS,
};

// ---------------------------------------------------------------- helpers --

type Raw = RunningService<RoleClient, ClientConfig>;

async fn start(opts: DemoOptions) -> DemoServer {
    common::init_tracing();
    DemoServer::start(std::net::SocketAddr::from(([127, 0, 0, 1], 0)), opts)
        .await
        .expect("demo server starts")
}

/// rmcp's client over streamable HTTP, `initialize` pinned to the revision
/// the demo speaks, optionally with a bearer token; and the session id the
/// server issued it (the one live session that was not live before).
async fn raw(server: &DemoServer, bearer: Option<&str>) -> (Raw, String) {
    let before = server.live_sessions().await;
    let mut config = StreamableHttpClientTransportConfig::with_uri(server.url.as_str());
    if let Some(token) = bearer {
        config = config.auth_header(token);
    }
    let transport = StreamableHttpClientTransport::from_config(config);
    let client = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("demo-auth-test", "0"),
    )
    .with_protocol_version(PROTOCOL_VERSION)
    .serve(transport)
    .await
    .expect("raw client connects");
    let new: Vec<String> = server
        .live_sessions()
        .await
        .into_iter()
        .filter(|id| !before.contains(id))
        .collect();
    assert_eq!(new.len(), 1, "one new session: {new:?}");
    (client, new[0].clone())
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

/// `tools/call` with `_meta["turnstile/session"]` = `session` (`None`: no
/// `_meta` at all).
async fn call(client: &Raw, tool: &str, args: Value, session: Option<&str>) -> CallToolResult {
    let mut params = CallToolRequestParams::new(tool.to_string()).with_arguments(obj(args));
    if let Some(id) = session {
        let mut meta = RequestMetaObject::new();
        meta.insert(SESSION_META.to_string(), json!(id));
        params.meta = Some(meta);
    }
    client
        .peer()
        .call_tool(params)
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

fn structured(r: &CallToolResult) -> Value {
    r.structured_content.clone().unwrap_or(Value::Null)
}

/// The whole result as the client received it.
fn wire(r: &CallToolResult) -> String {
    serde_json::to_string(r).expect("result serialises")
}

/// Arguments that would make each private tool act (action 1, EXP-1).
fn private_args(tool: &str) -> Value {
    match tool {
        "prepare_seat_reservation" => json!({"seat": "12", "time": "15:00"}),
        "confirm_action" => json!({"actionId": 1, "idempotencyKey": "k"}),
        "cancel_action" | "get_action" => json!({"actionId": 1}),
        "export_all_lms_materials" => json!({}),
        "confirm_lms_material_export" => json!({"exportId": "EXP-1"}),
        other => panic!("not a private tool: {other}"),
    }
}

async fn get(url: &str, authorization: Option<&str>) -> (u16, Value) {
    let mut req = reqwest::Client::new().get(url);
    if let Some(a) = authorization {
        req = req.header("authorization", a);
    }
    let resp = req.send().await.expect("verifier answers");
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

// --------------------------------------------------------------- verifier --

#[tokio::test]
async fn verifier_answers_each_demo_user_and_401_for_anything_else() {
    let server = start(DemoOptions::default()).await;
    let url = server.verifier_url();
    assert_eq!(url, server.url.replace("/mcp", "/api/auth/me"));
    let users = server.demo_users();
    let summary: Vec<(&str, &str, Vec<String>)> = users
        .iter()
        .map(|u| (u.name.as_str(), u.subject.as_str(), u.tiers.clone()))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("ana", "user-ana", vec!["basic".to_string()]),
            ("bo", "user-bo", vec!["pro".to_string()]),
        ]
    );
    for u in &users {
        assert_eq!(u.token.len(), 64);
        assert!(u.token.bytes().all(|b| b.is_ascii_hexdigit()));
        let (status, body) = get(&url, Some(&format!("Bearer {}", u.token))).await;
        assert_eq!(status, 200);
        assert_eq!(body, json!({"subject": u.subject, "tiers": u.tiers}));
        for t in &u.tiers {
            assert!(TIERS.contains(&t.as_str()));
        }
    }
    let ana = &users[0].token;
    let refused = [
        Some(format!("Bearer {}", server.expired_token())),
        Some("Bearer 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef".into()),
        Some(format!("Basic {ana}")),
        Some("Bearer".into()),
        Some(format!("Bearer {ana} extra")),
        Some(format!("Bearer {}", &ana[..63])),
        None,
    ];
    for auth in &refused {
        let (status, body) = get(&url, auth.as_deref()).await;
        assert_eq!(
            (status, body),
            (401, json!({"error": "invalid_token"})),
            "{auth:?}"
        );
    }
    assert_eq!(server.verifier_requests(), 2 + refused.len() as u64);
    // Another server's tokens are its own.
    let other = start(DemoOptions::default()).await;
    let (status, _) = get(&other.verifier_url(), Some(&format!("Bearer {ana}"))).await;
    assert_eq!(status, 401);
    other.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn verifier_fault_switches() {
    let server = start(DemoOptions {
        verifier_fault: VerifierFault::ServerError,
        ..DemoOptions::default()
    })
    .await;
    let url = server.verifier_url();
    let ana = server.demo_users()[0].clone();
    let bearer = format!("Bearer {}", ana.token);
    assert_eq!(server.verifier_fault(), VerifierFault::ServerError);
    let (status, body) = get(&url, Some(&bearer)).await;
    assert_eq!(status, 500);
    assert!(body.get("subject").is_none(), "{body}");

    server.set_verifier_fault(VerifierFault::Malformed);
    for auth in [Some(bearer.as_str()), None] {
        let (status, body) = get(&url, auth).await;
        assert_eq!(status, 200);
        assert!(
            body.get("subject").is_none() && body.get("tiers").is_none(),
            "{body}"
        );
    }

    let delay = Duration::from_millis(400);
    server.set_verifier_fault(VerifierFault::Slow(delay));
    let started = Instant::now();
    let (status, body) = get(&url, Some(&bearer)).await;
    assert!(started.elapsed() >= delay, "{:?}", started.elapsed());
    assert_eq!((status, body["subject"].clone()), (200, json!("user-ana")));
    let started = Instant::now();
    let (status, _) = get(&url, Some("Bearer nope")).await;
    assert!(started.elapsed() >= delay);
    assert_eq!(status, 401);

    server.set_verifier_fault(VerifierFault::None);
    let (status, body) = get(&url, Some(&bearer)).await;
    assert_eq!(
        (status, body),
        (200, json!({"subject": "user-ana", "tiers": ["basic"]}))
    );
    assert_eq!(server.verifier_requests(), 6);
    server.shutdown().await;
}

// ----------------------------------------------------------- licence tiers --

#[tokio::test]
async fn tools_list_declares_licence_tiers_in_meta() {
    let server = start(DemoOptions::default()).await;
    let (client, _) = raw(&server, None).await;
    let tools = client.peer().list_all_tools().await.expect("tools/list");
    let declared: Vec<(String, Value)> = tools
        .iter()
        .filter_map(|t| {
            let tier = t.meta.as_ref()?.get(LICENCE_TIER_META)?;
            Some((t.name.to_string(), tier.clone()))
        })
        .collect();
    assert_eq!(
        declared,
        vec![
            ("archive_query".to_string(), json!("pro")),
            ("get_panorama".to_string(), json!("basic")),
        ]
    );
    assert!(tools.len() > 2);
    client.cancel().await.ok();
    server.shutdown().await;
}

// --------------------------------------------------------- exact sessions --

/// The seed's matrix: every private tool × {random, invalidated, valid but
/// another session's} explicit id, refused with its code; the refusal names
/// no session and no URL; the tool never ran and nothing changed.
#[tokio::test]
async fn private_tools_refuse_every_wrong_explicit_session() {
    let server = start(DemoOptions::default()).await;
    let (a, a_id) = raw(&server, None).await;
    let (b, b_id) = raw(&server, None).await;
    let (c, c_id) = raw(&server, None).await;
    // Something for the tools to act on, made through the transport binding.
    let prepared = call(
        &a,
        "prepare_seat_reservation",
        private_args("prepare_seat_reservation"),
        None,
    )
    .await;
    assert_eq!(
        structured(&prepared),
        json!({"status": "OK", "actionId": 1, "seat": "12", "time": "15:00"})
    );
    let preview = call(&a, "export_all_lms_materials", json!({}), None).await;
    assert_eq!(structured(&preview)["exportId"], json!("EXP-1"));
    // C is closed with DELETE: its id is no longer live.
    c.cancel().await.expect("c closes");
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.live_sessions().await.contains(&c_id) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        !server.live_sessions().await.contains(&c_id),
        "c was deleted"
    );
    let random = uuid::Uuid::new_v4().to_string();

    let cases = [
        ("random", random.as_str(), INVALID_SESSION),
        ("invalidated", c_id.as_str(), INVALID_SESSION),
        (
            "valid but another session's",
            b_id.as_str(),
            SESSION_MISMATCH,
        ),
    ];
    for tool in PRIVATE_TOOLS {
        for (what, id, code) in cases {
            let (reached, ran) = (server.tool_calls(tool), server.calls(tool));
            let r = call(&a, tool, private_args(tool), Some(id)).await;
            let body = structured(&r);
            assert_eq!(r.is_error, Some(true), "{tool}, {what}: {}", wire(&r));
            assert_eq!(body["error"], json!(code), "{tool}, {what}: {}", wire(&r));
            assert_eq!(
                body.as_object().map(|o| o.len()),
                Some(2),
                "the code and a sentence: {body}"
            );
            let text = wire(&r);
            for leak in [&a_id, &b_id, &c_id, &random] {
                assert!(!text.contains(leak.as_str()), "{tool}, {what}: {text}");
            }
            assert!(
                !text.contains("://") && !text.contains("http"),
                "{tool}, {what}: {text}"
            );
            assert_eq!(
                server.tool_calls(tool),
                reached + 1,
                "{tool} reached the server"
            );
            assert_eq!(server.calls(tool), ran, "{tool} never ran");
        }
    }
    // Nothing moved.
    assert_eq!(server.action_status(1).as_deref(), Some("PENDING"));
    assert_eq!(server.action_status(2), None);
    assert_eq!(server.action_counts(1).confirms, 0);
    assert_eq!(server.exports().confirms("EXP-1"), 0);
    // B's own calls with its own id, and A's with none or its own, work.
    let read = call(&a, "get_action", json!({"actionId": 1}), Some(&a_id)).await;
    assert_eq!(structured(&read)["status"], json!("PENDING"));
    let read = call(&a, "get_action", json!({"actionId": 1}), Some("")).await;
    assert_eq!(structured(&read)["status"], json!("PENDING"));
    let read = call(&b, "get_action", json!({"actionId": 1}), Some(&b_id)).await;
    assert_eq!(
        structured(&read)["status"],
        json!("PENDING"),
        "same anonymous owner"
    );
    let confirmed = call(
        &a,
        "confirm_action",
        private_args("confirm_action"),
        Some(&a_id),
    )
    .await;
    assert_eq!(
        structured(&confirmed),
        json!({"status": "ACCEPTED", "actionId": 1})
    );
    let started = call(
        &a,
        "confirm_lms_material_export",
        json!({"exportId": "EXP-1"}),
        None,
    )
    .await;
    assert_eq!(structured(&started)["status"], json!("OK"));
    // A public tool takes no notice of the key.
    let r = call(&a, "list_projects", json!({}), Some(&random)).await;
    assert_ne!(r.is_error, Some(true));
    a.cancel().await.ok();
    b.cancel().await.ok();
    server.shutdown().await;
}

/// A session the server forgot (its idle timeout, a restart: here
/// [`DemoServer::expire_sessions`]) is no longer live: naming it is
/// `INVALID_SESSION` on the session that replaced it, not a fallback to it.
#[tokio::test]
async fn an_expired_explicit_session_is_invalid_on_the_new_one() {
    let server = start(DemoOptions::default()).await;
    let (old, old_id) = raw(&server, None).await;
    let prepared = call(
        &old,
        "prepare_seat_reservation",
        private_args("prepare_seat_reservation"),
        None,
    )
    .await;
    assert_eq!(structured(&prepared)["actionId"], json!(1));
    server.expire_sessions().await;
    let (new, new_id) = raw(&server, None).await;
    for tool in PRIVATE_TOOLS {
        let r = call(&new, tool, private_args(tool), Some(&old_id)).await;
        assert_eq!(
            structured(&r)["error"],
            json!(INVALID_SESSION),
            "{tool}: {}",
            wire(&r)
        );
        assert!(!wire(&r).contains(&old_id) && !wire(&r).contains(&new_id));
    }
    let read = call(&new, "get_action", json!({"actionId": 1}), Some(&new_id)).await;
    assert_eq!(
        structured(&read)["status"],
        json!("PENDING"),
        "{}",
        wire(&read)
    );
    drop(old);
    new.cancel().await.ok();
    server.shutdown().await;
}

/// With no `Mcp-Session-Id` at all, a `tools/call` of a private tool never
/// runs it. Over the session protocol (revisions up to 2025-11-25) rmcp's
/// streamable-HTTP service answers HTTP 400 before any handler (only
/// `initialize` may come without a session). A sessionless 2026-07-28
/// request (per-request `_meta`, no handshake) is routed statelessly and
/// refused before any handler too (HTTP 400, JSON-RPC -32022 "Unsupported
/// protocol version": the demo speaks no revision without a handshake).
/// So "no binding" is not reachable over HTTP; were it, the handler
/// answers `INVALID_SESSION` (`turnstile_demo::sessions` unit tests).
#[tokio::test]
async fn a_call_without_a_transport_session_never_runs_a_private_tool() {
    let server = start(DemoOptions::default()).await;
    let http = reqwest::Client::new();
    let random = uuid::Uuid::new_v4().to_string();
    for tool in PRIVATE_TOOLS {
        for (version, explicit) in [
            ("2025-11-25", None),
            ("2025-11-25", Some(random.as_str())),
            ("2025-06-18", None),
            ("2026-07-28", None),
            ("2026-07-28", Some(random.as_str())),
        ] {
            let mut meta = json!({});
            if version == "2026-07-28" {
                meta["io.modelcontextprotocol/protocolVersion"] = json!(version);
                meta["io.modelcontextprotocol/clientCapabilities"] = json!({});
                meta["io.modelcontextprotocol/clientInfo"] =
                    json!({"name": "demo-auth-test", "version": "0"});
            }
            if let Some(id) = explicit {
                meta[SESSION_META] = json!(id);
            }
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": tool, "arguments": private_args(tool), "_meta": meta}});
            let resp = http
                .post(&server.url)
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .header("mcp-protocol-version", version)
                .header("mcp-method", "tools/call")
                .header("mcp-name", tool)
                .json(&body)
                .send()
                .await
                .expect("server answers");
            let status = resp.status().as_u16();
            let text = resp.text().await.unwrap_or_default();
            let what = format!("{tool} {version} {explicit:?}: {status} {text}");
            let refused =
                status >= 400 || text.contains("\"error\":{") || text.contains(INVALID_SESSION);
            assert!(refused, "{what}");
            if version != "2026-07-28" {
                assert_eq!(status, 400, "{what}");
            }
            assert!(!text.contains(&random) && !text.contains("://"), "{what}");
            assert_eq!(server.calls(tool), 0, "{what}");
        }
    }
    assert_eq!(server.action_status(1), None);
    assert_eq!(server.exports().confirms("EXP-1"), 0);
    server.shutdown().await;
}

/// Private state belongs to the bearer subject the session was opened with:
/// another user and anonymous sessions cannot see or touch it; the same
/// user's next session (a reconnect) can.
#[tokio::test]
async fn private_state_belongs_to_the_sessions_owner() {
    let server = start(DemoOptions {
        action_worker_delay: Duration::from_millis(20),
        ..DemoOptions::default()
    })
    .await;
    let users = server.demo_users();
    let (ana, ana_token) = (&users[0], users[0].token.as_str());
    let (bo_token, anon) = (users[1].token.as_str(), None);
    let (ana1, ana1_id) = raw(&server, Some(ana_token)).await;
    let prepared = call(
        &ana1,
        "prepare_seat_reservation",
        private_args("prepare_seat_reservation"),
        Some(&ana1_id),
    )
    .await;
    assert_eq!(
        structured(&prepared),
        json!({"status": "OK", "actionId": 1, "seat": "12", "time": "15:00"})
    );
    let preview = call(&ana1, "export_all_lms_materials", json!({}), None).await;
    assert_eq!(structured(&preview)["exportId"], json!("EXP-1"));

    let unknown = call(&ana1, "get_action", json!({"actionId": 7}), None).await;
    for bearer in [Some(bo_token), anon] {
        let (other, other_id) = raw(&server, bearer).await;
        let read = call(
            &other,
            "get_action",
            json!({"actionId": 1}),
            Some(&other_id),
        )
        .await;
        assert_eq!(read.is_error, Some(true));
        // The same answer as for an id never prepared.
        assert_eq!(
            wire(&read).replace("action 1", "action 7"),
            wire(&unknown),
            "{}",
            wire(&read)
        );
        assert!(!wire(&read).contains("15:00"));
        for tool in ["confirm_action", "cancel_action"] {
            let r = call(&other, tool, private_args(tool), None).await;
            assert_eq!(r.is_error, Some(true), "{tool}: {}", wire(&r));
        }
        let r = call(
            &other,
            "confirm_lms_material_export",
            json!({"exportId": "EXP-1"}),
            None,
        )
        .await;
        assert_eq!(structured(&r)["status"], json!("NOT_FOUND"));
        other.cancel().await.ok();
    }
    assert_eq!(server.action_status(1).as_deref(), Some("PENDING"));
    assert_eq!(server.exports().confirms("EXP-1"), 0);

    // Ana comes back on a new session: her action is hers still.
    ana1.cancel().await.ok();
    let (ana2, ana2_id) = raw(&server, Some(ana_token)).await;
    assert_ne!(ana1_id, ana2_id);
    let confirmed = call(
        &ana2,
        "confirm_action",
        private_args("confirm_action"),
        Some(&ana2_id),
    )
    .await;
    assert_eq!(
        structured(&confirmed),
        json!({"status": "ACCEPTED", "actionId": 1}),
        "{}",
        wire(&confirmed)
    );
    let r = call(
        &ana2,
        "confirm_lms_material_export",
        json!({"exportId": "EXP-1"}),
        None,
    )
    .await;
    assert_eq!(structured(&r)["status"], json!("OK"));
    ana2.cancel().await.ok();
    assert_eq!(ana.name, "ana");

    // A bearer token presented but not valid is no anonymous session.
    for bad in [server.expired_token(), "not-a-token".to_string()] {
        let mut config = StreamableHttpClientTransportConfig::with_uri(server.url.as_str());
        config = config.auth_header(bad);
        let refused = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("demo-auth-test", "0"),
        )
        .with_protocol_version(PROTOCOL_VERSION)
        .serve(StreamableHttpClientTransport::from_config(config))
        .await;
        assert!(refused.is_err(), "initialize with a bad bearer is refused");
    }
    server.shutdown().await;
}

// ------------------------------------------------------ our MCP client --

/// [`ToolClient`] names the session it sends on in every call, and after
/// the server forgot it, the new one.
#[tokio::test]
async fn tool_client_names_its_session_and_the_new_one_after_a_reconnect() {
    let server = start(DemoOptions::default()).await;
    let client = ToolClient::connect(&ServerSpec::http("demo", server.url.clone()))
        .await
        .expect("client connects");
    let first = client.session_id().expect("an HTTP session has an id");
    assert_eq!(server.live_sessions().await, vec![first.clone()]);
    let prepared = client
        .call(
            "prepare_seat_reservation",
            obj(private_args("prepare_seat_reservation")),
        )
        .await
        .expect("prepare answers");
    assert_eq!(
        prepared.structured,
        Some(json!({"status": "OK", "actionId": 1, "seat": "12", "time": "15:00"}))
    );

    // A second, live session: were the first call's `_meta` naming anything
    // but its own session, it would be refused as a mismatch.
    let (other, _) = raw(&server, None).await;
    server.expire_sessions().await;
    // get_action is read-only: re-sent once on the new session.
    let read = client
        .call("get_action", obj(json!({"actionId": 1})))
        .await
        .expect("re-sent on the new session");
    assert!(!read.is_error, "{}", read.text());
    let second = client.session_id().expect("a new session id");
    assert_ne!(first, second);
    assert_eq!(server.live_sessions().await, vec![second.clone()]);
    let confirmed = client
        .call("confirm_action", obj(json!({"actionId": 1})))
        .await
        .expect("confirm answers");
    assert_eq!(
        confirmed.structured,
        Some(json!({"status": "ACCEPTED", "actionId": 1})),
        "{}",
        confirmed.text()
    );
    // Every call went out naming the session it was sent on, and each
    // resolved (a refusal would not have run the tool).
    assert_eq!(server.explicit_session_calls(), 3);
    assert_eq!(
        server.tool_calls("confirm_action"),
        server.calls("confirm_action")
    );
    drop(other);
    client.close().await;
    server.shutdown().await;
}
