//! The model half of `config.yaml`, typed: the `model` block (or `model: <name>`),
//! `providers:` (named endpoints) and `custom_providers:` (a list with names). Text
//! settings are trimmed and an empty one counts as absent, as Hermes reads them; a
//! value of the wrong type is an error naming file, line and key.

use crate::node::{Node, NodeValue};
use crate::reader::Reader;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The model choice as configured.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelSettings {
    /// `model.default` (or `model.model`, or `model: <name>`).
    pub default: Option<String>,
    /// `model.provider`.
    pub provider: Option<String>,
    /// `model.base_url`.
    pub base_url: Option<String>,
    /// `model.api_key` (or `model.api`).
    pub api_key: Option<String>,
    /// `model.api_mode`.
    pub api_mode: Option<String>,
    /// `model.max_tokens`.
    pub max_tokens: Option<u64>,
    /// `model.context_length`: the model's context window in tokens, when the user
    /// states it (ACP's context indicator).
    pub context_length: Option<u64>,
    /// `providers.<name>`.
    pub providers: BTreeMap<String, ProviderSettings>,
    /// `custom_providers[]`, by their `name`.
    pub custom_providers: Vec<ProviderSettings>,
}

/// One named endpoint (`providers.<name>` or a `custom_providers` entry).
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderSettings {
    pub name: String,
    /// `enabled: false` turns it off.
    pub enabled: bool,
    /// `base_url` (or `api`, `url`).
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    /// The environment variable holding the key.
    pub key_env: Option<String>,
    /// `default_model` (`providers`) or `model` (`custom_providers`).
    pub default_model: Option<String>,
    /// `api_mode` (or `transport`).
    pub api_mode: Option<String>,
    pub extra_body: Map<String, Value>,
    pub extra_headers: Vec<(String, String)>,
    pub request_timeout_secs: Option<f64>,
    pub stale_timeout_secs: Option<f64>,
}

impl ModelSettings {
    /// A `providers:` key or a `custom_providers` name.
    pub fn custom_provider(&self, name: &str) -> Option<&ProviderSettings> {
        self.custom_providers.iter().find(|p| p.name == name)
    }
}

/// The first of `keys` in `node` that has text, trimmed.
fn text(r: &mut Reader, node: &Node, prefix: &str, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|k| {
        let value = node.get(k).filter(|n| !n.is_null())?;
        r.string(value, &format!("{prefix}.{k}"))
            .flatten()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    })
}

/// Seconds as a number (an integer, a float, or a numeric string such as `1e3`, which
/// YAML reads as text and Hermes as a number).
fn seconds(r: &mut Reader, node: &Node, prefix: &str, key: &str) -> Option<f64> {
    let value = node.get(key).filter(|n| !n.is_null())?;
    let secs = match &value.value {
        NodeValue::Int(i) => Some(*i as f64),
        NodeValue::Float(f) => Some(*f),
        NodeValue::Str(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    if secs.is_none() {
        r.error(
            Some(value),
            &format!("{prefix}.{key}"),
            format!("expected a number of seconds, found {}", value.kind()),
        );
    }
    secs
}

fn mapping<'a>(
    r: &mut Reader,
    node: &'a Node,
    prefix: &str,
    key: &str,
) -> Option<&'a [(String, Node)]> {
    let value = node.get(key).filter(|n| !n.is_null())?;
    match &value.value {
        NodeValue::Map(entries) => Some(entries),
        _ => {
            let at = if prefix.is_empty() {
                key.to_owned()
            } else {
                format!("{prefix}.{key}")
            };
            r.error(
                Some(value),
                &at,
                format!("expected a mapping, found {}", value.kind()),
            );
            None
        }
    }
}

fn provider(
    r: &mut Reader,
    node: &Node,
    name: &str,
    prefix: &str,
    model_key: &str,
) -> ProviderSettings {
    let enabled = node
        .get("enabled")
        .filter(|n| !n.is_null())
        .and_then(|n| r.bool(n, &format!("{prefix}.enabled")))
        .unwrap_or(true);
    let extra_body = mapping(r, node, prefix, "extra_body")
        .map(|entries| {
            entries
                .iter()
                .map(|(k, v)| (k.clone(), v.to_json()))
                .collect()
        })
        .unwrap_or_default();
    let extra_headers = mapping(r, node, prefix, "extra_headers")
        .map(|entries| {
            entries
                .iter()
                .filter_map(|(k, v)| {
                    let key = format!("{prefix}.extra_headers.{k}");
                    r.string(v, &key).flatten().map(|v| (k.clone(), v))
                })
                .collect()
        })
        .unwrap_or_default();
    ProviderSettings {
        name: name.to_owned(),
        enabled,
        base_url: text(r, node, prefix, &["base_url", "api", "url"]),
        api_key: text(r, node, prefix, &["api_key"]),
        key_env: text(r, node, prefix, &["key_env"]),
        default_model: text(r, node, prefix, &[model_key]),
        api_mode: text(r, node, prefix, &["api_mode", "transport"]),
        extra_body,
        extra_headers,
        request_timeout_secs: seconds(r, node, prefix, "request_timeout_seconds"),
        stale_timeout_secs: seconds(r, node, prefix, "stale_timeout_seconds"),
    }
}

/// Reads the model settings from the top-level document; problems go to `r`.
pub fn read_model_settings(r: &mut Reader, doc: &Node) -> ModelSettings {
    let mut settings = ModelSettings::default();
    match doc.get("model").filter(|n| !n.is_null()) {
        None => {}
        Some(Node {
            value: NodeValue::Str(name),
            ..
        }) => settings.default = Some(name.trim().to_owned()).filter(|s| !s.is_empty()),
        Some(
            block @ Node {
                value: NodeValue::Map(_),
                ..
            },
        ) => {
            settings.default = text(r, block, "model", &["default", "model"]);
            settings.provider = text(r, block, "model", &["provider"]);
            settings.base_url = text(r, block, "model", &["base_url"]);
            settings.api_key = text(r, block, "model", &["api_key", "api"]);
            settings.api_mode = text(r, block, "model", &["api_mode"]);
            settings.max_tokens = block
                .get("max_tokens")
                .filter(|n| !n.is_null())
                .and_then(|n| r.int(n, "model.max_tokens", 1, i128::from(u32::MAX)))
                .and_then(|v| u64::try_from(v).ok());
            settings.context_length = block
                .get("context_length")
                .filter(|n| !n.is_null())
                .and_then(|n| r.int(n, "model.context_length", 1, i128::from(u32::MAX)))
                .and_then(|v| u64::try_from(v).ok());
        }
        Some(other) => r.error(
            Some(other),
            "model",
            format!(
                "expected a model name or a mapping (model.default, model.provider ...), found {}",
                other.kind()
            ),
        ),
    }
    if let Some(entries) = mapping(r, doc, "", "providers") {
        for (name, node) in entries {
            let prefix = format!("providers.{name}");
            let p = provider(r, node, name, &prefix, "default_model");
            settings.providers.insert(name.clone(), p);
        }
    }
    match doc.get("custom_providers").filter(|n| !n.is_null()) {
        None => {}
        Some(Node {
            value: NodeValue::Seq(items),
            ..
        }) => {
            for (i, item) in items.iter().enumerate() {
                let prefix = format!("custom_providers[{i}]");
                let Some(name) = text(r, item, &prefix, &["name"]) else {
                    r.error(Some(item), &prefix, "a custom provider needs a name");
                    continue;
                };
                let p = provider(r, item, &name, &prefix, "model");
                settings.custom_providers.push(p);
            }
        }
        Some(other) => r.error(
            Some(other),
            "custom_providers",
            format!(
                "expected a list of providers (each with a name and base_url), found {}",
                other.kind()
            ),
        ),
    }
    settings
}

#[cfg(test)]
mod tests {
    use crate::{Config, Home};

    fn load(yaml: &str) -> Result<crate::ModelSettings, String> {
        Config::from_yaml(&Home::new("/nonexistent-herald-home"), yaml, &|_| None)
            .map(|c| c.model)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn every_spelling_hermes_reads() {
        assert_eq!(
            load("model: qwen3\n").unwrap().default.as_deref(),
            Some("qwen3")
        );
        let m = load(
            "model:\n  model: ' m '\n  api: k\n  max_tokens: 100\n  context_length: 32000\nproviders:\n  v:\n    url: http://h/v1\n    transport: chat_completions\n    enabled: 'no'\n    extra_headers: {X-A: b}\n    request_timeout_seconds: 1e3\ncustom_providers:\n  - name: local\n    api: http://l/v1\n    model: llama\n",
        )
        .unwrap();
        assert_eq!(
            (m.default.as_deref(), m.api_key.as_deref(), m.max_tokens),
            (Some("m"), Some("k"), Some(100))
        );
        assert_eq!(m.context_length, Some(32000));
        let v = &m.providers["v"];
        assert_eq!(
            (v.base_url.as_deref(), v.api_mode.as_deref(), v.enabled),
            (Some("http://h/v1"), Some("chat_completions"), false)
        );
        assert_eq!(v.extra_headers, [("X-A".to_owned(), "b".to_owned())]);
        assert_eq!(v.request_timeout_secs, Some(1000.0));
        let local = m.custom_provider("local").unwrap();
        assert_eq!(
            (local.base_url.as_deref(), local.default_model.as_deref()),
            (Some("http://l/v1"), Some("llama"))
        );
    }

    #[test]
    fn a_mistyped_model_setting_names_its_place() {
        for (yaml, key) in [
            ("model: [a, b]\n", "model"),
            (
                "model:\n  default: m\n  max_tokens: lots\n",
                "model.max_tokens",
            ),
            (
                "providers:\n  v:\n    base_url: [x]\n",
                "providers.v.base_url",
            ),
            (
                "providers:\n  v:\n    stale_timeout_seconds: soon\n",
                "providers.v.stale_timeout_seconds",
            ),
            ("providers: [a]\n", "providers"),
            (
                "custom_providers:\n  - base_url: http://l/v1\n",
                "custom_providers[0]",
            ),
            ("custom_providers: {a: 1}\n", "custom_providers"),
        ] {
            let err = load(yaml).unwrap_err();
            assert!(
                err.contains(&format!("{key}:")) || err.contains(key),
                "{yaml}: {err}"
            );
            assert!(err.contains("config.yaml:"), "{err}");
        }
    }

    #[test]
    fn plugin_lists_are_read_and_checked() {
        let home = Home::new("/nonexistent-herald-home");
        let c = Config::from_yaml(
            &home,
            "plugins:\n  enabled: [a, b]\n  disabled: b\n",
            &|_| None,
        )
        .unwrap();
        assert_eq!(
            (c.agent.plugins_enabled, c.agent.plugins_disabled),
            (vec!["a".to_owned(), "b".to_owned()], vec!["b".to_owned()])
        );
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        let err = Config::from_yaml(&home, "plugins:\n  enabled: {a: 1}\n", &|_| None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("plugins.enabled"), "{err}");
    }
}
