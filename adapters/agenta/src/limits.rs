//! Bounds on the members the schemas leave unbounded: a request's `input`,
//! a receipt's `result`, `metadata` (and a receipt's `error.details`), and
//! the strings with no length or pattern (URIs, timestamps, whose fraction
//! of a second may run on). Whatever the gateway keeps of a message is then
//! bounded too. Offers are an administrator's, and are not bounded here.

use serde_json::Value;

use crate::schema::{MessageType, Violation};

/// The most bytes each kind of free-form member may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// A request's `input`, as compact JSON.
    pub input_bytes: usize,
    /// A receipt's `result`, as compact JSON.
    pub result_bytes: usize,
    /// `metadata` of a request, receipt or verification, and a receipt's
    /// `error.details`, as compact JSON.
    pub metadata_bytes: usize,
    /// Any other string the schemas leave unbounded, in UTF-8.
    pub string_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            input_bytes: 64 << 10,
            result_bytes: 64 << 10,
            metadata_bytes: 4 << 10,
            string_bytes: 2 << 10,
        }
    }
}

/// Which limit bounds a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// [`Limits::input_bytes`].
    Input,
    /// [`Limits::result_bytes`].
    Result,
    /// [`Limits::metadata_bytes`].
    Metadata,
    /// [`Limits::string_bytes`].
    String,
}

impl Bound {
    /// The `[agenta]` key that sets it.
    pub fn key(self) -> &'static str {
        match self {
            Bound::Input => "max_input_bytes",
            Bound::Result => "max_result_bytes",
            Bound::Metadata => "max_metadata_bytes",
            Bound::String => "max_string_bytes",
        }
    }
}

/// Every member of a message type the schemas leave unbounded: a JSON
/// Pointer (`*`: each item of an array) and its bound.
pub fn free_form(message_type: MessageType) -> &'static [(&'static str, Bound)] {
    match message_type {
        MessageType::Offer => &[],
        MessageType::ExecutionRequest => &[
            ("/input", Bound::Input),
            ("/metadata", Bound::Metadata),
            ("/callback/url", Bound::String),
            ("/execution_constraints/deadline_at", Bound::String),
            ("/execution_constraints/latest_start_at", Bound::String),
            ("/requested_at", Bound::String),
        ],
        MessageType::ExecutionReceipt => &[
            ("/result", Bound::Result),
            ("/metadata", Bound::Metadata),
            ("/error/details", Bound::Metadata),
            ("/artifacts/*/uri", Bound::String),
            ("/next_action/deadline_at", Bound::String),
            ("/issued_at", Bound::String),
        ],
        MessageType::VerificationResult => &[
            ("/metadata", Bound::Metadata),
            ("/evidence/*/uri", Bound::String),
            ("/verified_at", Bound::String),
        ],
    }
}

/// A message with members over their bounds: each, with its pointer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("member_too_large: {} member(s) over their bound, first at {:?}: {}", .violations.len(), .violations[0].pointer, .violations[0].message)]
pub struct TooLarge {
    /// Every member over its bound, at least one.
    pub violations: Vec<Violation>,
}

impl TooLarge {
    /// The wire name.
    pub const KIND: &'static str = "member_too_large";
}

impl Limits {
    fn of(&self, bound: Bound) -> usize {
        match bound {
            Bound::Input => self.input_bytes,
            Bound::Result => self.result_bytes,
            Bound::Metadata => self.metadata_bytes,
            Bound::String => self.string_bytes,
        }
    }

    /// Checks every free-form member of `message` (of `message_type`,
    /// whose schema passed) against its bound.
    pub fn check(&self, message_type: MessageType, message: &Value) -> Result<(), TooLarge> {
        let mut violations = Vec::new();
        for (pointer, bound) in free_form(message_type) {
            let limit = self.of(*bound);
            for (at, member) in members(message, pointer) {
                let size = match member {
                    Value::String(s) => s.len(),
                    other => json_len(other),
                };
                if size > limit {
                    violations.push(Violation {
                        pointer: at,
                        message: format!(
                            "{size} bytes, over the {limit} that agenta.{} allows",
                            bound.key()
                        ),
                    });
                }
            }
        }
        if violations.is_empty() {
            Ok(())
        } else {
            Err(TooLarge { violations })
        }
    }
}

/// The members at `pointer` (`*` standing for each item of an array), with
/// their concrete pointers.
fn members<'a>(message: &'a Value, pointer: &str) -> Vec<(String, &'a Value)> {
    let mut found = vec![(String::new(), message)];
    for step in pointer.split('/').skip(1) {
        found = found
            .into_iter()
            .flat_map(|(at, v)| match (step, v) {
                ("*", Value::Array(items)) => items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| (format!("{at}/{i}"), item))
                    .collect::<Vec<_>>(),
                (name, Value::Object(o)) => o
                    .get(name)
                    .map(|m| (format!("{at}/{name}"), m))
                    .into_iter()
                    .collect(),
                _ => Vec::new(),
            })
            .collect();
    }
    found
}

/// The length of `value` as compact JSON, without building it.
fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` to a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every member the vendored schemas leave unbounded (a string with no
    /// `maxLength`, bounded `pattern`, `enum` or `const`; an object open to
    /// any member) is in [`free_form`], and nothing else is. (Arrays: their
    /// items are bounded one by one, their number by the message's size.)
    #[test]
    fn the_free_form_members_are_the_schemas_unbounded_ones() {
        fn walk(node: &Value, at: &str, out: &mut Vec<String>) {
            let Some(o) = node.as_object() else { return };
            if o.contains_key("const") || o.contains_key("enum") {
                return;
            }
            let bounded_pattern = o
                .get("pattern")
                .and_then(Value::as_str)
                .is_some_and(|p| p.starts_with('^') && p.ends_with("}$"));
            match o.get("type") {
                Some(t) if t == "string" => {
                    if !o.contains_key("maxLength") && !bounded_pattern {
                        out.push(at.to_owned());
                    }
                    return;
                }
                Some(t)
                    if t == "object" && o.get("additionalProperties") != Some(&json!(false)) =>
                {
                    out.push(at.to_owned());
                    return;
                }
                _ => {}
            }
            for (k, v) in o
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                walk(v, &format!("{at}/{k}"), out);
            }
            if let Some(items) = o.get("items") {
                walk(items, &format!("{at}/*"), out);
            }
        }
        for t in MessageType::ALL
            .into_iter()
            .filter(|t| *t != MessageType::Offer)
        {
            let schema: Value = serde_json::from_str(t.schema_text()).unwrap();
            let mut unbounded = Vec::new();
            walk(&schema, "", &mut unbounded);
            let mut listed: Vec<String> = free_form(t).iter().map(|(p, _)| p.to_string()).collect();
            unbounded.sort();
            listed.sort();
            assert_eq!(listed, unbounded, "{}", t.as_str());
        }
    }

    #[test]
    fn members_over_their_bound_are_named() {
        let limits = Limits {
            input_bytes: 21,
            result_bytes: 20,
            metadata_bytes: 10,
            string_bytes: 8,
        };
        let request = json!({"input": {"text": "0123456789"}, "metadata": {"a": "b"},
                             "requested_at": "2026-11-23T12:00:00Z"});
        let e = limits
            .check(MessageType::ExecutionRequest, &request)
            .unwrap_err();
        assert_eq!(e.violations.len(), 1, "{e}");
        assert_eq!(e.violations[0].pointer, "/requested_at");
        assert!(e.violations[0].message.contains("agenta.max_string_bytes"));
        let within = Limits {
            string_bytes: 20,
            ..limits
        };
        within
            .check(MessageType::ExecutionRequest, &request)
            .unwrap();
        let receipt = json!({"artifacts": [{"uri": "http://a"}, {"uri": "https://a.example/long"}],
                             "result": {"x": "y"}});
        let e = limits
            .check(MessageType::ExecutionReceipt, &receipt)
            .unwrap_err();
        assert_eq!(e.violations[0].pointer, "/artifacts/1/uri");
        // Exactly at the bound passes: `{"text":"0123456789"}` is 21 bytes.
        assert_eq!(json_len(&request["input"]), 21);
        let e = Limits {
            input_bytes: 20,
            ..within
        }
        .check(MessageType::ExecutionRequest, &request)
        .unwrap_err();
        assert_eq!(e.violations[0].pointer, "/input");
    }

    proptest::proptest! {
        /// Whatever the metadata, it passes exactly when its JSON fits.
        #[test]
        fn metadata_passes_exactly_when_it_fits(
            entries in proptest::collection::btree_map("[a-z]{1,8}", "[ -~]{0,40}", 0..8),
            limit in 0usize..200,
        ) {
            let metadata = serde_json::to_value(&entries).unwrap();
            let size = serde_json::to_vec(&metadata).unwrap().len();
            let limits = Limits { metadata_bytes: limit, ..Limits::default() };
            let checked = limits.check(MessageType::VerificationResult, &json!({"metadata": metadata}));
            proptest::prop_assert_eq!(checked.is_ok(), size <= limit);
        }
    }
}
