//! Signing in to the operator console at `/ui` and reading its pages, for
//! the tests of what the console shows (`tests/console.rs`, and each
//! protocol's panel in its own tests).

use super::*;

/// Signs in with the admin `secret` from the console's own origin: the
/// session cookie's value.
pub fn sign_in(addr: &str, secret: &str) -> String {
    let own = format!("http://{addr}");
    let (status, headers, body) = http_exchange(
        addr,
        "POST",
        "/ui/signin",
        &[
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Origin", &own),
        ],
        format!("token={secret}").as_bytes(),
    );
    assert_eq!(status, 303, "{}", String::from_utf8_lossy(&body));
    let cookie = headers
        .iter()
        .find(|(k, _)| k == "set-cookie")
        .map(|(_, v)| v.as_str())
        .expect("a session cookie");
    cookie
        .strip_prefix("dgw_console=")
        .and_then(|c| c.split(';').next())
        .unwrap()
        .to_owned()
}

/// A console page of the session `cookie`: its status and HTML.
pub fn page(addr: &str, path: &str, cookie: &str) -> (u16, String) {
    let line = format!("dgw_console={cookie}");
    let (status, _, body) = http_exchange(addr, "GET", path, &[("Cookie", &line)], b"");
    (status, String::from_utf8(body).unwrap())
}

/// The rows of the panel titled `title` on the "Upstreams & protocols"
/// page, as `(label, value)`.
pub fn panel(addr: &str, cookie: &str, title: &str) -> Vec<(String, String)> {
    let (status, html) = page(addr, "/ui/upstreams", cookie);
    assert_eq!(status, 200);
    let start = html
        .find(&format!("<h3>{title}</h3>"))
        .unwrap_or_else(|| panic!("no {title} panel: {html}"));
    let section = &html[start..start + html[start..].find("</section>").unwrap()];
    section
        .split("<dt>")
        .skip(1)
        .map(|item| {
            let (label, rest) = item.split_once("</dt><dd>").unwrap();
            let value = rest.split("</dd>").next().unwrap();
            (label.to_owned(), value.to_owned())
        })
        .collect()
}
