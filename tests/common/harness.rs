//! The test harness's own state, run through `tables/harness.ron` (seed 003
//! §4.7 ④): "if THIS is red, no spec verdict means anything".
//!
//! Every scenario against a turnstile server is one [`Run`] of the harness
//! machine, and its effects drive the run:
//!
//! - `probe` (`begin-probe`, effect `start-probe`): the substrate check runs.
//!   The server must be live, serve exactly the tables the test has, and
//!   each with the test's own table's hash (`GET /v1/tables/{name}`): the
//!   test checks every frame against its own `frame` table, so a server
//!   running another one would make each of those checks a check of
//!   nothing.
//! - `substrate_ok` (`substrate-ready`), then `run` (`start-scenario`): the
//!   test gets its server. Or `substrate_broken` (`substrate-void`, effect
//!   `void-run`): the run is void and the test gets no server, only the
//!   reason and the voided machine.
//! - `pass` (`scenario-passed`, effect `record-pass`): the verdict, which
//!   must leave the machine in its terminal `Verdict` state.
//! - A test that panics while its run is `Running` fires `fail`
//!   (`scenario-failed`, effect `record-fail`); a server that died before
//!   the verdict fires `substrate_broken` (`substrate-died`) and voids it.
//! - A run dropped without a verdict fails the test: a scenario that never
//!   said it passed has not.

use std::collections::BTreeSet;

use super::harness_table::{self, Harness, HarnessEffect, HarnessEvent, HarnessState};
use serde::Deserialize;
use turnstile::protocols::{TableSet, Typed};

/// One scenario's run of the harness machine.
pub struct Run {
    /// `None` once handed over (a voided run's machine goes to the caller).
    machine: Option<Typed<Harness>>,
    /// What runs the scenario, for messages (`TestServer at http://…`).
    what: String,
}

/// The substrate check failed: the run is void and there is no server to
/// give a verdict on.
pub struct SubstrateBroken {
    /// What the probe found, naming the table and both hashes on a
    /// mismatch.
    pub reason: String,
    /// The voided machine (`Void`), to show that no verdict can follow.
    pub harness: Typed<Harness>,
}

impl std::fmt::Debug for SubstrateBroken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubstrateBroken")
            .field("reason", &self.reason)
            .field("state", &self.harness.state())
            .finish()
    }
}

/// What `GET /v1/tables/{name}` says of a table, as far as the probe reads
/// it.
#[derive(Deserialize)]
struct ServedTable {
    name: String,
    hash: String,
}

/// A new harness machine (`tables/harness.ron`: the harness is the test's
/// own, never the server's).
fn machine() -> Typed<Harness> {
    harness_table::bound().machine()
}

/// Fires `event`, which the table must allow here, and returns the step's
/// effect.
#[track_caller]
fn step(m: &mut Typed<Harness>, event: HarnessEvent, what: &str) -> Option<HarnessEffect> {
    m.fire(event)
        .unwrap_or_else(|v| panic!("{what}: the harness table refuses `{event:?}`: {v}"))
        .effect
}

impl Run {
    /// Probes the turnstile server at `base` (through `http`) against the
    /// test's own tables `own`. Passed, the run is `Running` and the
    /// scenario may begin; failed, it is `Void`.
    pub async fn probe(
        what: impl Into<String>,
        http: &reqwest::Client,
        base: &str,
        own: &TableSet,
    ) -> Result<Run, SubstrateBroken> {
        let what = what.into();
        let mut m = machine();
        let effect = step(&mut m, HarnessEvent::Probe, &what);
        assert_eq!(effect, Some(HarnessEffect::StartProbe), "{what}");
        match substrate(http, base, own).await {
            Ok(()) => {
                assert_eq!(step(&mut m, HarnessEvent::SubstrateOk, &what), None);
                let effect = step(&mut m, HarnessEvent::Run, &what);
                assert_eq!(effect, Some(HarnessEffect::StartScenario), "{what}");
                assert_eq!(m.state(), HarnessState::Running, "{what}");
                Ok(Run {
                    machine: Some(m),
                    what,
                })
            }
            Err(reason) => {
                let effect = step(&mut m, HarnessEvent::SubstrateBroken, &what);
                assert_eq!(effect, Some(HarnessEffect::VoidRun), "{what}");
                assert_eq!(m.state(), HarnessState::Void, "{what}");
                Err(SubstrateBroken {
                    reason: format!("{what}: {reason}"),
                    harness: m,
                })
            }
        }
    }

    /// As [`Run::probe`]; a broken substrate fails the test.
    pub async fn start(
        what: impl Into<String>,
        http: &reqwest::Client,
        base: &str,
        own: &TableSet,
    ) -> Run {
        Run::probe(what, http, base, own)
            .await
            .unwrap_or_else(|b| b.fail())
    }

    /// The harness state.
    pub fn state(&self) -> HarnessState {
        self.machine
            .as_ref()
            .expect("a run has its machine")
            .state()
    }

    /// The verdict: the scenario passed. Fires `pass`, which must take
    /// `scenario-passed` (effect `record-pass`) into the terminal
    /// `Verdict`.
    #[track_caller]
    pub fn pass(&mut self) {
        let what = self.what.clone();
        let m = self.machine.as_mut().expect("a run has its machine");
        let effect = m
            .fire(HarnessEvent::Pass)
            .unwrap_or_else(|v| panic!("{what}: no verdict: {v}"))
            .effect;
        assert_eq!(effect, Some(HarnessEffect::RecordPass), "{what}");
        assert_eq!(m.state(), HarnessState::Verdict, "{what}");
        assert!(m.is_terminal(), "{what}: a verdict is terminal");
        assert_eq!(
            m.untyped().trace_ids().collect::<Vec<_>>(),
            [
                "begin-probe",
                "substrate-ready",
                "start-scenario",
                "scenario-passed"
            ],
            "{what}: the run's rows"
        );
    }

    /// The substrate died during the scenario: fires `substrate_broken`
    /// (`substrate-died`, effect `void-run`) and fails the test.
    #[track_caller]
    pub fn died(&mut self, reason: &str) -> ! {
        let what = self.what.clone();
        let m = self.machine.as_mut().expect("a run has its machine");
        let effect = step(m, HarnessEvent::SubstrateBroken, &what);
        assert_eq!(effect, Some(HarnessEffect::VoidRun), "{what}");
        panic!("{what}: the substrate died during the scenario ({reason}): the run is void, no verdict")
    }
}

impl SubstrateBroken {
    /// Fails the test with the probe's reason.
    #[track_caller]
    pub fn fail(self) -> ! {
        panic!(
            "substrate check failed: {}; the harness run is {:?}: no verdict of this test would mean anything",
            self.reason,
            self.harness.state()
        )
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let Some(m) = self.machine.as_mut() else {
            return;
        };
        if std::thread::panicking() {
            // The test failed while its scenario ran: that is the verdict.
            if m.state() == HarnessState::Running {
                let _ = m.fire(HarnessEvent::Fail);
            }
            return;
        }
        match m.state() {
            HarnessState::Verdict => {}
            HarnessState::Running => panic!(
                "{}: dropped without a verdict: a scenario ends with `pass()` (the harness table's \
                 `scenario-passed`); one that never says it passed has not",
                self.what
            ),
            state => panic!(
                "{}: the substrate was never proven (harness state {state:?}): no verdict of this \
                 test means anything",
                self.what
            ),
        }
    }
}

/// The substrate check: `/healthz` answers, `GET /v1/tables` lists exactly
/// the test's tables, and `GET /v1/tables/{name}` serves each with the
/// test's own table's hash. Every mismatch is named.
async fn substrate(http: &reqwest::Client, base: &str, own: &TableSet) -> Result<(), String> {
    let health = http
        .get(format!("{base}/healthz"))
        .send()
        .await
        .map_err(|e| format!("GET /healthz: {e}"))?;
    if !health.status().is_success() {
        return Err(format!("GET /healthz: {}", health.status()));
    }
    let listed: Vec<ServedTable> = get_json(http, &format!("{base}/v1/tables")).await?;
    let served: BTreeSet<&str> = listed.iter().map(|t| t.name.as_str()).collect();
    let mine: BTreeSet<&str> = own.names().collect();
    if served != mine {
        return Err(format!(
            "the server serves the tables {served:?}, the test has {mine:?}"
        ));
    }
    let mut wrong = Vec::new();
    for name in own.names() {
        let t: ServedTable = get_json(http, &format!("{base}/v1/tables/{name}")).await?;
        let mine = own.get(name).expect("a listed table");
        if t.name != name {
            wrong.push(format!(
                "GET /v1/tables/{name} serves the table `{}`",
                t.name
            ));
        } else if t.hash != mine.hash {
            wrong.push(format!(
                "table `{name}`: hash mismatch: the server serves {}, the test's own table is {}",
                t.hash, mine.hash
            ));
        }
    }
    match wrong.is_empty() {
        true => Ok(()),
        false => Err(wrong.join("; ")),
    }
}

async fn get_json<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    url: &str,
) -> Result<T, String> {
    let r = http
        .get(url)
        .send()
        .await
        .map_err(|e| format!("GET {url}: {e}"))?;
    if !r.status().is_success() {
        return Err(format!("GET {url}: {}", r.status()));
    }
    r.json().await.map_err(|e| format!("GET {url}: {e}"))
}
