//! Delegation tokens (delegation-token-v1.json), the standing grants they
//! may be ticks of, and signed grant revocations: parsed into typed form
//! (the JSON kept, since signatures cover it), verified alone and as chains.

use ed25519_dalek::VerifyingKey;
use serde::Deserialize;
use serde_json::Value;

use crate::ceiling::SpendCeiling;
use crate::encoding;
use crate::scope::Scope;
use crate::{Failure, Reason, MAX_ARTIFACT_BYTES, MAX_TOKEN_CHAIN, SUITE};

/// A signed delegation token.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelegationToken {
    /// Who delegates.
    pub delegator_id: String,
    /// Their key, hex; it verifies `signature`.
    pub delegator_public_key: String,
    /// Who receives the authority.
    pub delegate_id: String,
    /// Their key, hex: only this key may exercise the token.
    pub delegate_public_key: String,
    /// What may be done.
    pub scope: String,
    /// Epoch milliseconds.
    pub issued_at: f64,
    /// Epoch milliseconds; invalid after it.
    pub expires_at: f64,
    /// Epoch milliseconds; invalid before it.
    #[serde(default)]
    pub not_before: Option<f64>,
    /// The standing grant it is a tick of.
    #[serde(default)]
    pub grant_id: Option<String>,
    /// As written (absent: refused `wrong_suite`).
    #[serde(default)]
    pub suite: Option<String>,
    /// Base64url.
    pub signature: String,
    /// The token as received.
    #[serde(skip)]
    pub raw: Value,
}

/// A standing grant (standing-delegation@1.0): the ceiling per-tick tokens
/// are minted under. Members beyond these are kept (signed) and not read.
#[derive(Debug, Clone, Deserialize)]
pub struct StandingDelegation {
    /// Its handle; revocations name it.
    pub grant_id: String,
    /// Who grants.
    pub delegator_id: String,
    /// Their key, hex.
    pub delegator_public_key: String,
    /// Who receives.
    pub delegate_id: String,
    /// Their key, hex.
    pub delegate_public_key: String,
    /// The scope ceiling.
    pub scope: String,
    /// Epoch milliseconds.
    pub expires_at: f64,
    /// Epoch milliseconds (`null` or absent: none).
    #[serde(default)]
    pub not_before: Option<f64>,
    /// Longest lifetime of a tick, in milliseconds.
    pub max_token_ttl_ms: f64,
    /// The delegator's signed spend ceiling (@1.2; absent: no money).
    #[serde(default)]
    pub spend_ceiling: Option<SpendCeiling>,
    /// As written (absent: refused `wrong_suite`).
    #[serde(default)]
    pub suite: Option<String>,
    /// Base64url.
    pub signature: String,
    /// The grant as received.
    #[serde(skip)]
    pub raw: Value,
}

/// A signed revocation of a standing grant.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelegationRevocation {
    /// The grant revoked.
    pub grant_id: String,
    /// Who revokes.
    pub delegator_id: String,
    /// Their key, hex.
    pub delegator_public_key: String,
    /// Epoch milliseconds.
    pub revoked_at: f64,
    /// As written (absent: refused `wrong_suite`).
    #[serde(default)]
    pub suite: Option<String>,
    /// Base64url.
    pub signature: String,
    /// As received.
    #[serde(skip)]
    pub raw: Value,
}

/// Parses untrusted JSON bytes (size-limited, duplicate keys refused).
pub fn parse_value(json: &[u8]) -> Result<Value, Failure> {
    delegateos::canonical::parse_strict(json, MAX_ARTIFACT_BYTES)
        .map_err(|e| Failure::malformed(e.to_string()))
}

macro_rules! from_value {
    ($t:ty, $what:literal) => {
        impl $t {
            /// The artifact `value` is.
            pub fn from_value(value: &Value) -> Result<Self, Failure> {
                let mut parsed: Self = serde_json::from_value(value.clone())
                    .map_err(|e| Failure::malformed(format!("{}: {e}", $what)))?;
                parsed.raw = value.clone();
                Ok(parsed)
            }
        }
    };
}
from_value!(DelegationToken, "delegation token");
from_value!(StandingDelegation, "standing delegation");
from_value!(DelegationRevocation, "delegation revocation");

/// Whether `raw`'s signature verifies under the suite with the key written
/// in `key_hex`, read as the reference reads keys (the verdict's
/// integrity). The gateway's checks use [`encoding::parse_key`] first.
fn signed_by(suite: &Option<String>, raw: &Value, key_hex: &str, signature: &str) -> bool {
    suite.as_deref() == Some(SUITE)
        && encoding::lenient_key(key_hex).is_some_and(|k| {
            encoding::signing_bytes(raw).is_ok_and(|m| encoding::verifies(&k, &m, signature))
        })
}

impl DelegationToken {
    /// The signature alone, clockless (the reference's `verifyDelegation`
    /// with `checkExpiry: false`).
    pub fn signature_verifies(&self) -> bool {
        signed_by(
            &self.suite,
            &self.raw,
            &self.delegator_public_key,
            &self.signature,
        )
    }

    /// Its window at `now` (epoch ms): expired after `expires_at`, not yet
    /// valid before `not_before`.
    pub fn window(&self, now: f64) -> Result<(), Failure> {
        if self.expires_at < now {
            return Err(Failure::new(
                Reason::Expired,
                "the delegation token has expired",
            ));
        }
        if self.not_before.is_some_and(|nb| now < nb) {
            return Err(Failure::new(
                Reason::NotYetValid,
                "the delegation token is not valid yet",
            ));
        }
        Ok(())
    }

    /// The delegate's key, as the gateway accepts one.
    pub fn delegate_key(&self) -> Result<VerifyingKey, Failure> {
        encoding::parse_key(&self.delegate_public_key)
    }

    /// The delegator's key, as the gateway accepts one.
    pub fn delegator_key(&self) -> Result<VerifyingKey, Failure> {
        encoding::parse_key(&self.delegator_public_key)
    }

    /// The token alone, as the gateway accepts one at `now`: suite,
    /// lowercase keys, signature, a scope naming something, its window.
    pub fn verify(&self, now: f64) -> Result<(), Failure> {
        self.verify_signed()?;
        self.window(now)
    }

    /// [`DelegationToken::verify`] without the window: what holds at any
    /// instant (and so may be remembered).
    pub fn verify_signed(&self) -> Result<(), Failure> {
        if self.suite.as_deref() != Some(SUITE) {
            return Err(Failure::new(
                Reason::WrongSuite,
                crate::receipt::suite_detail(&self.suite),
            ));
        }
        self.delegator_key()?;
        self.delegate_key()?;
        if !self.signature_verifies() {
            return Err(Failure::new(
                Reason::BadSignature,
                "the delegation token's signature does not verify",
            ));
        }
        if Scope::parse(&self.scope).is_empty() {
            return Err(Failure::malformed(
                "the delegation token's scope names nothing",
            ));
        }
        if self.expires_at < self.issued_at {
            return Err(Failure::malformed("expires_at is before issued_at"));
        }
        Ok(())
    }
}

impl StandingDelegation {
    /// The grant as the gateway accepts one, at any instant (the
    /// reference's `verifyStandingDelegation` items 1 and 4): its suite,
    /// lowercase keys, signature, and a ceiling of the schema's shape.
    pub fn verify_signed(&self) -> Result<(), Failure> {
        if self.suite.as_deref() != Some(SUITE) {
            return Err(Failure::new(
                Reason::WrongSuite,
                crate::receipt::suite_detail(&self.suite),
            ));
        }
        encoding::parse_key(&self.delegator_public_key)?;
        encoding::parse_key(&self.delegate_public_key)?;
        if !signed_by(
            &self.suite,
            &self.raw,
            &self.delegator_public_key,
            &self.signature,
        ) {
            return Err(Failure::new(
                Reason::BadSignature,
                "the standing grant's signature does not verify",
            ));
        }
        match &self.spend_ceiling {
            Some(c) => c.check(),
            None => Ok(()),
        }
    }

    /// Its window at `now` (items 2 and 3): active, not expired.
    pub fn window(&self, now: f64) -> Result<(), Failure> {
        if self.not_before.is_some_and(|nb| now < nb) {
            return Err(Failure::new(
                Reason::NotYetValid,
                format!("standing grant {:?} is not active yet", self.grant_id),
            ));
        }
        if self.expires_at < now {
            return Err(Failure::new(
                Reason::Expired,
                format!("standing grant {:?} has expired", self.grant_id),
            ));
        }
        Ok(())
    }

    /// `token` as a tick of this grant (the reference's
    /// `verifyTokenAgainstGrant` items 2, 4, 5, 6), or why not.
    pub fn check_tick(&self, token: &DelegationToken) -> Result<(), Failure> {
        let not_a_tick = |why: &str| {
            Failure::new(
                Reason::NotATick,
                format!(
                    "the token is not a tick of standing grant {:?}: {why}",
                    self.grant_id
                ),
            )
        };
        if token.grant_id.as_deref() != Some(self.grant_id.as_str()) {
            return Err(not_a_tick("it names another grant"));
        }
        if token.delegator_id != self.delegator_id
            || token.delegator_public_key != self.delegator_public_key
            || token.delegate_id != self.delegate_id
            || token.delegate_public_key != self.delegate_public_key
        {
            return Err(not_a_tick("its parties are not the grant's"));
        }
        if !Scope::parse(&token.scope).narrows(&Scope::parse(&self.scope)) {
            return Err(Failure::new(
                Reason::ScopeWidened,
                format!(
                    "the tick's scope {:?} is wider than its grant's {:?}",
                    token.scope, self.scope
                ),
            ));
        }
        if token.expires_at - token.issued_at > self.max_token_ttl_ms {
            return Err(not_a_tick("it lives longer than max_token_ttl_ms"));
        }
        Ok(())
    }
}

impl DelegationRevocation {
    /// Whether it authoritatively revokes `grant`: it names the grant, is
    /// by the grant's delegator key, and its signature verifies.
    pub fn revokes(&self, grant_id: &str, delegator_public_key: &str) -> bool {
        self.grant_id == grant_id
            && self.delegator_public_key == delegator_public_key
            && signed_by(
                &self.suite,
                &self.raw,
                &self.delegator_public_key,
                &self.signature,
            )
    }
}

/// A token or a chain of them, as presented: a JSON object or an array.
pub fn chain_from_value(value: &Value) -> Result<Vec<DelegationToken>, Failure> {
    let items: Vec<&Value> = match value {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    if items.is_empty() {
        return Err(Failure::malformed("the delegation chain is empty"));
    }
    if items.len() > MAX_TOKEN_CHAIN {
        return Err(Failure::new(
            Reason::TooDeep,
            format!("a delegation chain may have at most {MAX_TOKEN_CHAIN} tokens"),
        ));
    }
    items.into_iter().map(DelegationToken::from_value).collect()
}

/// Verifies a chain root first at `now`: every token as
/// [`DelegationToken::verify`] accepts it (windows included: the chain is
/// used now, not read as history), each delegate the next delegator (id
/// and key), and each scope within the previous. The error names the index.
pub fn verify_chain(chain: &[DelegationToken], now: f64) -> Result<(), (usize, Failure)> {
    verify_chain_signed(chain)?;
    chain_windows(chain, now)
}

/// Every token's window at `now`, root first.
pub fn chain_windows(chain: &[DelegationToken], now: f64) -> Result<(), (usize, Failure)> {
    for (i, token) in chain.iter().enumerate() {
        token.window(now).map_err(|f| (i, f))?;
    }
    Ok(())
}

/// [`verify_chain`] without the windows: signatures, keys, linkage and
/// narrowing, which hold at any instant (and so may be remembered).
pub fn verify_chain_signed(chain: &[DelegationToken]) -> Result<(), (usize, Failure)> {
    if chain.is_empty() {
        return Err((0, Failure::malformed("the delegation chain is empty")));
    }
    for (i, token) in chain.iter().enumerate() {
        token.verify_signed().map_err(|f| (i, f))?;
        if i == 0 {
            continue;
        }
        let prev = &chain[i - 1];
        if prev.delegate_id != token.delegator_id
            || prev.delegate_public_key != token.delegator_public_key
        {
            return Err((
                i,
                Failure::new(
                    Reason::BrokenLinkage,
                    format!(
                        "token {i} is by {:?}, but token {} delegated to {:?}",
                        token.delegator_id,
                        i - 1,
                        prev.delegate_id
                    ),
                ),
            ));
        }
        if !Scope::parse(&token.scope).narrows(&Scope::parse(&prev.scope)) {
            return Err((
                i,
                Failure::new(
                    Reason::ScopeWidened,
                    format!(
                        "token {i} widens scope {:?} to {:?}",
                        prev.scope, token.scope
                    ),
                ),
            ));
        }
    }
    Ok(())
}
