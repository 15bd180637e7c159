//! A safe reader of Python literals, as printed by `str()` / `repr()`.
//!
//! Some tool servers print their results with Python's `str()` instead of
//! JSON; the reference SQLite server (`mcp-server-sqlite`) answers a query
//! with `str([dict(row) for row in rows])`, e.g.
//! `[{'id': 1, 'name': "O'Brien", 'score': 2.5, 'note': None}]`. This module
//! reads such text **as data**: it is a literal parser, never an evaluator —
//! there are no names, calls or operators beyond a leading sign.
//!
//! # Grammar
//!
//! * list `[a, b]` and tuple `(a, b)`, `(a,)`, `()` → JSON array. A
//!   parenthesised single value without a comma, `(a)`, is just `a` (as in
//!   Python).
//! * dict `{k: v}` → JSON object. Keys may be str/bytes, int, float, `True`,
//!   `False` or `None`; a non-string key becomes its JSON text (`1` → `"1"`,
//!   `2.5` → `"2.5"`, `None` → `"null"`, `True` → `"true"`). Any other key
//!   (a tuple, …) is an error. Two keys with the same resulting text (`1` and
//!   `'1'`, or a literal with a repeated key) are an error rather than a
//!   silent overwrite.
//! * set `{a, b}` → JSON array in the printed order (element hashability is
//!   not checked). `set()` is **not** supported (an error), `{}` is an empty
//!   dict.
//! * `True`, `False`, `None` → `true`, `false`, `null`.
//! * Strings: `'…'` or `"…"` with the Python escapes `\\ \' \" \a \b \f \n
//!   \r \t \v`, octal `\0`…`\777`, `\xNN`, `\uNNNN`, `\UNNNNNNNN`,
//!   backslash-newline (skipped); an unknown escape such as `\d` keeps its
//!   backslash, as Python does. `\N{…}` is an error. Prefixes `r`, `u`, `b`,
//!   `rb`/`br` in any case (`f`-strings are an error). A raw line break
//!   inside the quotes, triple-quoted strings and implicit concatenation of
//!   adjacent literals are errors.
//! * Bytes `b'…'` become text: the escapes are decoded to bytes and, if those
//!   are valid UTF-8, the string is that text (`b'caf\xc3\xa9'` → `"café"`);
//!   otherwise the string is the literal's body exactly as written
//!   (`b'\x89PNG'` → `"\\x89PNG"`), so nothing is lost or replaced.
//! * Numbers: decimal ints and floats with one optional leading sign, `_`
//!   digit separators (`1_000`), exponents (`1e+16`, `1.5e-07`), `1.` and
//!   `.5`. Hex/octal/binary and complex literals are errors.
//!
//! # Decisions
//!
//! * **Big integers** that fit neither `i64` nor `u64` are an **error**, not a
//!   rounded `f64`: a count must never change silently. (SQLite integers are
//!   64-bit, so real query results always fit.)
//! * **`inf` / `nan`** (and `-inf`, and float literals that overflow such as
//!   `1e999`) are an **error**: JSON has no such number, and `null` would read
//!   as "absent".
//! * **Surrogates** in `\u`/`\U` escapes (`'\ud800'`, also a pair written as
//!   two escapes) are an **error**; a Rust string cannot hold them and U+FFFD
//!   would alter the data. Code points above U+10FFFF are an error too.
//! * Nesting deeper than [`MAX_DEPTH`] (64) containers is an error; the
//!   parser never overflows the stack and never panics.
//! * Whitespace (space, tab, CR, LF, form feed) may appear between any two
//!   tokens, including between a sign and its number; anything but
//!   whitespace after the top-level value is an error. Trailing commas are
//!   allowed.

use serde_json::{Map, Number, Value};

/// The deepest container nesting [`parse`] accepts.
pub const MAX_DEPTH: usize = 64;

/// Why some text is not a Python literal, and the byte offset where that was
/// found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a Python literal at byte {offset}: {reason}")]
pub struct LiteralError {
    pub offset: usize,
    pub reason: &'static str,
}

/// Parses one Python literal (as printed by `str()`/`repr()`) into JSON.
pub fn parse(text: &str) -> Result<serde_json::Value, LiteralError> {
    let mut p = Parser {
        src: text,
        bytes: text.as_bytes(),
        pos: 0,
    };
    let value = p.value(0)?;
    p.skip_ws();
    if p.pos < p.bytes.len() {
        return Err(p.err("unexpected text after the literal"));
    }
    Ok(value)
}

/// A cheap plausibility test: the trimmed text starts with `[`, `(` or `{`.
/// Callers use it to decide whether [`parse`] is worth trying.
pub fn looks_like_literal(text: &str) -> bool {
    matches!(
        text.trim_start().as_bytes().first(),
        Some(b'[' | b'(' | b'{')
    )
}

struct Parser<'a> {
    src: &'a str,
    bytes: &'a [u8],
    /// Always on a char boundary of `src`.
    pos: usize,
}

/// What kind of string literal a prefix selected.
#[derive(Clone, Copy)]
struct StrKind {
    raw: bool,
    bytes: bool,
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b'\x0c')
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_ident_continue(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

impl<'a> Parser<'a> {
    fn err(&self, reason: &'static str) -> LiteralError {
        LiteralError {
            offset: self.pos,
            reason,
        }
    }

    fn err_at(offset: usize, reason: &'static str) -> LiteralError {
        LiteralError { offset, reason }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<u8> {
        self.bytes.get(self.pos + ahead).copied()
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(is_ws) {
            self.pos += 1;
        }
    }

    fn eof(&self) -> LiteralError {
        Self::err_at(self.bytes.len(), "unexpected end of input")
    }

    /// One value, after optional whitespace. `depth` is the number of
    /// containers already open around it.
    fn value(&mut self, depth: usize) -> Result<Value, LiteralError> {
        self.skip_ws();
        let Some(b) = self.peek() else {
            return Err(self.eof());
        };
        match b {
            b'[' | b'(' | b'{' => {
                if depth >= MAX_DEPTH {
                    return Err(self.err("nesting deeper than 64 containers"));
                }
                self.pos += 1;
                match b {
                    b'[' => self.sequence(b']', depth + 1).map(Value::Array),
                    b'(' => self.tuple(depth + 1),
                    _ => self.braces(depth + 1),
                }
            }
            b'\'' | b'"' => self.string(StrKind {
                raw: false,
                bytes: false,
            }),
            b'+' | b'-' | b'.' | b'0'..=b'9' => self.number(),
            b if is_ident_start(b) => self.name(),
            b']' | b')' | b'}' | b',' | b':' => Err(self.err("expected a value")),
            _ => Err(self.err("unexpected character")),
        }
    }

    /// Items up to `close`, after the opening bracket; a trailing comma is
    /// allowed.
    fn sequence(&mut self, close: u8, depth: usize) -> Result<Vec<Value>, LiteralError> {
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            if self.peek() == Some(close) {
                self.pos += 1;
                return Ok(items);
            }
            items.push(self.value(depth)?);
            if self.separator(close)? {
                return Ok(items);
            }
        }
    }

    /// After an item: consumes `,` (→ false) or `close` (→ true).
    fn separator(&mut self, close: u8) -> Result<bool, LiteralError> {
        self.skip_ws();
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                Ok(false)
            }
            Some(c) if c == close => {
                self.pos += 1;
                Ok(true)
            }
            None => Err(self.eof()),
            Some(_) => Err(self.err(match close {
                b']' => "expected ',' or ']'",
                b')' => "expected ',' or ')'",
                _ => "expected ',' or '}'",
            })),
        }
    }

    /// After `(`: `()`, `(a,)`, `(a, b)` → array; `(a)` → `a`.
    fn tuple(&mut self, depth: usize) -> Result<Value, LiteralError> {
        self.skip_ws();
        if self.peek() == Some(b')') {
            self.pos += 1;
            return Ok(Value::Array(Vec::new()));
        }
        let first = self.value(depth)?;
        self.skip_ws();
        match self.peek() {
            Some(b')') => {
                self.pos += 1;
                Ok(first)
            }
            Some(b',') => {
                self.pos += 1;
                let mut items = vec![first];
                items.extend(self.sequence(b')', depth)?);
                Ok(Value::Array(items))
            }
            None => Err(self.eof()),
            Some(_) => Err(self.err("expected ',' or ')'")),
        }
    }

    /// After `{`: a dict, a set, or `{}` (an empty dict).
    fn braces(&mut self, depth: usize) -> Result<Value, LiteralError> {
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Value::Object(Map::new()));
        }
        let mut key_at = self.pos;
        let first = self.value(depth)?;
        self.skip_ws();
        if self.peek() != Some(b':') {
            // A set.
            let mut items = vec![first];
            if !self.separator(b'}')? {
                items.extend(self.sequence(b'}', depth)?);
            }
            return Ok(Value::Array(items));
        }
        let mut map = Map::new();
        let mut key = key_text(first, key_at)?;
        loop {
            // At the ':' after `key`.
            self.pos += 1;
            let value = self.value(depth)?;
            if map.contains_key(&key) {
                return Err(Self::err_at(key_at, "duplicate dict key"));
            }
            map.insert(key, value);
            if self.separator(b'}')? {
                return Ok(Value::Object(map));
            }
            self.skip_ws();
            if self.peek() == Some(b'}') {
                self.pos += 1;
                return Ok(Value::Object(map));
            }
            key_at = self.pos;
            let k = self.value(depth)?;
            key = key_text(k, key_at)?;
            self.skip_ws();
            match self.peek() {
                Some(b':') => {}
                None => return Err(self.eof()),
                Some(_) => return Err(self.err("expected ':'")),
            }
        }
    }

    /// A name: `True`, `False`, `None`, or a string prefix.
    fn name(&mut self) -> Result<Value, LiteralError> {
        let start = self.pos;
        while self.peek().is_some_and(is_ident_continue) {
            self.pos += 1;
        }
        let word = self.src.get(start..self.pos).unwrap_or("");
        if matches!(self.peek(), Some(b'\'' | b'"')) {
            let kind = match word.to_ascii_lowercase().as_str() {
                "u" => StrKind {
                    raw: false,
                    bytes: false,
                },
                "r" => StrKind {
                    raw: true,
                    bytes: false,
                },
                "b" => StrKind {
                    raw: false,
                    bytes: true,
                },
                "rb" | "br" => StrKind {
                    raw: true,
                    bytes: true,
                },
                _ => return Err(Self::err_at(start, "unsupported string prefix")),
            };
            return self.string(kind);
        }
        match word {
            "True" => Ok(Value::Bool(true)),
            "False" => Ok(Value::Bool(false)),
            "None" => Ok(Value::Null),
            "inf" | "nan" => Err(Self::err_at(start, "inf and nan have no JSON form")),
            "set" => Err(Self::err_at(start, "set() is not supported")),
            _ => Err(Self::err_at(start, "not a literal name")),
        }
    }

    /// A number with an optional sign, at `+`, `-`, `.` or a digit.
    fn number(&mut self) -> Result<Value, LiteralError> {
        let start = self.pos;
        let negative = match self.peek() {
            Some(b'-') => {
                self.pos += 1;
                true
            }
            Some(b'+') => {
                self.pos += 1;
                false
            }
            _ => false,
        };
        self.skip_ws();
        match self.peek() {
            Some(b'0'..=b'9' | b'.') => {}
            Some(b) if is_ident_start(b) => {
                let word_at = self.pos;
                while self.peek().is_some_and(is_ident_continue) {
                    self.pos += 1;
                }
                return Err(match self.src.get(word_at..self.pos) {
                    Some("inf" | "nan") => Self::err_at(start, "inf and nan have no JSON form"),
                    _ => Self::err_at(start, "expected a number after the sign"),
                });
            }
            None => return Err(self.eof()),
            Some(_) => return Err(self.err("expected a number after the sign")),
        }

        let mut clean = String::new();
        if negative {
            clean.push('-');
        }
        let int_digits = self.digits(&mut clean)?;
        let mut is_float = false;
        if self.peek() == Some(b'.') {
            is_float = true;
            self.pos += 1;
            clean.push('.');
            let frac_digits = self.digits(&mut clean)?;
            if int_digits == 0 && frac_digits == 0 {
                return Err(Self::err_at(start, "invalid number"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            is_float = true;
            self.pos += 1;
            clean.push('e');
            if let Some(sign @ (b'+' | b'-')) = self.peek() {
                self.pos += 1;
                clean.push(char::from(sign));
            }
            if self.digits(&mut clean)? == 0 {
                return Err(Self::err_at(start, "invalid exponent"));
            }
        }
        if self
            .peek()
            .is_some_and(|b| is_ident_continue(b) || b == b'.')
        {
            return Err(Self::err_at(start, "invalid number"));
        }

        if is_float {
            let x: f64 = clean
                .parse()
                .map_err(|_| Self::err_at(start, "invalid number"))?;
            return Number::from_f64(x)
                .map(Value::Number)
                .ok_or(Self::err_at(start, "float out of range"));
        }
        let digits = clean.trim_start_matches('-');
        if digits.len() > 1 && digits.starts_with('0') && digits.bytes().any(|b| b != b'0') {
            return Err(Self::err_at(start, "leading zeros in an integer"));
        }
        if let Ok(i) = clean.parse::<i64>() {
            return Ok(Value::from(i));
        }
        if let Ok(u) = clean.parse::<u64>() {
            return Ok(Value::from(u));
        }
        Err(Self::err_at(start, "integer does not fit in 64 bits"))
    }

    /// Decimal digits with single `_` separators between them, appended to
    /// `out` without the separators. Returns how many digits were read.
    fn digits(&mut self, out: &mut String) -> Result<usize, LiteralError> {
        let mut count = 0;
        loop {
            match self.peek() {
                Some(d @ b'0'..=b'9') => {
                    out.push(char::from(d));
                    count += 1;
                    self.pos += 1;
                }
                Some(b'_') if count > 0 && self.peek_at(1).is_some_and(|b| b.is_ascii_digit()) => {
                    self.pos += 1;
                }
                Some(b'_') => return Err(self.err("invalid digit separator")),
                _ => return Ok(count),
            }
        }
    }

    /// A quoted string at its opening quote (after any prefix).
    fn string(&mut self, kind: StrKind) -> Result<Value, LiteralError> {
        let open = self.pos;
        let Some(quote) = self.peek() else {
            return Err(self.eof());
        };
        if self.peek_at(1) == Some(quote) && self.peek_at(2) == Some(quote) {
            return Err(self.err("triple-quoted strings are not supported"));
        }
        self.pos += 1;
        let body_start = self.pos;
        let mut text = String::new();
        let mut raw_bytes: Vec<u8> = Vec::new();
        loop {
            let Some(c) = self.src.get(self.pos..).and_then(|s| s.chars().next()) else {
                return Err(Self::err_at(open, "unterminated string"));
            };
            let c_at = self.pos;
            self.pos += c.len_utf8();
            if kind.bytes && !c.is_ascii() {
                return Err(Self::err_at(c_at, "non-ASCII character in a bytes literal"));
            }
            match c {
                '\n' | '\r' => return Err(Self::err_at(open, "unterminated string")),
                _ if c as u32 == u32::from(quote) => break,
                '\\' if kind.raw => {
                    // A raw string keeps the backslash and the next
                    // character, which cannot close the string.
                    push(&mut text, &mut raw_bytes, kind, '\\');
                    let Some(next) = self.src.get(self.pos..).and_then(|s| s.chars().next()) else {
                        return Err(Self::err_at(open, "unterminated string"));
                    };
                    if kind.bytes && !next.is_ascii() {
                        return Err(self.err("non-ASCII character in a bytes literal"));
                    }
                    self.pos += next.len_utf8();
                    push(&mut text, &mut raw_bytes, kind, next);
                }
                '\\' => self.escape(c_at, open, kind, &mut text, &mut raw_bytes)?,
                _ => push(&mut text, &mut raw_bytes, kind, c),
            }
        }
        if !kind.bytes {
            return Ok(Value::String(text));
        }
        let body_end = self.pos - 1;
        Ok(Value::String(match String::from_utf8(raw_bytes) {
            Ok(s) => s,
            Err(_) => self.src.get(body_start..body_end).unwrap_or("").to_string(),
        }))
    }

    /// One escape sequence; `self.pos` is just after the backslash at `at`.
    fn escape(
        &mut self,
        at: usize,
        open: usize,
        kind: StrKind,
        text: &mut String,
        bytes: &mut Vec<u8>,
    ) -> Result<(), LiteralError> {
        let Some(c) = self.src.get(self.pos..).and_then(|s| s.chars().next()) else {
            return Err(Self::err_at(open, "unterminated string"));
        };
        self.pos += c.len_utf8();
        let simple = match c {
            '\n' => return Ok(()),
            '\r' => {
                if self.peek() == Some(b'\n') {
                    self.pos += 1;
                }
                return Ok(());
            }
            '\\' | '\'' | '"' => Some(c),
            'a' => Some('\x07'),
            'b' => Some('\x08'),
            'f' => Some('\x0c'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'v' => Some('\x0b'),
            _ => None,
        };
        if let Some(s) = simple {
            push(text, bytes, kind, s);
            return Ok(());
        }
        match c {
            '0'..='7' => {
                let mut value = c as u32 - u32::from(b'0');
                for _ in 0..2 {
                    match self.peek() {
                        Some(d @ b'0'..=b'7') => {
                            value = value * 8 + u32::from(d - b'0');
                            self.pos += 1;
                        }
                        _ => break,
                    }
                }
                if kind.bytes {
                    let byte = u8::try_from(value)
                        .map_err(|_| Self::err_at(at, "octal escape out of range"))?;
                    bytes.push(byte);
                } else {
                    // At most 0o777, always a valid scalar value.
                    text.push(char::from_u32(value).unwrap_or(char::REPLACEMENT_CHARACTER));
                }
                Ok(())
            }
            'x' => {
                let value = self.hex(2, at, "truncated \\x escape")?;
                if kind.bytes {
                    // Two hex digits always fit a byte.
                    bytes.push(u8::try_from(value).unwrap_or(0));
                } else {
                    text.push(char::from_u32(value).unwrap_or(char::REPLACEMENT_CHARACTER));
                }
                Ok(())
            }
            'u' | 'U' if !kind.bytes => {
                let (n, reason) = if c == 'u' {
                    (4, "truncated \\u escape")
                } else {
                    (8, "truncated \\U escape")
                };
                let value = self.hex(n, at, reason)?;
                if (0xD800..=0xDFFF).contains(&value) {
                    return Err(Self::err_at(at, "surrogate code point in an escape"));
                }
                let ch =
                    char::from_u32(value).ok_or(Self::err_at(at, "code point beyond U+10FFFF"))?;
                text.push(ch);
                Ok(())
            }
            'N' if !kind.bytes => Err(Self::err_at(at, "\\N{...} escapes are not supported")),
            _ => {
                // Unknown escapes keep the backslash, as in Python.
                push(text, bytes, kind, '\\');
                if kind.bytes && !c.is_ascii() {
                    return Err(Self::err_at(
                        self.pos - c.len_utf8(),
                        "non-ASCII character in a bytes literal",
                    ));
                }
                push(text, bytes, kind, c);
                Ok(())
            }
        }
    }

    /// Exactly `n` hex digits.
    fn hex(&mut self, n: usize, at: usize, reason: &'static str) -> Result<u32, LiteralError> {
        let mut value: u32 = 0;
        for _ in 0..n {
            let d = self
                .peek()
                .and_then(|b| char::from(b).to_digit(16))
                .ok_or(Self::err_at(at, reason))?;
            value = value.wrapping_mul(16).wrapping_add(d);
            self.pos += 1;
        }
        Ok(value)
    }
}

/// Appends one character to the string being built (a bytes literal holds
/// only ASCII characters, checked by the caller).
fn push(text: &mut String, bytes: &mut Vec<u8>, kind: StrKind, c: char) {
    if kind.bytes {
        let mut buf = [0u8; 4];
        bytes.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    } else {
        text.push(c);
    }
}

/// A dict key as JSON object key text.
fn key_text(key: Value, at: usize) -> Result<String, LiteralError> {
    match key {
        Value::String(s) => Ok(s),
        Value::Array(_) | Value::Object(_) => Err(LiteralError {
            offset: at,
            reason: "unsupported dict key",
        }),
        other => Ok(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn json(text: &str) -> Value {
        serde_json::from_str(text).expect("fixture JSON")
    }

    /// Real `str()` output, produced during development with CPython 3.11
    /// running `mcp-server-sqlite`'s own code path
    /// (`str([dict(row) for row in cursor.fetchall()])` over `sqlite3.Row`),
    /// with the expected JSON (bytes per this module's rule) from `json.dumps`.
    const PYTHON_FIXTURES: &[(&str, &str, &str)] = &[
        ("one-row count", r##"[{'n': 5}]"##, r##"[{"n": 5}]"##),
        ("count 651", r##"[{'n': 651}]"##, r##"[{"n": 651}]"##),
        (
            "row dicts",
            r##"[{'id': 1, 'name': "O'Brien", 'score': 2.5, 'ok': 1, 'note': None}, {'id': 2, 'name': '3층 현장', 'score': -0.001, 'ok': 0, 'note': 'say "hi"'}, {'id': 3, 'name': 'tab\tand\nnewline\\back', 'score': 1e+20, 'ok': 1, 'note': 'both \' and "'}, {'id': 4, 'name': 'emoji 😀 zero-width \u200b nbsp\xa0', 'score': 123456789.125, 'ok': None, 'note': ''}, {'id': 9223372036854775807, 'name': 'max', 'score': 1.5e-07, 'ok': -9223372036854775808, 'note': 'ctrl \x07\x7f\x85'}]"##,
            r##"[{"id": 1, "name": "O'Brien", "score": 2.5, "ok": 1, "note": null}, {"id": 2, "name": "3\uce35 \ud604\uc7a5", "score": -0.001, "ok": 0, "note": "say \"hi\""}, {"id": 3, "name": "tab\tand\nnewline\\back", "score": 1e+20, "ok": 1, "note": "both ' and \""}, {"id": 4, "name": "emoji \ud83d\ude00 zero-width \u200b nbsp\u00a0", "score": 123456789.125, "ok": null, "note": ""}, {"id": 9223372036854775807, "name": "max", "score": 1.5e-07, "ok": -9223372036854775808, "note": "ctrl \u0007\u007f\u0085"}]"##,
        ),
        (
            "brief example",
            r##"[{'id': 1, 'name': "O'Brien", 'score': 2.5, 'ok': True, 'note': None}]"##,
            r##"[{"id": 1, "name": "O'Brien", "score": 2.5, "ok": true, "note": null}]"##,
        ),
        ("empty result", r##"[]"##, r##"[]"##),
        (
            "blobs",
            r##"[{'id': 3, 'blob': b'\x00\xffA'}, {'id': 4, 'blob': b'caf\xc3\xa9'}]"##,
            r##"[{"id": 3, "blob": "\\x00\\xffA"}, {"id": 4, "blob": "café"}]"##,
        ),
        (
            "list_tables",
            r##"[{'name': 't'}]"##,
            r##"[{"name": "t"}]"##,
        ),
        (
            "describe_table",
            r##"[{'cid': 0, 'name': 'id', 'type': 'INTEGER', 'notnull': 0, 'dflt_value': None, 'pk': 1}, {'cid': 1, 'name': 'name', 'type': 'TEXT', 'notnull': 0, 'dflt_value': None, 'pk': 0}, {'cid': 2, 'name': 'score', 'type': 'REAL', 'notnull': 0, 'dflt_value': None, 'pk': 0}, {'cid': 3, 'name': 'ok', 'type': 'BOOLEAN', 'notnull': 0, 'dflt_value': None, 'pk': 0}, {'cid': 4, 'name': 'note', 'type': 'TEXT', 'notnull': 0, 'dflt_value': None, 'pk': 0}, {'cid': 5, 'name': 'blob', 'type': 'BLOB', 'notnull': 0, 'dflt_value': None, 'pk': 0}]"##,
            r##"[{"cid": 0, "name": "id", "type": "INTEGER", "notnull": 0, "dflt_value": null, "pk": 1}, {"cid": 1, "name": "name", "type": "TEXT", "notnull": 0, "dflt_value": null, "pk": 0}, {"cid": 2, "name": "score", "type": "REAL", "notnull": 0, "dflt_value": null, "pk": 0}, {"cid": 3, "name": "ok", "type": "BOOLEAN", "notnull": 0, "dflt_value": null, "pk": 0}, {"cid": 4, "name": "note", "type": "TEXT", "notnull": 0, "dflt_value": null, "pk": 0}, {"cid": 5, "name": "blob", "type": "BLOB", "notnull": 0, "dflt_value": null, "pk": 0}]"##,
        ),
        (
            "write query",
            r##"[{'affected_rows': 3}]"##,
            r##"[{"affected_rows": 3}]"##,
        ),
        ("tuple row", r##"[(1, 'a')]"##, r##"[[1, "a"]]"##),
        (
            "tuple rows",
            r##"[(1, 'a', None, 2.0), (2, 'b', True, -3.5)]"##,
            r##"[[1, "a", null, 2.0], [2, "b", true, -3.5]]"##,
        ),
        (
            "one-tuple and empty tuple",
            r##"[(1,), ()]"##,
            r##"[[1], []]"##,
        ),
        (
            "floats",
            r##"[1e+16, 1.5e-07, 0.1, -0.0, 1e+22, 1.2345678901234568e+17, 5e-324, 1.7976931348623157e+308, 2.0, -1e-05]"##,
            r##"[1e+16, 1.5e-07, 0.1, -0.0, 1e+22, 1.2345678901234568e+17, 5e-324, 1.7976931348623157e+308, 2.0, -1e-05]"##,
        ),
        (
            "non-string keys",
            r##"{1: 'a', 2.5: None, None: 4, False: 'f'}"##,
            r##"{"1": "a", "2.5": null, "null": 4, "false": "f"}"##,
        ),
        ("set", r##"{1, 2, 3}"##, r##"[1, 2, 3]"##),
        (
            "nested",
            r##"{'a': [{'b': ({'c': []},)}], 'd': {}}"##,
            r##"{"a": [{"b": [{"c": []}]}], "d": {}}"##,
        ),
        (
            "control and non-printable",
            r##"['\x00\x1f\x7f\x80\x9f\xa0\xad\u2028\ue000\U000f0000\U0010ffff', 'back\\slash', '\'"']"##,
            r##"["\u0000\u001f\u007f\u0080\u009f\u00a0\u00ad\u2028\ue000\udb80\udc00\udbff\udfff", "back\\slash", "'\""]"##,
        ),
        (
            "korean",
            r##"[{'floor': '3층', 'label': '안전 문제', 'count': 12}]"##,
            r##"[{"floor": "3층", "label": "안전 문제", "count": 12}]"##,
        ),
    ];

    #[test]
    fn real_python_payloads() {
        for (name, text, expected) in PYTHON_FIXTURES {
            assert!(looks_like_literal(text), "{name}");
            let got = parse(text).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(got, json(expected), "{name}");
        }
    }

    #[test]
    fn big_row_values_keep_their_exact_types() {
        let v = parse(
            "[{'id': 9223372036854775807, 'ok': -9223372036854775808, 'u': 18446744073709551615}]",
        )
        .unwrap();
        assert_eq!(v[0]["id"].as_i64(), Some(i64::MAX));
        assert_eq!(v[0]["ok"].as_i64(), Some(i64::MIN));
        assert_eq!(v[0]["u"].as_u64(), Some(u64::MAX));
        let f = parse("[2.0, 1e+16]").unwrap();
        assert!(f[0].is_f64() && f[1].is_f64());
        assert_eq!(
            parse("-0.0").unwrap().as_f64().map(f64::is_sign_negative),
            Some(true)
        );
    }

    #[test]
    fn accepted_forms() {
        let cases: &[(&str, Value)] = &[
            ("[]", json!([])),
            ("()", json!([])),
            ("( )", json!([])),
            ("(1,)", json!([1])),
            ("(1)", json!(1)),
            ("((1, 2))", json!([1, 2])),
            ("{}", json!({})),
            ("{1,}", json!([1])),
            ("{'a', 'b'}", json!(["a", "b"])),
            ("{'a': 1,}", json!({"a": 1})),
            (
                "{True: 1, None: 2, -3: 3, 1.5: 4}",
                json!({"true": 1, "null": 2, "-3": 3, "1.5": 4}),
            ),
            ("{b'k': 1, r'\\d': 2}", json!({"k": 1, "\\d": 2})),
            (" \n[ 1 ,\t2 ,\x0c]\r\n ", json!([1, 2])),
            ("[1, 2,]", json!([1, 2])),
            ("[[], [[]], ()]", json!([[], [[]], []])),
            ("True", json!(true)),
            ("False", json!(false)),
            ("None", json!(null)),
            ("'x'", json!("x")),
            // numbers
            ("0", json!(0)),
            ("00", json!(0)),
            ("-0", json!(0)),
            ("+7", json!(7)),
            ("- 7", json!(-7)),
            ("1_000_000", json!(1_000_000)),
            ("1.", json!(1.0)),
            (".5", json!(0.5)),
            ("-.5", json!(-0.5)),
            ("1e5", json!(100000.0)),
            ("1E-2", json!(0.01)),
            ("1.5e+3", json!(1500.0)),
            ("007.5", json!(7.5)),
            ("1_0.2_5e1_0", json!(10.25e10)),
            ("5e-324", json!(5e-324)),
            // strings and escapes
            (r#""it's""#, json!("it's")),
            (r"'a\'b'", json!("a'b")),
            (r#"'a\"b'"#, json!("a\"b")),
            (r"'\\'", json!("\\")),
            (r"'\a\b\f\n\r\t\v'", json!("\x07\x08\x0c\n\r\t\x0b")),
            (r"'\0\7\101\0012\777'", json!("\0\x07A\x012\u{1ff}")),
            (r"'\x41\xe9\xff'", json!("Aéÿ")),
            (r"'\u00e9\uCE35'", json!("é층")),
            (r"'\U0001F600\U0010FFFF'", json!("😀\u{10ffff}")),
            (r"'\d\q\ '", json!("\\d\\q\\ ")),
            ("'line\\\ncontinued'", json!("linecontinued")),
            ("'층 😀'", json!("층 😀")),
            (r"u'\u00e9'", json!("é")),
            (r"U'x'", json!("x")),
            (r"r'\n\''", json!("\\n\\'")),
            (r"R'\x'", json!("\\x")),
            (r"b'abc'", json!("abc")),
            (r"B'caf\xc3\xa9'", json!("café")),
            (r"b'\x89PNG\r\n'", json!("\\x89PNG\\r\\n")),
            (r"b'\u0041\N'", json!("\\u0041\\N")),
            (r"b'\101\t'", json!("A\t")),
            (r"rb'\x41'", json!("\\x41")),
            (r"Br'\x41'", json!("\\x41")),
            ("''", json!("")),
            (r#""""#, json!("")),
        ];
        for (text, expected) in cases {
            assert_eq!(parse(text).as_ref(), Ok(expected), "{text:?}");
        }
    }

    #[test]
    fn errors_with_offsets() {
        let cases: &[(&str, usize, &str)] = &[
            ("", 0, "unexpected end of input"),
            ("   ", 3, "unexpected end of input"),
            ("[", 1, "unexpected end of input"),
            ("[1,", 3, "unexpected end of input"),
            ("[1", 2, "unexpected end of input"),
            ("{'a':", 5, "unexpected end of input"),
            ("[1 2]", 3, "expected ',' or ']'"),
            ("(1 2)", 3, "expected ',' or ')'"),
            ("(1, 2 3)", 6, "expected ',' or ')'"),
            ("{1 2}", 3, "expected ',' or '}'"),
            ("{'a': 1, 'b'}", 12, "expected ':'"),
            ("{'a', 'b': 1}", 9, "expected ',' or '}'"),
            ("[,]", 1, "expected a value"),
            ("(,)", 1, "expected a value"),
            ("{,}", 1, "expected a value"),
            ("[1,,]", 3, "expected a value"),
            ("[] x", 3, "unexpected text after the literal"),
            ("[1] [2]", 4, "unexpected text after the literal"),
            ("[1, é]", 4, "unexpected character"),
            ("[1, @]", 4, "unexpected character"),
            ("set()", 0, "set() is not supported"),
            ("[set()]", 1, "set() is not supported"),
            ("[inf]", 1, "inf and nan have no JSON form"),
            ("[-inf]", 1, "inf and nan have no JSON form"),
            ("nan", 0, "inf and nan have no JSON form"),
            ("[1e999]", 1, "float out of range"),
            ("[-1e999]", 1, "float out of range"),
            ("[x]", 1, "not a literal name"),
            ("[true]", 1, "not a literal name"),
            ("__import__('os')", 0, "not a literal name"),
            ("[f'{x}']", 1, "unsupported string prefix"),
            ("[ub'']", 1, "unsupported string prefix"),
            ("[- x]", 1, "expected a number after the sign"),
            ("[--1]", 2, "expected a number after the sign"),
            ("[-]", 2, "expected a number after the sign"),
            ("-", 1, "unexpected end of input"),
            ("[.]", 1, "invalid number"),
            ("[1.2.3]", 1, "invalid number"),
            ("[0x10]", 1, "invalid number"),
            ("[1j]", 1, "invalid number"),
            ("[1e]", 1, "invalid exponent"),
            ("[1e+]", 1, "invalid exponent"),
            ("[007]", 1, "leading zeros in an integer"),
            ("[1__0]", 2, "invalid digit separator"),
            ("[1_]", 2, "invalid digit separator"),
            ("[1_.5]", 2, "invalid digit separator"),
            ("[_1]", 1, "not a literal name"),
            (
                "[18446744073709551616]",
                1,
                "integer does not fit in 64 bits",
            ),
            (
                "[-9223372036854775809]",
                1,
                "integer does not fit in 64 bits",
            ),
            ("['abc]", 1, "unterminated string"),
            ("['abc\\", 1, "unterminated string"),
            ("['a\nb']", 1, "unterminated string"),
            ("[r'\\']", 2, "unterminated string"),
            ("['''x''']", 1, "triple-quoted strings are not supported"),
            (r"['\x4']", 2, "truncated \\x escape"),
            (r"['\x']", 2, "truncated \\x escape"),
            (r"['\u12']", 2, "truncated \\u escape"),
            (r"['\U0001F60']", 2, "truncated \\U escape"),
            (r"['\ud800']", 2, "surrogate code point in an escape"),
            (r"['\ud83d\ude00']", 2, "surrogate code point in an escape"),
            (r"['\U00110000']", 2, "code point beyond U+10FFFF"),
            (r"['\UFFFFFFFF']", 2, "code point beyond U+10FFFF"),
            (r"['\N{BULLET}']", 2, "\\N{...} escapes are not supported"),
            ("[b'é']", 3, "non-ASCII character in a bytes literal"),
            ("[rb'\\é']", 5, "non-ASCII character in a bytes literal"),
            (r"[b'\777']", 3, "octal escape out of range"),
            ("{'a': 1, 'a': 2}", 9, "duplicate dict key"),
            ("{1: 'a', '1': 'b'}", 9, "duplicate dict key"),
            ("{(1, 2): 'a'}", 1, "unsupported dict key"),
            ("{'a': 1, [2]: 3}", 9, "unsupported dict key"),
            ("['a' 'b']", 5, "expected ',' or ']'"),
        ];
        for (text, offset, reason) in cases {
            assert_eq!(
                parse(text),
                Err(LiteralError {
                    offset: *offset,
                    reason
                }),
                "{text:?}"
            );
        }
    }

    #[test]
    fn error_message() {
        let e = parse("[1 2]").unwrap_err();
        assert_eq!(
            e.to_string(),
            "not a Python literal at byte 3: expected ',' or ']'"
        );
    }

    #[test]
    fn nesting_limit() {
        for (open, close) in [("[", "]"), ("(", ")"), ("{", "}")] {
            let ok = format!("{}{}", open.repeat(MAX_DEPTH), close.repeat(MAX_DEPTH));
            assert!(parse(&ok).is_ok(), "{open} x {MAX_DEPTH}");
            let deep = format!(
                "{}{}",
                open.repeat(MAX_DEPTH + 1),
                close.repeat(MAX_DEPTH + 1)
            );
            let e = parse(&deep).unwrap_err();
            assert_eq!(
                (e.offset, e.reason),
                (MAX_DEPTH, "nesting deeper than 64 containers")
            );
        }
        for open in ["[", "(", "{", "{'a': [", "[{1: ("] {
            let huge = open.repeat(100_000);
            assert!(parse(&huge).is_err());
        }
        let mixed = "[{'a': (".repeat(30);
        assert_eq!(
            parse(&mixed).unwrap_err().reason,
            "nesting deeper than 64 containers"
        );
    }

    #[test]
    fn plausibility_test() {
        for yes in ["[]", "  (1,)", "\n{'a': 1}", "[not even valid"] {
            assert!(looks_like_literal(yes), "{yes:?}");
        }
        for no in [
            "",
            "   ",
            "'x'",
            "42",
            "None",
            "Table created successfully",
            "Error: x",
        ] {
            assert!(!looks_like_literal(no), "{no:?}");
        }
    }

    // ---- property tests: a Python-repr-style printer and random values ----

    #[derive(Debug, Clone, Copy)]
    enum Style {
        /// As `repr()` prints it.
        Repr,
        /// Every non-ASCII character escaped.
        Ascii,
        /// Always double quotes.
        Double,
    }

    #[derive(Debug, Clone, Copy)]
    enum Layout {
        /// `[1, 2]`, as Python prints.
        Python,
        /// `[1,2]`
        Compact,
        /// ` [ 1 ,\n\t2 , ] ` — odd whitespace and a trailing comma.
        Airy,
    }

    #[derive(Debug, Clone)]
    enum Key {
        Str(String, Style),
        Int(i64),
    }

    #[derive(Debug, Clone)]
    enum Py {
        None,
        Bool(bool),
        Int(i64),
        UInt(u64),
        Float(f64),
        Str(String, Style),
        List(Vec<Py>, Layout),
        Tuple(Vec<Py>, Layout),
        Dict(Vec<(Key, Py)>, Layout),
    }

    impl Key {
        fn text(&self) -> String {
            match self {
                Key::Str(s, _) => s.clone(),
                Key::Int(i) => i.to_string(),
            }
        }
    }

    fn expected(v: &Py) -> Value {
        match v {
            Py::None => Value::Null,
            Py::Bool(b) => Value::Bool(*b),
            Py::Int(i) => Value::from(*i),
            Py::UInt(u) => Value::from(*u),
            Py::Float(x) => Value::from(*x),
            Py::Str(s, _) => Value::String(s.clone()),
            Py::List(items, _) | Py::Tuple(items, _) => {
                Value::Array(items.iter().map(expected).collect())
            }
            Py::Dict(entries, _) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.text(), expected(v)))
                    .collect(),
            ),
        }
    }

    /// Characters `repr()` escapes (an approximation of "not printable").
    fn unprintable(c: char) -> bool {
        let u = c as u32;
        u < 0x20
            || (0x7f..=0xa0).contains(&u)
            || u == 0xad
            || (0x200b..=0x200f).contains(&u)
            || u == 0x2028
            || u == 0x2029
            || u == 0xfeff
            || (0xe000..=0xf8ff).contains(&u)
            || u >= 0xf0000
    }

    fn py_str(s: &str, style: Style, out: &mut String) {
        let quote = match style {
            Style::Double => '"',
            _ if s.contains('\'') && !s.contains('"') => '"',
            _ => '\'',
        };
        out.push(quote);
        for c in s.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                _ if c == quote => {
                    out.push('\\');
                    out.push(c);
                }
                _ if unprintable(c) || (matches!(style, Style::Ascii) && !c.is_ascii()) => {
                    let u = c as u32;
                    if u < 0x100 {
                        out.push_str(&format!("\\x{u:02x}"));
                    } else if u < 0x10000 {
                        out.push_str(&format!("\\u{u:04x}"));
                    } else {
                        out.push_str(&format!("\\U{u:08x}"));
                    }
                }
                _ => out.push(c),
            }
        }
        out.push(quote);
    }

    /// Python's `repr(float)`: shortest round-trip digits, exponent form
    /// below 1e-4 and from 1e16, `e+XX`/`e-XX` with at least two digits.
    fn py_float(x: f64) -> String {
        let sci = format!("{:e}", x.abs());
        let (mantissa, exp) = sci.split_once('e').unwrap();
        let exp: i32 = exp.parse().unwrap();
        let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
        let sign = if x.is_sign_negative() { "-" } else { "" };
        if (-4..16).contains(&exp) {
            let n = digits.len() as i32;
            let body = if exp < 0 {
                format!("0.{}{}", "0".repeat((-exp - 1) as usize), digits)
            } else if n <= exp + 1 {
                format!("{}{}.0", digits, "0".repeat((exp + 1 - n) as usize))
            } else {
                let (a, b) = digits.split_at((exp + 1) as usize);
                format!("{a}.{b}")
            };
            format!("{sign}{body}")
        } else {
            let esign = if exp < 0 { '-' } else { '+' };
            format!("{sign}{mantissa}e{esign}{:02}", exp.abs())
        }
    }

    #[test]
    fn float_printer_matches_python() {
        // Outputs of CPython's repr() for the same numbers.
        let cases = [
            (1e16, "1e+16"),
            (1.5e-7, "1.5e-07"),
            (0.1, "0.1"),
            (-0.0, "-0.0"),
            (1e22, "1e+22"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (2.0, "2.0"),
            (-1e-5, "-1e-05"),
            (0.0001, "0.0001"),
            (123456789.125, "123456789.125"),
            (1e15, "1000000000000000.0"),
        ];
        for (x, text) in cases {
            assert_eq!(py_float(x), text);
            assert_eq!(parse(text).unwrap(), Value::from(x));
        }
    }

    fn render(v: &Py, out: &mut String) {
        match v {
            Py::None => out.push_str("None"),
            Py::Bool(true) => out.push_str("True"),
            Py::Bool(false) => out.push_str("False"),
            Py::Int(i) => out.push_str(&i.to_string()),
            Py::UInt(u) => out.push_str(&u.to_string()),
            Py::Float(x) => out.push_str(&py_float(*x)),
            Py::Str(s, style) => py_str(s, *style, out),
            Py::List(items, layout) => seq(items, *layout, "[", "]", false, out),
            Py::Tuple(items, layout) => seq(items, *layout, "(", ")", items.len() == 1, out),
            Py::Dict(entries, layout) => {
                let (sep, colon, pad) = match layout {
                    Layout::Python => (", ", ": ", ""),
                    Layout::Compact => (",", ":", ""),
                    Layout::Airy => (" ,\n ", " \t: ", " "),
                };
                out.push('{');
                out.push_str(pad);
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push_str(sep);
                    }
                    match k {
                        Key::Str(s, style) => py_str(s, *style, out),
                        Key::Int(n) => out.push_str(&n.to_string()),
                    }
                    out.push_str(colon);
                    render(v, out);
                }
                if matches!(layout, Layout::Airy) && !entries.is_empty() {
                    out.push_str(" ,");
                }
                out.push_str(pad);
                out.push('}');
            }
        }
    }

    fn seq(items: &[Py], layout: Layout, open: &str, close: &str, one: bool, out: &mut String) {
        let (sep, pad) = match layout {
            Layout::Python => (", ", ""),
            Layout::Compact => (",", ""),
            Layout::Airy => (" ,\n\t", " "),
        };
        out.push_str(open);
        out.push_str(pad);
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push_str(sep);
            }
            render(item, out);
        }
        if one || (matches!(layout, Layout::Airy) && !items.is_empty()) {
            out.push(',');
        }
        out.push_str(pad);
        out.push_str(close);
    }

    fn rendered(v: &Py) -> String {
        let mut s = String::new();
        render(v, &mut s);
        s
    }

    fn style() -> impl Strategy<Value = Style> {
        prop_oneof![Just(Style::Repr), Just(Style::Ascii), Just(Style::Double)]
    }

    fn layout() -> impl Strategy<Value = Layout> {
        prop_oneof![
            3 => Just(Layout::Python),
            1 => Just(Layout::Compact),
            1 => Just(Layout::Airy)
        ]
    }

    fn text() -> impl Strategy<Value = String> {
        let special = prop::sample::select(vec![
            '\'',
            '"',
            '\\',
            '\n',
            '\r',
            '\t',
            '\0',
            '\x07',
            '\x7f',
            '\u{85}',
            '\u{a0}',
            '\u{ad}',
            '\u{200b}',
            '\u{2028}',
            '\u{e000}',
            '\u{fffd}',
            '층',
            '😀',
            '\u{10ffff}',
            'x',
            ' ',
        ]);
        prop_oneof![
            any::<String>(),
            prop::collection::vec(prop_oneof![any::<char>(), special], 0..16)
                .prop_map(String::from_iter),
        ]
    }

    fn py_value() -> impl Strategy<Value = Py> {
        let leaf = prop_oneof![
            Just(Py::None),
            any::<bool>().prop_map(Py::Bool),
            any::<i64>().prop_map(Py::Int),
            (i64::MAX as u64 + 1..=u64::MAX).prop_map(Py::UInt),
            any::<f64>()
                .prop_filter("finite", |x| x.is_finite())
                .prop_map(Py::Float),
            (text(), style()).prop_map(|(s, st)| Py::Str(s, st)),
        ];
        leaf.prop_recursive(5, 96, 8, |inner| {
            let key = prop_oneof![
                (text(), style()).prop_map(|(s, st)| Key::Str(s, st)),
                any::<i64>().prop_map(Key::Int),
            ];
            prop_oneof![
                (prop::collection::vec(inner.clone(), 0..8), layout())
                    .prop_map(|(v, l)| Py::List(v, l)),
                (prop::collection::vec(inner.clone(), 0..8), layout())
                    .prop_map(|(v, l)| Py::Tuple(v, l)),
                (prop::collection::vec((key, inner), 0..8), layout()).prop_map(|(entries, l)| {
                    // Keys must stay distinct once rendered as JSON text.
                    let mut seen = std::collections::HashSet::new();
                    let entries = entries
                        .into_iter()
                        .filter(|(k, _)| seen.insert(k.text()))
                        .collect();
                    Py::Dict(entries, l)
                }),
            ]
        })
    }

    proptest! {
        #[test]
        fn round_trips_rendered_values(v in py_value()) {
            let text = rendered(&v);
            prop_assert_eq!(parse(&text), Ok(expected(&v)), "{}", text);
        }

        #[test]
        fn never_panics_on_arbitrary_text(s in any::<String>()) {
            let _ = parse(&s);
            let _ = looks_like_literal(&s);
        }

        #[test]
        fn never_panics_on_literal_like_text(
            s in r#"[\[\](){}:,'"\\ \nbrufxuUN0-9a-fA-F.eE+_TrueFalsNo-]{0,64}"#
        ) {
            if let Err(e) = parse(&s) {
                prop_assert!(e.offset <= s.len());
            }
        }

        #[test]
        fn never_panics_on_damaged_literals(
            v in py_value(),
            cut in any::<prop::sample::Index>(),
            insert in any::<char>(),
        ) {
            let text = rendered(&v);
            let boundaries: Vec<usize> = text
                .char_indices()
                .map(|(i, _)| i)
                .chain([text.len()])
                .collect();
            let at = boundaries[cut.index(boundaries.len())];
            if let Err(e) = parse(&text[..at]) {
                prop_assert!(e.offset <= at);
            }
            let mut spliced = text.clone();
            spliced.insert(at, insert);
            let _ = parse(&spliced);
            let mut removed = text.clone();
            if at < removed.len() {
                removed.remove(at);
                let _ = parse(&removed);
            }
        }
    }
}
