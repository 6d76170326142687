//! The turn loop (agent spec §2): call the provider, run the tool calls, feed the
//! results back, until the model answers without tools or a limit is hit. Everything
//! it does goes out as [`AgentEvent`]s.

use crate::approval::Approvals;
use crate::event::AgentEvent;
use crate::tool::{MAX_RESULT_CHARS, Tool, ToolContext, cap_result, spec_of, wrap_untrusted};
use herald_llm::{DeltaEvent, Endpoint, LlmClient, RetryConfig};
use herald_protocol::{ChatMessage, Role, ToolCall};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Default `agent.max_turns`.
pub const DEFAULT_MAX_ITERATIONS: u32 = 90;
/// Empty responses tolerated in a row before the turn fails.
const MAX_EMPTY_RESPONSES: u32 = 3;
/// The text that asks for a final answer when the iteration cap is hit.
pub const SUMMARY_REQUEST: &str = "You have reached the maximum number of tool-using steps for this turn. Without calling any tools, give your final answer now: summarise what you did, what you found, and what is left.";
/// Marks steer text delivered inside a tool result.
pub const STEER_MARKER: &str = "[OUT-OF-BAND MESSAGE FROM THE USER — not part of the tool output]";

/// What an agent needs for its turns.
pub struct AgentConfig {
    pub endpoint: Endpoint,
    pub retry: RetryConfig,
    pub tools: Vec<Arc<dyn Tool>>,
    pub max_iterations: u32,
    pub cwd: PathBuf,
    pub approvals: Arc<Approvals>,
    /// Byte-stable for the life of the session.
    pub system_prompt: String,
}

/// The outcome of one turn.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TurnResult {
    pub final_response: String,
    /// The messages the turn added (user message first).
    pub messages: Vec<ChatMessage>,
    pub api_calls: u32,
    pub completed: bool,
    pub interrupted: bool,
    pub partial: bool,
    pub failed: bool,
    pub error: Option<String>,
    pub last_reasoning: Option<String>,
    /// Steer text that found no tool boundary to ride on.
    pub pending_steer: Option<String>,
}

/// Interrupt and steer, callable from other tasks while a turn runs.
#[derive(Clone, Default)]
pub struct AgentHandle {
    interrupted: Arc<AtomicBool>,
    steer: Arc<Mutex<Vec<String>>>,
}

impl AgentHandle {
    pub fn interrupt(&self) {
        self.interrupted.store(true, Ordering::SeqCst);
    }
    /// Queues text for the next tool boundary.
    pub fn steer(&self, text: &str) -> bool {
        match self.steer.lock() {
            Ok(mut s) => {
                s.push(text.to_owned());
                true
            }
            Err(_) => false,
        }
    }
    fn take_steer(&self) -> Option<String> {
        let mut s = self.steer.lock().ok()?;
        if s.is_empty() {
            return None;
        }
        Some(std::mem::take(&mut *s).join("\n"))
    }
    fn is_interrupted(&self) -> bool {
        self.interrupted.load(Ordering::SeqCst)
    }
}

/// One agent: a configuration, a provider client, and its interrupt/steer handle.
pub struct Agent {
    pub config: AgentConfig,
    client: LlmClient,
    handle: AgentHandle,
}

impl Agent {
    pub fn new(config: AgentConfig) -> Self {
        Agent {
            config,
            client: LlmClient::new(),
            handle: AgentHandle::default(),
        }
    }

    pub fn handle(&self) -> AgentHandle {
        self.handle.clone()
    }

    /// Runs one user turn on top of `history`.
    pub async fn run_turn(
        &self,
        history: &[ChatMessage],
        user_message: &str,
        events: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> TurnResult {
        self.handle.interrupted.store(false, Ordering::SeqCst);
        let user = ChatMessage::user(strip_invalid(user_message));
        let mut messages: Vec<ChatMessage> = Vec::with_capacity(history.len() + 2);
        messages.push(ChatMessage::system(self.config.system_prompt.clone()));
        messages.extend(history.iter().cloned());
        let turn_start = messages.len();
        events(AgentEvent::MessageAppended(user.clone()));
        messages.push(user);
        let specs: Vec<_> = self
            .config
            .tools
            .iter()
            .map(|t| spec_of(t.as_ref()))
            .collect();
        let mut result = TurnResult::default();
        let mut empty_strikes = 0;
        let mut last_text = String::new();

        loop {
            if self.handle.is_interrupted() {
                result.interrupted = true;
                break;
            }
            let at_cap = result.api_calls >= self.config.max_iterations;
            if at_cap {
                let request = ChatMessage::user(SUMMARY_REQUEST);
                events(AgentEvent::MessageAppended(request.clone()));
                messages.push(request);
            }
            self.deliver_steer(&mut messages);
            result.api_calls += 1;
            let tools = if at_cap { &[][..] } else { &specs[..] };
            let mut on_delta = |d: DeltaEvent| match d {
                DeltaEvent::Text(t) => events(AgentEvent::MessageDelta(t)),
                DeltaEvent::Reasoning(r) => events(AgentEvent::ReasoningDelta(r)),
                DeltaEvent::ToolCallStarted { .. } => {}
            };
            let call = self
                .client
                .chat(
                    &self.config.endpoint,
                    &messages,
                    tools,
                    &self.config.retry,
                    &mut on_delta,
                )
                .await;
            let completion = match call {
                Ok(outcome) => outcome.completion,
                Err(e) => {
                    result.failed = true;
                    result.error = Some(e.message.clone());
                    events(AgentEvent::TurnFailed { error: e.message });
                    break;
                }
            };
            let Some(choice) = completion.choices.into_iter().next() else {
                result.failed = true;
                result.error = Some("the provider returned no choices".into());
                break;
            };
            let message = choice.message;
            if message.reasoning.is_some() {
                result.last_reasoning = message.reasoning.clone();
            }
            let text = message.content.clone().unwrap_or_default();
            events(AgentEvent::MessageComplete {
                content: message.content.clone(),
                tool_calls: message.tool_calls.len(),
            });
            if !message.tool_calls.is_empty() && !at_cap {
                if choice.finish_reason.as_deref() == Some("length")
                    && message
                        .tool_calls
                        .iter()
                        .any(|c| serde_json::from_str::<Value>(&c.function.arguments).is_err())
                {
                    result.partial = true;
                    result.error = Some("response truncated: the tool call arguments were cut off (finish_reason=length)".into());
                    events(AgentEvent::TurnFailed {
                        error: result.error.clone().unwrap_or_default(),
                    });
                    break;
                }
                if !text.trim().is_empty() {
                    last_text = text;
                }
                let calls = message.tool_calls.clone();
                events(AgentEvent::MessageAppended(message.clone()));
                messages.push(message);
                let results = self.run_tools(&calls, events).await;
                let first_result = messages.len();
                messages.extend(results);
                if !self.handle.is_interrupted() {
                    self.deliver_steer(&mut messages);
                }
                for m in &messages[first_result..] {
                    events(AgentEvent::MessageAppended(m.clone()));
                }
                if self.handle.is_interrupted() {
                    result.interrupted = true;
                    break;
                }
                continue;
            }
            if text.trim().is_empty() && message.tool_calls.is_empty() {
                empty_strikes += 1;
                if empty_strikes < MAX_EMPTY_RESPONSES && !at_cap {
                    continue;
                }
                if !last_text.is_empty() {
                    result.final_response = last_text.clone();
                    let answer = ChatMessage::text(Role::Assistant, last_text.clone());
                    events(AgentEvent::MessageAppended(answer.clone()));
                    messages.push(answer);
                    result.completed = true;
                } else {
                    result.failed = true;
                    result.error = Some("the model returned an empty answer".into());
                    events(AgentEvent::TurnFailed {
                        error: "the model returned an empty answer".into(),
                    });
                }
                break;
            }
            let mut final_message = message;
            final_message.tool_calls.clear();
            events(AgentEvent::MessageAppended(final_message.clone()));
            messages.push(final_message);
            result.final_response = text.clone();
            result.completed = true;
            if choice.finish_reason.as_deref() == Some("length") {
                result.partial = true;
                result.error = Some("the answer was cut off at the token limit".into());
            }
            break;
        }
        if result.interrupted {
            // A pending steer is discarded on interrupt.
            let _ = self.handle.take_steer();
        } else {
            result.pending_steer = self.handle.take_steer();
        }
        if result.completed {
            events(AgentEvent::TurnCompleted {
                final_response: result.final_response.clone(),
            });
        }
        result.messages = messages.split_off(turn_start);
        result
    }

    /// Appends queued steer text to the last tool result, if the conversation ends in one.
    fn deliver_steer(&self, messages: &mut [ChatMessage]) {
        let Some(last) = messages.last_mut().filter(|m| m.role == Role::Tool) else {
            return;
        };
        if let Some(text) = self.handle.take_steer() {
            let content = last.content.get_or_insert_with(String::new);
            content.push_str(&format!("\n\n{STEER_MARKER}\n{text}"));
        }
    }

    /// Runs a batch of tool calls; results come back in the model's order. Parallel-safe
    /// calls run concurrently when the whole batch is parallel-safe.
    async fn run_tools(
        &self,
        calls: &[ToolCall],
        events: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Vec<ChatMessage> {
        let available: Vec<&str> = self.config.tools.iter().map(|t| t.name()).collect();
        let mut planned: Vec<Planned> = Vec::new();
        for call in calls {
            let tool = self
                .config
                .tools
                .iter()
                .find(|t| t.name() == call.function.name)
                .cloned();
            let args =
                serde_json::from_str::<Value>(if call.function.arguments.trim().is_empty() {
                    "{}"
                } else {
                    &call.function.arguments
                });
            planned.push(match (tool, args) {
                (None, _) if call.function.name.trim().is_empty() => Err("error: the tool call has an empty name".into()),
                (None, _) => Err(format!(
                    "{{\"error\": \"Unknown tool `{}`. Available tools: {}\"}}",
                    call.function.name.replace('"', "'"),
                    available.join(", ")
                )),
                (Some(_), Err(e)) => Err(format!("{{\"error\": \"Invalid JSON arguments ({e}); use {{}} for no-argument tools\"}}")),
                (Some(t), Ok(args)) => Ok((t, args)),
            });
        }
        for (call, plan) in calls.iter().zip(&planned) {
            if let Ok((_, args)) = plan {
                events(AgentEvent::ToolStarted {
                    call_id: call.id.clone(),
                    name: call.function.name.clone(),
                    arguments: args.clone(),
                });
            }
        }
        let all_parallel = planned
            .iter()
            .all(|p| p.as_ref().map(|(t, _)| t.parallel_safe()).unwrap_or(true));
        let run_one = |call: &ToolCall, plan: &Planned| {
            let ctx = ToolContext {
                cwd: self.config.cwd.clone(),
                approvals: self.config.approvals.clone(),
                interrupted: self.handle.interrupted.clone(),
                call_id: call.id.clone(),
            };
            let plan = plan.clone();
            async move {
                match plan {
                    Err(e) => (e, true),
                    Ok((tool, args)) => {
                        if ctx.is_interrupted() {
                            return ("cancelled: skipped due to interrupt".to_owned(), true);
                        }
                        let out = tool.run(args, &ctx).await;
                        let is_error = serde_json::from_str::<Value>(&out)
                            .ok()
                            .is_some_and(|v| v.get("error").is_some_and(|e| !e.is_null()));
                        let out = cap_result(out, MAX_RESULT_CHARS);
                        let out = if tool.untrusted_output() {
                            wrap_untrusted(tool.name(), out)
                        } else {
                            out
                        };
                        (out, is_error)
                    }
                }
            }
        };
        let outputs: Vec<(String, bool)> = if all_parallel && calls.len() > 1 {
            futures_util::future::join_all(calls.iter().zip(&planned).map(|(c, p)| run_one(c, p)))
                .await
        } else {
            let mut v = Vec::new();
            for (c, p) in calls.iter().zip(&planned) {
                v.push(run_one(c, p).await);
            }
            v
        };
        calls
            .iter()
            .zip(outputs)
            .map(|(call, (out, is_error))| {
                events(AgentEvent::ToolCompleted {
                    call_id: call.id.clone(),
                    name: call.function.name.clone(),
                    result: out.clone(),
                    is_error,
                });
                ChatMessage::tool_result(call.id.clone(), call.function.name.clone(), out)
            })
            .collect()
    }
}

/// A tool call ready to run (the tool and its parsed arguments), or its error result.
type Planned = Result<(Arc<dyn Tool>, Value), String>;

/// Removes lone surrogates and NULs (invalid in JSON strings for many servers).
fn strip_invalid(text: &str) -> String {
    text.chars().filter(|c| *c != '\u{0}').collect()
}
