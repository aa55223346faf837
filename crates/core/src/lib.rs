//! dgw's core: the vocabulary and the one pipeline every protocol and every
//! front goes through.
//!
//! - [`budget`]: budget nodes, reservations, and the pure model every
//!   backend applies;
//! - [`state`]: the traits every backend implements, and the contract suite
//!   (`contract-suite` feature) every backend passes;
//! - [`storage`]: the one failure every store reports (a leaf under both);
//! - [`protocol`]: the protocol trait, the registry, [`protocol::Grant`]
//!   and the typed [`protocol::Denial`];
//! - [`gatekeeper`]: the pipeline (grant → canonical requests → authority
//!   → budget reservation) and the DelegateOS lifecycle over the state.
//!
//! No I/O of its own: state comes through [`state`]'s traits, protocols
//! through [`protocol::Protocol`].

pub mod budget;
pub mod caller;
pub mod error;
pub mod gatekeeper;
pub mod issuing;
pub mod protocol;
pub mod random;
pub mod request_id;
pub mod revocations;
pub mod run_to_end;
pub mod stages;
pub mod state;
pub mod storage;
pub mod telemetry;
pub mod trail;
pub mod units;
