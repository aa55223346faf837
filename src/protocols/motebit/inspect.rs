//! `verify` and `verdict` over any Motebit artifact, for the CLI (`dgw
//! motebit verify|verdict`) and JSON-RPC (`motebit/verify|verdict`): what
//! the artifact is, read from its members, and the report.

use motebit::receipt::{self, KnownKeys, Receipt};
use motebit::token::{self, DelegationToken, StandingDelegation};
use motebit::verdict::{self, TokenOptions, Verdict};
use motebit::{Failure, Reason};
use serde_json::{json, Value};

/// What an artifact is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An execution receipt (with nested receipts).
    Receipt,
    /// A delegation token.
    Token,
    /// Delegation tokens, root first.
    TokenChain,
    /// Execution receipts in order.
    Sequence,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Receipt => "receipt",
            Kind::Token => "delegation_token",
            Kind::TokenChain => "delegation_chain",
            Kind::Sequence => "receipt_sequence",
        }
    }
}

/// What `artifact` is, by the members it has.
pub fn kind_of(artifact: &Value) -> Result<Kind, Failure> {
    let object_kind = |v: &Value| {
        if v.get("task_id").is_some() {
            Some(Kind::Receipt)
        } else if v.get("delegator_id").is_some() {
            Some(Kind::Token)
        } else {
            None
        }
    };
    match artifact {
        Value::Array(items) => match items.first().and_then(object_kind) {
            Some(Kind::Receipt) => Ok(Kind::Sequence),
            Some(_) => Ok(Kind::TokenChain),
            None => Err(Failure::malformed(
                "an array must hold receipts or delegation tokens",
            )),
        },
        v => object_kind(v).ok_or_else(|| {
            Failure::malformed("not a Motebit receipt (task_id) or delegation token (delegator_id)")
        }),
    }
}

/// Known keys as `{motebit_id: hex}`.
pub fn known_keys(value: &Value) -> Result<KnownKeys, Failure> {
    let Value::Object(map) = value else {
        return Err(Failure::malformed(
            "known keys must be an object {motebit_id: public_key}",
        ));
    };
    map.iter()
        .map(|(id, k)| {
            let k = k
                .as_str()
                .ok_or_else(|| Failure::malformed(format!("the key of {id:?} is not a string")))?;
            Ok((id.clone(), motebit::encoding::parse_key(k)?))
        })
        .collect()
}

/// Every `motebit_id` of a receipt tree.
pub fn receipt_signers(r: &Receipt, out: &mut Vec<String>) {
    out.push(r.motebit_id.clone());
    for d in &r.delegations {
        receipt_signers(d, out);
    }
}

/// The gateway's acceptance of `artifact` at `now` (epoch ms), with
/// `known` keys first: `(verified, report)`.
pub fn verify(artifact: &Value, known: &KnownKeys, now: f64) -> Result<(bool, Value), Failure> {
    let kind = kind_of(artifact)?;
    let (ok, detail) = match kind {
        Kind::Receipt => {
            let r = Receipt::from_value(artifact)?;
            let report = receipt::verify_chain(&r, known);
            (report.verified(), report.to_json())
        }
        Kind::Token | Kind::TokenChain => {
            let chain = token::chain_from_value(artifact)?;
            match token::verify_chain(&chain, now) {
                Ok(()) => (true, json!({"tokens": chain.len()})),
                Err((i, f)) => (
                    false,
                    json!({"tokens": chain.len(), "index": i,
                    "error": {"type": f.reason.as_str(), "message": f.detail}}),
                ),
            }
        }
        Kind::Sequence => {
            let items = artifact.as_array().map(Vec::as_slice).unwrap_or_default();
            let mut entries = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let r = Receipt::from_value(item)?;
                let key = match known.get(&r.motebit_id) {
                    Some(k) => *k,
                    None => r.embedded_key().map_err(|f| {
                        Failure::new(f.reason, format!("receipt {i}: {}", f.detail))
                    })?,
                };
                entries.push((r, key));
            }
            match receipt::verify_sequence(&entries) {
                Ok(()) => (true, json!({"receipts": entries.len()})),
                Err((i, f)) => (
                    false,
                    json!({"receipts": entries.len(), "index": i,
                    "error": {"type": f.reason.as_str(), "message": f.detail}}),
                ),
            }
        }
    };
    Ok((
        ok,
        json!({"kind": kind.as_str(), "verified": ok, "report": detail}),
    ))
}

/// The verdict of a corpus case (`{kind, input}`) or a bare receipt or
/// token, at `now` (epoch ms) unless the case gives its own; `pinned`
/// answers the pinned key of an ID.
pub fn verdict(
    input: &Value,
    now: f64,
    pinned: &dyn Fn(&str) -> Option<String>,
) -> Result<Verdict, Failure> {
    if let (Some(kind), Some(inner)) = (
        input.get("kind").and_then(Value::as_str),
        input.get("input"),
    ) {
        return match kind {
            "receipt" => {
                let r = Receipt::from_value(inner.get("receipt").unwrap_or(&Value::Null))?;
                Ok(verdict::receipt(&r, pinned(&r.motebit_id).as_deref()))
            }
            "delegation_token" => {
                let t = DelegationToken::from_value(inner.get("token").unwrap_or(&Value::Null))?;
                let grant = match inner.get("grant") {
                    Some(g) if !g.is_null() => Some(StandingDelegation::from_value(g)?),
                    _ => None,
                };
                let options: TokenOptions = match inner.get("options") {
                    Some(o) if !o.is_null() => serde_json::from_value(o.clone())
                        .map_err(|e| Failure::malformed(format!("options: {e}")))?,
                    _ => TokenOptions::default(),
                };
                Ok(verdict::delegation_token(
                    &t,
                    grant.as_ref(),
                    &options,
                    now,
                    pinned(&t.delegator_id).as_deref(),
                ))
            }
            other => Err(Failure::new(
                Reason::Malformed,
                format!("unknown case kind {other:?}"),
            )),
        };
    }
    match kind_of(input)? {
        Kind::Receipt => {
            let r = Receipt::from_value(input)?;
            Ok(verdict::receipt(&r, pinned(&r.motebit_id).as_deref()))
        }
        Kind::Token => {
            let t = DelegationToken::from_value(input)?;
            Ok(verdict::delegation_token(
                &t,
                None,
                &TokenOptions::default(),
                now,
                pinned(&t.delegator_id).as_deref(),
            ))
        }
        _ => Err(Failure::malformed(
            "a verdict is of one receipt or one delegation token",
        )),
    }
}
