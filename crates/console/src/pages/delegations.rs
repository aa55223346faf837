//! Delegations and revocations: look up a token (its blocks, each with its
//! delegation and revocation ID), a recorded delegation by ID, or a
//! revocation ID; revoke a block after a confirmation naming what it cuts
//! off. The revocation is the one `dgw/revoke` makes (recorded with the
//! administrator's name, audited the same way).

use dgw_core::caller::Caller;
use dgw_front_http::UiAnswer;
use maud::{html, Markup};

use crate::answer::page;
use crate::form::Form;
use crate::layout;
use crate::session::Session;
use crate::Parts;

/// One block of a token: its level, delegation and revocation ID.
struct Block {
    level: usize,
    delegation: String,
    revocation: String,
}

fn blocks(token: &str) -> Result<Vec<Block>, String> {
    let dct = delegateos::Dct::decode(token).map_err(|e| e.to_string())?;
    let t = dct.token();
    let delegations = std::iter::once(t.authority.delegation_id.as_str().to_owned()).chain(
        t.attenuations
            .iter()
            .map(|a| a.delegation_id.as_str().to_owned()),
    );
    Ok(delegations
        .zip(dct.revocation_ids())
        .enumerate()
        .map(|(level, (delegation, revocation))| Block {
            level,
            delegation,
            revocation,
        })
        .collect())
}

fn lookup_forms(query: &Form) -> Markup {
    html! {
        form.lookup method="get" action="/ui/delegations" {
            label for="id" { "Delegation ID or revocation ID" }
            input #id type="text" name="id" value=(query.get("id").unwrap_or("")) spellcheck="false";
            button type="submit" { "Look up" }
        }
        form.lookup method="get" action="/ui/delegations" {
            label for="token" { "Or paste a token (DCT)" }
            textarea #token name="token" rows="3" spellcheck="false" {}
            button type="submit" { "Look up token" }
        }
    }
}

fn revoke_button(s: &Session, revocation: &str, delegation: &str) -> Markup {
    html! {
        form.inline method="post" action="/ui/delegations/revoke" {
            input type="hidden" name="csrf" value=(s.csrf);
            input type="hidden" name="revocation" value=(revocation);
            input type="hidden" name="delegation" value=(delegation);
            button.danger type="submit" { "Revoke…" span.sr { " delegation " (delegation) } }
        }
    }
}

/// The page: the lookup forms and what was looked up.
pub async fn show(parts: &Parts, s: &Session, query: &Form) -> UiAnswer {
    let caller = Caller::admin(s.admin.clone());
    let found = if let Some(token) = query.get("token") {
        match blocks(token) {
            Ok(bs) => html! {
                h2 { "Token" }
                table {
                    caption { "Its blocks, root first" }
                    thead { tr { th scope="col" { "Level" } th scope="col" { "Delegation" } th scope="col" { "Revocation ID" } th scope="col" { "Action" } } }
                    tbody {
                        @for b in &bs {
                            tr {
                                td { (b.level) }
                                td { code { (b.delegation) } }
                                td { code { (b.revocation) } }
                                td { (revoke_button(s, &b.revocation, &b.delegation)) }
                            }
                        }
                    }
                }
            },
            Err(e) => layout::notice("error", &format!("That is not a token dgw reads: {e}")),
        }
    } else if let Some(id) = query.get("id") {
        let record = match delegateos::DelegationId::parse(id) {
            Ok(did) => parts.gate.delegation(&caller, &did).await.ok(),
            Err(_) => None,
        };
        let token_blocks = match &record {
            Some(_) => match delegateos::DelegationId::parse(id) {
                Ok(did) => parts
                    .delegations
                    .get(&did)
                    .await
                    .ok()
                    .flatten()
                    .and_then(|d| blocks(&d.dct.token).ok()),
                Err(_) => None,
            },
            None => None,
        };
        let carrying = parts
            .delegations
            .carrying_block(id)
            .await
            .unwrap_or_default();
        html! {
            @if let Some(d) = &record {
                h2 { "Delegation " code { (d.id.as_str()) } }
                dl {
                    dt { "Status" } dd { (format!("{:?}", d.status).to_lowercase()) }
                    dt { "From" } dd { code { (d.from.to_string()) } }
                    dt { "To" } dd { code { (d.to.to_string()) } }
                    dt { "Depth" } dd { (d.depth) }
                    @if let Some(b) = d.budget_microcents { dt { "Budget" } dd { (crate::pages::money(b)) } }
                }
                @if let Some(bs) = token_blocks.as_ref().and_then(|bs| bs.last()) {
                    (revoke_button(s, &bs.revocation, &bs.delegation))
                }
            } @else if !carrying.is_empty() {
                h2 { "Revocation ID " code { (id) } }
                p { "Carried by " (carrying.len()) " recorded delegation(s)." }
                (revoke_button(s, id, carrying.first().map(|d| d.as_str()).unwrap_or(id)))
            } @else {
                (layout::notice("status", "No delegation recorded here has that ID. A token a tenant root issued directly is not recorded: paste the token instead, or revoke by its revocation ID."))
                @if id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
                    (revoke_button(s, id, id))
                }
            }
        }
    } else {
        html! {}
    };
    page(
        200,
        layout::frame(
            s,
            "/ui/delegations",
            "Delegations & revocations",
            html! { (lookup_forms(query)) (found) },
        ),
    )
}

/// Revoking: first a confirmation naming what it cuts off, then (posted
/// again with `confirm`) the revocation itself.
pub async fn revoke(parts: &Parts, s: &Session, caller: &Caller, form: &Form) -> UiAnswer {
    let Some(revocation) = form.get("revocation") else {
        return page(
            400,
            layout::frame(
                s,
                "/ui/delegations",
                "Revoke",
                layout::notice("error", "Which block to revoke is missing."),
            ),
        );
    };
    let delegation = form.get("delegation").unwrap_or(revocation);
    if form.get("confirm") != Some("yes") {
        let carrying = parts
            .delegations
            .carrying_block(revocation)
            .await
            .unwrap_or_default();
        let content = html! {
            p role="alert" {
                "Revoking cuts off delegation " code { (delegation) }
                " and every delegation attenuated from it: each call under them is denied from now on, on every replica. "
                @if !carrying.is_empty() {
                    (carrying.len()) " recorded delegation(s) carry this block and will be marked revoked. "
                }
                "This cannot be undone."
            }
            form method="post" action="/ui/delegations/revoke" {
                input type="hidden" name="csrf" value=(s.csrf);
                input type="hidden" name="revocation" value=(revocation);
                input type="hidden" name="delegation" value=(delegation);
                input type="hidden" name="confirm" value="yes";
                button.danger type="submit" { "Yes, revoke " (delegation) }
                " "
                a href="/ui/delegations" { "Cancel" }
            }
        };
        return page(
            200,
            layout::frame(s, "/ui/delegations", "Confirm revocation", content),
        );
    }
    match parts.gate.revoke_by_admin(caller, revocation).await {
        Ok(r) => {
            let content = html! {
                (layout::notice("status", &format!(
                    "Revoked {delegation}{}.",
                    if r.newly_recorded { "" } else { " (it was already revoked)" }
                )))
                @if !r.revoked_delegations.is_empty() {
                    p { "Recorded delegations now revoked:" }
                    ul { @for d in &r.revoked_delegations { li { code { (d.as_str()) } } } }
                }
                p { a href="/ui/delegations" { "Look up another" } }
            };
            page(200, layout::frame(s, "/ui/delegations", "Revoked", content))
        }
        Err(e) => page(
            400,
            layout::frame(
                s,
                "/ui/delegations",
                "Revoke",
                layout::notice("error", &format!("Not revoked: {e}")),
            ),
        ),
    }
}
