//! What this backend exports about its own work: sled's group commits, the
//! budget journal's syncs and the budget leases. Described by [`METRICS`]
//! (the binary hands it to `telemetry::install_metrics`), recorded here.

use std::time::Duration;

use dgw_core::telemetry::{Metric, Unit};
use metrics::{counter, histogram};

pub const FLUSH_DURATION: &str = "dgw_sled_flush_duration_seconds";
pub const FLUSH_BATCH: &str = "dgw_sled_flush_batch_size";
pub const JOURNAL_SYNC_DURATION: &str = "dgw_budget_journal_sync_duration_seconds";
pub const JOURNAL_SYNC_BATCH: &str = "dgw_budget_journal_sync_batch_size";
pub const LEASES_TOTAL: &str = "dgw_budget_leases_total";
pub const LEASE_CHARGED: &str = "dgw_budget_lease_charged_microcents_total";

/// Writers per flush, by powers of two.
const BATCH_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];

/// The sled backend's metrics.
pub const METRICS: &[Metric] = &[
    Metric::histogram(FLUSH_DURATION, "Time of one sled flush (group commit).").unit(Unit::Seconds),
    Metric::histogram(FLUSH_BATCH, "Writers made durable by one sled flush.")
        .buckets(BATCH_BUCKETS),
    Metric::histogram(
        JOURNAL_SYNC_DURATION,
        "Time to write and fdatasync one batch of budget journal frames.",
    )
    .unit(Unit::Seconds),
    Metric::histogram(
        JOURNAL_SYNC_BATCH,
        "Budget changes made durable by one journal sync (group commit).",
    ),
    Metric::counter(
        LEASES_TOTAL,
        "Budget leases taken: durable ceilings that let later tool-call reservations skip a disk sync.",
    ),
    Metric::counter(
        LEASE_CHARGED,
        "Leased budget (microcents) charged at start-up because an unclean stop may have used it.",
    ),
];

/// One group-commit flush.
pub(crate) fn record_flush(elapsed: Duration, writers: usize) {
    histogram!(FLUSH_DURATION).record(elapsed.as_secs_f64());
    histogram!(FLUSH_BATCH).record(writers as f64);
}

/// One group-committed budget journal sync.
pub(crate) fn record_journal_sync(elapsed: Duration, writers: usize) {
    histogram!(JOURNAL_SYNC_DURATION).record(elapsed.as_secs_f64());
    histogram!(JOURNAL_SYNC_BATCH).record(writers as f64);
}

/// A budget lease taken.
pub(crate) fn record_lease() {
    counter!(LEASES_TOTAL).increment(1);
}

/// Leased budget charged in recovery.
pub(crate) fn record_lease_charged(microcents: u64) {
    counter!(LEASE_CHARGED).increment(microcents);
}
