//! `dgw oauth …`: the OAuth authorization server's operator commands
//! (docs/oauth.md). `dgw oauth revoke` ends every token a subject was
//! given, through the running gateway (`dgw/oauth/revoke`, an admin's).

use clap::{Args, Subcommand};
use serde_json::json;

use super::{CliError, Outcome};
use dgw_protocol::command::admin::{self, AdminAuth};

#[derive(Debug, Subcommand)]
pub(super) enum OAuthCommand {
    /// Revoke a subject's delegation: every token it was given ends, and
    /// it gets no new one until its subject_budget_period ends.
    Revoke(RevokeArgs),
}

#[derive(Debug, Args)]
pub(super) struct RevokeArgs {
    /// The subject, as the audit records name it (`client/<client_id>`).
    #[arg(long)]
    subject: String,
    /// Its tenant.
    #[arg(long)]
    tenant: String,
    /// The gateway's JSON-RPC URL.
    #[arg(long = "via", default_value = "http://127.0.0.1:8080/rpc")]
    gateway: String,
    #[command(flatten)]
    auth: AdminAuth,
}

pub(super) fn run(command: OAuthCommand) -> Result<Outcome, CliError> {
    match command {
        OAuthCommand::Revoke(a) => Ok(admin::run(
            &a.auth,
            &a.gateway,
            "dgw/oauth/revoke",
            json!({"tenant": a.tenant, "subject": a.subject}),
        )?),
    }
}
