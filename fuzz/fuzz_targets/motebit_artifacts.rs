//! Any bytes as a Motebit artifact: a receipt tree (verified as a chain,
//! given a verdict), a delegation token or chain (verified, given a
//! verdict), a bearer token (read, verified), and the gateway's own
//! `verify`/`verdict` over them. Must never panic.
#![no_main]

use dgw_proto_motebit::inspect;
use libfuzzer_sys::fuzz_target;
use motebit::receipt::{self, KnownKeys, Receipt};
use motebit::token;
use motebit::verdict;
use serde_json::Value;

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
    }
    if let Ok(chain) = token::chain_from_value(&value) {
        let _ = token::verify_chain(&chain, NOW);
    }
    // The verdicts take any JSON object, read as the reference reads it.
    if let Some(object) = value.as_object() {
        let _ = verdict::receipt(object, None).to_json();
        let grant = value.get("grant").and_then(Value::as_object);
        let options = value.get("options").cloned().unwrap_or_default();
        let _ = verdict::delegation_token(object, grant, &options, NOW, None);
    }
    let _ = inspect::verify(&value, &KnownKeys::new(), NOW);
    let _ = inspect::verdict(&value, NOW, &|_| None);
});
