//! JSON-RPC 2.0 messages as MCP moves them: requests, notifications and
//! responses, typed at the edge so the proxy never pokes at a raw envelope.
//! Params and results stay JSON: the proxy passes most of them through
//! untouched, and only the parts it enforces on are parsed further.

use serde_json::{json, Map, Value};

/// A request ID: a string or an integer (MCP forbids null).
pub type Id = Value;

/// One JSON-RPC message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Request {
        id: Id,
        method: String,
        params: Option<Map<String, Value>>,
    },
    Notification {
        method: String,
        params: Option<Map<String, Value>>,
    },
    Response {
        id: Id,
        reply: Reply,
    },
}

/// How a request was answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Result(Value),
    /// The error object, as the answering side wrote it.
    Error(Value),
}

impl Message {
    /// Reads a message. `Err` carries the reply ID (when one could be read)
    /// and why the message is not valid JSON-RPC.
    /// Parses a message; members beside `method` that start with one of
    /// `envelope_prefixes` (a protocol's envelope beside `method`) travel on in
    /// `params`, where the proxy takes them out before anything else.
    pub fn parse(value: Value, envelope_prefixes: &[&str]) -> Result<Self, (Id, String)> {
        let Value::Object(mut obj) = value else {
            return Err((Value::Null, "a message must be an object".into()));
        };
        let id = obj.remove("id");
        let reply_id = match &id {
            Some(v @ (Value::String(_) | Value::Number(_))) => v.clone(),
            _ => Value::Null,
        };
        let bad = |why: &str| Err((reply_id.clone(), why.to_owned()));
        if obj.remove("jsonrpc") != Some(json!("2.0")) {
            return bad("jsonrpc must be \"2.0\"");
        }
        if let Some(id) = &id {
            if !matches!(id, Value::String(_) | Value::Number(_)) {
                return bad("id must be a string or a number");
            }
        }
        let mut params = match obj.remove("params") {
            None => None,
            Some(Value::Object(p)) => Some(p),
            Some(_) => return bad("params must be an object"),
        };
        let envelope: Vec<String> = obj
            .keys()
            .filter(|k| envelope_prefixes.iter().any(|p| k.starts_with(p)))
            .cloned()
            .collect();
        for key in envelope {
            let value = obj.remove(&key).unwrap_or(Value::Null);
            let p = params.get_or_insert_with(Map::new);
            if p.insert(key.clone(), value).is_some() {
                return bad(&format!("{key} is given both beside and inside params"));
            }
        }
        let method = match obj.remove("method") {
            Some(Value::String(m)) => Some(m),
            Some(_) => return bad("method must be a string"),
            None => None,
        };
        let result = obj.remove("result");
        let error = obj.remove("error");
        if let Some(extra) = obj.keys().next() {
            return bad(&format!("unknown member {extra:?}"));
        }
        match (method, id, result, error) {
            (Some(method), Some(id), None, None) => Ok(Message::Request { id, method, params }),
            (Some(method), None, None, None) => Ok(Message::Notification { method, params }),
            (None, Some(id), Some(r), None) if params.is_none() => Ok(Message::Response {
                id,
                reply: Reply::Result(r),
            }),
            (None, Some(id), None, Some(e @ Value::Object(_))) if params.is_none() => {
                Ok(Message::Response {
                    id,
                    reply: Reply::Error(e),
                })
            }
            _ => bad("not a request, a notification or a response"),
        }
    }

    /// Whether this is an `initialize` request (it opens a session).
    pub fn is_initialize(&self) -> bool {
        matches!(self, Message::Request { method, .. } if method == "initialize")
    }

    /// The message's JSON text, serialized without building a `Value`.
    pub fn to_json_string(&self) -> String {
        #[derive(serde::Serialize)]
        struct Wire<'a> {
            jsonrpc: &'static str,
            #[serde(skip_serializing_if = "Option::is_none")]
            id: Option<&'a Value>,
            #[serde(skip_serializing_if = "Option::is_none")]
            method: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            params: Option<&'a Map<String, Value>>,
            #[serde(skip_serializing_if = "Option::is_none")]
            result: Option<&'a Value>,
            #[serde(skip_serializing_if = "Option::is_none")]
            error: Option<&'a Value>,
        }
        let mut w = Wire {
            jsonrpc: "2.0",
            id: None,
            method: None,
            params: None,
            result: None,
            error: None,
        };
        match self {
            Message::Request { id, method, params } => {
                w.id = Some(id);
                w.method = Some(method);
                w.params = params.as_ref();
            }
            Message::Notification { method, params } => {
                w.method = Some(method);
                w.params = params.as_ref();
            }
            Message::Response { id, reply } => {
                w.id = Some(id);
                match reply {
                    Reply::Result(r) => w.result = Some(r),
                    Reply::Error(e) => w.error = Some(e),
                }
            }
        }
        serde_json::to_string(&w).expect("JSON values always serialize")
    }

    /// The message as JSON.
    pub fn to_value(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("jsonrpc".into(), json!("2.0"));
        match self {
            Message::Request { id, method, params } => {
                obj.insert("id".into(), id.clone());
                obj.insert("method".into(), json!(method));
                if let Some(p) = params {
                    obj.insert("params".into(), Value::Object(p.clone()));
                }
            }
            Message::Notification { method, params } => {
                obj.insert("method".into(), json!(method));
                if let Some(p) = params {
                    obj.insert("params".into(), Value::Object(p.clone()));
                }
            }
            Message::Response { id, reply } => {
                obj.insert("id".into(), id.clone());
                match reply {
                    Reply::Result(r) => obj.insert("result".into(), r.clone()),
                    Reply::Error(e) => obj.insert("error".into(), e.clone()),
                };
            }
        }
        Value::Object(obj)
    }
}

impl Reply {
    /// The response object answering `id`.
    pub fn into_response(self, id: Id) -> Value {
        let mut obj = Map::new();
        obj.insert("jsonrpc".into(), json!("2.0"));
        obj.insert("id".into(), id);
        match self {
            Reply::Result(r) => obj.insert("result".into(), r),
            Reply::Error(e) => obj.insert("error".into(), e),
        };
        Value::Object(obj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A protocol's envelope prefix, as the registry lists them.
    const PREFIXES: &[&str] = &["_proto_"];

    #[test]
    fn classifies_and_round_trips() {
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[]}}"#,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no"}}"#,
        ] {
            let v: Value = serde_json::from_str(text).unwrap();
            let m = Message::parse(v.clone(), PREFIXES).unwrap();
            assert_eq!(m.to_value(), v, "{text}");
            let text_again: Value = serde_json::from_str(&m.to_json_string()).unwrap();
            assert_eq!(text_again, v, "{text}");
        }
    }

    #[test]
    fn envelope_fields_beside_method_move_into_params() {
        let v = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "x"}, "_proto_correlation_id": "c"});
        let Message::Request { params, .. } = Message::parse(v, PREFIXES).unwrap() else {
            panic!("a request")
        };
        assert_eq!(params.unwrap()["_proto_correlation_id"], "c");
        let twice = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"_proto_correlation_id": "d"}, "_proto_correlation_id": "c"});
        assert!(Message::parse(twice, PREFIXES).is_err());
    }

    #[test]
    fn refuses_what_is_not_json_rpc() {
        for (text, id) in [
            (r#"[]"#, Value::Null),
            (r#"{"id":1,"method":"x"}"#, json!(1)),
            (r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#, Value::Null),
            (
                r#"{"jsonrpc":"2.0","id":2,"method":"x","params":[1]}"#,
                json!(2),
            ),
            (
                r#"{"jsonrpc":"2.0","id":3,"method":"x","extra":1}"#,
                json!(3),
            ),
            (
                r#"{"jsonrpc":"2.0","id":4,"result":1,"error":{}}"#,
                json!(4),
            ),
            (r#"{"jsonrpc":"2.0","id":5}"#, json!(5)),
            (r#"{"jsonrpc":"2.0","id":6,"error":"no"}"#, json!(6)),
        ] {
            let v: Value = serde_json::from_str(text).unwrap();
            assert_eq!(Message::parse(v, PREFIXES).unwrap_err().0, id, "{text}");
        }
    }
}
