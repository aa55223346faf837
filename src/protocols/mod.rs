//! The protocols this gateway speaks, each a [`dgw_protocol::Module`]: the
//! only modules that name a protocol's types, and [`MODULES`], the one
//! list config loading, `serve`, reload and the command line iterate.

pub mod motebit;

use dgw_protocol::Module;

/// DelegateOS and Talos, in their own crates.
pub use dgw_proto_delegateos as delegateos;
pub use dgw_proto_talos as talos;
pub use dgw_protocol::Services;

/// Every protocol the gateway ships, in registration order (the first
/// whose scheme, prefix or envelope a request carries reads it).
pub static MODULES: &[&dyn Module] = &[
    &delegateos::module::MODULE,
    &talos::module::MODULE,
    &motebit::module::MODULE,
    &dgw_proto_agenta::module::MODULE,
    &dgw_proto_ldp::module::MODULE,
];
