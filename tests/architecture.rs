//! The architecture, tested (issue 15): which top-level module may import
//! which, no import circle between the files of one module, every file in
//! `docs/architecture.md`'s code map, and the doc's turn diagram rendered
//! from the built-in table.
//!
//! The imports are read from `src/**/*.rs` as text: `use` trees and paths
//! that start with `crate::`, `super::`, `self::` or a child module's name,
//! with comments and string literals blanked first. A `pub use` of a module's
//! own descendant (a facade: `pub use client::ToolClient` in `mcp/mod.rs`) is
//! followed, not counted: `crate::mcp::ToolClient` is an edge to
//! `mcp::client`. Test code counts like any other code.
//!
//! Regenerate the doc's generated block with
//! `TURNSTILE_BLESS=1 cargo test --test architecture`; print the import graph
//! with `TURNSTILE_ARCH_DUMP=1 cargo test --test architecture -- --nocapture`
//! (and another checkout's, with `TURNSTILE_ARCH_ROOT=DIR`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------
// The intended shape, as data.
//
//   main → cli → {app, config, demo}
//   app, config → http → agent → {guard, llm} → judge → mcp → protocols → fsm
//   agent → store; wire is a leaf everyone may use; fsm imports nothing.
// ---------------------------------------------------------------------------

/// Every import allowed between two top-level modules: (from, to, why).
/// An edge not listed here fails the test; so does one that would make this
/// list a cycle, one out of `fsm`, and one into `demo` from outside the
/// front ends.
#[rustfmt::skip]
const ALLOWED: &[(&str, &str, &str)] = &[
    // The binary and the command-line front ends: they call the library.
    ("main", "cli", "the binary parses arguments and runs a cli subcommand"),
    ("main", "config", "the binary loads the config file for `turnstile serve`"),
    ("main", "mcp", "the binary scrubs URLs from the log lines it forwards (mcp::url)"),
    ("cli", "app", "`turnstile serve` and `turnstile demo` assemble the server through app"),
    ("cli", "config", "`turnstile serve` reads and validates its config file"),
    ("cli", "demo", "`turnstile demo` runs the embedded demo tool server"),
    ("cli", "http", "`turnstile serve`/`demo` serve the router with its HttpConfig"),
    ("cli", "agent", "`turnstile demo` sets the turn's Limits"),
    ("cli", "llm", "the front ends pick a model adapter and show its URL redacted"),
    ("cli", "mcp", "`turnstile mcp` probes a tool server with the real client"),
    ("cli", "store", "the front ends name the database backend they open"),
    ("cli", "protocols", "`turnstile tables`/`chat`/`serve` load and check the tables"),
    ("cli", "fsm", "`turnstile tables` renders and diffs; `chat` checks frame order"),
    ("cli", "wire", "`turnstile chat` reads a turn's frames with the one SSE parser"),
    // Assembly.
    ("app", "http", "app builds the router's state around an agent"),
    ("app", "agent", "app builds the agent, its tools and tables, and runs start-up recovery"),
    ("app", "judge", "app hands the tool contracts to the agent"),
    ("app", "llm", "app takes the model adapter to run"),
    ("app", "mcp", "app connects the tool servers"),
    ("app", "store", "app opens the store"),
    ("app", "protocols", "app loads the table set (built-in or overridden)"),
    // The config file describes every part it configures.
    ("config", "http", "the config's [http] section is http's HttpConfig"),
    ("config", "agent", "the config's limits are the agent's Limits, ContextLimits and lease TTL"),
    ("config", "judge", "the config declares the tools' result contracts"),
    ("config", "llm", "the config's model section is an OpenAiConfig with its ApiKey"),
    ("config", "guard", "the config's [[guardrails]] builds the built-in safety checkers (guard::safety)"),
    ("config", "mcp", "the config's servers are ServerSpecs"),
    ("config", "store", "the config's database URL names a store backend"),
    // The request edge.
    ("http", "agent", "http hands a turn to the agent and writes the frames it produces"),
    ("http", "store", "http creates threads, reads their messages, maps store errors"),
    ("http", "protocols", "http serves the tables, connection states and row telemetry"),
    ("http", "fsm", "http renders a table for GET /v1/tables"),
    ("http", "wire", "the front ends' streams (http::ui_stream) read the frames the agent wrote"),
    ("http", "judge", "the edge hands the caller's verified tiers (judge::tiers::Access) to the turn"),
    ("http", "llm", "the proxy's service key is held as an llm::ApiKey, redacted in every Debug form"),
    // The turn.
    ("agent", "judge", "the agent asks the judge for every number and absence"),
    ("agent", "guard", "the agent has the guard check every sentence before it is sent"),
    ("agent", "llm", "the agent asks the planner and the responder"),
    ("agent", "mcp", "the agent's tool belt calls MCP servers"),
    ("agent", "store", "the agent commits records and holds the thread's lease"),
    ("agent", "protocols", "the agent runs the turn, frame, admission and narration machines"),
    ("agent", "fsm", "the agent reports a machine's violations and snapshots"),
    ("agent", "wire", "the agent produces the wire frames"),
    // The middle layer points one way: guard, llm → judge → mcp.
    ("guard", "judge", "the guard checks sentences against the judge's anchors, in its language"),
    ("guard", "protocols", "the guard fires the narration table"),
    ("llm", "judge", "a model adapter renders the judge's anchors, digests and sentences"),
    ("llm", "mcp", "a model adapter is shown the tools (ToolInfo); URLs shown redacted"),
    ("llm", "wire", "the OpenAI adapter reads the model's stream with the one SSE parser"),
    ("judge", "protocols", "the judge classifies into the narrowing, paging and admission tables"),
    ("judge", "fsm", "a judgement carries a machine's snapshot or violation"),
    ("judge", "wire", "the judge builds the cards and figures sent as frames"),
    ("mcp", "protocols", "the client's connection is a machine of connection.ron"),
    ("mcp", "fsm", "the client snapshots its connection machine"),
    // The tables.
    ("protocols", "fsm", "each binding is a typed view of an fsm table"),
    // The demo is a tool server like any other: it depends on the library.
    ("demo", "judge", "the demo declares its tools' result contracts (demo::contracts)"),
    ("demo", "mcp", "the demo's tests read its results as the ToolOutput the judge gets"),
    ("demo", "llm", "the demo's scripted, lying and slow models implement the Model trait"),
];

/// Real edges that break the intended shape today: (from, to, why — naming
/// the issue that will remove it). Each must still occur: a fixed one fails
/// the test until it is removed here.
const KNOWN_EXCEPTIONS: &[(&str, &str, &str)] = &[
    // None today. An entry reads:
    // ("store", "agent", "issue NN: the recovery rows name the turn's state"),
];

/// Import circles between the files of one top-level module that are known
/// (each a set of module paths, sorted) with the issue that will break them.
const KNOWN_CYCLES: &[(&[&str], &str)] = &[];

/// Top-level modules nothing but these may import.
const ONLY_FRONT_ENDS_IMPORT: &[&str] = &["demo"];
const FRONT_ENDS: &[&str] = &["main", "cli", "demo"];
/// Top-level modules that import nothing of the project.
const IMPORTS_NOTHING: &[&str] = &["fsm", "wire"];

// ---------------------------------------------------------------------------
// Reading the source.
// ---------------------------------------------------------------------------

/// `code` with comments and the insides of string and char literals
/// replaced by spaces (newlines kept, so lines still count).
fn blank_comments_and_strings(code: &str) -> String {
    let c: Vec<char> = code.chars().collect();
    let mut out = String::with_capacity(code.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    while i < c.len() {
        let at = |k: usize| c.get(k).copied().unwrap_or('\0');
        if at(i) == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if at(i) == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            loop {
                if at(i) == '/' && at(i + 1) == '*' {
                    depth += 1;
                    out += "  ";
                    i += 2;
                } else if at(i) == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    out += "  ";
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else if i >= c.len() {
                    break;
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if (at(i) == 'r' || (at(i) == 'b' && at(i + 1) == 'r'))
            && (i == 0 || !ident(c[i - 1]))
            && {
                let mut k = i + if at(i) == 'b' { 2 } else { 1 };
                while at(k) == '#' {
                    k += 1;
                }
                at(k) == '"'
            }
        {
            // A raw string: r#"..."#.
            let mut k = i + if at(i) == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while at(k) == '#' {
                hashes += 1;
                k += 1;
            }
            out += "\"";
            for _ in i..k {
                out.push(' ');
            }
            i = k + 1;
            while i < c.len() {
                if c[i] == '"' && (1..=hashes).all(|h| at(i + h) == '#') {
                    i += 1 + hashes;
                    break;
                }
                blank(&mut out, c[i]);
                i += 1;
            }
            out += "\"";
        } else if at(i) == '"' {
            out.push('"');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
            out.push('"');
            i += 1;
        } else if at(i) == '\'' && (at(i + 1) == '\\' || (at(i + 1) != '\0' && at(i + 2) == '\'')) {
            // A char literal ('x', '\n', '\u{1F600}'); a lifetime has no
            // closing quote after one character.
            out.push('\'');
            i += 1;
            if at(i) == '\\' {
                blank(&mut out, c[i]);
                i += 1;
            }
            while i < c.len() && c[i] != '\'' {
                blank(&mut out, c[i]);
                i += 1;
            }
            out.push('\'');
            i += 1;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Path, // ::
    Open,
    Close,
    Comma,
    Semi,
    Star,
    Other(char),
}

fn tokens(code: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            // Raw identifiers: r#type.
            if word == "r" && c.get(i) == Some(&'#') {
                i += 1;
                continue;
            }
            out.push((Tok::Ident(word), line));
        } else if ch.is_ascii_digit() {
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_' || c[i] == '.') {
                i += 1;
            }
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push((Tok::Path, line));
            i += 2;
        } else {
            let t = match ch {
                '{' => Tok::Open,
                '}' => Tok::Close,
                ',' => Tok::Comma,
                ';' => Tok::Semi,
                '*' => Tok::Star,
                other => Tok::Other(other),
            };
            out.push((t, line));
            i += 1;
        }
    }
    out
}

/// A path one file names: where; for a `use`, the name it binds and
/// whether it is a `pub use` (a re-export).
#[derive(Clone, Debug)]
struct Reference {
    line: usize,
    path: Vec<String>,
    binds: Option<String>,
    public: bool,
}

/// One file's module: its path (`agent::turn::plan`; `""` for `lib.rs`) and
/// what it names.
#[derive(Clone, Debug, Default)]
struct FileModule {
    path: String,
    file: String,
    /// `mod x;` declarations.
    children: BTreeSet<String>,
    /// Items it defines (functions, types, consts, modules, macros).
    defines: BTreeSet<String>,
    /// `#[macro_export] macro_rules! x` (exported at the crate root).
    exported_macros: BTreeSet<String>,
    references: Vec<Reference>,
}

fn segs(path: &str) -> Vec<String> {
    match path {
        "" => Vec::new(),
        p => p.split("::").map(str::to_string).collect(),
    }
}

/// Parses one use tree at `toks[*i..]` below `prefix` into its leaf paths
/// (each with the name it binds).
fn use_tree(
    toks: &[(Tok, usize)],
    i: &mut usize,
    prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, String)>,
) {
    let mut path = prefix;
    loop {
        match toks.get(*i).map(|t| &t.0) {
            Some(Tok::Path) => *i += 1,
            Some(Tok::Ident(name)) => {
                path.push(name.clone());
                *i += 1;
                if toks.get(*i).map(|t| &t.0) == Some(&Tok::Path) {
                    *i += 1;
                    continue;
                }
                let mut bound = name.clone();
                if toks.get(*i).map(|t| &t.0) == Some(&Tok::Ident("as".into())) {
                    if let Some((Tok::Ident(alias), _)) = toks.get(*i + 1) {
                        bound = alias.clone();
                    }
                    *i += 2;
                }
                if path.last().map(String::as_str) == Some("self") {
                    path.pop();
                    if bound == "self" {
                        bound = path.last().cloned().unwrap_or_default();
                    }
                }
                out.push((path, bound));
                return;
            }
            Some(Tok::Star) => {
                *i += 1;
                path.push("*".into());
                out.push((path, "*".into()));
                return;
            }
            Some(Tok::Open) => {
                *i += 1;
                loop {
                    match toks.get(*i).map(|t| &t.0) {
                        None => return,
                        Some(Tok::Close) => {
                            *i += 1;
                            return;
                        }
                        Some(Tok::Comma) => *i += 1,
                        Some(_) => {
                            let before = *i;
                            use_tree(toks, i, path.clone(), out);
                            if *i == before {
                                *i += 1;
                            }
                        }
                    }
                }
            }
            _ => return,
        }
    }
}

/// Reads one file: `module` is its module path, `code` its source.
fn read_module(module: &str, file: &str, source: &str) -> FileModule {
    let code = blank_comments_and_strings(source);
    let toks = tokens(&code);
    let mut m = FileModule {
        path: module.to_string(),
        file: file.to_string(),
        ..FileModule::default()
    };
    let base = segs(module);
    // Inline modules: (name, brace depth inside it).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let ident = |k: usize| match toks.get(k) {
        Some((Tok::Ident(s), _)) => Some(s.as_str()),
        _ => None,
    };
    let tok = |k: usize| toks.get(k).map(|t| &t.0);
    // First pass: what the file declares.
    for (k, (t, line)) in toks.iter().enumerate() {
        match Some(t) {
            Some(Tok::Open) => depth += 1,
            Some(Tok::Close) => depth = depth.saturating_sub(1),
            _ => {}
        }
        if let (Some("mod"), Some(name), Some(Tok::Semi), 0) =
            (ident(k), ident(k + 1), tok(k + 2), depth)
        {
            m.children.insert(name.to_string());
        }
        let item = matches!(
            ident(k),
            Some(
                "fn" | "struct" | "enum" | "trait" | "type" | "const" | "static" | "mod" | "union"
            )
        );
        if let (true, Some(name)) = (item, ident(k + 1)) {
            m.defines.insert(name.to_string());
        }
        if ident(k) == Some("macro_rules") && tok(k + 1) == Some(&Tok::Other('!')) {
            if let Some(name) = ident(k + 2) {
                m.defines.insert(name.to_string());
                let lines: Vec<&str> = code.lines().take(*line).collect();
                let exported = lines
                    .iter()
                    .rev()
                    .take(4)
                    .any(|l| l.contains("macro_export"));
                if exported {
                    m.exported_macros.insert(name.to_string());
                }
            }
        }
    }
    depth = 0;
    let mut k = 0;
    while k < toks.len() {
        let scope: Vec<String> = base
            .iter()
            .cloned()
            .chain(inline.iter().map(|(n, _)| n.clone()))
            .collect();
        match &toks[k].0 {
            Tok::Open => {
                depth += 1;
                k += 1;
                continue;
            }
            Tok::Close => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
                k += 1;
                continue;
            }
            _ => {}
        }
        // mod x; / mod x { ... }
        if ident(k) == Some("mod") {
            if let Some(name) = ident(k + 1) {
                if tok(k + 2) == Some(&Tok::Open) {
                    inline.push((name.to_string(), depth + 1));
                }
                k += 2;
                continue;
            }
        }
        let line = toks[k].1;
        if ident(k) == Some("use") && tok(k.wrapping_sub(1)) != Some(&Tok::Path) {
            // `pub use`, `pub(crate) use`, `pub(super) use`.
            let public = (1..=4).any(|b| k >= b && ident(k - b) == Some("pub"))
                && (ident(k - 1) == Some("pub") || tok(k - 1) == Some(&Tok::Other(')')));
            let mut i = k + 1;
            let mut leaves = Vec::new();
            use_tree(&toks, &mut i, Vec::new(), &mut leaves);
            for (path, bound) in leaves {
                if let Some(abs) = absolute(&path, &scope, &m.children, inline.is_empty()) {
                    m.references.push(Reference {
                        line,
                        path: abs,
                        binds: Some(bound),
                        public,
                    });
                }
            }
            k = i.max(k + 1);
            continue;
        }
        // A path in code: crate::, $crate::, super::, self::, child::.
        let starts = match ident(k) {
            Some("crate" | "super" | "self") => true,
            // The binary names the library by its crate name.
            Some("turnstile") => module == "main",
            Some(name) => inline.is_empty() && m.children.contains(name),
            None => false,
        };
        if starts && tok(k + 1) == Some(&Tok::Path) && tok(k.wrapping_sub(1)) != Some(&Tok::Path) {
            let mut path = vec![ident(k).unwrap_or_default().to_string()];
            let mut i = k + 1;
            while tok(i) == Some(&Tok::Path) {
                match ident(i + 1) {
                    Some(s) => path.push(s.to_string()),
                    None => break,
                }
                i += 2;
            }
            if let Some(abs) = absolute(&path, &scope, &m.children, inline.is_empty()) {
                m.references.push(Reference {
                    line,
                    path: abs,
                    binds: None,
                    public: false,
                });
            }
            k = i;
            continue;
        }
        k += 1;
    }
    m
}

/// `path` as seen from `scope`, from the crate root; `None` for another
/// crate's path.
fn absolute(
    path: &[String],
    scope: &[String],
    children: &BTreeSet<String>,
    top: bool,
) -> Option<Vec<String>> {
    let first = path.first()?.as_str();
    let mut out: Vec<String>;
    let rest: &[String];
    match first {
        "crate" => {
            out = crate_root_of(scope);
            rest = &path[1..];
        }
        name if CRATES.iter().any(|c| c.name == name) => {
            out = segs(CRATES.iter().find(|c| c.name == name)?.module);
            rest = &path[1..];
        }
        "self" => {
            out = scope.to_vec();
            rest = &path[1..];
        }
        "super" => {
            out = scope.to_vec();
            let ups = path.iter().take_while(|s| *s == "super").count();
            for _ in 0..ups {
                out.pop()?;
            }
            rest = &path[ups..];
        }
        name if top && children.contains(name) => {
            out = scope.to_vec();
            rest = path;
        }
        _ => return None,
    }
    out.extend(rest.iter().cloned());
    Some(out)
}

/// A crate of the workspace, read as one module tree: the engine is `fsm`,
/// the demo `demo`, the binary's library `cli`, and the server library the
/// root, so that `turnstile_fsm::Table` and `crate::fsm::Table` are one edge.
struct Crate {
    /// Its source directory, from the workspace root.
    dir: &'static str,
    /// Its name in paths (`turnstile_fsm::…`).
    name: &'static str,
    /// The module its `lib.rs` stands for (`""`: the root).
    module: &'static str,
}

const CRATES: &[Crate] = &[
    Crate {
        dir: "crates/turnstile/src",
        name: "turnstile",
        module: "",
    },
    // The pure layer (issue 36 §5): its modules keep their paths
    // (`judge`, `guard`, `protocols`, `wire`), re-exported by the server.
    Crate {
        dir: "crates/turnstile-judge/src",
        name: "turnstile_judge",
        module: "",
    },
    Crate {
        dir: "crates/turnstile-fsm/src",
        name: "turnstile_fsm",
        module: "fsm",
    },
    Crate {
        dir: "crates/turnstile-demo/src",
        name: "turnstile_demo",
        module: "demo",
    },
    Crate {
        dir: "src",
        name: "turnstile_cli",
        module: "cli",
    },
];

/// What `crate::` means in `scope`: the module its crate's root stands for.
fn crate_root_of(scope: &[String]) -> Vec<String> {
    match scope.first().map(String::as_str) {
        Some(t @ ("fsm" | "demo" | "cli" | "main")) => vec![t.to_string()],
        _ => Vec::new(),
    }
}

/// Every file of every crate by its module path.
fn read_src(root: &Path) -> Vec<FileModule> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.map(|e| e.path()).unwrap_or_else(|e| panic!("{e}")))
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    for c in CRATES {
        let src = root.join(c.dir);
        let mut files = Vec::new();
        walk(&src, &mut files);
        for f in &files {
            let rel = f.strip_prefix(&src).unwrap_or(f);
            let rel_s = rel.to_string_lossy().replace('\\', "/");
            // The judge crate's root only declares its four modules; the
            // server's `lib.rs` is the root both stand for.
            if c.name == "turnstile_judge" && rel_s == "lib.rs" {
                continue;
            }
            let module = match (c.module, module_of(&rel_s).as_str()) {
                // The binary's `main.rs` is a crate of its own.
                ("cli", "main") => "main".to_string(),
                (m, "") => m.to_string(),
                ("", inner) => inner.to_string(),
                (m, inner) => format!("{m}::{inner}"),
            };
            let text =
                std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            out.push(read_module(&module, &format!("{}/{rel_s}", c.dir), &text));
        }
    }
    out
}

/// `agent/turn/mod.rs` → `agent::turn`; `lib.rs` → `""`; `main.rs` → `main`.
fn module_of(rel: &str) -> String {
    let stem = rel.trim_end_matches(".rs");
    let stem = stem.strip_suffix("/mod").unwrap_or(stem);
    match stem {
        "lib" => String::new(),
        s => s.replace('/', "::"),
    }
}

// ---------------------------------------------------------------------------
// The graph.
// ---------------------------------------------------------------------------

/// An import of `to` by `from` (file modules), with where it is written.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Edge {
    from: String,
    to: String,
    at: String,
}

fn top(module: &str) -> &str {
    module.split("::").next().unwrap_or(module)
}

/// Resolves each file's references to the file module that defines the
/// named item, through facades' re-exports.
fn edges(modules: &[FileModule]) -> Vec<Edge> {
    let by_path: BTreeMap<&str, &FileModule> =
        modules.iter().map(|m| (m.path.as_str(), m)).collect();
    // The crate root re-exports every #[macro_export] macro.
    let mut macros: BTreeMap<String, String> = BTreeMap::new();
    for m in modules {
        for name in &m.exported_macros {
            macros.insert(name.clone(), m.path.clone());
        }
    }
    // A name a module imports (privately too: its children see it) is the
    // item it names.
    let imports = |m: &FileModule, name: &str| -> Option<Vec<String>> {
        m.references
            .iter()
            .find(|r| r.binds.as_deref() == Some(name))
            .map(|r| r.path.clone())
    };
    let globs = |m: &FileModule| -> Vec<Vec<String>> {
        m.references
            .iter()
            .filter(|r| r.binds.as_deref() == Some("*"))
            .map(|r| r.path[..r.path.len() - 1].to_vec())
            .collect()
    };
    let resolve = |path: &[String]| -> Option<String> {
        let mut path = path.to_vec();
        for _ in 0..16 {
            // The longest prefix that is a file.
            let n = (0..=path.len())
                .rev()
                .find(|&n| by_path.contains_key(path[..n].join("::").as_str()))?;
            let module = by_path[path[..n].join("::").as_str()];
            let Some(name) = path.get(n) else {
                return Some(module.path.clone());
            };
            if module.path.is_empty() {
                if let Some(def) = macros.get(name) {
                    return Some(def.clone());
                }
            }
            if let Some(target) = imports(module, name).filter(|_| !module.defines.contains(name)) {
                path = target
                    .into_iter()
                    .chain(path[n + 1..].iter().cloned())
                    .collect();
                continue;
            }
            if !module.defines.contains(name) {
                if let Some(g) = globs(module).into_iter().find(|g| {
                    by_path
                        .get(g.join("::").as_str())
                        .is_some_and(|gm| gm.defines.contains(name))
                }) {
                    path = g.into_iter().chain(path[n..].iter().cloned()).collect();
                    continue;
                }
            }
            return Some(module.path.clone());
        }
        None
    };
    let mut out = BTreeSet::new();
    for m in modules {
        for r in &m.references {
            let path = match r.path.last().map(String::as_str) {
                Some("*") => &r.path[..r.path.len() - 1],
                _ => &r.path[..],
            };
            let Some(to) = resolve(path) else { continue };
            let inside =
                to.starts_with(&format!("{}::", m.path)) || (m.path.is_empty() && !to.is_empty());
            if to == m.path || (r.public && inside) {
                continue; // itself, or a facade's re-export of its own part
            }
            out.insert(Edge {
                from: m.path.clone(),
                to,
                at: format!("{}:{}", m.file, r.line),
            });
        }
    }
    out.into_iter().collect()
}

/// What the top-level checks found wrong, one line each.
fn check_top_level(
    edges: &[Edge],
    allowed: &[(&str, &str, &str)],
    exceptions: &[(&str, &str, &str)],
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen: BTreeMap<(&str, &str), Vec<&Edge>> = BTreeMap::new();
    for e in edges {
        let (from, to) = (top(&e.from), top(&e.to));
        if from != to && !from.is_empty() && !to.is_empty() {
            seen.entry((from, to)).or_default().push(e);
        }
    }
    for ((from, to), at) in &seen {
        let listed = allowed.iter().any(|(f, t, _)| f == from && t == to)
            || exceptions.iter().any(|(f, t, _)| f == from && t == to);
        if !listed {
            let wheres: Vec<String> = at
                .iter()
                .take(5)
                .map(|e| format!("{} ({} → {})", e.at, e.from, e.to))
                .collect();
            problems.push(format!(
                "{from} → {to} is not an allowed edge: {}. Import something lower, or add the edge to ALLOWED in tests/architecture.rs with its why (and update docs/architecture.md).",
                wheres.join(", ")
            ));
        }
    }
    for (from, to, why) in exceptions {
        if !seen.contains_key(&(*from, *to)) {
            problems.push(format!("the known exception {from} → {to} ({why}) no longer occurs: remove it from KNOWN_EXCEPTIONS"));
        }
    }
    for (from, to, _) in allowed.iter().chain(exceptions) {
        if IMPORTS_NOTHING.contains(from) {
            problems.push(format!(
                "{from} → {to}: {from} imports nothing of the project"
            ));
        }
        if ONLY_FRONT_ENDS_IMPORT.contains(to) && !FRONT_ENDS.contains(from) {
            problems.push(format!(
                "{from} → {to}: only {FRONT_ENDS:?} may import {to}"
            ));
        }
    }
    // The allowed shape itself points one way.
    let shape: Vec<Edge> = allowed
        .iter()
        .chain(exceptions)
        .map(|(f, t, why)| Edge {
            from: f.to_string(),
            to: t.to_string(),
            at: why.to_string(),
        })
        .collect();
    for cycle in cycles(&shape) {
        problems.push(format!(
            "the allowed top-level edges form a cycle: {}",
            cycle.join(" ↔ ")
        ));
    }
    problems
}

/// Every strongly connected set of more than one module (Tarjan), sorted.
fn cycles(edges: &[Edge]) -> Vec<Vec<String>> {
    let mut nodes: BTreeSet<&str> = BTreeSet::new();
    let mut next: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for e in edges {
        nodes.insert(&e.from);
        nodes.insert(&e.to);
        if e.from != e.to {
            next.entry(&e.from).or_default().insert(&e.to);
        }
    }
    struct Tarjan<'a> {
        next: &'a BTreeMap<&'a str, BTreeSet<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on.insert(v);
            for &w in self.next.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if self.on.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut scc = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(w);
                    scc.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if scc.len() > 1 {
                    scc.sort();
                    self.out.push(scc);
                }
            }
        }
    }
    let mut t = Tarjan {
        next: &next,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in nodes {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out.sort();
    t.out
}

/// Import circles between the files of one top-level module.
fn check_file_cycles(edges: &[Edge], known: &[(&[&str], &str)]) -> Vec<String> {
    let inner: Vec<Edge> = edges
        .iter()
        .filter(|e| !e.from.is_empty() && top(&e.from) == top(&e.to))
        .cloned()
        .collect();
    let found = cycles(&inner);
    let mut problems = Vec::new();
    for cycle in &found {
        if known
            .iter()
            .any(|(k, _)| k.iter().copied().eq(cycle.iter().map(String::as_str)))
        {
            continue;
        }
        let evidence: Vec<String> = inner
            .iter()
            .filter(|e| cycle.contains(&e.from) && cycle.contains(&e.to))
            .map(|e| format!("{} → {} at {}", e.from, e.to, e.at))
            .collect();
        problems.push(format!(
            "import circle between {}: {}. Move what both need into a module both import, or invert one import.",
            cycle.join(", "),
            evidence.join("; ")
        ));
    }
    for (k, issue) in known {
        if !found
            .iter()
            .any(|c| c.iter().map(String::as_str).eq(k.iter().copied()))
        {
            problems.push(format!(
                "the known circle {k:?} ({issue}) no longer occurs: remove it from KNOWN_CYCLES"
            ));
        }
    }
    problems
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn graph() -> Vec<Edge> {
    // TURNSTILE_ARCH_ROOT: read another checkout's src/ (an older commit, to
    // see what the checks say of it).
    let src_root = std::env::var_os("TURNSTILE_ARCH_ROOT").map_or_else(root, PathBuf::from);
    let modules = read_src(&src_root);
    let e = edges(&modules);
    if std::env::var_os("TURNSTILE_ARCH_DUMP").is_some() {
        for e in &e {
            println!("{} → {}  ({})", e.from, e.to, e.at);
        }
    }
    e
}

// ---------------------------------------------------------------------------
// The tests.
// ---------------------------------------------------------------------------

#[test]
fn top_level_imports_follow_the_allowed_edges() {
    let problems = check_top_level(&graph(), ALLOWED, KNOWN_EXCEPTIONS);
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
}

#[test]
fn no_import_circle_between_the_files_of_a_module() {
    let problems = check_file_cycles(&graph(), KNOWN_CYCLES);
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
}

#[test]
fn every_allowed_edge_has_a_why() {
    for (from, to, why) in ALLOWED.iter().chain(KNOWN_EXCEPTIONS) {
        assert!(!why.trim().is_empty(), "{from} → {to} has no why");
    }
    let mut pairs = BTreeSet::new();
    for (from, to, _) in ALLOWED.iter().chain(KNOWN_EXCEPTIONS) {
        assert!(pairs.insert((from, to)), "{from} → {to} is listed twice");
    }
}

// ---------------------------------------------------------------------------
// The crates' dependencies, as cargo resolves them for each crate alone.
// ---------------------------------------------------------------------------

/// `cargo tree` for one package of the workspace, offline (the lock file has
/// everything).
fn cargo_tree(args: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args(["tree", "--offline", "--locked"])
        .args(args)
        .current_dir(root())
        .output()
        .expect("cargo runs");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The engine, and the leaf that reads tool results (issue 36 §5), depend
/// on no crate of the workspace: the compiler holds what an import scan
/// used to.
#[test]
fn the_leaf_crates_depend_on_no_crate_of_the_workspace() {
    for leaf in ["turnstile-fsm", "turnstile-output"] {
        let tree = cargo_tree(&["-p", leaf, "-e", "normal", "--prefix", "none"]);
        let ours: Vec<&str> = tree
            .lines()
            .skip(1)
            .filter(|l| l.starts_with("turnstile"))
            .collect();
        assert!(tree.starts_with(&format!("{leaf} ")), "{tree}");
        assert!(ours.is_empty(), "{leaf} depends on {ours:?}");
    }
}

/// The server library has neither rmcp's server side nor schemars, and
/// does not depend on the demo: only `crates/turnstile-demo` does.
#[test]
fn only_the_demo_crate_has_the_mcp_server_side() {
    let rmcp = cargo_tree(&["-p", "turnstile", "-e", "features", "-i", "rmcp"]);
    assert!(rmcp.contains("rmcp feature \"client\""), "{rmcp}");
    for f in [
        "server",
        "macros",
        "schemars",
        "transport-streamable-http-server",
    ] {
        assert!(
            !rmcp.contains(&format!("rmcp feature \"{f}\"")),
            "the server library enables rmcp's `{f}`:\n{rmcp}"
        );
    }
    let all = cargo_tree(&["-p", "turnstile", "-e", "normal", "--prefix", "none"]);
    for krate in ["schemars ", "turnstile-demo "] {
        assert!(
            !all.lines().any(|l| l.starts_with(krate)),
            "the server library depends on {krate}"
        );
    }
    let demo = cargo_tree(&["-p", "turnstile-demo", "-e", "features", "-i", "rmcp"]);
    assert!(demo.contains("rmcp feature \"server\""), "{demo}");
}

// ---------------------------------------------------------------------------
// docs/architecture.md
// ---------------------------------------------------------------------------

const DOC: &str = "docs/architecture.md";
const BEGIN: &str = "<!-- BEGIN generated: fsm::render::mermaid of the built-in turn table -->";
const END: &str = "<!-- END generated -->";

/// The code map: the part of the doc from `## Code map` to the next `## `.
fn code_map(doc: &str) -> &str {
    let start = doc
        .find("\n## Code map")
        .unwrap_or_else(|| panic!("{DOC} has no `## Code map`"));
    let rest = &doc[start + 1..];
    let end = rest[3..].find("\n## ").map(|e| e + 3).unwrap_or(rest.len());
    &rest[..end]
}

/// The top-level module a code-map heading names: `crates/turnstile/src/agent`
/// → `agent`, `crates/turnstile-fsm` → `fsm`, `crates/turnstile-demo` →
/// `demo`, `src` (the binary) → `cli`.
fn heading_top(h: &str) -> Option<String> {
    let h = h.trim_end_matches('/');
    for dir in ["crates/turnstile/src/", "crates/turnstile-judge/src/"] {
        if let Some(inner) = h.strip_prefix(dir) {
            return Some(inner.trim_end_matches(".rs").to_string());
        }
    }
    CRATES
        .iter()
        .find(|c| !c.module.is_empty() && (h == c.dir || h == c.dir.trim_end_matches("/src")))
        .map(|c| c.module.to_string())
}

/// Which names in `map` (a code map) name `module`: in the section whose
/// heading names `src/<top>`, a backticked `x`, `x.rs`, `parent/x.rs`,
/// `parent::x`, the full module path or the file path; `lib.rs` and
/// `main.rs` by their file path anywhere in the map.
fn unnamed_modules<'a>(
    map: &str,
    modules: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Vec<String> {
    let mut sections: BTreeMap<String, String> = BTreeMap::new();
    let mut current: Vec<String> = Vec::new();
    for line in map.lines() {
        if let Some(h) = line.strip_prefix("### ") {
            current = h
                .split('`')
                .skip(1)
                .step_by(2)
                .filter_map(heading_top)
                .collect();
            continue;
        }
        for top in &current {
            let s = sections.entry(top.clone()).or_default();
            s.push_str(line);
            s.push('\n');
        }
    }
    let ticked = |text: &str| -> BTreeSet<String> {
        text.split('`')
            .skip(1)
            .step_by(2)
            .map(|s| s.trim().to_string())
            .collect()
    };
    let everywhere = ticked(map);
    let mut missing = Vec::new();
    for (module, file) in modules {
        if module.is_empty() || module == "main" {
            if !everywhere.contains(file) {
                missing.push(format!("{file} (name it as `{file}`)"));
            }
            continue;
        }
        let parts: Vec<&str> = module.split("::").collect();
        let t = parts[0];
        // The top-level module: its heading is its name.
        if parts.len() == 1 {
            if !sections.contains_key(t) {
                missing.push(format!("{file} (give `{t}` a `### ` section)"));
            }
            continue;
        }
        let Some(section) = sections.get(t) else {
            missing.push(format!("{file} (no `### ` section for `{t}`)"));
            continue;
        };
        let names = ticked(section);
        let last = parts[parts.len() - 1];
        let rel = parts[1..].join("/");
        let mut candidates = vec![
            module.to_string(),
            parts[1..].join("::"),
            file.to_string(),
            format!("{rel}.rs"),
            last.to_string(),
            format!("{last}.rs"),
        ];
        if file.ends_with("/mod.rs") {
            candidates.push(format!("{rel}/"));
            candidates.push(format!("{rel}/mod.rs"));
            candidates.push(file.trim_end_matches("mod.rs").to_string());
        }
        if parts.len() > 2 {
            let parent = parts[parts.len() - 2];
            candidates.push(format!("{parent}/{last}.rs"));
            candidates.push(format!("{parent}::{last}"));
        }
        if !candidates.iter().any(|c| names.contains(c)) {
            missing.push(format!("{file} (name `{last}` in the `{t}` section)"));
        }
    }
    missing
}

#[test]
fn every_module_is_in_the_code_map() {
    let doc = std::fs::read_to_string(root().join(DOC)).unwrap_or_else(|e| panic!("{DOC}: {e}"));
    let modules = read_src(&root());
    let missing = unnamed_modules(
        code_map(&doc),
        modules.iter().map(|m| (m.path.as_str(), m.file.as_str())),
    );
    assert!(
        missing.is_empty(),
        "{DOC}'s code map does not name:\n  {}\n",
        missing.join("\n  ")
    );
}

fn rendered_turn_block() -> String {
    let tables = turnstile::protocols::TableSet::builtin().unwrap_or_else(|e| panic!("{e}"));
    let turn = tables
        .get("turn")
        .unwrap_or_else(|| panic!("no built-in turn table"));
    format!(
        "{BEGIN}\n```mermaid\n{}```\n{END}",
        turnstile::fsm::render::mermaid(turn)
    )
}

#[test]
fn the_docs_turn_diagram_is_the_turn_table() {
    let path = root().join(DOC);
    let doc = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{DOC}: {e}"));
    let (Some(b), Some(e)) = (doc.find(BEGIN), doc.find(END)) else {
        panic!("{DOC} has no generated turn diagram between `{BEGIN}` and `{END}`");
    };
    let current = &doc[b..e + END.len()];
    let wanted = rendered_turn_block();
    if current == wanted {
        return;
    }
    if std::env::var_os("TURNSTILE_BLESS").is_some() {
        let updated = format!("{}{wanted}{}", &doc[..b], &doc[e + END.len()..]);
        std::fs::write(&path, updated).unwrap_or_else(|e| panic!("{DOC}: {e}"));
        return;
    }
    panic!(
        "{DOC}'s turn diagram is not tables/turn.ron as built in.\n\
         Regenerate it with: TURNSTILE_BLESS=1 cargo test --test architecture\n\
         --- in the doc\n{current}\n--- rendered\n{wanted}\n"
    );
}

// ---------------------------------------------------------------------------
// The checker can fail.
// ---------------------------------------------------------------------------

mod the_checker {
    use super::*;

    fn edge(from: &str, to: &str) -> Edge {
        Edge {
            from: from.into(),
            to: to.into(),
            at: "synthetic".into(),
        }
    }

    #[test]
    fn reports_a_forbidden_edge_and_a_stale_exception() {
        let allowed = &[("http", "agent", "why"), ("agent", "fsm", "why")][..];
        let edges = [
            edge("http::routes", "agent::turn"),
            edge("fsm::table", "agent"),
        ];
        let problems = check_top_level(&edges, allowed, &[]);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with("fsm → agent is not an allowed edge"),
            "{problems:?}"
        );
        // Listed as an exception, it passes; an exception that no longer
        // occurs does not.
        let exceptions = &[("fsm", "agent", "issue 0")][..];
        let problems = check_top_level(&edges, allowed, exceptions);
        assert!(
            problems.iter().any(|p| p.contains("fsm imports nothing")),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.contains("form a cycle")),
            "{problems:?}"
        );
        let problems = check_top_level(&edges[..1], allowed, &[("judge", "llm", "issue 0")]);
        assert!(
            problems.iter().any(|p| p.contains("no longer occurs")),
            "{problems:?}"
        );
        // Only the front ends may import the demo.
        let problems = check_top_level(&[edge("judge", "demo")], &[("judge", "demo", "why")], &[]);
        assert!(
            problems.iter().any(|p| p.contains("may import demo")),
            "{problems:?}"
        );
    }

    #[test]
    fn reports_a_cycle_between_files() {
        let edges = [
            edge("mcp::client", "mcp::session"),
            edge("mcp::session", "mcp::client"),
            edge("mcp::client", "mcp::spec"),
            edge("agent::recovery", "agent::turn"),
            edge("agent::turn", "agent::tables"),
        ];
        let problems = check_file_cycles(&edges, &[]);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with("import circle between mcp::client, mcp::session"),
            "{problems:?}"
        );
        assert!(
            check_file_cycles(&edges, &[(&["mcp::client", "mcp::session"], "issue 15")]).is_empty()
        );
        // A longer circle, and one across top-level modules is not a file circle.
        let edges = [
            edge("a::x", "a::y"),
            edge("a::y", "a::z"),
            edge("a::z", "a::x"),
            edge("b::p", "c::q"),
            edge("c::q", "b::p"),
        ];
        let found = check_file_cycles(&edges, &[]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("a::x, a::y, a::z"));
    }

    #[test]
    fn reads_use_trees_super_and_facades_and_skips_comments_and_strings() {
        let lib = read_module("", "src/lib.rs", "pub mod a;\npub mod b;\n");
        let a = read_module(
            "a",
            "src/a/mod.rs",
            "mod inner;\nmod other;\npub use inner::Thing;\nuse other::*;\n// use crate::b::Hidden;\nconst S: &str = \"crate::b::X\";\nconst R: &str = r#\"use crate::b::Y;\"#;\nfn f<'a>(c: char) -> bool { c == '{' }\n",
        );
        let inner = read_module(
            "a::inner",
            "src/a/inner.rs",
            "use super::super::b::{self, deep::{One, Two as T}};\npub struct Thing;\nfn g() { crate::a::other::h(); }\n#[cfg(test)]\nmod tests { use super::*; fn t() { let _ = super::Thing; } }\n",
        );
        let other = read_module("a::other", "src/a/other.rs", "pub fn h() {}\n");
        let b = read_module("b", "src/b/mod.rs", "pub mod deep;\n");
        let deep = read_module(
            "b::deep",
            "src/b/deep.rs",
            "pub struct One; pub struct Two;\n",
        );
        let c = read_module(
            "c",
            "src/c.rs",
            "fn x() -> crate::a::Thing { crate::a::Thing }\n",
        );
        let got: Vec<(String, String)> = edges(&[lib, a, inner, other, b, deep, c])
            .into_iter()
            .map(|e| (e.from, e.to))
            .collect();
        let want: Vec<(String, String)> = [
            ("a", "a::other"),
            ("a::inner", "a::other"),
            ("a::inner", "b"),
            ("a::inner", "b::deep"),
            ("c", "a::inner"),
        ]
        .iter()
        .map(|(f, t)| (f.to_string(), t.to_string()))
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn reports_a_module_the_code_map_does_not_name() {
        let map = "## Code map\n### `crates/turnstile/src/agent`\nThe loop (`turn/`: `state.rs`, `plan.rs`); `tables`.\n### `crates/turnstile-fsm`\n`src/lib.rs`\n";
        let modules = [
            ("", "src/lib.rs"),
            ("agent", "src/agent/mod.rs"),
            ("agent::turn", "src/agent/turn/mod.rs"),
            ("agent::turn::state", "src/agent/turn/state.rs"),
            ("agent::turn::plan", "src/agent/turn/plan.rs"),
            ("agent::tables", "src/agent/tables.rs"),
            ("agent::turn::emit", "src/agent/turn/emit.rs"),
            ("fsm::group", "src/fsm/group.rs"),
            ("wire", "src/wire/mod.rs"),
            ("main", "src/main.rs"),
        ];
        let missing = unnamed_modules(map, modules);
        assert_eq!(missing.len(), 4, "{missing:?}");
        for file in [
            "src/agent/turn/emit.rs",
            "src/fsm/group.rs",
            "src/wire/mod.rs",
            "src/main.rs",
        ] {
            assert!(
                missing.iter().any(|m| m.starts_with(file)),
                "{file} in {missing:?}"
            );
        }
    }
}

// ---------------------------------------------------------------------------
// The code map's claims (issue 36 §6): what the prose says of the layers is
// checked against the crates, the allowed edges and the files.
// ---------------------------------------------------------------------------

/// The arrows of the doc's "Imports point one way" block, as (from, to)
/// pairs of top-level modules: `a, b → {c, d}` is four pairs; a name that
/// is not a module of the graph (`output (crates/turnstile-output)`) and a
/// clause with no arrow are not read.
fn drawn_edges(doc: &str) -> Vec<(String, String)> {
    let start = doc
        .find("Imports point one way:")
        .unwrap_or_else(|| panic!("{DOC} has no \"Imports point one way:\""));
    let block = &doc[start..];
    let open = block.find("```text\n").expect("the imports block") + 8;
    let close = block[open..].find("```").expect("its end") + open;
    let names = |part: &str| -> Vec<String> {
        part.replace(['{', '}'], "")
            .split(',')
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_lowercase()))
            .collect()
    };
    let mut out = Vec::new();
    for clause in block[open..close].lines().flat_map(|l| l.split('·')) {
        let chain: Vec<Vec<String>> = clause.split('→').map(names).collect();
        for pair in chain.windows(2) {
            for from in &pair[0] {
                for to in &pair[1] {
                    out.push((from.clone(), to.clone()));
                }
            }
        }
    }
    out
}

/// Every arrow the doc draws is an allowed edge: a reader who trusts the
/// picture is not told of a dependency the test would refuse.
#[test]
fn the_drawn_layers_are_the_allowed_edges() {
    let doc = std::fs::read_to_string(root().join(DOC)).unwrap_or_else(|e| panic!("{DOC}: {e}"));
    let drawn = drawn_edges(&doc);
    assert!(drawn.len() > 10, "the block was read: {drawn:?}");
    let modules: BTreeSet<String> = read_src(&root())
        .iter()
        .map(|m| top(&m.path).to_string())
        .chain(["cli".to_string()])
        .collect();
    // `output` is the leaf crate `turnstile-output`, which the compiler
    // holds (`the_leaf_crates_depend_on_no_crate_of_the_workspace`); every
    // other name must be a module, so a misspelt one is not passed over.
    let unknown: Vec<&String> = (drawn.iter())
        .flat_map(|(f, t)| [f, t])
        .filter(|n| !modules.contains(*n) && n.as_str() != "output")
        .collect();
    assert!(
        unknown.is_empty(),
        "{DOC} draws modules that do not exist: {unknown:?}"
    );
    let wrong: Vec<String> = drawn
        .iter()
        .filter(|(f, t)| f != "output" && t != "output")
        .filter(|(f, t)| !ALLOWED.iter().any(|(a, b, _)| a == f && b == t))
        .map(|(f, t)| format!("{f} → {t}"))
        .collect();
    assert!(
        wrong.is_empty(),
        "{DOC} draws edges the architecture test does not allow: {wrong:?}"
    );
}

/// The number of crates the code map names is the workspace's, and every
/// path it names in backticks exists.
#[test]
fn the_code_map_names_what_exists() {
    let doc = std::fs::read_to_string(root().join(DOC)).unwrap_or_else(|e| panic!("{DOC}: {e}"));
    let map = code_map(&doc);
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).expect("Cargo.toml");
    let members = manifest
        .lines()
        .find(|l| l.starts_with("members"))
        .map(|l| l.matches('"').count() / 2)
        .expect("workspace members");
    let words = [
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
    ];
    let said = format!("a cargo workspace of {} crates", words[members]);
    assert!(map.contains(&said), "the code map must say \"{said}\"");
    let missing: Vec<&str> = map
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|p| {
            ["crates/", "src/", "tables/", "docs/", "tests/"]
                .iter()
                .any(|d| p.starts_with(d))
        })
        .filter(|p| !p.contains(['*', '{', ' ']))
        .filter(|p| !root().join(p).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "{DOC}'s code map names paths that do not exist: {missing:?}"
    );
}

/// The pure layer takes no I/O (issue 36 §5): none of the runtime, network
/// or database crates is a dependency of `turnstile-judge`, and its source
/// opens no file, socket or process, but for the one read of a `--tables`
/// directory at start-up.
#[test]
fn the_judge_crate_takes_no_io() {
    let tree = cargo_tree(&[
        "-p",
        "turnstile-judge",
        "-e",
        "normal",
        "--depth",
        "1",
        "--prefix",
        "none",
    ]);
    assert!(tree.starts_with("turnstile-judge "), "{tree}");
    for io in ["tokio ", "reqwest ", "sqlx ", "axum ", "hyper ", "rmcp "] {
        assert!(
            !tree.lines().skip(1).any(|l| l.starts_with(io)),
            "turnstile-judge depends on {io}directly:\n{tree}"
        );
    }
    let src = root().join("crates/turnstile-judge/src");
    let mut files = Vec::new();
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let p = e.unwrap_or_else(|e| panic!("{e}")).path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    walk(&src, &mut files);
    assert!(files.len() > 30, "the crate was read: {}", files.len());
    let mut found = Vec::new();
    for f in &files {
        let rel = f
            .strip_prefix(&src)
            .unwrap_or(f)
            .to_string_lossy()
            .replace('\\', "/");
        let code = blank_comments_and_strings(&std::fs::read_to_string(f).unwrap_or_default());
        // Tests may write a temporary table; only shipped code is held.
        let shipped = code.split("#[cfg(test)]").next().unwrap_or_default();
        for io in [
            "std::fs",
            "std::net",
            "std::process",
            "tokio::",
            "File::open",
        ] {
            if shipped.contains(io) && rel != "protocols/registry.rs" {
                found.push(format!("{rel}: {io}"));
            }
        }
    }
    assert!(found.is_empty(), "I/O in the pure layer: {found:?}");
}
