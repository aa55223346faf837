//! Delegation scopes: a comma-separated set of capability names (each a
//! tool, delegation-v1 §7.0), or `*` for every capability.

use std::collections::BTreeSet;

/// A parsed scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// `*`: every capability.
    All,
    /// These capabilities, trimmed, empty items dropped.
    Only(BTreeSet<String>),
}

impl Scope {
    /// Parses as the reference does: items split at `,` and trimmed; any
    /// item `*` makes the scope a wildcard.
    pub fn parse(scope: &str) -> Self {
        let items: BTreeSet<String> = scope
            .split(',')
            .map(crate::js::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        if items.contains("*") {
            Scope::All
        } else {
            Scope::Only(items)
        }
    }

    /// Whether it names no capability at all (such a scope grants nothing).
    pub fn is_empty(&self) -> bool {
        matches!(self, Scope::Only(s) if s.is_empty())
    }

    /// Whether `capability` is in it.
    pub fn allows(&self, capability: &str) -> bool {
        match self {
            Scope::All => true,
            Scope::Only(s) => s.contains(capability),
        }
    }

    /// Whether `self` is within `parent`: a wildcard parent allows
    /// anything, a wildcard child only under a wildcard parent.
    pub fn narrows(&self, parent: &Scope) -> bool {
        match (parent, self) {
            (Scope::All, _) => true,
            (Scope::Only(_), Scope::All) => false,
            (Scope::Only(p), Scope::Only(c)) => c.is_subset(p),
        }
    }

    /// The capability names, or `None` for the wildcard.
    pub fn names(&self) -> Option<&BTreeSet<String>> {
        match self {
            Scope::All => None,
            Scope::Only(s) => Some(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_like_the_reference() {
        assert_eq!(Scope::parse("*"), Scope::All);
        assert_eq!(Scope::parse(" web.search , *"), Scope::All);
        let s = Scope::parse(" web.search,, brief.compose ");
        assert!(s.allows("web.search") && s.allows("brief.compose") && !s.allows("x"));
        assert!(Scope::parse(" , ").is_empty());
        assert!(Scope::parse("a").narrows(&Scope::parse("a,b")));
        assert!(!Scope::parse("a,c").narrows(&Scope::parse("a,b")));
        assert!(!Scope::parse("*").narrows(&Scope::parse("a")));
        assert!(Scope::parse("*").narrows(&Scope::parse("*")));
    }

    fn scope() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("*".to_owned()),
            proptest::collection::vec("[a-c]", 0..4).prop_map(|v| v.join(",")),
        ]
    }

    proptest! {
        /// Narrowing is a partial order (reflexive, transitive) and agrees
        /// with what each scope allows.
        #[test]
        fn narrowing_is_an_order(a in scope(), b in scope(), c in scope()) {
            let (a, b, c) = (Scope::parse(&a), Scope::parse(&b), Scope::parse(&c));
            prop_assert!(a.narrows(&a));
            if a.narrows(&b) && b.narrows(&c) {
                prop_assert!(a.narrows(&c));
            }
            if a.narrows(&b) {
                for cap in ["a", "b", "c", "d"] {
                    prop_assert!(!a.allows(cap) || b.allows(cap));
                }
            }
        }
    }
}
