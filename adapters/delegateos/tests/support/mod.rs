//! Keys, times and token builders shared by the adapter's integration tests.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]
#![allow(dead_code)]

use delegateos::canonical::canonicalize;
use delegateos::dct::{AttenuateParams, CreateParams, SignedJsonToken};
use delegateos::{base64url, signing};
use delegateos::{
    Capability, CapabilityRequest, ContractId, Dct, DelegationId, Keypair, PrincipalId, Timestamp,
};
use serde_json::json;

pub fn key(n: u8) -> Keypair {
    Keypair::from_seed([n; 32])
}

pub fn ts(s: &str) -> Timestamp {
    Timestamp::parse(s).unwrap()
}

pub fn del(n: u8) -> DelegationId {
    DelegationId::from_bytes([n; 6])
}

pub fn ct(n: u8) -> ContractId {
    ContractId::from_bytes([n; 6])
}

pub fn cap(s: &str) -> Capability {
    s.parse().unwrap()
}

pub fn request(ns: &str, action: &str, resource: &str) -> CapabilityRequest {
    CapabilityRequest {
        namespace: ns.into(),
        action: action.into(),
        resource: resource.into(),
    }
}

pub const NOW: &str = "2026-02-17T10:30:00.000Z";
pub const EXPIRY: &str = "2026-02-17T11:00:00.000Z";

/// The cast: root (tenant key 1) → alice (2) → bob (3) → carol (4) → dave (5).
pub struct Cast {
    pub root: Keypair,
    pub alice: Keypair,
    pub bob: Keypair,
    pub carol: Keypair,
    pub dave: Keypair,
}

impl Cast {
    pub fn new() -> Self {
        Self {
            root: key(1),
            alice: key(2),
            bob: key(3),
            carol: key(4),
            dave: key(5),
        }
    }

    pub fn roots(&self) -> Vec<PrincipalId> {
        vec![
            key(99).principal_id().clone(),
            self.root.principal_id().clone(),
        ]
    }

    /// Root → alice: docs read/write under /project, 10,000 microcents, depth 3.
    pub fn root_token(&self) -> Dct {
        Dct::create(
            &self.root,
            CreateParams {
                delegatee: self.alice.principal_id().clone(),
                capabilities: vec![
                    cap("docs:read:/project/**"),
                    cap("docs:write:/project/out/*"),
                ],
                contract_id: ct(1),
                delegation_id: del(1),
                parent_delegation_id: DelegationId::root_parent(),
                chain_depth: 0,
                max_chain_depth: 3,
                max_budget_microcents: 10_000,
                expires_at: ts(EXPIRY),
                issued_at: ts("2026-02-17T10:00:00.000Z"),
            },
        )
        .unwrap()
    }

    /// Three attenuations: alice → bob → carol → dave, each narrower.
    pub fn chain_of_three(&self) -> Dct {
        let t1 = self
            .root_token()
            .attenuate(
                &self.alice,
                AttenuateParams {
                    delegatee: self.bob.principal_id().clone(),
                    delegation_id: del(2),
                    contract_id: ct(2),
                    allowed_capabilities: Some(vec![cap("docs:read:/project/src/**")]),
                    max_budget_microcents: Some(5_000),
                    expires_at: None,
                    max_chain_depth: None,
                },
            )
            .unwrap();
        let t2 = t1
            .attenuate(
                &self.bob,
                AttenuateParams {
                    delegatee: self.carol.principal_id().clone(),
                    delegation_id: del(3),
                    contract_id: ct(3),
                    allowed_capabilities: None,
                    max_budget_microcents: Some(2_000),
                    expires_at: Some(ts("2026-02-17T10:45:00Z")),
                    max_chain_depth: Some(1),
                },
            )
            .unwrap();
        t2.attenuate(
            &self.carol,
            AttenuateParams {
                delegatee: self.dave.principal_id().clone(),
                delegation_id: del(4),
                contract_id: ct(4),
                allowed_capabilities: Some(vec![cap("docs:read:/project/src/*")]),
                max_budget_microcents: None,
                expires_at: None,
                max_chain_depth: Some(0),
            },
        )
        .unwrap()
    }
}

/// Serializes any token content the way §3.2 says, without checks: the way
/// an attacker (or a buggy peer) would.
pub fn forge(token: &SignedJsonToken) -> String {
    base64url::encode(&canonicalize(token).unwrap())
}

/// Re-signs every block of `token` with the matching key of `signers`
/// (authority first), following §3.3 and §3.4 literally, so tests can build
/// tokens whose signatures are valid but whose content is not.
pub fn resign(token: &mut SignedJsonToken, signers: &[&Keypair]) {
    let authority = serde_json::to_value(&token.authority).unwrap();
    token.signatures[0].signature =
        signing::sign(signers[0], &json!({ "authority": authority })).unwrap();
    for i in 0..token.attenuations.len() {
        let atts = serde_json::to_value(&token.attenuations[..=i]).unwrap();
        token.signatures[i + 1].signature = signing::sign(
            signers[i + 1],
            &json!({ "authority": authority, "attenuations": atts }),
        )
        .unwrap();
    }
}
