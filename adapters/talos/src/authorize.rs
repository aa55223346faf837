//! §4.2 in order: issuer signature; `issued_at`/`expires_at` with a
//! 60-second skew; revocation; the delegation chain's signatures, scope
//! containment, lifetimes and depth; scope coverage; unknown tools. The
//! seventh step, the correlation ID's replay check, is the caller's (it
//! needs the session's cache, [`crate::replay::ReplayCache`]).

use crate::capability::{Capability, Format};
use crate::denial::{Denied, TalosDenial};
use crate::keys::Issuers;
use crate::scope::Scope;
use crate::SKEW_SECS;

/// What is being asked.
#[derive(Debug, Clone)]
pub struct TalosRequest {
    /// The tool as the caller names it.
    pub tool: String,
    /// The method (the tool rule's action).
    pub method: String,
    /// The resources the call names.
    pub resources: Vec<String>,
}

/// The verifier's side.
pub struct Context<'a> {
    /// The trusted issuers' keys, by DID.
    pub issuers: &'a Issuers,
    /// Unix seconds.
    pub now: i64,
    /// Whether a capability named by its ID or either hash is revoked.
    pub revoked: &'a dyn Fn(&str) -> bool,
    /// Whether the gateway knows the tool (unknown tools are denied).
    pub known_tool: &'a dyn Fn(&str) -> bool,
}

/// An authorized capability: the root issuer and the effective scope.
#[derive(Debug, Clone)]
pub struct Authorized {
    /// The DID that issued the root of the chain.
    pub root_issuer: String,
    /// The scope in effect: the narrowest of the chain.
    pub scope: Scope,
    /// When the capability (or an earlier parent) expires, Unix seconds.
    pub expires_at: i64,
}

fn deny(reason: TalosDenial, detail: impl Into<String>) -> Denied {
    Denied::new(reason, detail)
}

fn check_time(cap: &Capability, now: i64, as_parent: bool) -> Result<(), Denied> {
    let reason = if as_parent {
        TalosDenial::DelegationInvalid
    } else {
        TalosDenial::Expired
    };
    if cap.expires_at < cap.issued_at {
        return Err(deny(reason, "expires before it is issued"));
    }
    if now > cap.expires_at + SKEW_SECS {
        return Err(deny(
            reason,
            format!("expired at {} (now {now})", cap.expires_at),
        ));
    }
    if cap.issued_at > now + SKEW_SECS {
        return Err(deny(
            reason,
            format!("not valid before {} (now {now})", cap.issued_at),
        ));
    }
    Ok(())
}

fn revoked(cap: &Capability, ctx: &Context<'_>) -> bool {
    cap.revocation_names().iter().any(|n| (ctx.revoked)(n))
}

/// Authorizes `cap` for `request` (§4.2 steps 1–6).
pub fn authorize(
    cap: &Capability,
    request: &TalosRequest,
    ctx: &Context<'_>,
) -> Result<Authorized, Denied> {
    // 1. Signatures: the root by a trusted issuer, each link by the one
    // before it's subject.
    let root = cap.chain.first().unwrap_or(cap);
    let root_key = ctx.issuers.trusted(&root.issuer).ok_or_else(|| {
        deny(
            TalosDenial::SignatureInvalid,
            format!("issuer {} is not trusted", root.issuer),
        )
    })?;
    if !root.signature_valid(root_key) {
        let reason = if cap.chain.is_empty() {
            TalosDenial::SignatureInvalid
        } else {
            TalosDenial::DelegationInvalid
        };
        return Err(deny(
            reason,
            format!("{} did not sign the root capability", root.issuer),
        ));
    }
    let links: Vec<&Capability> = cap.chain.iter().chain(std::iter::once(cap)).collect();
    for pair in links.windows(2) {
        let (parent, child) = (pair[0], pair[1]);
        let is_leaf = std::ptr::eq(child, cap);
        let reason = if is_leaf {
            TalosDenial::SignatureInvalid
        } else {
            TalosDenial::DelegationInvalid
        };
        if child.issuer != parent.subject {
            return Err(deny(
                TalosDenial::DelegationInvalid,
                format!(
                    "{} issued a capability delegated to {}",
                    child.issuer, parent.subject
                ),
            ));
        }
        let key = ctx
            .issuers
            .resolve(&child.issuer)
            .ok_or_else(|| deny(reason, format!("no key for {}", child.issuer)))?;
        if !child.signature_valid(&key) {
            return Err(deny(
                reason,
                format!("{} did not sign its capability", child.issuer),
            ));
        }
    }
    // 2. Time.
    check_time(cap, ctx.now, false)?;
    // 3. Revocation, of the capability or anything it was delegated from.
    if let Some(r) = links.iter().find(|c| revoked(c, ctx)) {
        return Err(deny(
            TalosDenial::Revoked,
            format!(
                "capability {} is revoked",
                r.id.clone().unwrap_or_else(|| r.capability_hash())
            ),
        ));
    }
    // 4. The chain: delegatable parents, never broader, never longer-lived.
    for pair in links.windows(2) {
        let (parent, child) = (pair[0], pair[1]);
        check_time(parent, ctx.now, true)?;
        if !parent.delegatable {
            return Err(deny(
                TalosDenial::DelegationInvalid,
                "a parent capability is not delegatable",
            ));
        }
        if child.expires_at > parent.expires_at {
            return Err(deny(
                TalosDenial::DelegationInvalid,
                "a delegated capability outlives its parent",
            ));
        }
        match (&parent.scope, &child.scope) {
            (Ok(p), Ok(c)) if p.contains(c) => {}
            _ => {
                return Err(deny(
                    TalosDenial::DelegationInvalid,
                    format!(
                        "scope {:?} is not within {:?}",
                        child.scope_text, parent.scope_text
                    ),
                ))
            }
        }
    }
    if cap.format == Format::Wire && !cap.chain.is_empty() {
        return Err(deny(
            TalosDenial::DelegationInvalid,
            "wire-format capabilities carry no chain",
        ));
    }
    // 5. Scope.
    let scope = cap
        .scope
        .clone()
        .map_err(|e| deny(TalosDenial::ScopeMismatch, e))?;
    if !scope.covers(&request.tool, &request.method, &request.resources) {
        return Err(deny(
            TalosDenial::ScopeMismatch,
            format!(
                "scope {:?} does not cover tool {:?} method {:?} on {:?}",
                cap.scope_text, request.tool, request.method, request.resources
            ),
        ));
    }
    // 6. Unknown tools.
    if !(ctx.known_tool)(&request.tool) {
        return Err(deny(
            TalosDenial::UnknownTool,
            format!("unknown tool {:?}", request.tool),
        ));
    }
    Ok(Authorized {
        root_issuer: root.issuer.clone(),
        scope,
        expires_at: cap.expires_at,
    })
}
