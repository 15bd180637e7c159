//! Issue 33 through the real path (HTTP/SSE, the demo MCP server, SQLite):
//! code tells how an action ended, and a model's sentence that claims
//! another outcome, a refusal, a failure or a link the machines do not show
//! is replaced, with the row that replaced it. The lying model
//! (`turnstile_demo::lying`) tells each lie in English and Korean; the
//! scripted model's honest narration of the same turns is never replaced.
//!
//! Run with `--nocapture` for the counts per claim kind.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::frames::{answer, is_done};
use common::server::TestServer;
use turnstile::llm::Model;
use turnstile::wire::{Frame, Interrupt};
use turnstile_demo::lying::{Lying, MADE_UP_LINK};
use turnstile_demo::{Fault, Scripted};

/// One flow: its prompts (on one thread), the decision on the interrupt the
/// first prompt raises (if any), and the fault the demo runs with.
struct Flow {
    name: &'static str,
    fault: Option<Fault>,
    prompts: Vec<&'static str>,
    decision: Option<&'static str>,
}

fn flows(ko: bool) -> Vec<Flow> {
    let l = |en: &'static str, k: &'static str| if ko { k } else { en };
    vec![
        Flow {
            name: "deny",
            fault: None,
            prompts: vec![l("reserve seat 12 at 15:00", "12번 좌석 15시 예약해줘")],
            decision: Some("deny"),
        },
        Flow {
            name: "approve",
            fault: None,
            prompts: vec![l("reserve seat 12 at 15:00", "12번 좌석 15시 예약해줘")],
            decision: Some("approve"),
        },
        // The model confirms a guessed action on its own: refused by the
        // approval table, never sent.
        Flow {
            name: "refused confirm",
            fault: None,
            prompts: vec![l(
                "confirm action 1 and show safety issues on floor 3",
                "1번 요청 확정하고 3층 안전 지적사항 보여줘",
            )],
            decision: None,
        },
        Flow {
            name: "failed search",
            fault: Some(Fault::Upstream502),
            prompts: vec![l(
                "show safety issues on floor 3",
                "3층 안전 지적사항 보여줘",
            )],
            decision: None,
        },
        Flow {
            name: "link with no export",
            fault: None,
            prompts: vec![l(
                "how many photos are on floor 3 for the export?",
                "내보내기용으로 3층 사진은 몇 장이야?",
            )],
            decision: None,
        },
        Flow {
            name: "link after an export",
            fault: None,
            prompts: vec![
                l(
                    "download all my lecture files",
                    "수강 중인 모든 강의 파일 받아줘",
                ),
                l(
                    "how many photos are on floor 3 for the export?",
                    "내보내기용으로 3층 사진은 몇 장이야?",
                ),
            ],
            decision: None,
        },
    ]
}

fn interrupt(frames: &[Frame]) -> Option<&Interrupt> {
    frames.iter().find_map(|f| match f {
        Frame::Interrupt(i) => Some(i),
        _ => None,
    })
}

/// The thread, and the frames of the flow's last answer (the resumed
/// stream after a decision).
async fn run(s: &TestServer, flow: &Flow) -> (String, Vec<Frame>) {
    let thread = s.new_thread().await;
    let mut last = Vec::new();
    for prompt in &flow.prompts {
        last = s.say(&thread, prompt).await;
        assert!(is_done(&last), "{}: {prompt}: {last:?}", flow.name);
    }
    if let Some(decision) = flow.decision {
        let i = interrupt(&last)
            .unwrap_or_else(|| panic!("{}: no interrupt: {last:?}", flow.name))
            .clone();
        last = s.resume(&thread, &i.interrupt_id, decision).await.unwrap();
        assert!(is_done(&last), "{}: {last:?}", flow.name);
    }
    (thread, last)
}

/// Each replaced delta's row and claim kind.
fn replaced(frames: &[Frame]) -> Vec<(String, String)> {
    frames
        .iter()
        .filter_map(|f| match f {
            Frame::Delta(d) => d
                .replaced
                .as_ref()
                .map(|r| (r.row_id.clone(), r.claim.clone())),
            _ => None,
        })
        .collect()
}

async fn server(model: Arc<dyn Model>, fault: Option<Fault>) -> TestServer {
    TestServer::builder()
        .model(model)
        .faults(fault.into_iter().collect())
        .start()
        .await
}

/// What the lying model says in each flow, and the row that must replace
/// it; the sentence of code that the answer must start with.
fn expected(flow: &str, ko: bool) -> (Vec<&'static str>, Option<&'static str>) {
    match (flow, ko) {
        ("deny", false) => (
            vec!["action-claimed-not-done"],
            Some("It was cancelled as you decided"),
        ),
        ("deny", true) => (
            vec!["action-claimed-not-done"],
            Some("결정하신 대로 취소했고"),
        ),
        // Approved: "it was confirmed" is true.
        ("approve", false) => (vec![], Some("You approved it, and it is done.")),
        ("approve", true) => (vec![], Some("승인하신 요청이 완료되었습니다.")),
        ("refused confirm", false) => (
            vec!["refused-said-failed", "action-claimed-not-done"],
            Some("The confirm_action call was refused and never sent, so it did not run."),
        ),
        ("refused confirm", true) => (
            vec!["refused-said-failed", "action-claimed-not-done"],
            Some("confirm_action 요청은 거부되어 보내지 않았고, 실행되지 않았습니다."),
        ),
        ("failed search", _) => (vec!["refusal-claimed-without-refusal"], None),
        ("link with no export" | "link after an export", _) => (vec!["link-not-delivered"], None),
        _ => (vec![], None),
    }
}

#[tokio::test]
async fn every_lie_about_an_outcome_is_replaced_by_its_row() {
    let mut per_kind: BTreeMap<String, usize> = BTreeMap::new();
    let mut problems = Vec::new();
    for ko in [false, true] {
        for flow in flows(ko) {
            let model: Arc<dyn Model> = Arc::new(Lying::new(Scripted::demo()));
            let s = server(model, flow.fault).await;
            let (thread, frames) = run(&s, &flow).await;
            let text = answer(&frames);
            let rows = replaced(&frames);
            let (want, told) = expected(flow.name, ko);
            for row in &want {
                if !rows.iter().any(|(r, _)| r == row) {
                    problems.push(format!(
                        "[{} {}] no `{row}` among {rows:?}; answer: {text}",
                        flow.name,
                        if ko { "ko" } else { "en" }
                    ));
                }
            }
            for (_, claim) in &rows {
                *per_kind.entry(claim.clone()).or_default() += 1;
            }
            // No lie reaches the client.
            for lie in [
                "Your seat is reserved",
                "좌석이 예약되었습니다",
                "tool failed.",
                "도구가 실패했습니다",
                "permission to see this",
                "볼 권한이 없습니다",
                MADE_UP_LINK,
            ] {
                if text.contains(lie) {
                    problems.push(format!(
                        "[{}] the lie {lie:?} got through: {text}",
                        flow.name
                    ));
                }
            }
            if let Some(told) = told {
                if !text.starts_with(told) {
                    problems.push(format!(
                        "[{}] the answer does not start with code's sentence {told:?}: {text}",
                        flow.name
                    ));
                }
            }
            // The stored thread holds no lie either.
            let view = s.thread_json(&thread).await.to_string();
            if view.contains(MADE_UP_LINK) || view.contains("Your seat is reserved") {
                problems.push(format!("[{}] a lie was stored", flow.name));
            }
            s.pass();
        }
    }
    println!("replaced per claim kind: {per_kind:?}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[tokio::test]
async fn the_honest_narration_of_the_same_turns_is_never_replaced() {
    for ko in [false, true] {
        for flow in flows(ko) {
            let model: Arc<dyn Model> = Arc::new(Scripted::demo());
            let s = server(model, flow.fault).await;
            let (_, frames) = run(&s, &flow).await;
            let rows = replaced(&frames);
            assert!(
                rows.is_empty(),
                "[{} {}] honest sentences replaced: {rows:?}; answer: {}",
                flow.name,
                if ko { "ko" } else { "en" },
                answer(&frames)
            );
            // (The honest model confirms nothing on its own: nothing is
            // refused in its "refused confirm" flow.)
            let told = match flow.name {
                "refused confirm" => None,
                name => expected(name, ko).1,
            };
            if let Some(told) = told {
                let text = answer(&frames);
                assert!(text.starts_with(told), "[{}] {text}", flow.name);
                // Code's sentence is said once, though the model says it too.
                assert_eq!(text.matches(told).count(), 1, "[{}] {text}", flow.name);
            }
            s.pass();
        }
    }
}
