//! Any bytes as an LDP envelope: parsed, signed and verified, given to a
//! session, its identity card if it is one. Must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(e) = ldp::message::Envelope::parse(data) {
        let _ = ldp::signing::verify(&e, b"fuzz-secret-0123456789", false);
        let _ = ldp::signing::payload_digest(&e);
        let mut s = ldp::session::Session::new(0);
        let _ = s.apply(ldp::session::Side::Initiator, &e.body, 1);
        let _ = s.apply(ldp::session::Side::Responder, &e.body, 2);
        let _ = s.use_mode(e.payload_mode);
        let _ = ldp::freshness::check(&e.timestamp, time::OffsetDateTime::UNIX_EPOCH, 300);
    }
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = ldp::identity::IdentityCard::from_value(v);
    }
});
