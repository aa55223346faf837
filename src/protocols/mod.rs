//! [`MODULES`]: the protocols this gateway speaks, each a
//! [`dgw_protocol::Module`] exported by its own crate, in the one list
//! config loading, `serve`, reload and the command line iterate. A line
//! per protocol; nothing else in the binary names one.

use dgw_protocol::Module;

/// Every protocol the gateway ships, in registration order (the first
/// whose scheme, prefix or envelope a request carries reads it).
pub static MODULES: &[&dyn Module] = &[
    &dgw_proto_delegateos::module::MODULE,
    &dgw_proto_talos::module::MODULE,
    &dgw_proto_motebit::module::MODULE,
    &dgw_proto_agenta::module::MODULE,
    &dgw_proto_ldp::module::MODULE,
];
