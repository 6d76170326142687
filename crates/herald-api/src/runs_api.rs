//! The runs API (§7): start a run (202), read its status, follow its events (SSE from
//! the run's creation on), answer its approvals, stop it, steer it.

use crate::body;
use crate::content;
use crate::errors::ApiError;
use crate::session_pick::{self, open_or_resume};
use crate::wire::*;
use crate::{Api, wire};
use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use herald_protocol::{ChatMessage, UserInput};

use herald_session::{
    Answers, ControlReply, Decision, Relayed, RunControl, RunError, RunState, RunStatus,
};
use serde_json::Value;
use std::sync::Arc;

pub(crate) fn run_not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("Run not found: {id}"), Some("run_not_found"))
}

fn answer(r: Result<Response, ApiError>) -> Response {
    r.unwrap_or_else(IntoResponse::into_response)
}

/// The status object of §7.2.
fn status_body(s: &RunStatus) -> RunStatusObject {
    let completed = s.state == RunState::Completed;
    RunStatusObject {
        object: "hermes.run".into(),
        run_id: s.run_id.clone(),
        status: s.state.as_str().into(),
        created_at: s.created_at,
        updated_at: s.updated_at,
        session_id: s.session_id.clone(),
        model: s.model.clone(),
        last_event: s.last_event.clone(),
        output: completed.then(|| s.output.clone().unwrap_or_default()),
        usage: completed.then(|| crate::token_usage(s)),
        error: s.error.clone(),
        pending_steer: s.pending_steer.clone(),
    }
}

/// A run's input: a string, or an array whose last item is the user message and whose
/// earlier `{role, content}` items are history.
fn parse_input(v: Option<&Value>) -> Result<(UserInput, Vec<ChatMessage>), ApiError> {
    let missing = || ApiError::bad_request("Missing 'input' field", None);
    let (input, history) = match v {
        Some(Value::String(s)) if !s.trim().is_empty() => (UserInput::from(s), Vec::new()),
        Some(Value::Array(items)) if !items.is_empty() => {
            let (last, earlier) = items.split_last().ok_or_else(missing)?;
            let param = format!("input[{}].content", earlier.len());
            let input = match last {
                Value::String(s) => UserInput::from(s),
                other => content::user_content(other.get("content")).map_err(|e| e.at(param))?,
            };
            (input, history_of(earlier)?)
        }
        _ => return Err(missing()),
    };
    if input.text.trim().is_empty() && input.images.is_empty() {
        return Err(ApiError::bad_request(
            "No user message found in input",
            None,
        ));
    }
    Ok((input, history))
}

/// `{role, content}` items as history (user and assistant; other roles dropped).
fn history_of(items: &[Value]) -> Result<Vec<ChatMessage>, ApiError> {
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let (Some(role), Some(c)) = (
            item.get("role").and_then(Value::as_str),
            item.get("content"),
        ) else {
            return Err(ApiError::bad_request(
                "Each history item needs a role and content",
                None,
            ));
        };
        out.extend(content::message(
            role,
            Some(c),
            &format!("input[{i}].content"),
        )?);
    }
    Ok(out)
}

#[utoipa::path(post, path = "/v1/runs", tag = "runs", request_body = RunRequest, responses((status = 202, description = "Started", body = RunStarted), (status = 400, description = "Bad request", body = ErrorEnvelope), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope), (status = 429, description = "At the concurrency cap (Retry-After)", body = ErrorEnvelope), (status = 503, description = "Draining for shutdown", body = ErrorEnvelope)))]
pub async fn create(State(api): State<Arc<Api>>, headers: HeaderMap, raw: Body) -> Response {
    answer(start(api, headers, raw).await)
}

async fn start(api: Arc<Api>, headers: HeaderMap, raw: Body) -> Result<Response, ApiError> {
    let admitted = body::admit(&api, &headers, raw).await?;
    let permit = api.permit()?;
    let max = api.settings.max_messages;
    body::at_most(&admitted.bytes, "input", max)?;
    body::at_most(&admitted.bytes, "conversation_history", max)?;
    let request = body::object(&admitted.bytes, ApiError::bad_request("Invalid JSON", None))?;
    let request: RunRequest = wire::read(&request);
    let (input, mut history) = parse_input(request.input.as_ref())?;
    match &request.conversation_history {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => history = history_of(&items[..])?,
        Some(_) => {
            return Err(ApiError::bad_request(
                "conversation_history must be an array",
                None,
            ));
        }
    }
    let system = request.instructions.or_empty();
    let model = request.model.or_empty();
    let run_id = herald_session::prompt::new_run_id();
    let session_id = request.session_id.text().unwrap_or_else(|| run_id.clone());
    let options = session_pick::options(Answers::ByRequest, &system, &headers)?;
    let endpoint = session_pick::model_endpoint(&api, &model).await?;
    let (session, resumed) = open_or_resume(&api, &session_id, options).await?;
    if !history.is_empty() || !resumed {
        session.adopt_history(history);
    }
    if let Some(endpoint) = endpoint {
        session.set_endpoint(endpoint);
    }
    // The status names the model as requested (an alias stays an alias), or the
    // advertised one, as Hermes does.
    let named = if model.is_empty() {
        api.model_id.clone()
    } else {
        model.clone()
    };
    let run = api
        .host
        .start_run_as(&session, input, run_id.clone(), Some(named))
        .map_err(session_pick::run_error)?;
    // Detached from the request (its client follows it by id); the slot is held
    // until it ends.
    crate::tied::hold_until_ended(permit, &run);
    let mut response = (
        StatusCode::ACCEPTED,
        Json(RunStarted {
            run_id,
            status: "started".into(),
        }),
    )
        .into_response();
    if let Some(key) = headers.get("x-hermes-session-key").cloned() {
        response.headers_mut().insert("x-hermes-session-key", key);
    }
    Ok(response)
}

#[utoipa::path(get, path = "/v1/runs/{run_id}", tag = "runs", params(("run_id" = String, Path, description = "The run's id")), responses((status = 200, description = "The run's status", body = RunStatusObject), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope), (status = 404, description = "run_not_found", body = ErrorEnvelope), (status = 503, description = "store_unavailable: the store did not answer in time (Retry-After)", body = ErrorEnvelope)))]
pub async fn status(State(api): State<Arc<Api>>, Path(id): Path<String>) -> Response {
    match api.host.run_status(&id).await {
        Ok(Some(s)) => Json(status_body(&s)).into_response(),
        Ok(None) => run_not_found(&id).into_response(),
        Err(e) => session_pick::run_error(e).into_response(),
    }
}

#[utoipa::path(post, path = "/v1/runs/{run_id}/approval", tag = "runs", params(("run_id" = String, Path, description = "The run's id")), request_body = ApprovalRequest, responses((status = 200, description = "Resolved", body = ApprovalAnswer), (status = 400, description = "Bad request", body = ErrorEnvelope), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope), (status = 404, description = "run_not_found", body = ErrorEnvelope), (status = 409, description = "approval_not_active or approval_not_pending", body = ErrorEnvelope)))]
pub async fn approval(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    raw: Body,
) -> Response {
    answer(approve(api, id, headers, raw).await)
}

async fn approve(
    api: Arc<Api>,
    id: String,
    headers: HeaderMap,
    raw: Body,
) -> Result<Response, ApiError> {
    let local = api.host.run(&id);
    if local.is_none() {
        relayable(&api, &id).await?;
    }
    let admitted = body::admit(&api, &headers, raw).await?;
    let request = body::object(&admitted.bytes, ApiError::bad_request("Invalid JSON", None))?;
    let request: ApprovalRequest = wire::read(&request);
    let decision = request
        .choice
        .0
        .as_deref()
        .and_then(Decision::parse)
        .ok_or_else(|| {
            ApiError::bad_request(
                "choice must be once, session, always or deny",
                Some("invalid_approval_choice"),
            )
        })?;
    let request_id = match &request.request_id {
        None => None,
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_owned()),
        Some(_) => {
            return Err(ApiError::bad_request(
                "request_id must be a non-empty string",
                Some("invalid_approval_request"),
            ));
        }
    };
    let all = request.all.0 || request.resolve_all.0;
    let Some(run) = local else {
        let control = RunControl::Approve {
            request_id,
            choice: decision.name().to_owned(),
            all,
        };
        let resolved = match api
            .host
            .relay(&id, control)
            .await
            .map_err(session_pick::run_error)?
        {
            Relayed::Answered(ControlReply::Done { resolved }) => resolved,
            Relayed::Answered(ControlReply::Refused { code, message }) => {
                let code = match code.as_str() {
                    "approval_not_active" => "approval_not_active",
                    _ => "approval_not_pending",
                };
                return Err(ApiError::conflict(message, code));
            }
            Relayed::Sent | Relayed::Answered(ControlReply::Following) => {
                return Err(ApiError::conflict(
                    "The instance that runs this run did not answer in time",
                    "approval_not_answered",
                ));
            }
            Relayed::OwnerGone => return Err(run_not_active(&id)),
            Relayed::Nobody => return Err(run_not_found(&id)),
        };
        return Ok(approval_answer(id, decision, resolved));
    };
    let resolved = run
        .approve(request_id.as_deref(), decision, all)
        .map_err(|e| match e {
            RunError::NotActive => {
                ApiError::conflict("The run has no approval session", "approval_not_active")
            }
            RunError::UnknownRequest(r) => {
                ApiError::conflict(format!("No pending approval {r}"), "approval_not_pending")
            }
            _ => ApiError::conflict("Nothing is waiting for approval", "approval_not_pending"),
        })?;
    Ok(approval_answer(id, decision, resolved))
}

fn approval_answer(run_id: String, decision: Decision, resolved: usize) -> Response {
    Json(ApprovalAnswer {
        object: "hermes.run.approval_response".into(),
        run_id,
        choice: decision.name().into(),
        resolved,
    })
    .into_response()
}

/// Unknown here: only an unfinished run of the shared store may be relayed to; else
/// 404, before the body is read.
async fn relayable(api: &Api, id: &str) -> Result<(), ApiError> {
    let kept = api
        .host
        .run_status(id)
        .await
        .map_err(session_pick::run_error)?;
    match kept {
        Some(s) if !s.state.is_finished() => Ok(()),
        _ => Err(run_not_found(id)),
    }
}

#[utoipa::path(post, path = "/v1/runs/{run_id}/stop", tag = "runs", params(("run_id" = String, Path, description = "The run's id")), responses((status = 200, description = "Stopping, or the finished run's status", body = Stopping), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope), (status = 404, description = "run_not_found", body = ErrorEnvelope)))]
pub async fn stop(State(api): State<Arc<Api>>, Path(id): Path<String>) -> Response {
    let Some(run) = api.host.run(&id) else {
        // Another instance sharing the store may run it.
        return match api.host.relay(&id, RunControl::Stop).await {
            Ok(Relayed::Sent) => Json(Stopping {
                run_id: id,
                status: "stopping".into(),
            })
            .into_response(),
            Ok(Relayed::OwnerGone) => run_not_active(&id).into_response(),
            Ok(Relayed::Nobody | Relayed::Answered(_)) => status(State(api), Path(id)).await,
            Err(e) => session_pick::run_error(e).into_response(),
        };
    };
    if run.status().state.is_finished() {
        return Json(status_body(&run.status())).into_response();
    }
    run.interrupt();
    Json(Stopping {
        run_id: id,
        status: "stopping".into(),
    })
    .into_response()
}

/// `/steer` for a run another instance sharing the store runs.
async fn relay_steer(api: &Api, id: String, text: String) -> Result<Response, ApiError> {
    if text.is_empty() {
        return Err(ApiError::bad_request(
            "The steer text is empty",
            Some("invalid_steer_input"),
        ));
    }
    match api
        .host
        .relay(&id, RunControl::Steer { text })
        .await
        .map_err(session_pick::run_error)?
    {
        Relayed::Sent | Relayed::Answered(_) => Ok(Json(Steered {
            object: "hermes.run.steer".into(),
            run_id: id,
            accepted: true,
        })
        .into_response()),
        Relayed::OwnerGone => Err(run_not_active(&id)),
        Relayed::Nobody => Err(run_not_found(&id)),
    }
}

/// 409 for a run whose instance is gone (api-server.md §7.5's newer upstream answer).
pub(crate) fn run_not_active(id: &str) -> ApiError {
    ApiError::conflict(
        format!("Run {id} is not active: the instance that ran it is gone"),
        "run_not_active",
    )
}

/// The first non-empty of `input`, `message`, `text` (a string or content parts).
fn steer_text(request: &SteerRequest) -> String {
    [&request.input, &request.message, &request.text]
        .iter()
        .map(|v| content::text_only(v.as_ref()).trim().to_owned())
        .find(|t| !t.is_empty())
        .unwrap_or_default()
}

#[utoipa::path(post, path = "/v1/runs/{run_id}/steer", tag = "runs", params(("run_id" = String, Path, description = "The run's id")), request_body = SteerRequest, responses((status = 200, description = "Queued for the next tool boundary", body = Steered), (status = 400, description = "invalid_steer_input", body = ErrorEnvelope), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope), (status = 404, description = "run_not_found", body = ErrorEnvelope), (status = 409, description = "run_not_accepting_steer or steer_not_accepted", body = ErrorEnvelope)))]
pub async fn steer(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    raw: Body,
) -> Response {
    answer(steer_run(api, id, headers, raw).await)
}

async fn steer_run(
    api: Arc<Api>,
    id: String,
    headers: HeaderMap,
    raw: Body,
) -> Result<Response, ApiError> {
    let local = api.host.run(&id);
    if local.is_none() {
        // Unknown here: only an unfinished run of the shared store may be relayed.
        let kept = api
            .host
            .run_status(&id)
            .await
            .map_err(session_pick::run_error)?;
        if kept.is_none_or(|s| s.state.is_finished()) {
            return Err(run_not_found(&id));
        }
    }
    let admitted = body::admit(&api, &headers, raw).await?;
    let request = body::object(&admitted.bytes, ApiError::bad_request("Invalid JSON", None))?;
    let request: SteerRequest = wire::read(&request);
    let Some(run) = local else {
        return relay_steer(&api, id, steer_text(&request)).await;
    };
    let state = run.status().state;
    if state != RunState::Running {
        return Err(ApiError::conflict(
            format!("The run is {}, not running", state.as_str()),
            "run_not_accepting_steer",
        ));
    }
    let text = steer_text(&request);
    match run.steer(&text) {
        Ok(()) => Ok(Json(Steered {
            object: "hermes.run.steer".into(),
            run_id: id,
            accepted: true,
        })
        .into_response()),
        Err(RunError::EmptySteer) => Err(ApiError::bad_request(
            "The steer text is empty",
            Some("invalid_steer_input"),
        )),
        Err(RunError::NotAcceptingSteer(s)) => Err(ApiError::conflict(
            format!("The run is {s}, not running"),
            "run_not_accepting_steer",
        )),
        Err(_) => Err(ApiError::conflict(
            "The agent did not accept the steer",
            "steer_not_accepted",
        )),
    }
}
