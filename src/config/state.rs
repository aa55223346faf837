//! `[state]`: where the shared state lives: the embedded default (sled in
//! `data_dir`) or a Redis that several replicas share.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::{Check, ConfigError};

/// The state backend.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum StateConfig {
    /// sled in `data_dir` (the default).
    #[default]
    Embedded,
    /// A Redis shared by every replica.
    Redis {
        /// `redis://`, `rediss://` (TLS), `redis+cluster://h:p,h:p` or
        /// `rediss+cluster://…`; its password is never shown.
        url: String,
        /// The prefix of every key (`dgw`).
        prefix: String,
        /// The longest one command may take (`2s`).
        timeout: Duration,
        /// The CA of Redis's certificate, for `rediss://` (none: the
        /// system's roots).
        ca_file: Option<PathBuf>,
    },
}

#[derive(Deserialize, schemars::JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawState {
    #[serde(default)]
    backend: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    prefix: Option<String>,
    #[serde(default)]
    timeout: Option<String>,
    #[serde(default)]
    ca_file: Option<PathBuf>,
}

impl RawState {
    /// `ca_file`, for `dgw config check`.
    pub(super) fn named_files(&self, out: &mut Vec<super::files::Named>) {
        if let Some(path) = &self.ca_file {
            out.push(super::files::Named {
                key: "state.ca_file".into(),
                path: path.clone(),
                what: super::files::Use::Readable,
            });
        }
    }

    pub(super) fn validate(self, check: &Check<'_>) -> Result<StateConfig, ConfigError> {
        match self.backend.as_deref().unwrap_or("sled") {
            "sled" => {
                if self.url.is_some()
                    || self.prefix.is_some()
                    || self.timeout.is_some()
                    || self.ca_file.is_some()
                {
                    return Err(check.invalid(
                        "state.url",
                        "url, prefix, timeout and ca_file are for backend = \"redis\"".into(),
                    ));
                }
                Ok(StateConfig::Embedded)
            }
            "redis" => {
                let Some(url) = self.url else {
                    return Err(check.invalid(
                        "state.url",
                        "backend = \"redis\" needs url = \"redis://host:6379\"".into(),
                    ));
                };
                let schemes = [
                    "redis://",
                    "rediss://",
                    "redis+cluster://",
                    "rediss+cluster://",
                ];
                if !schemes.iter().any(|s| url.starts_with(s)) {
                    return Err(check.invalid(
                        "state.url",
                        "must start with redis:// or rediss:// (TLS), or redis+cluster://host:port,host:port (rediss+cluster://) for Redis Cluster".into(),
                    ));
                }
                let prefix = self.prefix.unwrap_or_else(|| "dgw".into());
                if prefix.is_empty() || prefix.contains(['{', '}', ' ']) {
                    return Err(check.invalid(
                        "state.prefix",
                        "must be non-empty, without braces or spaces".into(),
                    ));
                }
                let timeout = match &self.timeout {
                    Some(t) => check.duration("state.timeout", t)?,
                    None => Duration::from_secs(2),
                };
                if self.ca_file.is_some() && !url.starts_with("rediss") {
                    return Err(
                        check.invalid("state.ca_file", "is for TLS: a rediss:// url".into())
                    );
                }
                Ok(StateConfig::Redis {
                    url,
                    prefix,
                    timeout,
                    ca_file: self.ca_file.map(|f| check.file(f)),
                })
            }
            other => Err(check.invalid(
                "state.backend",
                format!("{other:?} is not a backend: \"sled\" or \"redis\""),
            )),
        }
    }
}
