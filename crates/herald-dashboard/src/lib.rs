//! herald's web dashboard at `/dashboard`: the inbox's events (search, replay,
//! cancel), the runs of this process (live events, approvals), the stored sessions,
//! deliveries, routes and subscriptions, and health. Static assets are embedded (no
//! CDN); every page is same-origin only, under its own Content-Security-Policy, behind
//! a login (the API key or the dashboard token) that gives a session cookie and a
//! session secret, both needed by every API call.
//!
//! The dashboard is served on the API listener, or on the webhook listener when the
//! API is off, and never without a credential on a non-loopback address.

mod api;
mod assets;
mod auth;
mod headers;
mod history;
mod login_budget;
mod runs;
pub mod token;

use herald_admin::InboxView;
use herald_session::Host;
use std::path::PathBuf;
use std::sync::Arc;

pub use auth::Credentials;

/// What the dashboard shows and acts on.
pub struct Dashboard {
    /// The webhook front door (its inbox, routes and subscriptions), when it runs.
    inbox: Option<InboxView>,
    /// The hosts whose runs and sessions are shown (webhook runs, the API's).
    hosts: Vec<Arc<Host>>,
    /// Where subscriptions are written, and the names config.yaml takes.
    subscriptions_file: PathBuf,
    config_routes: Vec<String>,
    /// Where a subscription's URL points (`http://host:port`).
    webhook_base: String,
    auth: auth::Auth,
    loopback: bool,
    history: history::DepthHistory,
}

/// How a dashboard is made.
pub struct DashboardParts {
    pub inbox: Option<InboxView>,
    pub hosts: Vec<Arc<Host>>,
    pub subscriptions_file: PathBuf,
    pub config_routes: Vec<String>,
    pub webhook_base: String,
    pub credentials: Credentials,
    /// The listener binds loopback only: host names other than loopback ones are
    /// refused (DNS rebinding).
    pub loopback: bool,
}

impl Dashboard {
    /// The dashboard, with its background tasks started (the inbox depth sampled each
    /// minute, the search index kept up).
    pub fn start(parts: DashboardParts) -> Arc<Dashboard> {
        let dash = Arc::new(Dashboard {
            inbox: parts.inbox,
            hosts: parts.hosts,
            subscriptions_file: parts.subscriptions_file,
            config_routes: parts.config_routes,
            webhook_base: parts.webhook_base,
            auth: auth::Auth::new(parts.credentials),
            loopback: parts.loopback,
            history: history::DepthHistory::default(),
        });
        if let Some(gw) = &dash.inbox {
            history::spawn_sampler(Arc::downgrade(&dash), gw.clone());
        }
        dash
    }

    /// Starts keeping the search index up with the inbox (from the first login on: a
    /// gateway whose dashboard nobody uses pays nothing for it; the store starts it once).
    pub(crate) fn keep_search_index(&self) {
        if let Some(gw) = &self.inbox {
            gw.store.keep_search_index();
        }
    }
}

/// The `/dashboard` routes.
pub fn router(dash: Arc<Dashboard>) -> axum::Router {
    let api = api::router(dash.clone());
    let pages = assets::router(dash.clone());
    let login = auth::router(dash.clone());
    let all = headers::secured(pages.merge(login).merge(api));
    match dash.loopback {
        true => herald_http::loopback_host::loopback_names_only(
            all,
            herald_http::loopback_host::Checked::All,
        ),
        false => all,
    }
}
