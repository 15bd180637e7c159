//! The code's own sentences are held to the same judge as the model's
//! (issue 16). The scripted model says exactly the anchor sentences of
//! `turnstile::judge::sentences`, so a demo turn answered by it is a turn
//! whose every sentence was written by code: each one passes through the
//! narration guard of its turn, with the warrants of that turn's frames. A
//! code sentence that claimed what its turn does not show ("this searched
//! everything" after a failed call) is replaced there, and fails here.
//!
//! Every prompt of the README's table, in English and Korean, with the
//! follow-ups in their thread, runs under no fault and under each demo tool
//! fault. Then the same with the lying model: every refused sentence is
//! replaced by a code sentence or marked removed, and no sentence is said
//! twice.

use crate::common;

use std::sync::Arc;

use common::frames::answer;
use common::server::TestServer;
use serde_json::{json, Value};
use turnstile::guard::check::Guard;
use turnstile::guard::vocab::{self, Lang};
use turnstile::guard::warrant::Warrants;
use turnstile::judge::Anchor;
use turnstile::protocols::narration::Narration;
use turnstile::protocols::TableSet;
use turnstile::wire::Frame;
use turnstile_demo::lying::Lying;
use turnstile_demo::Fault;
use turnstile_demo::Scripted;

/// One thread of the README's table: its turns in order, each with the host
/// context it is sent with.
fn threads() -> Vec<Vec<(&'static str, Option<Value>)>> {
    let alone = |t: &'static str| vec![(t, None)];
    vec![
        vec![
            ("show safety issues on floor 3", None),
            ("only those from April", None),
        ],
        vec![("3층 안전 지적사항 보여줘", None), ("그중 4월 것만", None)],
        alone("show photos from 1999"),
        alone("1999년 사진 보여줘"),
        alone("show me 12 photos of floor 2"),
        alone("2층 사진 12장 보여줘"),
        alone("list all panoramas"),
        alone("모든 파노라마 목록 보여줘"),
        alone("how many photos are on floor 3?"),
        alone("3층 사진은 몇 장이야?"),
        alone("how many photos are on floor 3 in the archive?"),
        alone("list all panoramas on floor 3 in the archive"),
        alone("show the newest safety issue on floor 3 in detail"),
        alone("3층 최신 안전 지적사항 자세히 보여줘"),
        vec![(
            "show quality issues on this floor",
            Some(json!({"floor": 4})),
        )],
        // Without the floor: a counter-question, nothing searched.
        alone("show quality issues on this floor"),
        // "Show more", continued from the stored cursor (under the cursor
        // faults: drifted, or rejected in band), then past its end.
        vec![
            ("show photos of floor 3", None),
            ("show more", None),
            ("더 보여줘", None),
            ("show more", None),
        ],
        vec![
            ("list all panoramas on floor 3", None),
            ("show more", None),
            ("show more", None),
            ("show more", None),
        ],
        // Nothing to continue: code says so, nothing searched.
        alone("show more"),
        alone("이 층 품질 지적사항 보여줘"),
        // A follow-up on a fresh thread: nothing to narrow.
        alone("only those from April"),
        alone("그중 4월 것만"),
        alone("hello"),
    ]
}

fn body(text: &str, context: &Option<Value>) -> Value {
    match context {
        Some(c) => json!({"text": text, "context": c}),
        None => json!({"text": text}),
    }
}

fn deltas(frames: &[Frame]) -> Vec<&turnstile::wire::Delta> {
    frames
        .iter()
        .filter_map(|f| match f {
            Frame::Delta(d) => Some(d),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_code_sentence_passes_the_guard_of_its_turn() {
    let faults: Vec<Vec<Fault>> = std::iter::once(vec![])
        .chain(Fault::ALL.iter().map(|f| vec![*f]))
        .collect();
    let mut turns = 0;
    let mut refused = Vec::new();
    for fault in faults {
        let s = TestServer::builder().faults(fault.clone()).start().await;
        for thread in threads() {
            let t = s.new_thread().await;
            for (text, context) in &thread {
                let frames = s.turn(&t, body(text, context)).await;
                turns += 1;
                for d in deltas(&frames) {
                    if let Some(r) = &d.replaced {
                        refused.push(format!(
                            "{fault:?} {text:?}: row {} refused the code's own sentence (answer: {:?})",
                            r.row_id,
                            answer(&frames)
                        ));
                    }
                }
                assert!(
                    !answer(&frames).trim().is_empty(),
                    "{fault:?} {text:?}: no answer"
                );
            }
        }
        s.pass();
    }
    assert!(turns >= 5 * 22, "{turns} turns");
    assert!(refused.is_empty(), "{}", refused.join("\n"));
}

/// The sentence this issue found false, judged by the guard of its turn (a
/// search that failed): refused by the search row. And the counter-question
/// that replaced it passes the guard of a turn that searched nothing.
#[test]
fn searched_everything_after_a_failed_call_is_caught() {
    let table = TableSet::builtin()
        .and_then(|t| t.bound::<Narration>())
        .expect("the built-in narration table binds");
    let failed = [Anchor::ToolFailed {
        tool: "search_photos".into(),
    }];
    let guard = |anchors: &[Anchor], lang| {
        Guard::new(
            &table,
            Warrants::from_anchors(anchors),
            lang,
            "The search_photos tool failed, so I cannot answer from it.".into(),
        )
    };
    for (lang, sentence) in [
        (
            Lang::En,
            "There were no earlier results to narrow, so this searched everything.",
        ),
        (Lang::En, "I searched everything and found these."),
        (Lang::Ko, "좁힐 이전 결과가 없어 전체를 검색했습니다."),
    ] {
        let piece = guard(&failed, lang).judge(sentence.to_string());
        let row = piece.replaced.map(|r| r.row_id);
        assert!(
            matches!(
                row.as_deref(),
                Some("search-claimed-without-result" | "absence-without-accounted-zero")
            ),
            "{sentence:?} passed the guard of a failed search: {row:?}"
        );
    }
    // Only the search claim is left when the absence is licensed: its row.
    let nothing = [Anchor::NothingToNarrow];
    let piece = guard(&nothing, Lang::En)
        .judge("There were no earlier results to narrow, so this searched everything.".into());
    assert_eq!(
        piece.replaced.map(|r| r.row_id).as_deref(),
        Some("search-claimed-without-result")
    );
    // "More of that list cannot be fetched" is no right to say nothing
    // more exists: more may.
    let cannot = [Anchor::NothingToContinue { shown: true }];
    for (lang, sentence) in [
        (Lang::En, "There are none."),
        (Lang::Ko, "해당하는 항목이 없습니다."),
    ] {
        let piece = guard(&cannot, lang).judge(sentence.to_string());
        assert!(
            piece.replaced.is_some(),
            "{sentence:?} passed after a refused show more"
        );
    }
    // The code's sentences for a turn that searched nothing pass it.
    for (anchor, lang) in [
        (Anchor::NothingToNarrow, Lang::En),
        (Anchor::NothingToNarrow, Lang::Ko),
        (
            Anchor::ContextMissing {
                field: "floor".into(),
            },
            Lang::En,
        ),
        (
            Anchor::ContextMissing {
                field: "floor".into(),
            },
            Lang::Ko,
        ),
        (failed[0].clone(), Lang::En),
        (failed[0].clone(), Lang::Ko),
        (Anchor::NothingToContinue { shown: false }, Lang::En),
        (Anchor::NothingToContinue { shown: false }, Lang::Ko),
        (Anchor::NothingToContinue { shown: true }, Lang::En),
        (Anchor::NothingToContinue { shown: true }, Lang::Ko),
        (Anchor::ListComplete, Lang::En),
        (Anchor::ListComplete, Lang::Ko),
        (Anchor::ContinuationCapped { shown: 1000 }, Lang::En),
        (Anchor::ContinuationCapped { shown: 1000 }, Lang::Ko),
        (
            Anchor::CursorRejected {
                tool: "search_photos".into(),
            },
            Lang::En,
        ),
        (
            Anchor::CursorRejected {
                tool: "search_photos".into(),
            },
            Lang::Ko,
        ),
    ] {
        let text = turnstile::judge::sentences::sentence(&anchor, lang == Lang::Ko);
        let anchors = [anchor.clone()];
        let mut g = guard(&anchors, lang);
        let pieces: Vec<_> = g.push(&text).into_iter().chain(g.finish()).collect();
        assert!(
            pieces.iter().all(|p| p.replaced.is_none()),
            "{anchor:?}: {text:?} refused: {pieces:?}"
        );
        let _ = vocab::vocab(lang);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lying_model_is_replaced_by_code_sentences_never_blank_or_twice() {
    let model = Arc::new(Lying::new(Scripted::demo()));
    let s = TestServer::builder().model(model).start().await;
    let mut replaced = 0;
    for thread in threads() {
        let t = s.new_thread().await;
        for (text, context) in &thread {
            let frames = s.turn(&t, body(text, context)).await;
            let mut seen: Vec<String> = Vec::new();
            for d in deltas(&frames) {
                if d.replaced.is_some() {
                    replaced += 1;
                }
                for sentence in d.text.split_inclusive(['.', '?', '!']) {
                    let sentence = sentence.trim();
                    if sentence.len() < 12 {
                        continue;
                    }
                    assert!(
                        !seen.iter().any(|s| s == sentence),
                        "{text:?}: {sentence:?} said twice: {:?}",
                        answer(&frames)
                    );
                    seen.push(sentence.to_string());
                }
            }
        }
    }
    assert!(replaced > 0, "the lying model lied nowhere");
    s.pass();
}
