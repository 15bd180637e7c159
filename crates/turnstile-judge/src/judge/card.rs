//! An approval card in the user's terms (issue 33 §5): its summary asks
//! about what was prepared ("Reserve seat 12 at 15:00?"), and the tool
//! names move to a detail line.
//!
//! The words are code's, never a model's: a deployment states them per tool
//! in config (`tools.<tool>.summary`, `summary_ko`), with `{field}` taken
//! from the call's arguments, then from the human fields of the prepare's
//! result; without one, a default that asks in the user's language and
//! lists those fields. A card asks; it never says that anything happened.
//!
//! The human fields are a bounded, flattened copy of the result's scalars,
//! with what a user must not be shown (secrets, opaque tokens, URLs that
//! carry a query or credentials) and what says nothing about the action
//! (the reply's own `status`, the action id) left out.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::approval::HoldReason;
use super::lang::Lang;
use super::path::{self, leaf};

/// Most human fields an interrupt carries from a prepare's result.
pub const PREPARED_FIELDS: usize = 12;
/// Byte budget of those fields (keys and values), like a digest's.
pub const PREPARED_BYTES: usize = 1024;
/// Characters of one value, in the fields and in a summary.
const VALUE_CHARS: usize = 80;
/// Characters of a field's key (a flattened path).
const KEY_CHARS: usize = 64;
/// How deep nested objects are flattened (`data.seat` is depth 2).
const DEPTH: usize = 3;
/// Most fields the default summary lists.
const SUMMARY_FIELDS: usize = 6;

/// One tool's configured wording: English, and optionally Korean (else the
/// English is used, as for a download button's `label_ko`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wording {
    pub en: Template,
    pub ko: Option<Template>,
}

impl Wording {
    fn for_lang(&self, lang: Lang) -> &Template {
        match (lang, &self.ko) {
            (Lang::Ko, Some(ko)) => ko,
            _ => &self.en,
        }
    }
}

/// The configured wordings, by tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cards {
    by_tool: BTreeMap<String, Wording>,
}

impl Cards {
    pub fn insert(&mut self, tool: &str, wording: Wording) {
        self.by_tool.insert(tool.to_string(), wording);
    }

    pub fn get(&self, tool: &str) -> Option<&Wording> {
        self.by_tool.get(tool)
    }
}

/// A summary template: text with `{field}` placeholders; `{{` and `}}`
/// are literal braces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Field(String),
}

/// Why a template cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("a `{{` is never closed (write `{{{{` for a brace)")]
    Unclosed,
    #[error("a `}}` closes nothing (write `}}}}` for a brace)")]
    Unopened,
    #[error("`{{}}` names no field")]
    Empty,
    #[error(
        "`{{{0}}}` is not a field name (letters, digits, `_`, `-` and `.` for a nested field)"
    )]
    BadName(String),
    #[error("`{{{0}}}` would show a secret, which a card never shows")]
    Secret(String),
    #[error("the summary is empty")]
    Blank,
}

impl Template {
    pub fn parse(text: &str) -> Result<Template, TemplateError> {
        if text.trim().is_empty() {
            return Err(TemplateError::Blank);
        }
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    literal.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    literal.push('}');
                }
                '}' => return Err(TemplateError::Unopened),
                '{' => {
                    let mut name = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some('{') | None => return Err(TemplateError::Unclosed),
                            Some(c) => name.push(c),
                        }
                    }
                    let name = name.trim().to_string();
                    if name.is_empty() {
                        return Err(TemplateError::Empty);
                    }
                    let ok = name
                        .chars()
                        .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'));
                    if !ok {
                        return Err(TemplateError::BadName(name));
                    }
                    if secret_key(&name) {
                        return Err(TemplateError::Secret(name));
                    }
                    if !literal.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut literal)));
                    }
                    parts.push(Part::Field(name));
                }
                c => literal.push(c),
            }
        }
        if !literal.is_empty() {
            parts.push(Part::Text(literal));
        }
        Ok(Template { parts })
    }

    /// The fields it names, in order.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Field(f) => Some(f.as_str()),
            Part::Text(_) => None,
        })
    }

    /// The summary, or the first field neither source has.
    fn fill(&self, lang: Lang, sources: &[&Map<String, Value>]) -> Result<String, String> {
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Text(t) => out += t,
                Part::Field(f) => match sources.iter().find_map(|m| lookup(m, f)) {
                    Some(v) => out += &shown(v, lang),
                    None => return Err(f.clone()),
                },
            }
        }
        Ok(out)
    }
}

/// What a card says: the question in the user's terms, and the detail line
/// that names the tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Card {
    pub summary: String,
    pub detail: String,
}

/// The card of an action a prepare tool prepared (`action_id`), which
/// `confirm` confirms on approval and `cancel` cancels on denial.
pub struct PreparedAction<'a> {
    pub prepare: &'a str,
    pub args: &'a Map<String, Value>,
    /// The human fields of the prepare's result ([`prepared_fields`]).
    pub prepared: &'a Map<String, Value>,
    pub action_id: u64,
    pub confirm: &'a str,
    pub cancel: &'a str,
}

pub fn prepared_card(cards: &Cards, lang: Lang, a: &PreparedAction<'_>) -> Card {
    let summary = summary(cards, lang, a.prepare, a.args, a.prepared);
    let detail = match lang {
        Lang::En => format!(
            "{} prepared action #{}; on approval {} runs once with the arguments shown, on denial {} cancels it.",
            a.prepare, a.action_id, a.confirm, a.cancel
        ),
        Lang::Ko => format!(
            "{}(으)로 준비된 작업 #{}: 승인하면 {}이(가) 표시된 인수로 한 번 실행되고, 거부하면 {}(으)로 취소됩니다.",
            a.prepare, a.action_id, a.confirm, a.cancel
        ),
    };
    Card { summary, detail }
}

/// The card of a call held for approval of itself: nothing has been sent.
pub fn held_call_card(
    cards: &Cards,
    lang: Lang,
    tool: &str,
    args: &Map<String, Value>,
    reason: HoldReason,
) -> Card {
    let summary = summary(cards, lang, tool, args, &Map::new());
    let detail = match lang {
        Lang::En => format!(
            "{tool}: nothing has been sent; on approval it runs once with the arguments shown ({}).",
            reason.why()
        ),
        Lang::Ko => format!(
            "{tool}: 아직 아무것도 보내지 않았습니다. 승인하면 표시된 인수로 한 번 실행됩니다 ({}).",
            why_ko(reason)
        ),
    };
    Card { summary, detail }
}

fn why_ko(reason: HoldReason) -> &'static str {
    match reason {
        HoldReason::Configured => "설정에서 이 도구의 모든 호출을 승인 후에 보내도록 했습니다",
        HoldReason::Destructive => {
            "도구가 되돌릴 수 없는 작업이라고 선언했거나, 읽기 전용이라고 선언하지 않았습니다"
        }
        HoldReason::Untrusted => {
            "도구의 서버를 신뢰하지 않으므로, 서버가 선언한 내용으로는 아무것도 정하지 않습니다"
        }
    }
}

/// The summary: the tool's configured template filled from `args`, then
/// `prepared`; a field neither has falls back to the default wording (and
/// is logged by its config key, never its value).
fn summary(
    cards: &Cards,
    lang: Lang,
    tool: &str,
    args: &Map<String, Value>,
    prepared: &Map<String, Value>,
) -> String {
    if let Some(w) = cards.get(tool) {
        match w.for_lang(lang).fill(lang, &[args, prepared]) {
            Ok(s) => return s,
            Err(field) => tracing::warn!(
                tool,
                field = %field,
                key = %format!("tools.{tool}.summary"),
                "the card's summary names a field the call and its result do not have; the default wording is shown"
            ),
        }
    }
    default_summary(lang, args, prepared)
}

/// "Approve this action? seat: 12, time: 15:00": the arguments' human
/// fields, then the result's that say something more.
pub fn default_summary(
    lang: Lang,
    args: &Map<String, Value>,
    prepared: &Map<String, Value>,
) -> String {
    let mut listed: Vec<(String, String)> = Vec::new();
    let human_args = args.iter().filter(|(k, v)| human(k, v, false));
    for (k, v) in human_args.chain(prepared.iter()) {
        let value = shown(v, lang);
        let words = key_words(leaf(k));
        // `data.seat` says nothing new beside the argument `seat` = 12.
        if listed.iter().any(|(w, s)| *w == words && *s == value) {
            continue;
        }
        listed.push((words, value));
    }
    let ask = match lang {
        Lang::En => "Approve this action?",
        Lang::Ko => "이 작업을 승인할까요?",
    };
    if listed.is_empty() {
        return ask.to_string();
    }
    let fields: Vec<String> = listed
        .iter()
        .take(SUMMARY_FIELDS)
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    let more = match (listed.len() > SUMMARY_FIELDS, lang) {
        (false, _) => "",
        (true, Lang::En) => ", …",
        (true, Lang::Ko) => " 외",
    };
    format!("{ask} {}{more}", fields.join(", "))
}

/// The human fields of a prepare's result: its scalars, nested objects'
/// flattened to dotted paths (`data.seat`), bounded, without the reply's
/// own `status`, the action id (`action_id_field`, shown on the detail
/// line), secrets, opaque tokens and URLs with a query or credentials.
pub fn prepared_fields(result: &Map<String, Value>, action_id_field: &str) -> Map<String, Value> {
    let mut flat = Vec::new();
    flatten("", result, 1, &mut flat);
    let mut out = Map::new();
    let mut bytes = 0;
    for (key, value) in flat {
        // The envelope's `status` says how the call went, not what it
        // prepared; the action id is the detail line's.
        if key == "status" || key == action_id_field || leaf(&key) == leaf(action_id_field) {
            continue;
        }
        if !human(&key, &value, true) || key.chars().count() > KEY_CHARS {
            continue;
        }
        let value = match value {
            Value::String(s) => Value::String(cut(&s)),
            v => v,
        };
        let size = key.len() + value.to_string().len();
        if out.len() >= PREPARED_FIELDS || bytes + size > PREPARED_BYTES {
            break;
        }
        bytes += size;
        out.insert(key, value);
    }
    out
}

fn flatten(prefix: &str, m: &Map<String, Value>, depth: usize, out: &mut Vec<(String, Value)>) {
    for (k, v) in m {
        let key = match prefix {
            "" => k.clone(),
            p => format!("{p}.{k}"),
        };
        match v {
            Value::Object(inner) if depth < DEPTH => flatten(&key, inner, depth + 1, out),
            Value::String(_) | Value::Number(_) | Value::Bool(_) => out.push((key, v.clone())),
            // Lists, nulls and objects too deep are not one thing a user
            // can read on a line.
            _ => {}
        }
    }
}

/// Whether a field may be shown on a card: a scalar under a key that does
/// not look like a secret, whose value is no opaque token (`strict`: the
/// result's fields; an argument the user gave, like a seat, is kept) and no
/// URL carrying a query or credentials.
fn human(key: &str, value: &Value, strict: bool) -> bool {
    if secret_key(key) {
        return false;
    }
    match value {
        Value::String(s) => {
            let s = s.trim();
            let withheld = carrying_url(s) || (strict && opaque(s));
            !s.is_empty() && !withheld
        }
        Value::Number(_) | Value::Bool(_) => true,
        _ => false,
    }
}

/// A key that names a secret, a session or a one-time code, in any case
/// and separator style (`apiKey`, `access_token`, `X-Session-Id`).
pub fn secret_key(key: &str) -> bool {
    const SECRET: &[&str] = &[
        "token",
        "secret",
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "key",
        "apikey",
        "credential",
        "credentials",
        "cookie",
        "session",
        "auth",
        "authorization",
        "signature",
        "sig",
        "otp",
        "cvv",
        "cvc",
        "iban",
        "ssn",
        "bearer",
        "private",
    ];
    key_words(key)
        .split(' ')
        .any(|w| SECRET.contains(&w) || w.ends_with("token") || w.ends_with("password"))
}

/// An opaque token: one long word mixing letters and digits (a JWT, a
/// base64 key, a UUID), which tells a user nothing and may grant something.
fn opaque(s: &str) -> bool {
    if s.chars().any(char::is_whitespace) {
        return false;
    }
    let uuid = s.len() == 36
        && s.chars().filter(|c| *c == '-').count() == 4
        && s.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    let letters = s.chars().any(|c| c.is_ascii_alphabetic());
    let digits = s.chars().any(|c| c.is_ascii_digit());
    uuid || (s.chars().count() >= 24 && letters && digits)
}

/// A URL with a query, a fragment or `user:pass@`: it may carry a
/// capability, so only code's delivery ever shows one.
fn carrying_url(s: &str) -> bool {
    let Some((_, rest)) = s.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    rest.contains('?') || rest.contains('#') || authority.contains('@')
}

/// A field of `m` by its name: exactly, else the one flattened field whose
/// last part it is (`seat` finds `data.seat`, unless two do).
fn lookup<'a>(m: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    let scalar = |v: &&Value| matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_));
    // Exactly, or a nested argument: `{"where": {"room": "B"}}` and
    // `{where.room}`. (A template naming a secret is refused at load.)
    if let Some(v) = path::get(m, name) {
        return Some(v).filter(scalar);
    }
    let mut found = m
        .iter()
        .filter(|(k, v)| leaf(k) == name && scalar(v))
        .map(|(_, v)| v);
    match (found.next(), found.next()) {
        (Some(v), None) => Some(v),
        _ => None,
    }
}

/// A value as a card shows it: strings as they are (control characters
/// and bidi overrides dropped, cut), numbers as written, booleans as words.
fn shown(v: &Value, lang: Lang) -> String {
    match (v, lang) {
        (Value::String(s), _) => cut(s),
        (Value::Bool(true), Lang::En) => "yes".into(),
        (Value::Bool(false), Lang::En) => "no".into(),
        (Value::Bool(true), Lang::Ko) => "예".into(),
        (Value::Bool(false), Lang::Ko) => "아니요".into(),
        (v, _) => v.to_string(),
    }
}

/// At most [`VALUE_CHARS`] characters, on one line, with no character that
/// could reorder or hide the card's own words.
fn cut(s: &str) -> String {
    let clean: String = s
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .filter(|c| !matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}'))
        .collect();
    match clean.chars().count() > VALUE_CHARS {
        true => clean.chars().take(VALUE_CHARS - 1).collect::<String>() + "…",
        false => clean,
    }
}

/// `startTime`, `start_time`, `start-time` → "start time".
fn key_words(key: &str) -> String {
    let mut out = String::new();
    let mut prev_lower = false;
    for c in key.chars() {
        if matches!(c, '_' | '-' | '.' | ' ') {
            if !out.ends_with(' ') && !out.is_empty() {
                out.push(' ');
            }
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower {
            out.push(' ');
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        out.extend(c.to_lowercase());
    }
    out.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object: {v}"),
        }
    }

    fn seat_cards() -> Cards {
        let mut c = Cards::default();
        c.insert(
            "prepare_seat_reservation",
            Wording {
                en: Template::parse("Reserve seat {seat} at {time}?").expect("parses"),
                ko: Some(Template::parse("{seat}번 좌석을 {time}에 예약할까요?").expect("parses")),
            },
        );
        c
    }

    fn seat_action<'a>(
        args: &'a Map<String, Value>,
        prepared: &'a Map<String, Value>,
    ) -> PreparedAction<'a> {
        PreparedAction {
            prepare: "prepare_seat_reservation",
            args,
            prepared,
            action_id: 1,
            confirm: "confirm_action",
            cancel: "cancel_action",
        }
    }

    #[test]
    fn a_configured_template_asks_in_the_users_terms_and_names_tools_only_in_the_detail() {
        let args = map(json!({"seat": "12", "time": "15:00"}));
        let none = Map::new();
        let card = prepared_card(&seat_cards(), Lang::En, &seat_action(&args, &none));
        assert_eq!(card.summary, "Reserve seat 12 at 15:00?");
        assert!(!card.summary.contains("prepare_seat_reservation"));
        assert!(
            card.detail.contains("prepare_seat_reservation")
                && card.detail.contains("#1")
                && card.detail.contains("confirm_action")
                && card.detail.contains("cancel_action"),
            "{}",
            card.detail
        );
    }

    #[test]
    fn a_field_missing_from_the_arguments_is_taken_from_the_prepared_result() {
        let args = map(json!({"seat": "12"}));
        let prepared = prepared_fields(
            &map(json!({"status": "OK", "actionId": 1, "data": {"time": "15:00", "room": "B"}})),
            "actionId",
        );
        assert_eq!(
            prepared,
            map(json!({"data.time": "15:00", "data.room": "B"}))
        );
        let card = prepared_card(&seat_cards(), Lang::En, &seat_action(&args, &prepared));
        assert_eq!(card.summary, "Reserve seat 12 at 15:00?");
    }

    #[test]
    fn korean_users_get_the_korean_template_or_the_korean_default() {
        let args = map(json!({"seat": "12", "time": "15:00"}));
        let none = Map::new();
        let card = prepared_card(&seat_cards(), Lang::Ko, &seat_action(&args, &none));
        assert_eq!(card.summary, "12번 좌석을 15:00에 예약할까요?");
        assert!(card.detail.contains("승인하면"), "{}", card.detail);
        // Without a configured Korean template the English one is used, as
        // a download button's `label_ko` defaults to its `label`.
        let mut en_only = Cards::default();
        en_only.insert(
            "prepare_seat_reservation",
            Wording {
                en: Template::parse("Reserve seat {seat} at {time}?").expect("parses"),
                ko: None,
            },
        );
        let card = prepared_card(&en_only, Lang::Ko, &seat_action(&args, &none));
        assert_eq!(card.summary, "Reserve seat 12 at 15:00?");
        // With none configured, the default asks in Korean.
        let card = prepared_card(&Cards::default(), Lang::Ko, &seat_action(&args, &none));
        assert_eq!(card.summary, "이 작업을 승인할까요? seat: 12, time: 15:00");
    }

    #[test]
    fn the_default_lists_the_arguments_then_what_the_result_adds() {
        let args = map(json!({"seat": "12", "time": "15:00", "idempotencyKey": "k-1"}));
        let prepared = map(json!({"data.seat": "12", "data.roomName": "Reading room B"}));
        let card = prepared_card(&Cards::default(), Lang::En, &seat_action(&args, &prepared));
        assert_eq!(
            card.summary,
            "Approve this action? seat: 12, time: 15:00, room name: Reading room B"
        );
        assert!(!card.summary.contains("prepare_seat_reservation"));
        // Nothing to list: the question alone.
        assert_eq!(
            default_summary(Lang::En, &Map::new(), &Map::new()),
            "Approve this action?"
        );
    }

    #[test]
    fn a_field_neither_source_has_falls_back_to_the_default_wording() {
        let mut cards = Cards::default();
        cards.insert(
            "prepare_seat_reservation",
            Wording {
                en: Template::parse("Reserve seat {seat} in room {room}?").expect("parses"),
                ko: None,
            },
        );
        let args = map(json!({"seat": "12", "time": "15:00"}));
        let none = Map::new();
        let card = prepared_card(&cards, Lang::En, &seat_action(&args, &none));
        assert_eq!(card.summary, "Approve this action? seat: 12, time: 15:00");
        assert!(!card.summary.contains("{room}"));
    }

    #[test]
    fn a_held_call_asks_about_its_arguments_and_says_nothing_was_sent_in_the_detail() {
        let args = map(json!({"to": "ana@example.com", "subject": "Permit", "token": "abc"}));
        let card = held_call_card(
            &Cards::default(),
            Lang::En,
            "send_mail",
            &args,
            HoldReason::Destructive,
        );
        assert_eq!(
            card.summary,
            "Approve this action? subject: Permit, to: ana@example.com"
        );
        assert!(card.detail.starts_with("send_mail: nothing has been sent"));
        assert!(card.detail.contains("destructive"), "{}", card.detail);
        let ko = held_call_card(
            &Cards::default(),
            Lang::Ko,
            "send_mail",
            &args,
            HoldReason::Untrusted,
        );
        assert!(ko.summary.starts_with("이 작업을 승인할까요?"));
        assert!(ko.detail.contains("신뢰하지"), "{}", ko.detail);
    }

    #[test]
    fn prepared_fields_leave_out_secrets_tokens_carrying_urls_and_lists() {
        let result = map(json!({
            "status": "OK",
            "actionId": 7,
            "seat": 12,
            "confirmed": false,
            "accessToken": "abc",
            "api_key": "sk-123",
            "password": "hunter2",
            "sessionId": "s1",
            "holdRef": "eyJhbGciOiJIUzI1NiJ9eyJzdWIiOiIxMjM0NTY3ODkwIn0",
            "trace": "3f2b8c1e-9a4d-4e6f-8b7a-1c2d3e4f5a6b",
            "label": "PANO-003-0611",
            "link": "https://files.example.com/x?token=abc",
            "page": "https://example.com/help",
            "seats": [1, 2],
            "data": {"time": "15:00", "deep": {"deeper": {"deepest": 1}}, "note": null},
        }));
        let got = prepared_fields(&result, "actionId");
        assert_eq!(
            got,
            map(json!({
                "seat": 12,
                "confirmed": false,
                "label": "PANO-003-0611",
                "page": "https://example.com/help",
                "data.time": "15:00",
            }))
        );
    }

    #[test]
    fn prepared_fields_are_bounded_like_a_digest() {
        let mut big = Map::new();
        for i in 0..40 {
            big.insert(format!("f{i:02}"), json!("x".repeat(200)));
        }
        let got = prepared_fields(&big, "actionId");
        assert!(got.len() <= PREPARED_FIELDS);
        let bytes: usize = got.iter().map(|(k, v)| k.len() + v.to_string().len()).sum();
        assert!(bytes <= PREPARED_BYTES, "{bytes}");
        assert!(got
            .values()
            .all(|v| v.as_str().is_some_and(|s| s.chars().count() <= 80)));
        // A value's control characters and bidi overrides never reach a card.
        let sly = prepared_fields(&map(json!({"room": "B\u{202e}1\n2"})), "id");
        assert_eq!(sly["room"], "B1 2");
    }

    #[test]
    fn templates_are_read_with_located_reasons() {
        let t = Template::parse("Reserve {seat} {{literally}} at {data.time}?").expect("parses");
        assert_eq!(t.fields().collect::<Vec<_>>(), ["seat", "data.time"]);
        assert_eq!(
            Template::parse("Reserve {seat"),
            Err(TemplateError::Unclosed)
        );
        assert_eq!(
            Template::parse("Reserve seat}"),
            Err(TemplateError::Unopened)
        );
        assert_eq!(Template::parse("Reserve {}"), Err(TemplateError::Empty));
        assert_eq!(
            Template::parse("Reserve {a b}"),
            Err(TemplateError::BadName("a b".into()))
        );
        assert_eq!(
            Template::parse("Use {apiKey}?"),
            Err(TemplateError::Secret("apiKey".into()))
        );
        assert_eq!(Template::parse("  "), Err(TemplateError::Blank));
        // A literal brace survives.
        let args = map(json!({"seat": "12", "data": {"time": "15:00"}}));
        assert_eq!(
            t.fill(Lang::En, &[&args]),
            Ok("Reserve 12 {literally} at 15:00?".to_string())
        );
    }

    #[test]
    fn keys_read_as_words() {
        assert_eq!(key_words("startTime"), "start time");
        assert_eq!(key_words("date_from"), "date from");
        assert_eq!(key_words("X-Session-Id"), "x session id");
        assert!(secret_key("X-Session-Id"));
        assert!(secret_key("refreshToken"));
        assert!(!secret_key("seat"));
        assert!(!secret_key("monkeys"));
    }
}
