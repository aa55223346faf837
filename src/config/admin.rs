//! `[admin]`: administrators' token digests and certificate subjects.

use serde::Deserialize;

use super::{Check, ConfigError};
use crate::caller::AdminToken;

#[derive(Deserialize, schemars::JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAdmin {
    #[serde(default)]
    pub(super) tokens: Vec<RawAdminToken>,
    #[serde(default)]
    pub(super) certs: Vec<RawAdminCert>,
}

/// `[[admin.certs]]`: a client certificate subject that is an admin.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAdminCert {
    pub(super) subject: String,
}

/// `[[admin.tokens]]`: `dgw admin-token new --name NAME` prints one.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAdminToken {
    pub(super) name: String,
    sha256: String,
}

impl RawAdmin {
    /// The validated tokens and subjects; subjects need a client CA.
    pub(super) fn validate(
        self,
        client_ca: bool,
        check: &Check<'_>,
    ) -> Result<(Vec<AdminToken>, Vec<String>), ConfigError> {
        let raw = self;
        let mut admin_tokens: Vec<AdminToken> = Vec::new();
        for (i, t) in raw.tokens.into_iter().enumerate() {
            let key = |field: &str| format!("admin.tokens[{i}].{field}");
            if t.name.is_empty() || admin_tokens.iter().any(|x| x.name == t.name) {
                return Err(check.invalid(
                    &key("name"),
                    format!("{:?} must be a name used once", t.name),
                ));
            }
            let sha256 = hex32(&t.sha256).ok_or_else(|| {
                check.invalid(
                    &key("sha256"),
                    "must be the 64 hex digits of the secret's SHA-256 (`dgw admin-token new` prints it)"
                        .into(),
                )
            })?;
            admin_tokens.push(AdminToken {
                name: t.name,
                sha256,
            });
        }
        let admin_certs: Vec<String> = raw.certs.into_iter().map(|c| c.subject).collect();
        if !admin_certs.is_empty() && !client_ca {
            return Err(check.invalid(
                "admin.certs",
                "client certificates need [server.tls] with client_ca_file".into(),
            ));
        }
        if admin_certs.iter().any(|c| c.trim().is_empty()) {
            return Err(check.invalid("admin.certs", "a subject is empty".into()));
        }
        Ok((admin_tokens, admin_certs))
    }
}

/// 32 bytes from 64 hex digits.
fn hex32(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}
