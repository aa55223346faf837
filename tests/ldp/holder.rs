//! Who may end a session or its tasks (issue 30, finding 2): routers share
//! one secret per delegate, so `from` proves nothing. SESSION_CLOSE and
//! TASK_CANCEL are bound to the credential that pays the session (the
//! paying DCT's delegation); administrators close a session with
//! `ldp/session/close` (decisions 145-146).

use super::budget::kind;
use super::scripted::Answer;
use super::*;

const MALLORY: &str = "ldp:delegate:mallory";
const ADMIN: &str = "ldp-test-admin-secret-0123456789abcdef";

fn admin_config() -> String {
    use sha2::Digest;
    let digest = hex::encode(sha2::Sha256::digest(ADMIN.as_bytes()));
    format!(
        "session_budget_microcents = 100000\n\
         [[ldp.domains]]\nname = \"test-domain\"\ntenant = \"acme\"\nbudget_microcents = 100000\n\
         [[admin.tokens]]\nname = \"ops\"\nsha256 = \"{digest}\"\n"
    )
}

impl World {
    /// `e` sent by a router whose client presents `authorization`.
    fn send_as(&self, authorization: Option<&str>, e: &LdpEnvelope) -> Result<LdpEnvelope, String> {
        let client = World::client_with(authorization);
        self.rt.block_on(client.send_message(&self.url, e))
    }

    fn state(&self, session: &str) -> Value {
        self.gw()
            .call_as(
                &format!("Bearer {ADMIN}"),
                "ldp/session",
                json!({"delegate": "echo", "session_id": session}),
            )
            .1["result"]["session"]["state"]
            .clone()
    }
}

fn close_body() -> LdpMessageBody {
    LdpMessageBody::SessionClose {
        reason: Some("mine now".into()),
    }
}

fn cancel_body(task: &str) -> LdpMessageBody {
    LdpMessageBody::TaskCancel {
        task_id: task.into(),
    }
}

/// The attack: another router holding the shared secret, with no
/// DCT (or another delegation's, or claiming the payer's `from`), closes a
/// session someone else pays for, or cancels its tasks. All refused;
/// nothing changes: the session, its tasks, its budget, the delegate's
/// work; the payer goes on. An administrator closes it by method.
#[test]
fn only_the_payer_ends_its_session_or_its_tasks() {
    let (w, delegate) = World::scripted(10_000, 100, &admin_config());
    let session = "d1111111-2222-4333-8444-555555555555";
    w.open(session);
    // One task open at the delegate (an update), one in flight.
    let p = w.submit_async(session, "t-open");
    assert!(delegate.wait_held("t-open", || p.is_finished()));
    assert!(delegate.answer("t-open", Answer::Update));
    assert_eq!(kind(&w.finish(p).unwrap()), "update");
    let in_flight = w.submit_async(session, "t-flight");
    assert!(delegate.wait_held("t-flight", || in_flight.is_finished()));
    assert_eq!(w.spending(session), (0, 200));

    let other_dct = format!(
        "DCT {}",
        root_token_for(&seed(1), &seed(3), &["ldp:echo:echo"], 10_000, 3600, del(2)).encode()
    );
    let attempts: [(Option<&str>, &str, &str); 4] = [
        (None, MALLORY, "credential_required"),
        (None, ROUTER, "credential_required"),
        (Some(&other_dct), MALLORY, "not_session_payer"),
        (Some(&other_dct), ROUTER, "not_session_payer"),
    ];
    for (authorization, from, expect) in attempts {
        for body in [close_body(), cancel_body("t-open"), cancel_body("t-flight")] {
            let what = body_kind(&body);
            let a = w.send_as(authorization, &World::message_from(from, session, body));
            let e = match a {
                Ok(a) => panic!(
                    "{what} from {from} with {:?} was taken: {a:?}; the session is now {}",
                    authorization.map(|_| "another delegation's DCT"),
                    w.state(session)
                ),
                Err(e) => e,
            };
            assert!(e.contains(expect), "{what} from {from}: {e}");
        }
    }
    // Nothing changed: the session, its tasks, what it holds.
    assert_eq!(w.state(session), "ACTIVE");
    assert_eq!(w.spending(session), (0, 200));
    assert!(delegate.holds("t-flight"));
    assert!(delegate.answer("t-flight", Answer::Result));
    assert_eq!(kind(&w.finish(in_flight).unwrap()), "result");
    let a = w.run_task(&delegate, session, "t-next", Answer::Result);
    assert_eq!(kind(&a.unwrap()), "result");
    assert_eq!(w.spending(session), (200, 100));

    // The administrator's method: refused without an admin secret (the
    // payer's DCT and Mallory's alike), done with one.
    let params = json!({"delegate": "echo", "session_id": session, "reason": "abuse"});
    let r = w.gw().call("ldp/session/close", params.clone());
    assert_eq!(r["error"]["data"]["type"], "admin_required", "{r}");
    let mine = format!(
        "DCT {}",
        std::fs::read_to_string(w._tmp.path().join("router.dct")).unwrap()
    );
    for authorization in [&mine, &other_dct] {
        let (_, r) = w
            .gw()
            .call_as(authorization, "ldp/session/close", params.clone());
        assert_eq!(r["error"]["data"]["type"], "admin_required", "{r}");
    }
    assert_eq!(w.state(session), "ACTIVE");
    let (_, r) = w.gw().call_as(
        &format!("Bearer {ADMIN}"),
        "ldp/session/close",
        params.clone(),
    );
    assert_eq!(r["result"]["state"], "CLOSED", "{r}");
    assert_eq!(r["result"]["cancelled_tasks"], json!(["t-open"]), "{r}");
    assert_eq!(w.state(session), "CLOSED");
    assert_eq!(w.spending(session), (200, 0));
    let e = w.submit(session, "t-late").unwrap_err();
    assert!(e.contains("409"), "{e}");
    // Closing it again is refused, as is an unknown session.
    let (_, r) = w
        .gw()
        .call_as(&format!("Bearer {ADMIN}"), "ldp/session/close", params);
    assert_eq!(r["error"]["data"]["type"], "invalid_params", "{r}");
    let (_, r) = w.gw().call_as(
        &format!("Bearer {ADMIN}"),
        "ldp/session/close",
        json!({"delegate": "echo", "session_id": "nope"}),
    );
    assert_eq!(r["error"]["data"]["type"], "invalid_params", "{r}");
    let (_, events) = w
        .gw()
        .call_as(&format!("Bearer {ADMIN}"), "dgw/audit", json!({}));
    let events = events["result"]["events"].to_string();
    assert!(events.contains("token:ops"), "{events}");
}

/// In a session its trust domain pays (no DCT), the router that opened it
/// is known only by `from`: another `from` is refused, the opener's is
/// taken (what a holder of the shared secret can still do is in
/// docs/security.md, row 15c).
#[test]
fn a_domain_paid_session_ends_only_by_its_opener() {
    let (mut w, delegate) = World::scripted(10_000, 100, &admin_config());
    w.client = World::client_with(None);
    let session = "d2111111-2222-4333-8444-555555555555";
    w.open(session);
    let a = w.run_task(&delegate, session, "t-1", Answer::Update);
    assert_eq!(kind(&a.unwrap()), "update");
    let mine = format!(
        "DCT {}",
        std::fs::read_to_string(w._tmp.path().join("router.dct")).unwrap()
    );
    for (authorization, body) in [
        (None, close_body()),
        (None, cancel_body("t-1")),
        (Some(mine.as_str()), close_body()),
    ] {
        let e = w
            .send_as(authorization, &World::message_from(MALLORY, session, body))
            .unwrap_err();
        assert!(e.contains("403") && e.contains("not_session_payer"), "{e}");
    }
    // A DCT does not end a session the domain pays, even from its opener.
    let e = w
        .send_as(
            Some(&mine),
            &World::message_from(ROUTER, session, close_body()),
        )
        .unwrap_err();
    assert!(e.contains("not_session_payer"), "{e}");
    assert_eq!(w.state(session), "ACTIVE");
    assert!(w.close(session).is_ok());
    assert_eq!(w.state(session), "CLOSED");
}

fn body_kind(b: &LdpMessageBody) -> &'static str {
    match b {
        LdpMessageBody::SessionClose { .. } => "SESSION_CLOSE",
        LdpMessageBody::TaskCancel { .. } => "TASK_CANCEL",
        _ => "other",
    }
}
