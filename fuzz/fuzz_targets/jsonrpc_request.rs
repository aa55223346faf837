//! A JSON-RPC request body, through the whole front: envelope, batch,
//! params, and the gatekeeper behind them (the embedded backend in a temp
//! dir). Must
//! never panic, whatever the bytes.
#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use delegate_gateway::budget::LeasePolicy;
use delegate_gateway::caller::Caller;
use delegate_gateway::gatekeeper::Gatekeeper;
use delegate_gateway::jsonrpc::JsonRpc;
use delegate_gateway::protocol::Registry;
use dgw_proto_delegateos::DelegateOs;
use dgw_proto_talos::Talos;
use delegate_gateway::revocations::Revocations;
use delegate_gateway::state::{self, BudgetSettings};
use libfuzzer_sys::fuzz_target;

struct Front {
    rt: tokio::runtime::Runtime,
    rpc: JsonRpc,
    _dir: tempfile::TempDir,
}

fn front() -> &'static Front {
    static FRONT: OnceLock<Front> = OnceLock::new();
    FRONT.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temp dir");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let rpc = rt.block_on(async {
            let stores = state::open(
                state::Backend::Embedded(dir.path()),
                BudgetSettings {
                    reservation_ttl: Duration::from_secs(60),
                    lease: LeasePolicy::OFF,
                    max_open: 1000,
                },
            )
            .expect("the state opens");
            let revocations = Arc::new(
                Revocations::load(stores.revocations.clone())
                    .await
                    .expect("revocations load"),
            );
            let root = delegateos::Keypair::from_seed([1; 32]);
            let gate = Arc::new(Gatekeeper::new(
                vec![("fuzz".into(), root.principal_id().clone())],
                stores.budgets.clone(),
                revocations.clone(),
                stores.delegations.clone(),
            ));
            let mut protocols = Registry::default();
            protocols
                .register(Arc::new(DelegateOs::new(gate.clone())))
                .expect("registered");
            let talos = Talos::new(
                &[],
                revocations,
                stores.replay.clone(),
                stores.audit.clone(),
                Arc::new(delegateos::Keypair::from_seed([2; 32])),
            )
            .await
            .expect("Talos starts");
            protocols.register(Arc::new(talos)).expect("registered");
            JsonRpc::new(gate, Arc::new(protocols), stores.audit.clone(), 1 << 20)
        });
        Front { rt, rpc, _dir: dir }
    })
}

fuzz_target!(|data: &[u8]| {
    let f = front();
    let _ = f.rt.block_on(f.rpc.handle(&Caller::anonymous(), data));
});
