//! A Talos scope in DelegateOS terms, so the central pipeline can enforce
//! it (docs/adapters/talos.md has the table):
//!
//! | Talos | DelegateOS |
//! | --- | --- |
//! | `tool:<name>` | namespace `<name>` |
//! | `method:<name>` (absent: every method) | action `<name>` (`*`) |
//! | `resource:<prefix>` (absent: every resource) | resource `<prefix>/**` (`*`) |
//!
//! A Talos request (tool, method, resources) is the capability request
//! (namespace = tool, action = method, resource) for each resource.

use delegateos::{Capability as DosCapability, CapabilityRequest};

use crate::authorize::TalosRequest;
use crate::scope::Scope;

/// The DelegateOS capabilities a scope grants.
pub fn capabilities(scope: &Scope) -> Vec<DosCapability> {
    let action = scope.method.clone().unwrap_or_else(|| "*".to_owned());
    let patterns: Vec<String> = if scope.resources.is_empty() {
        vec!["*".to_owned()]
    } else {
        scope.resources.iter().map(|p| format!("{p}/**")).collect()
    };
    patterns
        .into_iter()
        .filter_map(|p| DosCapability::new(&scope.tool, &action, &p).ok())
        .collect()
}

/// The DelegateOS requests a Talos request makes: one per resource; a
/// request that names no resource asks for `/`, which only a scope without
/// resource restriction grants (as [`Scope::covers`] says).
pub fn requests(request: &TalosRequest) -> Vec<CapabilityRequest> {
    let resources: Vec<String> = if request.resources.is_empty() {
        vec!["/".to_owned()]
    } else {
        request.resources.clone()
    };
    resources
        .into_iter()
        .map(|resource| CapabilityRequest {
            namespace: request.tool.clone(),
            action: request.method.clone(),
            resource,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever the Talos scope covers, the translated capabilities grant,
    /// and the other way round, on a sample of requests.
    #[test]
    fn translation_agrees_with_talos_coverage() {
        let scopes = [
            "tool:fs",
            "tool:fs/method:read",
            "tool:fs/method:read/resource:/data",
        ];
        let asks = [
            ("fs", "read", "/data/a"),
            ("fs", "read", "/data"),
            ("fs", "read", "/database"),
            ("fs", "write", "/data/a"),
            ("fsx", "read", "/data/a"),
            ("fs", "read", "/data/../etc"),
        ];
        for s in scopes {
            let scope = Scope::parse(s).unwrap();
            let caps = capabilities(&scope);
            for (tool, method, resource) in asks {
                let req = TalosRequest {
                    tool: tool.into(),
                    method: method.into(),
                    resources: vec![resource.into()],
                };
                let talos = scope.covers(tool, method, &req.resources);
                let dos = requests(&req)
                    .iter()
                    .all(|r| caps.iter().any(|c| c.grants(r)));
                assert_eq!(talos, dos, "{s} {tool} {method} {resource}");
            }
        }
    }
}
