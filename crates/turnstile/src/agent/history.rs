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
        match Stored::read(&m.body) {
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
            Stored::TaskSettled { tool, text } => turn.cards.push(redact(&format!(
                "{tool} (a task that ended after the turn): {text}"
            ))),
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
