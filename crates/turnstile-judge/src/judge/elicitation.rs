//! What an MCP server asks the user through elicitation (MCP 2025-11-25,
//! `elicitation/create`), judged by code before the user sees the request
//! and again before the answer goes back to the server.
//!
//! The spec restricts both modes, and a client that relays them must hold
//! the server to it:
//! - **form mode** carries a `requestedSchema`: a flat object of primitive
//!   fields (string, number, integer, boolean, a single choice, a
//!   multi-select of strings). [`check_schema`] refuses anything else (a
//!   nested object, `$ref`, a keyword the spec does not name), because a
//!   constraint the client does not understand is a constraint it cannot
//!   enforce. Servers MUST NOT use form mode for sensitive information
//!   (passwords, API keys, access tokens, payment credentials):
//!   [`secret_field`] names the field that asks for one;
//! - the client validates an accepted answer against the schema before it
//!   sends it ([`validate`]), so the server never receives what it did not
//!   ask for. A refusal names the field and what was expected and **never
//!   echoes the submitted value**: a value typed into a form may be
//!   sensitive, and reasons end up in logs and on screens;
//! - **URL mode** carries a `url` the user is asked to open.
//!   [`url_view`] accepts only absolute `http(s)` URLs without userinfo and
//!   says which domain the user is really sent to, and whether that domain
//!   is punycode (a look-alike of another). Nothing here fetches anything.
//!
//! Pure functions over `serde_json` values; reasons are plain sentences.

use serde_json::{Map, Value};
use url::Url;

/// The most fields one form may ask for.
pub const MAX_PROPERTIES: usize = 50;
/// The longest field name, in characters.
pub const MAX_NAME_CHARS: usize = 64;
/// The longest URL that URL mode may ask the user to open, in bytes.
pub const MAX_URL_BYTES: usize = 2048;

/// Whether `schema` is a `requestedSchema` the spec allows: `{"type":
/// "object", "properties": {...}, "required"?: [...]}` (with an optional
/// `$schema`, `title` and `description`) whose properties are primitive
/// fields only, at most [`MAX_PROPERTIES`] of them, each name at most
/// [`MAX_NAME_CHARS`] characters. A field's `default` must itself be an
/// answer the field accepts. The reason names the field at fault.
pub fn check_schema(schema: &Value) -> Result<(), String> {
    read_form(schema).map(|_| ())
}

/// The first field (in name order) of a form that asks for sensitive
/// information, which the spec forbids in form mode: judged from the
/// field's name, `title` and `description` (case-insensitive, word by
/// word, camelCase and snake/kebab-case split into words) and a `format`
/// of `password`. "token" and "pin" alone count in a name or a title, not
/// in prose ("the token budget"); "token" followed by a counting word
/// (`token_count`, `tokenLimit`) is a model's tokens, not a credential.
/// Works on any JSON: a schema without properties asks for nothing.
pub fn secret_field(schema: &Value) -> Option<String> {
    let props = schema.get("properties")?.as_object()?;
    let mut fields: Vec<(&String, &Value)> = props.iter().collect();
    fields.sort_by(|a, b| a.0.cmp(b.0));
    fields
        .into_iter()
        .find(|(name, prop)| asks_secret(name, prop))
        .map(|(name, _)| name.clone())
}

/// An accepted answer (`content`) checked against the form's schema: an
/// object holding every `required` field, no field the schema does not
/// have, and each value of its field's type within its field's bounds.
/// Returns the answer's object as it is to be sent. A refusal names the
/// field and what it expected, never the value submitted. A schema that
/// [`check_schema`] refuses is refused here too.
pub fn validate(schema: &Value, content: &Value) -> Result<Map<String, Value>, String> {
    let form =
        read_form(schema).map_err(|why| format!("the form's schema is not usable: {why}"))?;
    let Some(answer) = content.as_object() else {
        return Err("the answer is not a JSON object".to_string());
    };
    if let Some(extra) = answer
        .keys()
        .find(|name| !form.fields.iter().any(|(n, _)| *n == name.as_str()))
    {
        return Err(format!("{} is not a field of the form", shown(extra)));
    }
    if let Some(missing) = form.required.iter().find(|n| !answer.contains_key(**n)) {
        return Err(format!("{} is required", shown(missing)));
    }
    for (name, field) in &form.fields {
        if let Some(value) = answer.get(*name) {
            check_value(field, value)
                .map_err(|expected| format!("{}: expected {expected}", shown(name)))?;
        }
    }
    Ok(answer.clone())
}

/// What URL mode asks the user to open, as the user should be shown it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlView {
    /// The URL as the parser serialises it: what is shown is what is
    /// opened, never the server's spelling of it.
    pub url: String,
    /// The host the user is sent to, lower-cased as the parser gives it,
    /// without the port.
    pub domain: String,
    /// Whether a label of the host is punycode (`xn--`), including a
    /// Unicode host the parser converted: a possible look-alike.
    pub punycode: bool,
}

/// Judges URL mode's `url`: only an absolute `http` or `https` URL of at
/// most [`MAX_URL_BYTES`], with a non-empty host, no userinfo
/// (`user:pass@host` disguises the real host) and no whitespace or
/// control character. Never fetches anything; the reason never echoes the
/// URL.
pub fn url_view(url: &str) -> Result<UrlView, String> {
    if url.len() > MAX_URL_BYTES {
        return Err(format!("the URL is longer than {MAX_URL_BYTES} bytes"));
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("the URL holds whitespace or a control character".to_string());
    }
    let parsed = Url::parse(url).map_err(|e| format!("the URL is not an absolute URL ({e})"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err("only http and https URLs may be opened".to_string());
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("the URL has userinfo (`user@host`), which disguises its host".to_string());
    }
    let Some(host) = parsed.host_str().filter(|h| !h.is_empty()) else {
        return Err("the URL has no host".to_string());
    };
    let domain = host.to_ascii_lowercase();
    let punycode = domain.split('.').any(|label| label.starts_with("xn--"));
    let url = parsed.as_str().to_string();
    if url.len() > MAX_URL_BYTES {
        return Err(format!("the URL is longer than {MAX_URL_BYTES} bytes"));
    }
    Ok(UrlView {
        url,
        domain,
        punycode,
    })
}

// ---------------------------------------------------------------------------
// The schema, read once into what the answer is checked against
// ---------------------------------------------------------------------------

/// A `requestedSchema` as read: its fields in the schema's order and the
/// names it requires.
struct Form<'a> {
    fields: Vec<(&'a str, Field<'a>)>,
    required: Vec<&'a str>,
}

/// One primitive field of a form.
enum Field<'a> {
    Text {
        min: Option<u64>,
        max: Option<u64>,
        format: Option<Format>,
    },
    /// A single choice: `enum` (with `enumNames`) or `oneOf` of
    /// `{const, title}`; the answer is one of the values.
    Choice(Vec<&'a str>),
    Number {
        integer: bool,
        min: Option<f64>,
        max: Option<f64>,
    },
    Boolean,
    /// A multi-select (`type: "array"`, SEP-1330): distinct values of the
    /// options.
    Multi {
        options: Vec<&'a str>,
        min: Option<u64>,
        max: Option<u64>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Email,
    Uri,
    Date,
    DateTime,
}

/// The keywords every field may carry.
const ANNOTATIONS: &[&str] = &["type", "title", "description", "default"];

fn read_form(schema: &Value) -> Result<Form<'_>, String> {
    let Some(top) = schema.as_object() else {
        return Err("the requested schema is not a JSON object".to_string());
    };
    if let Some(key) = top.keys().find(|k| {
        !matches!(
            k.as_str(),
            "$schema" | "type" | "properties" | "required" | "title" | "description"
        )
    }) {
        return Err(format!(
            "the requested schema has the unsupported keyword {}",
            shown(key)
        ));
    }
    if top.get("type").and_then(Value::as_str) != Some("object") {
        return Err("the requested schema's `type` must be \"object\"".to_string());
    }
    if let Some(key) = ["$schema", "title", "description"]
        .into_iter()
        .find(|k| top.get(*k).is_some_and(|v| !v.is_string()))
    {
        return Err(format!("the requested schema's `{key}` must be a string"));
    }
    let Some(props) = top.get("properties").and_then(Value::as_object) else {
        return Err("the requested schema has no `properties` object".to_string());
    };
    if props.len() > MAX_PROPERTIES {
        return Err(format!(
            "the form asks for {} fields; at most {MAX_PROPERTIES} are allowed",
            props.len()
        ));
    }
    let mut fields = Vec::with_capacity(props.len());
    for (name, prop) in props {
        check_name(name)?;
        let field = read_field(prop).map_err(|why| format!("field {}: {why}", shown(name)))?;
        fields.push((name.as_str(), field));
    }
    let mut required: Vec<&str> = Vec::new();
    match top.get("required") {
        None => {}
        Some(Value::Array(names)) => {
            for name in names {
                let Some(name) = name.as_str() else {
                    return Err("`required` must list field names (strings)".to_string());
                };
                if !props.contains_key(name) {
                    return Err(format!(
                        "`required` names {}, which is not a field",
                        shown(name)
                    ));
                }
                if !required.contains(&name) {
                    required.push(name);
                }
            }
        }
        Some(_) => return Err("`required` must be an array of field names".to_string()),
    }
    Ok(Form { fields, required })
}

fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a field has an empty name".to_string());
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(format!(
            "field name {} is longer than {MAX_NAME_CHARS} characters",
            shown(name)
        ));
    }
    if name.chars().any(char::is_control) {
        return Err(format!(
            "field name {} holds a control character",
            shown(name)
        ));
    }
    Ok(())
}

/// One property's schema, read into a field; the reason does not name the
/// field (the caller does).
fn read_field(prop: &Value) -> Result<Field<'_>, String> {
    let Some(p) = prop.as_object() else {
        return Err("its schema is not a JSON object".to_string());
    };
    if p.contains_key("$ref") {
        return Err("`$ref` is not allowed; a form has primitive fields only".to_string());
    }
    let ty = match p.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(_) => return Err("`type` must be one string".to_string()),
        None => return Err("it has no `type`".to_string()),
    };
    let own: &[&str] = match ty {
        "string" => &[
            "minLength",
            "maxLength",
            "format",
            "enum",
            "enumNames",
            "oneOf",
        ],
        "number" | "integer" => &["minimum", "maximum"],
        "boolean" => &[],
        "array" => &["items", "minItems", "maxItems"],
        "object" => {
            return Err("a nested object; a form has primitive fields only".to_string());
        }
        other => {
            return Err(format!(
                "type {} is not string, number, integer, boolean or array",
                shown(other)
            ));
        }
    };
    if let Some(key) = p
        .keys()
        .find(|k| !ANNOTATIONS.contains(&k.as_str()) && !own.contains(&k.as_str()))
    {
        return Err(format!("unsupported keyword {} for a {ty}", shown(key)));
    }
    if let Some(key) = ["title", "description"]
        .into_iter()
        .find(|k| p.get(*k).is_some_and(|v| !v.is_string()))
    {
        return Err(format!("`{key}` must be a string"));
    }
    let field = match ty {
        "string" => read_string(p)?,
        "number" | "integer" => {
            let min = bound(p, "minimum")?;
            let max = bound(p, "maximum")?;
            if let (Some(lo), Some(hi)) = (min, max) {
                if lo > hi {
                    return Err("`minimum` is above `maximum`".to_string());
                }
            }
            Field::Number {
                integer: ty == "integer",
                min,
                max,
            }
        }
        "boolean" => Field::Boolean,
        _ => read_multi(p)?,
    };
    if let Some(default) = p.get("default") {
        check_value(&field, default)
            .map_err(|expected| format!("its `default` does not fit: expected {expected}"))?;
    }
    Ok(field)
}

fn read_string(p: &Map<String, Value>) -> Result<Field<'_>, String> {
    let names = p.get("enumNames");
    let options = match (p.get("enum"), p.get("oneOf")) {
        (Some(_), Some(_)) => return Err("both `enum` and `oneOf`; one choice only".to_string()),
        (None, None) => {
            if names.is_some() {
                return Err("`enumNames` without `enum`".to_string());
            }
            let min = count(p, "minLength")?;
            let max = count(p, "maxLength")?;
            if let (Some(lo), Some(hi)) = (min, max) {
                if lo > hi {
                    return Err("`minLength` is above `maxLength`".to_string());
                }
            }
            let format = match p.get("format") {
                None => None,
                Some(Value::String(f)) => Some(match f.as_str() {
                    "email" => Format::Email,
                    "uri" => Format::Uri,
                    "date" => Format::Date,
                    "date-time" => Format::DateTime,
                    _ => {
                        return Err(format!(
                            "format {} is not email, uri, date or date-time",
                            shown(f)
                        ));
                    }
                }),
                Some(_) => return Err("`format` must be a string".to_string()),
            };
            return Ok(Field::Text { min, max, format });
        }
        (Some(values), None) => {
            let options = strings(values).ok_or("`enum` must be an array of strings")?;
            if let Some(names) = names {
                let names = strings(names).ok_or("`enumNames` must be an array of strings")?;
                if names.len() != options.len() {
                    return Err("`enumNames` must name each `enum` value once".to_string());
                }
            }
            options
        }
        (None, Some(one_of)) => {
            if names.is_some() {
                return Err("`enumNames` goes with `enum`, not `oneOf`".to_string());
            }
            const_titles(one_of, "oneOf")?
        }
    };
    if let Some(key) = ["minLength", "maxLength", "format"]
        .into_iter()
        .find(|k| p.contains_key(*k))
    {
        return Err(format!("`{key}` does not go with a choice"));
    }
    distinct_options(&options)?;
    Ok(Field::Choice(options))
}

fn read_multi(p: &Map<String, Value>) -> Result<Field<'_>, String> {
    let Some(items) = p.get("items").and_then(Value::as_object) else {
        return Err("a multi-select needs an `items` object".to_string());
    };
    if items.contains_key("$ref") {
        return Err("`$ref` is not allowed; a form has primitive fields only".to_string());
    }
    let options = if let Some(any_of) = items.get("anyOf") {
        if let Some(key) = items.keys().find(|k| k.as_str() != "anyOf") {
            return Err(format!(
                "`items` with `anyOf` has the unsupported keyword {}",
                shown(key)
            ));
        }
        const_titles(any_of, "anyOf")?
    } else {
        if let Some(key) = items
            .keys()
            .find(|k| !matches!(k.as_str(), "type" | "enum"))
        {
            return Err(format!(
                "`items` has the unsupported keyword {}; a multi-select's items are strings \
                 of an `enum` or an `anyOf` of `{{const, title}}`",
                shown(key)
            ));
        }
        if items.get("type").and_then(Value::as_str) != Some("string") {
            return Err("a multi-select's items must be strings of an `enum` \
                        or an `anyOf` of `{const, title}`"
                .to_string());
        }
        let values = items
            .get("enum")
            .ok_or("a multi-select's items need an `enum`")?;
        strings(values).ok_or("`items.enum` must be an array of strings")?
    };
    distinct_options(&options)?;
    let min = count(p, "minItems")?;
    let max = count(p, "maxItems")?;
    if let (Some(lo), Some(hi)) = (min, max) {
        if lo > hi {
            return Err("`minItems` is above `maxItems`".to_string());
        }
    }
    if min.is_some_and(|lo| lo > options.len() as u64) {
        return Err("`minItems` is more than the options offered".to_string());
    }
    Ok(Field::Multi { options, min, max })
}

/// A non-empty array of strings.
fn strings(v: &Value) -> Option<Vec<&str>> {
    let out = v
        .as_array()?
        .iter()
        .map(Value::as_str)
        .collect::<Option<Vec<&str>>>()?;
    (!out.is_empty()).then_some(out)
}

/// A non-empty array of `{const: string, title: string}` and nothing else:
/// the values.
fn const_titles<'a>(v: &'a Value, key: &str) -> Result<Vec<&'a str>, String> {
    let wrong =
        || format!("`{key}` must be a non-empty array of {{\"const\": string, \"title\": string}}");
    let Some(entries) = v.as_array().filter(|a| !a.is_empty()) else {
        return Err(wrong());
    };
    entries
        .iter()
        .map(|entry| {
            let o = entry.as_object().ok_or_else(wrong)?;
            let fits = o.len() == 2 && o.get("title").is_some_and(Value::is_string);
            o.get("const")
                .and_then(Value::as_str)
                .filter(|_| fits)
                .ok_or_else(wrong)
        })
        .collect()
}

fn distinct_options(options: &[&str]) -> Result<(), String> {
    let mut seen: Vec<&str> = options.to_vec();
    seen.sort_unstable();
    seen.dedup();
    if seen.len() == options.len() {
        Ok(())
    } else {
        Err("an option is offered twice".to_string())
    }
}

/// An optional non-negative integer keyword (`minLength`, `maxItems`).
fn count(p: &Map<String, Value>, key: &str) -> Result<Option<u64>, String> {
    match p.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("`{key}` must be a non-negative integer")),
    }
}

/// An optional numeric keyword (`minimum`, `maximum`).
fn bound(p: &Map<String, Value>, key: &str) -> Result<Option<f64>, String> {
    match p.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_f64()
            .map(Some)
            .ok_or_else(|| format!("`{key}` must be a number")),
    }
}

/// A name from a schema or an answer as a reason shows it: in backticks,
/// control characters escaped, at most [`MAX_NAME_CHARS`] characters.
fn shown(name: &str) -> String {
    let mut out: String = name
        .chars()
        .take(MAX_NAME_CHARS)
        .flat_map(char::escape_debug)
        .collect();
    if name.chars().nth(MAX_NAME_CHARS).is_some() {
        out.push('…');
    }
    format!("`{out}`")
}

// ---------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------

/// Whether `v` is an answer `field` accepts; the error is what was expected,
/// written from the schema alone (never from `v`).
fn check_value(field: &Field<'_>, v: &Value) -> Result<(), String> {
    match field {
        Field::Text { min, max, format } => {
            let Some(s) = v.as_str() else {
                return Err("a string".to_string());
            };
            let len = s.chars().count() as u64;
            if let Some(min) = min.filter(|m| len < *m) {
                return Err(format!("at least {min} characters"));
            }
            if let Some(max) = max.filter(|m| len > *m) {
                return Err(format!("at most {max} characters"));
            }
            match format {
                Some(Format::Email) if !is_email(s) => {
                    Err("an email address (one `@`, a domain with a dot)".to_string())
                }
                Some(Format::Uri) if !is_uri(s) => Err("an absolute URI with a scheme".to_string()),
                Some(Format::Date) if !is_date(s.as_bytes()) => {
                    Err("a date (YYYY-MM-DD)".to_string())
                }
                Some(Format::DateTime) if !is_date_time(s.as_bytes()) => {
                    Err("an RFC 3339 date-time".to_string())
                }
                _ => Ok(()),
            }
        }
        Field::Choice(options) => match v.as_str() {
            Some(s) if options.contains(&s) => Ok(()),
            _ => Err(format!("one of the {} options offered", options.len())),
        },
        Field::Number { integer, min, max } => {
            let Some(x) = v.as_f64() else {
                return Err(if *integer { "an integer" } else { "a number" }.to_string());
            };
            if *integer && !is_integral(v) {
                return Err("an integer".to_string());
            }
            if let Some(min) = min.filter(|m| x < *m) {
                return Err(format!("a number of at least {min}"));
            }
            if let Some(max) = max.filter(|m| x > *m) {
                return Err(format!("a number of at most {max}"));
            }
            Ok(())
        }
        Field::Boolean => {
            if v.is_boolean() {
                Ok(())
            } else {
                Err("true or false".to_string())
            }
        }
        Field::Multi { options, min, max } => {
            let expected = || "an array of the options offered, each at most once".to_string();
            let Some(items) = v.as_array() else {
                return Err(expected());
            };
            let mut chosen: Vec<&str> = Vec::with_capacity(items.len());
            for item in items {
                match item.as_str() {
                    Some(s) if options.contains(&s) && !chosen.contains(&s) => chosen.push(s),
                    _ => return Err(expected()),
                }
            }
            let n = chosen.len() as u64;
            if let Some(min) = min.filter(|m| n < *m) {
                return Err(format!("at least {min} options chosen"));
            }
            if let Some(max) = max.filter(|m| n > *m) {
                return Err(format!("at most {max} options chosen"));
            }
            Ok(())
        }
    }
}

fn is_integral(v: &Value) -> bool {
    v.is_i64()
        || v.is_u64()
        || v.as_f64()
            .is_some_and(|x| x.is_finite() && x.fract() == 0.0)
}

fn has_space_or_control(s: &str) -> bool {
    s.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// Exactly one `@`, a non-empty local part, a domain of dot-separated
/// non-empty labels with at least one dot; no whitespace.
fn is_email(s: &str) -> bool {
    if has_space_or_control(s) {
        return false;
    }
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.contains('@')
        && domain.contains('.')
        && domain.split('.').all(|label| !label.is_empty())
}

/// An absolute URI: it parses with a scheme (the parser refuses a
/// relative reference without a base); no whitespace, which the parser
/// would otherwise drop silently.
fn is_uri(s: &str) -> bool {
    !has_space_or_control(s) && Url::parse(s).is_ok()
}

/// `YYYY-MM-DD`, a real calendar date.
fn is_date(b: &[u8]) -> bool {
    let [y0, y1, y2, y3, b'-', m0, m1, b'-', d0, d1] = b else {
        return false;
    };
    let (Some(year), Some(month), Some(day)) = (
        digits(&[*y0, *y1, *y2, *y3]),
        digits(&[*m0, *m1]),
        digits(&[*d0, *d1]),
    ) else {
        return false;
    };
    (1..=12).contains(&month) && day >= 1 && day <= days_in_month(year, month)
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// RFC 3339 §5.6 `date-time`: `full-date "T" full-time`, `T` and `Z` in
/// either case, optional fractional seconds, `Z` or a numeric offset;
/// second 60 allowed (a leap second).
fn is_date_time(b: &[u8]) -> bool {
    let (Some(date), Some(rest)) = (b.get(..10), b.get(10..)) else {
        return false;
    };
    let [b'T' | b't', h0, h1, b':', m0, m1, b':', s0, s1, rest @ ..] = rest else {
        return false;
    };
    let (Some(hour), Some(minute), Some(second)) = (
        digits(&[*h0, *h1]),
        digits(&[*m0, *m1]),
        digits(&[*s0, *s1]),
    ) else {
        return false;
    };
    if !is_date(date) || hour > 23 || minute > 59 || second > 60 {
        return false;
    }
    let offset = match rest {
        [b'.', frac @ ..] => {
            let n = frac.iter().take_while(|c| c.is_ascii_digit()).count();
            if n == 0 {
                return false;
            }
            &frac[n..]
        }
        _ => rest,
    };
    match offset {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', h0, h1, b':', m0, m1] => {
            let (hour, minute) = (digits(&[*h0, *h1]), digits(&[*m0, *m1]));
            hour.is_some_and(|h| h <= 23) && minute.is_some_and(|m| m <= 59)
        }
        _ => false,
    }
}

/// The number a run of ASCII digits spells; `None` if any byte is not one.
fn digits(b: &[u8]) -> Option<u32> {
    b.iter().try_fold(0u32, |n, &c| {
        c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
    })
}

// ---------------------------------------------------------------------------
// Sensitive information
// ---------------------------------------------------------------------------

/// Words that ask for a secret wherever they appear (a single word, or two
/// adjacent words written together: `pass_phrase` is `passphrase`).
const SECRET_WORDS: &[&str] = &[
    "password",
    "passwords",
    "passwd",
    "passphrase",
    "passcode",
    "pwd",
    "secret",
    "bearer",
    "apikey",
    "accesstoken",
    "authtoken",
    "refreshtoken",
    "sessiontoken",
    "apitoken",
    "idtoken",
    "privatekey",
    "credential",
    "credentials",
    "creditcard",
    "cardnumber",
    "securitycode",
    "socialsecurity",
    "cvv",
    "cvc",
    "iban",
    "ssn",
    "pincode",
    "pinnumber",
];

/// Words that ask for a secret in a field's name or title, too ambiguous
/// in prose ("the token budget", "pin it to the top").
const LABEL_WORDS: &[&str] = &["token", "pin"];

/// After "token", a word that makes it a model's tokens, not a credential.
const TOKEN_COUNTS: &[&str] = &[
    "count", "counts", "limit", "limits", "budget", "usage", "length", "size",
];

/// Korean, matched as substrings (a particle is written onto the noun):
/// password, card number, resident registration number, security code.
const SECRET_HANGUL: &[&str] = &[
    "비밀번호",
    "패스워드",
    "카드번호",
    "주민등록번호",
    "보안코드",
];

fn asks_secret(name: &str, prop: &Value) -> bool {
    let text = |key: &str| prop.get(key).and_then(Value::as_str);
    text("format").is_some_and(|f| f.eq_ignore_ascii_case("password"))
        || names_secret(name, true)
        || text("title").is_some_and(|t| names_secret(t, true))
        || text("description").is_some_and(|d| names_secret(d, false))
}

/// Whether `text` names a secret; `label` is a name or title, where the
/// ambiguous [`LABEL_WORDS`] count too.
fn names_secret(text: &str, label: bool) -> bool {
    if SECRET_HANGUL.iter().any(|w| text.contains(w)) {
        return true;
    }
    let words = words(text);
    let is = |w: &str, list: &[&str]| list.contains(&w);
    words.iter().enumerate().any(|(i, w)| {
        let next = words.get(i + 1).map(String::as_str);
        if is(w, SECRET_WORDS) || next.is_some_and(|n| is(&format!("{w}{n}"), SECRET_WORDS)) {
            return true;
        }
        label && is(w, LABEL_WORDS) && !(w == "token" && next.is_some_and(|n| is(n, TOKEN_COUNTS)))
    })
}

/// The lower-cased words of `text`: split at anything not a letter or a
/// digit, at a camelCase step (`apiKey`, `APIKey`) and between letters and
/// digits (`cvv2`).
fn words(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            continue;
        }
        let prev = i.checked_sub(1).and_then(|j| chars.get(j)).copied();
        let next = chars.get(i + 1).copied();
        let step = prev.is_some_and(|p| {
            (p.is_lowercase() && c.is_uppercase())
                || (p.is_uppercase() && c.is_uppercase() && next.is_some_and(char::is_lowercase))
                || (p.is_alphabetic() && c.is_numeric())
                || (p.is_numeric() && c.is_alphabetic())
        });
        if step && !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// Every kind of field the spec allows.
    fn full_schema() -> Value {
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "title": "Booking",
            "description": "Who is coming",
            "properties": {
                "name": {"type": "string", "title": "Name", "minLength": 1, "maxLength": 20},
                "email": {"type": "string", "format": "email"},
                "site": {"type": "string", "format": "uri"},
                "day": {"type": "string", "format": "date"},
                "at": {"type": "string", "format": "date-time"},
                "age": {"type": "integer", "minimum": 0, "maximum": 150},
                "score": {"type": "number", "minimum": -1.5, "maximum": 1.5, "default": 0.5},
                "agree": {"type": "boolean", "default": false},
                "size": {"type": "string", "enum": ["s", "m", "l"], "enumNames": ["Small", "Medium", "Large"]},
                "colour": {"type": "string", "oneOf": [
                    {"const": "#f00", "title": "Red"},
                    {"const": "#0f0", "title": "Green"}
                ], "default": "#f00"},
                "tags": {"type": "array", "minItems": 1, "maxItems": 2,
                         "items": {"type": "string", "enum": ["a", "b", "c"]}},
                "pets": {"type": "array",
                         "items": {"anyOf": [{"const": "cat", "title": "Cat"}, {"const": "dog", "title": "Dog"}]},
                         "default": ["cat"]}
            },
            "required": ["name", "email"]
        })
    }

    fn good_answer() -> Value {
        json!({
            "name": "Ada",
            "email": "ada@example.org",
            "site": "https://example.org/ada",
            "day": "2024-02-29",
            "at": "2024-02-29T23:59:60.123+09:00",
            "age": 36,
            "score": 1.5,
            "agree": true,
            "size": "m",
            "colour": "#0f0",
            "tags": ["a", "c"],
            "pets": []
        })
    }

    fn with_property(prop: Value) -> Value {
        json!({"type": "object", "properties": {"field": prop}})
    }

    fn schema_err(schema: Value) -> String {
        match check_schema(&schema) {
            Ok(()) => panic!("accepted {schema}"),
            Err(e) => e,
        }
    }

    // -- check_schema -------------------------------------------------------

    #[test]
    fn accepts_every_kind_of_field_the_spec_allows() {
        assert_eq!(check_schema(&full_schema()), Ok(()));
        assert_eq!(
            check_schema(&json!({"type": "object", "properties": {}})),
            Ok(())
        );
        for prop in [
            json!({"type": "string"}),
            json!({"type": "string", "enum": ["x"]}),
            json!({"type": "number"}),
            json!({"type": "integer", "minimum": 1, "maximum": 1, "default": 1}),
            json!({"type": "boolean", "title": "Sure?", "description": "…"}),
            json!({"type": "array", "items": {"type": "string", "enum": ["x"]}, "maxItems": 0}),
        ] {
            assert_eq!(check_schema(&with_property(prop.clone())), Ok(()), "{prop}");
        }
    }

    #[test]
    fn refuses_a_schema_that_is_not_a_flat_object() {
        for (schema, reason) in [
            (json!([]), "not a JSON object"),
            (json!({"properties": {}}), "`type`"),
            (json!({"type": "array", "properties": {}}), "`type`"),
            (json!({"type": "object"}), "`properties`"),
            (json!({"type": "object", "properties": []}), "`properties`"),
            (
                json!({"type": "object", "properties": {}, "additionalProperties": false}),
                "`additionalProperties`",
            ),
            (
                json!({"type": "object", "properties": {}, "$defs": {}}),
                "`$defs`",
            ),
            (
                json!({"type": "object", "properties": {}, "title": 3}),
                "`title`",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": "a"}),
                "`required`",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}),
                "`b`",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": [1]}),
                "`required`",
            ),
        ] {
            let err = schema_err(schema.clone());
            assert!(err.contains(reason), "{schema}: {err}");
        }
    }

    #[test]
    fn refuses_a_field_the_spec_does_not_allow_and_names_it() {
        for (prop, reason) in [
            (json!("string"), "not a JSON object"),
            (json!({"title": "x"}), "no `type`"),
            (json!({"type": ["string", "null"]}), "one string"),
            (json!({"type": "object", "properties": {}}), "nested object"),
            (json!({"$ref": "#/$defs/Address"}), "`$ref`"),
            (json!({"type": "string", "$ref": "#/x"}), "`$ref`"),
            (json!({"type": "null"}), "`null`"),
            (json!({"type": "string", "pattern": "^a"}), "`pattern`"),
            (json!({"type": "integer", "multipleOf": 2}), "`multipleOf`"),
            (json!({"type": "boolean", "enum": [true]}), "`enum`"),
            (json!({"type": "string", "title": 1}), "`title`"),
            (
                json!({"type": "string", "format": "password"}),
                "format `password`",
            ),
            (json!({"type": "string", "format": 1}), "`format`"),
            (json!({"type": "string", "minLength": -1}), "`minLength`"),
            (json!({"type": "string", "maxLength": 2.5}), "`maxLength`"),
            (
                json!({"type": "string", "minLength": 3, "maxLength": 2}),
                "above",
            ),
            (json!({"type": "number", "minimum": "0"}), "`minimum`"),
            (
                json!({"type": "number", "minimum": 2, "maximum": 1}),
                "above",
            ),
            (json!({"type": "string", "enum": []}), "`enum`"),
            (json!({"type": "string", "enum": ["a", 1]}), "`enum`"),
            (json!({"type": "string", "enum": ["a", "a"]}), "twice"),
            (
                json!({"type": "string", "enum": ["a"], "enumNames": ["A", "B"]}),
                "`enumNames`",
            ),
            (json!({"type": "string", "enumNames": ["A"]}), "`enumNames`"),
            (
                json!({"type": "string", "enum": ["a"], "maxLength": 3}),
                "`maxLength`",
            ),
            (
                json!({"type": "string", "enum": ["a"], "oneOf": [{"const": "a", "title": "A"}]}),
                "both",
            ),
            (
                json!({"type": "string", "oneOf": [{"const": "a"}]}),
                "`oneOf`",
            ),
            (
                json!({"type": "string", "oneOf": [{"const": "a", "title": "A", "x": 1}]}),
                "`oneOf`",
            ),
            (
                json!({"type": "string", "oneOf": [{"const": 1, "title": "A"}]}),
                "`oneOf`",
            ),
            (json!({"type": "string", "oneOf": []}), "`oneOf`"),
            (json!({"type": "array"}), "`items`"),
            (
                json!({"type": "array", "items": {"type": "object", "properties": {}}}),
                "`properties`",
            ),
            (
                json!({"type": "array", "items": {"type": "integer", "enum": [1]}}),
                "items",
            ),
            (
                json!({"type": "array", "items": {"type": "string"}}),
                "`enum`",
            ),
            (json!({"type": "array", "items": {"$ref": "#/x"}}), "`$ref`"),
            (
                json!({"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}], "type": "string"}}),
                "`type`",
            ),
            (
                json!({"type": "array", "items": {"type": "string", "enum": ["a"]}, "minItems": 2}),
                "`minItems`",
            ),
            (
                json!({"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "minItems": 2, "maxItems": 1}),
                "above",
            ),
            (json!({"type": "string", "default": 3}), "`default`"),
            (
                json!({"type": "string", "enum": ["a"], "default": "b"}),
                "`default`",
            ),
            (
                json!({"type": "integer", "maximum": 3, "default": 4}),
                "`default`",
            ),
            (json!({"type": "integer", "default": 1.5}), "`default`"),
            (json!({"type": "boolean", "default": "yes"}), "`default`"),
            (
                json!({"type": "array", "items": {"type": "string", "enum": ["a"]}, "default": ["b"]}),
                "`default`",
            ),
        ] {
            let err = schema_err(with_property(prop.clone()));
            assert!(err.contains("`field`"), "{prop}: {err}");
            assert!(err.contains(reason), "{prop}: {err}");
        }
    }

    #[test]
    fn bounds_the_number_of_fields_and_their_names() {
        let props = |n: usize| -> Map<String, Value> {
            (0..n)
                .map(|i| (format!("f{i}"), json!({"type": "boolean"})))
                .collect()
        };
        let schema = |props: Map<String, Value>| json!({"type": "object", "properties": props});
        assert_eq!(check_schema(&schema(props(MAX_PROPERTIES))), Ok(()));
        assert!(schema_err(schema(props(MAX_PROPERTIES + 1))).contains("at most 50"));

        let named = |name: &str| {
            let mut p = Map::new();
            p.insert(name.to_string(), json!({"type": "boolean"}));
            schema(p)
        };
        assert_eq!(check_schema(&named(&"ж".repeat(MAX_NAME_CHARS))), Ok(()));
        let long = "n".repeat(MAX_NAME_CHARS + 1);
        let err = schema_err(named(&long));
        assert!(err.contains("longer than 64"), "{err}");
        assert!(!err.contains(&long), "the name is shown cut: {err}");
        assert!(schema_err(named("")).contains("empty name"));
        assert!(schema_err(named("a\u{7}b")).contains("control character"));
    }

    // -- secret_field -------------------------------------------------------

    fn secret_of_name(name: &str) -> Option<String> {
        let mut props = Map::new();
        props.insert(name.to_string(), json!({"type": "string"}));
        secret_field(&json!({"type": "object", "properties": props}))
    }

    #[test]
    fn finds_a_field_named_for_a_secret() {
        for name in [
            "password",
            "Password",
            "PASSWORD",
            "passwd",
            "pwd",
            "pass_phrase",
            "passPhrase",
            "passphrase",
            "pass-word",
            "passcode",
            "pin",
            "PIN",
            "pin_code",
            "api_key",
            "apiKey",
            "APIKey",
            "x-api-key",
            "apikey",
            "secret",
            "clientSecret",
            "client_secret",
            "access_token",
            "accessToken",
            "accesstoken",
            "token",
            "githubToken",
            "bearer",
            "private_key",
            "privateKey",
            "credit_card",
            "creditCardNumber",
            "card_number",
            "cvv",
            "cvv2",
            "CVC",
            "iban",
            "ssn",
            "userPassword",
            "db-password",
            "credentials",
        ] {
            assert_eq!(secret_of_name(name).as_deref(), Some(name), "{name}");
        }
    }

    #[test]
    fn does_not_take_look_alike_words_for_secrets() {
        for name in [
            "email",
            "tokenizer_mode",
            "tokenizer",
            "keyboard",
            "keyBoard",
            "username",
            "name",
            "passenger",
            "pass",
            "compass",
            "bypass_cache",
            "pinned",
            "spinner",
            "opinion",
            "pineapple",
            "secretary",
            "max_tokens",
            "token_count",
            "tokenLimit",
            "key",
            "monkey",
            "card_title",
            "credit_score",
            "description",
            "happiness",
            "session_id",
            "access_level",
            "private_note",
            "ibanez",
        ] {
            assert_eq!(secret_of_name(name), None, "{name}");
        }
    }

    #[test]
    fn reads_the_title_the_description_and_a_password_format() {
        let one = |prop: Value| secret_field(&with_property(prop));
        let hit = Some("field".to_string());
        assert_eq!(
            one(json!({"type": "string", "title": "Your Password"})),
            hit
        );
        assert_eq!(one(json!({"type": "string", "title": "PIN"})), hit);
        assert_eq!(one(json!({"type": "string", "title": "Token"})), hit);
        assert_eq!(
            one(
                json!({"type": "string", "description": "Paste your GitHub personal access token."})
            ),
            hit
        );
        assert_eq!(
            one(json!({"type": "string", "description": "The card's security code (3 digits)"})),
            hit
        );
        assert_eq!(
            one(json!({"type": "string", "description": "Your API-Key"})),
            hit
        );
        assert_eq!(one(json!({"type": "string", "format": "Password"})), hit);
        assert_eq!(
            one(json!({"type": "string", "title": "비밀번호를 입력하세요"})),
            hit
        );
        assert_eq!(
            one(json!({"type": "string", "description": "카드번호 16자리"})),
            hit
        );

        // Ambiguous words in prose are not a secret; nor is a harmless title.
        assert_eq!(
            one(json!({"type": "integer", "description": "The token budget for the answer"})),
            None
        );
        assert_eq!(
            one(json!({"type": "boolean", "description": "Pin the result to the top of the list"})),
            None
        );
        assert_eq!(
            one(json!({
                "type": "string",
                "title": "Email",
                "description": "Where we send the keyboard manual",
                "format": "email"
            })),
            None
        );
    }

    #[test]
    fn names_the_first_secret_field_by_name_and_reads_any_json() {
        let schema = json!({"type": "object", "properties": {
            "z_password": {"type": "string"},
            "name": {"type": "string"},
            "a_secret": {"type": "string"}
        }});
        assert_eq!(secret_field(&schema).as_deref(), Some("a_secret"));
        assert_eq!(secret_field(&full_schema()), None);
        assert_eq!(secret_field(&json!(null)), None);
        assert_eq!(secret_field(&json!({"properties": []})), None);
        assert_eq!(
            secret_field(&json!({"properties": {"password": 3}})).as_deref(),
            Some("password")
        );
    }

    #[test]
    fn splits_words_at_case_steps_separators_and_digits() {
        assert_eq!(words("APIKey"), ["api", "key"]);
        assert_eq!(words("apiKey"), ["api", "key"]);
        assert_eq!(words("creditCardNumber"), ["credit", "card", "number"]);
        assert_eq!(words("pass_phrase-x y"), ["pass", "phrase", "x", "y"]);
        assert_eq!(words("cvv2"), ["cvv", "2"]);
        assert_eq!(words("oauth2Token"), ["oauth", "2", "token"]);
        assert_eq!(words("  "), Vec::<String>::new());
    }

    // -- validate -----------------------------------------------------------

    fn answer_err(content: Value) -> String {
        match validate(&full_schema(), &content) {
            Ok(_) => panic!("accepted {content}"),
            Err(e) => e,
        }
    }

    fn with_answer(name: &str, value: Value) -> Value {
        let mut a = good_answer();
        if let Some(o) = a.as_object_mut() {
            o.insert(name.to_string(), value);
        }
        a
    }

    #[test]
    fn accepts_a_good_answer_as_it_is() {
        let answer = good_answer();
        let out = validate(&full_schema(), &answer);
        assert_eq!(out.as_ref().ok(), answer.as_object());
        // Only the required fields.
        let min = json!({"name": "A", "email": "a@b.co"});
        assert_eq!(
            validate(&full_schema(), &min).ok().as_ref(),
            min.as_object()
        );
    }

    #[test]
    fn refuses_a_missing_required_or_an_unknown_field() {
        assert!(answer_err(json!([])).contains("not a JSON object"));
        assert!(answer_err(json!("name")).contains("not a JSON object"));
        assert_eq!(answer_err(json!({"name": "A"})), "`email` is required");
        assert_eq!(
            answer_err(with_answer("extra", json!(1))),
            "`extra` is not a field of the form"
        );
    }

    #[test]
    fn refuses_a_value_of_the_wrong_type_or_out_of_bounds() {
        for (name, value, expected) in [
            ("name", json!(1), "`name`: expected a string"),
            ("name", json!(""), "`name`: expected at least 1 characters"),
            (
                "name",
                json!("x".repeat(21)),
                "`name`: expected at most 20 characters",
            ),
            ("age", json!("36"), "`age`: expected an integer"),
            ("age", json!(36.5), "`age`: expected an integer"),
            ("age", json!(-1), "`age`: expected a number of at least 0"),
            ("age", json!(151), "`age`: expected a number of at most 150"),
            ("age", json!(null), "`age`: expected an integer"),
            ("score", json!(true), "`score`: expected a number"),
            (
                "score",
                json!(1.6),
                "`score`: expected a number of at most 1.5",
            ),
            (
                "score",
                json!(-2),
                "`score`: expected a number of at least -1.5",
            ),
            ("agree", json!("true"), "`agree`: expected true or false"),
            (
                "size",
                json!("Small"),
                "`size`: expected one of the 3 options offered",
            ),
            (
                "size",
                json!(["s"]),
                "`size`: expected one of the 3 options offered",
            ),
            (
                "colour",
                json!("Red"),
                "`colour`: expected one of the 2 options offered",
            ),
            (
                "tags",
                json!("a"),
                "`tags`: expected an array of the options offered, each at most once",
            ),
            (
                "tags",
                json!(["a", "a"]),
                "`tags`: expected an array of the options offered, each at most once",
            ),
            (
                "tags",
                json!(["d"]),
                "`tags`: expected an array of the options offered, each at most once",
            ),
            (
                "tags",
                json!([1]),
                "`tags`: expected an array of the options offered, each at most once",
            ),
            (
                "tags",
                json!([]),
                "`tags`: expected at least 1 options chosen",
            ),
            (
                "tags",
                json!(["a", "b", "c"]),
                "`tags`: expected at most 2 options chosen",
            ),
            (
                "pets",
                json!(["Cat"]),
                "`pets`: expected an array of the options offered, each at most once",
            ),
        ] {
            assert_eq!(
                answer_err(with_answer(name, value.clone())),
                expected,
                "{name} = {value}"
            );
        }
        // Integral floats are integers; lengths count characters, not bytes.
        assert!(validate(&full_schema(), &with_answer("age", json!(36.0))).is_ok());
        assert!(validate(&full_schema(), &with_answer("name", json!("가".repeat(20)))).is_ok());
        assert!(validate(&full_schema(), &with_answer("pets", json!(["dog", "cat"]))).is_ok());
    }

    #[test]
    fn checks_the_string_formats() {
        let ok =
            |name: &str, v: &str| validate(&full_schema(), &with_answer(name, json!(v))).is_ok();
        for v in ["a@b.co", "first.last+tag@mail.example.org", "ü@bücher.de"] {
            assert!(ok("email", v), "{v}");
        }
        for v in [
            "", "ab.co", "@b.co", "a@", "a@b", "a@b@c.co", "a@.co", "a@b.", "a@b..co", "a b@c.co",
            "a@b.co\n",
        ] {
            assert!(!ok("email", v), "{v}");
        }
        for v in [
            "https://example.org",
            "mailto:a@b.co",
            "urn:isbn:0451450523",
            "file:///tmp/x",
        ] {
            assert!(ok("site", v), "{v}");
        }
        for v in [
            "",
            "/relative/path",
            "example.org",
            "//example.org/x",
            "https://exa mple.org",
            " https://example.org",
        ] {
            assert!(!ok("site", v), "{v}");
        }
        for v in ["2024-02-29", "2000-02-29", "1999-12-31", "0001-01-01"] {
            assert!(ok("day", v), "{v}");
        }
        for v in [
            "2023-02-29",
            "1900-02-29",
            "2023-04-31",
            "2023-13-01",
            "2023-00-10",
            "2023-01-00",
            "2023-1-01",
            "23-01-01",
            "2023/01/01",
            "2023-01-01T00:00:00Z",
            "２０２３-01-01",
            "",
        ] {
            assert!(!ok("day", v), "{v}");
        }
        for v in [
            "2024-02-29T23:59:59Z",
            "2024-02-29t23:59:59z",
            "2024-02-29T00:00:00+09:00",
            "2024-02-29T00:00:00-00:30",
            "2024-02-29T00:00:00.5Z",
            "2024-02-29T00:00:00.123456789+01:00",
            "2016-12-31T23:59:60Z",
        ] {
            assert!(ok("at", v), "{v}");
        }
        for v in [
            "2024-02-29",
            "2024-02-29 00:00:00Z",
            "2024-02-29T24:00:00Z",
            "2024-02-29T00:60:00Z",
            "2024-02-29T00:00:61Z",
            "2024-02-29T00:00:00",
            "2024-02-29T00:00:00.Z",
            "2024-02-29T00:00:00+0900",
            "2024-02-29T00:00:00+24:00",
            "2024-02-29T00:00Z",
            "2023-02-29T00:00:00Z",
            "2024-02-29T00:00:00Zjunk",
            "2024-02-29T00:00:00ü",
        ] {
            assert!(!ok("at", v), "{v}");
        }
    }

    #[test]
    fn never_echoes_the_submitted_value() {
        let secret = "hunter2-Sup3r$ecret";
        for (name, value) in [
            ("email", json!(secret)),
            ("site", json!(secret)),
            ("day", json!(secret)),
            ("at", json!(secret)),
            ("size", json!(secret)),
            ("colour", json!(secret)),
            ("tags", json!([secret])),
            ("pets", json!(["cat", secret])),
            ("name", json!(secret.repeat(3))),
            ("age", json!(secret)),
            ("agree", json!({"nested": secret})),
        ] {
            let err = answer_err(with_answer(name, value));
            assert!(!err.contains("hunter2"), "{name}: {err}");
            assert!(err.contains(&format!("`{name}`")), "{name}: {err}");
        }
        for (name, value) in [
            ("age", json!(987_654)),
            ("age", json!(98.765_432_1)),
            ("score", json!(-987_654.25)),
        ] {
            let err = answer_err(with_answer(name, value.clone()));
            assert!(
                !err.contains("987") && !err.contains("765"),
                "{name}: {err}"
            );
        }
    }

    #[test]
    fn refuses_an_answer_to_a_schema_it_cannot_use() {
        let err = validate(
            &json!({"type": "object", "properties": {"a": {"$ref": "#/x"}}}),
            &json!({}),
        );
        assert!(err.is_err_and(|e| e.contains("not usable") && e.contains("`a`")));
        assert!(validate(&json!(null), &json!({})).is_err());
    }

    // -- url_view -----------------------------------------------------------

    #[test]
    fn views_an_http_url_by_its_parsed_host() {
        let view = url_view("https://example.com/path?q=1#top");
        assert_eq!(
            view,
            Ok(UrlView {
                url: "https://example.com/path?q=1#top".to_string(),
                domain: "example.com".to_string(),
                punycode: false,
            })
        );
        let view = url_view("HTTP://Sub.EXAMPLE.com:8443");
        assert_eq!(
            view,
            Ok(UrlView {
                url: "http://sub.example.com:8443/".to_string(),
                domain: "sub.example.com".to_string(),
                punycode: false,
            })
        );
        // A backslash is a slash to the parser and to a browser: the host is
        // the one before it, and the shown URL is the parsed one.
        let view = url_view("https://example.com\\@evil.test/");
        assert_eq!(view.as_ref().map(|v| v.domain.as_str()), Ok("example.com"));
        assert_eq!(
            view.map(|v| v.url),
            Ok("https://example.com/@evil.test/".to_string())
        );
        // An empty userinfo disguises nothing: the parser drops it.
        assert_eq!(
            url_view("https://@example.com/").map(|v| (v.url, v.domain)),
            Ok((
                "https://example.com/".to_string(),
                "example.com".to_string()
            ))
        );
        assert_eq!(
            url_view("http://127.0.0.1:8080/x").map(|v| v.domain),
            Ok("127.0.0.1".to_string())
        );
        assert_eq!(
            url_view("https://[::1]/").map(|v| v.domain),
            Ok("[::1]".to_string())
        );
    }

    #[test]
    fn marks_a_punycode_host_also_when_the_parser_made_it() {
        // "раураl" in Cyrillic letters: looks like "paypal".
        let view = url_view("https://раураl.com/login");
        let Ok(view) = view else {
            panic!("{view:?}");
        };
        assert!(view.punycode);
        assert!(view.domain.starts_with("xn--"), "{}", view.domain);
        assert!(view.domain.ends_with(".com"));
        assert!(view.url.starts_with("https://xn--"), "{}", view.url);

        assert!(url_view("https://XN--80AK6AA92E.com/")
            .is_ok_and(|v| v.punycode && v.domain == "xn--80ak6aa92e.com"));
        assert!(url_view("https://login.xn--80ak6aa92e.example/").is_ok_and(|v| v.punycode));
        assert!(url_view("https://bücher.de/").is_ok_and(|v| v.punycode));
        assert!(url_view("https://axn--b.example/").is_ok_and(|v| !v.punycode));
    }

    #[test]
    fn refuses_other_schemes_userinfo_no_host_and_long_urls() {
        for (url, reason) in [
            ("javascript:alert(document.cookie)", "only http and https"),
            ("JavaScript:alert(1)", "only http and https"),
            (
                "data:text/html,<script>alert(1)</script>",
                "only http and https",
            ),
            ("file:///etc/passwd", "only http and https"),
            ("ftp://example.com/x", "only http and https"),
            ("mailto:a@example.com", "only http and https"),
            ("ws://example.com/", "only http and https"),
            ("example.com/login", "not an absolute URL"),
            ("//example.com/login", "not an absolute URL"),
            ("/login", "not an absolute URL"),
            ("", "not an absolute URL"),
            ("https://", "not an absolute URL"),
            ("https:///", "not an absolute URL"),
            ("https://user:pass@example.com/", "userinfo"),
            ("https://paypal.com@evil.test/", "userinfo"),
            ("https://user@example.com/", "userinfo"),
            ("https://:pass@example.com/", "userinfo"),
            ("https://exa mple.com/", "whitespace"),
            (" https://example.com/", "whitespace"),
            ("https://example.com/\n", "whitespace"),
            ("https://exam\tple.com/", "whitespace"),
            ("https://example.com/\u{0}", "control"),
        ] {
            match url_view(url) {
                Ok(view) => panic!("{url:?} accepted as {view:?}"),
                Err(e) => {
                    assert!(e.contains(reason), "{url:?}: {e}");
                    assert!(!e.contains("evil") && !e.contains("pass@"), "{url:?}: {e}");
                }
            }
        }
        let at_limit = format!("https://example.com/{}", "a".repeat(MAX_URL_BYTES - 20));
        assert_eq!(at_limit.len(), MAX_URL_BYTES);
        assert!(url_view(&at_limit).is_ok());
        let over = format!("{at_limit}a");
        assert!(url_view(&over).is_err_and(|e| e.contains("longer than 2048")));
    }

    // -- never panics -------------------------------------------------------

    const KEYS: &[&str] = &[
        "type",
        "properties",
        "required",
        "enum",
        "enumNames",
        "oneOf",
        "anyOf",
        "items",
        "const",
        "title",
        "description",
        "default",
        "format",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "$ref",
        "$schema",
        "name",
        "age",
        "tags",
        "email",
    ];
    const WORDS: &[&str] = &[
        "object",
        "string",
        "number",
        "integer",
        "boolean",
        "array",
        "email",
        "uri",
        "date",
        "date-time",
        "a",
        "b",
        "name",
        "age",
        "2024-02-29",
        "2024-02-29T00:00:00Z",
        "a@b.co",
        "https://x.y",
    ];

    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            (-3i64..200).prop_map(Value::from),
            prop::sample::select(WORDS).prop_map(Value::from),
            any::<String>().prop_map(Value::from),
        ];
        leaf.prop_recursive(5, 96, 8, |inner| {
            let key = prop_oneof![
                3 => prop::sample::select(KEYS).prop_map(str::to_string),
                1 => any::<String>(),
            ];
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map(key, inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn answer() -> impl Strategy<Value = Value> {
        let names = prop::sample::select(vec![
            "name", "email", "site", "day", "at", "age", "score", "agree", "size", "colour",
            "tags", "pets",
        ]);
        prop::collection::btree_map(names.prop_map(str::to_string), json(), 0..12)
            .prop_map(|m| Value::Object(m.into_iter().collect()))
    }

    proptest! {
        #[test]
        fn validate_never_panics_on_any_json(schema in json(), content in json()) {
            let checked = check_schema(&schema);
            let validated = validate(&schema, &content);
            if checked.is_err() {
                prop_assert!(validated.is_err());
            }
            let _ = validate(&full_schema(), &content);
            let _ = secret_field(&schema);
            let _ = secret_field(&content);
        }

        #[test]
        fn validate_returns_the_answer_or_a_reason_without_its_strings(
            content in answer(),
            planted in "[A-Za-z0-9@.:/ -]{0,12}",
        ) {
            let schema = full_schema();
            // Plant a marked string into every string slot of the answer.
            let marked = format!("🔑{planted}");
            let content = match content {
                Value::Object(o) => Value::Object(
                    o.into_iter()
                        .map(|(k, v)| {
                            let v = if v.is_string() { Value::from(marked.clone()) } else { v };
                            (k, v)
                        })
                        .collect(),
                ),
                other => other,
            };
            match validate(&schema, &content) {
                Ok(out) => prop_assert_eq!(Some(&out), content.as_object()),
                Err(e) => prop_assert!(!e.contains('🔑'), "{}", e),
            }
        }

        #[test]
        fn url_view_never_panics_and_keeps_its_promises(s in prop_oneof![
            any::<String>(),
            "(https?|javascript|data|file)://[a-zA-Z0-9@:.\\[\\]%/?#-]{0,40}",
            "https://[^ ]{0,20}",
        ]) {
            if let Ok(view) = url_view(&s) {
                prop_assert!(view.url.starts_with("http://") || view.url.starts_with("https://"));
                prop_assert!(!view.domain.is_empty());
                prop_assert!(view.url.len() <= MAX_URL_BYTES);
                let labels_say = view.domain.split('.').any(|l| l.starts_with("xn--"));
                prop_assert_eq!(view.punycode, labels_say);
            }
        }
    }
}
