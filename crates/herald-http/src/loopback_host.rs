//! On a listener bound to loopback, only a loopback host name may be asked for: a page
//! of another site that made its own name point at 127.0.0.1 (DNS rebinding) is
//! refused, as Jupyter does. A request with no `Host` at all passes: browsers always
//! send one, and an HTTP/1.0 health checker (HAProxy's `option httpchk`) may not.

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

/// Which of a router's requests are checked.
#[derive(Debug, Clone, Copy)]
pub enum Checked {
    /// Every request.
    All,
    /// Requests for these exact paths (as routed: `/metrics`, `/health/detailed`).
    Paths(&'static [&'static str]),
}

/// `router` answering 403 to a checked request whose `Host` is not a loopback name.
pub fn loopback_names_only(router: Router, checked: Checked) -> Router {
    router.layer(axum::middleware::from_fn_with_state(checked, check_host))
}

/// Whether the request's `Host` is a loopback name, or absent.
pub fn asks_for_loopback(headers: &HeaderMap) -> bool {
    match headers.get(header::HOST) {
        None => true,
        Some(v) => v.to_str().is_ok_and(herald_config::is_loopback_name),
    }
}

async fn check_host(State(checked): State<Checked>, request: Request, next: Next) -> Response {
    let applies = match checked {
        Checked::All => true,
        Checked::Paths(paths) => paths.contains(&request.uri().path()),
    };
    if !applies || asks_for_loopback(request.headers()) {
        return next.run(request).await;
    }
    let mut refused = Response::new(axum::body::Body::from(
        "this listener answers only to localhost, 127.0.0.1 or [::1]\n",
    ));
    *refused.status_mut() = StatusCode::FORBIDDEN;
    refused
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn only_loopback_names_or_none_pass() {
        let with = |host: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::HOST, HeaderValue::from_str(host).unwrap());
            asks_for_loopback(&h)
        };
        for ok in [
            "127.0.0.1:8642",
            "localhost",
            "[::1]:1",
            "LOCALHOST:9",
            "127.0.0.2",
        ] {
            assert!(with(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8642",
            "10.0.0.1",
            "",
            "127.0.0.1.nip.io",
        ] {
            assert!(!with(bad), "{bad}");
        }
        assert!(
            asks_for_loopback(&HeaderMap::new()),
            "no Host: not a browser"
        );
    }
}
