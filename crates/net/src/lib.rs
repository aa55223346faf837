//! What every listener and client of dgw shares below the fronts:
//! connection limits and shedding, TLS configurations, and the HTTP
//! `Host`/`Origin` guard.

pub mod connections;
pub mod h2_frames;
pub mod http_guard;
pub mod tls;
pub mod trace_context;
