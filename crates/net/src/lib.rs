//! What every listener and client of dgw shares below the fronts:
//! connection limits and shedding, TLS configurations, the HTTP
//! `Host`/`Origin` guard, and the one client dgw calls other services with.

pub mod connections;
pub mod h2_frames;
pub mod http_guard;
pub mod outbound;
pub mod tls;
pub mod trace_context;
