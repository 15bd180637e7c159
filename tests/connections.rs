//! Per-user authorization with a protected MCP server (issue 40 §2–4), end
//! to end through `turnstile serve`, against two programs we did not
//! write: an MCP server built on the official Python SDK with its auth
//! support (tests/interop/py_auth_server.py, a resource server that checks
//! each token by the authorization server's introspection), and panva's
//! `oidc-provider` (npm) as the authorization server, with its own login
//! and consent pages (tests/interop/oidc_as.mjs).
//!
//! A planned call to the server, for a user who has not connected it, ends
//! the turn at a Connect card holding the authorization URL; the login is
//! driven through the provider's pages over HTTP; the callback stores the
//! token sealed and resumes the held call once. A second user gets their
//! own card; a token revoked at the provider, or deleted with
//! `DELETE /v1/connections/notes`, asks again. A callback with a wrong
//! `state`, another user's session, a forged `iss`, a replay, or a token
//! for another audience is refused by its row of `tables/connect.ron`, and
//! nothing is stored. The tokens and codes are searched for in the log,
//! the frames, the model's requests and the database file, and not found.

use crate::common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::fake_openai::{Action, FakeOpenAi, Role};
use common::frames::read_frames;
use serde_json::{json, Value};

/// 32 bytes as hex: the sealing key of these tests' deployments.
const KEY: &str = "6b1f0c2d3e4f5a6b7c8d9eaf0b1c2d3e4f5a6b7c8d9eaf0b1c2d3e4f5a6b7c8d";

struct Stack {
    _as: tokio::process::Child,
    issuer: String,
    _py: tokio::process::Child,
    serve: tokio::process::Child,
    base: String,
    fake: FakeOpenAi,
    dir: tempfile::TempDir,
    http: reqwest::Client,
}

impl Stack {
    async fn start(wrong_audience: bool) -> Stack {
        Stack::start_with(Setup {
            wrong_audience,
            ..Setup::default()
        })
        .await
    }

    async fn start_with(setup: Setup) -> Stack {
        let Setup {
            wrong_audience,
            tools,
            resource,
            access_ttl,
        } = setup;
        let dir = common::needs::interop_dir();
        let port = common::free_port();
        let base = format!("http://127.0.0.1:{port}");
        let callback = format!("{base}/v1/connections/callback");
        let mut args = vec![callback.clone()];
        if wrong_audience {
            args.push("--wrong-audience".into());
        }
        if let Some(ttl) = access_ttl {
            args.extend(["--access-ttl".to_string(), ttl.to_string()]);
        }
        let (child, issuer) = common::remote::oidc_provider("oidc_as.mjs", &args).await;

        let tmp = tempfile::tempdir().unwrap();
        let py_port = common::free_port();
        let py = tokio::process::Command::new(common::needs::python_sdk())
            .arg(dir.join("py_auth_server.py"))
            .args(["--port", &py_port.to_string(), "--issuer", &issuer])
            .arg("--calls-file")
            .arg(tmp.path().join("calls.json"))
            .args(resource.iter().flat_map(|r| ["--resource", r]))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("python runs the MCP server");
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let py_url = format!("http://127.0.0.1:{py_port}/mcp");
        wait_until("the Python MCP server answers 401", || async {
            let r = http.post(&py_url).json(&json!({})).send().await;
            r.is_ok_and(|r| r.status() == 401)
        })
        .await;

        let fake = FakeOpenAi::start().await;
        let config = format!(
            "addr = \"127.0.0.1:{port}\"\ndatabase_url = \"sqlite://{db}?mode=rwc\"\n\
             [model]\nbase_url = \"{model}\"\nname = \"fake-model-1\"\napi_key_env = \"CONNECT_TEST_MODEL_KEY\"\n\
             [http]\ndrain_secs = 1\n\
             [connections]\ncallback_url = \"{callback}\"\n\
             [[mcp_servers]]\nname = \"notes\"\nurl = \"{py_url}\"\nauth = \"user\"\n\
             [mcp_servers.oauth]\nclient_id = \"turnstile\"\nscopes = [\"notes:read\"]\n{tools}",
            db = tmp.path().join("t.db").display(),
            model = fake.base_url,
        );
        let path = tmp.path().join("turnstile.toml");
        std::fs::write(&path, config).unwrap();
        let log = std::fs::File::create(tmp.path().join("serve.log")).unwrap();
        let serve = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnstile"))
            .args(["serve", "--config"])
            .arg(&path)
            .env("CONNECT_TEST_MODEL_KEY", common::fake_openai::KEY)
            .env("TURNSTILE_CONNECTIONS_KEY", KEY)
            .env(
                "RUST_LOG",
                "debug,hyper=info,h2=info,sqlx=info,reqwest=info",
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .expect("turnstile serve runs");
        let ready = format!("{base}/healthz");
        wait_until("turnstile serve gets ready", || async {
            let r = http.get(&ready).send().await;
            r.is_ok_and(|r| r.status().is_success())
        })
        .await;
        Stack {
            _as: child,
            issuer,
            _py: py,
            serve,
            base,
            fake,
            dir: tmp,
            http,
        }
    }

    /// How many times `list_notes` ran, per subject, as the server counts.
    fn note_calls(&self) -> Value {
        let text = std::fs::read_to_string(self.dir.path().join("calls.json")).unwrap_or_default();
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    fn db_path(&self) -> PathBuf {
        self.dir.path().join("t.db")
    }

    /// A new anonymous user: a thread and its session cookie.
    async fn user(&self) -> User {
        let r = self
            .http
            .post(format!("{}/v1/threads", self.base))
            .send()
            .await
            .unwrap();
        let cookie = (r.headers().get("set-cookie"))
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .expect("a session cookie")
            .to_string();
        let thread = r.json::<Value>().await.unwrap()["thread_id"]
            .as_str()
            .unwrap()
            .to_string();
        User { cookie, thread }
    }

    /// One turn whose planner calls `tool`; its frames as JSON.
    async fn say(&self, user: &User, text: &str, tool: &str) -> Vec<Value> {
        self.say_with(user, text, tool, "{}").await
    }

    /// One turn whose planner calls `tool` with `args` (JSON text).
    async fn say_with(&self, user: &User, text: &str, tool: &str, args: &str) -> Vec<Value> {
        self.fake.on(
            Role::Planner,
            Action::ToolCalls(vec![(tool.into(), args.into())]),
        );
        let r = self
            .http
            .post(format!("{}/v1/threads/{}/messages", self.base, user.thread))
            .header("cookie", &user.cookie)
            .json(&json!({ "text": text }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let body = r.text().await.unwrap();
        // Every frame, as the wire carries it.
        assert!(!read_frames(body.as_bytes()).is_empty(), "{body}");
        body.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect()
    }

    /// The stored thread.
    async fn thread(&self, user: &User) -> Value {
        let r = self
            .http
            .get(format!("{}/v1/threads/{}", self.base, user.thread))
            .header("cookie", &user.cookie)
            .send()
            .await
            .unwrap();
        r.json().await.unwrap()
    }

    /// The Connect card's one-time sign-in link, asked for as `user` (its
    /// `POST …/ticket`), then the start route as the browser opens it: the
    /// authorization server's URL it redirects to, and the flow cookie it
    /// sets (`name=value`).
    async fn sign_in(&self, user: &User, flow_url: &str) -> SignIn {
        let path = reqwest::Url::parse(flow_url).unwrap().path().to_string();
        let r = self
            .http
            .post(format!("{}{path}/ticket", self.base))
            .header("cookie", &user.cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "a ticket for the card's owner");
        let link = r.json::<Value>().await.unwrap()["url"]
            .as_str()
            .unwrap()
            .to_string();
        let start = format!("{}{link}", self.base);
        let r = self.http.get(&start).send().await.unwrap();
        assert_eq!(r.status(), 303, "the start route redirects");
        let auth_url = r.headers()["location"].to_str().unwrap().to_string();
        let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
        assert!(
            cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"),
            "{cookie}"
        );
        let cookie = cookie.split(';').next().unwrap().to_string();
        SignIn {
            start,
            auth_url,
            cookie,
        }
    }

    /// `user` asks for their notes, gets the Connect card, opens its
    /// sign-in link and signs in as `login`: the sign-in and the callback
    /// URL the provider sent the browser to (not followed yet).
    async fn card_signed_in(&self, user: &User, login: &str) -> (SignIn, String) {
        let frames = self.say(user, "show my notes", "list_notes").await;
        let flow = connect_url(&frames).unwrap_or_else(|| panic!("a Connect card: {frames:?}"));
        let sign_in = self.sign_in(user, &flow).await;
        let callback = self.authorize(&sign_in.auth_url, login).await;
        (sign_in, callback)
    }

    /// The callback request, as the browser makes it.
    async fn callback(&self, url: &str, cookie: Option<&str>) -> (u16, String) {
        let mut req = self.http.get(url);
        if let Some(c) = cookie {
            req = req.header("cookie", c);
        }
        let r = req.send().await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }

    /// Logs in at the provider as `login` and consents, as a browser
    /// would: the redirect back to turnstile, not followed.
    async fn authorize(&self, auth_url: &str, login: &str) -> String {
        let mut jar: BTreeMap<String, String> = BTreeMap::new();
        let mut next = auth_url.to_string();
        let mut form: Option<(String, Vec<(&str, &str)>)> = None;
        for _ in 0..12 {
            let req = match form.take() {
                Some((action, fields)) => self
                    .http
                    .post(action)
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(form_body(&fields)),
                None => self.http.get(&next),
            };
            let cookies: Vec<String> = jar.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let r = req
                .header("cookie", cookies.join("; "))
                .send()
                .await
                .unwrap();
            for c in r.headers().get_all("set-cookie") {
                let pair = c.to_str().unwrap().split(';').next().unwrap().to_string();
                if let Some((k, v)) = pair.split_once('=') {
                    jar.insert(k.to_string(), v.to_string());
                }
            }
            let status = r.status().as_u16();
            if (300..400).contains(&status) {
                let loc = r.headers()["location"].to_str().unwrap().to_string();
                let loc = match loc.starts_with("http") {
                    true => loc,
                    false => format!("{}{loc}", self.issuer),
                };
                if loc.starts_with(&self.base) {
                    return loc;
                }
                next = loc;
                continue;
            }
            assert_eq!(status, 200, "the provider's page at {next}");
            let page = r.text().await.unwrap();
            let action = page
                .split("action=\"")
                .nth(1)
                .and_then(|s| s.split('"').next())
                .unwrap_or_else(|| panic!("a form on the provider's page: {page}"));
            let action = match action.starts_with("http") {
                true => action.to_string(),
                false => format!("{}{action}", self.issuer),
            };
            // The page's hidden `prompt`: a login form, or the consent.
            let fields = match page.contains("name=\"prompt\" value=\"login\"") {
                true => vec![("prompt", "login"), ("login", login), ("password", "any")],
                false => vec![("prompt", "consent")],
            };
            form = Some((action, fields));
        }
        panic!("the provider did not send the browser back");
    }

    /// The access token stored for `user`, opened with the deployment's
    /// key (the test's own look into the sealed row).
    async fn stored_token(&self, user: &User) -> Option<String> {
        self.stored(user, "access_token").await
    }

    /// The refresh token stored for `user`, opened the same way.
    async fn stored_refresh(&self, user: &User) -> Option<String> {
        self.stored(user, "refresh_token").await
    }

    /// One field of the token response sealed for `user` and the notes
    /// server.
    async fn stored(&self, user: &User, field: &str) -> Option<String> {
        let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", self.db_path().display()))
            .await
            .unwrap();
        let owner: String = sqlx::query_scalar("SELECT owner FROM threads WHERE id = ?")
            .bind(&user.thread)
            .fetch_one(&pool)
            .await
            .unwrap();
        let sealed: Option<String> = sqlx::query_scalar(
            "SELECT sealed FROM connections WHERE owner = ? AND server = 'notes'",
        )
        .bind(&owner)
        .fetch_optional(&pool)
        .await
        .unwrap();
        pool.close().await;
        let key = turnstile::store::SealingKey::parse(KEY).unwrap();
        let plain = key.open(&owner, "notes", &sealed?).unwrap();
        let creds: Value = serde_json::from_slice(&plain).unwrap();
        Some(creds["token_response"][field].as_str()?.to_string())
    }

    async fn connections_rows(&self) -> i64 {
        let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", self.db_path().display()))
            .await
            .unwrap();
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM connections")
            .fetch_one(&pool)
            .await
            .unwrap();
        pool.close().await;
        n
    }

    async fn stop(self) -> String {
        common::remote::sigterm(self.serve.id().expect("turnstile serve runs"));
        let mut serve = self.serve;
        let _ = tokio::time::timeout(Duration::from_secs(20), serve.wait()).await;
        std::fs::read_to_string(self.dir.path().join("serve.log")).unwrap_or_default()
    }
}

/// What differs between the tests' deployments.
struct Setup {
    /// The provider issues tokens for another audience.
    wrong_audience: bool,
    /// The notes server's `tools.<tool>` sections.
    tools: &'static str,
    /// The resource the Python server names in its metadata (default: itself).
    resource: Option<&'static str>,
    /// How long the provider's access tokens live (default an hour).
    access_ttl: Option<u32>,
}

impl Default for Setup {
    fn default() -> Setup {
        Setup {
            wrong_audience: false,
            tools: "[mcp_servers.tools.list_notes]\nretry_safe = true\n\
                    [mcp_servers.tools.note_calls]\nretry_safe = true\n\
                    [mcp_servers.tools.add_note]\n",
            resource: None,
            access_ttl: None,
        }
    }
}

/// One sign-in as the browser began it: the start link (used), the
/// authorization server's URL, and the flow cookie.
struct SignIn {
    start: String,
    auth_url: String,
    cookie: String,
}

struct User {
    cookie: String,
    thread: String,
}

async fn wait_until<F, Fut>(what: &str, mut ok: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ok().await {
        assert!(Instant::now() < deadline, "{what}: not within 60 s");
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}

/// The Connect card's authorization URL in a turn's frames.
fn connect_url(frames: &[Value]) -> Option<String> {
    fn find(v: &Value) -> Option<String> {
        match v {
            Value::Object(m) => {
                if m.get("mode").and_then(Value::as_str) == Some("connect") {
                    return m.get("url").and_then(Value::as_str).map(str::to_string);
                }
                m.values().find_map(find)
            }
            Value::Array(a) => a.iter().find_map(find),
            _ => None,
        }
    }
    frames.iter().find_map(find)
}

/// `application/x-www-form-urlencoded` of `fields`.
fn form_body(fields: &[(&str, &str)]) -> String {
    let u = reqwest::Url::parse_with_params("http://x/", fields).unwrap();
    u.query().unwrap_or_default().to_string()
}

fn with_param(url: &str, key: &str, value: &str) -> String {
    let mut u = reqwest::Url::parse(url).unwrap();
    let pairs: Vec<(String, String)> = u
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .filter(|(k, _)| k != key)
        .collect();
    u.query_pairs_mut()
        .clear()
        .extend_pairs(pairs)
        .append_pair(key, value);
    u.to_string()
}

fn param(url: &str, key: &str) -> String {
    let u = reqwest::Url::parse(url).unwrap();
    let found = u.query_pairs().find(|(k, _)| k == key);
    found.map(|(_, v)| v.into_owned()).unwrap_or_default()
}

/// The resumed turn's result in the stored thread: the tool's text.
async fn wait_for_text(stack: &Stack, user: &User, text: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let t = stack.thread(user).await;
        if t.to_string().contains(text) {
            return t;
        }
        assert!(Instant::now() < deadline, "`{text}` not in the thread: {t}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
#[ignore = "needs the npm/PyPI servers: scripts/test-deps, run with --include-ignored"]
async fn a_user_connects_a_protected_server_and_the_held_call_runs_once() {
    let stack = Stack::start(false).await;
    let ana = stack.user().await;

    // A call for a user who has not connected: a Connect card, nothing sent.
    let frames = stack.say(&ana, "show my notes", "list_notes").await;
    let flow = connect_url(&frames).unwrap_or_else(|| panic!("a Connect card: {frames:?}"));
    // The card's address is turnstile's own, not the authorization URL.
    assert!(
        flow.starts_with(&format!("{}/v1/connections/flows/", stack.base)),
        "{flow}"
    );
    // Another user cannot have a sign-in link for it.
    let ben = stack.user().await;
    let path = reqwest::Url::parse(&flow).unwrap().path().to_string();
    let r = stack
        .http
        .post(format!("{}{path}/ticket", stack.base))
        .header("cookie", &ben.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404, "another user's card");
    let sign_in = stack.sign_in(&ana, &flow).await;
    let auth_url = sign_in.auth_url.clone();
    assert!(auth_url.starts_with(&stack.issuer), "{auth_url}");
    for p in ["code_challenge", "state", "resource"] {
        assert!(!param(&auth_url, p).is_empty(), "`{p}` in {auth_url}");
    }
    assert_eq!(param(&auth_url, "code_challenge_method"), "S256");
    assert!(param(&auth_url, "resource").ends_with("/mcp"), "{auth_url}");
    assert!(
        !serde_json::to_string(&frames)
            .unwrap()
            .contains(&param(&auth_url, "state")),
        "the flow's state is in no frame"
    );
    // A start link is used once.
    let again = stack.http.get(&sign_in.start).send().await.unwrap();
    assert_eq!(again.status(), 400, "a used start link");
    let callback = stack.authorize(&auth_url, "ana").await;
    let code = param(&callback, "code");
    assert!(!code.is_empty(), "{callback}");

    // Hostile callbacks first: each refused by its row, nothing stored.
    let forged = with_param(&callback, "state", "not-a-flow");
    let (status, body) = stack.callback(&forged, Some(&sign_in.cookie)).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("callback-without-flow"), "{body}");
    // Not from the browser ana opened her card in: no flow cookie (a leaked
    // sign-in link completed elsewhere), or only her session cookie.
    for cookie in [None, Some(ana.cookie.as_str()), Some(ben.cookie.as_str())] {
        let (status, body) = stack.callback(&callback, cookie).await;
        assert_eq!(status, 400, "{body}");
        assert!(body.contains("callback-for-another-subject"), "{body}");
    }
    assert_eq!(stack.connections_rows().await, 0);

    // ana's own callback: stored, and the held call resumed.
    let (status, body) = stack.callback(&callback, Some(&sign_in.cookie)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("is being sent, once"), "{body}");
    wait_for_text(&stack, &ana, "Budget review moved to Friday").await;
    // How it ended is code's sentence, not the model's.
    wait_for_text(
        &stack,
        &ana,
        "You connected your account, and the call was sent once.",
    )
    .await;
    // A replay stores nothing and resumes nothing.
    let (status, body) = stack.callback(&callback, Some(&sign_in.cookie)).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("callback-replayed-after-connected"), "{body}");

    // The call ran once for ana, as the server counts; and her next call
    // goes out with her token, no card.
    assert_eq!(stack.note_calls(), json!({"ana": 1}));
    let frames = stack.say(&ana, "how many note calls", "note_calls").await;
    assert!(connect_url(&frames).is_none(), "{frames:?}");
    assert!(
        serde_json::to_string(&frames)
            .unwrap()
            .contains(r#""ok":true"#),
        "{frames:?}"
    );

    // GET /v1/connections: hers, never a token.
    let token = stack
        .stored_token(&ana)
        .await
        .expect("ana's token is stored");
    let r = stack
        .http
        .get(format!("{}/v1/connections", stack.base))
        .header("cookie", &ana.cookie)
        .send()
        .await
        .unwrap();
    let listed: Value = r.json().await.unwrap();
    assert_eq!(listed["connections"][0]["server"], "notes", "{listed}");
    assert_eq!(listed["connections"][0]["connected"], true, "{listed}");
    assert!(!listed.to_string().contains(&token));

    // A second user gets their own card, and their own notes.
    let frames = stack.say(&ben, "show my notes", "list_notes").await;
    let ben_flow = connect_url(&frames).expect("ben's own Connect card");
    assert_ne!(ben_flow, flow);
    let ben_sign_in = stack.sign_in(&ben, &ben_flow).await;
    assert_ne!(
        param(&ben_sign_in.auth_url, "state"),
        param(&auth_url, "state")
    );
    let ben_callback = stack.authorize(&ben_sign_in.auth_url, "ben").await;
    // ana's flow cookie does not carry ben's callback.
    let (status, body) = stack.callback(&ben_callback, Some(&sign_in.cookie)).await;
    assert!(
        body.contains("callback-for-another-subject"),
        "{status} {body}"
    );
    let (status, body) = stack
        .callback(&ben_callback, Some(&ben_sign_in.cookie))
        .await;
    assert_eq!(status, 200, "{body}");
    wait_for_text(&stack, &ben, "Dentist at 9").await;
    assert_eq!(stack.note_calls(), json!({"ana": 1, "ben": 1}));
    assert!(!stack
        .thread(&ben)
        .await
        .to_string()
        .contains("Budget review"));

    // A token revoked at the provider: the server refuses it, and ana is
    // asked again.
    // Both of ana's tokens are revoked at the provider (a refresh token
    // alone would get her a new access token without asking).
    let refresh = stack.stored_refresh(&ana).await;
    for t in [Some(token.clone()), refresh].into_iter().flatten() {
        let r = stack
            .http
            .post(format!("{}/token/revocation", stack.issuer))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form_body(&[
                ("token", t.as_str()),
                ("client_id", "turnstile"),
            ]))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let frames = stack.say(&ana, "show my notes", "list_notes").await;
    assert!(
        connect_url(&frames).is_some(),
        "a revoked token asks again: {frames:?}"
    );
    assert!(
        stack.stored_token(&ana).await.is_none(),
        "the refused token is forgotten"
    );

    // DELETE /v1/connections/notes: ben's token is forgotten, and he is
    // asked again.
    let r = stack
        .http
        .delete(format!("{}/v1/connections/notes", stack.base))
        .header("cookie", &ben.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let r = stack
        .http
        .delete(format!("{}/v1/connections/notes", stack.base))
        .header("cookie", &ben.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let frames = stack.say(&ben, "show my notes", "list_notes").await;
    let ben_flow = connect_url(&frames).unwrap_or_else(|| panic!("{frames:?}"));
    let ben_sign_in = stack.sign_in(&ben, &ben_flow).await;
    // ben refuses at the provider: the card is answered `decline`, nothing
    // is sent, and code says so.
    let denied = format!(
        "{}/v1/connections/callback?error=access_denied&state={}&iss={}",
        stack.base,
        param(&ben_sign_in.auth_url, "state"),
        stack.issuer
    );
    let (status, body) = stack.callback(&denied, Some(&ben_sign_in.cookie)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("denied-at-authorization-server"), "{body}");
    wait_for_text(
        &stack,
        &ben,
        "Your account was not connected, so the call was not sent",
    )
    .await;
    assert_eq!(
        stack.note_calls(),
        json!({"ana": 1, "ben": 1}),
        "nothing was sent for ben"
    );

    // A forged `iss` on a fresh flow is refused, and nothing is stored.
    let ana_flow = connect_url(&stack.say(&ana, "notes please", "list_notes").await).unwrap();
    let ana_sign_in = stack.sign_in(&ana, &ana_flow).await;
    let cb = stack.authorize(&ana_sign_in.auth_url, "ana").await;
    let (status, body) = stack
        .callback(
            &with_param(&cb, "iss", "http://127.0.0.1:9"),
            Some(&ana_sign_in.cookie),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("callback-iss-mismatch"), "{body}");
    assert!(stack.stored_token(&ana).await.is_none());

    // Nothing secret anywhere it may not be.
    let model = serde_json::to_string(
        &stack
            .fake
            .requests()
            .iter()
            .map(|r| r.raw.clone())
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let ana_thread = stack.thread(&ana).await.to_string();
    let db = std::fs::read(stack.db_path()).unwrap();
    let log = stack.stop().await;
    assert!(
        log.contains("a user connected a per-user server"),
        "the log is read: {log}"
    );
    for secret in [token.as_str(), code.as_str()] {
        assert!(!log.contains(secret), "a secret in the log");
        assert!(!model.contains(secret), "a secret in a model request");
        assert!(!ana_thread.contains(secret), "a secret in the frames");
        assert!(
            !db.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "a secret in the database file"
        );
    }
}

#[tokio::test]
#[ignore = "needs the npm/PyPI servers: scripts/test-deps, run with --include-ignored"]
async fn a_token_for_another_audience_is_not_stored() {
    let stack = Stack::start(true).await;
    let ana = stack.user().await;
    let (sign_in, cb) = stack.card_signed_in(&ana, "ana").await;
    let (status, body) = stack.callback(&cb, Some(&sign_in.cookie)).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("token-for-another-audience"), "{body}");
    assert_eq!(stack.connections_rows().await, 0);
    let metrics = stack
        .http
        .get(format!("{}/v1/metrics", stack.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("token-for-another-audience"), "{metrics}");
    stack.stop().await;
}

/// The Connect card in the chat page, in Debian's Chromium: its link opens
/// the provider's login in a new tab; signing in there sends the held call
/// once, and the page shows its answer (tests/browser/connect.mjs). The
/// card's screenshot is written to target/connect/connect-card.png
/// (docs/mcp.md shows it).
#[tokio::test]
#[ignore = "needs Chromium, node and the npm/PyPI servers: scripts/test-deps, run with --include-ignored"]
async fn the_connect_card_signs_in_and_resumes_in_chromium() {
    let browser = crate::browser::browser();
    let stack = Stack::start(false).await;
    stack.fake.on(
        Role::Planner,
        Action::ToolCalls(vec![("list_notes".into(), "{}".into())]),
    );
    let shot = common::needs::repo_dir().join("target/connect/connect-card.png");
    let base = format!("{}/", stack.base);
    crate::browser::drive(
        &browser,
        "tests/browser/connect.mjs",
        &[&base, &stack.issuer, shot.to_str().unwrap()],
    )
    .await;
    assert_eq!(
        stack.note_calls(),
        json!({"ana": 1}),
        "the held call ran once"
    );
    stack.stop().await;
}

/// The licence gate comes first: a tool the caller's tier does not allow
/// is refused before any authorization is asked (no card, no flow).
#[tokio::test]
#[ignore = "needs the npm/PyPI servers: scripts/test-deps, run with --include-ignored"]
async fn the_licence_gate_refuses_before_any_authorization_is_asked() {
    let stack = Stack::start_with(Setup {
        tools: "[mcp_servers.tools.list_notes]\nlicence_tier = \"pro\"\n",
        ..Setup::default()
    })
    .await;
    let ana = stack.user().await;
    let frames = stack.say(&ana, "show my notes", "list_notes").await;
    let text = serde_json::to_string(&frames).unwrap();
    assert!(connect_url(&frames).is_none(), "no Connect card: {text}");
    assert!(
        text.contains("licence"),
        "the licence gate's refusal: {text}"
    );
    assert_eq!(stack.connections_rows().await, 0);
    let log = stack.stop().await;
    assert!(
        !log.contains("waits for the user to connect"),
        "no flow was started"
    );
}

/// A server whose resource metadata points at another origin is not
/// authorized with: no card, no URL, the connect table's row in the log.
#[tokio::test]
#[ignore = "needs the npm/PyPI servers: scripts/test-deps, run with --include-ignored"]
async fn metadata_pointing_at_another_origin_is_refused_by_its_row() {
    let stack = Stack::start_with(Setup {
        resource: Some("http://evil.example:9/mcp"),
        ..Setup::default()
    })
    .await;
    let ana = stack.user().await;
    let frames = stack.say(&ana, "show my notes", "list_notes").await;
    let text = serde_json::to_string(&frames).unwrap();
    assert!(connect_url(&frames).is_none(), "no Connect card: {text}");
    assert!(
        !text.contains("evil.example"),
        "no URL of the other origin is shown: {text}"
    );
    assert_eq!(stack.connections_rows().await, 0);
    let log = stack.stop().await;
    assert!(
        log.contains("metadata-for-another-resource"),
        "the row is logged: {log}"
    );
}

/// The step-up: a call whose token lacks a scope the server needs for it
/// (a `403` with `insufficient_scope`) shows the Connect card again, asking
/// for the scopes asked before and the ones the server names; once the
/// user signs in again, the held call goes out once with the new token.
#[tokio::test]
#[ignore = "needs the npm/PyPI servers: scripts/test-deps, run with --include-ignored"]
async fn a_call_that_needs_more_scope_asks_to_connect_again() {
    let stack = Stack::start(false).await;
    let ana = stack.user().await;
    let (sign_in, cb) = stack.card_signed_in(&ana, "ana").await;
    let asked = param(&sign_in.auth_url, "scope");
    assert!(!asked.split(' ').any(|s| s == "notes:write"), "{asked}");
    assert_eq!(stack.callback(&cb, Some(&sign_in.cookie)).await.0, 200);
    wait_for_text(&stack, &ana, "You connected your account").await;

    let frames = stack
        .say_with(
            &ana,
            "note: call the roofer",
            "add_note",
            r#"{"text": "Call the roofer"}"#,
        )
        .await;
    let step_up_flow =
        connect_url(&frames).unwrap_or_else(|| panic!("a second Connect card: {frames:?}"));
    let step_up_sign_in = stack.sign_in(&ana, &step_up_flow).await;
    let step_up = step_up_sign_in.auth_url.clone();
    let scope = param(&step_up, "scope");
    let scopes: Vec<&str> = scope.split(' ').collect();
    assert!(
        scopes.contains(&"notes:read") && scopes.contains(&"notes:write"),
        "{scopes:?}"
    );
    let cb = stack.authorize(&step_up, "ana").await;
    let (status, page) = stack.callback(&cb, Some(&step_up_sign_in.cookie)).await;
    assert_eq!(status, 200, "{page}");
    wait_for_text(&stack, &ana, "added; 3 notes").await;
    stack.stop().await;
}

/// Refresh: an access token that expired is refused by the server (401);
/// the stored refresh token gets a new one (with the resource indicator),
/// sealed in its place, and the call goes out with it: no card.
#[tokio::test]
#[ignore = "needs the npm/PyPI servers: scripts/test-deps, run with --include-ignored"]
async fn an_expired_token_is_refreshed_without_asking_again() {
    let stack = Stack::start_with(Setup {
        access_ttl: Some(2),
        ..Setup::default()
    })
    .await;
    let ana = stack.user().await;
    let (sign_in, cb) = stack.card_signed_in(&ana, "ana").await;
    assert_eq!(stack.callback(&cb, Some(&sign_in.cookie)).await.0, 200);
    wait_for_text(&stack, &ana, "You connected your account").await;
    let first = stack.stored_token(&ana).await.expect("a token");
    assert!(
        stack.stored_refresh(&ana).await.is_some(),
        "a refresh token is kept"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let frames = stack.say(&ana, "show my notes again", "list_notes").await;
    assert!(connect_url(&frames).is_none(), "no card: {frames:?}");
    assert!(
        serde_json::to_string(&frames)
            .unwrap()
            .contains(r#""ok":true"#),
        "{frames:?}"
    );
    assert_eq!(stack.note_calls(), json!({"ana": 2}));
    let second = stack.stored_token(&ana).await.expect("a token");
    assert_ne!(
        first, second,
        "the refreshed token is stored in place of the old one"
    );
    let log = stack.stop().await;
    assert!(log.contains("token was refreshed"), "{log}");
    assert!(!log.contains(&second) && !log.contains(&first));
}

/// `[connections]` is read with located errors: a per-user server needs a
/// callback URL and the sealing key, and a Client ID Metadata Document an
/// https callback.
#[test]
fn the_connections_section_is_read_and_checked() {
    let server =
        "[[mcp_servers]]\nname = \"notes\"\nurl = \"http://127.0.0.1:9/mcp\"\nauth = \"user\"\n\
                  [mcp_servers.tools.list_notes]\n";
    let with_key = |name: &str| (name == "TURNSTILE_CONNECTIONS_KEY").then(|| KEY.to_string());
    let no_env = |_: &str| None;
    let err = common::config_with(server, &with_key)
        .unwrap_err()
        .to_string();
    assert!(err.contains("connections.callback_url"), "{err}");
    let section = format!(
        "{server}[connections]\ncallback_url = \"http://127.0.0.1:8080/v1/connections/callback\"\n"
    );
    let err = common::config_with(&section, &no_env)
        .unwrap_err()
        .to_string();
    assert!(err.contains("TURNSTILE_CONNECTIONS_KEY"), "{err}");
    assert!(!err.contains(KEY));
    let cfg = common::config_with(&section, &with_key).unwrap();
    assert!(cfg
        .connections
        .as_ref()
        .unwrap()
        .client_metadata_url
        .is_none());
    let cimd = format!("{section}client_metadata_document = true\n");
    let err = common::config_with(&cimd, &with_key)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("connections.client_metadata_document"),
        "{err}"
    );
    let https = cimd.replace("http://127.0.0.1:8080", "https://chat.example.test");
    let cfg = common::config_with(&https, &with_key).unwrap();
    assert_eq!(
        cfg.connections.unwrap().client_metadata_url.as_deref(),
        Some("https://chat.example.test/oauth/client-metadata.json")
    );
    let bad = "[[mcp_servers]]\nname = \"w\"\nurl = \"http://127.0.0.1:9/mcp\"\nauth = \"static\"\nbearer_env = \"sk-live-123\"\n";
    let err = common::config_with(bad, &no_env).unwrap_err().to_string();
    assert!(err.contains("mcp_servers[0].bearer_env"), "{err}");
    let unknown =
        "[[mcp_servers]]\nname = \"w\"\nurl = \"http://127.0.0.1:9/mcp\"\nauth = \"magic\"\n";
    let err = common::config_with(unknown, &no_env)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("mcp_servers[0].auth") && err.contains("not a mode"),
        "{err}"
    );
}

/// turnstile serves its own Client ID Metadata Document where
/// `client_metadata_document` asks for it: a web client whose one redirect
/// is the callback, public, with PKCE; `turnstile serve` as a user runs it.
#[tokio::test]
async fn turnstile_serves_its_client_id_metadata_document() {
    let tmp = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let config = format!(
        "addr = \"127.0.0.1:{port}\"\ndatabase_url = \"sqlite://{db}?mode=rwc\"\n\
         [model]\nbase_url = \"http://127.0.0.1:9/v1\"\nname = \"m\"\napi_key_env = \"CIMD_TEST_MODEL_KEY\"\n\
         [connections]\ncallback_url = \"https://chat.example.test/v1/connections/callback\"\nclient_metadata_document = true\n\
         [[mcp_servers]]\nname = \"notes\"\nurl = \"http://127.0.0.1:9/mcp\"\nauth = \"user\"\n\
         [mcp_servers.tools.list_notes]\n",
        db = tmp.path().join("t.db").display(),
    );
    let path = tmp.path().join("turnstile.toml");
    std::fs::write(&path, config).unwrap();
    let serve = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnstile"))
        .args(["serve", "--config"])
        .arg(&path)
        .env("CIMD_TEST_MODEL_KEY", "k")
        .env("TURNSTILE_CONNECTIONS_KEY", KEY)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("turnstile serve runs");
    let http = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/oauth/client-metadata.json");
    wait_until("turnstile serve answers", || async {
        http.get(&url).send().await.is_ok()
    })
    .await;
    let doc: Value = http.get(&url).send().await.unwrap().json().await.unwrap();
    assert_eq!(
        doc["client_id"],
        "https://chat.example.test/oauth/client-metadata.json"
    );
    assert_eq!(
        doc["redirect_uris"],
        json!(["https://chat.example.test/v1/connections/callback"])
    );
    assert_eq!(doc["token_endpoint_auth_method"], "none");
    assert_eq!(
        doc["grant_types"],
        json!(["authorization_code", "refresh_token"])
    );
    common::remote::sigterm(serve.id().unwrap());
}
