//! The licence gate before the call (issue 20 §5, seed 003 §4.6), over
//! HTTP against the demo tool server, with callers whose tiers a keyed
//! proxy injects (and anonymous ones, who hold the lowest):
//!
//! - every (tool × tier) pair of the demo catalogue is allowed or blocked
//!   as the one map says: an exhaustive matrix generated from the map and
//!   the tiers, not a sample; a blocked call never reaches the demo server
//!   (counted there), an allowed one does;
//! - no prompt the model is given names a tool its caller may not use, nor
//!   any word of the permission system;
//! - the refusal is a structured frame with code's copy in the user's
//!   language, and the answer is code's;
//! - a partial permission runs nothing silently: it offers the part;
//! - each decision is an audit row of the thread;
//! - the interceptor defines no map of its own (read from the sources).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use serde_json::{json, Map, Value};
use turnstile::http::Mode;
use turnstile::judge::tiers::{LicenceMap, Tiers, DEFAULT_TIERS};
use turnstile::llm::{LlmError, Model, Plan, PlanRequest, PlannedCall, RespondRequest, TextStream};
use turnstile::mcp::{ServerSpec, ToolClient};
use turnstile::wire::Frame;

use crate::common::frames::{is_done, read_frames};
use crate::common::server::TestServer;
use crate::identity::{proxied, proxy_auth, Caller};

/// A model that plans exactly the calls the user's message names
/// (`call a, b`), whatever it was offered: a model that asks for tools it
/// was never shown, on purpose. It records every request it is given.
#[derive(Default)]
struct Asker {
    seen: Mutex<Vec<String>>,
    /// The tool names each planning request offered.
    offered: Mutex<Vec<(String, Vec<String>)>>,
}

#[async_trait::async_trait]
impl Model for Asker {
    fn name(&self) -> &str {
        "asker"
    }

    async fn plan(&self, req: &PlanRequest) -> Result<Plan, LlmError> {
        self.seen.lock().unwrap().push(format!("{req:?}"));
        let names = req.tools.iter().map(|t| t.name.clone()).collect();
        (self.offered.lock().unwrap()).push((req.user_text.clone(), names));
        let calls = match (req.steps.is_empty(), req.user_text.strip_prefix("call ")) {
            (true, Some(list)) => (list.split(','))
                .map(|t| PlannedCall {
                    id: None,
                    tool: t.trim().to_string(),
                    args: Map::new(),
                    invalid_args: None,
                })
                .collect(),
            _ => Vec::new(),
        };
        Ok(Plan {
            calls,
            note: "asked".into(),
            narrows_previous: false,
            continues_previous: false,
            from_context: Vec::new(),
            shows_link: false,
        })
    }

    async fn respond(&self, req: &RespondRequest) -> Result<TextStream, LlmError> {
        self.seen.lock().unwrap().push(format!("{req:?}"));
        Ok(futures::stream::iter([Ok("Here is what came back.".to_string())]).boxed())
    }
}

/// Words of the permission system, and the tier names as words.
fn licence_words(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let mut found: Vec<String> = [
        "licen",
        "tier",
        "subscri",
        "entitle",
        "permission",
        "premium",
        "upgrade",
        "권한",
        "라이선스",
        "등급",
        "요금제",
    ]
    .iter()
    .filter(|w| lower.contains(*w))
    .map(|w| w.to_string())
    .collect();
    for word in lower.split(|c: char| !c.is_alphanumeric()) {
        if DEFAULT_TIERS.contains(&word) && !found.contains(&word.to_string()) {
            found.push(word.to_string());
        }
    }
    found
}

/// The demo catalogue as its server lists it (asked directly).
async fn catalogue(url: &str) -> Vec<(String, Option<String>)> {
    let client = ToolClient::connect(&ServerSpec::http("demo", url.to_string()))
        .await
        .expect("the demo server");
    let tools = client.list_tools().await.expect("tools/list");
    let out = tools
        .into_iter()
        .map(|t| {
            let declared = client.trust(&t.name).declared_tier;
            (t.name, declared)
        })
        .collect();
    client.close().await;
    out
}

/// A proxied server whose map puts `search_photos` at `pro`.
async fn search_needs_pro(model: Arc<Asker>) -> TestServer {
    TestServer::builder()
        .model(model)
        .auth(proxy_auth(Mode::Development))
        .licences(LicenceMap::new(
            [("search_photos".to_string(), "pro".to_string())].into(),
            Tiers::default(),
            None,
        ))
        .start()
        .await
}

fn rank(tier: &str) -> usize {
    DEFAULT_TIERS.iter().position(|t| *t == tier).unwrap()
}

fn refusals(frames: &[Frame]) -> Vec<Value> {
    frames
        .iter()
        .filter_map(|f| match f {
            Frame::ToolResult(r) => r.refusal.clone(),
            _ => None,
        })
        .collect()
}

fn answer(frames: &[Frame]) -> String {
    crate::common::frames::answer(frames)
}

async fn say(c: &Caller, thread: &str, text: &str) -> Vec<Frame> {
    let (status, body) = c
        .send(
            "POST",
            &format!("/v1/threads/{thread}/messages"),
            Some(json!({ "text": text })),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let frames = read_frames(body.as_bytes());
    assert!(is_done(&frames), "{text}: {frames:?}");
    frames
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_and_tier_is_allowed_or_blocked_as_the_map_says() {
    let model = Arc::new(Asker::default());
    // The map: each tool the demo does not declare gets a tier from the
    // config, in turn; the two that declare one keep their own.
    let probe =
        turnstile_demo::DemoServer::start("127.0.0.1:0".parse().unwrap(), Default::default())
            .await
            .unwrap();
    let listed = catalogue(&probe.url).await;
    probe.shutdown().await;
    assert!(listed.len() >= 10, "{listed:?}");
    let mut configured = BTreeMap::new();
    let mut required: BTreeMap<String, Option<String>> = BTreeMap::new();
    for (i, (tool, declared)) in listed.iter().enumerate() {
        let tier = match declared {
            Some(d) => Some(d.clone()),
            // Every fifth tool needs nothing.
            None if i % 5 == 4 => None,
            None => {
                let t = DEFAULT_TIERS[i % 4].to_string();
                configured.insert(tool.clone(), t.clone());
                Some(t)
            }
        };
        required.insert(tool.clone(), tier);
    }
    assert!(required
        .values()
        .any(|t| t.as_deref() == Some("enterprise")));
    assert!(required.values().any(Option::is_none));
    let s = TestServer::builder()
        .model(model.clone())
        .auth(proxy_auth(Mode::Development))
        .licences(LicenceMap::new(configured, Tiers::default(), None))
        // No approval roles or export flows: an allowed call goes straight
        // to the server, so reaching it is the gate's doing alone.
        .roles(Default::default())
        .terminals(Default::default())
        .start()
        .await;
    let demo = s.demo.as_ref().unwrap();
    let mut callers: Vec<(String, Caller)> = vec![("anonymous".into(), Caller::new(&s, &[]))];
    for tier in DEFAULT_TIERS {
        callers.push((tier.to_string(), proxied(&s, &format!("user-{tier}"), tier)));
    }
    let mut cells = 0;
    for (who, caller) in &callers {
        // An anonymous caller holds the lowest tier.
        let held = match who.as_str() {
            "anonymous" => 0,
            t => rank(t),
        };
        let thread = caller.thread().await;
        model.offered.lock().unwrap().clear();
        for (tool, tier) in &required {
            let allowed = tier.as_ref().is_none_or(|t| held >= rank(t));
            let before = demo.tool_calls(tool);
            let frames = say(caller, &thread, &format!("call {tool}")).await;
            let reached = demo.tool_calls(tool) - before;
            let refused = refusals(&frames);
            match allowed {
                true => {
                    // Let through: sent once, or held for the user's
                    // approval of the exact call (a tool that declares
                    // itself destructive, ADR 0018), which is not the
                    // licence gate's refusal.
                    let held = frames
                        .iter()
                        .any(|f| matches!(f, Frame::Interrupt(i) if &i.tool == tool));
                    assert_eq!(
                        reached + u64::from(held),
                        1,
                        "{who} × {tool} ({tier:?}): allowed, sent once or held: {frames:?}"
                    );
                    assert!(refused.is_empty(), "{who} × {tool}: {refused:?}");
                }
                false => {
                    assert_eq!(reached, 0, "{who} × {tool} ({tier:?}): blocked, never sent");
                    assert_eq!(refused.len(), 1, "{who} × {tool}: {frames:?}");
                    assert_eq!(refused[0]["row_id"], "tier-not-held");
                    assert_eq!(refused[0]["table"], "licence");
                    // The answer is code's copy, not the model's: after
                    // code's sentence for a call of the previous turn this
                    // message withdrew (issue 34 §6), if it held one.
                    let said = answer(&frames);
                    let copy = refused[0]["message"].as_str().unwrap();
                    let before = said.strip_suffix(copy).unwrap_or_else(|| panic!("{said}"));
                    assert!(
                        before.is_empty()
                            || before == "Your new message withdrew the call that was waiting for your approval, so it was never sent. ",
                        "{said}"
                    );
                    assert!(!answer(&frames).contains("Here is what came back"));
                }
            }
            cells += 1;
        }
        // The catalogue this caller's model was offered is exactly what the
        // map lets them use.
        let allowed: Vec<&String> = (required.iter())
            .filter(|(_, t)| t.as_ref().is_none_or(|t| held >= rank(t)))
            .map(|(tool, _)| tool)
            .collect();
        for (text, offered) in model.offered.lock().unwrap().iter() {
            let mut offered: Vec<&String> = offered.iter().collect();
            offered.sort();
            assert_eq!(offered, allowed, "{who}: {text}");
        }
        // Each decision is an audit row of the thread, in order.
        let (_, body) = caller
            .send("GET", &format!("/v1/threads/{thread}"), None)
            .await;
        let v: Value = serde_json::from_str(&body).unwrap();
        let audit = v["licence_audit"].as_array().unwrap();
        assert_eq!(audit.len(), required.len(), "{who}");
        for (row, (tool, tier)) in audit.iter().zip(&required) {
            assert_eq!(row["tool"], tool.as_str());
            assert_eq!(row["required_tier"], json!(tier));
            let allowed = tier.as_ref().is_none_or(|t| held >= rank(t));
            assert_eq!(row["allowed"], allowed, "{who} × {tool}: {row}");
        }
    }
    assert_eq!(cells, callers.len() * required.len());
    // No request the model was given holds a word of the permission system.
    for seen in model.seen.lock().unwrap().iter() {
        let words = licence_words(seen);
        assert!(words.is_empty(), "{words:?} in a model request: {seen}");
    }
    s.pass();
}

#[tokio::test]
async fn the_catalogue_hides_what_the_caller_cannot_use_and_the_refusal_speaks_their_language() {
    let model = Arc::new(Asker::default());
    let s = search_needs_pro(model.clone()).await;
    let basic = proxied(&s, "user-ana", "basic");
    let thread = basic.thread().await;
    for (text, fragment) in [
        ("call search_photos", "not available to your account"),
        ("call search_photos, 3층", "현재 계정에서"),
        ("call search_photos, 3階の写真", "アカウント"),
        ("call search_photos, 显示三楼", "账户"),
        ("call search_photos, muéstrame las fotos", "su cuenta"),
    ] {
        let frames = say(&basic, &thread, text).await;
        let r = refusals(&frames);
        assert!(!r.is_empty(), "{text}: {frames:?}");
        let message = r[0]["message"].as_str().unwrap();
        assert!(message.contains(fragment), "{text}: {message}");
        assert_eq!(answer(&frames), message);
    }
    // Neither the tool list nor any prompt named search_photos to a basic
    // caller; the tool the declaration hides (archive_query, `pro`) too.
    for (_, offered) in model.offered.lock().unwrap().iter() {
        assert!(
            !offered
                .iter()
                .any(|t| t == "search_photos" || t == "archive_query"),
            "{offered:?}"
        );
        assert!(
            offered.iter().any(|t| t == "get_panorama"),
            "basic holds get_panorama"
        );
    }
    s.pass();
}

#[tokio::test]
async fn a_partial_permission_offers_the_part_and_runs_nothing() {
    let s = TestServer::builder()
        .model(Arc::new(Asker::default()))
        .auth(proxy_auth(Mode::Development))
        // The demo's own declarations: archive_query `pro`.
        .licences(LicenceMap::new(BTreeMap::new(), Tiers::default(), None))
        .start()
        .await;
    let demo = s.demo.as_ref().unwrap();
    let basic = proxied(&s, "user-ana", "basic");
    let thread = basic.thread().await;
    let (search, archive) = (
        demo.tool_calls("search_photos"),
        demo.tool_calls("archive_query"),
    );
    let frames = say(&basic, &thread, "call search_photos, archive_query").await;
    // Nothing ran: neither the part the caller may use nor the rest.
    assert_eq!(demo.tool_calls("search_photos"), search);
    assert_eq!(demo.tool_calls("archive_query"), archive);
    let r = refusals(&frames);
    assert_eq!(r.len(), 1, "{frames:?}");
    assert_eq!(r[0]["row_id"], "tier-not-held-in-part");
    let said = answer(&frames);
    assert!(
        said.contains("search_photos") && said.contains("Shall I"),
        "{said}"
    );
    assert!(!said.contains("archive_query"), "{said}");
    // Yes: the part runs.
    let frames = say(&basic, &thread, "call search_photos").await;
    assert!(refusals(&frames).is_empty());
    assert_eq!(demo.tool_calls("search_photos"), search + 1);
    s.pass();
}

/// The interceptor and the catalogue filter read the one map in
/// `judge::tiers`; neither defines one of its own (seed 003 §4.6: the test
/// that catches two maps drifting apart). Read from the sources.
#[test]
fn the_interceptor_defines_no_map_of_its_own() {
    let root = env!("CARGO_MANIFEST_DIR");
    // The gate's effects and its driver (issue 36 §2); their unit tests
    // build maps of their own, so only the code before them is read.
    let shipped = |text: String| match text.find("#[cfg(test)]") {
        Some(i) => text[..i].to_string(),
        None => text,
    };
    let gate: String = ["licence.rs", "licence_gate.rs"]
        .iter()
        .map(|f| {
            let path = format!("{root}/crates/turnstile/src/agent/turn/{f}");
            shipped(std::fs::read_to_string(path).unwrap())
        })
        .collect();
    let code: String = (gate.lines())
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    for forbidden in [
        "HashMap",
        "BTreeMap",
        "\"free\"",
        "\"basic\"",
        "\"pro\"",
        "\"enterprise\"",
        "licence_tier",
        "LicenceMap::new",
        "LicenceMap::open",
    ] {
        assert!(!code.contains(forbidden), "the gate holds `{forbidden}`");
    }
    assert!(
        code.contains("self.agent.licences"),
        "the gate reads the agent's one map"
    );
    // The map is built in one place: the config (and the demo's front end).
    let mut builders = Vec::new();
    let crates = format!("{root}/crates");
    for entry in walk(std::path::Path::new(&crates)) {
        let text = shipped(std::fs::read_to_string(&entry).unwrap());
        if text.contains("LicenceMap::new(") {
            builders.push(entry.strip_prefix(&crates).unwrap().display().to_string());
        }
    }
    builders.sort();
    assert_eq!(
        builders,
        [
            "turnstile-judge/src/judge/tiers.rs",
            "turnstile/src/config/mod.rs"
        ],
        "{builders:?}"
    );
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}

/// A licence refusal through both front ends (issue 37): the refused call
/// is an error part (`tool-output-error`, a `TOOL_CALL_RESULT` with
/// `ok: false`) naming the licence table's row, never a tool that failed,
/// and the answer is code's, word for word the native route's.
#[tokio::test]
#[ignore = "needs the front ends' npm packages: run scripts/test-deps"]
async fn a_licence_refusal_reads_the_same_through_both_front_ends() {
    let s = search_needs_pro(Arc::new(Asker::default())).await;
    let basic = proxied(&s, "user-ana", "basic");
    let native = basic.thread().await;
    let want = say(&basic, &native, "call search_photos").await;
    assert!(!refusals(&want).is_empty(), "{want:?}");

    let thread = basic.thread().await;
    let body = json!({"messages": [{"role": "user", "parts": [{"type": "text", "text": "call search_photos"}]}]});
    let path = format!("/v1/threads/{thread}/ui-message-stream");
    let (status, raw) = basic.send("POST", &path, Some(body)).await;
    assert_eq!(status, 200, "{raw}");
    let ui = crate::frontends::read(&raw, false);
    assert_eq!(ui.text(), answer(&want));
    let refused = ui.parts("tool");
    assert_eq!(refused.len(), 1, "{}", ui.message);
    assert_eq!(refused[0]["state"], "output-error");
    assert!(
        refused[0]["errorText"]
            .as_str()
            .unwrap()
            .contains("licence"),
        "{}",
        refused[0]
    );

    let thread = basic.thread().await;
    let run = json!({"threadId": thread, "runId": "r1", "messages": [
        {"id": "m1", "role": "user", "content": "call search_photos"}
    ]});
    let (status, raw) = basic
        .send("POST", &format!("/v1/threads/{thread}/agui"), Some(run))
        .await;
    assert_eq!(status, 200, "{raw}");
    let ag = crate::frontends::read_agui(&raw);
    assert_eq!(ag.text, answer(&want));
    let result: Value = serde_json::from_str(ag.tool_calls[0]["result"].as_str().unwrap()).unwrap();
    assert_eq!(result["ok"], false, "{result}");
    assert!(
        result["refusal"].to_string().contains("licence"),
        "{result}"
    );
    s.pass();
}
