//! The thread's earlier turns as the planner sees them: each user message,
//! the answer shown and one line per card, newest kept first within a byte
//! budget (the oldest turns are dropped), capability URLs redacted. Read
//! newest first a page at a time ([`read`]), so a turn's cost is bounded by
//! the budget, not by the thread's length.

use crate::llm::HistoryTurn;
use crate::store::Message;

use super::records::{card_line, Stored};

/// How many messages one read of the history takes.
const PAGE: i64 = 64;

/// The history of the thread before `current`, read newest first a page at
/// a time until the budget is full or the thread's start is reached.
pub async fn read(
    store: &crate::store::Store,
    thread: &str,
    current: &str,
    budget: usize,
) -> Result<Vec<HistoryTurn>, crate::store::StoreError> {
    // Newest first, as read; `build` wants them in order. Tool records
    // (calls, raw results: half a turn's bytes) say nothing the history
    // shows, so they are not read at all.
    let mut newest_first: Vec<Message> = Vec::new();
    loop {
        let before = newest_first.last().map(|m| m.seq);
        let page = store.recent_said(thread, before, PAGE).await?;
        let start = (page.len() as i64) < PAGE;
        newest_first.extend(page);
        // Until the thread's start is read, the oldest turn read may be
        // partial: it is not used.
        let (kept, full) = build_from(newest_first.iter().rev(), current, budget, !start);
        if start || full {
            return Ok(kept);
        }
    }
}

/// Builds the history from the thread's stored messages, leaving out
/// `current` (the turn being planned).
pub fn build(messages: &[Message], current: &str, budget: usize) -> Vec<HistoryTurn> {
    build_from(messages.iter(), current, budget, false).0
}

/// [`build`], without the oldest turn if `partial_oldest`; whether a turn
/// was left out for the budget.
fn build_from<'m>(
    messages: impl Iterator<Item = &'m Message>,
    current: &str,
    budget: usize,
    partial_oldest: bool,
) -> (Vec<HistoryTurn>, bool) {
    let mut turns: Vec<(String, HistoryTurn, bool)> = Vec::new();
    for m in messages.filter(|m| m.turn_id != current) {
        // A task that ended after its turn is appended later, maybe after
        // newer turns: it belongs to its own turn's group.
        let stored = Stored::read(&m.body);
        if let Stored::TaskSettled { tool, text } = &stored {
            let own = turns.iter_mut().rev().find(|(id, _, _)| *id == m.turn_id);
            if let Some((_, turn, _)) = own {
                turn.cards.push(settled_line(tool, text));
                continue;
            }
        }
        if turns.last().is_none_or(|(id, _, _)| *id != m.turn_id) {
            let empty = HistoryTurn {
                user: String::new(),
                answer: String::new(),
                cards: Vec::new(),
            };
            turns.push((m.turn_id.clone(), empty, false));
        }
        let Some((_, turn, answered)) = turns.last_mut() else {
            continue;
        };
        match stored {
            Stored::User { text } => turn.user = redact(&text),
            Stored::Card { citation, .. } => turn.cards.push(redact(&card_line(&citation))),
            // Batches until the answer record replaces them whole; joined
            // raw and redacted once below, so a URL split across two
            // batches is still one URL.
            Stored::Text { text } if !*answered => turn.answer += &text,
            Stored::Answer { text, .. } => {
                turn.answer = redact(&text);
                *answered = true;
            }
            // What a task said after its turn ended: the next turn's
            // planner knows it came back.
            Stored::TaskSettled { tool, text } => turn.cards.push(settled_line(&tool, &text)),
            Stored::Error { message } if turn.answer.is_empty() => {
                turn.answer = format!("(failed: {})", redact(&message));
            }
            _ => {}
        }
    }
    let mut kept = Vec::new();
    let mut used = 0;
    let turns = turns.into_iter().map(|(id, mut t, answered)| {
        if !answered {
            t.answer = redact(&t.answer);
        }
        (id, t, answered)
    });
    let skip = usize::from(partial_oldest);
    // A turn with no user message (an unreadable record) says nothing.
    let turns: Vec<_> = turns
        .skip(skip)
        .filter(|(_, t, _)| !t.user.is_empty())
        .collect();
    let mut full = false;
    for (_, turn, _) in turns.into_iter().rev() {
        let size =
            turn.user.len() + turn.answer.len() + turn.cards.iter().map(String::len).sum::<usize>();
        if used + size > budget {
            full = true;
            break;
        }
        used += size;
        kept.push(turn);
    }
    kept.reverse();
    (kept, full)
}

/// URLs are redacted the way digests redact them.
pub use crate::judge::digest::redact_urls as redact;

/// The line a task that ended after its turn adds to that turn.
fn settled_line(tool: &str, text: &str) -> String {
    redact(&format!(
        "{tool} (a task that ended after the turn): {text}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Role;
    use serde_json::json;

    fn msg(turn: &str, role: Role, body: serde_json::Value) -> Message {
        Message {
            seq: 0,
            turn_id: turn.into(),
            role,
            body,
            created_at: 0,
        }
    }

    #[test]
    fn urls_are_redacted_and_old_turns_dropped_first() {
        let mut ms = Vec::new();
        for i in 0..20 {
            let t = format!("t{i:02}");
            ms.push(msg(
                &t,
                Role::User,
                json!({"kind": "user", "text": format!("question {i}")}),
            ));
            ms.push(msg(&t, Role::Assistant, json!({"kind": "answer", "text": format!("see https://x.example/dl?token=SECRET{i} now")})));
        }
        ms.push(msg(
            "now",
            Role::User,
            json!({"kind": "user", "text": "current"}),
        ));
        let h = build(&ms, "now", 200);
        assert!(!h.is_empty() && h.len() < 20);
        assert_eq!(h.last().unwrap().user, "question 19");
        for t in &h {
            assert!(!t.answer.contains("SECRET"), "{}", t.answer);
            assert!(t.answer.contains("[link]"));
        }
        assert!(h.iter().all(|t| t.user != "current"));
    }

    /// A task that ended after newer turns ran is shown with its own turn,
    /// not lost as a turn with no user line.
    #[test]
    fn a_task_settled_late_joins_its_own_turn() {
        let ms = vec![
            msg(
                "a",
                Role::User,
                json!({"kind": "user", "text": "compile the report"}),
            ),
            msg("a", Role::Assistant, json!({"kind": "cut"})),
            msg(
                "b",
                Role::User,
                json!({"kind": "user", "text": "anything else?"}),
            ),
            msg(
                "b",
                Role::Assistant,
                json!({"kind": "answer", "text": "no"}),
            ),
            msg(
                "a",
                Role::Assistant,
                json!({"kind": "task_settled", "call_id": "c1",
                "tool": "compile_site_report", "state": "Completed",
                "text": "the task ended, and the tool returned a result", "result": null}),
            ),
        ];
        let h = build(&ms, "now", 4096);
        assert_eq!(h.len(), 2, "{h:?}");
        assert_eq!(h[0].user, "compile the report");
        assert_eq!(
            h[0].cards,
            ["compile_site_report (a task that ended after the turn): the task ended, and the tool returned a result"]
        );
        assert!(h[1].cards.is_empty());
    }

    #[test]
    fn a_url_split_across_batches_is_still_redacted() {
        let ms = vec![
            msg("a", Role::User, json!({"kind": "user", "text": "q"})),
            msg(
                "a",
                Role::Assistant,
                json!({"kind": "text", "text": "get it at https://files.exa"}),
            ),
            msg(
                "a",
                Role::Assistant,
                json!({"kind": "text", "text": "mple.com/dl?token=CAPSECRET now"}),
            ),
        ];
        let h = build(&ms, "b", 1000);
        assert_eq!(h[0].answer, "get it at [link] now");
    }

    #[test]
    fn a_cut_answer_is_its_batches() {
        let ms = vec![
            msg("a", Role::User, json!({"kind": "user", "text": "q"})),
            msg(
                "a",
                Role::Assistant,
                json!({"kind": "text", "text": "At least "}),
            ),
            msg("a", Role::Assistant, json!({"kind": "text", "text": "189"})),
            msg("a", Role::Assistant, json!({"kind": "cut"})),
        ];
        let h = build(&ms, "b", 1000);
        assert_eq!(h[0].answer, "At least 189");
    }
}
