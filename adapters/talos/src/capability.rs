//! Capabilities in both formats the Talos implementations emit:
//!
//! - **spec** (§2.1): `id` (`cap_` + 24 hex), `version` 1, `issuer`,
//!   `subject`, `scope` (the §2.3 grammar), `constraints`, `issued_at` and
//!   `expires_at` (RFC 3339), `delegatable`, `delegation_chain` (the parent
//!   capabilities, root first), `signature`;
//! - **wire** (the v1 vectors): `v` "1", `iss`, `sub`, `scope`, `iat`, `exp`
//!   (Unix seconds), optional `constraints`, `sig`.
//!
//! Both sign the canonical bytes of every field but the signature, with no
//! prehash. Signatures may be base64url or padded standard base64. Which
//! canonical bytes depends on the format (docs/adapters/talos.md): a wire
//! capability is RFC 8785, whose numbers are integers (`1.0` is written
//! `1`, as the reference SDK and contracts library write it; a fraction has
//! no v1 form and is refused); a spec-format capability is RFC 8785 or the
//! seed's Python `sort_keys` form, which keeps `1.0`.

use ed25519_dalek::VerifyingKey;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::canonical::{jcs, python_sorted};
use crate::denial::{Denied, TalosDenial};
use crate::keys::decode_signature;
use crate::scope::Scope;
use crate::MAX_CHAIN_DEPTH;

/// Which format a capability came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The spec format (§2.1): `id`, JCS-signed, `delegation_chain`.
    Spec,
    /// The wire format the reference implementations emit.
    Wire,
}

/// A parsed capability (its signature not yet checked).
#[derive(Debug, Clone)]
pub struct Capability {
    /// Which format it came in.
    pub format: Format,
    /// The spec format's `id`; `None` in the wire format.
    pub id: Option<String>,
    /// The issuer's DID.
    pub issuer: String,
    /// The holder's DID.
    pub subject: String,
    /// The scope as written.
    pub scope_text: String,
    /// `Err` when the scope does not parse: such a capability grants nothing.
    pub scope: Result<Scope, String>,
    /// Unix seconds.
    pub issued_at: i64,
    /// Unix seconds.
    pub expires_at: i64,
    /// Whether the holder may delegate it further.
    pub delegatable: bool,
    /// Parents, root first (spec format only).
    pub chain: Vec<Capability>,
    /// The object as received.
    raw: Map<String, Value>,
    signature_field: &'static str,
}

fn invalid(detail: impl Into<String>) -> Denied {
    Denied::new(TalosDenial::SignatureInvalid, detail)
}

fn take_str(obj: &mut Map<String, Value>, key: &str) -> Result<String, Denied> {
    match obj.remove(key) {
        Some(Value::String(s)) => Ok(s),
        _ => Err(invalid(format!("`{key}` must be a string"))),
    }
}

/// An integer, also when written as a whole-number float (`1700000000.0`),
/// which JCS writes as the integer it is.
fn take_int(obj: &mut Map<String, Value>, key: &str) -> Result<i64, Denied> {
    obj.remove(key)
        .and_then(|v| v.as_i64().or_else(|| whole(v.as_f64()?)))
        .ok_or_else(|| invalid(format!("`{key}` must be an integer")))
}

/// The largest magnitude up to which every double is an exact integer.
const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

fn whole(f: f64) -> Option<i64> {
    (f.fract() == 0.0 && f.abs() <= MAX_SAFE).then_some(f as i64)
}

/// The v1 canonical JSON has integers only: the reference SDK refuses to
/// canonicalize a fraction, and the Python contracts library writes some
/// (`1e-05`) otherwise than RFC 8785 (`0.00001`), so no signed form of one
/// is agreed.
fn integers_only(value: &Value, path: &str) -> Result<(), Denied> {
    match value {
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() != 0.0) => Err(invalid(format!(
            "`{path}` is {n}: the v1 format has integers only"
        ))),
        Value::Array(items) => items
            .iter()
            .try_for_each(|v| integers_only(v, &format!("{path}[]"))),
        Value::Object(map) => map
            .iter()
            .try_for_each(|(k, v)| integers_only(v, &format!("{path}.{k}"))),
        _ => Ok(()),
    }
}

fn rfc3339(text: &str, key: &str) -> Result<i64, Denied> {
    time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .map(|t| t.unix_timestamp())
        .map_err(|e| invalid(format!("`{key}` {text:?} is not RFC 3339: {e}")))
}

/// A DID: `did:<method>:<id>`, printable ASCII. The spec writes
/// `did:talos:…`; the reference SDKs also emit `did:key:…` and `did:web:…`.
/// Which issuers are trusted is the verifier's configuration, not the syntax.
fn did(text: String, key: &str) -> Result<String, Denied> {
    let ok = text.starts_with("did:")
        && text.len() <= 512
        && text.bytes().all(|b| b.is_ascii_graphic())
        && text.splitn(3, ':').count() == 3;
    if ok {
        Ok(text)
    } else {
        Err(invalid(format!("`{key}` {text:?} is not a DID")))
    }
}

impl Capability {
    /// Parses capability JSON text, refusing duplicate keys.
    pub fn from_text(text: &str) -> Result<Self, Denied> {
        let value = delegateos::canonical::parse_strict(text.as_bytes(), 256 * 1024)
            .map_err(|e| invalid(format!("not a capability: {e}")))?;
        Self::from_value(&value)
    }

    /// Reads either format. Malformed input is `SIGNATURE_INVALID`: it
    /// cannot be verified.
    pub fn from_value(value: &Value) -> Result<Self, Denied> {
        Self::parse_at(value, 0)
    }

    fn parse_at(value: &Value, depth: usize) -> Result<Self, Denied> {
        let Value::Object(raw) = value else {
            return Err(invalid("a capability must be an object"));
        };
        if raw.contains_key("v") {
            Self::parse_wire(raw)
        } else {
            Self::parse_spec(raw, depth)
        }
    }

    fn parse_wire(raw: &Map<String, Value>) -> Result<Self, Denied> {
        let mut obj = raw.clone();
        if take_str(&mut obj, "v")? != "1" {
            return Err(invalid("`v` must be \"1\""));
        }
        let issuer = did(take_str(&mut obj, "iss")?, "iss")?;
        let subject = did(take_str(&mut obj, "sub")?, "sub")?;
        let scope_text = take_str(&mut obj, "scope")?;
        let issued_at = take_int(&mut obj, "iat")?;
        let expires_at = take_int(&mut obj, "exp")?;
        take_str(&mut obj, "sig")?;
        let constraints = match obj.remove("constraints") {
            None => Map::new(),
            Some(Value::Object(c)) => c,
            Some(_) => return Err(invalid("`constraints` must be an object")),
        };
        for (k, v) in &constraints {
            integers_only(v, &format!("constraints.{k}"))?;
        }
        if let Some(extra) = obj.keys().next() {
            return Err(invalid(format!("unknown field `{extra}`")));
        }
        Ok(Self {
            format: Format::Wire,
            id: None,
            issuer,
            subject,
            scope: Scope::from_wire(&scope_text, &constraints).map_err(|e| e.to_string()),
            scope_text,
            issued_at,
            expires_at,
            delegatable: false,
            chain: Vec::new(),
            raw: raw.clone(),
            signature_field: "sig",
        })
    }

    fn parse_spec(raw: &Map<String, Value>, depth: usize) -> Result<Self, Denied> {
        let mut obj = raw.clone();
        let id = take_str(&mut obj, "id")?;
        let id_ok = id.len() == 28
            && id.starts_with("cap_")
            && id[4..]
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !id_ok {
            return Err(invalid(format!(
                "`id` {id:?} is not cap_ + 24 lowercase hex"
            )));
        }
        if obj.remove("version").and_then(|v| v.as_i64()) != Some(1) {
            return Err(invalid("`version` must be 1"));
        }
        let issuer = did(take_str(&mut obj, "issuer")?, "issuer")?;
        let subject = did(take_str(&mut obj, "subject")?, "subject")?;
        let scope_text = take_str(&mut obj, "scope")?;
        match obj.remove("constraints") {
            Some(Value::Object(_)) | None => {}
            Some(_) => return Err(invalid("`constraints` must be an object")),
        }
        let issued_at = rfc3339(&take_str(&mut obj, "issued_at")?, "issued_at")?;
        let expires_at = rfc3339(&take_str(&mut obj, "expires_at")?, "expires_at")?;
        let delegatable = match obj.remove("delegatable") {
            Some(Value::Bool(b)) => b,
            None => false,
            Some(_) => return Err(invalid("`delegatable` must be a boolean")),
        };
        let chain = match obj.remove("delegation_chain") {
            None => Vec::new(),
            Some(Value::Array(items)) => {
                // A chain lists links, each parent carrying its own parents
                // as it was issued: the depth is the number of links, and a
                // parent `depth` levels down may list at most as many fewer.
                // That also bounds the nesting a hostile capability can make
                // us parse.
                if items.len() > MAX_CHAIN_DEPTH.saturating_sub(depth) {
                    return Err(Denied::new(
                        TalosDenial::DelegationInvalid,
                        format!("a delegation chain deeper than {MAX_CHAIN_DEPTH}"),
                    ));
                }
                items
                    .iter()
                    .map(|v| Self::parse_at(v, depth + 1))
                    .collect::<Result<_, _>>()?
            }
            Some(_) => return Err(invalid("`delegation_chain` must be an array")),
        };
        take_str(&mut obj, "signature")?;
        if let Some(extra) = obj.keys().next() {
            return Err(invalid(format!("unknown field `{extra}`")));
        }
        Ok(Self {
            format: Format::Spec,
            id: Some(id),
            issuer,
            subject,
            scope: Scope::parse(&scope_text).map_err(|e| e.to_string()),
            scope_text,
            issued_at,
            expires_at,
            delegatable,
            chain,
            raw: raw.clone(),
            signature_field: "signature",
        })
    }

    /// The object without its signature: what is signed.
    pub fn signed_content(&self) -> Value {
        let mut obj = self.raw.clone();
        obj.remove(self.signature_field);
        Value::Object(obj)
    }

    /// The object as received, signature included.
    pub fn to_value(&self) -> Value {
        Value::Object(self.raw.clone())
    }

    /// Whether `key` signed this capability.
    pub fn signature_valid(&self, key: &VerifyingKey) -> bool {
        let Some(sig) = self
            .raw
            .get(self.signature_field)
            .and_then(Value::as_str)
            .and_then(decode_signature)
        else {
            return false;
        };
        // Each format's own canonical form: never the Python one for the
        // wire format, whose reference writes `1` where Python writes `1.0`.
        let content = self.signed_content();
        if key.verify_strict(&jcs(&content), &sig).is_ok() {
            return true;
        }
        self.format == Format::Spec
            && python_sorted(&content).is_some_and(|bytes| key.verify_strict(&bytes, &sig).is_ok())
    }

    /// `capability_hash` as the TypeScript SDK and the v1 vectors define it:
    /// SHA-256 (hex) of the JCS bytes of the whole token, signature included.
    pub fn capability_hash(&self) -> String {
        hex::encode(Sha256::digest(jcs(&self.to_value())))
    }

    /// SHA-256 (hex) of the signed content only: the Python reference's
    /// `capability_hash`.
    pub fn content_hash(&self) -> String {
        hex::encode(Sha256::digest(jcs(&self.signed_content())))
    }

    /// Whether `hash` names this capability in either definition.
    pub fn has_hash(&self, hash: &str) -> bool {
        hash == self.capability_hash() || hash == self.content_hash()
    }

    /// The IDs revocations may name: the spec `id`, and both hashes.
    pub fn revocation_names(&self) -> Vec<String> {
        let mut names = vec![self.capability_hash(), self.content_hash()];
        names.extend(self.id.clone());
        names
    }
}
