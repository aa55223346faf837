//! Where and how `dgw` writes its logs, and the level reload changes.

use std::sync::OnceLock;

use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Layer as _, SubscriberExt};
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

/// Sends logs to standard error at `info`, or at what `RUST_LOG` says;
/// with `traces`, also the spans under
/// [`TRACE_TARGET`](dgw_core::telemetry::TRACE_TARGET) to its tracer (each
/// layer with its own filter: the logs' never enables those spans, the
/// tracer's sees nothing else). Without, no layer of traces exists.
pub fn init_logs(format: LogFormat, traces: Option<opentelemetry_sdk::trace::SdkTracer>) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let (filter, handle) = reload::Layer::new(filter);
    use std::io::IsTerminal;
    let ansi = std::io::stderr().is_terminal();
    let installed = match format {
        LogFormat::Text => tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(ansi)
                    .with_writer(std::io::stderr)
                    .with_filter(filter),
            )
            .with(traced(traces))
            .try_init(),
        LogFormat::Json => tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_writer(std::io::stderr)
                    .with_filter(filter),
            )
            .with(traced(traces))
            .try_init(),
    };
    if installed.is_ok() {
        let _ = FILTER.set(handle);
    }
}

/// The layer that feeds `tracer` the spans under the trace target only.
fn traced<S>(
    tracer: Option<opentelemetry_sdk::trace::SdkTracer>,
) -> Option<impl tracing_subscriber::Layer<S>>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    tracer.map(|tracer| {
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_location(false)
            .with_threads(false)
            .with_filter(
                Targets::new()
                    .with_target(dgw_core::telemetry::TRACE_TARGET, tracing::Level::TRACE),
            )
    })
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
