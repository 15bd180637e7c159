//! Whether a confirm's answer is a capability that code may deliver (issue
//! 18, seeds 000/001): a download URL whose token is the permission. One
//! function decides, for the terminal formatter and for the page's rules
//! alike; anything it does not accept takes the normal error path.
//!
//! A capability is accepted only when all of these hold:
//! - the answer is the `status: "OK"` envelope with an object `data`;
//! - its URL field is a string with no whitespace or control character
//!   anywhere (a WHATWG parser silently drops tabs and newlines; a link the
//!   user clicks must be the string that was checked);
//! - it parses, its scheme is `http` or `https`, it has no userinfo;
//! - its origin equals the configured trusted origin, compared as parsed
//!   origins (`url::Url::origin()`), never as string prefixes;
//! - it is already in the parser's canonical form: no upper-case host, no
//!   default port written out, no backslash, no dot segment, no
//!   percent-encoded host. What is delivered is exactly what was checked,
//!   never a normalisation of it;
//! - it has no fragment;
//! - its path matches the configured template segment by segment, each
//!   `{name}` one segment of `[A-Za-z0-9_-]` (no `%2F`, no dots);
//! - its query is exactly one non-empty token parameter and nothing else,
//!   its value URL-safe text (`[A-Za-z0-9._~-]`), nothing percent-encoded;
//! - each `{name}` of the path that the envelope also names (`jobId`)
//!   equals the one in the path.

use serde_json::{Map, Value};
use url::{Origin, Url};

/// What a terminal flow's configuration says a capability looks like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapabilityRule {
    origin: Origin,
    /// The origin as configured, for messages.
    shown_origin: String,
    template: Vec<Segment>,
    token_param: String,
    /// The field of `data` that carries the URL (`downloadUrl`): a dotted
    /// path inside `data` ([`super::path`]), e.g. `links.download`.
    url_field: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    /// `{name}`: one segment of `[A-Za-z0-9_-]`, captured as `name`.
    Param(String),
}

/// Why a configured rule cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("trusted_origin `{0}` is not an http(s) origin")]
    Origin(String),
    #[error("path template `{0}` must start with `/` and hold literal segments or whole `{{name}}` segments")]
    Template(String),
    #[error("token parameter `{0}` must be a non-empty name of letters, digits, `_` or `-`")]
    Token(String),
}

/// Why an answer is not a capability: it takes the normal error path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// The envelope is not `status: "OK"`.
    NotOk,
    /// `data` is missing or not an object.
    DataNotObject,
    /// `data` has no string URL field.
    NoUrl,
    /// Whitespace or a control character in the URL string.
    ControlCharacter,
    Unparsable,
    Scheme,
    Userinfo,
    Origin,
    /// Parsed, but the string is not the parser's canonical form.
    NotCanonical,
    Fragment,
    Path,
    /// Not exactly one non-empty token parameter, or another parameter.
    Token,
    /// The envelope names another job (a `{name}` of the path) than the
    /// path.
    JobMismatch,
}

impl Rejection {
    /// Why, in words code may show (never the URL or its token).
    pub fn why(self) -> &'static str {
        match self {
            Rejection::NotOk => "the answer is not a status OK envelope",
            Rejection::DataNotObject => "the answer's data is not an object",
            Rejection::NoUrl => "the answer carries no download URL",
            Rejection::ControlCharacter => "the URL holds whitespace or a control character",
            Rejection::Unparsable => "the URL does not parse",
            Rejection::Scheme => "the URL is not http or https",
            Rejection::Userinfo => "the URL carries a user name or password",
            Rejection::Origin => "the URL's origin is not the tool server's trusted origin",
            Rejection::NotCanonical => "the URL is not written in its canonical form",
            Rejection::Fragment => "the URL has a fragment",
            Rejection::Path => "the URL's path is not the configured download path",
            Rejection::Token => "the URL does not carry exactly one token and nothing else",
            Rejection::JobMismatch => "the URL names another job than the answer",
        }
    }
}

/// An accepted capability.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capability {
    /// The URL exactly as the tool gave it (and as it was checked).
    pub url: String,
    /// The template's `{name}` segments, as captured.
    pub params: Vec<(String, String)>,
    /// The envelope's `expiresAt`, if it gave one.
    pub expires_at: Option<String>,
    /// The envelope's `data`, for the formatter's other fields.
    pub data: Map<String, Value>,
}

impl CapabilityRule {
    pub fn new(
        trusted_origin: &str,
        path_template: &str,
        token_param: &str,
    ) -> Result<Self, RuleError> {
        let origin = Url::parse(trusted_origin)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .map(|u| u.origin())
            .filter(Origin::is_tuple)
            .ok_or_else(|| RuleError::Origin(trusted_origin.to_string()))?;
        let template = parse_template(path_template)
            .ok_or_else(|| RuleError::Template(path_template.to_string()))?;
        if token_param.is_empty() || !token_param.chars().all(is_segment_char) {
            return Err(RuleError::Token(token_param.to_string()));
        }
        Ok(CapabilityRule {
            shown_origin: origin.ascii_serialization(),
            origin,
            template,
            token_param: token_param.to_string(),
            url_field: "downloadUrl".into(),
        })
    }

    /// The `data` field that carries the URL (default `downloadUrl`), a
    /// dotted path inside `data`.
    pub fn with_url_field(mut self, field: &str) -> Self {
        self.url_field = field.to_string();
        self
    }

    /// The configured path of the URL inside `data`.
    pub fn url_field(&self) -> &str {
        &self.url_field
    }

    /// Whether an answer is the envelope this rule reads, with nothing at
    /// the configured URL path: the configuration does not match the
    /// server's answers (issue 33 §4), which is the operator's to see, not
    /// only a refused capability.
    pub fn url_field_missing(&self, answer: &Value) -> bool {
        answer.get("status").and_then(Value::as_str) == Some("OK")
            && answer
                .get("data")
                .and_then(Value::as_object)
                .is_some_and(|d| super::path::get(d, &self.url_field).is_none())
    }

    /// The trusted origin, serialised.
    pub fn origin(&self) -> &str {
        &self.shown_origin
    }

    /// A confirm's answer (its JSON): the capability, or why it is none.
    pub fn validate_answer(&self, answer: &Value) -> Result<Capability, Rejection> {
        if answer.get("status").and_then(Value::as_str) != Some("OK") {
            return Err(Rejection::NotOk);
        }
        let data = answer
            .get("data")
            .and_then(Value::as_object)
            .ok_or(Rejection::DataNotObject)?;
        let raw = super::path::get(data, &self.url_field)
            .and_then(Value::as_str)
            .ok_or(Rejection::NoUrl)?;
        let params = self.validate_url(raw)?;
        // Every `{name}` of the path that the envelope names too (`jobId`,
        // `reportId`, …) must be the same there: the link is for the job
        // the answer is about.
        for (name, in_path) in &params {
            let named = match data.get(name) {
                None => continue,
                Some(Value::String(s)) => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                Some(_) => return Err(Rejection::JobMismatch),
            };
            if named != *in_path {
                return Err(Rejection::JobMismatch);
            }
        }
        Ok(Capability {
            url: raw.to_string(),
            params,
            expires_at: data
                .get("expiresAt")
                .and_then(Value::as_str)
                .map(str::to_string),
            data: data.clone(),
        })
    }

    /// A URL string alone (the page's rule for a link in an assistant
    /// message): the template's captured segments, or why it is no
    /// capability.
    pub fn validate_url(&self, raw: &str) -> Result<Vec<(String, String)>, Rejection> {
        if raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(Rejection::ControlCharacter);
        }
        let url = Url::parse(raw).map_err(|_| Rejection::Unparsable)?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Rejection::Scheme);
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Rejection::Userinfo);
        }
        if url.origin() != self.origin {
            return Err(Rejection::Origin);
        }
        if url.as_str() != raw {
            return Err(Rejection::NotCanonical);
        }
        if url.fragment().is_some() {
            return Err(Rejection::Fragment);
        }
        let params = self.match_path(url.path()).ok_or(Rejection::Path)?;
        // The query is `token=VALUE` and nothing else, written plainly: no
        // second parameter, no `&`, no percent-encoded name or value (a
        // token is URL-safe text), so it is read one way only.
        let token = url
            .query()
            .and_then(|q| q.strip_prefix(self.token_param.as_str()))
            .and_then(|q| q.strip_prefix('='))
            .ok_or(Rejection::Token)?;
        let plain = |c: char| c.is_ascii_alphanumeric() || "-._~".contains(c);
        if token.is_empty() || !token.chars().all(plain) {
            return Err(Rejection::Token);
        }
        Ok(params)
    }

    fn match_path(&self, path: &str) -> Option<Vec<(String, String)>> {
        let segments: Vec<&str> = path.strip_prefix('/')?.split('/').collect();
        if segments.len() != self.template.len() {
            return None;
        }
        let mut params = Vec::new();
        for (seg, want) in segments.iter().zip(&self.template) {
            match want {
                Segment::Literal(l) if seg == l => {}
                Segment::Param(name) if !seg.is_empty() && seg.chars().all(is_segment_char) => {
                    params.push((name.clone(), seg.to_string()));
                }
                _ => return None,
            }
        }
        Some(params)
    }
}

/// An export's confirm tool whose answer is delivered by code (issue 18):
/// the preview it must follow, the rule its capability is held to, and the
/// name of the button the page shows for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalFlow {
    pub preview: String,
    pub rule: CapabilityRule,
    /// The download button's name, e.g. "Download lecture files".
    pub label: String,
    /// Its name for a Korean-speaking user ("강의 파일 받기"), if given.
    pub label_ko: Option<String>,
}

impl TerminalFlow {
    /// The button's name in the user's language.
    pub fn label_for(&self, korean: bool) -> &str {
        match (korean, &self.label_ko) {
            (true, Some(ko)) => ko,
            _ => &self.label,
        }
    }
}

/// Every terminal flow of a server, by its confirm tool.
#[derive(Debug, Clone, Default)]
pub struct Terminals {
    flows: std::collections::BTreeMap<String, TerminalFlow>,
    /// Origins an operator allows the assistant's text to link to
    /// (`http.link_origins`): documentation, never a capability.
    link_origins: Vec<String>,
}

impl Terminals {
    pub fn allow_link_origins(&mut self, origins: Vec<String>) {
        self.link_origins = origins;
    }

    /// The origins an operator allows links to.
    pub fn link_origins(&self) -> &[String] {
        &self.link_origins
    }

    /// The URLs of `text` of an origin the operator allows: plain links on
    /// the page. Any other URL that is no capability stays text.
    pub fn allowed_links_in(&self, text: &str) -> Vec<String> {
        if self.link_origins.is_empty() {
            return Vec::new();
        }
        let mut out: Vec<String> = Vec::new();
        for span in url_spans(text) {
            let url = &text[span];
            if self.link_origins.iter().any(|o| of_origin(url, o)) && !out.iter().any(|u| u == url)
            {
                out.push(url.to_string());
            }
        }
        out
    }
    pub fn insert(&mut self, confirm: &str, flow: TerminalFlow) {
        self.flows.insert(confirm.to_string(), flow);
    }

    /// The flow `tool` confirms, if it is a terminal flow's confirm.
    pub fn confirmed_by(&self, tool: &str) -> Option<&TerminalFlow> {
        self.flows.get(tool)
    }

    /// The confirm tools whose preview `tool` is.
    pub fn previewed_by<'a>(&'a self, tool: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.flows
            .iter()
            .filter(move |(_, f)| f.preview == tool)
            .map(|(c, _)| c.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// Whether `tool` is a flow's preview or confirm: its answer is the
    /// export table's, not a listing.
    pub fn involves(&self, tool: &str) -> bool {
        self.flows.contains_key(tool) || self.flows.values().any(|f| f.preview == tool)
    }

    /// The page's rule for a text an assistant message shows: each URL in
    /// it that one flow's rule accepts, as the button it may become. The
    /// same validator as the terminal formatter's; a URL no rule accepts
    /// stays a plain link (or inert text) in the page.
    pub fn links_in(&self, text: &str) -> Vec<crate::wire::CapabilityLink> {
        if self.flows.is_empty() || !text.contains("http") {
            return Vec::new();
        }
        let mut out: Vec<crate::wire::CapabilityLink> = Vec::new();
        for candidate in url_candidates(text) {
            let Some(flow) = self
                .flows
                .values()
                .find(|f| f.rule.validate_url(candidate).is_ok())
            else {
                continue;
            };
            if out.iter().all(|l| l.url != candidate) {
                out.push(crate::wire::CapabilityLink {
                    url: candidate.to_string(),
                    label: flow.label.clone(),
                    expires_at: None,
                });
            }
        }
        out
    }
}

/// Whether `url` is of `origin` (`scheme://host[:port]`): equal up to the
/// origin's end, and the URL's authority ends there.
pub fn of_origin(url: &str, origin: &str) -> bool {
    let o = origin.trim_end_matches('/');
    url.get(..o.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(o))
        && matches!(url.as_bytes().get(o.len()), None | Some(b'/' | b'?' | b'#'))
}

/// Where each http(s) URL of a text is, as the one URL scanner
/// (`mcp::url`) finds them: the guard judges a URL in a sentence as one
/// link claim, and reaches the scanner through the judge (its layer).
pub fn url_spans(text: &str) -> Vec<std::ops::Range<usize>> {
    turnstile_output::url::spans(text).collect()
}

/// The http(s) URLs a text holds, as the page finds them: bare, or the
/// target of a Markdown link `[name](url)`; each ends at whitespace or at
/// a character that cannot close a URL in prose (`)`, `]`, `>`, quotes).
fn url_candidates(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || loop {
        let at = ["https://", "http://"]
            .iter()
            .filter_map(|p| rest.find(p))
            .min()?;
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| {
                c.is_whitespace() || matches!(c, ')' | ']' | '>' | '<' | '"' | '\'' | '`')
            })
            .unwrap_or(tail.len());
        let found = tail[..end].trim_end_matches(['.', ',', ';', ':', '!', '?']);
        rest = &tail[end.max(1)..];
        if !found.is_empty() {
            return Some(found);
        }
    })
}

/// An RFC 3339 instant (`2026-12-02T07:12:34Z`, fractions and offsets
/// allowed) as Unix milliseconds; `None` for anything else.
pub fn instant_ms(at: &str) -> Option<i64> {
    let b = at.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = at.get(r)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let mut rest = &at[19..];
    let mut ms = 0;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let shown = &frac[..digits.min(3)];
        ms = shown.parse::<i64>().ok()? * 10_i64.pow(3 - shown.len() as u32);
        rest = &frac[digits..];
    }
    let offset_min = match rest {
        "Z" | "z" => 0,
        o if o.len() == 6 && matches!(&o[..1], "+" | "-") && &o[3..4] == ":" => {
            let hh: i64 = o[1..3].parse().ok()?;
            let mm: i64 = o[4..6].parse().ok()?;
            let sign = if o.starts_with('-') { -1 } else { 1 };
            sign * (hh * 60 + mm)
        }
        _ => return None,
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + s - offset_min * 60;
    Some(secs * 1000 + ms)
}

fn is_segment_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// `/api/lms/exports/{jobId}/download` → its segments; `None` for a
/// template that is not a plain absolute path of literal and whole-segment
/// parameters.
fn parse_template(t: &str) -> Option<Vec<Segment>> {
    let rest = t.strip_prefix('/')?;
    let segments: Option<Vec<Segment>> = rest
        .split('/')
        .map(|seg| {
            if let Some(name) = seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                (!name.is_empty() && name.chars().all(is_segment_char))
                    .then(|| Segment::Param(name.to_string()))
            } else {
                let literal = !seg.is_empty()
                    && seg != "."
                    && seg != ".."
                    && seg
                        .chars()
                        .all(|c| is_segment_char(c) || c == '.' || c == '~');
                literal.then(|| Segment::Literal(seg.to_string()))
            }
        })
        .collect();
    // A name given twice would be checked at one place only.
    let segments = segments?;
    let mut names = std::collections::HashSet::new();
    let unique = segments.iter().all(|s| match s {
        Segment::Param(n) => names.insert(n.clone()),
        Segment::Literal(_) => true,
    });
    unique.then_some(segments)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_are_read_as_rfc_3339() {
        assert_eq!(instant_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(instant_ms("2026-12-02T07:12:34Z"), Some(1_796_195_554_000));
        assert_eq!(
            instant_ms("2026-12-02T07:12:34.5Z"),
            Some(1_796_195_554_500)
        );
        assert_eq!(
            instant_ms("2026-12-02T09:12:34+02:00"),
            Some(1_796_195_554_000)
        );
        for bad in [
            "",
            "2026-12-02",
            "2026-13-02T07:12:34Z",
            "2026-12-02T07:12:34",
            "soon",
        ] {
            assert_eq!(instant_ms(bad), None, "{bad}");
        }
    }

    /// Any `{name}` of the template the envelope also names must agree
    /// with the path, not only `jobId`.
    #[test]
    fn the_envelope_names_the_same_job_as_the_path() {
        let rule = CapabilityRule::new("http://127.0.0.1:9", "/reports/{reportId}/file", "key")
            .unwrap()
            .with_url_field("link");
        let answer = |id: &str| {
            serde_json::json!({"status": "OK", "data": {
                "reportId": id, "link": "http://127.0.0.1:9/reports/R-1/file?key=abc"}})
        };
        assert!(rule.validate_answer(&answer("R-1")).is_ok());
        assert_eq!(
            rule.validate_answer(&answer("R-2")),
            Err(Rejection::JobMismatch)
        );
    }

    #[test]
    fn the_url_field_is_a_path_inside_data() {
        let rule = CapabilityRule::new("http://127.0.0.1:9", "/e/{jobId}/d", "token")
            .unwrap()
            .with_url_field("links.download");
        let answer = serde_json::json!({"status": "OK", "data": {
            "jobId": "J1", "links": {"download": "http://127.0.0.1:9/e/J1/d?token=abc"}}});
        assert!(rule.validate_answer(&answer).is_ok());
        assert!(!rule.url_field_missing(&answer));
        let flat = serde_json::json!({"status": "OK", "data": {
            "jobId": "J1", "download": "http://127.0.0.1:9/e/J1/d?token=abc"}});
        assert_eq!(rule.validate_answer(&flat), Err(Rejection::NoUrl));
        assert!(rule.url_field_missing(&flat));
        // A refusal from the server is not a configuration problem.
        let refused = serde_json::json!({"status": "NOT_FOUND", "data": null});
        assert!(!rule.url_field_missing(&refused));
    }

    #[test]
    fn links_in_a_text_are_found_and_checked() {
        let rule = CapabilityRule::new("http://127.0.0.1:9", "/e/{jobId}/d", "token").unwrap();
        let mut t = Terminals::default();
        let flow = TerminalFlow {
            preview: "p".into(),
            rule,
            label: "Get".into(),
            label_ko: None,
        };
        t.insert("c", flow);
        let good = "http://127.0.0.1:9/e/J1/d?token=abc";
        let text = format!("Here: [Get]({good}). Or {good}, and http://127.0.0.1:9/other?token=x and javascript:alert(1)");
        let links = t.links_in(&text);
        assert_eq!(links.len(), 1);
        assert_eq!(links[0].url, good);
        assert_eq!(links[0].label, "Get");
        assert!(t
            .links_in("http://127.0.0.1:9/e/J1/d?token=abc&token=b")
            .is_empty());
    }

    #[test]
    fn rules_are_checked_when_configured() {
        let ok = CapabilityRule::new(
            "https://lms.example.com",
            "/api/lms/exports/{jobId}/download",
            "token",
        );
        assert!(ok.is_ok());
        for (origin, template, token) in [
            ("javascript:alert(1)", "/a/{id}", "token"),
            ("ftp://lms.example.com", "/a/{id}", "token"),
            ("not a url", "/a/{id}", "token"),
            ("https://lms.example.com", "a/{id}", "token"),
            ("https://lms.example.com", "/a/{id}x/b", "token"),
            ("https://lms.example.com", "/a//b", "token"),
            ("https://lms.example.com", "/a/../b", "token"),
            ("https://lms.example.com", "/a/{}", "token"),
            ("https://lms.example.com", "/a/{id}/{id}", "token"),
            ("https://lms.example.com", "/a/{id}", ""),
            ("https://lms.example.com", "/a/{id}", "to ken"),
        ] {
            assert!(
                CapabilityRule::new(origin, template, token).is_err(),
                "{origin} {template} {token}"
            );
        }
    }
}
