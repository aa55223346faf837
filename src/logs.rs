//! Where and how `dgw` writes its logs, and the level reload changes.

use std::sync::OnceLock;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter, Registry};

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// The installed filter, replaced by [`set_level`].
static FILTER: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

/// Why a log level was refused.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not a log filter (`info`, `warn,dgw=debug`, …): {1}")]
pub struct LevelError(String, String);

/// A filter from `directives` (`RUST_LOG` syntax), checked.
pub fn parse_level(directives: &str) -> Result<EnvFilter, LevelError> {
    EnvFilter::try_new(directives).map_err(|e| LevelError(directives.to_owned(), e.to_string()))
}

/// Sends logs to standard error at `info`, or at what `RUST_LOG` says.
pub fn init_logs(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let (filter, handle) = reload::Layer::new(filter);
    use std::io::IsTerminal;
    let ansi = std::io::stderr().is_terminal();
    let registry = tracing_subscriber::registry().with(filter);
    let installed = match format {
        LogFormat::Text => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(ansi)
                    .with_writer(std::io::stderr),
            )
            .try_init(),
        LogFormat::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_writer(std::io::stderr),
            )
            .try_init(),
    };
    if installed.is_ok() {
        let _ = FILTER.set(handle);
    }
}

/// Logs at `directives` (the config's `[log] level`) from now on, unless
/// `RUST_LOG` is set: the environment wins, at start and on every reload.
/// `Ok(false)`: not applied (`RUST_LOG`, or no logger installed).
pub fn set_level(directives: &str) -> Result<bool, LevelError> {
    let filter = parse_level(directives)?;
    if std::env::var_os(EnvFilter::DEFAULT_ENV).is_some() {
        return Ok(false);
    }
    let Some(handle) = FILTER.get() else {
        return Ok(false);
    };
    Ok(handle.reload(filter).is_ok())
}
