//! Upstream MCP servers. The gateway is the MCP client of each: it
//! initializes the connection itself (at start, and again after every
//! restart or expired session), then carries every downstream session's
//! requests over it under IDs of its own.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::sync::watch;

use super::auth::HttpCredentials;
use super::cancel::Cancel;
use super::data_rules::DataRules;
use super::http_link::HttpLink;
use super::link::Host;
pub use super::link::{Pending, UpstreamError, MAX_MESSAGE_BYTES};
use super::message::{Message, Reply};
use super::secret::{Redactor, Secret};
pub use super::server_requests::ServerRequestPolicy;
use super::stdio_link::StdioLink;
use super::tools::ToolRules;
use super::upstream_era::Era;

/// The protocol version the gateway asks its upstreams for.
pub const PROTOCOL_VERSION: &str = "2025-11-25";
/// Versions the gateway speaks, newest first.
pub const SUPPORTED_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// Most `tools/list` pages followed.
const MAX_TOOL_PAGES: usize = 100;

/// How to reach an upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportSpec {
    /// A child process spoken to over stdio (§11.3), given only a safe
    /// base of dgw's environment plus `env`, run in `cwd`.
    Stdio {
        command: Vec<String>,
        env: Vec<(String, Secret)>,
        cwd: Option<std::path::PathBuf>,
    },
    /// A Streamable HTTP endpoint (`http://` or `https://`; an HTTPS one
    /// verified against `ca_file`, else the system's roots).
    Http {
        url: String,
        ca_file: Option<std::path::PathBuf>,
    },
}

/// A configured upstream.
#[derive(Debug, Clone)]
pub struct UpstreamSpec {
    pub name: String,
    pub transport: TransportSpec,
    /// How long a request may wait for its answer.
    pub timeout: Duration,
    pub rules: ToolRules,
    /// Its resource and prompt rules.
    pub data: DataRules,
    /// What dgw presents to an HTTP upstream (empty for stdio); reload
    /// changes it without restarting the link.
    pub credentials: HttpCredentials,
    /// What the upstream may ask of the callers whose calls it serves.
    pub server_requests: ServerRequestPolicy,
}

impl UpstreamSpec {
    /// Every secret dgw hands this upstream, its tool rules' included.
    pub fn secrets(&self) -> Vec<&Secret> {
        let mut all: Vec<&Secret> = self.credentials.secrets().collect();
        all.extend(self.rules.credentials().flat_map(HttpCredentials::secrets));
        if let TransportSpec::Stdio { env, .. } = &self.transport {
            all.extend(env.iter().map(|(_, s)| s));
        }
        all
    }
}

/// Why a request got no answer from an upstream.
enum Link {
    Stdio(StdioLink),
    Http(Box<HttpLink>),
}

/// What reload may change of a running upstream without restarting it.
#[derive(Debug)]
struct Terms {
    rules: Arc<ToolRules>,
    data: Arc<DataRules>,
    timeout: Duration,
    credentials: Arc<HttpCredentials>,
    /// Scrubs every secret of this upstream (the old ones too, after a
    /// rotation) from what it sends back.
    redactor: Arc<Redactor>,
    server_requests: ServerRequestPolicy,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// One upstream server.
pub struct Upstream {
    pub name: String,
    /// How it is reached: an upstream reached another way is another upstream.
    transport: TransportSpec,
    terms: arc_swap::ArcSwap<Terms>,
    link: Link,
    /// Set once the upstream is replaced or removed: its process stops.
    retired: watch::Sender<bool>,
    next_id: AtomicU64,
    /// The upstream's `initialize` result.
    init: RwLock<Option<Map<String, Value>>>,
    /// The upstream's tools, as it last listed them.
    tools: RwLock<Vec<Map<String, Value>>>,
    /// Set when the upstream announces `notifications/tools/list_changed`.
    tools_stale: AtomicBool,
    ready: watch::Sender<bool>,
}

impl Upstream {
    /// Starts an upstream: spawns its process or prepares its HTTP client,
    /// and keeps it initialized in the background.
    pub fn start(spec: UpstreamSpec) -> Arc<Self> {
        let link = match &spec.transport {
            TransportSpec::Stdio { command, env, cwd } => {
                Link::Stdio(StdioLink::new(command.clone(), env.clone(), cwd.clone()))
            }
            TransportSpec::Http { url, ca_file } => {
                Link::Http(Box::new(HttpLink::new(url.clone(), ca_file.as_deref())))
            }
        };
        let redactor = Arc::new(Redactor::new(spec.secrets()));
        let up = Arc::new(Self {
            name: spec.name,
            transport: spec.transport,
            terms: arc_swap::ArcSwap::from_pointee(Terms {
                redactor,
                rules: Arc::new(spec.rules),
                data: Arc::new(spec.data),
                timeout: spec.timeout,
                credentials: Arc::new(spec.credentials),
                server_requests: spec.server_requests,
            }),
            link,
            retired: watch::channel(false).0,
            next_id: AtomicU64::new(1),
            init: RwLock::new(None),
            tools: RwLock::new(Vec::new()),
            tools_stale: AtomicBool::new(false),
            ready: watch::channel(false).0,
        });
        let supervised = up.clone();
        tokio::spawn(async move {
            let mut retired = supervised.retired.subscribe();
            let supervise = async {
                match &supervised.link {
                    Link::Stdio(link) => link.supervise(&*supervised).await,
                    Link::Http(_) => HttpLink::supervise(&*supervised).await,
                }
            };
            // Retiring drops the supervision, and with it the child process.
            tokio::select! {
                () = supervise => {}
                _ = retired.wait_for(|r| *r) => {
                    tracing::info!(upstream = %supervised.name, "retired upstream stopped");
                }
            }
        });
        up
    }

    /// Whether `spec` names this upstream reached the same way (reload keeps
    /// it running and only changes its rules and timeout).
    pub fn same_upstream(&self, spec: &UpstreamSpec) -> bool {
        self.name == spec.name && self.transport == spec.transport
    }

    /// Takes `spec`'s rules and timeout for the calls that start from now on.
    /// The new credentials are used by every request sent from now on; the
    /// old secrets stay scrubbed from answers.
    pub fn set_terms(&self, spec: &UpstreamSpec) {
        let mut redactor = Redactor::clone(&self.terms.load().redactor);
        for s in spec.secrets() {
            redactor.add_secret(s);
        }
        self.terms.store(Arc::new(Terms {
            rules: Arc::new(spec.rules.clone()),
            data: Arc::new(spec.data.clone()),
            timeout: spec.timeout,
            credentials: Arc::new(spec.credentials.clone()),
            redactor: Arc::new(redactor),
            server_requests: spec.server_requests,
        }));
    }

    /// What dgw presents to it, as it stands now.
    pub fn credentials(&self) -> Arc<HttpCredentials> {
        self.terms.load().credentials.clone()
    }

    /// Scrubs this upstream's secrets from a text it sent.
    pub fn redact(&self, text: &str) -> String {
        self.redactor().text(text)
    }

    /// The redactor of the secrets, plus the OAuth tokens handed out (the
    /// upstream's and its tool rules').
    fn redactor(&self) -> Arc<Redactor> {
        let terms = self.terms.load();
        let mut oauths = std::iter::once(&*terms.credentials)
            .chain(terms.rules.credentials())
            .filter_map(|c| c.oauth.as_ref())
            .peekable();
        if oauths.peek().is_none() {
            return terms.redactor.clone();
        }
        let mut r = Redactor::clone(&terms.redactor);
        for t in oauths.flat_map(|o| o.issued()) {
            r.add(t);
        }
        Arc::new(r)
    }

    fn redact_reply(&self, reply: Reply) -> Reply {
        let redactor = self.redactor();
        match reply {
            Reply::Result(mut v) => {
                redactor.json(&mut v);
                Reply::Result(v)
            }
            Reply::Error(mut v) => {
                redactor.json(&mut v);
                Reply::Error(v)
            }
        }
    }

    fn redact_error(&self, e: UpstreamError) -> UpstreamError {
        match e {
            UpstreamError::Unavailable { upstream, detail } => UpstreamError::Unavailable {
                upstream,
                detail: self.redact(&detail),
            },
            UpstreamError::NoAnswer { upstream, detail } => UpstreamError::NoAnswer {
                upstream,
                detail: self.redact(&detail),
            },
            other => other,
        }
    }

    /// Its tool rules, as they stand now.
    pub fn rules(&self) -> Arc<ToolRules> {
        self.terms.load().rules.clone()
    }

    /// Its resource and prompt rules, as they stand now.
    pub fn data_rules(&self) -> Arc<DataRules> {
        self.terms.load().data.clone()
    }

    /// How long a request may wait for its answer, as it stands now.
    pub fn timeout(&self) -> Duration {
        self.terms.load().timeout
    }

    /// Stops the upstream once the calls already sent to it have had their
    /// timeout to finish; new calls no longer reach it (its proxy stopped
    /// listing it first).
    pub fn retire(self: &Arc<Self>) {
        let up = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(up.timeout()).await;
            up.set_ready(false);
            up.retired.send_replace(true);
        });
    }

    /// Waits until the upstream is initialized, up to `limit`.
    pub async fn wait_ready(&self, limit: Duration) -> bool {
        let mut rx = self.ready.subscribe();
        let ready = tokio::time::timeout(limit, rx.wait_for(|r| *r))
            .await
            .is_ok();
        ready
    }

    pub fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// The upstream's `initialize` result, once initialized.
    pub fn initialize_result(&self) -> Option<Map<String, Value>> {
        self.init.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether the upstream declared a capability family (`resources`, `prompts`, …).
    pub fn declares(&self, family: &str) -> bool {
        self.init
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .and_then(|i| i.get("capabilities"))
            .and_then(|c| c.get(family))
            .is_some()
    }

    /// The tools as last listed.
    pub fn tools(&self) -> Vec<Map<String, Value>> {
        self.tools.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn tools_stale(&self) -> bool {
        self.tools_stale.load(Ordering::Relaxed)
    }

    fn unavailable(&self, detail: impl Into<String>) -> UpstreamError {
        UpstreamError::Unavailable {
            upstream: self.name.clone(),
            detail: detail.into(),
        }
    }

    /// Sends a request once initialized and waits for its answer, until
    /// `cancel` fires; renews an expired HTTP session once. An HTTP
    /// upstream is presented `presenting` (a tool rule's credentials) or,
    /// when `None`, its own.
    pub async fn request(
        &self,
        method: &str,
        params: Option<Map<String, Value>>,
        cancel: &Cancel,
        presenting: Option<Arc<HttpCredentials>>,
    ) -> Result<Reply, UpstreamError> {
        let presented = presenting.unwrap_or_else(|| self.credentials());
        if !self.is_ready() {
            return Err(self.unavailable("not initialized (starting, or restarting)"));
        }
        let mut message = Message::Request {
            id: Value::Null,
            method: method.to_owned(),
            params,
        };
        match self.send_request(&mut message, cancel, &presented).await {
            Err(e @ (UpstreamError::SessionExpired { .. } | UpstreamError::EraChanged { .. })) => {
                tracing::info!(upstream = %self.name, why = %e, "initializing the upstream again");
                self.set_ready(false);
                let renewed = self.handshake().await;
                self.set_ready(renewed.is_ok());
                renewed?;
                match self.send_request(&mut message, cancel, &presented).await {
                    Err(
                        e @ (UpstreamError::SessionExpired { .. }
                        | UpstreamError::EraChanged { .. }),
                    ) => Err(self.unavailable(format!("right after initializing again: {e}"))),
                    other => other,
                }
            }
            other => other,
        }
    }

    /// Sends a request under a fresh ID of ours, whatever the state (the
    /// handshake uses this too).
    async fn send_request(
        &self,
        message: &mut Message,
        cancel: &Cancel,
        presented: &HttpCredentials,
    ) -> Result<Reply, UpstreamError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if let Message::Request { id: slot, .. } = message {
            *slot = json!(id);
        }
        let timeout = self.timeout();
        let exchange = async {
            match &self.link {
                Link::Stdio(s) => s.request(self, id, message, timeout).await,
                Link::Http(h) => h.request(self, id, message, timeout, presented).await,
            }
        };
        let sent = tokio::select! {
            sent = exchange => sent,
            () = cancel.cancelled() => Err(UpstreamError::Cancelled { upstream: self.name.clone() }),
        };
        let sent = sent
            .map(|r| self.redact_reply(r))
            .map_err(|e| self.redact_error(e));
        let reason = match &sent {
            Err(UpstreamError::NoAnswer { .. }) => Some("dgw stopped waiting"),
            Err(UpstreamError::Cancelled { .. }) => Some("the client cancelled the request"),
            _ => None,
        };
        if let Some(reason) = reason {
            // Tell the upstream to stop working on it.
            let cancel = Message::Notification {
                method: "notifications/cancelled".into(),
                params: json!({"requestId": id, "reason": reason})
                    .as_object()
                    .cloned(),
            };
            let _ = self.notify(cancel).await;
        }
        sent
    }

    /// A request built here (the handshake's own).
    async fn send_new(
        &self,
        method: &str,
        params: Option<Map<String, Value>>,
    ) -> Result<Reply, UpstreamError> {
        let mut message = Message::Request {
            id: Value::Null,
            method: method.to_owned(),
            params,
        };
        self.send_request(&mut message, &Cancel::never(), &self.credentials())
            .await
    }

    /// Whether `subscriptions/listen` can be relayed to it: an HTTP
    /// upstream that speaks 2026-07-28.
    pub fn listens(&self) -> bool {
        matches!(&self.link, Link::Http(h)
            if matches!(h.era(), Some(Era::DualEra | Era::ModernOnly)))
    }

    /// Relays a 2026-07-28 `subscriptions/listen` (`params` with the
    /// caller's `_meta`), each notification on its stream, redacted, to
    /// `each`, until the stream ends: the upstream's answer, if any.
    pub async fn listen(
        &self,
        params: Map<String, Value>,
        each: &mut (dyn FnMut(Value) + Send),
    ) -> Result<Option<Reply>, UpstreamError> {
        let Link::Http(h) = &self.link else {
            return Err(self.unavailable("it is not reached over HTTP"));
        };
        if !self.is_ready() {
            return Err(self.unavailable("not initialized (starting, or restarting)"));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let message = Message::Request {
            id: json!(id),
            method: "subscriptions/listen".into(),
            params: Some(params),
        };
        let redactor = self.redactor();
        let mut redacted = |mut v: Value| {
            redactor.json(&mut v);
            each(v)
        };
        let presented = self.credentials();
        h.listen(
            self,
            id,
            &message,
            &presented,
            self.timeout(),
            &mut redacted,
        )
        .await
        .map(|r| r.map(|r| self.redact_reply(r)))
        .map_err(|e| self.redact_error(e))
    }

    /// Sends a notification or a response.
    pub async fn notify(&self, message: Message) -> Result<(), UpstreamError> {
        match &self.link {
            Link::Stdio(s) => s.send(self, &message).await,
            Link::Http(h) => h.send(self, &message).await,
        }
    }

    /// `initialize`, `notifications/initialized`, then the tool list; an
    /// HTTP upstream is first asked `server/discover`, and one that lists
    /// 2026-07-28 there and refuses `initialize` speaks only 2026-07-28:
    /// its `DiscoverResult` stands for the `initialize` result
    /// ([`super::upstream_era`]).
    async fn initialize_over_link(&self) -> Result<(), UpstreamError> {
        let discovered = match &self.link {
            Link::Http(h) => h.probe(self, self.timeout()).await?,
            Link::Stdio(_) => None,
        };
        // Only what dgw can deliver: what policy lets the upstream ask of
        // callers, over HTTP, where a request is attributed to its caller
        // by the stream it comes on; nothing to a shared stdio upstream.
        let capabilities = match &self.link {
            Link::Http(_) => self.terms.load().server_requests.capabilities(),
            Link::Stdio(_) => Map::new(),
        };
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": capabilities,
            "clientInfo": {"name": "dgw", "version": env!("CARGO_PKG_VERSION")},
        });
        let reply = self
            .send_new("initialize", params.as_object().cloned())
            .await;
        let result = match (reply, discovered) {
            (Ok(Reply::Result(Value::Object(r))), discovered) => {
                if let Link::Http(h) = &self.link {
                    let era = match discovered {
                        Some(_) => Era::DualEra,
                        None => Era::Legacy,
                    };
                    h.set_era(self, era);
                }
                r
            }
            // A 2026-07-28 server that refuses `initialize` (an error, or
            // a 4xx): it speaks nothing else.
            (Ok(Reply::Error(_)) | Err(UpstreamError::NoAnswer { .. }), Some(discovered)) => {
                if let Link::Http(h) = &self.link {
                    h.set_era(self, Era::ModernOnly);
                }
                *self.init.write().unwrap_or_else(|p| p.into_inner()) = Some(discovered);
                self.list_tools_now().await?;
                return Ok(());
            }
            (Ok(Reply::Result(other)), _) => {
                return Err(self.unavailable(format!("initialize answered {other}")))
            }
            (Ok(Reply::Error(e)), None) => {
                return Err(self.unavailable(format!("initialize failed: {e}")))
            }
            (Err(e), _) => return Err(e),
        };
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if !SUPPORTED_VERSIONS.contains(&version.as_str()) {
            return Err(self.unavailable(format!(
                "upstream speaks protocol version {version:?}; dgw speaks {SUPPORTED_VERSIONS:?}"
            )));
        }
        if let Link::Http(h) = &self.link {
            h.set_protocol_version(&version);
        }
        *self.init.write().unwrap_or_else(|p| p.into_inner()) = Some(result);
        self.notify(Message::Notification {
            method: "notifications/initialized".into(),
            params: None,
        })
        .await?;
        self.list_tools_now().await?;
        Ok(())
    }

    /// Asks the upstream for its tools (every page) and keeps them.
    pub async fn list_tools(&self) -> Result<(), UpstreamError> {
        if !self.is_ready() {
            return Err(self.unavailable("not initialized (starting, or restarting)"));
        }
        self.list_tools_now().await
    }

    async fn list_tools_now(&self) -> Result<(), UpstreamError> {
        self.tools_stale.store(false, Ordering::Relaxed);
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_TOOL_PAGES {
            let params = cursor.take().map(|c| {
                let mut p = Map::new();
                p.insert("cursor".into(), json!(c));
                p
            });
            let page = match self.send_new("tools/list", params).await? {
                Reply::Result(Value::Object(page)) => page,
                Reply::Result(other) => {
                    return Err(self.unavailable(format!("tools/list answered {other}")))
                }
                Reply::Error(e) => return Err(self.unavailable(format!("tools/list failed: {e}"))),
            };
            for tool in page
                .get("tools")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                match tool {
                    Value::Object(t) if t.get("name").and_then(Value::as_str).is_some() => {
                        tools.push(t.clone())
                    }
                    _ => tracing::warn!(upstream = %self.name, "ignoring a tool without a name"),
                }
            }
            match page.get("nextCursor").and_then(Value::as_str) {
                Some(c) if !c.is_empty() => cursor = Some(c.to_owned()),
                _ => break,
            }
        }
        *self.tools.write().unwrap_or_else(|p| p.into_inner()) = tools;
        Ok(())
    }

    /// What to do with a message the upstream sent on its own: answers for
    /// waiting requests, notifications, and requests to the client that
    /// came on no call's stream (refused: whose would they be?).
    fn route(&self, pending: &Pending, value: Value) -> Option<Message> {
        match Message::parse(value, &[]) {
            Ok(Message::Response { id, reply }) => {
                if !pending.answer(&id, reply) {
                    tracing::debug!(upstream = %self.name, %id, "answer for a request nobody waits for");
                }
                None
            }
            Ok(Message::Notification { method, .. }) => {
                if method == "notifications/tools/list_changed" {
                    self.tools_stale.store(true, Ordering::Relaxed);
                }
                tracing::debug!(upstream = %self.name, %method, "upstream notification");
                None
            }
            Ok(Message::Request { id, method, .. }) => {
                // Not on a request's own stream (stdio's is shared): dgw
                // cannot tell whose call it is about.
                tracing::debug!(upstream = %self.name, %method, "refusing a request from the upstream that no call's stream carried");
                Some(Message::Response {
                    id,
                    reply: super::relay::unattributable(&self.name, &method),
                })
            }
            Err((_, why)) => {
                tracing::warn!(upstream = %self.name, %why, "unreadable message from the upstream");
                None
            }
        }
    }
}

#[async_trait::async_trait]
impl Host for Upstream {
    fn name(&self) -> &str {
        &self.name
    }

    async fn handshake(&self) -> Result<(), UpstreamError> {
        self.initialize_over_link()
            .await
            .map_err(|e| self.redact_error(e))
    }

    fn credentials(&self) -> Arc<HttpCredentials> {
        Upstream::credentials(self)
    }

    fn redact(&self, text: &str) -> String {
        Upstream::redact(self, text)
    }

    fn set_ready(&self, ready: bool) {
        self.ready.send_replace(ready);
    }

    fn tool_count(&self) -> usize {
        self.tools.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    fn on_message(&self, pending: &Pending, value: Value) -> Option<Message> {
        self.route(pending, value)
    }

    fn server_requests(&self) -> ServerRequestPolicy {
        self.terms.load().server_requests
    }

    fn tool_schema(&self, name: &str) -> Option<Value> {
        let tools = self.tools.read().unwrap_or_else(|p| p.into_inner());
        tools
            .iter()
            .find(|t| t.get("name").and_then(Value::as_str) == Some(name))
            .and_then(|t| t.get("inputSchema").cloned())
    }
}
