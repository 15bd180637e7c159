//! Narration anchors: the directives code gives the responder. The server
//! never prints the answer itself; it tells the model which facts hold and
//! which phrasings they permit. Each kind is a variant with its text.

use serde::Serialize;

use super::emptiness::AbsenceCause;
use super::grade::{Count, CountGrade};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Anchor {
    /// The population is known exactly.
    CountExact {
        source: String,
        total: u64,
        displayed: u64,
        complete: bool,
    },
    /// Only a lower bound of the population is known.
    CountLowerBound {
        source: String,
        at_least: u64,
        displayed: u64,
    },
    /// Only what was returned is known.
    CountShown { source: String, displayed: u64 },
    /// No accounting: no number may be uttered.
    CountUnknown { source: String },
    /// The tool failed; nothing about the data may be inferred.
    ToolFailed { tool: String },
    /// The call reached its server and no answer came back: whether it ran
    /// is unknown, and it was not sent again.
    OutcomeUnknown { tool: String },
    /// A table refused the call before it was sent (the approval table's
    /// `confirm-without-approval`, the export table's
    /// `INVALID_TOOL_SEQUENCE`, the admission table's): it never left
    /// turnstile, so it neither ran nor failed.
    Refused {
        tool: String,
        table: String,
        row_id: String,
    },
    /// The reason the tool's server gave for an action that failed or
    /// prepared nothing ("seat taken"), told after code's outcome sentence
    /// as the server's own words, in quotes (issue 34): the user reads why,
    /// not only that it failed.
    ServerReason { tool: String, reason: String },
    /// Calls of the round were not sent (the licence gate): nothing is
    /// known of them. `possible`: the round's calls that could run, offered
    /// to the user as the part that can be done. Said in code's copy
    /// (`judge::refusal`), in the user's language.
    NotRun {
        possible: Vec<String>,
        lang: super::refusal::CopyLang,
    },
    /// A host-context field arrived at or over its bound.
    ContextTruncated { field: String },
    /// A single-value aggregate: exact, and needs no citation card.
    Aggregate {
        source: String,
        column: String,
        value: String,
    },
    /// A single-value answer from a server that sends no accounting: what
    /// the server said, not a count the judge could check.
    ValueUnaccounted {
        source: String,
        column: String,
        value: String,
    },
    /// The result carried none of the marks of a real answer: an upstream
    /// failure relayed as data. Nothing may be inferred from it.
    InBandFailure { tool: String },
    /// Something is absent, for this reason.
    Absent { cause: AbsenceCause },
    /// Zero inside the narrowing scope: the scope is released already and
    /// the next search covers everything. Do not re-run within this turn.
    NarrowingReleased,
    /// Results fell outside the narrowing scope and were discarded.
    OutsideScope { tool: String },
    /// Stitching pages was abandoned; only the first page is shown.
    StitchAbandoned { anomaly: String },
    /// A later turn's page no longer continues the listing an earlier turn
    /// showed: it was discarded.
    ContinuationDrifted { anomaly: String },
    /// "Show more" continued a listing, and the server did not take the
    /// stored cursor (the page came without accounting, or the call
    /// failed): no new page, and the listing cannot go on.
    CursorRejected { tool: String },
    /// "Show more" with nothing to continue: no earlier listing (`shown`
    /// false), or the last one has no further page that can be fetched.
    NothingToContinue { shown: bool },
    /// "Show more" of a listing that was complete: every item of its
    /// population was shown already (issue 34), so there is no more of it.
    ListComplete,
    /// "Show more" of a listing that already showed `shown` items, more
    /// than the ids a continuation is checked against can hold: nothing
    /// was fetched.
    ContinuationCapped { shown: u64 },
    /// Stitching stopped at the page cap.
    StitchCapped { pages: usize },
    /// A single-value aggregate came back empty (NULL): no number, no "none".
    NoValue { source: String },
    /// The user narrowed, but the thread shows no earlier population: the
    /// user is asked what to search; nothing was searched.
    NothingToNarrow,
    /// The request names something on the user's screen ("this floor")
    /// that the host context does not carry: the user is asked which one;
    /// nothing was searched.
    ContextMissing { field: String },
    /// The narrowing asked for another search term inside the previous
    /// results, which the tool cannot express as a subset.
    NarrowingUnsupported { key: String },
    /// The previous results were judged under a narrowing table that has
    /// changed since: they are not narrowed under the new one.
    NarrowingStale,
    /// One record was opened by a detail lookup: describe it, count nothing.
    Record { source: String, id: String },
    /// The turn took `max_steps` steps; the answer comes from what those
    /// steps found, and more may have been needed.
    StepLimit { steps: u32 },
    /// What became of an action a human decided (tables/approval.ron): the
    /// approval machine's state, as the frames show it.
    Action {
        tool: String,
        outcome: ActionOutcome,
    },
    /// An export's capability passed the validator and was delivered by
    /// code (tables/export.ron): the final message is the code's, and no
    /// model is called after it. The URL is not here: anchors reach
    /// prompts, a capability never does.
    Delivered {
        tool: String,
        files: Option<u64>,
        bytes: Option<u64>,
        /// As the tool said it (RFC 3339).
        expires_at: Option<String>,
    },
    /// The user asked for a delivered link again and none can be shown:
    /// none was delivered on this thread, or it has expired.
    LinkUnavailable { expired: bool },
}

impl Anchor {
    /// The anchor for one graded result. "None" only for an exact zero with
    /// nothing delivered: a result that delivered items is never "none",
    /// whatever its total says (such a count is spoken of as what was
    /// delivered).
    pub fn for_count(source: &str, c: &Count) -> Anchor {
        let source = source.to_string();
        match c.grade {
            CountGrade::Exact if c.total == Some(0) && c.displayed == 0 => Anchor::Absent {
                cause: AbsenceCause::ZeroFromStart,
            },
            CountGrade::Exact if c.total.is_some_and(|t| t < c.displayed) => Anchor::CountShown {
                source,
                displayed: c.displayed,
            },
            CountGrade::Exact => Anchor::CountExact {
                source,
                total: c.total.unwrap_or(c.displayed),
                displayed: c.displayed,
                complete: c.complete,
            },
            CountGrade::LowerBound => Anchor::CountLowerBound {
                source,
                at_least: c.total.unwrap_or(c.displayed),
                displayed: c.displayed,
            },
            CountGrade::Shown => Anchor::CountShown {
                source,
                displayed: c.displayed,
            },
            CountGrade::Unknown => Anchor::CountUnknown { source },
        }
    }

    /// A call of the turn answered and the judge read its result: a count,
    /// a value, a record or an accounted zero from the start. A failure, a
    /// refusal, a question asked back or a zero decided by the narrowing's
    /// set logic (no call needed) is not.
    pub fn answered(&self) -> bool {
        matches!(
            self,
            Anchor::CountExact { .. }
                | Anchor::CountLowerBound { .. }
                | Anchor::CountShown { .. }
                | Anchor::CountUnknown { .. }
                | Anchor::Aggregate { .. }
                | Anchor::ValueUnaccounted { .. }
                | Anchor::NoValue { .. }
                | Anchor::Record { .. }
                | Anchor::Absent {
                    cause: AbsenceCause::ZeroFromStart
                }
        )
    }

    /// How an action or a call ended, as a machine's state shows it: code
    /// tells it in its own sentence before the model's text (issue 33).
    pub fn is_outcome(&self) -> bool {
        matches!(
            self,
            Anchor::Action { .. }
                | Anchor::Refused { .. }
                | Anchor::ServerReason { .. }
                | Anchor::OutcomeUnknown { .. }
                | Anchor::NotRun { .. }
        )
    }

    /// The directive as the responder reads it.
    pub fn text(&self) -> String {
        match self {
            Anchor::Action { tool, outcome } => action_text(tool, *outcome),
            Anchor::CountExact { .. }
            | Anchor::CountLowerBound { .. }
            | Anchor::CountShown { .. }
            | Anchor::CountUnknown { .. }
            | Anchor::Aggregate { .. }
            | Anchor::ValueUnaccounted { .. }
            | Anchor::NoValue { .. }
            | Anchor::Record { .. } => Self::count_text(self),
            Anchor::ToolFailed { tool } => format!(
                "[{tool}] The tool failed. Say so; infer nothing about the data and do not answer from it."
            ),
            Anchor::OutcomeUnknown { tool } => format!(
                "[{tool}] The call reached the server and no answer came back: whether it ran is unknown, and it was not sent again. Say exactly that; claim neither that it was done nor that it failed."
            ),
            Anchor::Refused { tool, table, row_id } => format!(
                "[{tool}] The call was refused before it was sent ({table} row `{row_id}`): it never ran. Say it was refused and not sent; do not say it failed, and do not say it was done."
            ),
            Anchor::ServerReason { tool, reason } => format!(
                "[{tool}] The server gave this reason, in its own words: \u{201c}{reason}\u{201d}. You may quote it, in quotation marks; do not restate it as your own claim."
            ),
            Anchor::NotRun { .. } => {
                "Some calls of this request were not run. Say so; infer nothing about what they would have returned.".into()
            }
            Anchor::ContextTruncated { field } => format!(
                "The host context field `{field}` arrived at its size bound and may be truncated: its length is a shown count, never a total."
            ),
            Anchor::ContinuationDrifted { .. }
            | Anchor::CursorRejected { .. }
            | Anchor::NothingToContinue { .. }
            | Anchor::ListComplete
            | Anchor::ContinuationCapped { .. }
            | Anchor::NarrowingReleased
            | Anchor::OutsideScope { .. }
            | Anchor::StitchAbandoned { .. }
            | Anchor::NothingToNarrow
            | Anchor::ContextMissing { .. }
            | Anchor::NarrowingUnsupported { .. }
            | Anchor::NarrowingStale
            | Anchor::StitchCapped { .. } => Self::follow_up_text(self),
            Anchor::InBandFailure { tool } => format!(
                "[{tool}] The tool's answer carried no accounting and no result structure: treat it as a failed data source. Say the data could not be retrieved; do not describe, count or summarise anything from it."
            ),
            Anchor::Absent { cause } => absence_text(*cause),
            Anchor::StepLimit { steps } => format!(
                "The turn stopped after its limit of {steps} tool steps: answer from what was found, and say that more steps may have been needed."
            ),
            Anchor::Delivered { tool, .. } => format!(
                "[{tool}] The download link was delivered by code; nothing more is said about it."
            ),
            Anchor::LinkUnavailable { expired: true } => {
                "The download link delivered earlier has expired and cannot be shown again: say so, and that a new export gives a new link. Write no URL.".into()
            }
            Anchor::LinkUnavailable { expired: false } => {
                "No download link was delivered in this conversation, so none can be shown again: say so. Write no URL.".into()
            }

        }
    }

    /// The directive for a count, a value or one record.
    fn count_text(anchor: &Anchor) -> String {
        match anchor {
            Anchor::CountExact { source, total, displayed, complete: true } => format!(
                "[{source}] The population is exactly {total} and all {displayed} are shown: you may say \"exactly {total}\" and call the list complete."
            ),
            Anchor::CountExact { source, total, displayed, .. } => format!(
                "[{source}] The population is exactly {total}; {displayed} are shown. Say \"exactly {total}\" of the population and speak of the shown ones as \"these {displayed}\"."
            ),
            Anchor::CountLowerBound { source, at_least, displayed } => format!(
                "[{source}] At least {at_least} match; the exact number is unknown. Say \"at least {at_least}\", never an exact total. Speak of the shown ones as \"these {displayed}\", never as all results."
            ),
            Anchor::CountShown { source, displayed } => format!(
                "[{source}] Only the {displayed} shown are known. Say \"these {displayed}\"; claim no total."
            ),
            Anchor::CountUnknown { source } => format!(
                "[{source}] The server gave no accounting. Utter no count at all."
            ),
            Anchor::Aggregate { source, column, value } => format!(
                "[{source}] The single-value aggregate {column} is exactly {value}: you may say \"exactly {value}\"."
            ),
            Anchor::ValueUnaccounted { source, column, value } => format!(
                "[{source}] The server answered {column} = {value} without accounting: you may say the server reports {value}; do not call it exact, complete or verified."
            ),
            Anchor::NoValue { source } => format!(
                "[{source}] The aggregate has no value (no rows, or only empty values): state no number and do not say anything is absent."
            ),
            Anchor::Record { source, id } => format!(
                "[{source}] One record, {id}, was opened: describe what it shows from its digest. It is a lookup, not a count: state no total from it."
            ),
            _ => unreachable!("count_text is called only for its own anchors"),
        }
    }

    /// The directive for what became of a follow-up (show more, narrowing, stitching).
    fn follow_up_text(anchor: &Anchor) -> String {
        match anchor {
            Anchor::ContinuationDrifted { anomaly } => format!(
                "The next page no longer continues the results shown before ({anomaly}), so it was discarded and nothing from it is shown. Say the data changed since the earlier answer and offer to search again; do not count or describe the discarded page."
            ),
            Anchor::CursorRejected { tool } => format!(
                "[{tool}] The server did not continue the earlier list from where it stopped, so no new page is shown and the list cannot be continued. Say so; describe and count nothing new."
            ),
            Anchor::NothingToContinue { shown: false } => {
                "The previous answer showed no list to show more of, and nothing was searched: say so and ask what to search for.".into()
            }
            Anchor::NothingToContinue { shown: true } => {
                "More of the previous list cannot be fetched from where it stopped, and nothing was searched: say so and offer a new search; state no count and do not say nothing more exists.".into()
            }
            Anchor::ListComplete => {
                "The previous list was already shown to its end: every item of it is in the earlier answer, and nothing was searched. Say there is no more of it to show; state no new count.".into()
            }
            Anchor::ContinuationCapped { shown } => format!(
                "The earlier list already showed {shown} items, the most one list is continued to, so nothing more was fetched: say so, and suggest a narrower search."
            ),
            Anchor::NarrowingReleased => {
                "The narrowing scope is already released: the next search covers everything. Do not re-run the search in this turn.".into()
            }
            Anchor::OutsideScope { tool } => format!(
                "[{tool}] The results fell outside the scope of the previous results and were discarded: say the narrowed search could not be answered."
            ),
            Anchor::StitchAbandoned { anomaly } => format!(
                "Combining result pages was abandoned because {anomaly}; only the first page is shown. Say so, and never present a combined count."
            ),
            Anchor::NothingToNarrow => {
                "There are no earlier results in this conversation to narrow, and nothing was searched: say so and ask what to search for.".into()
            }
            Anchor::ContextMissing { field } => format!(
                "The request refers to the user's current {field}, but the screen did not say which {field} that is, and nothing was searched: ask which {field} is meant."
            ),
            Anchor::NarrowingUnsupported { key } => format!(
                "The previous results cannot be narrowed by another `{key}` with this tool: say so and offer a new search instead; nothing was searched."
            ),
            Anchor::NarrowingStale => {
                "The previous results were judged under rules that have changed since, so they cannot be narrowed: say so and offer a new search; nothing was searched.".into()
            }
            Anchor::StitchCapped { pages } => format!(
                "Only the first {pages} pages were combined; more may exist. Never present the combined length as a total."
            ),
            _ => unreachable!("follow_up_text is called only for its own anchors"),
        }
    }
}

/// The directive for an absence, by its cause.
fn absence_text(cause: AbsenceCause) -> String {
    match cause {
        AbsenceCause::ZeroFromStart => {
            "Nothing matches in the whole project: say there is no such data.".into()
        }
        AbsenceCause::ZeroAfterNarrowing => {
            "Nothing matches inside the previous results: say so, and offer to search everything.".into()
        }
        AbsenceCause::AuthenticationFailed => {
            "Authentication with the data source failed: say so; do not say the data is absent.".into()
        }
        AbsenceCause::BlockedByPermission => {
            "The request was not sent: it needs access the user does not have. Say it was not searched; do not say the data is absent.".into()
        }
    }
}

/// An approved or denied action's outcome, as far as the turn knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionOutcome {
    /// The confirm was sent once and the backend accepted it; its worker
    /// has not said how it ended.
    Accepted,
    Completed,
    Failed,
    /// Denied: the cancel was sent.
    Cancelled,
    /// Not decided in time: denied by default, the cancel was sent.
    Expired,
    /// The confirm was sent before a restart; nothing says what became of
    /// it, and it is not sent again.
    Unknown,
    /// The prepare result named no action (id 0 or none): nothing waits
    /// for a decision.
    NothingPrepared,
    /// The prepare answered without the field its configuration names:
    /// nothing was put to the user and nothing was confirmed, and whether
    /// the server holds something pending is unknown (issue 33).
    PrepareUnread,
    /// A call held for approval of itself was approved and sent once; its
    /// result is the call's own.
    Ran,
    /// A call held for approval of itself was denied (or superseded by a
    /// new message): it was never sent.
    NotSent,
    /// A call held for approval of itself was not decided in time: it was
    /// never sent.
    NotSentExpired,
    /// A call held for approval of itself was approved, and no success
    /// came back (its server refused it, it timed out, or the server was
    /// gone): whether it had an effect is not claimed either way.
    CallFailed,
    /// A call that needs approval of itself could not be held now (another
    /// action of the turn has not settled): it was not sent.
    Withheld,
    /// The tool's server asked the user something; the user's answer
    /// (accept, decline or cancel) was sent once, and the result is the
    /// tool's own.
    Answered,
    /// The user's answer was sent once, and no success came back.
    AnswerFailed,
    /// The question was withdrawn (a new message superseded it): nothing
    /// was answered.
    QuestionWithdrawn,
    /// A new message withdrew the prepared action waiting for approval;
    /// its cancel went through, and it was never confirmed (issue 34).
    Withdrawn,
    /// A new message withdrew it and it was never confirmed, but its
    /// cancel did not go through: the server may hold it until it expires.
    WithdrawnUncancelled,
    /// A new message withdrew a call waiting for approval of itself: it
    /// was never sent.
    CallWithdrawn,
    /// Nobody answered the question in time: nothing was answered.
    QuestionExpired,
    /// The server's question was refused (a form that asks for a secret,
    /// something this client does not offer): it was not shown, and
    /// nothing was answered.
    QuestionRefused,
    /// The user connected their own account on a per-user server; the
    /// held call went out once with it (issue 40).
    Connected,
    /// The user did not connect their account (declined, or the sign-in
    /// failed): the held call was never sent.
    ConnectDeclined,
    /// The account was connected; the call went out once and did not
    /// report success.
    ConnectCallFailed,
    /// Nobody connected the account in time: the call was never sent.
    ConnectExpired,
}

fn action_text(tool: &str, outcome: ActionOutcome) -> String {
    let what = match outcome {
        ActionOutcome::Accepted => "The user approved the action; its confirm was sent once and the backend accepted it, but has not said it is complete. Say it was accepted and is being processed; do not say it is done.",
        ActionOutcome::Completed => "The user approved the action; it was confirmed once and the backend reports it completed. You may say it is done.",
        ActionOutcome::Failed => "The approved action failed at the backend. Say it failed; do not say it was done.",
        ActionOutcome::Cancelled => "The user denied the action; it was cancelled at the backend and can no longer be confirmed. Say it was cancelled as the user decided.",
        ActionOutcome::Expired => "Nobody decided in time: the action was cancelled by default. Say it expired and was cancelled.",
        ActionOutcome::NothingPrepared => "The tool prepared nothing (it named no action), so there is nothing to approve and nothing was booked. Say so; do not say anything was reserved.",
        ActionOutcome::PrepareUnread => "The tool answered, but its answer did not name the action where this deployment expects it, so nothing was put to the user for approval and nothing was confirmed; whether anything is pending at the server is unknown. Say exactly that; do not say anything was reserved, and do not say nothing was prepared.",
        ActionOutcome::Unknown => "The confirm was sent before an interruption and nothing says whether it ran; it will not be sent again. Say the outcome is unknown.",
        ActionOutcome::Ran => "The user approved this exact call; it was sent once, and its result is the tool's own. Say what the result shows, no more.",
        ActionOutcome::NotSent => "The user denied this call, so it was never sent and nothing was done. Say it was not done as the user decided.",
        ActionOutcome::NotSentExpired => "Nobody approved this call in time, so it was never sent and nothing was done. Say it expired and was not done.",
        ActionOutcome::Withheld => "This call needs the user's approval and could not be put to them now, so it was not sent. Say it was not sent and needs approval; do not say the user decided.",
        ActionOutcome::CallFailed => "The user approved this call, and no success came back: it failed, timed out, or its server was gone. Say it did not report success; do not say it was done, and do not say it had no effect.",
        ActionOutcome::Answered => "The tool's server asked the user a question; the user's answer was sent once, and the result is the tool's own. Say what the result shows, no more; repeat no answer the result does not show.",
        ActionOutcome::AnswerFailed => "The user's answer was sent once, and no success came back. Say it did not report success; do not say it was done, and do not say it had no effect.",
        ActionOutcome::Withdrawn => "The user's new message withdrew the action that was waiting for approval: it was cancelled at the backend and never confirmed. Say so; do not say it was done.",
        ActionOutcome::WithdrawnUncancelled => "The user's new message withdrew the action that was waiting for approval: it was never confirmed, but its cancel did not go through, so the backend may hold it until it expires. Say so; do not say it was done or cancelled.",
        ActionOutcome::CallWithdrawn => "The user's new message withdrew the call that was waiting for approval: it was never sent. Say so; do not say it ran.",
        ActionOutcome::QuestionWithdrawn => "The server's question was withdrawn before it was answered; nothing was answered. Say so; do not say the tool ran to completion.",
        ActionOutcome::QuestionExpired => "Nobody answered the server's question in time; nothing was answered. Say it expired unanswered.",
        ActionOutcome::Connected => "The user connected their own account on the tool's server; the call that waited for it was sent once with the user's own authorization, and the result is the tool's own. Say what the result shows, no more.",
        ActionOutcome::ConnectDeclined => "The user did not connect their account on the tool's server (they declined, or the sign-in did not complete), so the call was never sent and nothing was done. Say so; do not say it ran.",
        ActionOutcome::ConnectCallFailed => "The user connected their account; the call was sent once and did not report success: it failed, timed out, or its server was gone. Say it did not report success; do not say it was done, and do not say it had no effect.",
        ActionOutcome::ConnectExpired => "Nobody connected the account on the tool's server in time, so the call was never sent and nothing was done. Say it expired and was not sent.",
        ActionOutcome::QuestionRefused => "The tool's server asked the user something this client refuses to ask (a password, key, token or payment detail, or a request it does not offer), so nothing was asked or answered. Say the tool could not go on; infer nothing about what it would have done.",
    };
    format!("[{tool}] {what}")
}
