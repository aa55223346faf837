//! The JSON-RPC methods Motebit serves (and gRPC's `CallProtocol`):
//! `motebit/verify` and `motebit/verdict` for anyone, pinning for
//! administrators, and revocation by a grant's delegator or an
//! administrator.

use motebit::receipt::{KnownKeys, Receipt};
use motebit::token::{self, DelegationRevocation};
use motebit::Failure;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{inspect, now_ms, Motebit, REVOCATIONS};
use dgw_core::caller::Caller;
use dgw_core::gatekeeper::{Forbidden, GateError};
use dgw_core::protocol::MethodResult;

fn invalid(e: impl std::fmt::Display) -> GateError {
    GateError::InvalidParams(format!("invalid params: {e}"))
}

fn rejected(f: Failure) -> GateError {
    GateError::Rejected {
        kind: f.reason.as_str().to_owned(),
        detail: f.detail,
    }
}

fn admin_only(caller: &Caller, what: &str) -> Result<String, GateError> {
    if !caller.is_authenticated_admin() {
        return Err(GateError::Forbidden {
            kind: Forbidden::AdminRequired,
            detail: format!("{what} needs an admin token or certificate"),
        });
    }
    Ok(caller.admin_name().unwrap_or_default())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct VerifyParams {
    artifact: Value,
    #[serde(default)]
    known_keys: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VerdictParams {
    /// A corpus case (`{kind, input}`) or a bare receipt or token.
    artifact: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PinParams {
    motebit_id: String,
    #[serde(default)]
    public_key: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RevokeParams {
    #[serde(default)]
    revocation: Option<Value>,
    #[serde(default)]
    token: Option<Value>,
}

pub(super) async fn call(
    m: &Motebit,
    caller: &Caller,
    method: &str,
    params: Value,
) -> MethodResult {
    match method {
        "motebit/verify" => verify(m, params).await,
        "motebit/verdict" => verdict(m, params).await,
        "motebit/pin" => pin(m, caller, params).await,
        "motebit/unpin" => unpin(m, caller, params).await,
        "motebit/revoke" => revoke(m, caller, params).await,
        "motebit/attestation" => attestation(m, params).await,
        "motebit/receipt" => receipt(m, params).await,
        _ => Err(GateError::InvalidParams(format!("{method} is not served"))),
    }
}

/// The keys a report uses: the caller's, then the gateway's (configured
/// delegators', else pins).
async fn keys_for(
    m: &Motebit,
    artifact: &Value,
    given: Option<&Value>,
) -> Result<KnownKeys, GateError> {
    let mut known = match given {
        Some(v) => inspect::known_keys(v).map_err(rejected)?,
        None => KnownKeys::new(),
    };
    let mut ids = Vec::new();
    let receipts: Vec<&Value> = match artifact {
        Value::Array(items) => items.iter().collect(),
        v => vec![v],
    };
    for r in receipts {
        if let Ok(r) = Receipt::from_value(r) {
            inspect::receipt_signers(&r, &mut ids);
        }
    }
    for id in ids {
        if known.contains_key(&id) {
            continue;
        }
        if let Some(key) = m.known_key(&id).await? {
            if let Ok(k) = motebit::encoding::parse_key(&key) {
                known.insert(id, k);
            }
        }
    }
    Ok(known)
}

async fn verify(m: &Motebit, params: Value) -> MethodResult {
    let p: VerifyParams = serde_json::from_value(params).map_err(invalid)?;
    let known = keys_for(m, &p.artifact, p.known_keys.as_ref()).await?;
    let (_, report) = inspect::verify(&p.artifact, &known, now_ms() as f64).map_err(rejected)?;
    Ok(report)
}

async fn verdict(m: &Motebit, params: Value) -> MethodResult {
    let p: VerdictParams = serde_json::from_value(params).map_err(invalid)?;
    // The keys the verdict may use (configured delegators', else pins),
    // read before the pure producer runs.
    let mut pinned = std::collections::BTreeMap::new();
    for field in ["motebit_id", "delegator_id"] {
        let ids = [
            p.artifact.get(field),
            p.artifact.pointer(&format!("/input/receipt/{field}")),
            p.artifact.pointer(&format!("/input/token/{field}")),
        ];
        for id in ids.into_iter().flatten().filter_map(Value::as_str) {
            if let Some(k) = m.known_key(id).await? {
                pinned.insert(id.to_owned(), k);
            }
        }
    }
    let v = inspect::verdict(&p.artifact, now_ms() as f64, &|id| pinned.get(id).cloned())
        .map_err(rejected)?;
    Ok(v.to_json())
}

async fn pin(m: &Motebit, caller: &Caller, params: Value) -> MethodResult {
    let by = admin_only(caller, "pinning a key")?;
    let p: PinParams = serde_json::from_value(params).map_err(invalid)?;
    let key = p
        .public_key
        .ok_or_else(|| GateError::InvalidParams("public_key is required".into()))?;
    motebit::encoding::parse_key(&key).map_err(rejected)?;
    if p.motebit_id.is_empty() || p.motebit_id.len() > 256 {
        return Err(GateError::InvalidParams(
            "motebit_id must be 1 to 256 bytes".into(),
        ));
    }
    let previous = m.pins.pin(&p.motebit_id, &key, &by, now_ms()).await?;
    m.audit(
        "pin",
        json!({"motebit_id": p.motebit_id, "public_key": key, "by": by,
        "previous": previous.as_ref().map(|p| &p.public_key)}),
    )
    .await;
    Ok(json!({"motebit_id": p.motebit_id, "public_key": key,
              "previous": previous.map(|p| json!({"public_key": p.public_key, "severed_by": p.severed_by}))}))
}

async fn unpin(m: &Motebit, caller: &Caller, params: Value) -> MethodResult {
    let by = admin_only(caller, "unpinning a key")?;
    let p: PinParams = serde_json::from_value(params).map_err(invalid)?;
    let removed = m.pins.unpin(&p.motebit_id).await?;
    m.audit("unpin", json!({"motebit_id": p.motebit_id, "by": by}))
        .await;
    Ok(json!({"motebit_id": p.motebit_id, "removed": removed}))
}

/// A grant's delegator revokes it with a signed `DelegationRevocation`
/// (accepted when signed by the key configured or pinned for its
/// delegator); an administrator revokes one delegation token.
async fn revoke(m: &Motebit, caller: &Caller, params: Value) -> MethodResult {
    let p: RevokeParams = serde_json::from_value(params).map_err(invalid)?;
    let (name, record, by) = match (p.revocation, p.token) {
        (Some(r), None) => {
            let rev = DelegationRevocation::from_value(&r).map_err(rejected)?;
            let key = motebit::encoding::parse_key(&rev.delegator_public_key).map_err(rejected)?;
            let configured = m
                .config
                .load()
                .delegators
                .iter()
                .any(|d| d.motebit_id == rev.delegator_id && d.key == key);
            let pinned = m.pins.pinned_key(&rev.delegator_id).await?.as_deref()
                == Some(rev.delegator_public_key.as_str());
            if !(configured || pinned) {
                return Err(GateError::Forbidden {
                    kind: Forbidden::UntrustedRevoker,
                    detail: format!(
                        "{:?} with this key is neither a configured delegator nor pinned",
                        rev.delegator_id
                    ),
                });
            }
            if !rev.revokes(&rev.grant_id, &rev.delegator_public_key) {
                return Err(rejected(Failure::new(
                    motebit::Reason::BadSignature,
                    "the revocation's signature does not verify",
                )));
            }
            (
                format!("{}/{}", rev.delegator_public_key, rev.grant_id),
                r,
                rev.delegator_id,
            )
        }
        (None, Some(t)) => {
            let by = admin_only(caller, "revoking a token without its delegator's signature")?;
            let token = token::DelegationToken::from_value(&t).map_err(rejected)?;
            (
                super::token_name(&token),
                json!({"token": t, "by": format!("admin:{by}")}),
                format!("admin:{by}"),
            )
        }
        _ => {
            return Err(GateError::InvalidParams(
                "give either `revocation` (delegator-signed) or `token` (admins only)".into(),
            ))
        }
    };
    let newly = m.revocations.add_name(REVOCATIONS, &name, record).await?;
    dgw_core::telemetry::record_revocation();
    m.audit("revoke", json!({"revoked": name, "by": by})).await;
    Ok(json!({"revoked": name, "newlyRecorded": newly}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AttestationParams {
    id: String,
}

/// An attestation the gateway made of a verified receipt.
async fn attestation(m: &Motebit, params: Value) -> MethodResult {
    let p: AttestationParams = serde_json::from_value(params).map_err(invalid)?;
    let id = delegateos::AttestationId::parse(&p.id).map_err(invalid)?;
    match m.delegations.attestation(&id).await? {
        Some(a) => Ok(serde_json::to_value(a).map_err(invalid)?),
        None => Err(GateError::NotFound {
            kind: dgw_core::gatekeeper::Missing::Attestation,
            id: p.id,
        }),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReceiptParams {
    attestation: Value,
}

/// A DelegateOS attestation, its signature verified, as a Motebit receipt
/// signed by the gateway (so a Motebit delegator can verify the work of a
/// DelegateOS agent the gateway brokered).
async fn receipt(m: &Motebit, params: Value) -> MethodResult {
    use dgw_core::protocol::Translates;
    let p: ReceiptParams = serde_json::from_value(params).map_err(invalid)?;
    let a: delegateos::Attestation = serde_json::from_value(p.attestation).map_err(invalid)?;
    let body = delegateos::signing::without_signature(&a).map_err(invalid)?;
    delegateos::signing::verify(&a.principal, &body, &a.signature).map_err(|e| {
        GateError::Rejected {
            kind: "signature_invalid".into(),
            detail: format!("the attestation's signature does not verify: {e}"),
        }
    })?;
    m.receipt_of(&a).map_err(|e| GateError::Rejected {
        kind: "untranslatable".into(),
        detail: e.to_string(),
    })
}
