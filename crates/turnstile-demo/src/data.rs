//! Deterministic synthetic data for the demo tool server: a construction site.
//!
//! * Project `tower-a`: exactly [`TOWER_A_PANORAMAS`] panoramas on floors B1
//!   (`-1`) and 1..=12, captured between 2026-01-05 and 2026-08-28.
//! * Project `annex`: [`ANNEX_PANORAMAS`] panoramas on floors 1..=3.
//!
//! Panoramas carry annotations (`safety`, `quality`, `progress`), each with the
//! licence tier a viewer needs to see it. Floor 3 of tower-a has exactly
//! [`TOWER_A_FLOOR3_SAFETY`] panoramas with a safety annotation.
//!
//! Everything is generated from a fixed SplitMix64 seed: the same data on
//! every run and every machine, no RNG crate needed.

use std::fmt;
use std::sync::OnceLock;

/// Panoramas in `tower-a`.
pub const TOWER_A_PANORAMAS: usize = 7_961;
/// Panoramas in `annex`.
pub const ANNEX_PANORAMAS: usize = 312;
/// Panoramas on tower-a floor 3 that have at least one safety annotation.
pub const TOWER_A_FLOOR3_SAFETY: usize = 192;

const SEED: u64 = 0x5EED_2026_0105_0828;

/// Licence tiers, cheapest first.
pub const TIERS: &[&str] = &["basic", "pro", "enterprise", "safety-plus"];

const SAFETY_TITLES: &[&str] = &[
    "missing guardrail",
    "no hard hat",
    "open shaft",
    "unprotected floor edge",
    "blocked fire exit",
    "missing toe board",
    "trip hazard: loose cables",
    "scaffold tag expired",
];
const QUALITY_TITLES: &[&str] = &[
    "honeycombing in concrete",
    "misaligned anchor bolts",
    "drywall crack",
    "uneven screed",
    "exposed rebar",
    "incomplete firestopping",
];
const PROGRESS_TITLES: &[&str] = &[
    "formwork complete",
    "MEP rough-in started",
    "slab poured",
    "curtain wall installed",
    "drywall framing half done",
    "ceiling grid in progress",
];

/// A calendar date (proleptic Gregorian), ordered chronologically.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    pub year: i32,
    pub month: u32,
    pub day: u32,
}

impl Date {
    /// Parse `YYYY-MM-DD`.
    pub fn parse(s: &str) -> Option<Date> {
        let mut parts = s.trim().splitn(3, '-');
        let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
        if y.len() != 4 || m.len() != 2 || d.len() != 2 {
            return None;
        }
        let date = Date {
            year: y.parse().ok()?,
            month: m.parse().ok()?,
            day: d.parse().ok()?,
        };
        if date.month == 0 || date.month > 12 || date.day == 0 {
            return None;
        }
        if date.day > days_in_month(date.year, date.month) {
            return None;
        }
        Some(date)
    }

    /// Days since 1970-01-01 (Howard Hinnant's `days_from_civil`).
    pub fn to_days(self) -> i64 {
        let y = i64::from(self.year) - i64::from(self.month <= 2);
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let m = i64::from(self.month);
        let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(self.day) - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        era * 146_097 + doe - 719_468
    }

    /// Inverse of [`Date::to_days`].
    pub fn from_days(days: i64) -> Date {
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        Date {
            year: i32::try_from(year).unwrap_or(i32::MAX),
            month: u32::try_from(month).unwrap_or(1),
            day: u32::try_from(day).unwrap_or(1),
        }
    }
}

fn days_in_month(year: i32, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        _ => 28,
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

/// `B1` for -1, otherwise the number.
pub fn floor_name(floor: i32) -> String {
    if floor < 0 {
        format!("B{}", -floor)
    } else {
        floor.to_string()
    }
}

/// One annotation on a panorama.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Annotation {
    /// `safety`, `quality` or `progress`.
    pub kind: &'static str,
    pub title: &'static str,
    /// Licence tier a viewer needs to see this annotation (one of [`TIERS`]).
    pub tier: &'static str,
}

/// One 360° capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Panorama {
    /// Globally unique, e.g. `TA-00412`.
    pub id: String,
    pub project: &'static str,
    /// B1 = -1.
    pub floor: i32,
    pub captured_at: Date,
    /// Human label, e.g. `PANO-003-0412` (floor, then sequence on that floor).
    pub label: String,
    pub annotations: Vec<Annotation>,
}

/// The facility every demo project is on: a host app's `getFacilityKey`.
pub const SITE: &str = "demo-site";

/// The serial number in a panorama's id (`TA-00412` → 412).
fn serial(p: &Panorama) -> u64 {
    p.id.rsplit('-')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Where the capture's camera stood, what it looked at and its direction
/// (issue 38 §3): metres in the site's frame, deterministic per panorama.
/// The eye is 1.6 m above the floor's slab (3.5 m per storey).
pub fn camera(p: &Panorama) -> serde_json::Value {
    let n = serial(p);
    let round = |x: f64| (x * 1000.0).round() / 1000.0;
    let position = [
        (n % 20) as f64 * 3.0,
        ((n / 20) % 20) as f64 * 3.0,
        round(f64::from(p.floor) * 3.5 + 1.6),
    ];
    let angle = ((n * 37) % 360) as f64 * std::f64::consts::PI / 180.0;
    let direction = [round(angle.cos()), round(angle.sin()), 0.0];
    let look_at = [
        round(position[0] + 5.0 * direction[0]),
        round(position[1] + 5.0 * direction[1]),
        position[2],
    ];
    serde_json::json!({"position": position, "look_at": look_at, "direction": direction})
}

/// The BIM grid axes of the capture, where the site's model knows them:
/// every capture but each fourth.
pub fn grid(p: &Panorama) -> Option<(String, u64)> {
    let n = serial(p);
    (!n.is_multiple_of(4)).then(|| {
        let letter = char::from(b'A' + u8::try_from(n % 8).unwrap_or(0));
        (letter.to_string(), 1 + (n / 8) % 12)
    })
}

/// A project on the site.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Project {
    pub id: &'static str,
    pub name: &'static str,
    pub floors: Vec<i32>,
    pub first_capture: Date,
    pub last_capture: Date,
    pub panoramas: usize,
}

/// The whole synthetic site.
#[derive(Debug)]
pub struct Dataset {
    pub projects: Vec<Project>,
    /// Sorted by project, floor, capture date.
    pub panoramas: Vec<Panorama>,
}

impl Dataset {
    pub fn project(&self, id: &str) -> Option<&Project> {
        self.projects.iter().find(|p| p.id == id)
    }

    pub fn panorama(&self, id: &str) -> Option<&Panorama> {
        self.panoramas.iter().find(|p| p.id == id)
    }
}

/// The dataset (built once, on first use).
pub fn dataset() -> &'static Dataset {
    static DATA: OnceLock<Dataset> = OnceLock::new();
    DATA.get_or_init(build)
}

/// SplitMix64: tiny, fast, good enough for synthetic data.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0; the modulo bias is irrelevant here).
    fn below(&mut self, n: usize) -> usize {
        let n64 = u64::try_from(n.max(1)).unwrap_or(u64::MAX);
        usize::try_from(self.next() % n64).unwrap_or(0)
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

struct ProjectPlan {
    id: &'static str,
    name: &'static str,
    code: &'static str,
    floors: Vec<i32>,
    total: usize,
    first: Date,
    last: Date,
}

fn build() -> Dataset {
    let mut rng = SplitMix64(SEED);
    let plans = [
        ProjectPlan {
            id: "tower-a",
            name: "Tower A (12-storey residential, one basement level)",
            code: "TA",
            floors: std::iter::once(-1).chain(1..=12).collect(),
            total: TOWER_A_PANORAMAS,
            first: Date {
                year: 2026,
                month: 1,
                day: 5,
            },
            last: Date {
                year: 2026,
                month: 8,
                day: 28,
            },
        },
        ProjectPlan {
            id: "annex",
            name: "Annex (3-storey parking and plant rooms)",
            code: "AX",
            floors: (1..=3).collect(),
            total: ANNEX_PANORAMAS,
            first: Date {
                year: 2026,
                month: 3,
                day: 2,
            },
            last: Date {
                year: 2026,
                month: 6,
                day: 30,
            },
        },
    ];
    let mut projects = Vec::new();
    let mut panoramas = Vec::new();
    for plan in &plans {
        let start = panoramas.len();
        build_project(&mut rng, plan, &mut panoramas);
        projects.push(Project {
            id: plan.id,
            name: plan.name,
            floors: plan.floors.clone(),
            first_capture: plan.first,
            last_capture: plan.last,
            panoramas: panoramas.len() - start,
        });
    }
    Dataset {
        projects,
        panoramas,
    }
}

fn build_project(rng: &mut SplitMix64, plan: &ProjectPlan, out: &mut Vec<Panorama>) {
    let floors = plan.floors.len();
    let first = plan.first.to_days();
    let last = plan.last.to_days();
    let span = usize::try_from(last - first + 1).unwrap_or(1);
    let mut serial = 0usize;
    for (floor_index, &floor) in plan.floors.iter().enumerate() {
        // Spread the total as evenly as possible: the first `rem` floors get one more.
        let count = plan.total / floors + usize::from(floor_index < plan.total % floors);
        // Work moves upwards: higher floors start being captured later.
        let offset = (span / 3) * floor_index / floors.max(1);
        let window = span - offset;
        let mut days: Vec<i64> = (0..count)
            .map(|_| first + i64::try_from(offset + rng.below(window)).unwrap_or(0))
            .collect();
        // Pin the stated date range to its ends.
        if floor_index == 0 {
            if let Some(day) = days.first_mut() {
                *day = first;
            }
        }
        if floor_index + 1 == floors {
            if let Some(day) = days.last_mut() {
                *day = last;
            }
        }
        days.sort_unstable();

        // Exactly `safety` panoramas on this floor get safety annotations.
        let safety = if plan.id == "tower-a" && floor == 3 {
            TOWER_A_FLOOR3_SAFETY
        } else {
            (count * (12 + rng.below(22))) / 100
        };
        let mut order: Vec<usize> = (0..count).collect();
        for i in 0..safety.min(count) {
            let j = i + rng.below(count - i);
            order.swap(i, j);
        }
        let mut has_safety = vec![false; count];
        for &i in order.iter().take(safety) {
            has_safety[i] = true;
        }

        for (seq, day) in days.into_iter().enumerate() {
            serial += 1;
            let mut annotations = Vec::new();
            if has_safety[seq] {
                let n = 1 + usize::from(rng.chance(25));
                // Distinct titles: two different hazards, never the same one twice.
                let first_title = rng.below(SAFETY_TITLES.len());
                let second_title =
                    (first_title + 1 + rng.below(SAFETY_TITLES.len() - 1)) % SAFETY_TITLES.len();
                for title in [first_title, second_title].into_iter().take(n) {
                    annotations.push(Annotation {
                        kind: "safety",
                        title: SAFETY_TITLES[title],
                        tier: if rng.chance(80) {
                            "safety-plus"
                        } else {
                            "enterprise"
                        },
                    });
                }
            }
            if rng.chance(35) {
                annotations.push(Annotation {
                    kind: "quality",
                    title: rng.pick(QUALITY_TITLES),
                    tier: if rng.chance(60) { "pro" } else { "enterprise" },
                });
            }
            if rng.chance(45) {
                annotations.push(Annotation {
                    kind: "progress",
                    title: rng.pick(PROGRESS_TITLES),
                    tier: if rng.chance(70) { "basic" } else { "pro" },
                });
            }
            let floor_code = if floor < 0 {
                floor_name(floor)
            } else {
                format!("{floor:03}")
            };
            out.push(Panorama {
                id: format!("{}-{serial:05}", plan.code),
                project: plan.id,
                floor,
                captured_at: Date::from_days(day),
                label: format!("PANO-{floor_code}-{:04}", seq + 1),
                annotations,
            });
        }
    }
}

/// Search filters (already validated).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filter {
    pub query: String,
    pub project: String,
    pub floor: Option<i32>,
    pub date_from: Option<Date>,
    pub date_to: Option<Date>,
}

/// Words that carry no meaning for the keyword stand-in.
const STOPWORDS: &[&str] = &[
    "a",
    "an",
    "and",
    "any",
    "all",
    "at",
    "floor",
    "floors",
    "for",
    "from",
    "image",
    "images",
    "in",
    "level",
    "of",
    "on",
    "photo",
    "photos",
    "picture",
    "pictures",
    "panorama",
    "panoramas",
    "show",
    "the",
    "with",
];

impl Filter {
    /// Lower-cased query words, without stopwords and short numbers.
    pub fn tokens(&self) -> Vec<String> {
        self.query
            .to_lowercase()
            .split(|c: char| !c.is_alphanumeric())
            .filter(|t| !t.is_empty())
            .filter(|t| !STOPWORDS.contains(t))
            .filter(|t| !(t.len() < 3 && t.chars().all(|c| c.is_ascii_digit())))
            .map(str::to_string)
            .collect()
    }

    /// Identifies the result set (not the page): used to bind cursors to a query.
    pub fn fingerprint(&self) -> u64 {
        let canonical = format!(
            "{}|{}|{:?}|{:?}|{:?}",
            self.tokens().join(" "),
            self.project,
            self.floor,
            self.date_from.map(|d| d.to_string()),
            self.date_to.map(|d| d.to_string()),
        );
        // FNV-1a, 64 bit.
        canonical.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
    }
}

/// One search hit.
#[derive(Clone, Debug)]
pub struct Hit<'a> {
    pub panorama: &'a Panorama,
    /// Annotations that matched the query (all of them for a filters-only search).
    pub matched: Vec<&'a Annotation>,
    pub score: usize,
}

fn token_in(token: &str, haystack: &str) -> bool {
    haystack.contains(token)
        || (token.len() > 3 && token.ends_with('s') && haystack.contains(&token[..token.len() - 1]))
}

/// Keyword search, the deterministic stand-in for semantic search: every
/// query word must occur in the panorama's label or in one of its annotation
/// kinds/titles. Ordered by number of matching annotations, then newest first,
/// then id.
pub fn search<'a>(data: &'a Dataset, filter: &Filter) -> Vec<Hit<'a>> {
    let tokens = filter.tokens();
    let mut hits: Vec<Hit<'a>> = data
        .panoramas
        .iter()
        .filter(|p| p.project == filter.project)
        .filter(|p| filter.floor.is_none_or(|f| p.floor == f))
        .filter(|p| filter.date_from.is_none_or(|d| p.captured_at >= d))
        .filter(|p| filter.date_to.is_none_or(|d| p.captured_at <= d))
        .filter_map(|p| {
            if tokens.is_empty() {
                return Some(Hit {
                    panorama: p,
                    matched: p.annotations.iter().collect(),
                    score: 0,
                });
            }
            let label = p.label.to_lowercase();
            let texts: Vec<String> = p
                .annotations
                .iter()
                .map(|a| format!("{} {}", a.kind, a.title).to_lowercase())
                .collect();
            let all_found = tokens
                .iter()
                .all(|t| token_in(t, &label) || texts.iter().any(|x| token_in(t, x)));
            if !all_found {
                return None;
            }
            // Prefer annotations that match every word; else any word.
            let select = |all: bool| -> Vec<&Annotation> {
                p.annotations
                    .iter()
                    .zip(&texts)
                    .filter(|(_, x)| {
                        if all {
                            tokens.iter().all(|t| token_in(t, x))
                        } else {
                            tokens.iter().any(|t| token_in(t, x))
                        }
                    })
                    .map(|(a, _)| a)
                    .collect()
            };
            let mut matched = select(true);
            if matched.is_empty() {
                matched = select(false);
            }
            Some(Hit {
                panorama: p,
                score: matched.len(),
                matched,
            })
        })
        .collect();
    hits.sort_by(|a, b| {
        b.score
            .cmp(&a.score)
            .then(b.panorama.captured_at.cmp(&a.panorama.captured_at))
            .then(a.panorama.id.cmp(&b.panorama.id))
    });
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Date {
        Date::parse(s).unwrap_or_else(|| panic!("bad date {s}"))
    }

    #[test]
    fn tower_a_shape() {
        let data = dataset();
        let tower: Vec<&Panorama> = data
            .panoramas
            .iter()
            .filter(|p| p.project == "tower-a")
            .collect();
        assert_eq!(tower.len(), TOWER_A_PANORAMAS);
        let mut floors: Vec<i32> = tower.iter().map(|p| p.floor).collect();
        floors.sort_unstable();
        floors.dedup();
        assert_eq!(
            floors,
            std::iter::once(-1).chain(1..=12).collect::<Vec<_>>()
        );
        let first = tower.iter().map(|p| p.captured_at).min();
        let last = tower.iter().map(|p| p.captured_at).max();
        assert_eq!(first, Some(d("2026-01-05")));
        assert_eq!(last, Some(d("2026-08-28")));
        let floor3_safety = tower
            .iter()
            .filter(|p| p.floor == 3 && p.annotations.iter().any(|a| a.kind == "safety"))
            .count();
        assert_eq!(floor3_safety, TOWER_A_FLOOR3_SAFETY);
        let ids: std::collections::HashSet<&str> =
            data.panoramas.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids.len(), data.panoramas.len(), "ids are unique");
        assert!(data
            .panoramas
            .iter()
            .flat_map(|p| &p.annotations)
            .all(|a| TIERS.contains(&a.tier)));
    }

    #[test]
    fn annex_is_small() {
        let annex = dataset().project("annex").map(|p| p.panoramas);
        assert_eq!(annex, Some(ANNEX_PANORAMAS));
    }

    #[test]
    fn deterministic() {
        // Same generator, same data: compare a fresh build against the cached one.
        let fresh = build();
        assert_eq!(fresh.panoramas, dataset().panoramas);
        assert_eq!(fresh.panoramas[412].id, dataset().panoramas[412].id);
    }

    #[test]
    fn dates_round_trip() {
        for s in [
            "1999-01-01",
            "2026-01-05",
            "2026-02-28",
            "2028-02-29",
            "2026-12-31",
        ] {
            let date = d(s);
            assert_eq!(Date::from_days(date.to_days()), date);
            assert_eq!(date.to_string(), s);
        }
        assert_eq!(Date::parse("2026-02-30"), None);
        assert_eq!(Date::parse("2026-4-1"), None);
        assert_eq!(d("1970-01-01").to_days(), 0);
    }

    #[test]
    fn safety_on_floor_3() {
        let filter = Filter {
            query: "safety".into(),
            project: "tower-a".into(),
            floor: Some(3),
            date_from: None,
            date_to: None,
        };
        let hits = search(dataset(), &filter);
        assert_eq!(hits.len(), TOWER_A_FLOOR3_SAFETY);
        assert!(hits.iter().all(|h| h.panorama.floor == 3));
        assert!(hits
            .iter()
            .all(|h| !h.matched.is_empty() && h.matched.iter().all(|a| a.kind == "safety")));
    }

    #[test]
    fn tokens_and_fingerprint() {
        let a = Filter {
            query: "Show photos of missing guardrails on floor 3".into(),
            project: "tower-a".into(),
            floor: Some(3),
            date_from: None,
            date_to: None,
        };
        assert_eq!(a.tokens(), vec!["missing", "guardrails"]);
        let b = Filter {
            query: "missing guardrails".into(),
            ..a.clone()
        };
        assert_eq!(a.fingerprint(), b.fingerprint());
        let c = Filter {
            floor: Some(4),
            ..a.clone()
        };
        assert_ne!(a.fingerprint(), c.fingerprint());
        let hits = search(dataset(), &a);
        assert!(!hits.is_empty());
        assert!(hits
            .iter()
            .all(|h| h.matched.iter().any(|m| m.title == "missing guardrail")));
    }
}
