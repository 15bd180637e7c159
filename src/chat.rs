//! `turnstile chat URL "message"`: streams one turn's frames to the terminal,
//! checking their order against the local `frame` table as it goes.
//! `turnstile resume URL THREAD INTERRUPT approve|deny` decides an approval
//! the turn asked for and streams the resumed turn with the same printer.

use std::io::Write;
use std::sync::Arc;

use anyhow::{bail, Context};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{json, Value};

use turnstile::fsm::schema::{RawRow, RawTable};
use turnstile::fsm::{Machine, Table};
use turnstile::wire::sse::{SseDecoder, SseEvent};
use turnstile::wire::{Citation, Figure, Frame, Interrupt};

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
        // A refusal is not a failure of the tool: it was never sent.
        Frame::ToolResult(r) => match &r.refusal {
            Some(refusal) => format!(
                "· {} refused, not sent ({} row `{}`)",
                r.tool,
                refusal["table"].as_str().unwrap_or("licence"),
                refusal["row_id"].as_str().unwrap_or("?"),
            ),
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
    let json = |m: &serde_json::Map<String, Value>| Value::Object(m.clone()).to_string();
    let mut out = format!(
        "? approval requested: {} (interrupt {})",
        i.summary, i.interrupt_id
    );
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

/// Unix milliseconds as a UTC date and time, to the second.
fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, day_secs) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days since 1970-01-01 to a civil date (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        day_secs / 3600,
        day_secs % 3600 / 60,
        day_secs % 60
    )
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
}

impl<W: Write> Printer<W> {
    fn new(out: W, rows: Rows) -> Self {
        Printer {
            out,
            rows,
            in_text: false,
            resume: None,
            clock: now_ms,
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
                // The guard's sentence, marked with the row that refused
                // the model's.
                Some(r) if !d.text.trim().is_empty() => {
                    write!(self.out, "⟦{}⟧[replaced: {}] ", d.text.trim_end(), r.row_id)?
                }
                // A refused sentence whose replacement was said already:
                // nothing takes its place, and the mark says so.
                Some(r) => write!(self.out, "[removed: {}] ", r.row_id)?,
                None => write!(self.out, "{}", d.text)?,
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

    /// Ends the output on a line boundary, whatever happened.
    fn finish(&mut self) -> std::io::Result<()> {
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

/// A human's answer to an approval request.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Approve,
    Deny,
}

impl Decision {
    /// As the resume request and the command line spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Deny => "deny",
        }
    }
}

/// What `turnstile resume` was asked for.
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
pub struct ResumeArgs {
    /// Server base URL, e.g. http://127.0.0.1:8080/
    pub url: String,
    /// The thread the approval was requested on (chat's first line).
    pub thread: String,
    /// The interrupt to decide (printed with the approval request).
    pub interrupt_id: String,
    /// `approve` sends the prepared action's confirm (once); `deny` cancels it.
    #[arg(value_enum)]
    pub decision: Decision,
    /// How many rows of each card to print: a number or `all`.
    #[arg(long, default_value = "all")]
    pub rows: Rows,
    /// Decide as this bearer token's subject (the thread's owner); without
    /// one, as the session `turnstile chat` kept for this server.
    #[arg(long, env = "TURNSTILE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

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
    let resp = http
        .post(format!("{base}/v1/threads/{thread}/resume"))
        .json(&resume_body(args))
        .send()
        .await
        .with_context(|| format!("cannot reach {base}"))?;
    // A refused decision is reported before any line goes to stdout.
    if resp.status().is_success() {
        printer.line(&format!(
            "thread {thread}  ({} interrupt {}; follow up with chat --thread {thread})",
            args.decision.as_str(),
            args.interrupt_id
        ))?;
    }
    // The resumed turn may ask again, about another action.
    printer.resume = Some(ResumeHint::new(&args.url, thread));
    stream(printer, http, base, resp).await
}

/// `POST /v1/threads/{id}/resume`'s body.
fn resume_body(args: &ResumeArgs) -> Value {
    json!({"interrupt_id": args.interrupt_id, "decision": args.decision.as_str()})
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
                rows: Rows::All,
                token: None,
            }
        );
        assert_eq!(
            resume_body(&args),
            json!({"interrupt_id": "i-1", "decision": "approve"})
        );
        let deny = parse(&["http://h:1/", "th-1", "i-1", "deny", "--rows", "3"]).unwrap();
        assert_eq!(
            (deny.decision, deny.rows),
            (Decision::Deny, Rows::AtMost(3))
        );
        assert!(parse(&["http://h:1/", "th-1", "i-1", "maybe"]).is_err());
        assert!(parse(&["http://h:1/", "th-1", "approve"]).is_err());
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
        })
    }
}
