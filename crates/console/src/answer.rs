//! The console's answers: every one with the same strict headers (a CSP
//! allowing only the console's own script and style, no framing, no
//! sniffing, no caching, no referrer to other sites), HTML pages, redirects and the
//! session cookie.

use bytes::Bytes;
use dgw_front_http::UiAnswer;
use maud::Markup;

/// Script and style only from the console itself (no inline script, no
/// CDN); forms post only to it; never framed.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The session cookie's name.
pub const COOKIE: &str = "dgw_console";

fn with_headers(status: u16, content_type: &str, body: Bytes) -> UiAnswer {
    UiAnswer {
        status,
        headers: vec![
            ("content-type", content_type.to_owned()),
            ("content-security-policy", CSP.to_owned()),
            ("x-frame-options", "DENY".to_owned()),
            ("x-content-type-options", "nosniff".to_owned()),
            // Not `no-referrer`: under it browsers post forms with
            // `Origin: null`, which the same-origin check refuses.
            ("referrer-policy", "same-origin".to_owned()),
            ("cache-control", "no-store".to_owned()),
            ("cross-origin-opener-policy", "same-origin".to_owned()),
        ],
        body,
    }
}

/// An HTML page.
pub fn page(status: u16, markup: Markup) -> UiAnswer {
    with_headers(
        status,
        "text/html; charset=utf-8",
        Bytes::from(markup.into_string()),
    )
}

/// A static asset compiled into the binary.
pub fn asset(content_type: &str, body: &'static [u8]) -> UiAnswer {
    with_headers(200, content_type, Bytes::from_static(body))
}

/// Plain text (exports, refusals before any page).
pub fn text(status: u16, content_type: &str, body: impl Into<Bytes>) -> UiAnswer {
    with_headers(status, content_type, body.into())
}

/// `303 See Other` to `to` (a console path).
pub fn redirect(to: &str) -> UiAnswer {
    let mut a = with_headers(303, "text/plain; charset=utf-8", Bytes::new());
    a.headers.push(("location", to.to_owned()));
    a
}

/// The cookie carrying a session's secret: not readable from script, sent
/// only to the console's own site, only over TLS when the listener is TLS.
pub fn session_cookie(secret: &str, max_age_secs: u64, tls: bool) -> String {
    format!(
        "{COOKIE}={secret}; Path=/ui; Max-Age={max_age_secs}; HttpOnly; SameSite=Strict{}",
        if tls { "; Secure" } else { "" }
    )
}

/// The cookie that clears it.
pub fn cleared_cookie(tls: bool) -> String {
    session_cookie("", 0, tls)
}

/// The session secret in a `Cookie` header.
pub fn cookie_secret(header: Option<&str>) -> Option<&str> {
    header?
        .split(';')
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_is_http_only_strict_and_secure_over_tls() {
        let c = session_cookie("s", 900, true);
        assert!(c.contains("HttpOnly") && c.contains("SameSite=Strict") && c.contains("Secure"));
        assert!(!session_cookie("s", 900, false).contains("Secure"));
        assert_eq!(cookie_secret(Some("a=b; dgw_console=xyz")), Some("xyz"));
        assert_eq!(cookie_secret(Some("dgw_consolex=1")), None);
        assert!(CSP.contains("frame-ancestors 'none'") && !CSP.contains("unsafe-inline"));
    }
}
