//! The verifier against tokens signed here: one good, and each way a token
//! can be wrong refused with its own error.

use base64::Engine;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{EncodingKey, Header as JwtHeader};
use ring::signature::{Ed25519KeyPair, KeyPair};
use serde_json::{json, Value};

use super::*;

const NOW: i64 = 1_900_000_000;
const ISS: &str = "https://idp.example";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

struct Key {
    encoding: EncodingKey,
    set: JwkSet,
    x: String,
}

fn key(kid: &str) -> Key {
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    let x = b64(pair.public_key().as_ref());
    let set: JwkSet = serde_json::from_value(
        json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": x, "kid": kid, "use": "sig"}]}),
    )
    .unwrap();
    Key {
        encoding: EncodingKey::from_ed_der(pkcs8.as_ref()),
        set,
        x,
    }
}

fn claims() -> Value {
    json!({"iss": ISS, "sub": "alice", "aud": "dgw", "iat": NOW - 10, "exp": NOW + 300})
}

fn sign(key: &Key, kid: &str, typ: Option<&str>, claims: &Value) -> String {
    let mut header = JwtHeader::new(Algorithm::EdDSA);
    header.kid = Some(kid.into());
    header.typ = typ.map(str::to_owned);
    jsonwebtoken::encode(&header, claims, &key.encoding).unwrap()
}

fn expect() -> Expect<'static> {
    Expect {
        issuer: ISS,
        audience: "dgw",
        typ: None,
        max_lifetime_secs: None,
        now: NOW,
    }
}

fn check(token: &str, keys: &JwkSet, expect: &Expect<'_>) -> Result<Claims, JwtError> {
    let h = header(token)?;
    let k = find_key(keys, &h)
        .ok_or_else(|| JwtError::UnknownKey(h.kid.clone().unwrap_or_default()))?;
    verify(token, &h, k, expect)
}

#[test]
fn a_good_token_verifies_and_its_claims_are_read() {
    let k = key("k1");
    let t = sign(&k, "k1", Some("JWT"), &claims());
    let c = check(&t, &k.set, &expect()).unwrap();
    assert_eq!(c.str("sub"), Some("alice"));
    assert_eq!(c.exp(), NOW + 300);
    // An audience array containing dgw's is good too.
    let mut many = claims();
    many["aud"] = json!(["other", "dgw"]);
    check(&sign(&k, "k1", None, &many), &k.set, &expect()).unwrap();
}

#[test]
fn each_wrong_claim_is_refused_by_name() {
    let k = key("k1");
    let with = |name: &str, v: Value| {
        let mut c = claims();
        c[name] = v;
        check(&sign(&k, "k1", None, &c), &k.set, &expect())
    };
    assert!(matches!(
        with("iss", json!("https://idp.example/")),
        Err(JwtError::WrongIssuer { .. })
    ));
    assert_eq!(
        with("aud", json!("other")).unwrap_err(),
        JwtError::WrongAudience("dgw".into())
    );
    assert_eq!(
        with("aud", json!(["a", "b"])).unwrap_err(),
        JwtError::WrongAudience("dgw".into())
    );
    assert_eq!(
        with("exp", json!(NOW - SKEW_SECS - 1)).unwrap_err(),
        JwtError::Expired
    );
    // Within the skew: still good.
    with("exp", json!(NOW - SKEW_SECS + 1)).unwrap();
    assert_eq!(
        with("nbf", json!(NOW + SKEW_SECS + 5)).unwrap_err(),
        JwtError::NotYetValid
    );
    assert_eq!(
        with("iat", json!(NOW + SKEW_SECS + 5)).unwrap_err(),
        JwtError::IssuedInFuture
    );
    assert_eq!(
        with("exp", json!("soon")).unwrap_err(),
        JwtError::MissingClaim("exp")
    );
    let mut no_iat = claims();
    no_iat.as_object_mut().unwrap().remove("iat");
    assert_eq!(
        check(&sign(&k, "k1", None, &no_iat), &k.set, &expect()).unwrap_err(),
        JwtError::MissingClaim("iat")
    );
    // A bounded lifetime.
    let short = Expect {
        max_lifetime_secs: Some(60),
        ..expect()
    };
    assert_eq!(
        check(&sign(&k, "k1", None, &claims()), &k.set, &short).unwrap_err(),
        JwtError::TooLong(60)
    );
}

#[test]
fn a_typ_is_required_when_asked() {
    let k = key("k1");
    let jag = Expect {
        typ: Some("oauth-id-jag+jwt"),
        ..expect()
    };
    check(
        &sign(&k, "k1", Some("oauth-id-jag+jwt"), &claims()),
        &k.set,
        &jag,
    )
    .unwrap();
    for typ in [None, Some("JWT"), Some("at+jwt")] {
        assert!(matches!(
            check(&sign(&k, "k1", typ, &claims()), &k.set, &jag),
            Err(JwtError::Type { .. })
        ));
    }
}

#[test]
fn none_hmac_foreign_keys_and_tampering_are_refused() {
    let k = key("k1");
    let body = b64(claims().to_string().as_bytes());
    // alg none, unsigned.
    let none = format!("{}.{body}.", b64(br#"{"alg":"none","kid":"k1"}"#));
    assert_eq!(
        header(&none).unwrap_err(),
        JwtError::Algorithm("none".into())
    );
    // HS256 "signed" with the provider's public key as the secret.
    let head = b64(br#"{"alg":"HS256","kid":"k1"}"#);
    let mac = ring::hmac::sign(
        &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, k.x.as_bytes()),
        format!("{head}.{body}").as_bytes(),
    );
    let hs = format!("{head}.{body}.{}", b64(mac.as_ref()));
    assert_eq!(
        header(&hs).unwrap_err(),
        JwtError::Algorithm("HS256".into())
    );
    // Signed by a key not in the set, under a kid the set has, and not.
    let stranger = key("k2");
    assert_eq!(
        check(&sign(&stranger, "k1", None, &claims()), &k.set, &expect()).unwrap_err(),
        JwtError::BadSignature
    );
    assert_eq!(
        check(&sign(&stranger, "k2", None, &claims()), &k.set, &expect()).unwrap_err(),
        JwtError::UnknownKey("k2".into())
    );
    // A claim changed after signing.
    let good = sign(&k, "k1", None, &claims());
    let mut parts: Vec<&str> = good.split('.').collect();
    let mut other = claims();
    other["sub"] = json!("mallory");
    let forged = b64(other.to_string().as_bytes());
    parts[1] = &forged;
    assert_eq!(
        check(&parts.join("."), &k.set, &expect()).unwrap_err(),
        JwtError::BadSignature
    );
    // Not a JWT at all; a critical extension; oversized.
    assert!(matches!(header("abc"), Err(JwtError::Malformed(_))));
    let crit = format!("{}.{body}.x", b64(br#"{"alg":"EdDSA","crit":["exp"]}"#));
    assert!(matches!(header(&crit), Err(JwtError::Malformed(_))));
    assert!(matches!(
        header(&"a".repeat(MAX_JWT_BYTES + 1)),
        Err(JwtError::Malformed(_))
    ));
}

#[test]
fn a_key_naming_another_algorithm_or_for_encryption_is_not_used() {
    let k = key("k1");
    let t = sign(&k, "k1", None, &claims());
    let mut v = serde_json::to_value(&k.set).unwrap();
    v["keys"][0]["alg"] = json!("RS256");
    let other_alg: JwkSet = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(
        check(&t, &other_alg, &expect()).unwrap_err(),
        JwtError::KeyUnusable("k1".into())
    );
    v["keys"][0]["alg"] = json!("EdDSA");
    v["keys"][0]["use"] = json!("enc");
    let enc: JwkSet = serde_json::from_value(v).unwrap();
    assert_eq!(
        check(&t, &enc, &expect()).unwrap_err(),
        JwtError::UnknownKey("k1".into())
    );
}
