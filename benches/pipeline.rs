//! Benchmarks of the enforcement pipeline: token verification, and the whole
//! in-process authorize + settle path on the embedded backend.
//!
//! `cargo bench --bench pipeline`; figures go to docs/performance.md.

// A benchmark's setup and helpers: a failure should stop it loudly, and
// clippy's allow-unwrap-in-tests does not reach outside #[test].
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use delegate_gateway::budget::{LeasePolicy, OnExpiry};
use delegate_gateway::caller::Caller;
use delegate_gateway::gatekeeper::Gatekeeper;
use delegate_gateway::revocations::Revocations;
use delegate_gateway::state::{self, BudgetSettings};
use delegateos::dct::{self, AttenuateParams, CreateParams, VerificationContext};
use delegateos::revocation::NoRevocations;
use delegateos::{CapabilityRequest, ContractId, Dct, DelegationId, Keypair, Timestamp};

/// The same allocator as the `dgw` binary.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn keys() -> Vec<Keypair> {
    (1..=5).map(|n| Keypair::from_seed([n; 32])).collect()
}

fn tokens(k: &[Keypair]) -> (Dct, Dct) {
    let now = time::OffsetDateTime::now_utc();
    let root = Dct::create(
        &k[0],
        CreateParams {
            delegatee: k[1].principal_id().clone(),
            capabilities: vec![
                "docs:read:/project/**".parse().unwrap(),
                "web:search:*".parse().unwrap(),
            ],
            contract_id: ContractId::from_bytes([1; 6]),
            delegation_id: DelegationId::from_bytes([1; 6]),
            parent_delegation_id: DelegationId::root_parent(),
            chain_depth: 0,
            max_chain_depth: 4,
            max_budget_microcents: 1 << 50,
            expires_at: Timestamp::from_instant(now + time::Duration::hours(2)),
            issued_at: Timestamp::from_instant(now),
        },
    )
    .unwrap();
    let mut chain = root.clone();
    for i in 1..4 {
        chain = chain
            .attenuate(
                &k[i],
                AttenuateParams {
                    delegatee: k[i + 1].principal_id().clone(),
                    delegation_id: DelegationId::from_bytes([i as u8 + 1; 6]),
                    contract_id: ContractId::from_bytes([1; 6]),
                    allowed_capabilities: Some(vec!["docs:read:/project/**".parse().unwrap()]),
                    max_budget_microcents: Some((1 << 50) - i as u64),
                    expires_at: None,
                    max_chain_depth: None,
                },
            )
            .unwrap();
    }
    (root, chain)
}

fn request() -> CapabilityRequest {
    CapabilityRequest {
        namespace: "docs".into(),
        action: "read".into(),
        resource: "/project/src/main.rs".into(),
    }
}

fn verify(c: &mut Criterion) {
    let k = keys();
    let (root, chain) = tokens(&k);
    let roots = vec![k[0].principal_id().clone()];
    let now = Timestamp::from_instant(time::OffsetDateTime::now_utc());
    let req = request();
    let ctx = VerificationContext {
        trusted_roots: &roots,
        revocations: &NoRevocations,
        now: &now,
        spent_microcents: 0,
        request: &req,
    };
    let (root, chain) = (root.encode(), chain.encode());
    c.bench_function("verify/root token", |b| {
        b.iter(|| dct::verify(&root, &ctx).unwrap())
    });
    c.bench_function("verify/3-attenuation chain", |b| {
        b.iter(|| dct::verify(&chain, &ctx).unwrap())
    });
    let verified = dct::verify_token(&chain, &roots, &NoRevocations).unwrap();
    c.bench_function(
        "verify/cached chain: revocation+expiry+budget+capability",
        |b| b.iter(|| verified.authorize(&NoRevocations, &now, 0, &req).unwrap()),
    );
}

/// A gatekeeper over the embedded backend in `dir`, or over memory.
fn gatekeeper(
    rt: &tokio::runtime::Runtime,
    dir: Option<&std::path::Path>,
    root: &Keypair,
) -> Arc<Gatekeeper> {
    rt.block_on(async {
        let settings = BudgetSettings {
            reservation_ttl: Duration::from_secs(60),
            lease: LeasePolicy::OFF,
            max_open: usize::MAX,
        };
        let stores = match dir {
            Some(dir) => state::open(state::Backend::Embedded(dir), settings).unwrap(),
            None => state::open(state::Backend::Ephemeral, settings).unwrap(),
        };
        let revocations = Revocations::load(stores.revocations.clone()).await.unwrap();
        Arc::new(Gatekeeper::new(
            vec![("bench".into(), root.principal_id().clone())],
            stores.budgets,
            Arc::new(revocations),
            stores.delegations,
        ))
    })
}

fn authorize_settle(c: &mut Criterion) {
    let k = keys();
    let (_, chain) = tokens(&k);
    let token = Arc::new(chain.encode());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let once = |gate: Arc<Gatekeeper>, token: Arc<String>| async move {
        let a = gate
            .authorize(&token, &[request()], 1, OnExpiry::Release)
            .await
            .unwrap()
            .into_result()
            .unwrap();
        gate.settle(
            &Caller::gateway(),
            &a.reservation
                .expect("a costly call holds a reservation")
                .reservation_id,
            1,
        )
        .await
        .unwrap();
    };
    let memory = gatekeeper(&rt, None, &k[0]);
    c.benchmark_group("authorize+settle (memory, repeated token)")
        .bench_function("1 caller", |b| {
            b.iter(|| rt.block_on(once(memory.clone(), token.clone())))
        });
    let gate = gatekeeper(&rt, Some(dir.path()), &k[0]);
    let mut group = c.benchmark_group("authorize+settle (sled, durable, repeated token)");
    group.measurement_time(Duration::from_secs(8));
    group.bench_function("1 caller", |b| {
        b.iter(|| rt.block_on(once(gate.clone(), token.clone())))
    });
    for callers in [16u64, 64, 256] {
        group.bench_function(
            format!("{callers} concurrent callers (time per operation)"),
            |b| {
                b.iter_custom(|iters| {
                    rt.block_on(async {
                        let started = Instant::now();
                        let per = iters.div_ceil(callers);
                        let tasks: Vec<_> = (0..callers)
                            .map(|_| {
                                let (gate, token) = (gate.clone(), token.clone());
                                tokio::spawn(async move {
                                    for _ in 0..per {
                                        once(gate.clone(), token.clone()).await;
                                    }
                                })
                            })
                            .collect();
                        for t in tasks {
                            t.await.unwrap();
                        }
                        started.elapsed() / (per * callers) as u32 * iters as u32
                    })
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, verify, authorize_settle);
criterion_main!(benches);
