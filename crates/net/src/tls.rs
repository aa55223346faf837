//! TLS with rustls (the `ring` provider): server configurations for the
//! listeners, with client certificates required when a client CA is given
//! (mTLS), and client configurations for HTTPS upstreams, verified against
//! the system's roots or the upstream's own CA file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// `[server.tls]`: the listeners' certificate and key, and the CA whose
/// client certificates are required (absent: none asked for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    pub client_ca_file: Option<PathBuf>,
}

/// A listener's TLS configuration that reload replaces: each new connection
/// handshakes with the one current when it was accepted; open connections
/// keep theirs.
#[derive(Clone)]
pub struct LiveTls(Arc<arc_swap::ArcSwap<ServerConfig>>);

impl LiveTls {
    /// Starts with `config`.
    pub fn new(config: Arc<ServerConfig>) -> Self {
        Self(Arc::new(arc_swap::ArcSwap::new(config)))
    }

    /// Replaces the configuration for connections accepted from now on.
    pub fn replace(&self, config: Arc<ServerConfig>) {
        self.0.store(config);
    }

    /// An acceptor with the current configuration.
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.0.load_full())
    }
}

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file a config key names, and why it is refused.
    #[error("`{key}` ({path}): {detail}")]
    File {
        key: &'static str,
        path: PathBuf,
        detail: String,
    },
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("client certificate verifier: {0}")]
    Verifier(String),
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn file_error(key: &'static str, path: &Path, detail: impl ToString) -> TlsError {
    TlsError::File {
        key,
        path: path.to_owned(),
        detail: detail.to_string(),
    }
}

/// Why a PEM file was refused, in words (the crate's own show bytes as a
/// list of numbers).
fn pem_words(e: rustls_pki_types::pem::Error, holds: &str) -> String {
    use rustls_pki_types::pem::Error::*;
    match e {
        Io(e) => e.to_string(),
        NoItemsFound => format!("holds no PEM {holds}"),
        MissingSectionEnd { .. } | IllegalSectionStart { .. } => {
            "is not a well-formed PEM file (a BEGIN line without its END)".into()
        }
        Base64Decode(_) => "a PEM section is not valid base64".into(),
        SectionTooLarge => "a PEM section is over 256 MB".into(),
        other => other.to_string(),
    }
}

/// Every certificate in a PEM file (at least one).
fn certificates(key: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let words = |e| file_error(key, path, pem_words(e, "certificate"));
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(words)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(words)?;
    if certs.is_empty() {
        return Err(file_error(key, path, "holds no PEM certificate"));
    }
    Ok(certs)
}

/// A root store of the certificates in a PEM file.
fn roots(key: &'static str, path: &Path) -> Result<RootCertStore, TlsError> {
    let mut store = RootCertStore::empty();
    for cert in certificates(key, path)? {
        store.add(cert).map_err(|e| file_error(key, path, e))?;
    }
    Ok(store)
}

/// A listener's configuration, offering `alpn` (`h2` for gRPC,
/// `http/1.1` for the HTTP listener).
pub fn server_config(files: &TlsFiles, alpn: &[&[u8]]) -> Result<Arc<ServerConfig>, TlsError> {
    let certs = certificates("server.tls.cert_file", &files.cert_file)?;
    let key = PrivateKeyDer::from_pem_file(&files.key_file).map_err(|e| {
        file_error(
            "server.tls.key_file",
            &files.key_file,
            pem_words(e, "private key"),
        )
    })?;
    let builder =
        ServerConfig::builder_with_provider(provider()).with_safe_default_protocol_versions()?;
    let builder = match &files.client_ca_file {
        Some(ca) => {
            let verifier = WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots("server.tls.client_ca_file", ca)?),
                provider(),
            )
            .build()
            .map_err(|e| TlsError::Verifier(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(certs, key)?;
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

/// An HTTPS upstream's client configuration: its `ca_file`, else the
/// system's roots.
pub fn client_config(ca_file: Option<&Path>) -> Result<ClientConfig, TlsError> {
    let roots = match ca_file {
        Some(path) => roots("ca_file", path)?,
        None => {
            let mut store = RootCertStore::empty();
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                let _ = store.add(cert);
            }
            store
        }
    };
    Ok(ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// The subject of the client certificate a connection presented, written
/// as RFC 4514 does (`CN=ops,O=acme` style, as x509-parser prints it).
pub fn peer_subject(connection: &rustls::ServerConnection) -> Option<String> {
    let cert = connection.peer_certificates()?.first()?;
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    Some(parsed.subject().to_string())
}

/// The HTTP/1.1 client dgw calls other services with: `http` and `https`
/// URLs (servers verified against `ca_file`, else the system's roots),
/// `TCP_NODELAY`, and `connect_timeout` when given.
pub type HttpClient = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    http_body_util::Full<bytes::Bytes>,
>;

/// An [`HttpClient`]; the error says why TLS could not be set up.
pub fn http_client(
    ca_file: Option<&Path>,
    connect_timeout: Option<std::time::Duration>,
) -> Result<HttpClient, String> {
    let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(connect_timeout);
    connector.enforce_http(false);
    let tls = client_config(ca_file).map_err(|e| e.to_string())?;
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(connector);
    Ok(
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(https),
    )
}
