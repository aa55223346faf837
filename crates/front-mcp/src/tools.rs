//! How upstream tools map to DelegateOS capabilities: which capability a
//! `tools/call` needs, on which resources, at what cost. Deny by default: a
//! tool no rule names cannot be called, and a rule that names a resource
//! argument the call lacks denies the call.

use std::sync::Arc;

use delegateos::CapabilityRequest;
use serde_json::{Map, Value};

use super::auth::HttpCredentials;

/// Most resources one call may name (an array argument such as `paths`).
pub const MAX_RESOURCES_PER_CALL: usize = 256;

/// A tool-name pattern: `*` stands for any run of characters (none
/// included); everything else matches itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamePattern(String);

impl NamePattern {
    pub fn new(text: &str) -> Self {
        Self(text.to_owned())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `name` matches. Greedy with one backtrack point, so linear
    /// in practice and never exponential.
    pub fn matches(&self, name: &str) -> bool {
        let (p, n) = (self.0.as_bytes(), name.as_bytes());
        let (mut pi, mut ni) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while ni < n.len() {
            if pi < p.len() && p[pi] == b'*' {
                star = Some((pi, ni));
                pi += 1;
            } else if pi < p.len() && p[pi] == n[ni] {
                pi += 1;
                ni += 1;
            } else if let Some((sp, sn)) = star {
                pi = sp + 1;
                ni = sn + 1;
                star = Some((sp, sn + 1));
            } else {
                return false;
            }
        }
        p[pi..].iter().all(|&c| c == b'*')
    }
}

/// Where a call's resource comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceSource {
    /// JSON Pointers (RFC 6901) into the call's `arguments`; each must name
    /// a string or an array of strings, and every one is authorized.
    Pointers(Vec<String>),
    /// The same resource for every call.
    Fixed(String),
}

/// What a tool needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolPolicy {
    /// Called without a DCT and never charged: only when the config says so.
    Open,
    Enforced {
        namespace: String,
        action: String,
        resource: ResourceSource,
        cost_microcents: u64,
        /// Resource arguments are filesystem paths: resolved (links
        /// followed) before the check, and forwarded resolved.
        resolve_path: bool,
    },
}

/// One rule: the tools it names and what they need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolRule {
    pub name: NamePattern,
    pub policy: ToolPolicy,
    /// What dgw presents to the upstream for these tools' calls instead of
    /// the upstream's own credentials (a tool that needs a stronger one);
    /// only on an enforced rule of an HTTP upstream.
    pub credentials: Option<Arc<HttpCredentials>>,
}

/// An upstream's rules, first match wins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolRules(pub Vec<ToolRule>);

/// Why a call's resources could not be read from its arguments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceError {
    #[error("argument {pointer:?} is missing; it names the resource this tool is authorized on")]
    Missing { pointer: String },
    #[error("argument {pointer:?} must be a string or an array of strings")]
    NotAString { pointer: String },
    #[error("the call names more than {MAX_RESOURCES_PER_CALL} resources")]
    TooMany,
}

impl ToolRules {
    /// The first rule naming `tool`; `None` means denied.
    pub fn rule_for(&self, tool: &str) -> Option<&ToolRule> {
        self.0.iter().find(|r| r.name.matches(tool))
    }

    /// The policy of the first rule naming `tool`; `None` means denied.
    pub fn policy_for(&self, tool: &str) -> Option<&ToolPolicy> {
        self.rule_for(tool).map(|r| &r.policy)
    }

    /// Every credential the rules hold.
    pub fn credentials(&self) -> impl Iterator<Item = &HttpCredentials> {
        self.0.iter().filter_map(|r| r.credentials.as_deref())
    }
}

/// Splits `namespace:action` at its last colon, so that custom namespaces
/// such as `acme:docs` (§12) keep theirs.
pub fn split_capability(text: &str) -> Option<(&str, &str)> {
    let (ns, action) = text.rsplit_once(':')?;
    let concrete = |s: &str| !s.is_empty() && !s.contains('*');
    (concrete(ns) && concrete(action)).then_some((ns, action))
}

impl ResourceSource {
    /// The resources a call names, in argument order.
    pub fn resources(&self, arguments: &Map<String, Value>) -> Result<Vec<String>, ResourceError> {
        let pointers = match self {
            ResourceSource::Fixed(r) => return Ok(vec![r.clone()]),
            ResourceSource::Pointers(p) => p,
        };
        let mut out = Vec::new();
        for pointer in pointers {
            let missing = || ResourceError::Missing {
                pointer: pointer.clone(),
            };
            let not_string = || ResourceError::NotAString {
                pointer: pointer.clone(),
            };
            match pointer_into(arguments, pointer).ok_or_else(missing)? {
                Value::String(s) => out.push(s.clone()),
                Value::Array(items) if !items.is_empty() => {
                    for item in items {
                        out.push(item.as_str().ok_or_else(not_string)?.to_owned());
                    }
                }
                Value::Array(_) => return Err(missing()),
                _ => return Err(not_string()),
            }
            if out.len() > MAX_RESOURCES_PER_CALL {
                return Err(ResourceError::TooMany);
            }
        }
        Ok(out)
    }
}

impl ResourceSource {
    /// Replaces every resource string in `arguments` with `map` of it, in
    /// place (the same places [`ResourceSource::resources`] reads).
    pub fn rewrite<E>(
        &self,
        arguments: &mut Map<String, Value>,
        mut map: impl FnMut(&str) -> Result<String, E>,
    ) -> Result<(), E> {
        let ResourceSource::Pointers(pointers) = self else {
            return Ok(());
        };
        for pointer in pointers {
            match pointer_into_mut(arguments, pointer) {
                Some(Value::String(s)) => *s = map(s)?,
                Some(Value::Array(items)) => {
                    for item in items.iter_mut().take(MAX_RESOURCES_PER_CALL + 1) {
                        if let Value::String(s) = item {
                            *s = map(s)?;
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// [`pointer_into`], mutably.
fn pointer_into_mut<'a>(
    object: &'a mut Map<String, Value>,
    pointer: &str,
) -> Option<&'a mut Value> {
    let rest = pointer.strip_prefix('/')?;
    let (first, tail) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let key = first.replace("~1", "/").replace("~0", "~");
    let value = object.get_mut(&key)?;
    if tail.is_empty() {
        Some(value)
    } else {
        value.pointer_mut(tail)
    }
}

/// Resolves a JSON Pointer (RFC 6901, starting with `/`) in an object
/// without copying it into a `Value` first.
fn pointer_into<'a>(object: &'a Map<String, Value>, pointer: &str) -> Option<&'a Value> {
    let rest = pointer.strip_prefix('/')?;
    let (first, tail) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let key = first.replace("~1", "/").replace("~0", "~");
    let value = object.get(&key)?;
    if tail.is_empty() {
        Some(value)
    } else {
        value.pointer(tail)
    }
}

impl ToolPolicy {
    /// The capability requests a call with these arguments needs, one per
    /// resource; empty for an open tool.
    pub fn requests(
        &self,
        arguments: &Map<String, Value>,
    ) -> Result<Vec<CapabilityRequest>, ResourceError> {
        match self {
            ToolPolicy::Open => Ok(Vec::new()),
            ToolPolicy::Enforced {
                namespace,
                action,
                resource,
                ..
            } => Ok(resource
                .resources(arguments)?
                .into_iter()
                .map(|resource| CapabilityRequest {
                    namespace: namespace.clone(),
                    action: action.clone(),
                    resource,
                })
                .collect()),
        }
    }

    /// Whether a token with these capabilities may call this tool on some
    /// resource: what `tools/list` filters on (§11.3 step 4).
    pub fn offered_to(&self, capabilities: &[delegateos::Capability]) -> bool {
        match self {
            ToolPolicy::Open => true,
            ToolPolicy::Enforced {
                namespace, action, ..
            } => capabilities.iter().any(|c| {
                (c.namespace == "*" || c.namespace == *namespace)
                    && (c.action == "*" || c.action == *action)
            }),
        }
    }

    pub fn cost_microcents(&self) -> u64 {
        match self {
            ToolPolicy::Open => 0,
            ToolPolicy::Enforced {
                cost_microcents, ..
            } => *cost_microcents,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn name_patterns() {
        let p = NamePattern::new("read_*");
        assert!(p.matches("read_file"));
        assert!(p.matches("read_"));
        assert!(!p.matches("write_file"));
        assert!(!p.matches("xread_file"));
        assert!(NamePattern::new("*").matches(""));
        assert!(NamePattern::new("a*b*c").matches("aXXbYYc"));
        assert!(!NamePattern::new("a*b*c").matches("aXXbYY"));
        assert!(NamePattern::new("exact").matches("exact"));
        assert!(!NamePattern::new("exact").matches("exactly"));
    }

    /// The matcher agrees with a regex built from the pattern.
    fn regex_for(p: &str) -> String {
        let parts: Vec<String> = p.split('*').map(|s| s.replace('.', "\\.")).collect();
        format!("^{}$", parts.join(".*"))
    }

    proptest! {
        #[test]
        fn name_pattern_agrees_with_regex(p in "[ab*.]{0,8}", n in "[ab.]{0,10}") {
            let re = regex_lite(&regex_for(&p), &n);
            prop_assert_eq!(NamePattern::new(&p).matches(&n), re);
        }
    }

    /// A tiny backtracking matcher for `^(literal|.*)*$`, the reference.
    fn regex_lite(re: &str, s: &str) -> bool {
        fn go(p: &[u8], s: &[u8]) -> bool {
            if p.is_empty() {
                return s.is_empty();
            }
            if p.starts_with(b".*") {
                return (0..=s.len()).any(|i| go(&p[2..], &s[i..]));
            }
            let (c, rest) = if p[0] == b'\\' {
                (p[1], &p[2..])
            } else {
                (p[0], &p[1..])
            };
            !s.is_empty() && s[0] == c && go(rest, &s[1..])
        }
        go(
            re.trim_start_matches('^').trim_end_matches('$').as_bytes(),
            s.as_bytes(),
        )
    }

    #[test]
    fn capability_split() {
        assert_eq!(split_capability("docs:read"), Some(("docs", "read")));
        assert_eq!(
            split_capability("acme:docs:read"),
            Some(("acme:docs", "read"))
        );
        assert_eq!(split_capability("docs"), None);
        assert_eq!(split_capability(":read"), None);
        assert_eq!(split_capability("docs:"), None);
        assert_eq!(split_capability("docs:*"), None);
    }

    #[test]
    fn rewrite_changes_every_resource_in_place() {
        let mut args = json!({"path": "/a", "paths": ["/b", "/c"], "other": "/x"});
        let args = args.as_object_mut().unwrap();
        let src = ResourceSource::Pointers(vec!["/path".into(), "/paths".into()]);
        src.rewrite(args, |s| Ok::<_, ()>(format!("/r{s}")))
            .unwrap();
        assert_eq!(src.resources(args).unwrap(), vec!["/r/a", "/r/b", "/r/c"]);
        assert_eq!(args["other"], "/x");
    }

    #[test]
    fn resources_from_pointers() {
        let args = json!({"path": "/a", "paths": ["/b", "/c"], "n": 3, "empty": [],
                          "deep": {"x": [{"y": "/d"}]}, "a/b": "/e", "m~n": "/f"});
        let args = args.as_object().unwrap();
        let src = |p: &[&str]| ResourceSource::Pointers(p.iter().map(|s| s.to_string()).collect());
        assert_eq!(src(&["/path"]).resources(args).unwrap(), vec!["/a"]);
        assert_eq!(src(&["/deep/x/0/y"]).resources(args).unwrap(), vec!["/d"]);
        assert_eq!(
            src(&["/a~1b", "/m~0n"]).resources(args).unwrap(),
            vec!["/e", "/f"]
        );
        assert_eq!(
            src(&["/paths", "/path"]).resources(args).unwrap(),
            vec!["/b", "/c", "/a"]
        );
        assert_eq!(
            src(&["/nope"]).resources(args),
            Err(ResourceError::Missing {
                pointer: "/nope".into()
            })
        );
        assert_eq!(
            src(&["/empty"]).resources(args),
            Err(ResourceError::Missing {
                pointer: "/empty".into()
            })
        );
        assert_eq!(
            src(&["/n"]).resources(args),
            Err(ResourceError::NotAString {
                pointer: "/n".into()
            })
        );
        assert_eq!(
            ResourceSource::Fixed("*".into()).resources(args).unwrap(),
            vec!["*"]
        );
    }

    #[test]
    fn first_rule_wins_and_unnamed_tools_are_denied() {
        let enforced = |action: &str| ToolPolicy::Enforced {
            namespace: "docs".into(),
            action: action.into(),
            resource: ResourceSource::Pointers(vec!["/path".into()]),
            cost_microcents: 1,
            resolve_path: false,
        };
        let rules = ToolRules(vec![
            ToolRule {
                name: NamePattern::new("read_media_file"),
                policy: ToolPolicy::Open,
                credentials: None,
            },
            ToolRule {
                name: NamePattern::new("read_*"),
                policy: enforced("read"),
                credentials: None,
            },
        ]);
        assert_eq!(rules.policy_for("read_media_file"), Some(&ToolPolicy::Open));
        assert_eq!(rules.policy_for("read_file"), Some(&enforced("read")));
        assert_eq!(rules.policy_for("write_file"), None);
    }
}
