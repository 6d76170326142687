//! What plugins and embedders hook into a turn: the four middleware kinds and the
//! observer hooks (agent spec §11, middleware.md B1), with the failure reporter.

use crate::middleware::{ExecutionMiddleware, FailureReporter, RequestMiddleware};
use herald_llm::LlmError;
use serde_json::Value;
use std::sync::Arc;

/// What a `pre_tool_call` hook asks of a tool call (Hermes 0.19.0's two directives).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolDirective {
    /// The call does not run; the message becomes its result.
    Block(String),
    /// The call runs only once a human approves it at the approval gate (denied when
    /// nobody can answer); `rule_key` names what an "always" or "session" answer covers.
    Approve {
        message: Option<String>,
        rule_key: Option<String>,
    },
}

impl ToolDirective {
    /// A hook's return value read as Hermes reads it: `{"action": "block", "message":
    /// <non-empty>}` or `{"action": "approve", "message"?, "rule_key"?}`; anything else
    /// (a block without a message among it) is no directive.
    pub fn read(answer: &Value) -> Option<ToolDirective> {
        let text = |key: &str| {
            answer
                .get(key)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let message = answer
            .get("message")
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
            .map(str::to_owned);
        match answer.get("action").and_then(Value::as_str)? {
            "block" => message.map(ToolDirective::Block),
            "approve" => Some(ToolDirective::Approve {
                message,
                rule_key: text("rule_key"),
            }),
            _ => None,
        }
    }
}

/// An observer: told what happened; only `pre_tool_call` may answer (a directive).
/// Every hook is async, so an observer may wait (on an out-of-process plugin host, say)
/// without blocking a runtime worker.
#[async_trait::async_trait]
pub trait Observer: Send + Sync {
    fn name(&self) -> &str;
    /// Whether the API request hooks mean anything to this observer (a gate that
    /// watches only tool calls says no, and the request is then not built for it).
    fn sees_api_requests(&self) -> bool {
        true
    }
    async fn pre_api_request(&self, _payload: &Value) {}
    async fn post_api_request(&self, _payload: &Value) {}
    async fn api_request_error(&self, _payload: &Value) {}
    /// A directive for the tool call (block it, or send it to the approval gate).
    async fn pre_tool_call(&self, _payload: &Value) -> Option<ToolDirective> {
        None
    }
    async fn post_tool_call(&self, _payload: &Value) {}
    /// A new conversation starts (its first turn).
    async fn on_session_start(&self, _payload: &Value) {}
    /// Once per turn before the first API call; returned text is added to the current
    /// user message for the API (never to the system prompt).
    async fn pre_llm_call(&self, _payload: &Value) -> Option<String> {
        None
    }
    /// The first string returned replaces a tool's result before it enters the conversation.
    async fn transform_tool_result(&self, _payload: &Value) -> Option<String> {
        None
    }
    /// The first non-empty string returned replaces the turn's final answer.
    async fn transform_llm_output(&self, _payload: &Value) -> Option<String> {
        None
    }
    async fn post_llm_call(&self, _payload: &Value) {}
    async fn on_session_end(&self, _payload: &Value) {}
    /// A session is over for good: closed, replaced (`/new`, a resume) or left at exit.
    async fn on_session_finalize(&self, _payload: &Value) {}
    /// A child agent of `delegate_task` was built and is about to run.
    async fn subagent_start(&self, _payload: &Value) {}
    /// A child agent of `delegate_task` ended (told once per child, after the batch).
    async fn subagent_stop(&self, _payload: &Value) {}
}

/// The observer hooks that only listen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notice {
    PreApiRequest,
    PostApiRequest,
    ApiRequestError,
    PostToolCall,
    SessionStart,
    PostLlmCall,
    SessionEnd,
    SessionFinalize,
    SubagentStart,
    SubagentStop,
}

/// The observer hooks that may answer with text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    PreLlmCall,
    TransformToolResult,
    TransformLlmOutput,
}

/// Everything registered for an agent, in registration order.
#[derive(Clone, Default)]
pub struct Plugins {
    pub llm_request: Vec<Arc<dyn RequestMiddleware>>,
    pub llm_execution: Vec<Arc<dyn ExecutionMiddleware<LlmError>>>,
    pub tool_request: Vec<Arc<dyn RequestMiddleware>>,
    pub tool_execution: Vec<Arc<dyn ExecutionMiddleware<String>>>,
    pub observers: Vec<Arc<dyn Observer>>,
    pub reporter: Arc<FailureReporter>,
}

impl Plugins {
    /// Whether any observer listens (payloads need building only then).
    pub fn has_observers(&self) -> bool {
        !self.observers.is_empty()
    }

    /// Whether any observer sees the API requests.
    pub fn api_requests_seen(&self) -> bool {
        self.observers.iter().any(|o| o.sees_api_requests())
    }

    /// Tells every observer, in registration order.
    pub async fn notify(&self, notice: Notice, payload: &Value) {
        for o in &self.observers {
            match notice {
                Notice::PreApiRequest => o.pre_api_request(payload).await,
                Notice::PostApiRequest => o.post_api_request(payload).await,
                Notice::ApiRequestError => o.api_request_error(payload).await,
                Notice::PostToolCall => o.post_tool_call(payload).await,
                Notice::SessionStart => o.on_session_start(payload).await,
                Notice::PostLlmCall => o.post_llm_call(payload).await,
                Notice::SessionEnd => o.on_session_end(payload).await,
                Notice::SessionFinalize => o.on_session_finalize(payload).await,
                Notice::SubagentStart => o.subagent_start(payload).await,
                Notice::SubagentStop => o.subagent_stop(payload).await,
            }
        }
    }

    /// The first directive of the observers' `pre_tool_call` hooks, in registration
    /// order (as Hermes: the first valid directive wins).
    pub async fn tool_directive(&self, payload: &Value) -> Option<ToolDirective> {
        for o in &self.observers {
            if let Some(directive) = o.pre_tool_call(payload).await {
                return Some(directive);
            }
        }
        None
    }

    /// Every observer's answer, in registration order (`None`s left out).
    pub async fn answers(&self, ask: Ask, payload: &Value) -> Vec<String> {
        let mut out = Vec::new();
        for o in &self.observers {
            let answer = match ask {
                Ask::PreLlmCall => o.pre_llm_call(payload).await,
                Ask::TransformToolResult => o.transform_tool_result(payload).await,
                Ask::TransformLlmOutput => o.transform_llm_output(payload).await,
            };
            out.extend(answer);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Listener(bool);

    #[async_trait::async_trait]
    impl Observer for Listener {
        fn name(&self) -> &str {
            "listener"
        }
        fn sees_api_requests(&self) -> bool {
            self.0
        }
    }

    #[test]
    fn directives_are_read_as_hermes_reads_them() {
        use serde_json::json;
        let read = |v: Value| ToolDirective::read(&v);
        assert_eq!(
            read(json!({"action": "block", "message": "no"})),
            Some(ToolDirective::Block("no".into()))
        );
        assert_eq!(
            read(json!({"action": "block"})),
            None,
            "a block needs a message"
        );
        assert_eq!(read(json!({"action": "block", "message": ""})), None);
        assert_eq!(
            read(json!({"action": "approve"})),
            Some(ToolDirective::Approve {
                message: None,
                rule_key: None
            })
        );
        assert_eq!(
            read(json!({"action": "approve", "message": "why", "rule_key": " ssh "})),
            Some(ToolDirective::Approve {
                message: Some("why".into()),
                rule_key: Some("ssh".into())
            })
        );
        assert_eq!(read(json!({"action": "allow"})), None);
        assert_eq!(read(json!("block")), None);
        assert_eq!(
            read(json!({"action": "approve", "rule_key": 5})),
            Some(ToolDirective::Approve {
                message: None,
                rule_key: None
            })
        );
    }

    #[test]
    fn only_observers_that_see_api_requests_make_the_request_built_for_them() {
        let mut plugins = Plugins::default();
        assert!(!plugins.api_requests_seen());
        plugins.observers.push(Arc::new(Listener(false)));
        assert!(plugins.has_observers() && !plugins.api_requests_seen());
        plugins.observers.push(Arc::new(Listener(true)));
        assert!(plugins.api_requests_seen());
    }
}
