//! `[[tenants]] issuing_delegation_file`: the delegation a tenant's root
//! signed offline to the gateway's key, which `dgw/tokens/issue` attenuates
//! (decision 247). Read at start and on reload; checked to be rooted at the
//! tenant's root and held by this gateway, so a wrong file is an error that
//! names its key rather than a refusal at the first issuance.

use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;

use delegateos::{Dct, PrincipalId};

/// Largest issuing delegation file read.
const MAX_FILE_BYTES: u64 = 64 << 10;

/// Why an issuing delegation file was refused.
#[derive(Debug, thiserror::Error)]
pub enum IssuingError {
    #[error("{key}: cannot read {path}: {source}")]
    Read {
        key: String,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{key}: {path} is not a DCT: {detail}")]
    Malformed {
        key: String,
        path: PathBuf,
        detail: String,
    },
    #[error("{key}: the delegation in {path} is issued by {issuer}, not by tenant {tenant}'s root {root}")]
    NotTenantRoot {
        key: String,
        path: PathBuf,
        tenant: String,
        issuer: PrincipalId,
        root: PrincipalId,
    },
    #[error("{key}: the delegation in {path} is held by {holder}, not by this gateway's key {gateway} (issue it with `dgw token issue --to {gateway}`)")]
    NotGateway {
        key: String,
        path: PathBuf,
        holder: PrincipalId,
        gateway: PrincipalId,
    },
}

impl super::Config {
    /// Each tenant's issuing delegation (serialized), by tenant name, given
    /// the tenants' roots (from [`super::Config::tenant_roots`]) and the
    /// gateway's principal.
    pub fn issuing_delegations(
        &self,
        roots: &[(String, PrincipalId)],
        gateway: &PrincipalId,
    ) -> Result<HashMap<String, String>, IssuingError> {
        let mut out = HashMap::new();
        for (i, t) in self.tenants.iter().enumerate() {
            let Some(path) = &t.issuing_delegation_file else {
                continue;
            };
            let key = format!("tenants[{i}].issuing_delegation_file");
            let mut text = String::new();
            std::fs::File::open(path)
                .and_then(|f| f.take(MAX_FILE_BYTES).read_to_string(&mut text))
                .map_err(|source| IssuingError::Read {
                    key: key.clone(),
                    path: path.clone(),
                    source,
                })?;
            let text = text.trim();
            // The bare token, or the §3.2 `{"token","format"}` object.
            let token = match serde_json::from_str::<delegateos::dct::SerializedDct>(text) {
                Ok(s) if text.starts_with('{') => s.token,
                _ => text.to_owned(),
            };
            let dct = Dct::decode(&token).map_err(|r| IssuingError::Malformed {
                key: key.clone(),
                path: path.clone(),
                detail: r.detail,
            })?;
            let issuer = &dct.token().authority.issuer;
            let root = roots
                .iter()
                .find(|(name, _)| *name == t.name)
                .map(|(_, r)| r.clone())
                .unwrap_or_else(|| issuer.clone());
            if *issuer != root {
                return Err(IssuingError::NotTenantRoot {
                    key,
                    path: path.clone(),
                    tenant: t.name.clone(),
                    issuer: issuer.clone(),
                    root,
                });
            }
            if dct.holder() != gateway {
                return Err(IssuingError::NotGateway {
                    key,
                    path: path.clone(),
                    holder: dct.holder().clone(),
                    gateway: gateway.clone(),
                });
            }
            out.insert(t.name.clone(), token);
        }
        Ok(out)
    }
}
