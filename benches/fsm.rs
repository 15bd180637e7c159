//! ns per event through a loaded table (trace on) against two hand-written
//! baselines over the same `frame` table, on one long random walk of legal
//! events; and the cost of loading and validating every table.
//!
//! Run: `cargo bench --bench fsm`. Prints ratios against the baselines,
//! measured in the same run (these machines are noisy; ratios travel).

use std::hint::black_box;
use std::time::{Duration, Instant};

use turnstile::fsm::{Machine, RowKind, Table};
use turnstile::protocols::TableSet;

const RESET: u8 = u8::MAX;
const FORBIDDEN: u8 = u8::MAX;
const WALK: usize = 20_000_000;

/// A legal random walk; `RESET` marks "back to the initial state" after a
/// terminal state, so all three implementations pay the same for it.
fn walk(t: &Table, len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = Vec::with_capacity(len);
    let mut s = t.initial;
    while out.len() < len {
        if t.is_terminal(s) {
            out.push(RESET);
            s = t.initial;
            continue;
        }
        let legal: Vec<(u16, u16)> = (0..t.events.len() as u16)
            .filter_map(|e| match t.row_for(s, e).kind {
                RowKind::Legal { to, .. } => Some((e, to)),
                RowKind::Forbidden { .. } => None,
            })
            .collect();
        let (e, to) = legal[(next() % legal.len() as u64) as usize];
        out.push(e as u8);
        s = to;
    }
    out
}

/// Baseline 1: the frame table as a compiled `match` (states and events in
/// table order: Idle Open Working Narrating Suspended Finished; start plan
/// tool_call tool_result citation delta interrupt done error close).
#[inline(never)]
fn run_match(events: &[u8]) -> u64 {
    let mut s: u8 = 0;
    let mut acc = 0u64;
    for &e in events {
        if e == RESET {
            s = 0;
            continue;
        }
        s = match (s, e) {
            (0, 0) => 1,
            (1, 1) | (1, 2) => 2,
            (1, 5) => 3,
            (1, 8) => 5,
            (2, 1) | (2, 2) | (2, 3) | (2, 4) => 2,
            (2, 5) => 3,
            (2, 6) => 4,
            (2, 8) => 5,
            (3, 5) => 3,
            (3, 7) | (3, 8) => 5,
            (4, 7) | (4, 8) => 5,
            (5, 9) => 5,
            _ => return u64::MAX,
        };
        acc += s as u64;
    }
    acc
}

/// Baseline 2: a flat `Vec` indexed by `state * events + event`.
#[inline(never)]
fn run_flat(next: &[u8], n_events: usize, events: &[u8]) -> u64 {
    let mut s: u8 = 0;
    let mut acc = 0u64;
    for &e in events {
        if e == RESET {
            s = 0;
            continue;
        }
        let t = next[s as usize * n_events + e as usize];
        if t == FORBIDDEN {
            return u64::MAX;
        }
        s = t;
        acc += s as u64;
    }
    acc
}

/// The real thing: a loaded, validated table with trace recording on.
#[inline(never)]
fn run_machine(m: &mut Machine, events: &[u8]) -> u64 {
    m.reset();
    let mut acc = 0u64;
    for &e in events {
        if e == RESET {
            m.reset();
            continue;
        }
        match m.fire(e as u16) {
            Ok(step) => acc += step.to as u64,
            Err(_) => return u64::MAX,
        }
    }
    acc
}

fn best_of<F: FnMut() -> u64>(runs: usize, mut f: F) -> (Duration, u64) {
    let mut best = Duration::MAX;
    let mut out = 0;
    for _ in 0..runs {
        let t0 = Instant::now();
        out = black_box(f());
        best = best.min(t0.elapsed());
    }
    (best, out)
}

fn main() {
    let set = TableSet::builtin().expect("builtin tables load");
    let t = set.get("frame").expect("frame table").clone();
    let events = walk(&t, WALK);
    let real = events.iter().filter(|e| **e != RESET).count() as f64;

    let mut flat = vec![FORBIDDEN; t.states.len() * t.events.len()];
    for r in &t.rows {
        if let RowKind::Legal { to, .. } = r.kind {
            flat[r.from as usize * t.events.len() + r.on as usize] = to as u8;
        }
    }
    let mut m = Machine::new(t.clone());

    let (d_match, a) = best_of(5, || run_match(black_box(&events)));
    let (d_flat, b) = best_of(5, || {
        run_flat(black_box(&flat), t.events.len(), black_box(&events))
    });
    let (d_machine, c) = best_of(5, || run_machine(&mut m, black_box(&events)));
    assert!(
        a == b && b == c && a != u64::MAX,
        "the three implementations disagree"
    );

    let ns = |d: Duration| d.as_nanos() as f64 / real;
    println!(
        "frame table, random walk of {} legal events (best of 5)",
        real as u64
    );
    println!("  compiled match   {:6.2} ns/event", ns(d_match));
    println!("  flat Vec         {:6.2} ns/event", ns(d_flat));
    println!(
        "  turnstile Machine{:6.2} ns/event (trace on)",
        ns(d_machine)
    );
    println!(
        "  machine / flat   {:6.2}x  (goal ≤ 2.0)",
        ns(d_machine) / ns(d_flat)
    );
    println!(
        "  machine / match  {:6.2}x  (goal < 1.0)",
        ns(d_machine) / ns(d_match)
    );

    let iters = 200;
    let t0 = Instant::now();
    for _ in 0..iters {
        black_box(TableSet::builtin().expect("tables load"));
    }
    let per = t0.elapsed() / iters;
    println!(
        "load + validate all {} tables: {:.3} ms (goal < 5 ms)",
        set.names().count(),
        per.as_secs_f64() * 1e3
    );
}
