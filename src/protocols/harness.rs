//! `tables/harness.ron`: the test harness's own state. No scenario verdict is
//! reachable unless the substrate (the server the scenarios run against)
//! passed its check first.

use super::Protocol;

crate::names! {
    pub enum HarnessState {
        Idle = "Idle",
        Probing = "Probing",
        Ready = "Ready",
        Running = "Running",
        Verdict = "Verdict",
        Void = "Void",
    }
}

crate::names! {
    pub enum HarnessEvent {
        Probe = "probe",
        SubstrateOk = "substrate_ok",
        SubstrateBroken = "substrate_broken",
        Run = "run",
        Pass = "pass",
        Fail = "fail",
    }
}

crate::names! {
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
