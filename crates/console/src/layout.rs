//! The frame every page shares: a skip link, the navigation (the current
//! page marked for screen readers), the signed-in administrator with the
//! sign-out form, and the page's own content in `<main>`.

use maud::{html, Markup, DOCTYPE};

use crate::session::Session;

/// The pages, in the navigation's order: path and label.
pub const PAGES: &[(&str, &str)] = &[
    ("/ui/budgets", "Budgets"),
    ("/ui/decisions", "Decisions"),
    ("/ui/delegations", "Delegations & revocations"),
    ("/ui/audit", "Audit"),
    ("/ui/upstreams", "Upstreams & protocols"),
];

fn head(title: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            title { (title) " · dgw console" }
            link rel="stylesheet" href="/ui/assets/console.css";
            script src="/ui/assets/console.js" defer {}
        }
    }
}

/// A page of a signed-in session.
pub fn frame(session: &Session, current: &str, title: &str, content: Markup) -> Markup {
    let who = session.admin_label();
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            body {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    span.brand { "dgw console" }
                    nav aria-label="Console pages" {
                        ul {
                            @for (path, label) in PAGES {
                                li {
                                    @if *path == current {
                                        a href=(path) aria-current="page" { (label) }
                                    } @else {
                                        a href=(path) { (label) }
                                    }
                                }
                            }
                        }
                    }
                    form.signout method="post" action="/ui/signout" {
                        input type="hidden" name="csrf" value=(session.csrf);
                        span.who { "Signed in as " (who) }
                        button type="submit" { "Sign out" }
                    }
                }
                main #main tabindex="-1" {
                    h1 { (title) }
                    (content)
                }
            }
        }
    }
}

/// A page without a session (sign-in, refusals).
pub fn bare(title: &str, content: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            body {
                main #main.narrow {
                    h1 { (title) }
                    (content)
                }
            }
        }
    }
}

/// An operator-facing message block (`role="alert"` for errors).
pub fn notice(kind: &str, text: &str) -> Markup {
    html! {
        @if kind == "error" {
            p.notice.error role="alert" { (text) }
        } @else {
            p.notice role="status" { (text) }
        }
    }
}
