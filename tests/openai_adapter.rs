//! The OpenAI-compatible adapter end to end: real HTTP/SSE turns through the
//! chat server, the real demo MCP server and SQLite, with the model played by
//! an in-process fake that speaks the chat-completions streaming wire format
//! (`common::fake_openai`). The fake plans with the real scripted planner, so
//! every demo flow must produce the same frames as with the scripted model.

use crate::common;

use std::time::Duration;

use common::fake_openai::{directives, Action, Captured, FakeOpenAi, Role, FAKE_MODEL, KEY};
use common::frames::{
    answer, citations, error, has, is_done, kinds, kinds_without_deltas, last_kind, plan, plans,
    read_frames, tool_results, without_ids, FrameKind,
};
use common::harness::Run;
use common::server::TestServer;
use common::thread::RecordKind;
use serde_json::{json, Value};
use turnstile::judge::CountGrade;
use turnstile::llm::prompt::{PLANNER_FIXED, RESPONDER_FIXED};
use turnstile::wire::Frame;
use turnstile_demo::Fault;

// ---------------------------------------------------------------------------
// Captured logs: every test's tracing output, all levels of turnstile and
// the HTTP client, so the key can be looked for in them.

fn capture_logs() {
    common::logs::capture();
}

fn logs() -> String {
    common::logs::text()
}

fn assert_no_key_in_logs() {
    let l = logs();
    assert!(!l.contains(KEY), "the API key appears in the logs");
}

// ---------------------------------------------------------------------------
// Demo flows: the adapter must give what the scripted model gives.

/// One conversation: its turns (text, host context) on one thread, with
/// the demo tool server's faults.
struct Flow {
    name: String,
    turns: Vec<(&'static str, Option<Value>)>,
    faults: Vec<Fault>,
}

fn flow(name: &str, turns: &[&'static str]) -> Flow {
    Flow {
        name: name.into(),
        turns: turns.iter().map(|t| (*t, None)).collect(),
        faults: vec![],
    }
}

/// Every flow of tests/http_turns.rs and tests/honesty.rs (and each demo
/// fault). A flow added here runs against both models.
fn flows() -> Vec<Flow> {
    let mut out = vec![
        flow("safety-floor-3", &["show safety issues on floor 3"]),
        flow("safety-floor-3-ko", &["3층 안전 지적사항 보여줘"]),
        flow(
            "detail-two-steps",
            &["show the newest safety issue on floor 3 in detail"],
        ),
        flow(
            "detail-two-steps-ko",
            &["3층 최신 안전 지적사항 자세히 보여줘"],
        ),
        flow("photos-1999", &["show photos from 1999"]),
        flow("photos-1999-ko", &["1999년 사진 보여줘"]),
        flow("twelve-photos-floor-2", &["show me 12 photos of floor 2"]),
        flow("twelve-photos-floor-2-ko", &["2층 사진 12장 보여줘"]),
        flow(
            "twelve-safety-floor-3",
            &["show me 12 safety issues on floor 3"],
        ),
        flow("hello", &["hello"]),
        Flow {
            turns: vec![(
                "show quality issues on this floor",
                Some(json!({
                    "project": "x".repeat(500),
                    "floor": 4,
                    "visible_items": (0..80).map(|i| format!("ANN-{i}")).collect::<Vec<_>>(),
                })),
            )],
            ..flow("this-floor-context", &[])
        },
        flow(
            "narrowing-upgrades-and-releases",
            &[
                "show safety issues on floor 3",
                "only those from April",
                "그중 4월 것만",
                "only those from January",
                "only those from April",
            ],
        ),
        flow(
            "scope-applied-last",
            &[
                "show safety issues on floor 3",
                "only those on floor 5 from April",
            ],
        ),
        flow(
            "list-all",
            &["list all panoramas", "모든 파노라마 목록 보여줘"],
        ),
        flow(
            "count",
            &["how many photos are on floor 3?", "3층 사진은 몇 장이야?"],
        ),
    ];
    for f in Fault::ALL {
        out.push(Flow {
            faults: vec![f],
            ..flow(
                &format!("fault-{}", f.name()),
                &["show safety issues on floor 3", "list all panoramas"],
            )
        });
    }
    out
}

/// What must agree between the two models: every frame but the text, with
/// per-run ids and the plan's free-text note left out. A run of deltas
/// counts once (chunking is the model's); citations keep their counts,
/// grades, stitch and scope, with items reduced to their number.
fn signature(frames: &[Frame]) -> Vec<Frame> {
    let mut out: Vec<Frame> = Vec::new();
    for f in frames {
        let mut f = without_ids(f);
        match &mut f {
            Frame::Delta(d) => {
                if matches!(out.last(), Some(Frame::Delta(_))) {
                    continue;
                }
                d.text.clear();
            }
            Frame::Plan(p) => p.note.clear(),
            Frame::Citation(c) => c.items = vec![Value::Null; c.items.len()],
            _ => {}
        }
        out.push(f);
    }
    out
}

async fn stored_anchors(s: &TestServer, thread: &str) -> Vec<Value> {
    s.thread(thread).await.last_anchors()
}

/// The calls the planner decided in the first `rounds` planning rounds (a
/// stitched listing's further pages are code's, not the model's).
fn tool_calls_up_to(frames: &[Frame], rounds: usize) -> usize {
    plans(frames)
        .iter()
        .take(rounds)
        .map(|p| p.steps.len())
        .sum()
}

/// Requests whose user message is `text`, from index `from` on.
fn turn_requests<'a>(reqs: &'a [Captured], from: usize, text: &str) -> Vec<&'a Captured> {
    reqs[from..].iter().filter(|r| r.user() == text).collect()
}

#[tokio::test]
async fn every_demo_flow_matches_the_scripted_model() {
    capture_logs();
    let fake = FakeOpenAi::start().await;
    let mut checked = 0;
    // Model requests per turn against tool steps, printed for the record
    // (`-- --nocapture`): N tool steps must cost N+1 requests.
    let mut counted: Vec<(String, usize, usize, String)> = Vec::new();
    for f in flows() {
        // Each on a fresh SQLite file of its own.
        let scripted = TestServer::builder().faults(f.faults.clone()).start().await;
        let adapter = TestServer::builder()
            .faults(f.faults.clone())
            .model(fake.model())
            .start()
            .await;
        let t_a = scripted.new_thread().await;
        let t_b = adapter.new_thread().await;
        for (n, (text, context)) in f.turns.iter().enumerate() {
            let at = format!("{} turn {} ({text})", f.name, n + 1);
            let body = match context {
                Some(c) => json!({"text": text, "context": c}),
                None => json!({"text": text}),
            };
            let expect = scripted.turn(&t_a, body.clone()).await;
            let before = fake.requests().len();
            let got = adapter.turn(&t_b, body).await;
            assert_eq!(
                signature(&got),
                signature(&expect),
                "{at}: the adapter's turn differs from the scripted model's"
            );

            // One planner and (on a finished turn) one responder request.
            let reqs = fake.requests();
            let mine = turn_requests(&reqs, before, text);
            let roles: Vec<Role> = mine.iter().map(|r| r.role).collect();
            // The share of each request's prompt that repeats the request
            // before it byte for byte (what a provider's prompt cache can
            // reuse; tools first, then the messages in order), from the
            // turn's second request on.
            let prompt = |r: &Captured| {
                let mut out = r.body["tools"].to_string();
                for m in r.body["messages"].as_array().into_iter().flatten() {
                    out += &m.to_string();
                }
                out
            };
            let shares: Vec<String> = mine
                .windows(2)
                .map(|w| {
                    let (a, b) = (prompt(w[0]), prompt(w[1]));
                    let (a, b) = (a.as_bytes(), b.as_bytes());
                    let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
                    format!("{:.0}%", 100.0 * common as f64 / b.len() as f64)
                })
                .collect();
            counted.push((at.clone(), plans(&got).len(), mine.len(), shares.join(", ")));
            if !is_done(&got) {
                assert_eq!(roles.first(), Some(&Role::Planner), "{at}");
                continue;
            }
            // N tool steps, N+1 requests: one planning round per step with
            // calls (each has a plan frame), then the round that answers.
            let rounds = plans(&got).len();
            let mut expect_roles = vec![Role::Planner; rounds];
            expect_roles.push(Role::Responder);
            // A round whose plan refers to what the turn lacks is answered
            // by code's sentence (row `ask-for-missing-reference`): still
            // N+1, with no request after it.
            if roles.len() == rounds + 1 && roles.last() == Some(&Role::Planner) {
                assert!(roles.iter().all(|r| *r == Role::Planner), "{at}");
                assert!(!answer(&got).is_empty(), "{at}");
                continue;
            }
            assert_eq!(roles, expect_roles, "{at}");
            // Later rounds get the standard tools loop: the earlier calls as
            // an assistant message with `tool_calls`, and one `tool` message
            // per call with the matching id, carrying the bounded digest.
            for (round, req) in mine[1..=rounds].iter().enumerate() {
                let messages = req.body["messages"].as_array().unwrap();
                let calls: Vec<&Value> = messages
                    .iter()
                    .filter(|m| m["role"] == "assistant" && m["tool_calls"].is_array())
                    .flat_map(|m| m["tool_calls"].as_array().unwrap())
                    .collect();
                assert_eq!(calls.len(), tool_calls_up_to(&got, round + 1), "{at}");
                for c in calls {
                    let answer = messages
                        .iter()
                        .find(|m| m["role"] == "tool" && m["tool_call_id"] == c["id"])
                        .unwrap_or_else(|| panic!("{at}: no tool message for {c}"));
                    let digest = answer["content"].as_str().unwrap();
                    assert!(digest.len() <= 2048, "{at}: a digest, not the raw result");
                    let _: turnstile::judge::digest::Digest = serde_json::from_str(digest).unwrap();
                }
            }
            // Consecutive requests of the turn share everything up to the
            // turn's own blocks: the cacheable prefix only grows.
            for pair in mine.windows(2) {
                let (a, b) = (&pair[0].body["messages"], &pair[1].body["messages"]);
                let a = a.as_array().unwrap();
                let kept = match a.last() {
                    Some(m) if m["role"] == "system" && a.len() > 1 => &a[..a.len() - 1],
                    _ => &a[..],
                };
                assert_eq!(
                    &b.as_array().unwrap()[..kept.len()],
                    kept,
                    "{at}: a later request does not extend the earlier one"
                );
            }
            // The responder saw every anchor code derived, as a directive.
            let lines = directives(mine[rounds].system());
            let anchors = stored_anchors(&adapter, &t_b).await;
            assert_eq!(lines.len(), anchors.len(), "{at}: {lines:?} vs {anchors:?}");
            for (line, a) in lines.iter().zip(&anchors) {
                for (key, v) in a.as_object().into_iter().flatten() {
                    if let Some(n) = v.as_u64().filter(|_| key != "pages") {
                        assert!(
                            line.contains(&n.to_string()),
                            "{at}: {key} {n} not in {line}"
                        );
                    }
                }
            }
            // The answer streamed through is the one the fake wrote from them.
            for line in &lines {
                assert!(answer(&got).contains(line.as_str()), "{at}: {line}");
            }
        }
        scripted.pass();
        adapter.pass();
        checked += 1;
    }
    assert!(checked >= 17, "the flow table shrank");
    eprintln!("| turn | tool steps | model requests | prefix shared with the request before |\n|---|---|---|---|");
    for (at, steps, requests, shares) in &counted {
        eprintln!("| {at} | {steps} | {requests} | {shares} |");
    }

    // Across every turn: the request shape, the prompt-cache order, no
    // licence words, and the key only in its header.
    let reqs = fake.requests();
    let mut fixed = std::collections::BTreeMap::new();
    let mut tools_seen = std::collections::BTreeSet::new();
    for r in &reqs {
        assert_eq!(r.body["model"], FAKE_MODEL);
        assert_eq!(r.body["stream"], true);
        assert_eq!(r.body["stream_options"]["include_usage"], true);
        let roles: Vec<&str> = r.body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        // The fixed system prompt, the thread's earlier turns as
        // user/assistant pairs, the user's message, then (later rounds) the
        // tools loop, and last the turn's own blocks as a system message;
        // a responder request has the responder's prompt and the message.
        let last_user = roles.iter().rposition(|r| *r == "user").unwrap();
        assert_eq!(roles[0], "system");
        for pair in roles[1..last_user].chunks(2) {
            assert_eq!(pair, ["user", "assistant"], "{roles:?}");
        }
        let after = &roles[last_user + 1..];
        let (tail, loop_part) = match after.split_last() {
            Some((&"system", rest)) => (true, rest),
            _ => (false, after),
        };
        assert!(
            loop_part.iter().all(|r| *r == "assistant" || *r == "tool"),
            "{roles:?}"
        );
        // Issue 33 §6: the deployment's instructions (the demo's), then
        // code's fixed rules, byte for byte.
        let instructions = turnstile_demo::INSTRUCTIONS;
        let responder = r.fixed().contains(RESPONDER_FIXED);
        if responder {
            assert!(
                r.fixed()
                    .starts_with(&format!("{instructions}\n\n{RESPONDER_FIXED}")),
                "{}",
                r.fixed()
            );
            assert_eq!(roles, ["system", "user"]);
            assert!(r.body.get("tools").is_none(), "the responder gets no tools");
        } else {
            assert_eq!(
                r.fixed(),
                format!("{instructions}\n\n{PLANNER_FIXED}"),
                "the instructions and the fixed part are alone first"
            );
            assert!(r.body["tools"].as_array().is_some_and(|t| !t.is_empty()));
            tools_seen.insert(r.body["tools"].to_string());
            // The turn's blocks are the last message, never in the prefix.
            assert!(
                !r.fixed().contains("## Directives") && !r.fixed().contains("## Host context"),
                "a turn block in the fixed prompt"
            );
            if !tail {
                assert!(!r.raw.contains("## Directives"), "{roles:?}");
            }
        }
        let head = r.fixed().split("\n\n## ").next().unwrap().to_string();
        fixed.entry(responder).or_insert_with(Vec::new).push(head);
        let lower = r.raw.to_lowercase();
        for word in ["licence", "license", "tier", "subscription"] {
            assert!(!lower.contains(word), "\"{word}\" in a prompt: {}", r.raw);
        }
        assert!(!r.raw.contains(KEY), "the key is in a request body");
        assert_eq!(
            r.authorization.as_deref(),
            Some(format!("Bearer {KEY}").as_str())
        );
    }
    for heads in fixed.values() {
        assert!(
            heads.windows(2).all(|w| w[0] == w[1]),
            "the fixed part changed between turns"
        );
    }
    assert_eq!(tools_seen.len(), 1, "the tool list changed between turns");
    assert!(fixed.contains_key(&false), "no planning round was seen");

    // Usage is recorded as fields, and the captured logs are real.
    let l = logs();
    assert!(l.contains("model usage"), "no usage line in the logs");
    assert!(
        l.contains("prompt_tokens=123") && l.contains("cached_tokens=64"),
        "usage fields missing"
    );
    assert_no_key_in_logs();
}

// ---------------------------------------------------------------------------
// Failures

fn count(reqs: &[Captured], role: Role) -> usize {
    reqs.iter().filter(|r| r.role == role).count()
}

/// A turn of one search and its answer, deltas left out.
const ONE_SEARCH: [FrameKind; 6] = [
    FrameKind::Start,
    FrameKind::Plan,
    FrameKind::ToolCall,
    FrameKind::ToolResult,
    FrameKind::Citation,
    FrameKind::Done,
];

#[tokio::test]
async fn rate_limits_and_5xx_are_retried_before_the_stream_with_one_set_of_frames() {
    capture_logs();
    let fake = FakeOpenAi::start().await;
    let s = TestServer::builder().model(fake.model()).start().await;
    let thread = s.new_thread().await;
    let limited = json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}});
    fake.on(Role::Planner, Action::Status(429, limited));
    fake.on(
        Role::Responder,
        Action::Status(503, json!({"error": {"message": "overloaded"}})),
    );
    let frames = s.say(&thread, "show safety issues on floor 3").await;
    assert_eq!(kinds_without_deltas(&frames), ONE_SEARCH);
    assert!(
        answer(&frames).contains("At least 189"),
        "{}",
        answer(&frames)
    );
    let reqs = fake.requests();
    // The planner: one 429, then the plan; then the round that answers:
    // one 503, then the answer.
    assert_eq!(
        (count(&reqs, Role::Planner), count(&reqs, Role::Responder)),
        (2, 2)
    );

    // Retries run out: three 500s with max_retries = 2 → an error frame.
    for _ in 0..3 {
        fake.on(
            Role::Planner,
            Action::Status(500, json!({"error": {"message": "boom"}})),
        );
    }
    let frames = s.say(&thread, "show safety issues on floor 3").await;
    assert_eq!(kinds(&frames), [FrameKind::Start, FrameKind::Error]);
    let msg = &error(&frames).unwrap().message;
    assert!(msg.contains("HTTP 500"), "{msg}");
    assert_eq!(count(&fake.requests(), Role::Planner), 5);

    // Retry-After is honoured; one longer than backoff_max ends the retries.
    fake.on(
        Role::Planner,
        Action::RateLimited {
            retry_after_secs: 0,
        },
    );
    let frames = s.say(&thread, "hello").await;
    assert!(is_done(&frames), "{:?}", kinds(&frames));
    // The 429, then the round that answers "hello" (a responder request).
    assert_eq!(count(&fake.requests(), Role::Planner), 6);
    fake.on(
        Role::Planner,
        Action::RateLimited {
            retry_after_secs: 60,
        },
    );
    let started = std::time::Instant::now();
    let frames = s.say(&thread, "hello").await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(kinds(&frames), [FrameKind::Start, FrameKind::Error]);
    assert!(error(&frames).unwrap().message.contains("HTTP 429"));
    assert_eq!(count(&fake.requests(), Role::Planner), 7, "not retried");
    s.pass();
    assert_no_key_in_logs();
}

#[tokio::test]
async fn client_errors_are_not_retried_and_never_show_the_key() {
    capture_logs();
    let fake = FakeOpenAi::start().await;
    let s = TestServer::builder().model(fake.model()).start().await;
    let thread = s.new_thread().await;
    // A provider that quotes the key back, in a 401 and in a 400.
    let echo = json!({"error": {"message": format!("Incorrect API key provided: {KEY}")}});
    fake.on(Role::Planner, Action::Status(401, echo.clone()));
    let frames = s.say(&thread, "show safety issues on floor 3").await;
    assert_eq!(kinds(&frames), [FrameKind::Start, FrameKind::Error]);
    // The whole frame, every field of it: the key is in none.
    let msg = frames[1].data().to_string();
    assert!(msg.contains("HTTP 401") && !msg.contains(KEY), "{msg}");

    fake.on(Role::Planner, Action::Status(400, echo));
    let frames = s.say(&thread, "show safety issues on floor 3").await;
    assert_eq!(kinds(&frames), [FrameKind::Start, FrameKind::Error]);
    let msg = frames[1].data().to_string();
    assert!(
        msg.contains("HTTP 400") && msg.contains("[redacted]") && !msg.contains(KEY),
        "{msg}"
    );
    assert_eq!(
        count(&fake.requests(), Role::Planner),
        2,
        "4xx is not retried"
    );

    // Nothing of it is stored either.
    let (_, v) = s.get(&format!("/v1/threads/{thread}")).await;
    assert!(!v.to_string().contains(KEY));
    assert!(is_done(&s.say(&thread, "hello").await));
    s.pass();
    assert_no_key_in_logs();
}

#[tokio::test]
async fn a_stream_cut_mid_answer_ends_the_turn_with_an_error_and_is_not_resent() {
    capture_logs();
    let fake = FakeOpenAi::start().await;
    let s = TestServer::builder().model(fake.model()).start().await;
    let thread = s.new_thread().await;
    fake.on(Role::Responder, Action::CutAfter(3));
    let frames = tokio::time::timeout(
        Duration::from_secs(20),
        s.say(&thread, "show safety issues on floor 3"),
    )
    .await
    .expect("no hang");
    let k = kinds(&frames);
    assert_eq!(last_kind(&frames), Some(FrameKind::Error), "{k:?}");
    assert!(has(&frames, FrameKind::Citation), "{k:?}");
    // The narration guard releases whole sentences only: what was shown
    // before the cut ends at a sentence's end, and the cut sentence is not
    // shown at all.
    let shown = answer(&frames);
    assert!(
        shown.is_empty() || shown.trim_end().ends_with(['.', '”']),
        "{shown:?}"
    );
    let msg = &error(&frames).unwrap().message;
    assert!(msg.contains("stream broke"), "{msg}");
    assert_eq!(
        count(&fake.requests(), Role::Responder),
        1,
        "never re-sent after a delta"
    );
    // The thread stays usable and kept the error.
    assert!(is_done(&s.say(&thread, "hello").await));
    // Stored: what was shown (card, the three deltas as text batches), the
    // error, then the next turn.
    let v = s.thread(&thread).await;
    let records = v.kinds();
    use RecordKind as K;
    assert_eq!(
        records[..6],
        [K::User, K::Plan, K::Licence, K::Call, K::Result, K::Card],
        "{records:?}"
    );
    let error_at = records
        .iter()
        .position(|r| *r == K::Error)
        .expect("the error is stored");
    assert!(
        records[6..error_at].iter().all(|r| *r == K::Text),
        "{records:?}"
    );
    assert!(!records[..error_at].contains(&K::Answer));
    assert_eq!(records[error_at + 1], K::User);
    assert_eq!(records.last(), Some(&K::Answer));
    let stored_text: String = v.messages[6..error_at]
        .iter()
        .map(|m| m.body.text().expect("a text record"))
        .collect();
    assert_eq!(
        stored_text,
        answer(&frames),
        "the stored text is what was sent"
    );
    s.pass();
    assert_no_key_in_logs();
}

/// A model that writes text and then asks for a tool in the same response
/// (the round that answers): the text, each sentence judged, is the
/// answer; the call is not run and no request follows (turn row
/// `calls-after-text-not-run`, frame row `plan-after-delta`).
#[tokio::test]
async fn text_then_a_tool_call_is_an_answer_and_the_call_is_not_run() {
    capture_logs();
    let fake = FakeOpenAi::start().await;
    let s = TestServer::builder().model(fake.model()).start().await;
    let thread = s.new_thread().await;
    fake.on(
        Role::Responder,
        Action::TextThenCalls(
            "These are the safety issues I found on floor 3. ".into(),
            vec![(
                "search_photos".into(),
                r#"{"query":"safety","floor":4}"#.into(),
            )],
        ),
    );
    let frames = s.say(&thread, "show safety issues on floor 3").await;
    assert!(is_done(&frames), "{:?}", kinds(&frames));
    assert_eq!(kinds_without_deltas(&frames), ONE_SEARCH);
    assert!(!answer(&frames).is_empty());
    let reqs = fake.requests();
    assert_eq!(
        reqs.iter().map(|r| r.role).collect::<Vec<_>>(),
        [Role::Planner, Role::Responder],
        "no request after the text"
    );
    let v = s.thread(&thread).await;
    let trace = &v.turns[0].machine("turn").trace;
    assert_eq!(
        trace.last().map(String::as_str),
        Some("calls-after-text-not-run"),
        "{trace:?}"
    );
    assert!(logs().contains("not run"), "the dropped call is logged");
    s.pass();
    assert_no_key_in_logs();
}

#[tokio::test]
async fn a_stalled_stream_times_out_instead_of_hanging() {
    capture_logs();
    let fake = FakeOpenAi::start().await;
    let mut cfg = fake.config();
    cfg.idle_timeout = Duration::from_millis(400);
    let model = std::sync::Arc::new(turnstile::llm::OpenAi::new(cfg).unwrap());
    let s = TestServer::builder().model(model).start().await;
    let thread = s.new_thread().await;
    fake.on(Role::Responder, Action::StallAfter(2));
    let started = std::time::Instant::now();
    let frames = tokio::time::timeout(Duration::from_secs(20), s.say(&thread, "hello"))
        .await
        .expect("no hang");
    assert!(started.elapsed() < Duration::from_secs(10));
    // Two deltas of an unfinished sentence arrived, then silence: the
    // narration guard held them (a sentence is shown when it ends), so the
    // turn ends with the error and no half sentence.
    assert_eq!(kinds(&frames), [FrameKind::Start, FrameKind::Error]);
    let msg = &error(&frames).unwrap().message;
    assert!(msg.contains("no data from the model"), "{msg}");
    // A planner that stalls is bounded too.
    fake.on(Role::Planner, Action::StallAfter(1));
    let frames = tokio::time::timeout(Duration::from_secs(20), s.say(&thread, "hello"))
        .await
        .expect("no hang");
    assert_eq!(kinds(&frames), [FrameKind::Start, FrameKind::Error]);
    s.pass();
}

#[tokio::test]
async fn split_tool_calls_several_in_one_response_and_bad_arguments() {
    capture_logs();
    let fake = FakeOpenAi::start().await;
    let s = TestServer::builder().model(fake.model()).start().await;
    let thread = s.new_thread().await;
    fake.on(
        Role::Planner,
        Action::ToolCalls(vec![
            (
                "search_photos".into(),
                r#"{"query": "safety", "floor": 3}"#.into(),
            ),
            (
                "search_photos".into(),
                r#"{"query": "safety", "floor": "#.into(),
            ),
            ("search_photos".into(), "[3]".into()),
            (
                "search_photos".into(),
                r#"{"query": "", "floor": 2, "limit": 12}"#.into(),
            ),
        ]),
    );
    let frames = s.say(&thread, "show safety issues on floor 3").await;
    use FrameKind as K;
    assert_eq!(
        kinds_without_deltas(&frames),
        [
            K::Start,
            K::Plan,
            K::ToolCall,
            K::ToolResult,
            K::Citation,
            K::ToolCall,
            K::ToolResult,
            K::ToolCall,
            K::ToolResult,
            K::ToolCall,
            K::ToolResult,
            K::Citation,
            K::Done
        ]
    );
    let steps = &plan(&frames).unwrap().steps;
    assert_eq!(
        Value::Object(steps[0].args.clone()),
        json!({"query": "safety", "floor": 3})
    );
    assert_eq!(
        Value::Object(steps[3].args.clone()),
        json!({"query": "", "floor": 2, "limit": 12})
    );
    let results = tool_results(&frames);
    let oks: Vec<bool> = results.iter().map(|r| r.ok).collect();
    assert_eq!(oks, [true, false, false, true]);
    let why = &results[1].summary;
    assert!(
        why.contains("invalid arguments") && why.contains("not valid JSON"),
        "{why}"
    );
    let why = &results[2].summary;
    assert!(why.contains("array, not an object"), "{why}");
    let cards = citations(&frames);
    assert_eq!(
        (cards[0].grade.as_str(), cards[0].total),
        (CountGrade::LowerBound.as_str(), Some(189))
    );
    assert_eq!((cards[1].displayed, cards[1].total), (12, Some(613)));
    // The failed calls reached the responder as directives.
    let responder = fake
        .requests()
        .into_iter()
        .rfind(|r| r.role == Role::Responder)
        .unwrap();
    let lines = directives(responder.system());
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains("was refused before it was sent"))
            .count(),
        2,
        "{lines:?}"
    );

    // A tool call cut at the length limit is a planner error, not a call.
    fake.on(Role::Planner, Action::LengthMidArguments);
    let frames = s.say(&thread, "show safety issues on floor 3").await;
    assert_eq!(kinds(&frames), [FrameKind::Start, FrameKind::Error]);
    let msg = &error(&frames).unwrap().message;
    assert!(msg.contains("length limit"), "{msg}");
    s.pass();
    assert_no_key_in_logs();
}

// ---------------------------------------------------------------------------
// The binary: `turnstile serve --config`

const BIN: &str = env!("CARGO_BIN_EXE_turnstile");

#[test]
fn serve_check_validates_the_example_and_locates_errors() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/turnstile.example.toml");
    let out = std::process::Command::new(BIN)
        .args(["serve", "--config", example, "--check"])
        .env("OPENAI_API_KEY", KEY)
        .env_remove("TURNSTILE_TABLES")
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains(": ok") && stdout.contains("from $OPENAI_API_KEY"),
        "{stdout}"
    );
    assert!(!stdout.contains(KEY) && !stderr.contains(KEY));

    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.toml");
    let cases = [
        (
            "database_url = \"x\"\ncolour = \"red\"\n",
            "bad.toml:2:1: unknown field `colour`",
        ),
        (
            "[model]\nname = \"m\"\n",
            "`model.base_url`: missing required value",
        ),
    ];
    for (src, expect) in cases {
        std::fs::write(&bad, src).unwrap();
        let out = std::process::Command::new(BIN)
            .args(["serve", "--config"])
            .arg(&bad)
            .env_remove("OPENAI_API_KEY")
            .env_remove("TURNSTILE_MODEL_BASE_URL")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(expect), "{stderr}");
    }
}

#[tokio::test]
async fn serve_runs_a_turn_against_the_fake_model() {
    use tokio::io::AsyncBufReadExt;
    let tmp = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let demo = turnstile_demo::DemoServer::start(
        "127.0.0.1:0".parse().unwrap(),
        turnstile_demo::DemoOptions::default(),
    )
    .await
    .unwrap();
    let config = tmp.path().join("turnstile.toml");
    // The file names a wrong model and a key variable; the environment
    // overrides the model, and the key comes from the named variable.
    std::fs::write(
        &config,
        format!(
            "addr = \"127.0.0.1:1\"\ndatabase_url = \"sqlite://{}?mode=rwc\"\n\n[model]\nbase_url = \"{}\"\nname = \"not-this-one\"\napi_key_env = \"FAKE_PROVIDER_KEY\"\nidle_timeout_secs = 5\n\n[[mcp_servers]]\nname = \"demo\"\nurl = \"{}\"\ntrusted_origin = \"https://viewer.example.com\"\n[mcp_servers.tools.search_photos]\nlicence_tier = \"pro\"\n\n[licence]\nanonymous_tiers = [\"pro\"]\n",
            tmp.path().join("serve.db").display(),
            fake.base_url,
            demo.url
        ),
    )
    .unwrap();
    let mut child = tokio::process::Command::new(BIN)
        .args(["serve", "--config"])
        .arg(&config)
        .env("TURNSTILE_ADDR", "127.0.0.1:0")
        .env("TURNSTILE_MODEL", FAKE_MODEL)
        .env("FAKE_PROVIDER_KEY", KEY)
        .env("RUST_LOG", "trace")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stderr = child.stderr.take().unwrap();
    let errors = tokio::spawn(async move {
        let mut s = String::new();
        let _ = tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut s).await;
        s
    });
    let base = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = stdout.next_line().await.unwrap() {
            if let Some(url) = line.strip_prefix("turnstile is serving on ") {
                return url.trim_end_matches('/').to_string();
            }
        }
        panic!("serve exited before listening");
    })
    .await
    .expect("serve starts");
    let http = crate::common::browser();
    // The child serves the built-in tables (the config names no override):
    // the substrate check proves it before the scenario.
    let own = turnstile::protocols::TableSet::builtin().unwrap();
    let mut run = Run::start("turnstile serve", &http, &base, &own).await;
    let thread: Value = http
        .post(format!("{base}/v1/threads"))
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let thread = thread["thread_id"].as_str().unwrap();
    let sse = http
        .post(format!("{base}/v1/threads/{thread}/messages"))
        .json(&json!({"text": "show safety issues on floor 3"}))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let frames = read_frames(&sse);
    let grades: Vec<&str> = citations(&frames)
        .iter()
        .map(|c| c.grade.as_str())
        .collect();
    assert_eq!(
        grades,
        [CountGrade::LowerBound.as_str()],
        "{:?}",
        kinds(&frames)
    );
    assert!(is_done(&frames), "{:?}", kinds(&frames));
    let reqs = fake.requests();
    assert_eq!(
        reqs[0].body["model"], FAKE_MODEL,
        "TURNSTILE_MODEL overrides the file"
    );
    assert_eq!(
        reqs[0].authorization.as_deref(),
        Some(format!("Bearer {KEY}").as_str())
    );
    // ctrl-c (SIGINT, sent to this child by its id) stops it cleanly.
    let pid = child.id().expect("running").to_string();
    let interrupted = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .is_ok_and(|s| s.success());
    assert!(interrupted, "could not send SIGINT");
    let status = tokio::time::timeout(Duration::from_secs(15), child.wait())
        .await
        .expect("serve stops on ctrl-c")
        .unwrap();
    assert!(status.success(), "serve exited with {status}");
    let errors = errors.await.unwrap();
    assert!(
        errors.contains("model usage"),
        "trace logs were captured: {errors}"
    );
    assert!(
        !errors.contains(KEY),
        "the API key appears in the server's logs"
    );
    run.pass();
    demo.shutdown().await;
}
