//! One record of the chain, and a seal.

use delegateos::{Keypair, PrincipalId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::AuditError;

/// The `prev` of the first record ever written.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// One line of a segment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    pub seq: u64,
    /// RFC 3339, UTC, milliseconds.
    pub at: String,
    /// The hash of the record before (or [`GENESIS`]).
    pub prev: String,
    pub event: Value,
    /// The hash of this record's other members.
    pub hash: String,
}

/// What a record's hash covers.
#[derive(Serialize)]
struct Hashed<'a> {
    seq: u64,
    at: &'a str,
    prev: &'a str,
    event: &'a Value,
}

impl Record {
    /// A record of `event` after `prev`, hashed.
    pub fn new(seq: u64, at: String, prev: String, event: Value) -> Result<Self, AuditError> {
        let mut r = Self {
            seq,
            at,
            prev,
            event,
            hash: String::new(),
        };
        r.hash = r.expected_hash()?;
        Ok(r)
    }

    /// The hash its content has (equal to `hash` unless it was changed).
    pub fn expected_hash(&self) -> Result<String, AuditError> {
        let digest = delegateos::signing::digest(&Hashed {
            seq: self.seq,
            at: &self.at,
            prev: &self.prev,
            event: &self.event,
        })
        .map_err(|e| AuditError::Record(e.to_string()))?;
        Ok(hex::encode(digest))
    }

    /// The seal this record holds, if it is one.
    pub fn seal(&self) -> Option<Result<Seal, AuditError>> {
        let seal = self.event.get("seal")?;
        Some(serde_json::from_value(seal.clone()).map_err(|e| AuditError::Record(e.to_string())))
    }

    /// The time it was written, as Unix milliseconds (`None`: unreadable).
    pub fn at_ms(&self) -> Option<i128> {
        time::OffsetDateTime::parse(&self.at, &time::format_description::well_known::Rfc3339)
            .ok()
            .map(|t| t.unix_timestamp_nanos() / 1_000_000)
    }
}

/// The gateway's signature over the chain up to `through`, whose hash is
/// `head`; it covers the records `from..=through`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seal {
    pub from: u64,
    pub through: u64,
    pub head: String,
    pub gateway: PrincipalId,
    pub signature: String,
}

/// What a seal signs.
#[derive(Serialize)]
struct Sealed<'a> {
    purpose: &'static str,
    from: u64,
    through: u64,
    head: &'a str,
    gateway: &'a PrincipalId,
}

const PURPOSE: &str = "dgw-audit-seal-v1";

impl Seal {
    /// Signs the chain `from..=through` ending in `head`.
    pub fn sign(key: &Keypair, from: u64, through: u64, head: &str) -> Result<Self, AuditError> {
        let gateway = key.principal_id().clone();
        let signature = delegateos::signing::sign(
            key,
            &Sealed {
                purpose: PURPOSE,
                from,
                through,
                head,
                gateway: &gateway,
            },
        )
        .map_err(|e| AuditError::Record(e.to_string()))?;
        Ok(Self {
            from,
            through,
            head: head.to_owned(),
            gateway,
            signature,
        })
    }

    /// Whether `gateway` signed it.
    pub fn verify(&self, gateway: &PrincipalId) -> bool {
        &self.gateway == gateway
            && delegateos::signing::verify(
                gateway,
                &Sealed {
                    purpose: PURPOSE,
                    from: self.from,
                    through: self.through,
                    head: &self.head,
                    gateway: &self.gateway,
                },
                &self.signature,
            )
            .is_ok()
    }
}

/// Now, as a record's `at`.
pub(crate) fn now_text() -> String {
    let now = time::OffsetDateTime::now_utc();
    let ms = now.millisecond();
    let now = now
        .replace_nanosecond(u32::from(ms) * 1_000_000)
        .unwrap_or(now);
    now.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}
