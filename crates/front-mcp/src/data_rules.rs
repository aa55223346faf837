//! How an upstream's resources and prompts map to capabilities, as its
//! tools do ([`super::tools`]): a rule per URI pattern
//! (`[[upstreams.resources]]`) or prompt name (`[[upstreams.prompts]]`),
//! first match wins, deny by default. A resource's URI is put in one
//! spelling before any rule or grant sees it, and that spelling is what
//! the upstream is asked for: a rule for `file:///srv/docs/*` must not be
//! reachable as `FILE:///srv/docs/../secret` or `…/%2e%2e/secret`.

use delegateos::CapabilityRequest;

use super::tools::NamePattern;

/// What reading a resource or getting a prompt needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataPolicy {
    /// Read without a DCT and never charged: only when the config says so.
    Open,
    /// The capability `namespace:action` on the resource (the URI, or the
    /// prompt's name), `cost_microcents` reserved per read.
    Enforced {
        namespace: String,
        action: String,
        cost_microcents: u64,
    },
}

/// One rule: the URIs (or prompt names) it names and what they need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataRule {
    pub pattern: NamePattern,
    pub policy: DataPolicy,
}

/// An upstream's resource and prompt rules, each list first match wins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DataRules {
    pub resources: Vec<DataRule>,
    pub prompts: Vec<DataRule>,
}

/// Which kind of data a rule list covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataKind {
    Resource,
    Prompt,
}

impl DataKind {
    /// The config table naming its rules, for messages.
    pub fn table(self) -> &'static str {
        match self {
            DataKind::Resource => "[[upstreams.resources]]",
            DataKind::Prompt => "[[upstreams.prompts]]",
        }
    }
}

impl DataRules {
    /// The policy of the first rule naming `name` (a normalized URI, or a
    /// prompt's name); `None` means denied.
    pub fn policy_for(&self, kind: DataKind, name: &str) -> Option<&DataPolicy> {
        let rules = match kind {
            DataKind::Resource => &self.resources,
            DataKind::Prompt => &self.prompts,
        };
        rules
            .iter()
            .find(|r| r.pattern.matches(name))
            .map(|r| &r.policy)
    }
}

impl DataPolicy {
    /// The capability request reading `resource` needs; `None` when open.
    pub fn request(&self, resource: &str) -> Option<CapabilityRequest> {
        match self {
            DataPolicy::Open => None,
            DataPolicy::Enforced {
                namespace, action, ..
            } => Some(CapabilityRequest {
                namespace: namespace.clone(),
                action: action.clone(),
                resource: resource.to_owned(),
            }),
        }
    }

    pub fn cost_microcents(&self) -> u64 {
        match self {
            DataPolicy::Open => 0,
            DataPolicy::Enforced {
                cost_microcents, ..
            } => *cost_microcents,
        }
    }

    /// Whether a credential with these capabilities may read `resource`
    /// (`None`: its protocol cannot say, so the call decides): what the
    /// lists are filtered on. Unlike a tool, the resource is known, so the
    /// grant's resource pattern counts too.
    pub fn offered_to(
        &self,
        capabilities: Option<&[delegateos::Capability]>,
        resource: &str,
    ) -> bool {
        match (self, capabilities) {
            (DataPolicy::Open, _) => true,
            (DataPolicy::Enforced { .. }, None) => true,
            (
                DataPolicy::Enforced {
                    namespace, action, ..
                },
                Some(caps),
            ) => caps.iter().any(|c| {
                (c.namespace == "*" || c.namespace == *namespace)
                    && (c.action == "*" || c.action == *action)
                    && c.resource.matches(resource)
            }),
        }
    }
}

/// Why a resource URI was refused before any rule saw it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UriError {
    #[error("is not an absolute URI (`scheme:…`)")]
    NoScheme,
    #[error("is longer than {MAX_URI_BYTES} bytes")]
    TooLong,
    #[error("has a control character, a space or a backslash")]
    Forbidden,
    #[error("has percent-encoding dgw cannot put in one spelling (`%{0}`)")]
    Encoded(String),
    #[error("has a `.` or `..` segment")]
    DotSegment,
    #[error("has an empty segment (`//` after the authority)")]
    EmptySegment,
}

/// Longest URI accepted (the longest resource a grant may name).
pub const MAX_URI_BYTES: usize = delegateos::resource::MAX_RESOURCE_BYTES;

/// `uri` in the one spelling rules and grants are matched against, and the
/// upstream asked for: the scheme lowercased (and the authority, which is
/// case-insensitive for the schemes that have one), percent-encoded
/// unreserved characters decoded (RFC 3986 §6.2.2.2). Whatever could still
/// be read two ways is refused rather than guessed: any percent-encoding
/// left (`%2F`, `%00`, …), a `.` or `..` segment (after decoding, so
/// `%2e%2e` too), an empty segment, a backslash, a space or a control
/// character.
pub fn normalize_uri(uri: &str) -> Result<String, UriError> {
    if uri.len() > MAX_URI_BYTES {
        return Err(UriError::TooLong);
    }
    if uri
        .chars()
        .any(|c| c.is_control() || c == '\\' || c.is_whitespace())
    {
        return Err(UriError::Forbidden);
    }
    let (scheme, rest) = uri.split_once(':').ok_or(UriError::NoScheme)?;
    let mut chars = scheme.chars();
    let scheme_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    if !scheme_ok {
        return Err(UriError::NoScheme);
    }
    let rest = decode_unreserved(rest)?;
    let (authority, path) = match rest.strip_prefix("//") {
        Some(after) => {
            let end = after.find(['/', '?', '#']).unwrap_or(after.len());
            (
                Some(after[..end].to_ascii_lowercase()),
                after[end..].to_owned(),
            )
        }
        None => (None, rest),
    };
    let path_only = path.split(['?', '#']).next().unwrap_or_default();
    let trimmed = path_only.strip_prefix('/').unwrap_or(path_only);
    for segment in trimmed.split('/') {
        match segment {
            "." | ".." => return Err(UriError::DotSegment),
            "" if !trimmed.is_empty() => return Err(UriError::EmptySegment),
            _ => {}
        }
    }
    let mut out = scheme.to_ascii_lowercase();
    out.push(':');
    if let Some(a) = authority {
        out.push_str("//");
        out.push_str(&a);
    }
    out.push_str(&path);
    Ok(out)
}

/// `text` with `%XX` of unreserved characters (`A-Z a-z 0-9 - . _ ~`)
/// decoded; any other `%` is refused.
fn decode_unreserved(text: &str) -> Result<String, UriError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let hex = rest.get(i + 1..i + 3).unwrap_or(&rest[i + 1..]);
        let byte = (hex.len() == 2)
            .then(|| u8::from_str_radix(hex, 16).ok())
            .flatten()
            .filter(|b| b.is_ascii_alphanumeric() || b"-._~".contains(b))
            .ok_or_else(|| UriError::Encoded(hex.chars().take(2).collect()))?;
        out.push(char::from(byte));
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A sample of the URIs a template (RFC 6570) expands to: each `{…}`
/// expression replaced by one plain segment. What a template list is
/// filtered on: listing a template grants nothing, every read is checked.
pub fn template_sample(template: &str) -> String {
    let mut out = String::with_capacity(template.len());
    let mut in_expr = false;
    for c in template.chars() {
        match (c, in_expr) {
            ('{', false) => {
                in_expr = true;
                out.push('x');
            }
            ('}', true) => in_expr = false,
            (_, true) => {}
            (c, false) => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn one_spelling_per_uri() {
        for (given, want) in [
            ("file:///srv/docs/a.txt", "file:///srv/docs/a.txt"),
            ("FILE:///srv/docs/a.txt", "file:///srv/docs/a.txt"),
            ("test://Static/Resource", "test://static/Resource"),
            ("file:///srv/docs/%61.txt", "file:///srv/docs/a.txt"),
            ("urn:isbn:0451450523", "urn:isbn:0451450523"),
            ("https://h.example/a?q=1", "https://h.example/a?q=1"),
        ] {
            assert_eq!(normalize_uri(given).as_deref(), Ok(want), "{given}");
        }
    }

    #[test]
    fn spellings_a_server_could_read_otherwise_are_refused() {
        for (bad, why) in [
            ("file:///srv/docs/../secret", UriError::DotSegment),
            ("file:///srv/docs/%2e%2e/secret", UriError::DotSegment),
            ("file:///srv/docs/%2E%2E/secret", UriError::DotSegment),
            ("file:///srv/docs/./a", UriError::DotSegment),
            (
                "file:///srv/docs/..%2Fsecret",
                UriError::Encoded("2F".into()),
            ),
            ("file:///srv/docs/a%00", UriError::Encoded("00".into())),
            ("file:///srv/docs/a%2", UriError::Encoded("2".into())),
            ("file:///srv/docs/a%", UriError::Encoded(String::new())),
            ("file:///srv//docs", UriError::EmptySegment),
            ("file:///srv\\docs", UriError::Forbidden),
            ("file:///srv/a b", UriError::Forbidden),
            ("file:///srv/a\n", UriError::Forbidden),
            ("/srv/docs/a", UriError::NoScheme),
            ("1x:/a", UriError::NoScheme),
        ] {
            assert_eq!(normalize_uri(bad), Err(why), "{bad}");
        }
        assert_eq!(
            normalize_uri(&format!("file:///{}", "a".repeat(MAX_URI_BYTES))),
            Err(UriError::TooLong)
        );
    }

    proptest! {
        /// Normalizing is idempotent, and what it gives is a canonical
        /// resource a grant may be matched against.
        #[test]
        fn normalized_uris_are_fixed_points_and_canonical(
            scheme in "[a-zA-Z][a-z+.-]{0,4}",
            segs in proptest::collection::vec("[A-Za-z0-9._~%-]{1,6}", 0..5),
        ) {
            let uri = format!("{scheme}:///{}", segs.join("/"));
            if let Ok(n) = normalize_uri(&uri) {
                prop_assert_eq!(normalize_uri(&n), Ok(n.clone()));
                prop_assert!(!n.contains('%'));
                prop_assert!(delegateos::resource::check(&n).is_ok(), "{}", n);
            }
        }
    }

    #[test]
    fn first_rule_wins_and_unnamed_data_is_denied() {
        let rules = DataRules {
            resources: vec![
                DataRule {
                    pattern: NamePattern::new("test://static/*"),
                    policy: DataPolicy::Open,
                },
                DataRule {
                    pattern: NamePattern::new("test://*"),
                    policy: DataPolicy::Enforced {
                        namespace: "docs".into(),
                        action: "read".into(),
                        cost_microcents: 5,
                    },
                },
            ],
            prompts: Vec::new(),
        };
        let r = |n| rules.policy_for(DataKind::Resource, n);
        assert_eq!(r("test://static/a"), Some(&DataPolicy::Open));
        assert_eq!(r("test://other").map(DataPolicy::cost_microcents), Some(5));
        assert_eq!(r("file:///x"), None);
        assert_eq!(rules.policy_for(DataKind::Prompt, "any"), None);
    }

    #[test]
    fn lists_are_filtered_on_the_grants_resource_too() {
        let cap = |ns: &str, action: &str, res: &str| delegateos::Capability {
            namespace: ns.into(),
            action: action.into(),
            resource: delegateos::glob::ResourcePattern::parse(res).unwrap(),
        };
        let p = DataPolicy::Enforced {
            namespace: "docs".into(),
            action: "read".into(),
            cost_microcents: 0,
        };
        let caps = [cap("docs", "read", "test://static/**")];
        assert!(p.offered_to(Some(&caps), "test://static/a"));
        assert!(!p.offered_to(Some(&caps), "test://private/a"));
        assert!(!p.offered_to(Some(&[cap("docs", "write", "**")]), "test://static/a"));
        assert!(p.offered_to(None, "test://private/a"));
        assert!(DataPolicy::Open.offered_to(Some(&[]), "x:y"));
    }

    #[test]
    fn a_template_is_sampled_one_segment_per_expression() {
        assert_eq!(
            template_sample("test://template/{id}/data"),
            "test://template/x/data"
        );
        assert_eq!(template_sample("file:///{+path}{?q,r}"), "file:///xx");
    }
}
