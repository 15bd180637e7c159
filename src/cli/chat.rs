//! `turnstile chat URL "message"`: streams one turn's frames to the terminal,
//! checking their order against the local `frame` table as it goes.

use std::io::Write;

use anyhow::{bail, Context};
use futures::StreamExt;
use serde_json::{json, Value};

use std::sync::Arc;

use serde::Deserialize;

use crate::fsm::schema::{RawRow, RawTable};
use crate::fsm::{Machine, Table};

/// Parses SSE text incrementally into (event, data) pairs.
#[derive(Default)]
pub struct SseParser {
    buf: String,
}

impl SseParser {
    pub fn push(&mut self, chunk: &str) -> Vec<(String, String)> {
        self.buf.push_str(&chunk.replace("\r\n", "\n"));
        let mut out = Vec::new();
        while let Some(end) = self.buf.find("\n\n") {
            let block: String = self.buf.drain(..end + 2).collect();
            let (mut event, mut data) = (String::from("message"), Vec::new());
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    event = v.trim().to_string();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push(v.strip_prefix(' ').unwrap_or(v).to_string());
                }
            }
            if !data.is_empty() {
                out.push((event, data.join("\n")));
            }
        }
        out
    }
}

fn describe(kind: &str, d: &Value) -> Option<String> {
    let s = |k: &str| {
        d.get(k)
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string())
            })
            .unwrap_or_default()
    };
    Some(match kind {
        "start" => format!("· turn {}", s("turn_id")),
        "plan" => format!(
            "· plan: {}",
            d.get("steps").map(|v| v.to_string()).unwrap_or_default()
        ),
        "tool_call" => format!("· calling {} on {}", s("tool"), s("server")),
        "tool_result" => format!(
            "· {} {}: {}",
            s("tool"),
            if d.get("ok").and_then(Value::as_bool) == Some(true) {
                "ok"
            } else {
                "FAILED"
            },
            s("summary")
        ),
        "citation" => {
            let displayed = d.get("displayed").and_then(Value::as_u64).unwrap_or(0);
            let total = d.get("total").and_then(Value::as_u64);
            let count = match (s("grade").as_str(), total) {
                ("EXACT", Some(0)) => "none (the source counted exactly 0)".to_string(),
                ("EXACT", Some(t)) if d.get("complete").and_then(Value::as_bool) == Some(true) => {
                    format!("all {t}")
                }
                ("EXACT", Some(t)) => format!("{displayed} shown of exactly {t}"),
                ("LOWER_BOUND", Some(t)) => format!("{displayed} shown of at least {t}"),
                ("SHOWN", _) => format!("{displayed} shown"),
                _ => format!("{displayed} shown, total unknown"),
            };
            let mut out = format!("▣ {} — {count} [{}]", s("source"), s("grade"));
            for item in d
                .get("items")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .take(10)
            {
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
            out
        }
        "delta" => return None,
        "interrupt" => format!(
            "? approval requested: {} (interrupt {})",
            s("summary"),
            s("interrupt_id")
        ),
        "done" => "· done".into(),
        "error" => format!(
            "✗ error: {}{}",
            s("message"),
            d.get("tool")
                .map(|t| format!(" (tool {t})"))
                .unwrap_or_default()
        ),
        other => format!("· {other}: {d}"),
    })
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
    crate::protocols::registry_check_source(&text, &url).map_err(|f| anyhow::anyhow!("{f}"))
}

/// Runs one turn against a server; returns an error if the server answered
/// with an error frame or broke the frame order.
pub async fn run(url: &str, message: &str, thread: Option<String>) -> anyhow::Result<()> {
    let base = url.trim_end_matches('/');
    let http = reqwest::Client::new();
    let thread = match thread {
        Some(t) => t,
        None => {
            let r: Value = http
                .post(format!("{base}/v1/threads"))
                .json(&json!({}))
                .send()
                .await
                .with_context(|| format!("cannot reach {base}"))?
                .error_for_status()?
                .json()
                .await?;
            r["thread_id"]
                .as_str()
                .context("server returned no thread_id")?
                .to_string()
        }
    };
    eprintln!("thread {thread}");
    let resp = http
        .post(format!("{base}/v1/threads/{thread}/messages"))
        .json(&json!({"text": message}))
        .send()
        .await?;
    if !resp.status().is_success() {
        let status = resp.status();
        let body = resp.text().await.unwrap_or_default();
        bail!("{status}: {body}");
    }
    let frame = Arc::new(server_frame_table(&http, base).await?);
    let mut machine = Machine::new(frame.clone());
    let mut parser = SseParser::default();
    let mut body = resp.bytes_stream();
    let mut failed = false;
    let mut in_text = false;
    let mut stdout = std::io::stdout();
    while let Some(chunk) = body.next().await {
        let chunk = chunk?;
        for (kind, data) in parser.push(&String::from_utf8_lossy(&chunk)) {
            let ev = frame
                .event_index(&kind)
                .with_context(|| format!("unknown frame kind {kind}"))?;
            if let Err(v) = machine.fire(ev) {
                bail!("frame order violation: row {} — {}", v.row_id, v.why);
            }
            let d: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
            if kind == "delta" {
                print!("{}", d["text"].as_str().unwrap_or(""));
                stdout.flush()?;
                in_text = true;
                continue;
            }
            if in_text {
                println!();
                in_text = false;
            }
            failed |= kind == "error";
            if let Some(line) = describe(&kind, &d) {
                println!("{line}");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_split_frames_and_ignores_comments() {
        let mut p = SseParser::default();
        assert!(p.push("id: 1\nevent: start\nda").is_empty());
        let got =
            p.push("ta: {\"a\":1}\n\n: keep-alive\n\nid: 2\r\nevent: done\r\ndata: {}\r\n\r\n");
        assert_eq!(
            got,
            vec![
                ("start".into(), "{\"a\":1}".into()),
                ("done".into(), "{}".into())
            ]
        );
    }
}
