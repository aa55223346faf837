//! The connection to Redis: one pooled, reconnecting, multiplexed link
//! (the `redis` crate's connection manager, or its cluster connection for
//! Redis Cluster), made on first use, every command within the configured
//! timeout; and links of their own for blocking reads of the revocation
//! stream.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{
    ConnectionLike, ConnectionManager, ConnectionManagerConfig, MultiplexedConnection,
};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, Cmd, Pipeline, RedisFuture, Value};
use tokio::sync::OnceCell;

use dgw_core::state::StorageError;

use crate::RedisSettings;

/// Where the state is: one server, or a cluster's seed nodes.
#[derive(Clone)]
enum Target {
    Single(Box<redis::Client>),
    Cluster(Box<ClusterClient>),
}

/// The shared connection.
#[derive(Clone)]
pub struct Connection {
    target: Target,
    link: Arc<OnceCell<Link>>,
    timeout: Duration,
}

/// A connection to a server or a cluster; commands on it pipeline.
#[derive(Clone)]
pub enum Link {
    /// To one server, reconnecting.
    Single(ConnectionManager),
    /// To one server, for one follower (it reconnects itself).
    Direct(MultiplexedConnection),
    /// To a cluster.
    Cluster(ClusterConnection),
}

impl ConnectionLike for Link {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Link::Single(c) => c.req_packed_command(cmd),
            Link::Direct(c) => c.req_packed_command(cmd),
            Link::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Link::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Link::Direct(c) => c.req_packed_commands(pipeline, offset, count),
            Link::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Link::Single(c) => c.get_db(),
            Link::Direct(c) => c.get_db(),
            Link::Cluster(c) => c.get_db(),
        }
    }
}

/// The seed nodes of a `redis+cluster://h1:p1,h2:p2` (or
/// `rediss+cluster://`) URL, each as a `redis://` (`rediss://`) URL.
fn cluster_nodes(url: &str) -> Option<Vec<String>> {
    let (scheme, rest) = if let Some(rest) = url.strip_prefix("redis+cluster://") {
        ("redis", rest)
    } else {
        ("rediss", url.strip_prefix("rediss+cluster://")?)
    };
    let (auth, hosts) = match rest.rsplit_once('@') {
        Some((auth, hosts)) => (format!("{auth}@"), hosts),
        None => (String::new(), rest),
    };
    let hosts = hosts.split('/').next().unwrap_or_default();
    let nodes: Vec<String> = hosts
        .split(',')
        .filter(|h| !h.is_empty())
        .map(|h| format!("{scheme}://{auth}{h}"))
        .collect();
    (!nodes.is_empty()).then_some(nodes)
}

impl Connection {
    /// A connection to `settings.url`, not yet made.
    pub fn new(settings: &RedisSettings) -> Result<Self, StorageError> {
        let refused = |e: redis::RedisError| {
            StorageError::Backend(format!("redis: {}: {e}", redacted(&settings.url)))
        };
        let target = if settings.url.contains("+cluster://") {
            let nodes = cluster_nodes(&settings.url).ok_or_else(|| {
                StorageError::Backend(format!(
                    "redis: {}: name the cluster's nodes as redis+cluster://host:port,host:port",
                    redacted(&settings.url)
                ))
            })?;
            let mut builder = ClusterClient::builder(nodes)
                .connection_timeout(settings.timeout)
                .response_timeout(settings.timeout);
            if let Some(pem) = &settings.ca_pem {
                builder = builder.certs(trusting(pem));
            }
            let client = builder.build().map_err(refused)?;
            Target::Cluster(Box::new(client))
        } else {
            let client = match &settings.ca_pem {
                Some(pem) => redis::Client::build_with_tls(settings.url.as_str(), trusting(pem)),
                None => redis::Client::open(settings.url.as_str()),
            };
            Target::Single(Box::new(client.map_err(refused)?))
        };
        Ok(Self {
            target,
            link: Arc::new(OnceCell::new()),
            timeout: settings.timeout,
        })
    }

    /// The shared link (made now if it is not yet).
    pub async fn get(&self) -> Result<Link, StorageError> {
        let made = self
            .link
            .get_or_try_init(|| async {
                match &self.target {
                    Target::Single(client) => {
                        let config = ConnectionManagerConfig::new()
                            .set_connection_timeout(Some(self.timeout))
                            .set_response_timeout(Some(self.timeout))
                            .set_number_of_retries(1)
                            .set_max_delay(self.timeout);
                        client
                            .get_connection_manager_with_config(config)
                            .await
                            .map(Link::Single)
                    }
                    Target::Cluster(client) => {
                        client.get_async_connection().await.map(Link::Cluster)
                    }
                }
                .map_err(crate::backend)
            })
            .await?;
        Ok(made.clone())
    }

    /// A link of its own for a blocking read of up to `block`.
    pub async fn dedicated(&self, block: Duration) -> Result<Link, StorageError> {
        match &self.target {
            Target::Single(client) => {
                let config = AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(self.timeout))
                    .set_response_timeout(Some(block + self.timeout));
                client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await
                    .map(Link::Direct)
                    .map_err(crate::backend)
            }
            Target::Cluster(client) => {
                let config = redis::cluster::ClusterConfig::new()
                    .set_connection_timeout(self.timeout)
                    .set_response_timeout(block + self.timeout);
                client
                    .get_async_connection_with_config(config)
                    .await
                    .map(Link::Cluster)
                    .map_err(crate::backend)
            }
        }
    }
}

/// TLS that trusts the CA in `pem` alone (with ring, the gateway's one
/// crypto provider, as the process default if none is set yet).
fn trusting(pem: &[u8]) -> redis::TlsCertificates {
    let _ = rustls::crypto::ring::default_provider().install_default();
    redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(pem.to_vec()),
    }
}

/// A URL without its password, for messages.
fn redacted(url: &str) -> String {
    match (url.split_once("://"), url.rsplit_once('@')) {
        (Some((scheme, _)), Some((_, host))) => format!("{scheme}://…@{host}"),
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_are_not_shown() {
        assert_eq!(
            super::redacted("redis://user:secret@host:6379/0"),
            "redis://…@host:6379/0"
        );
        assert_eq!(super::redacted("redis://host:6379"), "redis://host:6379");
    }

    #[test]
    fn a_cluster_url_names_its_nodes() {
        assert_eq!(
            super::cluster_nodes("redis+cluster://:pw@a:1,b:2/").unwrap(),
            vec!["redis://:pw@a:1", "redis://:pw@b:2"]
        );
        assert_eq!(
            super::cluster_nodes("rediss+cluster://a:1").unwrap(),
            vec!["rediss://a:1"]
        );
        assert!(super::cluster_nodes("redis+cluster://").is_none());
    }
}
