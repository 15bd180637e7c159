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
use super::licence_gate::Refused;
use super::{Stop, Turn};
use crate::judge::refusal::CopyLang;
use crate::judge::Anchor;
use crate::llm::PlannedCall;
use crate::mcp::ToolInfo;
use crate::protocols::turn::TurnEvent;
use crate::store::LicenceAudit;

impl Turn<'_> {
    /// The catalogue filter: the tools the licence table lets this caller
    /// use, as if each were the only call of its round.
    pub(super) fn catalogue(&self) -> Vec<ToolInfo> {
        let (table, map) = (&self.agent.tables.licence, &self.agent.licences);
        let tools = self.agent.tools.as_ref();
        let declared = |tool: &str| tools.trust(tool).declared_tier;
        (tools.list().into_iter())
            .filter(|t| self.licence.allows_alone(table, map, &declared, &t.name))
            .collect()
    }

    /// The interceptor: the licence driver decides every call of the round
    /// before any is sent. `None`: all may run. The decisions are the
    /// round's audit rows, committed with its plan frame.
    pub(super) fn gate_round(
        &mut self,
        calls: &[PlannedCall],
    ) -> (Option<Refused>, Vec<LicenceAudit>) {
        let (table, map) = (&self.agent.tables.licence, &self.agent.licences);
        let tools = self.agent.tools.as_ref();
        let declared = |tool: &str| tools.trust(tool).declared_tier;
        (self.licence).on_plan(table, map, &declared, &self.turn_id, calls)
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
