//! A server's `sampling/createMessage` answered through herald's provider, with
//! Hermes's rules: at most `max_rpm` requests a minute, `allowed_models` checked, the
//! answer's `max_tokens` capped, the call bounded by `timeout`, and at most
//! `max_tool_rounds` tool-use answers in a row. No one is asked first (as in Hermes).

use herald_config::SamplingSettings;
use herald_llm::redact::shapes_redacted as redacted;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Runs one chat completion: an OpenAI request body (`model` may be empty: the
/// provider's model) to the completion as JSON, or why not.
pub trait Sampler: Send + Sync {
    fn complete(
        &self,
        body: Value,
    ) -> Pin<Box<dyn Future<Output = Result<Value, String>> + Send + '_>>;
}

/// One server's sampling rules and state.
pub struct Policy {
    server: String,
    settings: SamplingSettings,
    sampler: Arc<dyn Sampler>,
    recent: Mutex<VecDeque<Instant>>,
    tool_rounds: AtomicU32,
}

impl Policy {
    pub fn new(server: &str, settings: SamplingSettings, sampler: Arc<dyn Sampler>) -> Policy {
        Policy {
            server: server.to_owned(),
            settings,
            sampler,
            recent: Mutex::new(VecDeque::new()),
            tool_rounds: AtomicU32::new(0),
        }
    }

    /// Answers `params` (the request's params as JSON) with a `CreateMessageResult`
    /// as JSON, or the refusal's message.
    pub async fn answer(&self, params: &Value) -> Result<Value, String> {
        let (server, s) = (&self.server, &self.settings);
        self.admit()?;
        let model = s.model.clone().or_else(|| {
            params["modelPreferences"]["hints"][0]["name"]
                .as_str()
                .map(str::to_owned)
        });
        if let Some(m) = model.as_deref().filter(|m| !m.is_empty())
            && !s.allowed_models.is_empty()
            && !s.allowed_models.iter().any(|a| a == m)
        {
            return Err(format!(
                "Model '{m}' not allowed for server '{server}'. Allowed: {}",
                s.allowed_models.join(", ")
            ));
        }
        let body = request_body(params, model.as_deref().unwrap_or(""), s.max_tokens_cap);
        let completion = tokio::time::timeout(s.timeout, self.sampler.complete(body))
            .await
            .map_err(|_| {
                format!(
                    "Sampling LLM call timed out after {}s for server '{server}'",
                    s.timeout.as_secs_f64()
                )
            })?
            .map_err(|e| format!("Sampling LLM call failed: {}", redacted(&e)))?;
        self.result_of(&completion)
    }

    /// The rate limit: a sliding minute.
    fn admit(&self) -> Result<(), String> {
        let mut recent = self
            .recent
            .lock()
            .map_err(|_| "sampling state lost".to_owned())?;
        let now = Instant::now();
        while recent
            .front()
            .is_some_and(|t| now.duration_since(*t) > Duration::from_secs(60))
        {
            recent.pop_front();
        }
        if recent.len() >= self.settings.max_rpm as usize {
            return Err(format!(
                "Sampling rate limit exceeded for server '{}' ({} requests/minute)",
                self.server, self.settings.max_rpm
            ));
        }
        recent.push_back(now);
        Ok(())
    }

    fn result_of(&self, completion: &Value) -> Result<Value, String> {
        let server = &self.server;
        let choice = completion["choices"].get(0).ok_or_else(|| {
            format!("LLM returned empty response (no choices) for server '{server}'")
        })?;
        let model = completion["model"].as_str().unwrap_or_default();
        let message = &choice["message"];
        let calls = message["tool_calls"].as_array().filter(|c| !c.is_empty());
        if let Some(calls) = calls {
            let max = self.settings.max_tool_rounds;
            if max == 0 {
                return Err(format!(
                    "Tool loops disabled for server '{server}' (max_tool_rounds=0)"
                ));
            }
            let rounds = self.tool_rounds.fetch_add(1, Ordering::SeqCst) + 1;
            if rounds > max {
                self.tool_rounds.store(0, Ordering::SeqCst);
                return Err(format!(
                    "Tool loop limit exceeded for server '{server}' (max {max} rounds)"
                ));
            }
            let content: Vec<Value> = calls.iter().map(tool_use).collect();
            return Ok(
                json!({"model": model, "stopReason": "toolUse", "role": "assistant", "content": content}),
            );
        }
        self.tool_rounds.store(0, Ordering::SeqCst);
        let text = redacted(message["content"].as_str().unwrap_or_default());
        let stop = match choice["finish_reason"].as_str() {
            Some("length") => "maxTokens",
            Some("tool_calls") => "toolUse",
            _ => "endTurn",
        };
        Ok(
            json!({"model": model, "stopReason": stop, "role": "assistant", "content": {"type": "text", "text": text}}),
        )
    }
}

/// An OpenAI tool call as an MCP `tool_use` block (arguments that are not JSON are
/// kept as `{"_raw": …}`, as Hermes keeps them).
fn tool_use(call: &Value) -> Value {
    let args = call["function"]["arguments"].as_str().unwrap_or("{}");
    let input = serde_json::from_str::<Value>(args).unwrap_or_else(|_| json!({"_raw": args}));
    json!({"type": "tool_use", "id": call["id"], "name": call["function"]["name"], "input": input})
}

/// The chat completion request for a sampling request.
fn request_body(params: &Value, model: &str, cap: u64) -> Value {
    let mut messages = Vec::new();
    if let Some(system) = params["systemPrompt"].as_str().filter(|s| !s.is_empty()) {
        messages.push(json!({"role": "system", "content": system}));
    }
    for m in params["messages"].as_array().into_iter().flatten() {
        messages.extend(openai_messages(m));
    }
    let wanted = params["maxTokens"].as_u64().unwrap_or(cap);
    let mut body = json!({"model": model, "messages": messages, "max_tokens": wanted.min(cap), "stream": true});
    if let Some(t) = params["temperature"].as_f64() {
        body["temperature"] = json!(t);
    }
    let tools: Vec<Value> = params["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            json!({"type": "function", "function": {
                "name": t["name"], "description": t["description"].as_str().unwrap_or(""),
                "parameters": crate::schema::normalized(&t["inputSchema"])}})
        })
        .collect();
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools);
    }
    body
}

/// One MCP sampling message as OpenAI messages: text and images as content, tool
/// uses as the assistant's tool calls, tool results as `tool` messages.
fn openai_messages(m: &Value) -> Vec<Value> {
    let role = m["role"].as_str().unwrap_or("user");
    let blocks: Vec<&Value> = match &m["content"] {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    let mut parts = Vec::new();
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for b in blocks {
        match b["type"].as_str() {
            Some("text") => parts.push(json!({"type": "text", "text": b["text"]})),
            Some("image") => parts.push(json!({"type": "image_url", "image_url": {"url": format!(
                "data:{};base64,{}", b["mimeType"].as_str().unwrap_or("image/png"), b["data"].as_str().unwrap_or(""))}})),
            Some("tool_use") => calls.push(json!({"id": b["id"], "type": "function", "function": {
                "name": b["name"], "arguments": b["input"].to_string()}})),
            Some("tool_result") => {
                let text: Vec<&str> = b["content"].as_array().into_iter().flatten()
                    .filter_map(|c| c["text"].as_str()).collect();
                results.push(json!({"role": "tool", "tool_call_id": b["toolUseId"], "content": text.join("\n")}));
            }
            _ => {}
        }
    }
    let mut out = results;
    if !calls.is_empty() {
        out.push(json!({"role": "assistant", "content": null, "tool_calls": calls}));
    }
    if !parts.is_empty() {
        out.push(json!({"role": role, "content": parts}));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Echo(Value);
    impl Sampler for Echo {
        fn complete(
            &self,
            body: Value,
        ) -> Pin<Box<dyn Future<Output = Result<Value, String>> + Send + '_>> {
            Box::pin(async move {
                let mut reply = self.0.clone();
                reply["echo"] = body;
                Ok(reply)
            })
        }
    }

    fn policy(settings: SamplingSettings, reply: Value) -> Policy {
        Policy::new("srv", settings, Arc::new(Echo(reply)))
    }

    #[tokio::test]
    async fn requests_are_bounded_as_hermes_bounds_them() {
        let text = json!({"model": "m", "choices": [{"message": {"content": "hi sk-secret1"}, "finish_reason": "stop"}]});
        let s = SamplingSettings {
            max_rpm: 2,
            max_tokens_cap: 100,
            allowed_models: vec!["ok".into()],
            ..Default::default()
        };
        let p = policy(s, text);
        let params = json!({"messages": [{"role": "user", "content": {"type": "text", "text": "q"}}],
                            "systemPrompt": "sys", "maxTokens": 5000,
                            "modelPreferences": {"hints": [{"name": "ok"}]}});
        let r = p.answer(&params).await.unwrap();
        assert_eq!(r["content"]["text"], "hi [REDACTED]");
        assert_eq!(r["stopReason"], "endTurn");
        let mut bad = params.clone();
        bad["modelPreferences"]["hints"][0]["name"] = json!("nope");
        assert!(
            p.answer(&bad)
                .await
                .unwrap_err()
                .contains("Model 'nope' not allowed")
        );
        assert!(
            p.answer(&params)
                .await
                .unwrap_err()
                .contains("rate limit exceeded")
        );
        let body = request_body(&params, "ok", 100);
        assert_eq!(body["max_tokens"], 100);
        assert_eq!(
            body["messages"][0],
            json!({"role": "system", "content": "sys"})
        );
    }

    #[tokio::test]
    async fn tool_rounds_are_counted() {
        let call = json!({"model": "m", "choices": [{"message": {"tool_calls": [
            {"id": "c", "function": {"name": "f", "arguments": "{\"a\":1}"}}]}, "finish_reason": "tool_calls"}]});
        let p = policy(
            SamplingSettings {
                max_tool_rounds: 1,
                ..Default::default()
            },
            call,
        );
        let params = json!({"messages": []});
        let r = p.answer(&params).await.unwrap();
        assert_eq!(r["stopReason"], "toolUse");
        assert_eq!(
            r["content"][0],
            json!({"type": "tool_use", "id": "c", "name": "f", "input": {"a": 1}})
        );
        assert!(
            p.answer(&params)
                .await
                .unwrap_err()
                .contains("Tool loop limit exceeded")
        );
        let none = policy(
            SamplingSettings {
                max_tool_rounds: 0,
                ..Default::default()
            },
            json!({"choices": [{"message": {"tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "x"}}]}}]}),
        );
        assert!(
            none.answer(&params)
                .await
                .unwrap_err()
                .contains("max_tool_rounds=0")
        );
    }
}
