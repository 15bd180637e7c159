//! The code's own sentence for each anchor, in English and Korean: what a
//! well-behaved responder says (the scripted model says exactly these), and
//! what the narration guard puts in place of a sentence it refuses. They
//! belong to the product, not to the demo: every one is checked by the same
//! guard as the model's sentences (tests/own_sentences.rs).

use super::anchors::ActionOutcome;
use super::emptiness::AbsenceCause;
use super::Anchor;

/// The code's own sentence for an anchor, in English or Korean: what the
/// scripted model says, and what the narration guard puts in place of a
/// sentence it does not let through.
pub fn sentence(anchor: &Anchor, korean: bool) -> String {
    match korean {
        false => english(anchor),
        true => korean_sentence(anchor),
    }
}

fn english(anchor: &Anchor) -> String {
    match anchor {
        Anchor::Record { .. } => String::new(),
        Anchor::Action { .. }
        | Anchor::Delivered { .. }
        | Anchor::LinkUnavailable { .. } => english_outcome(anchor),
        Anchor::ContinuationDrifted { .. }
        | Anchor::CursorRejected { .. }
        | Anchor::NothingToContinue { .. }
        | Anchor::ListComplete
        | Anchor::ContinuationCapped { .. }
        | Anchor::NarrowingReleased
        | Anchor::OutsideScope { .. }
        | Anchor::StitchAbandoned { .. }
        | Anchor::NothingToNarrow
        | Anchor::ContextMissing { .. }
        | Anchor::NarrowingUnsupported { .. }
        | Anchor::NarrowingStale
        | Anchor::StitchCapped { .. } => english_follow_up(anchor),
        Anchor::StepLimit { steps } => {
            format!("I stopped after {steps} tool steps; more may have been needed.")
        }
        Anchor::CountExact { .. }
        | Anchor::CountLowerBound { .. }
        | Anchor::CountShown { .. }
        | Anchor::CountUnknown { .. }
        | Anchor::Aggregate { .. }
        | Anchor::ValueUnaccounted { .. }
        | Anchor::NoValue { .. }
        | Anchor::Absent { .. } => english_count(anchor),
        Anchor::ToolFailed { tool } => {
            format!("The {tool} tool failed, so I cannot answer from it.")
        }
        Anchor::OutcomeUnknown { tool } => format!(
            "The {tool} call reached its server, but no answer came back, so whether it ran is unknown; it was not sent again."
        ),
        Anchor::Refused { tool, .. } => {
            format!("The {tool} call was refused and never sent, so it did not run.")
        }
        Anchor::ServerReason { reason, .. } => {
            format!("The server gave this reason: \u{201c}{reason}\u{201d}.")
        }
        Anchor::NotRun { possible, lang } => super::refusal::copy(*lang, possible),
        Anchor::ContextTruncated { field } => {
            format!("(The {field} list from your screen may be truncated.)")
        }
        Anchor::InBandFailure { tool } => format!(
            "The data source behind {tool} did not return a usable answer, so I cannot tell you anything about this data right now. Nothing here is inferred from it."
        ),
    }
}

/// How an action, an export or a link ended, in English.
fn english_outcome(anchor: &Anchor) -> String {
    match anchor {
        Anchor::Action { outcome, .. } => match outcome {
            ActionOutcome::Accepted => "You approved it, and it was sent once and accepted; it is being processed.".into(),
            ActionOutcome::Completed => "You approved it, and it is done.".into(),
            ActionOutcome::Failed => "You approved it, but it failed, so it was not done.".into(),
            ActionOutcome::Cancelled => "It was cancelled as you decided, and it can no longer be confirmed.".into(),
            ActionOutcome::Expired => "Nobody decided in time, so it was cancelled.".into(),
            ActionOutcome::Unknown => "It was sent before an interruption, and whether it ran is unknown; it will not be sent again.".into(),
            ActionOutcome::NothingPrepared => "Nothing was prepared, so there is nothing to approve.".into(),
            ActionOutcome::PrepareUnread => "The tool answered, but I could not read which action it prepared, so nothing was put to you for approval and nothing was confirmed; whether anything is pending is unknown.".into(),
            ActionOutcome::Ran => "You approved it, and it was sent once.".into(),
            ActionOutcome::NotSent => "It was not sent, as you decided, so nothing was done.".into(),
            ActionOutcome::NotSentExpired => "Nobody approved it in time, so it was not sent and nothing was done.".into(),
            ActionOutcome::CallFailed => "You approved it, but it did not report success.".into(),
            ActionOutcome::Withheld => "It needs your approval, which could not be asked for now, so it was not sent.".into(),
            ActionOutcome::Answered => "Your answer was sent once.".into(),
            ActionOutcome::AnswerFailed => "Your answer was sent once, but the tool did not report success.".into(),
            ActionOutcome::Withdrawn => "Your new message withdrew the request that was waiting for your approval; it was cancelled and never confirmed.".into(),
            ActionOutcome::WithdrawnUncancelled => "Your new message withdrew the request that was waiting for your approval; it was never confirmed, but its cancel did not go through, so the server may hold it until it expires.".into(),
            ActionOutcome::CallWithdrawn => "Your new message withdrew the call that was waiting for your approval, so it was never sent.".into(),
            ActionOutcome::QuestionWithdrawn => "The question was withdrawn, so nothing was answered.".into(),
            ActionOutcome::QuestionExpired => "Nobody answered the question in time, so nothing was answered.".into(),
            ActionOutcome::QuestionRefused => "The tool asked for something I do not ask you for, so nothing was asked or answered and the tool could not go on.".into(),
            ActionOutcome::Connected => "You connected your account, and the call was sent once.".into(),
            ActionOutcome::ConnectDeclined => "Your account was not connected, so the call was not sent and nothing was done.".into(),
            ActionOutcome::ConnectCallFailed => "You connected your account and the call was sent once, but it did not report success.".into(),
            ActionOutcome::ConnectExpired => "Nobody connected the account in time, so the call was not sent and nothing was done.".into(),
        },
        Anchor::Delivered { files, bytes, expires_at, .. } => {
            let mut s = "Your export is ready".to_string();
            let what: Vec<String> = [
                files.map(|n| format!("{n} files")),
                bytes.map(|b| format!("about {}", size(b))),
            ]
            .into_iter()
            .flatten()
            .collect();
            if !what.is_empty() {
                s += &format!(": {}", what.join(", "));
            }
            s += ".";
            match expires_at.as_deref().map(expiry) {
                Some(at) => s + &format!(" The download link below works until {at}."),
                None => s + " The download link is below.",
            }
        }
        Anchor::LinkUnavailable { expired: true } => {
            "The download link I gave earlier has expired; ask for a new export to get a new link.".into()
        }
        Anchor::LinkUnavailable { expired: false } => {
            "No download link was given in this conversation, so there is none to show again.".into()
        }
        _ => unreachable!("english_outcome is called only for its own anchors"),
    }
}

/// A count, a value or an absence, as English says it.
fn english_count(anchor: &Anchor) -> String {
    match anchor {
        Anchor::CountExact { total, complete: true, .. } => {
            format!("There are exactly {total}, and all of them are in the card above.")
        }
        Anchor::CountExact { total, displayed, .. } => {
            format!("Exactly {total} match. These {displayed} are shown in the card above.")
        }
        Anchor::CountLowerBound { at_least, displayed, .. } => format!(
            "At least {at_least} match this search; the exact number is not known. These {displayed} are shown in the card above."
        ),
        Anchor::CountShown { displayed, .. } => {
            format!("These {displayed} are shown in the card above; the total is not known.")
        }
        Anchor::CountUnknown { .. } => {
            "The search answered, but without any count, so I cannot say how many there are.".into()
        }
        Anchor::Aggregate { value, .. } => format!("There are exactly {value}."),
        Anchor::ValueUnaccounted { value, .. } => {
            format!("The server reports {value}; it sent no accounting to check it against.")
        }
        Anchor::Absent { cause } => match cause {
            AbsenceCause::ZeroFromStart => "There are none: the search accounted for its answer and found nothing.".into(),
            AbsenceCause::ZeroAfterNarrowing => "None of the previous results match.".into(),
            AbsenceCause::AuthenticationFailed => "Authentication with the data source failed, so nothing was searched.".into(),
            AbsenceCause::BlockedByPermission => "This was not searched: it needs access you do not have.".into(),
        },
        Anchor::NoValue { .. } => "The data source returned no value for this, so I cannot state a number.".into(),
        _ => unreachable!("english_count is called only for its own anchors"),
    }
}

/// What became of a follow-up (show more, narrowing, stitching), in English.
fn english_follow_up(anchor: &Anchor) -> String {
    match anchor {
        Anchor::NarrowingStale => {
            "Those earlier results were judged under rules that have changed since, so I cannot narrow them; I can run a new search instead.".into()
        }
        Anchor::ContinuationDrifted { anomaly } => format!(
            "The results changed since my earlier answer ({anomaly}), so I did not show that next page, and the total I gave earlier may no longer be right. Shall I search again?"
        ),
        Anchor::CursorRejected { .. } => {
            "The server did not continue the list from where it stopped, so no new page is shown. Shall I search again?".into()
        }
        Anchor::NothingToContinue { shown: false } => {
            "My previous answer showed no list to show more of. What should I search for?".into()
        }
        Anchor::NothingToContinue { shown: true } => {
            "I cannot fetch more of that list from where it stopped; a new search can.".into()
        }
        Anchor::ListComplete => {
            "My earlier answer already showed that list to its end, so there is no more of it to show.".into()
        }
        Anchor::ContinuationCapped { shown } => format!(
            "This list already showed {shown} items, the most I continue one list to; a narrower search can reach the rest."
        ),
        Anchor::NarrowingReleased => {
            "I have let go of that narrowing: your next search covers the whole project. Shall I search everything?".into()
        }
        Anchor::OutsideScope { .. } => {
            "The narrowed search returned results outside your previous results, so I discarded them and cannot answer the narrowed question.".into()
        }
        Anchor::StitchAbandoned { anomaly } => {
            format!("I stopped combining result pages because {anomaly}; only the first page is shown.")
        }
        Anchor::NothingToNarrow => {
            "There are no earlier results to narrow in this conversation. What should I search for?".into()
        }
        Anchor::ContextMissing { field } => {
            format!("Which {field} do you mean? Your screen did not say which {field} you are on.")
        }
        Anchor::NarrowingUnsupported { .. } => {
            "I cannot narrow the previous results by a different search term; I can run a new search instead.".into()
        }
        Anchor::StitchCapped { pages } => format!("Only the first {pages} pages are combined here."),

        _ => unreachable!("english_follow_up is called only for its own anchors"),
    }
}

fn korean_sentence(anchor: &Anchor) -> String {
    match anchor {
        Anchor::Record { .. } => String::new(),
        Anchor::Action { .. }
        | Anchor::Delivered { .. }
        | Anchor::LinkUnavailable { .. } => korean_outcome(anchor),
        Anchor::ContinuationDrifted { .. }
        | Anchor::CursorRejected { .. }
        | Anchor::NothingToContinue { .. }
        | Anchor::ListComplete
        | Anchor::ContinuationCapped { .. }
        | Anchor::NarrowingReleased
        | Anchor::OutsideScope { .. }
        | Anchor::StitchAbandoned { .. }
        | Anchor::NothingToNarrow
        | Anchor::ContextMissing { .. }
        | Anchor::NarrowingUnsupported { .. }
        | Anchor::NarrowingStale
        | Anchor::StitchCapped { .. } => korean_follow_up(anchor),
        Anchor::StepLimit { steps } => {
            format!("도구 단계 {steps}번에서 멈췄습니다. 더 필요했을 수 있습니다.")
        }
        Anchor::CountExact { .. }
        | Anchor::CountLowerBound { .. }
        | Anchor::CountShown { .. }
        | Anchor::CountUnknown { .. }
        | Anchor::Aggregate { .. }
        | Anchor::ValueUnaccounted { .. }
        | Anchor::NoValue { .. }
        | Anchor::Absent { .. } => korean_count(anchor),
        Anchor::ToolFailed { tool } => format!("{tool} 도구가 실패하여 답변할 수 없습니다."),
        Anchor::OutcomeUnknown { tool } => format!(
            "{tool} 요청이 서버에 전달되었지만 응답이 오지 않아 실행 여부를 알 수 없습니다. 다시 보내지 않았습니다."
        ),
        Anchor::Refused { tool, .. } => {
            format!("{tool} 요청은 거부되어 보내지 않았고, 실행되지 않았습니다.")
        }
        Anchor::ServerReason { reason, .. } => {
            format!("서버가 밝힌 이유: \u{201c}{reason}\u{201d}.")
        }
        Anchor::NotRun { possible, lang } => super::refusal::copy(*lang, possible),
        Anchor::ContextTruncated { field } => format!("(화면에서 받은 {field} 목록은 잘렸을 수 있습니다.)"),
        Anchor::InBandFailure { tool } => {
            format!("{tool} 데이터 소스가 사용할 수 있는 응답을 주지 않아 지금은 이 데이터에 대해 말씀드릴 수 없습니다.")
        }
    }
}

/// How an action, an export or a link ended, in Korean.
fn korean_outcome(anchor: &Anchor) -> String {
    match anchor {
        Anchor::Action { outcome, .. } => match outcome {
            ActionOutcome::Accepted => "승인하신 요청을 한 번 보냈고 접수되었습니다. 처리 중입니다.".into(),
            ActionOutcome::Completed => "승인하신 요청이 완료되었습니다.".into(),
            ActionOutcome::Failed => "승인하신 요청이 실패하여 완료되지 않았습니다.".into(),
            ActionOutcome::Cancelled => "결정하신 대로 취소했고, 이제 확정할 수 없습니다.".into(),
            ActionOutcome::Expired => "제때 결정되지 않아 취소했습니다.".into(),
            ActionOutcome::Unknown => "중단 전에 보낸 요청의 결과를 알 수 없습니다. 다시 보내지 않습니다.".into(),
            ActionOutcome::NothingPrepared => "준비된 요청이 없어 승인할 것이 없습니다.".into(),
            ActionOutcome::PrepareUnread => "도구가 응답했지만 어떤 요청을 준비했는지 읽을 수 없어 승인을 여쭙지 않았고 아무것도 확정하지 않았습니다. 대기 중인 요청이 있는지는 알 수 없습니다.".into(),
            ActionOutcome::Ran => "승인하신 요청을 한 번 보냈습니다.".into(),
            ActionOutcome::NotSent => "결정하신 대로 보내지 않았고, 아무것도 실행되지 않았습니다.".into(),
            ActionOutcome::NotSentExpired => "제때 승인되지 않아 보내지 않았고, 아무것도 실행되지 않았습니다.".into(),
            ActionOutcome::CallFailed => "승인하신 요청이 성공했다는 응답은 없었습니다.".into(),
            ActionOutcome::Withheld => "승인이 필요한 요청인데 지금은 승인을 여쭐 수 없어 보내지 않았습니다.".into(),
            ActionOutcome::Answered => "답변을 한 번 보냈습니다.".into(),
            ActionOutcome::AnswerFailed => "답변을 한 번 보냈지만 성공했다는 응답은 없었습니다.".into(),
            ActionOutcome::Withdrawn => "새 메시지로 승인을 기다리던 요청이 철회되었습니다. 요청은 취소되었고 확정되지 않았습니다.".into(),
            ActionOutcome::WithdrawnUncancelled => "새 메시지로 승인을 기다리던 요청이 철회되어 확정되지 않았지만, 취소는 처리되지 않아 만료될 때까지 서버에 남아 있을 수 있습니다.".into(),
            ActionOutcome::CallWithdrawn => "새 메시지로 승인을 기다리던 호출이 철회되어 보내지 않았습니다.".into(),
            ActionOutcome::QuestionWithdrawn => "질문이 철회되어 아무것도 답하지 않았습니다.".into(),
            ActionOutcome::QuestionExpired => "제때 답하지 않아 아무것도 답하지 않았습니다.".into(),
            ActionOutcome::QuestionRefused => "도구가 여쭐 수 없는 정보를 요청하여 아무것도 묻거나 답하지 않았고, 도구는 진행하지 못했습니다.".into(),
            ActionOutcome::Connected => "계정을 연결하셨고, 호출을 한 번 보냈습니다.".into(),
            ActionOutcome::ConnectDeclined => "계정이 연결되지 않아 호출을 보내지 않았고, 아무것도 실행되지 않았습니다.".into(),
            ActionOutcome::ConnectCallFailed => "계정을 연결하셨고 호출을 한 번 보냈지만, 성공했다는 응답은 없었습니다.".into(),
            ActionOutcome::ConnectExpired => "제때 계정을 연결하지 않아 호출을 보내지 않았고, 아무것도 실행되지 않았습니다.".into(),
        },
        Anchor::Delivered { files, bytes, expires_at, .. } => {
            let what: Vec<String> = [
                files.map(|n| format!("파일 {n}개")),
                bytes.map(|b| format!("약 {}", size(b))),
            ]
            .into_iter()
            .flatten()
            .collect();
            let mut s = match what.is_empty() {
                true => "내보내기가 준비되었습니다.".to_string(),
                false => format!("내보내기가 준비되었습니다: {}.", what.join(", ")),
            };
            match expires_at.as_deref().map(expiry) {
                Some(at) => s += &format!(" 아래 다운로드 링크는 {at}까지 유효합니다."),
                None => s += " 다운로드 링크는 아래에 있습니다.",
            }
            s
        }
        Anchor::LinkUnavailable { expired: true } => {
            "앞서 드린 다운로드 링크는 만료되었습니다. 새 링크는 내보내기를 다시 요청하시면 드립니다.".into()
        }
        Anchor::LinkUnavailable { expired: false } => {
            "이 대화에서 드린 다운로드 링크가 없어 다시 보여드릴 수 없습니다.".into()
        }
        _ => unreachable!("korean_outcome is called only for its own anchors"),
    }
}

/// A count, a value or an absence, as Korean says it.
fn korean_count(anchor: &Anchor) -> String {
    match anchor {
        Anchor::CountExact { total, complete: true, .. } => {
            format!("정확히 {total}건이며, 위 카드에 전부 있습니다.")
        }
        Anchor::CountExact { total, displayed, .. } => {
            format!("정확히 {total}건이 일치합니다. 이 {displayed}건은 위 카드에 표시했습니다.")
        }
        Anchor::CountLowerBound { at_least, displayed, .. } => format!(
            "이 검색 조건에 최소 {at_least}건이 일치하며, 정확한 수는 알 수 없습니다. 이 {displayed}건은 위 카드에 표시했습니다."
        ),
        Anchor::CountShown { displayed, .. } => {
            format!("이 {displayed}건을 위 카드에 표시했습니다. 전체 수는 알 수 없습니다.")
        }
        Anchor::CountUnknown { .. } => "검색 결과에 개수 정보가 없어 몇 건인지 말씀드릴 수 없습니다.".into(),
        Anchor::Aggregate { value, .. } => format!("정확히 {value}건입니다."),
        Anchor::ValueUnaccounted { value, .. } => {
            format!("서버는 {value}(이)라고 답했습니다. 확인할 집계 정보는 없습니다.")
        }
        Anchor::Absent { cause } => match cause {
            AbsenceCause::ZeroFromStart => "해당하는 항목이 없습니다. 검색 서버가 결과 집계와 함께 0건을 확인했습니다.".into(),
            AbsenceCause::ZeroAfterNarrowing => "이전 결과 중에는 해당하는 항목이 없습니다.".into(),
            AbsenceCause::AuthenticationFailed => "데이터 소스 인증에 실패하여 검색하지 못했습니다.".into(),
            AbsenceCause::BlockedByPermission => "접근 권한이 없어 검색하지 않았습니다.".into(),
        },
        Anchor::NoValue { .. } => "데이터 소스가 값을 돌려주지 않아 숫자를 말씀드릴 수 없습니다.".into(),
        _ => unreachable!("korean_count is called only for its own anchors"),
    }
}

/// What became of a follow-up (show more, narrowing, stitching), in Korean.
fn korean_follow_up(anchor: &Anchor) -> String {
    match anchor {
        Anchor::NarrowingStale => {
            "이전 결과는 그 뒤 바뀐 규칙으로 판정된 것이라 좁힐 수 없습니다. 새로 검색해 드릴 수 있습니다.".into()
        }
        Anchor::ContinuationDrifted { anomaly } => format!(
            "이전 답변 이후 결과가 바뀌어({anomaly}) 다음 페이지는 표시하지 않았고, 앞서 말씀드린 전체 수도 더는 맞지 않을 수 있습니다. 다시 검색할까요?"
        ),
        Anchor::CursorRejected { .. } => {
            "서버가 목록을 멈춘 곳부터 이어서 주지 않아 새 페이지는 표시하지 않았습니다. 다시 검색할까요?".into()
        }
        Anchor::NothingToContinue { shown: false } => {
            "이전 답변에는 더 보여 드릴 목록이 없었습니다. 무엇을 검색할까요?".into()
        }
        Anchor::NothingToContinue { shown: true } => {
            "그 목록은 멈춘 곳부터 더 가져올 수 없습니다. 새로 검색하면 볼 수 있습니다.".into()
        }
        Anchor::ListComplete => {
            "그 목록은 이전 답변에서 끝까지 보여 드렸으므로 더 보여 드릴 항목이 없습니다.".into()
        }
        Anchor::ContinuationCapped { shown } => format!(
            "이 목록은 이미 {shown}건을 보여 드려 한 목록을 이어 보는 최대치에 이르렀습니다. 더 좁혀 검색하면 나머지를 볼 수 있습니다."
        ),
        Anchor::NarrowingReleased => "좁힌 범위는 해제했습니다. 다음 검색은 전체를 대상으로 합니다. 전체에서 다시 찾을까요?".into(),
        Anchor::OutsideScope { .. } => "좁힌 검색 결과가 이전 결과 범위를 벗어나 버렸습니다. 좁힌 질문에는 답할 수 없습니다.".into(),
        Anchor::StitchAbandoned { anomaly } => {
            format!("결과 페이지를 이어 붙이다가 중단했습니다({anomaly}). 첫 페이지만 표시합니다.")
        }
        Anchor::NothingToNarrow => "이 대화에는 좁힐 이전 결과가 없습니다. 무엇을 검색할까요?".into(),
        Anchor::ContextMissing { field } => {
            // The object particle follows the noun's last sound.
            let (noun, object) = match field.as_str() {
                "floor" => ("층", "층을"),
                "project" => ("프로젝트", "프로젝트를"),
                other => (other, other),
            };
            format!("어느 {object} 말씀하시는 건가요? 화면에서 현재 {noun} 정보를 받지 못했습니다.")
        }
        Anchor::NarrowingUnsupported { .. } => {
            "이전 결과를 다른 검색어로 좁힐 수는 없습니다. 새로 검색해 드릴 수 있습니다.".into()
        }
        Anchor::StitchCapped { pages } => format!("처음 {pages}페이지만 이어 붙였습니다."),

        _ => unreachable!("korean_follow_up is called only for its own anchors"),
    }
}

/// A byte count as people read a file size (decimal units, one decimal).
fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if bytes < 1000 {
        return format!("{bytes} bytes");
    }
    let mut v = bytes as f64 / 1000.0;
    let mut unit = 0;
    while v >= 1000.0 && unit + 1 < UNITS.len() {
        v /= 1000.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// An RFC 3339 instant as `2026-12-02 07:12 UTC`; anything else as given.
fn expiry(at: &str) -> String {
    let b = at.as_bytes();
    let shaped = b.len() >= 17
        && b[4] == b'-'
        && b[7] == b'-'
        && matches!(b[10], b'T' | b't' | b' ')
        && b[13] == b':';
    match shaped && at.ends_with('Z') {
        true => format!("{} {} UTC", &at[..10], &at[11..16]),
        false => at.to_string(),
    }
}
