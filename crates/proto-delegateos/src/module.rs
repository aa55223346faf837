//! DelegateOS's registration: no section of its own (its trust is the
//! tenants' roots), built over the gatekeeper's DCT verification.

use std::sync::Arc;

use async_trait::async_trait;
use dgw_protocol::{section, Document, Module, Running, SectionError, Services, Staged};
use serde::Deserialize;

use crate::DelegateOs;

/// DelegateOS, as the binary lists it.
pub struct DelegateOsModule;

/// The registration value.
pub static MODULE: DelegateOsModule = DelegateOsModule;

/// `[delegateos]`: no keys yet (a key written there is refused by name).
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "DelegateOsSection")]
struct Section {}

struct Built(Arc<DelegateOs>);

#[async_trait]
impl Module for DelegateOsModule {
    fn section(&self) -> &'static str {
        "delegateos"
    }

    fn check(&self, document: &Document<'_>, _tenants: &[&str]) -> Result<(), SectionError> {
        section::<Section>(document.text, "delegateos").map(drop)
    }

    fn schema(&self, generator: &mut schemars::SchemaGenerator) -> Option<schemars::Schema> {
        Some(generator.subschema_for::<Section>())
    }

    async fn build(
        &self,
        _document: &Document<'_>,
        services: &Services,
    ) -> Result<Arc<dyn Running>, String> {
        Ok(Arc::new(Built(Arc::new(DelegateOs::new(
            services.gate.clone(),
            services.issuing.clone(),
        )))))
    }
}

impl Running for Built {
    fn protocol(&self) -> Option<Arc<dyn dgw_core::protocol::Protocol>> {
        Some(self.0.clone())
    }

    fn stage(&self, _document: &Document<'_>) -> Result<Staged, SectionError> {
        Ok(Staged::Unchanged)
    }
}
