//! Health (§3) and discovery (§4): `/health`, `/health/detailed`, `/v1/models`,
//! `/v1/capabilities`.

use crate::Api;
use crate::errors::ApiError;
use crate::wire::*;
use axum::Json;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::Arc;

const PLATFORM: &str = "hermes-agent";

pub(crate) use herald_session::now_secs;

#[utoipa::path(get, path = "/health", tag = "health", security(()), responses((status = 200, description = "Alive", body = Health)))]
pub async fn health() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
        platform: PLATFORM.into(),
        version: herald_protocol::HERMES_VERSION.into(),
        herald_version: env!("CARGO_PKG_VERSION").into(),
    })
}

#[utoipa::path(get, path = "/v1/health", tag = "health", security(()), responses((status = 200, description = "Alive", body = Health)))]
pub async fn v1_health() -> Json<Health> {
    health().await
}

/// This document, generated from the handlers' path entries when the router is built.
#[utoipa::path(get, path = "/openapi.json", tag = "discovery", responses((status = 200, description = "The OpenAPI document", content_type = "application/json"), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope)))]
pub async fn openapi(State(api): State<Arc<Api>>) -> Response {
    let doc = api.openapi.get().cloned().unwrap_or_default();
    ([(CONTENT_TYPE, "application/json")], doc).into_response()
}

#[utoipa::path(get, path = "/health/detailed", tag = "health", responses((status = 200, description = "Readiness and active agents", body = HealthDetailed), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope)))]
pub async fn health_detailed(State(api): State<Arc<Api>>) -> Json<HealthDetailed> {
    let draining = api.draining.load(std::sync::atomic::Ordering::SeqCst);
    let active = api.host.live_runs();
    let pick = |draining_word: &str, serving_word: &str| match draining {
        true => draining_word.to_owned(),
        false => serving_word.to_owned(),
    };
    Json(HealthDetailed {
        status: pick("draining", "ok"),
        readiness: json!({"ready": !draining, "api_server": pick("draining", "ready")}),
        platform: PLATFORM.into(),
        version: herald_protocol::HERMES_VERSION.into(),
        herald_version: env!("CARGO_PKG_VERSION").into(),
        gateway_state: pick("draining", "running"),
        platforms: json!({"api_server": {"state": pick("draining", "connected")}}),
        active_agents: active,
        gateway_busy: active > 0,
        gateway_drainable: true,
        exit_reason: None,
        updated_at: now_secs(),
        pid: std::process::id(),
    })
}

fn model_entry(id: &str, root: &str, parent: Option<&str>) -> Model {
    Model {
        id: id.into(),
        object: "model".into(),
        created: now_secs() as u64,
        owned_by: "hermes".into(),
        permission: Vec::new(),
        root: root.into(),
        parent: parent.map(str::to_owned),
    }
}

#[utoipa::path(get, path = "/v1/models", tag = "discovery", responses((status = 200, description = "The advertised model and its aliases", body = ModelList), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope)))]
pub async fn models(State(api): State<Arc<Api>>) -> Json<ModelList> {
    let primary = api.model_id.as_str();
    let mut data = vec![model_entry(primary, primary, None)];
    for (alias, route) in &api.settings.model_routes {
        if alias != primary {
            let root = route.model.as_deref().unwrap_or(alias);
            data.push(model_entry(alias, root, Some(primary)));
        }
    }
    Json(ModelList {
        object: "list".into(),
        data,
    })
}

/// The endpoints advertised, by name: (method, path).
const ENDPOINTS: &[(&str, &str, &str)] = &[
    ("health", "GET", "/health"),
    ("health_detailed", "GET", "/health/detailed"),
    ("models", "GET", "/v1/models"),
    ("model_options", "GET", "/api/model/options"),
    ("chat_completions", "POST", "/v1/chat/completions"),
    ("responses", "POST", "/v1/responses"),
    ("runs", "POST", "/v1/runs"),
    ("run_status", "GET", "/v1/runs/{run_id}"),
    ("run_events", "GET", "/v1/runs/{run_id}/events"),
    ("run_approval", "POST", "/v1/runs/{run_id}/approval"),
    ("run_stop", "POST", "/v1/runs/{run_id}/stop"),
    ("run_steer", "POST", "/v1/runs/{run_id}/steer"),
    ("skills", "GET", "/v1/skills"),
    ("toolsets", "GET", "/v1/toolsets"),
    ("sessions", "GET", "/api/sessions"),
    ("session_create", "POST", "/api/sessions"),
    ("session", "GET", "/api/sessions/{session_id}"),
    ("session_update", "PATCH", "/api/sessions/{session_id}"),
    ("session_delete", "DELETE", "/api/sessions/{session_id}"),
    (
        "session_messages",
        "GET",
        "/api/sessions/{session_id}/messages",
    ),
    ("session_fork", "POST", "/api/sessions/{session_id}/fork"),
    ("jobs", "GET", "/api/jobs"),
    ("job_create", "POST", "/api/jobs"),
    ("job", "GET", "/api/jobs/{job_id}"),
    ("job_update", "PATCH", "/api/jobs/{job_id}"),
    ("job_delete", "DELETE", "/api/jobs/{job_id}"),
    ("job_pause", "POST", "/api/jobs/{job_id}/pause"),
    ("job_resume", "POST", "/api/jobs/{job_id}/resume"),
    ("job_run", "POST", "/api/jobs/{job_id}/run"),
    ("session_chat", "POST", "/api/sessions/{session_id}/chat"),
    (
        "session_chat_stream",
        "POST",
        "/api/sessions/{session_id}/chat/stream",
    ),
];

#[utoipa::path(get, path = "/v1/capabilities", tag = "discovery", responses((status = 200, description = "What this server offers", body = Capabilities), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope)))]
pub async fn capabilities(State(api): State<Arc<Api>>) -> Json<Capabilities> {
    let endpoints: serde_json::Map<String, Value> = ENDPOINTS
        .iter()
        .map(|(name, method, path)| ((*name).to_owned(), json!({"method": method, "path": path})))
        .collect();
    Json(Capabilities {
        object: "hermes.api_server.capabilities".into(),
        platform: PLATFORM.into(),
        model: api.model_id.clone(),
        auth: json!({"type": "bearer", "required": true}),
        runtime: json!({"mode": "server_agent", "tool_execution": "mixed", "split_runtime": false,
                    "description": "herald runs the agent and its own tools on the server (shown as mcp_call items); the functions a request defines are returned for the client to run."}),
        features: json!({
            "chat_completions": true, "chat_completions_streaming": true,
            "responses_api": true, "responses_streaming": true,
            "run_submission": true, "run_status": true, "run_events_sse": true, "run_stop": true,
            "run_approval_response": true, "run_steer": true, "tool_progress_events": true,
            "tool_progress_request_header": "X-Hermes-Tool-Progress: 1",
            "approval_events": true, "session_resources": true, "session_chat": true,
            "session_chat_streaming": true, "session_fork": true, "skills_api": true,
            "admin_config_rw": false, "jobs_admin": true, "memory_write_api": false,
            "audio_api": false, "realtime_voice": false,
            "session_continuity_header": "X-Hermes-Session-Id",
            "session_key_header": "X-Hermes-Session-Key",
            "cors": !api.settings.cors_origins.is_empty(),
        }),
        endpoints: Value::Object(endpoints),
    })
}

/// `GET /api/model/options[?refresh=1]`.
#[utoipa::path(get, path = "/api/model/options", tag = "discovery", params(("refresh" = Option<bool>, Query, description = "Probe the providers again")), responses((status = 200, description = "Providers and models to pick from", body = ModelOptions), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope)))]
pub async fn model_options(
    State(api): State<Arc<Api>>,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
) -> Json<herald_session::model_options::ModelInventory> {
    let refresh = query
        .unwrap_or_default()
        .split('&')
        .any(|kv| matches!(kv, "refresh" | "refresh=1" | "refresh=true" | "refresh=yes"));
    Json(api.host.model_options(refresh).await)
}

#[utoipa::path(get, path = "/v1/skills", tag = "discovery", responses((status = 200, description = "The installed skills: {object: list, data: [{name, description, category}]}"), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope)))]
pub async fn skills(State(api): State<Arc<Api>>) -> Json<Value> {
    let library = api.host.runtime().skills.clone();
    let mut skills = tokio::task::spawn_blocking(move || library.discover())
        .await
        .unwrap_or_default();
    skills.sort_by(|a, b| (&a.category, &a.name).cmp(&(&b.category, &b.name)));
    let data: Vec<Value> = skills
        .iter()
        .map(|s| json!({"name": s.name, "description": s.description, "category": s.category}))
        .collect();
    Json(json!({"object": "list", "data": data}))
}

#[utoipa::path(get, path = "/v1/toolsets", tag = "discovery", responses((status = 200, description = "The toolsets and their tools: {object: list, platform: api_server, data: [{name, label, description, enabled, configured, tools}]}"), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope)))]
pub async fn toolsets(State(api): State<Arc<Api>>) -> Json<Value> {
    let runtime = api.host.runtime();
    let (granted, _) = herald_session::toolsets::resolve(&["hermes-api-server".to_owned()]);
    let offered: Vec<String> = runtime
        .tools(&granted)
        .iter()
        .map(|t| t.name().to_owned())
        .collect();
    let data: Vec<Value> = herald_session::toolsets::configurable()
        .into_iter()
        .map(|(name, tools)| {
            let available = runtime.tools(&tools).len();
            let enabled = !tools.is_empty() && tools.iter().all(|t| offered.contains(t));
            let mut label = name.to_owned();
            if let Some(first) = label.get_mut(..1) {
                first.make_ascii_uppercase();
            }
            json!({"name": name, "label": label, "description": format!("Tools: {}", tools.join(", ")),
                   "enabled": enabled, "configured": available == tools.len(), "tools": tools})
        })
        .collect();
    Json(json!({"object": "list", "platform": "api_server", "data": data}))
}

pub async fn not_found() -> ApiError {
    ApiError::not_found("Not found", None)
}
