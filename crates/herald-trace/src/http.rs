//! A span for every HTTP request to a front door, continuing the caller's trace
//! (`traceparent`): what a turn started by the request does is its child.

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

/// `router` with a span per request (`door`, method, the route pattern matched).
pub fn traced(router: Router, door: &'static str) -> Router {
    router.layer(axum::middleware::from_fn_with_state(door, trace_request))
}

async fn trace_request(State(door): State<&'static str>, request: Request, next: Next) -> Response {
    if !crate::exporting() {
        return next.run(request).await;
    }
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |p| p.as_str())
        .to_owned();
    let span = crate::span!(
        "http.request",
        door,
        http.method = %request.method(),
        http.route = %route,
        http.status = tracing::field::Empty,
    );
    let (parent, state) = (
        header(&request, "traceparent"),
        header(&request, "tracestate"),
    );
    crate::continue_from(&span, parent.as_deref(), state.as_deref());
    let response = next.run(request).instrument(span.clone()).await;
    span.record("http.status", response.status().as_u16());
    response
}

fn header(request: &Request, name: &str) -> Option<String> {
    let value = request.headers().get(name)?;
    value.to_str().ok().map(str::to_owned)
}
