//! A protocol's own JSON-RPC methods: their params, and what they answer.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::Denial;
use crate::error::GateError;

/// What a protocol answers to a JSON-RPC method it serves.
pub type MethodResult = Result<Value, GateError>;

/// A method's answer with how the request counts, for a protocol whose
/// methods refuse in their result or deny as the pipeline does
/// (DelegateOS's `delegate`, `authorize`).
#[derive(Debug)]
pub enum MethodAnswer {
    /// Its result, counted `ok`.
    Done(Value),
    /// Its result, stating a refusal (a rejected delegation), counted `denied`.
    Refused(Value),
    /// A denial, answered as every front answers the pipeline's.
    Denied(Denial),
}

/// A method's params, typed: an object, or `invalid_params` naming what
/// is wrong (the words every front's methods use).
pub fn parse_params<T: DeserializeOwned>(params: Option<Value>) -> Result<T, GateError> {
    match params {
        Some(Value::Object(map)) => serde_json::from_value(Value::Object(map))
            .map_err(|e| GateError::InvalidParams(format!("invalid params: {e}"))),
        Some(_) => Err(GateError::InvalidParams("params must be an object".into())),
        None => Err(GateError::InvalidParams("params are required".into())),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    struct One {
        #[allow(dead_code)]
        a: u64,
    }

    #[test]
    fn params_are_an_object_of_known_members() {
        assert!(parse_params::<One>(Some(json!({"a": 1}))).is_ok());
        for (params, words) in [
            (None, "params are required"),
            (Some(json!([1])), "params must be an object"),
            (
                Some(json!({"a": 1, "b": 2})),
                "invalid params: unknown field `b`",
            ),
            (Some(json!({"a": -1})), "invalid params: invalid value"),
        ] {
            let e = parse_params::<One>(params).unwrap_err();
            assert!(
                matches!(&e, GateError::InvalidParams(m) if m.starts_with(words)),
                "{e}"
            );
        }
    }
}
