//! Reconnecting to a running turn (issue 38 §5, `http/live.rs`) through the
//! real HTTP path: a client that hangs up mid-answer and asks again with
//! the id of the last frame it read gets the rest of the turn, once, and
//! the frames of both connections read as one stream through the frame
//! table (consecutive ids: nothing lost, nothing twice). Past the grace the
//! turn meets the disconnect as before (cut) and a reconnect is told 204.
//! Only the thread's owner may reconnect; a frame id that is not one is 400.

use std::time::Duration;

use crate::common::frames::{answer, FrameKind};
use crate::common::server::{Slow, TestServer};
use crate::common::thread::RecordKind;
use turnstile::http::HttpConfig;
use turnstile::wire::Frame;

fn grace(secs: u64) -> HttpConfig {
    HttpConfig {
        reconnect_grace: Duration::from_secs(secs),
        ..HttpConfig::default()
    }
}

fn turn_id(frames: &[Frame]) -> String {
    match frames.first() {
        Some(Frame::Start(s)) => s.turn_id.clone(),
        other => panic!("a stream starts with `start`: {other:?}"),
    }
}

#[tokio::test]
async fn a_client_that_reconnects_reads_the_rest_of_the_turn_once() {
    let s = TestServer::builder()
        .model(Slow::answering(Duration::from_millis(100)))
        .http(grace(20))
        .start()
        .await;
    let thread = s.new_thread().await;
    let open = s
        .turn_until(&thread, "show safety issues on floor 3", FrameKind::Delta)
        .await;
    let turn = turn_id(open.frames());
    // The connection goes (a laptop lid): what was read stays read.
    let mut reader = open.hang_up();
    let last = reader.last_id();
    // The turn goes on: the thread is still its.
    let (status, v) = s
        .post_raw(
            &format!("/v1/threads/{thread}/messages"),
            "{\"text\": \"hello\"}",
        )
        .await;
    assert_eq!(status, 409, "{v}");
    // Some of the rest is written while nobody reads.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = s
        .http
        .get(format!("{}/v1/threads/{thread}/stream?turn={turn}", s.base))
        .header("last-event-id", last.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    // The frames after `last`, then the live rest: one stream with the
    // first, in table order, each id the next one.
    reader.push(&r.bytes().await.unwrap());
    let frames = reader.finish();
    assert!(matches!(frames.last(), Some(Frame::Done(_))), "{frames:?}");
    let v = s.thread(&thread).await;
    assert!(!v.has(RecordKind::Cut), "{:?}", v.kinds());
    let stored = v.answer_text().expect("the answer was stored");
    assert_eq!(
        answer(&frames),
        stored,
        "the answer read across both connections is the stored one, once"
    );
    // Within the grace the ended turn can still be read from any frame id.
    let again = s
        .http
        .get(format!("{}/v1/threads/{thread}/stream?turn={turn}", s.base))
        .header("last-event-id", "0")
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 200);
    let all = crate::common::frames::read_frames(&again.bytes().await.unwrap());
    assert_eq!(all.len(), frames.len());
    s.pass();
}

#[tokio::test]
async fn past_the_grace_the_turn_is_cut_and_a_reconnect_is_told_to_read_the_thread() {
    let s = TestServer::builder()
        .model(Slow::answering(Duration::from_millis(1500)))
        .http(grace(1))
        .start()
        .await;
    let thread = s.new_thread().await;
    let open = s
        .turn_until(&thread, "show safety issues on floor 3", FrameKind::Delta)
        .await;
    let turn = turn_id(open.frames());
    // A delta every 1.5 s: the next comes after the 1 s grace has run out.
    let last = open.hang_up().last_id();
    // A frame id that is not one, and a caller who does not own the thread.
    let url = format!("{}/v1/threads/{thread}/stream?turn={turn}", s.base);
    let bad = s
        .http
        .get(&url)
        .header("last-event-id", "x")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let stranger = reqwest::Client::new().get(&url).send().await.unwrap();
    assert_eq!(
        stranger.status(),
        404,
        "another caller's reconnect learns nothing"
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    let late = s
        .http
        .get(&url)
        .header("last-event-id", last.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(late.status(), 204);
    let v = s.thread(&thread).await;
    assert!(
        v.has(RecordKind::Cut),
        "the turn met its client's absence: {:?}",
        v.kinds()
    );
    assert!(!v.has(RecordKind::Answer));
    s.pass();
}
