//! The delegator's signed spend ceiling of a standing grant
//! (standing-delegation@1.2 §3.3, `@motebit/protocol` 3.9's
//! `SpendCeilingV1`): integer micro-USD limits in the grant's signed body.
//! The gateway charges a caller no more than the strictest of them.

use serde::Deserialize;

use crate::Failure;

/// The ceiling's type tag.
pub const SCHEMA: &str = "motebit.spend-ceiling.v1";

/// Largest value of a limit (2^53 − 1: JCS keeps integers exact up to it).
pub const MAX: u64 = 9_007_199_254_740_991;

/// Microcents (the gateway's budget unit, 10⁻⁸ USD) per micro-USD (10⁻⁶).
pub const MICROCENTS_PER_MICRO: u64 = 100;

/// `SpendCeilingV1`, as spend-ceiling-v1.json writes it (unknown members
/// refused).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpendCeiling {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Most spent within one rolling window.
    #[serde(default)]
    pub cumulative_limit_micro: Option<u64>,
    /// Most spent on one counterparty within one window.
    #[serde(default)]
    pub per_counterparty_limit_micro: Option<u64>,
    /// Most money actions within one window.
    #[serde(default)]
    pub max_action_count: Option<u64>,
    /// Most spent over the grant's whole life.
    #[serde(default)]
    pub lifetime_limit_micro: Option<u64>,
    /// The window, in milliseconds (required by the windowed limits).
    #[serde(default)]
    pub window_ms: Option<u64>,
}

impl SpendCeiling {
    /// The schema's shape law: the tag, every number at most 2^53 − 1, a
    /// positive window, and a window for each windowed limit.
    pub fn check(&self) -> Result<(), Failure> {
        if self.schema != SCHEMA {
            return Err(Failure::malformed(format!(
                "spend_ceiling.schema must be {SCHEMA:?}"
            )));
        }
        let all = [
            self.cumulative_limit_micro,
            self.per_counterparty_limit_micro,
            self.max_action_count,
            self.lifetime_limit_micro,
            self.window_ms,
        ];
        if all.iter().flatten().any(|v| *v > MAX) {
            return Err(Failure::malformed("a spend_ceiling value exceeds 2^53 - 1"));
        }
        if self.window_ms == Some(0) {
            return Err(Failure::malformed(
                "spend_ceiling.window_ms must be positive",
            ));
        }
        let windowed = self.cumulative_limit_micro.is_some()
            || self.per_counterparty_limit_micro.is_some()
            || self.max_action_count.is_some();
        if windowed && self.window_ms.is_none() {
            return Err(Failure::malformed(
                "a windowed spend_ceiling limit requires window_ms",
            ));
        }
        Ok(())
    }

    /// The most the gateway may charge under the grant, in microcents: the
    /// strictest money limit it sets (a windowed one taken for the whole
    /// life: the gateway's budgets do not roll, so it never charges past
    /// any window's limit). No total bound (neither `cumulative_limit_micro`
    /// nor `lifetime_limit_micro`) authorizes nothing (§3.3 rule 3).
    pub fn bound_microcents(&self) -> u64 {
        if self.cumulative_limit_micro.is_none() && self.lifetime_limit_micro.is_none() {
            return 0;
        }
        [
            self.lifetime_limit_micro,
            self.cumulative_limit_micro,
            self.per_counterparty_limit_micro,
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(0)
        .saturating_mul(MICROCENTS_PER_MICRO)
    }
}

/// What a grant lets the gateway charge, in microcents: its ceiling's
/// bound, or nothing when it has none (§3.3 rule 1: a @1.0/@1.1 grant
/// authorizes no money).
pub fn grant_bound_microcents(ceiling: Option<&SpendCeiling>) -> u64 {
    ceiling.map_or(0, SpendCeiling::bound_microcents)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ceiling(v: serde_json::Value) -> SpendCeiling {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_strictest_money_limit_bounds_and_shape_law_holds() {
        let c = ceiling(serde_json::json!({"schema": SCHEMA, "lifetime_limit_micro": 7}));
        assert_eq!((c.check(), c.bound_microcents()), (Ok(()), 700));
        let c = ceiling(
            serde_json::json!({"schema": SCHEMA, "lifetime_limit_micro": 9,
            "cumulative_limit_micro": 5, "per_counterparty_limit_micro": 4, "window_ms": 10}),
        );
        assert_eq!((c.check(), c.bound_microcents()), (Ok(()), 400));
        let bare = ceiling(serde_json::json!({"schema": SCHEMA}));
        assert_eq!((bare.check(), bare.bound_microcents()), (Ok(()), 0));
        let no_total =
            ceiling(serde_json::json!({"schema": SCHEMA, "max_action_count": 3, "window_ms": 1}));
        assert_eq!(no_total.bound_microcents(), 0);
        assert_eq!(grant_bound_microcents(None), 0);
        for bad in [
            serde_json::json!({"schema": "x", "lifetime_limit_micro": 1}),
            serde_json::json!({"schema": SCHEMA, "cumulative_limit_micro": 1}),
            serde_json::json!({"schema": SCHEMA, "lifetime_limit_micro": MAX + 1}),
            serde_json::json!({"schema": SCHEMA, "lifetime_limit_micro": 1, "window_ms": 0}),
        ] {
            assert!(ceiling(bad.clone()).check().is_err(), "{bad}");
        }
        assert!(serde_json::from_value::<SpendCeiling>(
            serde_json::json!({"schema": SCHEMA, "lifetime_limit_micro": -1})
        )
        .is_err());
        assert!(serde_json::from_value::<SpendCeiling>(
            serde_json::json!({"schema": SCHEMA, "extra": 1})
        )
        .is_err());
    }
}
