//! What every listener and client of dgw shares below the fronts:
//! connection limits and shedding, TLS configurations, the HTTP
//! `Host`/`Origin` guard, the one client dgw calls other services with, and
//! the one reader of secret files.

pub mod connections;
pub mod h2_frames;
pub mod http_guard;
pub mod outbound;
pub mod secret;
pub mod tls;
pub mod trace_context;
