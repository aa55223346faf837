//! The registry: the protocols this gateway speaks, in registration order,
//! and which one a request carries.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::{Admits, Credential, Denial, Hosted, Hosts, Protocol, ProtocolId, ProtocolInfo};

/// The registered protocols.
#[derive(Default, Clone)]
pub struct Registry {
    protocols: Vec<Arc<dyn Protocol>>,
    /// The protocols that admit callers, with their credentials job.
    admitting: Vec<(Arc<dyn Protocol>, Arc<dyn Admits>)>,
    /// The protocols that serve methods, paths or tools of their own.
    hosting: Vec<Hosted>,
    /// The MCP tools protocols serve themselves, by name (read once, at
    /// registration: a `tools/call` looks here before any upstream).
    tools: Vec<(String, Hosted)>,
}

/// A credential found in a request, with the protocol that reads it.
#[derive(Clone)]
pub struct Found {
    pub protocol: Arc<dyn Protocol>,
    pub credential: Credential,
}

impl std::fmt::Debug for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Found({})", self.protocol.id())
    }
}

/// A gateway-level refusal: not any protocol's.
const GATEWAY: ProtocolId = ProtocolId::new(&ProtocolInfo {
    name: "dgw",
    title: "dgw",
    denial_message: None,
});

/// The names of the tools `protocol` serves.
fn tool_names(protocol: &dyn Hosts) -> Vec<String> {
    protocol
        .tools()
        .iter()
        .filter_map(|t| t.get("name")?.as_str().map(str::to_owned))
        .collect()
}

/// The JSON-RPC names `protocol` answers to: its methods and its aliases.
fn method_names(protocol: &dyn Hosts) -> impl Iterator<Item = &'static str> {
    let aliases = protocol.aliases().iter().map(|(name, _)| *name);
    protocol.methods().iter().copied().chain(aliases)
}

impl Registry {
    /// Adds a protocol. Two protocols may not share a name, a scheme or an
    /// envelope prefix: which one a request carries must be unambiguous.
    pub fn register(&mut self, protocol: Arc<dyn Protocol>) -> Result<(), String> {
        let id = protocol.id();
        let admits = protocol.clone().admits();
        let hosted = protocol.clone().hosts().map(|hosts| Hosted { id, hosts });
        let same = |mine: Option<&'static str>, theirs: Option<&'static str>| {
            mine.is_some()
                && mine.map(str::to_ascii_lowercase) == theirs.map(str::to_ascii_lowercase)
        };
        let credential_clash = |other: &Arc<dyn Protocol>| {
            let (Some(mine), Some((_, theirs))) = (
                admits.as_ref(),
                self.admitting.iter().find(|(p, _)| Arc::ptr_eq(p, other)),
            ) else {
                return false;
            };
            same(mine.scheme(), theirs.scheme())
                || (mine.bearer_prefix().is_some()
                    && mine.bearer_prefix() == theirs.bearer_prefix())
                || (mine.envelope_prefix().is_some()
                    && mine.envelope_prefix() == theirs.envelope_prefix())
        };
        let hosting_clash = |other: &Arc<dyn Protocol>| {
            let (Some(mine), Some(theirs)) = (
                hosted.as_deref(),
                self.hosting.iter().find(|h| h.id == other.id()),
            ) else {
                return false;
            };
            method_names(mine).any(|m| method_names(&**theirs).any(|o| o == m))
                || tool_names(mine)
                    .iter()
                    .any(|t| tool_names(&**theirs).contains(t))
                || mine.http_paths().iter().any(|p| {
                    super::endpoint::under(p, theirs.http_paths())
                        || theirs
                            .http_paths()
                            .iter()
                            .any(|o| super::endpoint::under(o, &[p]))
                })
        };
        let clash = |other: &Arc<dyn Protocol>| {
            other.id().name == id.name || credential_clash(other) || hosting_clash(other)
        };
        if let Some(other) = self.protocols.iter().find(|p| clash(p)) {
            return Err(format!(
                "protocol {id} clashes with {} (name, scheme, bearer prefix, envelope prefix, JSON-RPC method, tool or HTTP path)",
                other.id()
            ));
        }
        if let Some(hosted) = hosted {
            for name in tool_names(&*hosted) {
                self.tools.push((name, hosted.clone()));
            }
            self.hosting.push(hosted);
        }
        if let Some(admits) = admits {
            self.admitting.push((protocol.clone(), admits));
        }
        self.protocols.push(protocol);
        Ok(())
    }

    /// Every protocol, in registration order.
    pub fn all(&self) -> &[Arc<dyn Protocol>] {
        &self.protocols
    }

    /// The protocol registered under `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Protocol>> {
        self.protocols.iter().find(|p| p.id().name == name)
    }

    /// Every protocol's hosting job, in registration order.
    pub fn hosting(&self) -> &[Hosted] {
        &self.hosting
    }

    /// The protocol serving a JSON-RPC method of its own.
    pub fn serving(&self, method: &str) -> Option<&Hosted> {
        self.hosting.iter().find(|h| h.methods().contains(&method))
    }

    /// The gateway's method a protocol's alias names (DelegateOS's settle:
    /// `dgw/settle`).
    pub fn alias_of(&self, method: &str) -> Option<&'static str> {
        self.hosting.iter().find_map(|p| {
            p.aliases()
                .iter()
                .find(|(name, _)| *name == method)
                .map(|(_, gateway)| *gateway)
        })
    }

    /// Every JSON-RPC name the protocols answer to (their methods and
    /// aliases), for the series counted by method.
    pub fn method_names(&self) -> Vec<&'static str> {
        self.hosting
            .iter()
            .flat_map(|h| method_names(&**h))
            .collect()
    }

    /// The MCP tools the protocols serve themselves.
    pub fn tools(&self) -> Vec<Value> {
        self.hosting.iter().flat_map(|h| h.tools()).collect()
    }

    /// The protocol serving the MCP tool `name` itself.
    pub fn serving_tool(&self, name: &str) -> Option<&Hosted> {
        self.tools.iter().find(|(t, _)| t == name).map(|(_, p)| p)
    }

    /// The protocol serving an HTTP path of its own.
    pub fn serving_path(&self, path: &str) -> Option<&Hosted> {
        self.hosting
            .iter()
            .find(|h| super::endpoint::under(path, h.http_paths()))
    }

    /// The `Authorization` schemes the protocols claim.
    pub fn schemes(&self) -> Vec<&'static str> {
        self.admitting
            .iter()
            .filter_map(|(_, a)| a.scheme())
            .collect()
    }

    /// The prefixes protocols claim inside `Authorization: Bearer`.
    pub fn bearer_prefixes(&self) -> Vec<&'static str> {
        self.admitting
            .iter()
            .filter_map(|(_, a)| a.bearer_prefix())
            .collect()
    }

    /// The credential a protocol's own request header carries, read with
    /// `header` (a header's value by name), if a request has one.
    pub fn from_named_header<'h>(
        &self,
        header: impl Fn(&str) -> Option<&'h str>,
    ) -> Option<Result<Found, Denial>> {
        self.admitting.iter().find_map(|(p, a)| {
            let value = header(a.credential_header()?)?;
            Some(a.read_named_header(value).map(|credential| Found {
                protocol: p.clone(),
                credential,
            }))
        })
    }

    /// The one credential a header's and a request's (or session's) make
    /// when they are the same protocol's and it combines them.
    pub fn combine(&self, header: &Found, carried: &Found) -> Option<Found> {
        if header.protocol.id() != carried.protocol.id() {
            return None;
        }
        let credential = carried.credential.with_header(&header.credential)?;
        Some(Found {
            protocol: header.protocol.clone(),
            credential,
        })
    }

    /// Every protocol's review of an upstream's answer; the first that
    /// withholds it decides.
    pub async fn review(&self, call: &super::Call<'_>, result: &mut Value) -> super::Review {
        for p in &self.protocols {
            let review = p.review(call, result).await;
            if review != super::Review::Pass {
                return review;
            }
        }
        super::Review::Pass
    }

    /// The envelope prefixes the protocols add beside `method`.
    pub fn envelope_prefixes(&self) -> Vec<&'static str> {
        self.admitting
            .iter()
            .filter_map(|(_, a)| a.envelope_prefix())
            .collect()
    }

    /// The credential in an `Authorization: <scheme> <credentials>` value,
    /// if a protocol claims the scheme (`Bearer` belongs to administrators
    /// unless the value starts with a protocol's bearer prefix).
    pub fn from_header(&self, authorization: &str) -> Option<Result<Found, Denial>> {
        let (scheme, credentials) = authorization.trim().split_once(' ')?;
        self.from_scheme(scheme, credentials)
    }

    /// The credential sent under `scheme`, if a protocol claims it.
    pub fn from_scheme(&self, scheme: &str, credentials: &str) -> Option<Result<Found, Denial>> {
        let credentials = credentials.trim();
        if scheme.trim().eq_ignore_ascii_case("bearer") {
            // The one order (crate::caller::read_bearer): a prefix, then a
            // DCT; anything else is no protocol's.
            let found = self.admitting.iter().find_map(|p| {
                let rest = credentials.strip_prefix(p.1.bearer_prefix()?)?;
                Some((p, rest))
            });
            let Some(((protocol, admits), rest)) = found else {
                return match crate::caller::read_bearer(credentials, &[]) {
                    crate::caller::Bearer::Dct => {
                        self.from_scheme(crate::caller::DCT_SCHEME, credentials)
                    }
                    _ => None,
                };
            };
            return Some(admits.read_header(rest).map(|credential| Found {
                protocol: protocol.clone(),
                credential,
            }));
        }
        let (protocol, admits) = self.admitting.iter().find(|(_, a)| {
            a.scheme()
                .is_some_and(|s| s.eq_ignore_ascii_case(scheme.trim()))
        })?;
        Some(admits.read_header(credentials).map(|credential| Found {
            protocol: protocol.clone(),
            credential,
        }))
    }

    /// [`Registry::take_from_request`] for a params object alone (a call's
    /// `params`, `dgw/authorize`'s, gRPC's `credential_json`): the
    /// credential fields come out of `params`.
    pub async fn take_from_params(
        &self,
        params: &mut Map<String, Value>,
    ) -> Result<Option<Found>, Denial> {
        let mut request = Map::new();
        request.insert("params".into(), Value::Object(std::mem::take(params)));
        let found = self.take_from_request(&mut request).await;
        if let Some(Value::Object(p)) = request.remove("params") {
            *params = p;
        }
        found
    }

    /// Takes every protocol's credential fields out of a JSON-RPC request
    /// object (so none is forwarded) and returns the one credential found.
    /// Credentials of two protocols in one request are refused: which
    /// authority applies would be a guess.
    pub async fn take_from_request(
        &self,
        request: &mut Map<String, Value>,
    ) -> Result<Option<Found>, Denial> {
        let mut found: Option<Found> = None;
        for (protocol, admits) in &self.admitting {
            if let Some(credential) = admits.take_from_request(request).await? {
                if let Some(first) = &found {
                    return Err(Denial::protocol(
                        GATEWAY,
                        "ambiguous_credentials",
                        format!(
                            "the request carries both a {} and a {} credential",
                            first.protocol.id().title,
                            protocol.id().title
                        ),
                    ));
                }
                found = Some(Found {
                    protocol: protocol.clone(),
                    credential,
                });
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use async_trait::async_trait;

    use super::*;
    use crate::error::GateError;
    use crate::protocol::{admitting, Call, Credentials, Decision, Grant, Presented};

    /// A protocol whose credentials travel as `Bearer <prefix>…`, in two
    /// halves it combines.
    struct Prefixed(&'static ProtocolInfo, &'static str);

    #[async_trait]
    impl Protocol for Prefixed {
        fn id(&self) -> ProtocolId {
            ProtocolId::new(self.0)
        }
        fn admits(self: Arc<Self>) -> Option<Arc<dyn Admits>> {
            Some(admitting(self))
        }
    }

    #[async_trait]
    impl Credentials for Prefixed {
        type Credential = &'static str;
        type Granted = ();
        fn bearer_prefix(&self) -> Option<&'static str> {
            Some(self.1)
        }
        fn read_header(&self, credentials: &str) -> Result<Presented<&'static str>, Denial> {
            Ok(Presented::new(credentials, "header"))
        }
        fn combine(
            &self,
            header: &str,
            _carried: &&'static str,
            carried_presented: &str,
        ) -> Option<Presented<&'static str>> {
            Some(Presented::new(
                format!("{header}+{carried_presented}"),
                "both",
            ))
        }
        async fn grant(
            &self,
            _: &&'static str,
            _: &str,
            _: &Call<'_>,
        ) -> Result<Decision<Grant<()>>, GateError> {
            Err(GateError::InvalidParams("not for this test".into()))
        }
    }

    const A: ProtocolInfo = ProtocolInfo {
        name: "a",
        title: "A",
        denial_message: None,
    };
    const B: ProtocolInfo = ProtocolInfo {
        name: "b",
        title: "B",
        denial_message: None,
    };

    /// A protocol with JSON-RPC methods and aliases only.
    struct Named(
        &'static ProtocolInfo,
        &'static [&'static str],
        &'static [(&'static str, &'static str)],
    );

    impl Protocol for Named {
        fn id(&self) -> ProtocolId {
            ProtocolId::new(self.0)
        }
        fn hosts(self: Arc<Self>) -> Option<Arc<dyn Hosts>> {
            Some(self)
        }
    }

    impl Hosts for Named {
        fn methods(&self) -> &'static [&'static str] {
            self.1
        }
        fn aliases(&self) -> &'static [(&'static str, &'static str)] {
            self.2
        }
    }

    #[test]
    fn an_alias_names_the_gateways_method_and_no_two_protocols_share_a_name() {
        let mut r = Registry::default();
        r.register(Arc::new(Named(
            &A,
            &["a/own"],
            &[("a/settle", "dgw/settle")],
        )))
        .unwrap();
        assert_eq!(r.alias_of("a/settle"), Some("dgw/settle"));
        assert_eq!(r.alias_of("dgw/settle"), None);
        assert_eq!(r.alias_of("a/own"), None);
        assert_eq!(r.method_names(), vec!["a/own", "a/settle"]);
        // Another protocol's method or alias under a taken name is refused,
        // whichever kind either is.
        for (methods, aliases) in [
            (&["a/settle"] as &[&str], &[] as &[(&str, &str)]),
            (&[], &[("a/own", "dgw/budget")]),
            (&[], &[("a/settle", "dgw/release")]),
        ] {
            let e = r
                .register(Arc::new(Named(&B, methods, aliases)))
                .unwrap_err();
            assert!(e.contains("JSON-RPC method"), "{e}");
        }
        r.register(Arc::new(Named(
            &B,
            &["b/own"],
            &[("b/settle", "dgw/settle")],
        )))
        .unwrap();
        assert_eq!(r.alias_of("b/settle"), Some("dgw/settle"));
        assert_eq!(r.serving("b/own").map(|p| p.id.name), Some("b"));
    }

    #[test]
    fn bearer_values_belong_to_a_protocol_only_under_its_prefix() {
        let mut r = Registry::default();
        r.register(Arc::new(Prefixed(&A, "a:"))).unwrap();
        assert!(r.register(Arc::new(Prefixed(&B, "a:"))).is_err());
        r.register(Arc::new(Prefixed(&B, "b:"))).unwrap();
        assert_eq!(r.bearer_prefixes(), vec!["a:", "b:"]);
        let found = r.from_header("Bearer b:token").unwrap().unwrap();
        assert_eq!(
            (found.protocol.id().name, found.credential.presented()),
            ("b", "token")
        );
        // An administrator's secret is no protocol's.
        assert!(r.from_header("Bearer s3cret").is_none());
        assert!(r.from_header("bearer a:x").is_some());
        // Halves of one protocol combine; of two, they do not.
        let a = r.from_header("Bearer a:1").unwrap().unwrap();
        let a2 = r.from_header("Bearer a:2").unwrap().unwrap();
        assert_eq!(r.combine(&a, &a2).unwrap().credential.presented(), "1+2");
        assert!(r.combine(&a, &found).is_none());
    }
}
