//! The OpenAI-compatible API server's settings: `platforms.api_server` (`enabled`,
//! `extra.host/port/key/cors_origins/model_name/model_routes`), the `API_SERVER_*`
//! environment (a key in `extra` wins over the environment's), and
//! `gateway.api_server.max_concurrent_runs` and `max_stored_responses`; the port's own
//! connection bounds (`extra.header_timeout_seconds`, `body_timeout_seconds`,
//! `idle_timeout_seconds`, `max_connections`, `max_body_bytes_in_flight`, with the
//! webhook port's defaults), `extra.max_messages` and `extra.client_tool_timeout_seconds`.

use crate::config::ConnectionSettings;
use crate::node::Node;
use crate::platforms::PlatformSettings;
use crate::reader::{Reader, parse_bool_text};
use serde_json::{Map, Value};

/// `platforms.api_server.extra`.
type Extra = Map<String, Value>;
use std::collections::BTreeMap;

pub const DEFAULT_API_PORT: u16 = 8642;
/// Request bodies above this are refused with 413.
pub const API_MAX_BODY_BYTES: u64 = 10_000_000;
/// A `messages` or `input` array longer than this is refused with 400.
pub const API_MAX_MESSAGES: usize = 10_000;

/// One `model_routes` alias: what a request naming it runs on.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelRoute {
    pub model: Option<String>,
    pub provider: Option<String>,
    pub base_url: Option<String>,
    pub api_key: Option<String>,
}

/// The API server's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiServerSettings {
    pub enabled: bool,
    pub host: String,
    pub port: u16,
    /// The bearer key (required to start).
    pub key: Option<String>,
    /// Allowed browser origins (`*` allows every one).
    pub cors_origins: Vec<String>,
    /// The id `/v1/models` advertises.
    pub model_name: Option<String>,
    pub model_routes: BTreeMap<String, ModelRoute>,
    /// Chat completions, responses and runs at once (`0`: no cap).
    pub max_concurrent_runs: u32,
    pub max_body_bytes: u64,
    /// Stored responses kept (least recently used forgotten first).
    pub max_stored_responses: usize,
    /// The port's connection bounds and its budget of body bytes in flight.
    pub connections: ConnectionSettings,
    /// The longest `messages` or `input` array served.
    pub max_messages: usize,
    /// How long a run parked for a client's tool results waits for them
    /// (`extra.client_tool_timeout_seconds`); then it ends as cancelled.
    pub client_tool_timeout_seconds: u64,
    /// Runs that may wait for their clients' tool results at once
    /// (`extra.max_parked_runs`); a request with tools of its own gets 429 beyond.
    pub max_parked_runs: usize,
}

impl Default for ApiServerSettings {
    fn default() -> Self {
        ApiServerSettings {
            enabled: false,
            host: "127.0.0.1".into(),
            port: DEFAULT_API_PORT,
            key: None,
            cors_origins: Vec::new(),
            model_name: None,
            model_routes: BTreeMap::new(),
            max_concurrent_runs: 10,
            max_body_bytes: API_MAX_BODY_BYTES,
            max_stored_responses: 100,
            connections: ConnectionSettings::default(),
            max_messages: API_MAX_MESSAGES,
            client_tool_timeout_seconds: 600,
            max_parked_runs: 100,
        }
    }
}

fn text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.trim().to_owned()).filter(|s| !s.is_empty()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A comma-separated string or a list.
fn origins(v: &Value) -> Vec<String> {
    let items: Vec<String> = match v {
        Value::String(s) => s.split(',').map(str::to_owned).collect(),
        Value::Array(a) => a.iter().filter_map(|x| text(Some(x))).collect(),
        _ => Vec::new(),
    };
    items
        .into_iter()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

fn routes(r: &mut Reader, v: &Value) -> BTreeMap<String, ModelRoute> {
    let Value::Object(map) = v else {
        r.error(
            None,
            "platforms.api_server.extra.model_routes",
            "expected a mapping of alias to {model, provider, base_url, api_key}",
        );
        return BTreeMap::new();
    };
    map.iter()
        .map(|(alias, route)| {
            let field = |k: &str| text(route.get(k));
            let route = match route {
                Value::String(model) => ModelRoute {
                    model: Some(model.clone()),
                    ..ModelRoute::default()
                },
                _ => ModelRoute {
                    model: field("model"),
                    provider: field("provider"),
                    base_url: field("base_url"),
                    api_key: field("api_key"),
                },
            };
            (alias.clone(), route)
        })
        .collect()
}

/// Reads the settings; problems go to `r`.
pub fn read_api_settings(
    r: &mut Reader,
    platforms: &BTreeMap<String, PlatformSettings>,
    gateway: Option<&Node>,
    env: &dyn Fn(&str) -> Option<String>,
) -> ApiServerSettings {
    let mut s = ApiServerSettings::default();
    let block = platforms.get("api_server");
    let extra = block.map(|b| &b.extra);
    let env_text = |k: &str| {
        env(k)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let env_on = env_text("API_SERVER_ENABLED").and_then(|v| parse_bool_text(&v));
    s.enabled = env_on.unwrap_or(false) || block.is_some_and(|b| b.enabled == Some(true));
    let get = |k: &str| extra.and_then(|e| e.get(k));
    s.host = text(get("host"))
        .or_else(|| env_text("API_SERVER_HOST"))
        .unwrap_or(s.host);
    // A port that is not an integer falls back to the default, as Hermes does.
    s.port = text(get("port"))
        .or_else(|| env_text("API_SERVER_PORT"))
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or(DEFAULT_API_PORT);
    s.key = text(get("key"))
        .or_else(|| block.and_then(|b| b.token.clone()))
        .or_else(|| env_text("API_SERVER_KEY"));
    s.cors_origins = get("cors_origins")
        .map(origins)
        .or_else(|| env_text("API_SERVER_CORS_ORIGINS").map(|v| origins(&Value::String(v))))
        .unwrap_or_default();
    s.model_name = text(get("model_name")).or_else(|| env_text("API_SERVER_MODEL_NAME"));
    if let Some(v) = get("model_routes") {
        s.model_routes = routes(r, v);
    }
    let cap = gateway
        .and_then(|g| g.get("api_server"))
        .and_then(|a| a.get("max_concurrent_runs"))
        .filter(|n| !n.is_null());
    if let Some(n) = cap
        && let Some(v) = r.int(n, "gateway.api_server.max_concurrent_runs", 0, 100_000)
    {
        s.max_concurrent_runs = u32::try_from(v).unwrap_or(u32::MAX);
    }
    let stored = gateway
        .and_then(|g| g.get("api_server"))
        .and_then(|a| a.get("max_stored_responses"))
        .filter(|n| !n.is_null());
    if let Some(n) = stored
        && let Some(v) = r.int(n, "gateway.api_server.max_stored_responses", 1, 1_000_000)
    {
        s.max_stored_responses = usize::try_from(v).unwrap_or(usize::MAX);
    }
    s.connections = connections(r, extra);
    if let Some(v) = number(r, extra, "max_messages", 1, 10_000_000) {
        s.max_messages = usize::try_from(v).unwrap_or(usize::MAX);
    }
    if let Some(v) = number(r, extra, "max_parked_runs", 1, 100_000) {
        s.max_parked_runs = usize::try_from(v).unwrap_or(usize::MAX);
    }
    if let Some(v) = number(r, extra, "client_tool_timeout_seconds", 1, 86_400) {
        s.client_tool_timeout_seconds = v;
    }
    s
}

/// `platforms.api_server.extra.<key>` as an integer within `min..=max`.
fn number(r: &mut Reader, extra: Option<&Extra>, key: &str, min: i128, max: i128) -> Option<u64> {
    let value = extra?.get(key).filter(|v| !v.is_null())?;
    let name = format!("platforms.api_server.extra.{key}");
    r.int(&Node::from_json(value), &name, min, max)
        .and_then(|v| u64::try_from(v).ok())
}

/// The port's connection bounds, each defaulting to the webhook port's default.
fn connections(r: &mut Reader, extra: Option<&Extra>) -> ConnectionSettings {
    let d = ConnectionSettings::default();
    let mut n = |key: &str, min: i128, max: i128, default: u64| {
        number(r, extra, key, min, max).unwrap_or(default)
    };
    ConnectionSettings {
        header_timeout_secs: n("header_timeout_seconds", 1, 3600, d.header_timeout_secs),
        body_timeout_secs: n("body_timeout_seconds", 1, 3600, d.body_timeout_secs),
        idle_timeout_secs: n("idle_timeout_seconds", 1, 86_400, d.idle_timeout_secs),
        max_connections: n("max_connections", 1, 1 << 20, d.max_connections),
        max_body_bytes_in_flight: n(
            "max_body_bytes_in_flight",
            1,
            1 << 40,
            d.max_body_bytes_in_flight,
        ),
    }
}

/// Example keys herald's own docs have shown: copied as written, they are known to all.
const DOCUMENTED_KEYS: &[&str] = &["paste-a-random-key-of-16+-characters"];

/// Why the API server must not start with these settings (the spec's startup guard): no
/// key, a placeholder or an example key from the docs, or fewer than 16 characters.
pub fn key_problem(key: Option<&str>) -> Option<&'static str> {
    const PLACEHOLDERS: &[&str] = &[
        "changeme",
        "change-me",
        "your-key",
        "your_api_key",
        "your-api-key",
        "secret",
        "placeholder",
        "xxxxxxxxxxxxxxxx",
        "<bearer secret>",
        "sk-xxxxxxxxxxxxxxxx",
    ];
    /// Words of a key written for a reader to replace.
    const PLACEHOLDER_WORDS: &[&str] = &[
        "your-",
        "your_",
        "change",
        "paste",
        "random-key",
        "placeholder",
        "example",
    ];
    let Some(key) = key.map(str::trim).filter(|k| !k.is_empty()) else {
        return Some("no API key is set: set platforms.api_server.extra.key (or API_SERVER_KEY)");
    };
    let lower = key.to_ascii_lowercase();
    if DOCUMENTED_KEYS.contains(&lower.as_str()) {
        return Some(
            "the API key is an example from herald's docs: set a random key of 16 characters or more",
        );
    }
    if PLACEHOLDERS.contains(&lower.as_str())
        || PLACEHOLDER_WORDS.iter().any(|w| lower.contains(w))
        || lower.starts_with('<')
    {
        return Some("the API key is a placeholder: set a random key of 16 characters or more");
    }
    if key.chars().count() < 16 {
        return Some("the API key is shorter than 16 characters");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, Home};

    fn load(yaml: &str, env: &[(&str, &str)]) -> ApiServerSettings {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let lookup = move |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        Config::from_yaml(&Home::new("/nonexistent-herald-home"), yaml, &lookup)
            .unwrap()
            .api_server
    }

    #[test]
    fn config_env_and_defaults() {
        let d = load("", &[]);
        assert_eq!(
            (d.enabled, d.host.as_str(), d.port, d.max_concurrent_runs),
            (false, "127.0.0.1", 8642, 10)
        );
        let s = load(
            "platforms:\n  api_server:\n    enabled: true\n    extra:\n      port: nope\n      key: from-config-0123456789\n      cors_origins: 'https://a.example, https://b.example'\n      model_routes:\n        fast: {model: small, provider: custom}\ngateway:\n  api_server:\n    max_concurrent_runs: 0\n",
            &[
                ("API_SERVER_KEY", "from-env-0123456789"),
                ("API_SERVER_HOST", "0.0.0.0"),
            ],
        );
        assert!(s.enabled);
        assert_eq!(s.port, 8642, "a non-integer port falls back");
        assert_eq!(
            s.key.as_deref(),
            Some("from-config-0123456789"),
            "extra wins over env"
        );
        assert_eq!(s.host, "0.0.0.0");
        assert_eq!(s.cors_origins, ["https://a.example", "https://b.example"]);
        assert_eq!(s.model_routes["fast"].model.as_deref(), Some("small"));
        assert_eq!(s.max_concurrent_runs, 0);
        let e = load(
            "",
            &[
                ("API_SERVER_ENABLED", "yes"),
                ("API_SERVER_PORT", "9000"),
                ("API_SERVER_CORS_ORIGINS", "*"),
            ],
        );
        assert_eq!(
            (e.enabled, e.port, e.cors_origins.clone()),
            (true, 9000, vec!["*".to_owned()])
        );
    }

    #[test]
    fn the_key_guard() {
        assert!(key_problem(None).is_some());
        assert!(key_problem(Some("short")).is_some());
        assert!(key_problem(Some("changeme")).is_some());
        assert!(key_problem(Some("your-api-key-goes-here")).is_some());
        assert!(key_problem(Some("paste-a-random-key-of-16+-characters")).is_some());
        assert_eq!(key_problem(Some("9f86d081884c7d659a2feaa0c55ad015")), None);
    }
}
