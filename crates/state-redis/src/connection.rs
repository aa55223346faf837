//! One pooled, reconnecting connection to Redis (the `redis` crate's
//! connection manager: multiplexed, so concurrent commands pipeline on it),
//! made on first use, every command within the configured timeout; and
//! dedicated connections for blocking reads of the revocation stream.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::AsyncConnectionConfig;
use tokio::sync::OnceCell;

use dgw_core::state::StorageError;

use crate::RedisSettings;

/// The shared connection.
#[derive(Clone)]
pub struct Connection {
    client: redis::Client,
    manager: Arc<OnceCell<ConnectionManager>>,
    timeout: Duration,
}

impl Connection {
    /// A connection to `settings.url`, not yet made.
    pub fn new(settings: &RedisSettings) -> Result<Self, StorageError> {
        if settings.url.starts_with("redis+cluster://") {
            return Err(StorageError::Backend(
                "redis: Redis Cluster (redis+cluster://) is not supported yet; use redis:// or rediss://".into(),
            ));
        }
        let client = redis::Client::open(settings.url.as_str()).map_err(|e| {
            StorageError::Backend(format!("redis: {}: {e}", redacted(&settings.url)))
        })?;
        Ok(Self {
            client,
            manager: Arc::new(OnceCell::new()),
            timeout: settings.timeout,
        })
    }

    /// The multiplexed connection (made now if it is not yet).
    pub async fn get(&self) -> Result<ConnectionManager, StorageError> {
        let made = self
            .manager
            .get_or_try_init(|| async {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(self.timeout))
                    .set_response_timeout(Some(self.timeout))
                    .set_number_of_retries(1)
                    .set_max_delay(self.timeout);
                self.client
                    .get_connection_manager_with_config(config)
                    .await
                    .map_err(crate::backend)
            })
            .await?;
        Ok(made.clone())
    }

    /// A connection of its own for a blocking read of up to `block`.
    pub async fn dedicated(&self, block: Duration) -> Result<MultiplexedConnection, StorageError> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(block + self.timeout));
        self.client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(crate::backend)
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
}
