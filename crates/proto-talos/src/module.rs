//! Talos's registration: `[talos]` (its trusted issuers, applied on
//! reload), built over the replay store, the revocations and the audit sink.

use std::sync::Arc;

use async_trait::async_trait;
use dgw_protocol::{
    section, Document, Module, Panel, PanelFuture, Running, SectionError, Services, Staged,
};

use crate::{Talos, TalosIssuer, TalosSection};

/// Talos, as the binary lists it.
pub struct TalosModule;

/// The registration value.
pub static MODULE: TalosModule = TalosModule;

/// The trusted issuers of `document`'s `[talos]` (none when absent).
pub fn read(document: &Document<'_>) -> Result<Vec<TalosIssuer>, SectionError> {
    Ok(section::<TalosSection>(document.text, "talos")?
        .unwrap_or_default()
        .issuers()?)
}

struct Built(Arc<Talos>);

#[async_trait]
impl Module for TalosModule {
    fn section(&self) -> &'static str {
        "talos"
    }

    fn check(&self, document: &Document<'_>, _tenants: &[&str]) -> Result<(), SectionError> {
        read(document).map(drop)
    }

    fn schema(&self, generator: &mut schemars::SchemaGenerator) -> Option<schemars::Schema> {
        Some(generator.subschema_for::<TalosSection>())
    }

    async fn build(
        &self,
        document: &Document<'_>,
        services: &Services,
    ) -> Result<Arc<dyn Running>, String> {
        let issuers = read(document).map_err(|e| e.to_string())?;
        let talos = Talos::new(
            &issuers,
            services.revocations.clone(),
            services.replay.clone(),
            services.audit.clone(),
            services.key.clone(),
        )
        .await
        .map_err(|e| e.to_string())?;
        Ok(Arc::new(Built(Arc::new(talos))))
    }
}

impl Running for Built {
    fn protocol(&self) -> Option<Arc<dyn dgw_core::protocol::Protocol>> {
        Some(self.0.clone())
    }

    fn stage(&self, document: &Document<'_>) -> Result<Staged, SectionError> {
        let issuers = read(document)?;
        let talos = self.0.clone();
        Ok(Staged::Apply(Box::new(move || talos.set_issuers(&issuers))))
    }

    /// Its trusted issuers, each with its tenant and budget.
    fn panel(&self) -> PanelFuture<'_> {
        let panel = Panel {
            title: "Talos".to_owned(),
            rows: self.0.issuer_rows(),
        };
        Box::pin(async move { Some(panel) })
    }
}
