//! Budgets: per tenant, the delegation tree (each root's delegations, and
//! below them every attenuation the budget store holds, read a page at a
//! time), each node with its spent / reserved / remaining from the store
//! (the same figures on every backend and replica), sorted by how soon it
//! runs dry at its spend rate over the last 15 minutes.

use std::collections::{BTreeMap, HashMap, VecDeque};

use dgw_core::budget::{BudgetKey, LevelReport, CHILDREN_PAGE};
use dgw_front_http::UiAnswer;
use maud::{html, Markup};

use crate::answer::page;
use crate::layout;
use crate::pages::money;
use crate::session::{unix_ms, Session};
use crate::watch::Watch;
use crate::Parts;

/// Nodes read for one view at most, the top levels included (the page
/// says when there are more).
pub const NODES_SHOWN: usize = 2000;

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

/// The trees, and whether [`NODES_SHOWN`] cut them short.
pub struct Trees {
    pub trees: Vec<Tree>,
    pub cut: bool,
}

/// Reads the trees from the budget store, breadth first (each node's
/// children a page at a time, [`NODES_SHOWN`] at most), sampling every
/// node's spend.
pub async fn trees(parts: &Parts, watch: &Watch) -> Result<Trees, String> {
    let budgets = parts.gate.budgets();
    let names: BTreeMap<String, String> = parts
        .gate
        .tenants()
        .into_iter()
        .map(|(name, root)| (root.to_string(), name))
        .collect();
    let now = unix_ms();
    let tops = budgets.top_levels().await.map_err(|e| e.to_string())?;
    let mut read = tops.len();
    let mut cut = false;
    // Each node read → the nodes directly below it.
    let mut below: HashMap<BudgetKey, Vec<(BudgetKey, LevelReport)>> = HashMap::new();
    let mut queue: VecDeque<BudgetKey> = tops
        .iter()
        .map(|t| BudgetKey::of_root(&t.root).child(&t.level.delegation_id))
        .collect();
    'walk: while let Some(parent) = queue.pop_front() {
        let mut after: Option<BudgetKey> = None;
        loop {
            let room = NODES_SHOWN.saturating_sub(read);
            if room == 0 {
                cut = true;
                break 'walk;
            }
            let page = budgets
                .children(&parent, after.as_ref(), room.min(CHILDREN_PAGE))
                .await
                .map_err(|e| e.to_string())?;
            let full = page.len() == room.min(CHILDREN_PAGE);
            read += page.len();
            after = page.last().map(|c| c.key.clone());
            for c in page {
                queue.push_back(c.key.clone());
                below
                    .entry(parent.clone())
                    .or_default()
                    .push((c.key, c.level));
            }
            if !full {
                break;
            }
        }
    }
    fn grow(
        key: BudgetKey,
        level: LevelReport,
        below: &mut HashMap<BudgetKey, Vec<(BudgetKey, LevelReport)>>,
        watch: &Watch,
        now: u64,
    ) -> Node {
        let children = below
            .remove(&key)
            .unwrap_or_default()
            .into_iter()
            .map(|(k, l)| grow(k, l, below, watch, now))
            .collect();
        let mut n = Node {
            rate: watch.sample(key.as_str(), level.spent_microcents, now),
            level,
            children,
        };
        // Each child's own children were sorted as it grew.
        n.children.sort_by(order);
        n
    }
    let mut by_root: BTreeMap<String, Vec<Node>> = BTreeMap::new();
    for t in tops {
        let key = BudgetKey::of_root(&t.root).child(&t.level.delegation_id);
        let node = grow(key, t.level, &mut below, watch, now);
        by_root.entry(t.root).or_default().push(node);
    }
    let mut trees: Vec<Tree> = by_root
        .into_iter()
        .map(|(root, mut nodes)| {
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
    Ok(Trees { trees, cut })
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
        Ok(Trees { trees, cut }) => html! {
            p.lede { "Spent, reserved and remaining at every level, soonest to run dry first (spend rate over the last 15 minutes): every delegation and attenuation the budget store holds." }
            @if cut { (layout::notice("status", &format!("Only the first {NODES_SHOWN} budget nodes are shown."))) }
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
        root.children.sort_by(order);
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
