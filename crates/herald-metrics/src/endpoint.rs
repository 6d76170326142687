//! `GET /metrics`: every series in the OpenMetrics text format, behind
//! `Authorization: Bearer <metrics.token>` when a token is set.

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::sync::Arc;
use std::time::Duration;
use subtle::ConstantTimeEq;

/// How long a scrape waits for the figures kept elsewhere (the inbox's).
const REFRESH_WITHIN: Duration = Duration::from_secs(2);
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The `/metrics` route; `token` (when set and not empty) must come as a bearer token.
pub fn router(token: Option<String>) -> Router {
    let token = token.filter(|t| !t.is_empty());
    Router::new()
        .route("/metrics", get(scrape))
        .with_state(Arc::new(token))
}

/// `router` with each request counted as `door`'s, by the route pattern it matched
/// (`unmatched` for none): never the request's own path.
pub fn counted(router: Router, door: &'static str) -> Router {
    router.layer(axum::middleware::from_fn_with_state(door, count))
}

async fn count(State(door): State<&'static str>, request: Request, next: Next) -> Response {
    if !crate::enabled() {
        return next.run(request).await;
    }
    let endpoint = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned());
    let response = next.run(request).await;
    let endpoint = endpoint.as_deref().unwrap_or("unmatched");
    crate::get()
        .doors
        .request(door, endpoint, response.status().as_u16());
    response
}

fn authorized(token: Option<&str>, headers: &HeaderMap) -> bool {
    let Some(want) = token else {
        return true;
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    bool::from(given.as_bytes().ct_eq(want.as_bytes()))
}

async fn scrape(State(token): State<Arc<Option<String>>>, headers: HeaderMap) -> Response {
    if !authorized(token.as_deref(), &headers) {
        let mut refused = (
            StatusCode::UNAUTHORIZED,
            "a bearer token is required (metrics.token)\n",
        )
            .into_response();
        refused.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"herald metrics\""),
        );
        return refused;
    }
    let metrics = crate::get();
    metrics.refresh(REFRESH_WITHIN).await;
    let mut answer = metrics.encode().into_response();
    answer
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    answer
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_checked_whole() {
        let mut headers = HeaderMap::new();
        assert!(authorized(None, &headers));
        assert!(!authorized(Some("s3cret"), &headers));
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer s3cre"),
        );
        assert!(!authorized(Some("s3cret"), &headers));
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer s3cret"),
        );
        assert!(authorized(Some("s3cret"), &headers));
    }

    #[test]
    fn series_are_encoded_with_their_labels() {
        crate::enable();
        let m = crate::get();
        m.webhook.request(Some("gh"), "accepted");
        m.webhook.request(None, "unknown_route");
        m.agent.tokens("openrouter", 12, 3);
        let text = m.encode();
        assert!(
            text.contains(r#"herald_webhook_requests_total{route="gh",outcome="accepted"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"herald_webhook_requests_total{route="unknown",outcome="unknown_route"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"herald_provider_tokens_total{provider="openrouter",direction="input"} 12"#
            ),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
