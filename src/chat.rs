//! `turnstile chat URL "message"`: streams one turn's frames to the terminal,
//! checking their order against the local `frame` table as it goes.
//! `turnstile resume URL THREAD INTERRUPT approve|deny` decides an approval
//! the turn asked for, and `… accept|decline|cancel` answers a question a
//! tool's server asked (`--field NAME=VALUE` / `--answers JSON` fill its
//! form), then streams the resumed turn with the same printer.

use std::io::Write;
use std::sync::Arc;

use anyhow::{bail, Context};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{json, Value};

use turnstile::fsm::schema::{RawRow, RawTable};
use turnstile::fsm::{Machine, Table};
use turnstile::wire::sse::{SseDecoder, SseEvent};
use turnstile::wire::{Citation, Figure, Frame, InputAsked, Interrupt, ToolCall, ToolResult};

/// One frame as a terminal line; `None` for text deltas, which are printed
/// as they come.
fn describe(frame: &Frame, rows: Rows) -> Option<String> {
    Some(match frame {
        Frame::Start(s) => format!("· turn {}", s.turn_id),
        Frame::Plan(p) => {
            // Through `Value`, whose maps are sorted: `{"args":…,"tool":…}`.
            let steps = serde_json::to_value(&p.steps).unwrap_or_default();
            match p.step {
                0 | 1 => format!("· plan: {steps}"),
                n => format!("· plan (step {n}): {steps}"),
            }
        }
        Frame::ToolCall(c) => match &c.server {
            Some(server) => format!("· calling {} on {server}", c.tool),
            None => format!("· calling {}", c.tool),
        },
        // A refusal is not a failure of the tool: it was never sent. Nor
        // is a question of its server: the interrupt below asks it.
        Frame::ToolResult(r) if !r.ok && r.refusal.is_none() && r.summary == "input_required" => {
            format!("· {}: its server asks you first", r.tool)
        }
        Frame::ToolResult(r) if !r.ok && r.refusal.is_none() && r.summary == "connect_required" => {
            format!("· {}: waits until you connect your account", r.tool)
        }
        Frame::ToolResult(r) => match refused_by(r) {
            Some((table, row)) => refused_line(&r.tool, &table, &row),
            None => format!(
                "· {} {}: {}",
                r.tool,
                if r.ok { "ok" } else { "FAILED" },
                r.summary
            ),
        },
        Frame::Citation(c) => citation(c, rows),
        Frame::Figure(f) => figure(f),
        Frame::Delta(_) => return None,
        Frame::Interrupt(i) => interrupt(i, None, None),
        // The server's own words on its task, quoted as its (and escaped
        // as any server's text for the terminal).
        Frame::Progress(p) => match &p.message {
            Some(m) => format!(
                "· {} {} ({:.1} s): server says \"{}\"",
                p.tool,
                p.status.replace('_', " "),
                p.elapsed_ms as f64 / 1000.0,
                said(m)
            ),
            None => format!(
                "· {} {} ({:.1} s)",
                p.tool,
                p.status.replace('_', " "),
                p.elapsed_ms as f64 / 1000.0
            ),
        },
        Frame::Done(_) => "· done".into(),
        Frame::Error(e) => format!(
            "✗ error: {}{}",
            e.message,
            e.tool
                .as_deref()
                .map(|t| format!(" (tool {t})"))
                .unwrap_or_default()
        ),
    })
}

/// The table and row that refused a call, from its result's `refusal`
/// (the licence gate's).
fn refused_by(r: &ToolResult) -> Option<(String, String)> {
    let refusal = r.refusal.as_ref()?;
    Some((
        refusal["table"].as_str().unwrap_or("licence").to_string(),
        refusal["row_id"].as_str().unwrap_or("?").to_string(),
    ))
}

/// The table and row the summary of a call that reached no server names:
/// every refusal but the licence gate's writes `not run (approval row
/// `confirm-without-approval`): …` (`agent::turn::admit`). Read only for
/// such a call: a server's own error text could read the same.
fn row_in_summary(summary: &str) -> Option<(String, String)> {
    let rest = summary.strip_prefix("not run (")?;
    let (table, rest) = rest.split_once(" row `")?;
    let (row, _) = rest.split_once("`)")?;
    let word = |w: &str| !w.is_empty() && !w.contains(char::is_whitespace);
    (word(table) && word(row)).then(|| (table.to_string(), row.to_string()))
}

/// A call a table refused: it never went out, so it is neither "calling"
/// nor "FAILED".
fn refused_line(tool: &str, table: &str, row: &str) -> String {
    format!("✗ {tool} refused by {table}:{row} — never sent")
}

/// The result of a call that reached no server (`tool_call` without a
/// `server`): refused by a row, or kept back for another reason.
fn unsent_line(r: &ToolResult) -> String {
    match refused_by(r).or_else(|| row_in_summary(&r.summary)) {
        Some((table, row)) => refused_line(&r.tool, &table, &row),
        None => format!("✗ {} not sent: {}", r.tool, r.summary),
    }
}

/// A single value, with its grade: "exactly" only when the server is held to
/// accounting.
fn figure(f: &Figure) -> String {
    let value = f
        .value
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| f.value.to_string());
    let said = match (f.grade.as_str(), f.accounted) {
        ("EXACT", true) => format!("exactly {value}"),
        _ => format!("{value}, as the server reports it (not accounted)"),
    };
    format!("▣ {} — {}: {said} [{}]", f.source, f.label, f.grade)
}

/// The approval card: what was asked, the exact call that runs on approve,
/// the action it confirms, when the question expires (and, given the clock,
/// whether it has), and the commands that answer it.
fn interrupt(i: &Interrupt, now_ms: Option<i64>, hint: Option<&ResumeHint>) -> String {
    if let Some(input) = &i.input {
        return question(i, &input.server, &input.requests, now_ms, hint);
    }
    let json = |m: &serde_json::Map<String, Value>| Value::Object(m.clone()).to_string();
    // The summary carries values from the call and its result: escaped
    // like any text a server or a model could have shaped.
    let mut out = format!(
        "? approval requested: {} (interrupt {})",
        said(&i.summary),
        i.interrupt_id
    );
    // The tools, under the question (an interrupt stored before it had a
    // detail line shows them in the two lines below all the same).
    if !i.detail.is_empty() {
        out += &format!("\n  detail: {}", said(&i.detail));
    }
    out += &format!("\n  runs on approve: {} {}", i.tool, json(&i.args));
    out += &format!(
        "\n  prepared action: {} {}",
        i.action.tool,
        json(&i.action.args)
    );
    if let Some(id) = i.action.action_id {
        out += &format!(" (action id {id})");
    }
    out += &format!("\n  expires: {}", utc(i.expires_at));
    if let Some(now) = now_ms {
        out += &format!(" ({})", until(i.expires_at, now));
    }
    if let Some(hint) = hint {
        // The choices the server offers that `resume` can send; a server
        // that names none offers both.
        let offered: Vec<Decision> = [Decision::Approve, Decision::Deny]
            .into_iter()
            .filter(|d| i.choices.is_empty() || i.choices.iter().any(|c| c == d.as_str()))
            .collect();
        for d in offered {
            out += &format!(
                "\n  {:<9}{}",
                format!("{}:", d.as_str()),
                hint.command(&i.interrupt_id, d)
            );
        }
    }
    out
}

/// A question a tool's server asks: "? SERVER asks: MESSAGE" (its words,
/// never ours), each form's fields with their type, whether they are
/// required and their choices, each URL whole with its domain (and a
/// warning when the domain is punycode), the expiry, and the commands
/// that answer it.
fn question(
    i: &Interrupt,
    server: &str,
    requests: &[InputAsked],
    now_ms: Option<i64>,
    hint: Option<&ResumeHint>,
) -> String {
    let server = said(server);
    // A Connect card is turnstile's own request, not the server's words.
    let connect = requests.iter().any(|r| r.mode == "connect");
    let mut out = match requests {
        _ if connect => format!("? connect {server}: the call waits until you sign in"),
        [one] => format!("? {server} asks: {}", said_block(&one.message, "  ")),
        _ => format!("? {server} asks {} things:", requests.len()),
    };
    let whose = if connect {
        "turnstile asks"
    } else {
        "the server's words"
    };
    out += &format!(
        "\n  ({whose}; interrupt {}, during {} {})",
        said(&i.interrupt_id),
        said(&i.tool),
        said(&Value::Object(i.args.clone()).to_string())
    );
    for (n, r) in requests.iter().enumerate() {
        if requests.len() > 1 {
            out += &format!("\n  {}. {}", n + 1, said_block(&r.message, "     "));
        }
        match r.mode.as_str() {
            "connect" => {
                // turnstile's own request: the sign-in's callback answers it.
                if let Some(domain) = &r.domain {
                    out += &format!("\n  connect: you sign in at {}", said(domain));
                }
                out += "\n    once you have signed in, the held call goes out once, with your own account; its answer is in the thread";
            }
            "url" => {
                let url = r.url.as_deref().unwrap_or("");
                out += &format!("\n  url {}: {}", quoted(&r.key), said(url));
                if let Some(domain) = &r.domain {
                    out += &format!("\n    domain: {}", said(domain));
                }
                if r.punycode {
                    out += "\n    ⚠ this address uses punycode; it may imitate another site";
                }
                out += "\n    nothing has opened it: open it yourself; accept says you agree to open it, not that anything there is done";
            }
            _ => {
                out += &format!("\n  form {}:", quoted(&r.key));
                let fields = form_fields(r.schema.as_ref());
                let width = fields
                    .iter()
                    .map(|f| f.name.chars().count())
                    .max()
                    .unwrap_or(0);
                for f in &fields {
                    let name = said(&f.name);
                    out += &format!("\n    {name:<width$}  {}", f.describe());
                }
                if fields.is_empty() {
                    out += "\n    (no fields)";
                }
            }
        }
    }
    out += &format!("\n  expires: {}", utc(i.expires_at));
    if let Some(now) = now_ms {
        out += &format!(" ({})", until(i.expires_at, now));
    }
    if let Some(hint) = hint {
        let offered: Vec<Decision> = [Decision::Accept, Decision::Decline, Decision::Cancel]
            .into_iter()
            .filter(|d| i.choices.is_empty() || i.choices.iter().any(|c| c == d.as_str()))
            .collect();
        let forms: Vec<&InputAsked> = (requests.iter())
            .filter(|r| r.mode != "url" && r.mode != "connect")
            .collect();
        for d in offered {
            let mut line = hint.command(&i.interrupt_id, d);
            if d == Decision::Accept {
                // The required fields, each to be filled in; a form of
                // several requests names its request.
                for r in &forms {
                    for f in form_fields(r.schema.as_ref()).iter().filter(|f| f.required) {
                        let name = match forms.len() {
                            1 => f.name.clone(),
                            _ => format!("{}.{}", r.key, f.name),
                        };
                        // A name the terminal would not show as written
                        // (control, bidi) or `--field` cannot carry (`=`,
                        // a trailing `:`) is never printed raw: --answers.
                        let plain = said(&name) == name
                            && !name.contains('=')
                            && !name.ends_with(':')
                            && !name.starts_with('-');
                        line += &match plain {
                            true => {
                                format!(" --field {}", super::shell_word(&format!("{name}=...")))
                            }
                            false => " --answers '{…}'".to_string(),
                        };
                    }
                }
            }
            out += &format!("\n  {:<9}{line}", format!("{}:", d.as_str()));
        }
        if !forms.is_empty() {
            out += "\n  (replace each ... with your answer; `--field NAME=VALUE` for the optional fields too)";
        }
    }
    out
}

/// A server's text for the terminal: control characters and bidi
/// overrides escaped, so it cannot move the cursor, recolour the screen or
/// reorder what follows it.
fn said(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            c if c.is_control()
                || ('\u{202a}'..='\u{202e}').contains(&c)
                || ('\u{2066}'..='\u{2069}').contains(&c) =>
            {
                c.escape_unicode().to_string()
            }
            c => c.to_string(),
        })
        .collect()
}

/// [`said`], with each line break kept and the next line indented.
fn said_block(text: &str, indent: &str) -> String {
    text.split('\n')
        .map(|line| said(line.strip_suffix('\r').unwrap_or(line)))
        .collect::<Vec<_>>()
        .join(&format!("\n{indent}"))
}

/// A key or a value in double quotes, escaped.
fn quoted(text: &str) -> String {
    Value::String(text.to_string()).to_string()
}

/// One field of a question's form, as the terminal describes it and as
/// `--field` reads a value for it.
#[derive(Debug, Clone, PartialEq)]
struct FormField {
    name: String,
    required: bool,
    schema: serde_json::Map<String, Value>,
}

/// The fields of a form's `requestedSchema`, in its order.
fn form_fields(schema: Option<&Value>) -> Vec<FormField> {
    let schema = schema.and_then(Value::as_object);
    let required: Vec<&str> = schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .map(|(name, p)| FormField {
                    name: name.clone(),
                    required: required.contains(&name.as_str()),
                    schema: p.as_object().cloned().unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default()
}

impl FormField {
    fn ty(&self) -> &str {
        self.schema
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("string")
    }

    /// The choices a single or multiple choice offers: (value, title).
    fn choices(&self) -> Option<Vec<(String, Option<String>)>> {
        let s = &self.schema;
        let items = s.get("items").and_then(Value::as_object);
        let const_titles = |list: &Value| -> Vec<(String, Option<String>)> {
            list.as_array()
                .into_iter()
                .flatten()
                .map(|o| {
                    let text = |k| o.get(k).and_then(Value::as_str).map(str::to_string);
                    (text("const").unwrap_or_default(), text("title"))
                })
                .collect()
        };
        let plain = |list: &Value, names: Option<&Value>| -> Vec<(String, Option<String>)> {
            let names: Vec<Option<String>> = names
                .and_then(Value::as_array)
                .map(|n| n.iter().map(|v| v.as_str().map(str::to_string)).collect())
                .unwrap_or_default();
            list.as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(i, v)| {
                    let value = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                    (value, names.get(i).cloned().flatten())
                })
                .collect()
        };
        match self.ty() {
            "array" => items.map(|items| match items.get("anyOf") {
                Some(any_of) => const_titles(any_of),
                None => plain(items.get("enum").unwrap_or(&Value::Null), None),
            }),
            _ => match (s.get("enum"), s.get("oneOf")) {
                (Some(values), _) => Some(plain(values, s.get("enumNames"))),
                (None, Some(one_of)) => Some(const_titles(one_of)),
                (None, None) => None,
            },
        }
    }

    /// "string (email), required, 1 to 20 characters · Title — description".
    fn describe(&self) -> String {
        let s = &self.schema;
        let num = |k: &str| s.get(k).filter(|v| v.is_number()).map(Value::to_string);
        let listed = self.choices().map(|choices| {
            let listed: Vec<String> = choices
                .iter()
                .map(|(v, title)| match title {
                    Some(t) if t != v => format!("{} ({})", quoted(v), said(t)),
                    _ => quoted(v),
                })
                .collect();
            listed.join(", ")
        });
        let mut parts = vec![
            match (self.ty(), s.get("format").and_then(Value::as_str), listed) {
                ("array", _, Some(listed)) => format!("any of {listed}"),
                (_, _, Some(listed)) => format!("one of {listed}"),
                (ty, Some(format), None) => format!("{} ({})", said(ty), said(format)),
                (ty, None, None) => said(ty),
            },
        ];
        if self.required {
            parts.push("required".into());
        }
        let range = |lo: Option<String>, hi: Option<String>, unit: &str| match (lo, hi) {
            (Some(lo), Some(hi)) => Some(format!("{lo} to {hi}{unit}")),
            (Some(lo), None) => Some(format!("at least {lo}{unit}")),
            (None, Some(hi)) => Some(format!("at most {hi}{unit}")),
            (None, None) => None,
        };
        let chars = match num("maxLength").or(num("minLength")).as_deref() {
            Some("1") => " character",
            _ => " characters",
        };
        parts.extend(range(num("minLength"), num("maxLength"), chars));
        parts.extend(range(num("minimum"), num("maximum"), ""));
        parts.extend(range(num("minItems"), num("maxItems"), " chosen"));
        if let Some(d) = s.get("default") {
            parts.push(format!("default {}", said(&d.to_string())));
        }
        let mut out = parts.join(", ");
        let title = s.get("title").and_then(Value::as_str);
        let description = s.get("description").and_then(Value::as_str);
        match (title, description) {
            (Some(t), Some(d)) => out += &format!(" · {} — {}", said(t), said(d)),
            (Some(t), None) => out += &format!(" · {}", said(t)),
            (None, Some(d)) => out += &format!(" · {}", said(d)),
            (None, None) => {}
        }
        out
    }

    /// A value typed for this field, as its schema's type: an integer, a
    /// number, true or false, or text (a choice may be given by its title).
    fn coerce(&self, text: &str) -> anyhow::Result<Value> {
        let name = said(&self.name);
        match self.ty() {
            "integer" => {
                text.trim().parse::<i64>().map(Value::from).map_err(|_| {
                    anyhow::anyhow!("--field {name}: an integer, not `{}`", said(text))
                })
            }
            "number" => {
                let t = text.trim();
                if let Ok(n) = t.parse::<i64>() {
                    return Ok(Value::from(n));
                }
                t.parse::<f64>()
                    .ok()
                    .and_then(serde_json::Number::from_f64)
                    .map(Value::Number)
                    .ok_or_else(|| {
                        anyhow::anyhow!("--field {name}: a number, not `{}`", said(text))
                    })
            }
            "boolean" => match text.trim().to_ascii_lowercase().as_str() {
                "true" | "yes" | "y" | "on" | "1" => Ok(Value::Bool(true)),
                "false" | "no" | "n" | "off" | "0" => Ok(Value::Bool(false)),
                _ => bail!("--field {name}: true or false, not `{}`", said(text)),
            },
            _ => Ok(Value::String(self.choice_value(text))),
        }
    }

    /// A choice by its value, or by its title when no value is spelt so;
    /// any other text as it is.
    fn choice_value(&self, text: &str) -> String {
        let choices = self.choices().unwrap_or_default();
        if choices.iter().any(|(v, _)| v == text) {
            return text.to_string();
        }
        choices
            .into_iter()
            .find(|(_, t)| t.as_deref() == Some(text))
            .map_or_else(|| text.to_string(), |(v, _)| v)
    }
}

/// Whether the form `r` has a field named `name`.
fn has_field(r: &InputAsked, name: &str) -> bool {
    form_fields(r.schema.as_ref())
        .iter()
        .any(|f| f.name == name)
}

/// Unix milliseconds as a UTC date and time, to the second.
fn utc(ms: i64) -> String {
    let iso = turnstile::wire::time::iso_utc(ms);
    format!("{} {} UTC", &iso[..10], &iso[11..19])
}

/// How long until `expires_ms`, or that it has passed.
fn until(expires_ms: i64, now_ms: i64) -> String {
    if expires_ms <= now_ms {
        return "expired".into();
    }
    let secs = (expires_ms - now_ms + 999) / 1000;
    match secs {
        s if s < 60 => format!("in {s} s"),
        s if s < 3600 => format!("in {} min", s / 60),
        s => format!("in {} h {} min", s / 3600, s % 3600 / 60),
    }
}

/// The clock the printer reads an interrupt's expiry against.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Where a printed `turnstile resume` line sends its decision.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ResumeHint {
    /// How to run this binary again ([`super::self_command`]).
    cmd: String,
    /// The server URL as the user gave it.
    url: String,
    thread: String,
}

impl ResumeHint {
    fn new(url: &str, thread: &str) -> Self {
        ResumeHint {
            cmd: super::self_command(),
            url: url.to_string(),
            thread: thread.to_string(),
        }
    }

    /// The line that shows more of the thread's last listing.
    fn more(&self) -> String {
        format!(
            "{} chat {} --thread {} --more",
            self.cmd,
            super::shell_word(&self.url),
            super::shell_word(&self.thread),
        )
    }

    /// The line that sends `decision`, as a user can paste it.
    fn command(&self, interrupt_id: &str, decision: Decision) -> String {
        format!(
            "{} resume {} {} {} {}",
            self.cmd,
            super::shell_word(&self.url),
            super::shell_word(&self.thread),
            super::shell_word(interrupt_id),
            decision.as_str()
        )
    }
}

/// How many of a card's rows the terminal prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    /// Every row the card holds: an answer may say "all 25 are in the card
    /// above", and the terminal must not make that false.
    All,
    /// At most this many, and a line saying how many were left out.
    AtMost(usize),
}

impl std::str::FromStr for Rows {
    type Err = String;
    fn from_str(s: &str) -> Result<Rows, String> {
        match s {
            "all" => Ok(Rows::All),
            n => n
                .parse()
                .map(Rows::AtMost)
                .map_err(|_| format!("`{n}` is not a number of rows or `all`")),
        }
    }
}

/// What one `turnstile chat` sends and how it prints.
#[derive(Debug, Clone)]
pub struct ChatOptions {
    /// Continue this thread instead of starting a new one.
    pub thread: Option<String>,
    /// The host context sent with the message (`{"floor": 4}`).
    pub context: Option<Value>,
    pub rows: Rows,
    /// A bearer token the server's verifier knows (`--token`,
    /// `TURNSTILE_TOKEN`); without one the caller is the stored session.
    pub token: Option<String>,
    /// "Show more" as the structured marker (`--more`): the server continues
    /// the listing the thread showed last, from its stored cursor.
    pub more: bool,
}

/// The host context from `--context JSON` and `--floor F` (which wins).
pub fn context(json: Option<&str>, floor: Option<String>) -> anyhow::Result<Option<Value>> {
    let mut context = match json {
        Some(text) => {
            let v: Value = serde_json::from_str(text).context("--context is not JSON")?;
            if !v.is_object() {
                bail!("--context must be a JSON object, such as '{{\"floor\": 4}}'");
            }
            Some(v)
        }
        None => None,
    };
    if let Some(f) = floor {
        let c = context.get_or_insert_with(|| json!({}));
        c["floor"] = f.parse::<i64>().map(Value::from).unwrap_or(Value::from(f));
    }
    Ok(context)
}

/// The card: its count as the grade allows it to be said, then its rows.
/// Items are the tool's own records (not frame fields), so they are read as
/// JSON.
fn citation(c: &Citation, rows: Rows) -> String {
    let displayed = c.displayed;
    let count = match (c.grade.as_str(), c.total) {
        ("EXACT", Some(0)) => "none (the source counted exactly 0)".to_string(),
        ("EXACT", Some(t)) if c.complete => format!("all {t}"),
        ("EXACT", Some(t)) => format!("{displayed} shown of exactly {t}"),
        ("LOWER_BOUND", Some(t)) => format!("{displayed} shown of at least {t}"),
        ("SHOWN", _) => format!("{displayed} shown"),
        _ => format!("{displayed} shown, total unknown"),
    };
    let mut out = format!("▣ {} — {count} [{}]", c.source, c.grade);
    // A continuation's rows follow the ones earlier cards of the listing
    // printed.
    if let Some(before) = c.shown_before {
        out += &match c.items.len() as u64 {
            0 => " · the list above, nothing added".to_string(),
            1 => format!(" · the list above, continued: item {}", before + 1),
            n => format!(
                " · the list above, continued: items {}–{}",
                before + 1,
                before + n
            ),
        };
    }
    let limit = match rows {
        Rows::All => c.items.len(),
        Rows::AtMost(n) => n.min(c.items.len()),
    };
    for item in c.items.iter().take(limit) {
        // Items of other servers have other fields: shown as compact JSON.
        if item.get("label").is_none() {
            let mut line = item.to_string();
            if line.chars().count() > 120 {
                line = line.chars().take(119).collect::<String>() + "…";
            }
            out += &format!("\n    {line}");
            continue;
        }
        let titles: Vec<&str> = item
            .get("annotations")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|a| a.get("title").and_then(Value::as_str))
            .collect();
        out += &format!(
            "\n    {} · floor {} · {} · {}",
            item.get("label").and_then(Value::as_str).unwrap_or("?"),
            item.get("floor").map(|f| f.to_string()).unwrap_or_default(),
            item.get("captured_at")
                .and_then(Value::as_str)
                .unwrap_or(""),
            titles.join(", ")
        );
    }
    let left = c.items.len() - limit;
    if left > 0 {
        let rows = if left == 1 { "row" } else { "rows" };
        out += &format!(
            "\n    … {left} more {rows} of this card not printed (--rows all prints them)"
        );
    }
    out
}

/// The server's own `frame` table (it may run with overridden tables),
/// validated here like any table file.
async fn server_frame_table(http: &reqwest::Client, base: &str) -> anyhow::Result<Table> {
    #[derive(Deserialize)]
    struct Row {
        id: String,
        from: String,
        on: String,
        legal: bool,
        to: Option<String>,
        effect: Option<String>,
        why: Option<String>,
    }
    #[derive(Deserialize)]
    struct Json {
        name: String,
        doc: String,
        initial: String,
        terminal: Vec<String>,
        states: Vec<String>,
        events: Vec<String>,
        effects: Vec<String>,
        #[serde(default)]
        precedence: Vec<String>,
        rows: Vec<Row>,
    }
    let url = format!("{base}/v1/tables/frame");
    let j: Json = http
        .get(&url)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let raw = RawTable {
        name: j.name,
        doc: j.doc,
        initial: j.initial,
        terminal: j.terminal,
        states: j.states,
        events: j.events,
        effects: j.effects,
        precedence: j.precedence,
        rows: j
            .rows
            .into_iter()
            .map(|r| match r.legal {
                true => RawRow::Legal {
                    id: r.id,
                    from: r.from,
                    on: r.on,
                    to: r.to.unwrap_or_default(),
                    effect: r.effect,
                },
                false => RawRow::Forbidden {
                    id: r.id,
                    from: r.from,
                    on: r.on,
                    why: r.why.unwrap_or_default(),
                },
            })
            .collect(),
    };
    let text = ron::to_string(&raw)?;
    turnstile::protocols::registry_check_source(&text, &url).map_err(|f| anyhow::anyhow!("{f}"))
}

/// One SSE event as a typed frame; a body that does not fit its kind is an
/// error, not a blank line.
fn read_frame(event: &SseEvent) -> anyhow::Result<Frame> {
    let kind = event.event.as_deref().unwrap_or("message");
    Frame::parse(kind, &event.data).with_context(|| {
        format!(
            "frame {}: cannot read it",
            event.id.as_deref().unwrap_or("without id")
        )
    })
}

/// The terminal side of a turn: frame lines, text deltas as they come, and
/// notes such as the thread id, all on one stream so that every line is
/// whole (a note never lands on the end of a card row or a text line).
struct Printer<W: Write> {
    out: W,
    rows: Rows,
    /// The last thing written was text without its line end.
    in_text: bool,
    /// Where an approval card's `turnstile resume` lines point, once the
    /// thread is known.
    resume: Option<ResumeHint>,
    /// Unix milliseconds now, for an approval card's expiry.
    clock: fn() -> i64,
    /// A call that reached no server (`server: None`): only a refusal
    /// emits one, so its line waits for its result, which says why it was
    /// never sent, instead of printing "calling" for a call that never went
    /// out.
    unsent: Option<ToolCall>,
}

impl<W: Write> Printer<W> {
    fn new(out: W, rows: Rows) -> Self {
        Printer {
            out,
            rows,
            in_text: false,
            resume: None,
            clock: now_ms,
            unsent: None,
        }
    }

    /// One whole line, after ending any open text line.
    fn line(&mut self, line: &str) -> std::io::Result<()> {
        self.end_text()?;
        writeln!(self.out, "{line}")?;
        self.out.flush()
    }

    fn end_text(&mut self) -> std::io::Result<()> {
        if self.in_text {
            writeln!(self.out)?;
            self.in_text = false;
        }
        Ok(())
    }

    fn frame(&mut self, f: &Frame) -> std::io::Result<()> {
        if let Some(held) = self.unsent.take() {
            match f {
                Frame::ToolResult(r) if r.call_id == held.call_id => {
                    return self.line(&unsent_line(r));
                }
                _ => self.flush_unsent(&held)?,
            }
        }
        if let Frame::ToolCall(c) = f {
            if c.server.is_none() {
                self.unsent = Some(c.clone());
                return Ok(());
            }
        }
        if let (Frame::Citation(c), Some(hint)) = (f, &self.resume) {
            if c.more {
                let line = describe(f, self.rows).unwrap_or_default();
                let more = format!(
                    "{line}
    ⋯ more: {}",
                    hint.more()
                );
                return self.line(&more);
            }
        }
        if let Frame::Delta(d) = f {
            match &d.replaced {
                // A safety check's: code's sentence or the redacted one,
                // marked with the guardrail table's row.
                Some(r) if r.table.as_deref() == Some("guardrail") => write!(
                    self.out,
                    "⟦{}⟧[guardrail: {}] ",
                    d.text.trim_end(),
                    r.row_id
                )?,
                // The guard's sentence, marked with the row that refused
                // the model's.
                Some(r) if !d.text.trim().is_empty() => {
                    write!(self.out, "⟦{}⟧[replaced: {}] ", d.text.trim_end(), r.row_id)?
                }
                // A refused sentence whose replacement was said already:
                // nothing takes its place, and the mark says so.
                Some(r) => write!(self.out, "[removed: {}] ", r.row_id)?,
                None => write!(self.out, "{}", inert_urls(d))?,
            }
            // A capability the server validated: the link on its own
            // line, whole, so a terminal can open it.
            for c in &d.capabilities {
                let until = c
                    .expires_at
                    .as_deref()
                    .map(|at| format!(" (until {at})"))
                    .unwrap_or_default();
                write!(self.out, "\n⇩ {}: {}{until}", c.label, c.url)?;
            }
            self.in_text = true;
            return self.out.flush();
        }
        if let Frame::Interrupt(i) = f {
            let card = interrupt(i, Some((self.clock)()), self.resume.as_ref());
            return self.line(&card);
        }
        match describe(f, self.rows) {
            Some(line) => self.line(&line),
            None => Ok(()),
        }
    }

    /// A held call whose result never came: it reached no server all the
    /// same.
    fn flush_unsent(&mut self, held: &ToolCall) -> std::io::Result<()> {
        self.line(&format!("· {}: not sent to any server", held.tool))
    }

    /// Ends the output on a line boundary, whatever happened.
    fn finish(&mut self) -> std::io::Result<()> {
        if let Some(held) = self.unsent.take() {
            self.flush_unsent(&held)?;
        }
        self.end_text()?;
        self.out.flush()
    }
}

/// Runs one turn against a server; returns an error if the server answered
/// with an error frame or broke the frame order.
pub async fn run(url: &str, message: &str, opts: &ChatOptions) -> anyhow::Result<()> {
    let mut printer = Printer::new(super::stdout(), opts.rows);
    let result = turn(&mut printer, url, message, opts).await;
    printer.finish()?;
    result
}

async fn turn<W: Write>(
    printer: &mut Printer<W>,
    url: &str,
    message: &str,
    opts: &ChatOptions,
) -> anyhow::Result<()> {
    let base = url.trim_end_matches('/');
    let client = super::client::Client::new(base, opts.token.as_deref())?;
    let result = chat_turn(printer, &client.http, base, message, opts).await;
    client.save();
    result
}

async fn chat_turn<W: Write>(
    printer: &mut Printer<W>,
    http: &reqwest::Client,
    base: &str,
    message: &str,
    opts: &ChatOptions,
) -> anyhow::Result<()> {
    let url = base;
    let thread = match &opts.thread {
        Some(t) => t.clone(),
        None => {
            #[derive(Deserialize)]
            struct Created {
                thread_id: String,
            }
            let r: Created = http
                .post(format!("{base}/v1/threads"))
                .json(&json!({}))
                .send()
                .await
                .with_context(|| format!("cannot reach {base}"))?
                .error_for_status()?
                .json()
                .await
                .context("server returned no thread_id")?;
            r.thread_id
        }
    };
    // The follow-up ("only those from April") goes to the same thread.
    printer.line(&format!(
        "thread {thread}  (follow up with --thread {thread})"
    ))?;
    printer.resume = Some(ResumeHint::new(url, &thread));
    let mut body = json!({"text": message});
    if opts.more {
        body["more"] = json!(true);
    }
    if let Some(c) = &opts.context {
        body["context"] = c.clone();
    }
    let resp = http
        .post(format!("{base}/v1/threads/{thread}/messages"))
        .json(&body)
        .send()
        .await?;
    stream(printer, http, base, resp).await
}

/// An answer that is not a stream: its status, and the server's reason with
/// the table row that refused, if it names one (`{"error": "…", "table":
/// "approval", "row_id": "second-approve"}`); any other body as it came.
fn error_answer(status: reqwest::StatusCode, body: &str) -> anyhow::Error {
    #[derive(Deserialize)]
    struct ErrorBody {
        error: String,
        #[serde(default)]
        table: Option<String>,
        #[serde(default)]
        row_id: Option<String>,
    }
    let Ok(e) = serde_json::from_str::<ErrorBody>(body) else {
        return match body.trim() {
            "" => anyhow::anyhow!("{status}"),
            body => anyhow::anyhow!("{status}: {body}"),
        };
    };
    let row = match (e.table, e.row_id) {
        (Some(t), Some(r)) => format!(" (table {t}, row {r})"),
        (None, Some(r)) => format!(" (row {r})"),
        (Some(t), None) => format!(" (table {t})"),
        (None, None) => String::new(),
    };
    anyhow::anyhow!("{status}: {}{row}", e.error)
}

/// Prints one response stream, checking its frame order against the
/// server's `frame` table; an answer that is not a success is an error with
/// the server's reason ([`error_answer`]).
async fn stream<W: Write>(
    printer: &mut Printer<W>,
    http: &reqwest::Client,
    base: &str,
    resp: reqwest::Response,
) -> anyhow::Result<()> {
    if !resp.status().is_success() {
        let status = resp.status();
        let body = resp.text().await.unwrap_or_default();
        return Err(error_answer(status, &body));
    }
    let frame = Arc::new(server_frame_table(http, base).await?);
    let mut machine = Machine::new(frame.clone());
    let mut sse = SseDecoder::new();
    let mut body = resp.bytes_stream();
    let mut failed = false;
    let mut eof = false;
    while !eof {
        match body.next().await {
            Some(chunk) => sse.push(&chunk?),
            None => {
                sse.finish();
                eof = true;
            }
        }
        while let Some(event) = sse.next_event() {
            let kind = event.event.as_deref().unwrap_or("message");
            let ev = frame
                .event_index(kind)
                .with_context(|| format!("unknown frame kind {kind}"))?;
            if let Err(v) = machine.fire(ev) {
                bail!("frame order violation: row {} — {}", v.row_id, v.why);
            }
            let f = read_frame(&event)?;
            failed |= matches!(f, Frame::Error(_));
            printer.frame(&f)?;
            if let Frame::Interrupt(i) = &f {
                for url in connect_urls(i) {
                    let line = match sign_in_link(http, base, &url).await {
                        Ok(link) => format!("  open to sign in (once, within 5 minutes): {link}"),
                        Err(e) => format!("  no sign-in link: {e}"),
                    };
                    printer.line(&line)?;
                }
            }
        }
    }
    if let Err(v) = machine.fire(frame.event_index("close").context("close event")?) {
        bail!("frame order violation: row {} — {}", v.row_id, v.why);
    }
    if failed {
        bail!("the turn ended with an error");
    }
    Ok(())
}

/// The flow addresses of an interrupt's Connect requests.
fn connect_urls(i: &Interrupt) -> Vec<String> {
    (i.input.iter())
        .flat_map(|p| p.requests.iter())
        .filter(|r| r.mode == "connect")
        .filter_map(|r| r.url.clone())
        .collect()
}

/// A one-time sign-in link for a Connect card, asked for with this
/// client's credentials (`POST …/ticket`), as an absolute URL of `base`.
async fn sign_in_link(http: &reqwest::Client, base: &str, flow: &str) -> anyhow::Result<String> {
    let path = reqwest::Url::parse(flow)
        .map(|u| u.path().to_string())
        .context("the card's address is not a URL")?;
    let base = reqwest::Url::parse(base).context("the server's address")?;
    let r = http
        .post(base.join(&format!("{path}/ticket"))?)
        .send()
        .await?;
    if !r.status().is_success() {
        bail!("the server answered {}", r.status());
    }
    let body: Value = r.json().await?;
    let link = body["url"].as_str().context("no url in the answer")?;
    Ok(base.join(link)?.to_string())
}

/// A human's answer to an interrupt: an approval's `approve` or `deny`, or
/// a question's `accept`, `decline` or `cancel`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Approve,
    Deny,
    Accept,
    Decline,
    Cancel,
}

impl Decision {
    /// As the resume request and the command line spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Deny => "deny",
            Decision::Accept => "accept",
            Decision::Decline => "decline",
            Decision::Cancel => "cancel",
        }
    }
}

/// What `turnstile resume` was asked for.
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
#[command(after_long_help = RESUME_HELP)]
pub struct ResumeArgs {
    /// Server base URL, e.g. http://127.0.0.1:8080/
    pub url: String,
    /// The thread the interrupt was shown on (chat's first line).
    pub thread: String,
    /// The interrupt to decide (printed with the approval request or the
    /// question).
    pub interrupt_id: String,
    /// An approval: `approve` sends the prepared action's confirm (once);
    /// `deny` cancels it. A question of a tool's server: `accept` sends
    /// your answers (once); `decline` and `cancel` tell the server no.
    #[arg(value_enum)]
    pub decision: Decision,
    /// With `accept`: one value of the question's form, `NAME=VALUE`
    /// (repeatable). Typed by the form's schema: an integer, a number,
    /// true/false, a choice by its value or title; a multi-select's field
    /// once per choice. `NAME:=JSON` sends the JSON as it is. A question
    /// with several forms: `REQUEST.NAME=VALUE`.
    #[arg(long = "field", value_name = "NAME=VALUE")]
    pub fields: Vec<String>,
    /// With `accept`: the answers as JSON, by request key, sent as given
    /// ('{"contact": {"name": "Ana", "urgent": true}}'); each `--field`
    /// goes over it.
    #[arg(long, value_name = "JSON")]
    pub answers: Option<String>,
    /// How many rows of each card to print: a number or `all`.
    #[arg(long, default_value = "all")]
    pub rows: Rows,
    /// Decide as this bearer token's subject (the thread's owner); without
    /// one, as the session `turnstile chat` kept for this server.
    #[arg(long, env = "TURNSTILE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// `turnstile resume --help`'s closing words: how a question is answered.
const RESUME_HELP: &str = "\
Answering a question of a tool's server (`turnstile chat` prints it with these lines filled in):
  turnstile resume URL THREAD INTERRUPT accept --field name=Ana --field email=ana@example.com
  turnstile resume URL THREAD INTERRUPT accept --answers '{\"contact\": {\"name\": \"Ana\"}}'
  turnstile resume URL THREAD INTERRUPT decline
  turnstile resume URL THREAD INTERRUPT cancel
`--field` values are typed by the question's form, which is read from the thread: `--field count=3` \
sends the number 3 to an integer field, `--field urgent=yes` true to a boolean one. When the form \
cannot be read, name the request (`--field contact.name=Ana`): values are then sent as text, and \
`NAME:=JSON` sends JSON (`--field contact.urgent:=true`). A URL question takes no values: open the \
URL yourself; `accept` says you agree to open it, not that anything there is done. The server checks \
the answers against the form: a refusal (422) sends nothing and the question still waits.";

/// Sends one decision and streams the resumed turn like `chat` does; returns
/// an error if the server refused the decision (its status, reason and
/// row), answered with an error frame or broke the frame order.
pub async fn resume(args: &ResumeArgs) -> anyhow::Result<()> {
    let mut printer = Printer::new(super::stdout(), args.rows);
    let result = resumed(&mut printer, args).await;
    printer.finish()?;
    result
}

async fn resumed<W: Write>(printer: &mut Printer<W>, args: &ResumeArgs) -> anyhow::Result<()> {
    let base = args.url.trim_end_matches('/');
    let client = super::client::Client::new(base, args.token.as_deref())?;
    let result = resumed_with(printer, &client.http, base, args).await;
    client.save();
    result
}

async fn resumed_with<W: Write>(
    printer: &mut Printer<W>,
    http: &reqwest::Client,
    base: &str,
    args: &ResumeArgs,
) -> anyhow::Result<()> {
    let thread = &args.thread;
    let answers = answers(http, base, args).await?;
    let resp = http
        .post(format!("{base}/v1/threads/{thread}/resume"))
        .json(&resume_body(args, answers))
        .send()
        .await
        .with_context(|| format!("cannot reach {base}"))?;
    if !resp.status().is_success() {
        // A refused decision: nothing was resumed. Its row and what the
        // interrupt is now are the user's answer, on stdout like the rest;
        // the error (and the exit status) follows.
        let status = resp.status();
        let body = resp.text().await.unwrap_or_default();
        let error = error_answer(status, &body);
        if let Some(line) = refused_decision(args, status, &body) {
            printer.line(&line)?;
            let state = approval_now(http, base, thread, &args.interrupt_id).await;
            if let Some(line) = state {
                printer.line(&line)?;
            }
        }
        return Err(error);
    }
    printer.line(&format!(
        "thread {thread}  ({} interrupt {}; follow up with chat --thread {thread})",
        args.decision.as_str(),
        args.interrupt_id
    ))?;
    // The resumed turn may ask again, about another action.
    printer.resume = Some(ResumeHint::new(&args.url, thread));
    stream(printer, http, base, resp).await
}

/// A decision the approval table refused (a 409 or 404 naming its row):
/// `✗ approve refused by approval:approve-after-withdrawal (409 Conflict)`.
fn refused_decision(args: &ResumeArgs, status: reqwest::StatusCode, body: &str) -> Option<String> {
    let v: Value = serde_json::from_str(body).ok()?;
    let row = v["row_id"].as_str()?;
    let table = v["table"].as_str().unwrap_or("approval");
    Some(format!(
        "✗ {} refused by {table}:{row} ({status}) — nothing was sent",
        args.decision.as_str()
    ))
}

/// What the approval machine says of interrupt `interrupt_id` now, as the
/// stored thread lists it: `  interrupt ID is Withdrawn: withdrawn by a
/// newer message; its cancel was sent`. `None` when the thread cannot be
/// read or does not list it.
async fn approval_now(
    http: &reqwest::Client,
    base: &str,
    thread: &str,
    interrupt_id: &str,
) -> Option<String> {
    let resp = http
        .get(format!("{base}/v1/threads/{thread}"))
        .send()
        .await
        .ok()?;
    if !resp.status().is_success() {
        return None;
    }
    let t: Value = resp.json().await.ok()?;
    let state = t["approvals"]
        .as_array()?
        .iter()
        .find(|a| a["interrupt_id"] == interrupt_id)?["state"]
        .as_str()?
        .to_string();
    let asks = match asked_in(&t, interrupt_id) {
        Ok(_) => Asks::Question,
        Err(_) if held_call(&t, interrupt_id) => Asks::HeldCall,
        Err(_) => Asks::Prepared,
    };
    Some(format!(
        "  interrupt {} is {}: {}",
        said(interrupt_id),
        said(&state),
        approval_words(&state, asks)
    ))
}

/// What an interrupt waited for: a question of a tool's server, a call
/// held before it was sent, or an action a prepare holds at its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asks {
    Question,
    HeldCall,
    Prepared,
}

/// Whether the stored interrupt `interrupt_id` held the call itself (its
/// action names no action id): there was no cancel to send.
fn held_call(thread: &Value, interrupt_id: &str) -> bool {
    (thread["messages"].as_array().into_iter().flatten())
        .map(|m| &m["body"])
        .filter(|b| b["kind"] == "interrupt")
        .map(|b| match b.get("interrupt_id") {
            Some(_) => b,
            None => &b["interrupt"],
        })
        .find(|b| b["interrupt_id"] == interrupt_id)
        .is_some_and(|b| b["action"]["action_id"].is_null())
}

/// The approval machine's states (tables/approval.ron) in words, as the
/// page says them: a question's own words where they differ.
fn approval_words(state: &str, asks: Asks) -> &'static str {
    let question = asks == Asks::Question;
    match (state, question) {
        // A held call has no cancel: nothing of it ever went out.
        ("Withdrawn", false) if asks == Asks::HeldCall => {
            "withdrawn by a newer message; the call was never sent"
        }
        ("Awaiting", true) => "still waiting for your answer",
        ("Awaiting", false) => "still waiting for your decision",
        ("Confirming", true) => "answered; the call has not finished",
        ("Confirming", false) => "approved; its confirm was sent and has not finished",
        ("Accepted" | "Completed", true) => "answered",
        ("Accepted", false) => "approved and accepted by the server",
        ("Completed", false) => "approved and completed",
        ("Failed", true) => "answered; the call then failed",
        ("Failed", false) => "approved, but the action failed",
        ("Denied", _) => "denied",
        ("Expired", true) => "expired: it was not answered in time",
        ("Expired", false) => "expired: it was not decided in time; its cancel was sent",
        ("Withdrawn", true) => "withdrawn: a new message was sent before it was answered",
        ("Withdrawn", false) => "withdrawn by a newer message; its cancel was sent",
        ("Voided", _) => {
            "voided: the server no longer holds this request under its number; nothing was sent"
        }
        _ => "outcome unknown: whether it ran is not known",
    }
}

/// `POST /v1/threads/{id}/resume`'s body: with `answers`, an accept's.
fn resume_body(args: &ResumeArgs, answers: Option<Value>) -> Value {
    let mut body = json!({"interrupt_id": args.interrupt_id, "decision": args.decision.as_str()});
    if let Some(answers) = answers {
        body["answers"] = answers;
    }
    body
}

/// The answers an `accept` sends: `--answers` as given, each `--field`
/// over it, typed by the question's form when the thread shows it. `None`
/// when neither was given.
async fn answers(
    http: &reqwest::Client,
    base: &str,
    args: &ResumeArgs,
) -> anyhow::Result<Option<Value>> {
    if args.fields.is_empty() && args.answers.is_none() {
        return Ok(None);
    }
    if args.decision != Decision::Accept {
        bail!(
            "--field and --answers go with accept; {} sends no answers",
            args.decision.as_str()
        );
    }
    let mut answers = match &args.answers {
        Some(text) => match serde_json::from_str::<Value>(text).context("--answers is not JSON")? {
            Value::Object(m) => m,
            _ => bail!("--answers must be a JSON object by request key, such as '{{\"contact\": {{\"name\": \"Ana\"}}}}'"),
        },
        None => serde_json::Map::new(),
    };
    if !args.fields.is_empty() {
        let asked = asked(http, base, &args.thread, &args.interrupt_id).await;
        fill(&mut answers, &args.fields, asked.as_deref())?;
    }
    Ok(Some(Value::Object(answers)))
}

/// What the question `interrupt_id` asks, as the thread's stored interrupt
/// shows it; `Err`: why the CLI cannot say.
async fn asked(
    http: &reqwest::Client,
    base: &str,
    thread: &str,
    interrupt_id: &str,
) -> Result<Vec<InputAsked>, String> {
    let resp = http
        .get(format!("{base}/v1/threads/{thread}"))
        .send()
        .await
        .map_err(|e| format!("cannot reach {base}: {e}"))?;
    if !resp.status().is_success() {
        let status = resp.status();
        let body = resp.text().await.unwrap_or_default();
        return Err(format!(
            "reading the thread: {}",
            error_answer(status, &body)
        ));
    }
    let thread: Value = resp
        .json()
        .await
        .map_err(|e| format!("the thread is not JSON: {e}"))?;
    asked_in(&thread, interrupt_id)
}

/// [`asked`] over a thread as `GET /v1/threads/{id}` answers it.
fn asked_in(thread: &Value, interrupt_id: &str) -> Result<Vec<InputAsked>, String> {
    let found = thread["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| &m["body"])
        .filter(|b| b["kind"] == "interrupt")
        .map(|b| {
            if b.get("interrupt_id").is_some() {
                b
            } else {
                &b["interrupt"]
            }
        })
        .find(|b| b["interrupt_id"] == interrupt_id)
        .ok_or_else(|| format!("the thread shows no interrupt {interrupt_id}"))?;
    let shown: Interrupt = serde_json::from_value(found.clone())
        .map_err(|e| format!("its interrupt does not read: {e}"))?;
    shown
        .input
        .map(|i| i.requests)
        .ok_or_else(|| "it is an approval, not a question: decide it with approve or deny".into())
}

/// Each `--field` into `answers`: `[REQUEST.]NAME=VALUE` typed by its
/// field in the question's forms (`asked`), or as text when the forms are
/// unknown (the request then named); `NAME:=JSON` as JSON. A field given
/// twice, or a multi-select's, collects its values into a list.
fn fill(
    answers: &mut serde_json::Map<String, Value>,
    fields: &[String],
    asked: Result<&[InputAsked], &String>,
) -> anyhow::Result<()> {
    let forms: Option<Vec<&InputAsked>> = asked
        .ok()
        .map(|a| a.iter().filter(|r| r.mode != "url").collect());
    let mut seen: Vec<(String, String)> = Vec::new();
    for arg in fields {
        let Some((left, text)) = arg.split_once('=') else {
            bail!("--field {}: NAME=VALUE", said(arg));
        };
        if text == "..." {
            bail!(
                "--field {}: replace `...` with your answer (an accept is sent once)",
                said(left)
            );
        }
        let (left, raw) = match left.strip_suffix(':') {
            Some(l) => (l, true),
            None => (left, false),
        };
        let (key, name, field) = match &forms {
            Some(forms) => {
                let (form, name): (&InputAsked, String) = match forms.as_slice() {
                    [] => bail!("--field {}: this question has no form to fill (a URL: accept it without --field)", said(left)),
                    [one] => match left.strip_prefix(&format!("{}.", one.key)) {
                        Some(name) if !has_field(one, left) => (one, name.to_string()),
                        _ => (one, left.to_string()),
                    },
                    many => many
                        .iter()
                        .find_map(|r| {
                            left.strip_prefix(&format!("{}.", r.key))
                                .map(|n| (*r, n.to_string()))
                        })
                        .ok_or_else(|| {
                            let keys: Vec<String> = many.iter().map(|r| quoted(&r.key)).collect();
                            anyhow::anyhow!(
                                "--field {}: this question has several forms ({}); name one: REQUEST.NAME=VALUE",
                                said(left),
                                keys.join(", ")
                            )
                        })?,
                };
                let key = form.key.clone();
                let all = form_fields(form.schema.as_ref());
                let Some(field) = all.iter().find(|f| f.name == name).cloned() else {
                    let names: Vec<String> = all.iter().map(|f| said(&f.name)).collect();
                    bail!(
                        "--field {}: the form {} has no such field (its fields: {})",
                        said(&name),
                        quoted(&key),
                        names.join(", ")
                    );
                };
                (key, name, Some(field))
            }
            None => {
                let why = asked.err().map(String::as_str).unwrap_or_default();
                let Some((key, name)) = left.split_once('.') else {
                    bail!(
                        "--field {}: the question's form cannot be read ({why}); name its request, --field REQUEST.NAME=VALUE, or give --answers JSON",
                        said(left)
                    );
                };
                (key.to_string(), name.to_string(), None)
            }
        };
        let value = match (raw, &field) {
            (true, _) => serde_json::from_str(text)
                .with_context(|| format!("--field {}:=…: not JSON", said(&name)))?,
            // A multi-select's choice, by its value or title.
            (false, Some(f)) if f.ty() == "array" => Value::String(f.choice_value(text)),
            (false, Some(f)) => f.coerce(text)?,
            (false, None) => Value::String(text.to_string()),
        };
        let again = seen.contains(&(key.clone(), name.clone()));
        let multi = field.as_ref().map(|f| f.ty() == "array");
        if again && !raw && multi == Some(false) {
            bail!(
                "--field {}: given twice; the field takes one value",
                said(&name)
            );
        }
        let collect = !raw && (multi == Some(true) || again);
        let form = answers.entry(key.clone()).or_insert_with(|| json!({}));
        let Some(form) = form.as_object_mut() else {
            bail!("--answers: {} is not an object of fields", quoted(&key));
        };
        match form.get_mut(&name) {
            Some(Value::Array(items)) if collect && again => items.push(value),
            Some(old) if collect && again => {
                let first = old.take();
                *old = Value::Array(vec![first, value]);
            }
            _ if collect => {
                form.insert(name.clone(), Value::Array(vec![value]));
            }
            _ => {
                form.insert(name.clone(), value);
            }
        }
        seen.push((key, name));
    }
    Ok(())
}

/// A delta's text with every URL that the server did not list (as a
/// delivered capability or a link of an allowed origin) defanged
/// (`https[:]//…`), so that a terminal does not offer it as a link: a
/// model's own URL is text, never one click away (issue 33).
fn inert_urls(d: &turnstile::wire::Delta) -> String {
    turnstile::mcp::url::replace_urls(&d.text, |url| {
        let listed =
            d.capabilities.iter().any(|c| c.url == url) || d.links.iter().any(|l| l == url);
        match listed {
            true => url.to_string(),
            false => url.replacen("://", "[:]//", 1),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnstile::wire::sse::parse_all;
    use turnstile::wire::{Done, Plan, PlanStep, ToolCall};

    #[test]
    fn split_frames_and_comments_give_typed_frames() {
        let body = "id: 1\nevent: done\nda";
        let mut d = SseDecoder::new();
        d.push(body.as_bytes());
        assert_eq!(d.next_event(), None);
        d.push(b"ta: {\"turn_id\":\"t1\"}\n\n: keep-alive\n\n");
        let event = d.next_event().expect("one event");
        assert_eq!(
            read_frame(&event).unwrap(),
            Frame::Done(Done {
                turn_id: "t1".into()
            })
        );
        assert_eq!(d.next_event(), None);
    }

    #[test]
    fn a_body_that_does_not_fit_its_kind_is_an_error() {
        let events = parse_all(b"id: 7\nevent: delta\ndata: {\"txt\":\"x\"}\n\n");
        let err = read_frame(&events[0]).unwrap_err();
        assert!(format!("{err:#}").contains("frame 7"), "{err:#}");
    }

    #[test]
    fn lines_keep_the_readme_format() {
        let mut args = serde_json::Map::new();
        args.insert("query".into(), json!("safety"));
        args.insert("floor".into(), json!(3));
        let mut plan = Plan {
            step: 1,
            steps: vec![PlanStep {
                tool: "search_photos".into(),
                args: args.clone(),
            }],
            note: String::new(),
            scope: None,
        };
        assert_eq!(
            describe_all(&Frame::Plan(plan.clone())).unwrap(),
            r#"· plan: [{"args":{"floor":3,"query":"safety"},"tool":"search_photos"}]"#
        );
        plan.step = 2;
        assert!(describe_all(&Frame::Plan(plan))
            .unwrap()
            .starts_with("· plan (step 2): [{"));
        let call = ToolCall {
            call_id: "c".into(),
            tool: "search_photos".into(),
            server: Some("demo".into()),
            args,
        };
        assert_eq!(
            describe_all(&Frame::ToolCall(call)).unwrap(),
            "· calling search_photos on demo"
        );
        let card = Citation {
            source: "search_photos".into(),
            items: vec![
                json!({"label": "PANO-003-0611", "floor": 3, "captured_at": "2026-08-28",
                "annotations": [{"title": "unprotected floor edge"}, {"title": "blocked fire exit"}]}),
            ],
            displayed: 10,
            total: Some(189),
            total_is_lower_bound: true,
            has_more: true,
            grade: "LOWER_BOUND".into(),
            complete: false,
            narrowed: false,
            stitch: None,
            listing: None,
            shown_before: None,
            more: false,
            links: Vec::new(),
        };
        assert_eq!(
            describe_all(&Frame::Citation(card)).unwrap(),
            "▣ search_photos — 10 shown of at least 189 [LOWER_BOUND]\n    \
             PANO-003-0611 · floor 3 · 2026-08-28 · unprotected floor edge, blocked fire exit"
        );
        let figure = |grade: &str, accounted: bool| {
            Frame::Figure(Figure {
                source: "read_query".into(),
                label: "n".into(),
                value: json!(651),
                grade: grade.into(),
                accounted,
                query: serde_json::Map::new(),
            })
        };
        assert_eq!(
            describe_all(&figure("EXACT", true)).unwrap(),
            "▣ read_query — n: exactly 651 [EXACT]"
        );
        assert_eq!(
            describe_all(&figure("SHOWN", false)).unwrap(),
            "▣ read_query — n: 651, as the server reports it (not accounted) [SHOWN]"
        );
        // Another server's items: compact JSON, not the demo's layout.
        let other = Citation {
            items: vec![json!({"uid": "P04-0001", "floor": 4})],
            displayed: 1,
            total: Some(198),
            grade: "EXACT".into(),
            total_is_lower_bound: false,
            ..match describe_card_fixture() {
                Frame::Citation(c) => c,
                _ => unreachable!(),
            }
        };
        assert_eq!(
            describe_all(&Frame::Citation(other)).unwrap(),
            "▣ search_photos — 1 shown of exactly 198 [EXACT]\n    {\"floor\":4,\"uid\":\"P04-0001\"}"
        );
    }

    #[test]
    fn every_line_is_whole() {
        let mut p = Printer::new(Vec::new(), Rows::All);
        let card = Citation {
            items: vec![json!({"label": "PANO-1", "floor": 3, "captured_at": "d"})],
            displayed: 1,
            ..match describe_card_fixture() {
                Frame::Citation(c) => c,
                _ => unreachable!(),
            }
        };
        p.line("thread t1").unwrap();
        p.frame(&Frame::Citation(card)).unwrap();
        p.line("thread t1").unwrap();
        p.frame(&Frame::Delta(
            serde_json::from_value(json!({"text": "Two photos"})).unwrap(),
        ))
        .unwrap();
        p.line("thread t1").unwrap();
        p.frame(&Frame::Delta(
            serde_json::from_value(json!({"text": "cut off"})).unwrap(),
        ))
        .unwrap();
        p.finish().unwrap();
        let out = String::from_utf8(p.out).unwrap();
        assert_eq!(
            out,
            "thread t1\n\
             ▣ search_photos — 1 shown, total unknown [UNKNOWN]\n    PANO-1 · floor 3 · d · \n\
             thread t1\n\
             Two photos\n\
             thread t1\n\
             cut off\n"
        );
    }

    /// A continuation's rows are numbered after the ones its listing
    /// printed before, and a listing that can go on prints the command that
    /// shows more of it.
    #[test]
    fn a_continuation_follows_the_list_above() {
        let card: Citation = serde_json::from_value(json!({
            "source": "search_photos",
            "items": [{"id": "P-11", "label": "PANO-11", "floor": 3, "captured_at": "d"}],
            "displayed": 11, "total": 613, "total_is_lower_bound": false, "has_more": true,
            "grade": "EXACT", "complete": false, "narrowed": false,
            "listing": "turn#1", "shown_before": 10, "more": true,
        }))
        .unwrap();
        let mut p = Printer::new(Vec::new(), Rows::All);
        p.resume = Some(ResumeHint {
            cmd: "turnstile".into(),
            url: "http://127.0.0.1:8080".into(),
            thread: "t1".into(),
        });
        p.frame(&Frame::Citation(card)).unwrap();
        p.finish().unwrap();
        assert_eq!(
            String::from_utf8(p.out).unwrap(),
            "▣ search_photos — 11 shown of exactly 613 [EXACT] · the list above, continued: item 11\n    \
             PANO-11 · floor 3 · d · \n    \
             ⋯ more: turnstile chat http://127.0.0.1:8080 --thread t1 --more\n"
        );
    }

    /// A URL the server did not list is defanged, so no terminal offers it
    /// as a link; a listed capability and an allowed link stay whole.
    #[test]
    fn only_listed_urls_stay_links() {
        let mut p = Printer::new(Vec::new(), Rows::All);
        let cap = "http://127.0.0.1:8090/api/lms/exports/J1/download?token=abc";
        let doc = "https://docs.example.com/guide";
        let text = format!("Made up: https://lms.example.com/x?token=g. Docs: {doc}. Yours: {cap}");
        p.frame(&Frame::Delta(
            serde_json::from_value(json!({
                "text": text,
                "capabilities": [{"url": cap, "label": "Download"}],
                "links": [doc],
            }))
            .unwrap(),
        ))
        .unwrap();
        p.finish().unwrap();
        let out = String::from_utf8(p.out).unwrap();
        assert!(
            out.contains("Made up: https[:]//lms.example.com/x?token=g."),
            "{out}"
        );
        assert!(!out.contains("https://lms.example.com"), "{out}");
        assert!(out.contains(&format!("Docs: {doc}.")), "{out}");
        assert!(out.contains(&format!("Yours: {cap}")), "{out}");
    }

    /// A delivered capability is printed whole on a line of its own, with
    /// its name and expiry, after the message that carries it.
    #[test]
    fn a_capability_gets_a_line_of_its_own() {
        let mut p = Printer::new(Vec::new(), Rows::All);
        let url = "http://127.0.0.1:8090/api/lms/exports/J1/download?token=abc";
        p.frame(&Frame::Delta(
            serde_json::from_value(json!({
                "text": format!("\n\n[Download lecture files]({url})"),
                "capabilities": [{"url": url, "label": "Download lecture files", "expires_at": "2026-12-02T07:00:00Z"}],
            }))
            .unwrap(),
        ))
        .unwrap();
        p.finish().unwrap();
        let out = String::from_utf8(p.out).unwrap();
        assert!(
            out.ends_with(&format!(
                "\n⇩ Download lecture files: {url} (until 2026-12-02T07:00:00Z)\n"
            )),
            "{out}"
        );
    }

    fn describe_all(f: &Frame) -> Option<String> {
        describe(f, Rows::All)
    }

    #[test]
    fn a_card_prints_every_row_or_says_how_many_it_left_out() {
        let items: Vec<Value> = (0..25)
            .map(|i| json!({"label": format!("PANO-{i}"), "floor": 3, "captured_at": "d"}))
            .collect();
        let card = Citation {
            items,
            displayed: 25,
            total: Some(25),
            grade: "EXACT".into(),
            complete: true,
            ..match describe_card_fixture() {
                Frame::Citation(c) => c,
                _ => unreachable!(),
            }
        };
        let all = citation(&card, Rows::All);
        assert_eq!(all.lines().count(), 26, "{all}");
        assert!(all.starts_with("▣ search_photos — all 25 [EXACT]"));
        let ten = citation(&card, Rows::AtMost(10));
        assert_eq!(ten.lines().count(), 12, "{ten}");
        assert!(
            ten.ends_with("… 15 more rows of this card not printed (--rows all prints them)"),
            "{ten}"
        );
        assert_eq!(citation(&card, Rows::AtMost(30)), all);
        assert_eq!("all".parse::<Rows>(), Ok(Rows::All));
        assert_eq!("7".parse::<Rows>(), Ok(Rows::AtMost(7)));
        assert!("seven".parse::<Rows>().is_err());
    }

    /// A call that reached no server is printed once, at its result: as
    /// refused by its table and row when a row refused it, else as not
    /// sent with the reason; never as "calling". A call a server took is
    /// printed as before, its error as its error even when it reads like a
    /// refusal.
    #[test]
    fn a_call_no_server_took_is_printed_as_never_sent() {
        let call = |id: &str, tool: &str, server: Option<&str>| {
            Frame::ToolCall(ToolCall {
                call_id: id.into(),
                tool: tool.into(),
                server: server.map(str::to_string),
                args: serde_json::Map::new(),
            })
        };
        let result = |id: &str, tool: &str, ok: bool, summary: &str, refusal: Option<Value>| {
            Frame::ToolResult(ToolResult {
                call_id: id.into(),
                tool: tool.into(),
                ok,
                summary: summary.into(),
                shape: None,
                conflict: None,
                refusal,
            })
        };
        let mut p = Printer::new(Vec::new(), Rows::All);
        p.frame(&call("c1", "confirm_action", None)).unwrap();
        p.frame(&result(
            "c1",
            "confirm_action",
            false,
            "not run (approval row `confirm-without-approval`): Only a human's approve confirms.",
            None,
        ))
        .unwrap();
        p.frame(&call("c2", "search_photos", None)).unwrap();
        p.frame(&result(
            "c2",
            "search_photos",
            false,
            "not run",
            Some(json!({"table": "licence", "row_id": "tier-too-low"})),
        ))
        .unwrap();
        p.frame(&call("c3", "search_photos", None)).unwrap();
        p.frame(&result(
            "c3",
            "search_photos",
            false,
            "not run: floor 5 lies outside the previous results (floor 3)",
            None,
        ))
        .unwrap();
        p.frame(&call("c4", "get_action", Some("demo"))).unwrap();
        p.frame(&result(
            "c4",
            "get_action",
            false,
            "not run (x row `y`): z",
            None,
        ))
        .unwrap();
        // A call whose result never came: the stream ended first.
        p.frame(&call("c5", "confirm_action", None)).unwrap();
        p.finish().unwrap();
        assert_eq!(
            String::from_utf8(p.out).unwrap(),
            "✗ confirm_action refused by approval:confirm-without-approval — never sent\n\
             ✗ search_photos refused by licence:tier-too-low — never sent\n\
             ✗ search_photos not sent: not run: floor 5 lies outside the previous results (floor 3)\n\
             · calling get_action on demo\n\
             · get_action FAILED: not run (x row `y`): z\n\
             · confirm_action: not sent to any server\n"
        );
    }

    #[test]
    fn a_removed_sentence_is_marked_never_an_empty_bracket() {
        let mut p = Printer::new(Vec::new(), Rows::All);
        let replaced = |text: &str| {
            Frame::Delta(
                serde_json::from_value(json!({"text": text, "replaced":
                    {"row_id": "sample-called-complete", "why": "w", "claim": "completeness"}}))
                .unwrap(),
            )
        };
        p.frame(&replaced("These 10 are shown. ")).unwrap();
        p.frame(&replaced("")).unwrap();
        p.finish().unwrap();
        let out = String::from_utf8(p.out).unwrap();
        assert_eq!(
            out,
            "⟦These 10 are shown.⟧[replaced: sample-called-complete] [removed: sample-called-complete] \n"
        );
        assert!(!out.contains("⟦⟧"));
    }

    #[test]
    fn a_safety_checks_sentence_is_marked_with_its_row() {
        let mut p = Printer::new(Vec::new(), Rows::All);
        let frame = Frame::Delta(
            serde_json::from_value(json!({"text": "Write to [email] for details. ",
                "replaced": {"row_id": "output-redacted", "why": "w", "claim": "guardrail",
                             "table": "guardrail", "check": "pii"}}))
            .unwrap(),
        );
        p.frame(&frame).unwrap();
        p.finish().unwrap();
        let out = String::from_utf8(p.out).unwrap();
        assert_eq!(
            out,
            "⟦Write to [email] for details.⟧[guardrail: output-redacted] \n"
        );
    }

    fn approval_fixture() -> Interrupt {
        serde_json::from_value(json!({
            "interrupt_id": "i-1", "tool": "confirm_action", "args": {"actionId": 3},
            "action": {"tool": "prepare_seat_reservation",
                       "args": {"seat": "12", "time": "15:00"}, "action_id": 3},
            "summary": "Reserve seat 12 at 15:00", "choices": ["approve", "deny"],
            "expires_at": 1_764_000_000_000_i64
        }))
        .unwrap()
    }

    fn hint() -> ResumeHint {
        ResumeHint {
            cmd: "turnstile".into(),
            url: "http://127.0.0.1:8080/".into(),
            thread: "th-1".into(),
        }
    }

    #[test]
    fn an_approval_prints_the_call_the_action_the_expiry_and_both_commands() {
        let mut p = Printer::new(Vec::new(), Rows::All);
        p.resume = Some(hint());
        // Ten minutes and a bit before it expires.
        p.clock = || 1_764_000_000_000 - 599_500;
        p.frame(&Frame::Delta(
            serde_json::from_value(json!({"text": "Prepared."})).unwrap(),
        ))
        .unwrap();
        p.frame(&Frame::Interrupt(approval_fixture())).unwrap();
        p.frame(&Frame::Done(Done {
            turn_id: "t".into(),
        }))
        .unwrap();
        p.finish().unwrap();
        assert_eq!(
            String::from_utf8(p.out).unwrap(),
            "Prepared.\n\
             ? approval requested: Reserve seat 12 at 15:00 (interrupt i-1)\n\
             \x20 runs on approve: confirm_action {\"actionId\":3}\n\
             \x20 prepared action: prepare_seat_reservation {\"seat\":\"12\",\"time\":\"15:00\"} (action id 3)\n\
             \x20 expires: 2025-11-24 16:00:00 UTC (in 10 min)\n\
             \x20 approve: turnstile resume http://127.0.0.1:8080/ th-1 i-1 approve\n\
             \x20 deny:    turnstile resume http://127.0.0.1:8080/ th-1 i-1 deny\n\
             · done\n"
        );
    }

    /// Issue 33 §5: the question in the user's terms first, then the line
    /// naming the tools; what came from the call is escaped.
    #[test]
    fn an_approval_prints_its_question_then_the_detail_line() {
        let mut i = approval_fixture();
        i.summary = "Reserve seat 12 at 15:00?".into();
        i.detail = "prepare_seat_reservation prepared action #3; on approval confirm_action runs once with the arguments shown, on denial cancel_action cancels it.".into();
        let card = interrupt(&i, None, None);
        let lines: Vec<&str> = card.lines().collect();
        assert_eq!(
            lines[0],
            "? approval requested: Reserve seat 12 at 15:00? (interrupt i-1)"
        );
        assert_eq!(lines[1], format!("  detail: {}", i.detail));
        assert!(lines[2].starts_with("  runs on approve: confirm_action"));
        i.summary = "Reserve seat \u{202e}21 at 15:00?".into();
        let card = interrupt(&i, None, None);
        assert!(
            card.starts_with("? approval requested: Reserve seat \\u{202e}21"),
            "{card}"
        );
    }

    #[test]
    fn an_approval_without_an_action_id_or_past_its_expiry_says_so() {
        let mut i = approval_fixture();
        i.action.action_id = None;
        i.choices = vec!["deny".into()];
        let card = interrupt(&i, Some(1_764_000_000_000), Some(&hint()));
        let lines: Vec<&str> = card.lines().collect();
        assert_eq!(
            lines[2],
            r#"  prepared action: prepare_seat_reservation {"seat":"12","time":"15:00"}"#
        );
        assert_eq!(lines[3], "  expires: 2025-11-24 16:00:00 UTC (expired)");
        // Only the choices the server offers.
        assert_eq!(
            &lines[4..],
            ["  deny:    turnstile resume http://127.0.0.1:8080/ th-1 i-1 deny"]
        );
        // Without a clock or a thread (`describe`): the card alone.
        let bare = describe_all(&Frame::Interrupt(approval_fixture())).unwrap();
        assert_eq!(bare.lines().count(), 4, "{bare}");
        assert!(
            bare.ends_with("  expires: 2025-11-24 16:00:00 UTC"),
            "{bare}"
        );
        // A URL the shell would split is quoted, so the line pastes as is.
        let odd = ResumeHint {
            url: "http://h/x y".into(),
            ..hint()
        };
        assert_eq!(
            odd.command("i-1", Decision::Approve),
            "turnstile resume 'http://h/x y' th-1 i-1 approve"
        );
    }

    #[test]
    fn expiry_is_a_utc_time_and_a_distance() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(1_709_251_199_999), "2024-02-29 23:59:59 UTC");
        assert_eq!(utc(-1_000), "1969-12-31 23:59:59 UTC");
        assert_eq!(until(10_000, 10_000), "expired");
        assert_eq!(until(10_000, 20_000), "expired");
        assert_eq!(until(10_001, 10_000), "in 1 s");
        assert_eq!(until(70_000, 10_000), "in 1 min");
        assert_eq!(until(129_000, 10_000), "in 1 min");
        assert_eq!(until(3_600_000 + 5 * 60_000, 0), "in 1 h 5 min");
    }

    #[test]
    fn a_refused_answer_names_its_status_reason_and_row() {
        let conflict = reqwest::StatusCode::CONFLICT;
        let e = error_answer(
            conflict,
            r#"{"error": "approved already", "table": "approval", "row_id": "second-approve"}"#,
        );
        assert_eq!(
            e.to_string(),
            "409 Conflict: approved already (table approval, row second-approve)"
        );
        let e = error_answer(
            reqwest::StatusCode::NOT_FOUND,
            r#"{"error": "interrupt not found"}"#,
        );
        assert_eq!(e.to_string(), "404 Not Found: interrupt not found");
        let e = error_answer(conflict, r#"{"error": "x", "row_id": "r"}"#);
        assert_eq!(e.to_string(), "409 Conflict: x (row r)");
        let e = error_answer(reqwest::StatusCode::BAD_GATEWAY, "upstream broke\n");
        assert_eq!(e.to_string(), "502 Bad Gateway: upstream broke");
        let e = error_answer(reqwest::StatusCode::BAD_GATEWAY, "");
        assert_eq!(e.to_string(), "502 Bad Gateway");
    }

    #[test]
    fn resume_reads_its_four_operands() {
        use clap::Parser;
        #[derive(Parser)]
        struct Line {
            #[command(flatten)]
            args: ResumeArgs,
        }
        let parse = |words: &[&str]| {
            Line::try_parse_from(std::iter::once("resume").chain(words.iter().copied()))
                .map(|l| l.args)
        };
        let args = parse(&["http://h:1/", "th-1", "i-1", "approve"]).unwrap();
        assert_eq!(
            args,
            ResumeArgs {
                url: "http://h:1/".into(),
                thread: "th-1".into(),
                interrupt_id: "i-1".into(),
                decision: Decision::Approve,
                fields: vec![],
                answers: None,
                rows: Rows::All,
                token: None,
            }
        );
        assert_eq!(
            resume_body(&args, None),
            json!({"interrupt_id": "i-1", "decision": "approve"})
        );
        let deny = parse(&["http://h:1/", "th-1", "i-1", "deny", "--rows", "3"]).unwrap();
        assert_eq!(
            (deny.decision, deny.rows),
            (Decision::Deny, Rows::AtMost(3))
        );
        assert!(parse(&["http://h:1/", "th-1", "i-1", "maybe"]).is_err());
        assert!(parse(&["http://h:1/", "th-1", "approve"]).is_err());
        // A question's answers.
        let accept = parse(&[
            "http://h:1/",
            "th-1",
            "i-1",
            "accept",
            "--field",
            "name=Ana",
            "--field",
            "urgent=yes",
            "--answers",
            r#"{"contact": {"email": "a@b.co"}}"#,
        ])
        .unwrap();
        assert_eq!(accept.decision, Decision::Accept);
        assert_eq!(accept.fields, ["name=Ana", "urgent=yes"]);
        assert_eq!(
            accept.answers.as_deref(),
            Some(r#"{"contact": {"email": "a@b.co"}}"#)
        );
        assert_eq!(
            resume_body(&accept, Some(json!({"contact": {"name": "Ana"}}))),
            json!({"interrupt_id": "i-1", "decision": "accept", "answers": {"contact": {"name": "Ana"}}})
        );
        for word in ["decline", "cancel"] {
            let d = parse(&["http://h:1/", "th-1", "i-1", word]).unwrap();
            assert_eq!(d.decision.as_str(), word);
            assert_eq!(
                resume_body(&d, None),
                json!({"interrupt_id": "i-1", "decision": word})
            );
        }
    }

    /// The demo's `notify_site_contact` question, as its interrupt frame
    /// carries it (2026-07-28: the request key is the server's).
    fn question_fixture() -> Interrupt {
        serde_json::from_value(json!({
            "interrupt_id": "q-1", "tool": "notify_site_contact", "args": {"issue_id": "PANO-003-0611"},
            "action": {"tool": "notify_site_contact", "args": {"issue_id": "PANO-003-0611"}},
            "summary": "demo asks you something before notify_site_contact can go on.",
            "choices": ["accept", "decline", "cancel"], "expires_at": 1_764_000_000_000_i64,
            "input": {"server": "demo", "requests": [{
                "key": "contact", "mode": "form", "message": "Who should be told about PANO-003-0611?",
                "schema": {"type": "object", "properties": {
                    "email": {"type": "string", "title": "Email", "description": "Where to reach them", "format": "email"},
                    "name": {"type": "string", "title": "Name", "minLength": 1},
                    "role": {"type": "string", "title": "Role", "enum": ["site manager", "safety officer", "foreman"]},
                    "urgent": {"type": "boolean", "title": "Urgent", "default": false}
                }, "required": ["name", "email", "role"]}
            }]}
        }))
        .unwrap()
    }

    fn form_of(schema: Value) -> InputAsked {
        serde_json::from_value(
            json!({"key": "contact", "mode": "form", "message": "m", "schema": schema}),
        )
        .unwrap()
    }

    /// A task's progress: the tool, its status and time, and the server's
    /// message quoted as the server's; without one, no quote at all.
    #[test]
    fn a_tasks_progress_quotes_the_server() {
        let mut p = Printer::new(Vec::new(), Rows::All);
        for body in [
            json!({"call_id": "c", "tool": "compile_site_report", "status": "working",
                "message": "step 2 of 4: counting open issues by floor", "polls": 3, "elapsed_ms": 812}),
            json!({"call_id": "c", "tool": "compile_site_report", "status": "cancelling",
                "polls": 5, "elapsed_ms": 1500}),
            json!({"call_id": "c", "tool": "compile_site_report", "status": "working",
                "message": "done\u{202e}txt.exe", "polls": 6, "elapsed_ms": 1800}),
        ] {
            p.frame(&Frame::Progress(serde_json::from_value(body).unwrap()))
                .unwrap();
        }
        p.finish().unwrap();
        assert_eq!(
            String::from_utf8(p.out).unwrap(),
            "· compile_site_report working (0.8 s): server says \"step 2 of 4: counting open issues by floor\"\n\
             · compile_site_report cancelling (1.5 s)\n\
             · compile_site_report working (1.8 s): server says \"done\\u{202e}txt.exe\"\n"
        );
    }

    #[test]
    fn a_question_prints_the_servers_words_its_form_and_the_commands_that_answer_it() {
        let mut p = Printer::new(Vec::new(), Rows::All);
        p.resume = Some(hint());
        p.clock = || 1_764_000_000_000 - 599_500;
        p.frame(&Frame::ToolResult(
            serde_json::from_value(json!({"call_id": "c", "tool": "notify_site_contact",
                "ok": false, "summary": "input_required"}))
            .unwrap(),
        ))
        .unwrap();
        p.frame(&Frame::Interrupt(question_fixture())).unwrap();
        p.finish().unwrap();
        assert_eq!(
            String::from_utf8(p.out).unwrap(),
            "· notify_site_contact: its server asks you first\n\
             ? demo asks: Who should be told about PANO-003-0611?\n\
             \x20 (the server's words; interrupt q-1, during notify_site_contact {\"issue_id\":\"PANO-003-0611\"})\n\
             \x20 form \"contact\":\n\
             \x20   email   string (email), required · Email — Where to reach them\n\
             \x20   name    string, required, at least 1 character · Name\n\
             \x20   role    one of \"site manager\", \"safety officer\", \"foreman\", required · Role\n\
             \x20   urgent  boolean, default false · Urgent\n\
             \x20 expires: 2025-11-24 16:00:00 UTC (in 10 min)\n\
             \x20 accept:  turnstile resume http://127.0.0.1:8080/ th-1 q-1 accept --field email=... --field name=... --field role=...\n\
             \x20 decline: turnstile resume http://127.0.0.1:8080/ th-1 q-1 decline\n\
             \x20 cancel:  turnstile resume http://127.0.0.1:8080/ th-1 q-1 cancel\n\
             \x20 (replace each ... with your answer; `--field NAME=VALUE` for the optional fields too)\n"
        );
        // Without a thread (`describe`): the question alone, no commands.
        let bare = describe_all(&Frame::Interrupt(question_fixture())).unwrap();
        assert!(
            bare.ends_with("  expires: 2025-11-24 16:00:00 UTC"),
            "{bare}"
        );
        assert!(!bare.contains("resume"), "{bare}");
    }

    #[test]
    fn a_url_question_prints_the_url_its_domain_and_a_punycode_warning() {
        let mut q = question_fixture();
        let input = q.input.as_mut().unwrap();
        input.requests = vec![serde_json::from_value(json!({
            "key": "portal", "mode": "url",
            "message": "Sign \u{1b}[2Jhere\u{202e}txt.exe\nthen come back",
            "url": "https://xn--pple-43d.example/login", "domain": "xn--pple-43d.example", "punycode": true
        }))
        .unwrap()];
        let card = interrupt(&q, None, Some(&hint()));
        let lines: Vec<&str> = card.lines().collect();
        // The server's control characters and bidi overrides are escaped; a
        // line break is kept, indented.
        assert_eq!(lines[0], r"? demo asks: Sign \u{1b}[2Jhere\u{202e}txt.exe");
        assert_eq!(lines[1], "  then come back");
        assert_eq!(
            lines[3],
            r#"  url "portal": https://xn--pple-43d.example/login"#
        );
        assert_eq!(lines[4], "    domain: xn--pple-43d.example");
        assert_eq!(
            lines[5],
            "    ⚠ this address uses punycode; it may imitate another site"
        );
        assert!(
            lines[6].contains("accept says you agree to open it, not that anything there is done")
        );
        // A URL takes no values: accept is the bare command.
        assert_eq!(
            lines[8],
            "  accept:  turnstile resume http://127.0.0.1:8080/ th-1 q-1 accept"
        );
        assert!(
            !card.contains("--field") && !card.contains("replace each"),
            "{card}"
        );
        assert!(!card.contains('\u{1b}') && !card.contains('\u{202e}'));
    }

    #[test]
    fn a_question_of_several_forms_names_each_request() {
        let mut q = question_fixture();
        let input = q.input.as_mut().unwrap();
        let mut second = form_of(json!({"type": "object",
            "properties": {"count": {"type": "integer", "minimum": 1, "maximum": 10}}, "required": ["count"]}));
        second.key = "crew".into();
        second.message = "How many?".into();
        input.requests.push(second);
        let card = interrupt(&q, None, Some(&hint()));
        assert!(card.starts_with("? demo asks 2 things:\n"), "{card}");
        assert!(
            card.contains(
                "\n  2. How many?\n  form \"crew\":\n    count  integer, required, 1 to 10\n"
            ),
            "{card}"
        );
        assert!(
            card.contains("accept --field contact.email=... --field contact.name=... --field contact.role=... --field crew.count=...\n"),
            "{card}"
        );
    }

    #[test]
    fn a_field_is_typed_by_its_form() {
        let q = question_fixture();
        let requests = q.input.unwrap().requests;
        let fill_in = |fields: &[&str]| {
            let mut answers = serde_json::Map::new();
            let fields: Vec<String> = fields.iter().map(|f| f.to_string()).collect();
            fill(&mut answers, &fields, Ok(&requests)).map(|()| Value::Object(answers))
        };
        assert_eq!(
            fill_in(&["name=Ana Kim", "email=a@b.co", "role=foreman", "urgent=yes"]).unwrap(),
            json!({"contact": {"name": "Ana Kim", "email": "a@b.co", "role": "foreman", "urgent": true}})
        );
        // The request may be named; a value may hold `=`; JSON as it is.
        assert_eq!(
            fill_in(&["contact.name=a=b", "urgent:=false"]).unwrap(),
            json!({"contact": {"name": "a=b", "urgent": false}})
        );
        let err = |fields: &[&str]| fill_in(fields).unwrap_err().to_string();
        assert_eq!(
            err(&["urgent=maybe"]),
            "--field urgent: true or false, not `maybe`"
        );
        assert_eq!(
            err(&["emial=x"]),
            r#"--field emial: the form "contact" has no such field (its fields: email, name, role, urgent)"#
        );
        assert_eq!(
            err(&["name=A", "name=B"]),
            "--field name: given twice; the field takes one value"
        );
        assert_eq!(err(&["name"]), "--field name: NAME=VALUE");
        // The printed placeholder pasted as it is sends nothing.
        assert_eq!(
            err(&["name=..."]),
            "--field name: replace `...` with your answer (an accept is sent once)"
        );
        assert_eq!(err(&["urgent:=yes"]), "--field urgent:=…: not JSON");

        // Integers, numbers, choices by title, a multi-select.
        let schema = json!({"type": "object", "properties": {
            "count": {"type": "integer"}, "ratio": {"type": "number"},
            "level": {"type": "string", "enum": ["lo", "hi"], "enumNames": ["Low", "High"]},
            "crew": {"type": "string", "oneOf": [{"const": "c1", "title": "Crew one"}]},
            "sides": {"type": "array", "items": {"anyOf": [{"const": "N", "title": "North"}, {"const": "S", "title": "South"}]}}
        }});
        let forms = [form_of(schema)];
        let mut answers = serde_json::Map::new();
        let fields: Vec<String> = [
            "count=3",
            "ratio=0.5",
            "level=High",
            "crew=c1",
            "sides=North",
            "sides=S",
        ]
        .map(String::from)
        .into();
        fill(&mut answers, &fields, Ok(&forms)).unwrap();
        assert_eq!(
            Value::Object(answers),
            json!({"contact": {"count": 3, "ratio": 0.5, "level": "hi", "crew": "c1", "sides": ["N", "S"]}})
        );
        let mut answers = serde_json::Map::new();
        let one = ["sides=North".to_string(), "ratio=2".to_string()];
        fill(&mut answers, &one, Ok(&forms)).unwrap();
        assert_eq!(
            Value::Object(answers),
            json!({"contact": {"sides": ["N"], "ratio": 2}})
        );
        let bad = ["count=2.5".to_string()];
        assert_eq!(
            fill(&mut serde_json::Map::new(), &bad, Ok(&forms))
                .unwrap_err()
                .to_string(),
            "--field count: an integer, not `2.5`"
        );
        // A URL question has no form to fill.
        let url: InputAsked = serde_json::from_value(json!({"key": "portal", "mode": "url",
            "message": "m", "url": "https://h.example/", "domain": "h.example"}))
        .unwrap();
        let x = ["x=1".to_string()];
        assert!(fill(&mut serde_json::Map::new(), &x, Ok(&[url]))
            .unwrap_err()
            .to_string()
            .contains("no form to fill"));
    }

    #[test]
    fn without_the_form_a_field_names_its_request_and_goes_as_text() {
        let why = "the thread shows no interrupt q-9".to_string();
        let mut answers = serde_json::Map::new();
        answers.insert("contact".into(), json!({"email": "a@b.co", "name": "old"}));
        let fields: Vec<String> = [
            "contact.name=Ana",
            "contact.count=3",
            "contact.urgent:=true",
            "contact.tag=a",
            "contact.tag=b",
        ]
        .map(String::from)
        .into();
        fill(&mut answers, &fields, Err(&why)).unwrap();
        assert_eq!(
            Value::Object(answers),
            json!({"contact": {"email": "a@b.co", "name": "Ana", "count": "3", "urgent": true, "tag": ["a", "b"]}})
        );
        let err = fill(
            &mut serde_json::Map::new(),
            &["name=Ana".to_string()],
            Err(&why),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            "--field name: the question's form cannot be read (the thread shows no interrupt q-9); \
             name its request, --field REQUEST.NAME=VALUE, or give --answers JSON"
        );
    }

    #[test]
    fn the_question_is_read_from_the_stored_thread() {
        let q = serde_json::to_value(question_fixture()).unwrap();
        let mut body = q.clone();
        body["kind"] = json!("interrupt");
        let approval = json!({"kind": "interrupt", "interrupt": serde_json::to_value(approval_fixture()).unwrap()});
        let thread = json!({"messages": [
            {"role": "user", "body": {"kind": "user", "text": "notify"}},
            {"role": "assistant", "body": approval},
            {"role": "assistant", "body": body},
        ]});
        let asked = asked_in(&thread, "q-1").unwrap();
        assert_eq!(asked.len(), 1);
        assert_eq!(asked[0].key, "contact");
        assert_eq!(
            asked_in(&thread, "q-2").unwrap_err(),
            "the thread shows no interrupt q-2"
        );
        assert!(asked_in(&thread, "i-1")
            .unwrap_err()
            .contains("an approval, not a question"));
    }

    fn describe_card_fixture() -> Frame {
        Frame::Citation(Citation {
            source: "search_photos".into(),
            items: vec![],
            displayed: 0,
            total: None,
            total_is_lower_bound: false,
            has_more: true,
            grade: "UNKNOWN".into(),
            complete: false,
            narrowed: false,
            stitch: None,
            listing: None,
            shown_before: None,
            more: false,
            links: Vec::new(),
        })
    }
}
