//! A task cancelled while dgw waits on the delegate (issue 30, finding 1):
//! the cancel is forwarded and the task marked cancelled; the delegate's
//! result that still comes back is charged (the delegate did the work)
//! and withheld from the router. A result reaches a router only if it was
//! charged (decisions 143-144).

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use super::budget::{kind, why};
use super::scripted::{Answer, Scripted};
use super::*;

/// A router's request whose answer is not awaited yet.
pub(super) type Pending = tokio::task::JoinHandle<Result<LdpEnvelope, String>>;

impl World {
    /// dgw in front of the scripted delegate.
    pub(super) fn scripted(budget: u64, cost: u64, extra: &str) -> (World, Scripted) {
        let mut delegate = None;
        let w = World::before(budget, cost, extra, |rt| {
            let s = Scripted::start(rt);
            let url = s.url.clone();
            delegate = Some(s);
            url
        });
        (w, delegate.unwrap())
    }

    /// TASK_SUBMIT of `task`, sent; its answer not awaited.
    pub(super) fn submit_async(&self, session: &str, task: &str) -> Pending {
        let m = self.message(
            session,
            LdpMessageBody::TaskSubmit {
                task_id: task.into(),
                skill: "echo".into(),
                input: json!({"text": task}),
                contract: None,
            },
        );
        let (client, url) = (self.client.clone(), self.url.clone());
        self.rt
            .spawn(async move { client.send_message(&url, &m).await })
    }

    /// The answer to a pending request (which must come within 20 s).
    pub(super) fn finish(&self, pending: Pending) -> Result<LdpEnvelope, String> {
        self.rt
            .block_on(async { tokio::time::timeout(Duration::from_secs(20), pending).await })
            .expect("the router's request ended within 20 s")
            .unwrap()
    }

    /// Task `task` run to the delegate's answer `how`.
    pub(super) fn run_task(
        &self,
        delegate: &Scripted,
        session: &str,
        task: &str,
        how: Answer,
    ) -> Result<LdpEnvelope, String> {
        let p = self.submit_async(session, task);
        if delegate.wait_held(task, || p.is_finished()) {
            assert!(delegate.answer(task, how));
        }
        self.finish(p)
    }

    pub(super) fn cancel(&self, session: &str, task: &str) -> Result<LdpEnvelope, String> {
        self.send(&self.message(
            session,
            LdpMessageBody::TaskCancel {
                task_id: task.into(),
            },
        ))
    }

    pub(super) fn close(&self, session: &str) -> Result<LdpEnvelope, String> {
        self.send(&self.message(
            session,
            LdpMessageBody::SessionClose {
                reason: Some("done".into()),
            },
        ))
    }

    /// The session's own ledger level: (spent, reserved).
    pub(super) fn spending(&self, session: &str) -> (u64, u64) {
        // As its payer reads it (admins may be configured or not).
        let dct = std::fs::read_to_string(self._tmp.path().join("router.dct")).unwrap();
        let (_, r) = self.gw().call_as(
            &format!("DCT {dct}"),
            "ldp/session",
            json!({"delegate": "echo", "session_id": session}),
        );
        let s = &r["result"]["spending"];
        match (
            s["spent_microcents"].as_u64(),
            s["reserved_microcents"].as_u64(),
        ) {
            (Some(spent), Some(reserved)) => (spent, reserved),
            _ => panic!("no spending in {r}"),
        }
    }
}

fn is_result(a: &Result<LdpEnvelope, String>) -> bool {
    matches!(a, Ok(e) if matches!(e.body, LdpMessageBody::TaskResult { .. }))
}

/// The issue's attack: submit, cancel while dgw waits on the delegate,
/// collect the result; five rounds on a DCT whose budget holds one task.
/// No result reaches the router; the one task the delegate did is charged,
/// and then the budget is spent, so nothing more is even forwarded.
#[test]
fn cancel_then_collect_gets_no_free_result() {
    let (w, delegate) = World::scripted(100, 100, "session_budget_microcents = 100000\n");
    let session = "c1111111-2222-4333-8444-555555555555";
    w.open(session);
    let (mut results, mut forwarded) = (0, 0);
    for round in 0..5 {
        let task = format!("t-{round}");
        let pending = w.submit_async(session, &task);
        if !delegate.wait_held(&task, || pending.is_finished()) {
            // dgw answered itself: the budget is spent.
            let a = w.finish(pending).unwrap();
            assert_eq!(kind(&a), "failed", "{a:?}");
            assert!(why(&a).contains("budget"), "{}", why(&a));
            continue;
        }
        forwarded += 1;
        let c = w.cancel(session, &task);
        assert!(c.is_ok(), "the payer's cancel: {c:?}");
        assert!(delegate.answer(&task, Answer::Result));
        let a = w.finish(pending);
        if is_result(&a) {
            results += 1;
        } else {
            let a = a.unwrap();
            assert_eq!(kind(&a), "failed", "{a:?}");
            assert!(why(&a).contains("CANCELLED"), "{}", why(&a));
        }
    }
    assert_eq!(
        results, 0,
        "{results} of 5 results reached the router after their cancel ({forwarded} forwarded, spending {:?})",
        w.spending(session)
    );
    assert_eq!(forwarded, 1);
    assert_eq!(
        delegate.results.load(std::sync::atomic::Ordering::SeqCst),
        1
    );
    // The delegate's one result is charged; nothing stays reserved.
    assert_eq!(w.spending(session), (100, 0));
    let m = w.gw().metrics();
    assert!(
        m.contains(r#"dgw_budget_spent_microcents{tenant="acme"} 100"#),
        "{m}"
    );
    let t = w.gw().ok(
        "ldp/task",
        json!({"delegate": "echo", "session_id": session, "task_id": "t-0"}),
    );
    assert_eq!(t["cancelled"], true, "{t}");
    assert_eq!(t["reservation"], Value::Null, "{t}");
}

/// The same through SESSION_CLOSE while a task is in flight, a cancelled
/// task the delegate fails (released, not charged), a task the delegate
/// answered with an update and is then cancelled (released), and a hostile
/// delegate answering TASK_CANCEL with the task's result (withheld) or a
/// task with another task's result (refused, released).
#[test]
fn no_result_after_its_task_ended_reaches_the_router() {
    let (w, delegate) = World::scripted(10_000, 100, "session_budget_microcents = 100000\n");
    let session = "c2111111-2222-4333-8444-555555555555";
    w.open(session);
    // Cancelled, then failed by the delegate: released.
    let p = w.submit_async(session, "t-failed");
    assert!(delegate.wait_held("t-failed", || p.is_finished()));
    w.cancel(session, "t-failed").unwrap();
    assert!(delegate.answer("t-failed", Answer::Failed));
    assert_eq!(kind(&w.finish(p).unwrap()), "failed");
    assert_eq!(w.spending(session), (0, 0));
    // An update keeps the reservation; the cancel releases it.
    let p = w.submit_async(session, "t-update");
    assert!(delegate.wait_held("t-update", || p.is_finished()));
    assert!(delegate.answer("t-update", Answer::Update));
    assert_eq!(kind(&w.finish(p).unwrap()), "update");
    assert_eq!(w.spending(session), (0, 100));
    // A hostile delegate answers the cancel with the task's result.
    delegate
        .cancel_with_result
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let a = w.cancel(session, "t-update");
    assert!(!is_result(&a), "a result answered a cancel: {a:?}");
    let a = a.unwrap();
    assert_eq!(kind(&a), "failed", "{a:?}");
    assert!(why(&a).contains("CANCELLED"), "{}", why(&a));
    delegate
        .cancel_with_result
        .store(false, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(w.spending(session), (0, 0));
    // The session closed while a task is in flight: its result is charged
    // and withheld.
    let p = w.submit_async(session, "t-closed");
    assert!(delegate.wait_held("t-closed", || p.is_finished()));
    w.close(session).unwrap();
    assert!(delegate.answer("t-closed", Answer::Result));
    let a = w.finish(p);
    assert!(!is_result(&a), "a result after its session closed: {a:?}");
    assert_eq!(w.spending(session), (100, 0));
    let e = w.submit(session, "t-after").unwrap_err();
    assert!(e.contains("409"), "{e}");
    // A hostile delegate answering a task with another task's result:
    // refused, released.
    let other = "c3111111-2222-4333-8444-555555555555";
    w.open(other);
    let a = w.run_task(&delegate, other, "t-stray", Answer::Stray);
    assert!(!is_result(&a), "another task's result passed on: {a:?}");
    let e = a.unwrap_err();
    assert!(
        e.contains("502") && e.contains("delegate_answer_invalid"),
        "{e}"
    );
    assert_eq!(w.spending(other), (0, 0));
}
