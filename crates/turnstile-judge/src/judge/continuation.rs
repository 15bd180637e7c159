//! Where a listing stopped, kept with the population it showed, so a later
//! turn's "show more" continues it from the server's own cursor (issue 21;
//! `tables/paging.ron`, state `Continuing`). The model never sees it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::accounting::Accounting;

/// Where a listing stopped, for continuing it ("show more"): the first
/// page's accounting with the cursor of the last page shown, and what all
/// the pages shown so far delivered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageMark {
    pub accounting: Accounting,
    /// The ids every page shown so far delivered (I-b across turns).
    pub ids: Vec<String>,
    pub field: String,
    /// The arguments of the listing's call, without the cursor: the
    /// continuation is this call with the stored cursor, never the model's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Map<String, Value>>,
    /// Items shown so far, over all pages and turns.
    #[serde(default)]
    pub shown: u64,
    /// Pages fetched so far, over all turns.
    #[serde(default = "one")]
    pub pages: usize,
    /// The card the listing is shown in: continuations append to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listing: Option<String>,
    /// The listing ran inside a narrowing scope.
    #[serde(default)]
    pub narrowed: bool,
    /// The listing showed more items than their ids can be held for the
    /// I-b check ([`MAX_SCOPE_IDS`](super::narrowing::MAX_SCOPE_IDS)): it is not continued any further.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub full: bool,
}

fn one() -> usize {
    1
}

impl PageMark {
    /// Items shown so far (a mark stored before `shown` was kept counts
    /// its ids).
    pub fn shown(&self) -> u64 {
        self.shown.max(self.ids.len() as u64)
    }

    /// The cursor to continue from.
    pub fn cursor(&self) -> Option<&str> {
        self.accounting.next_cursor.as_deref()
    }
}
