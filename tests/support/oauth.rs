//! The token endpoint as OAuth clients call it (issue 35): a raw form POST
//! to `/oauth/token`, HTTP Basic when asked.

use std::io::{Read, Write};

use serde_json::Value;

use super::{del, key_file, root_token_for, Gateway};

/// dgw's `public_url` in the OAuth tests.
pub const PUBLIC: &str = "https://dgw.example";
/// Client `agent`'s secret.
pub const SECRET: &str = "s3cret-of-the-agent-client";
/// The administrator's secret (`[[admin.tokens]]` holds its digest).
pub const ADMIN: &str = "the-admin-secret-of-this-test";

/// The gateway's key (seed 9) and tenant `root`'s issuing delegation to it
/// for `caps` (100,000 microcents, an hour), as files in `dir`: the key
/// file's path, the delegation's.
pub fn issuing_delegation(
    dir: &std::path::Path,
    root: &delegateos::Keypair,
    caps: &[&str],
) -> (std::path::PathBuf, std::path::PathBuf) {
    let (gateway_key, gateway) = key_file(dir, "gateway", 9);
    let issuing = dir.join("acme-issuing.dct");
    std::fs::write(
        &issuing,
        root_token_for(root, &gateway, caps, 100_000, 3600, del(1)).encode(),
    )
    .unwrap();
    (gateway_key, issuing)
}

/// The hex SHA-256 of `secret`, as `[[admin.tokens]]` holds it.
pub fn sha256_hex(secret: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(secret.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// POSTs `body` to `/oauth/token` as `content_type`, with HTTP Basic
/// `basic` when given: (status, headers, answer).
pub fn token_request(
    gw: &Gateway,
    content_type: &str,
    basic: Option<(&str, &str)>,
    body: &str,
) -> (u16, String, Value) {
    let mut stream = std::net::TcpStream::connect(&gw.addr).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    let auth = basic
        .map(|(id, secret)| {
            // Standard base64 with padding (RFC 7617), from base64url.
            let mut pair = delegateos::base64url::encode(format!("{id}:{secret}").as_bytes())
                .replace('-', "+")
                .replace('_', "/");
            while !pair.len().is_multiple_of(4) {
                pair.push('=');
            }
            format!("Authorization: Basic {pair}\r\n")
        })
        .unwrap_or_default();
    let head = format!(
        "POST /oauth/token HTTP/1.1\r\nHost: {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n{auth}\r\n",
        gw.addr,
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let text = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (
        status,
        head.to_ascii_lowercase(),
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

pub const FORM: &str = "application/x-www-form-urlencoded";
