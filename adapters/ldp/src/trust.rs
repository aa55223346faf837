//! Trust domains (spec "Trust Domains"): named security boundaries, and
//! whether a session may be established between two delegates' domains.

use serde::{Deserialize, Serialize};

use crate::{Reason, Refusal};

/// A trust domain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustDomain {
    /// Its name.
    pub name: String,
    /// Whether sessions with other domains are allowed at all.
    pub allow_cross_domain: bool,
    /// The other domains it trusts (only with `allow_cross_domain`).
    #[serde(default)]
    pub trusted_peers: Vec<String>,
}

impl TrustDomain {
    /// Whether it trusts the domain named `peer`: its own always; another
    /// only when cross-domain sessions are allowed and `peer` is listed.
    pub fn trusts(&self, peer: &str) -> bool {
        self.name == peer
            || (self.allow_cross_domain && self.trusted_peers.iter().any(|p| p == peer))
    }
}

/// Whether an initiator in `initiator` may hold a session with a
/// responder in `responder`, the initiator having required
/// `required` (SESSION_PROPOSE's `required_trust_domain`):
///
/// - a required domain must be the responder's;
/// - across domains, both must allow cross-domain sessions and list each
///   other (the spec's "the initiator's domain MUST be in trusted_peers",
///   and mutually, as the reference checks).
///
/// The refusal's detail is what SESSION_REJECT's `reason` says.
pub fn check_session(
    initiator: &TrustDomain,
    responder: &TrustDomain,
    required: Option<&str>,
) -> Result<(), Refusal> {
    if let Some(required) = required {
        if required != responder.name {
            return Err(Refusal::new(
                Reason::TrustDomain,
                format!(
                    "the responder is in trust domain {:?}, not the required {required:?}",
                    responder.name
                ),
            ));
        }
    }
    if initiator.name == responder.name {
        return Ok(());
    }
    if !responder.allow_cross_domain || !initiator.allow_cross_domain {
        return Err(Refusal::new(
            Reason::TrustDomain,
            format!(
                "cross-domain sessions between {:?} and {:?} are not allowed",
                initiator.name, responder.name
            ),
        ));
    }
    if !(responder.trusts(&initiator.name) && initiator.trusts(&responder.name)) {
        return Err(Refusal::new(
            Reason::TrustDomain,
            format!(
                "{:?} and {:?} do not list each other as trusted peers",
                initiator.name, responder.name
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn domain(name: &str, cross: bool, peers: &[&str]) -> TrustDomain {
        TrustDomain {
            name: name.into(),
            allow_cross_domain: cross,
            trusted_peers: peers.iter().map(|p| p.to_string()).collect(),
        }
    }

    #[test]
    fn each_rule_of_the_spec() {
        let research = domain("research.internal", false, &[]);
        assert!(check_session(&research, &research, Some("research.internal")).is_ok());
        assert!(check_session(&research, &research, None).is_ok());
        let e = check_session(&research, &research, Some("prod")).unwrap_err();
        assert_eq!(e.reason, Reason::TrustDomain);
        // Across domains: refused unless both allow it and list each other.
        let acme = domain("acme", true, &["partner"]);
        let partner = domain("partner", true, &["acme"]);
        let aloof = domain("partner", true, &[]);
        let closed = domain("partner", false, &["acme"]);
        assert!(check_session(&acme, &partner, None).is_ok());
        assert!(check_session(&acme, &aloof, None).is_err());
        assert!(check_session(&acme, &closed, None).is_err());
        assert!(check_session(&research, &partner, None).is_err());
        assert!(check_session(&acme, &partner, Some("acme")).is_err());
        assert!(!acme.trusts("other") && acme.trusts("acme"));
    }
}
