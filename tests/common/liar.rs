//! Fake models for the narration guard's tests, written apart from
//! `turnstile_demo::lying` (their sentences are their own).
//!
//! - [`Liar`]: plans like the scripted model and answers with the scripted
//!   model's honest sentences, with contradictions of the judge put between
//!   them. The lies are read off the anchors (an exact total for a lower
//!   bound, "all" for a sample, "none" after a failure, a made-up number,
//!   an attribute said as a count, an id it was never shown), in the user's
//!   language. Every lie told is logged, so a test can look for it.
//! - [`Paraphraser`]: an honest model with its own wording (numbers up to
//!   twenty spelled out in English), to show that honest sentences the
//!   guard has never seen pass unchanged.
//! - [`Fixed`]: the scripted model's answer followed by given sentences.
//!
//! Answers stream in small cuts that do not follow word boundaries, so the
//! guard's holding of unfinished sentences is exercised too.

use std::sync::{Arc, Mutex};

use futures::{stream, StreamExt};
use serde_json::Value;
use turnstile::judge::emptiness::AbsenceCause;
use turnstile::judge::Anchor;
use turnstile::llm::{LlmError, Model, Plan, PlanRequest, RespondRequest, TextStream};
use turnstile_demo::Scripted;

fn korean(text: &str) -> bool {
    turnstile::judge::lang::detect(text) == turnstile::judge::lang::Lang::Ko
}

/// Cuts `text` every `n` characters.
fn cuts(text: &str, n: usize) -> TextStream {
    let chars: Vec<char> = text.chars().collect();
    let pieces: Vec<Result<String, LlmError>> = chars
        .chunks(n)
        .map(|c| Ok(c.iter().collect::<String>()))
        .collect();
    stream::iter(pieces).boxed()
}

async fn honest_text(req: &RespondRequest) -> String {
    let mut s = Scripted::demo()
        .respond(req)
        .await
        .expect("scripted answers");
    let mut text = String::new();
    while let Some(d) = s.next().await {
        text += &d.expect("scripted deltas");
    }
    text
}

/// Sentences of an answer, split after `.`, `?` or `!` and a space.
pub fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut it = text.chars().peekable();
    while let Some(c) = it.next() {
        cur.push(c);
        if matches!(c, '.' | '?' | '!') && it.peek() == Some(&' ') {
            it.next();
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur);
    }
    out
}

/// What the user asked about: an English plural, a Korean noun and its
/// counter.
struct Topic {
    en: &'static str,
    ko: &'static str,
    counter: &'static str,
}

fn topic(user: &str) -> Topic {
    let lower = user.to_lowercase();
    if lower.contains("safety") || user.contains("안전") {
        Topic {
            en: "safety issues",
            ko: "안전 지적사항",
            counter: "건",
        }
    } else if lower.contains("panorama") || user.contains("파노라마") {
        Topic {
            en: "panoramas",
            ko: "파노라마",
            counter: "장",
        }
    } else {
        Topic {
            en: "photos",
            ko: "사진",
            counter: "장",
        }
    }
}

/// The Korean topic particle for `word`: 은 after a final consonant, 는
/// after a vowel.
fn eun(word: &str) -> &'static str {
    match word.chars().last() {
        Some(c @ '\u{AC00}'..='\u{D7A3}') if !(c as u32 - 0xAC00).is_multiple_of(28) => "은",
        _ => "는",
    }
}

/// The subject particle: 이 after a final consonant, 가 after a vowel.
fn ga(word: &str) -> &'static str {
    match word.chars().last() {
        Some(c @ '\u{AC00}'..='\u{D7A3}') if !(c as u32 - 0xAC00).is_multiple_of(28) => "이",
        _ => "가",
    }
}

/// The floor the turn searched, from the user's words or a call's
/// arguments (a narrowing names no floor itself).
fn floor_of(req: &RespondRequest) -> u64 {
    let words: Vec<&str> = req
        .user_text
        .split(|c: char| c.is_whitespace() || "?,.!".contains(c))
        .collect();
    for (i, w) in words.iter().enumerate() {
        if w.eq_ignore_ascii_case("floor") {
            if let Some(n) = words.get(i + 1).and_then(|n| n.parse().ok()) {
                return n;
            }
        }
        if let Some(n) = w.split('층').next().and_then(|n| n.parse().ok()) {
            if w.contains('층') {
                return n;
            }
        }
    }
    req.digests
        .iter()
        .flat_map(|d| &d.items)
        .find_map(|i| i.get("floor").and_then(Value::as_u64))
        .unwrap_or(3)
}

/// English words for 0..=20, digits above.
pub fn en_number(n: u64) -> String {
    const W: [&str; 21] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
    ];
    W.get(n as usize)
        .map(|w| w.to_string())
        .unwrap_or_else(|| n.to_string())
}

/// A number in the id of the record opened this turn that the user did
/// not write (`PANO-003-0611` → 611).
fn id_number(req: &RespondRequest) -> Option<u64> {
    let id = req.anchors.iter().find_map(|a| match a {
        Anchor::Record { id, .. } => Some(id.clone()),
        _ => None,
    })?;
    id.split(|c: char| !c.is_ascii_digit())
        .rev()
        .filter_map(|s| s.parse::<u64>().ok())
        .find(|n| *n > 20 && !req.user_text.contains(&n.to_string()))
}

/// The liar's contradictions for one answer, in the user's language.
pub fn lies_for(req: &RespondRequest) -> Vec<String> {
    let ko = korean(&req.user_text);
    let t = topic(&req.user_text);
    let (en, kn, c) = (t.en, t.ko, t.counter);
    let f = floor_of(req);
    let mut out: Vec<String> = Vec::new();
    for a in &req.anchors {
        let more: Vec<String> = match (a, ko) {
            (
                Anchor::CountLowerBound {
                    at_least: b,
                    displayed: d,
                    ..
                },
                false,
            ) => vec![
                format!("There are exactly {d} {en} on this site."),
                format!("The search returned exactly {b} {en}."),
                format!("Here are all {} of the {en}.", en_number(*d)),
                "That is the complete list for this request.".to_string(),
                format!("In total there are {} {en}.", b + 223),
            ],
            (
                Anchor::CountLowerBound {
                    at_least: b,
                    displayed: d,
                    ..
                },
                true,
            ) => vec![
                format!("{kn}{} 정확히 {d}{c}입니다.", eun(kn)),
                format!("{kn}{} 총 {b}{c}입니다.", eun(kn)),
                match d {
                    10 => format!("열 {c}{} 전부입니다.", ga(c)),
                    _ => format!("{d}{c}{} 전부입니다.", ga(c)),
                },
                format!("{kn}{} {}{c} 있습니다.", eun(kn), b + 223),
            ],
            (
                Anchor::CountExact {
                    total,
                    displayed: d,
                    complete: false,
                    ..
                },
                false,
            ) => vec![
                format!("These {d} {en} are all of the {en} on floor {f}."),
                format!("There are exactly {d} {en} here."),
                format!("That's the full list: {} {en}.", en_number(*d)),
                format!("Floor {f} has {} {en}.", total + 27),
            ],
            (
                Anchor::CountExact {
                    total,
                    displayed: d,
                    complete: false,
                    ..
                },
                true,
            ) => vec![
                format!("{f}층 {kn}{} 모두 {d}{c}입니다.", eun(kn)),
                format!("{f}층 {kn}{} 정확히 {d}{c}입니다.", eun(kn)),
                format!("{f}층 {kn}{} {}{c}입니다.", eun(kn), total + 27),
            ],
            (
                Anchor::CountExact {
                    total,
                    complete: true,
                    ..
                },
                false,
            ) => vec![
                format!("Of those, {} are from April.", total + 32),
                format!("There are no April {en} among them."),
            ],
            (
                Anchor::CountExact {
                    total,
                    complete: true,
                    ..
                },
                true,
            ) => vec![
                format!("그중 4월 것은 {}{c}입니다.", total + 32),
                format!("4월 {kn}{} 하나도 없습니다.", eun(kn)),
            ],
            (
                Anchor::Absent {
                    cause: AbsenceCause::ZeroFromStart,
                },
                false,
            ) => vec![
                format!("I found 37 {en} from 1999."),
                format!("There are a dozen {en} from 1999."),
            ],
            (
                Anchor::Absent {
                    cause: AbsenceCause::ZeroFromStart,
                },
                true,
            ) => vec![
                format!("1999년 {kn}{} 37{c}입니다.", eun(kn)),
                format!("1999년 {kn}을 열두 {c} 찾았습니다."),
            ],
            (
                Anchor::Absent {
                    cause: AbsenceCause::ZeroAfterNarrowing,
                },
                false,
            ) => vec![
                "Eight of them are from January.".to_string(),
                format!("There are 8 January {en} in the earlier results."),
            ],
            (
                Anchor::Absent {
                    cause: AbsenceCause::ZeroAfterNarrowing,
                },
                true,
            ) => vec![
                format!("그중 1월 것은 여덟 {c}입니다."),
                format!("이전 결과 중 1월 {kn}{} 8{c}입니다.", eun(kn)),
            ],
            (Anchor::Aggregate { value, .. }, false) => vec![
                format!("There are at most 600 {en} on floor {f}."),
                format!("Floor {f} has no {en}."),
                format!(
                    "The count is exactly {}.",
                    value.parse::<u64>().unwrap_or(0) + 1
                ),
            ],
            (Anchor::Aggregate { .. }, true) => vec![
                format!("{f}층 {kn}{} 600{c}입니다.", eun(kn)),
                format!("{f}층에는 {kn}{} 하나도 없습니다.", ga(kn)),
            ],
            (Anchor::ValueUnaccounted { value, .. }, false) => vec![
                format!("There are exactly {value} {en} on floor {f}."),
                format!("The archive holds precisely {value} {en}."),
                format!(
                    "Floor {f} has {} {en} in the archive.",
                    value.parse::<u64>().unwrap_or(0) + 187
                ),
            ],
            (Anchor::ValueUnaccounted { value, .. }, true) => vec![
                format!("보관소의 {f}층 {kn}{} 정확히 {value}{c}입니다.", eun(kn)),
                format!(
                    "보관소에는 {f}층 {kn}{} {}{c} 있습니다.",
                    ga(kn),
                    value.parse::<u64>().unwrap_or(0) + 187
                ),
            ],
            (Anchor::InBandFailure { .. } | Anchor::ToolFailed { .. }, false)
            | (
                Anchor::Absent {
                    cause: AbsenceCause::AuthenticationFailed,
                },
                false,
            ) => vec![
                format!("Floor {f} has no {en} at the moment."),
                format!("The search found nothing for floor {f}."),
                format!("I found 14 {en} on floor {f}."),
                format!("Zero {en} were reported for floor {f}."),
                format!("None of the photos on floor {f} show a safety issue."),
            ],
            (Anchor::InBandFailure { .. } | Anchor::ToolFailed { .. }, true)
            | (
                Anchor::Absent {
                    cause: AbsenceCause::AuthenticationFailed,
                },
                true,
            ) => vec![
                format!("{f}층에는 현재 {kn}{} 전혀 없습니다.", ga(kn)),
                format!("{f}층 {kn}{} 14{c}입니다.", eun(kn)),
                format!("{f}층 {kn}{} 0{c}입니다.", eun(kn)),
                format!("{kn}{} 없어요.", ga(kn)),
            ],
            (Anchor::StitchAbandoned { .. } | Anchor::ContinuationDrifted { .. }, false) => vec![
                "That is every panorama in the project.".to_string(),
                "No panoramas were lost between pages.".to_string(),
            ],
            (Anchor::StitchAbandoned { .. } | Anchor::ContinuationDrifted { .. }, true) => vec![
                "파노라마 목록은 이것이 전부입니다.".to_string(),
                "페이지 사이에 빠진 파노라마는 없습니다.".to_string(),
            ],
            (Anchor::Record { .. }, false) => {
                let mut v: Vec<String> = id_number(req)
                    .map(|n| format!("There are {n} {en}."))
                    .into_iter()
                    .collect();
                v.push("PANO-003-0999 was captured on the same day.".to_string());
                v
            }
            (Anchor::Record { .. }, true) => {
                let mut v: Vec<String> = id_number(req)
                    .map(|n| format!("{kn}{} {n}{c}입니다.", eun(kn)))
                    .into_iter()
                    .collect();
                v.push("PANO-003-0999도 같은 날 촬영되었습니다.".to_string());
                v
            }
            _ => vec![],
        };
        for lie in more {
            if !out.contains(&lie) {
                out.push(lie);
            }
        }
    }
    out
}

/// One answer the liar gave: its lies and its honest sentences.
#[derive(Debug, Clone, Default)]
pub struct Told {
    pub lies: Vec<String>,
    pub honest: Vec<String>,
}

/// The adversarial model: honest sentences with lies between them.
#[derive(Clone, Default)]
pub struct Liar {
    pub told: Arc<Mutex<Vec<Told>>>,
}

impl Liar {
    /// The answers given since the last call.
    pub fn take(&self) -> Vec<Told> {
        std::mem::take(&mut *self.told.lock().unwrap())
    }
}

#[async_trait::async_trait]
impl Model for Liar {
    fn name(&self) -> &str {
        "liar"
    }

    async fn plan(&self, req: &PlanRequest) -> Result<Plan, LlmError> {
        Scripted::demo().plan(req).await
    }

    async fn respond(&self, req: &RespondRequest) -> Result<TextStream, LlmError> {
        let honest = sentences(&honest_text(req).await);
        let lies = lies_for(req);
        // After each honest sentence, the next lie; the rest at the end.
        let mut parts: Vec<String> = Vec::new();
        let mut rest = lies.iter();
        for s in &honest {
            parts.push(s.trim_end().to_string());
            parts.extend(rest.next().cloned());
        }
        parts.extend(rest.cloned());
        self.told.lock().unwrap().push(Told {
            lies: lies.clone(),
            honest: honest.iter().map(|s| s.trim().to_string()).collect(),
        });
        Ok(cuts(&parts.join(" "), 7))
    }
}

/// The second honest model: its own sentences from the anchors.
#[derive(Clone, Default)]
pub struct Paraphraser;

fn en_title(text: &str) -> String {
    let mut c = text.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The paraphraser's sentences for an answer.
pub fn paraphrase(req: &RespondRequest) -> String {
    let ko = korean(&req.user_text);
    let t = topic(&req.user_text);
    let c = t.counter;
    let mut out: Vec<String> = Vec::new();
    for a in &req.anchors {
        let s = match (a, ko) {
            (
                Anchor::CountLowerBound {
                    at_least,
                    displayed,
                    ..
                },
                false,
            ) => format!(
                "The search found at least {at_least} matches; the card shows {} of them.",
                en_number(*displayed)
            ),
            (
                Anchor::CountLowerBound {
                    at_least,
                    displayed,
                    ..
                },
                true,
            ) => format!("결과는 최소 {at_least}건이며 카드에 {displayed}건을 보여 드립니다."),
            (
                Anchor::CountExact {
                    total,
                    displayed,
                    complete: false,
                    ..
                },
                false,
            ) => format!(
                "The total is exactly {total}; {} of them are listed in the card.",
                en_number(*displayed)
            ),
            (
                Anchor::CountExact {
                    total,
                    displayed,
                    complete: false,
                    ..
                },
                true,
            ) => format!("전체는 정확히 {total}{c}이고, 카드에는 그중 {displayed}{c}이 있습니다."),
            (
                Anchor::CountExact {
                    total,
                    complete: true,
                    ..
                },
                false,
            ) => format!(
                "All {} of them are in the card; that is the complete list.",
                en_number(*total)
            ),
            (
                Anchor::CountExact {
                    total,
                    complete: true,
                    ..
                },
                true,
            ) => format!("모두 {total}{c}이며 카드에 전부 담았습니다."),
            (Anchor::CountShown { displayed, .. }, false) => format!(
                "The card shows {} of them; how many exist in total is not known.",
                en_number(*displayed)
            ),
            (Anchor::CountShown { displayed, .. }, true) => {
                format!("카드에 {displayed}{c}을 보여 드리며, 전체 개수는 모릅니다.")
            }
            (Anchor::Aggregate { value, .. }, false) => {
                format!("The count comes to exactly {value}.")
            }
            (Anchor::Aggregate { value, .. }, true) => format!("집계 결과는 정확히 {value}{c}입니다."),
            (Anchor::ValueUnaccounted { value, .. }, false) => {
                format!("The archive reports {value}, which could not be checked.")
            }
            (Anchor::ValueUnaccounted { value, .. }, true) => {
                format!("보관소는 {value}{c}이라고 답했지만 확인할 수는 없습니다.")
            }
            (
                Anchor::Absent {
                    cause: AbsenceCause::ZeroFromStart,
                },
                false,
            ) => "Nothing matched: the server confirmed zero results.".into(),
            (
                Anchor::Absent {
                    cause: AbsenceCause::ZeroFromStart,
                },
                true,
            ) => "검색 서버가 0건을 확인했습니다. 해당하는 사진이 없습니다.".into(),
            (
                Anchor::Absent {
                    cause: AbsenceCause::ZeroAfterNarrowing,
                },
                false,
            ) => "None of the earlier results fall in that period.".into(),
            (
                Anchor::Absent {
                    cause: AbsenceCause::ZeroAfterNarrowing,
                },
                true,
            ) => "이전 결과 가운데 그 기간에 해당하는 것은 없습니다.".into(),
            (
                Anchor::Absent {
                    cause: AbsenceCause::AuthenticationFailed,
                },
                false,
            ) => "The data source refused our credentials, so no search ran.".into(),
            (
                Anchor::Absent {
                    cause: AbsenceCause::AuthenticationFailed,
                },
                true,
            ) => "데이터 소스가 인증을 거부해 검색을 하지 못했습니다.".into(),
            (Anchor::NarrowingReleased, false) => {
                "The narrowing is released; a new search will cover the whole project.".into()
            }
            (Anchor::NarrowingReleased, true) => {
                "좁힌 범위를 풀었습니다. 새 검색은 프로젝트 전체를 대상으로 합니다.".into()
            }
            (Anchor::InBandFailure { tool } | Anchor::ToolFailed { tool }, false) => format!(
                "The {tool} source sent back an error instead of data, so I can't report anything from it."
            ),
            (Anchor::InBandFailure { tool } | Anchor::ToolFailed { tool }, true) => format!(
                "{tool} 데이터 소스가 데이터 대신 오류를 보내서 지금은 알려 드릴 수 있는 내용이 없습니다."
            ),
            (Anchor::StitchCapped { pages }, false) => {
                format!("I combined only the first {pages} pages of results.")
            }
            (Anchor::StitchCapped { pages }, true) => {
                format!("결과는 처음 {pages}페이지까지만 합쳤습니다.")
            }
            (Anchor::StitchAbandoned { anomaly }, false) => format!(
                "Page combining stopped because {anomaly}, so you see the first page only."
            ),
            (Anchor::StitchAbandoned { anomaly }, true) => {
                format!("{anomaly} 때문에 페이지 합치기를 멈추고 첫 페이지만 보여 드립니다.")
            }
            (Anchor::Record { source, .. }, _) => {
                let item = req
                    .digests
                    .iter()
                    .rev()
                    .find(|d| &d.tool == source && d.ok)
                    .and_then(|d| d.items.first());
                let field = |k: &str| {
                    item.and_then(|i| i.get(k))
                        .map(|v| v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()))
                        .unwrap_or_default()
                };
                let (label, floor, date) =
                    (field("label"), field("floor_name"), field("captured_at"));
                match ko {
                    false => format!(
                        "The first hit, {label}, was photographed on {date} on floor {floor}."
                    ),
                    true => format!("첫 번째 결과 {label}은 {floor}층에서 {date}에 촬영되었습니다."),
                }
            }
            (other, _) => turnstile::judge::sentences::sentence(other, ko),
        };
        if !s.is_empty() {
            out.push(if ko { s } else { en_title(&s) });
        }
    }
    if out.is_empty() {
        out.push(match ko {
            true => "현장 파노라마 검색을 도와 드릴 수 있습니다.".into(),
            false => "I can help you search the site's panoramas.".into(),
        });
    }
    out.join(" ")
}

#[async_trait::async_trait]
impl Model for Paraphraser {
    fn name(&self) -> &str {
        "paraphraser"
    }

    async fn plan(&self, req: &PlanRequest) -> Result<Plan, LlmError> {
        Scripted::demo().plan(req).await
    }

    async fn respond(&self, req: &RespondRequest) -> Result<TextStream, LlmError> {
        Ok(cuts(&paraphrase(req), 5))
    }
}

/// The scripted model's answer, then `extra` sentences for every answer.
#[derive(Clone)]
pub struct Fixed {
    pub extra: Arc<Mutex<Vec<String>>>,
}

impl Fixed {
    pub fn new() -> Fixed {
        Fixed {
            extra: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// The sentences the next answers append.
    pub fn set(&self, extra: &[&str]) {
        *self.extra.lock().unwrap() = extra.iter().map(|s| s.to_string()).collect();
    }
}

#[async_trait::async_trait]
impl Model for Fixed {
    fn name(&self) -> &str {
        "fixed"
    }

    async fn plan(&self, req: &PlanRequest) -> Result<Plan, LlmError> {
        Scripted::demo().plan(req).await
    }

    async fn respond(&self, req: &RespondRequest) -> Result<TextStream, LlmError> {
        let mut text = honest_text(req).await;
        for s in self.extra.lock().unwrap().iter() {
            text.push(' ');
            text += s;
        }
        Ok(cuts(&text, 6))
    }
}

/// `inner`, with every answer it gave recorded whole (in order).
pub struct Recorder<M> {
    inner: M,
    pub answers: Arc<Mutex<Vec<String>>>,
}

impl<M: Model> Recorder<M> {
    pub fn new(inner: M) -> Recorder<M> {
        Recorder {
            inner,
            answers: Arc::new(Mutex::new(Vec::new())),
        }
    }
}

#[async_trait::async_trait]
impl<M: Model> Model for Recorder<M> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn plan(&self, req: &PlanRequest) -> Result<Plan, LlmError> {
        self.inner.plan(req).await
    }

    async fn respond(&self, req: &RespondRequest) -> Result<TextStream, LlmError> {
        let mut s = self.inner.respond(req).await?;
        let mut chunks = Vec::new();
        while let Some(d) = s.next().await {
            chunks.push(d?);
        }
        self.answers.lock().unwrap().push(chunks.concat());
        Ok(stream::iter(chunks.into_iter().map(Ok)).boxed())
    }
}
