//! The request readers: a body's bytes to what its handler runs on, before any run or
//! store lookup. Pure functions of the bytes: the typed request, or the 4xx to answer.
//! The handlers read through them, and so do the fuzz targets.

use crate::body;
use crate::errors::ApiError;
use crate::session_pick::Transcript;
use crate::wire::{self, ChatCompletionRequest, ResponseRequest};
use serde_json::{Map, Value};

/// A body as a JSON object and the typed request read from it.
pub struct Read<T> {
    /// The object (idempotency fingerprints its fields).
    pub object: Map<String, Value>,
    pub typed: T,
}

/// A `POST /v1/chat/completions` body: `messages` counted first (at most
/// `max_messages`), then parsed.
pub fn chat_completion(
    bytes: &[u8],
    max_messages: usize,
) -> Result<Read<ChatCompletionRequest>, ApiError> {
    body::at_most(bytes, "messages", max_messages)?;
    let object = body::object(
        bytes,
        ApiError::bad_request("Invalid JSON in request body", None),
    )?;
    let typed = wire::read(&object);
    Ok(Read { object, typed })
}

/// A `POST /v1/responses` body: `input` counted first, then parsed.
pub fn response(bytes: &[u8], max_messages: usize) -> Result<Read<ResponseRequest>, ApiError> {
    body::at_most(bytes, "input", max_messages)?;
    let object = body::object(
        bytes,
        ApiError::bad_request_short("Invalid JSON in request body"),
    )?;
    let typed = wire::read(&object);
    Ok(Read { object, typed })
}

/// A chat request's messages as its run's transcript.
pub(crate) fn transcript(request: &ChatCompletionRequest) -> Result<Transcript, ApiError> {
    match &request.messages {
        Some(Value::Array(m)) if !m.is_empty() => Transcript::from_chat_messages(m),
        _ => Err(ApiError::bad_request_short(
            "Missing or invalid 'messages' field",
        )),
    }
}

/// The results a chat request's trailing `tool` messages carry, `(tool_call_id,
/// content)`; `None` when it does not end with tool messages (a new turn).
pub(crate) fn trailing_tool_results(
    request: &ChatCompletionRequest,
) -> Result<Option<crate::parked::Answers>, ApiError> {
    let Some(Value::Array(messages)) = &request.messages else {
        return Ok(None);
    };
    let tail: Vec<&Value> = messages
        .iter()
        .rev()
        .take_while(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
        .collect();
    if tail.is_empty() {
        return Ok(None);
    }
    let mut answers = Vec::new();
    for m in tail.into_iter().rev() {
        let Some(id) = m.get("tool_call_id").and_then(Value::as_str) else {
            return Err(ApiError::bad_request(
                "A tool message needs its tool_call_id",
                Some("missing_tool_call_id"),
            ));
        };
        answers.push((id.to_owned(), crate::content::text_only(m.get("content"))));
    }
    Ok(Some(answers))
}

/// Everything a chat completions body is read through before its run; the answer to
/// give when it is refused.
pub fn check_chat_completion(bytes: &[u8], max_messages: usize) -> Result<(), ApiError> {
    transcript(&chat_completion(bytes, max_messages)?.typed).map(|_| ())
}

/// Everything a responses body is read through before its run (its `input`).
pub fn check_response(bytes: &[u8], max_messages: usize) -> Result<(), ApiError> {
    let read = response(bytes, max_messages)?;
    crate::responses::parse_input(read.typed.input.as_ref()).map(|_| ())
}
