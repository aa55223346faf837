//! The operator console at `/ui` (`[console] enabled = true`): pages an
//! operator reads instead of writing curl — who is spending what, what was
//! denied and why, and cutting an agent off. Server-rendered HTML (maud:
//! every value escaped unless marked), a small script and style compiled
//! into the binary, no CDN.
//!
//! Sign-in takes an admin token (or a listed client certificate subject
//! over mTLS) and opens a session kept in the state backend
//! ([`session`]). Every action is a form post carrying the session's CSRF
//! token from the console's own origin; every page and asset goes out
//! with a strict Content-Security-Policy and `frame-ancestors 'none'`.
//! Protocols contribute their own panel through their registration
//! (`dgw_protocol::Running::panel`): the console names none of them.

mod answer;
mod form;
mod layout;
mod pages;
pub mod session;
mod watch;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use dgw_core::caller::{Admins, Authenticator, Caller};
use dgw_core::gatekeeper::Gatekeeper;
use dgw_core::state::AuditSink;
use dgw_front_http::{Ui, UiAnswer, UiRequest};
use dgw_front_mcp::proxy::McpProxy;
use dgw_protocol::Running;
use maud::html;

use answer::{page, redirect, text};
use form::Form;
use session::{Session, Sessions};
use watch::Watch;

/// The tamper-evident audit log the audit page reads, when one is kept.
#[derive(Clone)]
pub struct AuditLogFiles {
    pub dir: PathBuf,
    /// Its name in the state store (its anchor's key).
    pub name: String,
    pub gateway: delegateos::PrincipalId,
}

/// What the console reads and acts on.
pub struct Parts {
    pub gate: Arc<Gatekeeper>,
    pub records: Arc<dyn dgw_core::state::RecordStore>,
    pub delegations: Arc<dyn dgw_core::state::DelegationStore>,
    pub audit: Arc<dyn AuditSink>,
    /// Recognises admin tokens and certificate subjects (the listener's).
    pub auth: Authenticator,
    pub admins: Admins,
    pub proxy: Arc<McpProxy>,
    /// The running protocol modules, by section, for their panels.
    pub modules: Vec<(&'static str, Arc<dyn Running>)>,
    pub audit_log: Option<AuditLogFiles>,
    pub session_ttl: Duration,
}

/// The console.
pub struct Console {
    parts: Parts,
    sessions: Arc<Sessions>,
    watch: Arc<Watch>,
}

impl Console {
    /// A console over `parts`; sessions end when the administrators are
    /// reloaded.
    pub fn new(parts: Parts) -> Arc<Self> {
        let sessions = Arc::new(Sessions::new(
            parts.records.clone(),
            parts.session_ttl,
            parts.admins.changes(),
        ));
        sessions.watch_admins(parts.admins.changes());
        let watch = Arc::new(Watch::default());
        watch.follow(&parts.gate);
        let console = Arc::new(Self {
            parts,
            sessions,
            watch,
        });
        console.sample_budgets();
        console
    }

    /// Samples every budget node's spend every 30 seconds, so the spend
    /// rates are known before anyone opens the page.
    fn sample_budgets(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(30));
            loop {
                tick.tick().await;
                let Some(console) = weak.upgrade() else {
                    return;
                };
                if let Err(e) = pages::budgets::trees(&console.parts, &console.watch).await {
                    tracing::debug!(error = %e, "console: sampling the budgets failed");
                }
            }
        });
    }

    async fn route(&self, req: UiRequest) -> UiAnswer {
        let path = req.path.trim_end_matches('/');
        match (req.method.as_str(), path) {
            ("GET", "/ui/assets/console.css") => {
                return answer::asset(
                    "text/css; charset=utf-8",
                    include_bytes!("../assets/console.css"),
                )
            }
            ("GET", "/ui/assets/console.js") => {
                return answer::asset(
                    "text/javascript; charset=utf-8",
                    include_bytes!("../assets/console.js"),
                )
            }
            _ => {}
        }
        if req.method == "POST" {
            if let Err(why) = same_origin(&req) {
                return page(403, layout::bare("Refused", layout::notice("error", &why)));
            }
        }
        let session = match answer::cookie_secret(req.cookie.as_deref()) {
            Some(secret) => match self.sessions.find(secret).await {
                Ok(s) => s,
                Err(e) => return unavailable(&e.to_string()),
            },
            None => None,
        };
        match (req.method.as_str(), path, session) {
            ("GET", "/ui/signin", Some(_)) => redirect("/ui/budgets"),
            ("GET", "/ui/signin", None) => pages::signin::form(&req, None),
            ("POST", "/ui/signin", _) => self.sign_in(&req).await,
            (_, _, None) => redirect("/ui/signin"),
            ("GET", "/ui" | "", Some(_)) => redirect("/ui/budgets"),
            ("POST", _, Some(s)) => {
                let Some(form) = Form::parse(req.content_type.as_deref(), &req.body) else {
                    return page(
                        415,
                        layout::bare(
                            "Refused",
                            layout::notice("error", "a console action is a form post"),
                        ),
                    );
                };
                if !form.get("csrf").is_some_and(|c| s.csrf_matches(c)) {
                    return page(
                        403,
                        layout::bare(
                            "Refused",
                            layout::notice("error", "this form is not from your console session (CSRF token missing or wrong)"),
                        ),
                    );
                }
                self.act(&req, path, &s, &form).await
            }
            ("GET", _, Some(s)) => self.show(&req, path, &s).await,
            (_, _, Some(_)) => text(405, "text/plain; charset=utf-8", "method not allowed\n"),
        }
    }

    /// A page of a signed-in session.
    async fn show(&self, req: &UiRequest, path: &str, s: &Session) -> UiAnswer {
        let query = Form::query(req.query.as_deref());
        match path {
            "/ui/budgets" => pages::budgets::show(&self.parts, &self.watch, s).await,
            "/ui/decisions" => pages::decisions::show(&self.parts, &self.watch, s, &query).await,
            "/ui/delegations" => pages::delegations::show(&self.parts, s, &query).await,
            "/ui/audit" => pages::audit::show(&self.parts, s).await,
            "/ui/audit/export" => pages::audit::export(&self.parts, &query).await,
            "/ui/upstreams" => pages::upstreams::show(&self.parts, s).await,
            _ => page(
                404,
                layout::frame(
                    s,
                    "",
                    "Not found",
                    html! { p { "No console page is at this address." } },
                ),
            ),
        }
    }

    /// A form post of a signed-in session (CSRF token checked).
    async fn act(&self, req: &UiRequest, path: &str, s: &Session, form: &Form) -> UiAnswer {
        match path {
            "/ui/signout" => {
                if let Err(e) = self.sessions.close(s).await {
                    return unavailable(&e.to_string());
                }
                let mut a = redirect("/ui/signin");
                a.headers
                    .push(("set-cookie", answer::cleared_cookie(req.tls)));
                a
            }
            "/ui/delegations/revoke" => {
                pages::delegations::revoke(&self.parts, s, &Caller::admin(s.admin.clone()), form)
                    .await
            }
            _ => page(
                404,
                layout::frame(
                    s,
                    "",
                    "Not found",
                    html! { p { "No console action is at this address." } },
                ),
            ),
        }
    }

    async fn sign_in(&self, req: &UiRequest) -> UiAnswer {
        let form = Form::parse(req.content_type.as_deref(), &req.body).unwrap_or_default();
        let caller = match form.get("token") {
            Some(secret) => self.parts.auth.caller(
                Some(format!("Bearer {secret}").as_bytes()),
                req.subject.as_deref(),
            ),
            None => self.parts.auth.caller(None, req.subject.as_deref()),
        };
        let admin = match caller {
            Ok(c) if c.is_authenticated_admin() => c.admin_kind().cloned(),
            _ => None,
        };
        let Some(admin) = admin else {
            tracing::info!("console sign-in refused");
            return pages::signin::form(req, Some("That is not an admin token of this gateway (or your certificate is not an admin's)."));
        };
        match self.sessions.open(&admin).await {
            Ok((secret, _)) => {
                self.parts.gate.trail().event(
                    "console_signin",
                    serde_json::json!({"by": Caller::admin(admin).admin_name()}),
                );
                let mut a = redirect("/ui/budgets");
                a.headers.push((
                    "set-cookie",
                    answer::session_cookie(&secret, self.sessions.ttl().as_secs(), req.tls),
                ));
                a
            }
            Err(e) => unavailable(&e.to_string()),
        }
    }
}

/// A post must come from the console's own origin: `Origin` present and
/// equal to this listener's scheme and `Host`, and the browser's
/// `Sec-Fetch-Site`, when sent, `same-origin`.
fn same_origin(req: &UiRequest) -> Result<(), String> {
    let scheme = if req.tls { "https" } else { "http" };
    let own = format!("{scheme}://{}", req.host.as_deref().unwrap_or_default());
    match req.origin.as_deref() {
        Some(o) if o.eq_ignore_ascii_case(&own) => {}
        Some(_) => return Err("a console form posted from another site is refused".into()),
        None => return Err("a console form post must carry its Origin".into()),
    }
    match req.fetch_site.as_deref() {
        None | Some("same-origin") => Ok(()),
        Some(_) => Err("a console form posted from another site is refused".into()),
    }
}

fn unavailable(why: &str) -> UiAnswer {
    tracing::error!(error = %why, "console: state unavailable");
    page(
        503,
        layout::bare(
            "Unavailable",
            layout::notice("error", "The gateway's state cannot be reached; try again."),
        ),
    )
}

impl Ui for Console {
    fn serve(&self, request: UiRequest) -> Pin<Box<dyn Future<Output = UiAnswer> + Send + '_>> {
        Box::pin(self.route(request))
    }
}
