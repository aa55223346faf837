//! LDP's panel on the operator console: its sessions counted by state,
//! overall and per delegate, with their open tasks, read from the record
//! store when the page is shown, so every replica shows the same.

use std::collections::BTreeMap;

use dgw_protocol::Panel;
use ldp::session::State;

use super::Ldp;

/// A session state in the operator's words.
fn words(state: State) -> &'static str {
    match state {
        State::Initiating => "initiating",
        State::Proposed => "proposed",
        State::Active => "active",
        State::Suspended => "suspended",
        State::Closed => "closed",
        State::Failed => "failed",
    }
}

/// Counts by state, as `2 active, 1 closed`.
fn counted(by_state: &BTreeMap<&'static str, usize>) -> String {
    by_state
        .iter()
        .map(|(s, n)| format!("{n} {s}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Ldp {
    /// The panel; a store that cannot be read says so in its rows.
    pub async fn panel(&self) -> Panel {
        let mut rows = Vec::new();
        match self.sessions.all().await {
            Ok(sessions) => {
                let mut overall: BTreeMap<&'static str, usize> = BTreeMap::new();
                let mut by_delegate: BTreeMap<&str, (BTreeMap<&'static str, usize>, usize)> =
                    BTreeMap::new();
                for (_, r) in &sessions {
                    let state = words(r.session.state);
                    *overall.entry(state).or_default() += 1;
                    let (states, tasks) = by_delegate.entry(r.delegate.as_str()).or_default();
                    *states.entry(state).or_default() += 1;
                    *tasks += r.session.open_tasks.len();
                }
                rows.push((
                    "sessions".to_owned(),
                    match overall.is_empty() {
                        true => "none kept".to_owned(),
                        false => counted(&overall),
                    },
                ));
                for (delegate, (states, tasks)) in by_delegate {
                    rows.push((
                        format!("delegate {delegate}"),
                        format!("{}; {tasks} open tasks", counted(&states)),
                    ));
                }
            }
            Err(e) => rows.push(("sessions".to_owned(), format!("cannot be read: {e}"))),
        }
        Panel {
            title: "LDP".to_owned(),
            rows,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_read_as_words_counted() {
        let mut by: BTreeMap<&'static str, usize> = BTreeMap::new();
        by.insert(words(State::Active), 2);
        by.insert(words(State::Closed), 1);
        assert_eq!(counted(&by), "2 active, 1 closed");
    }
}
