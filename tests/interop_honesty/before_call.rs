//! Approval of the call itself (issue 17 §3) against the Python SDK server:
//! its annotations, in that SDK's own words, decide nothing on their own.
//! `post_notice` declares `destructiveHint: true`, so each call waits for a
//! human; every call of an untrusted server waits, `add_photo` too; a
//! configured `before-call` holds a read tool and `approval = "none"`
//! exempts a destructive one. Counted on the server: a held call is sent
//! once on approve and never on deny.

use super::*;

fn interrupt_of(frames: &[Frame]) -> Option<turnstile::wire::Interrupt> {
    frames.iter().find_map(|f| match f {
        Frame::Interrupt(i) => Some(i.clone()),
        _ => None,
    })
}

async fn counts(rig: &Rig) -> Value {
    let client = rig.server.client().await;
    let out = client
        .call("reservation_counts", Map::new())
        .await
        .expect("reservation_counts");
    serde_json::from_str(&out.text()).expect("counts as JSON")
}

const NOTICE: (&str, &str) = (
    "post_notice",
    r#"{"floor": 3, "text": "lift out of order"}"#,
);

fn notice() -> [(&'static str, Value); 1] {
    [(NOTICE.0, serde_json::from_str(NOTICE.1).unwrap())]
}

#[tokio::test]
#[ignore = "needs the npm/PyPI MCP servers: scripts/test-deps, run with --include-ignored"]
async fn a_destructive_tool_waits_and_runs_once_on_approve() {
    let rig = Rig::start(Kind::PyText).await;
    let frames = rig.turn("tell floor 3 the lift is out", &notice()).await;
    let interrupt =
        interrupt_of(&frames).unwrap_or_else(|| panic!("no interrupt:\n{}", stable(&frames)));
    // The interrupt shows the exact tool and arguments; nothing was sent.
    assert_eq!(interrupt.tool, "post_notice");
    assert_eq!(
        Value::Object(interrupt.args.clone()),
        json!({"floor": 3, "text": "lift out of order"})
    );
    assert_eq!(interrupt.action.action_id, None);
    // Why it waits, and the tool, are the detail line (issue 33 §5); the
    // question speaks the call's own terms.
    assert!(
        interrupt.detail.contains("destructive") && interrupt.detail.contains("post_notice"),
        "{}",
        interrupt.detail
    );
    assert_eq!(
        interrupt.summary,
        "Approve this action? floor: 3, text: lift out of order"
    );
    assert!(tool_calls(&frames).iter().all(|c| c.tool != "post_notice"));
    assert_eq!(counts(&rig).await["post_notice"], 0, "sent before approval");

    let resumed = rig
        .app
        .resume(&rig.thread, &interrupt.interrupt_id, "approve")
        .await
        .unwrap_or_else(|e| panic!("resume refused: {e:?}"));
    assert!(is_done(&resumed), "{}", stable(&resumed));
    let results = tool_results(&resumed);
    let posted = results
        .iter()
        .find(|r| r.tool == "post_notice")
        .unwrap_or_else(|| panic!("no result:\n{}", stable(&resumed)));
    assert!(posted.ok, "{posted:?}");
    assert_eq!(counts(&rig).await["post_notice"], 1, "one notice");
    let view = rig.app.thread(&rig.thread).await;
    assert_eq!(view.approvals[0].state, "Completed");

    let (status, body) = rig
        .app
        .resume(&rig.thread, &interrupt.interrupt_id, "approve")
        .await
        .unwrap_err();
    assert_eq!(
        (status, &body["row_id"]),
        (409, &json!("second-approve-after-completion"))
    );
    assert_eq!(counts(&rig).await["post_notice"], 1, "still one notice");
    rig.done();
}

#[tokio::test]
#[ignore = "needs the npm/PyPI MCP servers: scripts/test-deps, run with --include-ignored"]
async fn a_denied_call_is_never_sent() {
    let rig = Rig::start(Kind::PyText).await;
    let frames = rig.turn("tell floor 3 the lift is out", &notice()).await;
    let interrupt = interrupt_of(&frames).expect("an interrupt");
    let resumed = rig
        .app
        .resume(&rig.thread, &interrupt.interrupt_id, "deny")
        .await
        .unwrap_or_else(|e| panic!("resume refused: {e:?}"));
    assert!(is_done(&resumed), "{}", stable(&resumed));
    let results = tool_results(&resumed);
    let refused = results
        .iter()
        .find(|r| r.tool == "post_notice")
        .unwrap_or_else(|| panic!("no result:\n{}", stable(&resumed)));
    assert!(!refused.ok);
    assert!(
        refused.summary.contains("approval row `deny-sends-cancel`"),
        "{}",
        refused.summary
    );
    assert_eq!(
        counts(&rig).await["post_notice"],
        0,
        "a denied call was sent"
    );
    let view = rig.app.thread(&rig.thread).await;
    assert_eq!(view.approvals[0].state, "Denied");
    let (status, body) = rig
        .app
        .resume(&rig.thread, &interrupt.interrupt_id, "approve")
        .await
        .unwrap_err();
    assert_eq!(
        (status, &body["row_id"]),
        (409, &json!("approve-after-deny"))
    );
    assert_eq!(counts(&rig).await["post_notice"], 0);
    rig.done();
}

/// An unannotated tool runs at once on a trusted server; on an untrusted
/// one every call waits.
#[tokio::test]
#[ignore = "needs the npm/PyPI MCP servers: scripts/test-deps, run with --include-ignored"]
async fn an_untrusted_servers_unannotated_tool_waits() {
    let add = [(
        "add_photo",
        json!({"floor": 9, "captured_at": "2026-03-01"}),
    )];
    let trusted = Rig::start(Kind::PyText).await;
    let frames = trusted.turn("add a photo on floor 9", &add).await;
    assert!(interrupt_of(&frames).is_none(), "{}", stable(&frames));
    assert!(tool_results(&frames)
        .iter()
        .any(|r| r.tool == "add_photo" && r.ok));
    trusted.done();

    let untrusted = Rig::start_with(
        Kind::PyText,
        Extra {
            server_keys: "trusted = false",
            ..Extra::default()
        },
    )
    .await;
    let frames = untrusted.turn("add a photo on floor 9", &add).await;
    let interrupt =
        interrupt_of(&frames).unwrap_or_else(|| panic!("no interrupt:\n{}", stable(&frames)));
    assert_eq!(interrupt.tool, "add_photo");
    assert!(
        interrupt.detail.contains("untrusted"),
        "{}",
        interrupt.detail
    );
    assert!(tool_results(&frames).iter().all(|r| r.tool != "add_photo"));
    // On an untrusted server every call waits, whatever the tool declares.
    let frames = untrusted
        .turn("tell floor 3 the lift is out", &notice())
        .await;
    let interrupt = interrupt_of(&frames).expect("an untrusted server's tool waits");
    assert!(
        interrupt.detail.contains("untrusted"),
        "{}",
        interrupt.detail
    );
    untrusted.done();
}

/// The configuration decides before any annotation: `before-call` holds a
/// read tool, `approval = "none"` lets a destructive one run.
#[tokio::test]
#[ignore = "needs the npm/PyPI MCP servers: scripts/test-deps, run with --include-ignored"]
async fn the_configuration_decides_first() {
    let rig = Rig::start_with(
        Kind::PyText,
        Extra {
            tools: "[mcp_servers.tools.post_notice]\napproval = \"none\"\n",
            ..Extra::default()
        },
    )
    .await;
    let frames = rig.turn("tell floor 3 the lift is out", &notice()).await;
    assert!(interrupt_of(&frames).is_none(), "{}", stable(&frames));
    assert_eq!(counts(&rig).await["post_notice"], 1);
    rig.done();

    // add_photo, which this trusted server's config would run at once
    // (above), is held by `before-call`.
    let rig = Rig::start_with(
        Kind::PyText,
        Extra {
            tools: "[mcp_servers.tools.add_photo]\napproval = \"before-call\"\n",
            ..Extra::default()
        },
    )
    .await;
    let add = [(
        "add_photo",
        json!({"floor": 9, "captured_at": "2026-03-01"}),
    )];
    let frames = rig.turn("add a photo on floor 9", &add).await;
    let interrupt =
        interrupt_of(&frames).unwrap_or_else(|| panic!("no interrupt:\n{}", stable(&frames)));
    assert!(
        interrupt.detail.contains("configuration"),
        "{}",
        interrupt.detail
    );
    rig.done();
}
