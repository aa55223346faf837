//! A JSON-RPC request body, through the whole front: envelope, batch,
//! params, and the gatekeeper behind them (over sled in a temp dir). Must
//! never panic, whatever the bytes.
#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use delegate_gateway::budget::{LeasePolicy, Ledger};
use delegate_gateway::caller::Caller;
use delegate_gateway::delegations::DelegationStore;
use delegate_gateway::gatekeeper::Gatekeeper;
use delegate_gateway::jsonrpc::JsonRpc;
use delegate_gateway::revocations::RevocationStore;
use delegate_gateway::storage::Storage;
use delegate_gateway::talos_gate::TalosGate;
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
            let storage = Storage::open(&dir.path().join("db")).expect("sled opens");
            let ledger = Ledger::open(
                storage.clone(),
                &dir.path().join("journal"),
                Duration::from_secs(60),
                LeasePolicy::OFF,
                1000,
            )
            .expect("the ledger opens");
            let root = delegateos::Keypair::from_seed([1; 32]);
            let gate = Arc::new(Gatekeeper::new(
                vec![("fuzz".into(), root.principal_id().clone())],
                ledger,
                RevocationStore::open(storage.clone()).expect("revocations open"),
                DelegationStore::new(storage.clone()),
            ));
            let talos = Arc::new(TalosGate::new(
                gate.clone(),
                &[],
                delegate_gateway::replay::ReplayStore::new(storage.clone()),
                delegate_gateway::audit::AuditLog::new(
                    storage,
                    Arc::new(delegateos::Keypair::from_seed([2; 32])),
                ),
            ));
            JsonRpc::new(gate, talos, 1 << 20)
        });
        Front { rt, rpc, _dir: dir }
    })
}

fuzz_target!(|data: &[u8]| {
    let f = front();
    let _ = f.rt.block_on(f.rpc.handle(&Caller::anonymous(), data));
});
