//! Count grades (seed 003 §4.1): every number that could be uttered is
//! classified before the model speaks.
//!
//! | grade | when | the narration may say |
//! |---|---|---|
//! | `EXACT` | a total under the `LIMIT` cap, a single-value aggregate | "exactly N" |
//! | `LOWER_BOUND` | a search's lower bound, a total or a page saturated at the cap | "at least N", never exact |
//! | `SHOWN` | only what was returned is known (no total, or one the delivery contradicts) | "these N …" (subject separation) |
//! | `UNKNOWN` | no accounting at all | no number at all |

use serde::{Deserialize, Serialize};

use super::accounting::Accounting;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CountGrade {
    Exact,
    LowerBound,
    Shown,
    Unknown,
}

impl CountGrade {
    pub fn as_str(self) -> &'static str {
        match self {
            CountGrade::Exact => "EXACT",
            CountGrade::LowerBound => "LOWER_BOUND",
            CountGrade::Shown => "SHOWN",
            CountGrade::Unknown => "UNKNOWN",
        }
    }
}

/// The graded count of one result: what the citation card and the
/// narration anchors are built from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Count {
    pub grade: CountGrade,
    /// How many items this result delivered.
    pub displayed: u64,
    /// The population size, exact or a lower bound (see `total_is_lower_bound`).
    pub total: Option<u64>,
    pub total_is_lower_bound: bool,
    pub has_more: bool,
    /// The displayed items are the whole population.
    pub complete: bool,
}

/// A count whose total the server contradicted on a later page (I-a): the
/// total stays on the card as what the server said first, but it licenses
/// nothing: EXACT and LOWER_BOUND become SHOWN, and the items shown are not
/// the whole population. UNKNOWN and SHOWN stand.
pub fn contradicted(count: &mut Count) {
    if matches!(count.grade, CountGrade::Exact | CountGrade::LowerBound) {
        count.grade = CountGrade::Shown;
    }
    count.complete = false;
}

/// Grades one result. `displayed` is the number of items actually delivered;
/// `limit_sentinel` is the upstream query cap (`LIMIT 3000`), an external
/// contract that comes from configuration.
pub fn grade(acc: Option<&Accounting>, displayed: u64, limit_sentinel: u64) -> Count {
    let Some(acc) = acc else {
        return Count {
            grade: CountGrade::Unknown,
            displayed,
            total: None,
            total_is_lower_bound: false,
            has_more: false,
            complete: false,
        };
    };
    // What the result delivered: the items held, or what the server says it
    // returned, whichever is more.
    let delivered = displayed.max(acc.returned);
    // An exact total below what was delivered (`total: 0` beside items) is
    // contradicted by the delivery: it is not repeated, and the result is
    // graded as what was delivered. A result with items is never "none".
    let total = acc.total.filter(|&t| t >= delivered);
    // A page that returned as many rows as the upstream's cap may have been
    // cut by it, whatever `has_more` says.
    let saturated = delivered >= limit_sentinel;
    let (grade, total, lower, has_more) = match (total, acc.total_lower_bound) {
        // A total that reached the cap may hide rows beyond it; the upstream's
        // `has_more: false` on such a page is overridden. "At least N" holds
        // even when the true total is exactly N.
        (Some(t), _) if t >= limit_sentinel => (CountGrade::LowerBound, Some(t), true, true),
        (Some(t), _) => (CountGrade::Exact, Some(t), false, acc.has_more),
        // No (credible) total, but the page itself reached the cap: at least
        // what was delivered, and more may exist.
        (None, lb) if saturated => (
            CountGrade::LowerBound,
            Some(lb.unwrap_or(0).max(delivered)),
            true,
            true,
        ),
        (None, Some(lb)) => (CountGrade::LowerBound, Some(lb), true, acc.has_more),
        (None, None) => (CountGrade::Shown, None, false, acc.has_more),
    };
    let complete = grade == CountGrade::Exact && !has_more && total == Some(displayed);
    Count {
        grade,
        displayed,
        total,
        total_is_lower_bound: lower,
        has_more,
        complete,
    }
}

/// Grades what a server without accounting (`accounting = "absent"`)
/// delivered: the rows it showed, never an exact total and never "none". A
/// delivery at the upstream's cap may have been cut by it: at least that
/// many. Nothing delivered is no count at all.
pub fn unaccounted(displayed: u64, limit_sentinel: u64) -> Count {
    let (grade, total, lower, has_more) = match displayed {
        0 => (CountGrade::Unknown, None, false, false),
        d if d >= limit_sentinel => (CountGrade::LowerBound, Some(d), true, true),
        _ => (CountGrade::Shown, None, false, false),
    };
    Count {
        grade,
        displayed,
        total,
        total_is_lower_bound: lower,
        has_more,
        complete: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(returned: u64, total: Option<u64>, lb: Option<u64>, has_more: bool) -> Accounting {
        Accounting {
            returned,
            total,
            total_lower_bound: lb,
            has_more,
            next_cursor: None,
        }
    }

    fn check(a: Option<Accounting>, displayed: u64, expect: (CountGrade, Option<u64>, bool, bool)) {
        let c = grade(a.as_ref(), displayed, 3000);
        assert_eq!((c.grade, c.total, c.has_more, c.complete), expect, "{a:?}");
    }

    #[test]
    fn grades() {
        use CountGrade::*;
        check(None, 10, (Unknown, None, false, false));
        check(
            Some(acc(10, None, Some(189), true)),
            10,
            (LowerBound, Some(189), true, false),
        );
        check(
            Some(acc(10, Some(120), None, true)),
            10,
            (Exact, Some(120), true, false),
        );
        check(
            Some(acc(7, Some(7), None, false)),
            7,
            (Exact, Some(7), false, true),
        );
        check(
            Some(acc(0, Some(0), None, false)),
            0,
            (Exact, Some(0), false, true),
        );
        // Saturated at the cap with a lying has_more: false.
        check(
            Some(acc(50, Some(3000), None, false)),
            50,
            (LowerBound, Some(3000), true, false),
        );
        check(
            Some(acc(10, None, None, true)),
            10,
            (Shown, None, true, false),
        );
        // Returned exactly the cap without a total: saturated.
        check(
            Some(acc(3000, None, None, false)),
            3000,
            (LowerBound, Some(3000), true, false),
        );
        check(
            Some(acc(3000, None, Some(120), false)),
            3000,
            (LowerBound, Some(3000), true, false),
        );
        // A total the delivery contradicts is not repeated: "these 4".
        check(
            Some(acc(4, Some(0), None, false)),
            4,
            (Shown, None, false, false),
        );
    }
}
