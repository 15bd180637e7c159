//! The front ends' own protocols, read by their official client packages
//! (issue 37, ADR 0036). Each demo flow is run through
//! `POST /v1/threads/{id}/ui-message-stream`, and the raw body is read the
//! way `useChat` reads it: `ai`'s `parseJsonEventStream` with
//! `uiMessageChunkSchema` (every chunk validates), then `readUIMessageStream`
//! with `terminateOnError` (`tests/frontends/read_ui_stream.mjs`, on the
//! Node 22 the `node` npm package brings). Every stream must parse into the
//! message the native route shows for the same turn, and its chunks must
//! hold `tables/ui_stream.ron` here too, not only on the server.
//!
//! `#[ignore = "needs …"]`: the npm packages come from `scripts/test-deps`
//! (`npm ci` in `tests/frontends`); run with `--include-ignored`, a missing
//! package fails the test (ADR 0015).

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use turnstile::protocols::ui_stream::{UiStream, UiStreamEvent};
use turnstile::protocols::{Bound, Names};
use turnstile::wire::Frame;

use crate::common::frames::{answer, assert_done};
use crate::common::needs;
use crate::common::server::TestServer;

/// What the official client made of one stream.
pub(crate) struct Read {
    /// The chunk types, in order.
    pub(crate) chunks: Vec<String>,
    /// The `UIMessage` the stream built.
    pub(crate) message: Value,
    /// The client's error, when the stream carried one.
    error: Option<String>,
}

impl Read {
    /// The message's text, its text parts joined.
    pub(crate) fn text(&self) -> String {
        self.parts("text")
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect()
    }

    pub(crate) fn parts(&self, kind: &str) -> Vec<&Value> {
        (self.message["parts"].as_array().into_iter().flatten())
            .filter(|p| p["type"] == kind || (kind == "tool" && is_tool(p)))
            .collect()
    }
}

fn is_tool(p: &Value) -> bool {
    p["type"].as_str().is_some_and(|t| t.starts_with("tool-"))
}

/// Runs `script` of `tests/frontends` on Node 22 with `raw` on its stdin:
/// the JSON it prints. `package` is a file its npm packages install (a
/// missing one fails the test, naming how to install it); `who` names the
/// client in the failure.
fn run_reader(script: &str, package: &str, args: &[&str], raw: &str, who: &str) -> Value {
    let dir = needs::repo_dir().join("tests/frontends");
    let node = needs::npm_file(&dir, ".bin/node");
    needs::npm_file(&dir, package);
    let mut child = Command::new(node)
        .arg(dir.join(script))
        .args(args)
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs");
    (child.stdin.take().unwrap())
        .write_all(raw.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{who} refused the stream: {}\n{raw}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the reader's JSON")
}

/// Reads `raw` with the official package; `expect_error`: the stream ends
/// with an `error` chunk, which the client throws on.
pub(crate) fn read(raw: &str, expect_error: bool) -> Read {
    let args: &[&str] = if expect_error {
        &["--expect-error"]
    } else {
        &[]
    };
    let v = run_reader(
        "read_ui_stream.mjs",
        "ai/package.json",
        args,
        raw,
        "the AI SDK's client",
    );
    Read {
        chunks: (v["chunks"].as_array().unwrap().iter())
            .map(|c| c.as_str().unwrap().to_string())
            .collect(),
        message: v["message"].clone(),
        error: v["error"].as_str().map(str::to_string),
    }
}

/// The chunk types the server wrote (every `data:` line of the raw body,
/// `[DONE]` included), through the test's own `ui_stream` table: the strict
/// order holds here, not only on the server.
fn holds_the_table(s: &TestServer, raw: &str) {
    let table: Bound<UiStream> = s.tables().bound().unwrap();
    let mut m = table.machine();
    let mut types = Vec::new();
    for line in raw.lines().filter_map(|l| l.strip_prefix("data: ")) {
        let event = match line {
            "[DONE]" => UiStreamEvent::Done,
            json => {
                let v: Value = serde_json::from_str(json).expect("a chunk is JSON");
                let t = v["type"].as_str().expect("a chunk's type").to_string();
                types.push(t.clone());
                match t.as_str() {
                    d if d.starts_with("data-") => UiStreamEvent::Data,
                    other => {
                        let name = other.replace('-', "_");
                        (UiStreamEvent::ALL.iter().copied())
                            .find(|e| e.name() == name)
                            .unwrap_or_else(|| panic!("a chunk no row names: {other}"))
                    }
                }
            }
        };
        if let Err(v) = m.fire(event) {
            panic!("{v}\nchunks: {types:?}");
        }
    }
    m.fire(UiStreamEvent::Close)
        .expect("the stream ends after [DONE]");
}

/// One request on the UI route: its status and raw body.
async fn post(s: &TestServer, thread: &str, body: Value) -> (u16, String, Option<String>) {
    let r = s
        .http
        .post(format!("{}/v1/threads/{thread}/ui-message-stream", s.base))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let header = (r.headers().get("x-vercel-ai-ui-message-stream"))
        .and_then(|h| h.to_str().ok())
        .map(str::to_string);
    (status, r.text().await.unwrap(), header)
}

fn user(text: &str) -> Value {
    json!({"messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}]})
}

/// A turn through the UI route, read by the official client, checked
/// against the table.
async fn ui_turn(s: &TestServer, thread: &str, body: Value) -> Read {
    let (status, raw, header) = post(s, thread, body).await;
    assert_eq!(status, 200, "{raw}");
    assert_eq!(header.as_deref(), Some("v1"), "the transport's header");
    assert!(raw.trim_end().ends_with("data: [DONE]"), "{raw}");
    let read = read(&raw, false);
    holds_the_table(s, &raw);
    the_server_refused_no_chunk(s).await;
    read
}

/// The server's own count of forbidden rows of the two front-end tables
/// is zero: no chunk or event it tried to write was refused (the metrics
/// are the process's; nothing in this test binary writes a forbidden one
/// on purpose).
async fn the_server_refused_no_chunk(s: &TestServer) {
    let metrics = (s.http.get(format!("{}/v1/metrics", s.base)).send().await)
        .unwrap()
        .text()
        .await
        .unwrap();
    for table in ["ui_stream", "agui"] {
        let forbidden = format!("table=\"{table}\",");
        let refused: Vec<&str> = (metrics.lines())
            .filter(|l| l.contains(&forbidden) && l.contains("kind=\"forbidden\""))
            .collect();
        assert!(
            refused.is_empty(),
            "the server refused its own output: {refused:?}"
        );
    }
}

/// The native route's answer for the same prompt, on a thread of its own.
async fn native(s: &TestServer, text: &str) -> Vec<Frame> {
    let thread = s.new_thread().await;
    let frames = s.say(&thread, text).await;
    assert_done(&frames, text);
    frames
}

fn citations(frames: &[Frame]) -> Vec<(String, u64)> {
    (frames.iter())
        .filter_map(|f| match f {
            Frame::Citation(c) => Some((c.grade.clone(), c.displayed)),
            _ => None,
        })
        .collect()
}

fn data_citations(read: &Read) -> Vec<(String, u64)> {
    (read.parts("data-citation").iter())
        .map(|p| {
            let d = &p["data"];
            (
                d["grade"].as_str().unwrap().to_string(),
                d["displayed"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The answers-only flows: each parses into the native route's answer, with
/// its cards (grade and count intact) as `data-citation` parts, its figures
/// as `data-figure`, and each call as a tool part with its output.
#[tokio::test]
#[ignore = "needs the front ends' npm packages: run scripts/test-deps"]
async fn every_answer_flow_parses_with_the_ai_sdk_into_what_the_page_shows() {
    let s = TestServer::builder().start().await;
    let flows = [
        ("search", "show safety issues on floor 3"),
        ("search-ko", "3층 안전 지적사항 보여줘"),
        ("zero", "show photos from 1999"),
        ("exact", "show me 12 photos of floor 2"),
        ("stitched", "list all panoramas"),
        ("count", "how many photos are on floor 3?"),
        (
            "two-step",
            "show the newest safety issue on floor 3 in detail",
        ),
        ("no-op prepare", "reserve seat 99 at 15:00"),
        ("task with progress", "compile the site report for tower-a"),
        ("nothing to narrow", "only those from April"),
    ];
    for (name, prompt) in flows {
        let want = native(&s, prompt).await;
        let thread = s.new_thread().await;
        let got = ui_turn(&s, &thread, user(prompt)).await;
        assert_eq!(got.text(), answer(&want), "{name}: the answer");
        assert_eq!(data_citations(&got), citations(&want), "{name}: the cards");
        let figures = want
            .iter()
            .filter(|f| matches!(f, Frame::Figure(_)))
            .count();
        assert_eq!(got.parts("data-figure").len(), figures, "{name}: figures");
        let calls = want
            .iter()
            .filter(|f| matches!(f, Frame::ToolCall(_)))
            .count();
        let tools = got.parts("tool");
        assert_eq!(tools.len(), calls, "{name}: tool parts {:?}", got.message);
        for t in tools {
            assert!(
                matches!(
                    t["state"].as_str(),
                    Some("output-available" | "output-error")
                ),
                "{name}: every call ends: {t}"
            );
        }
        assert!(got.error.is_none(), "{name}");
        assert_eq!(got.chunks.first().map(String::as_str), Some("start"));
        assert_eq!(got.chunks.last().map(String::as_str), Some("finish"));
    }
    // A task's progress is one part, updated in place (reconciled by id).
    let thread = s.new_thread().await;
    let task = ui_turn(&s, &thread, user("compile the site report for tower-a")).await;
    assert!(
        task.chunks.iter().any(|c| c == "data-progress"),
        "{:?}",
        task.chunks
    );
    assert_eq!(task.parts("data-progress").len(), 1, "{:?}", task.message);
    s.pass();
}

/// A thread's follow-ups go through the same route: a narrowing of the
/// previous answer, then "show more" as the structured marker.
#[tokio::test]
#[ignore = "needs the front ends' npm packages: run scripts/test-deps"]
async fn follow_ups_narrow_and_show_more_through_the_ai_sdk() {
    let s = TestServer::builder().start().await;
    let native_thread = s.new_thread().await;
    let thread = s.new_thread().await;
    for (prompt, more) in [
        ("list all panoramas", false),
        ("only those on floor 3", false),
        ("show more", true),
    ] {
        let want = s
            .turn(&native_thread, json!({"text": prompt, "more": more}))
            .await;
        let mut body = user(prompt);
        body["more"] = json!(more);
        let got = ui_turn(&s, &thread, body).await;
        assert_eq!(got.text(), answer(&want), "{prompt}");
        assert_eq!(data_citations(&got), citations(&want), "{prompt}");
    }
    s.pass();
}

/// The approval card is a `tool-approval-request` whose id is the server's
/// interrupt id; the client's response in the next request decides it
/// through the approval table, exactly once. Approve runs the confirm;
/// deny sends nothing but the cancel; a replay, an id the server never
/// issued and another thread's id are refused.
#[tokio::test]
#[ignore = "needs the front ends' npm packages: run scripts/test-deps"]
async fn an_approval_is_the_servers_in_the_ai_sdk_stream() {
    let s = TestServer::builder().start().await;
    // Each decision on seats of its own: the desk keeps what was reserved.
    for (approved, seat, native_seat) in [(true, 12, 13), (false, 15, 16)] {
        let prompt = format!("reserve seat {seat} at 15:00");
        let thread = s.new_thread().await;
        let held = ui_turn(&s, &thread, user(&prompt)).await;
        let asked = held.parts("tool");
        let asked = asked
            .iter()
            .find(|p| p["state"] == "approval-requested")
            .unwrap_or_else(|| panic!("an approval request: {}", held.message));
        let id = asked["approval"]["id"].as_str().unwrap().to_string();
        let card = held.parts("data-interrupt");
        assert_eq!(card.len(), 1, "{}", held.message);
        assert_eq!(
            card[0]["data"]["interrupt_id"],
            json!(id),
            "the server's own id"
        );
        assert!(card[0]["data"]["expires_at"].as_i64().is_some());
        let stored = s.thread_json(&thread).await;
        assert_eq!(stored["approvals"][0]["state"], "Awaiting", "{stored}");

        // The client's next request: the assistant message with its response.
        let mut part = (*asked).clone();
        part["state"] = json!("approval-responded");
        part["approval"] = json!({"id": id, "approved": approved});
        let respond = json!({"messages": [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": prompt}]},
            {"id": "a1", "role": "assistant", "parts": [part]}
        ]});
        let resumed = ui_turn(&s, &thread, respond.clone()).await;
        // What the native route says for the same decision.
        let native_thread = s.new_thread().await;
        let native_prompt = format!("reserve seat {native_seat} at 15:00");
        let frames = s.say(&native_thread, &native_prompt).await;
        let native_id = (frames.iter())
            .find_map(|f| match f {
                Frame::Interrupt(i) => Some(i.interrupt_id.clone()),
                _ => None,
            })
            .expect("the native route's interrupt");
        let decision = if approved { "approve" } else { "deny" };
        let want = s
            .resume(&native_thread, &native_id, decision)
            .await
            .unwrap();
        assert_eq!(resumed.text(), answer(&want), "{decision}");
        assert!(!resumed.text().is_empty(), "{decision}");
        let stored = s.thread_json(&thread).await;
        let state = stored["approvals"][0]["state"]
            .as_str()
            .unwrap()
            .to_string();
        assert_ne!(state, "Awaiting", "decided: {stored}");

        // The same response again: refused by the approval table's row.
        let (status, body, _) = post(&s, &thread, respond).await;
        assert_eq!(status, 409, "a replayed approval: {body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["table"], "approval", "{v}");
    }

    // An id the server never issued, and a real one on another thread.
    let thread = s.new_thread().await;
    let held = ui_turn(&s, &thread, user("reserve seat 14 at 16:00")).await;
    let id = held.parts("data-interrupt")[0]["data"]["interrupt_id"]
        .as_str()
        .unwrap()
        .to_string();
    let forged = |id: &str| {
        json!({"messages": [{"role": "assistant", "parts": [
            {"type": "tool-confirm_action", "toolCallId": "x", "state": "approval-responded",
             "approval": {"id": id, "approved": true}}
        ]}]})
    };
    let (status, body, _) = post(&s, &thread, forged("not-an-interrupt")).await;
    assert_eq!(status, 404, "{body}");
    let other = s.new_thread().await;
    let (status, body, _) = post(&s, &other, forged(&id)).await;
    assert_eq!(status, 404, "another thread's interrupt: {body}");
    let stored = s.thread_json(&thread).await;
    assert_eq!(
        stored["approvals"][0]["state"], "Awaiting",
        "nothing was decided: {stored}"
    );
    s.pass();
}

/// An approval response that comes after its interrupt expired is refused
/// by the approval table's row, and nothing is confirmed.
#[tokio::test]
#[ignore = "needs the front ends' npm packages: run scripts/test-deps"]
async fn an_expired_approval_is_refused_in_the_ai_sdk_stream() {
    let limits = turnstile::agent::Limits {
        approval_ttl: std::time::Duration::from_millis(300),
        ..turnstile::agent::Limits::default()
    };
    let s = TestServer::builder().limits(limits).start().await;
    let thread = s.new_thread().await;
    let held = ui_turn(&s, &thread, user("reserve seat 17 at 15:00")).await;
    let id = held.parts("data-interrupt")[0]["data"]["interrupt_id"]
        .as_str()
        .unwrap()
        .to_string();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let respond = json!({"messages": [{"role": "assistant", "parts": [
        {"type": "tool-confirm_action", "toolCallId": format!("held-{id}"), "state": "approval-responded",
         "approval": {"id": id, "approved": true}}
    ]}]});
    let (status, body, _) = post(&s, &thread, respond).await;
    assert_eq!(status, 409, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["row_id"], "approve-after-expiry", "{v}");
    let stored = s.thread_json(&thread).await;
    assert_eq!(stored["approvals"][0]["state"], "Expired", "{stored}");
    s.pass();
}

/// The export's link is delivered by code as a typed `data-capability` part
/// (the button), never left to the client to find in the text.
#[tokio::test]
#[ignore = "needs the front ends' npm packages: run scripts/test-deps"]
async fn an_export_delivers_its_link_as_a_typed_part() {
    let s = TestServer::builder().start().await;
    let thread = s.new_thread().await;
    let got = ui_turn(&s, &thread, user("download all my lecture files")).await;
    let links = got.parts("data-capability");
    assert_eq!(links.len(), 1, "{}", got.message);
    let url = links[0]["data"]["url"].as_str().unwrap();
    assert!(url.contains("/download"), "{url}");
    assert!(links[0]["data"]["label"].as_str().is_some());
    s.pass();
}

/// Bad requests get a 400 with the reason, and nothing runs.
#[tokio::test]
async fn a_request_that_asks_nothing_is_a_400() {
    let s = TestServer::builder().start().await;
    let thread = s.new_thread().await;
    for (body, want) in [
        (json!({"messages": []}), "empty"),
        (
            json!({"messages": [{"role": "system", "parts": []}]}),
            "role",
        ),
        (
            json!({"messages": [{"role": "assistant", "parts": []}]}),
            "approval response",
        ),
        (
            json!({"messages": [{"role": "user", "parts": []}]}),
            "empty",
        ),
    ] {
        let (status, body, _) = post(&s, &thread, body).await;
        assert_eq!(status, 400, "{body}");
        assert!(body.contains(want), "{body}");
    }
    let stored = s.thread_json(&thread).await;
    assert_eq!(
        stored["messages"].as_array().map(Vec::len),
        Some(0),
        "{stored}"
    );
    s.pass();
}

// ---------------------------------------------------------------------------
// AG-UI 1.0: `POST /v1/threads/{id}/agui`, read by `@ag-ui/core`'s schemas
// and `@ag-ui/client`'s `verifyEvents` (`tests/frontends/read_agui.mjs`).
// ---------------------------------------------------------------------------

/// What the official AG-UI packages made of one stream.
pub(crate) struct Agui {
    events: Vec<String>,
    pub(crate) text: String,
    custom: Vec<Value>,
    pub(crate) tool_calls: Vec<Value>,
    finished: Value,
    error: Value,
}

impl Agui {
    pub(crate) fn custom(&self, name: &str) -> Vec<&Value> {
        (self.custom.iter())
            .filter(|c| c["name"] == format!("turnstile.{name}"))
            .map(|c| &c["value"])
            .collect()
    }
}

pub(crate) fn read_agui(raw: &str) -> Agui {
    let v = run_reader(
        "read_agui.mjs",
        "@ag-ui/client/package.json",
        &[],
        raw,
        "the AG-UI client",
    );
    Agui {
        events: (v["events"].as_array().unwrap().iter())
            .map(|e| e.as_str().unwrap().to_string())
            .collect(),
        text: v["text"].as_str().unwrap_or_default().to_string(),
        custom: v["custom"].as_array().cloned().unwrap_or_default(),
        tool_calls: v["toolCalls"].as_array().cloned().unwrap_or_default(),
        finished: v["finished"].clone(),
        error: v["error"].clone(),
    }
}

/// The events the client read, through the test's own `agui` table.
fn holds_the_agui_table(s: &TestServer, read: &Agui) {
    use turnstile::protocols::agui::{Agui as Table, AguiEvent};
    let table: Bound<Table> = s.tables().bound().unwrap();
    let mut m = table.machine();
    for t in &read.events {
        let name = t.to_lowercase();
        let event = (AguiEvent::ALL.iter().copied())
            .find(|e| e.name() == name)
            .unwrap_or_else(|| panic!("an event no row names: {t}"));
        if let Err(v) = m.fire(event) {
            panic!("{v}\nevents: {:?}", read.events);
        }
    }
    m.fire(AguiEvent::Close)
        .expect("the run ended before the stream");
}

async fn post_agui(s: &TestServer, thread: &str, body: Value) -> (u16, String) {
    let r = s
        .http
        .post(format!("{}/v1/threads/{thread}/agui", s.base))
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

fn run_input(thread: &str, run: &str, text: &str) -> Value {
    json!({"threadId": thread, "runId": run, "messages": [
        {"id": "m1", "role": "user", "content": text}
    ], "tools": [], "context": []})
}

async fn agui_run(s: &TestServer, thread: &str, body: Value) -> Agui {
    let (status, raw) = post_agui(s, thread, body).await;
    assert_eq!(status, 200, "{raw}");
    let read = read_agui(&raw);
    holds_the_agui_table(s, &read);
    the_server_refused_no_chunk(s).await;
    read
}

/// Every answer flow through AG-UI parses with the official packages into
/// the native route's answer, its cards and figures as `CUSTOM` events with
/// the grade intact, each call with its result.
#[tokio::test]
#[ignore = "needs the front ends' npm packages: run scripts/test-deps"]
async fn every_answer_flow_parses_with_ag_ui_into_what_the_page_shows() {
    let s = TestServer::builder().start().await;
    let flows = [
        ("search", "show safety issues on floor 3"),
        ("zero", "show photos from 1999"),
        ("exact", "show me 12 photos of floor 2"),
        ("count", "how many photos are on floor 3?"),
        (
            "two-step",
            "show the newest safety issue on floor 3 in detail",
        ),
        ("task with progress", "compile the site report for tower-a"),
        ("nothing to narrow", "only those from April"),
    ];
    for (i, (name, prompt)) in flows.into_iter().enumerate() {
        let want = native(&s, prompt).await;
        let thread = s.new_thread().await;
        let got = agui_run(&s, &thread, run_input(&thread, &format!("run-{i}"), prompt)).await;
        assert_eq!(got.text, answer(&want), "{name}: the answer");
        let cards: Vec<(String, u64)> = (got.custom("citation").iter())
            .map(|c| {
                (
                    c["grade"].as_str().unwrap().to_string(),
                    c["displayed"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(cards, citations(&want), "{name}: the cards");
        let calls = want
            .iter()
            .filter(|f| matches!(f, Frame::ToolCall(_)))
            .count();
        assert_eq!(got.tool_calls.len(), calls, "{name}");
        assert!(
            got.tool_calls.iter().all(|c| c["result"].is_string()),
            "{name}: every call has its result"
        );
        assert_eq!(got.finished["outcome"]["type"], "success", "{name}");
        assert_eq!(
            got.finished["runId"],
            format!("run-{i}"),
            "{name}: the client's run id"
        );
        assert!(got.error.is_null(), "{name}");
    }
    s.pass();
}

/// An approval ends the run with outcome `interrupt`, its id the server's,
/// with `expiresAt`; the next run's `resume[]` decides it through the
/// approval table. A replay, a forged id and another thread's id are
/// refused; nothing is decided by them.
#[tokio::test]
#[ignore = "needs the front ends' npm packages: run scripts/test-deps"]
async fn an_ag_ui_interrupt_is_the_servers_and_resume_decides_it_once() {
    let s = TestServer::builder().start().await;
    for (approve, seat) in [(true, 21), (false, 22)] {
        let thread = s.new_thread().await;
        let prompt = format!("reserve seat {seat} at 15:00");
        let held = agui_run(&s, &thread, run_input(&thread, "r1", &prompt)).await;
        let outcome = &held.finished["outcome"];
        assert_eq!(outcome["type"], "interrupt", "{:?}", held.finished);
        let interrupt = &outcome["interrupts"][0];
        let id = interrupt["id"].as_str().unwrap().to_string();
        assert_eq!(interrupt["reason"], "tool_approval");
        let expires = interrupt["expiresAt"].as_str().unwrap();
        assert!(expires.ends_with('Z') && expires.len() == 24, "{expires}");
        let stored = s.thread_json(&thread).await;
        assert_eq!(
            stored["approvals"][0]["interrupt_id"],
            json!(id),
            "the server's id"
        );

        let decision = if approve { "approve" } else { "deny" };
        let resume = json!({"threadId": thread, "runId": "r2", "messages": [], "resume": [
            {"interruptId": id, "status": "resolved", "payload": {"decision": decision}}
        ]});
        let resumed = agui_run(&s, &thread, resume.clone()).await;
        assert_eq!(resumed.finished["outcome"]["type"], "success");
        assert!(!resumed.text.is_empty());
        let (status, body) = post_agui(&s, &thread, resume).await;
        assert_eq!(status, 409, "a replayed resume: {body}");
        assert!(body.contains("\"table\":\"approval\""), "{body}");
    }
    let thread = s.new_thread().await;
    let held = agui_run(
        &s,
        &thread,
        run_input(&thread, "r1", "reserve seat 23 at 15:00"),
    )
    .await;
    let id = held.finished["outcome"]["interrupts"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let forged = |thread: &str, id: &str| {
        json!({"threadId": thread, "runId": "r9", "messages": [], "resume": [
            {"interruptId": id, "status": "resolved", "payload": {"decision": "approve"}}
        ]})
    };
    let (status, body) = post_agui(&s, &thread, forged(&thread, "never-issued")).await;
    assert_eq!(status, 404, "{body}");
    let other = s.new_thread().await;
    let (status, body) = post_agui(&s, &other, forged(&other, &id)).await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = post_agui(&s, &other, forged(&thread, &id)).await;
    assert_eq!(status, 400, "a threadId that is not the URL's: {body}");
    let stored = s.thread_json(&thread).await;
    assert_eq!(
        stored["approvals"][0]["state"], "Awaiting",
        "nothing decided: {stored}"
    );
    s.pass();
}

/// The export's link through AG-UI: a `turnstile.capability` event, built
/// by code.
#[tokio::test]
#[ignore = "needs the front ends' npm packages: run scripts/test-deps"]
async fn an_ag_ui_export_delivers_its_link_as_a_typed_event() {
    let s = TestServer::builder().start().await;
    let thread = s.new_thread().await;
    let got = agui_run(
        &s,
        &thread,
        run_input(&thread, "r1", "download all my lecture files"),
    )
    .await;
    let links = got.custom("capability");
    assert_eq!(links.len(), 1, "{:?}", got.custom);
    assert!(links[0]["url"].as_str().unwrap().contains("/download"));
    s.pass();
}

/// The two front-end tables are held like every other: as shipped they
/// load; with a row deleted they do not, and the finding names the missing
/// pair.
#[test]
fn a_broken_front_end_table_fails_at_load() {
    use turnstile::protocols::registry_check_source as check;
    for (file, row, state, event) in [
        ("ui_stream.ron", "Legal(id: \"finish\",", "Open", "finish"),
        (
            "agui.ron",
            "Legal(id: \"run-finishes\",",
            "Running",
            "run_finished",
        ),
    ] {
        let src = std::fs::read_to_string(needs::repo_dir().join("tables").join(file)).unwrap();
        check(&src, file).unwrap_or_else(|f| panic!("{file} as shipped: {f}"));
        let broken: String = (src.lines())
            .filter(|l| !l.trim_start().starts_with(row))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_ne!(broken, src, "{file}: the row was found");
        let findings = check(&broken, file).expect_err(file).to_string();
        assert!(
            findings.contains(state) && findings.contains(event),
            "{file}: the missing pair is named: {findings}"
        );
    }
}

/// Every `--fault` of the demo tool server, and the lying model, through
/// both front-end routes: each stream parses with the official packages
/// into the native route's answer and cards, the lies replaced before they
/// reach either client, and both strict tables hold.
#[tokio::test]
#[ignore = "needs the front ends' npm packages: run scripts/test-deps"]
async fn every_fault_reads_the_same_through_both_front_ends() {
    use turnstile_demo::Fault;
    let prompts = [
        "show safety issues on floor 3",
        "list all panoramas",
        "show the newest safety issue on floor 3 in detail",
        "notify the site contact about PANO-003-0611",
    ];
    let mut servers: Vec<(String, TestServer)> = Vec::new();
    for fault in Fault::ALL {
        let s = TestServer::builder().faults(vec![fault]).start().await;
        servers.push((fault.name().to_string(), s));
    }
    let lying = std::sync::Arc::new(turnstile_demo::lying::Lying::new(
        turnstile_demo::Scripted::demo(),
    ));
    servers.push((
        "lying-model".into(),
        TestServer::builder().model(lying).start().await,
    ));
    for (name, s) in servers {
        for (i, prompt) in prompts.iter().enumerate() {
            let want = native(&s, prompt).await;
            let thread = s.new_thread().await;
            let ui = ui_turn(&s, &thread, user(prompt)).await;
            assert_eq!(ui.text(), answer(&want), "{name}, {prompt}: AI SDK");
            assert_eq!(data_citations(&ui), citations(&want), "{name}, {prompt}");
            let thread = s.new_thread().await;
            let run = run_input(&thread, &format!("r{i}"), prompt);
            let ag = agui_run(&s, &thread, run).await;
            assert_eq!(ag.text, answer(&want), "{name}, {prompt}: AG-UI");
            let replaced = want
                .iter()
                .filter(|f| matches!(f, Frame::Delta(d) if d.replaced.is_some()))
                .count();
            assert_eq!(
                ui.parts("data-replaced").len(),
                replaced,
                "{name}, {prompt}"
            );
            assert_eq!(ag.custom("replaced").len(), replaced, "{name}, {prompt}");
        }
        s.pass();
    }
}

/// A question of a tool's server through AG-UI: the run ends with outcome
/// `interrupt`, reason `input_required`, the form in its metadata; the next
/// run's `resume[]` accepts it with the answers, sent once, and the run
/// goes on to the call's result.
#[tokio::test]
#[ignore = "needs the front ends' npm packages: run scripts/test-deps"]
async fn an_ag_ui_question_is_answered_through_resume() {
    let s = TestServer::builder().start().await;
    let thread = s.new_thread().await;
    let prompt = "notify the site contact about PANO-003-0611";
    let held = agui_run(&s, &thread, run_input(&thread, "r1", prompt)).await;
    let interrupt = &held.finished["outcome"]["interrupts"][0];
    assert_eq!(interrupt["reason"], "input_required", "{:?}", held.finished);
    let requests = &interrupt["metadata"]["input"]["requests"];
    let key = requests[0]["key"].as_str().unwrap().to_string();
    let id = interrupt["id"].as_str().unwrap().to_string();
    let answers =
        json!({key: {"name": "Ana Kim", "email": "ana@example.com", "role": "safety officer"}});
    let resume = json!({"threadId": thread, "runId": "r2", "messages": [], "resume": [
        {"interruptId": id, "status": "resolved", "payload": {"decision": "accept", "answers": answers}}
    ]});
    let answered = agui_run(&s, &thread, resume).await;
    assert_eq!(answered.finished["outcome"]["type"], "success");
    assert!(!answered.text.is_empty());
    assert_eq!(
        answered.tool_calls.len(),
        1,
        "the call sent once: {:?}",
        answered.tool_calls
    );
    s.pass();
}

/// A model that plans the demo's search, then breaks mid-answer: the turn
/// ends with an `error` frame after a call and some text.
struct Breaks;

#[async_trait::async_trait]
impl turnstile::llm::Model for Breaks {
    fn name(&self) -> &str {
        "breaks"
    }

    async fn plan(
        &self,
        req: &turnstile::llm::PlanRequest,
    ) -> Result<turnstile::llm::Plan, turnstile::llm::LlmError> {
        let calls = match req.steps.is_empty() {
            true => vec![turnstile::llm::PlannedCall {
                id: None,
                tool: "search_photos".into(),
                args: serde_json::from_value(json!({"query": "safety", "floor": 3})).unwrap(),
                invalid_args: None,
            }],
            false => Vec::new(),
        };
        Ok(turnstile::llm::Plan {
            calls,
            note: "search".into(),
            narrows_previous: false,
            continues_previous: false,
            from_context: Vec::new(),
            shows_link: false,
        })
    }

    async fn respond(
        &self,
        _: &turnstile::llm::RespondRequest,
    ) -> Result<turnstile::llm::TextStream, turnstile::llm::LlmError> {
        use futures::StreamExt;
        Ok(futures::stream::iter([
            Ok("At least some match. ".to_string()),
            Err(turnstile::llm::LlmError::Stream(
                "the connection reset".into(),
            )),
        ])
        .boxed())
    }
}

/// A turn that fails: the AI SDK client reads an `error` chunk (it throws
/// with `terminateOnError`, as `useChat` surfaces it), after the text shown
/// and the call's output; AG-UI's client reads `RUN_ERROR`. Neither stream
/// retracts what it showed, and both tables hold.
#[tokio::test]
#[ignore = "needs the front ends' npm packages: run scripts/test-deps"]
async fn a_failed_turn_is_each_protocols_error() {
    let s = TestServer::builder()
        .model(std::sync::Arc::new(Breaks))
        .start()
        .await;
    let thread = s.new_thread().await;
    let (status, raw, _) = post(&s, &thread, user("show safety issues on floor 3")).await;
    assert_eq!(status, 200, "{raw}");
    let ui = read(&raw, true);
    holds_the_table(&s, &raw);
    the_server_refused_no_chunk(&s).await;
    assert!(ui.error.is_some(), "the client throws on the error");
    // What the native route shows of the same failed turn, and no more.
    let native_thread = s.new_thread().await;
    let want = s.say(&native_thread, "show safety issues on floor 3").await;
    assert!(matches!(want.last(), Some(Frame::Error(_))), "{want:?}");
    assert_eq!(ui.text(), answer(&want));
    let lines: Vec<&str> = raw
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    let errors = lines
        .iter()
        .filter(|l| l.contains("\"type\":\"error\""))
        .count();
    assert_eq!(errors, 1, "{raw}");
    assert_eq!(lines.last(), Some(&"[DONE]"), "{raw}");
    let finish: Value = serde_json::from_str(lines[lines.len() - 2]).unwrap();
    assert_eq!(finish, json!({"type": "finish", "finishReason": "error"}));

    let thread = s.new_thread().await;
    let ag = agui_run(
        &s,
        &thread,
        run_input(&thread, "r1", "show safety issues on floor 3"),
    )
    .await;
    assert!(ag.error.is_object(), "RUN_ERROR: {:?}", ag.events);
    assert!(ag.finished.is_null(), "no RUN_FINISHED after RUN_ERROR");
    assert_eq!(ag.events.last().map(String::as_str), Some("RUN_ERROR"));
    s.pass();
}

/// The thread's follow-ups through AG-UI: a narrowing of the previous
/// answer, then "show more" as `forwardedProps.more`.
#[tokio::test]
#[ignore = "needs the front ends' npm packages: run scripts/test-deps"]
async fn follow_ups_narrow_and_show_more_through_ag_ui() {
    let s = TestServer::builder().start().await;
    let native_thread = s.new_thread().await;
    let thread = s.new_thread().await;
    for (i, (prompt, more)) in [
        ("list all panoramas", false),
        ("only those on floor 3", false),
        ("show more", true),
    ]
    .into_iter()
    .enumerate()
    {
        let want = s
            .turn(&native_thread, json!({"text": prompt, "more": more}))
            .await;
        let mut run = run_input(&thread, &format!("r{i}"), prompt);
        run["forwardedProps"] = json!({"more": more});
        let got = agui_run(&s, &thread, run).await;
        assert_eq!(got.text, answer(&want), "{prompt}");
        let cards: Vec<(String, u64)> = (got.custom("citation").iter())
            .map(|c| {
                (
                    c["grade"].as_str().unwrap().to_string(),
                    c["displayed"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(cards, citations(&want), "{prompt}");
    }
    s.pass();
}

/// A resume after the interrupt expired is refused by the approval table's
/// row, and nothing is confirmed.
#[tokio::test]
#[ignore = "needs the front ends' npm packages: run scripts/test-deps"]
async fn an_expired_ag_ui_interrupt_is_refused() {
    let limits = turnstile::agent::Limits {
        approval_ttl: std::time::Duration::from_millis(300),
        ..turnstile::agent::Limits::default()
    };
    let s = TestServer::builder().limits(limits).start().await;
    let thread = s.new_thread().await;
    let held = agui_run(
        &s,
        &thread,
        run_input(&thread, "r1", "reserve seat 27 at 15:00"),
    )
    .await;
    let id = held.finished["outcome"]["interrupts"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let resume = json!({"threadId": thread, "runId": "r2", "messages": [], "resume": [
        {"interruptId": id, "status": "resolved", "payload": {"decision": "approve"}}
    ]});
    let (status, body) = post_agui(&s, &thread, resume).await;
    assert_eq!(status, 409, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["row_id"], "approve-after-expiry", "{v}");
    s.pass();
}
