//! `[budget]`: reservations, the sweeper, snapshots, leases.

use std::time::Duration;

use serde::Deserialize;

use super::{Check, ConfigError};
use crate::budget::LeasePolicy;

/// Budget reservations.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetConfig {
    /// How long a reservation holds budget before the sweeper releases it.
    pub reservation_ttl: Duration,
    /// How often the sweeper runs.
    pub sweep_interval: Duration,
    /// How often the budget state is snapshotted into sled (the journal
    /// covers what happened since).
    pub snapshot_interval: Duration,
    /// How far ahead MCP tool calls lease budget (`budget.lease_fraction`).
    pub lease: LeasePolicy,
    /// Most reservations open at once under one delegation.
    pub max_open_reservations: usize,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBudget {
    #[serde(default = "default_reservation_ttl")]
    pub(super) reservation_ttl: String,
    #[serde(default = "default_sweep_interval")]
    pub(super) sweep_interval: String,
    #[serde(default = "default_snapshot_interval")]
    pub(super) snapshot_interval: String,
    #[serde(default = "default_lease_fraction")]
    pub(super) lease_fraction: f64,
    #[serde(default = "default_max_open_reservations")]
    pub(super) max_open_reservations: usize,
}

impl Default for RawBudget {
    fn default() -> Self {
        Self {
            reservation_ttl: default_reservation_ttl(),
            sweep_interval: default_sweep_interval(),
            snapshot_interval: default_snapshot_interval(),
            lease_fraction: default_lease_fraction(),
            max_open_reservations: default_max_open_reservations(),
        }
    }
}

fn default_reservation_ttl() -> String {
    "60s".into()
}

fn default_sweep_interval() -> String {
    "1s".into()
}

fn default_snapshot_interval() -> String {
    "10s".into()
}

fn default_lease_fraction() -> f64 {
    0.01
}

fn default_max_open_reservations() -> usize {
    10_000
}

impl RawBudget {
    /// The validated section.
    pub(super) fn validate(self, check: &Check<'_>) -> Result<BudgetConfig, ConfigError> {
        let raw = self;
        if raw.max_open_reservations == 0 {
            return Err(check.invalid("budget.max_open_reservations", "must be at least 1".into()));
        }
        Ok(BudgetConfig {
            reservation_ttl: check.duration("budget.reservation_ttl", &raw.reservation_ttl)?,
            sweep_interval: check.duration("budget.sweep_interval", &raw.sweep_interval)?,
            snapshot_interval: check
                .duration("budget.snapshot_interval", &raw.snapshot_interval)?,
            lease: LeasePolicy::new(raw.lease_fraction).ok_or_else(|| {
                check.invalid(
                    "budget.lease_fraction",
                    format!(
                        "must be a number from 0 (no leasing) to 1, not {}",
                        raw.lease_fraction
                    ),
                )
            })?,
            max_open_reservations: raw.max_open_reservations,
        })
    }
}
