//! The backend contract suite against a real `redis-server` (started here
//! on a free port; `.ci/run` installs it). Each backend instance has keys
//! of its own under a fresh prefix, so one server serves every case.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

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

use redis_server::{RedisCluster, RedisServer};

/// A backend with keys of its own on `server`.
fn backend(server: &RedisServer) -> Redis {
    at_url(server.url())
}

fn at_url(url: String) -> Redis {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    Redis {
        settings: RedisSettings {
            url,
            prefix: format!("t{n}"),
            timeout: Duration::from_secs(5),
            ca_pem: None,
        },
    }
}

/// One backend: a prefix of its own on a server.
#[derive(Clone)]
struct Redis {
    settings: RedisSettings,
}

impl Redis {
    fn stores(&self, budget: BudgetSettings) -> dgw_core::state::Stores {
        dgw_state_redis::open(&self.settings, budget).unwrap()
    }

    fn settings_for_test(&self) -> BudgetSettings {
        BudgetSettings {
            reservation_ttl: Duration::from_secs(60),
            max_open: 10_000,
            lease: dgw_core::budget::LeasePolicy::OFF,
        }
    }

    fn any(&self) -> dgw_core::state::Stores {
        self.stores(self.settings_for_test())
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

dgw_core::contract_suite!({
    let server = RedisServer::start();
    move || backend(&server)
});

/// With `appendfsync always` (what `deploy/` ships), a settlement Redis
/// acknowledged survives Redis killed with SIGKILL; so does a reservation,
/// which still ends once.
#[test]
fn an_acknowledged_settlement_survives_a_redis_crash() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = RedisServer::start_persistent(dir.path());
    let b = backend(&server);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let levels = vec![(dgw_core::budget::BudgetKey::from_stored("ROOT/a"), 100)];
    let (settled, open) = rt.block_on(async {
        let store = b.budgets(b.settings_for_test());
        let r = store
            .reserve(&levels, 40, 0, dgw_core::budget::OnExpiry::Release, None)
            .await
            .unwrap();
        store.settle(&r.reservation_id, 25).await.unwrap();
        let open = store
            .reserve(&levels, 10, 0, dgw_core::budget::OnExpiry::Charge, None)
            .await
            .unwrap();
        (25, open.reservation_id)
    });
    server.stop();
    server.resume();
    rt.block_on(async {
        let store = b.budgets(b.settings_for_test());
        let report = store.report_levels(&levels).await.unwrap();
        assert_eq!(report[0].spent_microcents, settled);
        assert_eq!(report[0].reserved_microcents, 10);
        assert_eq!(store.sweep(u64::MAX).await.unwrap(), 1);
        assert_eq!(store.sweep(u64::MAX).await.unwrap(), 0, "once");
        assert!(store.release(&open).await.is_err());
        let report = store.report_levels(&levels).await.unwrap();
        assert_eq!(
            (report[0].spent_microcents, report[0].reserved_microcents),
            (35, 0)
        );
    });
}

dgw_core::contract_suite!(
    /// The whole suite on a Redis Cluster of three masters: every script
    /// touches one slot (a tree's hash tag), every pipeline stays in one.
    one test the_suite_passes_on_redis_cluster: {
        let cluster = RedisCluster::start();
        move || at_url(cluster.url())
    }
);

/// `rediss://`: TLS to Redis, its certificate checked against the CA given
/// (and refused without it: the system's roots do not know that CA).
#[test]
fn tls_to_redis_checks_its_certificate() {
    let server = redis_server::TlsRedisServer::start();
    let url = format!("rediss://127.0.0.1:{}", server.port);
    let mut trusting = at_url(url.clone());
    trusting.settings.ca_pem = Some(server.ca_pem.as_bytes().to_vec());
    contract::records_are_compare_and_swap(|| trusting.clone());
    let stranger = at_url(url);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let refused = rt.block_on(stranger.any().records.get("suite_docs", "a"));
    let refused = refused.unwrap_err().to_string();
    assert!(
        refused.contains("certificate") || refused.contains("Issuer"),
        "{refused}"
    );
}
