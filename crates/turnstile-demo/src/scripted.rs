//! The scripted model: a deterministic planner and responder that understand
//! the demo prompts in English and Korean. It is the embedded default, so the
//! demo and the tests run without a model server; it obeys the anchors the
//! way a well-behaved model should, which makes them visible in the demo.
//!
//! Understood (see README "Demo prompts"):
//! - "show safety issues on floor 3" / "3층 안전 지적사항 보여줘"
//! - "show photos from 1999" / "1999년 사진 보여줘"
//! - "show me 12 photos of floor 2" / "2층 사진 12장 보여줘"
//! - "show quality issues on this floor" (floor from the host context)
//! - "reserve seat 12 at 15:00" / "12번 좌석 15시 예약해줘": prepares the
//!   reservation and nothing more; confirming it is the user's to approve.
//! - "notify the site contact about PANO-003-0611" / "tell someone about
//!   PANO-003-0611" / "PANO-003-0611 현장 담당자에게 알려줘": one
//!   `notify_site_contact` call; who is told is the user's to fill in, in
//!   the form the server asks.
//! - "open the permit portal for HW-12" / "sign permit HW-12" / "HW-12
//!   허가서 서명할게": one `open_permit_portal` call; the answer says the
//!   user agreed to open the portal, never that the permit is signed.
//! - "compile the site report for tower-a" / "annex 현장 보고서 만들어줘":
//!   one `compile_site_report` call, which the demo server makes a task.

use futures::stream;
use serde_json::{json, Map, Value};

use turnstile::judge::sentences::sentence;
use turnstile::judge::Anchor;
use turnstile::llm::{
    CallRecord, LlmError, Model, Plan, PlanRequest, PlannedCall, Reply, RespondRequest, TextStream,
};

#[derive(Debug, Default, Clone)]
pub struct Scripted {
    /// The (year, month) a bare month name is read against: "April" is the
    /// most recent April up to it. `None` means today.
    reference: Option<(i64, u32)>,
}

/// The last month of the demo site's data: the demo model reads bare months
/// as of then, so "only those from April" means April 2026 in every year the
/// demo is run.
pub const DEMO_REFERENCE: (i64, u32) = (2026, 8);

impl Scripted {
    /// The scripted model as the demo and the tests use it.
    pub fn demo() -> Self {
        Scripted {
            reference: Some(DEMO_REFERENCE),
        }
    }

    fn year_for(&self, month: u32) -> i64 {
        let (y, m) = self.reference.unwrap_or_else(today);
        if month <= m {
            y
        } else {
            y - 1
        }
    }
}

fn is_korean(text: &str) -> bool {
    turnstile::judge::lang::detect(text) == turnstile::judge::lang::Lang::Ko
}

/// Words and numbers of a message, lowercased, punctuation stripped.
fn tokens(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| c.is_whitespace() || ",.?!\"'".contains(c))
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

fn leading_number(t: &str) -> Option<i64> {
    let digits: String = t.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

/// The floor a message names: "floor 3", "3rd floor", "3층", "b1", "지하1층".
/// "This floor" is not a floor the message names: see [`this_floor`].
fn floor(text: &str) -> Option<i64> {
    let toks = tokens(text);
    for (i, t) in toks.iter().enumerate() {
        if t == "floor" {
            if let Some(n) = toks.get(i + 1).and_then(|n| leading_number(n)) {
                return Some(n);
            }
            if let Some(n) = i.checked_sub(1).and_then(|p| leading_number(&toks[p])) {
                return Some(n);
            }
        }
        if let Some(rest) = t.strip_prefix('b') {
            if let Ok(n) = rest.parse::<i64>() {
                return Some(-n);
            }
        }
        if let Some(num) = t.strip_suffix("층") {
            if let Some(n) = num.strip_prefix("지하").and_then(|n| n.parse::<i64>().ok()) {
                return Some(-n);
            }
            if let Ok(n) = num.parse::<i64>() {
                return Some(n);
            }
        }
    }
    None
}

/// "this floor" / "이 층": the floor on the user's screen. Which floor that
/// is, is the host context's to say, and the agent's to read: the model
/// only says that the request refers to it ([`Plan::from_context`]).
fn this_floor(text: &str) -> bool {
    has_any(
        text,
        &["this floor", "current floor", "이 층", "이층", "현재 층"],
    )
}

/// A four-digit year 1900..2100 ("from 1999", "1999년").
fn year(text: &str) -> Option<i64> {
    tokens(text).iter().find_map(|t| {
        let t = t.strip_suffix('년').unwrap_or(t);
        (t.len() == 4)
            .then(|| t.parse::<i64>().ok())
            .flatten()
            .filter(|y| (1900..2100).contains(y))
    })
}

/// "show me 12 …", "12 photos", "12장", "12개" — a requested page size.
fn requested_limit(text: &str, floor: Option<i64>, year: Option<i64>) -> Option<i64> {
    let toks = tokens(text);
    toks.iter().enumerate().find_map(|(i, t)| {
        let n = if let Some(n) = t.strip_suffix('장').or_else(|| t.strip_suffix('개')) {
            n.parse::<i64>().ok()
        } else {
            let n = t.parse::<i64>().ok()?;
            let prev = i.checked_sub(1).map(|p| toks[p].as_str());
            let next = toks.get(i + 1).map(String::as_str);
            let is_count = prev == Some("me")
                || prev == Some("show")
                || matches!(
                    next,
                    Some("photos" | "panoramas" | "images" | "pictures" | "issues")
                );
            is_count.then_some(n)
        };
        n.filter(|n| Some(*n) != floor && Some(*n) != year && (1..=50).contains(n))
    })
}

fn topic(text: &str) -> Option<&'static str> {
    let lower = text.to_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| lower.contains(w));
    if has(&["safety", "안전"]) {
        Some("safety")
    } else if has(&["quality", "품질", "defect", "하자"]) {
        Some("quality")
    } else if has(&["progress", "공정", "진척"]) {
        Some("progress")
    } else {
        None
    }
}

fn wants_photos(text: &str) -> bool {
    let lower = text.to_lowercase();
    [
        "photo",
        "panorama",
        "image",
        "picture",
        "issue",
        "show",
        "find",
        "사진",
        "파노라마",
        "이미지",
        "지적",
        "보여",
        "찾아",
    ]
    .iter()
    .any(|w| lower.contains(w))
}

/// A month named in the text ("April", "apr", "4월").
fn month(text: &str) -> Option<u32> {
    const NAMES: [&str; 12] = [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ];
    let toks = tokens(text);
    toks.iter().find_map(|t| {
        if let Some(n) = t.strip_suffix('월').and_then(|n| n.parse::<u32>().ok()) {
            return (1..=12).contains(&n).then_some(n);
        }
        NAMES
            .iter()
            .position(|m| t == m || (t.len() == 3 && m.starts_with(t.as_str())))
            .map(|i| i as u32 + 1)
    })
}

/// Today's (year, month), from the system clock.
fn today() -> (i64, u32) {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() / 86_400)
        .unwrap_or(0) as i64;
    // Civil-from-days (Howard Hinnant's algorithm), enough for year and month.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m as u32)
}

fn month_range(year: i64, month: u32) -> (String, String) {
    let last = match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    (
        format!("{year}-{month:02}-01"),
        format!("{year}-{month:02}-{last:02}"),
    )
}

fn has_any(text: &str, words: &[&str]) -> bool {
    let lower = text.to_lowercase();
    words.iter().any(|w| lower.contains(w))
}

fn is_narrowing(text: &str) -> bool {
    has_any(
        text,
        &[
            "only those",
            "just those",
            "of those",
            "those from",
            "those on",
            "그중",
            "그 중",
            "이 중",
            "그 가운데",
        ],
    )
}

fn is_count(text: &str) -> bool {
    has_any(
        text,
        &[
            "how many",
            "count",
            "number of",
            "몇 장",
            "몇장",
            "몇 개",
            "몇개",
            "몇 건",
            "몇건",
            "개수",
        ],
    )
}

fn is_list_all(text: &str) -> bool {
    has_any(
        text,
        &[
            "list all",
            "all panoramas",
            "all photos",
            "every panorama",
            "모든 파노라마",
            "전체 파노라마",
            "모든 사진",
            "전체 사진",
        ],
    )
}

/// "… in detail", "자세히": search, then open the top hit.
fn wants_detail(text: &str) -> bool {
    has_any(text, &["in detail", "detail", "자세히", "상세"])
}

/// The reservation desk's tools. Once one of them was called this turn the
/// planner calls nothing more: whether to confirm is the user's decision,
/// asked in the answer, never the model's next step.
const ACTION_TOOLS: [&str; 4] = [
    "prepare_seat_reservation",
    "confirm_action",
    "cancel_action",
    "get_action",
];

/// "reserve seat 12 …", "book …", "… 예약해줘".
/// "download all my lecture files" / "수강 중인 모든 강의 파일 받아줘".
fn is_export(text: &str) -> bool {
    has_any(
        text,
        &["lecture file", "lecture material", "강의 파일", "강의 자료"],
    )
}

/// "compile the site report for tower-a", "annex 현장 보고서 만들어줘".
fn is_site_report(text: &str) -> bool {
    has_any(
        text,
        &["site report", "weekly report", "현장 보고서", "주간 보고서"],
    )
}

/// The demo project a sentence names, as written: `tower-a` or `annex`.
fn project(text: &str) -> Option<&'static str> {
    let t = text.to_lowercase();
    ["tower-a", "annex"].into_iter().find(|p| t.contains(p))
}

/// "show more", "next page", "더 보여줘": more of the list shown last.
fn is_show_more(text: &str) -> bool {
    let t = text.trim().to_lowercase();
    has_any(
        &t,
        &[
            "show more",
            "more results",
            "next page",
            "더 보여",
            "더 보기",
            "다음 페이지",
        ],
    ) || matches!(t.trim_end_matches(['.', '!', '?']), "more" | "more please")
}

/// "show me the link again" / "링크 다시 보여줘".
fn is_link_again(text: &str) -> bool {
    has_any(text, &["link", "링크"]) && !is_export(text)
}

/// The export the earlier steps previewed and have not confirmed (a
/// refused confirm does not count): its `exportId`, as the digest shows it
/// (`data.exportId` when the preview wraps it in the seed's envelope).
fn previewed_export(steps: &[Vec<CallRecord>]) -> Option<String> {
    let calls = || steps.iter().flatten();
    if calls().any(|c| c.tool == "confirm_lms_material_export" && c.digest.ok) {
        return None;
    }
    let preview = calls()
        .rev()
        .find(|c| c.tool == "export_all_lms_materials" && c.digest.ok)?;
    preview
        .digest
        .items
        .first()
        .and_then(|item| item.get("exportId").or_else(|| item.get("data.exportId")))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// "notify the site contact about …", "tell someone about …", "… 현장
/// 담당자에게 알려줘".
fn is_notify(text: &str) -> bool {
    has_any(
        text,
        &[
            "notify",
            "tell someone",
            "let someone know",
            "site contact",
            "담당자에게 알려",
            "담당자한테 알려",
            "담당자에게 전해",
        ],
    )
}

/// "open the permit portal for HW-12", "sign permit HW-12", "HW-12 허가서
/// 서명할게".
fn is_permit(text: &str) -> bool {
    tokens(text).iter().any(|t| t == "permit" || t == "permits")
        || has_any(text, &["허가서", "허가증"])
}

/// A reference as people write one: `PANO-003-0611`, `HW-12` — letters,
/// then dash-separated groups with a digit among them; upper-cased, and a
/// Korean particle after it ("HW-12를") is not part of it. Not checked
/// here: the server says what exists.
fn reference(text: &str) -> Option<String> {
    let is_reference = |w: &str| {
        let mut parts = w.split('-');
        let head = parts.next().unwrap_or_default();
        let rest: Vec<&str> = parts.collect();
        !head.is_empty()
            && head.chars().all(|c| c.is_ascii_alphabetic())
            && !rest.is_empty()
            && rest
                .iter()
                .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric()))
            && rest.iter().any(|p| p.chars().any(|c| c.is_ascii_digit()))
    };
    text.split(|c: char| c.is_whitespace() || ",.?!\"'()".contains(c))
        .map(|w| w.trim_matches(|c: char| !c.is_ascii_alphanumeric()))
        .find(|w| is_reference(w))
        .map(str::to_ascii_uppercase)
}

fn is_reservation(text: &str) -> bool {
    has_any(text, &["reserve", "reservation", "book ", "예약"])
}

/// The seat a message names, as written: "seat 12", "seat #12", "12번
/// 좌석", "좌석 12번", "12번석". Not checked here: the server says which
/// seats exist.
fn seat(text: &str) -> Option<String> {
    let toks = tokens(text);
    let digits = |t: &str| -> Option<String> {
        let d: String = t
            .trim_start_matches('#')
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        (!d.is_empty()).then_some(d)
    };
    for (i, t) in toks.iter().enumerate() {
        if matches!(t.as_str(), "seat" | "좌석" | "자리") {
            if let Some(d) = toks.get(i + 1).and_then(|n| digits(n)) {
                return Some(d);
            }
        }
        if let Some((num, _)) = t.split_once('번') {
            if !num.is_empty() && num.chars().all(|c| c.is_ascii_digit()) {
                return Some(num.to_string());
            }
        }
    }
    None
}

/// The time a message names, as `HH:MM` on the 24-hour clock: "15:00",
/// "at 3pm", "3:30 pm", "15시", "15시 30분", "오후 3시 반". An hour past 23
/// is passed on as written, for the server to refuse.
fn clock_time(text: &str) -> Option<String> {
    let toks = tokens(text);
    let leading = |t: &str| -> Option<u32> {
        let d: String = t.chars().take_while(|c| c.is_ascii_digit()).collect();
        d.parse().ok()
    };
    let hhmm = |h: u32, m: u32| format!("{h:02}:{m:02}");
    for (i, t) in toks.iter().enumerate() {
        let next = toks.get(i + 1).map(String::as_str).unwrap_or("");
        // Korean: "15시", "15시30분", "15시 30분", "3시 반", after 오전/오후.
        if let Some((num, rest)) = t.split_once('시') {
            if let Ok(mut h) = num.parse::<u32>() {
                let minutes = |r: &str| {
                    if r.starts_with('반') {
                        Some(30)
                    } else {
                        r.split_once('분').and_then(|(m, _)| m.parse::<u32>().ok())
                    }
                };
                let m = minutes(rest).or_else(|| minutes(next)).unwrap_or(0);
                let before = i.checked_sub(1).map(|p| toks[p].as_str());
                match before {
                    Some("오후") if h < 12 => h += 12,
                    Some("오전") if h == 12 => h = 0,
                    _ => {}
                }
                return Some(hhmm(h, m));
            }
        }
        // English: "15:30", "3pm", "3:30pm", "3 pm", "3:30 pm".
        let (body, meridiem) = match (t.strip_suffix("pm"), t.strip_suffix("am")) {
            (Some(b), _) => (b, Some("pm")),
            (_, Some(b)) => (b, Some("am")),
            _ if matches!(next, "pm" | "am") => (t.as_str(), Some(next)),
            _ => (t.as_str(), None),
        };
        let (h, m) = match body.split_once(':') {
            Some((h, m)) if !h.is_empty() && h.chars().all(|c| c.is_ascii_digit()) => {
                // Two minute digits; a particle may follow ("15:00에").
                let two = m.chars().take_while(|c| c.is_ascii_digit()).count() == 2;
                let Some(m) = leading(m).filter(|_| two) else {
                    continue;
                };
                (leading(h), m)
            }
            Some(_) => continue,
            None if meridiem.is_some() && body.chars().all(|c| c.is_ascii_digit()) => {
                (leading(body), 0)
            }
            None => continue,
        };
        let Some(mut h) = h else { continue };
        match meridiem {
            Some("pm") if h < 12 => h += 12,
            Some("am") if h == 12 => h = 0,
            _ => {}
        }
        return Some(hhmm(h, m));
    }
    None
}

/// The id of the top hit of the last listing this turn searched, if no
/// record has been opened yet.
fn top_hit(steps: &[Vec<CallRecord>]) -> Option<String> {
    let calls = || steps.iter().flatten();
    // One attempt: a failed lookup is not retried step after step.
    if calls().any(|c| c.tool == "get_panorama") {
        return None;
    }
    let search = calls()
        .rev()
        .find(|c| c.tool == "search_photos" && c.digest.ok)?;
    let first = search.digest.items.first()?;
    first
        .get("label")
        .or_else(|| first.get("id"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn call(tool: &str, args: Map<String, Value>) -> PlannedCall {
    PlannedCall {
        id: None,
        tool: tool.into(),
        args,
        invalid_args: None,
    }
}

fn plan(calls: Vec<PlannedCall>, note: &str, narrows_previous: bool) -> Plan {
    Plan {
        calls,
        note: note.into(),
        narrows_previous,
        continues_previous: false,
        from_context: vec![],
        shows_link: false,
    }
}

/// The question-taking demo tool `text` names outright (`use archive_query`).
fn named_tool(text: &str) -> Option<&'static str> {
    ["archive_query", "query_data"].into_iter().find(|t| {
        text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .any(|w| w == *t)
    })
}

impl Scripted {
    fn plan_for(&self, req: &PlanRequest) -> Plan {
        let text = &req.user_text;
        let has_tool = |name: &str| req.tools.iter().any(|t| t.name == name);
        let floor = floor(text);
        // The screen's floor is filled in by the agent, never guessed here.
        let from_context = |mut p: Plan| {
            if floor.is_none() && this_floor(text) {
                p.from_context = vec!["floor".into()];
            }
            p
        };
        let year = year(text);
        let month = month(text);

        // "use archive_query": the user names a demo tool outright, and this
        // model asks for it whether or not it was offered, as real models
        // do with a name they were given. A tool the caller may not use is
        // then refused by the licence gate before it is sent.
        if req.steps.is_empty() {
            if let Some(tool) = named_tool(text) {
                let mut args = Map::new();
                args.insert("question".into(), json!(text));
                return plan(vec![call(tool, args)], "the tool the user named", false);
            }
        }

        // Later steps: open the top hit of a detail request, else answer
        // from what the earlier steps found.
        if !req.steps.is_empty() {
            // The preview was seen: confirm that export, in its own step.
            if let Some(id) = previewed_export(&req.steps) {
                if has_tool("confirm_lms_material_export") {
                    let mut args = Map::new();
                    args.insert("exportId".into(), json!(id));
                    return plan(
                        vec![call("confirm_lms_material_export", args)],
                        "confirm the export the preview showed",
                        false,
                    );
                }
            }
            let acted = req
                .steps
                .iter()
                .flatten()
                .any(|c| ACTION_TOOLS.contains(&c.tool.as_str()));
            if acted {
                return plan(vec![], "answer from the reservation desk", false);
            }
            return match top_hit(&req.steps).filter(|_| wants_detail(text)) {
                Some(id) if has_tool("get_panorama") => {
                    let mut args = Map::new();
                    args.insert("id".into(), json!(id));
                    plan(
                        vec![call("get_panorama", args)],
                        "open the top hit in detail",
                        false,
                    )
                }
                _ => plan(vec![], "answer from the results", false),
            };
        }

        // "show more": the listing and where it stopped are the agent's;
        // this model only says the user wants more of it.
        if is_show_more(text) {
            let mut p = plan(vec![], "show more of the previous listing", false);
            p.continues_previous = true;
            return p;
        }
        // "show me the link again": the stored delivery is the agent's to
        // show; this model only says the user wants it.
        if is_link_again(text) {
            let mut p = plan(vec![], "show the delivered link again", false);
            p.shows_link = true;
            return p;
        }
        // "download all my lecture files": preview the export first; its
        // confirm comes in a later step, after the preview was seen.
        if is_export(text) && has_tool("export_all_lms_materials") {
            return plan(
                vec![call("export_all_lms_materials", Map::new())],
                "preview the export; the confirm follows once the preview is seen",
                false,
            );
        }

        // "compile the site report for tower-a": one call; the server may
        // make it a task, which turnstile follows with progress.
        if is_site_report(text) && has_tool("compile_site_report") {
            let mut args = Map::new();
            args.insert("project".into(), json!(project(text).unwrap_or_default()));
            return plan(
                vec![call("compile_site_report", args)],
                "compile the site report; a long call, followed as a task",
                false,
            );
        }

        // "notify the site contact about PANO-003-0611": one call; the
        // server asks the user who. The issue goes as read (empty when
        // missing): the server is the one to refuse.
        if is_notify(text) && has_tool("notify_site_contact") {
            let mut args = Map::new();
            args.insert(
                "issue_id".into(),
                json!(reference(text).unwrap_or_default()),
            );
            return plan(
                vec![call("notify_site_contact", args)],
                "notify the site contact; the user names who in the server's form",
                false,
            );
        }
        // "sign permit HW-12": one call; the server asks the user to open
        // its portal, where the signing happens.
        if is_permit(text) && has_tool("open_permit_portal") {
            let mut args = Map::new();
            args.insert("permit".into(), json!(reference(text).unwrap_or_default()));
            return plan(
                vec![call("open_permit_portal", args)],
                "open the permit portal; the signing happens there",
                false,
            );
        }

        // "reserve seat 12 at 15:00": prepare it, one call. Seat and time
        // go as read (empty when missing): the server is the one to refuse.
        if is_reservation(text) && has_tool("prepare_seat_reservation") {
            let mut args = Map::new();
            args.insert("seat".into(), json!(seat(text).unwrap_or_default()));
            args.insert("time".into(), json!(clock_time(text).unwrap_or_default()));
            return plan(
                vec![call("prepare_seat_reservation", args)],
                "prepare the reservation; confirming it is the user's",
                false,
            );
        }

        // "only those from April": narrow the previous answer's population.
        // The scope (what "those" are) is the agent's, from turn state.
        if is_narrowing(text) && has_tool("search_photos") {
            let mut args = Map::new();
            if let Some(m) = month {
                let (from, to) = month_range(year.unwrap_or_else(|| self.year_for(m)), m);
                args.insert("date_from".into(), json!(from));
                args.insert("date_to".into(), json!(to));
            }
            if let Some(f) = floor {
                args.insert("floor".into(), json!(f));
            }
            // A page large enough to hold a narrowed scope whole.
            args.insert("limit".into(), json!(50));
            return from_context(plan(
                vec![call("search_photos", args)],
                "narrow the previous results",
                true,
            ));
        }
        // "… in the archive": the legacy archive, asked the same question.
        let archive = has_any(text, &["archive", "보관소"]) && has_tool("archive_query");
        // "how many …": a single-value aggregate is exact; a listing is not.
        if is_count(text) && (has_tool("query_data") || archive) {
            let mut q = match topic(text) {
                Some(t) => format!("count {t} issues"),
                None => "how many photos are there".to_string(),
            };
            if let Some(f) = floor {
                q += &format!(" on floor {f}");
            }
            if let Some(m) = month {
                let (from, _) = month_range(year.unwrap_or_else(|| self.year_for(m)), m);
                q += &format!(" in {}", &from[..7]);
            } else if let Some(y) = year {
                q += &format!(" in {y}");
            }
            let mut args = Map::new();
            args.insert("question".into(), json!(q));
            let tool = if archive {
                "archive_query"
            } else {
                "query_data"
            };
            return plan(
                vec![call(tool, args)],
                "count with a single-value aggregate",
                false,
            );
        }
        if is_list_all(text) && (has_tool("query_data") || archive) {
            let mut args = Map::new();
            let mut q = "list all panoramas".to_string();
            if let Some(f) = floor {
                q += &format!(" on floor {f}");
            }
            args.insert("question".into(), json!(q));
            if archive {
                return plan(
                    vec![call("archive_query", args)],
                    "list from the legacy archive",
                    false,
                );
            }
            args.insert("limit".into(), json!(50));
            return plan(
                vec![call("query_data", args)],
                "list every panorama, page by page",
                false,
            );
        }
        if !wants_photos(text) || !has_tool("search_photos") {
            return plan(vec![], "no tool needed", false);
        }
        let mut args = Map::new();
        args.insert("query".into(), json!(topic(text).unwrap_or("")));
        if let Some(f) = floor {
            args.insert("floor".into(), json!(f));
        }
        match (year, month) {
            (y, Some(m)) => {
                let (from, to) = month_range(y.unwrap_or_else(|| self.year_for(m)), m);
                args.insert("date_from".into(), json!(from));
                args.insert("date_to".into(), json!(to));
            }
            (Some(y), None) => {
                args.insert("date_from".into(), json!(format!("{y}-01-01")));
                args.insert("date_to".into(), json!(format!("{y}-12-31")));
            }
            (None, None) => {}
        }
        if let Some(n) = requested_limit(text, floor, year) {
            args.insert("limit".into(), json!(n));
        } else if wants_detail(text) {
            // Only the newest few are needed to open the top one.
            args.insert("limit".into(), json!(3));
        }
        from_context(plan(
            vec![call("search_photos", args)],
            "search the site's panoramas",
            false,
        ))
    }
}

/// The record a detail call opened, described from its digest: its label,
/// floor, date and what its annotations note. Attributes, never counts.
fn record_sentence(req: &RespondRequest, source: &str, korean: bool) -> String {
    let rec = req
        .digests
        .iter()
        .rev()
        .find(|d| d.tool == source && d.ok)
        .and_then(|d| d.items.first());
    let field = |k: &str| {
        rec.and_then(|r| r.get(k))
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string())
            })
            .unwrap_or_default()
    };
    let notes: Vec<String> = rec
        .and_then(|r| r.get("annotations"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .filter_map(|s| s.split(", ").find_map(|kv| kv.strip_prefix("title: ")))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let (label, floor, date) = (field("label"), field("floor_name"), field("captured_at"));
    match korean {
        false => format!(
            "The top one, {label} (floor {floor}, {date}), is shown above in detail; it notes: {}.",
            notes.join(", ")
        ),
        true => format!(
            "가장 위의 {label}({floor}층, {date})을 위에 자세히 표시했습니다. 기록된 내용: {}.",
            notes.join(", ")
        ),
    }
}

/// What an asking tool's answer says, from its digest's `status`: no more
/// than the status does. `CONSENTED` is the user's consent to open the
/// permit portal, never a signed permit. `None` for other tools.
fn ask_sentence(req: &RespondRequest, source: &str, korean: bool) -> Option<String> {
    if !matches!(
        source,
        "notify_site_contact" | "open_permit_portal" | "compile_site_report"
    ) {
        return None;
    }
    let rec = req
        .digests
        .iter()
        .rev()
        .find(|d| d.tool == source && d.ok)
        .and_then(|d| d.items.first());
    let field = |k: &str| {
        rec.and_then(|r| r.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (status, issue, permit) = (field("status"), field("issue_id"), field("permit"));
    let project = field("project");
    let text = match (source, status.as_str(), korean) {
        ("compile_site_report", "COMPILED", false) => {
            format!("The site report for {project} is compiled; it is shown above.")
        }
        ("compile_site_report", "COMPILED", true) => {
            format!("{project} 현장 보고서를 작성했습니다. 위에 표시했습니다.")
        }
        ("notify_site_contact", "NOTIFIED", false) => {
            format!("The contact you entered has been notified about {issue}.")
        }
        ("notify_site_contact", "NOTIFIED", true) => {
            format!("입력하신 담당자에게 {issue} 건을 알렸습니다.")
        }
        ("notify_site_contact", "NOT_NOTIFIED", false) => {
            format!("Nobody was notified about {issue}: you declined the form.")
        }
        ("notify_site_contact", "NOT_NOTIFIED", true) => {
            format!("{issue} 건은 아무에게도 알리지 않았습니다. 양식을 거절하셨습니다.")
        }
        ("notify_site_contact", "CANCELLED", false) => {
            format!("Nobody was notified about {issue}: the request was cancelled.")
        }
        ("notify_site_contact", "CANCELLED", true) => {
            format!("{issue} 건은 아무에게도 알리지 않았습니다. 요청이 취소되었습니다.")
        }
        ("open_permit_portal", "CONSENTED", false) => format!(
            "You agreed to open the permit portal for {permit}. The signing happens there, and the permit counts as signed only when the portal says so."
        ),
        ("open_permit_portal", "CONSENTED", true) => format!(
            "{permit} 허가서 포털을 여는 데 동의하셨습니다. 서명은 포털에서 하며, 허가서는 포털이 서명되었다고 알릴 때에만 서명된 것입니다."
        ),
        ("open_permit_portal", "NOT_OPENED", false) => {
            format!("The permit portal for {permit} was not opened: you declined.")
        }
        ("open_permit_portal", "NOT_OPENED", true) => {
            format!("{permit} 허가서 포털을 열지 않았습니다. 거절하셨습니다.")
        }
        ("open_permit_portal", "CANCELLED", false) => {
            format!("Opening the permit portal for {permit} was cancelled.")
        }
        ("open_permit_portal", "CANCELLED", true) => {
            format!("{permit} 허가서 포털 열기가 취소되었습니다.")
        }
        (_, _, false) => "The tool answered, but not in a way this assistant can describe.".into(),
        (_, _, true) => "도구가 응답했지만, 그 내용을 설명할 수 없습니다.".into(),
    };
    Some(text)
}

fn help(korean: bool) -> String {
    if korean {
        "현장 파노라마를 찾아 드릴 수 있습니다. 예: \"3층 안전 지적사항 보여줘\", \"1999년 사진 보여줘\".".into()
    } else {
        "I can search the site's panoramas. Try \"show safety issues on floor 3\" or \"show photos from 1999\".".into()
    }
}

#[async_trait::async_trait]
impl Model for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    async fn plan(&self, req: &PlanRequest) -> Result<Plan, LlmError> {
        Ok(self.plan_for(req))
    }

    /// One request per round, as a tools-loop model makes: a round with
    /// nothing to call is the answer.
    fn requests_to_answer(&self) -> u64 {
        1
    }

    async fn step(&self, req: &PlanRequest, answer: &RespondRequest) -> Result<Reply, LlmError> {
        let plan = self.plan_for(req);
        match plan.is_answer() {
            true => Ok(Reply::Answer(self.respond(answer).await?)),
            false => Ok(Reply::Plan(plan)),
        }
    }

    async fn respond(&self, req: &RespondRequest) -> Result<TextStream, LlmError> {
        let korean = is_korean(&req.user_text);
        let text = if req.anchors.is_empty() {
            help(korean)
        } else {
            req.anchors
                .iter()
                .map(|a| match a {
                    Anchor::Record { source, .. } => ask_sentence(req, source, korean)
                        .unwrap_or_else(|| record_sentence(req, source, korean)),
                    a => sentence(a, korean),
                })
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        };
        // Word-sized deltas, like a streaming model.
        let mut chunks = Vec::new();
        let mut cur = String::new();
        for c in text.chars() {
            cur.push(c);
            if c == ' ' {
                chunks.push(Ok(std::mem::take(&mut cur)));
            }
        }
        if !cur.is_empty() {
            chunks.push(Ok(cur));
        }
        Ok(Box::pin(stream::iter(chunks)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnstile::llm::Prompt;
    use turnstile::mcp::ToolInfo;

    fn plan(text: &str, context: Option<Value>) -> Value {
        let req = PlanRequest {
            prompt: Prompt::new(turnstile::llm::prompt::PLANNER_FIXED),
            user_text: text.into(),
            tools: vec![ToolInfo {
                name: "search_photos".into(),
                description: String::new(),
                input_schema: json!({}).into(),
            }],
            context,
            history: vec![],
            steps: vec![],
        };
        let p = Scripted::demo().plan_for(&req);
        p.calls
            .first()
            .map(|c| Value::Object(c.args.clone()))
            .unwrap_or(Value::Null)
    }

    #[test]
    fn understands_the_demo_prompts() {
        let cases: &[(&str, Value)] = &[
            (
                "show safety issues on floor 3",
                json!({"query": "safety", "floor": 3}),
            ),
            (
                "3층 안전 지적사항 보여줘",
                json!({"query": "safety", "floor": 3}),
            ),
            (
                "show photos from 1999",
                json!({"query": "", "date_from": "1999-01-01", "date_to": "1999-12-31"}),
            ),
            (
                "1999년 사진 보여줘",
                json!({"query": "", "date_from": "1999-01-01", "date_to": "1999-12-31"}),
            ),
            (
                "show me 12 photos of floor 2",
                json!({"query": "", "floor": 2, "limit": 12}),
            ),
            (
                "2층 사진 12장 보여줘",
                json!({"query": "", "floor": 2, "limit": 12}),
            ),
            (
                "safety issues in B1",
                json!({"query": "safety", "floor": -1}),
            ),
            ("hello", Value::Null),
        ];
        for (text, expect) in cases {
            assert_eq!(&plan(text, None), expect, "{text}");
        }
        // "This floor" is the screen's: the model names the field, the
        // agent fills it in (or asks), whatever the context says.
        for context in [Some(json!({"floor": "4"})), None] {
            assert_eq!(
                plan("show quality issues on this floor", context.clone()),
                json!({"query": "quality"})
            );
        }
        let req = |text: &str| PlanRequest {
            prompt: Prompt::new(turnstile::llm::prompt::PLANNER_FIXED),
            user_text: text.into(),
            tools: vec![ToolInfo {
                name: "search_photos".into(),
                description: String::new(),
                input_schema: json!({}).into(),
            }],
            context: None,
            history: vec![],
            steps: vec![],
        };
        for text in [
            "show quality issues on this floor",
            "이 층 품질 지적사항 보여줘",
        ] {
            assert_eq!(
                Scripted::demo().plan_for(&req(text)).from_context,
                vec!["floor".to_string()],
                "{text}"
            );
        }
        assert!(Scripted::demo()
            .plan_for(&req("show quality issues on floor 3"))
            .from_context
            .is_empty());
    }

    fn tool(name: &str) -> ToolInfo {
        ToolInfo {
            name: name.into(),
            description: String::new(),
            input_schema: json!({}).into(),
        }
    }

    fn desk_request(text: &str, steps: Vec<Vec<CallRecord>>) -> PlanRequest {
        let mut tools = vec![tool("search_photos")];
        tools.extend(ACTION_TOOLS.iter().map(|t| tool(t)));
        PlanRequest {
            prompt: Prompt::new(turnstile::llm::prompt::PLANNER_FIXED),
            user_text: text.into(),
            tools,
            context: None,
            history: vec![],
            steps,
        }
    }

    fn record(tool: &str, args: Value) -> CallRecord {
        let result = json!({"status": "OK", "actionId": 1});
        CallRecord {
            id: "c1".into(),
            tool: tool.into(),
            args: args.as_object().cloned().unwrap_or_default(),
            digest: turnstile::judge::digest::Digest::record(
                tool,
                result.as_object().unwrap_or(&Map::new()),
                turnstile::judge::digest::DigestLimits::default(),
            ),
        }
    }

    #[test]
    fn prepares_a_reservation_once() {
        let cases = [
            ("reserve seat 12 at 15:00", "12", "15:00"),
            ("12번 좌석 15시 예약해줘", "12", "15:00"),
            ("12번 좌석 15시 30분 예약해줘", "12", "15:30"),
            ("좌석 12번 15시30분에 예약해줘", "12", "15:30"),
            ("오후 3시 반에 7번 자리 예약해줘", "7", "15:30"),
            ("Reserve seat 12 at 3pm.", "12", "15:00"),
            ("please book seat #7 at 3:30 pm", "7", "15:30"),
            ("reserve seat 40 for 09:05", "40", "09:05"),
            ("12번 좌석 15:00에 예약해줘", "12", "15:00"),
            ("reserve seat 12 at 15:5", "12", ""),
            ("reserve seat 12 at 12am", "12", "00:00"),
            // Passed on as read; the server answers NO_SUCH_SEAT / BAD_TIME.
            ("reserve seat 99 at 25:00", "99", "25:00"),
            ("reserve a seat at 15:00", "", "15:00"),
            ("12번 좌석 예약해줘", "12", ""),
        ];
        for (text, seat, time) in cases {
            let p = Scripted::demo().plan_for(&desk_request(text, vec![]));
            let calls: Vec<(&str, Value)> = p
                .calls
                .iter()
                .map(|c| (c.tool.as_str(), Value::Object(c.args.clone())))
                .collect();
            assert_eq!(
                calls,
                [(
                    "prepare_seat_reservation",
                    json!({"seat": seat, "time": time})
                )],
                "{text}"
            );
            assert!(!p.narrows_previous && p.from_context.is_empty(), "{text}");
        }
        // Not offered: not planned (and not a photo search either).
        let mut req = desk_request("reserve seat 12 at 15:00", vec![]);
        req.tools.retain(|t| t.name == "search_photos");
        assert!(Scripted::demo().plan_for(&req).calls.is_empty());
        // The photo prompts are unchanged with the desk's tools offered.
        let p = Scripted::demo().plan_for(&desk_request("show safety issues on floor 3", vec![]));
        assert_eq!(p.calls.len(), 1);
        assert_eq!(p.calls[0].tool, "search_photos");
    }

    #[test]
    fn after_any_desk_call_it_only_answers() {
        for tool in ACTION_TOOLS {
            for text in [
                "reserve seat 12 at 15:00",
                "12번 좌석 15시 예약해줘",
                "show safety issues on floor 3 in detail",
            ] {
                let steps = vec![vec![record(tool, json!({"seat": "12", "time": "15:00"}))]];
                let p = Scripted::demo().plan_for(&desk_request(text, steps));
                assert!(p.calls.is_empty(), "{tool}: {text}");
            }
        }
    }

    fn ask_request(text: &str, steps: Vec<Vec<CallRecord>>) -> PlanRequest {
        let mut req = desk_request(text, steps);
        req.tools
            .extend(["notify_site_contact", "open_permit_portal"].map(tool));
        req
    }

    fn calls(p: &Plan) -> Vec<(&str, Value)> {
        p.calls
            .iter()
            .map(|c| (c.tool.as_str(), Value::Object(c.args.clone())))
            .collect()
    }

    #[test]
    fn asks_who_to_notify_and_opens_the_permit_portal() {
        let cases = [
            (
                "notify the site contact about PANO-003-0611",
                "notify_site_contact",
                json!({"issue_id": "PANO-003-0611"}),
            ),
            (
                "tell someone about PANO-003-0611",
                "notify_site_contact",
                json!({"issue_id": "PANO-003-0611"}),
            ),
            (
                "PANO-003-0611 현장 담당자에게 알려줘",
                "notify_site_contact",
                json!({"issue_id": "PANO-003-0611"}),
            ),
            (
                "pano-003-0611에 대해 현장 담당자에게 알려줘",
                "notify_site_contact",
                json!({"issue_id": "PANO-003-0611"}),
            ),
            // No issue named: passed on empty, for the server to refuse.
            (
                "notify the site contact",
                "notify_site_contact",
                json!({"issue_id": ""}),
            ),
            (
                "open the permit portal for HW-12",
                "open_permit_portal",
                json!({"permit": "HW-12"}),
            ),
            (
                "sign permit HW-12",
                "open_permit_portal",
                json!({"permit": "HW-12"}),
            ),
            (
                "HW-12 허가서 서명할게",
                "open_permit_portal",
                json!({"permit": "HW-12"}),
            ),
            (
                "sign the hot-work permit hw-12.",
                "open_permit_portal",
                json!({"permit": "HW-12"}),
            ),
            (
                "sign my permit",
                "open_permit_portal",
                json!({"permit": ""}),
            ),
        ];
        for (text, tool, args) in cases {
            let p = Scripted::demo().plan_for(&ask_request(text, vec![]));
            assert_eq!(calls(&p), [(tool, args)], "{text}");
            assert!(!p.narrows_previous && p.from_context.is_empty(), "{text}");
        }
        // Not offered: not planned.
        for text in [
            "notify the site contact about PANO-003-0611",
            "sign permit HW-12",
        ] {
            assert!(
                Scripted::demo()
                    .plan_for(&desk_request(text, vec![]))
                    .calls
                    .is_empty(),
                "{text}"
            );
        }
        // Once it ran, the model answers: it never asks twice.
        for tool in ["notify_site_contact", "open_permit_portal"] {
            let steps = vec![vec![record(tool, json!({}))]];
            for text in [
                "notify the site contact about PANO-003-0611",
                "sign permit HW-12",
            ] {
                let p = Scripted::demo().plan_for(&ask_request(text, steps.clone()));
                assert!(p.calls.is_empty(), "{tool}: {text}");
            }
        }
        // The other prompts are unchanged with the asking tools offered.
        for (text, tool) in [
            ("show safety issues on floor 3", "search_photos"),
            ("reserve seat 12 at 15:00", "prepare_seat_reservation"),
            ("3층 안전 지적사항 몇 건인지 알려줘", ""),
        ] {
            let p = Scripted::demo().plan_for(&ask_request(text, vec![]));
            let planned: Vec<&str> = p.calls.iter().map(|c| c.tool.as_str()).collect();
            match tool {
                "" => assert!(
                    !planned.contains(&"notify_site_contact"),
                    "{text}: {planned:?}"
                ),
                t => assert_eq!(planned, [t], "{text}"),
            }
        }
    }

    #[test]
    fn references_as_written() {
        assert_eq!(
            reference("about PANO-003-0611."),
            Some("PANO-003-0611".into())
        );
        assert_eq!(reference("HW-12를 서명"), Some("HW-12".into()));
        assert_eq!(reference("(hw-12)"), Some("HW-12".into()));
        for none in ["hot-work", "2026-04-01", "15:00", "seat 12", "-12", "HW-"] {
            assert_eq!(reference(none), None, "{none}");
        }
    }

    async fn answer_for(user: &str, tool: &str, result: Value) -> String {
        use futures::StreamExt;
        let digest = turnstile::judge::digest::Digest::record(
            tool,
            result.as_object().unwrap_or(&Map::new()),
            turnstile::judge::digest::DigestLimits::default(),
        );
        let req = RespondRequest {
            prompt: Prompt::new(turnstile::llm::prompt::RESPONDER_FIXED),
            user_text: user.into(),
            anchors: vec![Anchor::Record {
                source: tool.into(),
                id: String::new(),
            }],
            digests: vec![digest],
        };
        let stream = Scripted::demo()
            .respond(&req)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        stream
            .map(|c| c.unwrap_or_default())
            .collect::<Vec<_>>()
            .await
            .concat()
    }

    #[tokio::test]
    async fn answers_say_no_more_than_the_status() {
        let consented = json!({
            "status": "CONSENTED",
            "permit": "HW-12",
            "note": "the user agreed to open the portal; the permit is signed only when the portal says so",
        });
        let en = answer_for("sign permit HW-12", "open_permit_portal", consented.clone()).await;
        assert_eq!(
            en,
            "You agreed to open the permit portal for HW-12. The signing happens there, and the permit counts as signed only when the portal says so."
        );
        let ko = answer_for("HW-12 허가서 서명할게", "open_permit_portal", consented).await;
        assert!(ko.contains("동의하셨습니다"), "{ko}");
        for (tool, result, says) in [
            (
                "notify_site_contact",
                json!({"status": "NOTIFIED", "issue_id": "PANO-003-0611", "contact": {"name": "Mina Park"}}),
                "The contact you entered has been notified about PANO-003-0611.",
            ),
            (
                "notify_site_contact",
                json!({"status": "NOT_NOTIFIED", "reason": "declined", "issue_id": "PANO-003-0611"}),
                "Nobody was notified about PANO-003-0611: you declined the form.",
            ),
            (
                "notify_site_contact",
                json!({"status": "CANCELLED", "issue_id": "PANO-003-0611"}),
                "Nobody was notified about PANO-003-0611: the request was cancelled.",
            ),
            (
                "open_permit_portal",
                json!({"status": "NOT_OPENED", "permit": "HW-12"}),
                "The permit portal for HW-12 was not opened: you declined.",
            ),
            (
                "open_permit_portal",
                json!({"status": "CANCELLED", "permit": "HW-12"}),
                "Opening the permit portal for HW-12 was cancelled.",
            ),
        ] {
            assert_eq!(answer_for("do it", tool, result).await, says);
        }
        let ko = answer_for(
            "PANO-003-0611 현장 담당자에게 알려줘",
            "notify_site_contact",
            json!({"status": "NOTIFIED", "issue_id": "PANO-003-0611"}),
        )
        .await;
        assert_eq!(ko, "입력하신 담당자에게 PANO-003-0611 건을 알렸습니다.");
    }
}
