//! The dashboard's login and sessions. A login trades the API key or the dashboard
//! token (checked in constant time: digests compared, so not even the length shows)
//! for two things: a session cookie (HttpOnly, SameSite=Strict, path /dashboard; Secure
//! behind a TLS proxy) and a session secret, in the answer's body, that the page keeps
//! in `sessionStorage` and sends in `X-Dashboard-Secret` with every API call, reads
//! included. Browsers send a cookie to every port of its host, so the cookie alone
//! authorizes nothing; the secret lives in storage scoped to this origin (scheme, host
//! and port), and no page embeds it.
//!
//! Failed logins are counted per client address ([`crate::login_budget`]); a wrong key
//! is answered at once and holds nothing another client waits for. A session ends after
//! 12 hours unused or 24 hours in all, and as soon as the credential it was opened with
//! changes (`herald dashboard token --new`).

use crate::Dashboard;
use crate::login_budget::LoginBudget;
use axum::extract::{ConnectInfo, Extension, Form, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

/// The session cookie's name.
pub(crate) const COOKIE: &str = "herald_dashboard";
/// The header every API call carries the session secret in.
pub(crate) const SECRET_HEADER: &str = "x-dashboard-secret";
/// How long a session lasts without use, and in all.
const IDLE: Duration = Duration::from_secs(12 * 3600);
const LIFETIME: Duration = Duration::from_secs(24 * 3600);
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
    /// What the page sends in [`SECRET_HEADER`].
    pub secret: String,
    last_used: Instant,
    opened: Instant,
    /// The digest of the credential that opened it.
    by: [u8; 32],
}

impl Session {
    fn expired(&self) -> bool {
        self.last_used.elapsed() > IDLE || self.opened.elapsed() > LIFETIME
    }
}

/// Why an API call is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No live session in the cookie.
    LoginRequired,
    /// A session, but not its secret in [`SECRET_HEADER`].
    SecretRequired,
    /// From a page of another site.
    CrossSite,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let (status, code, error) = match self {
            Refusal::LoginRequired => (StatusCode::UNAUTHORIZED, "login_required", "log in first"),
            Refusal::SecretRequired => (
                StatusCode::UNAUTHORIZED,
                "secret_required",
                "the session's secret is missing or wrong (X-Dashboard-Secret): log in again",
            ),
            Refusal::CrossSite => (
                StatusCode::FORBIDDEN,
                "cross_site",
                "refused: the request comes from a page of another site",
            ),
        };
        (status, Json(json!({"error": error, "code": code}))).into_response()
    }
}

pub(crate) struct Auth {
    credentials: Credentials,
    sessions: Mutex<HashMap<String, Session>>,
    budget: LoginBudget,
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
            budget: LoginBudget::default(),
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

    /// The session for a login with credential `by`: the one the browser's cookie
    /// already names when that credential opened it (a second tab logging in shares
    /// it), else a new one.
    fn open_session(&self, by: [u8; 32], headers: &HeaderMap) -> (String, Session) {
        let mut all = match self.sessions.lock() {
            Ok(all) => all,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(id) = cookie(headers, COOKIE)
            && let Some(s) = all.get_mut(&id)
            && !s.expired()
            && bool::from(s.by.ct_eq(&by))
        {
            s.last_used = Instant::now();
            return (id, s.clone());
        }
        let id = crate::token::random_hex();
        let session = Session {
            secret: crate::token::random_hex(),
            last_used: Instant::now(),
            opened: Instant::now(),
            by,
        };
        all.retain(|_, s| !s.expired());
        if all.len() >= MAX_SESSIONS
            && let Some(oldest) = all
                .iter()
                .min_by_key(|(_, s)| s.last_used)
                .map(|(k, _)| k.clone())
        {
            all.remove(&oldest);
        }
        all.insert(id.clone(), session.clone());
        (id, session)
    }

    /// Whether the request's cookie names a live session (for which page to serve;
    /// authorizes nothing).
    pub(crate) fn has_session(&self, headers: &HeaderMap) -> bool {
        let Some(id) = cookie(headers, COOKIE) else {
            return false;
        };
        let current = self.current();
        let Ok(all) = self.sessions.lock() else {
            return false;
        };
        all.get(&id)
            .is_some_and(|s| !s.expired() && current.iter().any(|c| bool::from(c.ct_eq(&s.by))))
    }

    /// The request's session, when the cookie names a live one and the request carries
    /// its secret, from this origin; it is kept alive.
    pub(crate) fn authorize(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let id = cookie(headers, COOKIE).ok_or(Refusal::LoginRequired)?;
        let current = self.current();
        let mut all = self.sessions.lock().map_err(|_| Refusal::LoginRequired)?;
        let s = all.get_mut(&id).ok_or(Refusal::LoginRequired)?;
        let still = current.iter().any(|c| bool::from(c.ct_eq(&s.by)));
        if s.expired() || !still {
            all.remove(&id);
            return Err(Refusal::LoginRequired);
        }
        if !same_origin(headers) {
            return Err(Refusal::CrossSite);
        }
        let given = headers
            .get(SECRET_HEADER)
            .map(HeaderValue::as_bytes)
            .unwrap_or_default();
        if !bool::from(given.ct_eq(s.secret.as_bytes())) {
            return Err(Refusal::SecretRequired);
        }
        s.last_used = Instant::now();
        Ok(())
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
        .route(
            "/dashboard/login",
            get(crate::assets::login_page).post(login),
        )
        .route("/dashboard/logout", post(logout))
        .with_state(dash)
}

#[derive(serde::Deserialize)]
struct LoginForm {
    #[serde(default)]
    token: String,
}

/// A login's JSON answer.
fn answer(status: StatusCode, body: serde_json::Value) -> Response {
    (status, Json(body)).into_response()
}

/// `POST /dashboard/login`: the client's budget first (no key is looked at past it),
/// then the key, then a session. Nothing here waits for another client.
async fn login(
    State(dash): State<Arc<Dashboard>>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    if !same_origin(&headers) {
        return Refusal::CrossSite.into_response();
    }
    // Every request herald serves carries its client's address; one that does not
    // (none in practice) shares the unspecified address's budget.
    let client = peer.map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |Extension(c)| c.0.ip());
    let auth = &dash.auth;
    if let Err(wait) = auth.budget.take(client, Instant::now()) {
        return over_budget(wait);
    }
    let Some(by) = auth.credential(&form.token) else {
        tracing::info!(client = %client, "dashboard: a login failed");
        return answer(
            StatusCode::UNAUTHORIZED,
            json!({"error": "That is not the API key or the dashboard token.", "code": "login_failed"}),
        );
    };
    auth.budget.give_back(client);
    let (id, session) = auth.open_session(by, &headers);
    dash.keep_search_index();
    // The routes page's charts, counted from the first login on: a gateway whose
    // dashboard is never used adds nothing to each webhook request.
    herald_metrics::enable_traffic();
    let mut ok = answer(
        StatusCode::OK,
        json!({"secret": session.secret, "next": "/dashboard/"}),
    );
    // Behind a TLS proxy the cookie never travels in the clear.
    let tls = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|p| p.eq_ignore_ascii_case("https"));
    let secure = if tls { "; Secure" } else { "" };
    let cookie = format!("{COOKIE}={id}; Path=/dashboard; HttpOnly; SameSite=Strict{secure}");
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        ok.headers_mut().insert(header::SET_COOKIE, v);
    }
    ok
}

/// 429 with `Retry-After` (whole seconds, rounded up).
fn over_budget(wait: Duration) -> Response {
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    let mut refused = answer(
        StatusCode::TOO_MANY_REQUESTS,
        json!({
            "error": format!("Too many failed logins from your address: try again in {seconds} s."),
            "code": "too_many_failed_logins",
            "retry_after": seconds,
        }),
    );
    refused
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    refused
}

async fn logout(State(dash): State<Arc<Dashboard>>, headers: HeaderMap) -> Response {
    if let Err(refusal) = dash.auth.authorize(&headers) {
        return refusal.into_response();
    }
    dash.auth.close_session(&headers);
    let mut gone = answer(StatusCode::OK, json!({"logged_out": true}));
    let cookie = format!("{COOKIE}=; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age=0");
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        gone.headers_mut().insert(header::SET_COOKIE, v);
    }
    gone
}

/// Guards the JSON API: every request, read or change, needs the session cookie, its
/// secret in [`SECRET_HEADER`], and to come from this origin.
pub(crate) async fn guard(
    State(dash): State<Arc<Dashboard>>,
    request: Request,
    next: Next,
) -> Response {
    match dash.auth.authorize(request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => refusal.into_response(),
    }
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
    fn the_cookie_alone_authorizes_nothing() {
        let home = std::env::temp_dir().join(format!("herald-auth-{}", crate::token::random_hex()));
        let auth = Auth::new(Credentials {
            api_key: Some("the-api-key-0123456789".into()),
            home: home.clone(),
        });
        assert_eq!(auth.credential("wrong"), None);
        let by = auth.credential("the-api-key-0123456789").unwrap();
        let (id, session) = auth.open_session(by, &HeaderMap::new());
        let with_cookie = format!("{COOKIE}={id}");
        assert!(auth.has_session(&headers(&[("cookie", &with_cookie)])));
        assert_eq!(
            auth.authorize(&headers(&[("cookie", &with_cookie)])),
            Err(Refusal::SecretRequired)
        );
        assert_eq!(
            auth.authorize(&headers(&[
                ("cookie", &with_cookie),
                (SECRET_HEADER, "0123")
            ])),
            Err(Refusal::SecretRequired)
        );
        assert_eq!(
            auth.authorize(&headers(&[(SECRET_HEADER, &session.secret)])),
            Err(Refusal::LoginRequired)
        );
        let both = [
            ("cookie", with_cookie.as_str()),
            (SECRET_HEADER, session.secret.as_str()),
        ];
        assert_eq!(auth.authorize(&headers(&both)), Ok(()));
        let cross = [
            ("cookie", with_cookie.as_str()),
            (SECRET_HEADER, session.secret.as_str()),
            ("sec-fetch-site", "cross-site"),
        ];
        assert_eq!(auth.authorize(&headers(&cross)), Err(Refusal::CrossSite));
        // A second login from the same browser (another tab) shares the session.
        let (again, shared) = auth.open_session(by, &headers(&[("cookie", &with_cookie)]));
        assert_eq!((again, shared.secret), (id, session.secret));
    }

    #[test]
    fn cookies_are_found_by_name() {
        let h = headers(&[("cookie", "a=1; herald_dashboard=abc; b=2")]);
        assert_eq!(cookie(&h, COOKIE).as_deref(), Some("abc"));
        assert_eq!(cookie(&h, "c"), None);
    }
}
