//! The `judge` effect: hand the last outcome to the judge, show what it
//! decided (anchors, card, figure), and classify where the step stands.

use super::{Outcome, Stop, Turn};
use crate::agent::records::Record;
use crate::fsm::Snapshot;
use crate::judge::listing::Judgement;
use crate::judge::narrowing::{Gate, Scope};
use crate::judge::result::Reading;
use crate::judge::stitch::Stitched;
use crate::judge::{listing, Anchor};
use crate::llm::CallRecord;
use crate::mcp::ToolOutput;
use crate::protocols::telemetry;
use crate::protocols::turn::TurnEvent;
use crate::wire;

impl Turn<'_> {
    /// Judges the last outcome (the judge decides; this only shows and
    /// records what it decided) and classifies where the step stands.
    pub(super) async fn judge(&mut self) -> Result<TurnEvent, Stop> {
        match self.cursor.outcome.take() {
            Some(Outcome::Refused { call, anchor, gate }) => {
                if let Some(a) = anchor {
                    self.anchor(a);
                }
                if let Some(gate) = gate {
                    self.listing_gate(gate);
                    self.release();
                }
                self.ledger.current.push(call);
            }
            Some(Outcome::Failed { call, anchor }) => {
                self.anchor(anchor);
                self.evidence.digests.push(call.digest.clone());
                self.ledger.current.push(call);
            }
            // A result of a tool in the approval protocol (prepare,
            // confirm, cancel, status) or an export flow (its preview) is
            // no listing: what it says is that table's.
            Some(Outcome::Returned { call, first, .. })
                if self.agent.roles.get(&call.tool).is_some()
                    || self.agent.terminals.involves(&call.tool) =>
            {
                self.judge_record(call, &first);
            }
            Some(Outcome::Returned {
                call,
                scoped,
                gate,
                first,
                reading,
                stitched,
            }) => {
                let listing = (
                    first.as_ref(),
                    reading.as_ref(),
                    stitched.as_deref(),
                    scoped.as_deref(),
                );
                self.judge_listing(call, gate, listing).await?;
            }
            None => {}
        }
        if !self.cursor.pending.is_empty() {
            return Ok(TurnEvent::NextCall);
        }
        self.ledger
            .steps
            .push(std::mem::take(&mut self.ledger.current));
        if self.cursor.step >= self.agent.limits.max_steps {
            self.anchor(Anchor::StepLimit {
                steps: self.cursor.step,
            });
            return Ok(TurnEvent::StepLimit);
        }
        Ok(TurnEvent::StepDone)
    }

    /// A record's result: the models see its fields (nested ones too), or
    /// those of the object its contract's `record_path` names.
    fn judge_record(&mut self, mut call: CallRecord, first: &ToolOutput) {
        let fields = crate::judge::approval::fields(first).unwrap_or_default();
        let shape = self.agent.contracts.get(&call.tool).map(|c| &c.shape);
        // Only a `record_path` can miss: without one the record is the
        // whole answer.
        let record = match (shape, shape.and_then(|s| s.record_path.as_deref())) {
            (Some(s), Some(path)) => s.record_in(&fields).unwrap_or_else(|| {
                if !first.is_error {
                    self.field_not_found(&call.tool, "record_path", path);
                }
                &fields
            }),
            _ => &fields,
        };
        call.digest =
            crate::judge::digest::Digest::record(&call.tool, record, self.agent.limits.digest);
        self.evidence.digests.push(call.digest.clone());
        self.ledger.current.push(call);
    }

    /// A listing's result, judged (the judge decides; this shows and
    /// records what it decided).
    async fn judge_listing(
        &mut self,
        mut call: CallRecord,
        mut gate: Gate,
        (first, reading, stitched, scoped): (
            &ToolOutput,
            &Reading,
            Option<&Stitched>,
            Option<&Scope>,
        ),
    ) -> Result<(), Stop> {
        let contract = self.agent.contracts.get(&call.tool);
        let ids_param = self.agent.tools.ids_param(&call.tool, contract);
        let input = listing::Input {
            tool: &call.tool,
            contract,
            args: &call.args,
            first,
            reading,
            ids_param: ids_param.as_deref(),
            stitched,
            scope: scoped,
            limit_sentinel: self.agent.limits.limit_sentinel,
            digest: self.agent.limits.digest,
        };
        let judging = std::time::Instant::now();
        let mut j = listing::judge(input, &mut gate);
        telemetry::phase(telemetry::Phase::Judge, judging.elapsed());
        let snap = self.listing_gate(gate);
        if let Some(v) = j.violation.take() {
            return Err(Stop::Violation(v));
        }
        call.digest = j.digest.clone();
        self.show(j, snap).await?;
        self.ledger.current.push(call);
        Ok(())
    }

    /// Shows a judgement: its anchors go to the responder, its card to the
    /// client (committed first, with the population it showed).
    pub(super) async fn show(&mut self, mut j: Judgement, gate: Snapshot) -> Result<(), Stop> {
        if let Some(row) = &j.refused_row {
            tracing::warn!(row_id = %row, "narrowing table refused the page");
            telemetry::forbidden("narrowing", row);
        }
        for a in j.anchors {
            self.anchor(a);
        }
        self.evidence.digests.push(j.digest.clone());
        if j.release {
            self.release();
        }
        if let Some(card) = j.card.as_mut() {
            self.name_listing(card, j.population.as_mut());
        }
        if let (Some(p), false) = (&j.population, self.thread.released) {
            self.thread.population = Some((p.clone(), gate.clone()));
        }
        if let Some(card) = j.card {
            self.evidence.cards.push(card.complete);
            let population = j.population.as_ref().filter(|_| !self.thread.released);
            let record = Record::Card {
                citation: &card,
                population,
                narrowing: population.map(|_| &gate),
                scope_released: j.release,
                digest: &j.digest,
            }
            .message();
            // The card's grade, on the turn's span (an OpenTelemetry event).
            tracing::info!(
                turnstile.citation.source = %card.source,
                turnstile.citation.grade = %card.grade,
                turnstile.citation.displayed = card.displayed,
                "citation graded"
            );
            self.stage(wire::Frame::Citation(card), vec![record])
                .await?;
        }
        if let Some(figure) = j.figure {
            let record = Record::Figure {
                figure: &figure,
                digest: &j.digest,
            }
            .message();
            self.stage(wire::Frame::Figure(figure), vec![record])
                .await?;
        }
        Ok(())
    }

    /// Names the listing a card shows (a continuation keeps the name of
    /// the card it continues, so the page appends to it), keeps the name in
    /// the population's page mark, and offers "show more" when the listing
    /// can be continued.
    fn name_listing(&mut self, card: &mut wire::Citation, population: Option<&mut Scope>) {
        let name = card
            .listing
            .get_or_insert_with(|| format!("{}#{}", self.turn_id, self.evidence.cards.len() + 1))
            .clone();
        let mark = population.and_then(|p| p.page.as_mut());
        if let Some(mark) = mark {
            mark.listing = Some(name);
            card.more = !self.thread.released && !mark.full;
        }
    }

    pub(super) fn release(&mut self) {
        self.thread.released = true;
        self.thread.population = None;
        self.thread.scope = None;
    }

    pub(super) fn listing_gate(&mut self, gate: Gate) -> Snapshot {
        let n = self.next_listing();
        let snap = gate.snapshot();
        self.ledger
            .dirty
            .push((format!("narrowing#{n}"), snap.clone()));
        snap
    }

    pub(super) fn next_listing(&mut self) -> usize {
        self.ledger.listing_machines += 1;
        self.ledger.listing_machines
    }
}
