//! Verifying a signed JWT (RFC 7519) against a key set: the header's
//! algorithm from an allowlist of public-key signatures (never `none`,
//! never an HMAC, so a public key can never be used as a shared secret),
//! the key chosen by `kid`, the signature checked by `jsonwebtoken`, and
//! `iss` (exact), `aud`, `exp`, `nbf` and `iat` with a bounded skew. Every
//! refusal is a [`JwtError`] naming what was wrong, never the token.

use base64::Engine;
use jsonwebtoken::jwk::{Jwk, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};

/// The most bytes of a JWT dgw reads.
pub const MAX_JWT_BYTES: usize = 16 * 1024;
/// The clock skew allowed on `exp`, `nbf` and `iat`.
pub const SKEW_SECS: i64 = 60;
/// The signature algorithms accepted: asymmetric only.
pub const ALGORITHMS: &[&str] = &[
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA",
];

/// Why a JWT is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    #[error("the token is not a signed JWT: {0}")]
    Malformed(String),
    #[error("the algorithm {0:?} is not accepted (only {list})", list = ALGORITHMS.join(", "))]
    Algorithm(String),
    #[error("the header's typ {found:?} is not {expected:?}")]
    Type { found: String, expected: String },
    #[error("no key of the issuer matches the token's kid {0:?}")]
    UnknownKey(String),
    #[error("the issuer's key {0:?} cannot verify this token")]
    KeyUnusable(String),
    #[error("the signature does not verify")]
    BadSignature,
    #[error("the issuer {found:?} is not {expected:?}")]
    WrongIssuer { found: String, expected: String },
    #[error("the audience does not include {0:?}")]
    WrongAudience(String),
    #[error("the token expired")]
    Expired,
    #[error("the token is not valid yet")]
    NotYetValid,
    #[error("the token was issued in the future")]
    IssuedInFuture,
    #[error("the token lives longer than the {0} seconds allowed")]
    TooLong(i64),
    #[error("the claim {0} is missing or not of its type")]
    MissingClaim(&'static str),
}

/// What a token must say to be accepted.
#[derive(Debug, Clone)]
pub struct Expect<'a> {
    /// `iss`, compared exactly.
    pub issuer: &'a str,
    /// A value `aud` must be or contain.
    pub audience: &'a str,
    /// The header's `typ`, compared case-insensitively (RFC 7515 §4.1.9),
    /// when one is required.
    pub typ: Option<&'a str>,
    /// The most `exp` may be past `iat`, when bounded (assertions).
    pub max_lifetime_secs: Option<i64>,
    /// The time to judge at (Unix seconds).
    pub now: i64,
}

/// The parts of a header dgw reads, parsed before anything is verified.
#[derive(Debug, Clone)]
pub struct Header {
    pub alg: Algorithm,
    pub kid: Option<String>,
    pub typ: Option<String>,
}

/// A verified token's claims.
#[derive(Debug, Clone)]
pub struct Claims(pub Map<String, Value>);

impl Claims {
    /// A string claim.
    pub fn str(&self, name: &str) -> Option<&str> {
        self.0.get(name).and_then(Value::as_str)
    }

    /// A required string claim.
    pub fn required(&self, name: &'static str) -> Result<&str, JwtError> {
        self.str(name)
            .filter(|s| !s.is_empty())
            .ok_or(JwtError::MissingClaim(name))
    }

    /// A time claim (`exp`, `iat`, `nbf`), in Unix seconds.
    pub fn time(&self, name: &'static str) -> Result<Option<i64>, JwtError> {
        match self.0.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_i64()
                .or_else(|| v.as_f64().filter(|f| f.is_finite()).map(|f| f as i64))
                .map(Some)
                .ok_or(JwtError::MissingClaim(name)),
        }
    }

    /// `exp`, in Unix seconds (present on every verified token).
    pub fn exp(&self) -> i64 {
        self.time("exp").ok().flatten().unwrap_or(0)
    }
}

/// The header of `token`, its algorithm checked against [`ALGORITHMS`].
pub fn header(token: &str) -> Result<Header, JwtError> {
    if token.len() > MAX_JWT_BYTES {
        return Err(JwtError::Malformed(format!(
            "longer than {MAX_JWT_BYTES} bytes"
        )));
    }
    let mut parts = token.split('.');
    let (Some(head), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(JwtError::Malformed("not three dot-separated parts".into()));
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(head)
        .map_err(|_| JwtError::Malformed("the header is not base64url".into()))?;
    let value: Map<String, Value> = serde_json::from_slice(&bytes)
        .map_err(|_| JwtError::Malformed("the header is not a JSON object".into()))?;
    let alg = value
        .get("alg")
        .and_then(Value::as_str)
        .ok_or_else(|| JwtError::Malformed("the header has no alg".into()))?;
    if !ALGORITHMS.contains(&alg) {
        return Err(JwtError::Algorithm(alg.chars().take(32).collect()));
    }
    let alg: Algorithm = alg
        .parse()
        .map_err(|_| JwtError::Algorithm(alg.to_owned()))?;
    let text = |name: &str| -> Result<Option<String>, JwtError> {
        match value.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(JwtError::Malformed(format!(
                "the header's {name} is not a string"
            ))),
        }
    };
    if value.contains_key("crit") {
        // No extension is understood, so none may be critical (RFC 7515 §4.1.11).
        return Err(JwtError::Malformed("the header has crit".into()));
    }
    Ok(Header {
        alg,
        kid: text("kid")?,
        typ: text("typ")?,
    })
}

/// The key of `keys` that `header` names: by `kid`, or the only signing
/// key when there is no `kid`. `None` when there is none.
pub fn find_key<'k>(keys: &'k JwkSet, header: &Header) -> Option<&'k Jwk> {
    let signing = |k: &&Jwk| {
        !matches!(
            k.common.public_key_use,
            Some(PublicKeyUse::Encryption | PublicKeyUse::Other(_))
        )
    };
    match &header.kid {
        Some(kid) => keys
            .keys
            .iter()
            .filter(signing)
            .find(|k| k.common.key_id.as_deref() == Some(kid.as_str())),
        None => {
            let mut all = keys.keys.iter().filter(signing);
            match (all.next(), all.next()) {
                (Some(only), None) => Some(only),
                _ => None,
            }
        }
    }
}

/// Verifies `token` (whose header is `header`) with `key`, then its claims
/// against `expect`.
pub fn verify(
    token: &str,
    header: &Header,
    key: &Jwk,
    expect: &Expect<'_>,
) -> Result<Claims, JwtError> {
    let name = || key.common.key_id.clone().unwrap_or_else(|| "-".into());
    if let Some(typ) = expect.typ {
        let found = header.typ.as_deref().unwrap_or_default();
        if !found.eq_ignore_ascii_case(typ) {
            return Err(JwtError::Type {
                found: found.chars().take(64).collect(),
                expected: typ.to_owned(),
            });
        }
    }
    // A key that names its algorithm is used with that one only.
    if let Some(alg) = key.common.key_algorithm {
        if format!("{alg:?}") != format!("{:?}", header.alg) {
            return Err(JwtError::KeyUnusable(name()));
        }
    }
    let decoding = DecodingKey::from_jwk(key).map_err(|_| JwtError::KeyUnusable(name()))?;
    // The signature, and the algorithm against the key's family, by
    // jsonwebtoken; the claims below, for errors that name them.
    let mut validation = Validation::new(header.alg);
    validation.validate_exp = false;
    validation.validate_aud = false;
    validation.required_spec_claims.clear();
    let data =
        jsonwebtoken::decode::<Map<String, Value>>(token, &decoding, &validation).map_err(|e| {
            match e.kind() {
                jsonwebtoken::errors::ErrorKind::InvalidSignature => JwtError::BadSignature,
                jsonwebtoken::errors::ErrorKind::InvalidAlgorithm
                | jsonwebtoken::errors::ErrorKind::InvalidKeyFormat
                | jsonwebtoken::errors::ErrorKind::InvalidRsaKey(_)
                | jsonwebtoken::errors::ErrorKind::InvalidEcdsaKey => JwtError::KeyUnusable(name()),
                _ => JwtError::Malformed("the claims are not a JSON object".into()),
            }
        })?;
    let claims = Claims(data.claims);
    check_claims(&claims, expect)?;
    Ok(claims)
}

/// `iss`, `aud`, `exp`, `nbf` and `iat` against `expect`.
fn check_claims(claims: &Claims, expect: &Expect<'_>) -> Result<(), JwtError> {
    let iss = claims.required("iss")?;
    if iss != expect.issuer {
        return Err(JwtError::WrongIssuer {
            found: iss.chars().take(256).collect(),
            expected: expect.issuer.to_owned(),
        });
    }
    let audience_ok = match claims.0.get("aud") {
        Some(Value::String(a)) => a == expect.audience,
        Some(Value::Array(all)) => all.iter().any(|a| a.as_str() == Some(expect.audience)),
        _ => false,
    };
    if !audience_ok {
        return Err(JwtError::WrongAudience(expect.audience.to_owned()));
    }
    let time = |name| claims.time(name);
    let exp = time("exp")?.ok_or(JwtError::MissingClaim("exp"))?;
    let iat = time("iat")?.ok_or(JwtError::MissingClaim("iat"))?;
    if expect.now > exp.saturating_add(SKEW_SECS) {
        return Err(JwtError::Expired);
    }
    if let Some(nbf) = time("nbf")? {
        if expect.now < nbf.saturating_sub(SKEW_SECS) {
            return Err(JwtError::NotYetValid);
        }
    }
    if iat > expect.now.saturating_add(SKEW_SECS) {
        return Err(JwtError::IssuedInFuture);
    }
    if let Some(max) = expect.max_lifetime_secs {
        if exp.saturating_sub(iat) > max || exp.saturating_sub(expect.now) > max {
            return Err(JwtError::TooLong(max));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
