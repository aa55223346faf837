//! How long a revocation takes to reach other replicas: three `dgw serve`
//! replicas on one `redis-server`; 200 times, a token is revoked on replica
//! A while B and C are asked about it in a loop, and the time until each
//! denies it is recorded (from just before the revoke call is sent, so it
//! includes that call). Prints p50, p99 and the worst.
//!   cargo bench --bench replicas

// A benchmark's setup and helpers: a failure should stop it loudly, and
// clippy's allow-unwrap-in-tests does not reach outside #[test].
#![allow(clippy::unwrap_used)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use delegateos::{RevocationEntry, RevocationScope};
use serde_json::json;
use support::redis::RedisServer;
use support::*;

const ROUNDS: usize = 200;

fn main() {
    let redis = RedisServer::start();
    let root = seed(1);
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let gateways: Vec<Gateway> = dirs
        .iter()
        .map(|dir| {
            let extra = format!("[state]\nbackend = \"redis\"\nurl = \"{}\"\n", redis.url());
            let config = gateway_config(dir.path(), &[("acme", root.principal_id())], &extra);
            Gateway::start(&config)
        })
        .collect();
    let ask = |g: &Gateway, token: &str| {
        g.call(
            "delegateos/authorize",
            json!({"dct": token, "namespace": "docs", "action": "read",
                   "resource": "/a", "costMicrocents": 0}),
        )
    };
    let mut delays: Vec<Duration> = Vec::with_capacity(2 * ROUNDS);
    for n in 0..ROUNDS {
        let token = root_token_for(
            &root,
            &seed(2),
            &["docs:read:/**"],
            100,
            3600,
            delegateos::DelegationId::from_bytes([0, 0, 0, 1, (n >> 8) as u8, n as u8]),
        );
        let encoded = token.encode();
        for g in &gateways {
            assert!(ask(g, &encoded)["result"]["allowed"] == true);
        }
        let entry = RevocationEntry::sign(
            &root,
            &token.revocation_ids()[0],
            at(0),
            RevocationScope::Block,
        )
        .unwrap();
        let started = Instant::now();
        std::thread::scope(|s| {
            let watchers: Vec<_> = gateways[1..]
                .iter()
                .map(|g| {
                    let encoded = &encoded;
                    s.spawn(move || loop {
                        if ask(g, encoded)["error"]["data"]["type"] == "revoked" {
                            return started.elapsed();
                        }
                        assert!(started.elapsed() < Duration::from_secs(10), "never revoked");
                    })
                })
                .collect();
            gateways[0].ok("delegateos/revoke", json!({"revocation": entry}));
            for w in watchers {
                delays.push(w.join().unwrap());
            }
        });
    }
    delays.sort();
    let at = |q: f64| delays[((delays.len() as f64 * q).ceil() as usize).min(delays.len()) - 1];
    println!(
        "revocation on A until B and C deny, {} observations: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        delays.len(),
        at(0.50).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        delays[delays.len() - 1].as_secs_f64() * 1e3
    );
}
