//! "Show more" as a protocol (issue 21), through HTTP/SSE, the real demo MCP
//! server and SQLite: a listing continues across turns from the cursor the
//! server stored, checked page by page against everything shown; the model
//! only says "more" (or the client sends the `more` marker) and never sees a
//! cursor.

use std::collections::HashSet;

use crate::common;

use common::fake_openai::FakeOpenAi;
use common::frames::{answer, citations, stable};
use common::server::TestServer;
use common::thread::Record;
use serde_json::{json, Value};
use turnstile::wire::{Citation, Frame};
use turnstile_demo::Fault;

fn ids(c: &Citation) -> Vec<String> {
    c.items
        .iter()
        .filter_map(|i| i.get("id").and_then(Value::as_str).map(str::to_string))
        .collect()
}

#[track_caller]
fn one(frames: &[Frame]) -> &Citation {
    let cs = citations(frames);
    assert_eq!(cs.len(), 1, "one card:\n{}", stable(frames));
    cs[0]
}

/// Every cursor the thread's calls sent, as stored.
async fn cursors_sent(s: &TestServer, thread: &str) -> Vec<String> {
    let view = s.thread(thread).await;
    view.records()
        .into_iter()
        .filter_map(|r| match r {
            Record::Call(c) => c.args.get("cursor").and_then(Value::as_str),
            _ => None,
        })
        .map(str::to_string)
        .collect()
}

/// "show more" three times on a 613-item listing, said to a real model
/// adapter (the fake OpenAI server plays the scripted model's plans, so
/// the model's only word is the `show_more_results` function): pages 2, 3
/// and 4 under the same card, no id twice, `displayed` 20 → 30 → 40, the
/// total still exactly 613, and no cursor in any request the model got.
#[tokio::test]
async fn show_more_three_times_continues_the_same_listing() {
    let fake = FakeOpenAi::start().await;
    let s = TestServer::builder().model(fake.model()).start().await;
    let t = s.new_thread().await;
    let first = s.say(&t, "show photos of floor 3").await;
    let c = one(&first);
    assert_eq!(
        (c.displayed, c.total, c.grade.as_str(), c.more),
        (10, Some(613), "EXACT", true),
        "{}",
        stable(&first)
    );
    let listing = c.listing.clone().expect("a listing card is named");
    let mut seen: HashSet<String> = ids(c).into_iter().collect();
    assert_eq!(seen.len(), 10);

    for (n, text) in ["show more", "더 보여줘", "show more"].iter().enumerate() {
        let before_turn = fake.requests().len();
        let frames = s.say(&t, text).await;
        // One planning round (the model's "more") and one answer: no
        // planner is asked to search again after the continuation.
        let roles: Vec<_> = fake.requests()[before_turn..]
            .iter()
            .map(|r| r.role)
            .collect();
        assert_eq!(
            roles,
            [
                common::fake_openai::Role::Planner,
                common::fake_openai::Role::Responder
            ],
            "{text}"
        );
        let shown = stable(&frames);
        let c = one(&frames);
        let before = 10 * (n as u64 + 1);
        assert_eq!(c.listing.as_deref(), Some(listing.as_str()), "{shown}");
        assert_eq!(c.shown_before, Some(before), "{shown}");
        assert_eq!(c.displayed, before + 10, "displayed adds up:\n{shown}");
        assert_eq!(
            (c.total, c.grade.as_str(), c.complete, c.has_more, c.more),
            (Some(613), "EXACT", false, true, true),
            "the total stays the verified per-page total:\n{shown}"
        );
        let page = ids(c);
        assert_eq!(page.len(), 10, "{shown}");
        for id in &page {
            assert!(seen.insert(id.clone()), "{id} shown twice:\n{shown}");
        }
        let said = answer(&frames);
        assert!(
            said.contains("613") && said.contains(&format!("{}", before + 10)),
            "{said}"
        );
        assert!(!said.contains("all of them"), "{said}");
    }
    assert_eq!(seen.len(), 40);

    // The continuation's calls went out with the stored cursors; none of
    // them ever reached the model, in any request of any turn.
    let cursors = cursors_sent(&s, &t).await;
    assert_eq!(cursors.len(), 3, "one continued call per show more");
    let requests = fake.requests();
    assert!(!requests.is_empty());
    for r in &requests {
        for cursor in &cursors {
            assert!(
                !r.raw.contains(cursor.as_str()),
                "a cursor reached the model: {cursor}"
            );
        }
    }
    s.pass();
}

/// The client's structured marker (`"more": true`, the page's button and
/// `turnstile chat --more`) continues without any model being asked what
/// the user meant; and the listing's pages are the stored cards' after a
/// reload.
#[tokio::test]
async fn the_more_marker_continues_and_the_cards_are_stored() {
    let s = TestServer::builder().start().await;
    the_more_marker_continues_on(s).await;
}

/// The same on PostgreSQL: the mark is read back through the thread's
/// population pointer of the other store.
#[tokio::test]
#[ignore = "needs PostgreSQL: set TURNSTILE_TEST_DATABASE_URL, run with --include-ignored"]
async fn the_more_marker_continues_on_postgres() {
    let s = TestServer::builder()
        .database(common::needs::postgres())
        .start()
        .await;
    the_more_marker_continues_on(s).await;
}

async fn the_more_marker_continues_on(s: TestServer) {
    let t = s.new_thread().await;
    let first = s.say(&t, "show photos of floor 3").await;
    let listing = one(&first).listing.clone().unwrap();
    // Text that says nothing of paging: the marker decides.
    let frames = s.turn(&t, json!({"text": "▶", "more": true})).await;
    let c = one(&frames);
    assert_eq!((c.displayed, c.shown_before), (20, Some(10)));
    assert_eq!(c.listing.as_deref(), Some(listing.as_str()));

    let view = s.thread(&t).await;
    let cards = view.cards();
    assert_eq!(cards.len(), 2);
    let all: Vec<String> = cards.iter().flat_map(|c| ids(c)).collect();
    assert_eq!(all.len(), 20);
    assert_eq!(all.iter().collect::<HashSet<_>>().len(), 20);
    assert!(cards.iter().all(|c| c.listing.as_deref() == Some(&listing)));
    s.pass();
}

/// Drift between turns: the data moved after the user saw page 1 (the
/// demo's `cursor-drift`: the next page starts 3 back and the total grows
/// by 3). The continuation stops, nothing of its page is shown, the card
/// the user saw is graded SHOWN (the server contradicted its total), the
/// answer names the change and never says "exactly", and the listing cannot
/// be continued any more.
#[tokio::test]
async fn drift_between_turns_stops_the_continuation() {
    let s = TestServer::builder()
        .faults(vec![Fault::CursorDrift])
        .start()
        .await;
    let t = s.new_thread().await;
    let first = s.say(&t, "show photos of floor 3").await;
    assert_eq!(one(&first).grade, "EXACT", "page 1 has no cursor: no drift");
    let frames = s.say(&t, "show more").await;
    let shown = stable(&frames);
    let c = one(&frames);
    assert!(c.items.is_empty(), "nothing blended:\n{shown}");
    assert_eq!(c.displayed, 10, "{shown}");
    assert_ne!(c.grade, "EXACT", "{shown}");
    assert_ne!(c.grade, "LOWER_BOUND", "{shown}");
    assert!(!c.more, "{shown}");
    let stitch = c.stitch.as_ref().expect("the continuation's end");
    assert_eq!(stitch.end, "abandoned");
    assert_eq!(
        stitch.anomaly.as_ref().map(|a| a["kind"].clone()),
        Some(json!("total_changed")),
        "{shown}"
    );
    let said = answer(&frames);
    assert!(said.contains("613 → 616"), "the change is named: {said}");
    assert!(!said.to_lowercase().contains("exactly"), "{said}");
    let view = s.thread(&t).await;
    let turn = view.turns.last().unwrap();
    let paging = turn.machine("paging#1");
    assert_eq!(
        paging.trace,
        ["continue-shown", "total-changed-since-shown"],
        "the table decided"
    );

    // Nothing to continue now: said by code, nothing searched.
    let calls = s.demo.as_ref().unwrap().search_calls();
    let again = s.say(&t, "show more").await;
    assert!(citations(&again).is_empty());
    assert_eq!(s.demo.as_ref().unwrap().search_calls(), calls);
    assert!(
        answer(&again).contains("cannot fetch more of that list"),
        "{}",
        answer(&again)
    );
    s.pass();
}

/// Issue 34 (newcomer): "show more" after a list that was shown to its end
/// ("only those from April" narrows to a complete list) says that it was
/// complete, not that more "cannot be fetched from where it stopped", and
/// searches nothing.
#[tokio::test]
async fn show_more_after_a_complete_list_says_it_was_complete() {
    let s = TestServer::builder().start().await;
    let t = s.new_thread().await;
    s.say(&t, "show safety issues on floor 3").await;
    let april = s.say(&t, "only those from April").await;
    let c = one(&april);
    assert_eq!(c.grade, "EXACT", "{}", stable(&april));
    assert_eq!(
        c.total,
        Some(c.displayed),
        "the April list is complete: {}",
        stable(&april)
    );
    let calls = s.demo.as_ref().unwrap().search_calls();
    let more = s.say(&t, "show more").await;
    assert!(citations(&more).is_empty());
    assert_eq!(s.demo.as_ref().unwrap().search_calls(), calls);
    let said = answer(&more);
    assert!(
        said.starts_with("My earlier answer already showed that list to its end, so there is no more of it to show."),
        "{said}"
    );
    assert!(!said.contains("cannot fetch more"), "{said}");
    s.pass();
}

/// A cursor the server no longer takes, answered in band (text, `isError:
/// false`, as the seed's upstream does): recognised by the missing
/// accounting, not by the wording — the paging table's `cursor-rejected`.
#[tokio::test]
async fn a_rejected_cursor_in_band_is_a_row() {
    let s = TestServer::builder()
        .faults(vec![Fault::CursorRejected])
        .start()
        .await;
    let t = s.new_thread().await;
    s.say(&t, "show photos of floor 3").await;
    let frames = s.say(&t, "show more").await;
    let shown = stable(&frames);
    let result = common::frames::tool_results(&frames);
    assert!(result.iter().all(|r| !r.ok), "{shown}");
    let c = one(&frames);
    assert!(c.items.is_empty(), "{shown}");
    assert_eq!(
        (c.displayed, c.total, c.grade.as_str(), c.more),
        (10, Some(613), "EXACT", false),
        "what was shown stands:\n{shown}"
    );
    assert_eq!(
        c.stitch.as_ref().and_then(|s| s.anomaly.clone()),
        Some(json!({"kind": "unaccounted"}))
    );
    let said = answer(&frames);
    assert!(said.contains("did not continue the list"), "{said}");
    assert!(!said.contains("invalid cursor"), "{said}");
    let view = s.thread(&t).await;
    assert_eq!(
        view.turns.last().unwrap().machine("paging#1").trace,
        ["continue-shown", "cursor-rejected"]
    );
    s.pass();
}

/// The demo's `query_data`, whose cursor re-runs the query (seed 003 §4.9):
/// a stitched listing takes up to `page_cap` pages a turn; "show more"
/// continues from the last, checked against all 250 shown ids, until the
/// listing ends: then it is complete, "all 613", and offers no more.
#[tokio::test]
async fn query_data_continues_to_its_end() {
    let s = TestServer::builder().start().await;
    let t = s.new_thread().await;
    let first = s.say(&t, "list all panoramas on floor 3").await;
    let c = one(&first);
    assert_eq!(
        (c.displayed, c.total, c.grade.as_str(), c.more),
        (250, Some(613), "EXACT", true),
        "{}",
        stable(&first)
    );
    let mut seen: HashSet<String> = ids(c).into_iter().collect();
    for (displayed, complete) in [(500, false), (613, true)] {
        let frames = s.say(&t, "show more").await;
        let shown = stable(&frames);
        let c = one(&frames);
        assert_eq!(
            (c.displayed, c.total, c.complete, c.more),
            (displayed, Some(613), complete, !complete),
            "{shown}"
        );
        for id in ids(c) {
            assert!(seen.insert(id.clone()), "{id} twice");
        }
        if complete {
            let said = answer(&frames);
            assert!(said.contains("exactly 613, and all of them"), "{said}");
        }
    }
    assert_eq!(seen.len(), 613);
    let after = s.say(&t, "show more").await;
    assert!(citations(&after).is_empty());
    s.pass();
}

/// Nothing to continue on a fresh thread: a counter-question, nothing run.
#[tokio::test]
async fn show_more_without_a_listing_says_so() {
    let s = TestServer::builder().start().await;
    let t = s.new_thread().await;
    let frames = s.turn(&t, json!({"text": "show more", "more": true})).await;
    assert!(common::frames::tool_calls(&frames).is_empty());
    assert!(
        answer(&frames).contains("showed no list to show more of"),
        "{}",
        answer(&frames)
    );
    s.pass();
}

/// Narrowing and continuation compose: "show more" of a narrowed listing
/// stays inside its scope, and a narrowing after a continuation narrows the
/// listing's whole population.
#[tokio::test]
async fn show_more_of_a_narrowed_listing_stays_in_scope() {
    let s = TestServer::builder().start().await;
    let t = s.new_thread().await;
    s.say(&t, "show photos of floor 3").await;
    s.say(&t, "show more").await;
    // Narrowed after a continuation: inside floor 3, the whole population.
    let narrowed = s.say(&t, "only those from 2026").await;
    let c = one(&narrowed);
    assert!(c.narrowed, "{}", stable(&narrowed));
    assert!(c.more, "a narrowed listing with more can be continued");
    let in_scope = |c: &Citation| {
        c.items.iter().all(|i| {
            i["floor"] == json!(3)
                && i["captured_at"]
                    .as_str()
                    .is_some_and(|d| d.starts_with("2026"))
        })
    };
    assert!(in_scope(c), "{}", stable(&narrowed));
    let first: HashSet<String> = ids(c).into_iter().collect();
    let more = s.say(&t, "show more").await;
    let c = one(&more);
    assert!(c.narrowed && !c.items.is_empty(), "{}", stable(&more));
    assert!(in_scope(c), "still inside the scope:\n{}", stable(&more));
    assert!(ids(c).iter().all(|id| !first.contains(id)));
    s.pass();
}
