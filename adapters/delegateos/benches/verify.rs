//! Cold verification of a DCT chain by its number of signed links (1, 3,
//! 8): decode, every signature (`verify_strict`), the attenuation chain;
//! next to one bare Ed25519 `verify_strict` and one canonical-JSON digest
//! of the authority in the same run, so the cost per link can be read as a
//! ratio on a noisy machine; and, for the same numbers of signatures,
//! `ed25519_dalek::verify_batch` against as many `verify_strict` calls, and
//! what turning a signer's ID into a key costs (point decompression).
//! `cargo bench -p delegateos --bench verify`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use delegateos::dct::{AttenuateParams, CreateParams};
use delegateos::{Dct, Keypair, Timestamp};
use std::hint::black_box;

fn key(n: u8) -> Keypair {
    Keypair::from_seed([n; 32])
}

fn id(prefix: &str, n: u8) -> String {
    format!("{prefix}_0000000000{n:02x}")
}

/// A token of `links` signatures: the root's, then `links - 1` attenuations.
fn chain(links: u8) -> (String, delegateos::PrincipalId) {
    let root = key(1);
    let expires = time::OffsetDateTime::now_utc() + time::Duration::hours(1);
    let mut token = Dct::create(
        &root,
        CreateParams {
            delegatee: key(2).principal_id().clone(),
            capabilities: vec!["docs:read:/**".parse().expect("a capability")],
            contract_id: delegateos::ContractId::parse(&id("ct", 1)).expect("an ID"),
            delegation_id: delegateos::DelegationId::parse(&id("del", 1)).expect("an ID"),
            parent_delegation_id: delegateos::DelegationId::root_parent(),
            chain_depth: 0,
            max_chain_depth: 10,
            max_budget_microcents: 1_000_000,
            expires_at: Timestamp::from_instant(expires),
            issued_at: Timestamp::from_instant(time::OffsetDateTime::now_utc()),
        },
    )
    .expect("a token");
    for i in 1..links {
        token = token
            .attenuate(
                &key(i + 1),
                AttenuateParams {
                    delegatee: key(i + 2).principal_id().clone(),
                    delegation_id: delegateos::DelegationId::parse(&id("del", i + 1))
                        .expect("an ID"),
                    contract_id: delegateos::ContractId::parse(&id("ct", 1)).expect("an ID"),
                    allowed_capabilities: None,
                    max_budget_microcents: Some(1_000_000 - u64::from(i)),
                    expires_at: None,
                    max_chain_depth: None,
                },
            )
            .expect("an attenuation");
    }
    (token.encode(), root.principal_id().clone())
}

fn cold_verify(c: &mut Criterion) {
    let mut group = c.benchmark_group("cold_verify");
    for links in [1u8, 3, 8] {
        let (token, root) = chain(links);
        let roots = [root];
        group.bench_with_input(BenchmarkId::new("decode only", links), &token, |b, t| {
            b.iter(|| Dct::decode(black_box(t)).expect("decodes"))
        });
        group.bench_with_input(BenchmarkId::new("chain", links), &token, |b, t| {
            b.iter(|| {
                Dct::decode(black_box(t))
                    .expect("decodes")
                    .verify_chain(&roots)
                    .expect("verifies")
            })
        });
    }
    // The parts of one link, for the ratio.
    let k = key(9);
    let digest = [7u8; 32];
    let signature = k.sign_digest(&digest);
    let public = k.public_key();
    group.bench_function("one verify_strict", |b| {
        b.iter(|| {
            public
                .verify_strict(black_box(&digest), &signature)
                .expect("verifies")
        })
    });
    let authority = serde_json::json!({"capabilities": ["docs:read:/**"], "delegationId": id("del", 1),
        "contractId": id("ct", 1), "maxBudgetMicrocents": 1_000_000, "issuer": k.principal_id()});
    group.bench_function("one canonical digest", |b| {
        b.iter(|| delegateos::signing::digest(black_box(&authority)).expect("digests"))
    });
    let principal = k.principal_id().clone();
    group.bench_function("one key from its ID", |b| {
        b.iter(|| black_box(&principal).verifying_key().expect("a key"))
    });
    group.finish();
}

/// `k` signatures checked one by one (`verify_strict`, what the chain does)
/// and in one batch (`verify_batch`), each over its own digest by its own key.
fn batch(c: &mut Criterion) {
    use ed25519_dalek::{Signer, SigningKey};
    let mut group = c.benchmark_group("batch");
    for k in [1u8, 3, 8] {
        let signers: Vec<SigningKey> = (0..k)
            .map(|i| SigningKey::from_bytes(&[i + 1; 32]))
            .collect();
        let digests: Vec<[u8; 32]> = (0..k).map(|i| [i; 32]).collect();
        let signatures: Vec<_> = signers
            .iter()
            .zip(&digests)
            .map(|(s, d)| s.sign(d))
            .collect();
        let keys: Vec<_> = signers.iter().map(SigningKey::verifying_key).collect();
        let messages: Vec<&[u8]> = digests.iter().map(|d| d.as_slice()).collect();
        group.bench_with_input(BenchmarkId::new("verify_strict each", k), &k, |b, _| {
            b.iter(|| {
                for ((key, m), s) in keys.iter().zip(&messages).zip(&signatures) {
                    key.verify_strict(black_box(m), s).expect("verifies");
                }
            })
        });
        group.bench_with_input(BenchmarkId::new("verify_batch", k), &k, |b, _| {
            b.iter(|| {
                ed25519_dalek::verify_batch(black_box(&messages), &signatures, &keys)
                    .expect("verifies")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, cold_verify, batch);
criterion_main!(benches);
