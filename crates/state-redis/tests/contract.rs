//! The backend contract suite against a real `redis-server` (started here
//! on a free port; `.ci/run` installs it). Each backend instance has keys
//! of its own under a fresh prefix, so one server serves every case.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use dgw_core::state::contract::{self, Backend};
use dgw_core::state::{
    AuditSink, BudgetSettings, BudgetStore, DelegationStore, RecordStore, ReplayStore,
    RevocationStore,
};
use dgw_state_redis::RedisSettings;

#[path = "../../../tests/support/redis.rs"]
mod redis_server;

use redis_server::RedisServer;

/// A backend with keys of its own on `server`.
fn backend(server: &RedisServer) -> Redis {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    Redis {
        settings: RedisSettings {
            url: server.url(),
            prefix: format!("t{n}"),
            timeout: Duration::from_secs(5),
        },
    }
}

/// One backend: a prefix of its own on a server.
struct Redis {
    settings: RedisSettings,
}

impl Redis {
    fn stores(&self, budget: BudgetSettings) -> dgw_core::state::Stores {
        dgw_state_redis::open(&self.settings, budget).unwrap()
    }

    fn any(&self) -> dgw_core::state::Stores {
        self.stores(BudgetSettings {
            reservation_ttl: Duration::from_secs(60),
            max_open: 10_000,
            lease: dgw_core::budget::LeasePolicy::OFF,
        })
    }
}

impl Backend for Redis {
    fn budgets(&self, settings: BudgetSettings) -> Arc<dyn BudgetStore> {
        self.stores(settings).budgets
    }
    fn persistent(&self) -> bool {
        true
    }
    fn stop(&self, _store: Arc<dyn BudgetStore>) {}
    /// What Redis acknowledged is in Redis: a dgw crash loses nothing.
    fn crash(&self, _store: Arc<dyn BudgetStore>) {}
    fn revocations(&self) -> Arc<dyn RevocationStore> {
        self.any().revocations
    }
    fn replay(&self) -> Arc<dyn ReplayStore> {
        self.any().replay
    }
    fn delegations(&self) -> Arc<dyn DelegationStore> {
        self.any().delegations
    }
    fn audit(&self) -> Arc<dyn AuditSink> {
        self.any().audit
    }
    fn records(&self) -> Arc<dyn RecordStore> {
        self.any().records
    }
}

#[test]
fn records_are_compare_and_swap() {
    let server = RedisServer::start();
    contract::records_are_compare_and_swap(backend(&server));
}

#[test]
fn reservations_keep_their_own_deadline() {
    let server = RedisServer::start();
    contract::reservations_keep_their_own_deadline(backend(&server));
}

#[test]
fn budgets_never_overspend() {
    let server = RedisServer::start();
    contract::budgets_never_overspend(|| backend(&server));
}

#[test]
fn concurrent_reservations_never_overspend() {
    let server = RedisServer::start();
    contract::concurrent_reservations_never_overspend(backend(&server));
}

#[test]
fn expiry_ends_each_reservation_once() {
    let server = RedisServer::start();
    contract::expiry_ends_each_reservation_once(backend(&server));
}

#[test]
fn budget_bookkeeping() {
    let server = RedisServer::start();
    contract::budget_bookkeeping(backend(&server));
}

#[test]
fn revocation_subscribers_see_every_entry() {
    let server = RedisServer::start();
    contract::revocation_subscribers_see_every_entry(backend(&server));
}

#[test]
fn replay_is_insert_if_absent() {
    let server = RedisServer::start();
    contract::replay_is_insert_if_absent(backend(&server));
}

#[test]
fn audit_keeps_order() {
    let server = RedisServer::start();
    contract::audit_keeps_order(backend(&server));
}

#[test]
fn delegations_are_compare_and_swap() {
    let server = RedisServer::start();
    contract::delegations_are_compare_and_swap(backend(&server));
}
