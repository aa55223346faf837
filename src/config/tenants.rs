//! `[[tenants]]`: each tenant's name and the root its tokens come from.

use std::path::PathBuf;

use delegateos::PrincipalId;
use serde::Deserialize;

use super::{Check, ConfigError};
use crate::keyfile::Create;

/// What to do about a tenant's missing root key file.
const TENANT_KEY_HINT: &str =
    "restore it, fix the path, or set create_if_missing = true in the tenant's entry to make a new root key";

/// A tenant: a name and the root key its tokens must be issued by.
#[derive(Debug, Clone)]
pub struct Tenant {
    pub name: String,
    pub root: TenantRoot,
    /// The delegation from the root to the gateway's key that online
    /// issuance (`dgw/tokens/issue`) attenuates; none: no online issuance.
    pub issuing_delegation_file: Option<PathBuf>,
}

/// Where a tenant's root principal comes from.
#[derive(Debug, Clone)]
pub enum TenantRoot {
    /// A principal ID given in the config.
    Principal(PrincipalId),
    /// A key file. Created when missing only if the tenant's entry says
    /// `create_if_missing = true` (the shipped demo config, so a fresh
    /// checkout has a tenant whose tokens it can issue); otherwise a missing
    /// file is an error, never a new root by surprise.
    KeyFile {
        path: PathBuf,
        create_if_missing: bool,
    },
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTenant {
    pub(super) name: String,
    #[serde(default)]
    pub(super) root: Option<String>,
    #[serde(default)]
    pub(super) root_key_file: Option<PathBuf>,
    #[serde(default)]
    pub(super) create_if_missing: bool,
    #[serde(default)]
    pub(super) issuing_delegation_file: Option<PathBuf>,
}

impl RawTenant {
    /// `tenants[i].root_key_file`, for `dgw config check`.
    pub(super) fn named_files(&self, i: usize, out: &mut Vec<super::files::Named>) {
        if let Some(path) = &self.root_key_file {
            out.push(super::files::Named {
                key: format!("tenants[{i}].root_key_file"),
                path: path.clone(),
                what: super::files::Use::Key {
                    creatable: self.create_if_missing,
                    hint: TENANT_KEY_HINT,
                },
            });
        }
        // What it holds is checked at start and reload; here, that it reads.
        if let Some(path) = &self.issuing_delegation_file {
            out.push(super::files::Named {
                key: format!("tenants[{i}].issuing_delegation_file"),
                path: path.clone(),
                what: super::files::Use::Readable,
            });
        }
    }
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
        if t.create_if_missing && t.root_key_file.is_none() {
            return Err(check.invalid(
                &key("create_if_missing"),
                "applies only to `root_key_file`".into(),
            ));
        }
        let root = match (t.root, t.root_key_file) {
            (Some(id), None) => TenantRoot::Principal(
                PrincipalId::parse(&id).map_err(|e| check.invalid(&key("root"), e.to_string()))?,
            ),
            (None, Some(path)) => TenantRoot::KeyFile {
                path: check.file(path),
                create_if_missing: t.create_if_missing,
            },
            _ => {
                return Err(check.invalid(
                    &key("root"),
                    "give exactly one of `root` (a principal ID) or `root_key_file`".into(),
                ))
            }
        };
        tenants.push(Tenant {
            name: t.name,
            root,
            issuing_delegation_file: t.issuing_delegation_file.map(|f| check.file(f)),
        });
    }
    Ok(tenants)
}

impl super::Config {
    /// Each tenant's name and root: given, or read from its key file
    /// (created when missing only where the tenant asks for it).
    pub fn tenant_roots(&self) -> Result<Vec<(String, PrincipalId)>, crate::keyfile::KeyFileError> {
        let mut tenants = Vec::with_capacity(self.tenants.len());
        for (i, t) in self.tenants.iter().enumerate() {
            let root = match &t.root {
                TenantRoot::Principal(id) => id.clone(),
                TenantRoot::KeyFile {
                    path,
                    create_if_missing,
                } => crate::keyfile::read_or_create(
                    path,
                    if *create_if_missing {
                        Create::IfMissing
                    } else {
                        Create::Never {
                            hint: TENANT_KEY_HINT,
                        }
                    },
                    &format!("tenants[{i}].root_key_file"),
                    &self.data_dir,
                )?
                .principal_id()
                .clone(),
            };
            tracing::info!(tenant = %t.name, root = %root, "trusting tenant root");
            tenants.push((t.name.clone(), root));
        }
        Ok(tenants)
    }
}
