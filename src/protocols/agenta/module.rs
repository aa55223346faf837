//! Agenta's registration: `[agenta]` turns it on (its tenant, currencies,
//! offers and bounds; only a restart changes it, since it holds open
//! requests), and it learns where the gateway listens for sellers'
//! callbacks.

use std::sync::Arc;

use async_trait::async_trait;
use dgw_protocol::{section, Document, Module, Running, SectionError, Services, Staged};

use super::{Agenta, AgentaConfig, RawAgenta};

/// Agenta, as the binary lists it.
pub struct AgentaModule;

/// The registration value.
pub static MODULE: AgentaModule = AgentaModule;

/// `document`'s `[agenta]`, if it has one.
pub fn read(document: &Document<'_>) -> Result<Option<AgentaConfig>, SectionError> {
    Ok(section::<RawAgenta>(document.text, "agenta")?
        .map(|a| a.validate(document.dir))
        .transpose()?)
}

struct Built {
    agenta: Option<Arc<Agenta>>,
    config: Option<AgentaConfig>,
}

#[async_trait]
impl Module for AgentaModule {
    fn section(&self) -> &'static str {
        "agenta"
    }

    fn check(&self, document: &Document<'_>, tenants: &[&str]) -> Result<(), SectionError> {
        if let Some(a) = read(document)? {
            if !tenants.contains(&a.tenant.as_str()) {
                return Err(SectionError::invalid(
                    "agenta.tenant",
                    format!("{:?} is not a configured tenant", a.tenant),
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
        let agenta = match &config {
            Some(c) => Some(Arc::new(Agenta::new(c.clone(), services.clone()).await?)),
            None => None,
        };
        Ok(Arc::new(Built { agenta, config }))
    }
}

impl Running for Built {
    fn protocol(&self) -> Option<Arc<dyn dgw_core::protocol::Protocol>> {
        self.agenta
            .clone()
            .map(|a| a as Arc<dyn dgw_core::protocol::Protocol>)
    }

    fn listening_at(&self, addr: std::net::SocketAddr, tls: bool) {
        if let Some(a) = &self.agenta {
            a.listening_at(addr, tls);
        }
    }

    fn stage(&self, document: &Document<'_>) -> Result<Staged, SectionError> {
        Ok(match read(document)? == self.config {
            true => Staged::Unchanged,
            false => Staged::RestartNeeded,
        })
    }
}
