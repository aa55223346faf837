//! One record of the chain, and a seal.

use delegateos::{Keypair, PrincipalId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::AuditError;

/// The `prev` of the first record ever written.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// One line of a segment, as read back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    pub seq: u64,
    /// RFC 3339, UTC, milliseconds.
    pub at: String,
    /// The hash of the record before (or [`GENESIS`]).
    pub prev: String,
    pub event: Value,
    /// The BLAKE2b-256 of the line's bytes before `,"hash":`.
    pub hash: String,
}

/// What follows a line's body: `,"hash":"<64 hex>"}`.
const HASH_PREFIX: &[u8] = b",\"hash\":\"";
const TAIL_LEN: usize = HASH_PREFIX.len() + 64 + 2;

/// A line and its hash: `{"seq":…,"at":…,"prev":…,"event":…,"hash":"…"}`
/// and a newline. The hash covers the exact bytes before `,"hash":`, so
/// verifying needs no canonical form: any changed byte changes it.
pub fn line(
    seq: u64,
    at: &str,
    prev: &str,
    event: impl FnOnce(&mut Vec<u8>) -> serde_json::Result<()>,
) -> Result<(Vec<u8>, String), AuditError> {
    let mut out = Vec::with_capacity(512);
    let text = |e: serde_json::Error| AuditError::Record(e.to_string());
    out.extend_from_slice(b"{\"seq\":");
    out.extend_from_slice(seq.to_string().as_bytes());
    out.extend_from_slice(b",\"at\":");
    serde_json::to_writer(&mut out, at).map_err(text)?;
    out.extend_from_slice(b",\"prev\":");
    serde_json::to_writer(&mut out, prev).map_err(text)?;
    out.extend_from_slice(b",\"event\":");
    event(&mut out).map_err(text)?;
    let hash = hex::encode(delegateos::signing::blake2b256(&out));
    out.extend_from_slice(HASH_PREFIX);
    out.extend_from_slice(hash.as_bytes());
    out.extend_from_slice(b"\"}\n");
    Ok((out, hash))
}

/// The hash a line's bytes (without its newline) give, or `None` when it
/// does not end in a hash member.
pub fn hash_of_line(line: &[u8]) -> Option<String> {
    let body_len = line.len().checked_sub(TAIL_LEN)?;
    let (body, tail) = line.split_at(body_len);
    if !tail.starts_with(HASH_PREFIX) || !tail.ends_with(b"\"}") {
        return None;
    }
    Some(hex::encode(delegateos::signing::blake2b256(body)))
}

impl Record {
    /// This record as its line (what the writer would write for it).
    pub fn to_line(&self) -> Result<(Vec<u8>, String), AuditError> {
        line(self.seq, &self.at, &self.prev, |out| {
            serde_json::to_writer(out, &self.event)
        })
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
