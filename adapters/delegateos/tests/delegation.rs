//! Delegation records (§8): every chain invariant broken one at a time, and
//! the status machine.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use delegateos::dct::AttenuateParams;
use delegateos::delegation::{ChainError, Delegation, DelegationStatus};
use delegateos::{Dct, DelegationId, Keypair};
use support::*;

fn record(
    id: DelegationId,
    parent: DelegationId,
    from: &Keypair,
    to: &Keypair,
    token: &Dct,
    depth: u32,
) -> Delegation {
    Delegation {
        id,
        parent_id: parent,
        from: from.principal_id().clone(),
        to: to.principal_id().clone(),
        contract_id: token.contract_id().clone(),
        dct: token.to_serialized(),
        depth,
        status: DelegationStatus::Active,
        created_at: ts(NOW),
        completed_at: None,
        attestation_id: None,
    }
}

fn step(token: &Dct, from: &Keypair, to: &Keypair, id: u8) -> Dct {
    token
        .attenuate(
            from,
            AttenuateParams {
                delegatee: to.principal_id().clone(),
                delegation_id: del(id),
                contract_id: ct(1),
                allowed_capabilities: None,
                max_budget_microcents: None,
                expires_at: None,
                max_chain_depth: None,
            },
        )
        .unwrap()
}

struct Chain {
    cast: Cast,
    root: Delegation,
    child: Delegation,
    root_token: Dct,
    child_token: Dct,
}

fn chain() -> Chain {
    let cast = Cast::new();
    let root_token = cast.root_token();
    let child_token = step(&root_token, &cast.alice, &cast.bob, 2);
    let root = record(
        del(1),
        DelegationId::root_parent(),
        &cast.root,
        &cast.alice,
        &root_token,
        0,
    );
    let child = record(del(2), del(1), &cast.alice, &cast.bob, &child_token, 1);
    Chain {
        cast,
        root,
        child,
        root_token,
        child_token,
    }
}

#[test]
fn a_valid_chain() {
    let c = chain();
    c.root.check_root().unwrap();
    c.child.check_child_of(&c.root).unwrap();
    let grandchild_token = step(&c.child_token, &c.cast.bob, &c.cast.carol, 3);
    let grandchild = record(
        del(3),
        del(2),
        &c.cast.bob,
        &c.cast.carol,
        &grandchild_token,
        2,
    );
    grandchild.check_child_of(&c.child).unwrap();
    // Round trip.
    let json = serde_json::to_string(&grandchild).unwrap();
    assert_eq!(
        serde_json::from_str::<Delegation>(&json).unwrap(),
        grandchild
    );
}

#[test]
fn rule_1_root_delegation() {
    let c = chain();
    let mut r = c.root.clone();
    r.parent_id = del(9);
    assert!(matches!(r.check_root(), Err(ChainError::NotARoot { .. })));
    let mut r = c.root.clone();
    r.depth = 1;
    assert!(matches!(r.check_root(), Err(ChainError::NotARoot { .. })));
    // A root delegation carrying an attenuated token.
    let r = record(
        del(2),
        DelegationId::root_parent(),
        &c.cast.alice,
        &c.cast.bob,
        &c.child_token,
        0,
    );
    assert!(matches!(r.check_root(), Err(ChainError::TokenMismatch(_))));
}

#[test]
fn rule_2_child_from_is_parent_to() {
    let c = chain();
    let mut child = c.child.clone();
    child.from = c.cast.carol.principal_id().clone();
    assert!(matches!(
        child.check_child_of(&c.root),
        Err(ChainError::FromIsNotParentTo { .. })
    ));
}

#[test]
fn rule_3_depth_is_parent_plus_one() {
    let c = chain();
    for depth in [0, 2, u32::MAX] {
        let mut child = c.child.clone();
        child.depth = depth;
        assert!(
            matches!(child.check_child_of(&c.root), Err(ChainError::Depth { .. })),
            "{depth}"
        );
    }
}

#[test]
fn rule_4_depth_within_the_root_tokens_max() {
    // A root token allowing depth 1, and records claiming depth 2.
    let cast = Cast::new();
    let mut t = cast.root_token().token().clone();
    t.authority.max_chain_depth = 1;
    resign(&mut t, &[&cast.root]);
    let root_token = Dct::decode(&forge(&t)).unwrap();
    let t1 = step(&root_token, &cast.alice, &cast.bob, 2);
    // A second attenuation the engine would refuse, forced so only rule 4 breaks.
    let mut t2 = t1.token().clone();
    let mut extra = t2.attenuations[0].clone();
    extra.attenuator = cast.bob.principal_id().clone();
    extra.delegatee = cast.carol.principal_id().clone();
    extra.delegation_id = del(3);
    t2.attenuations.push(extra);
    t2.signatures.push(delegateos::dct::TokenSignature {
        signer: cast.bob.principal_id().clone(),
        signature: String::new(),
        covers: delegateos::dct::Covers::Attenuation(1),
    });
    resign(&mut t2, &[&cast.root, &cast.alice, &cast.bob]);
    let t2 = Dct::decode(&forge(&t2)).unwrap();
    let child = record(del(2), del(1), &cast.alice, &cast.bob, &t1, 1);
    let grandchild = record(del(3), del(2), &cast.bob, &cast.carol, &t2, 2);
    assert!(matches!(
        grandchild.check_child_of(&child),
        Err(ChainError::TooDeep { depth: 2, max: 1 })
    ));
}

#[test]
fn rule_5_child_token_attenuated_from_parent_token() {
    let c = chain();
    // A token from another root: different authority.
    let other_root = Keypair::from_seed([77; 32]);
    let mut t = c.root_token.token().clone();
    t.authority.issuer = other_root.principal_id().clone();
    t.signatures[0].signer = other_root.principal_id().clone();
    resign(&mut t, &[&other_root]);
    let foreign = step(
        &Dct::decode(&forge(&t)).unwrap(),
        &c.cast.alice,
        &c.cast.bob,
        2,
    );
    let child = record(del(2), del(1), &c.cast.alice, &c.cast.bob, &foreign, 1);
    assert!(matches!(
        child.check_child_of(&c.root),
        Err(ChainError::NotAttenuated(_))
    ));
    // The same token as the parent: no extension.
    let child = record(
        del(1),
        del(1),
        &c.cast.root,
        &c.cast.alice,
        &c.root_token,
        1,
    );
    let mut child = child;
    child.from = c.cast.alice.principal_id().clone();
    assert!(matches!(
        child.check_child_of(&c.root),
        Err(ChainError::NotAttenuated(_))
    ));
    // A sibling branch: attenuations that do not extend the parent's.
    let gc_token = step(&c.child_token, &c.cast.bob, &c.cast.carol, 3);
    let sibling_token = step(&c.root_token, &c.cast.alice, &c.cast.dave, 4);
    let sibling = record(
        del(4),
        del(1),
        &c.cast.alice,
        &c.cast.dave,
        &sibling_token,
        1,
    );
    let gc = record(del(3), del(4), &c.cast.dave, &c.cast.carol, &gc_token, 2);
    let mut gc = gc;
    gc.from = c.cast.dave.principal_id().clone();
    assert!(matches!(
        gc.check_child_of(&sibling),
        Err(ChainError::NotAttenuated(_))
    ));
}

#[test]
fn the_record_must_match_its_token() {
    let c = chain();
    let mut child = c.child.clone();
    child.id = del(8);
    assert!(matches!(
        child.check_child_of(&c.root),
        Err(ChainError::TokenMismatch(_))
    ));
    let mut child = c.child.clone();
    child.contract_id = ct(8);
    assert!(matches!(
        child.check_child_of(&c.root),
        Err(ChainError::TokenMismatch(_))
    ));
    let mut child = c.child.clone();
    child.to = c.cast.carol.principal_id().clone();
    assert!(matches!(
        child.check_child_of(&c.root),
        Err(ChainError::TokenMismatch(_))
    ));
    let mut child = c.child.clone();
    child.parent_id = del(7);
    assert!(matches!(
        child.check_child_of(&c.root),
        Err(ChainError::WrongParent { .. })
    ));
    let mut child = c.child.clone();
    child.dct.token = "garbage".into();
    assert!(matches!(
        child.check_child_of(&c.root),
        Err(ChainError::MalformedToken(_))
    ));
    // Only an active parent may have children.
    let mut parent = c.root.clone();
    parent.status = DelegationStatus::Completed;
    assert!(matches!(
        c.child.check_child_of(&parent),
        Err(ChainError::ParentNotActive(_))
    ));
}

#[test]
fn status_moves_only_from_active() {
    use DelegationStatus::*;
    for to in [Completed, Failed, Revoked] {
        assert_eq!(Active.transition(to), Ok(to));
    }
    for from in [Active, Completed, Failed, Revoked] {
        for to in [Active, Completed, Failed, Revoked] {
            let allowed = from == Active && to != Active;
            assert_eq!(from.transition(to).is_ok(), allowed, "{from:?} → {to:?}");
        }
    }
    assert_eq!(serde_json::to_value(Completed).unwrap(), "completed");
}
