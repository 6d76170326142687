//! Chunk assembly: streamed deltas become one normalized [`ChatCompletion`] — text and
//! reasoning concatenated, tool calls assembled by `index` in order, usage from the
//! final chunk (which may have no choices at all).

use herald_protocol::{
    ChatChunk, ChatCompletion, ChatMessage, CompletionChoice, FunctionCall, Role, ToolCall, Usage,
};
use std::collections::BTreeMap;

/// What one chunk contributed, for live display.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeltaEvent {
    Text(String),
    Reasoning(String),
    ToolCallStarted {
        index: u32,
        id: String,
        name: String,
    },
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Accumulates chunks.
#[derive(Debug, Default)]
pub struct Assembler {
    id: Option<String>,
    model: Option<String>,
    created: Option<u64>,
    content: String,
    reasoning: String,
    calls: BTreeMap<u32, PartialCall>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    saw_choice: bool,
}

impl Assembler {
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies one chunk; returns what it added.
    pub fn push(&mut self, chunk: ChatChunk) -> Vec<DeltaEvent> {
        let mut events = Vec::new();
        self.id = self.id.take().or(chunk.id);
        self.model = self.model.take().or(chunk.model);
        self.created = self.created.or(chunk.created);
        if let Some(u) = chunk.usage {
            self.usage = Some(u);
        }
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            self.saw_choice = true;
            let delta = choice.delta;
            if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                self.content.push_str(&text);
                events.push(DeltaEvent::Text(text));
            }
            for r in [delta.reasoning, delta.reasoning_content]
                .into_iter()
                .flatten()
                .filter(|t| !t.is_empty())
            {
                self.reasoning.push_str(&r);
                events.push(DeltaEvent::Reasoning(r));
            }
            for call in delta.tool_calls {
                let entry = self.calls.entry(call.index).or_default();
                let was_named = !entry.name.is_empty();
                if let Some(id) = call.id.filter(|i| !i.is_empty()) {
                    entry.id = id;
                }
                if let Some(f) = call.function {
                    if let Some(name) = f.name.filter(|n| !n.is_empty()) {
                        entry.name.push_str(&name);
                    }
                    if let Some(args) = f.arguments {
                        entry.arguments.push_str(&args);
                    }
                }
                if !was_named && !entry.name.is_empty() {
                    events.push(DeltaEvent::ToolCallStarted {
                        index: call.index,
                        id: entry.id.clone(),
                        name: entry.name.clone(),
                    });
                }
            }
            if choice.finish_reason.is_some() {
                self.finish_reason = choice.finish_reason;
            }
        }
        events
    }

    /// The finish reason, once a chunk gave one.
    pub fn finish_reason(&self) -> Option<&str> {
        self.finish_reason.as_deref()
    }

    /// Whether any choice arrived (a stream of usage-only chunks is an invalid response).
    pub fn has_choice(&self) -> bool {
        self.saw_choice
    }

    /// The assembled response.
    pub fn finish(self, fallback_model: &str) -> ChatCompletion {
        let tool_calls: Vec<ToolCall> = self
            .calls
            .into_iter()
            .filter(|(_, c)| !c.name.is_empty())
            .enumerate()
            .map(|(i, (_, c))| ToolCall {
                id: if c.id.is_empty() {
                    format!("call_{i}")
                } else {
                    c.id
                },
                kind: "function".to_owned(),
                function: FunctionCall {
                    name: c.name,
                    arguments: if c.arguments.is_empty() {
                        "{}".to_owned()
                    } else {
                        c.arguments
                    },
                },
            })
            .collect();
        let content = (!self.content.is_empty() || tool_calls.is_empty()).then_some(self.content);
        let usage = self.usage.unwrap_or_default();
        ChatCompletion {
            id: self.id.unwrap_or_default(),
            object: "chat.completion".to_owned(),
            created: self.created.unwrap_or(0),
            model: self.model.unwrap_or_else(|| fallback_model.to_owned()),
            choices: vec![CompletionChoice {
                index: 0,
                message: ChatMessage {
                    role: Role::Assistant,
                    content,
                    images: Vec::new(),
                    tool_calls,
                    tool_call_id: None,
                    name: None,
                    reasoning: (!self.reasoning.is_empty()).then_some(self.reasoning),
                },
                finish_reason: self.finish_reason,
            }],
            usage,
        }
    }
}
