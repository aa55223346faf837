//! A Talos `tools/call` request: the envelope taken out of it, its
//! capability parsed and hashed, and the frame checks. Must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(Value::Object(mut request)) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let _ = talos::frame::verify(&Value::Object(request.clone()));
    if let Ok(Some(_envelope)) = talos::envelope::take(&mut request) {
        let _ = talos::envelope::request_hash(&request);
    }
    if let Some(cap) = request.get("capability") {
        if let Ok(c) = talos::capability::Capability::from_value(cap) {
            let _ = c.capability_hash();
            let _ = c.revocation_names();
        }
    }
});
