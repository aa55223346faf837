//! OpenTelemetry traces over OTLP/HTTP (`[telemetry]`, docs/operations.md,
//! "Traces"): the spans under [`TRACE_TARGET`] (a request's, and one per
//! pipeline stage) become OTLP spans, batched and POSTed as protobuf with
//! dgw's own hyper + rustls client. The queue is bounded: when the
//! collector is slow or gone, spans are dropped, a call never waits.
//! Off unless `otlp_endpoint` is set: then nothing here runs and no layer
//! is installed.
//!
//! [`TRACE_TARGET`]: dgw_core::telemetry::TRACE_TARGET

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracer, SdkTracerProvider,
};
use opentelemetry_sdk::Resource;

use crate::config::TelemetryConfig;

/// The most of a collector's answer read.
const MAX_ANSWER_BYTES: usize = 64 << 10;

/// Why traces could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TracesError {
    #[error("telemetry.otlp_endpoint: HTTPS is not available: {0}")]
    Tls(String),
    #[error("telemetry: the OTLP exporter cannot be built: {0}")]
    Exporter(String),
}

/// The running exporter; [`Traces::shutdown`] sends what is queued.
pub struct Traces {
    provider: SdkTracerProvider,
}

impl Traces {
    /// Sets up the exporter toward `config.endpoint`, its requests run on
    /// `runtime`.
    pub fn start(
        config: &TelemetryConfig,
        runtime: tokio::runtime::Handle,
    ) -> Result<Self, TracesError> {
        let client = dgw_net::tls::http_client(None, Some(config.export_timeout))
            .map_err(TracesError::Tls)?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(Exporting {
                client,
                runtime,
                timeout: config.export_timeout,
            })
            .with_endpoint(config.endpoint.clone())
            .with_protocol(Protocol::HttpBinary)
            .with_timeout(config.export_timeout)
            .build()
            .map_err(|e| TracesError::Exporter(e.to_string()))?;
        let batch = BatchSpanProcessor::builder(exporter)
            .with_batch_config(
                BatchConfigBuilder::default()
                    .with_max_queue_size(config.max_queue)
                    .build(),
            )
            .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(batch)
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                config.sampling_ratio,
            ))))
            .with_resource(
                Resource::builder_empty()
                    .with_service_name(config.service_name.clone())
                    .build(),
            )
            .build();
        Ok(Self { provider })
    }

    /// The tracer the logs' layer feeds.
    pub fn tracer(&self) -> SdkTracer {
        self.provider.tracer("dgw")
    }

    /// Exports what is queued (within the export timeout) and stops. Call
    /// it off the runtime's threads, while the runtime still runs.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!(error = %e, "traces: the last spans may not have been exported");
        }
    }
}

/// The exporter's HTTP client: dgw's hyper + rustls client, each request
/// run on the gateway's runtime (the batch processor exports from a thread
/// of its own), bounded in time and in what it reads back.
struct Exporting {
    client: dgw_net::tls::HttpClient,
    runtime: tokio::runtime::Handle,
    timeout: Duration,
}

impl std::fmt::Debug for Exporting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporting")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

type HttpError = opentelemetry_http::HttpError;

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for Exporting {
    async fn send_bytes(
        &self,
        request: hyper::Request<Bytes>,
    ) -> Result<hyper::Response<Bytes>, HttpError> {
        let (client, timeout) = (self.client.clone(), self.timeout);
        let (parts, body) = request.into_parts();
        let request = hyper::Request::from_parts(parts, Full::new(body));
        let exchange = async move {
            let response = client.request(request).await?;
            let (parts, body) = response.into_parts();
            let body = Limited::new(body, MAX_ANSWER_BYTES)
                .collect()
                .await?
                .to_bytes();
            Ok::<_, HttpError>(hyper::Response::from_parts(parts, body))
        };
        let answer = self
            .runtime
            .spawn(async move {
                tokio::time::timeout(timeout, exchange)
                    .await
                    .unwrap_or_else(|_| Err(format!("no answer within {timeout:?}").into()))
            })
            .await
            .map_err(|e| HttpError::from(e.to_string()))
            .and_then(|a| a);
        match &answer {
            Err(e) => tracing::warn!(error = %e, "traces: exporting spans failed"),
            Ok(r) if !r.status().is_success() => {
                tracing::warn!(
                    status = r.status().as_u16(),
                    "traces: the collector refused spans"
                )
            }
            Ok(_) => {}
        }
        answer
    }
}
