//! The licence gate (issue 20 §5, seed 003 §4.6), in two places that read
//! the one map in `judge::tiers` and decide through `tables/licence.ron`:
//!
//! - the catalogue filter: the planner is shown only the tools the caller
//!   may use, so no prompt names one it may not;
//! - the interceptor: every call of a planning round is classified before
//!   any is sent. A round with a refused call runs none of its calls: the
//!   refused ones get a structured refusal, and the answer is code's copy,
//!   which offers the part that can be done when there is one (a partial
//!   permission neither refuses outright nor silently does half).
//!
//! Each decision on a call is an audit row of the thread: the `licence`
//! record committed with the round's plan frame.

use serde_json::json;

use super::admit::NotRun;
use super::{Stop, Turn};
use crate::judge::refusal::CopyLang;
use crate::judge::tiers::{LicenceMap, TierVerdict};
use crate::judge::Anchor;
use crate::llm::PlannedCall;
use crate::mcp::ToolInfo;
use crate::protocols::licence::{Licence, LicenceEffect, LicenceEvent};
use crate::protocols::telemetry;
use crate::protocols::turn::TurnEvent;
use crate::protocols::{Names, Typed};
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
    decisions: Vec<Decision>,
}

impl Turn<'_> {
    /// The map's verdict on `tool` for this caller.
    fn verdict(&self, tool: &str) -> TierVerdict {
        let declared = self.agent.tools.trust(tool).declared_tier;
        (self.agent.licences).verdict(tool, declared.as_deref(), &self.access)
    }

    /// Fires `event` on a call's licence machine: the row and whether it
    /// lets the call run.
    fn decide_licence(&self, machine: &mut Typed<Licence>, event: LicenceEvent) -> Decision {
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

    /// The catalogue filter: the tools the table lets this caller use, as
    /// if each were the only call of its round.
    pub(super) fn catalogue(&self) -> Vec<ToolInfo> {
        (self.agent.tools.list().into_iter())
            .filter(|t| {
                let event = LicenceMap::classify(&self.verdict(&t.name), false);
                let mut machine = self.agent.tables.licence.machine();
                machine
                    .fire(event)
                    .is_ok_and(|s| s.effect == Some(LicenceEffect::Run))
            })
            .collect()
    }

    /// The interceptor: every call of the round decided before any is
    /// sent. `None`: all may run. The decisions are the round's audit rows,
    /// committed with its plan frame.
    pub(super) fn gate_round(
        &mut self,
        calls: &[PlannedCall],
    ) -> (Option<Refused>, Vec<LicenceAudit>) {
        let verdicts: Vec<TierVerdict> = calls.iter().map(|c| self.verdict(&c.tool)).collect();
        let mut machines = Vec::with_capacity(calls.len());
        let mut decisions = Vec::with_capacity(calls.len());
        let mut audit = Vec::with_capacity(calls.len());
        let row = |tool: &str, v: &TierVerdict, event: LicenceEvent, d: &Decision| LicenceAudit {
            turn_id: self.turn_id.clone(),
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
            let mut machine = self.agent.tables.licence.machine();
            let d = self.decide_licence(&mut machine, event);
            audit.push(row(&calls[i].tool, v, event, &d));
            decisions.push(d);
            machines.push(machine);
        }
        if decisions.iter().all(|d| d.allowed) {
            return (None, audit);
        }
        // A refused call in the round: each call let through hears it, and
        // its row says what becomes of it (held back, as shipped; the
        // binding requires it).
        let event = LicenceEvent::RoundRefused;
        for (i, machine) in machines.iter_mut().enumerate() {
            if !decisions[i].allowed {
                continue;
            }
            // A row that holds it back (as shipped) offers it in the
            // answer; a forbidden row is a refusal of its own.
            let d = self.decide_licence(machine, event);
            audit.push(row(&calls[i].tool, &verdicts[i], event, &d));
            decisions[i] = d;
        }
        for (call, d) in calls.iter().zip(&decisions).filter(|(_, d)| !d.withheld) {
            tracing::info!(tool = %call.tool, row_id = %d.row_id, "call refused by the licence gate");
        }
        (Some(Refused { decisions }), audit)
    }

    /// A refused round: each refused call shown as not sent, with the
    /// structured refusal; the calls that could run are held back and
    /// offered. The answer is code's (the turn table's `explain`).
    pub(super) async fn refuse_round(
        &mut self,
        calls: &[PlannedCall],
        refused: Refused,
    ) -> Result<TurnEvent, Stop> {
        let lang = CopyLang::of(&self.user_text);
        let mut possible: Vec<String> = Vec::new();
        for (call, d) in calls.iter().zip(&refused.decisions) {
            if d.withheld && !possible.contains(&call.tool) {
                possible.push(call.tool.clone());
            }
        }
        let message = crate::judge::refusal::copy(lang, &possible);
        for (call, d) in calls.iter().zip(&refused.decisions) {
            if d.withheld {
                continue;
            }
            // What a model could ever read of it is that it was not run:
            // no word of the permission system reaches a prompt.
            let refusal = json!({
                "table": "licence",
                "row_id": d.row_id,
                "lang": lang,
                "message": message,
            });
            let marks = NotRun {
                refusal: Some(refusal),
                ..NotRun::default()
            };
            self.not_run(call, &call.args, "not run".into(), marks)
                .await?;
        }
        self.anchor(Anchor::NotRun { possible, lang });
        Ok(TurnEvent::CallUnlicensed)
    }
}
