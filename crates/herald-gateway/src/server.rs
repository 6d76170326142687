//! The HTTP surface (spec §3): the axum router (binding and serving are `herald-http`'s).

use crate::answer::Answer;
use crate::pipeline::Gateway;
use axum::Router;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use std::sync::Arc;

/// Builds the router over a shared gateway.
pub fn router(gateway: Arc<Gateway>) -> Router {
    Router::new()
        .route("/health", get(health).head(health))
        .route("/health/detailed", get(health_detailed))
        .route("/webhooks/{route}", post(webhook))
        .route("/p/{profile}/webhooks/{route}", post(profiled_webhook))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(gateway)
}

async fn health() -> Answer {
    Answer::health()
}

/// The inbox's counts per state (the same as `herald inbox list` shows).
async fn health_detailed(State(gw): State<Arc<Gateway>>) -> Answer {
    match gw.inbox_counts().await {
        Ok(counts) => Answer::health_detailed(&counts),
        Err(e) => {
            tracing::error!(error = %e, "health: cannot read the inbox");
            Answer::health_degraded()
        }
    }
}

async fn not_found() -> Answer {
    Answer::not_found()
}

async fn method_not_allowed() -> Answer {
    Answer::method_not_allowed()
}

async fn webhook(
    State(gw): State<Arc<Gateway>>,
    route: Result<Path<String>, PathRejection>,
    request: Request,
) -> Response {
    let Ok(Path(route)) = route else {
        // A segment that does not percent-decode to UTF-8 cannot name a route.
        return Answer::not_found().into_response();
    };
    let (parts, body): (_, Body) = request.into_parts();
    gw.handle(&route, None, &parts.headers, parts.uri.query(), body)
        .await
        .into_response()
}

async fn profiled_webhook(
    State(gw): State<Arc<Gateway>>,
    params: Result<Path<(String, String)>, PathRejection>,
    request: Request,
) -> Response {
    let Ok(Path((profile, route))) = params else {
        return Answer::not_found().into_response();
    };
    let (parts, body): (_, Body) = request.into_parts();
    let profile = gw.multiplex_profiles.then_some(profile.as_str());
    gw.handle(&route, profile, &parts.headers, parts.uri.query(), body)
        .await
        .into_response()
}
