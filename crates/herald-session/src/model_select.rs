//! Choosing the provider endpoint and model for a chat (agent spec §4.1): `-m`,
//! `--provider`, the `model` block, `providers:`, `custom_providers:`, and the
//! environment (`CUSTOM_BASE_URL`, `OPENROUTER_BASE_URL`; `OPENAI_BASE_URL` is ignored).

use herald_llm::{Endpoint, check_wire_format, resolve_api_key};
use serde_json::{Map, Value};
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

fn text(v: &Value, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|k| {
        v.get(*k)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    })
}

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

/// Resolves the endpoint for a chat.
pub fn select(
    sections: &Map<String, Value>,
    model_flag: Option<&str>,
    provider_flag: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Selected, SelectError> {
    let model_block = match sections.get("model") {
        Some(Value::String(s)) => serde_json::json!({ "default": s }),
        Some(v @ Value::Object(_)) => v.clone(),
        _ => Value::Object(Map::new()),
    };
    let providers = sections
        .get("providers")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let customs: Vec<Value> = sections
        .get("custom_providers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let is_provider = |p: &str| {
        p == "openrouter"
            || p == "or"
            || CUSTOM_ALIASES.contains(&p)
            || providers.contains_key(p)
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
        .or_else(|| text(&model_block, &["provider"]))
        .or_else(|| env("HERALD_INFERENCE_PROVIDER").or_else(|| env("HERMES_INFERENCE_PROVIDER")))
        .unwrap_or_else(|| "auto".to_owned());
    let configured_model = text(&model_block, &["default", "model"]);
    let env_key = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let openrouter_base = || match env_key("OPENROUTER_BASE_URL") {
        Some(url) => (url, "OPENROUTER_BASE_URL".to_owned()),
        None => (
            OPENROUTER_BASE.to_owned(),
            "model.provider: openrouter".to_owned(),
        ),
    };
    // `model.base_url`, else `CUSTOM_BASE_URL`, with the setting's name.
    let custom_base = || {
        text(&model_block, &["base_url"])
            .map(|b| (b, "model.base_url".to_owned()))
            .or_else(|| env_key("CUSTOM_BASE_URL").map(|b| (b, "CUSTOM_BASE_URL".to_owned())))
    };

    let ((base_url, base_url_from), explicit_key, default_model, api_mode, entry) = match provider
        .as_str()
    {
        "openrouter" | "or" => (openrouter_base(), None, None, None, None),
        p if CUSTOM_ALIASES.contains(&p) => {
            let base = custom_base().ok_or_else(|| {
                SelectError("provider `custom` needs a base URL: set model.base_url in config.yaml or CUSTOM_BASE_URL".into())
            })?;
            let key = text(&model_block, &["api_key", "api"]);
            (base, key, None, text(&model_block, &["api_mode"]), None)
        }
        p if p.starts_with("custom:") => {
            let name = &p["custom:".len()..];
            let entry = customs
                .iter()
                .find(|c| c.get("name").and_then(Value::as_str) == Some(name))
                .ok_or_else(|| {
                    SelectError(format!(
                        "no custom_providers entry named `{name}` in config.yaml"
                    ))
                })?;
            let base = text(entry, &["base_url", "url", "api"])
                .map(|b| (b, format!("custom_providers[{name}].base_url")))
                .ok_or_else(|| SelectError(format!("custom_providers `{name}` has no base_url")))?;
            let key = text(entry, &["api_key"])
                .or_else(|| text(entry, &["key_env"]).and_then(|k| env_key(&k)));
            (
                base,
                key,
                text(entry, &["model"]),
                text(entry, &["api_mode"]),
                Some(entry.clone()),
            )
        }
        "auto" => {
            if let Some(base) = custom_base() {
                let key = text(&model_block, &["api_key", "api"]);
                (base, key, None, text(&model_block, &["api_mode"]), None)
            } else if env_key("OPENROUTER_API_KEY").is_some() {
                (openrouter_base(), None, None, None, None)
            } else {
                return Err(SelectError(
                    "no model provider is configured: set model.base_url (an OpenAI-compatible server such as Ollama, vLLM or llama.cpp) or CUSTOM_BASE_URL, or OPENROUTER_API_KEY".into(),
                ));
            }
        }
        p => {
            let entry = providers.get(p).ok_or_else(|| {
                SelectError(format!("unknown provider `{p}`: use openrouter, custom, custom:<name> or a key of providers: in config.yaml"))
            })?;
            if entry.get("enabled") == Some(&Value::Bool(false)) {
                return Err(SelectError(format!(
                    "provider `{p}` is disabled in config.yaml (enabled: false)"
                )));
            }
            let base = text(entry, &["base_url", "api", "url"])
                .map(|b| (b, format!("providers.{p}.base_url")))
                .ok_or_else(|| SelectError(format!("providers.{p} has no base_url")))?;
            let key = text(entry, &["key_env"])
                .and_then(|k| env_key(&k))
                .or_else(|| text(entry, &["api_key"]));
            (
                base,
                key,
                text(entry, &["default_model"]),
                text(entry, &["api_mode", "transport"]),
                Some(entry.clone()),
            )
        }
    };
    check_wire_format(&base_url, api_mode.as_deref()).map_err(SelectError)?;
    let model = spec_model
        .or(configured_model)
        .or(default_model)
        .ok_or_else(|| {
            SelectError(
                "no model chosen: pass -m <model> or set model.default in config.yaml".into(),
            )
        })?;
    let api_key = resolve_api_key(&base_url, explicit_key.as_deref(), env);
    let mut endpoint = Endpoint::new(base_url, api_key, model);
    endpoint.base_url_from = Some(base_url_from);
    let is_custom = provider == "auto"
        || CUSTOM_ALIASES.contains(&provider.as_str())
        || provider.starts_with("custom:");
    endpoint.max_tokens = model_block
        .get("max_tokens")
        .and_then(Value::as_u64)
        .or(is_custom.then_some(CUSTOM_MAX_TOKENS));
    if let Some(entry) = entry {
        if let Some(Value::Object(extra)) = entry.get("extra_body") {
            endpoint.extra_body = extra.clone();
        }
        if let Some(Value::Object(headers)) = entry.get("extra_headers") {
            endpoint.extra_headers = headers
                .iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect();
        }
        if let Some(s) = entry
            .get("request_timeout_seconds")
            .and_then(Value::as_f64)
            .filter(|s| *s > 0.0)
        {
            endpoint.request_timeout =
                Duration::try_from_secs_f64(s).unwrap_or(endpoint.request_timeout);
        }
        if let Some(s) = entry
            .get("stale_timeout_seconds")
            .and_then(Value::as_f64)
            .filter(|s| *s > 0.0)
        {
            endpoint.stale_timeout =
                Duration::try_from_secs_f64(s).unwrap_or(endpoint.stale_timeout);
        }
    }
    if let Some(s) = env("HERMES_STREAM_STALE_TIMEOUT")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| *s > 0.0)
    {
        endpoint.stale_timeout = Duration::try_from_secs_f64(s).unwrap_or(endpoint.stale_timeout);
    }
    Ok(Selected { endpoint, provider })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn absurd_timeouts_keep_the_defaults() {
        let s = json!({"model": {"default": "m", "base_url": "http://127.0.0.1:1/v1", "request_timeout_seconds": 1e300, "stale_timeout_seconds": 1e300}});
        let s = s.as_object().cloned().unwrap();
        let inf = |k: &str| (k == "HERMES_STREAM_STALE_TIMEOUT").then(|| "inf".to_owned());
        let e = select(&s, None, None, &inf).unwrap().endpoint;
        let d = select(&s, None, None, &|_: &str| None).unwrap().endpoint;
        assert_eq!(e.request_timeout, d.request_timeout);
        assert!(e.request_timeout < Duration::from_secs(86_400));
        assert!(e.stale_timeout < Duration::from_secs(86_400));
    }

    fn sections(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
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
            &Map::new(),
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
            select(&Map::new(), Some("m"), None, &no_env)
                .unwrap_err()
                .0
                .contains("no model provider")
        );
        let env = |k: &str| (k == "OPENAI_BASE_URL").then(|| "http://127.0.0.1:1/v1".to_owned());
        assert!(
            select(&Map::new(), Some("m"), None, &env).is_err(),
            "OPENAI_BASE_URL is ignored"
        );
    }
}
