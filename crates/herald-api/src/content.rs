//! Message `content` as every route reads it (api-server.md §5, Hermes's
//! normalization): a string, or parts. Text parts (`text`, `input_text`,
//! `output_text`) are joined by newlines; image parts (`image_url` with `{url,
//! detail}`, `input_image` with a string `image_url`) become image parts of the user
//! message, checked as Hermes checks them; file parts and unknown types are refused.
//! One place turns a `{role, content}` item into a [`ChatMessage`].

use crate::errors::ApiError;
use herald_protocol::{ChatMessage, ImageUrl, Role, UserInput};
use herald_session::images::checked_url;
use serde_json::Value;

/// Longest text kept of one content (64 KiB, as Hermes caps it).
const MAX_TEXT: usize = 65_536;
/// Most parts read of one content.
const MAX_PARTS: usize = 1_000;

fn capped(text: &str) -> String {
    match text.char_indices().nth(MAX_TEXT) {
        Some((at, _)) => text[..at].to_owned(),
        None => text.to_owned(),
    }
}

fn refused(code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::bad_request(message, Some(code))
}

/// One image part: its URL checked, its detail a non-empty string when given.
fn image(part: &serde_json::Map<String, Value>) -> Result<ImageUrl, ApiError> {
    let (url, detail) = match part.get("image_url") {
        Some(Value::Object(o)) => (o.get("url"), o.get("detail").or(part.get("detail"))),
        other => (other, part.get("detail")),
    };
    let url = url.and_then(Value::as_str).unwrap_or_default();
    let url = checked_url(url).map_err(|e| refused(e.code(), e.to_string()))?;
    let detail = match detail {
        None | Some(Value::Null) => None,
        Some(Value::String(d)) if !d.trim().is_empty() => Some(d.trim().to_owned()),
        Some(_) => {
            return Err(refused(
                "invalid_content_part",
                "Image detail must be a non-empty string when provided.",
            ));
        }
    };
    Ok(ImageUrl { url, detail })
}

/// A content's text and images; a bad part is a 400 with Hermes's code.
pub fn user_content(v: Option<&Value>) -> Result<UserInput, ApiError> {
    let parts = match v {
        None | Some(Value::Null) => return Ok(UserInput::default()),
        Some(Value::String(s)) => return Ok(capped(s).into()),
        Some(Value::Array(parts)) => parts,
        Some(other) => return Ok(capped(&other.to_string()).into()),
    };
    let mut texts = Vec::new();
    let mut images = Vec::new();
    for part in parts.iter().take(MAX_PARTS) {
        let o = match part {
            Value::String(s) if !s.is_empty() => {
                texts.push(capped(s));
                continue;
            }
            Value::Object(o) => o,
            _ => continue,
        };
        let kind = o.get("type").and_then(Value::as_str).unwrap_or_default();
        match kind.trim().to_ascii_lowercase().as_str() {
            "text" | "input_text" | "output_text" => match o.get("text") {
                Some(Value::String(t)) if !t.is_empty() => texts.push(capped(t)),
                Some(Value::String(_)) | Some(Value::Null) | None => {}
                Some(other) => texts.push(capped(&other.to_string())),
            },
            "image_url" | "input_image" => images.push(image(o)?),
            "file" | "input_file" => {
                return Err(refused(
                    "unsupported_content_type",
                    "Inline image inputs are supported, but uploaded files and document inputs are not supported on this endpoint.",
                ));
            }
            _ => {
                let shown = o.get("type").map_or("None".to_owned(), |t| t.to_string());
                return Err(refused(
                    "unsupported_content_type",
                    format!(
                        "Unsupported content part type {shown}. Only text and image_url/input_image parts are supported."
                    ),
                ));
            }
        }
    }
    Ok(UserInput {
        text: texts.join("\n"),
        images,
    })
}

/// The text of a content, images left out (system messages, as Hermes flattens them).
pub fn text_only(v: Option<&Value>) -> String {
    user_content(v).map(|c| c.text).unwrap_or_else(|_| match v {
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    })
}

/// A `{role, content}` item as a message of the conversation: user and assistant
/// ones (`None` for other roles); `param` names the field in an error.
pub fn message(
    role: &str,
    content: Option<&Value>,
    param: &str,
) -> Result<Option<ChatMessage>, ApiError> {
    let role = match role {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        _ => return Ok(None),
    };
    let input = user_content(content).map_err(|e| e.at(param))?;
    Ok(Some(ChatMessage {
        role,
        ..ChatMessage::user_input(input)
    }))
}

/// A message's text and images, for the turn it starts.
pub fn input_of(m: ChatMessage) -> UserInput {
    UserInput {
        text: m.content.unwrap_or_default(),
        images: m.images,
    }
}

/// Whether a message carries anything to answer: text that is not blank, or an image.
pub fn has_payload(m: &ChatMessage) -> bool {
    !m.images.is_empty() || m.content.as_deref().is_some_and(|c| !c.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parts_are_read_as_hermes_reads_them() {
        let c = user_content(Some(&json!([
            "a",
            {"type": "input_text", "text": "b"},
            {"type": "image_url", "image_url": {"url": "https://x/cat.png", "detail": "low"}},
            {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
            42
        ])))
        .unwrap();
        assert_eq!(c.text, "a\nb");
        assert_eq!(c.images.len(), 2);
        assert_eq!(c.images[0].detail.as_deref(), Some("low"));
        assert_eq!(c.images[1].url, "data:image/png;base64,AAAA");
        for (bad, code) in [
            (
                json!([{"type": "image_url", "image_url": {}}]),
                "invalid_image_url",
            ),
            (
                json!([{"type": "image_url", "image_url": {"url": "ftp://x"}}]),
                "invalid_image_url",
            ),
            (
                json!([{"type": "input_image", "image_url": "data:text/plain,hi"}]),
                "unsupported_content_type",
            ),
            (
                json!([{"type": "input_file", "file_id": "f"}]),
                "unsupported_content_type",
            ),
            (json!([{"type": "audio"}]), "unsupported_content_type"),
            (
                json!([{"type": "image_url", "image_url": {"url": "https://x", "detail": 3}}]),
                "invalid_content_part",
            ),
        ] {
            let e = user_content(Some(&bad)).unwrap_err();
            assert_eq!(e.code, Some(code), "{bad}");
            assert_eq!(e.status, axum::http::StatusCode::BAD_REQUEST);
        }
        let e = message(
            "user",
            Some(&json!([{"type": "audio"}])),
            "messages[3].content",
        )
        .unwrap_err();
        assert_eq!(e.body()["error"]["param"], "messages[3].content");
        assert_eq!(user_content(Some(&json!(42))).unwrap().text, "42");
        assert_eq!(
            text_only(Some(
                &json!([{"type": "text", "text": "s"}, {"type": "audio"}])
            )),
            "s"
        );
    }
}
