//! Row telemetry: every fired row of every machine the server runs, counted
//! per table, row and kind (`legal`, or `forbidden` for a violation), and
//! exposed in Prometheus text format (`GET /v1/metrics`).
//!
//! A legal row is counted when it is fired, once: each bound table gets one
//! counter per row at bind time, and `fire` adds one to it (an atomic add,
//! no allocation). A machine restored from the store counts nothing again.
//! A violation is counted where it is reported.

use std::sync::OnceLock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::fsm::Violation;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RowLabels {
    table: String,
    row: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    phase: &'static str,
}

struct Metrics {
    registry: Registry,
    rows: Family<RowLabels, Counter>,
    phases: Family<PhaseLabels, Counter<f64, std::sync::atomic::AtomicU64>>,
    turns: Counter,
    model_requests: Counter,
}

fn metrics() -> &'static Metrics {
    static M: OnceLock<Metrics> = OnceLock::new();
    M.get_or_init(|| {
        let mut registry = Registry::default();
        let rows = Family::<RowLabels, Counter>::default();
        registry.register(
            "turnstile_table_rows",
            "Rows fired per table, row id and kind (legal or forbidden)",
            rows.clone(),
        );
        let phases = Family::<PhaseLabels, Counter<f64, std::sync::atomic::AtomicU64>>::default();
        registry.register(
            "turnstile_turn_phase_seconds",
            "Server time turns spent per phase: lease, commit (a step's wait for its group commit), mcp, model, judge, guard",
            phases.clone(),
        );
        let turns = Counter::default();
        registry.register("turnstile_turns", "Turns run (a resumed stream counts once more)", turns.clone());
        let model_requests = Counter::default();
        registry.register(
            "turnstile_model_requests",
            "Requests turns made to the model (a planning round, or a responder call)",
            model_requests.clone(),
        );
        Metrics {
            registry,
            rows,
            phases,
            turns,
            model_requests,
        }
    })
}

fn count(table: &str, row: &str, kind: &str) {
    let labels = RowLabels {
        table: table.to_string(),
        row: row.to_string(),
        kind: kind.to_string(),
    };
    metrics().rows.get_or_create(&labels).inc();
}

/// The legal-row counters of one bound table, by row index. Each is
/// registered the first time its row fires (so `/v1/metrics` lists the rows
/// that happened), then shared by every machine of the table.
#[derive(Clone)]
pub struct RowCounters(std::sync::Arc<Cells>);

struct Cells {
    table: std::sync::Arc<crate::fsm::Table>,
    cells: Vec<OnceLock<Counter>>,
}

impl RowCounters {
    pub fn for_table(table: &std::sync::Arc<crate::fsm::Table>) -> RowCounters {
        RowCounters(std::sync::Arc::new(Cells {
            table: table.clone(),
            cells: table.rows.iter().map(|_| OnceLock::new()).collect(),
        }))
    }

    /// Counts the row `row` (its index) as fired: an atomic add, after the
    /// row's first firing.
    #[inline]
    pub fn fired(&self, row: u16) {
        let c = &self.0;
        let i = usize::from(row);
        let (Some(cell), Some(row)) = (c.cells.get(i), c.table.rows.get(i)) else {
            return;
        };
        cell.get_or_init(|| {
            let labels = RowLabels {
                table: c.table.name.clone(),
                row: row.id.clone(),
                kind: "legal".to_string(),
            };
            metrics().rows.get_or_create(&labels).clone()
        })
        .inc();
    }
}

/// Counts a forbidden row that was reached.
pub fn violation(v: &Violation) {
    count(&v.table, &v.row_id, "forbidden");
    tracing::event!(
        target: "rows",
        tracing::Level::TRACE,
        turnstile.table = %v.table,
        turnstile.row_id = %v.row_id,
        turnstile.from = %v.state,
        turnstile.event = %v.event,
        turnstile.row_kind = "forbidden",
        "table row"
    );
}

/// Counts a forbidden row reached by design (a page outside the scope,
/// discarded as the row says).
pub fn forbidden(table: &str, row: &str) {
    count(table, row, "forbidden");
    tracing::event!(
        target: "rows",
        tracing::Level::TRACE,
        turnstile.table = table,
        turnstile.row_id = row,
        turnstile.row_kind = "forbidden",
        "table row"
    );
}

/// Where a turn's server time goes (`cargo bench --bench chat` reports it
/// per turn).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Claiming the thread's lease.
    Lease,
    /// A step's wait for its group commit.
    Commit,
    /// A tool call, until its answer.
    Mcp,
    /// Waiting for the model: a plan, or the answer's next delta.
    Model,
    /// The judge reading a result.
    Judge,
    /// The narration guard checking sentences.
    Guard,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Lease => "lease",
            Phase::Commit => "commit",
            Phase::Mcp => "mcp",
            Phase::Model => "model",
            Phase::Judge => "judge",
            Phase::Guard => "guard",
        }
    }
}

/// Adds `spent` to a phase's total.
pub fn phase(p: Phase, spent: std::time::Duration) {
    let labels = PhaseLabels { phase: p.name() };
    metrics()
        .phases
        .get_or_create(&labels)
        .inc_by(spent.as_secs_f64());
}

/// Counts a turn (or a resumed stream) that ran.
pub fn turn_ran() {
    metrics().turns.inc();
}

/// Requests a turn made to the model.
pub fn model_requests(n: u64) {
    metrics().model_requests.inc_by(n);
}

/// The counters in Prometheus text format.
pub fn render() -> String {
    render_with(&[])
}

/// The counters, and beside them counters their owners keep (the store's
/// commits and bytes): `(name, help, value)`.
pub fn render_with(counters: &[(&str, &str, u64)]) -> String {
    use prometheus_client::encoding::text;
    use prometheus_client::metrics::counter::ConstCounter;
    let mut extra = Registry::default();
    for (name, help, value) in counters {
        extra.register(*name, *help, ConstCounter::new(*value));
    }
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = text::encode_registry(&mut out, &metrics().registry);
    let _ = text::encode_registry(&mut out, &extra);
    let _ = text::encode_eof(&mut out);
    out
}
