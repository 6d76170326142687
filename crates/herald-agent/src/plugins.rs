//! What plugins and embedders hook into a turn: the four middleware kinds and the
//! observer hooks (agent spec §11, middleware.md B1), with the failure reporter.

use crate::middleware::{ExecutionMiddleware, FailureReporter, RequestMiddleware};
use herald_llm::LlmError;
use serde_json::Value;
use std::sync::Arc;

/// An observer: told what happened; only `pre_tool_call` may answer (a block message).
pub trait Observer: Send + Sync {
    fn name(&self) -> &str;
    fn pre_api_request(&self, _payload: &Value) {}
    fn post_api_request(&self, _payload: &Value) {}
    fn api_request_error(&self, _payload: &Value) {}
    /// `Some(message)` blocks the tool call; the message becomes its result.
    fn pre_tool_call(&self, _payload: &Value) -> Option<String> {
        None
    }
    fn post_tool_call(&self, _payload: &Value) {}
    /// A new conversation starts (its first turn).
    fn on_session_start(&self, _payload: &Value) {}
    /// Once per turn before the first API call; returned text is added to the current
    /// user message for the API (never to the system prompt).
    fn pre_llm_call(&self, _payload: &Value) -> Option<String> {
        None
    }
    /// The first string returned replaces a tool's result before it enters the conversation.
    fn transform_tool_result(&self, _payload: &Value) -> Option<String> {
        None
    }
    /// The first non-empty string returned replaces the turn's final answer.
    fn transform_llm_output(&self, _payload: &Value) -> Option<String> {
        None
    }
    fn post_llm_call(&self, _payload: &Value) {}
    fn on_session_end(&self, _payload: &Value) {}
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
    pub fn fire(&self, f: impl Fn(&dyn Observer)) {
        for o in &self.observers {
            f(o.as_ref());
        }
    }
}
