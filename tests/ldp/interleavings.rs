//! The LDP budget holds under any order of TASK_SUBMIT, TASK_CANCEL,
//! TASK_RESULT (and TASK_FAILED, TASK_UPDATE) and SESSION_CLOSE, with
//! another router trying to cancel and close in between (issue 30): a
//! property test over interleavings, against the real dgw and the
//! scripted delegate, a session of its own per case.

use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use super::cancel::Pending;
use super::scripted::{Answer, Scripted};
use super::*;

const TASKS: usize = 3;
const COST: u64 = 100;
/// Room for two of the three tasks: a third concurrent one is refused.
const SESSION_BUDGET: u64 = 200;

#[derive(Debug, Clone)]
enum Op {
    Submit(usize),
    Cancel(usize),
    /// The delegate answers the task's TASK_SUBMIT.
    Answer(usize, Answer),
    Close,
    /// Another holder of the shared secret, without the paying DCT (as
    /// itself, or claiming the payer's `from`).
    StrangerCancel(usize, bool),
    StrangerClose(bool),
}

fn op() -> impl Strategy<Value = Op> {
    let answer = prop_oneof![
        Just(Answer::Result),
        Just(Answer::Failed),
        Just(Answer::Update)
    ];
    prop_oneof![
        3 => (0..TASKS).prop_map(Op::Submit),
        2 => (0..TASKS).prop_map(Op::Cancel),
        3 => (0..TASKS, answer).prop_map(|(t, a)| Op::Answer(t, a)),
        1 => Just(Op::Close),
        1 => (0..TASKS, any::<bool>()).prop_map(|(t, f)| Op::StrangerCancel(t, f)),
        1 => any::<bool>().prop_map(Op::StrangerClose),
    ]
}

fn is_result(a: &Result<LdpEnvelope, String>) -> bool {
    matches!(a, Ok(e) if matches!(e.body, LdpMessageBody::TaskResult { .. }))
}

/// One case: the ops in order, then every held task answered with its
/// result and the session closed by its payer. What must hold: no result
/// reaches the router after its task was cancelled or its session closed
/// (acknowledged while the delegate still worked on it); every result the
/// delegate produced is charged, once; nothing stays reserved; the session
/// never spends more than its budget; no stranger's cancel or close is
/// taken.
fn case(
    w: &World,
    delegate: &Scripted,
    n: usize,
    ops: &[Op],
    seen: &Seen,
) -> Result<(), TestCaseError> {
    let session = format!("e{n:07}-2222-4333-8444-555555555555");
    w.open(&session);
    let task = |i: usize| format!("{n}-t{i}");
    let done_before = delegate.results.load(Ordering::SeqCst);
    let mut pending: Vec<Option<Pending>> = (0..TASKS).map(|_| None).collect();
    // A cancel or close was acknowledged while the delegate held the task.
    let mut ended = [false; TASKS];
    let mut delivered = 0u64;
    let mut take = |w: &World, i: usize, p: Pending, ended: &[bool; TASKS]| {
        let a = w.finish(p);
        if ended[i] {
            seen.answered_after_end.fetch_add(1, Ordering::SeqCst);
        }
        if is_result(&a) {
            prop_assert!(
                !ended[i],
                "task {i}'s result reached the router after its cancel or close"
            );
            delivered += 1;
        }
        Ok(())
    };
    for op in ops {
        match *op {
            Op::Submit(i) => {
                if pending[i].is_some() {
                    // Refused (the ID is taken) or denied (the budget):
                    // never forwarded, never a result.
                    let a = w.submit(&session, &task(i));
                    prop_assert!(!is_result(&a), "a task ID taken twice: {a:?}");
                    continue;
                }
                let p = w.submit_async(&session, &task(i));
                if delegate.wait_held(&task(i), || p.is_finished()) {
                    pending[i] = Some(p);
                } else {
                    let a = w.finish(p);
                    prop_assert!(!is_result(&a), "a result dgw never forwarded: {a:?}");
                }
            }
            Op::Cancel(i) => {
                let a = w.cancel(&session, &task(i));
                prop_assert!(!is_result(&a), "a result answered a cancel: {a:?}");
                if a.is_ok() && pending[i].is_some() {
                    ended[i] = true;
                }
            }
            Op::Answer(i, how) => {
                if let Some(p) = pending[i].take() {
                    prop_assert!(delegate.answer(&task(i), how));
                    take(w, i, p, &ended)?;
                }
            }
            Op::Close => {
                let a = w.close(&session);
                prop_assert!(!is_result(&a), "a result answered a close: {a:?}");
                if a.is_ok() {
                    for (i, p) in pending.iter().enumerate() {
                        ended[i] |= p.is_some();
                    }
                }
            }
            Op::StrangerCancel(i, as_payer) => {
                let from = if as_payer {
                    ROUTER
                } else {
                    "ldp:delegate:mallory"
                };
                let m = World::message_from(
                    from,
                    &session,
                    LdpMessageBody::TaskCancel { task_id: task(i) },
                );
                let a = World::client_with(None);
                let a = w.rt.block_on(a.send_message(&w.url, &m));
                seen.strangers.fetch_add(1, Ordering::SeqCst);
                prop_assert!(
                    a.is_err(),
                    "a stranger's cancel from {from} was taken: {a:?}"
                );
            }
            Op::StrangerClose(as_payer) => {
                let from = if as_payer {
                    ROUTER
                } else {
                    "ldp:delegate:mallory"
                };
                let m = World::message_from(
                    from,
                    &session,
                    LdpMessageBody::SessionClose { reason: None },
                );
                let a = World::client_with(None);
                let a = w.rt.block_on(a.send_message(&w.url, &m));
                seen.strangers.fetch_add(1, Ordering::SeqCst);
                prop_assert!(
                    a.is_err(),
                    "a stranger's close from {from} was taken: {a:?}"
                );
            }
        }
    }
    for (i, p) in pending.iter_mut().enumerate() {
        if let Some(p) = p.take() {
            prop_assert!(delegate.answer(&task(i), Answer::Result));
            take(w, i, p, &ended)?;
        }
    }
    // The payer closes (refused if it is closed already): every open task
    // ends.
    let _ = w.close(&session);
    let (spent, reserved) = w.spending(&session);
    let done = (delegate.results.load(Ordering::SeqCst) - done_before) as u64;
    prop_assert_eq!(reserved, 0, "reservations left after the session closed");
    prop_assert_eq!(
        spent,
        done * COST,
        "every result the delegate produced is charged, once"
    );
    prop_assert!(
        spent <= SESSION_BUDGET,
        "spent {} of {}",
        spent,
        SESSION_BUDGET
    );
    prop_assert!(
        delivered * COST <= spent,
        "{} results delivered, {} spent",
        delivered,
        spent
    );
    Ok(())
}

/// What the cases exercised, so a run that never tried the attacks fails.
#[derive(Default)]
struct Seen {
    /// Tasks the delegate answered after their cancel or close.
    answered_after_end: AtomicUsize,
    /// Strangers' cancels and closes.
    strangers: AtomicUsize,
}

#[test]
fn the_budget_holds_under_any_interleaving() {
    let (w, delegate) = World::scripted(
        1_000_000,
        COST,
        &format!("session_budget_microcents = {SESSION_BUDGET}\n"),
    );
    let cases = AtomicUsize::new(0);
    let seen = Seen::default();
    let mut runner = TestRunner::new(Config {
        cases: 48,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&proptest::collection::vec(op(), 1..14), |ops| {
        case(
            &w,
            &delegate,
            cases.fetch_add(1, Ordering::SeqCst),
            &ops,
            &seen,
        )
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (late, strangers) = (
        seen.answered_after_end.load(Ordering::SeqCst),
        seen.strangers.load(Ordering::SeqCst),
    );
    assert!(
        late >= 5 && strangers >= 5,
        "the cases answered {late} tasks after their cancel or close and tried {strangers} strangers"
    );
}
