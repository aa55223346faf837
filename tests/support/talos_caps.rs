//! Talos artifacts for tests: DIDs, times, signed capabilities.

use delegateos::Keypair;
use serde_json::{json, Value};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::seed;

pub fn did(k: &Keypair) -> String {
    format!("did:talos:{}", hex::encode(k.public_key().to_bytes()))
}

pub fn iso(offset: i64) -> String {
    (OffsetDateTime::now_utc() + time::Duration::seconds(offset))
        .format(&Rfc3339)
        .unwrap()
}

/// A spec-format capability for `read_text_file` (method `read`, the tool
/// rule's action) under `root`.
pub fn capability(issuer: &Keypair, root: &str) -> Value {
    let mut v = json!({
        "id": "cap_00112233445566778899aabb", "version": 1, "issuer": did(issuer),
        "subject": did(&seed(2)), "scope": format!("tool:read_text_file/method:read/resource:{root}"),
        "constraints": {}, "issued_at": iso(-5), "expires_at": iso(3600),
        "delegatable": false, "delegation_chain": [],
    });
    let sig = issuer.sign_message(&talos::canonical::jcs(&v));
    v["signature"] = json!(delegateos::base64url::encode(&sig.to_bytes()));
    v
}
