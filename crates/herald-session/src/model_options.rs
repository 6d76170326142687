//! The model picker's inventory, one builder for every front door (`/api/model/options`
//! of the HTTP API, `model.options` of the JSON-RPC gateway), in Hermes's
//! `build_models_payload` shape: the providers the configuration names, the current one
//! first, each with the models its server lists.
//! Only the current provider is asked unless `refresh` asks every saved one, so a saved
//! but unreachable endpoint cannot stall the list; lists are cached until a refresh.

use crate::model_select;
use crate::runtime::Runtime;
use herald_config::process_env;
use herald_llm::LlmClient;
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// How long one provider's list may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// Cached model lists by provider id.
#[derive(Default)]
pub struct ModelOptions {
    cache: Mutex<HashMap<String, Vec<String>>>,
}

/// One provider the configuration names: its id as `-m`/`--provider` take it.
fn provider_ids(rt: &Runtime) -> Vec<String> {
    let settings = rt.model_settings();
    let mut ids = vec![rt.provider.clone()];
    ids.extend(settings.providers.keys().cloned());
    ids.extend(
        settings
            .custom_providers
            .iter()
            .map(|c| format!("custom:{}", c.name)),
    );
    let mut seen = std::collections::HashSet::new();
    ids.retain(|id| seen.insert(id.clone()));
    ids
}

/// The model a saved provider names for itself (`default_model`, a custom provider's
/// `model`).
fn own_model(rt: &Runtime, id: &str) -> Option<String> {
    let settings = rt.model_settings();
    let entry = match id.strip_prefix("custom:") {
        Some(name) => settings.custom_provider(name),
        None => settings.providers.get(id),
    };
    entry.and_then(|p| p.default_model.clone())
}

/// The models the configuration names, without asking any server: the current model,
/// then each other saved provider's own model as `provider:model` (what `/model` and
/// `-m` take).
pub fn configured_models(rt: &Runtime) -> Vec<String> {
    let mut out = vec![rt.endpoint().model];
    for id in provider_ids(rt).into_iter().skip(1) {
        if let Some(m) = own_model(rt, &id).filter(|m| !m.is_empty()) {
            out.push(format!("{id}:{m}"));
        }
    }
    out
}

/// `model.options` and `GET /api/model/options`, as Hermes's `build_models_payload`
/// gives it (the shape its TUI's `/model` picker reads).
#[derive(Debug, Clone, Serialize)]
pub struct ModelInventory {
    pub providers: Vec<ProviderRow>,
    /// The model in use.
    pub model: String,
    /// The provider in use (a row's `slug`).
    pub provider: String,
}

/// One provider of the picker.
#[derive(Debug, Clone, Serialize)]
pub struct ProviderRow {
    /// What `/model NAME --provider SLUG` takes.
    pub slug: String,
    pub name: String,
    pub is_current: bool,
    /// Saved under `providers:` or `custom_providers:` (not a built-in one).
    pub is_user_defined: bool,
    /// Model ids, the provider's own first.
    pub models: Vec<String>,
    pub total_models: usize,
    /// `built-in` or `user-config`, as Hermes names where a row came from.
    pub source: &'static str,
    /// A user-defined provider's base URL (no credentials in it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_url: Option<String>,
    /// A credential resolves, so picking a model works.
    pub authenticated: bool,
    /// Per model `{fast, reasoning}`; herald knows no capabilities, so it is empty.
    pub capabilities: serde_json::Map<String, Value>,
}

/// The name a picker shows for a provider id.
fn display_name(id: &str) -> String {
    let known = [
        ("openrouter", "OpenRouter"),
        ("or", "OpenRouter"),
        ("custom", "Custom endpoint"),
        ("auto", "Custom endpoint"),
        ("ollama", "Ollama"),
        ("local", "Local endpoint"),
    ];
    match known.iter().find(|(k, _)| *k == id) {
        Some((_, name)) => (*name).to_owned(),
        None => id.strip_prefix("custom:").unwrap_or(id).to_owned(),
    }
}

impl ModelOptions {
    /// The inventory; `refresh` drops the cache and asks every saved provider.
    pub async fn build(&self, rt: &Runtime, client: &LlmClient, refresh: bool) -> ModelInventory {
        if refresh && let Ok(mut c) = self.cache.lock() {
            c.clear();
        }
        let mut providers = Vec::new();
        for (i, id) in provider_ids(rt).into_iter().enumerate() {
            providers.push(self.row(rt, client, id, i == 0, refresh).await);
        }
        ModelInventory {
            providers,
            model: rt.endpoint().model,
            provider: rt.provider.clone(),
        }
    }

    /// One provider's row: its models from the cache or (the current one, or every
    /// one on `refresh`) its server, its own model first.
    async fn row(
        &self,
        rt: &Runtime,
        client: &LlmClient,
        id: String,
        current: bool,
        refresh: bool,
    ) -> ProviderRow {
        let endpoint = if current {
            Some(rt.endpoint())
        } else {
            model_select::select(rt.model_settings(), None, Some(&id), &process_env)
                .ok()
                .map(|s| s.endpoint)
        };
        let cached = self.cache.lock().ok().and_then(|c| c.get(&id).cloned());
        let models = match (cached, &endpoint) {
            (Some(m), _) => Some(m),
            (None, Some(e)) if current || refresh => {
                let listed = client.list_models(e, PROBE_TIMEOUT).await;
                if let (Some(m), Ok(mut c)) = (&listed, self.cache.lock()) {
                    c.insert(id.clone(), m.clone());
                }
                listed
            }
            _ => None,
        };
        let mut models = models.unwrap_or_default();
        let named = match current {
            true => Some(rt.endpoint().model),
            false => own_model(rt, &id),
        };
        if let Some(m) = named.filter(|m| !models.contains(m) && !m.is_empty()) {
            models.insert(0, m);
        }
        let settings = rt.model_settings();
        let user_defined = settings.providers.contains_key(&id) || id.starts_with("custom:");
        let authenticated = match (current, &endpoint) {
            (true, _) => rt.credential_resolves(),
            (false, Some(e)) => crate::runtime::endpoint_has_credential(e),
            (false, None) => false,
        };
        ProviderRow {
            name: display_name(&id),
            is_current: current,
            is_user_defined: user_defined,
            total_models: models.len(),
            models,
            source: if user_defined {
                "user-config"
            } else {
                "built-in"
            },
            api_url: endpoint
                .as_ref()
                .filter(|_| user_defined)
                .map(herald_llm::Endpoint::shown_base_url),
            authenticated,
            capabilities: serde_json::Map::new(),
            slug: id,
        }
    }
}
