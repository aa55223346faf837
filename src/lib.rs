//! delegate-gateway: one enforcement point for delegated authority across
//! agent delegation protocols. The binary is `dgw`; this library holds
//! everything it is made of so tests and benchmarks can reach it.

pub mod cli;
pub mod keyfile;
pub mod random;
