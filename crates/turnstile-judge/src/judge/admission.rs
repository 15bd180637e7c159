//! Whether a planned call may run: code classifies what stands against it
//! into one `admission` table event, the table decides, and a refusal's
//! words for the model and the user come from here. Pure: no I/O.

use crate::protocols::admission::{Admission, AdmissionEvent};
use crate::protocols::Bound;

/// What is known about one planned call before it runs.
#[derive(Debug, Clone, Copy)]
pub struct Proposal<'a> {
    /// A connected server offers the tool.
    pub offered: bool,
    /// Why the model's arguments are not a JSON object, if they are not.
    pub invalid_args: Option<&'a str>,
    /// Why the narrowing it runs under cannot be restored, if it cannot.
    pub stale: Option<&'a str>,
    /// This call's place in its planning round (1 for the first).
    pub call_in_step: usize,
    /// `limits.max_calls_per_step`.
    pub max_calls_per_step: usize,
}

/// Every reason that stands against a proposal, in no particular order:
/// which one is told is the table's `precedence`, not this function's.
pub fn reasons(p: &Proposal<'_>) -> Vec<AdmissionEvent> {
    let found = [
        (!p.offered, AdmissionEvent::UnknownTool),
        (p.invalid_args.is_some(), AdmissionEvent::InvalidArguments),
        (p.stale.is_some(), AdmissionEvent::NarrowingStale),
        (
            p.call_in_step > p.max_calls_per_step,
            AdmissionEvent::OverCallBudget,
        ),
    ];
    (found.into_iter())
        .filter_map(|(holds, e)| holds.then_some(e))
        .collect()
}

/// The event for a proposal: `admit` when nothing stands against it, else
/// the reason the admission table ranks first.
pub fn classify(p: &Proposal<'_>, table: &Bound<Admission>) -> AdmissionEvent {
    table.first_of(&reasons(p)).unwrap_or(AdmissionEvent::Admit)
}

/// The refused call's tool result summary: what was found, in the words
/// the model reads back. The row id and its reason travel beside it.
pub fn detail(event: AdmissionEvent, p: &Proposal<'_>) -> String {
    match event {
        AdmissionEvent::Admit => "admitted".into(),
        AdmissionEvent::UnknownTool => "unknown tool".into(),
        AdmissionEvent::InvalidArguments => {
            format!("invalid arguments: {}", p.invalid_args.unwrap_or_default())
        }
        AdmissionEvent::NarrowingStale => format!(
            "the previous results cannot be narrowed: {}",
            p.stale.unwrap_or_default()
        ),
        AdmissionEvent::OverCallBudget => format!(
            "more than {} calls in one planning round",
            p.max_calls_per_step
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Bound<Admission> {
        crate::protocols::TableSet::builtin()
            .unwrap()
            .bound()
            .unwrap()
    }

    fn ok() -> Proposal<'static> {
        Proposal {
            offered: true,
            invalid_args: None,
            stale: None,
            call_in_step: 1,
            max_calls_per_step: 8,
        }
    }

    /// A tool no server offers is `unknown_tool` whatever else is wrong
    /// with the call: with the admission binding's invariant (forbidden
    /// everywhere, checked at load) this is what proves that an unoffered
    /// tool is never admitted (`agent/turn/call.rs`).
    #[test]
    fn an_unoffered_tool_is_unknown_whatever_else_holds() {
        // The admission binding requires `unknown_tool` ranked first.
        let t = table();
        for invalid in [None, Some("not an object")] {
            for stale in [None, Some("table changed")] {
                for call_in_step in [1, 8, 9, 100] {
                    let p = Proposal {
                        offered: false,
                        invalid_args: invalid,
                        stale,
                        call_in_step,
                        max_calls_per_step: 8,
                    };
                    assert_eq!(classify(&p, &t), AdmissionEvent::UnknownTool, "{p:?}");
                }
            }
        }
    }

    #[test]
    fn one_reason_in_the_tables_order() {
        let t = table();
        let classify = |p: &Proposal<'_>| classify(p, &t);
        assert_eq!(classify(&ok()), AdmissionEvent::Admit);
        let all = Proposal {
            offered: false,
            invalid_args: Some("not valid JSON"),
            stale: Some("hash changed"),
            call_in_step: 9,
            ..ok()
        };
        assert_eq!(classify(&all), AdmissionEvent::UnknownTool);
        let p = Proposal {
            offered: true,
            ..all
        };
        assert_eq!(classify(&p), AdmissionEvent::InvalidArguments);
        assert!(detail(classify(&p), &p).contains("not valid JSON"));
        let p = Proposal {
            invalid_args: None,
            ..p
        };
        assert_eq!(classify(&p), AdmissionEvent::NarrowingStale);
        let p = Proposal { stale: None, ..p };
        assert_eq!(classify(&p), AdmissionEvent::OverCallBudget);
        assert_eq!(
            detail(classify(&p), &p),
            "more than 8 calls in one planning round"
        );
        let p = Proposal {
            call_in_step: 8,
            ..p
        };
        assert_eq!(classify(&p), AdmissionEvent::Admit);
    }

    /// Which reason is told is the table's: reordered, the same proposal
    /// is refused for the reason the table now ranks first.
    #[test]
    fn the_reason_told_follows_the_tables_precedence() {
        let src = crate::protocols::BUILTIN
            .iter()
            .find(|(name, _, _)| *name == "admission")
            .map(|(_, _, src)| *src)
            .unwrap();
        let edited = src.replace(
            r#"precedence: ["unknown_tool", "invalid_arguments", "narrowing_stale", "over_call_budget"]"#,
            r#"precedence: ["unknown_tool", "invalid_arguments", "over_call_budget", "narrowing_stale"]"#,
        );
        assert_ne!(edited, src, "the shipped order is written as expected");
        let edited = crate::protocols::registry_check_source(&edited, "admission.ron").unwrap();
        let reordered: Bound<Admission> = Bound::new(&edited).unwrap();
        let p = Proposal {
            stale: Some("the narrowing table changed"),
            call_in_step: 9,
            ..ok()
        };
        assert_eq!(classify(&p, &table()), AdmissionEvent::NarrowingStale);
        assert_eq!(classify(&p, &reordered), AdmissionEvent::OverCallBudget);
    }
}
