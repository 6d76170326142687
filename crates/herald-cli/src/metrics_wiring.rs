//! `metrics:` applied to a listener: `/metrics` served beside the door's own routes.

use herald_config::metrics_settings::MetricsSettings;

/// `app` with `/metrics` when `metrics.enabled`.
pub fn with_metrics(app: axum::Router, settings: &MetricsSettings) -> axum::Router {
    if settings.enabled {
        app.merge(herald_metrics::router(settings.token.clone()))
    } else {
        app
    }
}
