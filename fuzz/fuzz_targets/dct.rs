//! A serialized DCT, as a caller presents it: decoded, verified against a
//! root, and asked for a capability. Must never panic.
#![no_main]

use delegateos::dct;
use delegateos::revocation::NoRevocations;
use delegateos::{CapabilityRequest, Keypair, Timestamp};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let root = Keypair::from_seed([1; 32]);
    let roots = [root.principal_id().clone()];
    if let Ok(verified) = dct::verify_token(text, &roots, &NoRevocations) {
        let request = CapabilityRequest {
            namespace: "docs".into(),
            action: "read".into(),
            resource: "/project/a".into(),
        };
        let now = Timestamp::parse("2026-01-01T00:00:00Z").expect("a valid timestamp");
        let _ = verified.authorize(&NoRevocations, &now, 0, &request);
    }
    let _ = dct::Dct::decode(text);
});
