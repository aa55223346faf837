//! One record of the chain, and a seal.

use delegateos::{Keypair, PrincipalId};
use dgw_core::state::AuditAnchor;
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
    let hash = write_line(&mut out, seq, at, prev, event)?;
    Ok((out, String::from_utf8_lossy(&hash).into_owned()))
}

/// [`line`] into `out` (cleared first; the writer keeps one buffer for
/// every line), answering the hash as hex: each record is serialized once,
/// and what was serialized is what is hashed.
pub fn write_line(
    out: &mut Vec<u8>,
    seq: u64,
    at: &str,
    prev: &str,
    event: impl FnOnce(&mut Vec<u8>) -> serde_json::Result<()>,
) -> Result<[u8; 64], AuditError> {
    let text = |e: serde_json::Error| AuditError::Record(e.to_string());
    out.clear();
    out.extend_from_slice(b"{\"seq\":");
    serde_json::to_writer(&mut *out, &seq).map_err(text)?;
    out.extend_from_slice(b",\"at\":");
    serde_json::to_writer(&mut *out, at).map_err(text)?;
    out.extend_from_slice(b",\"prev\":");
    serde_json::to_writer(&mut *out, prev).map_err(text)?;
    out.extend_from_slice(b",\"event\":");
    event(out).map_err(text)?;
    let mut hash = [0u8; 64];
    hex::encode_to_slice(delegateos::signing::blake2b256(out), &mut hash)
        .map_err(|e| AuditError::Record(e.to_string()))?;
    out.extend_from_slice(HASH_PREFIX);
    out.extend_from_slice(&hash);
    out.extend_from_slice(b"\"}\n");
    Ok(hash)
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
/// `head`; it covers the records `from..=through` (none when `from` is
/// `through + 1`: a shutdown seal with nothing new), and names the seal
/// before it, so a seal removed from the chain is a gap `verify` names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seal {
    pub from: u64,
    pub through: u64,
    pub head: String,
    /// The seal before it (its record's `seq` and hash); `None` for the
    /// log's first. Not in a v1 seal.
    #[serde(default)]
    pub previous: Option<AuditAnchor>,
    /// Why it was written; `None`: a v1 seal (before issue 30), which
    /// names neither its kind nor the seal before it.
    #[serde(default)]
    pub kind: Option<SealKind>,
    pub gateway: PrincipalId,
    pub signature: String,
}

/// Why a seal was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SealKind {
    /// Every `seal_interval` (and on a flush).
    Interval,
    /// At start, over what a gateway that did not stop cleanly left
    /// unsealed (after the `recovered` record saying how much).
    Recovery,
    /// At a clean stop: a log at rest ends with one.
    Shutdown,
}

impl SealKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SealKind::Interval => "interval",
            SealKind::Recovery => "recovery",
            SealKind::Shutdown => "shutdown",
        }
    }
}

/// What a v1 seal signs.
#[derive(Serialize)]
struct SealedV1<'a> {
    purpose: &'static str,
    from: u64,
    through: u64,
    head: &'a str,
    gateway: &'a PrincipalId,
}

/// What a seal signs.
#[derive(Serialize)]
struct Sealed<'a> {
    purpose: &'static str,
    from: u64,
    through: u64,
    head: &'a str,
    previous: Option<&'a AuditAnchor>,
    kind: SealKind,
    gateway: &'a PrincipalId,
}

const PURPOSE_V1: &str = "dgw-audit-seal-v1";
const PURPOSE: &str = "dgw-audit-seal-v2";

impl Seal {
    /// Signs the chain `from..=through` ending in `head`, after the seal
    /// `previous`.
    pub fn sign(
        key: &Keypair,
        from: u64,
        through: u64,
        head: &str,
        previous: Option<&AuditAnchor>,
        kind: SealKind,
    ) -> Result<Self, AuditError> {
        let gateway = key.principal_id().clone();
        let signature = delegateos::signing::sign(
            key,
            &Sealed {
                purpose: PURPOSE,
                from,
                through,
                head,
                previous,
                kind,
                gateway: &gateway,
            },
        )
        .map_err(|e| AuditError::Record(e.to_string()))?;
        Ok(Self {
            from,
            through,
            head: head.to_owned(),
            previous: previous.cloned(),
            kind: Some(kind),
            gateway,
            signature,
        })
    }

    /// Whether `gateway` signed it.
    pub fn verify(&self, gateway: &PrincipalId) -> bool {
        if &self.gateway != gateway {
            return false;
        }
        let checked = match self.kind {
            Some(kind) => delegateos::signing::verify(
                gateway,
                &Sealed {
                    purpose: PURPOSE,
                    from: self.from,
                    through: self.through,
                    head: &self.head,
                    previous: self.previous.as_ref(),
                    kind,
                    gateway: &self.gateway,
                },
                &self.signature,
            ),
            // A v1 seal names no seal before it.
            None if self.previous.is_none() => delegateos::signing::verify(
                gateway,
                &SealedV1 {
                    purpose: PURPOSE_V1,
                    from: self.from,
                    through: self.through,
                    head: &self.head,
                    gateway: &self.gateway,
                },
                &self.signature,
            ),
            None => return false,
        };
        checked.is_ok()
    }
}

/// `now` to the millisecond, as a record's `at`.
fn format_ms(now: time::OffsetDateTime) -> String {
    let ms = now.millisecond();
    let now = now
        .replace_nanosecond(u32::from(ms) * 1_000_000)
        .unwrap_or(now);
    now.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// The writer's clock: a record's `at` formatted once per millisecond,
/// not once per record (the records of a batch mostly share one).
#[derive(Default)]
pub(crate) struct Clock {
    ms: i128,
    text: String,
}

impl Clock {
    /// Now, as a record's `at`.
    pub(crate) fn now(&mut self) -> &str {
        let now = time::OffsetDateTime::now_utc();
        let ms = now.unix_timestamp_nanos() / 1_000_000;
        if ms != self.ms || self.text.is_empty() {
            self.ms = ms;
            self.text = format_ms(now);
        }
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log written before seals named their kind and predecessor still
    /// verifies (an upgrade keeps the chain); a v1 signature does not pass
    /// for a v2 seal, nor the reverse.
    #[test]
    fn v1_seals_still_verify_and_do_not_pass_for_v2() {
        let key = Keypair::from_seed([3; 32]);
        let gateway = key.principal_id().clone();
        let head = "ab".repeat(32);
        let signature = delegateos::signing::sign(
            &key,
            &SealedV1 {
                purpose: PURPOSE_V1,
                from: 0,
                through: 4,
                head: &head,
                gateway: &gateway,
            },
        )
        .unwrap();
        let v1: Seal = serde_json::from_value(serde_json::json!({
            "from": 0, "through": 4, "head": head, "gateway": gateway, "signature": signature
        }))
        .unwrap();
        assert!(v1.verify(&gateway));
        let as_v2 = Seal {
            kind: Some(SealKind::Interval),
            ..v1.clone()
        };
        assert!(!as_v2.verify(&gateway));
        let v2 = Seal::sign(&key, 0, 4, &head, None, SealKind::Shutdown).unwrap();
        assert!(v2.verify(&gateway));
        let stripped = Seal { kind: None, ..v2 };
        assert!(!stripped.verify(&gateway));
    }
}
