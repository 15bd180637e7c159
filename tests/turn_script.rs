//! The turn loop without HTTP or MCP, driven by data (in the manner of
//! rust-analyzer's data-driven tests): each file in `tests/turn_script/`
//! names the tools offered, the host context and the limits, the user's
//! message, and a script of what each tool call returns; below `//- expect`
//! it holds the frames the turn must write, one line each. The model is the
//! scripted one, the store an in-memory SQLite database, and the tools a
//! [`Tools`] that plays the script, so a case tests the loop and the tables
//! alone. `TURNSTILE_BLESS=1 cargo test --test all turn_script::` rewrites the
//! expectations (review the diff).
//!
//! Directives, one per line, before `//- expect`:
//! - `//- tool NAME(param, param, …)`: an offered tool and its parameters;
//! - `//- context {json}` and `//- limits max_calls_per_step=N`;
//! - `//- say TEXT`: the user's message;
//! - `//- result NAME {json}`: the next result of a call of NAME (an MCP
//!   `CallToolResult`); `//- result NAME !connect` fails that call.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{json, Map, Value};
use turnstile::agent::{Agent, Limits, ThreadLeases, Tools, TurnRequest, TurnTables};
use turnstile::judge::Contract;
use turnstile::mcp::{McpError, ServerStatus, ToolInfo, ToolOutput};
use turnstile::protocols::TableSet;
use turnstile::store::Store;
use turnstile::wire::Frame;
use turnstile_demo::Scripted;

/// Tools that answer from a script.
struct Script {
    tools: Vec<ToolInfo>,
    results: Mutex<HashMap<String, VecDeque<Result<Value, String>>>>,
}

#[async_trait::async_trait]
impl Tools for Script {
    fn list(&self) -> Vec<ToolInfo> {
        self.tools.clone()
    }
    fn server_of(&self, tool: &str) -> Option<String> {
        self.tools
            .iter()
            .any(|t| t.name == tool)
            .then(|| "script".into())
    }
    async fn call(&self, tool: &str, _args: Map<String, Value>) -> Result<ToolOutput, McpError> {
        let next = self
            .results
            .lock()
            .unwrap()
            .get_mut(tool)
            .and_then(VecDeque::pop_front);
        match next {
            Some(Ok(v)) => Ok(ToolOutput::from_value(&v)),
            Some(Err(_)) => Err(McpError::Connect {
                server: "script".into(),
                reason: "scripted failure".into(),
            }),
            None => panic!("the script has no more results for {tool}"),
        }
    }
    fn ids_param(&self, _tool: &str, contract: Option<&Contract>) -> Option<String> {
        contract.and_then(|c| c.scope_ids_param.clone())
    }
    fn servers(&self) -> Vec<ServerStatus> {
        vec![]
    }
}

struct Case {
    script: Script,
    context: Option<Value>,
    limits: Limits,
    say: String,
    expect: String,
    head: String,
}

fn parse(text: &str) -> Case {
    let (head, expect) = text
        .split_once("//- expect\n")
        .expect("a case has an `//- expect` section");
    let mut tools = Vec::new();
    let mut results: HashMap<String, VecDeque<Result<Value, String>>> = HashMap::new();
    let mut context = None;
    let mut limits = Limits::default();
    let mut say = String::new();
    for line in head.lines().filter_map(|l| l.strip_prefix("//- ")) {
        let (verb, rest) = line.split_once(' ').unwrap_or((line, ""));
        match verb {
            "tool" => {
                let (name, params) = rest.trim_end_matches(')').split_once('(').unwrap();
                let props: Map<String, Value> = params
                    .split(',')
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .map(|p| (p.to_string(), json!({})))
                    .collect();
                tools.push(ToolInfo {
                    name: name.into(),
                    description: String::new(),
                    input_schema: json!({"type": "object", "properties": props}).into(),
                });
            }
            "context" => context = Some(serde_json::from_str(rest).expect("context is JSON")),
            "limits" => {
                let (key, n) = rest.split_once('=').unwrap();
                assert_eq!(key, "max_calls_per_step", "unknown limit {key}");
                limits.max_calls_per_step = n.parse().unwrap();
            }
            "say" => say = rest.to_string(),
            "result" => {
                let (tool, body) = rest.split_once(' ').unwrap();
                let r = match body {
                    "!connect" => Err(body.to_string()),
                    json => Ok(serde_json::from_str(json).expect("a result is JSON")),
                };
                results.entry(tool.into()).or_default().push_back(r);
            }
            other => panic!("unknown directive {other}"),
        }
    }
    Case {
        script: Script {
            tools,
            results: Mutex::new(results),
        },
        context,
        limits,
        say,
        expect: expect.to_string(),
        head: head.to_string(),
    }
}

/// One frame as one line of the expectation.
fn line(f: &Frame) -> String {
    match f {
        Frame::Start(_) => "start".into(),
        Frame::Plan(p) => {
            let steps: Vec<String> = p
                .steps
                .iter()
                .map(|s| format!("{} {}", s.tool, Value::Object(s.args.clone())))
                .collect();
            format!("plan {}", steps.join(" ; "))
        }
        Frame::ToolCall(c) => format!("call {} on {}", c.tool, c.server.as_deref().unwrap_or("-")),
        Frame::Progress(p) => format!(
            "progress {} {}: {}",
            p.tool,
            p.status,
            p.message.as_deref().unwrap_or("-")
        ),
        Frame::ToolResult(r) => format!(
            "result {} {}: {}",
            r.tool,
            if r.ok { "ok" } else { "FAILED" },
            r.summary
        ),
        Frame::Citation(c) => format!(
            "card {} shown {} total {:?} {}{}",
            c.source,
            c.displayed,
            c.total,
            c.grade,
            if c.complete { " complete" } else { "" }
        ),
        Frame::Figure(fig) => format!("figure {} = {} {}", fig.label, fig.value, fig.grade),
        Frame::Delta(d) => match &d.replaced {
            Some(r) => format!("delta [replaced {}] {}", r.row_id, d.text.trim_end()),
            None => format!("delta {}", d.text.trim_end()),
        },
        Frame::Interrupt(i) => format!("interrupt {}", i.summary),
        Frame::Done(_) => "done".into(),
        Frame::Error(e) => format!("error {}", e.message),
    }
}

async fn run(case: Case) -> String {
    let tables = TableSet::builtin().unwrap();
    let store = Store::connect("sqlite::memory:").await.unwrap();
    let turn_tables = TurnTables::bind(&tables).unwrap();
    let agent = Agent {
        model: Arc::new(Scripted::demo()),
        tools: Arc::new(case.script),
        store: store.clone(),
        tables: turn_tables,
        contracts: turnstile_demo::contracts(),
        roles: turnstile_demo::roles(),
        terminals: Default::default(),
        cards: turnstile_demo::cards(),
        instructions: turnstile_demo::instructions(),
        limits: case.limits,
        leases: Arc::new(ThreadLeases::new(
            store.clone(),
            std::time::Duration::from_secs(30),
        )),
        licences: turnstile::judge::tiers::LicenceMap::open(),
        parked: Default::default(),
        problems: Default::default(),
        stopping: Default::default(),
        guardrails: Default::default(),
    };
    let thread = store.create_thread(None).await.unwrap();
    let req: TurnRequest = serde_json::from_value(match case.context {
        Some(c) => json!({"text": case.say, "context": c}),
        None => json!({"text": case.say}),
    })
    .unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::channel(256);
    agent.run_turn(&thread.id, "t1", req, tx, None).await;
    let mut lines = Vec::new();
    while let Some(out) = rx.recv().await {
        let frame = Frame::parse(out.kind, &out.data.to_string()).expect("a typed frame");
        lines.push(line(&frame));
    }
    lines.join("\n") + "\n"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_script_writes_its_frames() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/turn_script");
    let bless = std::env::var("TURNSTILE_BLESS").is_ok_and(|v| v == "1");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    assert!(files.len() >= 6, "{} cases", files.len());
    let mut wrong = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let case = parse(&text);
        let (head, expect) = (case.head.clone(), case.expect.clone());
        let got = run(case).await;
        if got != expect {
            if bless {
                std::fs::write(&path, format!("{head}//- expect\n{got}")).unwrap();
            } else {
                wrong.push(format!(
                    "{}:\n--- expected\n{expect}--- got\n{got}",
                    path.display()
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{}\n(TURNSTILE_BLESS=1 rewrites the expectations)",
        wrong.join("\n")
    );
}
