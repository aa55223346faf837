//! The protocols this gateway speaks, each on the seam of [`crate::protocol`]:
//! the only modules that name a protocol's types. `serve.rs` registers them.

pub mod agenta;
pub mod delegateos;
pub mod ldp;
pub mod motebit;
pub mod talos;
