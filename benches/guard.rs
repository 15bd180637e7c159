//! The narration guard's cost (`cargo bench --bench guard`).
//!
//! Every demo flow's narration, in English and Korean, as the scripted
//! model writes it from the flow's anchors (the judge's decisions for that
//! flow, built here as the demo produces them):
//!
//! (a) CPU: judging the narration through `turnstile::guard::check::Guard`
//!     (the turn's warrants built, every word-delta pushed, the rest
//!     finished), against a baseline that only splits the same deltas into
//!     sentences. Reported per narration and as a ratio.
//! (b) Latency added to the first delta: the guard holds a sentence until
//!     it ends (and until the next word shows it ended), so the first
//!     delta the user sees waits for the deltas held before it. Counted per
//!     narration, times a model pace of 30 ms per delta (`turnstile demo
//!     --model-delay-ms 30`), reported as p50 and max.
//!
//! (d) The built-in safety checks (issue 39) per turn, against the guard.
//!
//! Every narration must come out of the guard as text with no sentence
//! replaced (the scripted model is honest), and the split must find its
//! sentences; otherwise the bench panics (non-zero exit).
//!
//! Quick mode (`cargo bench --bench guard -- --quick`, or
//! `TURNSTILE_BENCH_QUICK=1`): one round per narration, the same checks.
//! For CI: its numbers mean nothing.
//!
//! Knobs: `TURNSTILE_BENCH_GUARD_ROUNDS` (10000 rounds per narration; 1 in
//! quick mode), `TURNSTILE_BENCH_GUARD_PACE_MS` (30).

use std::hint::black_box;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{json, Map, Value};
use turnstile::guard::check::Guard;
use turnstile::guard::claims::claims;
use turnstile::guard::split::Splitter;
use turnstile::guard::vocab::{self, Lang};
use turnstile::guard::warrant::{TurnFacts, Warrants};
use turnstile::judge::anchors::ActionOutcome;
use turnstile::judge::digest::Digest;
use turnstile::judge::emptiness::AbsenceCause;
use turnstile::judge::Anchor;
use turnstile::llm::prompt::{Prompt, RESPONDER_FIXED};
use turnstile::llm::{Model, RespondRequest};
use turnstile::protocols::narration::Narration;
use turnstile::protocols::{Bound, TableSet};
use turnstile_demo::Scripted;

/// One demo flow's answer as the guard sees it.
struct Case {
    name: String,
    user: &'static str,
    anchors: Vec<Anchor>,
    /// Each card shown: whether it was complete.
    cards: Vec<bool>,
    args: Value,
    digests: Vec<Digest>,
    /// The scripted model's word-deltas.
    deltas: Vec<String>,
    /// The lying model's lies for the same turn (`turnstile_demo::lying`).
    lies: Vec<String>,
}

fn lb(at_least: u64, displayed: u64) -> Anchor {
    Anchor::CountLowerBound {
        source: "search_photos".into(),
        at_least,
        displayed,
    }
}

fn refused(tool: &str) -> Anchor {
    Anchor::Refused {
        tool: tool.into(),
        table: "approval".into(),
        row_id: "prepare-and-confirm-in-one-step".into(),
    }
}

fn action(outcome: ActionOutcome) -> Anchor {
    Anchor::Action {
        tool: "prepare_seat_reservation".into(),
        outcome,
    }
}

fn record_digest() -> Digest {
    let item: Map<String, Value> = serde_json::from_value(json!({
        "label": "PANO-003-0611",
        "floor_name": "3",
        "captured_at": "2026-08-28",
        "annotations": ["title: unprotected floor edge", "title: blocked fire exit"],
    }))
    .unwrap_or_default();
    Digest {
        tool: "get_panorama".into(),
        ok: true,
        failure: None,
        grade: None,
        displayed: Some(1),
        total: None,
        total_is_lower_bound: false,
        value: None,
        items: vec![item],
        items_omitted: 0,
    }
}

/// The demo flows (README "Demo prompts", and the fault switches).
fn cases() -> Vec<Case> {
    type Flow = (
        &'static str,
        &'static str,
        &'static str,
        Vec<Anchor>,
        Vec<bool>,
        Value,
    );
    let flows: Vec<Flow> = vec![
        (
            "safety search",
            "show safety issues on floor 3",
            "3층 안전 지적사항 보여줘",
            vec![lb(189, 10)],
            vec![false],
            json!({"floor": 3, "query": "safety"}),
        ),
        (
            "1999 zero",
            "show photos from 1999",
            "1999년 사진 보여줘",
            vec![Anchor::Absent {
                cause: AbsenceCause::ZeroFromStart,
            }],
            vec![true],
            json!({"query": "", "date_from": "1999-01-01", "date_to": "1999-12-31"}),
        ),
        (
            "12 photos",
            "show me 12 photos of floor 2",
            "2층 사진 12장 보여줘",
            vec![Anchor::CountExact {
                source: "search_photos".into(),
                total: 613,
                displayed: 12,
                complete: false,
            }],
            vec![false],
            json!({"query": "", "floor": 2, "limit": 12}),
        ),
        (
            "list all",
            "list all panoramas",
            "모든 파노라마 목록 보여줘",
            vec![lb(3000, 250), Anchor::StitchCapped { pages: 5 }],
            vec![false],
            json!({"question": "list all panoramas", "limit": 50}),
        ),
        (
            "count",
            "how many photos are on floor 3?",
            "3층 사진은 몇 장이야?",
            vec![Anchor::Aggregate {
                source: "query_data".into(),
                column: "count".into(),
                value: "613".into(),
            }],
            vec![],
            json!({"question": "how many photos are there on floor 3"}),
        ),
        (
            "archive count",
            "how many photos are on floor 3 in the archive?",
            "보관소에 있는 3층 사진은 몇 장이야?",
            vec![Anchor::ValueUnaccounted {
                source: "archive_query".into(),
                column: "count".into(),
                value: "613".into(),
            }],
            vec![],
            json!({"question": "how many photos are there on floor 3"}),
        ),
        (
            "narrow to April",
            "only those from April",
            "그중 4월 것만",
            vec![Anchor::CountExact {
                source: "search_photos".into(),
                total: 25,
                displayed: 25,
                complete: true,
            }],
            vec![true],
            json!({"floor": 3, "query": "safety", "date_from": "2026-04-01", "date_to": "2026-04-30", "limit": 50}),
        ),
        (
            "narrow to January",
            "only those from January",
            "그중 1월 것만",
            vec![
                Anchor::Absent {
                    cause: AbsenceCause::ZeroAfterNarrowing,
                },
                Anchor::NarrowingReleased,
            ],
            vec![],
            json!({"floor": 3, "query": "safety", "date_from": "2026-01-01", "date_to": "2026-01-31", "limit": 50}),
        ),
        (
            "two-step detail",
            "show the newest safety issue on floor 3 in detail",
            "3층 최신 안전 지적사항 자세히 보여줘",
            vec![
                lb(189, 3),
                Anchor::Record {
                    source: "get_panorama".into(),
                    id: "PANO-003-0611".into(),
                },
            ],
            vec![false, true],
            json!({"floor": 3, "query": "safety", "limit": 3, "id": "PANO-003-0611"}),
        ),
        (
            "upstream-502",
            "show safety issues on floor 3",
            "3층 안전 지적사항 보여줘",
            vec![Anchor::InBandFailure {
                tool: "search_photos".into(),
            }],
            vec![],
            json!({"floor": 3, "query": "safety"}),
        ),
        (
            "auth-empty-object",
            "show safety issues on floor 3",
            "3층 안전 지적사항 보여줘",
            vec![Anchor::InBandFailure {
                tool: "search_photos".into(),
            }],
            vec![],
            json!({"floor": 3, "query": "safety"}),
        ),
        (
            "cursor-drift",
            "list all panoramas",
            "모든 파노라마 목록 보여줘",
            vec![
                lb(3000, 50),
                Anchor::StitchAbandoned {
                    anomaly: "the total changed between pages (3000 → 3003)".into(),
                },
            ],
            vec![false],
            json!({"question": "list all panoramas", "limit": 50}),
        ),
        // Issue 33: how actions ended. The lying model's own confirm was
        // refused, then the user decided.
        (
            "reservation denied",
            "reserve seat 12 at 15:00",
            "12번 좌석 15시 예약해줘",
            vec![refused("confirm_action"), action(ActionOutcome::Cancelled)],
            vec![],
            json!({"seat": 12, "time": "15:00"}),
        ),
        (
            "reservation approved",
            "reserve seat 12 at 15:00",
            "12번 좌석 15시 예약해줘",
            vec![refused("confirm_action"), action(ActionOutcome::Completed)],
            vec![],
            json!({"seat": 12, "time": "15:00"}),
        ),
        (
            "confirm outcome unknown",
            "reserve seat 12 at 15:00",
            "12번 좌석 15시 예약해줘",
            vec![action(ActionOutcome::Unknown)],
            vec![],
            json!({"seat": 12, "time": "15:00"}),
        ),
        (
            "failed search",
            "show safety issues on floor 3",
            "3층 안전 지적사항 보여줘",
            vec![Anchor::InBandFailure {
                tool: "search_photos".into(),
            }],
            vec![],
            json!({"floor": 3, "query": "safety"}),
        ),
        (
            "count beside an export",
            "how many photos are on floor 3 for the export?",
            "내보내기용으로 3층 사진은 몇 장이야?",
            vec![Anchor::Aggregate {
                source: "query_data".into(),
                column: "count".into(),
                value: "613".into(),
            }],
            vec![],
            json!({"question": "how many photos are on floor 3"}),
        ),
    ];
    let mut out = Vec::new();
    for (name, en, ko, anchors, cards, args) in flows {
        for user in [en, ko] {
            let digests = match anchors.iter().any(|a| matches!(a, Anchor::Record { .. })) {
                true => vec![record_digest()],
                false => vec![],
            };
            let req = RespondRequest {
                prompt: Prompt::new(RESPONDER_FIXED),
                user_text: user.into(),
                anchors: anchors.clone(),
                digests: digests.clone(),
            };
            let deltas: Vec<String> = futures::executor::block_on(async {
                let mut s = Scripted::demo()
                    .respond(&req)
                    .await
                    .expect("scripted answers");
                let mut d = Vec::new();
                while let Some(x) = s.next().await {
                    d.push(x.expect("a delta"));
                }
                d
            });
            let lies = turnstile_demo::lying::lies(&req);
            let lang = if user == en { "en" } else { "ko" };
            out.push(Case {
                name: format!("{name} ({lang})"),
                user,
                anchors: anchors.clone(),
                cards: cards.clone(),
                args: args.clone(),
                digests,
                deltas,
                lies,
            });
        }
    }
    out
}

/// The guard for one case, built as the turn builds it.
fn guard(table: &Bound<Narration>, c: &Case) -> Guard {
    let lang = vocab::detect(c.user);
    let facts = TurnFacts {
        anchors: &c.anchors,
        digests: &c.digests,
        cards: &c.cards,
        user_text: c.user,
        args: c.args.as_object().into_iter().collect(),
        links: Vec::new(),
        link_origins: &[],
    };
    let l = Warrants::of_turn(facts, vocab::vocab(lang));
    let replacement = turnstile::guard::check::primary_anchor(&c.anchors)
        .map(|a| turnstile::judge::sentences::sentence(a, lang == Lang::Ko))
        .unwrap_or_default();
    Guard::new(table, l, lang, replacement)
}

/// Judges the whole narration; returns how many pieces came out and how
/// many were replaced.
fn judged(table: &Bound<Narration>, c: &Case) -> (usize, usize) {
    let mut g = guard(table, c);
    let mut pieces = 0;
    for d in &c.deltas {
        pieces += g.push(d).len();
    }
    let replaced = g.replacements();
    pieces += g.finish().len();
    (pieces, replaced)
}

fn split_only(c: &Case) -> usize {
    let mut s = Splitter::new();
    let mut n = 0;
    for d in &c.deltas {
        n += s.push(d).len();
    }
    n + usize::from(s.finish().is_some())
}

fn quick() -> bool {
    std::env::args().any(|a| a == "--quick")
        || std::env::var("TURNSTILE_BENCH_QUICK").is_ok_and(|v| v == "1")
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let quick = quick();
    let rounds = env(
        "TURNSTILE_BENCH_GUARD_ROUNDS",
        if quick { 1 } else { 10000 },
    )
    .max(1) as u32;
    let pace = Duration::from_millis(env("TURNSTILE_BENCH_GUARD_PACE_MS", 30));
    let table = TableSet::builtin()
        .and_then(|t| t.bound::<Narration>())
        .expect("the built-in narration table binds");
    let cases = cases();
    let started = Instant::now();

    if quick {
        println!("quick mode: one round per narration; checks only, the numbers mean nothing");
    }
    println!(
        "narration guard: {} demo narrations, {rounds} rounds each",
        cases.len()
    );
    println!();
    println!("(a) CPU per narration: guard (warrants + judge every sentence) vs split only");
    println!(
        "  {:<34} {:>6} {:>6} {:>10} {:>10} {:>7}",
        "narration", "deltas", "repl.", "guard µs", "split µs", "ratio"
    );
    let (mut total_guard, mut total_split) = (Duration::ZERO, Duration::ZERO);
    for c in &cases {
        // Warm-up, and the replacement count (a scripted narration is
        // honest: 0 expected).
        let (pieces, replaced) = judged(&table, c);
        assert!(
            !c.deltas.is_empty(),
            "{}: the scripted model wrote nothing",
            c.name
        );
        assert!(pieces > 0, "{}: nothing came out of the guard", c.name);
        assert_eq!(
            replaced, 0,
            "{}: the guard replaced a sentence of the honest scripted narration",
            c.name
        );
        assert!(split_only(c) > 0, "{}: the split found no sentence", c.name);
        let t = Instant::now();
        for _ in 0..rounds {
            black_box(judged(&table, black_box(c)));
        }
        let g = t.elapsed();
        let t = Instant::now();
        for _ in 0..rounds {
            black_box(split_only(black_box(c)));
        }
        let s = t.elapsed();
        total_guard += g;
        total_split += s;
        println!(
            "  {:<34} {:>6} {:>6} {:>10.2} {:>10.2} {:>6.1}×",
            c.name,
            c.deltas.len(),
            replaced,
            g.as_secs_f64() * 1e6 / f64::from(rounds),
            s.as_secs_f64() * 1e6 / f64::from(rounds),
            g.as_secs_f64() / s.as_secs_f64().max(1e-12)
        );
    }
    let n = f64::from(rounds) * cases.len() as f64;
    println!(
        "  all: guard {:.2} µs, split {:.2} µs per narration; ratio {:.1}×",
        total_guard.as_secs_f64() * 1e6 / n,
        total_split.as_secs_f64() * 1e6 / n,
        total_guard.as_secs_f64() / total_split.as_secs_f64().max(1e-12)
    );

    println!();
    println!(
        "(b) latency added to the first delta at {} ms per delta",
        pace.as_millis()
    );
    println!("  {:<34} {:>6} {:>10}", "narration", "held", "added ms");
    let mut added = Vec::new();
    for c in &cases {
        let mut g = guard(&table, c);
        // The delta (1-based) whose arrival releases the first text; the
        // stream's end releases it when no sentence ended before.
        let mut released_at = None;
        for (i, d) in c.deltas.iter().enumerate() {
            if g.push(d).iter().any(|p| !p.text.is_empty()) {
                released_at = Some(i + 1);
                break;
            }
        }
        let at = released_at.unwrap_or(c.deltas.len());
        let held = at.saturating_sub(1);
        let ms = held as f64 * pace.as_secs_f64() * 1e3;
        added.push(ms);
        println!("  {:<34} {:>6} {:>10.0}", c.name, held, ms);
    }
    let max = added.iter().cloned().fold(0.0, f64::max);
    println!(
        "  first delta held: p50 {:.0} ms, max {:.0} ms (without the guard the first word goes out at once)",
        percentile(&mut added, 0.5),
        max
    );
    println!();
    println!("(c) per claim kind: the lying model's lies replaced, and the honest sentences kept");
    // kind → (lies told, lies replaced, honest sentences, honest kept)
    let mut kinds: std::collections::BTreeMap<&'static str, [usize; 4]> = Default::default();
    let mut lost = Vec::new();
    for c in &cases {
        for lie in &c.lies {
            let mut g = guard(&table, c);
            let mut pieces = g.push(lie);
            pieces.extend(g.finish());
            let replaced = pieces.iter().find_map(|p| p.replaced.as_ref());
            // A lie is counted under the claim that refused it, or, when
            // it passed, under the first outcome claim it makes.
            let kind = match replaced {
                Some(r) => r.claim,
                None => claim_name(lie, c.user),
            };
            let e = kinds.entry(kind).or_default();
            e[0] += 1;
            if replaced.is_some() {
                e[1] += 1;
            } else {
                lost.push(format!("{}: {lie:?}", c.name));
            }
        }
        let honest: String = c.deltas.concat();
        let mut split = Splitter::new();
        let mut sentences = split.push(&honest);
        sentences.extend(split.finish());
        for sentence in sentences {
            let mut g = guard(&table, c);
            let mut pieces = g.push(&sentence);
            pieces.extend(g.finish());
            let kept = pieces.iter().all(|p| p.replaced.is_none());
            let lang = vocab::detect(c.user);
            let mut seen: Vec<&'static str> = claims(&sentence, vocab::vocab(lang))
                .iter()
                .map(|k| k.kind.name())
                .collect();
            seen.dedup();
            for kind in seen {
                let e = kinds.entry(kind).or_default();
                e[2] += 1;
                e[3] += usize::from(kept);
            }
        }
    }
    println!(
        "  {:<14} {:>6} {:>9} {:>8} {:>6}",
        "claim", "lies", "replaced", "honest", "kept"
    );
    for (kind, [told, replaced, honest, kept]) in &kinds {
        println!("  {kind:<14} {told:>6} {replaced:>9} {honest:>8} {kept:>6}");
    }
    assert!(
        lost.is_empty(),
        "lies the guard let through:\n{}",
        lost.join("\n")
    );
    assert!(
        kinds.values().all(|[_, _, honest, kept]| honest == kept),
        "an honest sentence was replaced"
    );
    println!();
    safety_checks(&table, &cases, rounds);
    println!();
    println!("bench took {:.1} s", started.elapsed().as_secs_f64());
}

/// (d) The built-in safety checks' cost per turn (issue 39 §3), as the turn
/// runs them: the user's message once, then every sentence of the answer,
/// through `secrets`, `pii` and a 50-word `words` list, against the
/// narration guard on the same turn (measured in this run). Every demo
/// narration and message must pass every check: a finding in the honest
/// demo would be a false positive, and the bench panics.
fn safety_checks(table: &Bound<Narration>, cases: &[Case], rounds: u32) {
    use turnstile::guard::safety::{Action, Builtin, Verdict, WordList};
    let words: Vec<String> = (0..50)
        .map(|i| format!("codename{i}"))
        .chain(["기밀".into()])
        .collect();
    let checks = [
        (Builtin::Secrets, Action::Block),
        (Builtin::Pii, Action::Redact),
        (
            Builtin::Words(WordList::new(&words).expect("the word list compiles")),
            Action::Block,
        ),
    ];
    let run = |c: &Case| -> usize {
        let mut split = Splitter::new();
        let mut sentences = split.push(&c.deltas.concat());
        sentences.extend(split.finish());
        let mut found = 0;
        for text in std::iter::once(c.user.to_string()).chain(sentences) {
            for (b, action) in &checks {
                if b.check(&text, *action) != Verdict::Pass {
                    found += 1;
                }
            }
        }
        found
    };
    println!("(d) safety checks per turn: secrets + pii + 50 words on the message and every sentence, vs the narration guard");
    println!(
        "  {:<34} {:>10} {:>10} {:>7}",
        "turn", "checks µs", "guard µs", "ratio"
    );
    let (mut total_checks, mut total_guard) = (Duration::ZERO, Duration::ZERO);
    for c in cases {
        assert_eq!(
            run(c),
            0,
            "{}: a safety check found something in the honest demo",
            c.name
        );
        let t = Instant::now();
        for _ in 0..rounds {
            black_box(run(black_box(c)));
        }
        let k = t.elapsed();
        let t = Instant::now();
        for _ in 0..rounds {
            black_box(judged(table, black_box(c)));
        }
        let g = t.elapsed();
        total_checks += k;
        total_guard += g;
        println!(
            "  {:<34} {:>10.2} {:>10.2} {:>6.2}×",
            c.name,
            k.as_secs_f64() * 1e6 / f64::from(rounds),
            g.as_secs_f64() * 1e6 / f64::from(rounds),
            k.as_secs_f64() / g.as_secs_f64().max(1e-12)
        );
    }
    let n = f64::from(rounds) * cases.len() as f64;
    println!(
        "  all: checks {:.2} µs, guard {:.2} µs per turn; ratio {:.2}×",
        total_checks.as_secs_f64() * 1e6 / n,
        total_guard.as_secs_f64() * 1e6 / n,
        total_checks.as_secs_f64() / total_guard.as_secs_f64().max(1e-12)
    );
}

/// The first claim a sentence makes, by name ("none" when it makes none).
fn claim_name(sentence: &str, user: &str) -> &'static str {
    claims(sentence, vocab::vocab(vocab::detect(user)))
        .first()
        .map_or("none", |c| c.kind.name())
}
