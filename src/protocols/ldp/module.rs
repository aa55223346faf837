//! LDP's registration: `[ldp]` turns it on (its delegates and paying
//! domains; only a restart changes it, since sessions hold open work), and
//! it learns where the gateway listens for routers.

use std::sync::Arc;

use async_trait::async_trait;
use dgw_protocol::{section, Document, Module, Running, SectionError, Services, Staged};

use super::{Ldp, LdpConfig, RawLdp};

/// LDP, as the binary lists it.
pub struct LdpModule;

/// The registration value.
pub static MODULE: LdpModule = LdpModule;

/// `document`'s `[ldp]`, if it has one.
pub fn read(document: &Document<'_>) -> Result<Option<LdpConfig>, SectionError> {
    Ok(section::<RawLdp>(document.text, "ldp")?
        .map(|l| l.validate(document.dir))
        .transpose()?)
}

struct Built {
    ldp: Option<Arc<Ldp>>,
    config: Option<LdpConfig>,
}

#[async_trait]
impl Module for LdpModule {
    fn section(&self) -> &'static str {
        "ldp"
    }

    fn check(&self, document: &Document<'_>, tenants: &[&str]) -> Result<(), SectionError> {
        let Some(ldp) = read(document)? else {
            return Ok(());
        };
        let unknown = |tenant: &str| !tenants.contains(&tenant);
        for (i, d) in ldp.domains.iter().enumerate() {
            if unknown(&d.tenant) {
                return Err(SectionError::invalid(
                    format!("ldp.domains[{i}].tenant"),
                    format!("{:?} is not a configured tenant", d.tenant),
                ));
            }
        }
        for (i, d) in ldp.delegates.iter().enumerate() {
            if unknown(&d.tenant) {
                return Err(SectionError::invalid(
                    format!("ldp.delegates[{i}].tenant"),
                    format!("{:?} is not a configured tenant", d.tenant),
                ));
            }
        }
        Ok(())
    }

    async fn build(
        &self,
        document: &Document<'_>,
        services: &Services,
    ) -> Result<Arc<dyn Running>, String> {
        let config = read(document).map_err(|e| e.to_string())?;
        let ldp = config
            .clone()
            .map(|c| Arc::new(Ldp::new(c, services.clone())));
        Ok(Arc::new(Built { ldp, config }))
    }
}

impl Running for Built {
    fn protocol(&self) -> Option<Arc<dyn dgw_core::protocol::Protocol>> {
        self.ldp
            .clone()
            .map(|l| l as Arc<dyn dgw_core::protocol::Protocol>)
    }

    fn listening_at(&self, addr: std::net::SocketAddr, tls: bool) {
        if let Some(l) = &self.ldp {
            l.listening_at(addr, tls);
        }
    }

    fn stage(&self, document: &Document<'_>) -> Result<Staged, SectionError> {
        Ok(match read(document)? == self.config {
            true => Staged::Unchanged,
            false => Staged::RestartNeeded,
        })
    }
}
