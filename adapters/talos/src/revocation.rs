//! Talos revocations. The spec says revocation overrides validity (§2.4)
//! but defines no message; this is the gateway's: a trusted issuer names a
//! capability by its `id` or either hash and signs
//! `{"revoke", "issuer", "revoked_at"}` (JCS, Ed25519, base64url).

use delegateos::Keypair;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::jcs;
use crate::denial::{Denied, TalosDenial};
use crate::keys::{decode_signature, Issuers};

/// A signed revocation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TalosRevocation {
    /// A capability `id` (`cap_…`) or hash (64 hex).
    pub revoke: String,
    /// The DID that revoked it (its issuer); `admin:<who>` for a revocation
    /// an administrator recorded without a signature.
    pub issuer: String,
    /// Unix seconds.
    pub revoked_at: i64,
    /// The issuer's Ed25519 signature over the JCS content (base64url).
    pub signature: String,
}

/// Whether `name` can name a capability in a revocation: a capability `id`
/// (`cap_` and 24 more characters) or a 64-hex hash.
pub fn is_revocable_name(name: &str) -> bool {
    (name.len() == 28 && name.starts_with("cap_"))
        || (name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit()))
}

impl TalosRevocation {
    fn content(&self) -> Value {
        serde_json::json!({"revoke": self.revoke, "issuer": self.issuer, "revoked_at": self.revoked_at})
    }

    /// Signs a revocation of `revoke` as `issuer`.
    pub fn sign(key: &Keypair, issuer: &str, revoke: &str, revoked_at: i64) -> Self {
        let mut r = Self {
            revoke: revoke.to_owned(),
            issuer: issuer.to_owned(),
            revoked_at,
            signature: String::new(),
        };
        r.signature =
            delegateos::base64url::encode(&key.sign_message(&jcs(&r.content())).to_bytes());
        r
    }

    /// Checks the name's shape and that a trusted issuer signed it.
    pub fn verify(&self, issuers: &Issuers) -> Result<(), Denied> {
        if !is_revocable_name(&self.revoke) {
            return Err(Denied::new(
                TalosDenial::SignatureInvalid,
                "revoke must be a capability id or a 64-hex hash",
            ));
        }
        let key = issuers.trusted(&self.issuer).ok_or_else(|| {
            Denied::new(
                TalosDenial::SignatureInvalid,
                format!("issuer {} is not trusted", self.issuer),
            )
        })?;
        let sig = decode_signature(&self.signature)
            .ok_or_else(|| Denied::new(TalosDenial::SignatureInvalid, "malformed signature"))?;
        key.verify_strict(&jcs(&self.content()), &sig).map_err(|_| {
            Denied::new(
                TalosDenial::SignatureInvalid,
                "the issuer did not sign this revocation",
            )
        })
    }
}
