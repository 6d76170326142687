//! Chat completions: messages, tools, the streamed chunk and the normalized response.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    /// The name as written on the wire and in the session store.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// One message of a conversation.
///
/// On the wire a message with images carries its `content` as OpenAI parts: a `text`
/// part, then one `image_url` part per image. Reading accepts either form (text parts
/// joined by newlines).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "WireMessage")]
pub struct ChatMessage {
    pub role: Role,
    /// Text; `None` for an assistant message that only calls tools.
    pub content: Option<String>,
    /// Images of a user message, sent after its text.
    pub images: Vec<ImageUrl>,
    pub tool_calls: Vec<ToolCall>,
    /// For `role: tool`: the call this result answers.
    pub tool_call_id: Option<String>,
    /// For `role: tool`: the tool's name (some servers want it).
    pub name: Option<String>,
    /// The model's reasoning text, when the provider streams it.
    pub reasoning: Option<String>,
}

/// An image as an OpenAI `image_url` part carries it: an `http(s)` URL or a
/// `data:image/...;base64,` URL, and the optional detail (`low`, `high`, `auto`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageUrl {
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// What a user sends for a turn: text and images.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInput {
    pub text: String,
    pub images: Vec<ImageUrl>,
}

impl From<String> for UserInput {
    fn from(text: String) -> Self {
        UserInput {
            text,
            images: Vec::new(),
        }
    }
}

impl From<&str> for UserInput {
    fn from(text: &str) -> Self {
        text.to_owned().into()
    }
}

impl From<&String> for UserInput {
    fn from(text: &String) -> Self {
        text.clone().into()
    }
}

impl Serialize for ChatMessage {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("role", &self.role)?;
        match (&self.content, self.images.is_empty()) {
            (Some(text), true) => m.serialize_entry("content", text)?,
            (None, true) => {}
            (text, false) => m.serialize_entry("content", &Parts(text.as_deref(), &self.images))?,
        }
        if !self.tool_calls.is_empty() {
            m.serialize_entry("tool_calls", &self.tool_calls)?;
        }
        if let Some(id) = &self.tool_call_id {
            m.serialize_entry("tool_call_id", id)?;
        }
        if let Some(name) = &self.name {
            m.serialize_entry("name", name)?;
        }
        if let Some(r) = &self.reasoning {
            m.serialize_entry("reasoning", r)?;
        }
        m.end()
    }
}

/// A text and its images as OpenAI content parts.
struct Parts<'a>(Option<&'a str>, &'a [ImageUrl]);

impl Serialize for Parts<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(None)?;
        if let Some(text) = self.0.filter(|t| !t.is_empty()) {
            seq.serialize_element(&WirePart::Text {
                text: text.to_owned(),
            })?;
        }
        for image in self.1 {
            seq.serialize_element(&WirePart::ImageUrl {
                image_url: image.clone(),
            })?;
        }
        seq.end()
    }
}

/// One content part as read and written.
#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WirePart {
    Text { text: String },
    ImageUrl { image_url: ImageUrl },
}

/// `content` as read: a string or parts (parts of other types are skipped).
#[derive(Deserialize)]
#[serde(untagged)]
enum WireContent {
    Text(String),
    Parts(Vec<Value>),
}

/// A list written as `null` read as empty (the openai SDK's `model_dump()` writes
/// `"tool_calls": null`, and providers do too).
fn null_as_empty<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

#[derive(Deserialize)]
struct WireMessage {
    role: Role,
    #[serde(default)]
    content: Option<WireContent>,
    #[serde(default, deserialize_with = "null_as_empty")]
    tool_calls: Vec<ToolCall>,
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
}

impl From<WireMessage> for ChatMessage {
    fn from(w: WireMessage) -> Self {
        let (content, images) = match w.content {
            None => (None, Vec::new()),
            Some(WireContent::Text(t)) => (Some(t), Vec::new()),
            Some(WireContent::Parts(parts)) => {
                let mut texts = Vec::new();
                let mut images = Vec::new();
                for part in parts {
                    match serde_json::from_value::<WirePart>(part) {
                        Ok(WirePart::Text { text }) => texts.push(text),
                        Ok(WirePart::ImageUrl { image_url }) => images.push(image_url),
                        Err(_) => {}
                    }
                }
                (Some(texts.join("\n")), images)
            }
        };
        ChatMessage {
            role: w.role,
            content,
            images,
            tool_calls: w.tool_calls,
            tool_call_id: w.tool_call_id,
            name: w.name,
            reasoning: w.reasoning,
        }
    }
}

impl ChatMessage {
    pub fn text(role: Role, content: impl Into<String>) -> Self {
        ChatMessage {
            role,
            content: Some(content.into()),
            images: Vec::new(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
            reasoning: None,
        }
    }

    /// A user message of `input`'s text and images.
    pub fn user_input(input: UserInput) -> Self {
        ChatMessage {
            images: input.images,
            ..Self::user(input.text)
        }
    }

    pub fn system(content: impl Into<String>) -> Self {
        Self::text(Role::System, content)
    }
    pub fn user(content: impl Into<String>) -> Self {
        Self::text(Role::User, content)
    }
    pub fn tool_result(
        call_id: impl Into<String>,
        name: impl Into<String>,
        content: impl Into<String>,
    ) -> Self {
        ChatMessage {
            role: Role::Tool,
            content: Some(content.into()),
            images: Vec::new(),
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.into()),
            name: Some(name.into()),
            reasoning: None,
        }
    }
}

/// A tool call made by the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub function: FunctionCall,
}

fn function_type() -> String {
    "function".to_owned()
}

/// The function part of a tool call; `arguments` is JSON text as the model wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCall {
    pub name: String,
    pub arguments: String,
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    #[serde(rename = "type")]
    pub kind: String,
    pub function: FunctionSpec,
}

/// A function tool's name, description and JSON Schema parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// Token counts, and the call's price when the provider reports it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
    #[serde(default)]
    pub total_tokens: u64,
    /// USD, as OpenRouter and other routers report it (`usage.cost`); any other
    /// value there is left out.
    #[serde(
        default,
        deserialize_with = "usd",
        skip_serializing_if = "Option::is_none"
    )]
    pub cost: Option<f64>,
}

/// A reported price: a finite, non-negative number, else nothing.
fn usd<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let v = Option::<Value>::deserialize(d)?;
    Ok(v.and_then(|v| v.as_f64())
        .filter(|c| c.is_finite() && *c >= 0.0))
}

/// One streamed chunk (`data: {...}` of the SSE stream).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ChatChunk {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub created: Option<u64>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub choices: Vec<ChunkChoice>,
    #[serde(default)]
    pub usage: Option<Usage>,
    /// Some servers report an error inside the stream.
    #[serde(default)]
    pub error: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ChunkChoice {
    #[serde(default)]
    pub index: u32,
    #[serde(default)]
    pub delta: Delta,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

/// What one chunk adds to the message.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Delta {
    #[serde(default)]
    pub role: Option<String>,
    #[serde(default)]
    pub content: Option<String>,
    /// OpenRouter and others.
    #[serde(default)]
    pub reasoning: Option<String>,
    /// DeepSeek, vLLM, llama.cpp.
    #[serde(default)]
    pub reasoning_content: Option<String>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub tool_calls: Vec<ToolCallDelta>,
}

/// A piece of a tool call, keyed by `index`: id and name come first, `arguments` in
/// string fragments to concatenate.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ToolCallDelta {
    #[serde(default)]
    pub index: u32,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub function: Option<FunctionDelta>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct FunctionDelta {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub arguments: Option<String>,
}

/// The normalized response every provider path produces. Only `choices` (each with a
/// `message`) must be there, so a middleware may answer with just that.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletion {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub object: String,
    #[serde(default)]
    pub created: u64,
    #[serde(default)]
    pub model: String,
    pub choices: Vec<CompletionChoice>,
    #[serde(default)]
    pub usage: Usage,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionChoice {
    #[serde(default)]
    pub index: u32,
    pub message: ChatMessage,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lists_written_as_null_read_as_empty() {
        let m: ChatMessage = serde_json::from_value(
            json!({"role": "assistant", "content": "hi", "tool_calls": null}),
        )
        .unwrap();
        assert!(m.tool_calls.is_empty());
        let c: ChatCompletion = serde_json::from_value(json!({"choices": [
            {"message": {"role": "assistant", "content": null, "tool_calls": null}}
        ]}))
        .unwrap();
        assert!(c.choices[0].message.tool_calls.is_empty());
    }

    #[test]
    fn a_message_with_images_is_sent_as_parts_and_read_back() {
        let image = ImageUrl {
            url: "data:image/png;base64,iVBORw==".into(),
            detail: Some("low".into()),
        };
        let m = ChatMessage::user_input(UserInput {
            text: "what is this?".into(),
            images: vec![image.clone()],
        });
        let wire = serde_json::to_value(&m).unwrap();
        assert_eq!(
            wire,
            json!({"role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw==", "detail": "low"}}
            ]})
        );
        let back: ChatMessage = serde_json::from_value(wire).unwrap();
        assert_eq!(back, m);
        let plain = serde_json::to_value(ChatMessage::user("hi")).unwrap();
        assert_eq!(plain, json!({"role": "user", "content": "hi"}));
        let odd: ChatMessage = serde_json::from_value(json!({"role": "assistant", "content": [
            {"type": "text", "text": "a"}, {"type": "refusal"}, {"type": "text", "text": "b"}
        ]}))
        .unwrap();
        assert_eq!(odd.content.as_deref(), Some("a\nb"));
    }
}
