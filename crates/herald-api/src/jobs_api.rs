//! Hermes's cron jobs API on the API listener (`gateway/platforms/api_server.py`):
//! `GET`/`POST /api/jobs`, `GET`/`PATCH`/`DELETE /api/jobs/{id}` and `/pause`,
//! `/resume`, `/run`, with Hermes's bodies (`{"jobs": [...]}`, `{"job": {...}}`,
//! `{"ok": true}`, `{"error": "..."}`) and limits, over the home's `cron/jobs.json`
//! through the same job operations as `herald schedule` and the `cronjob` tool.

use crate::Api;
use crate::sessions_api::object_of;
use axum::Json;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use herald_session::schedule::jobs::{self, Job};
use herald_session::schedule::manage::{self, Changes, ManageError, NewJob};
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use std::sync::Arc;

/// Hermes's limits on what a client may set.
const MAX_NAME: usize = 200;
const MAX_PROMPT: usize = 5_000;

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({"error": message.into()}))).into_response()
}

fn file(api: &Api) -> PathBuf {
    jobs::file_of(api.host.runtime().home.root())
}

fn job_answer(job: &Job) -> Response {
    Json(json!({"job": job})).into_response()
}

/// A job operation's answer: the job, 404 when there is none, 400 for a refusal.
fn answered(done: Result<Job, ManageError>) -> Response {
    match done {
        Ok(job) => job_answer(&job),
        Err(ManageError::NotFound(_)) => error(StatusCode::NOT_FOUND, "Job not found"),
        Err(ManageError::Invalid(why)) => error(StatusCode::BAD_REQUEST, why),
        Err(e) => {
            tracing::warn!(error = %e, "jobs API: the job file cannot be used");
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the job file cannot be used",
            )
        }
    }
}

/// Hermes's job ids: 12 lowercase hexadecimal characters.
fn bad_id(id: &str) -> Option<Response> {
    let ok = id.len() == 12
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    (!ok).then(|| error(StatusCode::BAD_REQUEST, "Invalid job ID format"))
}

/// A 404 unless a job has the id `id` (the API names jobs by id only; names are for
/// the CLI and the tool).
async fn unknown(api: &Api, id: &str) -> Option<Response> {
    let (path, id) = (file(api), id.to_owned());
    match blocking(move || jobs::load(&path).map(|l| l.jobs.iter().any(|j| j.id == id))).await {
        Ok(Ok(true)) => None,
        Ok(Ok(false)) => Some(error(StatusCode::NOT_FOUND, "Job not found")),
        Ok(Err(e)) => Some(answered(Err(e.into()))),
        Err(r) => Some(r),
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Response> {
    tokio::task::spawn_blocking(f).await.map_err(|_| {
        error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the job operation stopped",
        )
    })
}

#[utoipa::path(get, path = "/api/jobs", tag = "jobs", responses((status = 200, description = "{jobs: [...]}; ?include_disabled=true lists paused jobs too")))]
pub async fn list(State(api): State<Arc<Api>>, RawQuery(query): RawQuery) -> Response {
    let all = query.unwrap_or_default().split('&').any(|p| {
        p.split_once('=').is_some_and(|(k, v)| {
            k == "include_disabled" && matches!(v.to_ascii_lowercase().as_str(), "true" | "1")
        })
    });
    let path = file(&api);
    match blocking(move || jobs::load(&path)).await {
        Ok(Ok(loaded)) => {
            let shown: Vec<&Job> = loaded.jobs.iter().filter(|j| all || j.enabled).collect();
            Json(json!({"jobs": shown})).into_response()
        }
        Ok(Err(e)) => answered(Err(e.into())),
        Err(r) => r,
    }
}

fn field(body: &Map<String, Value>, key: &str) -> Option<String> {
    body.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn skills(body: &Map<String, Value>) -> Option<Vec<String>> {
    match body.get("skills").or_else(|| body.get("skill")) {
        Some(Value::Array(a)) => Some(
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
        ),
        Some(Value::String(s)) => Some(vec![s.clone()]),
        _ => None,
    }
}

/// Hermes's checks of a name and a prompt's lengths.
fn too_long(name: Option<&str>, prompt: Option<&str>) -> Option<Response> {
    if name.is_some_and(|n| n.chars().count() > MAX_NAME) {
        return Some(error(
            StatusCode::BAD_REQUEST,
            format!("Name must be ≤ {MAX_NAME} characters"),
        ));
    }
    if prompt.is_some_and(|p| p.chars().count() > MAX_PROMPT) {
        return Some(error(
            StatusCode::BAD_REQUEST,
            format!("Prompt must be ≤ {MAX_PROMPT} characters"),
        ));
    }
    None
}

#[utoipa::path(post, path = "/api/jobs", tag = "jobs", responses((status = 200, description = "{job}"), (status = 400, description = "{error}")))]
pub async fn create(State(api): State<Arc<Api>>, headers: HeaderMap, raw: Body) -> Response {
    let body = match object_of(&api, &headers, raw).await {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let name = field(&body, "name").unwrap_or_default().trim().to_owned();
    let schedule = field(&body, "schedule")
        .unwrap_or_default()
        .trim()
        .to_owned();
    let prompt = field(&body, "prompt").unwrap_or_default();
    if name.is_empty() {
        return error(StatusCode::BAD_REQUEST, "Name is required");
    }
    if schedule.is_empty() {
        return error(StatusCode::BAD_REQUEST, "Schedule is required");
    }
    if let Some(r) = too_long(Some(&name), Some(&prompt)) {
        return r;
    }
    let repeat = match body.get("repeat") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64().filter(|r| *r >= 1) {
            Some(r) => Some(r),
            None => return error(StatusCode::BAD_REQUEST, "Repeat must be a positive integer"),
        },
    };
    let new = NewJob {
        schedule,
        prompt,
        name: Some(name),
        deliver: field(&body, "deliver"),
        repeat,
        skills: skills(&body).unwrap_or_default(),
        ..NewJob::default()
    };
    let path = file(&api);
    let now = jiff::Timestamp::now();
    blocking(move || manage::create(&path, new, now))
        .await
        .map_or_else(|r| r, answered)
}

#[utoipa::path(get, path = "/api/jobs/{job_id}", tag = "jobs", params(("job_id" = String, Path, description = "12 hex characters")), responses((status = 200, description = "{job}"), (status = 404, description = "{error}")))]
pub async fn get(State(api): State<Arc<Api>>, Path(id): Path<String>) -> Response {
    if let Some(r) = bad_id(&id) {
        return r;
    }
    let path = file(&api);
    match blocking(move || jobs::load(&path)).await {
        Ok(Ok(loaded)) => match loaded.jobs.iter().find(|j| j.id == id) {
            Some(job) => job_answer(job),
            None => error(StatusCode::NOT_FOUND, "Job not found"),
        },
        Ok(Err(e)) => answered(Err(e.into())),
        Err(r) => r,
    }
}

#[utoipa::path(patch, path = "/api/jobs/{job_id}", tag = "jobs", params(("job_id" = String, Path, description = "12 hex characters")), responses((status = 200, description = "{job}; fields name, schedule, prompt, deliver, skills, skill, repeat, enabled"), (status = 400, description = "{error}"), (status = 404, description = "{error}")))]
pub async fn patch(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    raw: Body,
) -> Response {
    if let Some(r) = bad_id(&id) {
        return r;
    }
    if let Some(r) = unknown(&api, &id).await {
        return r;
    }
    let body = match object_of(&api, &headers, raw).await {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    const ALLOWED: &[&str] = &[
        "name", "schedule", "prompt", "deliver", "skills", "skill", "repeat", "enabled",
    ];
    if !body.keys().any(|k| ALLOWED.contains(&k.as_str())) {
        return error(StatusCode::BAD_REQUEST, "No valid fields to update");
    }
    if let Some(r) = too_long(
        field(&body, "name").as_deref(),
        field(&body, "prompt").as_deref(),
    ) {
        return r;
    }
    let changes = Changes {
        schedule: field(&body, "schedule"),
        prompt: field(&body, "prompt"),
        name: field(&body, "name"),
        deliver: field(&body, "deliver"),
        repeat: body
            .get("repeat")
            .and_then(Value::as_i64)
            .map(|r| r.max(0) as u64),
        skills: skills(&body),
        ..Changes::default()
    };
    let enabled = body.get("enabled").and_then(Value::as_bool);
    let path = file(&api);
    let now = jiff::Timestamp::now();
    let done = blocking(move || {
        let mut job = if changes_given(&changes) {
            manage::update(&path, &id, changes, now)?
        } else {
            manage::get(&path, &id)?
        };
        if let Some(on) = enabled {
            job = match on {
                true => manage::resume(&path, &id, now)?,
                false => manage::pause(&path, &id, None, now)?,
            };
        }
        Ok(job)
    })
    .await;
    done.map_or_else(|r| r, answered)
}

fn changes_given(c: &Changes) -> bool {
    c.schedule.is_some()
        || c.prompt.is_some()
        || c.name.is_some()
        || c.deliver.is_some()
        || c.repeat.is_some()
        || c.skills.is_some()
}

#[utoipa::path(delete, path = "/api/jobs/{job_id}", tag = "jobs", params(("job_id" = String, Path, description = "12 hex characters")), responses((status = 200, description = "{ok: true}"), (status = 404, description = "{error}")))]
pub async fn delete(State(api): State<Arc<Api>>, Path(id): Path<String>) -> Response {
    if let Some(r) = bad_id(&id) {
        return r;
    }
    if let Some(r) = unknown(&api, &id).await {
        return r;
    }
    let path = file(&api);
    match blocking(move || manage::remove(&path, &id)).await {
        Ok(Ok(_)) => Json(json!({"ok": true})).into_response(),
        Ok(Err(e)) => answered(Err(e)),
        Err(r) => r,
    }
}

/// `/pause`, `/resume` and `/run`.
async fn act(
    api: &Api,
    id: String,
    act: fn(&std::path::Path, &str, jiff::Timestamp) -> Result<Job, ManageError>,
) -> Response {
    if let Some(r) = bad_id(&id) {
        return r;
    }
    if let Some(r) = unknown(api, &id).await {
        return r;
    }
    let path = file(api);
    let now = jiff::Timestamp::now();
    blocking(move || act(&path, &id, now))
        .await
        .map_or_else(|r| r, answered)
}

#[utoipa::path(post, path = "/api/jobs/{job_id}/pause", tag = "jobs", params(("job_id" = String, Path, description = "12 hex characters")), responses((status = 200, description = "{job}"), (status = 404, description = "{error}")))]
pub async fn pause(State(api): State<Arc<Api>>, Path(id): Path<String>) -> Response {
    act(&api, id, |p, id, now| manage::pause(p, id, None, now)).await
}

#[utoipa::path(post, path = "/api/jobs/{job_id}/resume", tag = "jobs", params(("job_id" = String, Path, description = "12 hex characters")), responses((status = 200, description = "{job}"), (status = 404, description = "{error}")))]
pub async fn resume(State(api): State<Arc<Api>>, Path(id): Path<String>) -> Response {
    act(&api, id, manage::resume).await
}

#[utoipa::path(post, path = "/api/jobs/{job_id}/run", tag = "jobs", params(("job_id" = String, Path, description = "12 hex characters")), responses((status = 200, description = "{job}: it runs at the scheduler's next look"), (status = 404, description = "{error}")))]
pub async fn run(State(api): State<Arc<Api>>, Path(id): Path<String>) -> Response {
    act(&api, id, manage::trigger).await
}
