//! RON text → raw table → validated [`Table`], collecting every finding.
//!
//! Validation never stops at the first problem: a reviewer fixing a table
//! sees all of its findings at once.

use std::collections::{HashMap, HashSet, VecDeque};

use sha2::{Digest, Sha256};

use super::finding::{closest, Code, Finding, Findings};
use super::schema::{RawRow, RawTable};
use super::spans::{self, Pos, Spans};
use super::table::{build_cells, Row, RowKind, Table};

/// The names a protocol's Rust binding declares. The table must name exactly
/// these: a reviewer may retarget or forbid rows without recompiling, but may
/// not invent a state, event or effect the code does not handle.
#[derive(Debug, Clone, Copy)]
pub struct BindingNames<'a> {
    pub states: &'a [&'a str],
    pub events: &'a [&'a str],
    pub effects: &'a [&'a str],
}

/// What a table is expected to be, beyond being a valid table.
#[derive(Debug, Clone, Copy, Default)]
pub struct Expect<'a> {
    /// The `name` the table must declare: its file's name (`frame.ron` →
    /// `frame`). A different name is a [`Code::NameMismatch`] finding.
    pub name: Option<&'a str>,
    /// The names the protocol's Rust binding declares.
    pub binding: Option<BindingNames<'a>>,
    /// The protocol whose binding that is, for findings; by default the
    /// name the table declares.
    pub protocol: Option<&'a str>,
}

/// Parses and validates one table file. `file` is used in findings only.
pub fn load(src: &str, file: &str, binding: Option<BindingNames<'_>>) -> Result<Table, Findings> {
    load_with(
        src,
        file,
        Expect {
            binding,
            ..Expect::default()
        },
    )
}

/// [`load`], with what the table must also agree with.
pub fn load_with(src: &str, file: &str, expect: Expect<'_>) -> Result<Table, Findings> {
    let opts =
        ron::Options::default().with_default_extension(ron::extensions::Extensions::IMPLICIT_SOME);
    let raw: RawTable = match opts.from_str(src) {
        Ok(raw) => raw,
        Err(e) => {
            return Err(Findings(vec![Finding {
                code: Code::Syntax,
                file: file.to_string(),
                pos: Pos {
                    line: e.position.line as u32,
                    col: e.position.col as u32,
                },
                message: e.code.to_string(),
                hint: "check brackets, commas, quotes and field names near here; the format is in docs/tables.md".into(),
            }]))
        }
    };
    let spans = spans::index(src);
    Validator::new(file, &spans).run(raw, expect)
}

/// A resolved (state, event) pair.
type Pair = (u16, u16);

struct Validator<'a> {
    file: &'a str,
    spans: &'a Spans,
    findings: Vec<Finding>,
    row_ids: Vec<String>,
}

fn is_kebab(id: &str) -> bool {
    !id.is_empty()
        && id.split('-').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
        && id.starts_with(|c: char| c.is_ascii_lowercase())
}

fn did_you_mean(word: &str, declared: &[String], what: &str) -> String {
    match closest(word, declared) {
        Some(c) => format!(
            "did you mean \"{c}\"? declared {what}: {}",
            declared.join(", ")
        ),
        None => format!("declared {what}: {}", declared.join(", ")),
    }
}

impl<'a> Validator<'a> {
    fn new(file: &'a str, spans: &'a Spans) -> Self {
        Validator {
            file,
            spans,
            findings: Vec::new(),
            row_ids: Vec::new(),
        }
    }

    fn push(&mut self, code: Code, pos: Pos, message: String, hint: String) {
        self.findings.push(Finding {
            code,
            file: self.file.to_string(),
            pos,
            message,
            hint,
        });
    }

    /// Index of each declared name; reports names declared twice.
    fn declare(&mut self, field: &str, names: &[String]) -> HashMap<String, u16> {
        let mut map = HashMap::new();
        for (i, n) in names.iter().enumerate() {
            if map.contains_key(n) {
                self.push(
                    Code::DuplicateDeclaration,
                    self.spans.value(field, i),
                    format!("\"{n}\" is declared twice in `{field}`"),
                    format!("remove the second \"{n}\""),
                );
            } else {
                map.insert(n.clone(), map.len() as u16);
            }
        }
        map
    }

    fn run(mut self, raw: RawTable, expect: Expect<'_>) -> Result<Table, Findings> {
        if let Some(want) = expect.name {
            if raw.name != want {
                self.push(
                    Code::NameMismatch,
                    self.spans.value("name", 0),
                    format!(
                        "the table is named \"{}\" but its file is {want}.ron",
                        raw.name
                    ),
                    format!(
                        "a file's name and its table's name agree: write `name: \"{want}\"`, or move the table to {}.ron",
                        raw.name
                    ),
                );
            }
        }
        let states = self.declare("states", &raw.states);
        let events = self.declare("events", &raw.events);
        let effects = self.declare("effects", &raw.effects);
        // From here on each name appears once; its index is its first
        // declaration's rank, so a duplicate cannot cascade into other findings.
        let mut raw = raw;
        for list in [&mut raw.states, &mut raw.events, &mut raw.effects] {
            let mut seen = HashSet::new();
            list.retain(|n| seen.insert(n.clone()));
        }
        // `initial` is the table's only string scalar besides name/doc, so its
        // value position is the first string recorded for that field.
        let initial = states.get(&raw.initial).copied();
        if initial.is_none() {
            let hint = did_you_mean(&raw.initial, &raw.states, "states");
            self.push(
                Code::UndeclaredInitial,
                self.spans.value("initial", 0),
                format!(
                    "initial state \"{}\" is not declared in `states`",
                    raw.initial
                ),
                hint,
            );
        }
        let mut terminal = vec![false; raw.states.len()];
        for (i, t) in raw.terminal.iter().enumerate() {
            match states.get(t) {
                Some(&s) => terminal[s as usize] = true,
                None => {
                    let hint = did_you_mean(t, &raw.states, "states");
                    self.push(
                        Code::UndeclaredTerminal,
                        self.spans.value("terminal", i),
                        format!("terminal state \"{t}\" is not declared in `states`"),
                        hint,
                    );
                }
            }
        }

        let (rows, pairs) = self.rows(&raw, &states, &events, &effects, &terminal);
        self.totality(&raw, &pairs);
        if let Some(initial) = initial {
            self.graph(&raw, &rows, initial, &terminal);
        }
        if let Some(b) = expect.binding {
            let protocol = expect.protocol.unwrap_or(&raw.name).to_string();
            self.binding(&raw, b, &protocol);
        }

        if !self.findings.is_empty() {
            self.findings.sort_by_key(|f| (f.pos, f.code));
            return Err(Findings(self.findings));
        }
        let rows: Vec<Row> = rows.into_iter().flatten().collect();
        let cells = build_cells(&rows, raw.states.len(), raw.events.len());
        Ok(Table {
            hash: canonical_hash(&raw),
            name: raw.name,
            doc: raw.doc,
            origin: self.file.to_string(),
            cells,
            rows,
            initial: initial.unwrap_or(0),
            terminal,
            states: raw.states,
            events: raw.events,
            effects: raw.effects,
        })
    }

    /// Resolves each row's names; `None` for a row with unresolved names.
    fn rows(
        &mut self,
        raw: &RawTable,
        states: &HashMap<String, u16>,
        events: &HashMap<String, u16>,
        effects: &HashMap<String, u16>,
        terminal: &[bool],
    ) -> (Vec<Option<Row>>, Vec<Option<Pair>>) {
        self.row_ids = raw.rows.iter().map(|r| r.id().to_string()).collect();
        let mut ids: HashMap<&str, usize> = HashMap::new();
        let mut out = Vec::with_capacity(raw.rows.len());
        let mut pairs = Vec::with_capacity(raw.rows.len());
        for (i, r) in raw.rows.iter().enumerate() {
            let id = r.id();
            if !is_kebab(id) {
                self.push(
                    Code::MalformedId,
                    self.spans.row_field(i, "id"),
                    format!("row id \"{id}\" is not kebab-case"),
                    "use lowercase words joined by '-', e.g. \"delta-before-start\"".into(),
                );
            }
            if let Some(&first) = ids.get(id) {
                let first_pos = self.spans.row_field(first, "id");
                self.push(
                    Code::DuplicateId,
                    self.spans.row_field(i, "id"),
                    format!(
                        "row id \"{id}\" is already used by the row at line {}",
                        first_pos.line
                    ),
                    "give each row its own id; snapshots and violations refer to rows by id".into(),
                );
            } else {
                ids.insert(id, i);
            }
            let from = self.resolve(
                states,
                r.from(),
                i,
                "from",
                Code::UnknownState,
                &raw.states,
                "states",
            );
            let on = self.resolve(
                events,
                r.on(),
                i,
                "on",
                Code::UnknownEvent,
                &raw.events,
                "events",
            );
            pairs.push(from.zip(on));
            let kind = match r {
                RawRow::Legal { to, effect, .. } => {
                    let to = self.resolve(
                        states,
                        to,
                        i,
                        "to",
                        Code::UnknownState,
                        &raw.states,
                        "states",
                    );
                    let effect = match effect {
                        None => Some(None),
                        Some(e) => self
                            .resolve(
                                effects,
                                e,
                                i,
                                "effect",
                                Code::UnknownEffect,
                                &raw.effects,
                                "effects",
                            )
                            .map(Some),
                    };
                    match (to, effect) {
                        (Some(to), Some(effect)) => Some(RowKind::Legal { to, effect }),
                        _ => None,
                    }
                }
                RawRow::Forbidden { why, .. } => {
                    if why.trim().is_empty() {
                        self.push(
                            Code::EmptyReason,
                            self.spans.row_field(i, "why"),
                            format!("forbidden row \"{id}\" gives no reason"),
                            "write one sentence a reviewer understands: why is this order wrong?"
                                .into(),
                        );
                    }
                    Some(RowKind::Forbidden { why: why.clone() })
                }
            };
            let row = match (from, on, kind) {
                (Some(from), Some(on), Some(kind)) => Some(Row {
                    id: id.to_string(),
                    from,
                    on,
                    kind,
                    pos: self.spans.rows.get(i).map(|s| s.start).unwrap_or_default(),
                }),
                _ => None,
            };
            if let Some(row) = &row {
                if let RowKind::Legal { to, .. } = row.kind {
                    if terminal[row.from as usize] && to != row.from {
                        self.push(
                            Code::LegalFromTerminal,
                            self.spans.row_field(i, "to"),
                            format!(
                                "legal row \"{id}\" leaves terminal state \"{}\" for \"{}\"",
                                raw.states[row.from as usize], raw.states[to as usize]
                            ),
                            "nothing may follow a terminal state: make the row Forbidden, or stay in the terminal state".into(),
                        );
                    }
                }
            }
            out.push(row);
        }
        (out, pairs)
    }

    #[allow(clippy::too_many_arguments)]
    fn resolve(
        &mut self,
        map: &HashMap<String, u16>,
        name: &str,
        row: usize,
        field: &str,
        code: Code,
        declared: &[String],
        what: &str,
    ) -> Option<u16> {
        let found = map.get(name).copied();
        if found.is_none() {
            let kind = &what[..what.len() - 1];
            self.push(
                code,
                self.spans.row_field(row, field),
                format!(
                    "row \"{}\" names unknown {kind} \"{name}\" in `{field}`",
                    self.row_ids.get(row).map(String::as_str).unwrap_or("?")
                ),
                did_you_mean(name, declared, what),
            );
        }
        found
    }

    fn totality(&mut self, raw: &RawTable, pairs: &[Option<Pair>]) {
        let n_events = raw.events.len();
        let mut first: HashMap<Pair, usize> = HashMap::new();
        for (i, pair) in pairs.iter().enumerate() {
            let Some((from, on)) = *pair else { continue };
            if let Some(&prev) = first.get(&(from, on)) {
                let prev_id = raw.rows[prev].id().to_string();
                let prev_line = self.spans.row_field(prev, "id").line;
                self.push(
                    Code::DuplicatePair,
                    self.spans.row_field(i, "id"),
                    format!(
                        "({}, {}) already has row \"{prev_id}\" at line {prev_line}; row \"{}\" is a second one",
                        raw.states[from as usize],
                        raw.events[on as usize],
                        raw.rows[i].id()
                    ),
                    "keep exactly one row per (state, event) pair: delete one, or change its `from`/`on`".into(),
                );
            } else {
                first.insert((from, on), i);
            }
        }
        let rows_pos = self.spans.field("rows");
        for s in 0..raw.states.len() {
            for e in 0..n_events {
                if !first.contains_key(&(s as u16, e as u16)) {
                    self.push(
                        Code::MissingPair,
                        rows_pos,
                        format!("no row for ({}, {})", raw.states[s], raw.events[e]),
                        format!(
                            "add Legal(id: …, from: \"{}\", on: \"{}\", to: …) or Forbidden(id: …, from: \"{}\", on: \"{}\", why: …)",
                            raw.states[s], raw.events[e], raw.states[s], raw.events[e]
                        ),
                    );
                }
            }
        }
    }

    fn graph(&mut self, raw: &RawTable, rows: &[Option<Row>], initial: u16, terminal: &[bool]) {
        let n = raw.states.len();
        let mut fwd: Vec<Vec<u16>> = vec![Vec::new(); n];
        let mut back: Vec<Vec<u16>> = vec![Vec::new(); n];
        for r in rows.iter().flatten() {
            if let RowKind::Legal { to, .. } = r.kind {
                fwd[r.from as usize].push(to);
                back[to as usize].push(r.from);
            }
        }
        let reach = |adj: &[Vec<u16>], starts: &[u16]| {
            let mut seen = vec![false; n];
            let mut q: VecDeque<u16> = starts.iter().copied().collect();
            for s in starts {
                seen[*s as usize] = true;
            }
            while let Some(s) = q.pop_front() {
                for &t in &adj[s as usize] {
                    if !seen[t as usize] {
                        seen[t as usize] = true;
                        q.push_back(t);
                    }
                }
            }
            seen
        };
        let from_initial = reach(&fwd, &[initial]);
        let terminals: Vec<u16> = (0..n as u16).filter(|s| terminal[*s as usize]).collect();
        let to_terminal = reach(&back, &terminals);
        for s in 0..n {
            if !from_initial[s] {
                self.push(
                    Code::UnreachableState,
                    self.spans.value("states", s),
                    format!(
                        "state \"{}\" cannot be reached from \"{}\" by legal rows",
                        raw.states[s], raw.initial
                    ),
                    "add a legal row into it, or remove the state".into(),
                );
            } else if !to_terminal[s] {
                self.push(
                    Code::TrapState,
                    self.spans.value("states", s),
                    format!("no terminal state can be reached from \"{}\": a machine entering it never finishes", raw.states[s]),
                    "add a legal row out of it toward a terminal state, or declare it terminal".into(),
                );
            }
        }
    }

    fn binding(&mut self, raw: &RawTable, b: BindingNames<'_>, protocol: &str) {
        let sets = [
            ("states", &raw.states, b.states),
            ("events", &raw.events, b.events),
            ("effects", &raw.effects, b.effects),
        ];
        for (field, table, code) in sets {
            let code_set: HashSet<&str> = code.iter().copied().collect();
            for (i, name) in table.iter().enumerate() {
                if !code_set.contains(name.as_str()) {
                    self.push(
                        Code::NotInBinding,
                        self.spans.value(field, i),
                        format!("`{field}` names \"{name}\", which the `{protocol}` protocol's Rust binding does not know"),
                        format!("the binding knows: {}; a new name needs a code change first", code.join(", ")),
                    );
                }
            }
            let table_set: HashSet<&str> = table.iter().map(|s| s.as_str()).collect();
            for name in code {
                if !table_set.contains(name) {
                    self.push(
                        Code::MissingFromTable,
                        self.spans.field(field),
                        format!("the `{protocol}` protocol's Rust binding names \"{name}\", which `{field}` lacks"),
                        format!("declare \"{name}\" in `{field}` (and give it its rows)"),
                    );
                }
            }
        }
    }
}

fn canonical_hash(raw: &RawTable) -> String {
    // The hash covers what decides behaviour, not comments, layout or `doc`.
    let mut canon = raw.clone();
    canon.doc.clear();
    let bytes = serde_json::to_vec(&canon).unwrap_or_default();
    let digest = Sha256::digest(&bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
