//! Motebit's registration: `[motebit]` (its delegators and audience,
//! applied on reload) and its `dgw motebit …` commands.

use std::sync::Arc;

use async_trait::async_trait;
use clap::{FromArgMatches, Subcommand};
use dgw_protocol::{
    section, CommandError, Document, Exit, Module, PanelFuture, Running, SectionError, Services,
    Staged,
};

mod panel;

use super::{Motebit, MotebitConfig, RawMotebit};

/// Motebit, as the binary lists it.
pub struct MotebitModule;

/// The registration value.
pub static MODULE: MotebitModule = MotebitModule;

/// `document`'s `[motebit]` (the defaults when absent).
pub fn read(document: &Document<'_>) -> Result<MotebitConfig, SectionError> {
    Ok(section::<RawMotebit>(document.text, "motebit")?
        .unwrap_or_default()
        .validate()?)
}

/// [`read`], its delegators' tenants among the configured `tenants`.
fn checked(document: &Document<'_>, tenants: &[&str]) -> Result<MotebitConfig, SectionError> {
    let config = read(document)?;
    for (i, d) in config.delegators.iter().enumerate() {
        if !tenants.contains(&d.tenant.as_str()) {
            return Err(SectionError::invalid(
                format!("motebit.delegators[{i}].tenant"),
                format!("{:?} is not a configured tenant", d.tenant),
            ));
        }
    }
    Ok(config)
}

/// The running Motebit, and the record store its pins are in (its panel).
struct Built(Arc<Motebit>, Arc<dyn dgw_core::state::RecordStore>);

#[async_trait]
impl Module for MotebitModule {
    fn section(&self) -> &'static str {
        "motebit"
    }

    fn check(&self, document: &Document<'_>, tenants: &[&str]) -> Result<(), SectionError> {
        checked(document, tenants).map(drop)
    }

    fn schema(&self, generator: &mut schemars::SchemaGenerator) -> Option<schemars::Schema> {
        Some(generator.subschema_for::<RawMotebit>())
    }

    async fn build(
        &self,
        document: &Document<'_>,
        services: &Services,
    ) -> Result<Arc<dyn Running>, String> {
        let config = read(document).map_err(|e| e.to_string())?;
        let motebit = Motebit::new(config, services.clone())
            .await
            .map_err(|e| e.to_string())?;
        Ok(Arc::new(Built(Arc::new(motebit), services.records.clone())))
    }

    fn command(&self) -> Option<clap::Command> {
        Some(super::cli::MotebitCommand::augment_subcommands(
            clap::Command::new("motebit")
                .about("Verify Motebit receipts, tokens and chains; print VerificationVerdicts; pin and unpin Motebit keys on a running gateway")
                .subcommand_required(true)
                .arg_required_else_help(true),
        ))
    }

    fn run_command(&self, matches: &clap::ArgMatches) -> Result<Exit, CommandError> {
        let command = super::cli::MotebitCommand::from_arg_matches(matches)
            .map_err(|e| CommandError(e.to_string()))?;
        super::cli::run(command)
    }
}

impl Running for Built {
    fn protocol(&self) -> Option<Arc<dyn dgw_core::protocol::Protocol>> {
        Some(self.0.clone())
    }

    fn stage(&self, document: &Document<'_>) -> Result<Staged, SectionError> {
        // Its tenants were checked with the rest of the file.
        let config = read(document)?;
        let motebit = self.0.clone();
        Ok(Staged::Apply(Box::new(move || motebit.set_config(config))))
    }

    fn panel(&self) -> PanelFuture<'_> {
        Box::pin(async move { Some(panel::panel(&self.1).await) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// The section as the gateway checks it (`Config::parse` runs this),
    /// against the tenants `acme` and `demo`.
    fn parse(text: &str) -> Result<MotebitConfig, SectionError> {
        let document = Document {
            text,
            dir: Path::new(""),
        };
        checked(&document, &["acme", "demo"])
    }

    fn err(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn the_motebit_section_is_checked_key_by_key() {
        let key = "8a88e3dd7409f195fd52db2d3cba5d72ca6709bf1d94121bf3748801b40f6f5c";
        let motebit = format!(
            "[motebit]\naudience = \"custom:dgw\"\n[[motebit.delegators]]\nmotebit_id = \"d-1\"\n\
             public_key = \"{key}\"\ntenant = \"acme\"\nbudget_microcents = 500\n"
        );
        let c = parse(&motebit).unwrap();
        assert_eq!(c.audience, "custom:dgw");
        assert_eq!(c.delegators[0].budget_microcents, 500);
        let default = parse("data_dir = \"data\"\n").unwrap();
        assert_eq!(default.audience, "task:submit");
        assert!(default.delegators.is_empty());
        for (from, to, at) in [
            ("\"acme\"", "\"nobody\"", "`motebit.delegators[0].tenant`"),
            (
                key,
                &key.to_uppercase(),
                "`motebit.delegators[0].public_key`",
            ),
            ("\"d-1\"", "\"\"", "`motebit.delegators[0].motebit_id`"),
            ("\"custom:dgw\"", "\"\"", "`motebit.audience`"),
        ] {
            assert!(err(&motebit.replace(from, to)).contains(at), "{at}");
        }
        assert!(err(&format!("{motebit}extra = 1\n")).contains("extra"));
    }
}
