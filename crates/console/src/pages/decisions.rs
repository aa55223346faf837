//! Decisions: live from the decision stream (what this gateway decided
//! since it started, the newest first; the page refreshes itself while
//! "live" is on) and searchable back as far as the audit log keeps them,
//! filtered by outcome, denial reason, protocol, front, tool, tenant,
//! delegation and request (the tool's capability: namespace, action,
//! resource). Each opens to its full record, its audit entry and its
//! request ID. Records written before decisions carried their protocol,
//! front and tool have none: a filter on those leaves them out.

use dgw_core::gatekeeper::DecisionEvent;
use dgw_front_http::UiAnswer;
use maud::{html, Markup};
use serde_json::{json, Value};

use crate::answer::page;
use crate::form::{encode, Form};
use crate::layout;
use crate::pages::when;
use crate::session::Session;
use crate::watch::Watch;
use crate::Parts;

/// Rows shown at most.
const ROWS: usize = 200;

/// The fronts a decision can come in on (`dgw_core::request_id::front`).
const FRONTS: &[&str] = &["mcp", "jsonrpc", "grpc", "http"];

/// A decision as the audit trail records it (the live ones made so).
fn record_of(e: &DecisionEvent) -> Value {
    let mut out = Vec::new();
    if dgw_core::trail::Record::write_json(e, &mut out).is_err() {
        return Value::Null;
    }
    serde_json::from_slice(&out).unwrap_or(Value::Null)
}

/// The filters, as the form gives them.
struct Filter<'a> {
    outcome: Option<&'a str>,
    reason: Option<&'a str>,
    protocol: Option<&'a str>,
    front: Option<&'a str>,
    tool: Option<&'a str>,
    tenant: Option<&'a str>,
    delegation: Option<&'a str>,
    request: Option<&'a str>,
    request_id: Option<&'a str>,
}

impl<'a> Filter<'a> {
    fn of(q: &'a Form) -> Self {
        Self {
            outcome: q.get("outcome").filter(|o| *o != "any"),
            reason: q.get("reason"),
            protocol: q.get("protocol"),
            front: q.get("front").filter(|f| *f != "any"),
            tool: q.get("tool"),
            tenant: q.get("tenant"),
            delegation: q.get("delegation"),
            request: q.get("request"),
            request_id: q.get("request_id"),
        }
    }

    fn keeps(&self, r: &Value) -> bool {
        let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("");
        let allowed = r.get("allowed").and_then(Value::as_bool).unwrap_or(false);
        let request = r
            .get("request")
            .map(|q| {
                format!(
                    "{}:{} {}",
                    q.get("namespace").and_then(Value::as_str).unwrap_or(""),
                    q.get("action").and_then(Value::as_str).unwrap_or(""),
                    q.get("resource").and_then(Value::as_str).unwrap_or("")
                )
            })
            .unwrap_or_default();
        let chain = r.get("chain").and_then(Value::as_array);
        self.outcome.is_none_or(|o| (o == "allowed") == allowed)
            && self.reason.is_none_or(|x| s("denialType") == x)
            && self.protocol.is_none_or(|x| s("protocol") == x)
            && self.front.is_none_or(|x| s("front") == x)
            && self.tool.is_none_or(|x| s("tool") == x)
            && self.tenant.is_none_or(|x| s("tenant") == x)
            && self.request_id.is_none_or(|x| s("requestId") == x)
            && self
                .delegation
                .is_none_or(|x| chain.is_some_and(|c| c.iter().any(|d| d.as_str() == Some(x))))
            && self.request.is_none_or(|x| request.contains(x))
    }
}

/// One audit-log decision: the record and where it sits in the chain.
struct Logged {
    record: Value,
    seq: u64,
    hash: String,
    at: String,
}

/// The audit log's decisions that `filter` keeps, newest first, and the
/// time of the log's oldest record (how far back it reaches).
async fn from_log(parts: &Parts, filter: &Filter<'_>) -> Option<(Vec<Logged>, Option<String>)> {
    let log = parts.audit_log.clone()?;
    let lines = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        dgw_audit_log::export(&log.dir, None, None, &mut out).map(|_| out)
    })
    .await
    .ok()?
    .ok()?;
    let mut oldest = None;
    let mut found = Vec::new();
    for line in lines.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let Ok(v) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        let at = v.get("at").and_then(Value::as_str).unwrap_or("").to_owned();
        if oldest.is_none() {
            oldest = Some(at.clone());
        }
        let Some(event) = v.get("event") else {
            continue;
        };
        if event.get("event").and_then(Value::as_str) != Some("decision") || !filter.keeps(event) {
            continue;
        }
        found.push(Logged {
            record: event.clone(),
            seq: v.get("seq").and_then(Value::as_u64).unwrap_or(0),
            hash: v
                .get("hash")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            at,
        });
    }
    found.reverse();
    found.truncate(ROWS);
    Some((found, oldest))
}

fn row(r: &Value, at: &str) -> Markup {
    let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let allowed = r.get("allowed").and_then(Value::as_bool).unwrap_or(false);
    let request = r.get("request").cloned().unwrap_or(json!({}));
    let rs = |k: &str| {
        request
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let leaf = r
        .get("chain")
        .and_then(Value::as_array)
        .and_then(|c| c.last())
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let request_id = s("requestId");
    let or_dash = |v: String| if v.is_empty() { "—".to_owned() } else { v };
    html! {
        tr {
            td { (at) }
            td { @if allowed { span.allowed { "allowed" } } @else { span.denied { "denied" } } }
            td { (s("denialType")) }
            td { (or_dash(s("protocol"))) }
            td { (or_dash(s("front"))) }
            td { code { (or_dash(s("tool"))) } }
            td { (s("tenant")) }
            td { code { (leaf) } }
            td { (rs("namespace")) ":" (rs("action")) " " code { (rs("resource")) } }
            td {
                @if request_id.is_empty() { "—" } @else {
                    a href={ "/ui/decisions?request_id=" (encode(&request_id)) } { "Open " span.sr { "decision of request " } code { (request_id) } }
                }
            }
        }
    }
}

fn filters(q: &Form) -> Markup {
    let v = |k: &str| q.get(k).unwrap_or("").to_owned();
    let outcome = v("outcome");
    let front = v("front");
    html! {
        form.filters method="get" action="/ui/decisions" aria-label="Filter decisions" {
            label { "Outcome "
                select name="outcome" {
                    option value="any" selected[outcome.is_empty() || outcome == "any"] { "any" }
                    option value="allowed" selected[outcome == "allowed"] { "allowed" }
                    option value="denied" selected[outcome == "denied"] { "denied" }
                }
            }
            label { "Denial reason " input type="text" name="reason" value=(v("reason")); }
            label { "Protocol " input type="text" name="protocol" value=(v("protocol")); }
            label { "Front "
                select name="front" {
                    option value="any" selected[front.is_empty() || front == "any"] { "any" }
                    @for f in FRONTS {
                        option value=(f) selected[front == *f] { (f) }
                    }
                }
            }
            label { "Tool " input type="text" name="tool" value=(v("tool")); }
            label { "Tenant " input type="text" name="tenant" value=(v("tenant")); }
            label { "Delegation " input type="text" name="delegation" value=(v("delegation")); }
            label { "Request (tool capability) " input type="text" name="request" value=(v("request")); }
            label { input type="checkbox" name="live" value="1" checked[q.get("live").is_some()] id="live"; " Live" }
            button type="submit" { "Filter" }
        }
    }
}

/// The page.
pub async fn show(parts: &Parts, watch: &Watch, s: &Session, q: &Form) -> UiAnswer {
    let filter = Filter::of(q);
    let live: Vec<Value> = watch
        .live()
        .iter()
        .map(|e| record_of(e))
        .filter(|r| filter.keeps(r))
        .take(ROWS)
        .collect();
    let logged = from_log(parts, &filter).await;
    let detail = filter.request_id.map(|id| {
        let in_log: Vec<&Logged> = logged
            .as_ref()
            .map(|(l, _)| l.iter().filter(|x| x.record.get("requestId").and_then(Value::as_str) == Some(id)).collect())
            .unwrap_or_default();
        let live_one = live.iter().find(|r| r.get("requestId").and_then(Value::as_str) == Some(id));
        html! {
            section.detail aria-label="Decision record" {
                h2 { "Request " code { (id) } }
                @if let Some(r) = live_one.or(in_log.first().map(|l| &l.record)) {
                    h3 { "Record" }
                    pre { (serde_json::to_string_pretty(r).unwrap_or_default()) }
                }
                h3 { "Audit entry" }
                @if in_log.is_empty() {
                    p { "Not in the audit log" @if parts.audit_log.is_none() { " (this gateway keeps none: [audit] is off)" } "." }
                }
                @for l in &in_log {
                    dl.audit-entry {
                        dt { "Sequence" } dd { (l.seq) }
                        dt { "Recorded" } dd { (l.at) }
                        dt { "Hash" } dd { code { (l.hash) } }
                    }
                }
            }
        }
    });
    let content = html! {
        (filters(q))
        @if let Some(d) = detail { (d) }
        section aria-labelledby="live-h" {
            h2 #live-h { "Live (this gateway, since it started)" }
            table #live-table {
                caption.sr { "Live decisions, newest first" }
                (head())
                tbody { @for r in &live { (row(r, &r.get("at").and_then(Value::as_u64).map(when).unwrap_or_default())) } }
            }
            @if live.is_empty() { p { "None yet." } }
        }
        section aria-labelledby="log-h" {
            h2 #log-h { "Audit log" }
            @match &logged {
                None => p { "This gateway keeps no audit log ([audit] is off): only live decisions are searchable." },
                Some((rows, oldest)) => {
                    p { "The audit log reaches back to " (oldest.clone().unwrap_or_else(|| "its start".into())) "." }
                    table #log-table {
                        caption.sr { "Decisions in the audit log, newest first" }
                        (head())
                        tbody { @for l in rows { (row(&l.record, &l.at)) } }
                    }
                }
            }
        }
    };
    page(200, layout::frame(s, "/ui/decisions", "Decisions", content))
}

fn head() -> Markup {
    html! {
        thead { tr {
            th scope="col" { "When" } th scope="col" { "Outcome" } th scope="col" { "Reason" }
            th scope="col" { "Protocol" } th scope="col" { "Front" } th scope="col" { "Tool" }
            th scope="col" { "Tenant" } th scope="col" { "Delegation" } th scope="col" { "Request" } th scope="col" { "Request ID" }
        } }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_filter_keeps_only_what_it_names() {
        let denied = json!({"allowed": false, "denialType": "revoked", "tenant": "acme",
            "chain": ["del_000000000001", "del_000000000002"], "requestId": "r1",
            "protocol": "delegateos", "front": "mcp", "tool": "echo",
            "request": {"namespace": "demo", "action": "echo", "resource": "/text"}});
        // As recorded before decisions carried protocol, front and tool.
        let allowed = json!({"allowed": true, "tenant": "other", "chain": [], "requestId": "r2"});
        let keeps = |q: &str| {
            let form = Form::query(Some(q));
            let f = Filter::of(&form);
            (f.keeps(&denied), f.keeps(&allowed))
        };
        assert_eq!(keeps(""), (true, true));
        assert_eq!(keeps("outcome=any"), (true, true));
        assert_eq!(keeps("outcome=denied"), (true, false));
        assert_eq!(keeps("outcome=allowed"), (false, true));
        assert_eq!(keeps("reason=revoked"), (true, false));
        assert_eq!(keeps("reason=budget_exceeded"), (false, false));
        assert_eq!(keeps("tenant=other"), (false, true));
        assert_eq!(keeps("delegation=del_000000000002"), (true, false));
        assert_eq!(keeps("request=demo%3Aecho"), (true, false));
        assert_eq!(keeps("request_id=r2"), (false, true));
        assert_eq!(keeps("protocol=delegateos"), (true, false));
        assert_eq!(keeps("protocol=toy"), (false, false));
        assert_eq!(keeps("front=mcp"), (true, false));
        assert_eq!(keeps("front=any"), (true, true));
        assert_eq!(keeps("front=grpc"), (false, false));
        assert_eq!(keeps("tool=echo"), (true, false));
        // A tool is matched whole, not as a part of another's name.
        assert_eq!(keeps("tool=ech"), (false, false));
    }
}
