//! What verifying Motebit artifacts costs per call: a Motebit caller's
//! bearer token and delegation chain (every call), an upstream's receipt
//! (every answer that carries one), a verdict, and a Motebit caller's whole
//! authorize + settle through the gateway's pipeline in process.
//!   cargo bench --bench motebit

// A benchmark's setup and helpers: a failure should stop it loudly, and
// clippy's allow-unwrap-in-tests does not reach outside #[test].
#![allow(clippy::unwrap_used)]

use criterion::{criterion_group, criterion_main, Criterion};
use delegateos::Keypair;
use motebit::receipt::{self, KnownKeys, Receipt};
use motebit::token;
use serde_json::{json, Value};

const NOW: u64 = 1_700_000_000_000;

fn key(n: u8) -> Keypair {
    Keypair::from_seed([n; 32])
}

fn hex(k: &Keypair) -> String {
    motebit::encoding::key_hex(&k.public_key())
}

fn receipt(k: &Keypair, task: &str, children: Vec<Value>) -> Value {
    let result = format!("result of {task}");
    let mut r = json!({
        "task_id": task, "motebit_id": motebit::identity::sovereign_id(&k.public_key()),
        "device_id": "d", "submitted_at": NOW, "completed_at": NOW + 10, "status": "completed",
        "result": result, "tools_used": ["web_search"], "memories_formed": 0,
        "prompt_hash": motebit::encoding::sha256_hex(b"p"),
        "result_hash": motebit::encoding::sha256_hex(result.as_bytes()),
        "public_key": hex(k), "suite": motebit::SUITE,
    });
    if !children.is_empty() {
        r["delegation_receipts"] = json!(children);
    }
    motebit::encoding::sign(k, &mut r).unwrap();
    r
}

fn delegation(from: &Keypair, to: &Keypair, scope: &str) -> Value {
    let mut t = json!({
        "delegator_id": "a", "delegator_public_key": hex(from), "delegate_id": "b",
        "delegate_public_key": hex(to), "scope": scope, "issued_at": NOW,
        "expires_at": NOW + 3_600_000, "suite": motebit::SUITE,
    });
    motebit::encoding::sign(from, &mut t).unwrap();
    t
}

fn bench(c: &mut Criterion) {
    let single = receipt(&key(1), "t", vec![]);
    let tree = receipt(
        &key(1),
        "root",
        vec![receipt(&key(2), "c1", vec![receipt(&key(3), "c2", vec![])])],
    );
    c.bench_function("motebit/receipt: parse and verify", |b| {
        b.iter(|| {
            let r = Receipt::from_value(&single).unwrap();
            assert!(receipt::verify_chain(&r, &KnownKeys::new()).verified());
        })
    });
    c.bench_function("motebit/receipt tree of 3: parse and verify", |b| {
        b.iter(|| {
            let r = Receipt::from_value(&tree).unwrap();
            assert!(receipt::verify_chain(&r, &KnownKeys::new()).verified());
        })
    });
    let mut b_tok = delegation(&key(1), &key(2), "web_search");
    b_tok["delegate_id"] = json!("b");
    let chain = json!([b_tok]);
    let claims = json!({"mid": "b", "did": "d", "iat": NOW, "exp": NOW + 300_000, "jti": "j",
                        "aud": "task:submit", "suite": motebit::BEARER_SUITE});
    let bearer = motebit::bearer::mint(&claims, &key(2));
    c.bench_function("motebit/caller: bearer token + 1-token chain", |b| {
        b.iter(|| {
            let parsed = token::chain_from_value(&chain).unwrap();
            token::verify_chain(&parsed, NOW as f64).unwrap();
            let t = motebit::bearer::SignedToken::read(&bearer).unwrap();
            let k = parsed[0].delegate_key().unwrap();
            t.verify(&k, "task:submit", NOW as f64).unwrap();
        })
    });
    c.bench_function("motebit/verdict: receipt", |b| {
        b.iter(|| motebit::verdict::receipt(single.as_object().unwrap(), None).to_json())
    });
}

/// A Motebit caller's call through the one pipeline (memory backend): the
/// protocol's grant (chain, bearer token, trust, revocations, pins, jti)
/// then the match and the reservation, then the settle. The same session
/// and token each time, as the reference client sends them.
fn pipeline(c: &mut Criterion) {
    use std::sync::Arc;
    use std::time::Duration;

    use delegate_gateway::budget::{LeasePolicy, OnExpiry};
    use delegate_gateway::caller::Caller;
    use delegate_gateway::gatekeeper::Gatekeeper;
    use delegate_gateway::protocol::{Call, Registry};
    use delegate_gateway::revocations::Revocations;
    use delegate_gateway::state::{self, BudgetSettings};
    use delegateos::CapabilityRequest;
    use dgw_proto_motebit::{Delegator, Motebit, MotebitConfig};
    use dgw_protocol::Services;

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let now = (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as u64;
    let (d, caller) = (key(1), key(2));
    let (gate, registry) = rt.block_on(async {
        let settings = BudgetSettings {
            reservation_ttl: Duration::from_secs(60),
            lease: LeasePolicy::OFF,
            max_open: usize::MAX,
        };
        let stores = state::open(state::Backend::Ephemeral, settings).unwrap();
        let revocations = Arc::new(Revocations::load(stores.revocations.clone()).await.unwrap());
        let gate = Arc::new(Gatekeeper::new(
            vec![("bench".into(), key(9).principal_id().clone())],
            stores.budgets.clone(),
            revocations.clone(),
            stores.delegations.clone(),
        ));
        let config = MotebitConfig {
            audience: "task:submit".into(),
            delegators: vec![Delegator {
                motebit_id: "delegator".into(),
                key: d.public_key(),
                tenant: "bench".into(),
                budget_microcents: u64::MAX >> 12,
            }],
        };
        let motebit = Motebit::new(
            config,
            Services {
                gate: gate.clone(),
                revocations,
                replay: stores.replay.clone(),
                records: stores.records.clone(),
                delegations: stores.delegations.clone(),
                audit: stores.audit.clone(),
                key: Arc::new(key(42)),
                issuing: Arc::new(dgw_core::issuing::Issuing::new(
                    Arc::new(key(42)),
                    Default::default(),
                )),
            },
        )
        .await
        .unwrap();
        let mut registry = Registry::default();
        registry.register(Arc::new(motebit)).unwrap();
        (gate, registry)
    });
    let mut t = json!({
        "delegator_id": "delegator", "delegator_public_key": hex(&d), "delegate_id": "caller",
        "delegate_public_key": hex(&caller), "scope": "web_search", "issued_at": now,
        "expires_at": now + 3_600_000, "suite": motebit::SUITE,
    });
    motebit::encoding::sign(&d, &mut t).unwrap();
    let claims = json!({"mid": "caller", "did": "d", "iat": now, "exp": now + 300_000, "jti": "j",
                        "aud": "task:submit", "suite": motebit::BEARER_SUITE});
    let header = format!("Bearer motebit:{}", motebit::bearer::mint(&claims, &caller));
    let found = rt.block_on(async {
        let h = registry.from_header(&header).unwrap().unwrap();
        let mut request = serde_json::Map::new();
        request.insert(
            "params".into(),
            json!({"_meta": {"motebit/delegation": [t]}}),
        );
        let carried = registry
            .take_from_request(&mut request)
            .await
            .unwrap()
            .unwrap();
        registry.combine(&h, &carried).unwrap()
    });
    assert_eq!(found.protocol.id().name, "motebit");
    let requests = [CapabilityRequest {
        namespace: "web_search".into(),
        action: "query".into(),
        resource: "/".into(),
    }];
    let call = Call {
        tool: "web_search",
        action: "query",
        requests: &requests,
        cost_microcents: 1,
        session: "bench-session",
        in_session: true,
    };
    c.bench_function(
        "motebit/caller: authorize+settle through the pipeline (memory)",
        |b| {
            b.iter(|| {
                rt.block_on(async {
                    let (a, _) = gate
                        .authorize_with(&found, &call, OnExpiry::Release)
                        .await
                        .unwrap()
                        .into_result()
                        .unwrap();
                    let r = a.reservation.expect("a costly call holds a reservation");
                    gate.settle(&Caller::gateway(), &r.reservation_id, 1)
                        .await
                        .unwrap();
                })
            })
        },
    );
}

criterion_group!(benches, bench, pipeline);
criterion_main!(benches);
