//! Resources and prompts, enforced like tools ([`super::data_rules`]):
//! `resources/read` and `prompts/get` need the capability of the first
//! rule naming the (normalized) URI or the prompt, charged its cost; the
//! lists show only what the caller's credential could read; a
//! subscription is the caller's own ([`super::caller_state`]), and so is
//! its log level. Served by the first ready upstream declaring the family,
//! as before.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::call::Routed;
use super::caller_state::LogLevel;
use super::cancel::Cancel;
use super::data_rules::{normalize_uri, template_sample, DataKind, DataPolicy, DataRules};
use super::message::{Id, Reply};
use super::proxy::{call_denied, invalid_params, upstream_error, Caller, McpProxy};
use super::scrub;
use super::upstream::Upstream;
use dgw_core::caller::HolderDigest;
use dgw_front_jsonrpc::{denial_error, RpcError, METHOD_NOT_FOUND};

/// Who is asking for a list, as far as filtering goes.
pub(super) enum Viewer {
    /// No credential: only what open rules name.
    Nobody,
    /// A credential whose protocol cannot say what it grants: whatever a
    /// rule names (each read is still checked).
    Unknown,
    /// What the credential grants.
    Granted(Vec<delegateos::Capability>),
}

impl Viewer {
    pub(super) fn sees(&self, policy: &DataPolicy, resource: &str) -> bool {
        match (self, policy) {
            (_, DataPolicy::Open) => true,
            (Viewer::Nobody, _) => false,
            (Viewer::Unknown, _) => true,
            (Viewer::Granted(caps), p) => p.offered_to(Some(caps), resource),
        }
    }
}

/// A list method: the array in its result, the field naming each entry,
/// and how that name becomes what the rules match.
struct ListShape {
    array: &'static str,
    field: &'static str,
    kind: DataKind,
}

fn list_shape(method: &str) -> Option<ListShape> {
    let (array, field, kind) = match method {
        "resources/list" => ("resources", "uri", DataKind::Resource),
        "resources/templates/list" => ("resourceTemplates", "uriTemplate", DataKind::Resource),
        "prompts/list" => ("prompts", "name", DataKind::Prompt),
        _ => return None,
    };
    Some(ListShape { array, field, kind })
}

/// The name rules and grants see for a listed entry's `value` (`None`:
/// never listed).
fn listed_name(method: &str, value: &str) -> Option<String> {
    match method {
        "resources/list" => normalize_uri(value).ok(),
        "resources/templates/list" => normalize_uri(&template_sample(value)).ok(),
        _ => Some(value.to_owned()),
    }
}

fn family_of(kind: DataKind) -> &'static str {
    match kind {
        DataKind::Resource => "resources",
        DataKind::Prompt => "prompts",
    }
}

impl McpProxy {
    /// The first ready upstream declaring `family`, as every method of it
    /// has been served.
    pub(super) fn family_upstream(
        &self,
        method: &str,
        family: &str,
    ) -> Result<Arc<Upstream>, RpcError> {
        self.upstreams()
            .iter()
            .find(|u| u.is_ready() && u.declares(family))
            .cloned()
            .ok_or_else(|| {
                RpcError::new(
                    METHOD_NOT_FOUND,
                    "method_not_found",
                    format!("method {method:?} not found: no upstream offers {family:?}"),
                )
            })
    }

    /// `resources/list`, `resources/templates/list`, `prompts/list`: the
    /// upstream's list with only the entries a rule names and the caller's
    /// credential could read (deny by default).
    pub(super) async fn list_data(
        &self,
        caller: Caller<'_>,
        method: &str,
        params: Option<Map<String, Value>>,
        cancel: &Cancel,
    ) -> Result<Reply, RpcError> {
        let shape = list_shape(method)
            .ok_or_else(|| invalid_params("invalid_params", format!("{method} is not a list")))?;
        let upstream = self.family_upstream(method, family_of(shape.kind))?;
        let mut params = params.unwrap_or_default();
        let (viewer, _) = self.viewer(caller, &mut params).await?;
        let reply = upstream
            .request(method, Some(params), cancel, None)
            .await
            .map_err(|e| upstream_error(&e))?;
        let Reply::Result(mut result) = reply else {
            return Ok(reply);
        };
        let rules = upstream.data_rules();
        filter_list(&mut result, method, &shape, &rules, &viewer);
        Ok(Reply::Result(result))
    }

    /// Who the caller is for filtering (its credential carried in
    /// `params` taken out of them), and its credential's digest.
    pub(super) async fn viewer(
        &self,
        caller: Caller<'_>,
        params: &mut Map<String, Value>,
    ) -> Result<(Viewer, Option<HolderDigest>), RpcError> {
        let in_params = self
            .carried(caller.headers, params)
            .await
            .map_err(|d| denial_error(&d))?;
        let Some(found) = self
            .presented(caller, in_params)
            .map_err(|d| denial_error(&d))?
        else {
            return Ok((Viewer::Nobody, None));
        };
        let holder = found.credential.holder();
        let viewer = match self.standing(&found).await.map_err(|d| denial_error(&d))? {
            None => Viewer::Unknown,
            Some(caps) => Viewer::Granted(caps),
        };
        Ok((viewer, Some(holder)))
    }

    /// `resources/read`, `prompts/get`: the resource (normalized, and
    /// forwarded so) or prompt its rule names, the pipeline's decision on
    /// the rule's capability, then the upstream, charged as a tool call is.
    pub(super) async fn get_data(
        &self,
        caller: Caller<'_>,
        id: &Id,
        method: &'static str,
        params: Option<Map<String, Value>>,
        cancel: &Cancel,
    ) -> Result<Reply, RpcError> {
        let kind = match method {
            "resources/read" | "resources/subscribe" => DataKind::Resource,
            _ => DataKind::Prompt,
        };
        let params = params
            .ok_or_else(|| invalid_params("invalid_params", format!("{method} needs params")))?;
        let (mut params, found) = self.call_credential(caller, id, method, params).await?;
        let (routed, name) = self.route_data(method, kind, &mut params)?;
        let what = match kind {
            DataKind::Resource => format!("resource {name:?}"),
            DataKind::Prompt => format!("prompt {name:?}"),
        };
        let granted = self.grant(caller, &routed, found, &what).await?;
        if method == "resources/subscribe" {
            caller
                .session
                .state
                .subscribe(&name)
                .map_err(|e| invalid_params("too_many_subscriptions", e.to_string()))?;
            if !self
                .subscriptions
                .hold(&routed.upstream.name, &name, &caller.session.state)
            {
                // The upstream sends this resource's updates already.
                return Ok(Reply::Result(json!({})));
            }
        }
        let mut took = None;
        let reply = self
            .forward_granted(id, cancel, caller, params, &routed, granted, &mut took)
            .await?;
        Ok(scrub::scrub_reply(reply, &[name]))
    }

    /// `resources/unsubscribe`: the caller's own subscription ends; the
    /// upstream is told only when no other caller holds one to it. Needs no
    /// grant: it only takes something away.
    pub(super) async fn unsubscribe(
        &self,
        caller: Caller<'_>,
        params: Option<Map<String, Value>>,
        cancel: &Cancel,
    ) -> Result<Reply, RpcError> {
        let method = "resources/unsubscribe";
        let upstream = self.family_upstream(method, "resources")?;
        let uri = params
            .as_ref()
            .and_then(|p| p.get("uri"))
            .and_then(Value::as_str)
            .ok_or_else(|| invalid_params("invalid_params", "params.uri must be a string"))?;
        let uri = normalize_uri(uri).map_err(|e| invalid_resource(&format!("resource URI {e}")))?;
        if !caller.session.state.unsubscribe(&uri)
            || !self
                .subscriptions
                .release(&upstream.name, &uri, &caller.session.state)
        {
            return Ok(Reply::Result(json!({})));
        }
        let mut forwarded = Map::new();
        forwarded.insert("uri".into(), json!(uri));
        upstream
            .request(method, Some(forwarded), cancel, None)
            .await
            .map_err(|e| upstream_error(&e))
    }

    /// `logging/setLevel` on a session: this caller's level, kept by dgw
    /// (which filters the log messages it relays to this caller); the
    /// upstream is not told, so no caller's level is another's.
    pub(super) fn set_level(
        &self,
        caller: Caller<'_>,
        params: Option<Map<String, Value>>,
    ) -> Result<Reply, RpcError> {
        self.family_upstream("logging/setLevel", "logging")?;
        let level = params
            .as_ref()
            .and_then(|p| p.get("level"))
            .and_then(Value::as_str)
            .and_then(LogLevel::parse)
            .ok_or_else(|| {
                invalid_params(
                    "invalid_params",
                    format!("params.level must be one of {}", LogLevel::NAMES.join(", ")),
                )
            })?;
        caller.session.state.set_level(level);
        Ok(Reply::Result(json!({})))
    }

    /// The upstream and rule a resource or prompt request names, `params`
    /// rewritten to the normalized URI that is checked; and that name.
    fn route_data(
        &self,
        method: &'static str,
        kind: DataKind,
        params: &mut Map<String, Value>,
    ) -> Result<(Routed, String), RpcError> {
        let field = match kind {
            DataKind::Resource => "uri",
            DataKind::Prompt => "name",
        };
        let given = params.get(field).and_then(Value::as_str).ok_or_else(|| {
            invalid_params("invalid_params", format!("params.{field} must be a string"))
        })?;
        let name = match kind {
            DataKind::Resource => {
                normalize_uri(given).map_err(|e| invalid_resource(&format!("resource URI {e}")))?
            }
            DataKind::Prompt => given.to_owned(),
        };
        let upstream = self.family_upstream(method, family_of(kind))?;
        let rules = upstream.data_rules();
        let Some(policy) = rules.policy_for(kind, &name) else {
            let (kind_name, what) = match kind {
                DataKind::Resource => ("resource_not_mapped", "resource"),
                DataKind::Prompt => ("prompt_not_mapped", "prompt"),
            };
            let mut e = call_denied(
                kind_name,
                format!(
                    "{what} {name:?} is named by no rule of {} on upstream {}, so it is denied",
                    kind.table(),
                    upstream.name
                ),
            );
            e.data[field] = json!(name);
            return Err(e);
        };
        params.insert(field.into(), json!(name));
        let action = match policy {
            DataPolicy::Open => None,
            DataPolicy::Enforced { action, .. } => Some(action.clone()),
        };
        // Subscribing reads nothing yet: checked, not charged.
        let cost = match method {
            "resources/subscribe" => 0,
            _ => policy.cost_microcents(),
        };
        let routed = Routed {
            requests: policy.request(&name).into_iter().collect(),
            name: name.clone(),
            method,
            upstream,
            action,
            cost,
            presenting: None,
        };
        Ok((routed, name))
    }
}

fn invalid_resource(detail: &str) -> RpcError {
    call_denied("invalid_resource", detail.to_owned())
}

/// Keeps the entries of a list result the viewer may see under `rules`.
fn filter_list(
    result: &mut Value,
    method: &str,
    shape: &ListShape,
    rules: &DataRules,
    viewer: &Viewer,
) {
    let Some(Value::Array(entries)) = result.get_mut(shape.array) else {
        return;
    };
    entries.retain(|entry| {
        let Some(name) = entry
            .get(shape.field)
            .and_then(Value::as_str)
            .and_then(|v| listed_name(method, v))
        else {
            return false;
        };
        rules
            .policy_for(shape.kind, &name)
            .is_some_and(|p| viewer.sees(p, &name))
    });
}
