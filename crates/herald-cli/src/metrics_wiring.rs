//! `metrics:` applied to a listener: `/metrics` served beside the door's own routes.

use herald_config::metrics_settings::MetricsSettings;
use herald_http::loopback_host::{Checked, loopback_names_only};

/// `app` with `/metrics` when `metrics.enabled`. On a listener bound to loopback,
/// `/metrics` answers only to loopback host names: a page of another site whose name
/// points at 127.0.0.1 (DNS rebinding) is refused, as the dashboard refuses it.
pub fn with_metrics(app: axum::Router, settings: &MetricsSettings, loopback: bool) -> axum::Router {
    if !settings.enabled {
        return app;
    }
    let metrics = herald_metrics::router(settings.token.clone());
    match loopback {
        true => app.merge(loopback_names_only(metrics, Checked::All)),
        false => app.merge(metrics),
    }
}

/// `app` whose `/health/detailed` answers only to loopback host names when the
/// listener is bound to loopback (as `/metrics` and the dashboard do).
pub fn health_guarded(app: axum::Router, loopback: bool) -> axum::Router {
    match loopback {
        true => loopback_names_only(app, Checked::Paths(&["/health/detailed"])),
        false => app,
    }
}
