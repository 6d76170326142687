//! The values plugin hooks get beside the ids, as Hermes 0.19.0 computes them: the
//! conversation as OpenAI messages (no system message, the user's own words), the rough
//! token estimate, the response summary of `post_api_request`, and the failure reason
//! names of `api_request_error`.

use herald_llm::{ErrorClass, LlmError};
use herald_protocol::{ChatCompletion, ChatMessage};
use serde_json::{Map, Value, json};

/// The conversation a hook sees: `messages` without the system prompt, the message at
/// `user_at` (an index into `messages`) as the user wrote it.
pub fn conversation(messages: &[ChatMessage], user_at: usize, user: &ChatMessage) -> Value {
    let rows: Vec<Value> = messages
        .iter()
        .enumerate()
        .skip(1)
        .map(|(i, m)| serde_json::to_value(if i == user_at { user } else { m }))
        .map(|v| v.unwrap_or(Value::Null))
        .collect();
    Value::Array(rows)
}

/// Hermes's `estimate_messages_tokens_rough`: (characters + 3) / 4, and 1,500 a picture.
pub fn approx_tokens(messages: &[ChatMessage]) -> u64 {
    let (chars, images) = messages.iter().fold((0usize, 0usize), |(c, i), m| {
        let text = m.content.as_ref().map_or(0, String::len)
            + m.tool_calls
                .iter()
                .map(|t| t.function.arguments.len() + t.function.name.len())
                .sum::<usize>();
        (c + text, i + m.images.len())
    });
    u64::try_from(chars.div_ceil(4) + images * 1500).unwrap_or(u64::MAX)
}

/// Seconds since the epoch, as Hermes's `time.time()`.
pub fn epoch_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// `started_at`, `ended_at` and `api_duration` of one API call.
pub fn timing(fields: &mut Map<String, Value>, started_at: f64) {
    let ended_at = epoch_now();
    fields.insert("started_at".into(), json!(started_at));
    fields.insert("ended_at".into(), json!(ended_at));
    fields.insert(
        "api_duration".into(),
        json!((ended_at - started_at).max(0.0)),
    );
}

/// What `post_api_request` says of a response, beside the ids.
pub fn response_fields(fields: &mut Map<String, Value>, c: &ChatCompletion, message_count: usize) {
    let choice = c.choices.first();
    let finish_reason = choice.and_then(|ch| ch.finish_reason.clone());
    let message = choice.map(|ch| &ch.message);
    let usage = json!({
        "input_tokens": c.usage.prompt_tokens,
        "output_tokens": c.usage.completion_tokens,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "reasoning_tokens": 0,
        "request_count": 1,
        "prompt_tokens": c.usage.prompt_tokens,
        "total_tokens": c.usage.total_tokens,
    });
    // Hermes passes the SDK's message object: these attributes (the plugin host lets
    // them be read as attributes and as keys).
    let assistant = message.map_or(Value::Null, |m| {
        json!({"role": "assistant", "content": m.content, "tool_calls": m.tool_calls,
               "finish_reason": finish_reason, "reasoning": m.reasoning, "usage": usage})
    });
    let chars = message
        .and_then(|m| m.content.as_ref())
        .map_or(0, |t| t.chars().count());
    let tool_calls = message.map_or(0, |m| m.tool_calls.len());
    fields.insert("finish_reason".into(), json!(finish_reason));
    fields.insert("message_count".into(), json!(message_count));
    fields.insert("response_model".into(), json!(c.model));
    fields.insert(
        "response".into(),
        json!({"model": c.model, "finish_reason": finish_reason, "assistant_message": assistant, "usage": usage}),
    );
    fields.insert("usage".into(), usage);
    fields.insert("assistant_message".into(), assistant);
    fields.insert("assistant_content_chars".into(), json!(chars));
    fields.insert("assistant_tool_call_count".into(), json!(tool_calls));
}

/// What `api_request_error` says of a failure: the type and message, the status and
/// Hermes's reason name.
pub fn error_fields(fields: &mut Map<String, Value>, e: &LlmError) {
    fields.insert(
        "error".into(),
        json!({"type": format!("{:?}", e.class), "message": e.message}),
    );
    fields.insert("status_code".into(), json!(e.status));
    fields.insert("reason".into(), json!(reason(e.class)));
}

/// Hermes's `FailoverReason` for an error class.
fn reason(class: ErrorClass) -> &'static str {
    match class {
        ErrorClass::Auth => "auth",
        ErrorClass::Billing => "billing",
        ErrorClass::RateLimit => "rate_limit",
        ErrorClass::Overloaded => "overloaded",
        ErrorClass::ServerError => "server_error",
        ErrorClass::Timeout | ErrorClass::Network => "timeout",
        ErrorClass::Tls => "ssl_cert_verification",
        ErrorClass::ContextOverflow => "context_overflow",
        ErrorClass::ModelNotFound => "model_not_found",
        ErrorClass::ContentPolicy => "content_policy_blocked",
        ErrorClass::Format => "format_error",
        ErrorClass::InvalidResponse => "invalid_response",
        ErrorClass::Blocked => "blocked",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_protocol::Role;

    #[test]
    fn the_conversation_leaves_the_system_prompt_out_and_keeps_the_users_words() {
        let messages = vec![
            ChatMessage::system("be brief"),
            ChatMessage::user("earlier"),
            ChatMessage::text(Role::Assistant, "ok"),
            ChatMessage::user("now\n\ninjected context"),
        ];
        let clean = ChatMessage::user("now");
        let seen = conversation(&messages, 3, &clean);
        assert_eq!(seen.as_array().unwrap().len(), 3);
        assert_eq!(seen[2]["content"], "now");
        assert_eq!(seen[0]["role"], "user");
        assert_eq!(approx_tokens(&messages[1..2]), 2);
        assert_eq!(reason(ErrorClass::Network), "timeout");
    }
}
