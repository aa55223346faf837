//! delegate-gateway: one enforcement point for delegated authority across
//! agent delegation protocols. The binary is `dgw`; this library holds
//! everything it is made of so tests and benchmarks can reach it.

// Untrusted input never panics the gateway: no unwrap outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod cli;
pub mod config;
pub mod connections;
pub mod data_dir;
pub mod grpc;
pub mod http;
pub mod http_guard;
pub mod jsonrpc;
pub mod keyfile;
pub mod logs;
pub mod mcp;
pub mod protocols;
pub mod serve;
pub mod tls;

// The core, re-exported where the gateway's own modules and its tests
// have always found it.
pub use dgw_core::{budget, caller, gatekeeper, protocol, random, revocations, telemetry};

/// The state traits, and the backends the gateway is wired with.
pub mod state {
    pub use dgw_core::state::*;
    pub use dgw_state_memory as memory;
    pub use dgw_state_sled as sled;
}
