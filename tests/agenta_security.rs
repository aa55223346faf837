//! Agenta at the security boundary: hostile input (oversized, replayed
//! payment authorizations, stray and cross-request receipts, traversal-shaped
//! paths, foreign DCTs), administrators only by secret, and buyers'
//! callbacks called only on listed hosts. The real `dgw` and a seller
//! written in the tests.

mod support;

use serde_json::{json, Value};
use support::market::*;
use support::*;

#[test]
fn loopback_without_admin_tokens_cannot_register_offers() {
    // Decision 62: loopback reads, it never changes what others rely on.
    let dir = tempfile::tempdir().unwrap();
    let config = gateway_config(
        dir.path(),
        &[("acme", seed(1).principal_id())],
        "[agenta]\ntenant = \"acme\"\n[agenta.currencies]\nUSD = 1000000\n",
    );
    let gateway = Gateway::start(&config);
    let seller = Seller::start();
    let body = offer(&seller, "1", "buyer_verified", 600).to_string();
    let (status, _, body) = http_exchange(
        &gateway.addr,
        "POST",
        "/agenta/v0/offers",
        &[],
        body.as_bytes(),
    );
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!((status, code(&body)), (403, "admin_required"));
    let (status, _) = gateway.http("GET", "/agenta/v0/offers/offer.summarize-1", b"");
    assert_eq!(status, 404, "nothing was registered");
}

#[test]
fn hostile_input_is_refused_and_changes_nothing() {
    let w = World::new(10_000, "buyer_verified", 600);
    // Oversized: refused by the front before Agenta reads it.
    let big = vec![b' '; 2 << 20];
    let (status, body) = w.send(
        "POST",
        "/agenta/v0/execution-requests",
        Some(&w.dct()),
        &big,
    );
    assert_eq!(
        (status, body["error"]["data"]["type"].clone()),
        (413, json!("body_too_large"))
    );
    // A payment authorization is bound to one request: reused, refused.
    assert_eq!(w.buy(&request(1, 300)).0, 202);
    let mut reused = request(2, 300);
    reused["payment"]["payment_authorization_id"] = json!("pay-00000001");
    let (status, body) = w.buy(&reused);
    assert_eq!(
        (status, code(&body)),
        (402, "budget_authorization_missing"),
        "{body}"
    );
    assert_eq!(w.state("req-00000002")["status"], "failed");
    assert_eq!(w.seller.forwards().len(), 1, "never forwarded");
    // A receipt for a request that does not exist looks like a bad secret.
    let secret = w.secret_of("req-00000001");
    let mut stray = receipt(&request(1, 300), "rcpt-stray", "in_progress");
    stray["request_id"] = json!("req-99999999");
    assert_eq!(w.report(Some(&secret), &stray).0, 401);
    // One request's secret does not move another's.
    assert_eq!(w.buy(&request(3, 300)).0, 202);
    let other = receipt(&request(3, 300), "rcpt-other", "in_progress");
    assert_eq!(w.report(Some(&secret), &other).0, 401);
    assert_eq!(w.state("req-00000003")["status"], "accepted");
    // Paths that are not endpoints, and reading without a credential.
    for path in [
        "/agenta/v0/execution-requests/../offers",
        "/agenta/v0/schemas/../../etc/passwd",
        "/agenta/v0/nothing",
    ] {
        assert_eq!(w.send("GET", path, None, b"").0, 404, "{path}");
    }
    assert_eq!(w.send("GET", "/agenta/v0/offers", None, b"").0, 405);
    assert_eq!(
        w.send("DELETE", "/agenta/v0/offers/offer.summarize-1", None, b"")
            .0,
        405
    );
    let (status, _) = w.send(
        "GET",
        "/agenta/v0/execution-requests/req-00000001",
        None,
        b"",
    );
    assert_eq!(status, 401);
    // A DCT of another tenant's root pays nothing here.
    let stranger = root_token(
        &seed(9),
        &seed(2),
        &["agenta:execute:offer:offer.summarize-1"],
        10_000_000_000,
        3600,
    )
    .encode();
    let (status, body) = w.post(
        "/agenta/v0/execution-requests",
        Some(&format!("DCT {stranger}")),
        &request(4, 300),
    );
    assert_eq!((status, code(&body)), (402, "budget_authorization_missing"));
}

#[test]
fn receipts_reach_a_buyer_callback_only_on_an_allowed_host() {
    let w = World::with(
        1000,
        "buyer_verified",
        600,
        "buyer_callback_hosts = [\"127.0.0.1\"]",
    );
    let buyer = Seller::start();
    let mut req = request(1, 300);
    req["callback"] = json!({"url": buyer.url, "auth_reference": "buyer-own-secret"});
    assert_eq!(w.buy(&req).0, 202);
    let secret = w.secret_of("req-00000001");
    let done = completed(&req, "rcpt-done", json!("short"), 250);
    assert_eq!(w.report(Some(&secret), &done).0, 200);
    let started = std::time::Instant::now();
    while buyer.forwards().len() < 2 {
        assert!(started.elapsed().as_secs() < 10, "{:?}", buyer.forwards());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let statuses: Vec<Value> = buyer
        .forwards()
        .iter()
        .map(|r| r["status"].clone())
        .collect();
    assert!(statuses.contains(&json!("accepted")) && statuses.contains(&json!("completed")));
    assert!(buyer
        .authorizations
        .lock()
        .unwrap()
        .iter()
        .all(|a| a.as_deref() == Some("Bearer buyer-own-secret")));
    // A callback on a host not in the list (the same server, named
    // otherwise) is never called.
    let mut req = request(2, 300);
    req["callback"] = json!({"url": buyer.url.replace("127.0.0.1", "localhost")});
    assert_eq!(w.buy(&req).0, 202);
    let secret = w.secret_of("req-00000002");
    let done = completed(&req, "rcpt-done", json!("short"), 250);
    assert_eq!(w.report(Some(&secret), &done).0, 200);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(buyer.forwards().len(), 2, "nothing more");
}
