//! delegate-gateway: one enforcement point for delegated authority across
//! agent delegation protocols. The binary is `dgw`; this library holds
//! everything it is made of so tests and benchmarks can reach it.

pub mod budget;
pub mod caller;
pub mod cli;
pub mod config;
pub mod connections;
pub mod data_dir;
pub mod gatekeeper;
pub mod grpc;
pub mod http;
pub mod http_guard;
pub mod jsonrpc;
pub mod keyfile;
pub mod mcp;
pub mod protocol;
pub mod protocols;
pub mod random;
pub mod revocations;
pub mod serve;
pub mod state;
pub mod telemetry;
pub mod tls;
