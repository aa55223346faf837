//! `dgw token …`: the command-line face of the DCT engine.

use std::collections::HashSet;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use delegateos::dct::{self, AttenuateParams, CreateParams, SerializedDct, VerificationContext};
use delegateos::{
    Capability, CapabilityRequest, ContractId, Dct, DelegationId, DenialReason, DenialType,
    PrincipalId, Timestamp,
};
use serde_json::json;

use super::{arg_or_stdin, now, print_json, timestamp_after, CliError, Outcome};
use crate::keyfile;
use dgw_protocol::say;

#[derive(Debug, Subcommand)]
pub(super) enum TokenCommand {
    /// Issue a token: offline, signed by a tenant's root key (--key); or
    /// online (--via), attenuated by a running gateway from the tenant's
    /// issuing delegation, as an administrator.
    Issue(IssueArgs),
    /// Narrow a token and hand it to someone else.
    Attenuate(AttenuateArgs),
    /// Decode a token without verifying it.
    Inspect {
        /// The token (base64url, or the {"token","format"} JSON); `-` reads standard input.
        token: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Verify a token for one request, exactly as the gateway does (§10.1).
    Verify(VerifyArgs),
    /// Sign a revocation entry (§4.1) for one block of a token with the key
    /// that signed it; prints the entry for `dgw revoke`.
    Revoke(super::revoke::SignArgs),
}

#[derive(Debug, Args)]
pub(super) struct IssueArgs {
    /// The issuer's key file (a tenant root's): offline issuance.
    #[arg(long, required_unless_present = "via", conflicts_with = "via")]
    key: Option<PathBuf>,
    /// A running gateway's JSON-RPC URL: online issuance from the tenant's
    /// issuing delegation (`dgw/tokens/issue`), as an administrator.
    #[arg(long, value_name = "URL")]
    via: Option<String>,
    /// With --via: the tenant whose issuing delegation is attenuated.
    #[arg(long, requires = "via")]
    tenant: Option<String>,
    #[command(flatten)]
    auth: dgw_protocol::command::admin::AdminAuth,
    /// The delegatee's principal ID.
    #[arg(long, allow_hyphen_values = true)]
    to: String,
    /// A granted capability, NAMESPACE:ACTION:RESOURCE (repeatable).
    #[arg(long = "cap", required = true)]
    caps: Vec<String>,
    /// The contract ID (ct_ + 12 hex; with --via, default: the issuing
    /// delegation's).
    #[arg(long, required_unless_present = "via")]
    contract: Option<String>,
    /// The delegation ID (del_ + 12 hex; with --via, default: a fresh one).
    #[arg(long, required_unless_present = "via")]
    delegation: Option<String>,
    /// The parent delegation ID.
    #[arg(long, default_value = "del_000000000000", conflicts_with = "via")]
    parent: String,
    /// The budget in microcents.
    #[arg(long)]
    budget: u64,
    /// How many further delegations are allowed (with --via, default: the
    /// issuing delegation's).
    #[arg(long = "max-depth", required_unless_present = "via")]
    max_depth: Option<u32>,
    /// Lifetime, such as 1h or 30m (the spec's default is 1h, at most 24h recommended).
    #[arg(long, default_value = "1h")]
    ttl: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub(super) struct AttenuateArgs {
    /// The token to narrow; `-` reads standard input.
    token: String,
    /// The attenuator's key file (the token's current holder).
    #[arg(long)]
    key: PathBuf,
    /// The new delegatee's principal ID.
    #[arg(long, allow_hyphen_values = true)]
    to: String,
    /// Capabilities to keep, NAMESPACE:ACTION:RESOURCE (repeatable; default: all in effect).
    #[arg(long = "cap")]
    caps: Vec<String>,
    /// A lower budget in microcents.
    #[arg(long)]
    budget: Option<u64>,
    /// A shorter lifetime from now, such as 15m.
    #[arg(long, conflicts_with = "expires")]
    ttl: Option<String>,
    /// An earlier expiry, RFC 3339.
    #[arg(long)]
    expires: Option<String>,
    /// A lower maxChainDepth.
    #[arg(long = "max-depth")]
    max_depth: Option<u32>,
    /// The new delegation ID.
    #[arg(long)]
    delegation: String,
    /// The contract ID.
    #[arg(long)]
    contract: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub(super) struct VerifyArgs {
    /// The token; `-` reads standard input.
    token: String,
    /// A trusted root principal ID (repeatable: one per tenant).
    #[arg(long = "root", required = true, allow_hyphen_values = true)]
    roots: Vec<String>,
    /// The moment to verify at, RFC 3339 (default: now).
    #[arg(long)]
    now: Option<String>,
    /// Microcents already spent against the token.
    #[arg(long, default_value_t = 0)]
    spent: u64,
    /// The requested namespace.
    #[arg(long)]
    namespace: String,
    /// The requested action.
    #[arg(long)]
    action: String,
    /// The requested resource.
    #[arg(long)]
    resource: String,
    /// A revoked revocation ID (repeatable).
    #[arg(long = "revoked", allow_hyphen_values = true)]
    revoked: Vec<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(cmd: TokenCommand) -> Result<Outcome, CliError> {
    match cmd {
        TokenCommand::Issue(args) => issue(args),
        TokenCommand::Attenuate(args) => attenuate(args),
        TokenCommand::Inspect { token, json } => inspect(&token, json),
        TokenCommand::Verify(args) => verify(args),
        TokenCommand::Revoke(args) => super::revoke::sign(args),
    }
}

fn usage(what: &str) -> impl Fn(String) -> CliError + '_ {
    move |e| CliError::Usage(format!("{what}: {e}"))
}

fn principal(text: &str, what: &str) -> Result<PrincipalId, CliError> {
    PrincipalId::parse(text).map_err(|e| usage(what)(e.to_string()))
}

fn delegation_id(text: &str) -> Result<DelegationId, CliError> {
    DelegationId::parse(text).map_err(|e| usage("--delegation")(e.to_string()))
}

fn contract_id(text: &str) -> Result<ContractId, CliError> {
    ContractId::parse(text).map_err(|e| usage("--contract")(e.to_string()))
}

fn capabilities(caps: &[String]) -> Result<Vec<Capability>, CliError> {
    caps.iter()
        .map(|c| {
            c.parse()
                .map_err(|e: delegateos::capability::CapabilityError| usage("--cap")(e.to_string()))
        })
        .collect()
}

/// Reads a token argument: base64url, or the §3.2 `{"token","format"}`
/// object; one in another format (a Biscuit token) is the denial
/// `unsupported_token_format`.
fn read_token(arg: &str) -> Result<Result<String, DenialReason>, CliError> {
    let text = arg_or_stdin(arg, "the token")?;
    if text.starts_with('{') {
        let serialized: SerializedDct = serde_json::from_str(&text).map_err(|e| {
            CliError::Usage(format!("token JSON is not {{\"token\",\"format\"}}: {e}"))
        })?;
        return Ok(dct::check_format(&serialized.format).map(|()| serialized.token));
    }
    Ok(Ok(text))
}

/// Decodes a token given on the command line; one that is refused before
/// verification is a usage error.
fn decode(arg: &str) -> Result<Dct, CliError> {
    read_token(arg)?
        .and_then(|t| Dct::decode(&t))
        .map_err(|r| match r.kind {
            DenialType::MalformedToken => {
                CliError::Usage(format!("the token is malformed: {}", r.detail))
            }
            kind => CliError::Usage(format!("the token is refused: {kind}: {}", r.detail)),
        })
}

fn print_token(token: &Dct, json_out: bool, summary: String) {
    if json_out {
        print_json(&json!({
            "token": token.encode(),
            "format": dct::FORMAT,
            "revocationIds": token.revocation_ids(),
        }));
    } else {
        say!("{}", token.encode());
        eprintln!("{summary}");
    }
}

fn report_denial(reason: &DenialReason, json_out: bool) -> Outcome {
    if json_out {
        print_json(&json!({ "valid": false, "denial": reason }));
    } else {
        say!("DENIED {}: {}", reason.kind, reason.detail);
    }
    Outcome::Negative
}

fn issue(a: IssueArgs) -> Result<Outcome, CliError> {
    let Some(key) = &a.key else {
        return issue_via(a);
    };
    let (Some(contract), Some(delegation), Some(max_depth)) =
        (&a.contract, &a.delegation, a.max_depth)
    else {
        return Err(CliError::Usage(
            "--key needs --contract, --delegation and --max-depth".into(),
        ));
    };
    let key = keyfile::read(key)?;
    let issued_at = now();
    let params = CreateParams {
        delegatee: principal(&a.to, "--to")?,
        capabilities: capabilities(&a.caps)?,
        contract_id: contract_id(contract)?,
        delegation_id: delegation_id(delegation)?,
        parent_delegation_id: DelegationId::parse(&a.parent)
            .map_err(|e| usage("--parent")(e.to_string()))?,
        chain_depth: 0,
        max_chain_depth: max_depth,
        max_budget_microcents: a.budget,
        expires_at: timestamp_after(&issued_at, &a.ttl)?,
        issued_at,
    };
    let expires = params.expires_at.clone();
    let token = Dct::create(&key, params).map_err(|r| CliError::Usage(r.detail))?;
    let summary = format!(
        "issued {delegation} → {}: {} capabilities, {} microcents, depth ≤ {max_depth}, expires {expires}",
        a.to,
        a.caps.len(),
        a.budget,
    );
    print_token(&token, a.json, summary);
    Ok(Outcome::Success)
}

/// `dgw token issue --via URL`: `dgw/tokens/issue` at a running gateway.
fn issue_via(a: IssueArgs) -> Result<Outcome, CliError> {
    let url = a.via.as_deref().unwrap_or_default();
    let Some(tenant) = &a.tenant else {
        return Err(CliError::Usage("--via needs --tenant".into()));
    };
    // Checked here too, so a typo is a usage error before any call.
    principal(&a.to, "--to")?;
    capabilities(&a.caps)?;
    let mut params = json!({
        "tenant": tenant,
        "to": a.to,
        "capabilities": a.caps,
        "budgetMicrocents": a.budget,
        "expiresAt": timestamp_after(&now(), &a.ttl)?,
    });
    if let Some(c) = &a.contract {
        params["contractId"] = json!(contract_id(c)?);
    }
    if let Some(d) = &a.delegation {
        params["delegationId"] = json!(delegation_id(d)?);
    }
    if let Some(m) = a.max_depth {
        params["maxChainDepth"] = json!(m);
    }
    let answer =
        dgw_protocol::command::admin::call(&a.auth, url, dgw_core::issuing::METHOD, params)?;
    match (answer.get("result"), answer.get("error")) {
        (Some(result), _) => {
            if a.json {
                print_json(result);
            } else {
                let token = result["token"].as_str().unwrap_or_default();
                say!("{token}");
                eprintln!(
                    "issued {} → {} by {url} (tenant {tenant}): {} microcents, expires {}",
                    result["delegationId"].as_str().unwrap_or_default(),
                    a.to,
                    a.budget,
                    result["expiresAt"].as_str().unwrap_or_default()
                );
            }
            Ok(Outcome::Success)
        }
        (None, Some(error)) => {
            eprintln!(
                "dgw: {} refused: {}",
                dgw_core::issuing::METHOD,
                dgw_protocol::command::admin::message(error)
            );
            print_json(error);
            Ok(Outcome::Negative)
        }
        _ => Err(CliError::Usage(format!(
            "the gateway at {url} answered no JSON-RPC result"
        ))),
    }
}

fn attenuate(a: AttenuateArgs) -> Result<Outcome, CliError> {
    let parent = decode(&a.token)?;
    let key = keyfile::read(&a.key)?;
    let expires_at = match (&a.ttl, &a.expires) {
        (Some(ttl), _) => Some(timestamp_after(&now(), ttl)?),
        (None, Some(t)) => {
            Some(Timestamp::parse(t).map_err(|e| usage("--expires")(e.to_string()))?)
        }
        (None, None) => None,
    };
    let params = AttenuateParams {
        delegatee: principal(&a.to, "--to")?,
        delegation_id: delegation_id(&a.delegation)?,
        contract_id: contract_id(&a.contract)?,
        allowed_capabilities: if a.caps.is_empty() {
            None
        } else {
            Some(capabilities(&a.caps)?)
        },
        max_budget_microcents: a.budget,
        expires_at,
        max_chain_depth: a.max_depth,
    };
    match parent.attenuate(&key, params) {
        Ok(token) => {
            let summary = format!(
                "attenuated {} → {} ({} attenuations)",
                a.delegation,
                a.to,
                token.token().attenuations.len()
            );
            print_token(&token, a.json, summary);
            Ok(Outcome::Success)
        }
        Err(reason) => Ok(report_denial(&reason, a.json)),
    }
}

fn inspect(arg: &str, json_out: bool) -> Result<Outcome, CliError> {
    let token = decode(arg)?;
    let t = token.token();
    let ids = token.revocation_ids();
    if json_out {
        let mut value = serde_json::to_value(t).expect("tokens serialize");
        value["revocationIds"] = json!(ids);
        print_json(&value);
        return Ok(Outcome::Success);
    }
    let a = &t.authority;
    say!("{} token (not verified)", t.format);
    say!("  authority   {} → {}", a.issuer, a.delegatee);
    say!(
        "    delegation {} (parent {}), contract {}",
        a.delegation_id,
        a.parent_delegation_id,
        a.contract_id
    );
    say!(
        "    budget     {} microcents, depth {}/{}",
        a.max_budget_microcents,
        a.chain_depth,
        a.max_chain_depth
    );
    say!("    valid      {} … {}", a.issued_at, a.expires_at);
    for c in &a.capabilities {
        say!("    grants     {c}");
    }
    say!("    revocation {}", ids[0]);
    for (i, att) in t.attenuations.iter().enumerate() {
        say!("  attenuation {i}  {} → {}", att.attenuator, att.delegatee);
        say!(
            "    delegation {}, contract {}",
            att.delegation_id,
            att.contract_id
        );
        if let Some(b) = att.max_budget_microcents {
            say!("    budget     {b} microcents");
        }
        if let Some(e) = &att.expires_at {
            say!("    expires    {e}");
        }
        if let Some(d) = att.max_chain_depth {
            say!("    max depth  {d}");
        }
        for c in att.allowed_capabilities.iter().flatten() {
            say!("    allows     {c}");
        }
        say!("    revocation {}", ids[i + 1]);
    }
    Ok(Outcome::Success)
}

fn verify(a: VerifyArgs) -> Result<Outcome, CliError> {
    let token = match read_token(&a.token)? {
        Ok(t) => t,
        Err(reason) => return Ok(report_denial(&reason, a.json)),
    };
    let roots = a
        .roots
        .iter()
        .map(|r| principal(r, "--root"))
        .collect::<Result<Vec<_>, _>>()?;
    let now = match &a.now {
        Some(t) => Timestamp::parse(t).map_err(|e| usage("--now")(e.to_string()))?,
        None => now(),
    };
    let revoked: HashSet<String> = a.revoked.into_iter().collect();
    let request = CapabilityRequest {
        namespace: a.namespace,
        action: a.action,
        resource: a.resource,
    };
    let ctx = VerificationContext {
        trusted_roots: &roots,
        revocations: &revoked,
        now: &now,
        spent_microcents: a.spent,
        request: &request,
    };
    match dct::verify(&token, &ctx) {
        Ok(scope) => {
            if a.json {
                print_json(&json!({ "valid": true, "scope": scope }));
            } else {
                say!(
                    "ALLOWED {request} under {} (contract {}), {} microcents remaining, depth {}/{}",
                    scope.delegation_id,
                    scope.contract_id,
                    scope.remaining_budget_microcents,
                    scope.chain_depth,
                    scope.max_chain_depth
                );
            }
            Ok(Outcome::Success)
        }
        Err(reason) => Ok(report_denial(&reason, a.json)),
    }
}
