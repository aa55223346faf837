//! A request ID for every gRPC call (the caller's `x-request-id` metadata
//! when sane, else a new one): current in the call's task, its span in the
//! logs, and answered back in `x-request-id`. The call's connection is
//! busy until it answers, its request message included (a slow frame of a
//! call in flight is the call's, which `request_timeout` bounds, not the
//! connection's head deadline: `dgw_net::h2_frames`).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tonic::codegen::http;
use tracing::Instrument;

/// The layer the server is built with.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestIds;

impl<S> tower::Layer<S> for RequestIds {
    type Service = WithRequestId<S>;

    fn layer(&self, inner: S) -> Self::Service {
        WithRequestId(inner)
    }
}

/// A service whose calls run with a request ID.
#[derive(Debug, Clone)]
pub struct WithRequestId<S>(S);

type Answer<R, E> = Pin<Box<dyn Future<Output = Result<R, E>> + Send>>;

impl<S, B, RB> tower::Service<http::Request<B>> for WithRequestId<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Answer<S::Response, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let id = dgw_core::request_id::from_header(
            request.headers().get("x-request-id").map(|v| v.as_bytes()),
        );
        // At debug (`[log] level = "info,dgw::request=debug"`), as on HTTP.
        let span = tracing::debug_span!(target: "dgw::request", "request", request_id = %id);
        // Exported when traces are on, parented to the caller's trace
        // (`traceparent` metadata).
        let traced = dgw_net::trace_context::request_span(
            "grpc",
            request.headers().get("traceparent").map(|v| v.as_bytes()),
            request.headers().get("tracestate").map(|v| v.as_bytes()),
        );
        traced.record("request_id", &*id);
        let busy = request
            .extensions()
            .get::<dgw_net::connections::ConnInfo>()
            .map(dgw_net::connections::ConnInfo::busy);
        let answer = self.0.call(request);
        Box::pin(async move {
            let _busy = busy;
            let mut response = dgw_core::request_id::scope(
                id.clone(),
                "grpc",
                answer.instrument(traced).instrument(span),
            )
            .await?;
            if let Ok(value) = http::HeaderValue::from_str(&id) {
                response.headers_mut().insert("x-request-id", value);
            }
            Ok(response)
        })
    }
}
