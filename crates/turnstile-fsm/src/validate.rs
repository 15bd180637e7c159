//! RON text → raw table → groups expanded into rows → validated [`Table`],
//! collecting every finding.
//!
//! Validation never stops at the first problem: a reviewer fixing a table
//! sees all of its findings at once. A row group (`ForbiddenEach`) is
//! replaced by the rows it stands for before any rule runs; findings about
//! those rows point into the group's entry.

use std::collections::{HashMap, HashSet, VecDeque};

use sha2::{Digest, Sha256};

use super::finding::{closest, Code, Finding, Findings};
use super::group;
use super::schema::{self, EventSet, RawRow, RawTable};
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
    /// What the code guarantees whatever a table says: a table that breaks
    /// one fails to load ([`Code::InvariantBroken`]), located at the row.
    pub invariants: &'a [Invariant<'a>],
}

/// A guarantee a protocol's code states about every table it runs (issue
/// 36): not a preference a reviewer may edit, so it lives in the binding,
/// and the table is checked against it at load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invariant<'a> {
    /// Every row on `event` from these states (every state, if empty) is
    /// forbidden.
    Forbid {
        event: &'a str,
        from: &'a [&'a str],
        why: &'a str,
    },
    /// Every legal row on `event` carries `effect`.
    LegalOnlyWith {
        event: &'a str,
        effect: &'a str,
        why: &'a str,
    },
    /// Every legal row with `effect` ends in one of `to`.
    EffectEndsIn {
        effect: &'a str,
        to: &'a [&'a str],
        why: &'a str,
    },
    /// Every legal row with `effect` starts in one of `from`.
    EffectOnlyFrom {
        effect: &'a str,
        from: &'a [&'a str],
        why: &'a str,
    },
    /// The row for (`from`, `event`) is legal and carries `effect`.
    RowIs {
        from: &'a str,
        event: &'a str,
        effect: &'a str,
        why: &'a str,
    },
    /// The table's `precedence` lists every one of `events`: code finds
    /// them true at once, and the table, not the code, says which fires.
    Ranked { events: &'a [&'a str], why: &'a str },
    /// The table's `precedence` ranks `first` before each of `then`.
    Precedes {
        first: &'a str,
        then: &'a [&'a str],
        why: &'a str,
    },
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
    let raw: RawTable = match schema::parse(src) {
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

/// Where an expanded row comes from: its entry in `rows` (and in the spans)
/// and, for a row of a group, which of the group's states and listed events.
#[derive(Debug, Clone, Copy)]
struct Origin {
    entry: usize,
    group: Option<Member>,
}

#[derive(Debug, Clone, Copy)]
struct Member {
    /// Index of the row's state in the group's `from`.
    from: usize,
    /// Index of the row's event in the group's `Only` list.
    on: Option<usize>,
}

struct Validator<'a> {
    file: &'a str,
    spans: &'a Spans,
    findings: Vec<Finding>,
    /// Ids of the expanded rows.
    row_ids: Vec<String>,
    /// One per expanded row.
    origins: Vec<Origin>,
    /// (group entry, code, other entry) already reported: a group's rows
    /// share one source position, so a rule they all break is said once.
    reported: HashSet<(usize, Code, usize)>,
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
            origins: Vec::new(),
            reported: HashSet::new(),
        }
    }

    /// Where field `field` of expanded row `i` is written: for a row of a
    /// group, its own state in `from` and its own event in an `Only` list.
    fn at(&self, i: usize, field: &str) -> Pos {
        let Some(o) = self.origins.get(i) else {
            return self.spans.field("rows");
        };
        match o.group {
            Some(m) => self.member_at(o.entry, m, field),
            None => self.spans.row_field(o.entry, field),
        }
    }

    fn member_at(&self, entry: usize, m: Member, field: &str) -> Pos {
        match (field, m.on) {
            ("from", _) => self.spans.row_value(entry, "from", m.from),
            ("on", Some(k)) => self.spans.row_value(entry, "on", k),
            ("on", None) => self.spans.row_field_start(entry, "on"),
            _ => self.spans.row_field(entry, field),
        }
    }

    /// The entry (row or group) expanded row `i` comes from.
    fn entry(&self, i: usize) -> usize {
        self.origins.get(i).map(|o| o.entry).unwrap_or(i)
    }

    fn in_group(&self, i: usize) -> bool {
        self.origins.get(i).is_some_and(|o| o.group.is_some())
    }

    /// Whether to report `code` for expanded row `i`: always for a row,
    /// once per (group, other entry) for the rows of a group.
    fn once(&mut self, i: usize, code: Code, other: usize) -> bool {
        match self.origins.get(i) {
            Some(Origin {
                entry,
                group: Some(_),
            }) => self.reported.insert((*entry, code, other)),
            _ => true,
        }
    }

    /// "the row at line N" or "a row of the group at line N".
    fn describe_entry(&self, raw: &RawTable, entry: usize) -> String {
        let line = self.spans.row_field(entry, "id").line;
        match raw.rows.get(entry) {
            Some(r) if r.is_group() => {
                format!("a row of the group \"{}\" at line {line}", r.id())
            }
            _ => format!("the row at line {line}"),
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

    /// A table that breaks a binding invariant: T023, with the invariant's
    /// reason and what a reviewer may change (`the row`, `the order`).
    fn broken(&mut self, pos: Pos, message: String, why: &str, change: &str) {
        self.push(
            Code::InvariantBroken,
            pos,
            message,
            format!("{why}; this guarantee is the code's, not the table's: change {change}, or change the protocol's code first"),
        );
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

        let precedence = self.precedence(&raw, &events);
        let expanded = self.expand(&raw, &states, &events, &terminal);
        let (rows, pairs) = self.rows(&raw, &expanded, &states, &events, &effects, &terminal);
        self.totality(&raw, &expanded, &pairs);
        if let Some(initial) = initial {
            self.graph(&raw, &rows, initial, &terminal);
        }
        if let Some(b) = expect.binding {
            let protocol = expect.protocol.unwrap_or(&raw.name).to_string();
            self.binding(&raw, b, &protocol);
            self.invariants(&expanded, b.invariants, &protocol);
            self.ranking(&raw, b.invariants, &protocol);
        }

        if !self.findings.is_empty() {
            self.findings.sort_by_key(|f| (f.pos, f.code));
            return Err(Findings(self.findings));
        }
        let rows: Vec<Row> = rows.into_iter().flatten().collect();
        let cells = build_cells(&rows, raw.states.len(), raw.events.len());
        // From here on the table is its rows: a group is the rows it stands for.
        let raw = RawTable {
            rows: expanded,
            ..raw
        };
        Ok(Table {
            hash: canonical_hash(&raw),
            raw: raw.clone(),
            name: raw.name,
            doc: raw.doc,
            origin: self.file.to_string(),
            cells,
            rows,
            initial: initial.unwrap_or(0),
            terminal,
            precedence,
            states: raw.states,
            events: raw.events,
            effects: raw.effects,
        })
    }

    /// Replaces each group by the rows it stands for, in place, and reports
    /// what is wrong with the group itself. A group never expands a pair that
    /// an explicit row or an earlier group already covers (that is a
    /// [`Code::GroupOverlap`]), so the expansion has at most one row per pair
    /// beyond the explicit rows' own duplicates.
    fn expand(
        &mut self,
        raw: &RawTable,
        states: &HashMap<String, u16>,
        events: &HashMap<String, u16>,
        terminal: &[bool],
    ) -> Vec<RawRow> {
        let mut covered: HashMap<Pair, usize> = HashMap::new();
        for (entry, r) in raw.rows.iter().enumerate() {
            if let (Some(f), Some(o)) = (r.from(), r.on()) {
                if let (Some(&s), Some(&e)) = (states.get(f), events.get(o)) {
                    covered.entry((s, e)).or_insert(entry);
                }
            }
        }
        let mut out = Vec::with_capacity(raw.rows.len());
        for (entry, r) in raw.rows.iter().enumerate() {
            let RawRow::ForbiddenEach { id, from, on, why } = r else {
                out.push(r.clone());
                self.origins.push(Origin { entry, group: None });
                continue;
            };
            for (field, template) in [("id", id), ("why", why)] {
                if let Err(e) = group::fill(template, "", "") {
                    self.push(
                        Code::UnknownPlaceholder,
                        self.spans.row_field(entry, field),
                        format!("the `{field}` of group \"{id}\" has {e}"),
                        format!(
                            "a group's `id` and `why` may name {}; write {{{{ and }}}} for literal braces",
                            group::PLACEHOLDERS.join(", ")
                        ),
                    );
                    if field == "id" {
                        // Its rows' ids are the template itself, neither
                        // kebab-case nor distinct: that is this finding, not
                        // two more.
                        self.reported.insert((entry, Code::MalformedId, 0));
                        self.reported.insert((entry, Code::DuplicateId, entry));
                    }
                }
            }
            let mut own_states: Vec<(usize, u16)> = Vec::new();
            for (k, s) in from.iter().enumerate() {
                let pos = self.spans.row_value(entry, "from", k);
                match states.get(s) {
                    None => self.push(
                        Code::UnknownState,
                        pos,
                        format!("group \"{id}\" names unknown state \"{s}\" in `from`"),
                        did_you_mean(s, &raw.states, "states"),
                    ),
                    Some(&si) if own_states.iter().any(|(_, x)| *x == si) => self.push(
                        Code::DuplicateDeclaration,
                        pos,
                        format!("\"{s}\" is listed twice in the `from` of group \"{id}\""),
                        format!("remove the second \"{s}\""),
                    ),
                    Some(&si) => {
                        if on.is_open() && !terminal[si as usize] {
                            let which = match on {
                                EventSet::AllExcept(_) => "every event but the listed ones",
                                _ => "every event",
                            };
                            self.push(
                                Code::OpenGroupOnWorkingState,
                                pos,
                                format!(
                                    "group \"{id}\" forbids {which} in \"{s}\", which is not terminal: an event declared later would be forbidden there without anyone deciding it"
                                ),
                                format!(
                                    "open groups (`on: All`, `AllExcept`) are for terminal states only; for \"{s}\" list the events (`on: Only([...])`) or write its rows out, so that a new event is a missing pair"
                                ),
                            );
                        }
                        own_states.push((k, si));
                    }
                }
            }
            let mut listed: Vec<&str> = Vec::new();
            for (k, e) in on.listed().iter().enumerate() {
                let pos = self.spans.row_value(entry, "on", k);
                if !events.contains_key(e) {
                    self.push(
                        Code::UnknownEvent,
                        pos,
                        format!("group \"{id}\" names unknown event \"{e}\" in `on`"),
                        did_you_mean(e, &raw.events, "events"),
                    );
                } else if listed.contains(&e.as_str()) {
                    self.push(
                        Code::DuplicateDeclaration,
                        pos,
                        format!("\"{e}\" is listed twice in the `on` of group \"{id}\""),
                        format!("remove the second \"{e}\""),
                    );
                } else {
                    listed.push(e);
                }
            }
            let mut own_events: Vec<(Option<usize>, u16)> = Vec::new();
            for (k, e) in on.select(&raw.events) {
                if let Some(&ei) = events.get(e) {
                    if !own_events.iter().any(|(_, x)| *x == ei) {
                        own_events.push((k, ei));
                    }
                }
            }
            let no_events = on.select(&raw.events).is_empty();
            if from.is_empty() || no_events {
                let what = if from.is_empty() {
                    "`from` lists no state".to_string()
                } else {
                    match on {
                        EventSet::Only(_) => "`on: Only([])` lists no event".to_string(),
                        _ => "`on` excludes every event".to_string(),
                    }
                };
                self.push(
                    Code::EmptyGroup,
                    self.spans
                        .rows
                        .get(entry)
                        .map(|s| s.start)
                        .unwrap_or_default(),
                    format!("group \"{id}\" covers no pair: {what}"),
                    "delete the group, or give it the states and events it forbids".into(),
                );
            }
            // (other entry, first shared pair, its member, pairs shared)
            let mut overlaps: Vec<(usize, Pair, Member, usize)> = Vec::new();
            for &(fk, s) in &own_states {
                for &(ok, e) in &own_events {
                    let member = Member { from: fk, on: ok };
                    if let Some(&other) = covered.get(&(s, e)) {
                        match overlaps.iter_mut().find(|o| o.0 == other) {
                            Some(o) => o.3 += 1,
                            None => overlaps.push((other, (s, e), member, 1)),
                        }
                        continue;
                    }
                    covered.insert((s, e), entry);
                    let (sn, en) = (&raw.states[s as usize], &raw.events[e as usize]);
                    out.push(RawRow::Forbidden {
                        id: group::fill(id, sn, en).unwrap_or_else(|_| id.clone()),
                        from: sn.clone(),
                        on: en.clone(),
                        why: group::fill(why, sn, en).unwrap_or_else(|_| why.clone()),
                    });
                    self.origins.push(Origin {
                        entry,
                        group: Some(member),
                    });
                }
            }
            for (other, (s, e), member, n) in overlaps {
                let (sn, en) = (&raw.states[s as usize], &raw.events[e as usize]);
                let other_row = &raw.rows[other];
                let other_line = self.spans.row_field(other, "id").line;
                let (message, hint) = if other_row.is_group() {
                    let more = match n {
                        1 => String::new(),
                        2 => " and 1 more pair".into(),
                        _ => format!(" and {} more pairs", n - 1),
                    };
                    (
                        format!(
                            "group \"{id}\" covers ({sn}, {en}){more}, which group \"{}\" at line {other_line} already covers",
                            other_row.id()
                        ),
                        "groups may not overlap: narrow the `from` or `on` of one of them so that each pair has exactly one row".to_string(),
                    )
                } else {
                    let fix = match on {
                        EventSet::Only(_) => {
                            format!("remove \"{en}\" from the group's `Only` list")
                        }
                        _ => {
                            format!("exclude \"{en}\" from the group (`AllExcept([…, \"{en}\"])`)")
                        }
                    };
                    (
                        format!(
                            "group \"{id}\" covers ({sn}, {en}), which row \"{}\" at line {other_line} already decides",
                            other_row.id()
                        ),
                        format!("a pair has exactly one row: {fix}, or delete row \"{}\"", other_row.id()),
                    )
                };
                self.push(
                    Code::GroupOverlap,
                    self.member_at(entry, member, "on"),
                    message,
                    hint,
                );
            }
        }
        out
    }

    /// Resolves each row's names; `None` for a row with unresolved names.
    fn rows(
        &mut self,
        raw: &RawTable,
        expanded: &[RawRow],
        states: &HashMap<String, u16>,
        events: &HashMap<String, u16>,
        effects: &HashMap<String, u16>,
        terminal: &[bool],
    ) -> (Vec<Option<Row>>, Vec<Option<Pair>>) {
        self.row_ids = expanded.iter().map(|r| r.id().to_string()).collect();
        let mut ids: HashMap<&str, usize> = HashMap::new();
        let mut out = Vec::with_capacity(expanded.len());
        let mut pairs = Vec::with_capacity(expanded.len());
        for (i, r) in expanded.iter().enumerate() {
            let id = r.id();
            let entry = self.entry(i);
            let template = raw.rows.get(entry).map(RawRow::id).unwrap_or(id);
            if !is_kebab(id) && self.once(i, Code::MalformedId, 0) {
                let message = if self.in_group(i) {
                    format!(
                        "group id \"{template}\" makes row id \"{id}\", which is not kebab-case"
                    )
                } else {
                    format!("row id \"{id}\" is not kebab-case")
                };
                self.push(
                    Code::MalformedId,
                    self.at(i, "id"),
                    message,
                    "use lowercase words joined by '-', e.g. \"delta-before-start\"".into(),
                );
            }
            if let Some(&first) = ids.get(id) {
                let first_entry = self.entry(first);
                if first_entry == entry {
                    // Two rows of one group: its id does not vary enough.
                    if self.once(i, Code::DuplicateId, entry) {
                        let missing = if !group::mentions(template, "on") {
                            "{on-id}"
                        } else {
                            "{from-id}"
                        };
                        self.push(
                            Code::DuplicateId,
                            self.at(i, "id"),
                            format!("group id \"{template}\" gives more than one row the id \"{id}\""),
                            format!("put {missing} in the id so that each row of the group has its own; snapshots and violations refer to rows by id"),
                        );
                    }
                } else if self.once(i, Code::DuplicateId, first_entry) {
                    let used = self.describe_entry(raw, first_entry);
                    let message = if self.in_group(i) {
                        format!("group id \"{template}\" makes row id \"{id}\", which is already used by {used}")
                    } else {
                        format!("row id \"{id}\" is already used by {used}")
                    };
                    self.push(
                        Code::DuplicateId,
                        self.at(i, "id"),
                        message,
                        "give each row its own id; snapshots and violations refer to rows by id"
                            .into(),
                    );
                }
            } else {
                ids.insert(id, i);
            }
            let from = self.resolve(
                states,
                r.from().unwrap_or_default(),
                i,
                "from",
                Code::UnknownState,
                &raw.states,
                "states",
            );
            let on = self.resolve(
                events,
                r.on().unwrap_or_default(),
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
                    if why.trim().is_empty() && self.once(i, Code::EmptyReason, 0) {
                        let message = if self.in_group(i) {
                            format!("group \"{template}\" gives no reason")
                        } else {
                            format!("forbidden row \"{id}\" gives no reason")
                        };
                        self.push(
                            Code::EmptyReason,
                            self.at(i, "why"),
                            message,
                            "write one sentence a reviewer understands: why is this order wrong?"
                                .into(),
                        );
                    }
                    Some(RowKind::Forbidden { why: why.clone() })
                }
                // `expand` replaced every group by its rows.
                RawRow::ForbiddenEach { .. } => None,
            };
            let row = match (from, on, kind) {
                (Some(from), Some(on), Some(kind)) => Some(Row {
                    id: id.to_string(),
                    from,
                    on,
                    kind,
                    pos: self
                        .spans
                        .rows
                        .get(entry)
                        .map(|s| s.start)
                        .unwrap_or_default(),
                }),
                _ => None,
            };
            if let Some(row) = &row {
                if let RowKind::Legal { to, .. } = row.kind {
                    if terminal[row.from as usize] && to != row.from {
                        self.push(
                            Code::LegalFromTerminal,
                            self.at(i, "to"),
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
                self.at(row, field),
                format!(
                    "row \"{}\" names unknown {kind} \"{name}\" in `{field}`",
                    self.row_ids.get(row).map(String::as_str).unwrap_or("?")
                ),
                did_you_mean(name, declared, what),
            );
        }
        found
    }

    /// Duplicate pairs among the explicit rows (a group never expands a
    /// covered pair) and every missing pair.
    fn totality(&mut self, raw: &RawTable, expanded: &[RawRow], pairs: &[Option<Pair>]) {
        let n_events = raw.events.len();
        let mut first: HashMap<Pair, usize> = HashMap::new();
        for (i, pair) in pairs.iter().enumerate() {
            let Some((from, on)) = *pair else { continue };
            if let Some(&prev) = first.get(&(from, on)) {
                let prev_id = expanded[prev].id().to_string();
                let prev_line = self.at(prev, "id").line;
                self.push(
                    Code::DuplicatePair,
                    self.at(i, "id"),
                    format!(
                        "({}, {}) already has row \"{prev_id}\" at line {prev_line}; row \"{}\" is a second one",
                        raw.states[from as usize],
                        raw.events[on as usize],
                        expanded[i].id()
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

impl Validator<'_> {
    /// The `precedence` list as event indices; reports names that are not
    /// declared events, or are listed twice.
    fn precedence(&mut self, raw: &RawTable, events: &HashMap<String, u16>) -> Vec<u16> {
        let mut out: Vec<u16> = Vec::with_capacity(raw.precedence.len());
        for (i, name) in raw.precedence.iter().enumerate() {
            let pos = self.spans.value("precedence", i);
            match events.get(name) {
                None => self.push(
                    Code::UnknownEvent,
                    pos,
                    format!("\"{name}\" in `precedence` is not a declared event"),
                    did_you_mean(name, &raw.events, "events"),
                ),
                Some(e) if out.contains(e) => self.push(
                    Code::DuplicateDeclaration,
                    pos,
                    format!("\"{name}\" is listed twice in `precedence`"),
                    format!("an event has one rank: remove the second \"{name}\""),
                ),
                Some(&e) => out.push(e),
            }
        }
        out
    }

    /// The binding's `RowIs` invariants: the pair's row, legal or
    /// forbidden, located at its `effect` (or its `id`).
    fn required_rows(&mut self, expanded: &[RawRow], invariants: &[Invariant<'_>], protocol: &str) {
        for inv in invariants {
            let Invariant::RowIs {
                from,
                event,
                effect,
                why,
            } = *inv
            else {
                continue;
            };
            let found = (expanded.iter().enumerate())
                .find(|(_, r)| r.from() == Some(from) && r.on() == Some(event));
            let Some((i, row)) = found else {
                // A pair the table lacks among declared names is a missing
                // pair already (T004); one naming what the table does not
                // declare is the binding's mistake, never a silent pass.
                let declared = |n: &str| {
                    expanded
                        .iter()
                        .any(|r| r.from() == Some(n) || r.on() == Some(n))
                };
                if !(declared(from) && declared(event)) {
                    let pos = self.spans.field("rows");
                    self.push(
                        Code::InvariantBroken,
                        pos,
                        format!("the `{protocol}` protocol's code requires the row ({from}, {event}), which this table does not have"),
                        format!("{why}; declare \"{from}\" and \"{event}\" with that row, or change the protocol's code first"),
                    );
                }
                continue;
            };
            let (field, has) = match row {
                RawRow::Legal { effect: e, .. } => ("effect", e.as_deref()),
                _ => ("id", None),
            };
            if has == Some(effect) {
                continue;
            }
            let what = match row {
                RawRow::Legal { .. } => format!(
                    "legal with effect {}",
                    has.map_or("none".to_string(), |e| format!("\"{e}\""))
                ),
                _ => "forbidden".to_string(),
            };
            let message = format!(
                "row \"{}\" makes ({from}, {event}) {what}, but the `{protocol}` protocol's code requires it legal with \"{effect}\"",
                row.id()
            );
            let pos = self.at(i, field);
            self.broken(pos, message, why, "the row");
        }
    }

    /// The binding's `Ranked` and `Precedes` invariants, located at the
    /// `precedence` list (or at `events` when the table has none).
    fn ranking(&mut self, raw: &RawTable, invariants: &[Invariant<'_>], protocol: &str) {
        let rank = |e: &str| raw.precedence.iter().position(|p| p == e);
        let at = |v: &Self, e: Option<&str>| match e.and_then(rank) {
            Some(i) => v.spans.value("precedence", i),
            None if raw.precedence.is_empty() => v.spans.field("events"),
            None => v.spans.field("precedence"),
        };
        for inv in invariants {
            let (pos, message, why) = match *inv {
                Invariant::Ranked { events, why } => {
                    let missing: Vec<&str> = events
                        .iter()
                        .copied()
                        .filter(|e| rank(e).is_none())
                        .collect();
                    if missing.is_empty() {
                        continue;
                    }
                    (
                        at(self, None),
                        format!(
                            "`precedence` does not rank {}, which the `{protocol}` protocol's code finds true at once with others",
                            missing.iter().map(|e| format!("\"{e}\"")).collect::<Vec<_>>().join(", ")
                        ),
                        why,
                    )
                }
                Invariant::Precedes { first, then, why } => {
                    for &later in then {
                        if let (Some(a), Some(b)) = (rank(first), rank(later)) {
                            if a < b {
                                continue;
                            }
                        }
                        let pos = at(self, Some(later));
                        let message = format!("`precedence` must rank \"{first}\" before \"{later}\": the `{protocol}` protocol's code requires it");
                        self.broken(pos, message, why, "the order");
                    }
                    continue;
                }
                _ => continue,
            };
            self.broken(pos, message, why, "the order");
        }
    }

    /// Reports every legal row that breaks one of the binding's invariants,
    /// at the row's field that breaks it (groups are forbidden rows only,
    /// so they never do).
    fn invariants(&mut self, expanded: &[RawRow], invariants: &[Invariant<'_>], protocol: &str) {
        self.required_rows(expanded, invariants, protocol);
        for (i, row) in expanded.iter().enumerate() {
            let RawRow::Legal {
                id,
                from,
                on,
                to,
                effect,
            } = row
            else {
                continue;
            };
            for inv in invariants {
                let (field, message, why) = match *inv {
                    Invariant::Forbid {
                        event,
                        from: states,
                        why,
                    } if on == event
                        && (states.is_empty() || states.contains(&from.as_str())) =>
                    {
                        (
                            "id",
                            format!("row \"{id}\" makes ({from}, {on}) legal, but the `{protocol}` protocol's code requires it forbidden"),
                            why,
                        )
                    }
                    Invariant::LegalOnlyWith {
                        event,
                        effect: want,
                        why,
                    } if on == event && effect.as_deref() != Some(want) => (
                        "effect",
                        format!(
                            "row \"{id}\" makes ({from}, {on}) legal with effect {}, but the `{protocol}` protocol's code requires \"{want}\" on every legal row of \"{on}\"",
                            effect.as_deref().map_or("none".to_string(), |e| format!("\"{e}\""))
                        ),
                        why,
                    ),
                    Invariant::EffectOnlyFrom {
                        effect: fx,
                        from: states,
                        why,
                    } if effect.as_deref() == Some(fx) && !states.contains(&from.as_str()) => (
                        "effect",
                        format!(
                            "row \"{id}\" has effect \"{fx}\" from \"{from}\", but the `{protocol}` protocol's code requires it only from one of {}",
                            states.join(", ")
                        ),
                        why,
                    ),
                    Invariant::EffectEndsIn {
                        effect: fx,
                        to: states,
                        why,
                    } if effect.as_deref() == Some(fx) && !states.contains(&to.as_str()) => (
                        "to",
                        format!(
                            "row \"{id}\" has effect \"{fx}\" and ends in \"{to}\", but the `{protocol}` protocol's code requires it to end in one of {}",
                            states.join(", ")
                        ),
                        why,
                    ),
                    _ => continue,
                };
                let pos = self.at(i, field);
                self.broken(pos, message, why, "the row");
            }
        }
    }
}

fn canonical_hash(raw: &RawTable) -> String {
    // The hash covers what decides behaviour: the rows, expanded (not whether
    // they were written as a group), not comments, layout or `doc`.
    let mut canon = raw.clone();
    canon.doc.clear();
    let bytes = serde_json::to_vec(&canon).unwrap_or_default();
    let digest = Sha256::digest(&bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
