//! The licence gate's driver (issue 36 §2): the caller's tiers, and each
//! planned call turned into `tables/licence.ron`'s events through the one
//! tool → tier map (`judge::tiers`). It sends nothing and says nothing:
//! `licence.rs` shows the refusals and writes code's answer.

use crate::judge::tiers::{Access, LicenceMap, TierVerdict};
use crate::llm::PlannedCall;
use crate::protocols::licence::{Licence, LicenceEffect, LicenceEvent};
use crate::protocols::{telemetry, Bound, Names, Typed};
use crate::store::LicenceAudit;

/// One call's decision.
pub(super) struct Decision {
    pub(super) allowed: bool,
    pub(super) row_id: String,
    /// Let through by its tier, then held back with its refused round.
    pub(super) withheld: bool,
}

/// A round the gate refused: each call's decision, in plan order.
pub(super) struct Refused {
    pub(super) decisions: Vec<Decision>,
}

/// The tier a tool declared for itself, by name.
type Declared<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The licence protocol's driver for one turn: what the caller holds.
#[derive(Default)]
pub(super) struct LicenceGate {
    /// The tiers the caller holds (the verifier's, or the anonymous ones).
    pub(super) access: Access,
}

impl LicenceGate {
    pub(super) fn new(access: Access) -> LicenceGate {
        LicenceGate { access }
    }

    /// The map's verdict on `tool` for this caller; `declared` is the tier
    /// a tool declared for itself (`turnstile/licence_tier` in its `_meta`).
    fn verdict(&self, map: &LicenceMap, declared: Declared<'_>, tool: &str) -> TierVerdict {
        map.verdict(tool, declared(tool).as_deref(), &self.access)
    }

    /// Whether the table lets this caller use `tool` as the only call of
    /// its round (the catalogue filter).
    pub(super) fn allows_alone(
        &self,
        table: &Bound<Licence>,
        map: &LicenceMap,
        declared: Declared<'_>,
        tool: &str,
    ) -> bool {
        let event = LicenceMap::classify(&self.verdict(map, declared, tool), false);
        (table.machine().fire(event)).is_ok_and(|s| s.effect == Some(LicenceEffect::Run))
    }

    /// Every call of a planning round decided before any is sent: each by
    /// its tier, then, if one was refused, each call let through by its
    /// `round_refused` row. `None`: all may run. Every row fired is an
    /// audit row.
    pub(super) fn on_plan(
        &self,
        table: &Bound<Licence>,
        map: &LicenceMap,
        declared: Declared<'_>,
        turn_id: &str,
        calls: &[PlannedCall],
    ) -> (Option<Refused>, Vec<LicenceAudit>) {
        let verdicts: Vec<TierVerdict> = calls
            .iter()
            .map(|c| self.verdict(map, declared, &c.tool))
            .collect();
        let mut machines = Vec::with_capacity(calls.len());
        let mut decisions = Vec::with_capacity(calls.len());
        let mut audit = Vec::with_capacity(calls.len());
        let row = |tool: &str, v: &TierVerdict, event: LicenceEvent, d: &Decision| LicenceAudit {
            turn_id: turn_id.to_string(),
            tool: tool.to_string(),
            required_tier: v.required().map(str::to_string),
            held_tiers: self.access.tiers.clone(),
            event: event.name().to_string(),
            row_id: d.row_id.clone(),
            allowed: d.allowed,
        };
        for (i, v) in verdicts.iter().enumerate() {
            let others_allowed = (verdicts.iter().enumerate()).any(|(j, o)| j != i && o.allows());
            let event = LicenceMap::classify(v, others_allowed);
            let mut machine = table.machine();
            let d = decide(&mut machine, event);
            audit.push(row(&calls[i].tool, v, event, &d));
            decisions.push(d);
            machines.push(machine);
        }
        if decisions.iter().all(|d| d.allowed) {
            return (None, audit);
        }
        // A refused call in the round: each call let through hears it, and
        // its row says what becomes of it (held back and offered, as
        // shipped; the binding requires it). A forbidden row is a refusal
        // of its own.
        let event = LicenceEvent::RoundRefused;
        for (i, machine) in machines.iter_mut().enumerate() {
            if !decisions[i].allowed {
                continue;
            }
            let d = decide(machine, event);
            audit.push(row(&calls[i].tool, &verdicts[i], event, &d));
            decisions[i] = d;
        }
        for (call, d) in calls.iter().zip(&decisions).filter(|(_, d)| !d.withheld) {
            tracing::info!(tool = %call.tool, row_id = %d.row_id, "call refused by the licence gate");
        }
        (Some(Refused { decisions }), audit)
    }
}

/// Fires `event` on a call's licence machine: the row and whether it lets
/// the call run.
fn decide(machine: &mut Typed<Licence>, event: LicenceEvent) -> Decision {
    match machine.fire(event) {
        Ok(step) => Decision {
            allowed: step.effect == Some(LicenceEffect::Run),
            row_id: machine.row_id(step.row).to_string(),
            withheld: step.effect == Some(LicenceEffect::Withhold),
        },
        Err(v) => {
            telemetry::violation(&v);
            Decision {
                allowed: false,
                row_id: v.row_id.clone(),
                withheld: false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::judge::tiers::Tiers;
    use crate::protocols::TableSet;

    fn call(tool: &str) -> PlannedCall {
        PlannedCall {
            id: None,
            tool: tool.into(),
            args: serde_json::Map::new(),
            invalid_args: None,
        }
    }

    /// The licence driver decides a round without a turn: a call beyond the
    /// caller's tiers is refused, the one beside it is held back by its
    /// `round_refused` row, and every row fired is an audit row.
    #[test]
    fn the_licence_driver_decides_a_round_by_its_table_alone() {
        let table: Bound<Licence> = TableSet::builtin().unwrap().bound().unwrap();
        let configured = BTreeMap::from([("archive".to_string(), "pro".to_string())]);
        let map = LicenceMap::new(configured, Tiers::default(), None);
        let gate = LicenceGate::new(Access::new(["basic".to_string()]));
        let none: Declared<'_> = &|_| None;
        assert!(gate.allows_alone(&table, &map, none, "search"));
        assert!(!gate.allows_alone(&table, &map, none, "archive"));
        // A tool's own declaration is read when the config says nothing.
        let declares_pro: Declared<'_> = &|t| (t == "search").then(|| "pro".to_string());
        assert!(!gate.allows_alone(&table, &map, declares_pro, "search"));

        let (refused, audit) = gate.on_plan(&table, &map, none, "t1", &[call("search")]);
        assert!(refused.is_none());
        assert_eq!(audit.len(), 1);

        let calls = [call("search"), call("archive")];
        let (refused, audit) = gate.on_plan(&table, &map, none, "t1", &calls);
        let refused = refused.expect("a refused round");
        let rows: Vec<(&str, &str, bool)> = (audit.iter())
            .map(|a| (a.tool.as_str(), a.row_id.as_str(), a.allowed))
            .collect();
        assert_eq!(
            rows,
            [
                ("search", "no-tier-required", true),
                ("archive", "tier-not-held-in-part", false),
                ("search", "withheld-with-its-round", false),
            ]
        );
        let withheld: Vec<bool> = refused.decisions.iter().map(|d| d.withheld).collect();
        assert_eq!(withheld, [true, false]);
    }
}
