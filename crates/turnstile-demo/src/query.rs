//! The deterministic stand-in for an upstream natural-language → SQL data
//! tool (`query_data`): [`translate`] a question into a [`Query`], render the
//! SQL the upstream would generate ([`Query::sql`]), and [`execute`] it over
//! the [`Dataset`].
//!
//! The fictional schema the SQL is written against:
//!
//! ```text
//! panoramas p (id, project, floor, captured_at, label,
//!              annotation_count, safety_count, quality_count, progress_count)
//! annotations a (panorama_id, kind, title, tier)
//! ```
//!
//! Like the real upstream, every non-aggregate query gets
//! `LIMIT` [`INJECTED_ROW_LIMIT`] appended, so a listing over more rows than
//! that *saturates*: it returns exactly the cap and nothing says rows were
//! cut. Single-value aggregates (COUNT/SUM/AVG/MIN/MAX) are exempt and exact.
//!
//! What the translator understands (English, with a few Korean forms):
//!
//! | in the question | becomes |
//! |---|---|
//! | `floor 3`, `3rd floor`, `third floor`, `level 3`, `B1`, `basement`, `3층`, `지하1층` | `p.floor = 3` (B1 = -1) |
//! | a month name (`April`, `Apr`; `May` only after in/from/during/of/since/for), `4월` | `strftime('%m', p.captured_at) = '04'` |
//! | a year 1900..=2100, `2026년` | `strftime('%Y', p.captured_at) = '2026'` |
//! | `safety`/`hazard`, `quality`/`defect`, `progress` (`안전`, `품질`/`하자`, `공정`/`진척`) | `p.safety_count > 0` (a filter; the metric for SUM/AVG/MIN/MAX of counts) |
//! | `how many`, `count`, `number of` (`몇`, `개수`, `건수`) | `COUNT(*)` of panoramas; of annotations if the question says `annotations` |
//! | `sum`, or `total` with `issues`/`annotations` | `SUM(p.<kind>_count)` |
//! | `average`, `avg`, `mean` (`평균`) | `AVG(p.<kind>_count)` |
//! | `earliest`/`oldest`, `latest`/`newest`/`most recent` | `MIN`/`MAX(p.captured_at)` |
//! | `lowest floor`, `highest floor`/`top floor` | `MIN`/`MAX(p.floor)` |
//! | `min`/`minimum`, `max`/`maximum` | `MIN`/`MAX` of the floor, the capture date, or the annotation count, by what follows |
//! | anything else naming photos/panoramas/images/issues/annotations | a listing (`id`, `label`, `floor`, `captured_at`, a count column) |
//!
//! A question it cannot map is an error, not a guess.

use serde_json::{json, Value};

use super::data::{Dataset, Panorama};

/// The row cap the upstream data tool injects into every non-aggregate query
/// as `LIMIT 3000`. It is the upstream's external contract, reproduced here:
/// a listing that reaches it reports `total: 3000` and, on its last page,
/// `has_more: false`, although more rows may exist. Single-value aggregates
/// are exempt.
pub const INJECTED_ROW_LIMIT: usize = 3_000;

/// A single-value aggregate function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aggregate {
    Count,
    Sum,
    Avg,
    Min,
    Max,
}

impl Aggregate {
    fn sql(self) -> &'static str {
        match self {
            Aggregate::Count => "COUNT",
            Aggregate::Sum => "SUM",
            Aggregate::Avg => "AVG",
            Aggregate::Min => "MIN",
            Aggregate::Max => "MAX",
        }
    }

    fn alias(self) -> &'static str {
        match self {
            Aggregate::Count => "count",
            Aggregate::Sum => "sum",
            Aggregate::Avg => "avg",
            Aggregate::Min => "min",
            Aggregate::Max => "max",
        }
    }
}

/// What an aggregate is computed over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Matching panoramas (`COUNT(*)` over `panoramas`).
    Panoramas,
    /// Matching annotations (`COUNT(*)` over `annotations` joined to `panoramas`).
    Annotations,
    /// Per-panorama annotation count: `p.annotation_count`, or
    /// `p.<kind>_count` for one kind.
    AnnotationCount(Option<&'static str>),
    /// `p.captured_at`.
    CapturedAt,
    /// `p.floor`.
    Floor,
}

/// A translated question: filters plus either a listing or one aggregate.
#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    pub project: String,
    pub floor: Option<i32>,
    pub year: Option<i32>,
    pub month: Option<u32>,
    /// Only panoramas with at least one annotation of this kind.
    pub kind: Option<&'static str>,
    /// `None` = a listing (capped by [`INJECTED_ROW_LIMIT`]).
    pub aggregate: Option<(Aggregate, Metric)>,
    /// The listing's `ORDER BY` has the `p.id` tiebreak. A re-translation
    /// under [`Fault::CursorDrift`](super::Fault::CursorDrift) loses it.
    pub tiebreak: bool,
}

/// The result of running a [`Query`]: what the SQL would return.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
}

const MONTHS: &[(&str, u32)] = &[
    ("january", 1),
    ("jan", 1),
    ("february", 2),
    ("feb", 2),
    ("march", 3),
    ("mar", 3),
    ("april", 4),
    ("apr", 4),
    ("june", 6),
    ("jun", 6),
    ("july", 7),
    ("jul", 7),
    ("august", 8),
    ("aug", 8),
    ("september", 9),
    ("sept", 9),
    ("sep", 9),
    ("october", 10),
    ("oct", 10),
    ("november", 11),
    ("nov", 11),
    ("december", 12),
    ("dec", 12),
];

const ORDINALS: &[(&str, i32)] = &[
    ("first", 1),
    ("second", 2),
    ("third", 3),
    ("fourth", 4),
    ("fifth", 5),
    ("sixth", 6),
    ("seventh", 7),
    ("eighth", 8),
    ("ninth", 9),
    ("tenth", 10),
    ("eleventh", 11),
    ("twelfth", 12),
];

const FLOOR_WORDS: &[&str] = &["floor", "level", "storey", "story"];

const SUBJECT_WORDS: &[&str] = &[
    "photo",
    "picture",
    "image",
    "panorama",
    "pano",
    "capture",
    "issue",
    "annotation",
    "hazard",
    "defect",
    "row",
    "record",
    "사진",
    "파노라마",
    "이미지",
    "지적",
    "이슈",
];

/// Lower-cased words; Hangul counts as alphanumeric, so `3층` stays one word.
fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

fn leading_number(word: &str) -> Option<i32> {
    let digits: String = word.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// `b1` → -1.
fn basement(word: &str) -> Option<i32> {
    let n: i32 = word.strip_prefix('b')?.parse().ok()?;
    (n > 0).then_some(-n)
}

/// A floor number as written right after "floor" or right before it.
fn floor_value(word: &str) -> Option<i32> {
    if word.chars().all(|c| c.is_ascii_digit()) {
        return word.parse().ok();
    }
    basement(word)
        .or_else(|| {
            // 3rd, 2nd, 1st, 12th
            let n = leading_number(word)?;
            let suffix = &word[word.find(|c: char| !c.is_ascii_digit())?..];
            ["st", "nd", "rd", "th"].contains(&suffix).then_some(n)
        })
        .or_else(|| ORDINALS.iter().find(|(w, _)| *w == word).map(|&(_, n)| n))
}

fn find_floor(ws: &[String]) -> Option<i32> {
    for (i, w) in ws.iter().enumerate() {
        if FLOOR_WORDS.contains(&w.as_str()) {
            if let Some(n) = ws.get(i + 1).and_then(|n| floor_value(n)) {
                return Some(n);
            }
            if let Some(n) = i.checked_sub(1).and_then(|p| floor_value(&ws[p])) {
                return Some(n);
            }
        }
        if let Some(n) = basement(w) {
            return Some(n);
        }
        if let Some(rest) = w.strip_suffix('층') {
            if let Some(n) = rest
                .strip_prefix("지하")
                .and_then(|n| n.parse::<i32>().ok())
            {
                return Some(-n);
            }
            if let Ok(n) = rest.parse::<i32>() {
                return Some(n);
            }
        }
    }
    ws.iter().any(|w| w == "basement").then_some(-1)
}

fn find_year(ws: &[String]) -> Option<i32> {
    ws.iter().find_map(|w| {
        let w = w.strip_suffix('년').unwrap_or(w);
        let y: i32 = w.parse().ok().filter(|_| w.len() == 4)?;
        (1900..=2100).contains(&y).then_some(y)
    })
}

fn find_month(ws: &[String]) -> Option<u32> {
    const BEFORE_MAY: &[&str] = &["in", "from", "during", "of", "since", "for"];
    ws.iter().enumerate().find_map(|(i, w)| {
        if let Some(&(_, m)) = MONTHS.iter().find(|(name, _)| name == w) {
            return Some(m);
        }
        if w == "may" && i > 0 && BEFORE_MAY.contains(&ws[i - 1].as_str()) {
            return Some(5);
        }
        let m: u32 = w.strip_suffix('월')?.parse().ok()?;
        (1..=12).contains(&m).then_some(m)
    })
}

fn find_kind(ws: &[String]) -> Option<&'static str> {
    let has = |stems: &[&str]| ws.iter().any(|w| stems.iter().any(|s| w.starts_with(s)));
    if has(&["safety", "hazard", "안전"]) {
        Some("safety")
    } else if has(&["quality", "defect", "품질", "하자"]) {
        Some("quality")
    } else if has(&["progress", "공정", "진척"]) {
        Some("progress")
    } else {
        None
    }
}

fn has_word(ws: &[String], wanted: &[&str]) -> bool {
    ws.iter().any(|w| wanted.contains(&w.as_str()))
}

fn has_phrase(ws: &[String], a: &str, b: &[&str]) -> bool {
    ws.windows(2)
        .any(|pair| pair[0] == a && b.contains(&pair[1].as_str()))
}

fn mentions_annotations(ws: &[String]) -> bool {
    ws.iter().any(|w| w.starts_with("annotation"))
}

/// MIN/MAX over what: the floor, the capture date, or an annotation count.
fn extreme_metric(ws: &[String], kind: Option<&'static str>) -> Metric {
    let after_extreme = ws.windows(2).any(|pair| {
        [
            "min", "minimum", "max", "maximum", "lowest", "highest", "top",
        ]
        .contains(&pair[0].as_str())
            && FLOOR_WORDS.contains(&pair[1].as_str())
    });
    if after_extreme {
        Metric::Floor
    } else if has_word(ws, &["date", "dates", "captured", "capture", "day", "when"]) {
        Metric::CapturedAt
    } else {
        Metric::AnnotationCount(kind)
    }
}

fn find_aggregate(
    ws: &[String],
    raw: &str,
    kind: Option<&'static str>,
) -> Option<(Aggregate, Metric)> {
    let counts = has_phrase(ws, "how", &["many", "much"])
        || has_word(ws, &["count", "counts"])
        || has_phrase(ws, "number", &["of"])
        || ["몇", "개수", "건수"].iter().any(|k| raw.contains(k));
    if has_word(ws, &["average", "avg", "mean"]) || raw.contains("평균") {
        return Some((Aggregate::Avg, Metric::AnnotationCount(kind)));
    }
    let issues = ws
        .iter()
        .any(|w| w.starts_with("issue") || w.starts_with("annotation"));
    if has_word(ws, &["sum"]) || (!counts && has_word(ws, &["total"]) && issues) {
        return Some((Aggregate::Sum, Metric::AnnotationCount(kind)));
    }
    if counts {
        let metric = if mentions_annotations(ws) {
            Metric::Annotations
        } else {
            Metric::Panoramas
        };
        return Some((Aggregate::Count, metric));
    }
    if has_phrase(ws, "lowest", FLOOR_WORDS) {
        return Some((Aggregate::Min, Metric::Floor));
    }
    if has_phrase(ws, "highest", FLOOR_WORDS) || has_phrase(ws, "top", FLOOR_WORDS) {
        return Some((Aggregate::Max, Metric::Floor));
    }
    if has_word(ws, &["earliest", "oldest"])
        || ["가장 오래된", "최초"].iter().any(|k| raw.contains(k))
    {
        return Some((Aggregate::Min, Metric::CapturedAt));
    }
    if has_word(ws, &["latest", "newest"])
        || has_phrase(ws, "most", &["recent"])
        || ["최근", "최신"].iter().any(|k| raw.contains(k))
    {
        return Some((Aggregate::Max, Metric::CapturedAt));
    }
    if has_word(ws, &["min", "minimum"]) {
        return Some((Aggregate::Min, extreme_metric(ws, kind)));
    }
    if has_word(ws, &["max", "maximum"]) {
        return Some((Aggregate::Max, extreme_metric(ws, kind)));
    }
    None
}

/// Translate a question into a [`Query`] over `project`, deterministically.
/// `Err` carries a message for the caller when nothing maps.
pub fn translate(question: &str, project: &str) -> Result<Query, String> {
    let ws = words(question);
    let kind = find_kind(&ws);
    let aggregate = find_aggregate(&ws, question, kind);
    let subject = ws
        .iter()
        .any(|w| SUBJECT_WORDS.iter().any(|s| w.starts_with(s)))
        || kind.is_some();
    if aggregate.is_none() && !subject {
        return Err(format!(
            "could not translate the question into a query: '{}'. Ask about panoramas (photos) or their annotations, optionally on a floor, in a month or year, of a kind (safety, quality, progress), or for one value (how many, sum, average, earliest/latest, lowest/highest floor).",
            question.trim()
        ));
    }
    // For SUM/AVG and MIN/MAX of a count, the kind is what is measured, not a filter.
    let kind_filter = match aggregate {
        Some((_, Metric::AnnotationCount(Some(_)))) => None,
        _ => kind,
    };
    Ok(Query {
        project: project.to_string(),
        floor: find_floor(&ws),
        year: find_year(&ws),
        month: find_month(&ws),
        kind: kind_filter,
        aggregate,
        tiebreak: true,
    })
}

fn count_column(kind: Option<&str>) -> String {
    match kind {
        Some(k) => format!("{k}_count"),
        None => "annotation_count".to_string(),
    }
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

impl Query {
    /// The SQL text the upstream would generate for this query.
    pub fn sql(&self) -> String {
        let mut conditions = vec![format!("p.project = {}", quote(&self.project))];
        if let Some(f) = self.floor {
            conditions.push(format!("p.floor = {f}"));
        }
        if let Some(y) = self.year {
            conditions.push(format!("strftime('%Y', p.captured_at) = '{y:04}'"));
        }
        if let Some(m) = self.month {
            conditions.push(format!("strftime('%m', p.captured_at) = '{m:02}'"));
        }
        let annotation_rows = matches!(self.aggregate, Some((_, Metric::Annotations)));
        if let Some(k) = self.kind {
            if annotation_rows {
                conditions.push(format!("a.kind = {}", quote(k)));
            } else {
                conditions.push(format!("p.{} > 0", count_column(Some(k))));
            }
        }
        let filter = conditions.join(" AND ");
        match self.aggregate {
            None => {
                let order = if self.tiebreak {
                    "p.captured_at DESC, p.id"
                } else {
                    "p.captured_at DESC"
                };
                format!(
                    "SELECT p.id, p.label, p.floor, p.captured_at, p.{} FROM panoramas p WHERE {filter} ORDER BY {order} LIMIT {INJECTED_ROW_LIMIT}",
                    count_column(self.kind)
                )
            }
            Some((Aggregate::Count, Metric::Annotations)) => format!(
                "SELECT COUNT(*) AS count FROM annotations a JOIN panoramas p ON p.id = a.panorama_id WHERE {filter}"
            ),
            Some((Aggregate::Count, _)) => {
                format!("SELECT COUNT(*) AS count FROM panoramas p WHERE {filter}")
            }
            Some((agg, metric)) => {
                let column = self.metric_column(metric);
                format!(
                    "SELECT {}(p.{column}) AS {}_{column} FROM panoramas p WHERE {filter}",
                    agg.sql(),
                    agg.alias()
                )
            }
        }
    }

    fn metric_column(&self, metric: Metric) -> String {
        match metric {
            Metric::CapturedAt => "captured_at".into(),
            Metric::Floor => "floor".into(),
            Metric::AnnotationCount(kind) => count_column(kind),
            Metric::Panoramas | Metric::Annotations => "id".into(),
        }
    }

    fn matches(&self, p: &Panorama) -> bool {
        p.project == self.project
            && self.floor.is_none_or(|f| p.floor == f)
            && self.year.is_none_or(|y| p.captured_at.year == y)
            && self.month.is_none_or(|m| p.captured_at.month == m)
            && self
                .kind
                .is_none_or(|k| p.annotations.iter().any(|a| a.kind == k))
    }
}

fn annotation_count(p: &Panorama, kind: Option<&str>) -> usize {
    p.annotations
        .iter()
        .filter(|a| kind.is_none_or(|k| a.kind == k))
        .count()
}

fn number(n: usize) -> Value {
    json!(n)
}

/// Run `query` over `data`, as the upstream database would: a listing is
/// ordered newest first (then by id) and cut at [`INJECTED_ROW_LIMIT`]; an
/// aggregate is one row (SQL semantics: `SUM`/`AVG`/`MIN`/`MAX` of nothing
/// is `NULL`, `COUNT` of nothing is 0).
pub fn execute(data: &Dataset, query: &Query) -> Table {
    let mut matching: Vec<&Panorama> = data.panoramas.iter().filter(|p| query.matches(p)).collect();
    let Some((agg, metric)) = query.aggregate else {
        matching.sort_by(|a, b| {
            b.captured_at
                .cmp(&a.captured_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        let column = count_column(query.kind);
        return Table {
            columns: vec![
                "id".into(),
                "label".into(),
                "floor".into(),
                "captured_at".into(),
                column,
            ],
            rows: matching
                .iter()
                .take(INJECTED_ROW_LIMIT)
                .map(|p| {
                    vec![
                        json!(p.id),
                        json!(p.label),
                        json!(p.floor),
                        json!(p.captured_at.to_string()),
                        number(annotation_count(p, query.kind)),
                    ]
                })
                .collect(),
        };
    };
    let value = match (agg, metric) {
        (Aggregate::Count, Metric::Annotations) => number(
            matching
                .iter()
                .map(|p| annotation_count(p, query.kind))
                .sum(),
        ),
        (Aggregate::Count, _) => number(matching.len()),
        (_, Metric::CapturedAt) => {
            let dates = matching.iter().map(|p| p.captured_at);
            let pick = if agg == Aggregate::Max {
                dates.max()
            } else {
                dates.min()
            };
            pick.map_or(Value::Null, |d| json!(d.to_string()))
        }
        (_, Metric::Floor) => {
            let floors = matching.iter().map(|p| p.floor);
            let pick = if agg == Aggregate::Max {
                floors.max()
            } else {
                floors.min()
            };
            pick.map_or(Value::Null, |f| json!(f))
        }
        (_, metric) => {
            let kind = match metric {
                Metric::AnnotationCount(kind) => kind,
                _ => None,
            };
            let counts: Vec<usize> = matching.iter().map(|p| annotation_count(p, kind)).collect();
            match agg {
                _ if counts.is_empty() => Value::Null,
                Aggregate::Sum => number(counts.iter().sum()),
                Aggregate::Min => counts.iter().min().map_or(Value::Null, |&n| number(n)),
                Aggregate::Max => counts.iter().max().map_or(Value::Null, |&n| number(n)),
                _ => {
                    let sum: usize = counts.iter().sum();
                    // Counts are small: both fit f64 exactly.
                    let (sum, n) = (sum as f64, counts.len() as f64);
                    json!(sum / n)
                }
            }
        }
    };
    let column = match (agg, metric) {
        (Aggregate::Count, _) => "count".to_string(),
        _ => format!("{}_{}", agg.alias(), query.metric_column(metric)),
    };
    Table {
        columns: vec![column],
        rows: vec![vec![value]],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{dataset, TOWER_A_FLOOR3_SAFETY, TOWER_A_PANORAMAS};

    fn q(question: &str) -> Query {
        translate(question, "tower-a").unwrap_or_else(|e| panic!("{question}: {e}"))
    }

    fn value(question: &str) -> Value {
        let table = execute(dataset(), &q(question));
        assert_eq!(table.rows.len(), 1, "{question}");
        table.rows[0][0].clone()
    }

    fn count_where(f: impl Fn(&Panorama) -> bool) -> usize {
        dataset().panoramas.iter().filter(|p| f(p)).count()
    }

    #[test]
    fn translations() {
        type Expect = (
            Option<i32>,
            Option<i32>,
            Option<u32>,
            Option<&'static str>,
            Option<(Aggregate, Metric)>,
        );
        let cases: &[(&str, Expect)] = &[
            ("list all panoramas", (None, None, None, None, None)),
            (
                "panoramas on floor 3 in April",
                (Some(3), None, Some(4), None, None),
            ),
            (
                "safety issues on floor 3 from April",
                (Some(3), None, Some(4), Some("safety"), None),
            ),
            (
                "how many photos are on floor 3?",
                (
                    Some(3),
                    None,
                    None,
                    None,
                    Some((Aggregate::Count, Metric::Panoramas)),
                ),
            ),
            (
                "how many panoramas are there?",
                (
                    None,
                    None,
                    None,
                    None,
                    Some((Aggregate::Count, Metric::Panoramas)),
                ),
            ),
            (
                "count safety issues on floor 3",
                (
                    Some(3),
                    None,
                    None,
                    Some("safety"),
                    Some((Aggregate::Count, Metric::Panoramas)),
                ),
            ),
            (
                "how many safety annotations are on the 3rd floor in 2026?",
                (
                    Some(3),
                    Some(2026),
                    None,
                    Some("safety"),
                    Some((Aggregate::Count, Metric::Annotations)),
                ),
            ),
            (
                "total safety issues on floor B1",
                (
                    Some(-1),
                    None,
                    None,
                    None,
                    Some((Aggregate::Sum, Metric::AnnotationCount(Some("safety")))),
                ),
            ),
            (
                "average number of annotations per photo on the third floor",
                (
                    Some(3),
                    None,
                    None,
                    None,
                    Some((Aggregate::Avg, Metric::AnnotationCount(None))),
                ),
            ),
            (
                "earliest safety photo on floor 12",
                (
                    Some(12),
                    None,
                    None,
                    Some("safety"),
                    Some((Aggregate::Min, Metric::CapturedAt)),
                ),
            ),
            (
                "latest photo in May",
                (
                    None,
                    None,
                    Some(5),
                    None,
                    Some((Aggregate::Max, Metric::CapturedAt)),
                ),
            ),
            (
                "highest floor with quality issues",
                (
                    None,
                    None,
                    None,
                    Some("quality"),
                    Some((Aggregate::Max, Metric::Floor)),
                ),
            ),
            (
                "maximum safety annotations on one panorama",
                (
                    None,
                    None,
                    None,
                    None,
                    Some((Aggregate::Max, Metric::AnnotationCount(Some("safety")))),
                ),
            ),
            (
                "3층 안전 지적사항 몇 건이야?",
                (
                    Some(3),
                    None,
                    None,
                    Some("safety"),
                    Some((Aggregate::Count, Metric::Panoramas)),
                ),
            ),
            (
                "지하1층 사진 2026년 4월",
                (Some(-1), Some(2026), Some(4), None, None),
            ),
        ];
        for (question, want) in cases {
            let got = q(question);
            assert_eq!(
                (got.floor, got.year, got.month, got.kind, got.aggregate),
                *want,
                "{question}"
            );
        }
        assert!(translate("what's the weather like?", "tower-a").is_err());
        assert_eq!(q("may I see all photos").month, None);
    }

    #[test]
    fn sql_shapes() {
        let cases: &[(&str, &str)] = &[
            (
                "list all panoramas",
                "SELECT p.id, p.label, p.floor, p.captured_at, p.annotation_count FROM panoramas p WHERE p.project = 'tower-a' ORDER BY p.captured_at DESC, p.id LIMIT 3000",
            ),
            (
                "safety issues on floor 3 from April",
                "SELECT p.id, p.label, p.floor, p.captured_at, p.safety_count FROM panoramas p WHERE p.project = 'tower-a' AND p.floor = 3 AND strftime('%m', p.captured_at) = '04' AND p.safety_count > 0 ORDER BY p.captured_at DESC, p.id LIMIT 3000",
            ),
            (
                "how many photos are on floor 3?",
                "SELECT COUNT(*) AS count FROM panoramas p WHERE p.project = 'tower-a' AND p.floor = 3",
            ),
            (
                "how many safety annotations in 2026",
                "SELECT COUNT(*) AS count FROM annotations a JOIN panoramas p ON p.id = a.panorama_id WHERE p.project = 'tower-a' AND strftime('%Y', p.captured_at) = '2026' AND a.kind = 'safety'",
            ),
            (
                "average safety issues per photo on floor 3",
                "SELECT AVG(p.safety_count) AS avg_safety_count FROM panoramas p WHERE p.project = 'tower-a' AND p.floor = 3",
            ),
            (
                "latest photo on floor 3",
                "SELECT MAX(p.captured_at) AS max_captured_at FROM panoramas p WHERE p.project = 'tower-a' AND p.floor = 3",
            ),
        ];
        for (question, sql) in cases {
            assert_eq!(q(question).sql(), *sql, "{question}");
        }
        let drifted = Query {
            tiebreak: false,
            ..q("list all panoramas")
        };
        assert!(drifted
            .sql()
            .ends_with("ORDER BY p.captured_at DESC LIMIT 3000"));
    }

    #[test]
    fn listings_saturate_and_aggregates_are_exact() {
        let data = dataset();
        let all = execute(data, &q("list all panoramas"));
        assert_eq!(all.rows.len(), INJECTED_ROW_LIMIT);
        const { assert!(TOWER_A_PANORAMAS > INJECTED_ROW_LIMIT) };
        assert_eq!(
            value("how many panoramas are there?"),
            json!(TOWER_A_PANORAMAS)
        );
        let floor3 = count_where(|p| p.project == "tower-a" && p.floor == 3);
        assert_eq!(value("how many photos are on floor 3?"), json!(floor3));
        assert_eq!(
            value("count safety issues on floor 3"),
            json!(TOWER_A_FLOOR3_SAFETY)
        );
        let april = count_where(|p| {
            p.project == "tower-a"
                && p.floor == 3
                && p.captured_at.month == 4
                && p.annotations.iter().any(|a| a.kind == "safety")
        });
        let listed = execute(data, &q("safety issues on floor 3 from April"));
        assert_eq!(listed.rows.len(), april);
        assert!(listed.rows.iter().all(|r| r[2] == json!(3)
            && r[3].as_str().is_some_and(|d| d.starts_with("2026-04-"))
            && r[4].as_u64().is_some_and(|n| n > 0)));
        assert_eq!(value("earliest photo"), json!("2026-01-05"));
        assert_eq!(value("latest photo"), json!("2026-08-28"));
        assert_eq!(value("highest floor with photos"), json!(12));
        assert_eq!(value("lowest floor with photos"), json!(-1));
        assert_eq!(value("how many photos from 1999"), json!(0));
        assert_eq!(value("latest photo from 1999"), Value::Null);
        let safety_annotations: usize = dataset()
            .panoramas
            .iter()
            .filter(|p| p.project == "tower-a" && p.floor == 3)
            .map(|p| annotation_count(p, Some("safety")))
            .sum();
        assert_eq!(
            value("total safety issues on floor 3"),
            json!(safety_annotations)
        );
        assert_eq!(
            value("how many safety annotations on floor 3"),
            json!(safety_annotations)
        );
        let avg = value("average safety issues per photo on floor 3");
        let expected = safety_annotations as f64 / floor3 as f64;
        assert!(avg.as_f64().is_some_and(|a| (a - expected).abs() < 1e-12));
    }
}
