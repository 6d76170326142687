//! Choosing the provider endpoint and model for a chat (agent spec §4.1): `-m`,
//! `--provider`, the `model` block, `providers:`, `custom_providers:`, and the
//! environment (`CUSTOM_BASE_URL`, `OPENROUTER_BASE_URL`; `OPENAI_BASE_URL` is ignored).

use herald_config::{ModelSettings, ProviderSettings};
use herald_llm::{ApiKey, Endpoint, check_wire_format, resolve_api_key};
use std::time::Duration;

const OPENROUTER_BASE: &str = "https://openrouter.ai/api/v1";
const CUSTOM_ALIASES: &[&str] = &[
    "custom",
    "ollama",
    "local",
    "vllm",
    "llamacpp",
    "llama.cpp",
    "llama-cpp",
];
/// Default output cap for custom endpoints (some local servers stop early otherwise).
const CUSTOM_MAX_TOKENS: u64 = 65_536;

/// Why no endpoint could be chosen.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SelectError(pub String);

/// Splits `-m provider:model` (and `custom:<name>:<model>`); a bare model has no provider.
pub fn parse_model_spec(
    spec: &str,
    known_provider: &dyn Fn(&str) -> bool,
) -> (Option<String>, String) {
    if let Some(rest) = spec.strip_prefix("custom:")
        && let Some((name, model)) = rest.split_once(':')
    {
        return (Some(format!("custom:{name}")), model.to_owned());
    }
    if let Some((p, m)) = spec.split_once(':')
        && known_provider(p)
    {
        return (Some(p.to_owned()), m.to_owned());
    }
    (None, spec.to_owned())
}

/// The chosen endpoint and the provider it was chosen as.
#[derive(Debug, Clone)]
pub struct Selected {
    pub endpoint: Endpoint,
    /// `openrouter`, `custom` (or an alias), `custom:<name>`, a `providers:` key, `auto`.
    pub provider: String,
}

/// Where the endpoint comes from: its base URL and the setting that named it, the
/// key written in config, the provider's default model and wire format, and the entry
/// (for its headers, body and timeouts).
struct Source<'a> {
    base_url: (String, String),
    explicit_key: Option<ApiKey>,
    default_model: Option<String>,
    api_mode: Option<String>,
    entry: Option<&'a ProviderSettings>,
}

/// Resolves the endpoint for a chat.
pub fn select(
    settings: &ModelSettings,
    model_flag: Option<&str>,
    provider_flag: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Selected, SelectError> {
    let is_provider = |p: &str| {
        p == "openrouter"
            || p == "or"
            || CUSTOM_ALIASES.contains(&p)
            || settings.providers.contains_key(p)
            || p.starts_with("custom:")
    };
    let (spec_provider, spec_model) = match model_flag {
        Some(m) => {
            let (p, m) = parse_model_spec(m, &is_provider);
            (p, Some(m))
        }
        None => (None, None),
    };
    let provider = provider_flag
        .map(str::to_owned)
        .or(spec_provider)
        .or_else(|| settings.provider.clone())
        .or_else(|| env("HERALD_INFERENCE_PROVIDER").or_else(|| env("HERMES_INFERENCE_PROVIDER")))
        .unwrap_or_else(|| "auto".to_owned());
    let source = source_of(settings, &provider, env)?;
    check_wire_format(&source.base_url.0, source.api_mode.as_deref()).map_err(SelectError)?;
    let model = spec_model
        .or_else(|| settings.default.clone())
        .or(source.default_model)
        .ok_or_else(|| {
            SelectError(
                "no model chosen: pass -m <model> or set model.default in config.yaml".into(),
            )
        })?;
    let (base_url, base_url_from) = source.base_url;
    let api_key = resolve_api_key(&base_url, source.explicit_key, env);
    let mut endpoint = Endpoint::new(base_url, api_key.value, model);
    endpoint.base_url_from = Some(base_url_from);
    endpoint.api_key_from = api_key.from;
    let is_custom = provider == "auto"
        || CUSTOM_ALIASES.contains(&provider.as_str())
        || provider.starts_with("custom:");
    endpoint.max_tokens = settings
        .max_tokens
        .or(is_custom.then_some(CUSTOM_MAX_TOKENS));
    if let Some(entry) = source.entry {
        endpoint.extra_body = entry.extra_body.clone();
        endpoint.extra_headers = entry.extra_headers.clone();
        if let Some(t) = positive_secs(entry.request_timeout_secs) {
            endpoint.request_timeout = t;
        }
        if let Some(t) = positive_secs(entry.stale_timeout_secs) {
            endpoint.stale_timeout = t;
        }
    }
    let stale_env = env("HERMES_STREAM_STALE_TIMEOUT").and_then(|v| v.trim().parse::<f64>().ok());
    if let Some(t) = positive_secs(stale_env) {
        endpoint.stale_timeout = t;
    }
    Ok(Selected { endpoint, provider })
}

/// A positive, representable number of seconds.
fn positive_secs(secs: Option<f64>) -> Option<Duration> {
    secs.filter(|s| *s > 0.0)
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
}

/// The endpoint's source for a provider name.
fn source_of<'a>(
    settings: &'a ModelSettings,
    provider: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Source<'a>, SelectError> {
    let env_key = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let key = |value: String, from: &str| ApiKey {
        value,
        from: Some(from.to_owned()),
    };
    let key_from_env = |name: &str| env_key(name).map(|v| key(v, name));
    let openrouter = || Source {
        base_url: match env_key("OPENROUTER_BASE_URL") {
            Some(url) => (url, "OPENROUTER_BASE_URL".to_owned()),
            None => (
                OPENROUTER_BASE.to_owned(),
                "model.provider: openrouter".to_owned(),
            ),
        },
        explicit_key: None,
        default_model: None,
        api_mode: None,
        entry: None,
    };
    // `model.base_url`, else `CUSTOM_BASE_URL`, with the setting's name.
    let custom = || {
        let base_url = settings
            .base_url
            .clone()
            .map(|b| (b, "model.base_url".to_owned()))
            .or_else(|| env_key("CUSTOM_BASE_URL").map(|b| (b, "CUSTOM_BASE_URL".to_owned())))?;
        Some(Source {
            base_url,
            explicit_key: settings.api_key.clone().map(|k| key(k, "model.api_key")),
            default_model: None,
            api_mode: settings.api_mode.clone(),
            entry: None,
        })
    };
    match provider {
        "openrouter" | "or" => Ok(openrouter()),
        p if CUSTOM_ALIASES.contains(&p) => custom().ok_or_else(|| {
            SelectError("provider `custom` needs a base URL: set model.base_url in config.yaml or CUSTOM_BASE_URL".into())
        }),
        p if p.starts_with("custom:") => {
            let name = &p["custom:".len()..];
            let entry = settings.custom_provider(name).ok_or_else(|| {
                SelectError(format!("no custom_providers entry named `{name}` in config.yaml"))
            })?;
            let base = entry
                .base_url
                .clone()
                .ok_or_else(|| SelectError(format!("custom_providers `{name}` has no base_url")))?;
            Ok(Source {
                base_url: (base, format!("custom_providers[{name}].base_url")),
                explicit_key: entry
                    .api_key
                    .clone()
                    .map(|k| key(k, &format!("custom_providers[{name}].api_key")))
                    .or_else(|| entry.key_env.as_deref().and_then(key_from_env)),
                default_model: entry.default_model.clone(),
                api_mode: entry.api_mode.clone(),
                entry: Some(entry),
            })
        }
        "auto" => match custom() {
            Some(source) => Ok(source),
            None if env_key("OPENROUTER_API_KEY").is_some() => Ok(openrouter()),
            None => Err(SelectError(
                "no model provider is configured: set model.base_url (an OpenAI-compatible server such as Ollama, vLLM or llama.cpp) or CUSTOM_BASE_URL, or OPENROUTER_API_KEY".into(),
            )),
        },
        p => {
            let entry = settings.providers.get(p).ok_or_else(|| {
                SelectError(format!("unknown provider `{p}`: use openrouter, custom, custom:<name> or a key of providers: in config.yaml"))
            })?;
            if !entry.enabled {
                return Err(SelectError(format!(
                    "provider `{p}` is disabled in config.yaml (enabled: false)"
                )));
            }
            let base = entry
                .base_url
                .clone()
                .ok_or_else(|| SelectError(format!("providers.{p} has no base_url")))?;
            Ok(Source {
                base_url: (base, format!("providers.{p}.base_url")),
                explicit_key: entry
                    .key_env
                    .as_deref()
                    .and_then(key_from_env)
                    .or_else(|| entry.api_key.clone().map(|k| key(k, &format!("providers.{p}.api_key")))),
                default_model: entry.default_model.clone(),
                api_mode: entry.api_mode.clone(),
                entry: Some(entry),
            })
        }
    }
}

/// The environment variable that holds provider `slug`'s key (what the TUI's
/// `model.save_key` writes), if it has one.
pub fn key_env(settings: &ModelSettings, slug: &str) -> Option<String> {
    match slug {
        "openrouter" | "or" => Some("OPENROUTER_API_KEY".to_owned()),
        s if s.starts_with("custom:") => settings
            .custom_provider(&s["custom:".len()..])
            .and_then(|e| e.key_env.clone()),
        s => settings.providers.get(s).and_then(|e| e.key_env.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn absurd_timeouts_keep_the_defaults() {
        let s = sections(
            json!({"model": {"default": "m", "base_url": "http://127.0.0.1:1/v1"}, "custom_providers": [{"name": "x", "base_url": "http://127.0.0.1:1/v1", "request_timeout_seconds": 1e300, "stale_timeout_seconds": 1e300}]}),
        );
        let inf = |k: &str| (k == "HERMES_STREAM_STALE_TIMEOUT").then(|| "inf".to_owned());
        let e = select(&s, Some("custom:x:m"), None, &inf).unwrap().endpoint;
        let d = select(&s, None, None, &|_: &str| None).unwrap().endpoint;
        assert_eq!(e.request_timeout, d.request_timeout);
        assert!(e.request_timeout < Duration::from_secs(86_400));
        assert!(e.stale_timeout < Duration::from_secs(86_400));
    }

    /// The model settings of a config written as JSON (which is YAML too).
    fn sections(v: Value) -> ModelSettings {
        let home = herald_config::Home::new("/nonexistent-herald-home");
        herald_config::Config::from_yaml(&home, &v.to_string(), &|_| None)
            .unwrap()
            .model
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn custom_base_url_and_model() {
        let s = sections(
            json!({"model": {"default": "qwen3", "base_url": "http://127.0.0.1:8080/v1"}}),
        );
        let e = select(&s, None, None, &no_env).unwrap().endpoint;
        assert_eq!(
            (e.base_url.as_str(), e.model.as_str(), e.api_key.as_str()),
            ("http://127.0.0.1:8080/v1", "qwen3", "no-key-required")
        );
        assert_eq!(e.max_tokens, Some(65_536));
        let e = select(&s, Some("llama3"), None, &no_env).unwrap().endpoint;
        assert_eq!(e.model, "llama3");
    }

    #[test]
    fn named_and_legacy_providers() {
        let s = sections(json!({
            "providers": {"my-vllm": {"base_url": "http://10.0.0.2:8000/v1", "key_env": "VKEY", "default_model": "qwen", "extra_body": {"top_k": 5}}},
            "custom_providers": [{"name": "local", "base_url": "http://127.0.0.1:11434/v1", "model": "llama"}]
        }));
        let env = |k: &str| (k == "VKEY").then(|| "secret".to_owned());
        let e = select(&s, None, Some("my-vllm"), &env).unwrap().endpoint;
        assert_eq!((e.model.as_str(), e.api_key.as_str()), ("qwen", "secret"));
        assert_eq!(e.extra_body["top_k"], 5);
        let e = select(&s, Some("custom:local:phi"), None, &no_env)
            .unwrap()
            .endpoint;
        assert_eq!(
            (e.base_url.as_str(), e.model.as_str()),
            ("http://127.0.0.1:11434/v1", "phi")
        );
        let e = select(&s, Some("my-vllm:other"), None, &env)
            .unwrap()
            .endpoint;
        assert_eq!(e.model, "other");
        assert!(select(&s, None, Some("nope"), &no_env).is_err());
    }

    #[test]
    fn openrouter_and_refusals() {
        let env = |k: &str| (k == "OPENROUTER_API_KEY").then(|| "sk-or".to_owned());
        let e = select(
            &ModelSettings::default(),
            Some("openrouter:anthropic/claude-x"),
            None,
            &env,
        )
        .unwrap()
        .endpoint;
        assert_eq!(
            (e.base_url.as_str(), e.api_key.as_str(), e.model.as_str()),
            (OPENROUTER_BASE, "sk-or", "anthropic/claude-x")
        );
        let s =
            sections(json!({"model": {"default": "gpt", "base_url": "https://api.openai.com/v1"}}));
        assert!(
            select(&s, None, None, &no_env)
                .unwrap_err()
                .0
                .contains("Responses")
        );
        assert!(
            select(&ModelSettings::default(), Some("m"), None, &no_env)
                .unwrap_err()
                .0
                .contains("no model provider")
        );
        let env = |k: &str| (k == "OPENAI_BASE_URL").then(|| "http://127.0.0.1:1/v1".to_owned());
        assert!(
            select(&ModelSettings::default(), Some("m"), None, &env).is_err(),
            "OPENAI_BASE_URL is ignored"
        );
    }
}
