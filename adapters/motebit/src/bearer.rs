//! Signed bearer tokens (auth-token@1.0): `base64url(payload JSON)` `.`
//! `base64url(Ed25519 signature of the payload bytes)`, sent as
//! `Authorization: Bearer motebit:<token>`. They authenticate an agent
//! (`mid`, `did`) to one audience for a few minutes; the `jti` makes each
//! one usable once (the gateway's replay store keeps them).

use ed25519_dalek::VerifyingKey;
use serde::Deserialize;

use crate::encoding;
use crate::{Failure, Reason, BEARER_SUITE};

/// The `Authorization: Bearer` credential prefix of Motebit tokens.
pub const PREFIX: &str = "motebit:";

/// Clock skew tolerated on `exp` and `iat` (auth-token §8.3), in ms.
pub const SKEW_MS: f64 = 60_000.0;

/// Longest lifetime accepted, `exp - iat` (auth-token §6), in ms.
pub const MAX_LIFETIME_MS: f64 = 300_000.0;

/// Longest token read, in bytes.
pub const MAX_TOKEN_BYTES: usize = 4096;

/// The signed payload.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claims {
    /// The agent's `motebit_id`.
    pub mid: String,
    /// The signing device.
    pub did: String,
    /// Issued at, epoch ms.
    pub iat: f64,
    /// Expires at, epoch ms.
    pub exp: f64,
    /// Unique per token.
    pub jti: String,
    /// The endpoint it is for.
    pub aud: String,
    /// Always [`BEARER_SUITE`].
    pub suite: String,
}

/// A token read but not yet verified.
#[derive(Debug, Clone)]
pub struct SignedToken {
    /// What it claims.
    pub claims: Claims,
    payload: Vec<u8>,
    signature: String,
}

impl SignedToken {
    /// Reads `token` (without the `motebit:` prefix): both parts decoded,
    /// the payload parsed; nothing is trusted yet.
    pub fn read(token: &str) -> Result<Self, Failure> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(Failure::malformed("the bearer token is too long"));
        }
        let (payload, signature) = token
            .split_once('.')
            .ok_or_else(|| Failure::malformed("a bearer token is payload.signature"))?;
        let payload = encoding::from_b64url(payload)
            .ok_or_else(|| Failure::malformed("the bearer token's payload is not base64url"))?;
        let claims: Claims = serde_json::from_slice(&payload)
            .map_err(|e| Failure::malformed(format!("bearer token payload: {e}")))?;
        Ok(Self {
            claims,
            payload,
            signature: signature.to_owned(),
        })
    }

    /// Verifies it as `key`'s, for `audience`, at `now` (epoch ms): the
    /// suite, the signature over the payload bytes, `exp` (with
    /// [`SKEW_MS`]), `iat` not in the future, a lifetime of at most
    /// [`MAX_LIFETIME_MS`], a non-empty `jti`, the audience.
    pub fn verify(&self, key: &VerifyingKey, audience: &str, now: f64) -> Result<&Claims, Failure> {
        self.verify_signature(key)?;
        self.check_claims(audience, now)
    }

    /// The suite and the signature: what holds at any instant (and so may
    /// be remembered, by [`SignedToken::digest`]).
    pub fn verify_signature(&self, key: &VerifyingKey) -> Result<(), Failure> {
        if self.claims.suite != BEARER_SUITE {
            return Err(Failure::new(
                Reason::WrongSuite,
                format!("a bearer token's suite must be {BEARER_SUITE}"),
            ));
        }
        if !encoding::verifies(key, &self.payload, &self.signature) {
            return Err(Failure::new(
                Reason::BadSignature,
                "the bearer token's signature does not verify",
            ));
        }
        Ok(())
    }

    /// `SHA-256` of the token's payload and signature with `key`: what a
    /// verified signature may be remembered by.
    pub fn digest(&self, key: &VerifyingKey) -> String {
        let mut bytes = self.payload.clone();
        bytes.push(b'.');
        bytes.extend_from_slice(self.signature.as_bytes());
        bytes.push(b'.');
        bytes.extend_from_slice(key.as_bytes());
        encoding::sha256_hex(&bytes)
    }

    /// The claims at `now`, for `audience`: everything but the signature.
    pub fn check_claims(&self, audience: &str, now: f64) -> Result<&Claims, Failure> {
        let c = &self.claims;
        if c.jti.is_empty() || c.jti.len() > 256 {
            return Err(Failure::malformed(
                "the bearer token's jti must be 1 to 256 bytes",
            ));
        }
        if c.mid.is_empty() || c.did.is_empty() {
            return Err(Failure::malformed(
                "the bearer token names no motebit or device",
            ));
        }
        if c.aud != audience {
            return Err(Failure::new(
                Reason::WrongAudience,
                format!("the bearer token is for {:?}, not {audience:?}", c.aud),
            ));
        }
        if c.exp + SKEW_MS <= now {
            return Err(Failure::new(
                Reason::Expired,
                "the bearer token has expired",
            ));
        }
        if c.iat > now + SKEW_MS {
            return Err(Failure::new(
                Reason::NotYetValid,
                "the bearer token is issued in the future",
            ));
        }
        if c.exp - c.iat > MAX_LIFETIME_MS || c.exp < c.iat {
            return Err(Failure::new(
                Reason::LifetimeTooLong,
                "a bearer token may live at most 5 minutes",
            ));
        }
        Ok(c)
    }
}

/// Mints a token (tests and `dgw motebit token`): the payload as given.
pub fn mint(claims: &serde_json::Value, key: &delegateos::Keypair) -> String {
    let payload = claims.to_string();
    let signature = key.sign_message(payload.as_bytes());
    format!(
        "{}.{}",
        encoding::b64url(payload.as_bytes()),
        encoding::b64url(&signature.to_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: f64 = 1_700_000_000_000.0;

    fn claims() -> serde_json::Value {
        json!({"mid": "m", "did": "d", "iat": NOW, "exp": NOW + 300_000.0, "jti": "j1",
               "aud": "task:submit", "suite": BEARER_SUITE})
    }

    #[test]
    fn a_fresh_token_verifies_and_every_breach_is_named() {
        let key = delegateos::Keypair::from_seed([7; 32]);
        let pk = key.public_key();
        let good = mint(&claims(), &key);
        assert_eq!(
            SignedToken::read(&good)
                .unwrap()
                .verify(&pk, "task:submit", NOW)
                .unwrap()
                .jti,
            "j1"
        );
        let reason = |c: serde_json::Value, now: f64| {
            SignedToken::read(&mint(&c, &key))
                .and_then(|t| t.verify(&pk, "task:submit", now).map(drop))
                .unwrap_err()
                .reason
        };
        assert_eq!(reason(claims(), NOW + 360_001.0), Reason::Expired);
        assert_eq!(reason(claims(), NOW - 60_001.0), Reason::NotYetValid);
        let mut c = claims();
        c["aud"] = json!("sync");
        assert_eq!(reason(c, NOW), Reason::WrongAudience);
        let mut c = claims();
        c["exp"] = json!(NOW + 300_001.0);
        assert_eq!(reason(c, NOW), Reason::LifetimeTooLong);
        let mut c = claims();
        c["suite"] = json!("motebit-jcs-ed25519-b64-v1");
        assert_eq!(reason(c, NOW), Reason::WrongSuite);
        let mut c = claims();
        c["jti"] = json!("");
        assert_eq!(reason(c, NOW), Reason::Malformed);
        let mut c = claims();
        c.as_object_mut().unwrap().remove("aud");
        assert_eq!(reason(c, NOW), Reason::Malformed);
        // A signature verified once stays verified; the claims are judged
        // at each instant.
        let t = SignedToken::read(&good).unwrap();
        t.verify_signature(&pk).unwrap();
        assert_eq!(
            t.check_claims("task:submit", NOW + 360_001.0)
                .unwrap_err()
                .reason,
            Reason::Expired
        );
        assert_eq!(
            t.check_claims("sync", NOW).unwrap_err().reason,
            Reason::WrongAudience
        );
        assert_ne!(
            t.digest(&pk),
            t.digest(&delegateos::Keypair::from_seed([9; 32]).public_key())
        );
        // Another key's signature.
        let other = delegateos::Keypair::from_seed([8; 32]);
        let forged = mint(&claims(), &other);
        assert_eq!(
            SignedToken::read(&forged)
                .unwrap()
                .verify(&pk, "task:submit", NOW)
                .unwrap_err()
                .reason,
            Reason::BadSignature
        );
        for junk in ["", "abc", "a.b", "!!.!!"] {
            assert_eq!(
                SignedToken::read(junk).unwrap_err().reason,
                Reason::Malformed
            );
        }
    }
}
