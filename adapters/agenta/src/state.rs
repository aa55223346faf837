//! A request's state, as the manifest's `state_transitions` allow it to
//! change: `allowed` pairs only, and nothing after a `terminal` state.
//!
//! The manifest lists no transition into `accepted` or `rejected`: they are
//! how a seller first answers a request. A request that has had no receipt
//! yet may therefore take `accepted` or `rejected`, or any state `accepted`
//! may reach (a seller that answers a request already done); after that,
//! only the published pairs (docs/adapters/agenta.md).

/// An execution's status, as receipts carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// The seller took the request.
    Accepted,
    /// The seller refused it.
    Rejected,
    /// The work is under way.
    InProgress,
    /// The work is done.
    Completed,
    /// The work failed.
    Failed,
    /// The work was cancelled.
    Cancelled,
    /// The deadline passed.
    Expired,
}

impl Status {
    /// Every status, in the schema's order.
    pub const ALL: [Status; 7] = [
        Status::Accepted,
        Status::Rejected,
        Status::InProgress,
        Status::Completed,
        Status::Failed,
        Status::Cancelled,
        Status::Expired,
    ];

    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Accepted => "accepted",
            Status::Rejected => "rejected",
            Status::InProgress => "in_progress",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
            Status::Expired => "expired",
        }
    }

    /// The status named `text`.
    pub fn parse(text: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Whether nothing may follow it.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Status::Rejected
                | Status::Completed
                | Status::Failed
                | Status::Cancelled
                | Status::Expired
        )
    }

    /// Whether the manifest allows `self -> to`.
    pub fn allows(self, to: Status) -> bool {
        use Status::*;
        matches!(
            (self, to),
            (
                Accepted,
                InProgress | Completed | Failed | Cancelled | Expired
            ) | (InProgress, Completed | Failed | Cancelled | Expired)
        )
    }

    /// The state after a receipt with status `to`, from `from` (`None`: no
    /// receipt yet), or `invalid_state_transition`.
    pub fn after(from: Option<Status>, to: Status) -> Result<Status, InvalidTransition> {
        let ok = match from {
            None => {
                matches!(to, Status::Accepted | Status::Rejected) || Status::Accepted.allows(to)
            }
            Some(from) => from.allows(to),
        };
        if ok {
            Ok(to)
        } else {
            Err(InvalidTransition { from, to })
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A change of state the manifest does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("invalid_state_transition: {} -> {to}", .from.map_or("(no receipt)", Status::as_str))]
pub struct InvalidTransition {
    /// The state before (`None`: no receipt yet).
    pub from: Option<Status>,
    /// The state asked for.
    pub to: Status,
}

impl InvalidTransition {
    /// The wire name.
    pub const KIND: &'static str = "invalid_state_transition";
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pair of statuses: allowed exactly when the manifest lists it,
    /// and terminal exactly when the manifest says so.
    #[test]
    fn the_transitions_are_the_manifests() {
        let manifest: serde_json::Value = serde_json::from_str(crate::MANIFEST).unwrap();
        let allowed: Vec<&str> = manifest["state_transitions"]["allowed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let terminal: Vec<&str> = manifest["state_transitions"]["terminal"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let mut checked = 0;
        for from in Status::ALL {
            assert_eq!(
                from.is_terminal(),
                terminal.contains(&from.as_str()),
                "{from}"
            );
            for to in Status::ALL {
                let pair = format!("{from}->{to}");
                assert_eq!(from.allows(to), allowed.contains(&pair.as_str()), "{pair}");
                assert_eq!(
                    Status::after(Some(from), to).is_ok(),
                    allowed.contains(&pair.as_str())
                );
                checked += 1;
            }
        }
        assert_eq!(checked, 49);
        assert_eq!(allowed.len(), 9);
    }

    /// A terminal request never changes again, whatever comes.
    #[test]
    fn terminal_requests_never_change() {
        for from in Status::ALL.into_iter().filter(|s| s.is_terminal()) {
            for to in Status::ALL {
                let e = Status::after(Some(from), to).unwrap_err();
                assert_eq!((e.from, e.to), (Some(from), to));
                assert!(e.to_string().starts_with("invalid_state_transition"));
            }
        }
    }

    /// The first receipt: accepted or rejected, or anything accepted leads to.
    #[test]
    fn a_first_receipt_accepts_rejects_or_reports_on_accepted_work() {
        for to in Status::ALL {
            assert!(Status::after(None, to).is_ok(), "{to}");
        }
        assert!(Status::after(Some(Status::Accepted), Status::Rejected).is_err());
        assert!(Status::after(Some(Status::Accepted), Status::Accepted).is_err());
        assert!(Status::after(Some(Status::InProgress), Status::InProgress).is_err());
        assert_eq!(Status::parse("in_progress"), Some(Status::InProgress));
        assert_eq!(Status::parse("done"), None);
    }
}
