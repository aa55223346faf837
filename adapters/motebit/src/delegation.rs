//! A caller's delegation as presented: its chain of delegation tokens
//! (root first) and, when the root is a tick of a standing grant
//! (standing-delegation@1.0 §4), that grant, whose signed spend ceiling
//! (@1.2 §3.3) bounds what the caller may be charged.

use serde::Deserialize;
use serde_json::Value;

use crate::token::{chain_from_value, DelegationToken, StandingDelegation};
use crate::{Failure, Reason, MAX_TOKEN_CHAIN};

/// A caller's delegation: its chain of tokens (root first) and the
/// standing grants its ticks are minted under.
#[derive(Debug, Clone)]
pub struct Delegation {
    /// Root first.
    pub chain: Vec<DelegationToken>,
    /// The grants presented with it.
    pub grants: Vec<StandingDelegation>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WithGrants {
    chain: Value,
    #[serde(default)]
    grants: Vec<Value>,
}

/// A delegation as presented: a token, an array of tokens (root first),
/// or `{"chain": token-or-array, "grants": [standing grant, …]}`.
pub fn from_value(value: &Value) -> Result<Delegation, Failure> {
    if value.get("chain").is_none() {
        return Ok(Delegation {
            chain: chain_from_value(value)?,
            grants: Vec::new(),
        });
    }
    let w: WithGrants = serde_json::from_value(value.clone())
        .map_err(|e| Failure::malformed(format!("delegation: {e}")))?;
    if w.grants.len() > MAX_TOKEN_CHAIN {
        return Err(Failure::new(
            Reason::TooDeep,
            format!("a delegation may carry at most {MAX_TOKEN_CHAIN} grants"),
        ));
    }
    Ok(Delegation {
        chain: chain_from_value(&w.chain)?,
        grants: w
            .grants
            .iter()
            .map(StandingDelegation::from_value)
            .collect::<Result<_, _>>()?,
    })
}

/// The standing grant the chain's root is a tick of, found but not
/// verified (no signature is checked: cheap), or `None` for a plain
/// delegation. Only the root may be a tick (the gateway charges a tick at
/// its grant's node, which must not depend on a path above it), and only
/// its grant may be presented.
pub fn find_root_grant<'a>(
    chain: &[DelegationToken],
    grants: &'a [StandingDelegation],
) -> Result<Option<&'a StandingDelegation>, Failure> {
    if let Some((i, _)) = chain
        .iter()
        .enumerate()
        .skip(1)
        .find(|(_, t)| t.grant_id.is_some())
    {
        return Err(Failure::new(
            Reason::NotATick,
            format!("token {i} is a tick of a standing grant; only the chain's root may be one"),
        ));
    }
    let Some(root) = chain.first() else {
        return Err(Failure::malformed("the delegation chain is empty"));
    };
    let Some(grant_id) = root.grant_id.as_deref() else {
        if grants.is_empty() {
            return Ok(None);
        }
        return Err(Failure::malformed(
            "standing grants were presented with a delegation that is no tick of one",
        ));
    };
    let grant = match grants {
        [] => {
            return Err(Failure::new(
                Reason::GrantMissing,
                format!("the delegation is a tick of standing grant {grant_id:?}; present the grant with it ({{\"chain\": …, \"grants\": [grant]}})"),
            ))
        }
        [g] => g,
        _ => {
            return Err(Failure::malformed(
                "a delegation carries at most the one grant its root is a tick of",
            ))
        }
    };
    Ok(Some(grant))
}

/// [`find_root_grant`], then the grant verified at any instant (suite,
/// keys, signature, the ceiling's shape) and the root a tick that fits it.
/// What holds at any instant: the gateway remembers it by digest and
/// checks the grant's window at each call.
pub fn root_grant<'a>(
    chain: &[DelegationToken],
    grants: &'a [StandingDelegation],
) -> Result<Option<&'a StandingDelegation>, Failure> {
    let found = find_root_grant(chain, grants)?;
    if let (Some(grant), Some(root)) = (found, chain.first()) {
        grant.verify_signed()?;
        grant.check_tick(root)?;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoding::{key_hex, sign};
    use crate::SUITE;
    use delegateos::Keypair;
    use serde_json::json;

    fn key(n: u8) -> Keypair {
        Keypair::from_seed([n; 32])
    }

    fn token(from: u8, to: u8, grant: Option<&str>, scope: &str) -> Value {
        let mut t = json!({"delegator_id": format!("a{from}"), "delegator_public_key": key_hex(&key(from).public_key()),
            "delegate_id": format!("a{to}"), "delegate_public_key": key_hex(&key(to).public_key()),
            "scope": scope, "issued_at": 1000, "expires_at": 2000, "suite": SUITE});
        if let Some(g) = grant {
            t["grant_id"] = json!(g);
        }
        sign(&key(from), &mut t).unwrap();
        t
    }

    fn grant(from: u8, to: u8, id: &str) -> Value {
        let mut g = json!({"grant_id": id, "delegator_id": format!("a{from}"),
            "delegator_public_key": key_hex(&key(from).public_key()), "delegate_id": format!("a{to}"),
            "delegate_public_key": key_hex(&key(to).public_key()), "scope": "a,b", "subject": "s",
            "cadence_ms": 1, "issued_at": 0, "not_before": null, "expires_at": 5000,
            "max_token_ttl_ms": 1000, "suite": SUITE,
            "spend_ceiling": {"schema": "motebit.spend-ceiling.v1", "lifetime_limit_micro": 2}});
        sign(&key(from), &mut g).unwrap();
        g
    }

    fn root(v: Value) -> Result<Option<String>, Reason> {
        let d = from_value(&v).map_err(|f| f.reason)?;
        root_grant(&d.chain, &d.grants)
            .map(|g| g.map(|g| g.grant_id.clone()))
            .map_err(|f| f.reason)
    }

    #[test]
    fn a_tick_needs_its_one_grant_at_the_root() {
        let g = grant(1, 2, "g");
        assert_eq!(root(json!([token(1, 2, None, "a")])), Ok(None));
        assert_eq!(
            root(json!({"chain": [token(1, 2, Some("g"), "a")], "grants": [g]})),
            Ok(Some("g".into()))
        );
        assert_eq!(
            root(json!([token(1, 2, Some("g"), "a")])),
            Err(Reason::GrantMissing)
        );
        assert_eq!(
            root(json!({"chain": token(1, 2, None, "a"), "grants": [g]})),
            Err(Reason::Malformed)
        );
        assert_eq!(
            root(json!({"chain": [token(1, 2, Some("g"), "a")], "grants": [g, grant(1, 2, "h")]})),
            Err(Reason::Malformed)
        );
        assert_eq!(
            root(json!({"chain": [token(1, 2, Some("h"), "a")], "grants": [g]})),
            Err(Reason::NotATick)
        );
        assert_eq!(
            root(json!({"chain": [token(1, 2, Some("g"), "a,c")], "grants": [g]})),
            Err(Reason::ScopeWidened)
        );
        assert_eq!(
            root(json!({"chain": [token(1, 3, Some("g"), "a")], "grants": [g]})),
            Err(Reason::NotATick)
        );
        assert_eq!(
            root(
                json!({"chain": [token(1, 2, None, "a"), token(2, 3, Some("g"), "a")], "grants": []})
            ),
            Err(Reason::NotATick)
        );
        let mut inflated = g.clone();
        inflated["spend_ceiling"]["lifetime_limit_micro"] = json!(9);
        assert_eq!(
            root(json!({"chain": [token(1, 2, Some("g"), "a")], "grants": [inflated]})),
            Err(Reason::BadSignature)
        );
        assert_eq!(
            root(json!({"chain": [], "grants": [], "extra": 1})),
            Err(Reason::Malformed)
        );
    }
}
