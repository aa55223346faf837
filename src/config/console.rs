//! `[console]`: the operator console at `/ui` (docs/console.md). Off
//! unless `enabled = true`, and refused then without an administrator to
//! sign in with (an `[[admin.tokens]]` entry or an `[[admin.certs]]`
//! subject): loopback standing never opens a session.

use std::time::Duration;

use serde::Deserialize;

use super::{Check, ConfigError};

/// The longest session: a stolen cookie is good for no longer.
const MAX_SESSION_TTL: Duration = Duration::from_secs(12 * 3600);

#[derive(Deserialize, schemars::JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConsole {
    #[serde(default)]
    enabled: bool,
    /// How long a sign-in lasts (never extended): default `15m`, at most `12h`.
    session_ttl: Option<String>,
}

/// The console's settings, when it is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleConfig {
    pub session_ttl: Duration,
}

impl RawConsole {
    /// `None` when off; refused on without an administrator.
    pub(super) fn validate(
        self,
        admins: usize,
        check: &Check<'_>,
    ) -> Result<Option<ConsoleConfig>, ConfigError> {
        let session_ttl = match &self.session_ttl {
            Some(t) => check.duration("console.session_ttl", t)?,
            None => Duration::from_secs(15 * 60),
        };
        if session_ttl > MAX_SESSION_TTL {
            return Err(check.invalid(
                "console.session_ttl",
                "must be at most 12h: a console session is short-lived".into(),
            ));
        }
        if !self.enabled {
            return Ok(None);
        }
        if admins == 0 {
            return Err(check.invalid(
                "console.enabled",
                "the console needs an administrator to sign in with: add an [[admin.tokens]] entry (`dgw admin-token new`) or an [[admin.certs]] subject".into(),
            ));
        }
        Ok(Some(ConsoleConfig { session_ttl }))
    }
}
