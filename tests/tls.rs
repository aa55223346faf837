//! TLS on every listener and to HTTPS upstreams (issue 15), with
//! certificates made at test time: a working handshake, client certificates
//! required under mTLS (none, or one from another CA, is refused), admins
//! by certificate subject, and an upstream verified against its CA.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use serde_json::{json, Value};
use support::mcp::*;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A CA that signs server and client certificates, written as PEM files.
struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl Ca {
    fn new(name: &str) -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).unwrap();
        Self {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A certificate for `names` (DNS names or IPs) with common name `cn`:
    /// (cert PEM, key PEM).
    fn issue(&self, cn: &str, names: &[&str]) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A rustls client trusting `ca`, presenting `identity` if given.
fn client(ca: &Ca, identity: Option<(String, String)>, alpn: &[u8]) -> tokio_rustls::TlsConnector {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls_pki_types::CertificateDer::from_pem_slice(ca.pem.as_bytes()).unwrap())
        .unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    let mut config = match identity {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => builder
            .with_client_auth_cert(
                vec![rustls_pki_types::CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()],
                rustls_pki_types::PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap(),
    };
    config.alpn_protocols = vec![alpn.to_vec()];
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// One HTTP/1.1 request over TLS; the whole response, or the error that
/// ended the connection.
async fn https(
    connector: &tokio_rustls::TlsConnector,
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<String> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = connector.connect(name, tcp).await?;
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let port = addr.rsplit(':').next().unwrap();
    tls.write_all(
        format!(
            "{method} {path} HTTP/1.1\r\nHost: localhost:{port}\r\nContent-Length: {}\r\nConnection: close\r\n{extra}\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .await?;
    let mut out = String::new();
    tls.read_to_string(&mut out).await?;
    Ok(out)
}

struct Pki {
    dir: tempfile::TempDir,
    ca: Ca,
    other_ca: Ca,
}

impl Pki {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            ca: Ca::new("dgw test CA"),
            other_ca: Ca::new("someone else's CA"),
        }
    }

    /// `[server.tls]` lines (with client certificates required when `mtls`).
    fn server_tls(&self, mtls: bool) -> String {
        let (cert, key) = self.ca.issue("dgw", &["localhost", "127.0.0.1"]);
        let cert = write(self.dir.path(), "server.pem", &cert);
        let key = write(self.dir.path(), "server.key", &key);
        let ca = write(self.dir.path(), "ca.pem", &self.ca.pem);
        let mut t = format!("[server.tls]\ncert_file = {cert:?}\nkey_file = {key:?}\n");
        if mtls {
            t.push_str(&format!("client_ca_file = {ca:?}\n"));
        }
        t
    }
}

fn rpc(method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_on_both_listeners_and_mtls_admins_by_subject() {
    let pki = Pki::new();
    let root = seed(1);
    let extra = format!(
        "grpc = \"127.0.0.1:0\"\n{}[[admin.certs]]\nsubject = \"CN=ops\"\n",
        pki.server_tls(true)
    );
    let config = gateway_config(pki.dir.path(), &[("acme", root.principal_id())], &extra);
    let gw = Gateway::start(&config);
    let ops = client(&pki.ca, Some(pki.ca.issue("ops", &["ops"])), b"http/1.1");
    let agent = client(
        &pki.ca,
        Some(pki.ca.issue("agent", &["agent"])),
        b"http/1.1",
    );

    // Works with a certificate from the CA.
    let health = https(&agent, &gw.addr, "GET", "/healthz", &[], "")
        .await
        .unwrap();
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    // Plain text is refused on a TLS listener.
    let (status, _) = std::panic::catch_unwind(|| http_request(&gw.addr, "GET", "/healthz", b""))
        .map(|r| (Some(r.0), ()))
        .unwrap_or((None, ()));
    assert_ne!(status, Some(200));
    // No client certificate, or one from another CA: no connection.
    let anonymous = client(&pki.ca, None, b"http/1.1");
    assert!(https(&anonymous, &gw.addr, "GET", "/healthz", &[], "")
        .await
        .is_err());
    let stranger = client(
        &pki.ca,
        Some(pki.other_ca.issue("ops", &["ops"])),
        b"http/1.1",
    );
    assert!(https(&stranger, &gw.addr, "GET", "/healthz", &[], "")
        .await
        .is_err());
    // A server certificate from another CA: the client refuses it.
    let distrustful = client(
        &pki.other_ca,
        Some(pki.ca.issue("ops", &["ops"])),
        b"http/1.1",
    );
    assert!(https(&distrustful, &gw.addr, "GET", "/healthz", &[], "")
        .await
        .is_err());

    // The subject CN=ops is an admin; CN=agent is not.
    let audit = rpc("dgw/audit", json!({}));
    let by_ops = https(&ops, &gw.addr, "POST", "/rpc", &[], &audit)
        .await
        .unwrap();
    assert!(by_ops.contains("\"events\""), "{by_ops}");
    let by_agent = https(&agent, &gw.addr, "POST", "/rpc", &[], &audit)
        .await
        .unwrap();
    assert!(by_agent.contains("admin_required"), "{by_agent}");

    // gRPC over TLS with a client certificate, through tonic.
    let token = root_token(&root, &seed(2), &["docs:read:/project/**"], 1000, 3600).encode();
    let (cert, key) = pki.ca.issue("ops", &["ops"]);
    let tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(&pki.ca.pem))
        .identity(tonic::transport::Identity::from_pem(cert, key))
        .domain_name("localhost");
    let port = gw
        .grpc
        .as_ref()
        .unwrap()
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    let channel = tonic::transport::Channel::from_shared(format!("https://localhost:{port}"))
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut c = delegate_gateway::grpc::pb::delegation_gateway_client::DelegationGatewayClient::new(
        channel,
    );
    let allowed = c
        .authorize(delegate_gateway::grpc::pb::AuthorizeRequest {
            credential_json: String::new(),
            dct: token,
            request: Some(delegate_gateway::grpc::pb::CapabilityRequest {
                namespace: "docs".into(),
                action: "read".into(),
                resource: "/project/a".into(),
            }),
            cost_microcents: 5,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(allowed.amount_microcents, 5);
    // The certificate makes this caller an admin on gRPC too.
    c.watch_decisions(delegate_gateway::grpc::pb::WatchDecisionsRequest::default())
        .await
        .unwrap();

    // The gRPC listener requires a client certificate from the CA as well:
    // none, or one from another CA, gets no call through (refused at the
    // handshake, or on the first read under TLS 1.3).
    for (who, identity) in [
        ("no client certificate", None),
        (
            "another CA's certificate",
            Some(pki.other_ca.issue("ops", &["ops"])),
        ),
    ] {
        let mut tls = tonic::transport::ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(&pki.ca.pem))
            .domain_name("localhost");
        if let Some((cert, key)) = identity {
            tls = tls.identity(tonic::transport::Identity::from_pem(cert, key));
        }
        let refused = async {
            let channel =
                tonic::transport::Channel::from_shared(format!("https://localhost:{port}"))
                    .unwrap()
                    .tls_config(tls)
                    .unwrap()
                    .connect_timeout(std::time::Duration::from_secs(5))
                    .timeout(std::time::Duration::from_secs(5))
                    .connect()
                    .await
                    .map_err(|e| e.to_string())?;
            let mut c =
                delegate_gateway::grpc::pb::delegation_gateway_client::DelegationGatewayClient::new(
                    channel,
                );
            c.watch_decisions(delegate_gateway::grpc::pb::WatchDecisionsRequest::default())
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        .await;
        assert!(refused.is_err(), "{who}: a gRPC call went through");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn server_tls_without_client_certificates() {
    let pki = Pki::new();
    let config = gateway_config(
        pki.dir.path(),
        &[("acme", seed(1).principal_id())],
        &pki.server_tls(false),
    );
    let gw = Gateway::start(&config);
    let anonymous = client(&pki.ca, None, b"http/1.1");
    let health = https(&anonymous, &gw.addr, "GET", "/healthz", &[], "")
        .await
        .unwrap();
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
}

/// New certificate files take effect on SIGHUP for the connections that
/// follow, on both listeners, without a restart.
#[tokio::test(flavor = "multi_thread")]
async fn certificates_rotate_on_reload() {
    let pki = Pki::new();
    let extra = format!("grpc = \"127.0.0.1:0\"\n{}", pki.server_tls(false));
    let config = gateway_config(pki.dir.path(), &[("acme", seed(1).principal_id())], &extra);
    let gw = Gateway::start(&config);
    let (old, new) = (
        client(&pki.ca, None, b"http/1.1"),
        client(&pki.other_ca, None, b"http/1.1"),
    );
    let grpc = gw.grpc.clone().unwrap();
    let h2 = client(&pki.other_ca, None, b"h2");
    assert!(https(&old, &gw.addr, "GET", "/healthz", &[], "")
        .await
        .is_ok());
    assert!(https(&new, &gw.addr, "GET", "/healthz", &[], "")
        .await
        .is_err());

    // The operator replaces the files (another CA's certificate) and signals.
    let (cert, key) = pki.other_ca.issue("dgw", &["localhost", "127.0.0.1"]);
    write(pki.dir.path(), "server.pem", &cert);
    write(pki.dir.path(), "server.key", &key);
    let status = std::process::Command::new("kill")
        .args(["-HUP", &gw.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while https(&new, &gw.addr, "GET", "/healthz", &[], "")
        .await
        .is_err()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the new certificate was not served"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(https(&old, &gw.addr, "GET", "/healthz", &[], "")
        .await
        .is_err());
    // The gRPC listener hands out the new certificate too.
    let tcp = tokio::net::TcpStream::connect(&grpc).await.unwrap();
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    assert!(h2.connect(name, tcp).await.is_ok());
}

/// An HTTPS upstream, verified against its `ca_file`; with another CA's
/// file the upstream is unavailable and no call goes through.
#[test]
fn https_upstreams_are_verified_against_their_ca() {
    let pki = Pki::new();
    let (cert, key) = pki.ca.issue("echo", &["localhost", "127.0.0.1"]);
    let cert = write(pki.dir.path(), "echo.pem", &cert);
    let key = write(pki.dir.path(), "echo.key", &key);
    let (_echo, port) =
        echo_server_on_port(&["--https".as_ref(), cert.as_os_str(), key.as_os_str()]);
    let rules = "[[upstreams.tools]]\nname = \"echo\"\ncapability = \"demo:echo\"\nfixed_resource = \"/echo\"\n";
    let root = seed(1);
    let token = root_token(&root, &seed(2), &["demo:echo:*"], 1000, 3600).encode();
    for (ca, works) in [(&pki.ca.pem, true), (&pki.other_ca.pem, false)] {
        let dir = tempfile::tempdir().unwrap();
        let ca_file = write(dir.path(), "upstream-ca.pem", ca);
        let extra = format!(
            "[mcp]\nready_timeout = \"3s\"\n[[upstreams]]\nname = \"web\"\nurl = \"https://localhost:{port}/mcp\"\nca_file = {ca_file:?}\n{rules}"
        );
        let config = gateway_config(dir.path(), &[("acme", root.principal_id())], &extra);
        let gw = Gateway::start(&config);
        let mut mcp = McpHttp::connect(&gw.addr, Some(&token));
        let r = mcp.call("echo", json!({"text": "over TLS"}), None);
        if works {
            assert_eq!(text_of(&r), "over TLS");
        } else {
            assert!(r.get("error").is_some(), "{r}");
            let log = std::fs::read_to_string(&gw.stderr_log).unwrap();
            assert!(
                log.contains("certificate"),
                "the log names the certificate problem"
            );
        }
    }
}

/// Writes `bytes` one at a time, `every` apart, reading in between (dgw's
/// own SETTINGS or answer are read and ignored), until dgw closes the
/// connection or `give_up` has passed: whether it was closed, the bytes
/// written and the time taken.
async fn drip<S>(
    mut s: S,
    bytes: &[u8],
    every: Duration,
    give_up: Duration,
) -> (bool, usize, Duration)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let started = Instant::now();
    let mut sent = 0;
    let mut buf = [0u8; 4096];
    while started.elapsed() < give_up {
        if sent < bytes.len() {
            let wrote = s.write_all(&bytes[sent..=sent]).await;
            if wrote.is_err() || s.flush().await.is_err() {
                return (true, sent, started.elapsed());
            }
            sent += 1;
        }
        let until = tokio::time::Instant::now() + every;
        loop {
            match tokio::time::timeout_at(until, s.read(&mut buf)).await {
                Err(_) => break,
                Ok(Ok(0) | Err(_)) => return (true, sent, started.elapsed()),
                Ok(Ok(_)) => {}
            }
        }
    }
    (false, sent, started.elapsed())
}

/// The HTTP/2 client preface and an empty SETTINGS frame.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// Issue 30, finding 5: slowloris over HTTP/2. With `header_read_timeout`
/// 1 s (and `idle_timeout` 30 s, so idleness is not what cuts), a client
/// that sends the HTTP/2 preface a byte every 250 ms is cut off within
/// about a second on the gRPC listener and on the HTTP one, in plain text
/// and over TLS; so is one that sends its TLS handshake that slowly, and
/// (gRPC) one that completes the preface but then sends the head of its
/// first request that slowly. A well-behaved gRPC client still works.
#[tokio::test(flavor = "multi_thread")]
async fn slow_http2_prefaces_and_handshakes_are_cut_on_every_listener() {
    let pki = Pki::new();
    let root = seed(1);
    let limits = "header_read_timeout = \"1s\"\nidle_timeout = \"30s\"\ngrpc = \"127.0.0.1:0\"\n";
    let plain_dir = tempfile::tempdir().unwrap();
    let plain = gateway_config(plain_dir.path(), &[("acme", root.principal_id())], limits);
    let plain = tokio::task::block_in_place(|| Gateway::start(&plain));
    let tls_config = gateway_config(
        pki.dir.path(),
        &[("acme", root.principal_id())],
        &format!("{limits}{}", pki.server_tls(false)),
    );
    let tls = tokio::task::block_in_place(|| Gateway::start(&tls_config));
    let (every, give_up) = (Duration::from_millis(250), Duration::from_secs(6));
    let cut = |what: &str, (closed, sent, took): (bool, usize, Duration)| {
        assert!(
            closed && took < Duration::from_secs(3),
            "{what}: closed {closed} after {sent} bytes and {took:?}"
        );
    };
    let tcp = |addr: &str| {
        let addr = addr.to_owned();
        async move { tokio::net::TcpStream::connect(addr).await.unwrap() }
    };
    let name = || rustls_pki_types::ServerName::try_from("localhost").unwrap();

    // Plain text.
    let (plain_http, plain_grpc) = (plain.addr.clone(), plain.grpc.clone().unwrap());
    cut(
        "gRPC, a slow preface",
        drip(tcp(&plain_grpc).await, H2_PREFACE, every, give_up).await,
    );
    cut(
        "HTTP, a slow HTTP/2 preface",
        drip(tcp(&plain_http).await, H2_PREFACE, every, give_up).await,
    );
    // The preface at once, then a HEADERS frame (stream 1, 40 bytes of
    // block) a byte at a time.
    // (Half a second later: the connection's timer is set for its idle
    // deadline by then, and must be set again.)
    let mut s = tcp(&plain_grpc).await;
    s.write_all(H2_PREFACE).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut headers = vec![0, 0, 40, 1, 4, 0, 0, 0, 1];
    headers.extend_from_slice(&[0x82; 40]);
    cut(
        "gRPC, a slow first request head",
        drip(s, &headers, every, give_up).await,
    );

    // A call whose request message arrives slowly is the call's to time
    // out (request_timeout), not the connection's head: its HTTP/2 frame
    // half-sent for longer than header_read_timeout, then the rest, and
    // the call is answered.
    let mut s = tcp(&plain_grpc).await;
    s.write_all(H2_PREFACE).await.unwrap();
    let mut block = vec![0x83, 0x86, 0x04];
    let path = b"/delegate_gateway.v1.DelegationGateway/Authorize";
    block.push(path.len() as u8);
    block.extend_from_slice(path);
    block.push(0x01);
    block.push(plain_grpc.len() as u8);
    block.extend_from_slice(plain_grpc.as_bytes());
    for (name, value) in [("content-type", "application/grpc"), ("te", "trailers")] {
        block.extend_from_slice(&[0x00, name.len() as u8]);
        block.extend_from_slice(name.as_bytes());
        block.push(value.len() as u8);
        block.extend_from_slice(value.as_bytes());
    }
    let mut frame = (block.len() as u32).to_be_bytes()[1..].to_vec();
    frame.extend_from_slice(&[1, 4, 0, 0, 0, 1]);
    frame.extend_from_slice(&block);
    // A DATA frame of 15 bytes: a message of 10 bytes, half of it now.
    frame.extend_from_slice(&[0, 0, 15, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 10, 0x0a, 0x08]);
    s.write_all(&frame).await.unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    // The rest, an empty DATA frame ending the stream, and a PING, which
    // only a connection still read from answers.
    let mut rest = vec![b'n'; 8];
    rest.extend_from_slice(&[0, 0, 0, 0, 1, 0, 0, 0, 1]);
    rest.extend_from_slice(&[0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
    if let Err(e) = s.write_all(&rest).await {
        panic!("the connection was closed under a call in flight: {e}");
    }
    let mut answer = Vec::new();
    let (mut call_answered, mut ping_answered) = (false, false);
    let read = tokio::time::timeout(Duration::from_secs(5), async {
        let mut buf = [0u8; 4096];
        while !(call_answered && ping_answered) {
            let n = s.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                return;
            }
            answer.extend_from_slice(&buf[..n]);
            let mut at = 0;
            while at + 9 <= answer.len() {
                let len = u32::from_be_bytes([0, answer[at], answer[at + 1], answer[at + 2]]);
                let (kind, flags, stream) = (answer[at + 3], answer[at + 4], answer[at + 8]);
                call_answered |= kind == 1 && stream == 1;
                ping_answered |= kind == 6 && flags & 1 == 1;
                at += 9 + len as usize;
            }
        }
    })
    .await;
    assert!(
        read.is_ok() && call_answered && ping_answered,
        "the slow call answered {call_answered}, the connection after it {ping_answered}"
    );

    // TLS: the handshake that slowly (a ClientHello's record header, then
    // bytes of it), and the preface that slowly after a quick handshake.
    let mut hello = vec![
        0x16, 0x03, 0x01, 0x00, 0xc8, 0x01, 0x00, 0x00, 0xc4, 0x03, 0x03,
    ];
    hello.extend_from_slice(&[0x11; 40]);
    let (tls_http, tls_grpc) = (tls.addr.clone(), tls.grpc.clone().unwrap());
    for (what, addr) in [("gRPC", &tls_grpc), ("HTTP", &tls_http)] {
        cut(
            &format!("{what}, a slow TLS handshake"),
            drip(tcp(addr).await, &hello, every, give_up).await,
        );
    }
    for (what, addr, alpn) in [
        ("gRPC", &tls_grpc, &b"h2"[..]),
        ("HTTP", &tls_http, &b"http/1.1"[..]),
    ] {
        let stream = client(&pki.ca, None, alpn)
            .connect(name(), tcp(addr).await)
            .await
            .unwrap();
        cut(
            &format!("{what} over TLS, a slow preface"),
            drip(stream, H2_PREFACE, every, give_up).await,
        );
    }

    // A gRPC client that speaks at once is served, twice, longer than
    // header_read_timeout apart.
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{plain_grpc}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    for _ in 0..2 {
        let r = health
            .check(tonic_health::pb::HealthCheckRequest::default())
            .await
            .unwrap();
        assert_eq!(r.into_inner().status, 1, "SERVING");
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
}
