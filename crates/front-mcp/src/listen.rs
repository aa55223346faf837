//! `subscriptions/listen` for 2026-07-28 callers (issue 33; decision 451).
//! The revision's one long-lived stream: the caller names which change
//! notifications it wants (list changes, updates of named resources), the
//! server acknowledges what it honours, then sends them until either side
//! ends it. dgw relays it to the upstream that serves resources when that
//! upstream speaks 2026-07-28, with the filter narrowed to the resources
//! the caller's credential could read (as the lists are filtered), and
//! lets through only the notifications the narrowed filter asked for,
//! stamped with the caller's own subscription ID. Bounded: a few open per
//! credential, a bounded queue each (a flood is dropped and counted, as
//! any relayed notification), a lifetime, and the upstream's stream is
//! closed as soon as the caller goes. Served by [`super::listen_serve`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::data_rules::normalize_uri;

/// Where the revision puts a notification's subscription.
pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
/// Listen streams one credential may hold open at once.
pub const MAX_PER_CREDENTIAL: usize = 4;
/// Listen streams open on this gateway at once.
pub const MAX_OPEN: usize = 1024;
/// Resources one listen may name.
pub const MAX_URIS: usize = 256;
/// How long dgw keeps one listen open; the caller listens again (and is
/// checked again) after that.
pub const LIFETIME: Duration = Duration::from_secs(600);

/// What a listen asks for (`SubscriptionFilter`), resource URIs normalized.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    tools: bool,
    prompts: bool,
    resources: bool,
    uris: Vec<String>,
}

impl Filter {
    /// `params.notifications` read strictly: an object of booleans and at
    /// most [`MAX_URIS`] resource URIs, each put in its one spelling.
    pub fn parse(value: Option<&Value>) -> Result<Self, String> {
        let Some(Value::Object(o)) = value else {
            return Err("params.notifications must be an object (a SubscriptionFilter)".into());
        };
        let flag = |key: &str| match o.get(key) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(format!("notifications.{key} must be a boolean")),
        };
        let mut uris = match o.get("resourceSubscriptions") {
            None => Vec::new(),
            Some(Value::Array(a)) if a.len() <= MAX_URIS => a
                .iter()
                .map(|u| {
                    let u = u
                        .as_str()
                        .ok_or("notifications.resourceSubscriptions holds strings")?;
                    normalize_uri(u).map_err(|e| format!("resource URI {e}"))
                })
                .collect::<Result<Vec<_>, String>>()?,
            Some(Value::Array(_)) => {
                return Err(format!(
                    "notifications.resourceSubscriptions names at most {MAX_URIS} resources"
                ))
            }
            Some(_) => return Err("notifications.resourceSubscriptions must be an array".into()),
        };
        uris.sort();
        uris.dedup();
        Ok(Self {
            tools: flag("toolsListChanged")?,
            prompts: flag("promptsListChanged")?,
            resources: flag("resourcesListChanged")?,
            uris,
        })
    }

    /// This filter with only the resources `readable` keeps.
    pub fn narrowed(&self, readable: impl Fn(&str) -> bool) -> Self {
        Self {
            uris: self.uris.iter().filter(|u| readable(u)).cloned().collect(),
            ..self.clone()
        }
    }

    /// What both filters ask for.
    fn and(&self, other: &Filter) -> Self {
        Self {
            tools: self.tools && other.tools,
            prompts: self.prompts && other.prompts,
            resources: self.resources && other.resources,
            uris: self
                .uris
                .iter()
                .filter(|u| other.uris.contains(u))
                .cloned()
                .collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// As the revision writes it: only what is asked for.
    pub fn to_value(&self) -> Value {
        let mut o = Map::new();
        for (key, on) in [
            ("toolsListChanged", self.tools),
            ("promptsListChanged", self.prompts),
            ("resourcesListChanged", self.resources),
        ] {
            if on {
                o.insert(key.into(), json!(true));
            }
        }
        if !self.uris.is_empty() {
            o.insert("resourceSubscriptions".into(), json!(self.uris));
        }
        Value::Object(o)
    }

    /// A notification from the upstream's listen stream as the caller
    /// gets it (stamped with `subscription`), or `None` when this filter
    /// did not ask for it: a resource update only for a resource it
    /// names, a list change only when asked, the acknowledgement with no
    /// more than it asked for, nothing else.
    pub fn admit(&self, mut item: Value, subscription: &Value) -> Option<Value> {
        let method = item.get("method")?.as_str()?.to_owned();
        let params = params_of(&mut item);
        let wanted = match method.as_str() {
            "notifications/subscriptions/acknowledged" => {
                let honored = Filter::parse(params.get("notifications")).unwrap_or_default();
                params.insert("notifications".into(), self.and(&honored).to_value());
                true
            }
            "notifications/tools/list_changed" => self.tools,
            "notifications/prompts/list_changed" => self.prompts,
            "notifications/resources/list_changed" => self.resources,
            "notifications/resources/updated" => params
                .get("uri")
                .and_then(Value::as_str)
                .and_then(|u| normalize_uri(u).ok())
                .is_some_and(|u| self.uris.contains(&u)),
            _ => false,
        };
        wanted.then(|| stamped(item, subscription))
    }
}

/// `item`'s params object (made one if it was anything else).
fn params_of(item: &mut Value) -> &mut Map<String, Value> {
    let Value::Object(o) = item else {
        *item = json!({});
        return params_of(item);
    };
    let params = o.entry("params").or_insert_with(|| json!({}));
    if !params.is_object() {
        *params = json!({});
    }
    match params {
        Value::Object(p) => p,
        _ => unreachable!("made an object above"),
    }
}

/// `item` with `_meta`'s subscription ID set to `subscription`.
pub fn stamped(mut item: Value, subscription: &Value) -> Value {
    let params = params_of(&mut item);
    let meta = params.entry("_meta").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    if let Value::Object(m) = meta {
        m.insert(SUBSCRIPTION_ID.into(), subscription.clone());
    }
    item
}

/// Why a listen was refused before anything was relayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ListenRefusal {
    #[error("this credential holds {MAX_PER_CREDENTIAL} subscriptions/listen streams open already; close one first")]
    PerCredential,
    #[error("this gateway holds {MAX_OPEN} subscriptions/listen streams open already")]
    Full,
}

impl ListenRefusal {
    pub fn kind(self) -> &'static str {
        match self {
            ListenRefusal::PerCredential => "too_many_listens",
            ListenRefusal::Full => "listens_full",
        }
    }
}

/// The listen streams open, by the digest of the credential holding them.
#[derive(Default)]
pub struct Listens {
    open: Mutex<(HashMap<[u8; 32], usize>, usize)>,
}

/// One open listen, counted until dropped.
pub struct Slot {
    listens: Arc<Listens>,
    holder: [u8; 32],
}

impl Listens {
    pub fn open(self: &Arc<Self>, holder: [u8; 32]) -> Result<Slot, ListenRefusal> {
        let mut guard = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let (by_holder, total) = &mut *guard;
        if *total >= MAX_OPEN {
            return Err(ListenRefusal::Full);
        }
        let n = by_holder.entry(holder).or_default();
        if *n >= MAX_PER_CREDENTIAL {
            return Err(ListenRefusal::PerCredential);
        }
        *n += 1;
        *total += 1;
        Ok(Slot {
            listens: self.clone(),
            holder,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut guard = self.listens.open.lock().unwrap_or_else(|p| p.into_inner());
        let (by_holder, total) = &mut *guard;
        *total = total.saturating_sub(1);
        if let Some(n) = by_holder.get_mut(&self.holder) {
            *n -= 1;
            if *n == 0 {
                by_holder.remove(&self.holder);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(v: Value) -> Filter {
        Filter::parse(Some(&v)).unwrap()
    }

    #[test]
    fn a_filter_is_read_strictly_and_uris_in_one_spelling() {
        let f = filter(json!({"toolsListChanged": true,
            "resourceSubscriptions": ["test://b", "TEST://b", "test://b"]}));
        assert_eq!(
            f.to_value(),
            json!({"toolsListChanged": true, "resourceSubscriptions": ["test://b"]})
        );
        for bad in [
            json!(null),
            json!([]),
            json!({"toolsListChanged": "yes"}),
            json!({"resourceSubscriptions": "test://b"}),
            json!({"resourceSubscriptions": [1]}),
            json!({"resourceSubscriptions": ["test://a/../b"]}),
            json!({"resourceSubscriptions": vec!["test://x"; MAX_URIS + 1]}),
        ] {
            assert!(Filter::parse(Some(&bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_what_the_narrowed_filter_asked_for_passes_stamped_with_the_callers_id() {
        let f = filter(json!({"toolsListChanged": true,
            "resourceSubscriptions": ["test://mine", "test://theirs"]}))
        .narrowed(|u| u == "test://mine");
        let id = json!("caller-7");
        let updated = |uri: &str| {
            json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                "params": {"uri": uri, "_meta": {SUBSCRIPTION_ID: 99}}})
        };
        let got = f.admit(updated("test://mine"), &id).unwrap();
        assert_eq!(got["params"]["_meta"][SUBSCRIPTION_ID], "caller-7");
        assert!(f.admit(updated("test://theirs"), &id).is_none());
        assert!(f.admit(updated("test://other"), &id).is_none());
        let listed = |m: &str| json!({"jsonrpc": "2.0", "method": m});
        assert!(f
            .admit(listed("notifications/tools/list_changed"), &id)
            .is_some());
        assert!(f
            .admit(listed("notifications/resources/list_changed"), &id)
            .is_none());
        assert!(f.admit(listed("notifications/message"), &id).is_none());
        // An acknowledgement claiming more than was asked is cut down.
        let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": {"promptsListChanged": true, "toolsListChanged": true,
                "resourceSubscriptions": ["test://mine", "test://theirs"]}}});
        let got = f.admit(ack, &id).unwrap();
        assert_eq!(
            got["params"]["notifications"],
            json!({"toolsListChanged": true, "resourceSubscriptions": ["test://mine"]})
        );
        // Hostile shapes never panic.
        for odd in [
            json!({"method": "notifications/resources/updated", "params": 5}),
            json!({"method": "notifications/tools/list_changed", "params": {"_meta": []}}),
            json!({"method": 5}),
            json!("x"),
        ] {
            let _ = f.admit(odd, &id);
        }
    }

    #[test]
    fn listens_are_bounded_per_credential_and_freed_when_dropped() {
        let l = Arc::new(Listens::default());
        let held: Vec<Slot> = (0..MAX_PER_CREDENTIAL)
            .map(|_| l.open([1; 32]).unwrap())
            .collect();
        assert_eq!(l.open([1; 32]).err(), Some(ListenRefusal::PerCredential));
        assert!(l.open([2; 32]).is_ok());
        drop(held);
        assert!(l.open([1; 32]).is_ok());
    }
}
