//! The dashboard's own response headers: a Content-Security-Policy that lets only this
//! origin's scripts and styles run (no inline script, no other origin, no framing),
//! and no sniffing, no referrer, no browser powers (camera, clipboard, …), no caching of
//! what it shows.

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;

/// The policy of every dashboard response.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The powers a page may ask the browser for: none of them.
const PERMISSIONS: &str = "accelerometer=(), camera=(), clipboard-read=(), display-capture=(), geolocation=(), gyroscope=(), hid=(), magnetometer=(), microphone=(), midi=(), payment=(), serial=(), usb=(), xr-spatial-tracking=()";

/// The most a dashboard request's body may hold (a login form, a subscription), and
/// how long it may take to arrive once its head has.
const MAX_BODY: usize = 64 * 1024;
const BODY_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

pub(crate) fn secured(router: Router) -> Router {
    router
        .layer(axum::middleware::from_fn(bounded_body))
        .layer(axum::middleware::from_fn(set_headers))
}

/// Reads the body within [`MAX_BODY`] and [`BODY_WITHIN`] before any handler does: a
/// body that never ends, or a huge one, is answered 408 or 413 and holds nothing.
async fn bounded_body(request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let answer = |status: axum::http::StatusCode, text: &'static str| {
        let mut r = Response::new(axum::body::Body::from(text));
        *r.status_mut() = status;
        r
    };
    match herald_http::body::read(body, MAX_BODY, BODY_WITHIN).await {
        Ok(bytes) => {
            next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                .await
        }
        Err(herald_http::body::BodyError::TooLarge(_)) => answer(
            axum::http::StatusCode::PAYLOAD_TOO_LARGE,
            "the body is over 64 KiB\n",
        ),
        Err(herald_http::body::BodyError::TimedOut(_)) => answer(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            "the body did not arrive in time\n",
        ),
        Err(herald_http::body::BodyError::Broken(_)) => {
            answer(axum::http::StatusCode::BAD_REQUEST, "a broken body\n")
        }
    }
}

async fn set_headers(request: Request, next: Next) -> Response {
    let asset = request.uri().path().starts_with("/dashboard/assets/");
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert("permissions-policy", HeaderValue::from_static(PERMISSIONS));
    h.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    if !asset {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}
