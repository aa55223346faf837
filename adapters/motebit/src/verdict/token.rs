//! The verdict on a delegation token: the reference's
//! `verifyDelegationTokenVerdict` (with its `computeTokenAuthority`,
//! `verifyStandingDelegation`, `findGrantRevocation` and
//! `buildVerdictRepair`), and dgw's verdict on a token without its grant.

use serde_json::{json, Map, Value};

use super::{
    binding, pin_mismatch_repair, signed, Authority, EvidenceRef, IdentityBinding, Integrity,
    Repair, Revocation, RevocationStatus, Subject, TemporalBasis, Verdict, DOCTRINE,
    IDENTITY_DOCTRINE,
};
use crate::js::{self, Member, Prim};

/// Where the reference's producer throws instead of answering (a scope
/// that is not a string where it is split, a revocation set that cannot be
/// iterated, a `null` in it): no verdict, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the reference cannot judge this token: {0}")]
pub struct Unjudged(pub String);

/// How the window is judged: `temporalMode === "ordering"`, or else the
/// wall clock.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    WallClock,
    Ordering,
}

/// The verdict on a delegation token, as a tick of `grant` when given (the
/// reference's `verifyDelegationTokenVerdict`, on any JSON objects, read as
/// its JavaScript reads them); without a grant, a bare token's authority
/// is its own window (dgw's extension, decision 97). `options` as the
/// reference takes them (`revocations`, `revocationFreshness`, `now`,
/// `temporalMode`; anything else ignored); `now` is used when they give
/// none; `pinned`: the key pinned for the delegator, if any.
pub fn delegation_token(
    token: &Map<String, Value>,
    grant: Option<&Map<String, Value>>,
    options: &Value,
    now: f64,
    pinned: Option<&str>,
) -> Result<Verdict, Unjudged> {
    let option = |name: &str| js::get(Some(options), name);
    let clock = Prim::Num(now);
    let now = match option("now") {
        v if js::nullish(v) => clock.clone(),
        v => js::prim(v),
    };
    let mode = if js::is_str(option("temporalMode"), "ordering") {
        Mode::Ordering
    } else {
        Mode::WallClock
    };
    let t = |name: &str| token.get(name);
    let mut evidence = vec![EvidenceRef::of("delegation_token", t("signature"))];
    if let Some(g) = grant {
        evidence.push(EvidenceRef::of("grant", g.get("grant_id")));
    }
    evidence.push(EvidenceRef::of("public_key", t("delegator_public_key")));
    let integrity = if signed(token, js::hex_to_bytes(t("delegator_public_key"))) {
        Integrity::Verified
    } else {
        Integrity::Invalid
    };
    let identity_binding = binding(t("delegator_id"), t("delegator_public_key"), pinned);
    let authority = match grant {
        Some(g) => tick_authority(token, g, &now, &clock, mode)?,
        None if mode == Mode::Ordering => Authority::Valid,
        None => window_authority(token, &now),
    };
    let set = option("revocations").filter(|s| js::truthy(Some(s)));
    let revocation = match set {
        None => Revocation {
            status: RevocationStatus::Unchecked,
            freshness: None,
        },
        Some(set) => {
            let freshness = match option("revocationFreshness") {
                f if js::nullish(f) => json!({"basis": "asserted", "asOf": {}}),
                f => f.cloned().unwrap_or(Value::Null),
            };
            // Without a grant: a revocation of the token's own grant by its
            // delegator's key (no `grant_id`, nothing to revoke).
            let (grant_id, key) = match grant {
                Some(g) => (g.get("grant_id"), g.get("delegator_public_key")),
                None if t("grant_id").is_none() => (None, None),
                None => (t("grant_id"), t("delegator_public_key")),
            };
            let found = if grant.is_none() && grant_id.is_none() {
                None
            } else {
                find_revocation(grant_id, key, set)?
            };
            match found {
                Some(r) => {
                    evidence.push(EvidenceRef::of("revocation", r.get("signature")));
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
        Mode::Ordering => TemporalBasis::Clockless,
        Mode::WallClock => TemporalBasis::LocalClock,
    };
    let repair = repair(integrity, identity_binding, authority, revocation.status);
    Ok(Verdict {
        kind: Subject::DelegationToken,
        integrity,
        identity_binding,
        authority,
        revocation,
        temporal_basis,
        evidence_basis: evidence,
        repair,
    })
}

/// `computeTokenAuthority`: a tick of this grant (grant, parties, scope
/// within the ceiling, lifetime within the maximum), the grant itself valid
/// at the reference instant, then the token's window by the mode.
fn tick_authority(
    token: &Map<String, Value>,
    grant: &Map<String, Value>,
    now: &Prim<'_>,
    clock: &Prim<'_>,
    mode: Mode,
) -> Result<Authority, Unjudged> {
    let t = |n: &str| token.get(n);
    let g = |n: &str| grant.get(n);
    let fits = [
        "grant_id",
        "delegator_id",
        "delegator_public_key",
        "delegate_id",
        "delegate_public_key",
    ]
    .iter()
    .all(|m| js::strict_eq(t(m), g(m)));
    if !fits || !scope_narrowed(g("scope"), t("scope"))? {
        return Ok(Authority::Insufficient);
    }
    let lifetime = js::sub(t("expires_at"), t("issued_at"));
    if js::lt(&js::prim(g("max_token_ttl_ms")), &Prim::Num(lifetime)) {
        return Ok(Authority::Insufficient);
    }
    let reference = match mode {
        Mode::Ordering => match t("not_before") {
            nb if !js::nullish(nb) => js::prim(nb),
            _ if !js::nullish(t("issued_at")) => js::prim(t("issued_at")),
            // `verifyStandingDelegation`'s own `now ?? Date.now()`.
            _ => clock.clone(),
        },
        Mode::WallClock => now.clone(),
    };
    if !grant_valid_at(grant, &reference) {
        return Ok(Authority::Insufficient);
    }
    Ok(match mode {
        Mode::Ordering => Authority::Valid,
        Mode::WallClock => window_authority(token, now),
    })
}

/// `verifyStandingDelegation(grant, { checkExpiry: true, now: at })`
/// without its revocation seam: suite, activation, expiry, signature.
fn grant_valid_at(grant: &Map<String, Value>, at: &Prim<'_>) -> bool {
    let not_before = grant.get("not_before");
    if !js::nullish(not_before) && js::lt(at, &js::prim(not_before)) {
        return false;
    }
    if js::lt(&js::prim(grant.get("expires_at")), at) {
        return false;
    }
    signed(grant, js::hex_to_bytes(grant.get("delegator_public_key")))
}

/// The token's own window at `now`: `not_before` (when present at all)
/// after it is not yet valid, `expires_at` before it expired.
fn window_authority(token: &Map<String, Value>, now: &Prim<'_>) -> Authority {
    let not_before = token.get("not_before");
    if not_before.is_some() && js::lt(now, &js::prim(not_before)) {
        Authority::NotYetValid
    } else if js::lt(&js::prim(token.get("expires_at")), now) {
        Authority::Expired
    } else {
        Authority::Valid
    }
}

/// `isScopeNarrowed(parent, child)`: each a comma-separated set, items
/// trimmed, `*` a wildcard; the reference throws on a scope that is not a
/// string (unless it is exactly `"*"`, read before splitting).
fn scope_narrowed(parent: Member<'_>, child: Member<'_>) -> Result<bool, Unjudged> {
    let set = |scope: Member<'_>, which: &str| -> Result<Vec<String>, Unjudged> {
        let s = scope.and_then(Value::as_str).ok_or_else(|| {
            Unjudged(format!(
                "the {which} scope is not a string (the reference splits it)"
            ))
        })?;
        if s == "*" {
            return Ok(vec!["*".into()]);
        }
        Ok(s.split(',')
            .map(js::trim)
            .filter(|i| !i.is_empty())
            .map(str::to_owned)
            .collect())
    };
    let parent = set(parent, "grant's")?;
    let child = set(child, "token's")?;
    if parent.iter().any(|p| p == "*") {
        return Ok(true);
    }
    if child.iter().any(|c| c == "*") {
        return Ok(false);
    }
    Ok(child.iter().all(|c| parent.contains(c)))
}

/// `findGrantRevocation({grant_id, delegator_public_key}, set)`: the first
/// revocation naming the grant, by its delegator's key, whose signature
/// verifies. `set` is iterated as JavaScript iterates it (an array's
/// elements, a string's characters, which never revoke); anything else,
/// and a `null` element, make the reference throw.
fn find_revocation<'a>(
    grant_id: Member<'_>,
    key: Member<'_>,
    set: &'a Value,
) -> Result<Option<&'a Map<String, Value>>, Unjudged> {
    let items = match set {
        Value::Array(items) => items,
        Value::String(_) => return Ok(None),
        _ => return Err(Unjudged("the revocations are not iterable".into())),
    };
    for item in items {
        let rev = match item {
            Value::Null => {
                return Err(Unjudged("a revocation in the set is null".into()));
            }
            Value::Object(rev) => rev,
            // A primitive's members are undefined: its suite is not the suite.
            _ => continue,
        };
        if js::strict_eq(rev.get("grant_id"), grant_id)
            && js::strict_eq(rev.get("delegator_public_key"), key)
            && signed(rev, js::hex_to_bytes(rev.get("delegator_public_key")))
        {
            return Ok(Some(rev));
        }
    }
    Ok(None)
}

/// `buildVerdictRepair`: the first failing axis, in order integrity,
/// identity, authority, revocation (a pin mismatch is dgw's own repair).
fn repair(
    integrity: Integrity,
    identity: IdentityBinding,
    authority: Authority,
    revocation: RevocationStatus,
) -> Option<Repair> {
    if integrity == Integrity::Invalid {
        return Some(Repair {
            code: "integrity.signature_invalid".into(),
            axis: "integrity".into(),
            summary: "Ed25519 signature did not verify over the artifact's canonical bytes.".into(),
            canonical: Some(DOCTRINE.into()),
            fix: "Re-fetch the authentic artifact; do not trust this copy.".into(),
        });
    }
    if identity == IdentityBinding::Invalid {
        return Some(pin_mismatch_repair());
    }
    if identity == IdentityBinding::Unverified {
        return Some(Repair {
            code: "identity.binding_unverified".into(),
            axis: "identityBinding".into(),
            summary: "Signature verifies, but the key-to-motebit_id binding is NOT established.".into(),
            canonical: Some(IDENTITY_DOCTRINE.into()),
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
            axis: "authority".into(),
            summary: format!("Authority is \"{name}\", not \"valid\" — the token does not currently confer the authority it claims."),
            canonical: Some("spec/standing-delegation-v1.md".into()),
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
        axis: "revocation".into(),
        summary: summary.into(),
        canonical: Some(DOCTRINE.into()),
        fix: fix.into(),
    })
}
