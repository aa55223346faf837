//! MCP egress control: dgw between MCP clients and upstream MCP servers
//! (DelegateOS §11). Upstreams are child processes over stdio or Streamable
//! HTTP endpoints; clients reach the proxy at `/mcp` or over stdio with
//! `dgw mcp`. Every `tools/call` passes the gatekeeper.

pub mod auth;
mod call;
pub mod caller_state;
pub mod cancel;
mod conns;
mod data;
pub mod data_rules;
mod event_stream;
pub mod http_link;
pub mod link;
mod listen;
mod listen_serve;
pub mod message;
pub mod oauth;
pub mod proxy;
pub mod relay;
pub mod request_state;
pub mod resolve;
pub mod resume;
pub mod scrub;
/// The secrets dgw presents upstream, read where every command and
/// section reads one (`dgw-net`).
pub use dgw_net::secret;
pub mod server_requests;
pub mod sessions;
pub mod sse;
pub mod stateless;
pub mod stateless_serve;
pub mod stdio_link;
pub mod stdio_server;
pub mod streamable;
pub mod tools;
pub mod upstream;
pub mod upstream_era;

pub use proxy::{McpProxy, UpstreamChanges};
pub use upstream::{TransportSpec, Upstream, UpstreamSpec};
