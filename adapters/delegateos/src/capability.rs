//! Capabilities: `namespace`, `action` and a resource glob (§3.1, §10.2, §12).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::glob::{PatternError, ResourcePattern};

/// Longest namespace or action accepted.
pub const MAX_NAME_BYTES: usize = 128;

/// One granted capability. A namespace or action of `*` stands for any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Capability {
    /// What kind of thing (`docs`, `web`).
    pub namespace: String,
    /// What may be done (`read`).
    pub action: String,
    /// Where: a resource glob.
    pub resource: ResourcePattern,
}

/// What a caller asks to do: concrete, no globs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapabilityRequest {
    /// What kind of thing.
    pub namespace: String,
    /// What is to be done.
    pub action: String,
    /// Where: a concrete, canonical resource.
    pub resource: String,
}

/// Why a capability string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CapabilityError {
    #[error("capability {0:?} is not NAMESPACE:ACTION:RESOURCE")]
    /// Not `namespace:action:resource`.
    Shape(String),
    #[error("{field} must be 1..={MAX_NAME_BYTES} bytes")]
    /// A namespace or action outside the allowed characters.
    Name {
        /// Which (`namespace`, `action`).
        field: &'static str,
    },
    #[error(transparent)]
    /// The resource glob is not valid.
    Pattern(#[from] PatternError),
}

fn name_covers(granted: &str, wanted: &str) -> bool {
    granted == "*" || granted == wanted
}

impl Capability {
    /// A capability from its parts, with the name checks of [`Capability::validate`].
    pub fn new(namespace: &str, action: &str, resource: &str) -> Result<Self, CapabilityError> {
        let cap = Self {
            namespace: namespace.to_owned(),
            action: action.to_owned(),
            resource: ResourcePattern::parse(resource)?,
        };
        cap.validate()?;
        Ok(cap)
    }

    /// Checks the sizes of namespace and action.
    pub fn validate(&self) -> Result<(), CapabilityError> {
        for (field, value) in [("namespace", &self.namespace), ("action", &self.action)] {
            if value.is_empty() || value.len() > MAX_NAME_BYTES {
                return Err(CapabilityError::Name { field });
            }
        }
        Ok(())
    }

    /// Whether this capability grants the request.
    pub fn grants(&self, request: &CapabilityRequest) -> bool {
        name_covers(&self.namespace, &request.namespace)
            && name_covers(&self.action, &request.action)
            && self.resource.matches(&request.resource)
    }

    /// Whether everything this capability grants, `parent` grants too.
    pub fn is_subset_of(&self, parent: &Capability) -> bool {
        name_covers(&parent.namespace, &self.namespace)
            && name_covers(&parent.action, &self.action)
            && self.resource.is_subset_of(&parent.resource)
    }

    /// Whether this capability is a subset of some capability in `parents`.
    pub fn is_covered_by(&self, parents: &[Capability]) -> bool {
        parents.iter().any(|p| self.is_subset_of(p))
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.namespace, self.action, self.resource)
    }
}

/// `NAMESPACE:ACTION:RESOURCE`, split at the first two colons (a resource
/// such as a URL may hold more). A custom namespace that itself contains a
/// colon is written as the JSON object instead.
impl FromStr for Capability {
    type Err = CapabilityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim_start().starts_with('{') {
            let cap: Capability =
                serde_json::from_str(s).map_err(|_| CapabilityError::Shape(s.to_owned()))?;
            cap.validate()?;
            return Ok(cap);
        }
        let mut parts = s.splitn(3, ':');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(ns), Some(action), Some(resource)) => Capability::new(ns, action, resource),
            _ => Err(CapabilityError::Shape(s.to_owned())),
        }
    }
}

impl fmt::Display for CapabilityRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.namespace, self.action, self.resource)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(ns: &str, action: &str, resource: &str) -> CapabilityRequest {
        CapabilityRequest {
            namespace: ns.into(),
            action: action.into(),
            resource: resource.into(),
        }
    }

    #[test]
    fn parse_forms() {
        let c: Capability = "web:fetch:https://example.com/**".parse().unwrap();
        assert_eq!(c.namespace, "web");
        assert_eq!(c.resource.as_str(), "https://example.com/**");
        let c: Capability = r#"{"namespace":"acme:docs","action":"read","resource":"*"}"#
            .parse()
            .unwrap();
        assert_eq!(c.namespace, "acme:docs");
        assert!("docs:read".parse::<Capability>().is_err());
        assert!(":read:*".parse::<Capability>().is_err());
    }

    #[test]
    fn grants_and_subsets() {
        let docs: Capability = "docs:read:/project/**".parse().unwrap();
        assert!(docs.grants(&req("docs", "read", "/project/a/b")));
        assert!(!docs.grants(&req("docs", "write", "/project/a/b")));
        assert!(!docs.grants(&req("web", "read", "/project/a/b")));
        let any: Capability = "*:*:*".parse().unwrap();
        assert!(any.grants(&req("web", "search", "q")));
        assert!(docs.is_subset_of(&any));
        assert!(!any.is_subset_of(&docs));
        let narrower: Capability = "docs:read:/project/a/*".parse().unwrap();
        assert!(narrower.is_subset_of(&docs));
        assert!(!"docs:write:/project/a/*"
            .parse::<Capability>()
            .unwrap()
            .is_subset_of(&docs));
    }
}
