//! The `VerificationVerdict` (spec/conformance/verification-verdict/): what
//! each axis of a receipt or delegation token established, never a bare
//! boolean. The producers follow the reference's `verifyReceiptVerdict` and
//! `verifyDelegationTokenVerdict` rule for rule, so that any artifact (not
//! only the corpus's) gets the verdict the reference gives it; a pinned key
//! (dgw's key pinning) is the one input the reference lacks, and raises
//! `identityBinding` to `pinned` (or `invalid` on a mismatch).

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::encoding;
use crate::identity;
use crate::receipt::Receipt;
use crate::token::{find_revocation, DelegationRevocation, DelegationToken, StandingDelegation};

/// Whether the signature (and, for receipts, the hash binding) holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Integrity {
    /// It holds.
    Verified,
    /// It does not.
    Invalid,
}

/// How strongly the signer's key is bound to its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IdentityBinding {
    /// The id commits to the key by itself.
    Sovereign,
    /// A transparency proof binds them (dgw never reports it: it holds none).
    Anchored,
    /// The key is the one pinned for the id.
    Pinned,
    /// Nothing binds them.
    Unverified,
    /// The key is not the one pinned for the id.
    Invalid,
}

/// Whether a token confers the authority it claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Authority {
    /// It does.
    Valid,
    /// Its window has passed.
    Expired,
    /// Its window has not started.
    NotYetValid,
    /// It is not a valid tick of its grant.
    Insufficient,
    /// Nothing to judge it by (a receipt).
    Unknown,
}

/// The revocation axis's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RevocationStatus {
    /// A revocation set was consulted and names nothing.
    Fresh,
    /// The set is older than tolerated.
    Stale,
    /// No set was consulted.
    Unchecked,
    /// Revoked.
    Revoked,
}

/// The revocation axis.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Revocation {
    /// What was found.
    pub status: RevocationStatus,
    /// The consulted set's basis and age, as the caller described it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub freshness: Option<Value>,
}

/// What time the authority was judged by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TemporalBasis {
    /// Ordering alone: no clock consulted.
    Clockless,
    /// The verifier's clock.
    LocalClock,
    /// A ledger's time.
    LedgerAnchored,
}

/// One piece of evidence the verdict rests on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvidenceRef {
    /// What it is.
    pub kind: &'static str,
    /// Which one.
    #[serde(rename = "ref")]
    pub reference: String,
}

/// What to do about the first failing axis.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Repair {
    /// `<axis>.<cause>`.
    pub code: String,
    /// The axis.
    pub axis: &'static str,
    /// What failed.
    pub summary: String,
    /// Where the rule is written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canonical: Option<&'static str>,
    /// What to do.
    pub fix: String,
}

/// A verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// `receipt` or `delegation_token`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The signature axis.
    pub integrity: Integrity,
    /// The key-to-id axis.
    pub identity_binding: IdentityBinding,
    /// The authority axis.
    pub authority: Authority,
    /// The revocation axis.
    pub revocation: Revocation,
    /// The clock the authority was judged by.
    pub temporal_basis: TemporalBasis,
    /// What it rests on.
    pub evidence_basis: Vec<EvidenceRef>,
    /// The first failing axis's repair.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repair: Option<Repair>,
}

impl Verdict {
    /// As JSON.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The reference's `isFullyVerified`: every load-bearing axis passes.
    pub fn is_fully_verified(&self) -> bool {
        self.integrity == Integrity::Verified
            && matches!(
                self.identity_binding,
                IdentityBinding::Sovereign | IdentityBinding::Anchored | IdentityBinding::Pinned
            )
            && self.authority == Authority::Valid
            && self.revocation.status == RevocationStatus::Fresh
    }
}

const DOCTRINE: &str = "docs/doctrine/verify-family-fail-closed.md";
const IDENTITY_DOCTRINE: &str = "docs/doctrine/identity-binding-verification.md";

/// The binding of `id` to the key written `key_hex`: a pin decides when
/// there is one; else sovereign or unverified.
fn binding(id: &str, key_hex: &str, pinned: Option<&str>) -> IdentityBinding {
    match pinned {
        Some(pin) if pin == key_hex => IdentityBinding::Pinned,
        Some(_) => IdentityBinding::Invalid,
        None => match encoding::any_case_hex32(key_hex) {
            Some(bytes) if !id.is_empty() && identity::is_sovereign_bytes(id, &bytes) => {
                IdentityBinding::Sovereign
            }
            _ => IdentityBinding::Unverified,
        },
    }
}

fn pin_mismatch_repair() -> Repair {
    Repair {
        code: "identity.key_mismatch".into(),
        axis: "identityBinding",
        summary: "The key is not the one pinned for this motebit_id.".into(),
        canonical: Some(IDENTITY_DOCTRINE),
        fix: "Treat the artifact as an impersonation until an administrator re-pins the key (dgw motebit pin).".into(),
    }
}

/// The verdict on a receipt (the reference's `verifyReceiptVerdict`);
/// `pinned`: the key pinned for its `motebit_id`, if any.
pub fn receipt(receipt: &Receipt, pinned: Option<&str>) -> Verdict {
    let mut evidence = Vec::new();
    // The reference takes a key written as 64 hex digits (either case); any
    // other length is no key.
    let key_hex = receipt.public_key.as_deref().filter(|k| !k.is_empty());
    if let Some(k) = key_hex {
        evidence.push(EvidenceRef {
            kind: "public_key",
            reference: k.to_owned(),
        });
    }
    evidence.push(EvidenceRef {
        kind: "receipt",
        reference: receipt.result_hash.clone(),
    });
    let has_key = key_hex.is_some_and(|k| k.len() == 64);
    let integrity_repair = if !has_key {
        Some(Repair {
            code: "integrity.no_key".into(),
            axis: "integrity",
            summary: "Receipt has no usable embedded public_key to verify against.".into(),
            canonical: Some(DOCTRINE),
            fix: "Obtain the receipt with its embedded `public_key` (hex), or supply the signer's key out of band.".into(),
        })
    } else if !key_hex
        .and_then(encoding::lenient_key)
        .is_some_and(|k| receipt.signature_verifies(&k))
    {
        Some(Repair {
            code: "integrity.signature_invalid".into(),
            axis: "integrity",
            summary: "Ed25519 signature did not verify over the receipt's canonical bytes.".into(),
            canonical: Some(DOCTRINE),
            fix: "The receipt was tampered or signed by a different key — re-fetch the authentic receipt; do not trust this copy.".into(),
        })
    } else if !receipt.result_hash_binds() {
        Some(Repair {
            code: "integrity.hash_inconsistent".into(),
            axis: "integrity",
            summary: "Signature verifies, but result_hash != hex(SHA-256(result)) — a valid signature over a self-inconsistent receipt; the digest does not bind the result.".into(),
            canonical: Some("the receipt's result_hash field (recompute hex(SHA-256(result)))"),
            fix: "result_hash MUST equal hex(SHA-256(result)). The signer committed an inconsistent digest — reject the receipt; never trust result_hash as a content address for the result.".into(),
        })
    } else {
        None
    };
    let integrity = if integrity_repair.is_some() {
        Integrity::Invalid
    } else {
        Integrity::Verified
    };
    let identity_binding = match key_hex.filter(|_| has_key) {
        Some(k) => binding(&receipt.motebit_id, k, pinned),
        None => IdentityBinding::Unverified,
    };
    let repair = integrity_repair.or_else(|| match identity_binding {
        IdentityBinding::Unverified => Some(Repair {
            code: "identity.binding_unverified".into(),
            axis: "identityBinding",
            summary: "Signature verifies, but the key-to-motebit_id binding is NOT established (integrity only).".into(),
            canonical: Some(IDENTITY_DOCTRINE),
            fix: "The motebit_id does not commit to this key (not sovereign). Establish a higher rung — supply an identity file / known-keys map (pinned) or a transparency-log inclusion proof (anchored) — before treating this as identity-verified.".into(),
        }),
        IdentityBinding::Invalid => Some(pin_mismatch_repair()),
        _ => None,
    });
    Verdict {
        kind: "receipt",
        integrity,
        identity_binding,
        authority: Authority::Unknown,
        revocation: Revocation {
            status: RevocationStatus::Unchecked,
            freshness: None,
        },
        temporal_basis: TemporalBasis::Clockless,
        evidence_basis: evidence,
        repair,
    }
}

/// How a token's window is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TemporalMode {
    /// Against the verifier's clock.
    #[default]
    WallClock,
    /// By the token's own slot: the clock is not consulted.
    Ordering,
}

/// The options of a token verdict, as the corpus writes them.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenOptions {
    /// The revocation set held (absent: not consulted).
    #[serde(default)]
    pub revocations: Option<Vec<Value>>,
    /// What the holder says of the set's age (absent: asserted, unknown age).
    #[serde(default)]
    pub revocation_freshness: Option<Value>,
    /// The verifier's clock, epoch ms (absent: the caller's now).
    #[serde(default)]
    pub now: Option<f64>,
    /// How the window is judged.
    #[serde(default)]
    pub temporal_mode: Option<TemporalMode>,
}

/// The authority of `token` as a tick of `grant` (revocation aside).
fn tick_authority(
    token: &DelegationToken,
    grant: &StandingDelegation,
    now: f64,
    mode: TemporalMode,
) -> Authority {
    if !grant.fits(token) {
        return Authority::Insufficient;
    }
    let reference = match mode {
        TemporalMode::Ordering => token.not_before.unwrap_or(token.issued_at),
        TemporalMode::WallClock => now,
    };
    if !grant.valid_at(reference) {
        return Authority::Insufficient;
    }
    match mode {
        TemporalMode::Ordering => Authority::Valid,
        TemporalMode::WallClock => window_authority(token, now),
    }
}

fn window_authority(token: &DelegationToken, now: f64) -> Authority {
    if token.not_before.is_some_and(|nb| now < nb) {
        Authority::NotYetValid
    } else if token.expires_at < now {
        Authority::Expired
    } else {
        Authority::Valid
    }
}

fn token_repair(
    integrity: Integrity,
    identity: IdentityBinding,
    authority: Authority,
    revocation: RevocationStatus,
) -> Option<Repair> {
    if integrity == Integrity::Invalid {
        return Some(Repair {
            code: "integrity.signature_invalid".into(),
            axis: "integrity",
            summary: "Ed25519 signature did not verify over the artifact's canonical bytes.".into(),
            canonical: Some(DOCTRINE),
            fix: "Re-fetch the authentic artifact; do not trust this copy.".into(),
        });
    }
    if identity == IdentityBinding::Invalid {
        return Some(pin_mismatch_repair());
    }
    if identity == IdentityBinding::Unverified {
        return Some(Repair {
            code: "identity.binding_unverified".into(),
            axis: "identityBinding",
            summary: "Signature verifies, but the key-to-motebit_id binding is NOT established.".into(),
            canonical: Some(IDENTITY_DOCTRINE),
            fix: "Establish a higher rung — supply an identity file / known-keys map (pinned) or a transparency-log inclusion proof (anchored) — before treating this as identity-verified.".into(),
        });
    }
    if authority != Authority::Valid {
        let name = serde_json::to_value(authority)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let fix = match authority {
            Authority::NotYetValid => "The token's activation window has not started under this temporal basis — do not act until its slot; if you judge validity by ordering, set temporalMode: 'ordering'.",
            Authority::Expired => "The token's validity window has passed — mint a fresh tick under the grant.",
            _ => "The token is not a valid tick of this grant (scope/parties/TTL/grant). Re-mint within the grant's ceiling.",
        };
        return Some(Repair {
            code: format!("authority.{name}"),
            axis: "authority",
            summary: format!("Authority is \"{name}\", not \"valid\" — the token does not currently confer the authority it claims."),
            canonical: Some("spec/standing-delegation-v1.md"),
            fix: fix.into(),
        });
    }
    let (code, summary, fix) = match revocation {
        RevocationStatus::Fresh => return None,
        RevocationStatus::Revoked => ("revoked", "The standing grant behind this token is REVOKED — every tick minted under it is dead authority.", "Reject this token and every token minted under the grant; the only safe action is to stop."),
        RevocationStatus::Unchecked => ("unchecked", "Revocation was not checked — no revocation set was supplied.", "Supply the revocation set (build the isRevoked seam via findGrantRevocation) and re-verify."),
        RevocationStatus::Stale => ("stale", "The revocation set is stale beyond the accepted tolerance.", "Obtain a fresher revocation set (a newer ledger root or stapled freshness proof) and re-verify."),
    };
    Some(Repair {
        code: format!("revocation.{code}"),
        axis: "revocation",
        summary: summary.into(),
        canonical: Some(DOCTRINE),
        fix: fix.into(),
    })
}

/// The verdict on a delegation token, as a tick of `grant` when given (the
/// reference's `verifyDelegationTokenVerdict`); without a grant, a bare
/// token's authority is its own window (dgw's extension, in
/// docs/adapters/motebit.md). `now` is used when the options give none;
/// `pinned`: the key pinned for the delegator, if any.
pub fn delegation_token(
    token: &DelegationToken,
    grant: Option<&StandingDelegation>,
    options: &TokenOptions,
    now: f64,
    pinned: Option<&str>,
) -> Verdict {
    let now = options.now.unwrap_or(now);
    let mode = options.temporal_mode.unwrap_or_default();
    let mut evidence = vec![EvidenceRef {
        kind: "delegation_token",
        reference: token.signature.clone(),
    }];
    if let Some(g) = grant {
        evidence.push(EvidenceRef {
            kind: "grant",
            reference: g.grant_id.clone(),
        });
    }
    evidence.push(EvidenceRef {
        kind: "public_key",
        reference: token.delegator_public_key.clone(),
    });
    let integrity = if token.signature_verifies() {
        Integrity::Verified
    } else {
        Integrity::Invalid
    };
    let identity_binding = binding(&token.delegator_id, &token.delegator_public_key, pinned);
    let authority = match grant {
        Some(g) => tick_authority(token, g, now, mode),
        None if mode == TemporalMode::Ordering => Authority::Valid,
        None => window_authority(token, now),
    };
    let revocation = match &options.revocations {
        None => Revocation {
            status: RevocationStatus::Unchecked,
            freshness: None,
        },
        Some(set) => {
            let set: Vec<DelegationRevocation> = set
                .iter()
                .filter_map(|r| DelegationRevocation::from_value(r).ok())
                .collect();
            let freshness = options
                .revocation_freshness
                .clone()
                .unwrap_or_else(|| json!({"basis": "asserted", "asOf": {}}));
            let found = match grant {
                Some(g) => find_revocation(g, &set),
                None => token.grant_id.as_deref().and_then(|id| {
                    set.iter()
                        .find(|r| r.revokes(id, &token.delegator_public_key))
                }),
            };
            match found {
                Some(r) => {
                    evidence.push(EvidenceRef {
                        kind: "revocation",
                        reference: r.signature.clone(),
                    });
                    Revocation {
                        status: RevocationStatus::Revoked,
                        freshness: Some(freshness),
                    }
                }
                None => Revocation {
                    status: RevocationStatus::Fresh,
                    freshness: Some(freshness),
                },
            }
        }
    };
    let temporal_basis = match mode {
        TemporalMode::Ordering => TemporalBasis::Clockless,
        TemporalMode::WallClock => TemporalBasis::LocalClock,
    };
    let repair = token_repair(integrity, identity_binding, authority, revocation.status);
    Verdict {
        kind: "delegation_token",
        integrity,
        identity_binding,
        authority,
        revocation,
        temporal_basis,
        evidence_basis: evidence,
        repair,
    }
}
