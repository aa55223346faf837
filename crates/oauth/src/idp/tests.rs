//! A provider whose documents are wrong is unavailable, never trusted: a
//! discovery document naming another issuer, a key set over the size
//! limit, a `jwks_uri` over plain HTTP off loopback. Served by a minimal
//! HTTP server on a real socket.

use std::collections::HashMap;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

/// Serves `routes(origin)` (path → JSON body) on loopback; its origin.
async fn serve(routes: impl FnOnce(&str) -> HashMap<&'static str, String>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let routes = routes(&origin);
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let routes = routes.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&head);
                let path = text.split_whitespace().nth(1).unwrap_or("/").to_owned();
                let (status, body) = match routes.get(path.as_str()) {
                    Some(b) => ("200 OK", b.clone()),
                    None => ("404 Not Found", "{}".to_owned()),
                };
                let answer = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    origin
}

/// A token whose header names RS256 and a kid (never verified here).
const TOKEN: &str = "eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.e30.c2ln";

async fn refusal(idp: &IdentityProvider) -> String {
    match idp.verify(TOKEN, "dgw", None).await {
        Err(IdpError::Unavailable { detail, .. }) => detail,
        other => panic!("not unavailable: {other:?}"),
    }
}

#[tokio::test]
async fn discovery_naming_another_issuer_is_not_trusted() {
    let origin = serve(|_| {
        HashMap::from([(
            "/.well-known/openid-configuration",
            r#"{"issuer":"https://evil.example","jwks_uri":"https://evil.example/jwks"}"#
                .to_owned(),
        )])
    })
    .await;
    let idp = IdentityProvider::new("corp", &origin, None, "dgw");
    let detail = refusal(&idp).await;
    assert!(detail.contains("names another issuer"), "{detail}");
}

#[tokio::test]
async fn a_jwks_uri_over_http_off_loopback_is_not_fetched() {
    let origin = serve(|origin| {
        HashMap::from([(
            "/.well-known/openid-configuration",
            format!(r#"{{"issuer":"{origin}","jwks_uri":"http://idp.example/jwks"}}"#),
        )])
    })
    .await;
    let idp = IdentityProvider::new("corp", &origin, None, "dgw");
    let detail = refusal(&idp).await;
    assert!(detail.contains("jwks_uri is not an https URL"), "{detail}");
}

#[tokio::test]
async fn an_oversized_key_set_is_refused_and_no_key_is_used() {
    let big = format!(
        r#"{{"keys":[{{"kty":"RSA","kid":"k1","n":"{}","e":"AQAB"}}]}}"#,
        "A".repeat(MAX_DOCUMENT_BYTES)
    );
    let origin = serve(|_| HashMap::from([("/jwks", big)])).await;
    let idp = IdentityProvider::new("corp", &origin, Some(&format!("{origin}/jwks")), "dgw");
    let detail = refusal(&idp).await;
    assert!(detail.contains("keys at"), "{detail}");
    // Within the refetch bound, still unavailable: nothing was kept.
    let again = refusal(&idp).await;
    assert!(again.contains("no keys fetched yet"), "{again}");
}
