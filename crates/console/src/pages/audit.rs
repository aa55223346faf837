//! Audit: the log's last seal (the anchor kept in the state store), the
//! verification of the chain up to it, and an export for a period.

use dgw_audit_log::{AuditAnchor, Expect};
use dgw_front_http::UiAnswer;
use maud::html;

use crate::answer::{page, text};
use crate::form::Form;
use crate::layout;
use crate::session::Session;
use crate::Parts;

/// The page.
pub async fn show(parts: &Parts, s: &Session) -> UiAnswer {
    let Some(log) = parts.audit_log.clone() else {
        return page(
            200,
            layout::frame(
                s,
                "/ui/audit",
                "Audit",
                html! {
                    p { "This gateway keeps no tamper-evident audit log: set " code { "[audit] dir" } " to keep one." }
                },
            ),
        );
    };
    let anchor: Option<AuditAnchor> = parts.audit.anchor(&log.name).await.ok().flatten();
    let expect = anchor.clone().map_or(Expect::Chain, Expect::Anchor);
    let (dir, gateway) = (log.dir.clone(), log.gateway.clone());
    let report =
        tokio::task::spawn_blocking(move || dgw_audit_log::verify(&dir, &gateway, &expect))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()));
    let content = html! {
        h2 { "Last seal" }
        @match &anchor {
            Some(a) => p { "Sequence " (a.seq) ", head " code { (a.head) } },
            None => p { "No seal recorded yet." },
        }
        h2 { "Verification" }
        @match &report {
            Ok(r) if r.problems.is_empty() => {
                p.allowed role="status" { "Verified: " (r.records) " records in " (r.segments) " segment(s), sealed through " (r.sealed_through.map(|x| x.to_string()).unwrap_or_else(|| "none".into())) "; " (r.unsealed()) " not sealed yet." }
            }
            Ok(r) => {
                p.denied role="alert" { "The log does not verify:" }
                ul { @for p in &r.problems { li { code { (p.at) } ": " (p.message) } } }
            }
            Err(e) => p.denied role="alert" { "The log cannot be read: " (e) },
        }
        h2 { "Export" }
        form method="get" action="/ui/audit/export" {
            label for="since" { "From (UTC, RFC 3339; empty: the start)" }
            input #since type="text" name="since" placeholder="2026-11-28T00:00:00Z";
            label for="until" { "To (empty: now)" }
            input #until type="text" name="until";
            button type="submit" { "Export JSON lines" }
        }
    };
    page(200, layout::frame(s, "/ui/audit", "Audit", content))
}

fn ms(text: Option<&str>) -> Result<Option<i128>, String> {
    let Some(t) = text else { return Ok(None) };
    time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
        .map(|t| Some(t.unix_timestamp_nanos() / 1_000_000))
        .map_err(|_| format!("{t:?} is not an RFC 3339 time such as 2026-11-28T00:00:00Z"))
}

/// The export: the records of the period as JSON lines, as
/// `dgw audit export` writes them.
pub async fn export(parts: &Parts, q: &Form) -> UiAnswer {
    let Some(log) = parts.audit_log.clone() else {
        return text(404, "text/plain; charset=utf-8", "no audit log is kept\n");
    };
    let (since, until) = match (ms(q.get("since")), ms(q.get("until"))) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            return text(400, "text/plain; charset=utf-8", format!("{e}\n"))
        }
    };
    let out = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        dgw_audit_log::export(&log.dir, since, until, &mut out).map(|_| out)
    })
    .await;
    match out {
        Ok(Ok(bytes)) => {
            let mut a = text(200, "application/x-ndjson", bytes);
            a.headers.push((
                "content-disposition",
                "attachment; filename=\"dgw-audit.jsonl\"".to_owned(),
            ));
            a
        }
        _ => text(
            500,
            "text/plain; charset=utf-8",
            "the audit log cannot be read\n",
        ),
    }
}
