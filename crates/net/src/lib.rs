//! What every listener and client of dgw shares below the fronts:
//! connection limits and shedding, TLS configurations, and the HTTP
//! `Host`/`Origin` guard.

// Untrusted input never panics the gateway: no unwrap outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod connections;
pub mod h2_frames;
pub mod http_guard;
pub mod tls;
pub mod trace_context;
