//! The pages: static files embedded in the binary (no CDN; it works offline). No page
//! holds a secret: the app's shell is the same for everyone, and its script takes the
//! session secret from `sessionStorage`, where the login put it.

use crate::Dashboard;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use std::sync::Arc;

const APP: &str = include_str!("../assets/app.html");
const LOGIN: &str = include_str!("../assets/login.html");

/// Name, content type and bytes of every static file.
const FILES: &[(&str, &str, &str)] = &[
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../assets/app.js"),
    ),
    (
        "app.css",
        "text/css; charset=utf-8",
        include_str!("../assets/app.css"),
    ),
    (
        "login.js",
        "text/javascript; charset=utf-8",
        include_str!("../assets/login.js"),
    ),
];

pub(crate) fn router(dash: Arc<Dashboard>) -> Router {
    Router::new()
        .route(
            "/dashboard",
            get(|| async { Redirect::permanent("/dashboard/") }),
        )
        .route("/dashboard/", get(page))
        .route("/dashboard/assets/{name}", get(asset))
        // Anything else under /dashboard is the dashboard's own 404 (with its headers).
        .route(
            "/dashboard/{*rest}",
            axum::routing::any(|| async { (StatusCode::NOT_FOUND, "not found\n") }),
        )
        .with_state(dash)
}

/// The app's shell for a browser whose cookie names a session, else the login page.
async fn page(State(dash): State<Arc<Dashboard>>, headers: HeaderMap) -> Response {
    match dash.auth.has_session(&headers) {
        true => Html(APP).into_response(),
        false => Html(LOGIN).into_response(),
    }
}

/// `GET /dashboard/login`: the login page (where the app sends a tab that has no
/// session secret: a new tab, or a session that ended).
pub(crate) async fn login_page() -> Response {
    Html(LOGIN).into_response()
}

async fn asset(Path(name): Path<String>) -> Response {
    let Some((_, kind, body)) = FILES.iter().find(|(n, _, _)| *n == name) else {
        return (StatusCode::NOT_FOUND, "no such file\n").into_response();
    };
    let mut r = (*body).into_response();
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, max-age=300"),
    );
    r
}
