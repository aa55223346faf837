//! Upstreams and protocols: each MCP upstream with its state, its tools as
//! it listed them (hostile text: shown, never interpreted) and the rule
//! each maps to; then each protocol's own panel, from its registration.

use dgw_front_http::UiAnswer;
use dgw_front_mcp::tools::{ResourceSource, ToolPolicy};
use maud::html;
use serde_json::Value;

use crate::answer::page;
use crate::layout;
use crate::session::Session;
use crate::Parts;

fn mapping(policy: Option<&ToolPolicy>) -> String {
    match policy {
        None => "no rule: not offered".to_owned(),
        Some(ToolPolicy::Open) => "open (no credential, not charged)".to_owned(),
        Some(ToolPolicy::Enforced {
            namespace,
            action,
            resource,
            cost_microcents,
            ..
        }) => {
            let resource = match resource {
                ResourceSource::Fixed(r) => r.clone(),
                ResourceSource::Pointers(p) => format!("the resource at argument {}", p.join(", ")),
            };
            format!(
                "{namespace}:{action} on {resource}, {}",
                crate::pages::money(*cost_microcents)
            )
        }
    }
}

/// The page.
pub async fn show(parts: &Parts, s: &Session) -> UiAnswer {
    let upstreams = parts.proxy.upstreams();
    let mut panels = Vec::new();
    for (section_name, running) in &parts.modules {
        panels.push((section_name, running.panel().await));
    }
    let content = html! {
        h2 { "MCP upstreams" }
        @if upstreams.is_empty() { p { "No upstream is configured." } }
        @for up in upstreams.iter() {
            section.upstream aria-label={ "Upstream " (up.name) } {
                h3 { (up.name) " "
                    @if up.is_ready() { span.allowed { "ready" } } @else { span.denied { "not ready" } }
                    @if up.tools_stale() { " " span.denied { "tool list changed; re-listing" } }
                }
                @let rules = up.rules();
                @let tools = up.tools();
                table {
                    caption { "Tools of " (up.name) " as it listed them" }
                    thead { tr { th scope="col" { "Tool" } th scope="col" { "Mapping" } } }
                    tbody {
                        @for t in &tools {
                            @let name = t.get("name").and_then(Value::as_str).unwrap_or("");
                            tr {
                                td { code.toolname { (name) } }
                                td { (mapping(rules.policy_for(name))) }
                            }
                        }
                    }
                }
                @if tools.is_empty() { p { "It has listed no tools." } }
            }
        }
        h2 { "Protocols" }
        @for (section_name, panel) in &panels {
            @if let Some(panel) = panel {
                section.panel aria-label=(panel.title) {
                    h3 { (panel.title) }
                    dl {
                        @for (k, v) in &panel.rows { dt { (k) } dd { (v) } }
                    }
                }
            } @else {
                p.muted { code { "[" (section_name) "]" } ": no panel." }
            }
        }
    };
    page(
        200,
        layout::frame(s, "/ui/upstreams", "Upstreams & protocols", content),
    )
}
