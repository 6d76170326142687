//! The model picker's inventory, one builder for every front door (`/api/model/options`
//! of the HTTP API, `model.options` of the JSON-RPC gateway): the providers the
//! configuration names, the current one first, each with the models its server lists.
//! Only the current provider is asked unless `refresh` asks every saved one, so a saved
//! but unreachable endpoint cannot stall the list; lists are cached until a refresh.

use crate::model_select;
use crate::runtime::Runtime;
use herald_config::process_env;
use herald_llm::LlmClient;
use serde_json::{Value, json};
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
    let mut out = vec![rt.endpoint.model.clone()];
    for id in provider_ids(rt).into_iter().skip(1) {
        if let Some(m) = own_model(rt, &id).filter(|m| !m.is_empty()) {
            out.push(format!("{id}:{m}"));
        }
    }
    out
}

impl ModelOptions {
    /// The inventory; `refresh` drops the cache and asks every saved provider.
    pub async fn build(&self, rt: &Runtime, client: &LlmClient, refresh: bool) -> Value {
        if refresh && let Ok(mut c) = self.cache.lock() {
            c.clear();
        }
        let mut providers = Vec::new();
        for (i, id) in provider_ids(rt).into_iter().enumerate() {
            let current = i == 0;
            let endpoint = if current {
                Some(rt.endpoint.clone())
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
                true => Some(rt.endpoint.model.clone()),
                false => own_model(rt, &id),
            };
            if let Some(m) = named.filter(|m| !models.contains(m) && !m.is_empty()) {
                models.insert(0, m);
            }
            providers.push(json!({
                "id": id,
                "current": current,
                "base_url": endpoint.as_ref().map(herald_llm::Endpoint::shown_base_url),
                "reachable": endpoint.is_some(),
                "models": models.iter().map(|m| json!({"id": m, "pricing": null, "capabilities": {}})).collect::<Vec<_>>(),
            }));
        }
        json!({
            "current": {"provider": rt.provider, "model": rt.endpoint.model},
            "providers": providers,
        })
    }
}
