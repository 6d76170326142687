//! Which session a request's turn runs in (§5.2): the one `X-Hermes-Session-Id` names
//! (its stored history, the body's history ignored), else one derived from the system
//! prompt and the first user message, so a client that resends its transcript lands
//! in the same session each turn. And the `model` field's route (§5.3).

use crate::Api;
use crate::content;
use crate::errors::ApiError;
use axum::http::{HeaderMap, StatusCode};
use herald_protocol::{ChatMessage, Role, ToolCall, UserInput};
use herald_session::{Answers, Endpoint, Session, SessionError, SessionOptions, toolsets};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The transcript a request carries.
pub struct Transcript {
    /// The system messages, joined.
    pub system: String,
    pub history: Vec<ChatMessage>,
    pub input: UserInput,
    pub first_user: String,
}

impl Transcript {
    /// From chat-completion `messages`: system messages joined (as text), user and
    /// assistant messages the conversation with their image parts (other roles
    /// dropped), the last one the new input.
    pub fn from_chat_messages(messages: &[Value]) -> Result<Transcript, ApiError> {
        let mut system = Vec::new();
        let mut turns: Vec<ChatMessage> = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
            if matches!(role, "system" | "developer") {
                system.push(content::text_only(m.get("content")));
                continue;
            }
            let param = format!("messages[{i}].content");
            match role {
                // A client tool's result, kept when it answers a call kept before.
                "tool" => turns.extend(tool_result(m, &turns)),
                _ => {
                    let mut message = content::message(role, m.get("content"), &param)?;
                    if let Some(msg) = message.as_mut().filter(|msg| msg.role == Role::Assistant) {
                        msg.tool_calls = tool_calls(m);
                    }
                    turns.extend(message);
                }
            }
        }
        let last = turns
            .pop()
            .filter(content::has_payload)
            .ok_or_else(|| ApiError::bad_request_short("No user message found in messages"))?;
        let input = content::input_of(last);
        let first_user = turns
            .iter()
            .find(|m| m.role == Role::User)
            .and_then(|m| m.content.clone())
            .unwrap_or_else(|| input.text.clone());
        Ok(Transcript {
            system: system.join("\n"),
            history: turns,
            input,
            first_user,
        })
    }
}

/// An assistant message's `tool_calls` (the client's own tools' calls), as given; none
/// when they are not OpenAI's shape.
fn tool_calls(m: &Value) -> Vec<ToolCall> {
    m.get("tool_calls")
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or_default()
}

/// A `tool` message as a result of the conversation: only for a call an earlier
/// assistant message made (a result of nothing would be refused by the provider).
fn tool_result(m: &Value, turns: &[ChatMessage]) -> Option<ChatMessage> {
    let id = m.get("tool_call_id").and_then(Value::as_str)?;
    let call = turns
        .iter()
        .rev()
        .flat_map(|t| t.tool_calls.iter())
        .find(|c| c.id == id)?;
    let output = content::text_only(m.get("content"));
    Some(ChatMessage::tool_result(
        id.to_owned(),
        call.function.name.clone(),
        output,
    ))
}

/// `api-` and the first 16 hex characters of sha256(system + "\n" + first user message).
pub fn derived_session_id(system: &str, first_user: &str) -> String {
    let digest = Sha256::digest(format!("{system}\n{first_user}").as_bytes());
    format!("api-{}", &hex::encode(digest)[..16])
}

/// A session header's value: at most 256 characters, no CR, LF or NUL, and for an id
/// nothing shaped like a path.
fn header_value(headers: &HeaderMap, name: &str, is_id: bool) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get(name) else {
        return Ok(None);
    };
    let what = if is_id {
        "Invalid session ID"
    } else {
        "Invalid session key"
    };
    let text = value
        .to_str()
        .map_err(|_| ApiError::bad_request_short(what))?
        .trim()
        .to_owned();
    if text.chars().count() > 256 {
        let long = if is_id {
            "Session ID too long"
        } else {
            "Session key too long"
        };
        return Err(ApiError::bad_request_short(long));
    }
    let bad_char = text.contains(['\r', '\n', '\0']);
    let path_like = is_id && (text.contains("..") || text.contains('/') || text.contains('\\'));
    if text.is_empty() || bad_char || path_like {
        return Err(ApiError::bad_request_short(what));
    }
    Ok(Some(text))
}

/// The session options of an API turn. Every run is listed and kept, so a client
/// (or the operator) can read or stop a chat completion's or response's run by the id
/// its answer names, as it does the runs API's. `X-Hermes-Session-Key` scopes the
/// long-term memory (each key its own, as Hermes scopes memory by it).
pub fn options(
    answers: Answers,
    system: &str,
    headers: &HeaderMap,
) -> Result<SessionOptions, ApiError> {
    let (tools, _) = toolsets::resolve(&["hermes-api-server".to_owned()]);
    let mut options = SessionOptions::new("api_server", tools, answers);
    options.ephemeral_system = Some(system.to_owned()).filter(|s| !s.trim().is_empty());
    options.memory_scope = header_value(headers, "x-hermes-session-key", false)?;
    Ok(options)
}

/// A session of this id: resumed when it exists (true), else opened with it.
pub async fn open_or_resume(
    api: &Api,
    id: &str,
    mut options: SessionOptions,
) -> Result<(Session, bool), ApiError> {
    if api.host.has_session(id).await.map_err(run_error)? {
        let s = api
            .host
            .resume_session(id, options)
            .await
            .map_err(run_error)?;
        return Ok((s, true));
    }
    options.id = Some(id.to_owned());
    let s = api.host.open_session(options).await.map_err(run_error)?;
    Ok((s, false))
}

/// The session a turn runs in, its input, and the session key to echo.
pub struct Picked {
    pub session: Session,
    pub input: UserInput,
    pub key: Option<String>,
}

pub async fn pick(
    api: &Api,
    headers: &HeaderMap,
    conv: Transcript,
    endpoint: Option<Endpoint>,
) -> Result<Picked, ApiError> {
    let id = header_value(headers, "x-hermes-session-id", true)?;
    let options = options(Answers::Nobody, &conv.system, headers)?;
    let key = options.memory_scope.clone();
    let session = match id {
        // A named session: its stored history, the body's ignored.
        Some(id) => open_or_resume(api, &id, options).await?.0,
        None => {
            let id = derived_session_id(&conv.system, &conv.first_user);
            let mut options = options;
            options.id = Some(id);
            let session = api.host.open_session(options).await.map_err(run_error)?;
            session.adopt_history(conv.history);
            session
        }
    };
    if let Some(endpoint) = endpoint {
        session.set_endpoint(endpoint);
    }
    Ok(Picked {
        session,
        input: conv.input,
        key,
    })
}

/// What a request's `model` runs on (api-server.md §5.3 as issue 48 has it): `None`,
/// the default, for none, `hermes-agent` or the advertised id; a `model_routes` alias's
/// model; `provider:model` switches both; a bare name is a model of the current
/// provider. Anything else is a 400 `model_not_found`.
pub async fn model_endpoint(api: &Api, model: &str) -> Result<Option<Endpoint>, ApiError> {
    let model = model.trim();
    if model.is_empty() || model == api.model_id || model == "hermes-agent" {
        return Ok(None);
    }
    if let Some(route) = api.settings.model_routes.get(model) {
        return Ok(route_endpoint(api, route));
    }
    let runtime = api.host.runtime();
    let inventory = api.host.model_options(false).await;
    let unknown = || {
        ApiError::bad_request(
            format!("The model '{model}' does not exist here: use an id /v1/models lists, a model of the current provider, or provider:model"),
            Some("model_not_found"),
        )
        .at("model")
    };
    // `provider:model` when the part before the colon is a provider the picker lists
    // (the current one's slug: its model); else the whole name is a model's
    // (`qwen3:4b`).
    let current = inventory.providers.iter().find(|p| p.is_current);
    let served = |name: &str| {
        inventory.model == name || current.is_some_and(|p| p.models.iter().any(|m| m == name))
    };
    if let Some((slug, name)) = model.split_once(':')
        && let Some(row) = inventory.providers.iter().find(|r| r.slug == slug)
    {
        if row.is_current && !served(name) {
            return Err(unknown());
        }
        let spec = if row.is_current { name } else { model };
        return runtime.switch_model(spec).map(Some).map_err(|_| unknown());
    }
    if !served(model) {
        return Err(unknown());
    }
    runtime.switch_model(model).map(Some).map_err(|_| unknown())
}

/// A `model_routes` alias's endpoint.
fn route_endpoint(api: &Api, route: &herald_config::api_settings::ModelRoute) -> Option<Endpoint> {
    let runtime = api.host.runtime();
    let spec = match (&route.provider, &route.model) {
        (Some(p), Some(m)) => format!("{p}:{m}"),
        (None, Some(m)) => m.clone(),
        _ => return None,
    };
    let mut endpoint = runtime.switch_model(&spec).unwrap_or_else(|_| {
        let mut e = runtime.endpoint();
        e.model = route.model.clone().unwrap_or(e.model);
        e
    });
    if let Some(url) = &route.base_url {
        endpoint.base_url = url.clone();
    }
    if let Some(key) = &route.api_key {
        endpoint.api_key = key.clone();
    }
    Some(endpoint)
}

/// A session-host error as the API answers it.
pub fn run_error(e: SessionError) -> ApiError {
    match &e {
        SessionError::TooManyRuns(n) => ApiError::too_many_runs(*n),
        SessionError::Busy(id) => {
            ApiError::conflict(format!("session {id} is busy with a turn"), "session_busy")
        }
        SessionError::NotFound(id) => ApiError::not_found(format!("Session not found: {id}"), None),
        // A store that is unreachable or did not answer within its deadline: the
        // client may retry; the store's own words stay in the log.
        SessionError::Store(e) if e.is_unavailable() => {
            tracing::warn!(error = %e, "a request found the store unavailable");
            ApiError::store_unavailable()
        }
        SessionError::Store(_) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.told(), None),
        other => {
            // The model's own words stay in the log too: they can name paths and
            // internals a client has no business seeing.
            tracing::error!(error = %other, "a request failed in the session host");
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                herald_session::FAILED_INSIDE,
                None,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_store_failure_is_a_generic_500_whose_reason_stays_in_the_log() {
        let e = SessionError::Compress("disk /var/secret/state.db is full".into());
        let answer = run_error(e);
        assert_eq!(answer.status, StatusCode::INTERNAL_SERVER_ERROR);
        let body = answer.body().to_string();
        assert!(!body.contains("/var/secret"), "{body}");
        assert!(body.contains("the reason is in its log"), "{body}");
    }

    #[test]
    fn a_store_past_its_deadline_is_a_503_with_retry_after_whose_reason_stays_in_the_log() {
        for e in [
            herald_store::StoreError::TimedOut("no answer within 5 s from db.internal:5432".into()),
            herald_store::StoreError::Unreachable("db.internal:5432: timed out".into()),
        ] {
            let answer = run_error(SessionError::Store(e));
            assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
            assert!(answer.retry_after);
            let body = answer.body().to_string();
            assert!(!body.contains("db.internal"), "{body}");
            assert_eq!(answer.code, Some("store_unavailable"));
        }
        let refused = run_error(SessionError::Store(herald_store::StoreError::Database(
            "duplicate key".into(),
        )));
        assert_eq!(refused.status, StatusCode::INTERNAL_SERVER_ERROR);
    }

    #[test]
    fn the_derived_id_is_stable_and_follows_system_and_first_user() {
        let a = derived_session_id("sys", "hello");
        assert_eq!(a, derived_session_id("sys", "hello"));
        assert_eq!(a.len(), 4 + 16);
        assert_ne!(a, derived_session_id("sys", "other"));
        let want = hex::encode(Sha256::digest(b"sys\nhello"));
        assert_eq!(a, format!("api-{}", &want[..16]));
    }

    #[test]
    fn messages_become_history_and_input() {
        let c = Transcript::from_chat_messages(&[
            json!({"role": "system", "content": "s1"}),
            json!({"role": "user", "content": "q1"}),
            json!({"role": "tool", "content": "dropped"}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "a1"}]}),
            json!({"role": "system", "content": "s2"}),
            json!({"role": "user", "content": "q2"}),
        ])
        .unwrap();
        assert_eq!(
            (
                c.system.as_str(),
                c.input.text.as_str(),
                c.first_user.as_str()
            ),
            ("s1\ns2", "q2", "q1")
        );
        assert_eq!(c.history.len(), 2);
        assert!(
            Transcript::from_chat_messages(&[json!({"role": "user", "content": "  "})]).is_err()
        );
        assert!(
            Transcript::from_chat_messages(&[json!({"role": "system", "content": "x"})]).is_err()
        );
    }

    #[test]
    fn session_headers_are_checked() {
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert("x-hermes-session-id", v.parse().unwrap());
            h
        };
        assert_eq!(
            header_value(&with("abc"), "x-hermes-session-id", true)
                .unwrap()
                .as_deref(),
            Some("abc")
        );
        for bad in ["../etc", "a/b", &"x".repeat(257)] {
            assert!(
                header_value(&with(bad), "x-hermes-session-id", true).is_err(),
                "{bad}"
            );
        }
    }
}
