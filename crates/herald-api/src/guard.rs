//! What every request passes before a handler: the always-on security headers (§1.3),
//! CORS (§1.2), bearer auth in constant time (§1.1) and the body's declared size (§1.4).

use crate::Api;
use crate::errors::ApiError;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use subtle::ConstantTimeEq;

const SECURITY_HEADERS: &[(&str, &str)] = &[
    (
        "content-security-policy",
        "default-src 'none'; frame-ancestors 'none'",
    ),
    (
        "permissions-policy",
        "camera=(), microphone=(), geolocation=()",
    ),
    (
        "strict-transport-security",
        "max-age=31536000; includeSubDomains",
    ),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("x-xss-protection", "0"),
    ("referrer-policy", "no-referrer"),
];

/// Routes served without a key.
fn is_open(path: &str) -> bool {
    matches!(path, "/health" | "/v1/health")
}

/// Whether `Authorization` carries exactly `Bearer <key>` (constant time on the key).
pub fn authorized(headers: &HeaderMap, key: &str) -> bool {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return false;
    };
    let Some(token) = value.as_bytes().strip_prefix(b"Bearer ") else {
        return false;
    };
    bool::from(token.ct_eq(key.as_bytes()))
}

/// The CORS headers for an allowed origin.
fn cors_headers(api: &Api, origin: &str, headers: &mut HeaderMap) {
    let wildcard = api.settings.cors_origins.iter().any(|o| o == "*");
    let allow = if wildcard { "*" } else { origin };
    if let Ok(v) = HeaderValue::from_str(allow) {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, v);
    }
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, DELETE, OPTIONS"),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("Authorization, Content-Type, Idempotency-Key"),
    );
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    if !wildcard {
        headers.insert(header::VARY, HeaderValue::from_static("Origin"));
    }
}

fn origin_allowed(api: &Api, origin: &str) -> bool {
    api.settings
        .cors_origins
        .iter()
        .any(|o| o == "*" || o == origin)
}

/// The declared body size, checked before the body is read.
fn declared_size(api: &Api, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(value) = headers.get(header::CONTENT_LENGTH) else {
        return Ok(());
    };
    let length = value
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .ok_or_else(|| {
            ApiError::bad_request("Invalid Content-Length", Some("invalid_content_length"))
        })?;
    if length > api.settings.max_body_bytes {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "Request body too large (max {} bytes)",
                api.settings.max_body_bytes
            ),
            Some("body_too_large"),
        ));
    }
    Ok(())
}

async fn checked(api: &Api, request: Request, next: Next) -> Response {
    let origin = request
        .headers()
        .get(header::ORIGIN)
        .and_then(|o| o.to_str().ok())
        .map(str::to_owned);
    if let Some(origin) = &origin {
        if !origin_allowed(api, origin) {
            return StatusCode::FORBIDDEN.into_response();
        }
        if request.method() == Method::OPTIONS {
            let mut response = StatusCode::OK.into_response();
            cors_headers(api, origin, response.headers_mut());
            return response;
        }
    }
    let mut response =
        if !is_open(request.uri().path()) && !authorized(request.headers(), api.key()) {
            ApiError::unauthorized().into_response()
        } else if let Err(e) = declared_size(api, request.headers()) {
            e.into_response()
        } else {
            next.run(request).await
        };
    if let Some(origin) = &origin {
        cors_headers(api, origin, response.headers_mut());
    }
    response
}

/// The middleware: checks, then the handler, then the security headers on whatever
/// the answer is.
pub async fn guard(State(api): State<Arc<Api>>, request: Request<Body>, next: Next) -> Response {
    let mut response = checked(&api, request, next).await;
    let headers = response.headers_mut();
    for (name, value) in SECURITY_HEADERS {
        headers.insert(*name, HeaderValue::from_static(value));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_exact_bearer_key_passes() {
        let key = "k3y-0123456789abcdef";
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
            h
        };
        assert!(authorized(&with(&format!("Bearer {key}")), key));
        for bad in [
            format!("bearer {key}"),
            format!("Basic {key}"),
            key.to_owned(),
            format!("Bearer {key}x"),
            "Bearer ".to_owned(),
        ] {
            assert!(!authorized(&with(&bad), key), "{bad}");
        }
        assert!(!authorized(&HeaderMap::new(), key));
    }
}
