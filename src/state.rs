//! The state traits, and the one place a backend is chosen: everything
//! else (serving, benchmarks, fuzzing, tests) opens state through [`open`]
//! and sees only the traits.

use std::path::Path;

pub use dgw_core::state::*;

/// Where the state is kept.
#[derive(Debug, Clone)]
pub enum Backend<'a> {
    /// The embedded default (sled) in this data directory.
    Embedded(&'a Path),
    /// This process's memory: nothing survives it (`dgw serve --ephemeral`).
    Ephemeral,
    /// A Redis several replicas share (`[state]`).
    Redis {
        url: &'a str,
        prefix: &'a str,
        timeout: std::time::Duration,
        /// The CA of Redis's certificate (PEM), for `rediss://`.
        ca_pem: Option<Vec<u8>>,
    },
}

/// Every backend's own metrics, for `telemetry::install_metrics`: all are
/// described whichever backend is chosen (a metric is exported only once
/// it is recorded).
pub const METRICS: &[&[dgw_core::telemetry::Metric]] =
    &[dgw_state_sled::METRICS, dgw_state_redis::METRICS];

/// Opens every store of `backend`, recovered.
pub fn open(backend: Backend<'_>, budget: BudgetSettings) -> Result<Stores, StorageError> {
    match backend {
        Backend::Embedded(data_dir) => dgw_state_sled::open(data_dir, budget),
        Backend::Ephemeral => dgw_state_memory::open(budget),
        Backend::Redis {
            url,
            prefix,
            timeout,
            ca_pem,
        } => {
            let settings = dgw_state_redis::RedisSettings {
                url: url.to_owned(),
                prefix: prefix.to_owned(),
                timeout,
                ca_pem,
            };
            dgw_state_redis::open(&settings, budget)
        }
    }
}
