//! Any bytes as a Motebit artifact: a receipt tree (verified as a chain,
//! given a verdict), a delegation token or chain (verified, given a
//! verdict), a bearer token (read, verified), and the gateway's own
//! `verify`/`verdict` over them. Must never panic.
#![no_main]

use delegate_gateway::protocols::motebit::inspect;
use libfuzzer_sys::fuzz_target;
use motebit::receipt::{self, KnownKeys, Receipt};
use motebit::token::{self, DelegationToken};
use motebit::verdict::{self, TokenOptions};

const NOW: f64 = 1_700_000_000_000.0;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(t) = motebit::bearer::SignedToken::read(text) {
            let key = delegateos::Keypair::from_seed([1; 32]).public_key();
            let _ = t.verify(&key, "task:submit", NOW);
        }
    }
    let Ok(value) = token::parse_value(data) else {
        return;
    };
    if let Ok(r) = Receipt::from_value(&value) {
        let _ = receipt::verify_chain(&r, &KnownKeys::new()).to_json();
        let _ = verdict::receipt(&r, None).to_json();
    }
    if let Ok(chain) = token::chain_from_value(&value) {
        let _ = token::verify_chain(&chain, NOW);
    }
    if let Ok(t) = DelegationToken::from_value(&value) {
        let _ = verdict::delegation_token(&t, None, &TokenOptions::default(), NOW, None);
    }
    let _ = inspect::verify(&value, &KnownKeys::new(), NOW);
    let _ = inspect::verdict(&value, NOW, &|_| None);
});
