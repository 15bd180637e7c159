//! The claim extractor against a table of sentences.
//!
//! Expected claims are written in order of position: `C25` count 25,
//! `A3` attribute 3, `A` attribute without a single value (an id, a date),
//! `N` absence, `P` completeness ("the whole population"), `S` a search
//! that ran (after every other claim of the sentence).

use super::*;
use crate::guard::vocab::{vocab, Lang};
use proptest::prelude::*;

fn code(c: &Claim) -> String {
    let v = c.value.map(|v| v.to_string()).unwrap_or_default();
    match c.kind {
        ClaimKind::Count => format!("C{v}"),
        ClaimKind::Attribute => format!("A{v}"),
        ClaimKind::Absence => "N".into(),
        ClaimKind::Completeness => "P".into(),
        ClaimKind::Search => "S".into(),
        ClaimKind::ActionDone => "D".into(),
        ClaimKind::ActionSent => "T".into(),
        ClaimKind::Cancelled => "X".into(),
        ClaimKind::Refusal => "R".into(),
        ClaimKind::Failure => "F".into(),
        ClaimKind::Link => "L".into(),
    }
}

/// Only the outcome claims of each sentence: `D` done, `T` sent, `X`
/// cancelled, `R` refusal, `F` failure, `L` link.
fn run_outcomes(lang: Lang, table: &[(&str, &str)]) {
    let v = vocab(lang);
    let mut failures = Vec::new();
    for (sentence, want) in table {
        let got: Vec<String> = (claims(sentence, v).iter())
            .filter(|c| c.kind.is_outcome())
            .map(code)
            .collect();
        let want: Vec<&str> = want.split_whitespace().collect();
        if got != want {
            failures.push(format!("{sentence:?}: want {want:?}, got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn english_outcome_claims() {
    run_outcomes(
        Lang::En,
        &[
            ("Your seat 12 at 15:00 is reserved.", "D"),
            ("The reservation was made.", "D"),
            ("The export was confirmed and is ready.", "D D"),
            ("It was not reserved.", ""),
            ("It was not sent, as you decided, so nothing was done.", ""),
            ("It was cancelled as you decided, and it can no longer be confirmed.", "X"),
            ("You approved it, and it was sent once.", "T"),
            ("It was sent before an interruption, and whether it ran is unknown; it will not be sent again.", "T"),
            ("You approved it, but it failed, so it was not done.", "F"),
            ("The confirm_action tool failed.", "F"),
            ("You don't have permission to see this.", "R"),
            ("This was not searched: it needs access you do not have.", "R"),
            ("The confirm_action call was refused and never sent, so it did not run.", "R"),
            ("Your download link is ready: https://lms.example.com/api/lms/exports/EXP-1/download?token=guessed", "L D L"),
            ("The download link below works until 2026-12-02 07:12 UTC.", "L"),
            ("The download link I gave earlier has expired; ask for a new export to get a new link.", ""),
            ("See [the docs](https://docs.example.com/a).", "L"),
        ],
    );
}

#[test]
fn korean_outcome_claims() {
    run_outcomes(
        Lang::Ko,
        &[
            ("좌석이 예약되었습니다.", "D"),
            ("예약하지 않았습니다.", ""),
            ("승인하신 요청이 완료되었습니다.", "D"),
            ("결정하신 대로 취소했고, 이제 확정할 수 없습니다.", "X"),
            (
                "결정하신 대로 보내지 않았고, 아무것도 실행되지 않았습니다.",
                "",
            ),
            ("승인하신 요청을 한 번 보냈고 접수되었습니다.", "T T"),
            ("승인하신 요청이 성공했다는 응답은 없었습니다.", ""),
            ("승인하신 요청이 실패하여 완료되지 않았습니다.", "F"),
            ("접근 권한이 없어 검색하지 않았습니다.", "R"),
            (
                "아래 다운로드 링크는 2026-12-02 07:12 UTC까지 유효합니다.",
                "L",
            ),
            ("앞서 드린 다운로드 링크는 만료되었습니다.", ""),
            (
                "다운로드 링크가 준비되었습니다: https://lms.example.com/x",
                "D L",
            ),
        ],
    );
}

fn run(lang: Lang, table: &[(&str, &str)]) {
    let v = vocab(lang);
    let mut failures = Vec::new();
    for (sentence, want) in table {
        // Search claims are listed (as `S`, last) only in the tables
        // that test them.
        let got: Vec<String> = claims(sentence, v)
            .iter()
            .filter(|c| c.kind != ClaimKind::Search || want.contains('S'))
            .filter(|c| !c.kind.is_outcome())
            .map(code)
            .collect();
        let want: Vec<&str> = want.split_whitespace().collect();
        if got != want {
            failures.push(format!(
                "{sentence:?}: want {want:?}, got {got:?} ({:?})",
                claims(sentence, v)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} wrong:\n{}",
        failures.len(),
        table.len(),
        failures.join("\n")
    );
}

/// The scripted model's honest sentences (src/llm/scripted.rs), with
/// values filled in: only real absence and completeness claims.
const EN_HONEST: &[(&str, &str)] = &[
    ("The top one, PANO-003-0611 (floor 3, 2026-08-28), is shown above in detail; it notes: crack in slab, missing guardrail.", "A A3 A"),
    ("Those earlier results were judged under rules that have changed since, so I cannot narrow them; I can run a new search instead.", ""),
    ("I stopped after 6 tool steps; more may have been needed.", "C6"),
    ("There are exactly 25, and all of them are in the card above.", "C25 P"),
    ("Exactly 613 match. ", "C613"),
    ("These 10 are shown in the card above.", "C10"),
    ("At least 189 match this search; the exact number is not known. ", "C189"),
    ("These 10 are shown in the card above; the total is not known.", "C10"),
    ("The search answered, but without any count, so I cannot say how many there are.", ""),
    ("The safety_search tool failed, so I cannot answer from it.", ""),
    ("(The floors list from your screen may be truncated.)", ""),
    ("There are exactly 42.", "C42"),
    ("The results changed since my earlier answer (the total went from 189 to 190), so I did not show that next page. ", "C189 C190"),
    ("Shall I search again?", ""),
    ("The server reports 613; it sent no accounting to check it against.", "C613"),
    ("The data source behind safety_search did not return a usable answer, so I cannot tell you anything about this data right now. ", ""),
    ("Nothing here is inferred from it.", ""),
    ("There are none: the search accounted for its answer and found nothing.", "N N"),
    ("None of the previous results match.", "N"),
    ("Authentication with the data source failed, so nothing was searched.", ""),
    ("This was not searched: it needs access you do not have.", ""),
    ("I have let go of that narrowing: your next search covers the whole project. ", ""),
    ("Shall I search everything?", ""),
    ("The narrowed search returned results outside your previous results, so I discarded them and cannot answer the narrowed question.", ""),
    ("I stopped combining result pages because the cursor repeated; only the first page is shown.", ""),
    ("The data source returned no value for this, so I cannot state a number.", ""),
    // A real absence claim (of earlier results, not of data).
    ("There are no earlier results to narrow in this conversation. What should I search for?", "N"),
    ("I cannot narrow the previous results by a different search term; I can run a new search instead.", ""),
    ("Only the first 3 pages are combined here.", "C3"),
    ("The top one, PANO-B1-0007 (floor B1, 2026-03-02), is shown above in detail; it notes: no hard hat, formwork complete.", "A A1 A"),
    ("I stopped combining result pages because the total changed between pages (189 → 190); only the first page is shown.", "C189 C190"),
    ("I stopped combining result pages because one page gave an exact total and another a lower bound; only the first page is shown.", ""),
    ("I stopped combining result pages because a later page repeated 3 items of an earlier one; only the first page is shown.", "C3"),
    ("The results changed since my earlier answer (next page discarded: a page arrived without accounting), so I did not show that next page. ", ""),
    ("I can search the site's panoramas. ", ""),
    ("Try \"show safety issues on floor 3\" or \"show photos from 1999\".", "A3 A1999"),
];

const EN: &[(&str, &str)] = &[
    // the lies
    ("There are exactly 10 safety issues", "C10"),
    ("There are no safety issues on floor 3", "N A3"),
    (
        "Here are all 651 photos; that is the complete list.",
        "P C651 P",
    ),
    ("PANO-003-0611 was captured on 2026-08-28.", "A A"),
    // numbers
    ("There are 25.", "C25"),
    ("I found twenty-five photos.", "C25"),
    ("There are a hundred and eighty-nine issues.", "C189"),
    ("There are 3,000 panoramas in total.", "C3000"),
    ("At least one hundred twenty results match.", "C120"),
    ("There are two dozen items.", "C24"),
    ("Two thousand three hundred rows matched.", "C2300"),
    ("Seven of the photos show cracks.", "C7"),
    ("The card shows 10 of at least 189.", "C10 C189"),
    ("Only one photo is shown.", "C1"),
    ("The top one is shown.", ""),
    ("There are ten issues.", "C10"),
    // attributes
    ("Step 2 of the inspection found 4 issues.", "A2 C4"),
    ("The 3rd floor has 12 panoramas.", "A3 C12"),
    ("Floor B1 has ten photos.", "A1 C10"),
    ("It was taken on 2 April at 10:30.", "A2 A"),
    ("It was taken on April 2, 2026.", "A2 A2026"),
    ("In 2026, 14 issues were filed.", "A2026 C14"),
    ("Page 2 shows 10 more results.", "A2 C10"),
    ("About 95% of them are open.", "A95"),
    ("Ticket TA-00412 is open.", "A412"),
    ("It was captured at 9 am on floor three.", "A9 A3"),
    // absence
    ("No photos were taken on floor 2.", "N A2"),
    ("There is nothing that matches.", "N"),
    ("Nothing was found for April 2.", "N A2"),
    ("Not a single issue was recorded.", "N"),
    ("There aren't any defects.", "N"),
    ("There are zero issues.", "C0 N"),
    ("0 results were returned.", "C0 N"),
    ("There are no results.", "N"),
    ("It found nothing.", "N"),
    ("None.", "N"),
    // honest non-absence
    ("I cannot say how many there are.", ""),
    ("The exact number is not known.", ""),
    ("It has no number.", ""),
    ("There is no way to know the count.", ""),
    (
        "The tool gave no count, so no more than that can be said.",
        "",
    ),
    // completeness
    ("Every photo from floor 3 is shown.", "P A3"),
    ("That's everything.", "P"),
    ("This is the full list of issues.", "P"),
    ("The entire set is shown.", "P"),
    ("All of the photos were taken in 2026.", "P A2026"),
    ("Here are all of them; that is the complete list.", "P P"),
    ("Not at all.", ""),
    ("All right, here they are.", ""),
    ("Not all of them are shown.", ""),
    ("That's all.", "P"),
    ("The search came back empty.", "N"),
];

const KO_HONEST: &[(&str, &str)] = &[
    ("가장 위의 PANO-003-0611(3층, 2026-08-28)을 위에 자세히 표시했습니다. ", "A A3 A"),
    ("기록된 내용: 슬래브 균열, 안전난간 누락.", ""),
    ("이전 결과는 그 뒤 바뀐 규칙으로 판정된 것이라 좁힐 수 없습니다. ", ""),
    ("새로 검색해 드릴 수 있습니다.", ""),
    ("도구 단계 6번에서 멈췄습니다. ", "C6"),
    ("더 필요했을 수 있습니다.", ""),
    ("정확히 25건이며, 위 카드에 전부 있습니다.", "C25 P"),
    ("정확히 613건이 일치합니다. ", "C613"),
    ("이 10건은 위 카드에 표시했습니다.", "C10"),
    ("이 검색 조건에 최소 189건이 일치하며, 정확한 수는 알 수 없습니다. ", "C189"),
    ("이 10건을 위 카드에 표시했습니다. ", "C10"),
    ("전체 수는 알 수 없습니다.", ""),
    ("검색 결과에 개수 정보가 없어 몇 건인지 말씀드릴 수 없습니다.", ""),
    ("safety_search 도구가 실패하여 답변할 수 없습니다.", ""),
    ("(화면에서 받은 floors 목록은 잘렸을 수 있습니다.)", ""),
    ("정확히 42건입니다.", "C42"),
    ("이전 답변 이후 결과가 바뀌어(total 189 → 190) 다음 페이지는 표시하지 않았습니다. ", "C189 C190"),
    ("다시 검색할까요?", ""),
    ("서버는 613(이)라고 답했습니다. ", "C613"),
    ("확인할 집계 정보는 없습니다.", ""),
    ("safety_search 데이터 소스가 사용할 수 있는 응답을 주지 않아 지금은 이 데이터에 대해 말씀드릴 수 없습니다.", ""),
    ("해당하는 항목이 없습니다. ", "N"),
    ("검색 서버가 결과 집계와 함께 0건을 확인했습니다.", "C0 N"),
    ("이전 결과 중에는 해당하는 항목이 없습니다.", "N"),
    ("데이터 소스 인증에 실패하여 검색하지 못했습니다.", ""),
    ("접근 권한이 없어 검색하지 않았습니다.", ""),
    ("좁힌 범위는 해제했습니다. ", ""),
    ("다음 검색은 전체를 대상으로 합니다. ", ""),
    ("전체에서 다시 찾을까요?", ""),
    ("좁힌 검색 결과가 이전 결과 범위를 벗어나 버렸습니다. ", ""),
    ("좁힌 질문에는 답할 수 없습니다.", ""),
    ("결과 페이지를 이어 붙이다가 중단했습니다(cursor repeated). ", ""),
    ("첫 페이지만 표시합니다.", ""),
    ("데이터 소스가 값을 돌려주지 않아 숫자를 말씀드릴 수 없습니다.", ""),
    // A real absence claim (of earlier results), as in English.
    ("좁힐 이전 결과가 없어 전체를 검색했습니다.", "N"),
    ("이전 결과를 다른 검색어로 좁힐 수는 없습니다. ", ""),
    ("처음 3페이지만 이어 붙였습니다.", "C3"),
    ("가장 위의 PANO-B1-0007(B1층, 2026-03-02)을 위에 자세히 표시했습니다. ", "A A1 A"),
    ("기록된 내용: no hard hat, formwork complete.", ""),
    ("결과 페이지를 이어 붙이다가 중단했습니다(a later page repeated 3 items of an earlier one). ", "C3"),
    ("이전 답변 이후 결과가 바뀌어(next page discarded: one page gave an exact total and another a lower bound) 다음 페이지는 표시하지 않았습니다. ", ""),
    ("현장 파노라마를 찾아 드릴 수 있습니다. ", ""),
    ("예: \"3층 안전 지적사항 보여줘\", \"1999년 사진 보여줘\".", "A3 A1999"),
];

const KO: &[(&str, &str)] = &[
    // the lies
    ("3층에는 안전 지적사항이 없습니다.", "A3 N"),
    ("모두 열 장입니다.", "P C10"),
    ("정확히 10건입니다.", "C10"),
    ("PANO-003-0611은 2026-08-28에 촬영되었습니다.", "A A"),
    // numbers with counters
    ("열 장의 사진이 있습니다.", "C10"),
    ("십 건이 일치합니다.", "C10"),
    ("스무 개가 있습니다.", "C20"),
    ("사진은 다섯 장입니다.", "C5"),
    ("지적사항은 스물다섯 건입니다.", "C25"),
    ("정확히 이십삼 건입니다.", "C23"),
    ("총 3,000건입니다.", "C3000"),
    ("10만 건이 넘습니다.", "C100000"),
    ("세 곳에서 발견되었습니다.", "C3"),
    ("한 명이 확인했습니다.", "C1"),
    ("일곱 장이 있습니다.", "C7"),
    ("백 개가 넘습니다.", "C100"),
    ("천장 사진 12장입니다.", "C12"),
    ("서른 장입니다.", "C30"),
    ("아홉 개의 항목이 있습니다.", "C9"),
    ("삼만 오천 장입니다.", "C35000"),
    ("이 두 개를 보세요.", "C2"),
    ("정확히 이 건입니다.", "C2"),
    ("최소 189건이 일치합니다.", "C189"),
    ("위 카드에 10건을 표시했습니다.", "C10"),
    // attributes
    ("4월 8일에 촬영했습니다.", "A4 A8"),
    ("2026년에 촬영된 사진입니다.", "A2026"),
    ("10:30에 촬영했습니다.", "A"),
    ("지하 1층에 5건이 있습니다.", "A1 C5"),
    ("두 번째 사진을 보세요.", "A2"),
    ("이 사진은 3번째입니다.", "A3"),
    ("3층에는 지적사항이 12건 있습니다.", "A3 C12"),
    ("TA-00412 지적사항은 2026-04-01에 등록되었습니다.", "A412 A"),
    // everyday words that look like numerals
    ("이 건은 확인이 필요합니다.", ""),
    ("이건 균열입니다.", ""),
    ("천장에 균열이 있습니다.", ""),
    ("오늘 촬영한 사진입니다.", ""),
    ("이번에는 사진이 선명합니다.", ""),
    // absence
    ("하나도 없습니다.", "N"),
    ("사진이 0장입니다.", "C0 N"),
    ("0건입니다.", "C0 N"),
    ("B1층 사진은 없습니다.", "A1 N"),
    ("관련 사건이 없습니다.", "N"),
    ("해당 사진은 없어요.", "N"),
    ("지적사항은 존재하지 않습니다.", "N"),
    ("지적사항이 없는 것으로 확인되었습니다.", "N"),
    // honest non-absence
    ("할 수 없습니다.", ""),
    ("알 수 없습니다.", ""),
    ("문제없습니다.", ""),
    ("정확히 몇 건인지 알 수 없습니다.", ""),
    // completeness
    ("모든 사진을 보여 드렸습니다.", "P"),
    ("전체 목록입니다.", "P"),
    ("이것이 전부입니다.", "P"),
    ("다 보여 드렸습니다.", "P"),
    ("결과를 빠짐없이 표시했습니다.", "P"),
];

#[test]
fn english_honest_sentences() {
    run(Lang::En, EN_HONEST);
}

#[test]
fn english_sentences() {
    run(Lang::En, EN);
}

#[test]
fn korean_honest_sentences() {
    run(Lang::Ko, KO_HONEST);
}

#[test]
fn korean_sentences() {
    run(Lang::Ko, KO);
}

/// Sentences that say (or deny) that a search ran: `S` when they claim it.
/// A search claim comes after every other claim of its sentence.
const SEARCH: &[(Lang, &str, &str)] = &[
    (
        Lang::En,
        "There were no earlier results to narrow, so this searched everything.",
        "N S",
    ),
    (Lang::En, "I searched the archive.", "S"),
    (Lang::En, "I found these in the card above.", "S"),
    (Lang::En, "It found nothing.", "N S"),
    (
        Lang::En,
        "Authentication with the data source failed, so nothing was searched.",
        "S-",
    ),
    (
        Lang::En,
        "This was not searched: it needs access you do not have.",
        "S-",
    ),
    (
        Lang::En,
        "I could not search, and nothing was found.",
        "N S-",
    ),
    (Lang::En, "What should I search for?", "S-"),
    (Lang::En, "No problem, I found 12 photos.", "C12 S"),
    (
        Lang::Ko,
        "좁힐 이전 결과가 없어 전체를 검색했습니다.",
        "N S",
    ),
    (Lang::Ko, "3층에서 10건을 찾았습니다.", "A3 C10 S"),
    (
        Lang::Ko,
        "데이터 소스 인증에 실패하여 검색하지 못했습니다.",
        "S-",
    ),
    (Lang::Ko, "무엇을 검색할까요?", "S-"),
];

#[test]
fn search_claims() {
    // `S-` marks a sentence that must carry no search claim.
    let mut failures = Vec::new();
    for (lang, sentence, want) in SEARCH {
        let got: Vec<String> = (claims(sentence, vocab(*lang)).iter())
            .filter(|c| !c.kind.is_outcome())
            .map(code)
            .collect();
        let want: Vec<&str> = want.split_whitespace().filter(|w| *w != "S-").collect();
        if got != want {
            failures.push(format!("{sentence:?}: want {want:?}, got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn tables_are_large_enough() {
    assert!(EN.len() + EN_HONEST.len() >= 40);
    assert!(KO.len() + KO_HONEST.len() >= 40);
}

#[test]
fn text_and_span_name_the_matched_words() {
    let s = "Here are all 651 photos; that is the complete list.";
    let c = claims(s, vocab(Lang::En));
    let texts: Vec<&str> = c.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(texts, ["all 651", "651", "complete list"]);
    for c in &c {
        assert_eq!(&s[c.span.clone()], c.text);
    }
    let s = "3층에는 안전 지적사항이 없습니다.";
    let texts: Vec<String> = claims(s, vocab(Lang::Ko))
        .into_iter()
        .map(|c| c.text)
        .collect();
    assert_eq!(texts, ["3층", "지적사항이 없습니다"]);
}

#[test]
fn the_number_value_of_words() {
    let v = vocab(Lang::En);
    let value = |s: &str| {
        claims(s, v)
            .into_iter()
            .find(|c| c.kind == ClaimKind::Count)
            .and_then(|c| c.value)
    };
    assert_eq!(value("a hundred and eighty-nine photos"), Some(189));
    assert_eq!(value("two thousand and twelve photos"), Some(2012));
    assert_eq!(value("twenty-five hundred photos"), Some(2500));
    assert_eq!(value("a dozen photos"), Some(12));
    assert_eq!(value("1,234,567 photos"), Some(1_234_567));
    let k = vocab(Lang::Ko);
    let value = |s: &str| {
        claims(s, k)
            .into_iter()
            .find(|c| c.kind == ClaimKind::Count)
            .and_then(|c| c.value)
    };
    assert_eq!(value("이천이십육 건"), Some(2026));
    assert_eq!(value("삼만 오천 장"), Some(35_000));
    assert_eq!(value("삼만오천 장"), Some(35_000));
    assert_eq!(value("3천 건"), Some(3000));
}

proptest! {
    #[test]
    fn never_panics_and_spans_are_on_char_boundaries(s in any::<String>()) {
        for lang in [Lang::En, Lang::Ko] {
            for c in claims(&s, vocab(lang)) {
                prop_assert!(s.is_char_boundary(c.span.start) && s.is_char_boundary(c.span.end));
                prop_assert!(c.span.start < c.span.end);
                prop_assert_eq!(&s[c.span.clone()], c.text.as_str());
            }
        }
    }

    #[test]
    fn never_panics_on_number_like_text(
        parts in prop::collection::vec(prop_oneof![
            Just("0"), Just("3,000"), Just("99999999999999999999999"), Just("만"), Just("억"), Just("천"),
            Just("no"), Just("all"), Just("none"), Just("nothing"), Just("없습니다"), Just("수"),
            Just("hundred"), Just("thousand"), Just("million"), Just("a"), Just("and"), Just("-"),
            Just("건"), Just("층"), Just("열"), Just("이"), Just(" "), Just("."), Just("("), Just("2026-04-01"),
            Just("twenty-five"), Just("B1"), Just("%"), Just("April"), Just("in"),
        ], 0..16),
    ) {
        let s = parts.concat();
        for lang in [Lang::En, Lang::Ko] {
            for c in claims(&s, vocab(lang)) {
                prop_assert_eq!(&s[c.span.clone()], c.text.as_str());
            }
        }
    }
}
