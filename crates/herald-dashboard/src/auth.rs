//! The dashboard's login: the API key or the dashboard token, checked in constant time
//! (digests compared, so not even the length shows), trades for a session cookie
//! (HttpOnly, SameSite=Strict, path /dashboard; Secure behind a TLS proxy) and a CSRF
//! token that every change must send back (`X-CSRF-Token`), from the same origin. A
//! failed login answers after a second, four at a time, so nothing can be guessed over
//! the network, and nobody can lock the others out. A session ends after 12 hours
//! unused or 24 hours in all, and as soon as the credential it was opened with changes
//! (`herald dashboard token --new`).

use crate::Dashboard;
use axum::Router;
use axum::extract::{Form, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::post;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

/// The session cookie's name.
pub(crate) const COOKIE: &str = "herald_dashboard";
/// How long a session lasts without use, and in all.
const IDLE: Duration = Duration::from_secs(12 * 3600);
const LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// How long a failed login waits before its answer, and how many are checked at once.
const FAILED_WAIT: Duration = Duration::from_secs(1);
const CHECKS_AT_ONCE: usize = 4;
/// Sessions kept at most (the oldest go first).
const MAX_SESSIONS: usize = 256;

/// What logs in.
#[derive(Clone)]
pub struct Credentials {
    /// The API server's key, when the API serves.
    pub api_key: Option<String>,
    /// The home, where the dashboard token is kept (read at each login).
    pub home: PathBuf,
}

impl Credentials {
    /// Whether any credential exists (else the dashboard can not be logged into).
    pub fn any(&self) -> bool {
        self.api_key.is_some() || crate::token::read(&self.home).is_some()
    }
}

/// A logged-in browser.
#[derive(Clone)]
pub(crate) struct Session {
    pub csrf: String,
    last_used: Instant,
    opened: Instant,
    /// The digest of the credential that opened it.
    by: [u8; 32],
}

pub(crate) struct Auth {
    credentials: Credentials,
    sessions: Mutex<HashMap<String, Session>>,
    checks: tokio::sync::Semaphore,
}

fn digest(text: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(text.trim().as_bytes()).into()
}

impl Auth {
    pub(crate) fn new(credentials: Credentials) -> Auth {
        Auth {
            credentials,
            sessions: Mutex::default(),
            checks: tokio::sync::Semaphore::new(CHECKS_AT_ONCE),
        }
    }

    /// The digests of the credentials that log in now.
    fn current(&self) -> Vec<[u8; 32]> {
        let key = self.credentials.api_key.as_deref().map(digest);
        let token = crate::token::read(&self.credentials.home).map(|t| digest(&t));
        key.into_iter().chain(token).collect()
    }

    /// The digest of `given` when it is a credential that logs in now.
    fn credential(&self, given: &str) -> Option<[u8; 32]> {
        if given.trim().is_empty() {
            return None;
        }
        let given = digest(given);
        let mut found = subtle::Choice::from(0u8);
        for c in self.current() {
            found |= given.ct_eq(&c);
        }
        bool::from(found).then_some(given)
    }

    fn open_session(&self, by: [u8; 32]) -> (String, Session) {
        let id = crate::token::random_hex();
        let session = Session {
            csrf: crate::token::random_hex(),
            last_used: Instant::now(),
            opened: Instant::now(),
            by,
        };
        if let Ok(mut all) = self.sessions.lock() {
            all.retain(|_, s| s.last_used.elapsed() < IDLE);
            if all.len() >= MAX_SESSIONS
                && let Some(oldest) = all
                    .iter()
                    .min_by_key(|(_, s)| s.last_used)
                    .map(|(k, _)| k.clone())
            {
                all.remove(&oldest);
            }
            all.insert(id.clone(), session.clone());
        }
        (id, session)
    }

    /// The session the request's cookie names, kept alive.
    pub(crate) fn session(&self, headers: &HeaderMap) -> Option<Session> {
        let id = cookie(headers, COOKIE)?;
        let current = self.current();
        let mut all = self.sessions.lock().ok()?;
        let s = all.get_mut(&id)?;
        let still = current.iter().any(|c| bool::from(c.ct_eq(&s.by)));
        if s.last_used.elapsed() > IDLE || s.opened.elapsed() > LIFETIME || !still {
            all.remove(&id);
            return None;
        }
        s.last_used = Instant::now();
        Some(s.clone())
    }

    fn close_session(&self, headers: &HeaderMap) {
        if let (Some(id), Ok(mut all)) = (cookie(headers, COOKIE), self.sessions.lock()) {
            all.remove(&id);
        }
    }
}

/// The value of cookie `name`.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

/// Whether the request comes from a page of this same origin (or from no page at all,
/// as a script's would): the browser says so in `Sec-Fetch-Site`, else `Origin` must
/// name this host.
pub(crate) fn same_origin(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        return matches!(site, "same-origin" | "none");
    }
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    origin
        .split_once("://")
        .is_some_and(|(_, rest)| !host.is_empty() && rest.eq_ignore_ascii_case(host))
}

pub(crate) fn router(dash: Arc<Dashboard>) -> Router {
    Router::new()
        .route("/dashboard/login", post(login))
        .route("/dashboard/logout", post(logout))
        .with_state(dash)
}

#[derive(serde::Deserialize)]
struct LoginForm {
    #[serde(default)]
    token: String,
}

async fn login(
    State(dash): State<Arc<Dashboard>>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    if !same_origin(&headers) {
        return (StatusCode::FORBIDDEN, "cross-site login refused\n").into_response();
    }
    let auth = &dash.auth;
    let Ok(_turn) = auth.checks.acquire().await else {
        return Redirect::to("/dashboard/?login=failed").into_response();
    };
    let Some(by) = auth.credential(&form.token) else {
        tracing::info!("dashboard: a login failed");
        // Held while waiting: guesses go one a second per permit at most.
        tokio::time::sleep(FAILED_WAIT).await;
        return Redirect::to("/dashboard/?login=failed").into_response();
    };
    let (id, _) = auth.open_session(by);
    dash.keep_search_index();
    // The routes page's charts, counted from the first login on: a gateway whose
    // dashboard is never used adds nothing to each webhook request.
    herald_metrics::enable_traffic();
    let mut answer = Redirect::to("/dashboard/").into_response();
    // Behind a TLS proxy the cookie never travels in the clear.
    let tls = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|p| p.eq_ignore_ascii_case("https"));
    let secure = if tls { "; Secure" } else { "" };
    let cookie = format!("{COOKIE}={id}; Path=/dashboard; HttpOnly; SameSite=Strict{secure}");
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        answer.headers_mut().insert(header::SET_COOKIE, v);
    }
    answer
}

async fn logout(State(dash): State<Arc<Dashboard>>, headers: HeaderMap) -> Response {
    if !csrf_ok(&dash, &headers) {
        return (StatusCode::FORBIDDEN, "missing or wrong CSRF token\n").into_response();
    }
    dash.auth.close_session(&headers);
    let mut answer = Redirect::to("/dashboard/").into_response();
    let gone = format!("{COOKIE}=; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age=0");
    if let Ok(v) = HeaderValue::from_str(&gone) {
        answer.headers_mut().insert(header::SET_COOKIE, v);
    }
    answer
}

/// A change's CSRF check: a session, its token in `X-CSRF-Token`, from the same
/// origin.
fn csrf_ok(dash: &Dashboard, headers: &HeaderMap) -> bool {
    let Some(session) = dash.auth.session(headers) else {
        return false;
    };
    let given = headers
        .get("x-csrf-token")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    same_origin(headers) && bool::from(given.as_bytes().ct_eq(session.csrf.as_bytes()))
}

/// Guards the JSON API: a session for every request, and for a change (anything but
/// GET and HEAD) the CSRF token and the same origin.
pub(crate) async fn guard(
    State(dash): State<Arc<Dashboard>>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    if dash.auth.session(headers).is_none() {
        let body = serde_json::json!({"error": "log in first", "code": "login_required"});
        return (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
    }
    let reads = matches!(*request.method(), Method::GET | Method::HEAD);
    if !reads && !csrf_ok(&dash, headers) {
        let body = serde_json::json!({"error": "missing or wrong CSRF token", "code": "csrf"});
        return (StatusCode::FORBIDDEN, axum::Json(body)).into_response();
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn only_this_origin_may_post() {
        assert!(same_origin(&headers(&[("sec-fetch-site", "same-origin")])));
        assert!(!same_origin(&headers(&[("sec-fetch-site", "cross-site")])));
        assert!(!same_origin(&headers(&[("sec-fetch-site", "same-site")])));
        assert!(same_origin(&headers(&[
            ("origin", "http://127.0.0.1:8642"),
            ("host", "127.0.0.1:8642")
        ])));
        assert!(!same_origin(&headers(&[
            ("origin", "http://evil.example"),
            ("host", "127.0.0.1:8642")
        ])));
        assert!(same_origin(&headers(&[])), "no page at all: a script");
    }

    #[test]
    fn cookies_are_found_by_name() {
        let h = headers(&[("cookie", "a=1; herald_dashboard=abc; b=2")]);
        assert_eq!(cookie(&h, COOKIE).as_deref(), Some("abc"));
        assert_eq!(cookie(&h, "c"), None);
    }
}
