//! Budgets: per tenant, the delegation tree (each root's delegations, and
//! below them the attenuations this gateway has seen decided), each node
//! with its spent / reserved / remaining from the budget store (the same
//! figures on every backend and replica), sorted by how soon it runs dry
//! at its spend rate over the last 15 minutes.

use std::collections::BTreeMap;

use dgw_core::budget::LevelReport;
use dgw_front_http::UiAnswer;
use maud::{html, Markup};

use crate::answer::page;
use crate::layout;
use crate::pages::money;
use crate::session::{unix_ms, Session};
use crate::watch::Watch;
use crate::Parts;

/// Leaf delegations whose chains are read for the tree.
const LEAVES_SHOWN: usize = 200;

/// A node of a tenant's tree.
#[derive(Debug, Clone)]
pub struct Node {
    pub level: LevelReport,
    /// Microcents per second over the window (`None`: not known yet).
    pub rate: Option<f64>,
    pub children: Vec<Node>,
}

impl Node {
    /// Seconds until it runs dry at its rate (`None`: not spending).
    pub fn dry_in(&self) -> Option<f64> {
        self.rate
            .filter(|r| *r > 0.0)
            .map(|r| self.level.remaining_microcents as f64 / r)
    }

    fn sort(&mut self) {
        for c in &mut self.children {
            c.sort();
        }
        self.children.sort_by(order);
    }
}

fn order(a: &Node, b: &Node) -> std::cmp::Ordering {
    match (a.dry_in(), b.dry_in()) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.level.delegation_id.cmp(&b.level.delegation_id),
    }
}

/// A tenant (or a protocol's budget root) and its top-level nodes.
pub struct Tree {
    pub name: String,
    pub nodes: Vec<Node>,
}

/// Reads the trees, sampling every node's spend.
pub async fn trees(parts: &Parts, watch: &Watch) -> Result<Vec<Tree>, String> {
    let budgets = parts.gate.budgets();
    let names: BTreeMap<String, String> = parts
        .gate
        .tenants()
        .into_iter()
        .map(|(name, root)| (root.to_string(), name))
        .collect();
    let now = unix_ms();
    let tops = budgets.top_levels().await.map_err(|e| e.to_string())?;
    // Top-level delegation ID → its root.
    let mut root_of: BTreeMap<String, String> = BTreeMap::new();
    let mut by_root: BTreeMap<String, Vec<Node>> = BTreeMap::new();
    for t in tops {
        root_of.insert(t.level.delegation_id.clone(), t.root.clone());
        let key = format!("{}/{}", t.root, t.level.delegation_id);
        by_root.entry(t.root.clone()).or_default().push(Node {
            rate: watch.sample(&key, t.level.spent_microcents, now),
            level: t.level,
            children: Vec::new(),
        });
    }
    for leaf in watch.leaves().into_iter().take(LEAVES_SHOWN) {
        let Ok(chains) = budgets.report(&leaf).await else {
            continue;
        };
        for chain in chains {
            let Some(first) = chain.first() else { continue };
            let Some(root) = root_of.get(&first.delegation_id).cloned() else {
                continue;
            };
            let Some(nodes) = by_root.get_mut(&root) else {
                continue;
            };
            let mut path = format!("{root}/{}", first.delegation_id);
            let Some(mut at) = nodes
                .iter_mut()
                .find(|n| n.level.delegation_id == first.delegation_id)
            else {
                continue;
            };
            for level in chain.iter().skip(1) {
                path.push('/');
                path.push_str(&level.delegation_id);
                let i = match at
                    .children
                    .iter()
                    .position(|c| c.level.delegation_id == level.delegation_id)
                {
                    Some(i) => i,
                    None => {
                        at.children.push(Node {
                            rate: watch.sample(&path, level.spent_microcents, now),
                            level: level.clone(),
                            children: Vec::new(),
                        });
                        at.children.len() - 1
                    }
                };
                at = &mut at.children[i];
            }
        }
    }
    let mut trees: Vec<Tree> = by_root
        .into_iter()
        .map(|(root, mut nodes)| {
            for n in &mut nodes {
                n.sort();
            }
            nodes.sort_by(order);
            Tree {
                name: names.get(&root).cloned().unwrap_or(root),
                nodes,
            }
        })
        .collect();
    trees.sort_by(|a, b| match (a.nodes.first(), b.nodes.first()) {
        (Some(x), Some(y)) => order(x, y),
        _ => a.name.cmp(&b.name),
    });
    Ok(trees)
}

/// The bar: spent, reserved and remaining as parts of the budget (an SVG,
/// so no inline style is needed under the CSP), described in words.
fn bar(l: &LevelReport) -> Markup {
    let total = l.budget_microcents.max(1) as f64;
    let spent = (l.spent_microcents as f64 / total * 100.0).min(100.0);
    let reserved = (l.reserved_microcents as f64 / total * 100.0).min(100.0 - spent);
    let words = format!(
        "{} spent, {} reserved, {} remaining of {}",
        money(l.spent_microcents),
        money(l.reserved_microcents),
        money(l.remaining_microcents),
        money(l.budget_microcents)
    );
    html! {
        svg.bar viewBox="0 0 100 6" preserveAspectRatio="none" role="img" aria-label=(words) {
            rect.remaining x="0" y="0" width="100" height="6" {}
            rect.spent x="0" y="0" width=(format!("{spent:.2}")) height="6" {}
            rect.reserved x=(format!("{spent:.2}")) y="0" width=(format!("{reserved:.2}")) height="6" {}
        }
        span.figures { (words) }
    }
}

fn dry(n: &Node) -> String {
    match (n.rate, n.dry_in()) {
        (_, Some(s)) if s < 60.0 => "runs dry in under a minute".to_owned(),
        (_, Some(s)) if s < 3600.0 => format!("runs dry in about {} min", (s / 60.0).round()),
        (_, Some(s)) if s < 172_800.0 => format!("runs dry in about {} h", (s / 3600.0).round()),
        (_, Some(s)) => format!("runs dry in about {} days", (s / 86400.0).round()),
        (Some(_), None) => "no spend in the last 15 minutes".to_owned(),
        (None, None) => "spend rate not known yet".to_owned(),
    }
}

fn node(n: &Node) -> Markup {
    html! {
        li.node {
            div.nodeline {
                code.id { (n.level.delegation_id) }
                (bar(&n.level))
                span.dry { (dry(n)) }
                a href={ "/ui/delegations?id=" (crate::form::encode(&n.level.delegation_id)) } { "Look up" span.sr { " delegation " (n.level.delegation_id) } }
            }
            @if !n.children.is_empty() {
                ul { @for c in &n.children { (node(c)) } }
            }
        }
    }
}

/// The page.
pub async fn show(parts: &Parts, watch: &Watch, s: &Session) -> UiAnswer {
    let content = match trees(parts, watch).await {
        Ok(trees) => html! {
            p.lede { "Spent, reserved and remaining at every level, soonest to run dry first (spend rate over the last 15 minutes). Attenuations appear once this gateway has decided a call under them." }
            @if trees.is_empty() { p { "No budget has been used yet." } }
            @for t in &trees {
                section.tenant aria-label={ "Tenant " (t.name) } {
                    h2 { "Tenant " (t.name) }
                    ul.tree { @for n in &t.nodes { (node(n)) } }
                }
            }
        },
        Err(e) => layout::notice("error", &format!("The budgets cannot be read: {e}")),
    };
    page(200, layout::frame(s, "/ui/budgets", "Budgets", content))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, remaining: u64, rate: Option<f64>) -> Node {
        Node {
            level: LevelReport {
                delegation_id: id.into(),
                budget_microcents: 1000,
                spent_microcents: 1000 - remaining,
                reserved_microcents: 0,
                remaining_microcents: remaining,
            },
            rate,
            children: Vec::new(),
        }
    }

    #[test]
    fn the_soonest_to_run_dry_comes_first_and_idle_ones_last() {
        let mut root = node("root", 1000, None);
        root.children = vec![
            node("idle", 10, Some(0.0)),
            node("unknown", 10, None),
            node("slow", 900, Some(1.0)),
            node("fast", 900, Some(100.0)),
        ];
        root.sort();
        let ids: Vec<_> = root
            .children
            .iter()
            .map(|c| c.level.delegation_id.as_str())
            .collect();
        assert_eq!(ids, ["fast", "slow", "idle", "unknown"]);
        assert_eq!(dry(&root.children[0]), "runs dry in under a minute");
        assert_eq!(dry(&root.children[2]), "no spend in the last 15 minutes");
    }
}
