//! A tool's server asks the user something before it answers (issue 22 §3,
//! ADR 0025): the approval table's `input_required` row holds the call at
//! an interrupt that shows the question, and the turn suspends. The answer
//! (accept with the answers, decline, or cancel) is a decision like an
//! approval: one compare-and-swap, then sent once — on 2026-07-28 by
//! re-sending the call with the answers and the server's `requestState`,
//! on 2025-11-25 to the call still open in this process. What the user
//! typed goes to the server only; the planner sees it only if the tool's
//! result carries it.

use serde_json::{Map, Value};

use super::approvals::{Action, ActionKind, Held, InputHeld, MAX_INPUT_ROUNDS};
use super::{Outcome, Stop, Turn};
use crate::agent::tools::Tools;
use crate::judge::anchors::ActionOutcome;
use crate::judge::digest::Digest;
use crate::judge::elicitation;
use crate::judge::Anchor;
use crate::llm::PlannedCall;
use crate::mcp::{Answer, Asked, InputAsk, InputRound, McpError};
use crate::protocols::approval::ApprovalEvent;
use crate::protocols::telemetry;
use crate::wire;

/// How a call goes out: fresh, or as the answer to its server's question.
pub(super) enum Sending {
    Fresh,
    /// 2026-07-28: the call again, with the answers and the state.
    Round(InputRound),
    /// 2025-11-25: the answer to the call still open.
    Nested(Box<(crate::mcp::Nested, rmcp::model::ElicitResult)>),
    /// The answer has nowhere to go: the open call is gone.
    Lost,
}

impl Turn<'_> {
    /// How the call of `tool` with `args` goes out: the decided answer's
    /// own call — the question's exact call, queued by the decision —
    /// carries the answer; every other call is sent fresh, and never with
    /// an answer meant for another.
    pub(super) fn sending(&mut self, tool: &str, args: &Map<String, Value>) -> Sending {
        let Some(decided) = self.approvals.answer_for(tool, args) else {
            return Sending::Fresh;
        };
        let Some(interrupt_id) = decided.nested else {
            return Sending::Round(decided.answer);
        };
        let reply = (decided.answer.responses.into_values().next())
            .and_then(|v| serde_json::from_value(v).ok());
        match (self.agent.parked.take(&interrupt_id), reply) {
            (Some(open), Some(reply)) => Sending::Nested(Box::new((open, reply))),
            _ => Sending::Lost,
        }
    }

    /// A call came back with a question. Held at a new interrupt (`None`:
    /// the turn suspends), or refused with the reason (`Some`: the call's
    /// failure): a form that asks for a secret, a request the client does
    /// not offer, a URL it will not show, or a server that keeps asking.
    pub(super) async fn hold_input(
        &mut self,
        call: &PlannedCall,
        server: &str,
        args: &Map<String, Value>,
        ask: InputAsk,
    ) -> Result<Result<(), String>, Stop> {
        let InputAsk {
            requests,
            request_state,
            nested,
        } = ask;
        // What it asks is checked before anything settles: a refused
        // question is the call's failure, which settles a decided call as
        // any failure does.
        let mut shown = Vec::new();
        for (key, asked) in requests {
            match prompt(key, asked) {
                Ok(p) => shown.push(p),
                Err(reason) => return Ok(Err(reason)),
            }
        }
        if let Some(refused) = self.question_beside_an_action() {
            return Ok(Err(refused));
        }
        let rounds = self.settle_the_call_that_asks_again().await?;
        if rounds >= MAX_INPUT_ROUNDS {
            return Ok(Err(format!(
                "the server asked again after {MAX_INPUT_ROUNDS} answers; the call was not answered"
            )));
        }
        // Every legal `input_required` row suspends (the approval binding's
        // invariant, checked at load).
        let mut machine = self.agent.tables.approval.machine();
        if let Err(v) = machine.fire(ApprovalEvent::InputRequired) {
            telemetry::violation(&v);
            return Ok(Err(format!(
                "the approval table refused to hold it ({})",
                v.row_id
            )));
        }
        let interrupt_id = uuid::Uuid::new_v4().to_string();
        let interrupt =
            self.question_interrupt(&interrupt_id, call, server, args, &shown, nested.is_some());
        tracing::info!(tool = %call.tool, requests = shown.len(), nested = nested.is_some(), "call held for the user's input");
        let is_nested = nested.is_some();
        if let Some(open) = nested {
            self.agent.parked.park(&interrupt_id, open);
        }
        let input = InputHeld {
            server: server.to_string(),
            requests: shown,
            request_state,
            nested: is_nested,
            holder: is_nested.then(|| self.agent.parked.process().to_string()),
            rounds: rounds + 1,
        };
        self.approvals.held = Some(Held {
            interrupt_id,
            machine,
            stored: None,
            action: Action {
                input: Some(input),
                ..Action::of_call(
                    ActionKind::Input,
                    &self.user_text,
                    &call.tool,
                    args,
                    self.cursor.step,
                    interrupt,
                )
            },
        });
        Ok(Ok(()))
    }

    /// An approved action's confirm that asks: its own machine is out
    /// (Confirming), and the table says whether a question may be held
    /// beside it (`second-question-while-confirming`). The refusal, if so.
    fn question_beside_an_action(&self) -> Option<String> {
        let v = self.approvals.on_question_beside_action()?;
        telemetry::violation(&v);
        Some(format!("{} (approval row `{}`)", v.why, v.row_id))
    }

    /// The call that asks again is the decided one: its answer (or its
    /// approval) was delivered, so that machine settles first, as a call
    /// that returned; a new one holds the new question. How many answers
    /// that call had been given.
    async fn settle_the_call_that_asks_again(&mut self) -> Result<u32, Stop> {
        let Some(rounds) = self.approvals.on_asked_again() else {
            return Ok(0);
        };
        self.advance_held(ApprovalEvent::HeldCallReturned).await?;
        Ok(rounds)
    }

    /// The interrupt that shows a server's question: nothing is sent until
    /// the user answers, and it expires with the approval TTL (an open
    /// 2025-11-25 call waits as long: `app::build_with`).
    fn question_interrupt(
        &self,
        interrupt_id: &str,
        call: &PlannedCall,
        server: &str,
        args: &Map<String, Value>,
        shown: &[wire::InputAsked],
        open: bool,
    ) -> wire::Interrupt {
        let expires_at = crate::store::now_unix_ms() + self.agent.limits.approval_ttl_ms();
        let how = match open {
            true => "the call is open and waits for it",
            false => "the call is sent again once, with your answer",
        };
        let connect = shown.iter().any(|r| r.mode == "connect");
        let summary = match connect {
            true => format!(
                "{} on {server} waits until you connect your own account there. Nothing is sent until you do; then the call is sent once, with your account.",
                call.tool
            ),
            false => format!(
                "{server} asks you something before {} can go on. Nothing is sent until you answer; {how}.",
                call.tool
            ),
        };
        wire::Interrupt {
            input: Some(wire::InputPrompt {
                server: server.to_string(),
                requests: shown.to_vec(),
            }),
            ..wire::Interrupt::of_call(
                interrupt_id,
                &call.tool,
                args,
                summary,
                &["accept", "decline", "cancel"],
                expires_at,
            )
        }
    }

    /// A refused question: the call's failure, with the reason as its
    /// digest and an anchor that claims nothing of what the tool did.
    pub(super) fn refused_question(
        &self,
        call: &PlannedCall,
        args: Map<String, Value>,
        reason: &str,
    ) -> Outcome {
        tracing::warn!(tool = %call.tool, reason, "a server's question was refused");
        Outcome::Failed {
            call: self.record_for(
                call.id.as_deref(),
                &call.tool,
                args,
                Digest::failed(&call.tool, format!("asked the user, refused: {reason}")),
            ),
            anchor: Anchor::Action {
                tool: call.tool.clone(),
                outcome: ActionOutcome::QuestionRefused,
            },
        }
    }
}

/// Sends the call as [`Turn::sending`] says.
pub(super) async fn send(
    tools: &dyn Tools,
    who: &crate::agent::connections::OnBehalf,
    tool: &str,
    args: Map<String, Value>,
    sending: Sending,
) -> Result<Answer, McpError> {
    match sending {
        Sending::Fresh => tools.call_for(who, tool, args, None).await,
        Sending::Round(round) => tools.call_for(who, tool, args, Some(round)).await,
        Sending::Nested(nested) => {
            let (open, reply) = *nested;
            tools.answer_nested(tool, open, reply).await
        }
        Sending::Lost => Err(McpError::Unanswered {
            server: String::new(),
            tool: tool.to_string(),
            reason: "the call that asked is no longer open in this process".into(),
        }),
    }
}

/// What the interrupt shows of one request, or why it is not shown.
fn prompt(key: String, asked: Asked) -> Result<wire::InputAsked, String> {
    match asked {
        Asked::Form { message, schema } => {
            elicitation::check_schema(&schema)
                .map_err(|e| format!("the server's form is not one a client can show: {e}"))?;
            if let Some(field) = elicitation::secret_field(&schema) {
                return Err(format!(
                    "the server's form asks for `{field}`, a password, key, token or payment detail, which a form may not ask for"
                ));
            }
            Ok(wire::InputAsked {
                key,
                mode: "form".into(),
                message,
                schema: Some(schema),
                url: None,
                domain: None,
                punycode: false,
            })
        }
        Asked::Url { message, url, .. } => {
            let view = elicitation::url_view(&url)
                .map_err(|e| format!("the server's URL is not one a client shows: {e}"))?;
            Ok(wire::InputAsked {
                key,
                mode: "url".into(),
                message,
                schema: None,
                url: Some(view.url),
                domain: Some(view.domain),
                punycode: view.punycode,
            })
        }
        Asked::Connect { server, url, site } => {
            let view = elicitation::url_view(&url)
                .map_err(|e| format!("the connect address is not one a client shows: {e}"))?;
            let site = site.to_ascii_lowercase();
            Ok(wire::InputAsked {
                key,
                mode: "connect".into(),
                message: format!("Connect your account on {server} so that this call can go out."),
                schema: None,
                url: Some(view.url),
                punycode: site.split('.').any(|label| label.starts_with("xn--")),
                domain: Some(site),
            })
        }
        Asked::Unsupported { method } => Err(format!(
            "the server asked for {method}, which this client does not offer"
        )),
    }
}

/// The answers of a decision, checked against what the interrupt asked:
/// one response per request, each form's content valid for its schema.
/// `Err`: why not (never the value given), and nothing is decided.
pub fn answer_round(
    input: &InputHeld,
    action: &str,
    answers: &Map<String, Value>,
) -> Result<InputRound, String> {
    let accept = action == "accept";
    if !accept && !answers.is_empty() {
        return Err(format!("a {action} carries no answers"));
    }
    if let Some(extra) = answers
        .keys()
        .find(|k| !input.requests.iter().any(|r| &r.key == *k))
    {
        return Err(format!(
            "`answers.{extra}` answers nothing this interrupt asks"
        ));
    }
    let mut responses = std::collections::BTreeMap::new();
    for request in &input.requests {
        let mut response = serde_json::json!({ "action": action });
        if accept && request.mode == "form" {
            let schema = request.schema.clone().unwrap_or(Value::Null);
            let given = answers.get(&request.key).ok_or_else(|| {
                format!(
                    "`answers.{}`: the form needs an answer to accept",
                    request.key
                )
            })?;
            let content = elicitation::validate(&schema, given)
                .map_err(|e| format!("`answers.{}`: {e}", request.key))?;
            response["content"] = Value::Object(content);
        } else if answers.contains_key(&request.key) {
            return Err(format!(
                "`answers.{}`: a URL is opened by the user, not answered with values",
                request.key
            ));
        }
        responses.insert(request.key.clone(), response);
    }
    Ok(InputRound {
        responses,
        request_state: input.request_state.clone(),
    })
}
