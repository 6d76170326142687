//! Where a call goes: base URL, key (host-gated), model, headers, body extras, timeouts;
//! and the refusal of endpoints that need another wire format.

use serde_json::{Map, Value};
use std::time::Duration;

/// One resolved provider endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    /// e.g. `http://127.0.0.1:8080/v1`; requests go to `<base_url>/chat/completions`.
    pub base_url: String,
    pub api_key: String,
    pub model: String,
    pub max_tokens: Option<u64>,
    pub extra_headers: Vec<(String, String)>,
    pub extra_body: Map<String, Value>,
    /// Whole request.
    pub request_timeout: Duration,
    /// Longest silence between stream chunks.
    pub stale_timeout: Duration,
    pub connect_timeout: Duration,
    /// The setting that chose `base_url` (`model.base_url`, `CUSTOM_BASE_URL`, ...), named
    /// in connection errors.
    pub base_url_from: Option<String>,
    /// The setting that supplied `api_key` (`model.api_key`, `OPENROUTER_API_KEY`, ...),
    /// named when the provider refuses it.
    pub api_key_from: Option<String>,
}

impl Endpoint {
    /// An endpoint with the spec's default timeouts.
    pub fn new(
        base_url: impl Into<String>,
        api_key: impl Into<String>,
        model: impl Into<String>,
    ) -> Self {
        let base_url = base_url.into();
        let local = is_local(&base_url);
        Endpoint {
            base_url,
            api_key: api_key.into(),
            model: model.into(),
            max_tokens: None,
            extra_headers: Vec::new(),
            extra_body: Map::new(),
            request_timeout: Duration::from_secs(1800),
            stale_timeout: Duration::from_secs(if local { 900 } else { 180 }),
            connect_timeout: Duration::from_secs(30),
            base_url_from: None,
            api_key_from: None,
        }
    }
}

/// An endpoint that may be chosen again while it is shared (a key rotated in a
/// reloaded `.env`): readers take a copy, so a call in flight keeps the one it began with.
#[derive(Debug, Clone)]
pub struct SharedEndpoint(std::sync::Arc<std::sync::RwLock<Endpoint>>);

impl SharedEndpoint {
    pub fn new(endpoint: Endpoint) -> SharedEndpoint {
        SharedEndpoint(std::sync::Arc::new(std::sync::RwLock::new(endpoint)))
    }

    /// The endpoint as it is now.
    pub fn get(&self) -> Endpoint {
        match self.0.read() {
            Ok(e) => e.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Uses `endpoint` from the next [`SharedEndpoint::get`] on.
    pub fn set(&self, endpoint: Endpoint) {
        match self.0.write() {
            Ok(mut e) => *e = endpoint,
            Err(poisoned) => *poisoned.into_inner() = endpoint,
        }
    }
}

/// A URL as it may be shown (to a client, in a log): without the `user:password@`
/// written into it.
pub fn without_credentials(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rsplit_once('@') {
        Some((_, host)) => format!("{scheme}://{host}{}", &rest[end..]),
        None => url.to_owned(),
    }
}

impl Endpoint {
    /// The base URL as it may be shown: without its credentials.
    pub fn shown_base_url(&self) -> String {
        without_credentials(&self.base_url)
    }

    /// The base URL calls go to. With a key configured, its `user:password@` is left
    /// out, so the key alone authenticates (reqwest would add a Basic header from the
    /// URL beside the bearer); without one, the URL's credentials are sent as Basic
    /// auth. (Hermes, through httpx, lets the URL's credentials win.)
    pub fn called_base_url(&self) -> String {
        match self.api_key.is_empty() {
            true => self.base_url.clone(),
            false => self.shown_base_url(),
        }
    }
}

/// The host of a URL, lower-cased, without port or credentials.
pub fn host_of(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        authority.split(':').next()?
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

pub(crate) fn is_local(url: &str) -> bool {
    host_of(url).is_some_and(|h| {
        h == "localhost"
            || h == "::1"
            || h.starts_with("127.")
            || h.starts_with("10.")
            || h.starts_with("192.168.")
            || h.ends_with(".local")
    })
}

fn host_is(host: &str, domain: &str) -> bool {
    host == domain || host.ends_with(&format!(".{domain}"))
}

/// The key sent when none is configured (local servers take anything).
pub const NO_KEY: &str = "no-key-required";

/// An API key and the setting that supplied it (`None` for [`NO_KEY`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ApiKey {
    pub value: String,
    pub from: Option<String>,
}

/// The API key for `base_url` (agent spec §4.1): a key is only sent to its own vendor's
/// host; a custom endpoint with no key gets `no-key-required`.
pub fn resolve_api_key(
    base_url: &str,
    explicit: Option<ApiKey>,
    env: &dyn Fn(&str) -> Option<String>,
) -> ApiKey {
    if let Some(k) = explicit.filter(|k| !k.value.is_empty()) {
        return k;
    }
    let none = || ApiKey {
        value: NO_KEY.to_owned(),
        from: None,
    };
    let Some(host) = host_of(base_url) else {
        return none();
    };
    let var = if host_is(&host, "ollama.com") {
        "OLLAMA_API_KEY".to_owned()
    } else if host_is(&host, "openai.com") || host_is(&host, "openai.azure.com") {
        "OPENAI_API_KEY".to_owned()
    } else if host_is(&host, "openrouter.ai") {
        "OPENROUTER_API_KEY".to_owned()
    } else {
        match derived_vendor(&host) {
            Some(v) => format!("{}_API_KEY", v.to_ascii_uppercase()),
            None => return none(),
        }
    };
    match env(&var).filter(|v| !v.trim().is_empty()) {
        Some(value) => ApiKey {
            value,
            from: Some(var),
        },
        None => none(),
    }
}

/// `api.deepseek.com` → `deepseek`; IPs, `localhost` and odd hosts derive nothing.
fn derived_vendor(host: &str) -> Option<String> {
    if host.parse::<std::net::IpAddr>().is_ok() || !host.contains('.') {
        return None;
    }
    let labels: Vec<&str> = host.split('.').collect();
    let label = labels.get(labels.len().checked_sub(2)?)?;
    (label.len() >= 2 && label.bytes().all(|b| b.is_ascii_alphanumeric()))
        .then(|| (*label).to_owned())
}

/// Refuses endpoints that speak another wire format unless `api_mode` says
/// `chat_completions` explicitly (agent spec §4.1).
pub fn check_wire_format(base_url: &str, api_mode: Option<&str>) -> Result<(), String> {
    match api_mode {
        Some("chat_completions") => return Ok(()),
        Some(other) => {
            return Err(format!(
                "api_mode `{other}` is not supported yet; herald speaks chat_completions (set api_mode: chat_completions for an OpenAI-compatible server)"
            ));
        }
        None => {}
    }
    let host = host_of(base_url).unwrap_or_default();
    let path = base_url
        .split_once("://")
        .map_or(base_url, |(_, r)| r)
        .trim_end_matches('/');
    if host_is(&host, "api.anthropic.com")
        || path.ends_with("/anthropic")
        || path.ends_with("/anthropic/v1")
    {
        return Err(format!(
            "{base_url} speaks the Anthropic Messages API, which herald does not support yet; use an OpenAI-compatible endpoint (e.g. OpenRouter) or set api_mode: chat_completions if this server speaks chat completions"
        ));
    }
    if host == "api.openai.com" || host == "api.x.ai" {
        return Err(format!(
            "{base_url} is used through the OpenAI Responses API, which herald does not support yet; set api_mode: chat_completions to use its chat completions endpoint"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_shown_without_their_credentials() {
        for (url, shown) in [
            (
                "https://user:pa%40ss@llm.example/v1?x=1",
                "https://llm.example/v1?x=1",
            ),
            ("http://k@127.0.0.1:8080", "http://127.0.0.1:8080"),
            (
                "http://127.0.0.1:8080/v1/a@b",
                "http://127.0.0.1:8080/v1/a@b",
            ),
            ("not a url", "not a url"),
        ] {
            assert_eq!(without_credentials(url), shown, "{url}");
        }
    }

    fn env(name: &str) -> Option<String> {
        match name {
            "OPENAI_API_KEY" => Some("sk-openai".into()),
            "OPENROUTER_API_KEY" => Some("sk-or".into()),
            "DEEPSEEK_API_KEY" => Some("sk-ds".into()),
            _ => None,
        }
    }

    #[test]
    fn keys_only_go_to_their_own_host() {
        let mine = ApiKey {
            value: "mine".into(),
            from: Some("model.api_key".into()),
        };
        assert_eq!(
            resolve_api_key("https://openrouter.ai/api/v1", None, &env).value,
            "sk-or"
        );
        assert_eq!(
            resolve_api_key("https://api.openai.com/v1", None, &env).value,
            "sk-openai"
        );
        assert_eq!(
            resolve_api_key("https://api.deepseek.com/v1", None, &env).value,
            "sk-ds"
        );
        assert_eq!(
            resolve_api_key("http://127.0.0.1:8080/v1", None, &env).value,
            "no-key-required"
        );
        assert_eq!(
            resolve_api_key("http://localhost:11434/v1", None, &env).value,
            "no-key-required"
        );
        assert_eq!(
            resolve_api_key("https://openai.com.evil.example/v1", None, &env).value,
            "no-key-required"
        );
        assert_eq!(
            resolve_api_key("https://evil.example/openrouter.ai", None, &env).value,
            "no-key-required"
        );
        assert_eq!(
            resolve_api_key("http://x:y@10.0.0.1:1/v1", Some(mine.clone()), &env),
            mine
        );
        assert_eq!(
            resolve_api_key("https://api.deepseek.com/v1", None, &env).from,
            Some("DEEPSEEK_API_KEY".to_owned())
        );
        assert_eq!(
            resolve_api_key("http://127.0.0.1:8080/v1", None, &env).from,
            None
        );
    }

    #[test]
    fn other_wire_formats_are_refused() {
        assert!(check_wire_format("https://api.anthropic.com/v1", None).is_err());
        assert!(check_wire_format("https://proxy.example/anthropic/v1", None).is_err());
        assert!(check_wire_format("https://api.openai.com/v1", None).is_err());
        assert!(check_wire_format("https://api.openai.com/v1", Some("chat_completions")).is_ok());
        assert!(check_wire_format("https://openrouter.ai/api/v1", None).is_ok());
        assert!(check_wire_format("http://127.0.0.1:8080/v1", Some("codex_responses")).is_err());
    }
}
