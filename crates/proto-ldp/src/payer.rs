//! Who pays a session's tasks, fixed when it is proposed (decision 114):
//! the delegation of the router's DCT, or the router's paying trust
//! domain; and the session's own budget below the payer's, so a session
//! never spends more than it was opened with.

use ldp::identity::IdentityCard;
use ldp::message::SessionConfig;

use super::config::{Delegate, PayingDomain};
use super::refused::Refused;
use super::sessions::{Payer, Record, SessionBudget};
use super::{Ldp, ID};
use dgw_core::protocol::Grant;

/// Why a payer was refused: a missing credential is an HTTP 401, a
/// credential that does not pay is the protocol's answer (decision 111).
pub(super) enum NoPayer {
    Missing(Refused),
    Denied(String),
}

/// The session's own budget under its payer's `grant`: the smaller of the
/// delegate's `session_budget_microcents` and the router's ask, if either.
pub(super) fn session_budget(
    d: &Delegate,
    config: &SessionConfig,
    grant: &Grant,
    session_id: &str,
) -> Option<SessionBudget> {
    let limit = match (d.session_budget_microcents, config.budget_microcents) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => a.or(b)?,
    };
    let level = level_name(d, session_id);
    let key = grant.levels.last()?.0.child(&level);
    Some(SessionBudget {
        level,
        key: key.as_str().to_owned(),
        budget_microcents: limit,
    })
}

/// The DCT in `Authorization: DCT <token>`, if that is what was presented.
pub(super) fn dct(authorization: Option<&str>) -> Option<&str> {
    authorization
        .and_then(|a| a.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("DCT"))
        .map(|(_, t)| t.trim())
}

/// The ledger level of session `session_id` with `d`: a digest, so a
/// router's session ID (any string) never shapes a ledger key.
fn level_name(d: &Delegate, session_id: &str) -> String {
    let seed = format!("ldp-session\0{}\0{session_id}", d.name);
    let h = delegateos::signing::blake2b256(seed.as_bytes());
    format!("ldp-session:{}", hex::encode(&h[..12]))
}

impl Ldp {
    /// The payer of a proposed session, with its grant: the DCT presented
    /// (of the delegate's tenant, granting at least one of its skills),
    /// else the router's paying trust domain.
    pub(super) fn proposal_payer(
        &self,
        d: &Delegate,
        card: &IdentityCard,
        domain: &str,
        authorization: Option<&str>,
    ) -> Result<(Payer, Grant), NoPayer> {
        let (payer, grant) = match dct(authorization) {
            Some(token) => {
                let grant = self.dct_grant(d, token).map_err(NoPayer::Denied)?;
                let any_skill = card.capabilities.iter().any(|c| {
                    let asked = ldp::translate::task_request(&c.name, &d.name);
                    grant.authority.permits(&asked, 0).is_ok()
                });
                if !any_skill {
                    return Err(NoPayer::Denied(format!(
                        "the DCT grants no skill of {:?} (ldp:<skill>:{})",
                        d.name, d.name
                    )));
                }
                let leaf = grant.chain.last().map(ToString::to_string);
                let Some(delegation_id) = leaf else {
                    return Err(NoPayer::Denied("the DCT has no delegation".into()));
                };
                (Payer::Delegation { delegation_id }, grant)
            }
            None => match self.config.domains.iter().find(|x| x.name == domain) {
                Some(paying) => (
                    Payer::Domain {
                        name: paying.name.clone(),
                    },
                    domain_grant(paying),
                ),
                None => {
                    return Err(NoPayer::Missing(Refused::new(
                        401,
                        "credential_required",
                        "a session needs `Authorization: DCT <token>`, or a router in a paying trust domain ([[ldp.domains]])",
                    )))
                }
            },
        };
        Ok((payer, grant))
    }

    /// The grant a task of a session is paid under: its payer's, within
    /// the session's budget. A DCT must be of the session's delegation; a
    /// domain-paid session takes no DCT.
    pub(super) fn task_grant(
        &self,
        d: &Delegate,
        payer: &Payer,
        budget: Option<&SessionBudget>,
        authorization: Option<&str>,
    ) -> Result<(Grant, String), NoPayer> {
        let (grant, presented) = match (payer, dct(authorization)) {
            (Payer::Delegation { delegation_id }, Some(token)) => {
                let grant = self.dct_grant(d, token).map_err(NoPayer::Denied)?;
                let leaf = grant.chain.last().map(ToString::to_string);
                if leaf.as_deref() != Some(delegation_id) {
                    return Err(NoPayer::Denied(format!(
                        "this session is paid by delegation {delegation_id}; the DCT is of another"
                    )));
                }
                (grant, token.to_owned())
            }
            (Payer::Delegation { .. }, None) => {
                return Err(NoPayer::Missing(Refused::new(
                    401,
                    "credential_required",
                    "this session's tasks need `Authorization: DCT <token>` of the delegation that opened it",
                )))
            }
            (Payer::Domain { name }, None) => {
                let Some(paying) = self.config.domains.iter().find(|x| &x.name == name) else {
                    return Err(NoPayer::Denied(format!(
                        "trust domain {name:?} pays no longer"
                    )));
                };
                (domain_grant(paying), format!("ldp-domain:{name}"))
            }
            (Payer::Domain { name }, Some(_)) => {
                return Err(NoPayer::Denied(format!(
                    "this session is paid by trust domain {name:?}; a DCT pays only in a session opened with it"
                )))
            }
        };
        Ok(match budget {
            Some(b) => (grant.within(&b.level, b.budget_microcents), presented),
            None => (grant, presented),
        })
    }

    /// Whether the router that sent a SESSION_CLOSE or TASK_CANCEL may end
    /// `record`'s session or its tasks (decision 145): a DCT of the
    /// delegation that pays for it (verified afresh); in a session a trust
    /// domain pays, no DCT and the `from` that opened it, which only
    /// per-router secrets make more than a claim (docs/security.md, 15c).
    pub(super) fn may_end(
        &self,
        d: &Delegate,
        record: &Record,
        from: &str,
        authorization: Option<&str>,
    ) -> Result<(), Refused> {
        let not_payer = |why: String| Refused::new(403, "not_session_payer", why);
        match (&record.payer, dct(authorization)) {
            (Some(Payer::Delegation { delegation_id }), Some(token)) => {
                let grant = self.dct_grant(d, token).map_err(not_payer)?;
                let leaf = grant.chain.last().map(ToString::to_string);
                match leaf.as_deref() == Some(delegation_id.as_str()) {
                    true => Ok(()),
                    false => Err(not_payer(format!(
                        "this session is paid by delegation {delegation_id}; the DCT is of another"
                    ))),
                }
            }
            (Some(Payer::Delegation { .. }), None) => Err(Refused::new(
                401,
                "credential_required",
                "ending this session or its tasks needs `Authorization: DCT <token>` of the delegation that pays for it",
            )),
            (Some(Payer::Domain { name }), Some(_)) => Err(not_payer(format!(
                "this session is paid by trust domain {name:?}; a DCT does not end it"
            ))),
            (Some(Payer::Domain { .. }) | None, None) if from == record.router => Ok(()),
            (Some(Payer::Domain { .. }) | None, _) => Err(not_payer(format!(
                "this session was opened by {:?}, not {from:?}",
                record.router
            ))),
        }
    }

    /// A DCT's grant, of the delegate's tenant.
    fn dct_grant(&self, d: &Delegate, token: &str) -> Result<Grant, String> {
        match self.gate.dct_grant(token) {
            Err(denial) => Err(denied(&denial)),
            Ok(grant) if grant.tenant != d.tenant => Err(format!(
                "tasks of {:?} are paid by tenant {:?}'s DCTs",
                d.name, d.tenant
            )),
            Ok(grant) => Ok(grant),
        }
    }
}

/// The budget-key root of a paying trust domain.
pub(super) fn domain_root(domain: &str) -> String {
    format!("ldp:{domain}")
}

/// The grant of a paying trust domain: its tenant, its one budget level,
/// every LDP task (`ldp:*:*`).
fn domain_grant(domain: &PayingDomain) -> Grant {
    Grant {
        protocol: ID,
        tenant: domain.tenant.clone(),
        levels: dgw_core::budget::BudgetKey::for_path(
            &domain_root(&domain.name),
            &["tasks".to_owned()],
            domain.budget_microcents,
        ),
        chain: Vec::new(),
        authority: Box::new(dgw_core::protocol::capabilities::Capabilities(
            delegateos::Capability::new("ldp", "*", "*")
                .into_iter()
                .collect(),
        )),
        requests: None,
        scope: None,
        context: Box::new(()),
        within: None,
    }
}

/// A pipeline denial as a router reads it: the reason, as dgw names it
/// everywhere, and what.
pub(super) fn denied(denial: &dgw_core::protocol::Denial) -> String {
    format!("{}: {}", denial.kind.as_str(), denial.detail)
}
