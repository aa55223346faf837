//! The backend contract suite: one set of tests, generic over [`Backend`],
//! that every state backend runs (sled, memory, Redis), each test given a
//! way to make a fresh backend. A backend passes all of it or does not
//! ship: its tests instantiate the whole suite with one
//! [`contract_suite!`](crate::contract_suite) line, and a test added to
//! the suite's list runs on every backend.
//!
//! The budget test is model-based: random sequences of reserve, settle,
//! release, charge, sweep, checkpoint, clean restart and crash, checked
//! after every step against a simple model of what each level must hold.

// Test code, compiled outside `cfg(test)` for the backends' tests, so
// clippy's allow-unwrap-in-tests does not cover it.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::json;

use super::{
    AuditSink, BudgetSettings, BudgetStore, Capped, ContractPut, DelegationStore, RecordStore,
    ReplayStore, RevocationRecord, RevocationStore,
};
use crate::budget::{BudgetKey, LeasePolicy, LedgerError, OnExpiry};

/// What the suite needs of a backend: its stores, and for a persistent one,
/// the two ways a process stops.
pub trait Backend {
    /// Opens the budget store over whatever the last one left.
    fn budgets(&self, settings: BudgetSettings) -> Arc<dyn BudgetStore>;
    /// Whether anything survives a restart (false: restarts are not tested).
    fn persistent(&self) -> bool;
    /// Stops cleanly (everything acknowledged is kept).
    fn stop(&self, store: Arc<dyn BudgetStore>);
    /// Stops as a crash would: what is not durable yet is lost.
    fn crash(&self, store: Arc<dyn BudgetStore>);
    fn revocations(&self) -> Arc<dyn RevocationStore>;
    fn replay(&self) -> Arc<dyn ReplayStore>;
    fn delegations(&self) -> Arc<dyn DelegationStore>;
    fn audit(&self) -> Arc<dyn AuditSink>;
    /// A handle on the record store (each call a new handle over the same
    /// state, as another process would open it).
    fn records(&self) -> Arc<dyn RecordStore>;
}

/// Instantiates the whole suite for a backend: `$make` is a function that
/// makes a fresh backend (`Sled::new`), or a block that sets up what they
/// share and returns one (`{ let server = RedisServer::start(); move ||
/// at(&server) }`, evaluated by each test). By default, one `#[test]` per
/// contract test, named as it is; `one test NAME: $make` runs them all in
/// one test over one setup (an expensive one: a Redis Cluster).
#[macro_export]
macro_rules! contract_suite {
    ($(#[$attr:meta])* one test $test:ident: $make:expr $(,)?) => {
        $(#[$attr])*
        #[test]
        fn $test() {
            let make = $make;
            $crate::__contract_suite_tests!(__contract_suite_calls! [make]);
        }
    };
    ($make:expr $(,)?) => {
        $crate::__contract_suite_tests!(__contract_suite_each! [$make]);
    };
}

/// The suite's tests, the one list of them: hands their names to `$then`.
#[doc(hidden)]
#[macro_export]
macro_rules! __contract_suite_tests {
    ($then:ident! [$($args:tt)*]) => {
        $crate::$then!([$($args)*]
            records_are_compare_and_swap
            records_are_capped_and_measured
            reservations_keep_their_own_deadline
            budgets_never_overspend
            concurrent_reservations_never_overspend
            expiry_ends_each_reservation_once
            budget_bookkeeping
            budget_children_are_listed_in_pages
            revocation_subscribers_see_every_entry
            replay_is_insert_if_absent
            audit_keeps_order
            delegations_are_compare_and_swap
            audit_anchors_only_move_forward
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __contract_suite_each {
    ([$make:expr] $($name:ident)*) => {
        $(
            #[test]
            fn $name() {
                $crate::state::contract::$name($make);
            }
        )*
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __contract_suite_calls {
    ([$make:ident] $($name:ident)*) => {
        $( $crate::state::contract::$name(&$make); )*
    };
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

fn settings(ttl: Duration, lease: f64) -> BudgetSettings {
    BudgetSettings {
        reservation_ttl: ttl,
        lease: LeasePolicy::new(lease).expect("a fraction"),
        max_open: 10_000,
    }
}

fn key(path: &str) -> BudgetKey {
    BudgetKey::from_stored(&format!("ROOT/{path}"))
}

/// Three chains sharing a parent: `a` (100), `a/b` (60), `a/c` (70).
fn chains() -> Vec<Vec<(BudgetKey, u64)>> {
    vec![
        vec![(key("a"), 100)],
        vec![(key("a"), 100), (key("a/b"), 60)],
        vec![(key("a"), 100), (key("a/c"), 70)],
    ]
}

const LIMITS: [u64; 3] = [100, 60, 70];

/// The levels of chain `c`, as indices into the model.
fn idx(c: usize) -> Vec<usize> {
    match c {
        0 => vec![0],
        1 => vec![0, 1],
        _ => vec![0, 2],
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// A reservation on chain `.0`; `.2`: charged on expiry.
    Reserve(usize, u64, bool),
    Settle(usize, u64),
    Release(usize),
    Charge(usize, u64),
    Checkpoint,
    Restart,
    /// Sweep at a time past every deadline: everything open ends.
    SweepAll,
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3usize, 0..40u64, any::<bool>()).prop_map(|(c, a, l)| Op::Reserve(c, a, l)),
        3 => (0..8usize, 0..40u64).prop_map(|(r, a)| Op::Settle(r, a)),
        1 => (0..8usize).prop_map(Op::Release),
        1 => (0..3usize, 0..40u64).prop_map(|(c, a)| Op::Charge(c, a)),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::Restart),
        1 => Just(Op::SweepAll),
        1 => Just(Op::Crash),
    ]
}

/// `(spent, reserved)` of `a`, `a/b`, `a/c`.
async fn levels(store: &dyn BudgetStore) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for (chain, level) in [(0, 0), (1, 1), (2, 1)] {
        let r = &store
            .report_levels(&chains()[chain])
            .await
            .expect("a report")[level];
        out.push((r.spent_microcents, r.reserved_microcents));
    }
    out
}

/// An open reservation in the model: id, chain, amount, charged on expiry.
type Open = (String, usize, u64, bool);

/// Under any sequence of operations, restarts, checkpoints and crashes,
/// with or without leasing: no level ever has more spent + reserved than
/// its limit; the store agrees with a simple model; a clean restart changes
/// nothing; a crash never loses a spend (nor a reservation charged on
/// expiry), at worst charging more.
pub fn budgets_never_overspend<B: Backend>(backend: impl Fn() -> B) {
    let mut runner = TestRunner::new(Config::with_cases(48));
    let strategy = (
        prop::collection::vec(op(), 1..40),
        prop_oneof![Just(0.0), Just(0.1), Just(0.5), Just(1.0)],
    );
    let rt = runtime();
    runner
        .run(&strategy, |(ops, lease)| {
            let b = backend();
            rt.block_on(run_ops(&b, ops, lease))
        })
        .expect("the budget model holds");
}

async fn run_ops<B: Backend>(b: &B, ops: Vec<Op>, lease: f64) -> Result<(), TestCaseError> {
    let settings = settings(Duration::from_secs(60), lease);
    let mut store = b.budgets(settings);
    let mut model = [(0u64, 0u64); 3];
    let mut open: Vec<Open> = Vec::new();
    for op in ops {
        match op {
            Op::Reserve(c, amount, _) | Op::Charge(c, amount) => {
                let fits = idx(c)
                    .iter()
                    .all(|&i| model[i].0 + model[i].1 + amount <= LIMITS[i]);
                let result = match op {
                    Op::Charge(..) => store.charge(&chains()[c], amount).await.map(|_| None),
                    Op::Reserve(_, _, charged) => {
                        let on_expiry = if charged {
                            OnExpiry::Charge
                        } else {
                            OnExpiry::Release
                        };
                        store
                            .reserve(&chains()[c], amount, 0, on_expiry, None)
                            .await
                            .map(|r| Some((r, charged)))
                    }
                    _ => unreachable!(),
                };
                match result {
                    Ok(r) => {
                        prop_assert!(fits);
                        for i in idx(c) {
                            if r.is_none() {
                                model[i].0 += amount
                            } else {
                                model[i].1 += amount
                            }
                        }
                        if let Some((r, charged)) = r {
                            open.push((r.reservation_id, c, amount, charged));
                        }
                    }
                    Err(LedgerError::Exceeded { .. }) => prop_assert!(!fits),
                    Err(e) => prop_assert!(false, "{e}"),
                }
            }
            Op::Settle(r, actual) if r < open.len() => {
                let (id, c, amount, charged) = open[r].clone();
                let settled = if charged {
                    store.settle_charged(&id, actual).await
                } else {
                    store.settle(&id, actual).await
                };
                match settled {
                    Ok(s) => {
                        prop_assert!(actual <= amount);
                        prop_assert_eq!(s.released_microcents, amount - actual);
                        for i in idx(c) {
                            model[i].1 -= amount;
                            model[i].0 += actual;
                        }
                        open.remove(r);
                    }
                    Err(LedgerError::ExceedsReservation { .. }) => prop_assert!(actual > amount),
                    Err(e) => prop_assert!(false, "{e}"),
                }
            }
            Op::Release(r) if r < open.len() => {
                let (id, c, amount, _) = open.remove(r);
                prop_assert_eq!(store.release(&id).await.expect("released"), amount);
                for i in idx(c) {
                    model[i].1 -= amount;
                }
            }
            Op::Checkpoint => {
                let s = store.clone();
                tokio::task::spawn_blocking(move || s.checkpoint())
                    .await
                    .expect("joined")
                    .expect("a checkpoint");
            }
            Op::SweepAll => {
                prop_assert_eq!(store.sweep(60_000).await.expect("swept"), open.len());
                for (_, c, amount, charged) in open.drain(..) {
                    for i in idx(c) {
                        model[i].1 -= amount;
                        if charged {
                            model[i].0 += amount;
                        }
                    }
                }
            }
            Op::Restart if b.persistent() => {
                let before = levels(&*store).await;
                b.stop(store);
                store = b.budgets(settings);
                prop_assert_eq!(levels(&*store).await, before);
            }
            Op::Crash if b.persistent() => {
                b.crash(store);
                store = b.budgets(settings);
                let now = levels(&*store).await;
                for i in 0..3 {
                    prop_assert!(
                        now[i].0 + now[i].1 >= model[i].0 + model[i].1,
                        "level {}: {:?} < {:?}",
                        i,
                        now[i],
                        model[i]
                    );
                }
                // Expiry settles what the crash left open: every spend and
                // every reservation charged on expiry is charged, whatever
                // was durable.
                store.sweep(60_000).await.expect("swept");
                for (_, c, amount, charged) in open.drain(..) {
                    for i in idx(c) {
                        model[i].1 -= amount;
                        if charged {
                            model[i].0 += amount;
                        }
                    }
                }
                let now = levels(&*store).await;
                for i in 0..3 {
                    prop_assert!(
                        now[i].0 >= model[i].0,
                        "level {}: spent {} < {}",
                        i,
                        now[i].0,
                        model[i].0
                    );
                    prop_assert_eq!(now[i].1, 0);
                    model[i] = now[i];
                }
            }
            _ => {}
        }
        let now = levels(&*store).await;
        for i in 0..3 {
            prop_assert_eq!(now[i], model[i]);
            prop_assert!(now[i].0 + now[i].1 <= LIMITS[i]);
        }
    }
    b.stop(store);
    Ok(())
}

/// Many tasks reserving at once on two threads: exactly as many succeed as
/// fit, never one more; then settling and releasing concurrently leaves
/// exactly what was settled spent.
pub fn concurrent_reservations_never_overspend<B: Backend>(backend: impl Fn() -> B) {
    let b = backend();
    runtime().block_on(async {
        let store = b.budgets(settings(Duration::from_secs(60), 0.5));
        let chain = chains()[1].clone(); // a (100) / a/b (60): 60 fit
        let tasks: Vec<_> = (0..200)
            .map(|n| {
                let (store, chain) = (store.clone(), chain.clone());
                let on_expiry = if n % 2 == 0 {
                    OnExpiry::Charge
                } else {
                    OnExpiry::Release
                };
                tokio::spawn(async move { store.reserve(&chain, 1, 0, on_expiry, None).await })
            })
            .collect();
        let mut granted = Vec::new();
        for t in tasks {
            match t.await.expect("joined") {
                Ok(r) => granted.push(r.reservation_id),
                Err(LedgerError::Exceeded { .. }) => {}
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(granted.len(), 60, "exactly what fits is granted");
        let report = store.report_levels(&chain).await.unwrap();
        assert_eq!(report[1].reserved_microcents, 60);
        let tasks: Vec<_> = granted
            .into_iter()
            .enumerate()
            .map(|(n, id)| {
                let store = store.clone();
                tokio::spawn(async move {
                    if n % 3 == 0 {
                        store.release(&id).await.map(|_| 0)
                    } else {
                        store.settle(&id, 1).await.map(|s| s.charged_microcents)
                    }
                })
            })
            .collect();
        let mut charged = 0;
        for t in tasks {
            charged += t.await.expect("joined").expect("ended");
        }
        let report = store.report_levels(&chain).await.unwrap();
        assert_eq!(report[1].spent_microcents, charged);
        assert_eq!(report[1].reserved_microcents, 0);
        assert_eq!(report[0].spent_microcents, charged);
        b.stop(store);
    });
}

/// Expiry ends each reservation exactly once, however many sweeps race:
/// released ones give their budget back, charged ones are charged in full,
/// and neither can be settled afterwards.
pub fn expiry_ends_each_reservation_once<B: Backend>(backend: impl Fn() -> B) {
    let b = backend();
    runtime().block_on(async {
        let store = b.budgets(settings(Duration::from_millis(1000), 0.0));
        let chain = chains()[2].clone(); // a (100) / a/c (70)
        let mut ids = Vec::new();
        for n in 0..20u64 {
            let on_expiry = if n % 2 == 0 {
                OnExpiry::Charge
            } else {
                OnExpiry::Release
            };
            let r = store
                .reserve(&chain, 3, 0, on_expiry, None)
                .await
                .expect("fits");
            ids.push(r.reservation_id);
        }
        let late = store
            .reserve(&chain, 5, 5_000, OnExpiry::Release, None)
            .await
            .expect("fits");
        assert_eq!(store.sweep(999).await.unwrap(), 0, "nothing is due yet");
        let sweeps: Vec<_> = (0..4)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move { store.sweep(1_000).await })
            })
            .collect();
        let mut ended = 0;
        for s in sweeps {
            ended += s.await.expect("joined").expect("swept");
        }
        // A sweep counts what it found due; a reservation another sweep
        // ended first is not ended twice, as the totals show.
        assert!(ended >= 20, "{ended}");
        let report = store.report_levels(&chain).await.unwrap();
        assert_eq!(report[1].spent_microcents, 30, "ten charged in full, once");
        assert_eq!(
            report[1].reserved_microcents, 5,
            "only the late one is open"
        );
        for id in &ids {
            assert!(matches!(
                store.settle(id, 0).await,
                Err(LedgerError::UnknownReservation(_))
            ));
        }
        assert_eq!(store.open_reservations().await.unwrap(), 1);
        store.settle(&late.reservation_id, 5).await.unwrap();
        b.stop(store);
    });
}

/// The rest of the budget contract: holders, reports by delegation, tenant
/// totals, the cap on open reservations, settle checks.
pub fn budget_bookkeeping<B: Backend>(backend: impl Fn() -> B) {
    let b = backend();
    runtime().block_on(async {
        let mut s = settings(Duration::from_secs(60), 0.0);
        s.max_open = 3;
        let store = b.budgets(s);
        let holder = crate::budget::HolderDigest::of("token");
        let r = store
            .reserve(&chains()[1], 10, 0, OnExpiry::Release, Some(holder))
            .await
            .unwrap();
        assert!(r.reservation_id.starts_with("res_"));
        assert_eq!(store.holder(&r.reservation_id).await.unwrap(), Some(holder));
        assert!(matches!(
            store.holder("res_nope").await,
            Err(LedgerError::UnknownReservation(_))
        ));
        assert!(matches!(
            store.settle(&r.reservation_id, 11).await,
            Err(LedgerError::ExceedsReservation { .. })
        ));
        assert!(matches!(
            store.settle_charged(&r.reservation_id, 1).await,
            Err(LedgerError::NotChargedOnExpiry(_))
        ));
        store
            .reserve(&chains()[1], 0, 0, OnExpiry::Release, None)
            .await
            .unwrap();
        store
            .reserve(&chains()[1], 0, 0, OnExpiry::Release, None)
            .await
            .unwrap();
        assert!(matches!(
            store
                .reserve(&chains()[1], 0, 0, OnExpiry::Release, None)
                .await,
            Err(LedgerError::TooManyOpen { .. })
        ));
        store.settle(&r.reservation_id, 4).await.unwrap();
        assert_eq!(store.spent(&key("a/b")).await.unwrap(), 4);
        let chains_of_b = store.report("b").await.unwrap();
        assert_eq!(chains_of_b.len(), 1);
        assert_eq!(chains_of_b[0][0].delegation_id, "a");
        assert_eq!(chains_of_b[0][1].spent_microcents, 4);
        assert_eq!(chains_of_b[0][1].remaining_microcents, 56);
        let tops = store.top_levels().await.unwrap();
        let a = tops.iter().find(|t| t.level.delegation_id == "a").unwrap();
        assert_eq!((a.root.as_str(), a.level.spent_microcents), ("ROOT", 4));
        let totals = crate::budget::tenant_totals(&tops);
        assert_eq!(totals["ROOT"].spent, 4);
        assert_eq!(totals["ROOT"].remaining, 96);
        assert!(store.writable());
        b.stop(store);
    });
}

/// Every node below a node, listed a page at a time in key order, each
/// with its figures; a root alone lists its top levels; a page is never
/// longer than [`crate::budget::CHILDREN_PAGE`]; after a restart the same.
pub fn budget_children_are_listed_in_pages<B: Backend>(backend: impl Fn() -> B) {
    use crate::budget::{BudgetKey, CHILDREN_PAGE};
    let b = backend();
    runtime().block_on(async {
        let store = b.budgets(settings(Duration::from_secs(60), 0.0));
        let many = CHILDREN_PAGE + 44;
        let below: Vec<String> = (0..many).map(|i| format!("a/x{i:04}")).collect();
        for name in &below {
            store
                .charge(&[(key("a"), 1_000_000), (key(name), 100)], 1)
                .await
                .unwrap();
        }
        store.charge(&[(key("d"), 50)], 7).await.unwrap();
        store
            .reserve(
                &[(key("d"), 50), (key("d/e"), 20)],
                5,
                0,
                OnExpiry::Release,
                None,
            )
            .await
            .unwrap();
        // Another root's nodes are not this one's.
        let other = BudgetKey::from_stored("OTHER/a");
        store.charge(&[(other, 10)], 1).await.unwrap();
        let store = if b.persistent() {
            b.stop(store);
            b.budgets(settings(Duration::from_secs(60), 0.0))
        } else {
            store
        };

        let root = BudgetKey::of_root("ROOT");
        let tops = store.children(&root, None, 10).await.unwrap();
        let seen: Vec<_> = tops
            .iter()
            .map(|c| {
                (
                    c.key.as_str(),
                    c.level.spent_microcents,
                    c.level.reserved_microcents,
                )
            })
            .collect();
        assert_eq!(
            seen,
            [("ROOT/a", many as u64, 0), ("ROOT/d", 7, 5)],
            "a root lists its top levels"
        );
        let e = store.children(&key("d"), None, 10).await.unwrap();
        assert_eq!(e.len(), 1);
        assert_eq!(
            (
                e[0].key.as_str(),
                &e[0].level.delegation_id,
                e[0].level.budget_microcents
            ),
            ("ROOT/d/e", &"e".to_owned(), 20)
        );
        assert_eq!(
            (
                e[0].level.reserved_microcents,
                e[0].level.remaining_microcents
            ),
            (5, 15)
        );

        // Paged: never more than a page, in key order, every node once.
        let mut listed = Vec::new();
        let mut after: Option<BudgetKey> = None;
        loop {
            let page = store
                .children(&key("a"), after.as_ref(), usize::MAX)
                .await
                .unwrap();
            assert!(page.len() <= CHILDREN_PAGE, "{}", page.len());
            let Some(last) = page.last() else { break };
            after = Some(last.key.clone());
            assert!(page
                .iter()
                .all(|c| c.level.spent_microcents == 1 && c.level.budget_microcents == 100));
            listed.extend(page.into_iter().map(|c| c.key.as_str().to_owned()));
        }
        let expected: Vec<String> = below.iter().map(|n| format!("ROOT/{n}")).collect();
        assert_eq!(listed, expected);
        let first = store.children(&key("a"), None, 3).await.unwrap();
        assert_eq!(first.len(), 3);
        let next = store
            .children(&key("a"), Some(&first[2].key), 2)
            .await
            .unwrap();
        assert_eq!(next[0].key.as_str(), "ROOT/a/x0003");

        // Nothing below a leaf, an unknown node, or with a limit of 0.
        assert!(store
            .children(&key("a/x0000"), None, 10)
            .await
            .unwrap()
            .is_empty());
        assert!(store
            .children(&key("zz"), None, 10)
            .await
            .unwrap()
            .is_empty());
        assert!(store.children(&key("a"), None, 0).await.unwrap().is_empty());
        b.stop(store);
    });
}

/// Revocations: insert-once, contains, all by kind, and a subscription that
/// sees every entry added, each once, however many writers race.
pub fn revocation_subscribers_see_every_entry<B: Backend>(backend: impl Fn() -> B) {
    let b = backend();
    runtime().block_on(async {
        let store = b.revocations();
        let mut sub = store.subscribe();
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let store = store.clone();
                tokio::spawn(async move {
                    let mut new = 0;
                    for n in 0..50 {
                        // Writers overlap on half the keys.
                        let key = if n % 2 == 0 {
                            format!("k{n}")
                        } else {
                            format!("w{w}-{n}")
                        };
                        let added = store
                            .add(RevocationRecord {
                                kind: "test_revocations",
                                key,
                                value: json!({"n": n}),
                            })
                            .await
                            .expect("added");
                        new += usize::from(added);
                    }
                    new
                })
            })
            .collect();
        let mut new = 0;
        for w in writers {
            new += w.await.expect("joined");
        }
        assert_eq!(new, 25 + 4 * 25, "each key is new once");
        let mut seen = std::collections::HashSet::new();
        for _ in 0..new {
            let r = tokio::time::timeout(Duration::from_secs(5), sub.recv())
                .await
                .expect("in time")
                .expect("an entry");
            assert_eq!(r.kind, "test_revocations");
            assert!(seen.insert(r.key), "each entry once");
        }
        assert!(sub.try_recv().is_err(), "nothing more");
        assert!(store.contains("test_revocations", "k0").await.unwrap());
        assert!(store.contains("test_revocations", "w3-1").await.unwrap());
        assert!(!store.contains("test_revocations", "k1").await.unwrap());
        assert!(!store.contains("other_revocations", "k0").await.unwrap());
        assert_eq!(store.all("test_revocations").await.unwrap().len(), new);
        assert!(store.all("other_revocations").await.unwrap().is_empty());
    });
}

/// Replay: a key is new once while valid, in its namespace only, new again
/// after its validity, and swept once past it.
pub fn replay_is_insert_if_absent<B: Backend>(backend: impl Fn() -> B) {
    let b = backend();
    runtime().block_on(async {
        let store = b.replay();
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move { store.insert_new("test_replay", b"k", 100, 200).await })
            })
            .collect();
        let mut fresh = 0;
        for t in tasks {
            fresh += usize::from(t.await.expect("joined").expect("recorded"));
        }
        assert_eq!(fresh, 1, "one of eight racing uses is fresh");
        assert!(store
            .insert_new("other_replay", b"k", 100, 200)
            .await
            .unwrap());
        assert!(!store
            .insert_new("test_replay", b"k", 200, 300)
            .await
            .unwrap());
        assert!(store
            .insert_new("test_replay", b"k", 201, 300)
            .await
            .unwrap());
        assert!(store
            .insert_new("test_replay", b"old", 100, 150)
            .await
            .unwrap());
        assert_eq!(store.sweep(250).await.unwrap(), 2, "`old` and other's `k`");
        assert!(!store
            .insert_new("test_replay", b"k", 250, 300)
            .await
            .unwrap());
    });
}

/// Audit: events come back in order, the last `limit` of them.
pub fn audit_keeps_order<B: Backend>(backend: impl Fn() -> B) {
    let b = backend();
    runtime().block_on(async {
        let sink = b.audit();
        for n in 0..10 {
            sink.append(&json!({"n": n})).await.unwrap();
        }
        let recent = sink.recent(3).await.unwrap();
        assert_eq!(
            recent,
            vec![json!({"n": 7}), json!({"n": 8}), json!({"n": 9})]
        );
        assert_eq!(sink.recent(100).await.unwrap().len(), 10);
    });
}

/// Audit anchors: one per log name, kept across handles, moved only
/// forward (a stale or concurrent writer never moves one back).
pub fn audit_anchors_only_move_forward<B: Backend>(backend: impl Fn() -> B) {
    let b = backend();
    use super::AuditAnchor;
    let anchor = |seq: u64, tag: &str| AuditAnchor {
        seq,
        head: format!("{tag:0>64}"),
    };
    runtime().block_on(async {
        let sink = b.audit();
        assert_eq!(sink.anchor("suite-a").await.unwrap(), None);
        assert!(sink
            .advance_anchor("suite-a", &anchor(5, "a5"))
            .await
            .unwrap());
        assert_eq!(
            b.audit().anchor("suite-a").await.unwrap(),
            Some(anchor(5, "a5")),
            "another handle reads it"
        );
        assert!(!sink
            .advance_anchor("suite-a", &anchor(3, "a3"))
            .await
            .unwrap());
        assert!(
            !sink
                .advance_anchor("suite-a", &anchor(5, "other"))
                .await
                .unwrap(),
            "the same seq with another head does not replace it"
        );
        assert_eq!(sink.anchor("suite-a").await.unwrap(), Some(anchor(5, "a5")));
        assert_eq!(sink.anchor("suite-b").await.unwrap(), None, "per log");
        assert!(sink
            .advance_anchor("suite-b", &anchor(0, "b0"))
            .await
            .unwrap());
        // Racing writers: the furthest wins, whatever the order.
        let writers = (6..30u64).rev().map(|seq| {
            let sink = b.audit();
            tokio::spawn(async move {
                sink.advance_anchor("suite-a", &anchor(seq, &format!("a{seq}")))
                    .await
                    .unwrap()
            })
        });
        for w in writers.collect::<Vec<_>>() {
            w.await.unwrap();
        }
        assert_eq!(
            b.audit().anchor("suite-a").await.unwrap(),
            Some(anchor(29, "a29"))
        );
        assert_eq!(sink.anchor("suite-b").await.unwrap(), Some(anchor(0, "b0")));
        let far = anchor(u64::MAX, "far");
        assert!(sink.advance_anchor("suite-c", &far).await.unwrap());
        assert_eq!(sink.anchor("suite-c").await.unwrap(), Some(far));
    });
}

/// Delegations: insert-once, compare-and-swap replace, the block index,
/// contracts (same one again is unchanged, a different one conflicts),
/// attestations (first wins).
pub fn delegations_are_compare_and_swap<B: Backend>(backend: impl Fn() -> B) {
    let b = backend();
    use delegateos::dct::CreateParams;
    use delegateos::{
        ContractId, Dct, Delegation, DelegationId, DelegationStatus, Keypair, Timestamp,
    };
    runtime().block_on(async {
        let store = b.delegations();
        let (root, agent) = (Keypair::from_seed([1; 32]), Keypair::from_seed([2; 32]));
        let now = time::OffsetDateTime::now_utc();
        let token = Dct::create(
            &root,
            CreateParams {
                delegatee: agent.principal_id().clone(),
                capabilities: vec!["docs:read:/a/**".parse().unwrap()],
                contract_id: ContractId::from_bytes([1; 6]),
                delegation_id: DelegationId::from_bytes([1; 6]),
                parent_delegation_id: DelegationId::root_parent(),
                chain_depth: 0,
                max_chain_depth: 2,
                max_budget_microcents: 100,
                expires_at: Timestamp::from_instant(now + time::Duration::hours(1)),
                issued_at: Timestamp::from_instant(now),
            },
        )
        .unwrap();
        let d: Delegation = serde_json::from_value(json!({
            "id": DelegationId::from_bytes([1; 6]),
            "parentId": DelegationId::root_parent(),
            "from": root.principal_id(),
            "to": agent.principal_id(),
            "contractId": ContractId::from_bytes([1; 6]),
            "dct": token.to_serialized(),
            "depth": 0,
            "status": "active",
            "createdAt": Timestamp::from_instant(now),
        }))
        .expect("a delegation");
        assert!(store.insert_new(&d, &token).await.unwrap());
        assert!(!store.insert_new(&d, &token).await.unwrap(), "a replay");
        assert_eq!(store.get(&d.id).await.unwrap().as_ref(), Some(&d));
        let mut closed = d.clone();
        closed.status = DelegationStatus::Revoked;
        assert!(store.replace(&d, &closed).await.unwrap());
        assert!(!store.replace(&d, &closed).await.unwrap(), "no longer `d`");
        assert_eq!(
            store.get(&d.id).await.unwrap().unwrap().status,
            DelegationStatus::Revoked
        );
        let block = token.revocation_ids()[0].clone();
        assert_eq!(
            store.carrying_block(&block).await.unwrap(),
            vec![d.id.clone()]
        );
        assert!(store.carrying_block("nothing").await.unwrap().is_empty());
        // Contracts: one per ID; the same one again changes nothing.
        let contract = |title: &str| {
            let draft = json!({
                "task": {"title": title, "description": "d", "inputs": {},
                         "outputSchema": {"type": "object"}},
                "verification": {"method": "schema_match", "schema": {"type": "object"}},
                "constraints": {"maxBudgetMicrocents": 10, "deadline": "2099-01-01T00:00:00Z",
                                "maxChainDepth": 1, "requiredCapabilities": []}
            });
            delegateos::contract::ContractDraft::parse(draft.to_string().as_bytes())
                .unwrap()
                .sign(
                    &root,
                    ContractId::from_bytes([1; 6]),
                    Timestamp::from_instant(now),
                    &delegateos::CheckFunctionRegistry::with_builtins(),
                )
                .unwrap()
        };
        let c = contract("one");
        assert_eq!(store.put_contract(&c).await.unwrap(), ContractPut::Inserted);
        assert_eq!(store.put_contract(&c).await.unwrap(), ContractPut::Unchanged);
        assert_eq!(
            store.put_contract(&contract("another")).await.unwrap(),
            ContractPut::Conflict
        );
        assert_eq!(store.contract(&c.id).await.unwrap().as_ref(), Some(&c));
        // Attestations: the first with an ID wins.
        let attestation = |cost: u64| {
            let draft = json!({"contractId": c.id, "delegationId": d.id, "type": "completion",
                "result": {"success": true, "output": {}, "costMicrocents": cost, "durationMs": 1}});
            delegateos::attestation::AttestationDraft::parse(draft.to_string().as_bytes())
                .unwrap()
                .sign(
                    &agent,
                    delegateos::AttestationId::from_bytes([1; 6]),
                    Timestamp::from_instant(now),
                )
                .unwrap()
        };
        let first = attestation(1);
        store.put_attestation(&first).await.unwrap();
        store.put_attestation(&attestation(2)).await.unwrap();
        assert_eq!(store.attestation(&first.id).await.unwrap().as_ref(), Some(&first));
        // A contract can be forgotten, once; its ID is then free again.
        assert!(store.remove_contract(&c.id).await.unwrap());
        assert!(!store.remove_contract(&c.id).await.unwrap(), "once");
        assert_eq!(store.contract(&c.id).await.unwrap(), None);
        let other = contract("another");
        assert_eq!(
            store.put_contract(&other).await.unwrap(),
            ContractPut::Inserted
        );
        assert_eq!(store.contract(&c.id).await.unwrap().as_ref(), Some(&other));
        store.sync().await.unwrap();
    });
}

/// Records: insert-once and compare-and-swap under races (8 writers, one
/// wins each), reads through another handle, scans in key order, removal.
pub fn records_are_compare_and_swap<B: Backend>(backend: impl Fn() -> B) {
    let b = backend();
    runtime().block_on(async {
        let store = b.records();
        assert_eq!(store.get("suite_docs", "a").await.unwrap(), None);
        let inserts = (0..8).map(|i| {
            let store = b.records();
            tokio::spawn(async move {
                store
                    .insert_new("suite_docs", "a", &json!({"v": 0, "by": i}))
                    .await
                    .unwrap()
            })
        });
        let mut won = 0;
        for t in inserts.collect::<Vec<_>>() {
            won += usize::from(t.await.unwrap());
        }
        assert_eq!(won, 1, "exactly one insert of a key wins");
        let first = b.records().get("suite_docs", "a").await.unwrap().unwrap();
        let replaces = (0..8).map(|i| {
            let (store, first) = (b.records(), first.clone());
            tokio::spawn(async move {
                store
                    .replace("suite_docs", "a", &first, &json!({"v": 1, "by": i}))
                    .await
                    .unwrap()
            })
        });
        let mut won = 0;
        for t in replaces.collect::<Vec<_>>() {
            won += usize::from(t.await.unwrap());
        }
        assert_eq!(won, 1, "exactly one replace of one version wins");
        let now = store.get("suite_docs", "a").await.unwrap().unwrap();
        assert_eq!(now["v"], 1);
        assert!(!store
            .replace("suite_docs", "gone", &first, &now)
            .await
            .unwrap());
        assert!(store
            .insert_new("suite_docs", "b", &json!(2))
            .await
            .unwrap());
        assert!(store
            .insert_new("other_docs", "a", &json!(3))
            .await
            .unwrap());
        let all = b.records().scan("suite_docs").await.unwrap();
        assert_eq!(
            all.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            vec!["a", "b"],
            "one space, in key order"
        );
        assert!(store.remove("suite_docs", "b").await.unwrap());
        assert!(!store.remove("suite_docs", "b").await.unwrap(), "once");
        assert_eq!(b.records().get("suite_docs", "b").await.unwrap(), None);
        assert_eq!(b.records().scan("suite_docs").await.unwrap().len(), 1);
        assert!(
            b.records()
                .insert_new("suite_docs", "b", &json!(4))
                .await
                .unwrap(),
            "a removed key can be used again"
        );
    });
}

/// Capped inserts: 16 concurrent inserts of new keys into a space capped at
/// 5 (through different handles, as other processes would) store exactly
/// 5; a taken key is `Taken` even at the cap; plain inserts count; a removal
/// frees a place; usage counts documents and bytes, and is exact again
/// after removals.
pub fn records_are_capped_and_measured<B: Backend>(backend: impl Fn() -> B) {
    let b = backend();
    runtime().block_on(async {
        let store = b.records();
        assert_eq!(store.usage("suite_capped").await.unwrap().records, 0);
        assert!(store
            .insert_new("suite_capped", "first", &json!({"v": "plain"}))
            .await
            .unwrap());
        let inserts = (0..16).map(|i| {
            let store = b.records();
            tokio::spawn(async move {
                store
                    .insert_capped("suite_capped", &format!("k{i:02}"), &json!({"v": i}), 5)
                    .await
                    .unwrap()
            })
        });
        let mut outcomes = Vec::new();
        for t in inserts.collect::<Vec<_>>() {
            outcomes.push(t.await.unwrap());
        }
        let inserted = outcomes.iter().filter(|o| **o == Capped::Inserted).count();
        assert_eq!(
            inserted, 4,
            "the plain insert took one of 5 places: {outcomes:?}"
        );
        assert_eq!(outcomes.iter().filter(|o| **o == Capped::Full).count(), 12);
        let all = b.records().scan("suite_capped").await.unwrap();
        assert_eq!(all.len(), 5);
        let usage = b.records().usage("suite_capped").await.unwrap();
        assert_eq!(usage.records, 5);
        let least: u64 = all
            .iter()
            .map(|(k, v)| (k.len() + v.to_string().len()) as u64)
            .sum();
        assert!(
            usage.bytes >= least && usage.bytes <= least + 8 * 5,
            "{usage:?} for {least} bytes of keys and JSON"
        );
        let (taken, _) = &all[1];
        assert_eq!(
            store
                .insert_capped("suite_capped", taken, &json!(0), 5)
                .await
                .unwrap(),
            Capped::Taken
        );
        assert_eq!(
            store
                .insert_capped("suite_capped", "late", &json!(0), 5)
                .await
                .unwrap(),
            Capped::Full
        );
        assert!(b.records().remove("suite_capped", "first").await.unwrap());
        assert!(!b.records().remove("suite_capped", "first").await.unwrap());
        assert_eq!(
            store
                .insert_capped("suite_capped", "late", &json!(0), 5)
                .await
                .unwrap(),
            Capped::Inserted,
            "a removal frees a place"
        );
        assert_eq!(
            store
                .insert_capped("suite_capped", "later", &json!(0), 5)
                .await
                .unwrap(),
            Capped::Full
        );
        for (k, _) in b.records().scan("suite_capped").await.unwrap() {
            assert!(store.remove("suite_capped", &k).await.unwrap());
        }
        assert_eq!(
            b.records().usage("suite_capped").await.unwrap(),
            super::SpaceUsage::default()
        );
        assert_eq!(
            store
                .insert_capped("suite_capped", "again", &json!(0), 1)
                .await
                .unwrap(),
            Capped::Inserted
        );
        assert_eq!(b.records().usage("other_capped").await.unwrap().records, 0);
    });
}

/// A reservation made with its own deadline lives until then, whatever the
/// TTL, and ends then.
pub fn reservations_keep_their_own_deadline<B: Backend>(backend: impl Fn() -> B) {
    let b = backend();
    runtime().block_on(async {
        let store = b.budgets(settings(Duration::from_millis(10), 0.0));
        assert_eq!(store.reservation_ttl(), Duration::from_millis(10));
        let levels = &chains()[0];
        let r = store
            .reserve_until(levels, 30, 1_000_000, OnExpiry::Release, None)
            .await
            .unwrap();
        assert_eq!(r.deadline_ms, 1_000_000);
        assert_eq!(store.sweep(999_999).await.unwrap(), 0, "not yet");
        let left = store.report_levels(levels).await.unwrap();
        assert_eq!(left[0].reserved_microcents, 30);
        assert_eq!(store.sweep(1_000_000).await.unwrap(), 1, "at its deadline");
        let left = store.report_levels(levels).await.unwrap();
        assert_eq!(left[0].reserved_microcents, 0);
        assert_eq!(store.spent(&levels[0].0).await.unwrap(), 0, "released");
    });
}
