//! `verify` and `verdict` over any Motebit artifact, for the CLI (`dgw
//! motebit verify|verdict`), JSON-RPC and gRPC (`motebit/verify|verdict`):
//! what the artifact is, read from its members, and the report.
//!
//! An error (CLI exit 2) is only for input that is not the artifact's
//! shape at all: not a JSON object with the member that names its kind
//! (`task_id`, `delegator_id`), a case whose parts are not objects, or an
//! input the reference's own producer throws on. Everything else is
//! judged: a verdict as the reference gives it, or an acceptance report
//! saying why not (exit 1). docs/adapters/motebit.md lists both.

use motebit::delegation;
use motebit::receipt::{self, KnownKeys, Receipt};
use motebit::token::{self, DelegationToken};
use motebit::verdict::{self, Subject, Verdict};
use motebit::{Failure, Reason};
use serde_json::{json, Map, Value};

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
        } else if v.get("chain").is_some() {
            // A chain with the standing grant its root is a tick of.
            Some(Kind::TokenChain)
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

/// A failure as reports write it.
fn error_json(f: &Failure) -> Value {
    json!({"type": f.reason.as_str(), "message": f.detail})
}

/// The report on a receipt that does not parse: not verified, and why.
fn unparsed_receipt(artifact: &Value, f: &Failure) -> Value {
    json!({
        "task_id": artifact.get("task_id"), "motebit_id": artifact.get("motebit_id"),
        "verified": false, "keySource": null, "publicKey": null,
        "error": error_json(f), "delegations": [],
    })
}

/// The gateway's acceptance of `artifact` at `now` (epoch ms), with
/// `known` keys first: `(verified, report)`. An artifact of a known kind
/// that is not as the schemas write it (a member missing, of another type,
/// unknown; no `suite`) is judged not verified, with the reason.
pub fn verify(artifact: &Value, known: &KnownKeys, now: f64) -> Result<(bool, Value), Failure> {
    let kind = kind_of(artifact)?;
    let (ok, detail) = match kind {
        Kind::Receipt => match Receipt::from_value(artifact) {
            Ok(r) => {
                let report = receipt::verify_chain(&r, known);
                (report.verified(), report.to_json())
            }
            Err(f) => (false, unparsed_receipt(artifact, &f)),
        },
        Kind::Token | Kind::TokenChain => {
            let tokens = artifact.get("chain").unwrap_or(artifact);
            let items: Vec<&Value> = match tokens {
                Value::Array(items) => items.iter().collect(),
                one => vec![one],
            };
            let checked = delegation::from_value(artifact)
                .map_err(|f| {
                    let at = items
                        .iter()
                        .position(|t| DelegationToken::from_value(t).is_err());
                    (at.unwrap_or(0), f)
                })
                .and_then(|d| {
                    token::verify_chain(&d.chain, now)?;
                    // The root's standing grant, when it is a tick: verified,
                    // fitting, and within its window now.
                    match delegation::root_grant(&d.chain, &d.grants) {
                        Ok(Some(g)) => g.window(now).map_err(|f| (0, f)),
                        Ok(None) => Ok(()),
                        Err(f) => Err((0, f)),
                    }
                });
            match checked {
                Ok(()) => (true, json!({"tokens": items.len()})),
                Err((i, f)) => (
                    false,
                    json!({"tokens": items.len(), "index": i, "error": error_json(&f)}),
                ),
            }
        }
        Kind::Sequence => {
            let items = artifact.as_array().map(Vec::as_slice).unwrap_or_default();
            let entries: Result<Vec<_>, (usize, Failure)> = items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    let r = Receipt::from_value(item).map_err(|f| (i, f))?;
                    let key = match known.get(&r.motebit_id) {
                        Some(k) => *k,
                        None => r.embedded_key().map_err(|f| (i, f))?,
                    };
                    Ok((r, key))
                })
                .collect();
            match entries.and_then(|e| receipt::verify_sequence(&e)) {
                Ok(()) => (true, json!({"receipts": items.len()})),
                Err((i, f)) => (
                    false,
                    json!({"receipts": items.len(), "index": i, "error": error_json(&f)}),
                ),
            }
        }
    };
    Ok((
        ok,
        json!({"kind": kind.as_str(), "verified": ok, "report": detail}),
    ))
}

/// `value` as the JSON object an artifact must be, or why not.
fn object<'a>(value: Option<&'a Value>, what: &str) -> Result<&'a Map<String, Value>, Failure> {
    value
        .and_then(Value::as_object)
        .ok_or_else(|| Failure::malformed(format!("{what} is not a JSON object")))
}

/// An optional part: absent or `null` is none; else it must be an object.
fn optional<'a>(
    value: Option<&'a Value>,
    what: &str,
) -> Result<Option<&'a Map<String, Value>>, Failure> {
    match value {
        None | Some(Value::Null) => Ok(None),
        v => object(v, what).map(Some),
    }
}

fn unjudged(u: verdict::Unjudged) -> Failure {
    Failure::malformed(u.to_string())
}

/// The verdict of a corpus case (`{kind, input}`) or a bare receipt or
/// token, at `now` (epoch ms) unless the case gives its own; `pinned`
/// answers the pinned key of an ID. Any receipt or token that is a JSON
/// object gets the verdict the reference gives it.
pub fn verdict(
    input: &Value,
    now: f64,
    pinned: &dyn Fn(&str) -> Option<String>,
) -> Result<Verdict, Failure> {
    let pin_of = |id: Option<&Value>| id.and_then(Value::as_str).and_then(pinned);
    if let (Some(kind), Some(inner)) = (
        input.get("kind").and_then(Value::as_str),
        input.get("input"),
    ) {
        return match Subject::from_name(kind) {
            Some(Subject::Receipt) => {
                let r = object(inner.get("receipt"), "input.receipt")?;
                Ok(verdict::receipt(r, pin_of(r.get("motebit_id")).as_deref()))
            }
            Some(Subject::DelegationToken) => {
                let t = object(inner.get("token"), "input.token")?;
                let grant = optional(inner.get("grant"), "input.grant")?;
                let options = match inner.get("options") {
                    None | Some(Value::Null) => Value::Null,
                    Some(o @ Value::Object(_)) => o.clone(),
                    Some(_) => {
                        return Err(Failure::malformed("input.options is not a JSON object"))
                    }
                };
                verdict::delegation_token(
                    t,
                    grant,
                    &options,
                    now,
                    pin_of(t.get("delegator_id")).as_deref(),
                )
                .map_err(unjudged)
            }
            Some(other) => Err(Failure::malformed(format!(
                "dgw gives verdicts on receipts and delegation tokens, not on {:?}",
                serde_json::to_value(other).unwrap_or_default()
            ))),
            None => Err(Failure::new(
                Reason::Malformed,
                format!("unknown case kind {kind:?} (not a VerdictSubject)"),
            )),
        };
    }
    match kind_of(input)? {
        Kind::Receipt => {
            let r = object(Some(input), "the receipt")?;
            Ok(verdict::receipt(r, pin_of(r.get("motebit_id")).as_deref()))
        }
        Kind::Token => {
            let t = object(Some(input), "the token")?;
            verdict::delegation_token(
                t,
                None,
                &Value::Null,
                now,
                pin_of(t.get("delegator_id")).as_deref(),
            )
            .map_err(unjudged)
        }
        _ => Err(Failure::malformed(
            "a verdict is of one receipt or one delegation token",
        )),
    }
}
