//! The dashboard's JSON API under `/dashboard/api`: what the pages show and the
//! changes they make (replay, cancel, subscribe, remove, approve, stop), each behind
//! the guard (the session cookie and its secret, from this origin).

use crate::Dashboard;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use herald_admin::subscriptions::{self, SubscribeRequest, SubscriptionError};
use herald_store::events::EventQuery;
use herald_store::{CancelOutcome, DeliveryQuery, ReplayOutcome};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

pub(crate) fn router(dash: Arc<Dashboard>) -> Router {
    Router::new()
        .route("/dashboard/api/events", get(events))
        .route("/dashboard/api/events/{id}", get(event))
        .route("/dashboard/api/events/{id}/replay", post(replay))
        .route("/dashboard/api/events/{id}/cancel", post(cancel))
        .route("/dashboard/api/deliveries", get(deliveries))
        .route("/dashboard/api/routes", get(routes).post(subscribe))
        .route("/dashboard/api/routes/{name}", delete(unsubscribe))
        .route("/dashboard/api/sessions", get(sessions))
        .route("/dashboard/api/health", get(health))
        .merge(crate::runs::router())
        .layer(axum::middleware::from_fn_with_state(
            dash.clone(),
            crate::auth::guard,
        ))
        .with_state(dash)
}

/// A JSON error answer.
pub(crate) fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({"error": message.into()}))).into_response()
}

fn no_inbox() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "the webhook front door is off: there is no inbox",
    )
}

fn store_error(e: herald_store::StoreError) -> Response {
    tracing::warn!(error = %e, "dashboard: the store failed");
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "the store cannot be read now",
    )
}

/// The query string of the events page.
#[derive(Deserialize, Default)]
struct EventsParams {
    route: Option<String>,
    state: Option<String>,
    q: Option<String>,
    delivery_id: Option<String>,
    since: Option<i64>,
    until: Option<i64>,
    before: Option<i64>,
    limit: Option<u32>,
}

/// Whether any of the query's texts holds U+0000: no stored text has one, and the
/// store's search can not take it, so it is refused here (400), before the store.
fn holds_nul(texts: &[&Option<String>]) -> bool {
    texts
        .iter()
        .any(|t| t.as_deref().is_some_and(|t| t.contains('\0')))
}

fn nul_refused() -> Response {
    error(
        StatusCode::BAD_REQUEST,
        "the query holds a NUL character (U+0000), which no event or delivery holds",
    )
}

fn nonempty(s: Option<String>) -> Option<String> {
    s.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

async fn events(State(dash): State<Arc<Dashboard>>, Query(p): Query<EventsParams>) -> Response {
    if holds_nul(&[&p.route, &p.state, &p.q, &p.delivery_id]) {
        return nul_refused();
    }
    let Some(gw) = &dash.inbox else {
        return no_inbox();
    };
    let query = EventQuery {
        route: nonempty(p.route),
        state: nonempty(p.state),
        search: nonempty(p.q).map(|q| q.chars().take(200).collect()),
        delivery_id: nonempty(p.delivery_id),
        since_ms: p.since,
        until_ms: p.until,
        before_id: p.before,
        limit: p.limit.unwrap_or(50),
    };
    match gw.store.events(query).await {
        Ok(page) => Json(json!({"events": page})).into_response(),
        Err(e) => store_error(e),
    }
}

async fn event(State(dash): State<Arc<Dashboard>>, Path(id): Path<i64>) -> Response {
    let Some(gw) = &dash.inbox else {
        return no_inbox();
    };
    let store = &gw.store;
    let item = match store.get(id).await {
        Ok(Some(item)) => item,
        Ok(None) => return error(StatusCode::NOT_FOUND, format!("no event {id}")),
        Err(e) => return store_error(e),
    };
    let attempts = store.attempts(id).await.unwrap_or_default();
    let q = DeliveryQuery {
        route: Some(item.route.clone()),
        delivery_id: Some(item.delivery_id.clone()),
        ..DeliveryQuery::default()
    };
    let deliveries = store.deliveries(q).await.unwrap_or_default();
    Json(json!({"event": item, "attempts": attempts, "deliveries": deliveries})).into_response()
}

async fn replay(State(dash): State<Arc<Dashboard>>, Path(id): Path<i64>) -> Response {
    let Some(gw) = &dash.inbox else {
        return no_inbox();
    };
    match gw.store.replay(id).await {
        Ok(ReplayOutcome::Queued(state)) => {
            gw.work_notify.notify_one();
            Json(json!({"id": id, "state": state})).into_response()
        }
        Ok(ReplayOutcome::NotFound) => error(StatusCode::NOT_FOUND, format!("no event {id}")),
        Ok(ReplayOutcome::NotFinished(state)) => error(
            StatusCode::CONFLICT,
            format!(
                "event {id} is {state}: only dead, delivered or cancelled events can be replayed"
            ),
        ),
        Err(e) => store_error(e),
    }
}

async fn cancel(State(dash): State<Arc<Dashboard>>, Path(id): Path<i64>) -> Response {
    let Some(gw) = &dash.inbox else {
        return no_inbox();
    };
    match gw.store.cancel(id).await {
        Ok(CancelOutcome::Cancelled) => {
            Json(json!({"id": id, "state": "cancelled"})).into_response()
        }
        Ok(CancelOutcome::NotFound) => error(StatusCode::NOT_FOUND, format!("no event {id}")),
        Ok(CancelOutcome::NotQueued(state)) => error(
            StatusCode::CONFLICT,
            format!("event {id} is {state}: only a queued event can be cancelled"),
        ),
        Err(e) => store_error(e),
    }
}

#[derive(Deserialize, Default)]
struct DeliveriesParams {
    route: Option<String>,
    status: Option<String>,
    delivery_id: Option<String>,
    limit: Option<u32>,
}

async fn deliveries(
    State(dash): State<Arc<Dashboard>>,
    Query(p): Query<DeliveriesParams>,
) -> Response {
    if holds_nul(&[&p.route, &p.status, &p.delivery_id]) {
        return nul_refused();
    }
    let Some(gw) = &dash.inbox else {
        return no_inbox();
    };
    let q = DeliveryQuery {
        route: nonempty(p.route),
        status: nonempty(p.status),
        delivery_id: nonempty(p.delivery_id),
        limit: Some(p.limit.unwrap_or(100).clamp(1, 500)),
    };
    match gw.store.deliveries(q).await {
        Ok(list) => Json(json!({"deliveries": list})).into_response(),
        Err(e) => store_error(e),
    }
}

async fn routes(State(dash): State<Arc<Dashboard>>) -> Response {
    let Some(gw) = &dash.inbox else {
        return Json(json!({"routes": [], "base": dash.webhook_base})).into_response();
    };
    let traffic = &herald_metrics::get().webhook.traffic;
    let routes: Vec<Value> = gw
        .routes
        .routes()
        .into_iter()
        .map(|r| {
            json!({
                "name": r.name,
                "source": match r.source {
                    herald_config::RouteSource::Config => "config",
                    herald_config::RouteSource::Subscription => "subscription",
                },
                "sender": r.sender.as_ref().map(|p| p.sender.name()),
                "description": r.description,
                "events": r.events,
                "deliver": r.deliver,
                "deliver_only": r.deliver_only,
                "enabled": r.enabled,
                "prompt": r.prompt.as_ref().map(|t| t.text()),
                "script": r.script,
                "traffic": traffic.of(&r.name),
            })
        })
        .collect();
    Json(json!({"routes": routes, "base": dash.webhook_base})).into_response()
}

#[derive(Deserialize)]
struct SubscribeForm {
    name: String,
    #[serde(default)]
    prompt: String,
    #[serde(default)]
    events: Vec<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    deliver: Option<String>,
    #[serde(default)]
    deliver_chat_id: Option<String>,
    #[serde(default)]
    deliver_only: bool,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    public_key: Option<String>,
    #[serde(default)]
    public_url: Option<String>,
    #[serde(default)]
    header: Option<String>,
    #[serde(default)]
    secret: Option<String>,
}

async fn subscribe(
    State(dash): State<Arc<Dashboard>>,
    Json(form): Json<SubscribeForm>,
) -> Response {
    let store = dash.inbox.as_ref().map(|g| &g.store);
    let request = SubscribeRequest {
        name: form.name,
        description: form.description,
        events: form
            .events
            .into_iter()
            .map(|e| e.trim().to_owned())
            .filter(|e| !e.is_empty())
            .collect(),
        prompt: form.prompt,
        skills: Vec::new(),
        deliver: nonempty(form.deliver).unwrap_or_default(),
        deliver_chat_id: nonempty(form.deliver_chat_id),
        secret: nonempty(form.secret),
        deliver_only: form.deliver_only,
        script: None,
        sender: herald_config::SenderFields {
            source: nonempty(form.source),
            public_key: nonempty(form.public_key),
            public_url: nonempty(form.public_url),
            header: nonempty(form.header),
            tolerance_seconds: None,
        },
    };
    let made = subscriptions::subscribe(
        &dash.subscriptions_file,
        &dash.config_routes,
        store,
        request,
    )
    .await;
    match made {
        Ok(s) => Json(json!({
            "name": s.name,
            "url": format!("{}/webhooks/{}", dash.webhook_base, s.name),
            "secret": s.secret,
            "replaced": s.replaced,
        }))
        .into_response(),
        Err(e) => subscription_error(e),
    }
}

async fn unsubscribe(State(dash): State<Arc<Dashboard>>, Path(name): Path<String>) -> Response {
    let store = dash.inbox.as_ref().map(|g| &g.store);
    match subscriptions::remove(&dash.subscriptions_file, store, &name).await {
        Ok(()) => Json(json!({"removed": name})).into_response(),
        Err(e) => subscription_error(e),
    }
}

fn subscription_error(e: SubscriptionError) -> Response {
    let status = match &e {
        SubscriptionError::NotFound(_) => StatusCode::NOT_FOUND,
        SubscriptionError::Race => StatusCode::CONFLICT,
        SubscriptionError::File(_) | SubscriptionError::Shared(_) => {
            tracing::warn!(error = %e, "dashboard: a subscription change failed");
            StatusCode::SERVICE_UNAVAILABLE
        }
        _ => StatusCode::BAD_REQUEST,
    };
    error(status, e.to_string())
}

async fn sessions(State(dash): State<Arc<Dashboard>>) -> Response {
    let Some(host) = dash.hosts.first() else {
        return Json(json!({"sessions": []})).into_response();
    };
    match host.list_sessions(200).await {
        Ok(list) => {
            let list: Vec<Value> = list
                .into_iter()
                .map(|s| {
                    json!({
                        "id": s.id, "title": s.title, "preview": s.preview,
                        "started_at": s.started_at, "updated_at": s.updated_at,
                        "messages": s.message_count, "source": s.source,
                    })
                })
                .collect();
            Json(json!({"sessions": list})).into_response()
        }
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, e.told()),
    }
}

async fn health(State(dash): State<Arc<Dashboard>>) -> Response {
    let inbox = match &dash.inbox {
        Some(gw) => match gw.counts().await {
            Ok(counts) => {
                let map: serde_json::Map<String, Value> =
                    counts.into_iter().map(|(s, n)| (s, json!(n))).collect();
                Value::Object(map)
            }
            Err(e) => return store_error(e),
        },
        None => Value::Null,
    };
    let runtime = dash.hosts.first().map(|h| h.runtime().clone());
    let plugins = runtime.as_ref().and_then(|r| r.python_plugins()).map(|p| {
        json!({
            "host_up": p.host_up(),
            "plugins": p.loaded().iter().map(|l| json!({"name": l.key, "error": l.error})).collect::<Vec<_>>(),
        })
    });
    let mcp = runtime.as_ref().and_then(|r| r.mcp()).map(|pool| {
        pool.report()
            .into_iter()
            .map(
                |s| json!({"name": s.name, "status": s.status, "tools": s.tools, "error": s.error}),
            )
            .collect::<Vec<_>>()
    });
    let live: usize = dash.hosts.iter().map(|h| h.live_runs()).sum();
    Json(json!({
        "inbox": inbox,
        "depth": dash.history.samples(),
        "plugins": plugins,
        "mcp": mcp,
        "live_runs": live,
        "bots": herald_metrics::bots::reports(),
    }))
    .into_response()
}
