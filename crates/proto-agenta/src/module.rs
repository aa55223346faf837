//! Agenta's registration: `[agenta]` turns it on (its tenant, currencies,
//! offers and bounds; only a restart changes it, since it holds open
//! requests), and it learns where the gateway listens for sellers'
//! callbacks.

use std::sync::Arc;

use async_trait::async_trait;
use dgw_protocol::{
    section, Document, Module, PanelFuture, Running, SectionError, Services, Staged,
};

use super::{Agenta, AgentaConfig, RawAgenta};

/// Agenta, as the binary lists it.
pub struct AgentaModule;

/// The registration value.
pub static MODULE: AgentaModule = AgentaModule;

/// `document`'s `[agenta]`, if it has one.
pub fn read(document: &Document<'_>) -> Result<Option<AgentaConfig>, SectionError> {
    Ok(section::<RawAgenta>(document.text, "agenta")?
        .map(|a| a.validate(document.dir))
        .transpose()?)
}

struct Built {
    agenta: Option<Arc<Agenta>>,
    config: Option<AgentaConfig>,
}

#[async_trait]
impl Module for AgentaModule {
    fn section(&self) -> &'static str {
        "agenta"
    }

    fn schema(&self, generator: &mut schemars::SchemaGenerator) -> Option<schemars::Schema> {
        Some(generator.subschema_for::<RawAgenta>())
    }

    fn check(&self, document: &Document<'_>, tenants: &[&str]) -> Result<(), SectionError> {
        if let Some(a) = read(document)? {
            if !tenants.contains(&a.tenant.as_str()) {
                return Err(SectionError::invalid(
                    "agenta.tenant",
                    format!("{:?} is not a configured tenant", a.tenant),
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
        let agenta = match &config {
            Some(c) => Some(Arc::new(Agenta::new(c.clone(), services.clone()).await?)),
            None => None,
        };
        Ok(Arc::new(Built { agenta, config }))
    }
}

impl Running for Built {
    fn protocol(&self) -> Option<Arc<dyn dgw_core::protocol::Protocol>> {
        self.agenta
            .clone()
            .map(|a| a as Arc<dyn dgw_core::protocol::Protocol>)
    }

    fn listening_at(&self, addr: std::net::SocketAddr, tls: bool) {
        if let Some(a) = &self.agenta {
            a.listening_at(addr, tls);
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
            match &self.agenta {
                Some(a) => Some(a.panel().await),
                None => None,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::time::Duration;

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

    fn agenta_of(c: &Config) -> Option<AgentaConfig> {
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
    fn the_agenta_section_is_checked_key_by_key() {
        let agenta = "[agenta]\ntenant = \"acme\"\nbuyer_callback_hosts = [\"Agents.Example\"]\n\
                      [agenta.currencies]\nUSD = 1000000\n[[agenta.offers]]\nfile = \"o.json\"\n";
        let c = Config::parse(&format!("{GOOD}{agenta}"), Path::new("t.toml")).unwrap();
        let a = agenta_of(&c).unwrap();
        assert_eq!(a.currencies["USD"], 1_000_000);
        assert_eq!(
            a.buyer_callback_origins
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["https://agents.example:443"],
            "a bare host is https on 443"
        );
        assert_eq!(a.seller_timeout, Duration::from_secs(10));
        assert_eq!(a.limits, agenta::Limits::default());
        assert_eq!(a.max_stored_requests, 10_000);
        assert_eq!(a.retention, Duration::from_secs(7 * 86_400));
        assert!(agenta_of(&Config::parse(GOOD, Path::new("t.toml")).unwrap()).is_none());
        assert!(err(&format!(
            "{GOOD}{}",
            agenta.replace("\"acme\"", "\"nobody\"")
        ))
        .contains("`agenta.tenant`"));
        assert!(err(&format!("{GOOD}{}", agenta.replace("USD", "usd")))
            .contains("`agenta.currencies.usd`"));
        assert!(err(&format!("{GOOD}{}", agenta.replace("1000000", "0")))
            .contains("`agenta.currencies.USD`"));
        assert!(err(&format!(
            "{GOOD}{}",
            agenta.replace(
                "[agenta.currencies]",
                "public_url = \"ftp://x\"\n[agenta.currencies]"
            )
        ))
        .contains("`agenta.public_url`"));
        // The bounds on what is kept, each by its name.
        let with = |key: &str| {
            agenta.replace(
                "[agenta.currencies]",
                &format!("{key}\n[agenta.currencies]"),
            )
        };
        for (line, key) in [
            ("max_input_bytes = 1", "agenta.max_input_bytes"),
            ("max_result_bytes = 0", "agenta.max_result_bytes"),
            ("max_metadata_bytes = 1", "agenta.max_metadata_bytes"),
            ("max_string_bytes = 63", "agenta.max_string_bytes"),
            ("max_stored_requests = 0", "agenta.max_stored_requests"),
            ("retention = \"0s\"", "agenta.retention"),
            ("retention = \"a week\"", "agenta.retention"),
            ("max_input_bytes = -1", "max_input_bytes"),
        ] {
            let e = err(&format!("{GOOD}{}", with(line)));
            assert!(e.contains(key), "{line}: {e}");
        }
        for (entry, i) in [
            ("\"h.example:8443\"", 0),
            ("\"https://a.example\", \"ftp://b.example\"", 1),
            ("\"https://a.example/path\"", 0),
        ] {
            let e = err(&format!(
                "{GOOD}{}",
                agenta.replace("\"Agents.Example\"", entry)
            ));
            assert!(
                e.contains(&format!("`agenta.buyer_callback_hosts[{i}]`")),
                "{entry}: {e}"
            );
        }
        let c = agenta_of(&Config::parse(
            &format!(
                "{GOOD}{}",
                with("max_input_bytes = 100\nmax_string_bytes = 64\nmax_stored_requests = 3\nretention = \"2s\"")
            ),
            Path::new("t.toml"),
        )
        .unwrap())
        .unwrap();
        assert_eq!((c.limits.input_bytes, c.limits.string_bytes), (100, 64));
        assert_eq!(c.max_stored_requests, 3);
        assert_eq!(c.retention, Duration::from_secs(2));
    }
}
