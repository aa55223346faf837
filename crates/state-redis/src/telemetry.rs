//! What this backend exports about its own work: how late revocations
//! reach this replica through the shared feed. Described by [`METRICS`]
//! (the binary hands it to `telemetry::install_metrics`), recorded here.

use std::time::Duration;

use dgw_core::telemetry::{Metric, Unit};

pub const REVOCATION_FEED_LAG: &str = "dgw_revocation_feed_lag_seconds";

/// The Redis backend's metrics.
pub const METRICS: &[Metric] = &[Metric::histogram(
    REVOCATION_FEED_LAG,
    "From a revocation's recording on the shared feed (the Redis stream entry's time) to this replica applying it.",
)
.unit(Unit::Seconds)];

/// How long a revocation took from the shared feed to this replica.
pub(crate) fn record_revocation_feed_lag(lag: Duration) {
    metrics::histogram!(REVOCATION_FEED_LAG).record(lag.as_secs_f64());
}
