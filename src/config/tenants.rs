//! `[[tenants]]`: each tenant's name and the root its tokens come from.

use std::path::PathBuf;

use delegateos::PrincipalId;
use serde::Deserialize;

use super::{Check, ConfigError};

/// A tenant: a name and the root key its tokens must be issued by.
#[derive(Debug, Clone)]
pub struct Tenant {
    pub name: String,
    pub root: TenantRoot,
}

/// Where a tenant's root principal comes from.
#[derive(Debug, Clone)]
pub enum TenantRoot {
    /// A principal ID given in the config.
    Principal(PrincipalId),
    /// A key file; created on first start when missing, so a fresh checkout
    /// has a tenant whose tokens it can issue (`dgw token issue --key FILE`).
    KeyFile(PathBuf),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTenant {
    pub(super) name: String,
    #[serde(default)]
    pub(super) root: Option<String>,
    #[serde(default)]
    pub(super) root_key_file: Option<PathBuf>,
}

/// The validated `[[tenants]]`.
pub(super) fn validate(raw: Vec<RawTenant>, check: &Check<'_>) -> Result<Vec<Tenant>, ConfigError> {
    let mut tenants = Vec::new();
    for (i, t) in raw.into_iter().enumerate() {
        let key = |field: &str| format!("tenants[{i}].{field}");
        if t.name.is_empty()
            || t.name.len() > 64
            || !t
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(check.invalid(
                &key("name"),
                format!("{:?} must be 1-64 of A-Z a-z 0-9 - _ .", t.name),
            ));
        }
        if tenants.iter().any(|x: &Tenant| x.name == t.name) {
            return Err(check.invalid(&key("name"), format!("{:?} is used twice", t.name)));
        }
        let root = match (t.root, t.root_key_file) {
            (Some(id), None) => TenantRoot::Principal(
                PrincipalId::parse(&id).map_err(|e| check.invalid(&key("root"), e.to_string()))?,
            ),
            (None, Some(file)) => TenantRoot::KeyFile(file),
            _ => {
                return Err(check.invalid(
                    &key("root"),
                    "give exactly one of `root` (a principal ID) or `root_key_file`".into(),
                ))
            }
        };
        tenants.push(Tenant { name: t.name, root });
    }
    Ok(tenants)
}

impl super::Config {
    /// Each tenant's name and root: given, or read from its key file
    /// (created on first use).
    pub fn tenant_roots(&self) -> Result<Vec<(String, PrincipalId)>, crate::keyfile::KeyFileError> {
        let mut tenants = Vec::with_capacity(self.tenants.len());
        for t in &self.tenants {
            let root = match &t.root {
                TenantRoot::Principal(id) => id.clone(),
                TenantRoot::KeyFile(path) => {
                    crate::keyfile::read_or_create(path)?.principal_id().clone()
                }
            };
            tracing::info!(tenant = %t.name, root = %root, "trusting tenant root");
            tenants.push((t.name.clone(), root));
        }
        Ok(tenants)
    }
}
