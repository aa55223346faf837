//! The gRPC front (`delegate_gateway.v1`, `proto/`): the same gatekeeper as
//! JSON-RPC, so a decision never depends on the front. Plus the standard
//! `grpc.health.v1` health service and server reflection.

pub mod convert;
mod request_ids;
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
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tonic::transport::server::Connected;
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;

use dgw_core::caller::Authenticator;
use dgw_core::gatekeeper::Gatekeeper;
use dgw_net::connections::{ConnInfo, Limits, TrackedIo, Tracker};
use dgw_net::h2_frames::{H2Frames, H2Watch};

/// How long a gRPC client has to complete its TLS handshake when no
/// `header_read_timeout` is given (the preface deadline, which starts at
/// `accept`, cuts a slow handshake first when there is one).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// An accepted gRPC connection, with or without TLS, its frames followed
/// above TLS for the preface and head deadline ([`dgw_net::h2_frames`]).
enum GrpcIo {
    Plain(H2Frames<TrackedIo<TcpStream>>),
    Tls(H2Frames<Box<tokio_rustls::server::TlsStream<TrackedIo<TcpStream>>>>),
}

impl Connected for GrpcIo {
    type ConnectInfo = ConnInfo;

    fn connect_info(&self) -> ConnInfo {
        match self {
            GrpcIo::Plain(io) => io.get_ref().connect_info(),
            GrpcIo::Tls(s) => {
                let (io, connection) = s.get_ref().get_ref();
                io.connect_info()
                    .with_subject(dgw_net::tls::peer_subject(connection))
            }
        }
    }
}

impl AsyncRead for GrpcIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            GrpcIo::Plain(io) => Pin::new(io).poll_read(cx, buf),
            GrpcIo::Tls(io) => Pin::new(io).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for GrpcIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            GrpcIo::Plain(io) => Pin::new(io).poll_write(cx, data),
            GrpcIo::Tls(io) => Pin::new(io).poll_write(cx, data),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            GrpcIo::Plain(io) => Pin::new(io).poll_flush(cx),
            GrpcIo::Tls(io) => Pin::new(io).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            GrpcIo::Plain(io) => Pin::new(io).poll_shutdown(cx),
            GrpcIo::Tls(io) => Pin::new(io).poll_shutdown(cx),
        }
    }
}

/// Most streams one gRPC connection may have open.
pub const MAX_CONCURRENT_STREAMS: u32 = 100;

/// The names `grpc.health.v1` reports on: the server as a whole, and the
/// gateway's service.
const HEALTH_SERVICES: [&str; 2] = [
    "",
    <pb::delegation_gateway_server::DelegationGatewayServer<service::GrpcFront> as tonic::server::NamedService>::NAME,
];

async fn set_health(health: &HealthReporter, status: ServingStatus) {
    for service in HEALTH_SERVICES {
        health.set_service_status(service, status).await;
    }
}

/// Keeps gRPC health in step with `/readyz`, checked every second:
/// NOT_SERVING while the state cannot be used (a failed budget journal, a
/// shared backend out of reach, a lost revocation feed), SERVING again
/// once it can.
async fn follow_readiness<F>(health: HealthReporter, ready: impl Fn() -> F)
where
    F: std::future::Future<Output = bool>,
{
    let mut every = tokio::time::interval(Duration::from_secs(1));
    let mut serving = true;
    loop {
        every.tick().await;
        let now = ready().await;
        if now != serving {
            serving = now;
            let status = if now {
                ServingStatus::Serving
            } else {
                ServingStatus::NotServing
            };
            set_health(&health, status).await;
        }
    }
}

/// How the gRPC listener serves.
pub struct Settings {
    pub max_message_bytes: usize,
    pub request_timeout: Duration,
    /// Who is calling, from `authorization` metadata and certificates.
    pub auth: Authenticator,
    /// The protocols whose credentials `authorization` metadata may carry.
    pub protocols: Arc<dgw_core::protocol::Registry>,
    pub limits: Limits,
    /// TLS (ALPN `h2`); none: plain text.
    pub tls: Option<dgw_net::tls::LiveTls>,
}

/// Serves gRPC on `listener` until `shutdown` resolves (then health turns
/// NOT_SERVING, in-flight calls finish, and watch streams end). A call that
/// takes longer than `request_timeout`, its request message included, ends
/// with `CANCELLED` (tonic's answer to a server-side timeout); a client's
/// shorter `grpc-timeout` is honoured too.
pub async fn serve(
    listener: TcpListener,
    gate: Arc<Gatekeeper>,
    settings: Settings,
    shutdown: impl Future<Output = ()>,
) -> Result<(), tonic::transport::Error> {
    let Settings {
        max_message_bytes,
        request_timeout,
        auth,
        protocols,
        limits,
        tls,
    } = settings;
    let (health, health_service) = tonic_health::server::health_reporter();
    set_health(&health, ServingStatus::Serving).await;
    let state = gate.clone();
    let follow = tokio::spawn(follow_readiness(health.clone(), move || {
        let state = state.clone();
        async move { state.state_ready().await.is_ok() }
    }));
    // Reflection in both versions: grpcurl and newer clients ask for v1,
    // older ones for v1alpha.
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let reflection_v1 = reflection()
        .build_v1()
        .expect("the descriptor sets are built into the binary and valid");
    let reflection_v1alpha = reflection()
        .build_v1alpha()
        .expect("the descriptor sets are built into the binary and valid");
    let front = service::GrpcFront::new(gate, protocols, max_message_bytes, auth);
    // Sockets are accepted here, held to the connection limits; the
    // builder's `tcp_nodelay` only reaches sockets tonic accepts itself, so
    // ours carry it, or Nagle holds back each answer's trailers.
    let tracker = Tracker::new(limits);
    let handshake_limit = limits.header_read_timeout.unwrap_or(HANDSHAKE_TIMEOUT);
    let (accepted, incoming) = tokio::sync::mpsc::channel::<std::io::Result<GrpcIo>>(64);
    let acceptor = tokio::spawn(async move {
        loop {
            let (stream, peer) = tracker.accept(&listener).await;
            let _ = stream.set_nodelay(true);
            let Some(io) = tracker.track(stream) else {
                continue;
            };
            let accepted = accepted.clone();
            let Some(tls) = tls.as_ref().map(|t| t.acceptor()) else {
                let io = H2Watch::of(&io).wrap(io);
                if accepted.send(Ok(GrpcIo::Plain(io))).await.is_err() {
                    return;
                }
                continue;
            };
            // Each handshake in its own task: a slow one never holds up
            // the accept loop.
            tokio::spawn(async move {
                let watch = H2Watch::of(&io);
                match tokio::time::timeout(handshake_limit, tls.accept(io)).await {
                    Ok(Ok(stream)) => {
                        let io = GrpcIo::Tls(watch.wrap(Box::new(stream)));
                        let _ = accepted.send(Ok(io)).await;
                    }
                    Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                    Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                }
            });
        }
    });
    let stopper = front.stopper();
    let stop_accepting = acceptor.abort_handle();
    let shutdown = async move {
        shutdown.await;
        // Closes the listening socket: new clients are refused at once
        // rather than queued for a server that is draining.
        stop_accepting.abort();
        follow.abort();
        // Health watchers hear NOT_SERVING, then the statuses are withdrawn
        // (a check during the drain answers NOT_FOUND), which ends their
        // streams; decision streams end too. None of them ends on its own,
        // and the server drains only when every stream has.
        let mut health = health;
        set_health(&health, ServingStatus::NotServing).await;
        for service in HEALTH_SERVICES {
            health.clear_service_status(service).await;
        }
        stopper.send_replace(true);
    };
    let gateway = pb::delegation_gateway_server::DelegationGatewayServer::new(front)
        .max_decoding_message_size(max_message_bytes);
    let incoming = tokio_stream::wrappers::ReceiverStream::new(incoming);
    let served = tonic::transport::Server::builder()
        .timeout(request_timeout)
        // An unauthenticated connection may not hold more streams than this
        // (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS), nor run more calls at
        // once: each held stream costs memory until request_timeout.
        .max_concurrent_streams(Some(MAX_CONCURRENT_STREAMS))
        .concurrency_limit_per_connection(MAX_CONCURRENT_STREAMS as usize)
        .layer(request_ids::RequestIds)
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(gateway)
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await;
    acceptor.abort();
    served
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::HealthCheckRequest;

    use super::*;

    /// Health follows the failure check: SERVING until it fails, then
    /// NOT_SERVING, for the server and the gateway's service alike.
    #[tokio::test]
    async fn health_turns_not_serving_when_the_journal_fails() {
        let (health, service) = tonic_health::server::health_reporter();
        set_health(&health, ServingStatus::Serving).await;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
        );
        let failed = Arc::new(AtomicBool::new(false));
        let check = failed.clone();
        tokio::spawn(follow_readiness(health, move || {
            let failed = check.load(Ordering::Relaxed);
            async move { !failed }
        }));
        let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut client = HealthClient::new(channel);
        let mut watchers = Vec::new();
        for service in HEALTH_SERVICES {
            let request = HealthCheckRequest {
                service: service.into(),
            };
            let mut stream = client.watch(request).await.unwrap().into_inner();
            let first = stream.message().await.unwrap().unwrap();
            assert_eq!(first.status(), ServingStatus::Serving.into());
            watchers.push(stream);
        }
        failed.store(true, Ordering::Relaxed);
        for stream in &mut watchers {
            let next = tokio::time::timeout(Duration::from_secs(5), stream.message())
                .await
                .expect("a status within 5 s")
                .unwrap()
                .unwrap();
            assert_eq!(next.status(), ServingStatus::NotServing.into());
        }
        // Ready again: serving again.
        failed.store(false, Ordering::Relaxed);
        for stream in &mut watchers {
            let next = tokio::time::timeout(Duration::from_secs(5), stream.message())
                .await
                .expect("a status within 5 s")
                .unwrap()
                .unwrap();
            assert_eq!(next.status(), ServingStatus::Serving.into());
        }
    }
}
