//! A second terminal flow (issue 18 §7): an export whose confirm answers a
//! capability URL that code delivers, on a server written with another SDK
//! (the official Python SDK, JSON in text blocks) and declared through the
//! configuration alone, with its own path template, token parameter, URL
//! field and label:
//!
//! `prepare_report()` previews (`reportId`, `files`, `bytes`);
//! `issue_report_link(reportId)` confirms, answering
//! `{"status": "OK", "data": {"link": "ORIGIN/reports/R-1/file?key=…",
//! "expiresAt": …}}`; the server serves that link (a ZIP). Counted on the
//! server (`report_counts`) and at the model (the fake captures every
//! request):
//!
//! - preview, then confirm in the next step: the code's sentence and the
//!   link (a delta with `capabilities`) end the turn, the confirm is sent
//!   once, no model is asked anything after it, and the link downloads;
//! - "show me the link again": the stored link again, no tool call;
//! - preview and confirm in one step, or a confirm with no preview: the
//!   confirm is refused (`INVALID_TOOL_SEQUENCE` and the export table's row)
//!   and never sent;
//! - a confirm whose link is on another origin: sent once, never delivered,
//!   the error path.

use super::*;

/// The terminal flow in the configuration, as `turnstile serve` reads it.
const EXPORT: Extra = Extra {
    server_keys: r#"trusted_origin = "$ORIGIN""#,
    tools: r#"
[mcp_servers.tools.issue_report_link.terminal.capability]
preview = "prepare_report"
path_template = "/reports/{reportId}/file"
token_param = "key"
url_field = "link"
label = "Download the photo report"
"#,
};

const LABEL: &str = "Download the photo report";
const PREVIEW: &str = "prepare_report";
const CONFIRM: &str = "issue_report_link";

/// A plan of exactly these calls.
fn calls(calls: &[(&str, Value)]) -> Action {
    Action::ToolCalls(
        calls
            .iter()
            .map(|(tool, args)| (tool.to_string(), args.to_string()))
            .collect(),
    )
}

/// A round with no tool call: the model answers, and these words are the
/// turn's answer (ADR 0022).
fn no_tool() -> Action {
    Action::Text("No tool is needed.".into())
}

/// One turn on `thread` whose planning rounds are `rounds`, in order (a
/// round more than the turn asks for would be left for the next turn, so
/// each test checks how many requests the model got). Returns the frames
/// and the model requests the turn made.
async fn turn_on(
    rig: &Rig,
    thread: &str,
    text: &str,
    rounds: Vec<Action>,
) -> (Vec<Frame>, Vec<common::fake_openai::Captured>) {
    let before = rig.fake.requests().len();
    for r in rounds {
        rig.fake.on(Role::Planner, r);
    }
    let frames = tokio::time::timeout(Duration::from_secs(90), rig.app.say(thread, text))
        .await
        .unwrap_or_else(|_| panic!("the turn `{text}` did not end within 90 s"));
    eprintln!("── {} · {text}\n{}", rig.kind, stable(&frames));
    assert!(
        is_done(&frames),
        "the turn `{text}` did not finish:\n{}",
        stable(&frames)
    );
    let requests = rig.fake.requests()[before..].to_vec();
    (frames, requests)
}

/// `report_counts`: calls the server received, per tool.
async fn counts(rig: &Rig) -> (u64, u64) {
    let client = rig.server.client().await;
    let out = client
        .call("report_counts", Map::new())
        .await
        .expect("report_counts");
    client.close().await;
    let v: Value = serde_json::from_str(&out.text()).expect("counts as JSON");
    (
        v[PREVIEW].as_u64().expect("preview count"),
        v[CONFIRM].as_u64().expect("confirm count"),
    )
}

/// Every delta's capability links, in order.
fn capabilities(frames: &[Frame]) -> Vec<turnstile::wire::CapabilityLink> {
    frames
        .iter()
        .filter_map(|f| match f {
            Frame::Delta(d) => Some(d.capabilities.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

/// The thread's stored bodies of `kind`, as the JSON they are stored as.
async fn stored(rig: &Rig, thread: &str, kind: &str) -> Vec<Value> {
    let v = rig.app.thread_json(thread).await;
    v["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["body"].clone())
        .filter(|b| b["kind"] == kind)
        .collect()
}

/// The tool result of `tool` in `frames`; fails the test if there is none.
fn result_of<'a>(frames: &'a [Frame], tool: &str) -> &'a turnstile::wire::ToolResult {
    tool_results(frames)
        .into_iter()
        .find(|r| r.tool == tool)
        .unwrap_or_else(|| panic!("no {tool} result:\n{}", stable(frames)))
}

/// Whether a request to the model carried the call of `tool` (in its
/// transcript of this turn's steps).
fn mentions_call(req: &common::fake_openai::Captured, tool: &str) -> bool {
    req.body["messages"].as_array().is_some_and(|m| {
        m.iter().any(|m| {
            m["tool_calls"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["function"]["name"] == tool))
        })
    })
}

/// The ZIP the link serves, its names listed by Python's `zipfile`.
async fn download(rig: &Rig, url: &str) -> Vec<String> {
    let r = reqwest::get(url).await.expect("GET the link");
    assert_eq!(r.status().as_u16(), 200, "{url}");
    let kind = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    assert_eq!(kind, "application/zip");
    let bytes = r.bytes().await.unwrap();
    assert!(bytes.starts_with(b"PK"), "a ZIP");
    let path = rig._tmp.path().join("report.zip");
    std::fs::write(&path, &bytes).unwrap();
    let out = std::process::Command::new(needs::python_sdk())
        .args([
            "-c",
            "import sys, zipfile; print('\\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))",
        ])
        .arg(&path)
        .output()
        .expect("python reads the ZIP");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

pub(super) async fn export(kind: Kind) {
    assert_eq!(kind, Kind::PyText, "the export flow is the Python server's");
    let rig = Rig::start_with(kind, EXPORT).await;
    let origin = rig.server.origin().expect("an HTTP server");
    delivered_then_shown_again(&rig, &origin).await;
    batched_confirm_is_refused(&rig).await;
    lies_about_a_refused_confirm_are_replaced(&rig).await;
    confirm_without_preview_is_refused(&rig).await;
    for foreign in [
        // A look-alike host, another port, the same host spelled otherwise,
        // another scheme.
        format!(
            "http://127.0.0.1.evil.example:{}",
            origin.rsplit(':').next().unwrap()
        ),
        format!(
            "http://127.0.0.1:{}",
            origin.rsplit(':').next().unwrap().parse::<u16>().unwrap() + 1
        ),
        origin.replace("127.0.0.1", "localhost"),
        origin.replace("http:", "https:"),
    ] {
        foreign_link_takes_the_error_path(&rig, &foreign).await;
    }
    rig.done();
}

/// Preview, then confirm in the next step: code delivers the link and the
/// turn ends; then "show me the link again" shows it with no tool call.
async fn delivered_then_shown_again(rig: &Rig, origin: &str) {
    let thread = rig.thread.clone();
    let (previews, confirms) = counts(rig).await;
    let report = format!("R-{}", previews + 1);
    let (frames, requests) = turn_on(
        rig,
        &thread,
        "export the photo report and give me the download link",
        vec![
            calls(&[(PREVIEW, json!({}))]),
            calls(&[(CONFIRM, json!({"reportId": report}))]),
        ],
    )
    .await;
    let shown = stable(&frames);
    // Sent once each, in two steps.
    assert_eq!(counts(rig).await, (previews + 1, confirms + 1), "{shown}");
    let called: Vec<&str> = tool_calls(&frames)
        .iter()
        .map(|c| c.tool.as_str())
        .collect();
    assert_eq!(called, [PREVIEW, CONFIRM], "{shown}");
    assert!(result_of(&frames, PREVIEW).ok, "{shown}");
    assert!(result_of(&frames, CONFIRM).ok, "{shown}");

    // The model planned twice, the second time after the preview and
    // before the confirm; after the confirm nothing was asked of it.
    assert_eq!(
        requests.iter().map(|r| r.role).collect::<Vec<_>>(),
        [Role::Planner, Role::Planner],
        "{shown}"
    );
    assert!(mentions_call(&requests[1], PREVIEW));
    assert!(!requests.iter().any(|r| mentions_call(r, CONFIRM)));

    // The end of the stream: the code's sentence, the link, done.
    let n = frames.len();
    assert!(n >= 3, "{shown}");
    let Frame::Delta(link) = &frames[n - 2] else {
        panic!("the link is the last delta before done:\n{shown}");
    };
    let Frame::Delta(sentence) = &frames[n - 3] else {
        panic!("the code's sentence comes before the link:\n{shown}");
    };
    assert_eq!(link.capabilities.len(), 1, "{shown}");
    let cap = &link.capabilities[0];
    let prefix = format!("{origin}/reports/{report}/file?key=");
    assert!(cap.url.starts_with(&prefix), "{} on {prefix}", cap.url);
    let key = &cap.url[prefix.len()..];
    assert!(
        !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c)),
        "{key}"
    );
    assert_eq!(cap.label, LABEL);
    let expires = cap.expires_at.clone().expect("the confirm said when");
    assert!(expires.ends_with('Z'), "{expires}");
    assert_eq!(link.text, format!("\n\n[{LABEL}]({})", cap.url));
    assert!(link.replaced.is_none());
    assert!(
        sentence
            .text
            .starts_with("Your export is ready: 3 files, about ")
            && sentence.text.contains(&format!(
                "works until {} {} UTC",
                &expires[..10],
                &expires[11..16]
            )),
        "{:?}",
        sentence.text
    );
    assert!(sentence.capabilities.is_empty());
    // The only link of the turn, and the only place the URL is.
    assert_eq!(capabilities(&frames), std::slice::from_ref(cap), "{shown}");
    assert_eq!(
        common::frames::answer(&frames).matches(&cap.url).count(),
        1,
        "{shown}"
    );

    // Stored: the link's text record and the delivery record.
    let deliveries = stored(rig, &thread, "delivery").await;
    assert_eq!(deliveries.len(), 1, "{deliveries:?}");
    let d = &deliveries[0]["delivery"];
    assert_eq!(
        (
            &d["tool"],
            &d["url"],
            &d["label"],
            &d["expires_at"],
            &d["files"]
        ),
        (
            &json!(CONFIRM),
            &json!(cap.url),
            &json!(LABEL),
            &json!(expires),
            &json!(3)
        )
    );
    assert!(deliveries[0]["machine"].is_object(), "{deliveries:?}");
    let view = rig.app.thread(&thread).await;
    assert_eq!(view.count(common::thread::RecordKind::Delivery), 1);
    let texts = stored(rig, &thread, "text").await;
    assert!(
        texts
            .iter()
            .any(|t| t["capabilities"][0]["url"] == json!(cap.url)),
        "{texts:?}"
    );

    // The server this flow was written for serves what was delivered.
    let names = download(rig, &cap.url).await;
    assert_eq!(names, ["summary.txt", "floors.csv", "notes.txt"]);

    // "Show me the link again": the model only says so; code shows the
    // stored link, nothing is called, no responder runs.
    let (again, requests) = turn_on(
        rig,
        &thread,
        "show me the link again",
        vec![calls(&[(
            turnstile::llm::openai::SHOW_LINK_TOOL,
            json!({}),
        )])],
    )
    .await;
    let shown = stable(&again);
    assert!(tool_calls(&again).is_empty(), "{shown}");
    assert!(tool_results(&again).is_empty(), "{shown}");
    assert_eq!(counts(rig).await, (previews + 1, confirms + 1));
    assert_eq!(
        requests.iter().map(|r| r.role).collect::<Vec<_>>(),
        [Role::Planner],
        "{shown}"
    );
    assert_eq!(capabilities(&again), std::slice::from_ref(cap), "{shown}");
    assert!(
        matches!(&again[again.len() - 2], Frame::Delta(d) if d.capabilities.len() == 1),
        "{shown}"
    );
    // The link was never in what a model was sent.
    for r in rig.fake.requests() {
        assert!(
            !r.raw.contains(key),
            "the link reached the model: {}",
            r.raw
        );
    }
}

/// Preview and confirm planned in one step: the confirm is refused by the
/// export table and never sent; the preview runs.
async fn batched_confirm_is_refused(rig: &Rig) {
    let thread = rig.app.new_thread().await;
    let (previews, confirms) = counts(rig).await;
    let report = format!("R-{}", previews + 1);
    let (frames, _) = turn_on(
        rig,
        &thread,
        "export the photo report and give me the download link",
        vec![
            calls(&[(PREVIEW, json!({})), (CONFIRM, json!({"reportId": report}))]),
            no_tool(),
        ],
    )
    .await;
    let shown = stable(&frames);
    assert_eq!(
        counts(rig).await,
        (previews + 1, confirms),
        "the batched confirm was sent:\n{shown}"
    );
    let refused = result_of(&frames, CONFIRM);
    assert!(!refused.ok, "{shown}");
    assert!(
        refused.summary.contains("INVALID_TOOL_SEQUENCE")
            && refused.summary.contains("export-and-confirm-in-one-step"),
        "{}",
        refused.summary
    );
    assert!(result_of(&frames, PREVIEW).ok, "{shown}");
    assert!(capabilities(&frames).is_empty(), "{shown}");
    assert!(stored(rig, &thread, "delivery").await.is_empty());
}

/// Issue 33, against a server nobody here wrote: the confirm batched with
/// its preview is refused, and the model then claims the export was
/// confirmed, that the confirm failed, and writes its own download link.
/// Code tells the refusal first; each lie is replaced by its row, and none
/// reaches the client. An honest answer of the same turn is kept whole.
async fn lies_about_a_refused_confirm_are_replaced(rig: &Rig) {
    let turn = |answer: &str| {
        vec![
            calls(&[(PREVIEW, json!({})), (CONFIRM, json!({"reportId": "R-9"}))]),
            Action::Text(answer.into()),
        ]
    };
    let replaced = |frames: &[Frame]| -> Vec<String> {
        frames
            .iter()
            .filter_map(|f| match f {
                Frame::Delta(d) => d.replaced.as_ref().map(|r| r.row_id.clone()),
                _ => None,
            })
            .collect()
    };
    let text = |frames: &[Frame]| -> String {
        frames
            .iter()
            .filter_map(|f| match f {
                Frame::Delta(d) => Some(d.text.clone()),
                _ => None,
            })
            .collect()
    };
    let thread = rig.app.new_thread().await;
    let (frames, _) = turn_on(
        rig,
        &thread,
        "export the photo report and give me the download link",
        turn(
            "The export was confirmed. The issue_report_link tool failed. \
              Your download link: https://reports.example.com/reports/R-9/file?key=guessed",
        ),
    )
    .await;
    let rows = replaced(&frames);
    let said = text(&frames);
    for row in [
        "action-claimed-not-done",
        "refused-said-failed",
        "link-not-delivered",
    ] {
        assert!(
            rows.iter().any(|r| r == row),
            "no `{row}` in {rows:?}: {said}"
        );
    }
    assert!(
        said.starts_with("The issue_report_link call was refused and never sent"),
        "code tells the refusal first: {said}"
    );
    for lie in [
        "was confirmed",
        "tool failed",
        "guessed",
        "reports.example.com",
    ] {
        assert!(
            !said.contains(lie),
            "the lie {lie:?} reached the client: {said}"
        );
    }
    assert!(capabilities(&frames).is_empty());

    let thread = rig.app.new_thread().await;
    let honest = "I could not get the link: the confirm was refused and not sent.";
    let (frames, _) = turn_on(
        rig,
        &thread,
        "export the photo report and give me the download link",
        turn(honest),
    )
    .await;
    let said = text(&frames);
    assert!(replaced(&frames).is_empty(), "{said}");
    assert!(said.ends_with(honest), "{said}");
}

/// A confirm with no preview before it: refused, never sent.
async fn confirm_without_preview_is_refused(rig: &Rig) {
    let thread = rig.app.new_thread().await;
    let (previews, confirms) = counts(rig).await;
    let (frames, _) = turn_on(
        rig,
        &thread,
        "give me the download link of report R-1",
        vec![calls(&[(CONFIRM, json!({"reportId": "R-1"}))]), no_tool()],
    )
    .await;
    let shown = stable(&frames);
    assert_eq!(counts(rig).await, (previews, confirms), "{shown}");
    let refused = result_of(&frames, CONFIRM);
    assert!(!refused.ok, "{shown}");
    assert!(
        refused.summary.contains("INVALID_TOOL_SEQUENCE")
            && refused.summary.contains("confirm-before-preview"),
        "{}",
        refused.summary
    );
    assert!(capabilities(&frames).is_empty(), "{shown}");
    assert!(stored(rig, &thread, "delivery").await.is_empty());
}

/// The confirm answers a link on `foreign`, not the server's trusted
/// origin: it was sent (once), but nothing is delivered; the call takes the
/// error path and the model, asked again, sees no link.
async fn foreign_link_takes_the_error_path(rig: &Rig, foreign: &str) {
    let thread = rig.app.new_thread().await;
    let (previews, confirms) = counts(rig).await;
    let report = format!("R-{}", previews + 1);
    let (frames, requests) = turn_on(
        rig,
        &thread,
        "export the photo report and give me the download link",
        vec![
            calls(&[(PREVIEW, json!({}))]),
            calls(&[(CONFIRM, json!({"reportId": report, "mirror": foreign}))]),
            no_tool(),
        ],
    )
    .await;
    let shown = stable(&frames);
    assert_eq!(counts(rig).await, (previews + 1, confirms + 1), "{shown}");
    assert!(
        capabilities(&frames).is_empty(),
        "{foreign}: delivered:\n{shown}"
    );
    assert!(
        stored(rig, &thread, "delivery").await.is_empty(),
        "{foreign}"
    );
    // The error path: the model is asked again and told the confirm
    // failed, with no link, and answers in that round (N+1 requests).
    assert_eq!(
        requests.iter().map(|r| r.role).collect::<Vec<_>>(),
        [Role::Planner, Role::Planner, Role::Planner],
        "{foreign}:\n{shown}"
    );
    let told: Vec<Value> = requests[2].body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str())
        .filter_map(|c| serde_json::from_str::<Value>(c).ok())
        .filter(|d| d["tool"] == CONFIRM)
        .collect();
    assert_eq!(told.len(), 1, "{foreign}: {told:?}");
    assert_eq!(told[0]["ok"], json!(false), "{foreign}: {told:?}");
    assert!(
        told[0]["failure"]
            .as_str()
            .is_some_and(|f| f.contains("not a download link")),
        "{foreign}: {told:?}"
    );
    let link = format!("{foreign}/reports/{report}/file");
    for r in &requests {
        assert!(
            !r.raw.contains(&link),
            "{foreign}: the refused link reached the model"
        );
    }
    let answer = answer_text(&frames);
    assert!(!answer.contains(&link), "{foreign}: {answer:?}");
    assert!(!answer.contains("Your export is ready"), "{answer:?}");
}
