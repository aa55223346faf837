//! What verifying Motebit artifacts costs per call: a Motebit caller's
//! bearer token and delegation chain (every call), an upstream's receipt
//! (every answer that carries one), and a verdict.
//!   cargo bench --bench motebit

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
        b.iter(|| {
            let r = Receipt::from_value(&single).unwrap();
            motebit::verdict::receipt(&r, None).to_json()
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
