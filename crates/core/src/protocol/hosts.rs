//! A protocol's hosting job: the JSON-RPC methods, HTTP paths and MCP
//! tools it serves itself, besides the pipeline.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::{HttpAnswer, HttpRequest, MethodAnswer, MethodResult, ProtocolId, Translation};
use crate::caller::Caller;
use crate::error::GateError;

/// What a protocol serves itself; each part it lacks stays empty.
#[async_trait]
pub trait Hosts: Send + Sync {
    /// The JSON-RPC methods it serves besides the pipeline (its revocations).
    fn methods(&self) -> &'static [&'static str] {
        &[]
    }

    /// Serves one of [`Hosts::methods`].
    async fn call_method(&self, _caller: &Caller, method: &str, _params: Value) -> MethodResult {
        Err(GateError::InvalidParams(format!("{method} is not served")))
    }

    /// Answers one of [`Hosts::methods`], as the JSON-RPC front asks:
    /// [`Hosts::call_method`]'s result (params absent: `{}`), unless the
    /// protocol's methods refuse or deny of their own.
    async fn answer_method(
        &self,
        caller: &Caller,
        method: &str,
        params: Option<Value>,
    ) -> Result<MethodAnswer, GateError> {
        let params = params.unwrap_or_else(|| Value::Object(Default::default()));
        self.call_method(caller, method, params)
            .await
            .map(MethodAnswer::Done)
    }

    /// The names its specification gives methods of the gateway's own, as
    /// (its name, the gateway's): DelegateOS's settle is `dgw/settle`. The
    /// front serves them as the gateway's method.
    fn aliases(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    /// The HTTP paths it serves itself (each a prefix of a path segment,
    /// such as `/<protocol>/v0`), besides the gateway's own.
    fn http_paths(&self) -> &'static [&'static str] {
        &[]
    }

    /// Serves a request to one of [`Hosts::http_paths`].
    async fn serve_http(&self, _request: HttpRequest<'_>) -> HttpAnswer {
        HttpAnswer::not_found()
    }

    /// MCP tools it serves itself beside the upstreams' (an identity
    /// card), as `tools/list` gives them. They are open: anyone may call
    /// them, so they reveal only what is public. An upstream's tool of the
    /// same name is not offered.
    fn tools(&self) -> Vec<Value> {
        Vec::new()
    }

    /// Calls one of [`Hosts::tools`]: the MCP `tools/call` result.
    async fn call_tool(&self, name: &str, _arguments: &Value) -> Result<Value, Translation> {
        Err(Translation::Invalid {
            reason: "unknown_tool",
            detail: format!("{name} is not served"),
        })
    }
}

/// A protocol's hosting job with its name, as the registry hands it to a
/// front (which labels what it counts by the name).
#[derive(Clone)]
pub struct Hosted {
    pub id: ProtocolId,
    pub hosts: Arc<dyn Hosts>,
}

impl std::ops::Deref for Hosted {
    type Target = dyn Hosts;
    fn deref(&self) -> &(dyn Hosts + 'static) {
        self.hosts.as_ref()
    }
}
