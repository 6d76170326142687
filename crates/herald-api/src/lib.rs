//! The OpenAI-compatible HTTP API (api-server.md): health and discovery, chat
//! completions (streaming and not) and the runs API with live events, behind bearer
//! auth, CORS, the security headers and the body and concurrency limits.
//!
//! A front door on the session host: every turn is a run of [`Host`]; it reaches the
//! agent core, the store and the configuration only through `herald-session` and the
//! typed settings. Serving (binding, connection bounds) is `herald-http`'s.

mod body;
mod chat;
mod client_tools;
mod content;
mod discovery;
pub mod errors;
mod guard;
mod idempotency;
mod jobs_api;
mod media;
mod parked;
pub mod readers;
mod responses;
mod run_events;
mod runs_api;
mod session_pick;
mod sessions_api;
mod sse;
mod tied;
mod wire;

use axum::Router;
use bytes::Bytes;
use errors::ApiError;
use herald_config::ApiServerSettings;
use herald_config::api_settings::key_problem;
use herald_session::Host;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The API server's shared state.
pub struct Api {
    host: Arc<Host>,
    settings: ApiServerSettings,
    key: String,
    /// The id `/v1/models` advertises.
    model_id: String,
    /// One permit per chat completion, response or run in progress (`None`: no cap).
    permits: Option<Arc<Semaphore>>,
    draining: AtomicBool,
    /// The bytes of request bodies being read and parsed at once.
    budget: herald_http::BodyBudget,
    idempotency: idempotency::Idempotency,
    /// `/openapi.json`'s body, made once with the router.
    openapi: OnceLock<Bytes>,
    /// Runs waiting for their clients' tool results.
    lot: Arc<parked::Lot>,
}

/// Why the API server cannot start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartError(pub String);

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StartError {}

impl Api {
    /// The API over `host`; refuses a missing, short or placeholder key (§1). The
    /// advertised model id is `model_name`, else the profile's name unless it is
    /// `default` or `custom`, else `hermes-agent`.
    pub fn new(
        host: Arc<Host>,
        settings: ApiServerSettings,
        profile: Option<&str>,
    ) -> Result<Arc<Api>, StartError> {
        if let Some(problem) = key_problem(settings.key.as_deref()) {
            return Err(StartError(format!(
                "the API server cannot start: {problem}"
            )));
        }
        let key = settings.key.clone().unwrap_or_default().trim().to_owned();
        let model_id = settings
            .model_name
            .clone()
            .or_else(|| {
                profile
                    .filter(|p| !matches!(*p, "default" | "custom"))
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| "hermes-agent".to_owned());
        let cap = settings.max_concurrent_runs as usize;
        let budget = herald_http::BodyBudget::new(settings.connections.max_body_bytes_in_flight);
        // Another instance sharing the store may be asked for this host's runs' events.
        host.relay_events_with(run_events::relay_for_others());
        Ok(Arc::new(Api {
            host,
            permits: (cap > 0).then(|| Arc::new(Semaphore::new(cap))),
            settings,
            key,
            model_id,
            draining: AtomicBool::new(false),
            budget,
            idempotency: idempotency::Idempotency::default(),
            openapi: OnceLock::new(),
            lot: Arc::default(),
        }))
    }

    fn key(&self) -> &str {
        &self.key
    }

    /// How long a parked run waits for its client's tool results.
    fn client_tool_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.settings.client_tool_timeout_seconds)
    }

    /// New agent requests get 503 from now on (the gateway is shutting down).
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Drains, then interrupts every run in progress (their commands killed; runs of
    /// the runs API end `failed`, `interrupted: herald stopped`) and waits up to
    /// `within` for them to end.
    pub async fn stop(&self, within: std::time::Duration) {
        self.start_draining();
        self.host.stop_all(within).await;
    }

    /// A slot for one more run, or why not (draining: 503; at the cap: 429).
    fn permit(&self) -> Result<Option<OwnedSemaphorePermit>, ApiError> {
        if self.draining.load(Ordering::SeqCst) {
            return Err(ApiError::draining());
        }
        match &self.permits {
            None => Ok(None),
            Some(s) => {
                s.clone().try_acquire_owned().map(Some).map_err(|_| {
                    ApiError::too_many_runs(self.settings.max_concurrent_runs as usize)
                })
            }
        }
    }
}

/// A run's token counts as the Responses and runs APIs name them.
fn token_usage(s: &herald_session::RunStatus) -> serde_json::Value {
    let (input, output) = (s.input_tokens, s.output_tokens);
    serde_json::json!({"input_tokens": input, "output_tokens": output, "total_tokens": input + output})
}

/// Every route of the API, each registered with its OpenAPI path entry so that
/// `/openapi.json` lists exactly what is served.
pub fn router(api: Arc<Api>) -> Router {
    let (routes, doc) = OpenApiRouter::with_openapi(wire::Doc::openapi())
        .routes(routes!(discovery::health))
        .routes(routes!(discovery::v1_health))
        .routes(routes!(discovery::health_detailed))
        .routes(routes!(discovery::models))
        .routes(routes!(discovery::capabilities))
        .routes(routes!(discovery::model_options))
        .routes(routes!(discovery::openapi))
        .routes(routes!(chat::completions))
        .routes(routes!(responses::create))
        .routes(routes!(responses::get, responses::delete))
        .routes(routes!(runs_api::create))
        .routes(routes!(runs_api::status))
        .routes(routes!(run_events::events))
        .routes(routes!(runs_api::approval))
        .routes(routes!(runs_api::stop))
        .routes(routes!(runs_api::steer))
        .routes(routes!(discovery::skills))
        .routes(routes!(discovery::toolsets))
        .routes(routes!(sessions_api::list, sessions_api::create))
        .routes(routes!(
            sessions_api::get,
            sessions_api::patch,
            sessions_api::delete
        ))
        .routes(routes!(sessions_api::messages))
        .routes(routes!(sessions_api::fork))
        .routes(routes!(sessions_api::chat))
        .routes(routes!(sessions_api::chat_stream))
        .routes(routes!(jobs_api::list, jobs_api::create))
        .routes(routes!(jobs_api::get, jobs_api::patch, jobs_api::delete))
        .routes(routes!(jobs_api::pause))
        .routes(routes!(jobs_api::resume))
        .routes(routes!(jobs_api::run))
        .split_for_parts();
    let doc = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    let _ = api.openapi.set(Bytes::from(doc));
    routes
        .fallback(discovery::not_found)
        .layer(axum::middleware::from_fn_with_state(
            api.clone(),
            guard::guard,
        ))
        .with_state(api)
}
