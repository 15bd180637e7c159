//! The binding of `tables/harness.ron`, the test harness's own state. No
//! scenario verdict is reachable unless the substrate (the server the
//! scenarios run against) passed its check first.
//!
//! The table is reviewed in `tables/` with the product's, but it is the
//! tests' own: neither it nor this binding is compiled into the product, and
//! a server never serves it.

use std::sync::{Arc, OnceLock};

use turnstile::fsm::{self, Table};
use turnstile::protocols::{Bound, Protocol};

turnstile::names! {
    pub enum HarnessState {
        Idle = "Idle",
        Probing = "Probing",
        Ready = "Ready",
        Running = "Running",
        Verdict = "Verdict",
        Void = "Void",
    }
}

turnstile::names! {
    pub enum HarnessEvent {
        Probe = "probe",
        SubstrateOk = "substrate_ok",
        SubstrateBroken = "substrate_broken",
        Run = "run",
        Pass = "pass",
        Fail = "fail",
    }
}

turnstile::names! {
    pub enum HarnessEffect {
        StartProbe = "start-probe",
        StartScenario = "start-scenario",
        RecordPass = "record-pass",
        RecordFail = "record-fail",
        VoidRun = "void-run",
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Harness;

impl Protocol for Harness {
    const NAME: &'static str = "harness";
    type State = HarnessState;
    type Event = HarnessEvent;
    type Effect = HarnessEffect;
}

/// `tables/harness.ron`, loaded once against this binding.
pub fn bound() -> Bound<Harness> {
    static BOUND: OnceLock<Bound<Harness>> = OnceLock::new();
    BOUND
        .get_or_init(|| {
            let t = fsm::load(SOURCE, "tables/harness.ron", Some(Harness::binding()))
                .unwrap_or_else(|f| panic!("tables/harness.ron:\n{f}"));
            Bound::new(&t).expect("the harness table binds")
        })
        .clone()
}

/// The harness table, numbered as its binding's enums.
pub fn table() -> Arc<Table> {
    bound().table().clone()
}

/// The table's text, as reviewed.
pub const SOURCE: &str = include_str!("../../tables/harness.ron");
