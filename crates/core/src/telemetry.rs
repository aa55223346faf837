//! Metrics (Prometheus, `dgw_` prefix, base units) and logs (tracing).
//!
//! Each layer names the metrics it records, once, as a list of [`Metric`]s:
//! the core's and the fronts' are [`METRICS`] (recorded through this
//! module's functions); a state backend's are its crate's own (sled's
//! flushes, journal and leases; Redis's revocation feed), recorded by that
//! crate. The binary installs the recorder with every layer's list
//! ([`install_metrics`]), so a metric's help, unit and buckets come with
//! the layer that records it and the core names no backend.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{OnceLock, RwLock};
use std::time::{Duration, Instant};

use metrics::{counter, gauge, histogram, Counter, Histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

pub use metrics::Unit;

/// The target of the spans exported as traces (a request's, and one per
/// pipeline stage): at TRACE level, so the logs' filter (`info`) disables
/// them at their call site; only the exporter's layer, installed when
/// `[telemetry] otlp_endpoint` is set, listens to this target.
pub const TRACE_TARGET: &str = "dgw::trace";

pub const REQUESTS_TOTAL: &str = "dgw_requests_total";
pub const DENIALS_TOTAL: &str = "dgw_denials_total";
pub const AUTHORIZE_DURATION: &str = "dgw_authorize_duration_seconds";
pub const BUDGET_SPENT: &str = "dgw_budget_spent_microcents";
pub const BUDGET_REMAINING: &str = "dgw_budget_remaining_microcents";
pub const DELEGATION_SPENT: &str = "dgw_delegation_spent_microcents";
pub const DELEGATION_BUDGET: &str = "dgw_delegation_budget_microcents";
pub const RESERVATIONS_OPEN: &str = "dgw_reservations_open";
pub const REVOCATIONS_TOTAL: &str = "dgw_revocations_total";
pub const STDERR_DROPPED: &str = "dgw_mcp_upstream_stderr_dropped_bytes_total";
pub const CONNECTIONS_SHED: &str = "dgw_connections_shed_total";
pub const CONNECTIONS_REFUSED: &str = "dgw_connections_refused_total";
pub const STATE_WRITABLE: &str = "dgw_state_writable";
pub const RESERVATIONS_EXPIRED: &str = "dgw_reservations_expired_total";
pub const MCP_CALLS_TOTAL: &str = "dgw_mcp_tool_calls_total";
pub const MCP_UPSTREAM_DURATION: &str = "dgw_mcp_upstream_duration_seconds";
pub const MCP_GATEWAY_DURATION: &str = "dgw_mcp_gateway_duration_seconds";
pub const MCP_UPSTREAM_UP: &str = "dgw_mcp_upstream_up";
pub const MCP_RELAY_DROPPED: &str = "dgw_mcp_relay_dropped_total";
pub const MCP_SERVER_REQUESTS: &str = "dgw_mcp_server_requests_total";
pub const REVOCATION_INDEX_COMPLETE: &str = "dgw_revocation_index_complete";
pub const PROTOCOL_EVENTS: &str = "dgw_protocol_events_total";
pub const PROTOCOL_SETTLED: &str = "dgw_protocol_settled_microcents_total";
pub const TOKEN_CACHE_LOOKUPS: &str = "dgw_token_cache_lookups_total";
pub const AUDIT_SEALED_RECORDS: &str = "dgw_audit_sealed_records";
pub const PROTOCOL_STORED_BYTES: &str = "dgw_protocol_stored_bytes";
pub const PROTOCOL_STORED_RECORDS: &str = "dgw_protocol_stored_records";

/// Every `_seconds` histogram's buckets (10 µs to 1 s).
const LATENCY_BUCKETS: &[f64] = &[
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1.0,
];

/// What a metric is, as Prometheus types it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// One metric a layer records: its name, type, unit, help text, and for a
/// histogram that is not in seconds, its buckets (`None`: a `_seconds`
/// histogram gets [`LATENCY_BUCKETS`], any other is a summary).
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    pub name: &'static str,
    pub kind: Kind,
    pub unit: Option<Unit>,
    pub help: &'static str,
    pub buckets: Option<&'static [f64]>,
}

impl Metric {
    pub const fn counter(name: &'static str, help: &'static str) -> Self {
        Self::new(name, Kind::Counter, help)
    }

    pub const fn gauge(name: &'static str, help: &'static str) -> Self {
        Self::new(name, Kind::Gauge, help)
    }

    pub const fn histogram(name: &'static str, help: &'static str) -> Self {
        Self::new(name, Kind::Histogram, help)
    }

    const fn new(name: &'static str, kind: Kind, help: &'static str) -> Self {
        Self {
            name,
            kind,
            unit: None,
            help,
            buckets: None,
        }
    }

    pub const fn unit(mut self, unit: Unit) -> Self {
        self.unit = Some(unit);
        self
    }

    pub const fn buckets(mut self, buckets: &'static [f64]) -> Self {
        self.buckets = Some(buckets);
        self
    }

    fn describe(&self) {
        use metrics::{KeyName, SharedString};
        let (name, help) = (
            KeyName::from_const_str(self.name),
            SharedString::const_str(self.help),
        );
        metrics::with_recorder(|r| match self.kind {
            Kind::Counter => r.describe_counter(name, self.unit, help),
            Kind::Gauge => r.describe_gauge(name, self.unit, help),
            Kind::Histogram => r.describe_histogram(name, self.unit, help),
        });
    }
}

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the Prometheus recorder once per process, describing the
/// core's [`METRICS`] and each of `layers` (the state backends'), and
/// returns its handle (`None` if another recorder was installed first).
/// A described metric is exported once it is first recorded or set.
pub fn install_metrics(layers: &[&'static [Metric]]) -> Option<PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let all = || {
                std::iter::once(METRICS)
                    .chain(layers.iter().copied())
                    .flatten()
            };
            // Gauges are set again before every scrape; one left unset for
            // five minutes (a tenant or upstream removed by a reload) is
            // dropped rather than shown stale for ever.
            let mut builder = PrometheusBuilder::new()
                .idle_timeout(
                    metrics_util::MetricKindMask::GAUGE,
                    Some(std::time::Duration::from_secs(300)),
                )
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)
                .ok()?;
            for m in all() {
                if let Some(buckets) = m.buckets {
                    builder = builder
                        .set_buckets_for_metric(Matcher::Full(m.name.into()), buckets)
                        .ok()?;
                }
            }
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).ok()?;
            all().for_each(Metric::describe);
            Some(handle)
        })
        .clone()
}

/// The metrics the core and the fronts record (through the functions below).
pub const METRICS: &[Metric] = &[
    Metric::counter(REQUESTS_TOTAL, "Requests by front, method and outcome."),
    Metric::counter(DENIALS_TOTAL, "Denials by protocol and denial type."),
    Metric::counter(
        PROTOCOL_EVENTS,
        "Protocol events by protocol and event (a receipt, a request ended).",
    ),
    Metric::counter(
        PROTOCOL_SETTLED,
        "Microcents settled for work a protocol brokered (purchases).",
    )
    .unit(Unit::Count),
    Metric::gauge(
        PROTOCOL_STORED_BYTES,
        "Bytes a protocol's stored records take (keys and values as the state backend stores them), by protocol and record kind; set by the protocol's sweep.",
    )
    .unit(Unit::Bytes),
    Metric::gauge(
        PROTOCOL_STORED_RECORDS,
        "Records a protocol keeps in the state, by protocol and record kind; set by the protocol's sweep.",
    ),
    Metric::histogram(
        AUTHORIZE_DURATION,
        "Time to decide an authorization, reservation included.",
    )
    .unit(Unit::Seconds),
    Metric::gauge(
        BUDGET_SPENT,
        "Microcents spent, over each tenant's top-level budgets.",
    ),
    Metric::gauge(
        BUDGET_REMAINING,
        "Microcents neither spent nor reserved, over each tenant's top-level budgets.",
    ),
    Metric::gauge(
        RESERVATIONS_OPEN,
        "Budget reservations not yet settled or released.",
    ),
    Metric::counter(REVOCATIONS_TOTAL, "Revocation entries recorded."),
    Metric::counter(
        TOKEN_CACHE_LOOKUPS,
        "DCTs looked up among those verified before, by result: hit (no signature checked) or miss (decoded and its chain verified).",
    ),
    Metric::counter(
        MCP_CALLS_TOTAL,
        "MCP tools/call by protocol (a registered protocol's name, or open), upstream, tool and outcome (forwarded, denied, invalid, upstream_failed).",
    ),
    Metric::histogram(
        MCP_UPSTREAM_DURATION,
        "Time an upstream MCP server took to answer a tools/call.",
    )
    .unit(Unit::Seconds),
    Metric::histogram(
        MCP_GATEWAY_DURATION,
        "Time dgw itself added to a tools/call: everything but the upstream's answer.",
    )
    .unit(Unit::Seconds),
    Metric::counter(
        STDERR_DROPPED,
        "Bytes of an upstream's stderr not logged because a line was over 4 KiB.",
    )
    .unit(Unit::Bytes),
    Metric::gauge(
        STATE_WRITABLE,
        "1 while the budget state can be written; 0 once the journal failed (every reservation is then refused until a restart).",
    ),
    Metric::counter(
        RESERVATIONS_EXPIRED,
        "Reservations nobody settled or released before their deadline, ended by the sweeper.",
    ),
    Metric::counter(
        CONNECTIONS_REFUSED,
        "Connections closed on arrival: max_connections were open and every one had a request in flight.",
    ),
    Metric::counter(
        CONNECTIONS_SHED,
        "Idle connections closed to make room (max_connections reached, or descriptors ran out).",
    ),
    Metric::gauge(
        MCP_UPSTREAM_UP,
        "1 when an upstream MCP server is initialized and serving, else 0.",
    ),
    Metric::counter(
        MCP_RELAY_DROPPED,
        "Notifications an upstream sent during a call that dgw dropped instead of relaying: the caller's queue was full (a flood), or its stream was gone.",
    ),
    Metric::counter(
        MCP_SERVER_REQUESTS,
        "Requests an upstream sent to a caller (sampling, elicitation, roots) by outcome: relayed, or refused and why; answers to requests dgw never sent, refused.",
    ),
    Metric::gauge(
        DELEGATION_SPENT,
        "Microcents spent under a top-level delegation, for the ten that spent most (others are not exported).",
    ),
    Metric::gauge(
        DELEGATION_BUDGET,
        "The budget of a top-level delegation, for the ten that spent most.",
    ),
    Metric::gauge(
        REVOCATION_INDEX_COMPLETE,
        "1 while this replica's revocation index holds every recorded revocation (always, on one gateway of its own); 0 while the shared feed is lost (every decision is then refused). Not a count of revocations.",
    ),
    Metric::gauge(
        AUDIT_SEALED_RECORDS,
        "Records of the audit log up to and including the seal the state store keeps as its anchor (the anchor's seq + 1).",
    ),
];

/// Metric handles resolved once per label set: a call finds its counter
/// by the label values it borrows, instead of building owned labels and
/// looking them up in the recorder every time. Used only once this
/// module's recorder is installed (a handle taken before would count
/// nowhere for ever); the label sets are those the series already are
/// (configured upstreams, their catalogs' tools, known methods).
struct Handles<H> {
    map: RwLock<HashMap<String, H>>,
}

thread_local! {
    /// The lookup key, built in place (no allocation per call).
    static KEY: RefCell<String> = const { RefCell::new(String::new()) };
}

impl<H: Clone> Handles<H> {
    fn new() -> Self {
        Self {
            map: RwLock::new(HashMap::new()),
        }
    }

    /// The handle for `labels`, made by `make` the first time.
    fn get(&self, labels: &[&str], make: impl FnOnce() -> H) -> H {
        if !matches!(HANDLE.get(), Some(Some(_))) {
            return make();
        }
        KEY.with(|key| {
            let mut key = key.borrow_mut();
            key.clear();
            for l in labels {
                key.push_str(l);
                // No label value holds a NUL: each set has one key.
                key.push('\0');
            }
            if let Some(h) = self
                .map
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .get(key.as_str())
            {
                return h.clone();
            }
            let h = make();
            self.map
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .entry(key.clone())
                .or_insert(h)
                .clone()
        })
    }
}

/// A handle without labels, resolved once (see [`Handles`]).
fn once<H: Clone>(cell: &OnceLock<H>, make: impl Fn() -> H) -> H {
    if !matches!(HANDLE.get(), Some(Some(_))) {
        return make();
    }
    cell.get_or_init(make).clone()
}

fn counters() -> &'static Handles<Counter> {
    static C: OnceLock<Handles<Counter>> = OnceLock::new();
    C.get_or_init(Handles::new)
}

fn histograms() -> &'static Handles<Histogram> {
    static H: OnceLock<Handles<Histogram>> = OnceLock::new();
    H.get_or_init(Handles::new)
}

/// The label values a gateway knows at start, each labelled counter and
/// histogram exported at zero for them (see [`export_at_zero`]).
#[derive(Debug, Default)]
pub struct KnownLabels<'a> {
    /// Registered protocols' names.
    pub protocols: &'a [&'static str],
    /// Every denial type any protocol may be counted under.
    pub denial_types: &'a [&'static str],
    /// Each listening front with the methods it counts under its own name.
    pub fronts: &'a [(&'static str, Vec<&'a str>)],
    /// Configured MCP upstreams' names.
    pub upstreams: &'a [&'a str],
    /// The state backends' own metrics (as for [`install_metrics`]), none
    /// of which carries a label.
    pub layers: &'a [&'static [Metric]],
}

/// Every counter and histogram, so the first scrape has every series:
/// `rate()` of a missing series is empty, not 0, and an alert or panel on it
/// says nothing. Unlabelled ones once; labelled ones for each value in
/// `known` (every protocol with every denial type, every front's methods
/// and outcomes, every upstream). Series
/// labelled by values only an event names (a tool, a protocol's own
/// reason or event, a top delegation) appear with it. Adds 0: a value
/// already counted stays.
pub fn export_at_zero(known: &KnownLabels<'_>) {
    for name in [
        REVOCATIONS_TOTAL,
        CONNECTIONS_SHED,
        CONNECTIONS_REFUSED,
        RESERVATIONS_EXPIRED,
    ] {
        counter!(name).increment(0);
    }
    let backends = known.layers.iter().copied().flatten();
    for m in backends.filter(|m| m.kind == Kind::Counter) {
        counter!(m.name).increment(0);
    }
    let histograms = [AUTHORIZE_DURATION, MCP_GATEWAY_DURATION];
    let backends = known.layers.iter().copied().flatten();
    let backend_histograms = backends
        .filter(|m| m.kind == Kind::Histogram)
        .map(|m| m.name);
    for name in histograms.into_iter().chain(backend_histograms) {
        // Registering is enough: the exporter renders a histogram it holds
        // with zero observations.
        drop(histogram!(name));
    }
    for result in ["hit", "miss"] {
        counter!(TOKEN_CACHE_LOOKUPS, "result" => result).increment(0);
    }
    for &protocol in known.protocols {
        for &kind in known.denial_types {
            counter!(DENIALS_TOTAL, "protocol" => protocol, "type" => kind).increment(0);
        }
        counter!(PROTOCOL_SETTLED, "protocol" => protocol).increment(0);
    }
    for (front, methods) in known.fronts {
        for method in methods {
            for outcome in Outcome::EVERY {
                counter!(REQUESTS_TOTAL, "front" => *front, "method" => (*method).to_owned(), "outcome" => outcome.as_str())
                    .increment(0);
            }
        }
    }
    for upstream in known.upstreams {
        counter!(STDERR_DROPPED, "upstream" => (*upstream).to_owned()).increment(0);
        drop(histogram!(MCP_UPSTREAM_DURATION, "upstream" => (*upstream).to_owned()));
    }
}

/// A finished MCP `tools/call`: the upstream's time, when it was asked, and
/// the rest (the gateway's own) separately.
pub fn record_mcp_call(
    protocol: &'static str,
    upstream: &str,
    tool: &str,
    outcome: &'static str,
    total: Duration,
    upstream_time: Option<Duration>,
) {
    counters()
        .get(&[MCP_CALLS_TOTAL, protocol, upstream, tool, outcome], || {
            counter!(MCP_CALLS_TOTAL, "protocol" => protocol, "upstream" => upstream.to_owned(), "tool" => tool.to_owned(), "outcome" => outcome)
        })
        .increment(1);
    if let Some(t) = upstream_time {
        histograms()
            .get(
                &[MCP_UPSTREAM_DURATION, upstream],
                || histogram!(MCP_UPSTREAM_DURATION, "upstream" => upstream.to_owned()),
            )
            .record(t.as_secs_f64());
    }
    let own = total.saturating_sub(upstream_time.unwrap_or_default());
    static OWN: OnceLock<Histogram> = OnceLock::new();
    once(&OWN, || histogram!(MCP_GATEWAY_DURATION)).record(own.as_secs_f64());
}

/// A notification from `upstream` dropped instead of relayed (`reason`:
/// `full` or `gone`).
pub fn record_mcp_relay_dropped(upstream: &str, reason: &'static str) {
    counter!(MCP_RELAY_DROPPED, "upstream" => upstream.to_owned(), "reason" => reason).increment(1);
}

/// A request from `upstream` to a caller, and what became of it.
pub fn record_mcp_server_request(upstream: &str, method: &'static str, outcome: &'static str) {
    counter!(MCP_SERVER_REQUESTS, "upstream" => upstream.to_owned(), "method" => method, "outcome" => outcome)
        .increment(1);
}

/// Whether an upstream is serving, refreshed before each scrape.
pub fn set_upstream_up(upstream: &str, up: bool) {
    gauge!(MCP_UPSTREAM_UP, "upstream" => upstream.to_owned()).set(if up { 1.0 } else { 0.0 });
}

/// A finished request.
fn record_request(front: &'static str, method: &str, outcome: Outcome) {
    counters()
        .get(&[REQUESTS_TOTAL, front, method, outcome.as_str()], || {
            counter!(REQUESTS_TOTAL, "front" => front, "method" => method.to_owned(), "outcome" => outcome.as_str())
        })
        .increment(1);
}

/// How a request ended, as `dgw_requests_total` and the log count it, on
/// every front alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// Refused by the enforcement pipeline: a denial or a rejection.
    Denied,
    /// Malformed, unknown, or failed inside the gateway.
    Error,
    /// The client went away before the answer.
    Cancelled,
}

impl Outcome {
    /// Every outcome, in the order above.
    pub const EVERY: [Outcome; 4] = [
        Outcome::Ok,
        Outcome::Denied,
        Outcome::Error,
        Outcome::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Denied => "denied",
            Outcome::Error => "error",
            Outcome::Cancelled => "cancelled",
        }
    }
}

/// A request as metrics and the log count it: one `dgw_requests_total`
/// increment and one info line, when [ended](Self::end) or dropped. A
/// record dropped without an end counts as [`Outcome::Cancelled`]: the
/// request's future was dropped because its client went away.
pub struct RequestRecord<'a> {
    front: &'static str,
    method: &'a str,
    started: Instant,
    outcome: Outcome,
}

impl<'a> RequestRecord<'a> {
    pub fn start(front: &'static str, method: &'a str) -> Self {
        Self {
            front,
            method,
            started: Instant::now(),
            outcome: Outcome::Cancelled,
        }
    }

    /// Counts and logs the request as ended with `outcome`.
    pub fn end(mut self, outcome: Outcome) {
        self.outcome = outcome;
    }
}

impl Drop for RequestRecord<'_> {
    fn drop(&mut self) {
        record_request(self.front, self.method, self.outcome);
        // An access line per request costs 10-20 % of saturated throughput
        // (docs/performance.md); the audit log already records every
        // decision. At debug with the request's span, on the same target:
        // `[log] level = "info,dgw::request=debug"`.
        tracing::debug!(
            target: "dgw::request",
            front = self.front,
            method = self.method,
            outcome = self.outcome.as_str(),
            micros = self.started.elapsed().as_micros() as u64,
            "request"
        );
    }
}

/// A denial.
pub fn record_denial(protocol: &'static str, kind: &str) {
    counters()
        .get(
            &[DENIALS_TOTAL, protocol, kind],
            || counter!(DENIALS_TOTAL, "protocol" => protocol, "type" => kind.to_owned()),
        )
        .increment(1);
}

/// A protocol's own event (one of a closed set it names).
pub fn record_protocol_event(protocol: &'static str, event: &'static str) {
    counter!(PROTOCOL_EVENTS, "protocol" => protocol, "event" => event).increment(1);
}

/// Microcents settled for work a protocol brokered.
pub fn record_protocol_settled(protocol: &'static str, microcents: u64) {
    counter!(PROTOCOL_SETTLED, "protocol" => protocol).increment(microcents);
}

/// What one kind of a protocol's records takes in the state (a closed set
/// of kinds the protocol names).
pub fn set_protocol_stored(protocol: &'static str, kind: &'static str, records: usize, bytes: u64) {
    gauge!(PROTOCOL_STORED_BYTES, "protocol" => protocol, "kind" => kind).set(bytes as f64);
    gauge!(PROTOCOL_STORED_RECORDS, "protocol" => protocol, "kind" => kind).set(records as f64);
}

/// A DCT found among the verified ones (`hit`) or verified anew.
pub fn record_token_cache(hit: bool) {
    static HIT: OnceLock<Counter> = OnceLock::new();
    static MISS: OnceLock<Counter> = OnceLock::new();
    let (cell, result) = if hit { (&HIT, "hit") } else { (&MISS, "miss") };
    once(cell, || counter!(TOKEN_CACHE_LOOKUPS, "result" => result)).increment(1);
}

/// How long an authorization took.
pub fn record_authorize(elapsed: Duration) {
    static H: OnceLock<Histogram> = OnceLock::new();
    once(&H, || histogram!(AUTHORIZE_DURATION)).record(elapsed.as_secs_f64());
}

/// Bytes of an upstream's stderr dropped because a line was too long.
pub fn record_stderr_dropped(upstream: &str, bytes: u64) {
    counter!(STDERR_DROPPED, "upstream" => upstream.to_owned()).increment(bytes);
}

/// Whether the budget state can be written, refreshed before each scrape.
pub fn set_state_writable(writable: bool) {
    gauge!(STATE_WRITABLE).set(if writable { 1.0 } else { 0.0 });
}

/// Reservations the sweeper ended at their deadline.
pub fn record_reservations_expired(n: usize) {
    counter!(RESERVATIONS_EXPIRED).increment(n as u64);
}

/// A connection closed on arrival because the listener was full of busy ones.
pub fn record_connection_refused() {
    counter!(CONNECTIONS_REFUSED).increment(1);
}

/// An idle connection closed to make room for a new one.
pub fn record_connection_shed() {
    counter!(CONNECTIONS_SHED).increment(1);
}

/// The audit log's anchor moved to the seal at record `seq`.
pub fn set_audit_sealed_records(records: u64) {
    gauge!(AUDIT_SEALED_RECORDS).set(records as f64);
}

/// Whether the revocation index is complete (the shared feed followed).
pub fn set_revocation_index_complete(complete: bool) {
    gauge!(REVOCATION_INDEX_COMPLETE).set(if complete { 1.0 } else { 0.0 });
}

/// A revocation recorded.
pub fn record_revocation() {
    counter!(REVOCATIONS_TOTAL).increment(1);
}

/// A top spender's gauges, refreshed before each scrape (the others age out).
pub fn set_delegation_gauges(tenant: &str, delegation: &str, spent: u64, budget: u64) {
    let labels = [
        ("tenant", tenant.to_owned()),
        ("delegation", delegation.to_owned()),
    ];
    gauge!(DELEGATION_SPENT, &labels).set(spent as f64);
    gauge!(DELEGATION_BUDGET, &labels).set(budget as f64);
}

/// Budget gauges, refreshed before each scrape.
pub fn set_budget_gauges(tenant: &str, spent: u64, remaining: u64, open_reservations: usize) {
    gauge!(BUDGET_SPENT, "tenant" => tenant.to_owned()).set(spent as f64);
    gauge!(BUDGET_REMAINING, "tenant" => tenant.to_owned()).set(remaining as f64);
    gauge!(RESERVATIONS_OPEN).set(open_reservations as f64);
}
