//! delegate-gateway: one enforcement point for delegated authority across
//! agent delegation protocols. The binary is `dgw`; this library holds
//! everything it is made of so tests and benchmarks can reach it.

mod audit_log;
pub mod cli;
pub mod config;
pub mod data_dir;
pub mod keyfile;
mod known_series;
pub mod logs;
pub mod protocols;
pub mod reload;
pub mod serve;
pub mod traces;

// The core, re-exported where the gateway's own modules and its tests
// have always found it.
pub use dgw_core::{budget, caller, gatekeeper, protocol, random, revocations, telemetry, units};

// The fronts and their plumbing, re-exported likewise.
pub use dgw_front_grpc as grpc;
pub use dgw_front_http as http;
pub use dgw_front_jsonrpc as jsonrpc;
pub use dgw_front_mcp as mcp;
pub use dgw_net::{connections, http_guard, outbound, tls};

pub mod state;
