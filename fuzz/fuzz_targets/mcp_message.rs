//! An MCP message as a client or an upstream sends it: JSON, then the
//! typed message, then back to JSON. Must never panic.
#![no_main]

use delegate_gateway::mcp::message::Message;
use libfuzzer_sys::fuzz_target;

/// An envelope prefix, as a registered protocol claims one (the parser
/// treats every prefix alike).
const PREFIXES: &[&str] = &["_proto_"];

fuzz_target!(|data: &[u8]| {
    let Ok(value) = delegateos::canonical::parse_strict(data, 1 << 20) else {
        return;
    };
    if let Ok(message) = Message::parse(value, PREFIXES) {
        let text = message.to_json_string();
        let again: serde_json::Value =
            serde_json::from_str(&text).expect("a parsed message serializes to JSON");
        assert!(
            Message::parse(again, PREFIXES).is_ok(),
            "a serialized message parses"
        );
        let _ = message.is_initialize();
    }
});
