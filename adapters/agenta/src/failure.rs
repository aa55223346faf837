//! The manifest's failure modes, by the names it gives them.

/// A failure the manifest names (`failure_modes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureMode {
    /// A message does not match its schema.
    SchemaValidationFailure,
    /// A request names an offer version other than the current one.
    OfferVersionMismatch,
    /// A request's payment is not backed by an authorization.
    BudgetAuthorizationMissing,
    /// The seller cannot take the work now.
    CapacityUnavailable,
    /// Something the seller depends on failed.
    UpstreamDependencyFailed,
    /// The work missed its deadline.
    DeadlineExceeded,
    /// The result does not match the offer's output schema.
    OutputSchemaViolation,
    /// An artifact the verification policy requires is missing.
    RequiredEvidenceMissing,
    /// An artifact's digest does not match its content.
    DigestMismatch,
}

impl FailureMode {
    /// Every failure mode, in the manifest's order.
    pub const ALL: [FailureMode; 9] = [
        FailureMode::SchemaValidationFailure,
        FailureMode::OfferVersionMismatch,
        FailureMode::BudgetAuthorizationMissing,
        FailureMode::CapacityUnavailable,
        FailureMode::UpstreamDependencyFailed,
        FailureMode::DeadlineExceeded,
        FailureMode::OutputSchemaViolation,
        FailureMode::RequiredEvidenceMissing,
        FailureMode::DigestMismatch,
    ];

    /// The name the manifest gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureMode::SchemaValidationFailure => "schema_validation_failure",
            FailureMode::OfferVersionMismatch => "offer_version_mismatch",
            FailureMode::BudgetAuthorizationMissing => "budget_authorization_missing",
            FailureMode::CapacityUnavailable => "capacity_unavailable",
            FailureMode::UpstreamDependencyFailed => "upstream_dependency_failed",
            FailureMode::DeadlineExceeded => "deadline_exceeded",
            FailureMode::OutputSchemaViolation => "output_schema_violation",
            FailureMode::RequiredEvidenceMissing => "required_evidence_missing",
            FailureMode::DigestMismatch => "digest_mismatch",
        }
    }

    /// The manifest's group: `protocol_level`, `execution_time` or
    /// `verification`.
    pub fn group(self) -> &'static str {
        match self {
            FailureMode::SchemaValidationFailure
            | FailureMode::OfferVersionMismatch
            | FailureMode::BudgetAuthorizationMissing => "protocol_level",
            FailureMode::CapacityUnavailable
            | FailureMode::UpstreamDependencyFailed
            | FailureMode::DeadlineExceeded => "execution_time",
            FailureMode::OutputSchemaViolation
            | FailureMode::RequiredEvidenceMissing
            | FailureMode::DigestMismatch => "verification",
        }
    }
}

impl std::fmt::Display for FailureMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names and groups are the manifest's, every one of them.
    #[test]
    fn the_failure_modes_are_the_manifests() {
        let manifest: serde_json::Value = serde_json::from_str(crate::MANIFEST).unwrap();
        let modes = manifest["failure_modes"].as_object().unwrap();
        let mut published: Vec<(String, String)> = modes
            .iter()
            .flat_map(|(group, names)| {
                names
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(move |n| (group.clone(), n.as_str().unwrap().to_owned()))
            })
            .collect();
        let mut ours: Vec<(String, String)> = FailureMode::ALL
            .iter()
            .map(|m| (m.group().to_owned(), m.as_str().to_owned()))
            .collect();
        published.sort();
        ours.sort();
        assert_eq!(ours, published);
    }
}
