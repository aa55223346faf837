//! Revocation from the command line: `dgw token revoke` signs a §4.1 entry
//! for one block of a token, offline, with the key that signed that block
//! (only its signer's entry takes effect, decision 10); `dgw revoke` hands
//! an entry to a running gateway (`dgw/revocations/submit`), or, as an
//! administrator, revokes a token's block without its signer's key
//! (`dgw/revoke`: the stolen-key case).

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use delegateos::{Dct, PrincipalId, RevocationEntry, RevocationScope};
use serde_json::{json, Value};

use super::{now, print_json, read_file, CliError, Outcome};
use crate::keyfile;
use dgw_protocol::command::admin::{self, AdminAuth};

/// What an entry covers (§4.2).
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(super) enum Scope {
    /// Tokens that carry the block.
    Block,
    /// Those, and every delegation recorded below it.
    Chain,
}

#[derive(Debug, Args)]
pub(super) struct SignArgs {
    /// The token whose block is revoked; `-` reads standard input.
    token: String,
    /// The key that signed the block (the root for block 0, the
    /// attenuator for an attenuation).
    #[arg(long)]
    key: PathBuf,
    /// The block: 0 the authority, N the Nth attenuation (default: the
    /// last block the key signed, which revokes the least).
    #[arg(long)]
    block: Option<usize>,
    /// What the entry covers.
    #[arg(long, value_enum, default_value = "block")]
    scope: Scope,
}

#[derive(Debug, Args)]
pub(super) struct SubmitArgs {
    /// A signed entry (`dgw token revoke`'s output) as a file; `-` reads
    /// standard input.
    #[arg(required_unless_present = "token")]
    entry: Option<String>,
    /// With ENTRY: the DCT that shows a signer who is not a tenant root
    /// signed the revoked block or one above it. Without ENTRY: revoke
    /// this token's block as an administrator, whoever signed it.
    #[arg(long)]
    token: Option<String>,
    /// Without ENTRY: the block of --token to revoke (default: its last,
    /// which revokes the least).
    #[arg(long, conflicts_with = "entry")]
    block: Option<usize>,
    /// The gateway's JSON-RPC URL.
    #[arg(long, default_value = "http://127.0.0.1:8080/rpc")]
    gateway: String,
    #[command(flatten)]
    auth: AdminAuth,
}

/// Decodes a token argument for revocation.
fn decode(arg: &str) -> Result<Dct, CliError> {
    let text = super::arg_or_stdin(arg, "the token")?;
    let text = match serde_json::from_str::<delegateos::dct::SerializedDct>(&text) {
        Ok(s) if text.starts_with('{') => s.token,
        _ => text,
    };
    Dct::decode(&text).map_err(|r| CliError::Usage(format!("the token is malformed: {}", r.detail)))
}

/// Who signed each block, root first.
fn signers(token: &Dct) -> Vec<&PrincipalId> {
    let t = token.token();
    std::iter::once(&t.authority.issuer)
        .chain(t.attenuations.iter().map(|a| &a.attenuator))
        .collect()
}

fn out_of_range(block: usize, blocks: usize) -> CliError {
    CliError::Usage(format!(
        "--block {block}: the token has {blocks} block(s), 0 to {}",
        blocks - 1
    ))
}

/// `dgw token revoke`: prints the signed entry as JSON.
pub(super) fn sign(a: SignArgs) -> Result<Outcome, CliError> {
    let token = decode(&a.token)?;
    let key = keyfile::read(&a.key)?;
    let signers = signers(&token);
    let me = key.principal_id();
    let block = match a.block {
        Some(b) if b >= signers.len() => return Err(out_of_range(b, signers.len())),
        Some(b) => b,
        None => signers.iter().rposition(|s| *s == me).ok_or_else(|| {
            CliError::Usage(format!(
                "{me} signed no block of this token (its signers, root first: {}); an entry by another key revokes nothing",
                signers.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ")
            ))
        })?,
    };
    if signers[block] != me {
        return Err(CliError::Usage(format!(
            "block {block} is signed by {}, not by {me}: only its signer's entry revokes it",
            signers[block]
        )));
    }
    let ids = token.revocation_ids();
    let scope = match a.scope {
        Scope::Block => RevocationScope::Block,
        Scope::Chain => RevocationScope::Chain,
    };
    let entry = RevocationEntry::sign(&key, &ids[block], now(), scope)
        .map_err(|e| CliError::Usage(e.to_string()))?;
    print_json(&entry);
    eprintln!(
        "signed a revocation of block {block} ({}); submit it with `dgw revoke FILE --gateway URL`",
        ids[block]
    );
    Ok(Outcome::Success)
}

/// `dgw revoke`: the gateway's answer printed (exit 0), or its refusal
/// (exit 1).
pub(super) fn submit(a: SubmitArgs) -> Result<Outcome, CliError> {
    let token = a
        .token
        .as_deref()
        .map(|t| super::arg_or_stdin(t, "the token"))
        .transpose()?;
    match a.entry {
        Some(path) => {
            let bytes = read_file(&path, "the revocation entry")?;
            let entry: RevocationEntry = serde_json::from_slice(&bytes).map_err(|e| {
                CliError::Usage(format!(
                    "{path} is not a revocation entry (dgw token revoke's output): {e}"
                ))
            })?;
            let mut params = json!({ "revocation": entry });
            if let Some(t) = token {
                params["dct"] = Value::String(t);
            }
            Ok(admin::run(
                &a.auth,
                &a.gateway,
                "dgw/revocations/submit",
                params,
            )?)
        }
        None => {
            let token = decode(token.as_deref().unwrap_or_default())?;
            let ids = token.revocation_ids();
            let block = a.block.unwrap_or(ids.len() - 1);
            if block >= ids.len() {
                return Err(out_of_range(block, ids.len()));
            }
            Ok(admin::run(
                &a.auth,
                &a.gateway,
                "dgw/revoke",
                json!({ "revocationId": ids[block] }),
            )?)
        }
    }
}
