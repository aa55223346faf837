//! Scopes: what a capability allows, in one normalized form for both
//! formats.
//!
//! The spec's grammar (§2.3) is `tool:<name>[/method:<name>][/resource:<pattern>]`.
//! Names are 1–64 of `A-Z a-z 0-9 _ . -` (no wildcards, no Unicode look-alikes).
//! A resource pattern is a path prefix, optionally ending in `/*` or `/**`
//! ("everything below"); `*` anywhere else is refused. Containment is by
//! prefix on `/` boundaries only: `/data` contains `/data/x`, never
//! `/database`; dot segments (`.`, `..`) are never contained.

use serde_json::{Map, Value};

/// Longest resource pattern accepted.
pub const MAX_PATTERN_BYTES: usize = 1024;

/// A normalized scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// The tool it grants.
    pub tool: String,
    /// `None`: every method of the tool.
    pub method: Option<String>,
    /// Resource prefixes; empty: every resource.
    pub resources: Vec<String>,
}

/// Why a scope was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    #[error("scope {0:?} is not tool:<name>[/method:<name>][/resource:<pattern>]")]
    /// Not `tool:<name>[/method:<name>][/resource:<pattern>]`.
    Grammar(String),
    #[error("{field} {value:?} must be 1-64 of A-Z a-z 0-9 _ . -")]
    /// A tool or method name outside `A-Z a-z 0-9 _ . -` (1-64).
    Name {
        /// Which name (`tool`, `method`).
        field: &'static str,
        /// The name as written.
        value: String,
    },
    #[error("resource pattern {0:?} is not a path prefix (a `*` is allowed only as a last `/*` or `/**`)")]
    /// A resource pattern that is not a path prefix.
    Pattern(String),
}

fn name(field: &'static str, value: &str) -> Result<String, ScopeError> {
    let ok = !value.is_empty()
        && value.len() <= 64
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    if ok {
        Ok(value.to_owned())
    } else {
        Err(ScopeError::Name {
            field,
            value: value.to_owned(),
        })
    }
}

/// A resource pattern as a bare prefix (`/data/**` → `/data`).
pub fn normalize_pattern(pattern: &str) -> Result<String, ScopeError> {
    let bad = || ScopeError::Pattern(pattern.to_owned());
    let base = pattern
        .strip_suffix("/**")
        .or_else(|| pattern.strip_suffix("/*"))
        .unwrap_or(pattern);
    if pattern.is_empty()
        || pattern.len() > MAX_PATTERN_BYTES
        || base.contains('*')
        || base.chars().any(char::is_control)
        || has_dot_segment(base)
    {
        return Err(bad());
    }
    Ok(base.trim_end_matches('/').to_owned())
}

fn has_dot_segment(path: &str) -> bool {
    path.split('/').any(|s| s == "." || s == "..")
}

/// Whether `resource` is `prefix` or below it, on a `/` boundary.
pub fn prefix_contains(prefix: &str, resource: &str) -> bool {
    if has_dot_segment(resource) {
        return false;
    }
    if prefix.is_empty() {
        // `/**` or `/*`: the whole tree.
        return resource.starts_with('/');
    }
    resource == prefix
        || resource
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

impl Scope {
    /// Parses the spec's grammar.
    pub fn parse(text: &str) -> Result<Self, ScopeError> {
        let grammar = || ScopeError::Grammar(text.to_owned());
        let rest = text.strip_prefix("tool:").ok_or_else(grammar)?;
        let (tool, rest) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let mut scope = Scope {
            tool: name("tool", tool)?,
            method: None,
            resources: Vec::new(),
        };
        let mut rest = rest;
        if let Some(after) = rest.strip_prefix("/method:") {
            let (method, tail) = match after.find('/') {
                Some(i) => (&after[..i], &after[i..]),
                None => (after, ""),
            };
            scope.method = Some(name("method", method)?);
            rest = tail;
        }
        if let Some(pattern) = rest.strip_prefix("/resource:") {
            scope.resources.push(normalize_pattern(pattern)?);
            rest = "";
        }
        if !rest.is_empty() {
            return Err(grammar());
        }
        Ok(scope)
    }

    /// The v1 wire format's scope: `tools/call` with `constraints.tool`,
    /// `.method` and `.resource`/`.paths`, or `tools/<tool>[/<method>]`
    /// with the same constraints for resources.
    pub fn from_wire(scope: &str, constraints: &Map<String, Value>) -> Result<Self, ScopeError> {
        let grammar = || ScopeError::Grammar(scope.to_owned());
        if scope.starts_with("tool:") {
            return Self::parse(scope);
        }
        let path = scope.strip_prefix("tools/").ok_or_else(grammar)?;
        let text = |key: &str| constraints.get(key).and_then(Value::as_str);
        let (tool, method) = if path == "call" {
            (
                text("tool").ok_or_else(grammar)?.to_owned(),
                text("method").map(str::to_owned),
            )
        } else {
            let mut parts = path.split('/');
            let tool = parts.next().unwrap_or_default().to_owned();
            let method = parts.next().map(str::to_owned);
            if parts.next().is_some() {
                return Err(grammar());
            }
            (tool, method)
        };
        let mut resources = Vec::new();
        if let Some(r) = text("resource") {
            resources.push(normalize_pattern(r)?);
        }
        match constraints.get("paths") {
            None => {}
            Some(Value::Array(paths)) => {
                for p in paths {
                    let p = p.as_str().ok_or_else(grammar)?;
                    resources.push(normalize_pattern(p)?);
                }
            }
            Some(_) => return Err(grammar()),
        }
        Ok(Scope {
            tool: name("tool", &tool)?,
            method: method.map(|m| name("method", &m)).transpose()?,
            resources,
        })
    }

    /// §4.2 step 5: whether this scope allows `method` of `tool` on every
    /// one of `resources`.
    pub fn covers(&self, tool: &str, method: &str, resources: &[String]) -> bool {
        self.tool == tool
            && self.method.as_deref().is_none_or(|m| m == method)
            && (self.resources.is_empty()
                || (!resources.is_empty()
                    && resources
                        .iter()
                        .all(|r| self.resources.iter().any(|p| prefix_contains(p, r)))))
    }

    /// Whether everything `child` allows, this scope allows (delegation
    /// never broadens).
    pub fn contains(&self, child: &Scope) -> bool {
        self.tool == child.tool
            && match (&self.method, &child.method) {
                (None, _) => true,
                (Some(p), Some(c)) => p == c,
                (Some(_), None) => false,
            }
            && (self.resources.is_empty()
                || (!child.resources.is_empty()
                    && child
                        .resources
                        .iter()
                        .all(|c| self.resources.iter().any(|p| prefix_contains(p, c)))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn grammar() {
        let s = Scope::parse("tool:fs/method:read/resource:/data/**").unwrap();
        assert_eq!(s.tool, "fs");
        assert_eq!(s.method.as_deref(), Some("read"));
        assert_eq!(s.resources, vec!["/data"]);
        assert_eq!(Scope::parse("tool:fs").unwrap().method, None);
        for bad in [
            "",
            "fs",
            "tool:",
            "tool:f*",
            "tool:fs/method:*",
            "tool:fs/method:",
            "tool:fs/resource:/a*b",
            "tool:fs/resource:/a/../b",
            "tool:fs/extra:1",
            "tool:fѕ",
            "tool:fs /method:read",
        ] {
            assert!(Scope::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn prefix_containment_is_on_segment_boundaries() {
        let fs = Scope::parse("tool:fs").unwrap();
        let read = Scope::parse("tool:fs/method:read").unwrap();
        let data = Scope::parse("tool:fs/method:read/resource:/data").unwrap();
        assert!(fs.contains(&read) && read.contains(&data) && fs.contains(&data));
        assert!(!read.contains(&fs) && !data.contains(&read));
        assert!(!Scope::parse("tool:fsx").unwrap().contains(&fs));
        assert!(!fs.contains(&Scope::parse("tool:fsx").unwrap()));
        assert!(data.covers("fs", "read", &["/data/a".into()]));
        assert!(data.covers("fs", "read", &["/data".into()]));
        assert!(!data.covers("fs", "read", &["/database".into()]));
        assert!(!data.covers("fs", "read", &["/data/../etc/passwd".into()]));
        assert!(!data.covers("fs", "write", &["/data/a".into()]));
        assert!(!data.covers("fs", "read", &[]));
        assert!(read.covers("fs", "read", &[]));
    }

    #[test]
    fn wire_scopes() {
        let c = json!({"tool": "weather", "method": "get"});
        let s = Scope::from_wire("tools/call", c.as_object().unwrap()).unwrap();
        assert_eq!(
            (s.tool.as_str(), s.method.as_deref()),
            ("weather", Some("get"))
        );
        let c = json!({"paths": ["/data/*"]});
        let s = Scope::from_wire("tools/filesystem/read", c.as_object().unwrap()).unwrap();
        assert_eq!(s.resources, vec!["/data"]);
        assert!(Scope::from_wire("tools/call", &Map::new()).is_err());
        assert!(Scope::from_wire("admin", &Map::new()).is_err());
    }

    fn path() -> impl Strategy<Value = String> {
        prop::collection::vec(prop_oneof!["a", "b", "ab", "..", "."], 0..4)
            .prop_map(|s| format!("/{}", s.join("/")))
    }

    proptest! {
        /// Containment is transitive and agrees with coverage: whatever a
        /// contained scope covers, its container covers.
        #[test]
        fn containment_implies_coverage(p in path(), c in path(), r in path()) {
            let (Ok(p), Ok(c)) = (normalize_pattern(&p), normalize_pattern(&c)) else { return Ok(()); };
            let parent = Scope { tool: "t".into(), method: None, resources: vec![p] };
            let child = Scope { tool: "t".into(), method: Some("m".into()), resources: vec![c] };
            if parent.contains(&child) && child.covers("t", "m", std::slice::from_ref(&r)) {
                prop_assert!(parent.covers("t", "m", &[r]));
            }
        }
    }
}
