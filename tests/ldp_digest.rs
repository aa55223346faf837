//! LDP between digest-aware ends (`payload_digest = true`): a router and
//! a delegate built on dgw's own LDP adapter bind every payload; dgw
//! requires and sends the digest, so a payload changed on the way is
//! refused (the reference's HMAC alone would let it through).

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use ldp::message::{Body, Envelope};
use ldp::mode::PayloadMode;
use ldp::signing;
use serde_json::{json, Value};
use support::*;

const SECRET: &[u8] = b"digest-aware-shared-secret-0123456789";
const DELEGATE: &str = "ldp:delegate:bound";
const ROUTER: &str = "ldp:delegate:router";

fn now() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

fn envelope(session: &str, from: &str, to: &str, body: Body) -> Envelope {
    Envelope {
        message_id: delegate_gateway::random::session_id().unwrap(),
        session_id: session.into(),
        from: from.into(),
        to: to.into(),
        body,
        payload_mode: PayloadMode::Text,
        timestamp: now(),
        provenance: None,
        signature: None,
        signature_algorithm: None,
        nonce: Some(delegate_gateway::random::session_id().unwrap()),
        payload_digest: None,
    }
}

/// A delegate that requires a payload digest on everything it gets and
/// binds everything it answers.
async fn answer(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let path = req.uri().path().to_owned();
    let body = req.into_body().collect().await.unwrap().to_bytes();
    if path == "/ldp/identity" {
        let card = json!({"delegate_id": DELEGATE, "name": "Bound", "model_family": "test",
            "model_version": "1", "trust_domain": {"name": "lab", "allow_cross_domain": false, "trusted_peers": []},
            "context_window": 1, "capabilities": [{"name": "think"}], "supported_payload_modes": ["text"],
            "endpoint": ""});
        return Ok(Response::new(Full::new(Bytes::from(card.to_string()))));
    }
    let e = Envelope::parse(&body).unwrap();
    if signing::verify(&e, SECRET, true).is_err() {
        return Ok(Response::builder()
            .status(401)
            .body(Full::new(Bytes::from("unbound")))
            .unwrap());
    }
    let reply = match &e.body {
        Body::Hello { .. } => Body::CapabilityManifest {
            capabilities: json!({"skills": ["think"]}),
        },
        Body::SessionPropose { .. } => Body::SessionAccept {
            session_id: e.session_id.clone(),
            negotiated_mode: PayloadMode::Text,
            fallback_chain: None,
        },
        Body::TaskSubmit { task_id, input, .. } => Body::TaskResult {
            task_id: task_id.clone(),
            output: json!({"got": input}),
            provenance: serde_json::from_value(
                json!({"produced_by": DELEGATE, "model_version": "1",
                "payload_mode_used": "text"}),
            )
            .unwrap(),
        },
        _ => Body::SessionClose { reason: None },
    };
    let mut out = envelope(&e.session_id, DELEGATE, &e.from, reply);
    signing::apply(&mut out, SECRET, true);
    Ok(Response::new(Full::new(Bytes::from(
        serde_json::to_string(&out).unwrap(),
    ))))
}

#[test]
fn payloads_are_bound_end_to_end() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let delegate = format!("http://{}", listener.local_addr().unwrap());
    rt.spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(
                hyper_util::rt::TokioIo::new(stream),
                hyper::service::service_fn(answer),
            ));
        }
    });
    let tmp = tempfile::tempdir().unwrap();
    let root = seed(1);
    let extra = format!(
        "[ldp]\n[[ldp.delegates]]\nname = \"bound\"\nurl = {delegate:?}\nsecret = {:?}\n\
         trust_domain = \"lab\"\ntenant = \"acme\"\ncost_microcents = 10\npayload_digest = true\n",
        std::str::from_utf8(SECRET).unwrap()
    );
    let gw = Gateway::start(&gateway_config(
        tmp.path(),
        &[("acme", root.principal_id())],
        &extra,
    ));
    let dct = format!(
        "DCT {}",
        root_token(&root, &seed(2), &["ldp:think:bound"], 100, 3600).encode()
    );
    let send = |e: &Envelope| {
        let (status, _, body) = http_exchange(
            &gw.addr,
            "POST",
            "/ldp/bound/messages",
            &[("Authorization", dct.as_str())],
            serde_json::to_string(e).unwrap().as_bytes(),
        );
        (
            status,
            serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null),
        )
    };
    let signed = |mut e: Envelope, bind: bool| {
        signing::apply(&mut e, SECRET, bind);
        e
    };
    let session = "a1111111-2222-4333-8444-555555555555";
    let hello = Body::Hello {
        delegate_id: ROUTER.into(),
        supported_modes: vec![PayloadMode::Text],
    };
    // Without a digest: refused before anything is forwarded.
    let (status, a) = send(&signed(
        envelope("", ROUTER, DELEGATE, hello.clone()),
        false,
    ));
    assert_eq!(
        (status, a["error"]["type"].as_str()),
        (401, Some("bad_signature")),
        "{a}"
    );
    let (status, a) = send(&signed(envelope("", ROUTER, DELEGATE, hello), true));
    assert_eq!(status, 200, "{a}");
    assert_eq!(a["body"]["type"], "CAPABILITY_MANIFEST");
    let propose: Body =
        serde_json::from_value(json!({"type": "SESSION_PROPOSE", "config": {"ttl_secs": 60}}))
            .unwrap();
    let (status, a) = send(&signed(envelope(session, ROUTER, DELEGATE, propose), true));
    assert_eq!(
        (status, a["body"]["type"].as_str()),
        (200, Some("SESSION_ACCEPT")),
        "{a}"
    );
    let task = |input: Value| Body::TaskSubmit {
        task_id: "t-1".into(),
        skill: "think".into(),
        input,
        contract: None,
    };
    // A payload changed after signing: the header signature still holds,
    // the digest does not.
    let mut changed = signed(
        envelope(session, ROUTER, DELEGATE, task(json!({"q": "2+2"}))),
        true,
    );
    changed.body = task(json!({"q": "rm -rf /"}));
    let (status, a) = send(&changed);
    assert_eq!(
        (status, a["error"]["type"].as_str()),
        (401, Some("bad_signature")),
        "{a}"
    );
    // Bound as sent: forwarded with dgw's digest, answered with the delegate's.
    let (status, a) = send(&signed(
        envelope(session, ROUTER, DELEGATE, task(json!({"q": "2+2"}))),
        true,
    ));
    assert_eq!(status, 200, "{a}");
    let answer: Envelope = Envelope::from_value(a).unwrap();
    signing::verify(&answer, SECRET, true).unwrap();
    let Body::TaskResult { output, .. } = &answer.body else {
        panic!("{answer:?}")
    };
    assert_eq!(output["got"]["q"], "2+2");
    assert!(gw
        .metrics()
        .contains(r#"dgw_budget_spent_microcents{tenant="acme"} 10"#));
}
