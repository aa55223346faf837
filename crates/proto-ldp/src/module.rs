//! LDP's registration: `[ldp]` turns it on (its delegates and paying
//! domains; only a restart changes it, since sessions hold open work), and
//! it learns where the gateway listens for routers.

use std::sync::Arc;

use async_trait::async_trait;
use dgw_protocol::{
    section, Document, Module, PanelFuture, Running, SectionError, Services, Staged,
};

use super::{Ldp, LdpConfig, RawLdp};

/// LDP, as the binary lists it.
pub struct LdpModule;

/// The registration value.
pub static MODULE: LdpModule = LdpModule;

/// `document`'s `[ldp]`, if it has one.
pub fn read(document: &Document<'_>) -> Result<Option<LdpConfig>, SectionError> {
    Ok(section::<RawLdp>(document.text, "ldp")?
        .map(|l| l.validate(document.dir))
        .transpose()?)
}

struct Built {
    ldp: Option<Arc<Ldp>>,
    config: Option<LdpConfig>,
}

#[async_trait]
impl Module for LdpModule {
    fn section(&self) -> &'static str {
        "ldp"
    }

    fn schema(&self, generator: &mut schemars::SchemaGenerator) -> Option<schemars::Schema> {
        Some(generator.subschema_for::<RawLdp>())
    }

    fn check(&self, document: &Document<'_>, tenants: &[&str]) -> Result<(), SectionError> {
        let Some(ldp) = read(document)? else {
            return Ok(());
        };
        let unknown = |tenant: &str| !tenants.contains(&tenant);
        for (i, d) in ldp.domains.iter().enumerate() {
            if unknown(&d.tenant) {
                return Err(SectionError::invalid(
                    format!("ldp.domains[{i}].tenant"),
                    format!("{:?} is not a configured tenant", d.tenant),
                ));
            }
        }
        for (i, d) in ldp.delegates.iter().enumerate() {
            if unknown(&d.tenant) {
                return Err(SectionError::invalid(
                    format!("ldp.delegates[{i}].tenant"),
                    format!("{:?} is not a configured tenant", d.tenant),
                ));
            }
        }
        Ok(())
    }

    async fn build(
        &self,
        document: &Document<'_>,
        services: &Services,
    ) -> Result<Arc<dyn Running>, String> {
        let config = read(document).map_err(|e| e.to_string())?;
        let ldp = config
            .clone()
            .map(|c| Arc::new(Ldp::new(c, services.clone())));
        Ok(Arc::new(Built { ldp, config }))
    }
}

impl Running for Built {
    fn protocol(&self) -> Option<Arc<dyn dgw_core::protocol::Protocol>> {
        self.ldp
            .clone()
            .map(|l| l as Arc<dyn dgw_core::protocol::Protocol>)
    }

    fn listening_at(&self, addr: std::net::SocketAddr, tls: bool) {
        if let Some(l) = &self.ldp {
            l.listening_at(addr, tls);
        }
    }

    fn stage(&self, document: &Document<'_>) -> Result<Staged, SectionError> {
        Ok(match read(document)? == self.config {
            true => Staged::Unchanged,
            false => Staged::RestartNeeded,
        })
    }

    fn panel(&self) -> PanelFuture<'_> {
        Box::pin(async move {
            match &self.ldp {
                Some(l) => Some(l.panel().await),
                None => None,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    // A gateway config with two tenants; the section is appended to it.
    const GOOD: &str = r#"
data_dir = "data"
key_file = "data/gateway.key"
[server]
http = "127.0.0.1:0"
[[tenants]]
name = "acme"
root = "ghR9Wg8uFBXmxKpz5nngCFDkRt9ZLBGUyQqvJZ4p6uw"
[[tenants]]
name = "demo"
root_key_file = "data/demo-root.key"
create_if_missing = true
"#;

    /// The config as the gateway reads it for this module: the section
    /// checked against the tenants (`Config::parse` runs this check).
    #[derive(Debug)]
    struct Config(String);

    impl Config {
        fn parse(text: &str, _path: &Path) -> Result<Self, SectionError> {
            let document = Document {
                text,
                dir: Path::new(""),
            };
            MODULE.check(&document, &["acme", "demo"])?;
            Ok(Self(text.to_owned()))
        }
    }

    fn ldp_of(c: &Config) -> Option<LdpConfig> {
        read(&Document {
            text: &c.0,
            dir: Path::new(""),
        })
        .unwrap()
    }

    fn err(text: &str) -> String {
        Config::parse(text, Path::new("t.toml"))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn the_ldp_section_is_checked_key_by_key() {
        let ldp = "[ldp]\n[[ldp.delegates]]\nname = \"qwen\"\nurl = \"http://127.0.0.1:9\"\n\
                   secret = \"0123456789abcdef0123\"\ntrust_domain = \"r\"\ntenant = \"acme\"\n\
                   cost_microcents = 7\n[ldp.delegates.skill_costs]\nreasoning = 9\n";
        let c = Config::parse(&format!("{GOOD}{ldp}"), Path::new("t.toml")).unwrap();
        let l = ldp_of(&c).unwrap();
        let d = &l.delegates[0];
        assert_eq!((d.cost("reasoning"), d.cost("other")), (9, 7));
        assert!(
            !format!("{d:?}").contains("0123456789"),
            "the secret is never printed"
        );
        assert!(ldp_of(&Config::parse(GOOD, Path::new("t.toml")).unwrap()).is_none());
        let paying = "[[ldp.domains]]\nname = \"r\"\ntenant = \"nobody\"\nbudget_microcents = 5\n";
        assert!(err(&format!("{GOOD}{ldp}{paying}")).contains("`ldp.domains[0].tenant`"));
        let ok = paying.replace("nobody", "acme");
        let c = Config::parse(&format!("{GOOD}{ldp}{ok}"), Path::new("t.toml")).unwrap();
        assert_eq!(ldp_of(&c).unwrap().domains[0].budget_microcents, 5);
        for (from, to, at) in [
            ("\"qwen\"", "\"Qwen/x\"", "`ldp.delegates[0].name`"),
            (
                "\"http://127.0.0.1:9\"",
                "\"ftp://x\"",
                "`ldp.delegates[0].url`",
            ),
            (
                "\"0123456789abcdef0123\"",
                "\"short\"",
                "`ldp.delegates[0].secret`",
            ),
            ("\"acme\"", "\"nobody\"", "`ldp.delegates[0].tenant`"),
        ] {
            assert!(
                err(&format!("{GOOD}{}", ldp.replace(from, to))).contains(at),
                "{at}"
            );
        }
    }

    /// `freshness` is a duration like the rest of the config; the former
    /// `freshness_secs` is refused, naming the new key (decision 300).
    #[test]
    fn freshness_is_a_duration_and_the_former_key_is_refused_naming_it() {
        let ldp = "[ldp]\n";
        let c = Config::parse(&format!("{GOOD}{ldp}"), Path::new("t.toml")).unwrap();
        assert_eq!(ldp_of(&c).unwrap().freshness_secs, 300, "the default");
        for (written, secs) in [("\"5m\"", 120 + 180), ("\"90s\"", 90), ("\"1h\"", 3600)] {
            let c = Config::parse(
                &format!("{GOOD}{ldp}freshness = {written}\n"),
                Path::new("t.toml"),
            )
            .unwrap();
            assert_eq!(ldp_of(&c).unwrap().freshness_secs, secs, "{written}");
        }
        for bad in ["\"0s\"", "\"1500ms\"", "\"2h\"", "\"soon\"", "300"] {
            let e = err(&format!("{GOOD}{ldp}freshness = {bad}\n"));
            assert!(e.contains("freshness"), "{bad}: {e}");
        }
        let e = err(&format!("{GOOD}{ldp}freshness_secs = 120\n"));
        assert!(
            e.contains("`ldp.freshness_secs`") && e.contains("freshness = \"120s\""),
            "{e}"
        );
        // Both spellings: still refused, the former named.
        let e = err(&format!(
            "{GOOD}{ldp}freshness = \"2m\"\nfreshness_secs = 120\n"
        ));
        assert!(e.contains("`ldp.freshness_secs`"), "{e}");
    }
}
