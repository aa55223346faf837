//! Sign-in: an admin token, or the client certificate the connection
//! presented (mTLS) when its subject is an administrator's.

use dgw_front_http::{UiAnswer, UiRequest};
use maud::html;

use crate::answer::page;
use crate::layout;

/// The sign-in form, with `error` when the last attempt was refused.
pub fn form(req: &UiRequest, error: Option<&str>) -> UiAnswer {
    let status = if error.is_some() { 401 } else { 200 };
    page(
        status,
        layout::bare(
            "Sign in to the dgw console",
            html! {
                @if let Some(e) = error { (layout::notice("error", e)) }
                form method="post" action="/ui/signin" {
                    label for="token" { "Admin token" }
                    input #token type="password" name="token" autocomplete="off" spellcheck="false" autofocus;
                    p.hint { "The secret that " code { "dgw admin-token new" } " printed; only its SHA-256 is in the configuration." }
                    button type="submit" { "Sign in" }
                }
                @if req.subject.is_some() {
                    form method="post" action="/ui/signin" {
                        input type="hidden" name="certificate" value="1";
                        button type="submit" { "Sign in with your client certificate" }
                    }
                }
            },
        ),
    )
}
