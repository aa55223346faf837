//! Whether a delegation chain is trusted now, apart from any call: its
//! root is a configured delegator (id and key), and none of its tokens or
//! grants is revoked. Every call checks it ([`Motebit::check`]), and so
//! does an MCP session opened with the chain, at `initialize` and once
//! after each reload ([`dgw_core::protocol::Protocol::standing`]): a session
//! must not outlive the delegator a reload removed (issue 30).

use motebit::token::DelegationToken;
use motebit::{Failure, Reason};

use super::{token_name, Delegator, Motebit, MotebitConfig, REVOCATIONS};

/// The configured delegator the chain is rooted at.
pub(super) fn root_delegator<'c>(
    config: &'c MotebitConfig,
    chain: &[DelegationToken],
) -> Result<&'c Delegator, Failure> {
    let root = chain
        .first()
        .ok_or_else(|| Failure::malformed("the delegation chain is empty"))?;
    config
        .delegators
        .iter()
        .find(|d| {
            d.motebit_id == root.delegator_id && root.delegator_key().is_ok_and(|k| k == d.key)
        })
        .ok_or_else(|| {
            Failure::new(
                Reason::Untrusted,
                format!(
                    "{:?} with this key is not a configured delegator ([[motebit.delegators]])",
                    root.delegator_id
                ),
            )
        })
}

impl Motebit {
    /// Refuses a chain with a revoked token or grant.
    pub(super) fn unrevoked(&self, chain: &[DelegationToken]) -> Result<(), Failure> {
        for t in chain {
            let grant_revoked = t.grant_id.as_ref().is_some_and(|g| {
                self.revocations
                    .contains_name(REVOCATIONS, &format!("{}/{g}", t.delegator_public_key))
            });
            if grant_revoked || self.revocations.contains_name(REVOCATIONS, &token_name(t)) {
                return Err(Failure::new(
                    Reason::Revoked,
                    format!("the delegation by {:?} is revoked", t.delegator_id),
                ));
            }
        }
        Ok(())
    }

    /// Whether `chain` is trusted now, whatever call it comes with.
    pub(super) fn chain_stands(&self, chain: &[DelegationToken]) -> Result<(), Failure> {
        root_delegator(&self.config.load(), chain)?;
        self.unrevoked(chain)
    }
}
