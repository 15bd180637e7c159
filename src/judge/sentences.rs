//! The code's own sentence for each anchor, in English and Korean: what a
//! well-behaved responder says (the scripted model says exactly these), and
//! what the narration guard puts in place of a sentence it refuses. They
//! belong to the product, not to the demo: every one is checked by the same
//! guard as the model's sentences (tests/own_sentences.rs).

use super::emptiness::AbsenceCause;
use super::Anchor;

/// The code's own sentence for an anchor, in English or Korean: what the
/// scripted model says, and what the narration guard puts in place of a
/// sentence it does not let through.
pub fn sentence(anchor: &Anchor, korean: bool) -> String {
    match (anchor, korean) {
        (Anchor::Record { .. }, _) => String::new(),
        (Anchor::NarrowingStale, false) => {
            "Those earlier results were judged under rules that have changed since, so I cannot narrow them; I can run a new search instead.".into()
        }
        (Anchor::NarrowingStale, true) => {
            "이전 결과는 그 뒤 바뀐 규칙으로 판정된 것이라 좁힐 수 없습니다. 새로 검색해 드릴 수 있습니다.".into()
        }
        (Anchor::StepLimit { steps }, false) => {
            format!("I stopped after {steps} tool steps; more may have been needed.")
        }
        (Anchor::StepLimit { steps }, true) => {
            format!("도구 단계 {steps}번에서 멈췄습니다. 더 필요했을 수 있습니다.")
        }
        (Anchor::CountExact { total, complete: true, .. }, false) => {
            format!("There are exactly {total}, and all of them are in the card above.")
        }
        (Anchor::CountExact { total, complete: true, .. }, true) => {
            format!("정확히 {total}건이며, 위 카드에 전부 있습니다.")
        }
        (Anchor::CountExact { total, displayed, .. }, false) => {
            format!("Exactly {total} match. These {displayed} are shown in the card above.")
        }
        (Anchor::CountExact { total, displayed, .. }, true) => {
            format!("정확히 {total}건이 일치합니다. 이 {displayed}건은 위 카드에 표시했습니다.")
        }
        (Anchor::CountLowerBound { at_least, displayed, .. }, false) => format!(
            "At least {at_least} match this search; the exact number is not known. These {displayed} are shown in the card above."
        ),
        (Anchor::CountLowerBound { at_least, displayed, .. }, true) => format!(
            "이 검색 조건에 최소 {at_least}건이 일치하며, 정확한 수는 알 수 없습니다. 이 {displayed}건은 위 카드에 표시했습니다."
        ),
        (Anchor::CountShown { displayed, .. }, false) => {
            format!("These {displayed} are shown in the card above; the total is not known.")
        }
        (Anchor::CountShown { displayed, .. }, true) => {
            format!("이 {displayed}건을 위 카드에 표시했습니다. 전체 수는 알 수 없습니다.")
        }
        (Anchor::CountUnknown { .. }, false) => {
            "The search answered, but without any count, so I cannot say how many there are.".into()
        }
        (Anchor::CountUnknown { .. }, true) => "검색 결과에 개수 정보가 없어 몇 건인지 말씀드릴 수 없습니다.".into(),
        (Anchor::ToolFailed { tool }, false) => {
            format!("The {tool} tool failed, so I cannot answer from it.")
        }
        (Anchor::ToolFailed { tool }, true) => format!("{tool} 도구가 실패하여 답변할 수 없습니다."),
        (Anchor::ContextTruncated { field }, false) => {
            format!("(The {field} list from your screen may be truncated.)")
        }
        (Anchor::ContextTruncated { field }, true) => format!("(화면에서 받은 {field} 목록은 잘렸을 수 있습니다.)"),
        (Anchor::Aggregate { value, .. }, false) => format!("There are exactly {value}."),
        (Anchor::Aggregate { value, .. }, true) => format!("정확히 {value}건입니다."),
        (Anchor::ContinuationDrifted { anomaly }, false) => format!(
            "The results changed since my earlier answer ({anomaly}), so I did not show that next page. Shall I search again?"
        ),
        (Anchor::ContinuationDrifted { anomaly }, true) => format!(
            "이전 답변 이후 결과가 바뀌어({anomaly}) 다음 페이지는 표시하지 않았습니다. 다시 검색할까요?"
        ),
        (Anchor::ValueUnaccounted { value, .. }, false) => {
            format!("The server reports {value}; it sent no accounting to check it against.")
        }
        (Anchor::ValueUnaccounted { value, .. }, true) => {
            format!("서버는 {value}(이)라고 답했습니다. 확인할 집계 정보는 없습니다.")
        }
        (Anchor::InBandFailure { tool }, false) => format!(
            "The data source behind {tool} did not return a usable answer, so I cannot tell you anything about this data right now. Nothing here is inferred from it."
        ),
        (Anchor::InBandFailure { tool }, true) => {
            format!("{tool} 데이터 소스가 사용할 수 있는 응답을 주지 않아 지금은 이 데이터에 대해 말씀드릴 수 없습니다.")
        }
        (Anchor::Absent { cause }, false) => match cause {
            AbsenceCause::ZeroFromStart => "There are none: the search accounted for its answer and found nothing.".into(),
            AbsenceCause::ZeroAfterNarrowing => "None of the previous results match.".into(),
            AbsenceCause::AuthenticationFailed => "Authentication with the data source failed, so nothing was searched.".into(),
            AbsenceCause::BlockedByPermission => "This was not searched: it needs access you do not have.".into(),
        },
        (Anchor::Absent { cause }, true) => match cause {
            AbsenceCause::ZeroFromStart => "해당하는 항목이 없습니다. 검색 서버가 결과 집계와 함께 0건을 확인했습니다.".into(),
            AbsenceCause::ZeroAfterNarrowing => "이전 결과 중에는 해당하는 항목이 없습니다.".into(),
            AbsenceCause::AuthenticationFailed => "데이터 소스 인증에 실패하여 검색하지 못했습니다.".into(),
            AbsenceCause::BlockedByPermission => "접근 권한이 없어 검색하지 않았습니다.".into(),
        },
        (Anchor::NarrowingReleased, false) => {
            "I have let go of that narrowing: your next search covers the whole project. Shall I search everything?".into()
        }
        (Anchor::NarrowingReleased, true) => "좁힌 범위는 해제했습니다. 다음 검색은 전체를 대상으로 합니다. 전체에서 다시 찾을까요?".into(),
        (Anchor::OutsideScope { .. }, false) => {
            "The narrowed search returned results outside your previous results, so I discarded them and cannot answer the narrowed question.".into()
        }
        (Anchor::OutsideScope { .. }, true) => "좁힌 검색 결과가 이전 결과 범위를 벗어나 버렸습니다. 좁힌 질문에는 답할 수 없습니다.".into(),
        (Anchor::StitchAbandoned { anomaly }, false) => {
            format!("I stopped combining result pages because {anomaly}; only the first page is shown.")
        }
        (Anchor::StitchAbandoned { anomaly }, true) => {
            format!("결과 페이지를 이어 붙이다가 중단했습니다({anomaly}). 첫 페이지만 표시합니다.")
        }
        (Anchor::NoValue { .. }, false) => "The data source returned no value for this, so I cannot state a number.".into(),
        (Anchor::NoValue { .. }, true) => "데이터 소스가 값을 돌려주지 않아 숫자를 말씀드릴 수 없습니다.".into(),
        (Anchor::NothingToNarrow, false) => {
            "There are no earlier results to narrow in this conversation. What should I search for?".into()
        }
        (Anchor::NothingToNarrow, true) => "이 대화에는 좁힐 이전 결과가 없습니다. 무엇을 검색할까요?".into(),
        (Anchor::ContextMissing { field }, false) => {
            format!("Which {field} do you mean? Your screen did not say which {field} you are on.")
        }
        (Anchor::ContextMissing { field }, true) => {
            // The object particle follows the noun's last sound.
            let (noun, object) = match field.as_str() {
                "floor" => ("층", "층을"),
                "project" => ("프로젝트", "프로젝트를"),
                other => (other, other),
            };
            format!("어느 {object} 말씀하시는 건가요? 화면에서 현재 {noun} 정보를 받지 못했습니다.")
        }
        (Anchor::NarrowingUnsupported { .. }, false) => {
            "I cannot narrow the previous results by a different search term; I can run a new search instead.".into()
        }
        (Anchor::NarrowingUnsupported { .. }, true) => {
            "이전 결과를 다른 검색어로 좁힐 수는 없습니다. 새로 검색해 드릴 수 있습니다.".into()
        }
        (Anchor::StitchCapped { pages }, false) => format!("Only the first {pages} pages are combined here."),
        (Anchor::StitchCapped { pages }, true) => format!("처음 {pages}페이지만 이어 붙였습니다."),
    }
}
