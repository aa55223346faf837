//! What LDP costs: the adapter's work per message (parse, HMAC check,
//! signing, a result's attestation), and one TASK_SUBMIT → TASK_RESULT
//! round trip through the running gateway against the same round trip
//! straight to the delegate, in one run (the reference crate's client and
//! echo delegate on loopback; dgw on sled, the default, and in memory).
//!   cargo bench --bench ldp

// A benchmark's setup and helpers: a failure should stop it loudly, and
// clippy's allow-unwrap-in-tests does not reach outside #[test].
#![allow(clippy::unwrap_used)]

#[path = "../tests/support/mod.rs"]
mod support;

#[path = "../tests/ldp/delegate.rs"]
mod delegate;

use criterion::{criterion_group, criterion_main, Criterion};
use ldp::message::Envelope;
use ldp_protocol::types::messages::{LdpEnvelope, LdpMessageBody};
use ldp_protocol::types::payload::PayloadMode;
use serde_json::json;
use support::*;

const SECRET: &str = "a-shared-secret-of-32-bytes-0123";
const ECHO: &str = "ldp:delegate:echo";
const ROUTER: &str = "ldp:delegate:router";

fn task(session: &str, n: u64) -> LdpEnvelope {
    let body = LdpMessageBody::TaskSubmit {
        task_id: format!("t-{n}"),
        skill: "echo".into(),
        input: json!({"text": "what the router asks", "n": n}),
        contract: None,
    };
    let mut e = LdpEnvelope::new(session, ROUTER, ECHO, body, PayloadMode::Text);
    e.nonce = Some(format!("{n:032x}"));
    ldp_protocol::apply_signature(&mut e, SECRET);
    e
}

fn adapter(c: &mut Criterion) {
    let bytes = serde_json::to_vec(&task("s", 1)).unwrap();
    c.bench_function("ldp/TASK_SUBMIT: parse and check the HMAC", |b| {
        b.iter(|| {
            let e = Envelope::parse(&bytes).unwrap();
            ldp::signing::verify(&e, SECRET.as_bytes(), false).unwrap();
        })
    });
    let parsed = Envelope::parse(&bytes).unwrap();
    c.bench_function("ldp/TASK_SUBMIT: re-sign toward the delegate", |b| {
        b.iter(|| {
            let mut out = parsed.clone();
            ldp::signing::apply(&mut out, SECRET.as_bytes(), false);
            out
        })
    });
    let output = json!({"echo": {"text": "what the router asks"}});
    let provenance: ldp::message::Provenance = serde_json::from_value(json!({
        "produced_by": ECHO, "model_version": "1", "payload_mode_used": "text",
        "confidence": 0.9, "verified": false
    }))
    .unwrap();
    let key = delegateos::Keypair::from_seed([7; 32]);
    let (contract, delegation) = (ct(1), del(1));
    c.bench_function("ldp/TASK_RESULT: gateway-signed attestation", |b| {
        b.iter(|| {
            let context = ldp::translate::ResultContext {
                session_id: "s",
                task_id: "t-1",
                delegate_id: ECHO,
                cost_microcents: 100,
                contract_id: &contract,
                delegation_id: &delegation,
            };
            let draft =
                ldp::translate::result_to_attestation(&output, &provenance, &context).unwrap();
            draft
                .sign(
                    &key,
                    delegateos::AttestationId::from_bytes([0, 0, 0, 0, 0, 1]),
                    delegateos::Timestamp::from_instant(time::OffsetDateTime::now_utc()),
                )
                .unwrap()
        })
    });
}

/// One task's round trip, straight to the delegate and through dgw on
/// each backend (the
/// router's DCT verified, the cost reserved at the DCT's levels and the
/// session's, the contract signed and stored, the delegate's answer
/// checked, the cost settled, the result attested), in one run.
fn round_trip(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let delegate = delegate::echo_delegate(&rt);
    let tmp = tempfile::tempdir().unwrap();
    let root = seed(1);
    let extra = format!(
        "[ldp]\n[[ldp.delegates]]\nname = \"echo\"\nurl = {delegate:?}\nsecret = {SECRET:?}\n\
         trust_domain = \"test-domain\"\ntenant = \"acme\"\ncost_microcents = 1\n\
         session_budget_microcents = 1000000000\nnonce = true\n"
    );
    let config = gateway_config(tmp.path(), &[("acme", root.principal_id())], &extra);
    // The default backend and memory, side by side.
    let sled = Gateway::start(&config);
    let memory = Gateway::start_ephemeral(&config);
    let token = root_token(&root, &seed(2), &["ldp:echo:echo"], u64::MAX >> 12, 3600).encode();
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("authorization", format!("DCT {token}").parse().unwrap());
    let http = reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap();
    let client = ldp_protocol::LdpClient::with_http_client(http);
    let session = "b1111111-2222-4333-8444-555555555555";
    let mut n = 1u64;
    let mut routes = vec![("straight to the delegate", delegate.clone())];
    for (name, gw) in [
        ("through dgw (sled)", &sled),
        ("through dgw (memory)", &memory),
    ] {
        let via = format!("http://{}/ldp/echo", gw.addr);
        let propose = LdpMessageBody::SessionPropose {
            config: json!({"payload_mode": "text", "ttl_secs": 86400, "trust_domain": "test-domain"}),
        };
        let mut e = LdpEnvelope::new(session, ROUTER, ECHO, propose, PayloadMode::Text);
        n += 1;
        e.nonce = Some(format!("{n:032x}"));
        ldp_protocol::apply_signature(&mut e, SECRET);
        let accepted = rt.block_on(client.send_message(&via, &e)).unwrap();
        assert!(matches!(
            accepted.body,
            LdpMessageBody::SessionAccept { .. }
        ));
        routes.push((name, via));
    }
    let mut group = c.benchmark_group("ldp/a task's round trip");
    for (name, url) in routes {
        group.bench_function(name, |b| {
            b.iter(|| {
                n += 1;
                let a = rt
                    .block_on(client.send_message(&url, &task(session, n)))
                    .unwrap();
                assert!(matches!(a.body, LdpMessageBody::TaskResult { .. }), "{a:?}");
            })
        });
    }
    group.finish();
}

criterion_group!(benches, adapter, round_trip);
criterion_main!(benches);
