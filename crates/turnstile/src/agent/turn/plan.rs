//! The `plan` effect: ask the planner, with the thread's history and this
//! turn's digests, and classify its answer into a turn event.

use serde_json::{Map, Value};
use tracing::Instrument;

use super::respond::DIRECTIVES;
use super::show_more::Round;
use super::{Stop, Turn};
use crate::agent::records::Record;
use crate::judge::approval::{self, HoldVerdict};
use crate::judge::narrowing::Scope;
use crate::judge::Anchor;
use crate::llm::prompt::PLANNER_FIXED;
use crate::llm::{PlanRequest, PlannedCall, Prompt, Reply};
use crate::protocols::telemetry;
use crate::protocols::turn::TurnEvent;
use crate::wire;

impl Turn<'_> {
    /// Asks the planner, with the thread's history and this turn's digests,
    /// and classifies its answer. The round may answer instead of planning
    /// (issue 19 §5): then it is given the directives, and its text is the
    /// turn's answer.
    pub(super) async fn plan(&mut self) -> Result<TurnEvent, Stop> {
        self.cursor.step += 1;
        // The round after a "show more" continuation is the turn table's
        // `continued` row (the answer, as shipped). Sent as a marker (the
        // page's button, `chat --more`), the plan is the continuation, made
        // by code; no model is asked what the user meant.
        match self.show_more.on_round(self.cursor.step) {
            Round::After(event) => return Ok(event),
            Round::Plan => {}
            Round::Marker => {
                let plan = crate::llm::Plan {
                    calls: Vec::new(),
                    note: "show more of the previous listing".into(),
                    narrows_previous: false,
                    continues_previous: true,
                    from_context: Vec::new(),
                    shows_link: false,
                };
                return self.planned(plan).await;
            }
        }
        let answer = self.responder_request();
        // The turn's own blocks; the adapter sends them after the history
        // and the tool loop, so the fixed prefix stays cacheable. The
        // directives are the responder's, as rendered for it.
        let mut prompt = Prompt::new(PLANNER_FIXED).with_instructions(&self.agent.instructions);
        if let Some(c) = self.thread.context.as_ref().filter(|c| !c.is_empty()) {
            prompt = prompt.block("Host context", c.prompt_text());
        }
        prompt.blocks.extend(
            (answer.prompt.blocks.iter())
                .filter(|b| b.title == DIRECTIVES)
                .cloned(),
        );
        let req = PlanRequest {
            prompt,
            user_text: self.user_text.clone(),
            tools: self.catalogue(),
            context: self
                .thread
                .context
                .as_ref()
                .and_then(|c| serde_json::to_value(c).ok()),
            history: self.thread.history.clone(),
            steps: self.ledger.steps.clone(),
        };
        self.export_model_call()?;
        // Nothing held waits on the model (ADR 0031).
        self.flush().await?;
        let asked = std::time::Instant::now();
        let model = &self.agent.model;
        let span = crate::agent::spans::chat(model.provider(), model.name());
        let planned = model.step(&req, &answer).instrument(span.clone()).await;
        telemetry::phase(telemetry::Phase::Model, asked.elapsed());
        telemetry::model_requests(match &planned {
            Ok(Reply::Answer(_)) => self.agent.model.requests_to_answer(),
            _ => 1,
        });
        let plan = match planned {
            Ok(Reply::Plan(p)) => p,
            Ok(Reply::Answer(stream)) => {
                // The answer streams later, still inside this request's span.
                self.cursor.answer = Some(crate::agent::spans::in_span(stream, span));
                return Ok(TurnEvent::Answering);
            }
            Err(e) => {
                tracing::warn!(error = %e, "planner failed");
                self.evidence.failure = Some(wire::Error {
                    message: format!("the model could not plan this turn: {e}"),
                    ..wire::Error::default()
                });
                return Ok(TurnEvent::PlannerFailed);
            }
        };
        self.planned(plan).await
    }

    /// A plan, from the model or from the "show more" marker: its
    /// references resolved, gated, shown and queued.
    async fn planned(&mut self, mut plan: crate::llm::Plan) -> Result<TurnEvent, Stop> {
        // "Show more": the continuation call is the agent's, from the
        // stored listing; when there is nothing to continue, nothing runs
        // and the user is told (the turn table's `reference_missing`).
        if let Some(missing) = self.continue_listing(&mut plan)? {
            self.anchor(missing);
            return Ok(TurnEvent::ReferenceMissing);
        }
        // What the request refers to without saying it ("this floor",
        // "those") comes from the host context and stored turn state, never
        // from the model; when the turn has no such thing, nothing runs and
        // the user is asked (the turn table's `reference_missing` row).
        if let Err(missing) = self.resolve_references(&mut plan) {
            self.anchor(missing);
            return Ok(TurnEvent::ReferenceMissing);
        }
        // "Show me the link again": code shows the stored delivery, if the
        // export table lets it; the model writes no link.
        if plan.shows_link && plan.calls.is_empty() {
            return self.link_requested();
        }
        if plan.calls.is_empty() {
            return Ok(match self.cursor.step {
                1 => TurnEvent::PlanEmpty,
                _ => TurnEvent::Answered,
            });
        }
        // The licence gate, before anything is sent: a round with a call
        // the caller may not make runs none of its calls, and code answers.
        let (refused, audit) = self.gate_round(&plan.calls);
        // The scope of a narrowing follow-up comes from stored turn state,
        // never from the model. Whether it applies to this step is the
        // narrowing table's (`narrow` on the step that narrows,
        // `narrow_held` on a later one): the frame shows what will be sent.
        self.cursor.calls_this_step = 0;
        let scope = self.scope_this_step();
        let steps = plan
            .calls
            .iter()
            .map(|c| wire::PlanStep {
                tool: c.tool.clone(),
                args: effective_args(scope.as_ref(), c),
            })
            .collect();
        let frame = wire::Plan {
            step: self.cursor.step,
            steps,
            note: plan.note.clone(),
            // What the call is held to; where an earlier listing stopped is
            // internal and not shown.
            scope: scope.as_ref().and_then(|s| {
                serde_json::to_value(Scope {
                    page: None,
                    ..s.clone()
                })
                .ok()
            }),
        };
        let record = Record::Plan(&frame).message();
        let decisions = Record::Licence { decisions: &audit }.message();
        // Committed with the first call's intent, before it is sent (or
        // before the next wait on the model): ADR 0031.
        self.stage(wire::Frame::Plan(frame), vec![record, decisions])
            .await?;
        if let Some(refused) = refused {
            return self.refuse_round(&plan.calls, refused).await;
        }
        self.cursor.pending = plan.calls.into();
        self.order_plan();
        self.order_exports();
        Ok(TurnEvent::Planned)
    }

    /// Makes a "show more" plan the continuation of the listing the thread
    /// showed last: its call, with the arguments it went out with, and its
    /// paging machine resumed from the stored mark (the cursor is put on
    /// the call only when it is sent). The anchor that explains why nothing
    /// can be continued, if so.
    fn continue_listing(&mut self, plan: &mut crate::llm::Plan) -> Result<Option<Anchor>, Stop> {
        if !plan.continues_previous || self.cursor.step > 1 {
            return Ok(None);
        }
        // A call the approval policy would not send at once goes out from a
        // stored decision, where no paging machine waits: such a listing is
        // not continued.
        let sends_at_once = |tool: &str| {
            let trust = self.agent.tools.trust(tool);
            let facts = approval::HoldFacts {
                decision_call: false,
                terminal_confirm: false,
                role: self.agent.roles.get(tool),
                trust: &trust,
            };
            approval::would_hold(&self.agent.tables.hold, &facts) == HoldVerdict::Send
        };
        let previous = self.thread.previous.as_ref().map(|(scope, _)| scope);
        let (paging, cap) = (&self.agent.tables.paging, self.agent.limits.page_cap);
        let continued = (self.show_more).continue_from(previous, sends_at_once, paging, cap);
        let call = match continued.map_err(Stop::Violation)? {
            Ok(call) => call,
            Err(anchor) => return Ok(Some(anchor)),
        };
        // The continuation is the round's one call: a model's calls beside
        // the marker are not run with it. The stored arguments are the
        // listing's: nothing the model refers to is written into them.
        plan.calls = vec![call];
        plan.narrows_previous = false;
        plan.from_context.clear();
        Ok(None)
    }

    /// Fills the host-context fields the plan refers to into its calls and
    /// takes a narrowing's scope from the thread's earlier results. The
    /// anchor of the first reference the turn cannot resolve is the error.
    pub(super) fn resolve_references(&mut self, plan: &mut crate::llm::Plan) -> Result<(), Anchor> {
        for field in &plan.from_context {
            let value = self.thread.context.as_ref().and_then(|c| c.field(field));
            let Some(value) = value else {
                return Err(Anchor::ContextMissing {
                    field: field.clone(),
                });
            };
            let tools = self.agent.tools.list();
            for call in &mut plan.calls {
                let takes_it = tools
                    .iter()
                    .find(|t| t.name == call.tool)
                    .is_some_and(|t| t.input_schema["properties"].get(field).is_some());
                if takes_it {
                    call.args.insert(field.clone(), value.clone());
                }
            }
        }
        // The first step that narrows sets the turn's scope; whether a later
        // step stays held to it is the narrowing table's `narrow_held` row
        // (as shipped it does: a later step cannot widen it).
        if plan.narrows_previous && self.thread.scope_step.is_none() {
            let Some((scope, _)) = self.thread.previous.clone() else {
                return Err(Anchor::NothingToNarrow);
            };
            self.thread.scope = Some(scope);
            self.thread.scope_step = Some(self.cursor.step);
        }
        Ok(())
    }
}

/// The arguments that go out: the model's, with the scope spread last.
fn effective_args(scope: Option<&Scope>, call: &PlannedCall) -> Map<String, Value> {
    match scope
        .filter(|s| s.tool == call.tool)
        .map(|s| s.apply(&call.args))
    {
        Some((args, None)) => args,
        // A conflicting call is not run; it is shown as the model asked it,
        // never with the scope's values under the model's label.
        Some((_, Some(_))) | None => call.args.clone(),
    }
}
