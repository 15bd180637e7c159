//! Human approval (issue 17, seed 004) through the real path: HTTP and SSE
//! into a turnstile server, MCP into the demo tool server, whose own
//! per-action counters say how many confirms and cancels it received.

use crate::common;

use std::time::Duration;

use common::frames::{answer, has, is_done, tool_calls, tool_results, FrameKind};
use common::server::TestServer;
use turnstile::agent::Limits;
use turnstile::wire::{Frame, Interrupt};
use turnstile_demo::DemoServer;

const RESERVE: &str = "reserve seat 12 at 15:00";

fn interrupt(frames: &[Frame]) -> Option<&Interrupt> {
    frames.iter().find_map(|f| match f {
        Frame::Interrupt(i) => Some(i),
        _ => None,
    })
}

fn demo(s: &TestServer) -> &DemoServer {
    s.demo
        .as_ref()
        .expect("the test server runs the demo tools")
}

/// Suspends a reservation turn; its interrupt.
async fn reserve(s: &TestServer, thread: &str) -> Interrupt {
    let frames = s.say(thread, RESERVE).await;
    assert!(is_done(&frames), "{frames:?}");
    let i = interrupt(&frames)
        .unwrap_or_else(|| panic!("no interrupt: {frames:?}"))
        .clone();
    // Nothing was confirmed: the stream ended at the card.
    assert!(!tool_calls(&frames)
        .iter()
        .any(|c| c.tool == "confirm_action"));
    i
}

async fn approval_state(s: &TestServer, thread: &str, id: &str) -> String {
    let view = s.thread(thread).await;
    view.approvals
        .iter()
        .find(|a| a.interrupt_id == id)
        .map(|a| a.state.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn approve_runs_one_confirm_then_the_status_says_completed() {
    let s = TestServer::builder().start().await;
    let thread = s.new_thread().await;
    let i = reserve(&s, &thread).await;
    assert_eq!(i.tool, "confirm_action");
    assert_eq!(i.action.tool, "prepare_seat_reservation");
    assert_eq!(i.args["actionId"], 1);
    assert_eq!(i.choices, ["approve", "deny"]);
    assert!(i.expires_at > turnstile::store::now_unix_ms());
    assert_eq!(
        approval_state(&s, &thread, &i.interrupt_id).await,
        "Awaiting"
    );

    let frames = s.resume(&thread, &i.interrupt_id, "approve").await.unwrap();
    assert!(is_done(&frames), "{frames:?}");
    let calls: Vec<&str> = tool_calls(&frames)
        .iter()
        .map(|c| c.tool.as_str())
        .collect();
    assert_eq!(calls[0], "confirm_action", "{calls:?}");
    assert!(calls[1..].iter().all(|c| *c == "get_action"), "{calls:?}");
    // The exact previewed arguments, with the interrupt id as the
    // idempotency key.
    assert_eq!(tool_calls(&frames)[0].args, i.args);
    assert_eq!(i.args["idempotencyKey"], i.interrupt_id.as_str());
    assert_eq!(demo(&s).action_counts(1).confirms, 1);
    assert_eq!(demo(&s).action_status(1).as_deref(), Some("COMPLETED"));
    assert_eq!(
        approval_state(&s, &thread, &i.interrupt_id).await,
        "Completed"
    );
    assert!(answer(&frames).contains("done"), "{}", answer(&frames));

    // A second approve is refused by name, and the backend sees no second
    // confirm.
    let (status, body) = s
        .resume(&thread, &i.interrupt_id, "approve")
        .await
        .unwrap_err();
    assert_eq!(status, 409);
    assert_eq!(body["table"], "approval");
    assert_eq!(body["row_id"], "second-approve-after-completion");
    assert_eq!(demo(&s).action_counts(1).confirms, 1);
    s.pass();
}

/// Issue 33 §5: the card asks about what was prepared, in the user's terms
/// and language ("Reserve seat 12 at 15:00?", the demo's configured
/// wording), and carries the prepare's human fields; the tool names are
/// the detail line. A reload shows the same card. Without a configured
/// wording the default asks in the same terms, never in tool names.
#[tokio::test]
async fn the_card_asks_in_the_users_terms_and_carries_what_was_prepared() {
    let s = TestServer::builder().start().await;
    let thread = s.new_thread().await;
    let i = reserve(&s, &thread).await;
    assert_eq!(i.summary, "Reserve seat 12 at 15:00?");
    assert_eq!(
        serde_json::Value::Object(i.action.prepared.clone()),
        serde_json::json!({"seat": "12", "time": "15:00"}),
        "the prepare's human fields, without its status or action id"
    );
    for tool in [
        "prepare_seat_reservation",
        "confirm_action",
        "cancel_action",
    ] {
        assert!(!i.summary.contains(tool), "{}", i.summary);
        assert!(i.detail.contains(tool), "{}", i.detail);
    }
    assert!(i.detail.contains("#1"), "{}", i.detail);
    // The stored thread shows the card as it was sent.
    let view = s.thread(&thread).await;
    let stored = view
        .messages
        .iter()
        .find_map(|m| match &m.body {
            common::thread::Record::Interrupt(stored) => Some(stored.clone()),
            _ => None,
        })
        .expect("the interrupt is stored");
    assert_eq!(stored, i);

    // In Korean, the Korean wording.
    let ko = s.new_thread().await;
    let frames = s.say(&ko, "12번 좌석 15시 예약해줘").await;
    let k = interrupt(&frames)
        .unwrap_or_else(|| panic!("no interrupt: {frames:?}"))
        .clone();
    assert_eq!(k.summary, "12번 좌석을 15:00에 예약할까요?");
    assert!(k.detail.contains("승인하면"), "{}", k.detail);
    s.pass();

    // No wording configured: the default lists the same fields.
    let plain = TestServer::builder()
        .cards(Default::default())
        .start()
        .await;
    let thread = plain.new_thread().await;
    let i = reserve(&plain, &thread).await;
    assert_eq!(i.summary, "Approve this action? seat: 12, time: 15:00");
    plain.pass();
}

#[tokio::test]
async fn deny_cancels_the_backend_action_and_a_later_turn_does_not_resurrect_it() {
    let s = TestServer::builder().start().await;
    let thread = s.new_thread().await;
    let i = reserve(&s, &thread).await;
    let frames = s.resume(&thread, &i.interrupt_id, "deny").await.unwrap();
    assert!(is_done(&frames), "{frames:?}");
    assert_eq!(tool_calls(&frames)[0].tool, "cancel_action");
    assert_eq!(demo(&s).action_counts(1).cancels, 1);
    assert_eq!(demo(&s).action_counts(1).confirms, 0);
    assert_eq!(demo(&s).action_status(1).as_deref(), Some("CANCELLED"));
    assert!(answer(&frames).contains("cancelled"), "{}", answer(&frames));

    // A later "reserve" turn prepares a new action; the denied one stays
    // denied and can never be approved.
    let again = reserve(&s, &thread).await;
    assert_ne!(again.interrupt_id, i.interrupt_id);
    assert_eq!(again.args["actionId"], 2);
    let (status, body) = s
        .resume(&thread, &i.interrupt_id, "approve")
        .await
        .unwrap_err();
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["row_id"], "approve-after-deny");
    assert_eq!(demo(&s).action_counts(1).confirms, 0);
    s.pass();
}

/// The seed's audit case: after a deny, a plain lookup turn finds no
/// approvable action and shows no card.
#[tokio::test]
async fn after_a_deny_a_plain_lookup_shows_no_approval_card() {
    let s = TestServer::builder().start().await;
    let thread = s.new_thread().await;
    let i = reserve(&s, &thread).await;
    s.resume(&thread, &i.interrupt_id, "deny").await.unwrap();
    let frames = s.say(&thread, "show safety issues on floor 3").await;
    assert!(is_done(&frames), "{frames:?}");
    assert!(!has(&frames, FrameKind::Interrupt), "{frames:?}");
    s.pass();
}

/// A new user turn while an interrupt is pending supersedes it: it is
/// withdrawn (nobody denied it), its action cancelled once, and it cannot
/// be approved afterwards. The thread records the withdrawal and its
/// cancel with the new message, and code tells it first (issue 34 §6).
#[tokio::test]
async fn a_new_turn_supersedes_a_pending_interrupt() {
    let s = TestServer::builder().start().await;
    let thread = s.new_thread().await;
    let i = reserve(&s, &thread).await;
    let frames = s.say(&thread, "show safety issues on floor 3").await;
    assert!(!has(&frames, FrameKind::Interrupt));
    assert_eq!(
        approval_state(&s, &thread, &i.interrupt_id).await,
        "Withdrawn"
    );
    assert_eq!(demo(&s).action_counts(1).cancels, 1);
    let text = answer(&frames);
    assert!(
        text.starts_with("Your new message withdrew the request that was waiting for your approval; it was cancelled and never confirmed."),
        "{text}"
    );
    // The thread says why the card went away: the withdrawal and its
    // cancel, stored with the message that withdrew it.
    let bodies = s.bodies(&thread).await;
    let user = bodies
        .iter()
        .rposition(|b| b["kind"] == "user")
        .expect("the new message");
    let withdrawn = bodies
        .iter()
        .position(|b| b["kind"] == "withdrawn")
        .unwrap_or_else(|| panic!("no withdrawn record: {bodies:?}"));
    assert_eq!(withdrawn, user + 1, "{bodies:?}");
    let w = &bodies[withdrawn];
    assert_eq!(w["interrupt_id"], i.interrupt_id.as_str());
    assert_eq!(w["tool"], "prepare_seat_reservation");
    assert_eq!(w["state"], "Withdrawn");
    assert_eq!(w["cancel"]["outcome"], "cancelled");
    assert_eq!(w["cancel"]["tool"], "cancel_action");
    let (status, body) = s
        .resume(&thread, &i.interrupt_id, "approve")
        .await
        .unwrap_err();
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["row_id"], "approve-after-withdrawal");
    assert_eq!(demo(&s).action_counts(1).confirms, 0);
    s.pass();
}

/// Starts a reservation turn until the tool server answers it (a server
/// restarted a moment ago may not be reachable yet); its interrupt.
async fn reserve_until(s: &TestServer, text: &str) -> (String, Interrupt) {
    for _ in 0..40 {
        let thread = s.new_thread().await;
        let frames = s.say(&thread, text).await;
        if let Some(i) = interrupt(&frames) {
            return (thread, i.clone());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("no interrupt for {text:?} within 10 s");
}

/// Issue 34 §7: the tool server restarts and numbers its actions from 1
/// again; another thread's reservation gets number 1. The approve of the
/// first thread's card, prepared before the restart, must not confirm it:
/// the status tool, asked first, names another seat, so the approve is
/// refused by `approve-of-changed-action` and nothing is sent, neither the
/// confirm nor a cancel. The other thread's own approve still confirms its
/// action once.
#[tokio::test]
async fn an_approve_after_the_server_renumbered_its_actions_confirms_nothing() {
    let mut s = TestServer::builder().start().await;
    let a = s.new_thread().await;
    let i = reserve(&s, &a).await;
    assert_eq!(i.args["actionId"], 1);
    let before = s.demo.take().expect("the demo tool server");
    let addr = before.addr();
    before.shutdown().await;
    let after = DemoServer::start(addr, Default::default())
        .await
        .expect("the tool server starts again on its address");
    s.demo = Some(after);
    let (b, j) = reserve_until(&s, "reserve seat 7 at 10:00").await;
    assert_eq!(
        j.args["actionId"], 1,
        "the restarted server reused the number"
    );

    let (status, body) = s.resume(&a, &i.interrupt_id, "approve").await.unwrap_err();
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["row_id"], "approve-of-changed-action", "{body}");
    assert_eq!(body["table"], "approval", "{body}");
    let error = body["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("`seat`") && error.contains("nothing was sent"),
        "{error}"
    );
    let counts = demo(&s).action_counts(1);
    assert_eq!((counts.confirms, counts.cancels), (0, 0));
    assert_eq!(demo(&s).action_status(1).as_deref(), Some("PENDING"));
    assert_eq!(approval_state(&s, &a, &i.interrupt_id).await, "Voided");
    // Voided for good: a second approve, or a deny, sends nothing either.
    for (decision, row) in [
        ("approve", "approve-after-void"),
        ("deny", "deny-after-void"),
    ] {
        let (status, body) = s.resume(&a, &i.interrupt_id, decision).await.unwrap_err();
        assert_eq!(
            (status, body["row_id"].as_str()),
            (409, Some(row)),
            "{body}"
        );
    }
    let counts = demo(&s).action_counts(1);
    assert_eq!((counts.confirms, counts.cancels), (0, 0));

    let frames = s.resume(&b, &j.interrupt_id, "approve").await.unwrap();
    assert!(is_done(&frames), "{frames:?}");
    assert_eq!(demo(&s).action_counts(1).confirms, 1);
    s.pass();
}

/// `--fault lying-model`: the model plans prepare and confirm in one step.
/// The confirm is refused by the approval table and never sent.
#[tokio::test]
async fn a_model_that_confirms_by_itself_sends_nothing() {
    let model = std::sync::Arc::new(turnstile_demo::lying::Lying::new(
        turnstile_demo::Scripted::demo(),
    ));
    let s = TestServer::builder().model(model).start().await;
    let thread = s.new_thread().await;
    let frames = s.say(&thread, RESERVE).await;
    let refused = tool_results(&frames)
        .into_iter()
        .find(|r| r.tool == "confirm_action")
        .unwrap_or_else(|| panic!("the model's confirm is shown refused: {frames:?}"));
    assert!(!refused.ok);
    assert!(
        refused.summary.contains("prepare-and-confirm-in-one-step"),
        "{}",
        refused.summary
    );
    // Counted on the tool server: no confirm arrived, for any action.
    assert_eq!(demo(&s).action_counts(1).confirms, 0);
    // The prepare still suspends the turn for the human.
    assert!(interrupt(&frames).is_some(), "{frames:?}");
    s.pass();
}

#[tokio::test]
async fn two_concurrent_approves_send_one_confirm() {
    let s = TestServer::builder().start().await;
    let thread = s.new_thread().await;
    let i = reserve(&s, &thread).await;
    let (a, b) = tokio::join!(
        s.resume(&thread, &i.interrupt_id, "approve"),
        s.resume(&thread, &i.interrupt_id, "approve")
    );
    let oks = [&a, &b].iter().filter(|r| r.is_ok()).count();
    assert_eq!(oks, 1, "{a:?} {b:?}");
    let (status, _) = [a, b].into_iter().find_map(Result::err).unwrap();
    assert_eq!(status, 409);
    assert_eq!(demo(&s).action_counts(1).confirms, 1);
    s.pass();
}

#[tokio::test]
async fn an_unknown_or_another_threads_interrupt_is_never_confirmed() {
    let s = TestServer::builder().start().await;
    let thread = s.new_thread().await;
    let other = s.new_thread().await;
    let i = reserve(&s, &thread).await;
    let (status, body) = s
        .resume(&thread, "no-such-interrupt", "approve")
        .await
        .unwrap_err();
    assert_eq!(
        (status, body["row_id"].as_str()),
        (404, Some("approve-without-pending-interrupt"))
    );
    let (status, _) = s
        .resume(&other, &i.interrupt_id, "approve")
        .await
        .unwrap_err();
    assert_eq!(status, 404);
    let (status, _) = s
        .post_raw(
            &format!("/v1/threads/{thread}/resume"),
            r#"{"interrupt_id": "x", "decision": "maybe"}"#,
        )
        .await;
    assert_eq!(status, 400);
    assert_eq!(demo(&s).action_counts(1).confirms, 0);
    // Still pending, and still approvable by its own thread.
    assert!(s.resume(&thread, &i.interrupt_id, "approve").await.is_ok());
    assert_eq!(demo(&s).action_counts(1).confirms, 1);
    s.pass();
}

#[tokio::test]
async fn an_expired_interrupt_is_cancelled_and_cannot_be_approved() {
    let limits = Limits {
        approval_ttl: Duration::from_millis(300),
        ..Limits::default()
    };
    let s = TestServer::builder().limits(limits).start().await;
    let thread = s.new_thread().await;
    let i = reserve(&s, &thread).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, body) = s
        .resume(&thread, &i.interrupt_id, "approve")
        .await
        .unwrap_err();
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["row_id"], "approve-after-expiry");
    assert_eq!(demo(&s).action_counts(1).cancels, 1);
    assert_eq!(demo(&s).action_counts(1).confirms, 0);
    assert_eq!(
        approval_state(&s, &thread, &i.interrupt_id).await,
        "Expired"
    );
    s.pass();
}

#[tokio::test]
async fn a_noop_prepare_shows_no_card() {
    let s = TestServer::builder().start().await;
    let thread = s.new_thread().await;
    let frames = s.say(&thread, "reserve seat 99 at 15:00").await;
    assert!(is_done(&frames), "{frames:?}");
    assert!(!has(&frames, FrameKind::Interrupt), "{frames:?}");
    assert!(
        answer(&frames).contains("Nothing was prepared"),
        "{}",
        answer(&frames)
    );
    assert!(s.thread(&thread).await.approvals.is_empty());
    s.pass();
}

/// Issue 34 (newcomer): a seat someone holds already. Two reservations of
/// it are pending; both are approved; the backend's worker fails the
/// second with "seat taken", and the user reads that reason in code's
/// words, not only that it failed. A third prepare of the seat, once it is
/// reserved, is refused by the desk itself: no card, and the reason told.
#[tokio::test]
async fn a_taken_seat_is_told_with_the_servers_reason() {
    let s = TestServer::builder().start().await;
    let (t1, t2) = (s.new_thread().await, s.new_thread().await);
    let i1 = reserve(&s, &t1).await;
    let i2 = reserve(&s, &t2).await;
    let first = s.resume(&t1, &i1.interrupt_id, "approve").await.unwrap();
    assert!(
        answer(&first).starts_with("You approved it, and it is done."),
        "{}",
        answer(&first)
    );
    let second = s.resume(&t2, &i2.interrupt_id, "approve").await.unwrap();
    let text = answer(&second);
    assert!(
        text.starts_with("You approved it, but it failed, so it was not done. The server gave this reason: \u{201c}seat taken\u{201d}."),
        "{text}"
    );
    assert_eq!(approval_state(&s, &t2, &i2.interrupt_id).await, "Failed");

    let t3 = s.new_thread().await;
    let frames = s.say(&t3, RESERVE).await;
    assert!(is_done(&frames), "{frames:?}");
    assert!(!has(&frames, FrameKind::Interrupt), "{frames:?}");
    let text = answer(&frames);
    assert!(
        text.starts_with("Nothing was prepared, so there is nothing to approve. The server gave this reason: \u{201c}seat taken\u{201d}."),
        "{text}"
    );
    s.pass();
}

/// The interrupt outlives the process: a server restarted on the same
/// database (and the same tool server) resumes it, once.
#[tokio::test]
async fn an_interrupt_pending_across_a_restart_is_approved_once() {
    let tools = DemoServer::start("127.0.0.1:0".parse().unwrap(), Default::default())
        .await
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let db = common::server::sqlite_in(tmp.path(), "restart.db");
    let first = TestServer::builder()
        .database(db.clone())
        .servers(vec![turnstile::mcp::ServerSpec::http(
            "demo",
            tools.url.clone(),
        )])
        .start()
        .await;
    let thread = first.new_thread().await;
    let frames = first.say(&thread, RESERVE).await;
    let i = interrupt(&frames).expect("an interrupt").clone();
    first.pass_and_stop().await;

    let second = TestServer::builder()
        .database(db)
        .servers(vec![turnstile::mcp::ServerSpec::http(
            "demo",
            tools.url.clone(),
        )])
        .start()
        .await;
    let frames = second
        .resume(&thread, &i.interrupt_id, "approve")
        .await
        .unwrap();
    assert!(is_done(&frames), "{frames:?}");
    assert_eq!(tools.action_counts(1).confirms, 1);
    let (status, _) = second
        .resume(&thread, &i.interrupt_id, "approve")
        .await
        .unwrap_err();
    assert_eq!(status, 409);
    assert_eq!(tools.action_counts(1).confirms, 1);
    second.pass_and_stop().await;
    tools.shutdown().await;
}

/// The state a process killed between approve and the confirm's answer
/// leaves: the approval swapped to `Confirming` (the confirm intent) and the
/// confirm delivered to the backend, with no answer stored.
async fn crash_after_confirm_sent(s: &TestServer, tools: &DemoServer, i: &Interrupt) {
    let stored = s.store.approval(&i.interrupt_id).await.unwrap().unwrap();
    let approval = s
        .tables()
        .bound::<turnstile::protocols::approval::Approval>()
        .unwrap();
    let snap = serde_json::from_value(stored.machine.clone()).unwrap();
    let mut m = approval.restore(&snap).unwrap();
    m.fire(turnstile::protocols::approval::ApprovalEvent::Approve)
        .unwrap();
    let snap = serde_json::to_value(m.snapshot()).unwrap();
    assert!(s
        .store
        .swap_approval(&i.interrupt_id, "Awaiting", "Confirming", &snap)
        .await
        .unwrap());
    let client = turnstile::mcp::ToolClient::connect(&turnstile::mcp::ServerSpec::http(
        "demo",
        tools.url.clone(),
    ))
    .await
    .unwrap();
    let out = client.call("confirm_action", i.args.clone()).await.unwrap();
    assert!(!out.is_error);
}

async fn state_becomes(s: &TestServer, thread: &str, id: &str, want: &str) -> String {
    let mut state = String::new();
    for _ in 0..60 {
        state = approval_state(s, thread, id).await;
        if state == want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    state
}

/// Killed between approve and the confirm's answer: the restarted server
/// asks the status tool and settles the action; the confirm is not re-sent.
/// Without a status tool, the action is "outcome unknown", never re-sent.
#[tokio::test]
async fn a_confirm_in_flight_at_a_restart_is_asked_about_never_resent() {
    for with_status in [true, false] {
        let tools = DemoServer::start("127.0.0.1:0".parse().unwrap(), Default::default())
            .await
            .unwrap();
        let spec = turnstile::mcp::ServerSpec::http("demo", tools.url.clone());
        let mut roles = turnstile::judge::approval::Roles::default();
        roles.prepare(
            "prepare_seat_reservation",
            turnstile::judge::approval::Prepare {
                action_id: "actionId".into(),
                confirm: "confirm_action".into(),
                cancel: "cancel_action".into(),
                status: with_status.then(|| "get_action".into()),
            },
        );
        let tmp = tempfile::tempdir().unwrap();
        let db = common::server::sqlite_in(tmp.path(), "inflight.db");
        let first = TestServer::builder()
            .database(db.clone())
            .servers(vec![spec.clone()])
            .roles(roles.clone())
            .start()
            .await;
        let thread = first.new_thread().await;
        let frames = first.say(&thread, RESERVE).await;
        let i = interrupt(&frames).expect("an interrupt").clone();
        crash_after_confirm_sent(&first, &tools, &i).await;
        first.pass_and_stop().await;

        let second = TestServer::builder()
            .database(db)
            .servers(vec![spec])
            .roles(roles)
            .start()
            .await;
        let want = if with_status { "Completed" } else { "Unknown" };
        let got = state_becomes(&second, &thread, &i.interrupt_id, want).await;
        assert_eq!(got, want, "with a status tool: {with_status}");
        assert_eq!(tools.action_counts(1).confirms, 1, "never re-sent");
        // And no decision sends it again.
        let (status, body) = second
            .resume(&thread, &i.interrupt_id, "approve")
            .await
            .unwrap_err();
        assert_eq!(status, 409, "{body}");
        assert_eq!(tools.action_counts(1).confirms, 1);
        second.pass_and_stop().await;
        tools.shutdown().await;
    }
}

/// Two servers sharing PostgreSQL (each its own pool, agent and lease
/// claims): the interrupt raised on one is approved on the other, and of
/// two approves sent to both at once exactly one sends the confirm.
#[tokio::test]
#[ignore = "needs PostgreSQL: set TURNSTILE_TEST_DATABASE_URL, run with --include-ignored"]
async fn an_interrupt_raised_on_one_server_is_approved_once_on_another_over_postgres() {
    let url = common::needs::postgres();
    let tools = DemoServer::start("127.0.0.1:0".parse().unwrap(), Default::default())
        .await
        .unwrap();
    let spec = turnstile::mcp::ServerSpec::http("demo", tools.url.clone());
    let a = TestServer::builder()
        .database(url.clone())
        .servers(vec![spec.clone()])
        .start()
        .await;
    let b = TestServer::builder()
        .database(url)
        .servers(vec![spec])
        .start()
        .await;
    let thread = a.new_thread().await;
    let frames = a.say(&thread, RESERVE).await;
    let i = interrupt(&frames).expect("an interrupt").clone();
    let id = i.args["actionId"].as_u64().unwrap();
    let (x, y) = tokio::join!(
        a.resume(&thread, &i.interrupt_id, "approve"),
        b.resume(&thread, &i.interrupt_id, "approve")
    );
    assert_eq!(
        [&x, &y].iter().filter(|r| r.is_ok()).count(),
        1,
        "{x:?} {y:?}"
    );
    assert_eq!(
        [x, y].into_iter().find_map(Result::err).map(|e| e.0),
        Some(409)
    );
    assert_eq!(tools.action_counts(id).confirms, 1);
    // The thread, read on either server, shows it decided.
    let state = state_becomes(&b, &thread, &i.interrupt_id, "Completed").await;
    assert_eq!(state, "Completed");
    a.pass_and_stop().await;
    b.pass_and_stop().await;
    tools.shutdown().await;
}

/// The compare-and-swap itself, without the thread's lease in front of it:
/// eight decisions race on one interrupt through `Agent::decide` on a
/// second agent sharing the database. Exactly one wins; every other is
/// refused by a named row of the approval table, and nothing is sent by a
/// decision alone.
#[tokio::test]
async fn racing_decisions_are_settled_by_the_swap_alone() {
    let s = TestServer::builder().start().await;
    let thread = s.new_thread().await;
    let i = reserve(&s, &thread).await;
    let tools = demo(&s);
    let state = turnstile::app::build(turnstile::app::AppConfig {
        database_url: &s.db_url,
        servers: vec![turnstile::mcp::ServerSpec::http("demo", tools.url.clone())],
        model: std::sync::Arc::new(turnstile_demo::Scripted::demo()),
        limits: Limits::default(),
        turn_lease: Duration::from_secs(30),
        tables_dir: None,
        contracts: turnstile_demo::contracts(),
        roles: turnstile_demo::roles(),
        terminals: turnstile_demo::terminals(&tools.url),
        cards: turnstile_demo::cards(),
        instructions: turnstile_demo::instructions(),
        auth: Default::default(),
        licences: turnstile::judge::tiers::LicenceMap::open(),
        guardrails: Default::default(),
        connections: None,
    })
    .await
    .expect("a second agent on the same database");
    let agent = state.agent.clone();
    let racers = (0..8).map(|n| {
        let agent = agent.clone();
        let (thread, id) = (thread.clone(), i.interrupt_id.clone());
        tokio::spawn(async move {
            let d = match n % 2 == 0 {
                true => turnstile::agent::UserDecision::Approve,
                false => turnstile::agent::UserDecision::Deny,
            };
            agent.decide(&thread, &id, d).await
        })
    });
    let results = futures::future::join_all(racers).await;
    let mut won = 0;
    for r in results {
        match r.expect("the task runs") {
            Ok(d) => {
                won += 1;
                assert!(["approve", "deny"].contains(&d.decision));
            }
            Err(turnstile::agent::DecideError::Refused { row_id, .. }) => assert!(
                [
                    "second-approve",
                    "deny-after-approve",
                    "approve-after-deny",
                    "second-deny"
                ]
                .contains(&row_id.as_str()),
                "refused by {row_id}"
            ),
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(won, 1, "exactly one decision wins the swap");
    let stored = approval_state(&s, &thread, &i.interrupt_id).await;
    assert!(
        ["Confirming", "Denied"].contains(&stored.as_str()),
        "{stored}"
    );
    // Deciding sends nothing by itself; only the resumed turn (or, for a
    // deny decided directly, nobody here) sends the confirm or the cancel.
    assert_eq!(tools.action_counts(1).confirms, 0);
    assert_eq!(tools.action_counts(1).cancels, 0);
    state.store.close().await;
    s.pass_and_stop().await;
}

/// A call held for approval of itself, through HTTP/SSE and the demo tool
/// server, counted there: `confirm_lms_material_export` is `before-call`
/// in the demo's roles. A model (speaking the OpenAI format) plans it; it
/// is sent once on approve, and never on deny, on a new message, or after
/// its interrupt expired.
#[tokio::test]
async fn a_held_call_is_sent_once_on_approve_and_never_otherwise() {
    use common::fake_openai::{Action, FakeOpenAi, Role};
    let fake = FakeOpenAi::start().await;
    let limits = Limits {
        approval_ttl: Duration::from_millis(1500),
        ..Limits::default()
    };
    let s = TestServer::builder()
        .model(fake.model())
        .limits(limits)
        .roles(held_export_confirm())
        .terminals(Default::default())
        .start()
        .await;
    let exports = demo(&s).exports().clone();
    let held = |export: &str| {
        let args = serde_json::json!({ "exportId": export }).to_string();
        fake.on(
            Role::Planner,
            Action::ToolCalls(vec![("confirm_lms_material_export".into(), args)]),
        );
    };
    let hold = |thread: String| {
        let s = &s;
        async move {
            let frames = s.say(&thread, "download all my lecture files").await;
            assert!(is_done(&frames), "{frames:?}");
            let i = interrupt(&frames)
                .unwrap_or_else(|| panic!("no interrupt: {frames:?}"))
                .clone();
            assert_eq!(i.tool, "confirm_lms_material_export");
            assert_eq!(i.action.action_id, None);
            assert!(!tool_calls(&frames)
                .iter()
                .any(|c| c.tool == "confirm_lms_material_export"));
            i
        }
    };

    // Approve: sent once, its own result shown; a second approve refused.
    let e1 = exports.preview().export_id;
    held(&e1);
    let t1 = s.new_thread().await;
    let i1 = hold(t1.clone()).await;
    assert_eq!(exports.confirms(&e1), 0, "sent before approval");
    let frames = s.resume(&t1, &i1.interrupt_id, "approve").await.unwrap();
    assert!(is_done(&frames), "{frames:?}");
    assert!(tool_results(&frames)
        .iter()
        .any(|r| r.tool == "confirm_lms_material_export" && r.ok));
    assert_eq!(exports.confirms(&e1), 1);
    assert_eq!(approval_state(&s, &t1, &i1.interrupt_id).await, "Completed");
    let (status, _) = s
        .resume(&t1, &i1.interrupt_id, "approve")
        .await
        .unwrap_err();
    assert_eq!(status, 409);

    // Deny: never sent; the model is shown a result naming the row.
    let e2 = exports.preview().export_id;
    held(&e2);
    let t2 = s.new_thread().await;
    let i2 = hold(t2.clone()).await;
    let frames = s.resume(&t2, &i2.interrupt_id, "deny").await.unwrap();
    assert!(is_done(&frames), "{frames:?}");
    let refused: Vec<_> = tool_results(&frames)
        .into_iter()
        .filter(|r| r.tool == "confirm_lms_material_export")
        .collect();
    assert!(
        refused.len() == 1 && !refused[0].ok && refused[0].summary.contains("deny-sends-cancel"),
        "{refused:?}"
    );
    assert_eq!(approval_state(&s, &t2, &i2.interrupt_id).await, "Denied");

    // A new message supersedes it: never sent, never approvable.
    let e3 = exports.preview().export_id;
    held(&e3);
    let t3 = s.new_thread().await;
    let i3 = hold(t3.clone()).await;
    let frames = s.say(&t3, "never mind").await;
    assert!(is_done(&frames), "{frames:?}");
    assert_eq!(approval_state(&s, &t3, &i3.interrupt_id).await, "Withdrawn");
    let (status, _) = s
        .resume(&t3, &i3.interrupt_id, "approve")
        .await
        .unwrap_err();
    assert_eq!(status, 409);

    // Expired: never sent, approve refused.
    let e4 = exports.preview().export_id;
    held(&e4);
    let t4 = s.new_thread().await;
    let i4 = hold(t4.clone()).await;
    tokio::time::sleep(Duration::from_millis(1700)).await;
    let (status, body) = s
        .resume(&t4, &i4.interrupt_id, "approve")
        .await
        .unwrap_err();
    assert_eq!(
        (status, &body["row_id"]),
        (409, &serde_json::json!("approve-after-expiry"))
    );

    for e in [&e2, &e3, &e4] {
        assert_eq!(exports.confirms(e), 0, "{e} was sent");
    }
    assert_eq!(exports.confirms(&e1), 1);
    s.pass_and_stop().await;
}

/// Which calls wait is the approval policy table, `tables/hold.ron`
/// (issue 36), not code: a deployment whose reviewed table sends
/// `before-call` tools at once gets no interrupt, and one that forbids the
/// row refuses the call by that row, unsent. Through HTTP/SSE and the demo
/// tool server, counted there.
#[tokio::test]
async fn the_hold_table_decides_which_calls_wait() {
    use common::fake_openai::{Action, FakeOpenAi, Role};
    let shipped = turnstile::protocols::BUILTIN
        .iter()
        .find(|(name, _, _)| *name == "hold")
        .map(|(_, _, src)| *src)
        .unwrap();
    let row = r#"Legal(id: "configured-before-call", from: "Proposed", on: "configured_before_call", to: "Held", effect: "hold-configured"),"#;
    assert!(
        shipped.contains(row),
        "the shipped row is written as expected"
    );
    let edits = [
        r#"Legal(id: "configured-before-call", from: "Proposed", on: "configured_before_call", to: "Sent", effect: "send"),"#,
        r#"Forbidden(id: "configured-before-call", from: "Proposed", on: "configured_before_call", why: "This deployment never sends a tool configured before-call."),"#,
    ];
    for (sent, edit) in [(true, edits[0]), (false, edits[1])] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("hold.ron"), shipped.replace(row, edit)).unwrap();
        let fake = FakeOpenAi::start().await;
        let s = TestServer::builder()
            .model(fake.model())
            .roles(held_export_confirm())
            .terminals(Default::default())
            .tables_dir(dir.path())
            .start()
            .await;
        let exports = demo(&s).exports().clone();
        let e = exports.preview().export_id;
        let args = serde_json::json!({ "exportId": e }).to_string();
        fake.on(
            Role::Planner,
            Action::ToolCalls(vec![("confirm_lms_material_export".into(), args)]),
        );
        let t = s.new_thread().await;
        let frames = s.say(&t, "download all my lecture files").await;
        assert!(is_done(&frames), "{frames:?}");
        assert!(interrupt(&frames).is_none(), "held: {frames:?}");
        let results: Vec<_> = tool_results(&frames)
            .into_iter()
            .filter(|r| r.tool == "confirm_lms_material_export")
            .collect();
        assert_eq!(results.len(), 1, "{frames:?}");
        if sent {
            assert!(results[0].ok, "{results:?}");
            assert_eq!(exports.confirms(&e), 1);
        } else {
            assert!(!results[0].ok, "{results:?}");
            // Refused, not failed: the summary names the table and the row.
            assert!(
                results[0]
                    .summary
                    .starts_with("not run (hold row `configured-before-call`)"),
                "{results:?}"
            );
            assert_eq!(exports.confirms(&e), 0, "a refused call was sent");
        }
        s.pass_and_stop().await;
    }
}

/// The demo's roles, with its export confirm configured `approval =
/// "before-call"` instead of as a terminal flow: a tool that mutates,
/// held for approval of each exact call.
fn held_export_confirm() -> turnstile::judge::approval::Roles {
    let mut r = turnstile_demo::roles();
    r.insert(
        "confirm_lms_material_export",
        turnstile::judge::approval::ToolRole::BeforeCall,
    );
    r
}

/// One action is held at a time: while an approved reservation is still
/// settling (its worker has not finished), a call that needs approval of
/// itself is refused by the table's `second-hold-while-accepted` row and
/// never sent; nothing replaces the action being settled.
#[tokio::test]
async fn a_second_hold_while_an_action_settles_is_refused_not_sent() {
    use common::fake_openai::{Action, FakeOpenAi, Role};
    let fake = FakeOpenAi::start().await;
    let options = turnstile_demo::DemoOptions {
        action_worker_delay: Duration::from_secs(30),
        ..Default::default()
    };
    let tools = DemoServer::start("127.0.0.1:0".parse().unwrap(), options)
        .await
        .unwrap();
    let export = tools.exports().preview().export_id;
    let s = TestServer::builder()
        .model(fake.model())
        .demo(tools)
        .roles(held_export_confirm())
        .terminals(Default::default())
        .start()
        .await;
    let seat = serde_json::json!({"seat": "12", "time": "15:00"}).to_string();
    let confirm = serde_json::json!({ "exportId": export }).to_string();
    fake.on(
        Role::Planner,
        Action::ToolCalls(vec![("prepare_seat_reservation".into(), seat)]),
    );
    fake.on(
        Role::Planner,
        Action::ToolCalls(vec![("confirm_lms_material_export".into(), confirm)]),
    );
    let thread = s.new_thread().await;
    let i = reserve(&s, &thread).await;
    let frames = s.resume(&thread, &i.interrupt_id, "approve").await.unwrap();
    assert!(is_done(&frames), "{frames:?}");
    assert!(interrupt(&frames).is_none(), "a second card: {frames:?}");
    let refused = tool_results(&frames)
        .into_iter()
        .find(|r| r.tool == "confirm_lms_material_export")
        .unwrap_or_else(|| panic!("the held call was not refused: {frames:?}"));
    assert!(!refused.ok);
    assert!(
        refused.summary.contains("second-hold-while-accepted"),
        "{}",
        refused.summary
    );
    assert_eq!(demo(&s).exports().confirms(&export), 0, "it was sent");
    assert_eq!(
        approval_state(&s, &thread, &i.interrupt_id).await,
        "Accepted"
    );
    s.pass_and_stop().await;
}

/// Issue 20 §6.4: no error body echoes an unbounded client value, nor a
/// control character the client sent: an oversized or odd `interrupt_id`,
/// an unknown variant or field name, a string of the wrong type (serde
/// quotes those), on resume and on messages.
#[tokio::test]
async fn no_error_body_echoes_a_long_or_odd_client_value() {
    use serde_json::json;
    let s = TestServer::builder().start().await;
    let thread = s.new_thread().await;
    let long = "A".repeat(60 * 1024);
    let odd = "ab\u{1}cd<script>\u{7f}\u{1b}[2J";
    let resume = format!("/v1/threads/{thread}/resume");
    let messages = format!("/v1/threads/{thread}/messages");
    let cases = [
        (
            &resume,
            json!({"interrupt_id": long, "decision": "approve"}),
        ),
        (&resume, json!({"interrupt_id": odd, "decision": "approve"})),
        (&resume, json!({"interrupt_id": "x", "decision": long})),
        (&resume, json!({"interrupt_id": "x", "decision": odd})),
        (
            &resume,
            json!({"interrupt_id": "x", "decision": {long.clone(): 1}}),
        ),
        (
            &resume,
            json!({"interrupt_id": "x", "decision": "deny", long.clone(): 1}),
        ),
        (
            &resume,
            json!({"interrupt_id": "x", "decision": "deny", odd: 1}),
        ),
        (&resume, json!({"interrupt_id": ["x"], "decision": "deny"})),
        (&messages, json!({"text": "hi", long.clone(): 1})),
        (&messages, json!({"text": "hi", "context": long})),
        (
            &messages,
            json!({"text": "hi", "context": {"selected_items": long}}),
        ),
        (
            &messages,
            json!({"text": "hi", "context": {"project": odd.repeat(3)}, odd: 1}),
        ),
    ];
    // Paths that do not decode: axum's rejection quotes the segment.
    let gets = [
        format!("/v1/tables/{}%ff", "A".repeat(4000)),
        "/v1/tables/ab%01cd%3Cscript%3E%ff".to_string(),
        format!("/v1/threads/{}%ff", "A".repeat(4000)),
    ];
    let http = reqwest::Client::new();
    let mut echoed = Vec::new();
    let requests = cases
        .iter()
        .map(|(path, body)| (path.to_string(), Some(body.to_string())))
        .chain(gets.into_iter().map(|path| (path, None)));
    for (path, body) in requests {
        let r = match &body {
            Some(body) => http
                .post(format!("{}{path}", s.base))
                .header("content-type", "application/json")
                .body(body.clone()),
            None => http.get(format!("{}{path}", s.base)),
        };
        let r = r.send().await.unwrap();
        let body = body.unwrap_or_else(|| format!("GET {path}"));
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        let error = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_string))
            .unwrap_or_default();
        let ok = (400..500).contains(&status)
            && text.len() < 1024
            && !error.is_empty()
            && !error.contains(&"A".repeat(100))
            && !error.contains("<script>")
            && !error.chars().any(char::is_control);
        if !ok {
            let shown: String = body.chars().take(80).collect();
            let error: String = format!("{error:?}").chars().take(300).collect();
            echoed.push(format!(
                "{shown}\n  → {status}, {} bytes: {error}",
                text.len()
            ));
        }
    }
    assert!(echoed.is_empty(), "echoed:\n{}", echoed.join("\n"));
    s.pass();
}
