//! The authority of a protocol whose credential translates to a set of
//! DelegateOS capabilities: a request is permitted when one of them
//! grants it, and the budget is the pipeline's.

use delegateos::{AuthorizedScope, Capability, CapabilityRequest, DenialReason, DenialType};

use super::Authority;

/// Permits what one of its capabilities grants.
pub struct Capabilities(pub Vec<Capability>);

impl Authority for Capabilities {
    fn permits(
        &self,
        request: &CapabilityRequest,
        _spent: u64,
    ) -> Result<Option<AuthorizedScope>, DenialReason> {
        if self.0.iter().any(|c| c.grants(request)) {
            Ok(None)
        } else {
            Err(DenialReason {
                kind: DenialType::CapabilityNotGranted,
                detail: format!("no granted capability covers {request}"),
                granted: Some(self.0.clone()),
            })
        }
    }
}
