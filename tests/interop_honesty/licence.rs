//! The licence gate (issue 20 §5) against a tool server written with
//! another SDK (the official Python SDK's `py_text_server.py`), configured
//! by `turnstile serve`'s configuration alone: `post_notice` needs the tier
//! `pro` (`tools.post_notice.licence_tier`). An anonymous caller holds the
//! lowest tier: the model (an OpenAI-compatible one, through the real
//! adapter) is never shown the tool, a call of it anyway is refused before
//! it is sent (the server's own counter stays at zero), and no request the
//! model receives holds a word of the permission system. With
//! `licence.anonymous_tiers = ["pro"]` the same call goes through to the
//! approval the tool's destructive annotation asks for.

use super::*;

const PRO_NOTICE: &str = "
[mcp_servers.tools.post_notice]
licence_tier = \"pro\"
";

const PRO_NOTICE_FOR_ALL: &str = "
[mcp_servers.tools.post_notice]
licence_tier = \"pro\"

[licence]
anonymous_tiers = [\"pro\"]
";

async fn notices(rig: &Rig) -> u64 {
    let client = rig.server.client().await;
    let out = client
        .call("reservation_counts", Map::new())
        .await
        .expect("reservation_counts");
    let v: Value = serde_json::from_str(&out.text()).expect("counts as JSON");
    v["post_notice"].as_u64().unwrap_or(0)
}

fn refusal(frames: &[Frame]) -> Option<Value> {
    frames.iter().find_map(|f| match f {
        Frame::ToolResult(r) => r.refusal.clone(),
        _ => None,
    })
}

fn offered(body: &Value) -> Vec<String> {
    (body["tools"].as_array().into_iter().flatten())
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
#[ignore = "needs the npm/PyPI MCP servers: scripts/test-deps, run with --include-ignored"]
async fn a_tool_beyond_the_callers_tier_is_hidden_and_never_sent() {
    let rig = Rig::start_with(
        Kind::PyText,
        Extra {
            tools: PRO_NOTICE,
            ..Extra::default()
        },
    )
    .await;
    let notice = json!({"floor": 3, "text": "lift out of order"});
    let frames = rig
        .turn(
            "tell floor 3 the lift is out",
            &[("post_notice", notice.clone())],
        )
        .await;
    let r = refusal(&frames).unwrap_or_else(|| panic!("no refusal:\n{}", stable(&frames)));
    assert_eq!(r["row_id"], "tier-not-held");
    assert_eq!(notices(&rig).await, 0, "a blocked call reached the server");
    // A partial round: the listing the caller may use is offered, not run.
    let frames = rig
        .turn(
            "find floor 3 photos and tell floor 3 the lift is out",
            &[
                ("find_photos", json!({"floor": 3})),
                ("post_notice", notice),
            ],
        )
        .await;
    let r = refusal(&frames).unwrap_or_else(|| panic!("no refusal:\n{}", stable(&frames)));
    assert_eq!(r["row_id"], "tier-not-held-in-part");
    assert!(
        tool_calls(&frames).iter().all(|c| c.tool != "find_photos"),
        "{}",
        stable(&frames)
    );
    let said = r["message"].as_str().unwrap();
    assert!(
        said.contains("find_photos") && said.contains("Shall I"),
        "{said}"
    );
    assert_eq!(notices(&rig).await, 0);
    // What the model was sent: never the tool, never the vocabulary.
    let requests = rig.fake.requests();
    assert!(!requests.is_empty());
    for req in &requests {
        let tools = offered(&req.body);
        assert!(!tools.iter().any(|t| t == "post_notice"), "{tools:?}");
        assert!(tools.iter().any(|t| t == "find_photos"), "{tools:?}");
        let text = req.body.to_string().to_lowercase();
        for word in [
            "licen",
            "tier",
            "subscri",
            "entitle",
            "permission",
            "premium",
            "upgrade",
        ] {
            assert!(!text.contains(word), "`{word}` in a model request: {text}");
        }
    }
    rig.done();
}

#[tokio::test]
#[ignore = "needs the npm/PyPI MCP servers: scripts/test-deps, run with --include-ignored"]
async fn a_caller_holding_the_tier_reaches_the_tool() {
    let rig = Rig::start_with(
        Kind::PyText,
        Extra {
            tools: PRO_NOTICE_FOR_ALL,
            ..Extra::default()
        },
    )
    .await;
    let frames = rig
        .turn(
            "tell floor 3 the lift is out",
            &[(
                "post_notice",
                json!({"floor": 3, "text": "lift out of order"}),
            )],
        )
        .await;
    assert!(refusal(&frames).is_none(), "{}", stable(&frames));
    // Past the licence gate, the tool's own destructive annotation holds
    // the call for the user's approval; approved, it is sent once.
    let interrupt = frames
        .iter()
        .find_map(|f| match f {
            Frame::Interrupt(i) => Some(i.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no interrupt:\n{}", stable(&frames)));
    assert_eq!(interrupt.tool, "post_notice");
    rig.app
        .resume(&rig.thread, &interrupt.interrupt_id, "approve")
        .await
        .expect("approved");
    assert_eq!(notices(&rig).await, 1);
    rig.done();
}
