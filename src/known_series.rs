//! The label values a gateway knows once it is configured (its protocols,
//! its fronts' methods, its upstreams), handed to the core's telemetry so
//! every series a dashboard or an alert reads is on the first scrape.

use crate::protocol::Registry;
use crate::telemetry::{self, KnownLabels};

/// Exports every counter and histogram at zero for what the gateway was
/// configured with: its `protocols`, whether gRPC listens, its `upstreams`
/// (adds nothing to a series already counted). Takes no `Config`, so this
/// module stays out of the binary's config/serve cycle (tests/layers.rs).
pub fn export(protocols: &Registry, grpc: bool, upstreams: &[&str]) {
    let names: Vec<&'static str> = protocols.all().iter().map(|p| p.id().name).collect();
    // The pipeline's vocabulary, which it speaks for every protocol, and a
    // malformed credential.
    let denial_types: Vec<&'static str> = delegateos::DenialType::EVERY
        .iter()
        .map(|t| t.as_str())
        .chain([crate::protocol::MALFORMED_CREDENTIAL])
        .collect();
    let mut jsonrpc: Vec<&str> = crate::jsonrpc::METHODS.to_vec();
    jsonrpc.extend(protocols.method_names());
    // What the JSON-RPC front counts an unknown method and a request too
    // malformed to have one as.
    jsonrpc.extend(["unknown", "-"]);
    let mut mcp: Vec<&str> = crate::mcp::proxy::METHODS.to_vec();
    mcp.extend(crate::mcp::proxy::DATA_METHODS);
    mcp.push("other");
    let http: Vec<&str> = protocols
        .hosting()
        .iter()
        .filter(|h| !h.http_paths().is_empty())
        .map(|h| h.id.name)
        .collect();
    let mut fronts = vec![("jsonrpc", jsonrpc), ("mcp", mcp), ("http", http)];
    if grpc {
        fronts.push(("grpc", crate::grpc::service::METHODS.to_vec()));
    }
    telemetry::export_at_zero(&KnownLabels {
        protocols: &names,
        denial_types: &denial_types,
        fronts: &fronts,
        upstreams,
        layers: crate::state::METRICS,
    });
}
