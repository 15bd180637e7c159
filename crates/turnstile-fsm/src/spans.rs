//! Source positions for the parts of a table file that findings point at.
//!
//! `ron` reports positions only for syntax errors, so after a successful parse
//! a small lexer walks the same text and records where each declaration, row
//! and row field starts. Rows are matched to the parsed rows by order.

use std::collections::HashMap;

/// A 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

#[derive(Debug, Default)]
pub struct RowSpan {
    pub start: Pos,
    /// Position of each field's value, by field name (`id`, `from`, `on`, ...):
    /// its first string, else its first token (`on: All`).
    pub fields: HashMap<String, Pos>,
    /// Position of the first token of each field's value (`AllExcept` in
    /// `on: AllExcept(["a"])`, `Some` in `effect: Some("x")`).
    pub starts: HashMap<String, Pos>,
    /// Position of every string in each field's value, in order (the states
    /// of a group's `from`, the events of its `on` list).
    pub strings: HashMap<String, Vec<Pos>>,
}

#[derive(Debug, Default)]
pub struct Spans {
    /// Position of each top-level field's name (`states`, `rows`, ...).
    pub fields: HashMap<String, Pos>,
    /// Position of each string element of a top-level list field, or of a
    /// top-level string field's value.
    pub values: HashMap<String, Vec<Pos>>,
    pub rows: Vec<RowSpan>,
}

impl Spans {
    pub fn field(&self, name: &str) -> Pos {
        self.fields
            .get(name)
            .copied()
            .unwrap_or(Pos { line: 1, col: 1 })
    }

    /// Position of the `i`-th string in a top-level field, else of the field.
    pub fn value(&self, name: &str, i: usize) -> Pos {
        self.values
            .get(name)
            .and_then(|v| v.get(i))
            .copied()
            .unwrap_or_else(|| self.field(name))
    }

    /// Position of a row's field value, else of the row, else of `rows`.
    pub fn row_field(&self, row: usize, field: &str) -> Pos {
        match self.rows.get(row) {
            Some(r) => r
                .fields
                .get(field)
                .or_else(|| r.starts.get(field))
                .copied()
                .unwrap_or(r.start),
            None => self.field("rows"),
        }
    }

    /// Where a row's field value begins, else [`Spans::row_field`].
    pub fn row_field_start(&self, row: usize, field: &str) -> Pos {
        self.rows
            .get(row)
            .and_then(|r| r.starts.get(field))
            .copied()
            .unwrap_or_else(|| self.row_field(row, field))
    }

    /// Position of the `i`-th string of a row's field (the `i`-th state of a
    /// group's `from`), else [`Spans::row_field`].
    pub fn row_value(&self, row: usize, field: &str, i: usize) -> Pos {
        self.rows
            .get(row)
            .and_then(|r| r.strings.get(field))
            .and_then(|v| v.get(i))
            .copied()
            .unwrap_or_else(|| self.row_field(row, field))
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str,
    Punct(char),
    Other,
}

fn lex(src: &str) -> Vec<(Tok, Pos)> {
    let mut out = Vec::new();
    let chars: Vec<char> = src.chars().collect();
    let (mut i, mut line, mut col) = (0usize, 1u32, 1u32);
    let advance = |i: &mut usize, line: &mut u32, col: &mut u32| {
        if chars[*i] == '\n' {
            *line += 1;
            *col = 1;
        } else {
            *col += 1;
        }
        *i += 1;
    };
    while i < chars.len() {
        let c = chars[i];
        let pos = Pos { line, col };
        if c.is_whitespace() {
            advance(&mut i, &mut line, &mut col);
        } else if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                advance(&mut i, &mut line, &mut col);
            }
        } else if c == '/' && chars.get(i + 1) == Some(&'*') {
            advance(&mut i, &mut line, &mut col);
            advance(&mut i, &mut line, &mut col);
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                advance(&mut i, &mut line, &mut col);
            }
            if i < chars.len() {
                advance(&mut i, &mut line, &mut col);
                advance(&mut i, &mut line, &mut col);
            }
        } else if c == '"' {
            advance(&mut i, &mut line, &mut col);
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' && i + 1 < chars.len() {
                    advance(&mut i, &mut line, &mut col);
                }
                advance(&mut i, &mut line, &mut col);
            }
            if i < chars.len() {
                advance(&mut i, &mut line, &mut col);
            }
            out.push((Tok::Str, pos));
        } else if c.is_alphabetic() || c == '_' {
            let mut s = String::new();
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                s.push(chars[i]);
                advance(&mut i, &mut line, &mut col);
            }
            out.push((Tok::Ident(s), pos));
        } else if "()[]{}:,#!".contains(c) {
            advance(&mut i, &mut line, &mut col);
            out.push((Tok::Punct(c), pos));
        } else {
            advance(&mut i, &mut line, &mut col);
            out.push((Tok::Other, pos));
        }
    }
    out
}

fn in_rows(top_field: &Option<String>) -> bool {
    top_field.as_deref() == Some("rows")
}

/// Records where things are in a table file that `ron` parsed successfully.
pub fn index(src: &str) -> Spans {
    let toks = lex(src);
    let mut spans = Spans::default();
    let mut depth = 0i32;
    let mut top_field: Option<String> = None;
    // The field of the current row whose value is being read, and whether
    // its first token is still to come.
    let mut row_field: Option<String> = None;
    let mut value_pending = false;
    let mut in_attr = false;
    let mut k = 0;
    while k < toks.len() {
        let (tok, pos) = (&toks[k].0, toks[k].1);
        let next_is = |c: char| matches!(toks.get(k + 1), Some((Tok::Punct(p), _)) if *p == c);
        if value_pending && !matches!(tok, Tok::Punct(':')) {
            value_pending = false;
            if let (Some(f), Some(row)) = (&row_field, spans.rows.last_mut()) {
                row.starts.entry(f.clone()).or_insert(pos);
            }
        }
        match tok {
            Tok::Punct('#') if depth == 0 => in_attr = true,
            Tok::Punct('(') | Tok::Punct('[') | Tok::Punct('{') => depth += 1,
            Tok::Punct(')') | Tok::Punct(']') | Tok::Punct('}') => {
                depth -= 1;
                if depth == 0 {
                    in_attr = false;
                }
                if depth == 2 {
                    row_field = None;
                }
            }
            Tok::Ident(name) if !in_attr && depth == 1 && next_is(':') => {
                spans.fields.insert(name.clone(), pos);
                top_field = Some(name.clone());
            }
            Tok::Ident(_) if !in_attr && depth == 2 && next_is('(') && in_rows(&top_field) => {
                spans.rows.push(RowSpan {
                    start: pos,
                    ..RowSpan::default()
                });
            }
            Tok::Ident(name) if !in_attr && depth == 3 && next_is(':') && in_rows(&top_field) => {
                row_field = Some(name.clone());
                value_pending = true;
            }
            Tok::Str if !in_attr && (depth == 1 || depth == 2) => {
                if let Some(f) = &top_field {
                    if f != "rows" {
                        spans.values.entry(f.clone()).or_default().push(pos);
                    }
                }
            }
            Tok::Str if !in_attr && depth >= 3 => {
                if let (Some(f), Some(row)) = (&row_field, spans.rows.last_mut()) {
                    row.fields.entry(f.clone()).or_insert(pos);
                    row.strings.entry(f.clone()).or_default().push(pos);
                }
            }
            _ => {}
        }
        k += 1;
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_rows_and_fields() {
        let src = r#"Table(
    name: "t", // a comment with "quotes"
    states: ["A", "B"],
    rows: [
        Legal(id: "a", from: "A", on: "go", to: "B", effect: Some("x")),
        Forbidden(id: "b", from: "B",
                  on: "go", why: "no"),
    ],
)"#;
        let s = index(src);
        assert_eq!(s.value("states", 1), Pos { line: 3, col: 19 });
        assert_eq!(s.rows.len(), 2);
        assert_eq!(s.row_field(0, "effect"), Pos { line: 5, col: 67 });
        assert_eq!(s.row_field(1, "on"), Pos { line: 7, col: 23 });
        assert_eq!(s.rows[1].start, Pos { line: 6, col: 9 });
    }

    #[test]
    fn finds_the_parts_of_a_group() {
        let src = r#"Table(
    rows: [
        ForbiddenEach(id: "x-{on-id}", from: ["A", "B"], on: AllExcept(["go", "stop"]), why: "no"),
        ForbiddenEach(id: "y", from: ["C"],
                      on: All, why: "no"),
    ],
)"#;
        let s = index(src);
        assert_eq!(s.rows.len(), 2);
        assert_eq!(s.row_field(0, "id"), Pos { line: 3, col: 27 });
        assert_eq!(s.row_value(0, "from", 1), Pos { line: 3, col: 52 });
        assert_eq!(s.row_field_start(0, "on"), Pos { line: 3, col: 62 });
        assert_eq!(s.row_value(0, "on", 1), Pos { line: 3, col: 79 });
        assert_eq!(s.row_field(0, "why"), Pos { line: 3, col: 94 });
        assert_eq!(s.row_field(1, "on"), Pos { line: 5, col: 27 });
        assert_eq!(s.row_field(1, "why"), Pos { line: 5, col: 37 });
    }
}
