//! What one caller asked of the upstreams for itself on the session
//! revisions (its log level, its resource subscriptions), kept by dgw: an
//! upstream shared by every caller must not take one caller's
//! `logging/setLevel` or `resources/subscribe` for everyone's. A relay of
//! the upstreams' notifications asks [`CallerState::wants`] before it
//! delivers one to this caller.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, Weak};

use serde_json::Value;

use super::data_rules::normalize_uri;

/// Most resources one caller may be subscribed to at once.
pub const MAX_SUBSCRIPTIONS: usize = 256;

/// The syslog severities MCP logging uses (RFC 5424), least severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

impl LogLevel {
    pub const NAMES: [&'static str; 8] = [
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ];

    /// The level named `text` (exactly, as MCP spells it).
    pub fn parse(text: &str) -> Option<Self> {
        use LogLevel::*;
        let all = [
            Debug, Info, Notice, Warning, Error, Critical, Alert, Emergency,
        ];
        Self::NAMES.iter().position(|n| *n == text).map(|i| all[i])
    }
}

/// Why a subscription was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubscribeError {
    #[error(
        "this session holds {MAX_SUBSCRIPTIONS} subscriptions already; unsubscribe from one first"
    )]
    TooMany,
}

#[derive(Debug, Default)]
struct Inner {
    level: Option<LogLevel>,
    subscriptions: BTreeSet<String>,
}

/// One caller's own upstream state.
#[derive(Debug, Default)]
pub struct CallerState {
    inner: Mutex<Inner>,
    /// Lives as long as the caller: the [`SubscriptionBook`] counts a
    /// subscription only while its holder lives.
    alive: Arc<()>,
}

impl CallerState {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Log messages below `level` are not delivered to this caller.
    pub fn set_level(&self, level: LogLevel) {
        self.lock().level = Some(level);
    }

    pub fn level(&self) -> Option<LogLevel> {
        self.lock().level
    }

    /// Subscribes to `uri` (normalized); whether it was new.
    pub fn subscribe(&self, uri: &str) -> Result<bool, SubscribeError> {
        let mut inner = self.lock();
        if inner.subscriptions.contains(uri) {
            return Ok(false);
        }
        if inner.subscriptions.len() >= MAX_SUBSCRIPTIONS {
            return Err(SubscribeError::TooMany);
        }
        Ok(inner.subscriptions.insert(uri.to_owned()))
    }

    /// Ends the subscription to `uri`; whether there was one.
    pub fn unsubscribe(&self, uri: &str) -> bool {
        self.lock().subscriptions.remove(uri)
    }

    pub fn subscribed(&self, uri: &str) -> bool {
        self.lock().subscriptions.contains(uri)
    }

    /// Whether this caller gets an upstream notification: a log message
    /// only at or above the level it set (all when it set none: the
    /// upstream was never told another caller's level, so it sends what
    /// it sends by default); a resource update only for a resource it
    /// subscribed to; anything else, yes.
    pub fn wants(&self, method: &str, params: Option<&Value>) -> bool {
        match method {
            "notifications/message" => {
                let Some(mine) = self.level() else {
                    return true;
                };
                params
                    .and_then(|p| p.get("level"))
                    .and_then(Value::as_str)
                    .and_then(LogLevel::parse)
                    .is_some_and(|l| l >= mine)
            }
            "notifications/resources/updated" => params
                .and_then(|p| p.get("uri"))
                .and_then(Value::as_str)
                .and_then(|u| normalize_uri(u).ok())
                .is_some_and(|u| self.subscribed(&u)),
            _ => true,
        }
    }
}

/// Which callers hold a subscription to each upstream resource, so dgw
/// asks the upstream to stop only when the last one let go. A caller that
/// went away without unsubscribing stops counting with it.
#[derive(Debug, Default)]
pub struct SubscriptionBook {
    held: Mutex<HashMap<Held, Vec<Weak<()>>>>,
}

/// An upstream's name and a resource's normalized URI.
type Held = (String, String);

impl SubscriptionBook {
    /// `caller` holds `uri` of `upstream`; whether it is the only holder
    /// (dgw then subscribes upstream).
    pub fn hold(&self, upstream: &str, uri: &str, caller: &CallerState) -> bool {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let holders = held
            .entry((upstream.to_owned(), uri.to_owned()))
            .or_default();
        holders.retain(|w| w.strong_count() > 0);
        let me = Arc::downgrade(&caller.alive);
        if !holders.iter().any(|w| w.ptr_eq(&me)) {
            holders.push(me);
        }
        holders.len() == 1
    }

    /// `caller` let go of `uri`; whether no live caller holds it now (dgw
    /// then unsubscribes upstream).
    pub fn release(&self, upstream: &str, uri: &str, caller: &CallerState) -> bool {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let key = (upstream.to_owned(), uri.to_owned());
        let Some(holders) = held.get_mut(&key) else {
            return true;
        };
        let me = Arc::downgrade(&caller.alive);
        holders.retain(|w| w.strong_count() > 0 && !w.ptr_eq(&me));
        let none = holders.is_empty();
        if none {
            held.remove(&key);
        }
        none
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    proptest! {
        /// Against a model (the set of live holders per resource): `hold`
        /// says "subscribe upstream" exactly when no other live caller
        /// held it, `release` says "unsubscribe upstream" exactly when no
        /// live caller holds it any more, whatever the interleaving of
        /// holds, releases and callers going away.
        #[test]
        fn the_book_subscribes_upstream_for_the_first_holder_and_releases_after_the_last(
            ops in proptest::collection::vec((0u8..3, 0usize..3, 0usize..2), 0..60),
        ) {
            let book = SubscriptionBook::default();
            let mut callers: Vec<Option<CallerState>> = (0..3).map(|_| Some(CallerState::default())).collect();
            let mut model: Vec<std::collections::BTreeSet<usize>> = vec![Default::default(); 2];
            for (op, who, uri) in ops {
                let name = format!("test://{uri}");
                match (op, &callers[who]) {
                    (0, Some(c)) => {
                        let first = model[uri].iter().all(|h| *h == who);
                        prop_assert_eq!(book.hold("up", &name, c), first);
                        model[uri].insert(who);
                    }
                    (1, Some(c)) => {
                        model[uri].remove(&who);
                        prop_assert_eq!(book.release("up", &name, c), model[uri].is_empty());
                    }
                    (2, Some(_)) => {
                        callers[who] = None;
                        for held in &mut model {
                            held.remove(&who);
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    #[test]
    fn each_caller_gets_log_messages_at_its_own_level() {
        let (a, b) = (CallerState::default(), CallerState::default());
        a.set_level(LogLevel::Error);
        let msg = |level: &str| json!({"level": level, "data": "x"});
        assert!(!a.wants("notifications/message", Some(&msg("info"))));
        assert!(a.wants("notifications/message", Some(&msg("critical"))));
        assert!(!a.wants("notifications/message", Some(&msg("loud"))));
        // b never set a level: a's does not apply to it.
        assert!(b.wants("notifications/message", Some(&msg("debug"))));
        b.set_level(LogLevel::Debug);
        assert!(b.wants("notifications/message", Some(&msg("debug"))));
        assert!(!a.wants("notifications/message", Some(&msg("debug"))));
    }

    #[test]
    fn updates_reach_only_the_callers_subscribed() {
        let (a, b) = (CallerState::default(), CallerState::default());
        assert_eq!(a.subscribe("test://watched"), Ok(true));
        assert_eq!(a.subscribe("test://watched"), Ok(false));
        let update = |uri: &str| json!({"uri": uri});
        assert!(a.wants(
            "notifications/resources/updated",
            Some(&update("test://watched"))
        ));
        assert!(a.wants(
            "notifications/resources/updated",
            Some(&update("TEST://watched"))
        ));
        assert!(!b.wants(
            "notifications/resources/updated",
            Some(&update("test://watched"))
        ));
        assert!(!a.wants(
            "notifications/resources/updated",
            Some(&update("test://other"))
        ));
        assert!(!a.wants("notifications/resources/updated", None));
        assert!(a.unsubscribe("test://watched"));
        assert!(!a.wants(
            "notifications/resources/updated",
            Some(&update("test://watched"))
        ));
    }

    #[test]
    fn subscriptions_are_bounded_per_caller() {
        let a = CallerState::default();
        for i in 0..MAX_SUBSCRIPTIONS {
            a.subscribe(&format!("test://r/{i}")).unwrap();
        }
        assert_eq!(a.subscribe("test://one-more"), Err(SubscribeError::TooMany));
        assert_eq!(a.subscribe("test://r/0"), Ok(false));
    }

    #[test]
    fn the_upstream_is_released_when_the_last_live_holder_lets_go() {
        let book = SubscriptionBook::default();
        let (a, b) = (CallerState::default(), CallerState::default());
        assert!(book.hold("up", "test://w", &a));
        assert!(!book.hold("up", "test://w", &b));
        assert!(!book.hold("up", "test://w", &a), "a holds it once");
        assert!(!book.release("up", "test://w", &a));
        assert!(book.release("up", "test://w", &b));
        // A holder that went away does not keep it.
        let c = CallerState::default();
        assert!(book.hold("up", "test://w", &c));
        drop(c);
        assert!(book.hold("up", "test://w", &a));
    }
}
