//! A long call made a task by a server written with the official Python SDK
//! (issue 22 §4): `inspect_site` on `py_server.py`, whose tasks extension
//! (`py_tasks.py`) answers a 2026-07-28 call that declared the extension
//! with a task. turnstile follows it by `tasks/get` at the server's
//! interval, shows the server's status messages as progress frames and
//! takes the SDK's inlined result (with its own `resultType`) as the call's.
//! On 2025-11-25 the same tool answers in the call: no task, no progress.
//! A task that fails with a JSON-RPC error is a failed call, never a
//! success; the server's own counters prove one run each.

use super::*;

async fn counts(rig: &Rig) -> Value {
    let client = rig.server.client().await;
    let out = client
        .call("task_counts", Map::new())
        .await
        .expect("task_counts");
    client.close().await;
    serde_json::from_str(out.text().trim()).expect("the counts as JSON")
}

fn progress(frames: &[Frame]) -> Vec<turnstile::wire::Progress> {
    frames
        .iter()
        .filter_map(|f| match f {
            Frame::Progress(p) => Some(p.clone()),
            _ => None,
        })
        .collect()
}

fn result_of(frames: &[Frame], tool: &str) -> turnstile::wire::ToolResult {
    frames
        .iter()
        .find_map(|f| match f {
            Frame::ToolResult(r) if r.tool == tool => Some(r.clone()),
            _ => None,
        })
        .expect("the call's result")
}

fn stateless() -> Extra {
    Extra {
        server_keys: "protocol = \"2026-07-28\"",
        tools: "",
    }
}

#[tokio::test]
#[ignore = "needs the npm/PyPI MCP servers: scripts/test-deps, run with --include-ignored"]
async fn a_python_sdk_task_is_followed_with_its_progress() {
    let rig = Rig::start_with(Kind::PySdk, stateless()).await;
    let frames = rig
        .turn(
            "inspect tower-a",
            &[("inspect_site", json!({"site": "tower-a"}))],
        )
        .await;
    let messages: Vec<String> = progress(&frames)
        .into_iter()
        .filter_map(|p| p.message)
        .collect();
    // The server's own words, each once, in its order (a loaded machine
    // may poll past one 500 ms step, not most).
    let steps = [
        "walking the floors at tower-a (1/3)",
        "checking the scaffolds at tower-a (2/3)",
        "writing up at tower-a (3/3)",
    ];
    let mut rest = steps.iter();
    assert!(
        messages.iter().all(|m| rest.any(|s| s == m)),
        "{messages:?} is not in the order of {steps:?}"
    );
    assert!(messages.len() >= 2, "{messages:?}");
    let result = result_of(&frames, "inspect_site");
    assert!(result.ok, "{}", stable(&frames));
    let c = counts(&rig).await;
    assert_eq!(c["runs"], 1, "{c}");
    assert_eq!(c["cancels"], 0, "{c}");
    // ~1.5 s of work at the server's 300 ms: never more often than it
    // asked (load only makes polls fewer), and more than once.
    let gets = c["gets"].as_u64().unwrap();
    assert!((2..=6).contains(&gets), "{gets} polls: {c}");
    let thread = rig.app.thread_json(&rig.thread).await;
    assert_eq!(thread["tasks"][0]["state"], "Completed", "{thread:#}");
    // Looked for where a model would read it: the task id and the server's
    // status messages are in no request the model got.
    let id = rig.app.store.tasks(&rig.thread).await.unwrap()[0]
        .task_id
        .clone();
    let prompts = rig.fake.requests();
    assert!(!prompts.is_empty());
    for p in &prompts {
        assert!(!p.raw.contains(&id), "the task id reached a prompt");
        assert!(
            !p.raw.contains("walking the floors"),
            "a status message reached a prompt"
        );
    }
    rig.done();
}

#[tokio::test]
#[ignore = "needs the npm/PyPI MCP servers: scripts/test-deps, run with --include-ignored"]
async fn a_python_sdk_task_that_fails_is_a_failed_call() {
    let rig = Rig::start_with(Kind::PySdk, stateless()).await;
    let frames = rig
        .turn(
            "inspect annex",
            &[("inspect_site", json!({"site": "annex", "fail": true}))],
        )
        .await;
    assert!(!progress(&frames).is_empty(), "{}", stable(&frames));
    let result = result_of(&frames, "inspect_site");
    assert!(!result.ok, "{}", stable(&frames));
    assert_eq!(result.summary, "rpc", "{}", stable(&frames));
    let thread = rig.app.thread_json(&rig.thread).await;
    assert_eq!(thread["tasks"][0]["state"], "Failed", "{thread:#}");
    let c = counts(&rig).await;
    assert_eq!(c["runs"], 1, "{c}");
    rig.done();
}

/// Side by side: on 2025-11-25 the SDK lets only a result through
/// `tools/call`, so the same tool answers in the call.
#[tokio::test]
#[ignore = "needs the npm/PyPI MCP servers: scripts/test-deps, run with --include-ignored"]
async fn on_2025_11_25_the_same_tool_answers_in_the_call() {
    let rig = Rig::start(Kind::PySdk).await;
    let frames = rig
        .turn(
            "inspect tower-a",
            &[("inspect_site", json!({"site": "tower-a"}))],
        )
        .await;
    assert!(progress(&frames).is_empty(), "{}", stable(&frames));
    let ok = frames
        .iter()
        .any(|f| matches!(f, Frame::ToolResult(r) if r.tool == "inspect_site" && r.ok));
    assert!(ok, "{}", stable(&frames));
    let c = counts(&rig).await;
    assert_eq!(
        (c["runs"].as_u64(), c["gets"].as_u64()),
        (Some(1), Some(0)),
        "{c}"
    );
    let thread = rig.app.thread_json(&rig.thread).await;
    assert_eq!(thread["tasks"], json!([]), "{thread:#}");
    rig.done();
}
