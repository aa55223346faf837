//! OpenTelemetry traces (issue 37): with `[telemetry] otlp_endpoint` set,
//! the spans of a call (its request, and each pipeline stage) reach a real
//! OTLP/HTTP receiver, decoded here with the OpenTelemetry protobuf
//! definitions; they are parented to the caller's `traceparent` (HTTP and
//! gRPC), the upstream sees dgw's own, a malformed or oversized one starts
//! a new trace, and no exported byte holds a credential. Without the
//! section nothing is traced or propagated.

// Test helpers outside #[test] functions (the OTLP receiver, the schema's
// reader): a failure should stop the test loudly, and clippy's
// allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{json, Value};
use support::mcp::*;
use support::*;

/// One request the receiver was sent: its path, content type and body.
type Export = (String, Option<String>, Vec<u8>);

/// What the receiver was sent.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<Export>>>);

impl Received {
    fn bodies(&self) -> Vec<Export> {
        self.0.lock().unwrap().clone()
    }

    /// Every span, with the resource's `service.name`.
    fn spans(&self) -> Vec<(String, Span)> {
        let mut out = Vec::new();
        for (_, _, body) in self.bodies() {
            let request = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
            for rs in request.resource_spans {
                let service = rs
                    .resource
                    .iter()
                    .flat_map(|r| r.attributes.iter())
                    .find(|a| a.key == "service.name")
                    .and_then(|a| text(a.value.as_ref()?.value.as_ref()?))
                    .unwrap_or_default();
                for ss in rs.scope_spans {
                    for s in ss.spans {
                        out.push((service.clone(), s));
                    }
                }
            }
        }
        out
    }
}

fn text(v: &AnyValue) -> Option<String> {
    match v {
        AnyValue::StringValue(s) => Some(s.clone()),
        _ => None,
    }
}

fn attr(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|a| a.key == key)
        .and_then(|a| text(a.value.as_ref()?.value.as_ref()?))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An OTLP/HTTP receiver on a free port: answers every POST with an empty
/// (valid) ExportTraceServiceResponse and keeps what it was sent.
async fn receiver() -> (String, Received) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let received = Received::default();
    let kept = received.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let kept = kept.clone();
            let service = hyper::service::service_fn(move |req: hyper::Request<_>| {
                let kept = kept.clone();
                async move {
                    let path = req.uri().path().to_owned();
                    let kind = req
                        .headers()
                        .get("content-type")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned);
                    let body = BodyExt::collect(req.into_body()).await?.to_bytes();
                    kept.0.lock().unwrap().push((path, kind, body.to_vec()));
                    Ok::<_, hyper::Error>(hyper::Response::new(Full::new(Bytes::new())))
                }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
            );
        }
    });
    (addr, received)
}

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";
const RPC_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const RPC_SPAN: &str = "b7ad6b7169203331";
const GRPC_TRACE: &str = "11111111111111111111111111111111";
const GRPC_SPAN: &str = "2222222222222222";

fn traceparent(trace: &str, span: &str) -> String {
    format!("00-{trace}-{span}-01")
}

fn authorize(token: &str, resource: &str) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": 1, "method": "delegateos/authorize",
        "params": {"dct": token, "namespace": "docs", "action": "read",
                   "resource": resource, "costMicrocents": 0}})
    .to_string()
    .into_bytes()
}

#[tokio::test(flavor = "multi_thread")]
async fn spans_reach_a_real_otlp_receiver_parented_to_the_callers_trace() {
    let (otlp, received) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let header_log = dir.path().join("upstream-headers.jsonl");
    let (_upstream, port) = echo_server_on_port(&["--header-log".as_ref(), header_log.as_os_str()]);
    let extra = format!(
        "grpc = \"127.0.0.1:0\"\n[[upstreams]]\nname = \"web\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n\
         [[upstreams.tools]]\nname = \"echo\"\ncapability = \"docs:read\"\nfixed_resource = \"/project/a\"\n\
         cost_microcents = 7\n[telemetry]\notlp_endpoint = \"http://{otlp}\"\nservice_name = \"dgw-under-test\"\n"
    );
    let root = seed(1);
    let config = gateway_config(dir.path(), &[("acme", root.principal_id())], &extra);
    let mut gw = Gateway::start(&config);
    let dct = root_token(&root, &seed(2), &["docs:read:/project/**"], 1_000, 3600);
    let token = dct.encode();
    let delegation = dct.delegation_id().to_string();

    // MCP: a tools/call under the caller's trace.
    let session = McpHttp::connect(&gw.addr, Some(&token)).session.clone();
    let auth = format!("DCT {token}");
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hi"}}});
    let parent = traceparent(CALLER_TRACE, CALLER_SPAN);
    let (status, _, answer) = http_exchange(
        &gw.addr,
        "POST",
        "/mcp",
        &[
            ("Mcp-Session-Id", session.as_str()),
            ("Authorization", auth.as_str()),
            ("traceparent", parent.as_str()),
            ("tracestate", "caller=1"),
            ("X-Request-Id", "mcp-traced"),
        ],
        call.to_string().as_bytes(),
    );
    assert_eq!(status, 200);
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(text_of(&answer), "hi", "{answer}");

    // JSON-RPC: allowed under another trace; then a malformed and an
    // oversized traceparent, each answered as if absent (a new trace).
    let rpc_parent = traceparent(RPC_TRACE, RPC_SPAN);
    let (status, _, _) = http_exchange(
        &gw.addr,
        "POST",
        "/rpc",
        &[
            ("traceparent", rpc_parent.as_str()),
            ("X-Request-Id", "rpc-traced"),
        ],
        &authorize(&token, "/project/b"),
    );
    assert_eq!(status, 200);
    let oversized = format!(
        "{}-{}",
        traceparent(CALLER_TRACE, CALLER_SPAN),
        "f".repeat(4000)
    );
    for (tp, id) in [
        ("00-not-a-trace-at-all-01", "rpc-malformed"),
        (
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "rpc-zero",
        ),
        (oversized.as_str(), "rpc-oversized"),
    ] {
        let (status, _, body) = http_exchange(
            &gw.addr,
            "POST",
            "/rpc",
            &[("traceparent", tp), ("X-Request-Id", id)],
            &authorize(&token, "/project/c"),
        );
        assert_eq!(status, 200, "{id}");
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["result"]["allowed"], true, "{id}: {body}");
    }

    // gRPC: the traceparent in metadata; a denial is traced too.
    let grpc = gw.grpc.clone().unwrap();
    let mut client =
        delegate_gateway::grpc::pb::delegation_gateway_client::DelegationGatewayClient::connect(
            format!("http://{grpc}"),
        )
        .await
        .unwrap();
    let mut request = tonic::Request::new(delegate_gateway::grpc::pb::AuthorizeRequest {
        credential_json: String::new(),
        dct: token.clone(),
        request: Some(delegate_gateway::grpc::pb::CapabilityRequest {
            namespace: "docs".into(),
            action: "read".into(),
            resource: "/elsewhere".into(),
        }),
        cost_microcents: 0,
    });
    request.metadata_mut().insert(
        "traceparent",
        traceparent(GRPC_TRACE, GRPC_SPAN).parse().unwrap(),
    );
    client.authorize(request).await.unwrap_err();

    // Stopping sends what is queued.
    assert!(gw.terminate().success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let spans = loop {
        let spans = received.spans();
        let requests = spans.iter().filter(|(_, s)| s.name == "request").count();
        if requests >= 6 || Instant::now() > deadline {
            break spans;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for (path, kind, _) in received.bodies() {
        assert_eq!(path, "/v1/traces");
        assert_eq!(kind.as_deref(), Some("application/x-protobuf"));
    }
    assert!(spans.iter().all(|(service, _)| service == "dgw-under-test"));
    let names: Vec<&str> = spans.iter().map(|(_, s)| s.name.as_str()).collect();

    // The MCP call: its request span is the caller's span's child, every
    // stage in the caller's trace, each carrying who and what was decided.
    let in_trace = |trace: &str| -> Vec<&Span> {
        spans
            .iter()
            .map(|(_, s)| s)
            .filter(|s| hex(&s.trace_id) == trace)
            .collect()
    };
    let mcp_spans = in_trace(CALLER_TRACE);
    let request = mcp_spans
        .iter()
        .find(|s| s.name == "request")
        .unwrap_or_else(|| panic!("no request span in the caller's trace: {names:?}"));
    assert_eq!(hex(&request.parent_span_id), CALLER_SPAN);
    assert_eq!(attr(request, "dgw.front").as_deref(), Some("mcp"));
    assert_eq!(attr(request, "request_id").as_deref(), Some("mcp-traced"));
    assert_eq!(request.trace_state, "caller=1");
    let by_name: BTreeMap<&str, &Span> = mcp_spans.iter().map(|s| (s.name.as_str(), *s)).collect();
    for stage in [
        "credential_verify",
        "capability_match",
        "reserve",
        "upstream_call",
        "settle",
        "audit",
    ] {
        let s = by_name
            .get(stage)
            .unwrap_or_else(|| panic!("no {stage} span: {names:?}"));
        assert!(!s.parent_span_id.is_empty(), "{stage} has a parent");
        assert!(
            mcp_spans.iter().any(|p| p.span_id == s.parent_span_id),
            "{stage}'s parent is in the trace"
        );
    }
    for stage in [
        "credential_verify",
        "capability_match",
        "reserve",
        "upstream_call",
    ] {
        let s = by_name[stage];
        assert_eq!(attr(s, "dgw.tenant").as_deref(), Some("acme"), "{stage}");
        assert_eq!(
            attr(s, "dgw.protocol").as_deref(),
            Some("delegateos"),
            "{stage}"
        );
        assert_eq!(
            attr(s, "dgw.delegation").as_deref(),
            Some(delegation.as_str()),
            "{stage}"
        );
    }
    for (stage, decision) in [
        ("credential_verify", "allowed"),
        ("capability_match", "allowed"),
        ("reserve", "allowed"),
        ("upstream_call", "answered"),
        ("settle", "charged"),
        ("audit", "allowed"),
    ] {
        assert_eq!(
            attr(by_name[stage], "dgw.decision").as_deref(),
            Some(decision),
            "{stage}"
        );
    }
    // The upstream saw dgw's upstream_call span as its parent, in the
    // caller's trace.
    let upstream_call = by_name["upstream_call"];
    let log = std::fs::read_to_string(&header_log).unwrap();
    let sent: Vec<String> = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["body"].to_string().contains("tools/call"))
        .filter_map(|l| l["headers"]["traceparent"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        sent,
        [format!(
            "00-{CALLER_TRACE}-{}-01",
            hex(&upstream_call.span_id)
        )],
        "{log}"
    );

    // JSON-RPC and gRPC: parented likewise; the gRPC denial is traced.
    let rpc = in_trace(RPC_TRACE);
    let rpc_request = rpc
        .iter()
        .find(|s| s.name == "request")
        .expect("rpc request");
    assert_eq!(hex(&rpc_request.parent_span_id), RPC_SPAN);
    assert_eq!(attr(rpc_request, "dgw.front").as_deref(), Some("jsonrpc"));
    assert!(rpc.iter().any(|s| s.name == "capability_match"));
    let grpc = in_trace(GRPC_TRACE);
    let grpc_request = grpc
        .iter()
        .find(|s| s.name == "request")
        .expect("grpc request");
    assert_eq!(hex(&grpc_request.parent_span_id), GRPC_SPAN);
    assert_eq!(attr(grpc_request, "dgw.front").as_deref(), Some("grpc"));
    let denied = grpc
        .iter()
        .find(|s| s.name == "capability_match")
        .expect("grpc capability_match");
    assert_eq!(attr(denied, "dgw.decision").as_deref(), Some("denied"));
    assert_eq!(
        attr(denied, "dgw.denial").as_deref(),
        Some("capability_not_granted")
    );

    // Malformed, zero and oversized traceparents: each request is the root
    // of a new trace of its own.
    for id in ["rpc-malformed", "rpc-zero", "rpc-oversized"] {
        let s = spans
            .iter()
            .map(|(_, s)| s)
            .find(|s| s.name == "request" && attr(s, "request_id").as_deref() == Some(id))
            .unwrap_or_else(|| panic!("no request span for {id}"));
        assert!(s.parent_span_id.is_empty(), "{id}: {s:?}");
        let trace = hex(&s.trace_id);
        assert!(
            ![CALLER_TRACE, RPC_TRACE, GRPC_TRACE, "0".repeat(32).as_str()]
                .contains(&trace.as_str()),
            "{id}: {trace}"
        );
    }

    // No credential in any exported byte.
    let signature = token.rsplit('.').next().unwrap();
    for (_, _, body) in received.bodies() {
        for secret in [token.as_str(), signature, session.as_str(), "DCT "] {
            assert!(!contains(&body, secret), "{secret:.20}… was exported");
        }
    }
}

/// Without `[telemetry]` no layer exists: nothing is sent anywhere, and no
/// traceparent goes to an upstream even when the caller sent one.
#[test]
fn without_the_section_nothing_is_traced_or_propagated() {
    let dir = tempfile::tempdir().unwrap();
    let header_log = dir.path().join("upstream-headers.jsonl");
    let (_upstream, port) = echo_server_on_port(&["--header-log".as_ref(), header_log.as_os_str()]);
    let extra = format!(
        "[[upstreams]]\nname = \"web\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n\
         [[upstreams.tools]]\nname = \"echo\"\nopen = true\n"
    );
    let root = seed(1);
    let config = gateway_config(dir.path(), &[("acme", root.principal_id())], &extra);
    let mut gw = Gateway::start(&config);
    let token = root_token(&root, &seed(2), &["docs:read:/project/**"], 1_000, 3600).encode();
    let mcp = McpHttp::connect(&gw.addr, Some(&token));
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hi"}}});
    let parent = traceparent(CALLER_TRACE, CALLER_SPAN);
    let auth = format!("DCT {token}");
    let (status, _, _) = http_exchange(
        &gw.addr,
        "POST",
        "/mcp",
        &[
            ("Mcp-Session-Id", mcp.session.as_str()),
            ("Authorization", auth.as_str()),
            ("traceparent", parent.as_str()),
        ],
        call.to_string().as_bytes(),
    );
    assert_eq!(status, 200);
    assert!(gw.terminate().success());
    let log = std::fs::read_to_string(&header_log).unwrap();
    assert!(log.contains("tools/call"), "{log}");
    assert!(!log.contains("traceparent"), "{log}");
    let logs = std::fs::read_to_string(&gw.stderr_log).unwrap();
    assert!(!logs.contains("exporting traces"), "{logs}");
}

/// LDP: a router's HELLO under its trace reaches the delegate with dgw's
/// `traceparent` in the same trace (the outbound call dgw makes is its
/// `upstream_call` span).
#[tokio::test(flavor = "multi_thread")]
async fn ldp_delegates_get_the_trace_of_the_call_they_serve() {
    use ldp::message::{Body, Envelope};
    use ldp::mode::PayloadMode;
    use ldp::signing;
    const SECRET: &[u8] = b"traced-delegate-shared-secret-0123456789";
    const DELEGATE: &str = "ldp:delegate:traced";
    const ROUTER: &str = "ldp:delegate:router";
    fn envelope(from: &str, to: &str, body: Body) -> Envelope {
        let mut e = Envelope {
            message_id: delegate_gateway::random::session_id().unwrap(),
            session_id: String::new(),
            from: from.into(),
            to: to.into(),
            body,
            payload_mode: PayloadMode::Text,
            timestamp: time::OffsetDateTime::now_utc()
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap(),
            provenance: None,
            signature: None,
            signature_algorithm: None,
            nonce: None,
            payload_digest: None,
        };
        signing::apply(&mut e, SECRET, false);
        e
    }

    let (otlp, received) = receiver().await;
    let seen: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let delegate = format!("http://{}", listener.local_addr().unwrap());
    let kept = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let kept = kept.clone();
            let service = hyper::service::service_fn(move |req: hyper::Request<_>| {
                let kept = kept.clone();
                async move {
                    let tp = req
                        .headers()
                        .get("traceparent")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned);
                    let path = req.uri().path().to_owned();
                    let body = BodyExt::collect(req.into_body()).await?.to_bytes();
                    kept.lock().unwrap().push(tp);
                    if path == "/ldp/identity" {
                        let card = json!({"delegate_id": DELEGATE, "name": "Traced",
                            "model_family": "test", "model_version": "1",
                            "trust_domain": {"name": "lab", "allow_cross_domain": false,
                                             "trusted_peers": []},
                            "context_window": 1, "capabilities": [{"name": "think"}],
                            "supported_payload_modes": ["text"], "endpoint": ""});
                        return Ok(hyper::Response::new(Full::new(Bytes::from(
                            card.to_string(),
                        ))));
                    }
                    let e = Envelope::parse(&body).unwrap();
                    let reply = Body::CapabilityManifest {
                        capabilities: json!({"skills": ["think"]}),
                    };
                    let out = envelope(DELEGATE, &e.from, reply);
                    Ok::<_, hyper::Error>(hyper::Response::new(Full::new(Bytes::from(
                        serde_json::to_string(&out).unwrap(),
                    ))))
                }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
            );
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let root = seed(1);
    let extra = format!(
        "[ldp]\n[[ldp.delegates]]\nname = \"traced\"\nurl = {delegate:?}\nsecret = {:?}\n\
         trust_domain = \"lab\"\ntenant = \"acme\"\ncost_microcents = 10\n\
         [telemetry]\notlp_endpoint = \"http://{otlp}\"\n",
        std::str::from_utf8(SECRET).unwrap()
    );
    let mut gw = Gateway::start(&gateway_config(
        dir.path(),
        &[("acme", root.principal_id())],
        &extra,
    ));
    let dct = format!(
        "DCT {}",
        root_token(&root, &seed(2), &["ldp:think:traced"], 100, 3600).encode()
    );
    let hello = Body::Hello {
        delegate_id: ROUTER.into(),
        supported_modes: vec![PayloadMode::Text],
    };
    let parent = traceparent(CALLER_TRACE, CALLER_SPAN);
    let (status, _, body) = http_exchange(
        &gw.addr,
        "POST",
        "/ldp/traced/messages",
        &[
            ("Authorization", dct.as_str()),
            ("traceparent", parent.as_str()),
        ],
        serde_json::to_string(&envelope(ROUTER, DELEGATE, hello))
            .unwrap()
            .as_bytes(),
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert!(gw.terminate().success());
    let sent = seen.lock().unwrap().clone();
    let hello_tp = sent
        .iter()
        .flatten()
        .find(|tp| tp.contains(CALLER_TRACE))
        .unwrap_or_else(|| panic!("no traceparent in the caller's trace: {sent:?}"))
        .clone();
    let deadline = Instant::now() + Duration::from_secs(20);
    let spans = loop {
        let spans = received.spans();
        if spans.iter().any(|(_, s)| s.name == "upstream_call") || Instant::now() > deadline {
            break spans;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let call = spans
        .iter()
        .map(|(_, s)| s)
        .find(|s| s.name == "upstream_call" && hex(&s.trace_id) == CALLER_TRACE)
        .expect("the outbound call's span");
    assert_eq!(
        hello_tp,
        format!("00-{CALLER_TRACE}-{}-01", hex(&call.span_id))
    );
}

/// A collector that takes the connection and never answers holds no call:
/// spans wait in the bounded queue (then are dropped), each export gives
/// up at `export_timeout`, and the gateway still stops.
#[test]
fn a_stalled_collector_never_holds_a_call() {
    let stalled = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = stalled.local_addr().unwrap();
    let held: Arc<Mutex<Vec<std::net::TcpStream>>> = Arc::default();
    let keep = held.clone();
    std::thread::spawn(move || {
        for s in stalled.incoming().flatten() {
            keep.lock().unwrap().push(s);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let root = seed(1);
    let extra = format!(
        "[telemetry]\notlp_endpoint = \"http://{at}\"\nexport_timeout = \"1s\"\nmax_queue = 8\n"
    );
    let mut gw = Gateway::start(&gateway_config(
        dir.path(),
        &[("acme", root.principal_id())],
        &extra,
    ));
    let token = root_token(&root, &seed(2), &["docs:read:/project/**"], 1_000, 3600).encode();
    let parent = traceparent(CALLER_TRACE, CALLER_SPAN);
    let started = Instant::now();
    for i in 0..200 {
        let (status, _, body) = http_exchange(
            &gw.addr,
            "POST",
            "/rpc",
            &[("traceparent", parent.as_str())],
            &authorize(&token, &format!("/project/{i}")),
        );
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    }
    // 200 calls, each with a request and several stage spans, against a
    // queue of 8 and a collector that never answers: had a call waited on
    // the exporter, these would take 200 export timeouts.
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    assert!(gw.terminate().success());
    assert!(!held.lock().unwrap().is_empty(), "dgw tried to export");
}
