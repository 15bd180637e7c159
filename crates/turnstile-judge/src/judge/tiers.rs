//! The one tool → required-tier map (issue 20 §5, seed 003 §4.6), and the
//! classification of a call against the tiers its caller holds.
//!
//! Two things read this map and nothing else defines one: the catalogue
//! filter (what the model is shown) and the interceptor (each planned call,
//! before anything is sent). Both classify a tool with
//! [`LicenceMap::verdict`] and [`LicenceMap::classify`] into a
//! `tables/licence.ron` event, and the table decides (`agent::turn`'s
//! licence gate). A test reads the sources to hold that.
//!
//! The map is static for a process: the config's `licence_tier` wins, else
//! the tool's own `_meta` declaration ([`LICENCE_TIER_META`]) from its
//! `tools/list`. A requirement the configured tier order does not know is
//! never read as none (`tier_unknown`, refused).

use std::collections::BTreeMap;

use crate::protocols::licence::LicenceEvent;

/// The `_meta` key of a tool in `tools/list` that declares its tier.
pub const LICENCE_TIER_META: &str = "turnstile/licence_tier";

/// The tier order when the config names none, lowest first.
pub const DEFAULT_TIERS: [&str; 4] = ["free", "basic", "pro", "enterprise"];

/// The configured tiers, lowest first: holding one includes those below.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tiers {
    order: Vec<String>,
}

impl Default for Tiers {
    fn default() -> Self {
        Tiers::new(DEFAULT_TIERS.iter().map(|t| t.to_string()).collect())
    }
}

impl Tiers {
    /// `order`, lowest first (the config checks it is non-empty and has no
    /// repeats).
    pub fn new(order: Vec<String>) -> Tiers {
        Tiers { order }
    }

    pub fn names(&self) -> &[String] {
        &self.order
    }

    /// The lowest tier: what an anonymous caller holds unless configured.
    pub fn lowest(&self) -> Option<&str> {
        self.order.first().map(String::as_str)
    }

    fn rank(&self, tier: &str) -> Option<usize> {
        self.order.iter().position(|t| t == tier)
    }
}

/// The tiers one caller holds: the verifier's answer for a verified
/// subject, a keyed proxy's for its subject, or the anonymous tiers.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Access {
    pub tiers: Vec<String>,
}

impl Access {
    pub fn new(tiers: impl IntoIterator<Item = String>) -> Access {
        Access {
            tiers: tiers.into_iter().collect(),
        }
    }
}

/// What the map says of one tool for one caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TierVerdict {
    Unrestricted,
    Held { required: String },
    NotHeld { required: String },
    Unknown { required: String },
}

impl TierVerdict {
    pub fn allows(&self) -> bool {
        matches!(self, TierVerdict::Unrestricted | TierVerdict::Held { .. })
    }

    /// The tier the tool requires, if any.
    pub fn required(&self) -> Option<&str> {
        match self {
            TierVerdict::Unrestricted => None,
            TierVerdict::Held { required }
            | TierVerdict::NotHeld { required }
            | TierVerdict::Unknown { required } => Some(required),
        }
    }
}

/// The tool → required-tier map and the tier order it is read in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LicenceMap {
    /// The config's `licence_tier` per tool name; wins over `_meta`.
    configured: BTreeMap<String, String>,
    tiers: Tiers,
    /// What an anonymous caller holds (`licence.anonymous_tiers`).
    anonymous: Vec<String>,
}

impl LicenceMap {
    /// The map from the config's `licence_tier`s; `anonymous` defaults to
    /// the lowest tier.
    pub fn new(
        configured: BTreeMap<String, String>,
        tiers: Tiers,
        anonymous: Option<Vec<String>>,
    ) -> LicenceMap {
        let anonymous =
            anonymous.unwrap_or_else(|| tiers.lowest().map(str::to_string).into_iter().collect());
        LicenceMap {
            configured,
            tiers,
            anonymous,
        }
    }

    /// A map with no configured tiers whose anonymous caller holds the
    /// highest tier: what `turnstile demo` without `--auth` runs, where
    /// nobody signs in and every tool is everybody's.
    pub fn open() -> LicenceMap {
        let tiers = Tiers::default();
        let top = tiers.order.last().cloned().into_iter().collect();
        LicenceMap::new(BTreeMap::new(), tiers, Some(top))
    }

    pub fn tiers(&self) -> &Tiers {
        &self.tiers
    }

    /// What a caller with no verified subject holds.
    pub fn anonymous(&self) -> Access {
        Access::new(self.anonymous.iter().cloned())
    }

    /// The tier `tool` requires: the config's, else the tool's own
    /// declaration (`declared`, from its `tools/list` `_meta`).
    pub fn required<'a>(&'a self, tool: &str, declared: Option<&'a str>) -> Option<&'a str> {
        match self.configured.get(tool) {
            Some(t) => Some(t),
            None => declared,
        }
    }

    /// Whether `access` may use `tool`, which declared `declared`.
    pub fn verdict(&self, tool: &str, declared: Option<&str>, access: &Access) -> TierVerdict {
        let Some(required) = self.required(tool, declared) else {
            return TierVerdict::Unrestricted;
        };
        let required_s = required.to_string();
        let Some(need) = self.tiers.rank(required) else {
            return TierVerdict::Unknown {
                required: required_s,
            };
        };
        let held = (access.tiers.iter())
            .filter_map(|t| self.tiers.rank(t))
            .max();
        match held {
            Some(h) if h >= need => TierVerdict::Held {
                required: required_s,
            },
            _ => TierVerdict::NotHeld {
                required: required_s,
            },
        }
    }

    /// The interceptor's classification of one call of a round into a
    /// `licence` event: `others_allowed` says whether another call of the
    /// same round may run (then a refusal is a part, and the answer offers
    /// the rest).
    pub fn classify(verdict: &TierVerdict, others_allowed: bool) -> LicenceEvent {
        match verdict {
            TierVerdict::Unrestricted => LicenceEvent::Unrestricted,
            TierVerdict::Held { .. } => LicenceEvent::TierHeld,
            TierVerdict::NotHeld { .. } if others_allowed => LicenceEvent::TierNotHeldInPart,
            TierVerdict::NotHeld { .. } => LicenceEvent::TierNotHeld,
            TierVerdict::Unknown { .. } => LicenceEvent::TierUnknown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_higher_tier_includes_the_lower_and_config_wins_over_meta() {
        let map = LicenceMap::new(
            [("notes".to_string(), "pro".to_string())].into(),
            Tiers::default(),
            None,
        );
        let basic = Access::new(["basic".to_string()]);
        let ent = Access::new(["enterprise".to_string()]);
        assert_eq!(map.anonymous(), Access::new(["free".to_string()]));
        assert!(!map.verdict("notes", Some("free"), &basic).allows());
        assert!(map.verdict("notes", None, &ent).allows());
        assert!(map.verdict("get", Some("basic"), &basic).allows());
        assert!(!map.verdict("get", Some("basic"), &map.anonymous()).allows());
        assert_eq!(
            map.verdict("x", Some("platinum"), &ent),
            TierVerdict::Unknown {
                required: "platinum".into()
            }
        );
        // A tier the verifier names that the order does not know holds
        // nothing.
        let odd = Access::new(["gold".to_string()]);
        assert!(!map.verdict("get", Some("free"), &odd).allows());
    }
}
