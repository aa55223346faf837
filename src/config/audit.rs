//! `[audit]`: the tamper-evident audit log (docs/operations.md, "Audit log").

use std::path::{Path, PathBuf};

use dgw_core::units::Size;
use serde::Deserialize;

use super::{Check, ConfigError};
use dgw_audit_log::Settings;

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAudit {
    #[serde(default = "yes")]
    enabled: bool,
    /// Default: `<data_dir>/audit`.
    dir: Option<PathBuf>,
    #[serde(default = "default_seal_interval")]
    seal_interval: String,
    #[serde(default = "default_segment_bytes")]
    segment_bytes: Size,
    #[serde(default = "default_segment_age")]
    segment_age: String,
    #[serde(default = "default_max_bytes")]
    max_bytes: Size,
    #[serde(default = "default_max_age")]
    max_age: String,
}

impl Default for RawAudit {
    fn default() -> Self {
        Self {
            enabled: true,
            dir: None,
            seal_interval: default_seal_interval(),
            segment_bytes: default_segment_bytes(),
            segment_age: default_segment_age(),
            max_bytes: default_max_bytes(),
            max_age: default_max_age(),
        }
    }
}

fn yes() -> bool {
    true
}

fn default_seal_interval() -> String {
    "1s".into()
}

fn default_segment_bytes() -> Size {
    Size::of(64 << 20)
}

fn default_segment_age() -> String {
    "1d".into()
}

fn default_max_bytes() -> Size {
    Size::of(1 << 30)
}

fn default_max_age() -> String {
    "90d".into()
}

impl RawAudit {
    /// The validated section (`None`: `enabled = false`).
    pub(super) fn validate(
        self,
        data_dir: &Path,
        check: &Check<'_>,
    ) -> Result<Option<Settings>, ConfigError> {
        if !self.enabled {
            return Ok(None);
        }
        let segment_bytes = check.size("audit.segment_bytes", &self.segment_bytes, 4096)?;
        let max_bytes = check.size("audit.max_bytes", &self.max_bytes, 0)?;
        if max_bytes < segment_bytes {
            return Err(check.invalid(
                "audit.max_bytes",
                "must be at least audit.segment_bytes".into(),
            ));
        }
        Ok(Some(Settings {
            dir: self
                .dir
                .map_or_else(|| data_dir.join("audit"), |d| check.file(d)),
            seal_interval: check.duration("audit.seal_interval", &self.seal_interval)?,
            segment_bytes,
            segment_age: check.duration("audit.segment_age", &self.segment_age)?,
            max_bytes,
            max_age: check.duration("audit.max_age", &self.max_age)?,
        }))
    }
}
