//! `web_extract` (fetch pages as text, refusing private addresses, with size and time
//! limits) and `web_search` (a self-hosted SearXNG JSON API or the hosted Tavily API).

use crate::url_safety;
use futures_util::StreamExt;
use herald_agent::tool::{Tool, ToolContext, ToolFuture};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::time::Duration;

/// Most URLs per `web_extract` call.
pub const MAX_URLS: usize = 5;
/// Most bytes read from one page.
pub const MAX_PAGE_BYTES: usize = 2 * 1024 * 1024;
/// Most characters of text kept per page.
pub const MAX_PAGE_CHARS: usize = 15_000;
/// Time limit per page.
pub const PAGE_TIMEOUT: Duration = Duration::from_secs(20);
/// Redirects followed (each re-checked).
const MAX_REDIRECTS: usize = 5;

fn error(message: impl std::fmt::Display) -> String {
    json!({ "error": message.to_string() }).to_string()
}

fn client_builder() -> reqwest::ClientBuilder {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(PAGE_TIMEOUT)
        .user_agent(concat!("herald/", env!("CARGO_PKG_VERSION")))
}

/// Fetches pages as text.
pub struct WebExtract {
    /// Allow loopback and private addresses (off by default; `web.allow_private_urls`).
    pub allow_private: bool,
}

impl WebExtract {
    /// Resolves `url`'s host and checks every address; returns the address to connect to.
    async fn vet(&self, url: &reqwest::Url) -> Result<Option<SocketAddr>, String> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "only http and https URLs can be fetched, not {}",
                url.scheme()
            ));
        }
        let host = url
            .host_str()
            .ok_or("the URL has no host")?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = url.port_or_known_default().unwrap_or(80);
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|e| format!("cannot resolve {host}: {e}"))?
            .collect();
        let first = addrs
            .first()
            .copied()
            .ok_or_else(|| format!("{host} has no address"))?;
        if !self.allow_private {
            for a in &addrs {
                if let Some(why) = url_safety::refused(a.ip()) {
                    return Err(format!(
                        "refused: {host} resolves to {}, {why}; fetching internal addresses is not allowed",
                        a.ip()
                    ));
                }
            }
        }
        Ok(Some(first))
    }

    /// The address check alone (for tests of redirect targets).
    pub async fn vet_for_tests(&self, raw: &str) -> Result<(), String> {
        let url = reqwest::Url::parse(raw).map_err(|e| e.to_string())?;
        self.vet(&url).await.map(|_| ())
    }

    async fn fetch(&self, raw: &str) -> Value {
        let mut url = match reqwest::Url::parse(raw) {
            Ok(u) => u,
            Err(e) => return json!({"url": raw, "error": format!("not a valid URL: {e}")}),
        };
        for _ in 0..=MAX_REDIRECTS {
            let addr = match self.vet(&url).await {
                Ok(a) => a,
                Err(e) => return json!({"url": raw, "error": e}),
            };
            // Connect to the address that was checked (no second DNS answer can differ).
            let mut builder = client_builder();
            if let (Some(host), Some(addr)) = (url.host_str(), addr) {
                builder = builder.resolve(host, addr);
            }
            let client = match builder.build() {
                Ok(c) => c,
                Err(e) => return json!({"url": raw, "error": e.to_string()}),
            };
            let resp = match client.get(url.clone()).send().await {
                Ok(r) => r,
                Err(e) => return json!({"url": raw, "error": format!("fetch failed: {e}")}),
            };
            if resp.status().is_redirection() {
                let Some(next) = resp
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|l| l.to_str().ok())
                    .and_then(|l| url.join(l).ok())
                else {
                    return json!({"url": raw, "error": "a redirect without a usable Location"});
                };
                url = next;
                continue;
            }
            let status = resp.status().as_u16();
            let is_html = resp
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|ct| ct.contains("html"));
            let mut body = Vec::new();
            let mut stream = resp.bytes_stream();
            while let Some(chunk) = stream.next().await {
                match chunk {
                    Ok(c) => {
                        let room = MAX_PAGE_BYTES.saturating_sub(body.len());
                        body.extend_from_slice(&c[..c.len().min(room)]);
                        if body.len() >= MAX_PAGE_BYTES {
                            break;
                        }
                    }
                    Err(e) => return json!({"url": raw, "error": format!("reading failed: {e}")}),
                }
            }
            let text = if is_html {
                html2text::from_read(body.as_slice(), 100)
                    .unwrap_or_else(|_| String::from_utf8_lossy(&body).into_owned())
            } else {
                String::from_utf8_lossy(&body).into_owned()
            };
            let text: String = text.chars().take(MAX_PAGE_CHARS).collect();
            return json!({"url": url.as_str(), "status": status, "content": text});
        }
        json!({"url": raw, "error": "too many redirects"})
    }
}

impl Tool for WebExtract {
    fn name(&self) -> &str {
        "web_extract"
    }
    fn description(&self) -> &str {
        "Fetch web pages (up to 5 URLs) and return their text."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"urls": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_URLS}}, "required": ["urls"]})
    }
    fn untrusted_output(&self) -> bool {
        true
    }
    fn parallel_safe(&self) -> bool {
        true
    }
    fn run<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let urls: Vec<String> = match &args["urls"] {
                list @ Value::Array(_) => herald_agent::string_list(list),
                Value::String(s) => vec![s.clone()],
                _ => return error("`urls` is required"),
            };
            if urls.is_empty() {
                return error("`urls` is empty");
            }
            let pages =
                futures_util::future::join_all(urls.iter().take(MAX_URLS).map(|u| self.fetch(u)))
                    .await;
            json!({ "results": pages }).to_string()
        })
    }
}

/// Which search service answers `web_search`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SearchBackend {
    /// A self-hosted SearXNG instance (JSON format enabled).
    Searxng { base_url: String },
    /// The hosted Tavily API.
    Tavily { api_key: String, base_url: String },
}

/// Searches the web.
pub struct WebSearch {
    pub backend: SearchBackend,
}

impl WebSearch {
    async fn search(&self, query: &str, limit: usize) -> Result<Vec<Value>, String> {
        let client = client_builder().build().map_err(|e| e.to_string())?;
        let (resp, kind) = match &self.backend {
            SearchBackend::Searxng { base_url } => {
                let url = format!("{}/search", base_url.trim_end_matches('/'));
                (
                    client
                        .get(url)
                        .query(&[("q", query), ("format", "json")])
                        .send()
                        .await,
                    "searxng",
                )
            }
            SearchBackend::Tavily { api_key, base_url } => {
                let url = format!("{}/search", base_url.trim_end_matches('/'));
                (
                    client
                        .post(url)
                        .bearer_auth(api_key)
                        .json(&json!({"query": query, "max_results": limit}))
                        .send()
                        .await,
                    "tavily",
                )
            }
        };
        let resp = resp.map_err(|e| format!("{kind}: request failed: {}", e.without_url()))?;
        let status = resp.status();
        let body: Value = resp
            .json()
            .await
            .map_err(|e| format!("{kind}: answer is not JSON: {}", e.without_url()))?;
        if !status.is_success() {
            return Err(format!(
                "{kind}: HTTP {}: {}",
                status.as_u16(),
                body.to_string().chars().take(200).collect::<String>()
            ));
        }
        let results = body["results"].as_array().cloned().unwrap_or_default();
        Ok(results
            .into_iter()
            .take(limit)
            .map(|r| json!({"title": r["title"], "url": r["url"], "snippet": r.get("content").cloned().unwrap_or(Value::Null)}))
            .collect())
    }
}

impl Tool for WebSearch {
    fn name(&self) -> &str {
        "web_search"
    }
    fn description(&self) -> &str {
        "Search the web; returns titles, URLs and snippets."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 100}}, "required": ["query"]})
    }
    fn untrusted_output(&self) -> bool {
        true
    }
    fn parallel_safe(&self) -> bool {
        true
    }
    fn run<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let Some(query) = args["query"].as_str().filter(|q| !q.trim().is_empty()) else {
                return error("`query` is required");
            };
            let limit = args["limit"].as_u64().unwrap_or(5).clamp(1, 100) as usize;
            match self.search(query, limit).await {
                Ok(results) => json!({"query": query, "results": results}).to_string(),
                Err(e) => error(e),
            }
        })
    }
}
