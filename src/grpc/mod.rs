//! The gRPC front (`delegate_gateway.v1`, `proto/`): the same gatekeeper as
//! JSON-RPC, so a decision never depends on the front. Plus the standard
//! `grpc.health.v1` health service and server reflection.

pub mod convert;
pub mod service;
pub mod status;

/// The generated messages, client and server.
pub mod pb {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("delegate_gateway.v1");

    /// The encoded descriptor set of `proto/`, for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/delegate_gateway_v1.bin"));
}

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::gatekeeper::Gatekeeper;

/// Serves gRPC on `listener` until `shutdown` resolves (then in-flight calls
/// finish, and watch streams end). A call that takes longer than
/// `request_timeout`, its request message included, ends with `CANCELLED`
/// (tonic's answer to a server-side timeout); a client's shorter
/// `grpc-timeout` is honoured too.
pub async fn serve(
    listener: TcpListener,
    gate: Arc<Gatekeeper>,
    max_message_bytes: usize,
    request_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) -> Result<(), tonic::transport::Error> {
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<pb::delegation_gateway_server::DelegationGatewayServer<service::GrpcFront>>()
        .await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .expect("the descriptor sets are built into the binary and valid");
    let front = service::GrpcFront::new(gate, max_message_bytes);
    let stopper = front.stopper();
    let shutdown = async move {
        shutdown.await;
        // Watch streams never end on their own; end them so the server drains.
        stopper.send_replace(true);
    };
    let gateway = pb::delegation_gateway_server::DelegationGatewayServer::new(front)
        .max_decoding_message_size(max_message_bytes);
    // The builder's `tcp_nodelay` only reaches sockets tonic accepts itself;
    // ours must carry it, or Nagle holds back each answer's trailers.
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    tonic::transport::Server::builder()
        .timeout(request_timeout)
        .add_service(health_service)
        .add_service(reflection)
        .add_service(gateway)
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
}
