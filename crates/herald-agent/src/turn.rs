//! The turn loop (agent spec §2): call the provider, run the tool calls, feed the
//! results back, until the model answers without tools or a limit is hit. Everything
//! it does goes out as [`AgentEvent`]s.

use crate::approval::Approvals;
use crate::event::AgentEvent;
use crate::event::TurnProgress;
use crate::hook_fields;
use crate::middleware::{Kind, MiddlewareError, Terminal, run_execution_chain, run_request_chain};
use crate::plugins::{Ask, Notice, Plugins};
use crate::tool::{Tool, ToolContext, spec_of};
use crate::tool_call::{self, Planned, Turnside, parse_args};
use herald_llm::{DeltaEvent, Endpoint, LlmClient, RetryConfig};
use herald_llm::{ErrorClass, LlmError};
use herald_protocol::ChatCompletion;
use herald_protocol::{ChatMessage, Role, ToolCall, Usage, UserInput};
use serde_json::Value;
use serde_json::{Map, json};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tracing::Instrument;

/// Steers waiting for a run's next tool boundary at most: as many as a conversation's
/// queue holds prompts.
pub const MAX_PENDING_STEERS: usize = 64;
/// Default `agent.max_turns`.
pub const DEFAULT_MAX_ITERATIONS: u32 = 90;
/// API calls retried because tool arguments were not valid JSON.
const MAX_INVALID_JSON_RETRIES: u32 = 3;
/// Consecutive batches of only unknown tools before the turn ends as partial.
const MAX_UNKNOWN_TOOL_STRIKES: u32 = 3;
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
    /// Middleware and observers.
    pub plugins: Plugins,
    /// Session id (`""` when none) and platform, passed to middleware and observers.
    pub session_id: String,
    pub platform: String,
    /// Who the turn is for, as hooks' `sender_id` (`""`; `webhook:<route>` for a
    /// webhook run, as Hermes names it).
    pub sender_id: String,
    /// Provider id for middleware (`custom`, `openrouter`, a `providers:` key).
    pub provider: String,
    /// Who answers `clarify`; `None` in unattended runs.
    pub clarifier: Option<Arc<dyn crate::tool::Clarifier>>,
    /// Who is asked for a sudo password or a secret (the TUI gateway); `None` elsewhere.
    pub prompter: Option<Arc<dyn crate::tool::Prompter>>,
    /// The budget this agent's run tree shares (a root run's own, or its root's for a
    /// subagent).
    pub budget: Arc<crate::budget::TreeBudget>,
    /// `agent.max_tool_calls_per_answer`: calls of one answer that run; the rest get an
    /// error result the model sees.
    pub max_tool_calls_per_answer: usize,
    /// How the request that started the run asks for tools to be used (API requests).
    pub tool_policy: crate::client_tool::ToolPolicy,
}

impl AgentConfig {
    /// Guardrail hard stops (off by default: warnings only).
    pub fn guard(&self) -> crate::guardrails::LoopGuard {
        crate::guardrails::LoopGuard::new(false)
    }
}

/// Appended to a partial answer kept after an interrupt, so the model (and a reader of
/// the session) knows it was cut short.
pub const INTERRUPTED_MARK: &str = "\n\n[interrupted by the user]";

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
    /// The failure was a provider error worth trying again later (network, 5xx, 429).
    pub error_retryable: bool,
    pub last_reasoning: Option<String>,
    /// Steer text that found no tool boundary to ride on.
    pub pending_steer: Option<String>,
    /// Tokens the provider reported, summed over the turn's API calls.
    pub usage: Usage,
}

/// Interrupt and steer, callable from other tasks while a turn runs.
#[derive(Clone, Default)]
pub struct AgentHandle {
    interrupted: Arc<AtomicBool>,
    /// Wakes a provider call in flight so an interrupt drops its stream at once.
    wake: Arc<tokio::sync::Notify>,
    steer: Arc<Mutex<Vec<String>>>,
}

impl AgentHandle {
    pub fn interrupt(&self) {
        self.interrupted.store(true, Ordering::SeqCst);
        self.wake.notify_waiters();
    }

    /// Resolves once the turn is interrupted.
    async fn until_interrupted(&self) {
        loop {
            // Created before the check: an interrupt between the two still wakes it.
            let woken = self.wake.notified();
            if self.is_interrupted() {
                return;
            }
            woken.await;
        }
    }
    /// Queues text for the next tool boundary; false when [`MAX_PENDING_STEERS`] already
    /// wait (a client that steers without end is refused, not held in memory).
    pub fn steer(&self, text: &str) -> bool {
        match self.steer.lock() {
            Ok(mut s) if s.len() < MAX_PENDING_STEERS => {
                s.push(text.to_owned());
                true
            }
            _ => false,
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
        Agent::with_client(config, LlmClient::new())
    }

    /// An agent sharing an existing provider client (and its connection pool).
    pub fn with_client(config: AgentConfig, client: LlmClient) -> Self {
        Agent {
            config,
            client,
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
        user_message: impl Into<UserInput>,
        events: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> TurnResult {
        // A stop sent before the turn starts is honoured: the flag is cleared when a
        // turn ends, not when one begins.
        let (task_id, turn_id) = self.new_turn_id();
        let turn = TurnIds {
            task_id: &task_id,
            turn_id: &turn_id,
        };
        let Opened {
            mut messages,
            turn_start,
            user,
        } = self
            .open_turn(history, user_message.into(), &turn, events)
            .await;
        let specs: Vec<_> = self
            .config
            .tools
            .iter()
            .map(|t| spec_of(t.as_ref()))
            .collect();
        let mut result = TurnResult::default();
        let mut state = LoopState {
            guard: self.config.guard(),
            ..LoopState::default()
        };

        loop {
            if self.handle.is_interrupted() {
                result.interrupted = true;
                break;
            }
            // Counted for the whole run tree, the last call without tools included
            // only when the tree's budget still had room.
            let tree_spent = !self.config.budget.take_call();
            let at_cap = result.api_calls >= self.config.max_iterations || tree_spent;
            if at_cap {
                let request = ChatMessage::user(SUMMARY_REQUEST);
                events(AgentEvent::MessageAppended(request.clone()));
                messages.push(request);
            }
            self.deliver_steer(&mut messages);
            result.api_calls += 1;
            let tools = if at_cap { &[][..] } else { &specs[..] };
            let ids = Ids {
                turn_id: turn_id.clone(),
                api_request_id: format!("{turn_id}:api:{}", result.api_calls),
                api_call_count: result.api_calls,
                task_id: task_id.clone(),
                turn_start,
                user: user.clone(),
            };
            let call = match self
                .call_unless_interrupted(&messages, tools, &ids, events)
                .await
            {
                Called::Done(call) => call,
                Called::Interrupted(partial) => {
                    // The stream was dropped; what arrived is kept, marked.
                    if !partial.trim().is_empty() {
                        let kept = ChatMessage::text(
                            Role::Assistant,
                            format!("{partial}{INTERRUPTED_MARK}"),
                        );
                        events(AgentEvent::MessageAppended(kept.clone()));
                        messages.push(kept);
                        result.final_response = partial;
                    }
                    result.interrupted = true;
                    break;
                }
            };
            let completion = match call {
                Ok(completion) => completion,
                Err(e) => {
                    result.failed = true;
                    result.error_retryable = e.retryable();
                    result.error = Some(e.message.clone());
                    events(AgentEvent::TurnFailed { error: e.message });
                    break;
                }
            };
            result.usage.prompt_tokens += completion.usage.prompt_tokens;
            result.usage.completion_tokens += completion.usage.completion_tokens;
            result.usage.total_tokens += completion.usage.total_tokens;
            if let Some(cost) = completion.usage.cost {
                *result.usage.cost.get_or_insert(0.0) += cost;
            }
            let Some(choice) = completion.choices.into_iter().next() else {
                result.failed = true;
                result.error = Some("the provider returned no choices".into());
                events(AgentEvent::TurnFailed {
                    error: "the provider returned no choices".into(),
                });
                break;
            };
            let message = choice.message;
            if message.reasoning.is_some() {
                result.last_reasoning = message.reasoning.clone();
            }
            let text = message.content.clone().unwrap_or_default();
            events(AgentEvent::Progress(TurnProgress::MessageComplete {
                content: message.content.clone(),
                tool_calls: message.tool_calls.len(),
            }));
            if !message.tool_calls.is_empty() && !at_cap {
                let step = ToolStep {
                    message,
                    truncated: choice.finish_reason.as_deref() == Some("length"),
                    text,
                };
                match self
                    .tool_step(step, &mut state, &mut messages, &mut result, &ids, events)
                    .await
                {
                    Flow::Continue => continue,
                    Flow::Stop => break,
                }
            }
            if text.trim().is_empty() && message.tool_calls.is_empty() {
                state.empty_strikes += 1;
                if state.empty_strikes < MAX_EMPTY_RESPONSES && !at_cap {
                    continue;
                }
                if !state.last_text.is_empty() {
                    let last_text = state.last_text.clone();
                    let text = self
                        .transformed(&last_text)
                        .await
                        .unwrap_or(last_text.clone());
                    result.final_response = text.clone();
                    let answer = ChatMessage::text(Role::Assistant, text);
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
            let text = match self.transformed(&text).await {
                Some(t) => {
                    final_message.content = Some(t.clone());
                    t
                }
                None => text,
            };
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
        self.close_turn(result, messages, (turn_start, user), &turn, events)
            .await
    }

    /// An assistant message that calls tools: checked (cut-off or broken arguments, only
    /// unknown tools), appended, its tools run and their results appended.
    async fn tool_step(
        &self,
        step: ToolStep,
        state: &mut LoopState,
        messages: &mut Vec<ChatMessage>,
        result: &mut TurnResult,
        ids: &Ids,
        events: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Flow {
        let ToolStep {
            message,
            truncated,
            text,
        } = step;
        let fail =
            |result: &mut TurnResult, events: &mut (dyn FnMut(AgentEvent) + Send), error: &str| {
                result.partial = true;
                result.error = Some(error.to_owned());
                events(AgentEvent::TurnFailed {
                    error: error.to_owned(),
                });
                Flow::Stop
            };
        if truncated
            && message
                .tool_calls
                .iter()
                .any(|c| serde_json::from_str::<Value>(&c.function.arguments).is_err())
        {
            return fail(
                result,
                events,
                "response truncated: the tool call arguments were cut off (finish_reason=length)",
            );
        }
        // Broken argument JSON: ask again (nothing appended), up to 3 times.
        if message
            .tool_calls
            .iter()
            .any(|c| parse_args(&c.function.arguments).is_err())
            && state.json_strikes < MAX_INVALID_JSON_RETRIES
        {
            state.json_strikes += 1;
            return Flow::Continue;
        }
        // Calls to tools that do not exist, every one of them: a strike.
        let known = |name: &str| self.config.tools.iter().any(|t| t.name() == name);
        if message.tool_calls.iter().all(|c| !known(&c.function.name)) {
            state.unknown_strikes += 1;
        } else {
            state.unknown_strikes = 0;
        }
        if !text.trim().is_empty() {
            state.last_text = text;
        }
        let calls = message.tool_calls.clone();
        events(AgentEvent::MessageAppended(message.clone()));
        messages.push(message);
        let results = self.run_tools(&calls, ids, &mut state.guard, events).await;
        let first_result = messages.len();
        messages.extend(results);
        if !self.handle.is_interrupted() {
            self.deliver_steer(messages);
        }
        for m in &messages[first_result..] {
            events(AgentEvent::MessageAppended(m.clone()));
        }
        if state.unknown_strikes >= MAX_UNKNOWN_TOOL_STRIKES {
            return fail(
                result,
                events,
                "the model called only tools that do not exist, three times in a row",
            );
        }
        if self.handle.is_interrupted() {
            result.interrupted = true;
            return Flow::Stop;
        }
        Flow::Continue
    }

    /// The messages of the API call (system prompt, history, the user message with any
    /// `pre_llm_call` context) and the user message as the user wrote it; fires
    /// `on_session_start` on a conversation's first turn.
    async fn open_turn(
        &self,
        history: &[ChatMessage],
        input: UserInput,
        turn: &TurnIds<'_>,
        events: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Opened {
        let user = ChatMessage {
            images: input.images,
            ..ChatMessage::user(strip_invalid(&input.text))
        };
        let mut messages: Vec<ChatMessage> = Vec::with_capacity(history.len() + 2);
        messages.push(ChatMessage::system(self.config.system_prompt.clone()));
        // Sent with every tool call answered; the stored rows stay as they are.
        messages.extend(crate::history_repair::repaired(history));
        let turn_start = messages.len();
        events(AgentEvent::MessageAppended(user.clone()));
        let plugins = &self.config.plugins;
        let mut context = Vec::new();
        if plugins.has_observers() {
            let (session_id, model) = (&self.config.session_id, &self.config.endpoint.model);
            let platform = &self.config.platform;
            if history.is_empty() {
                let start = json!({"session_id": session_id, "model": model, "platform": platform});
                plugins.notify(Notice::SessionStart, &start).await;
            }
            messages.push(user.clone());
            let conversation = hook_fields::conversation(&messages, turn_start, &user);
            messages.pop();
            let pre = json!({
                "session_id": session_id, "task_id": turn.task_id, "turn_id": turn.turn_id,
                "user_message": user.content, "conversation_history": conversation,
                "is_first_turn": history.is_empty(), "model": model, "platform": platform,
                "sender_id": self.config.sender_id,
            });
            // Context from pre_llm_call rides on the user message sent to the API only.
            context = plugins.answers(Ask::PreLlmCall, &pre).await;
            context.retain(|c| !c.trim().is_empty());
        }
        let mut sent = user.clone();
        if !context.is_empty() {
            let content = sent.content.get_or_insert_with(String::new);
            content.push_str("\n\n");
            content.push_str(&context.join("\n\n"));
        }
        messages.push(sent);
        Opened {
            messages,
            turn_start,
            user,
        }
    }

    /// A task id (the session id, as every Hermes front door passes it; a fresh one
    /// without a session) and the turn id `<session>:<task>:<8 hex>`.
    fn new_turn_id(&self) -> (String, String) {
        let task_id = match self.config.session_id.is_empty() {
            true => uuid::Uuid::new_v4().to_string(),
            false => self.config.session_id.clone(),
        };
        let short: String = uuid::Uuid::new_v4()
            .simple()
            .to_string()
            .chars()
            .take(8)
            .collect();
        let session_label = if self.config.session_id.is_empty() {
            "session"
        } else {
            &self.config.session_id
        };
        let turn_id = format!("{session_label}:{task_id}:{short}");
        (task_id, turn_id)
    }

    /// One provider call, dropped at once if the turn is interrupted (with the text that
    /// had arrived).
    async fn call_unless_interrupted(
        &self,
        messages: &[ChatMessage],
        tools: &[herald_protocol::ToolSpec],
        ids: &Ids,
        events: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Called {
        let mut partial = String::new();
        let mut tracking = |e: AgentEvent| {
            if let AgentEvent::Progress(TurnProgress::MessageDelta(t)) = &e {
                partial.push_str(t);
            }
            events(e);
        };
        let call = tokio::select! {
            biased;
            () = self.handle.until_interrupted() => None,
            call = self.call_llm(messages, tools, ids, &mut tracking) => Some(call),
        };
        match call {
            Some(call) => Called::Done(call),
            None => Called::Interrupted(partial),
        }
    }

    /// Ends a turn: the pending steer, the end hooks, `TurnCompleted`, the turn's
    /// messages (the user's own words first), and the interrupt flag cleared.
    async fn close_turn(
        &self,
        mut result: TurnResult,
        mut messages: Vec<ChatMessage>,
        (turn_start, user): (usize, ChatMessage),
        turn: &TurnIds<'_>,
        events: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> TurnResult {
        if result.interrupted {
            // A pending steer is discarded on interrupt.
            let _ = self.handle.take_steer();
        } else {
            result.pending_steer = self.handle.take_steer();
        }
        self.end_hooks(&result, &messages, (turn_start, &user), turn)
            .await;
        if result.completed {
            events(AgentEvent::TurnCompleted {
                final_response: result.final_response.clone(),
            });
        }
        result.messages = messages.split_off(turn_start);
        // pre_llm_call context rode on that API call only: what is kept is the user's own.
        if let Some(first) = result.messages.first_mut() {
            *first = user;
        }
        self.handle.interrupted.store(false, Ordering::SeqCst);
        result
    }

    /// `post_llm_call` (a turn that answered and was not interrupted, as in Hermes) and
    /// `on_session_end` (every turn), with Hermes's arguments.
    async fn end_hooks(
        &self,
        result: &TurnResult,
        messages: &[ChatMessage],
        (turn_start, user): (usize, &ChatMessage),
        turn: &TurnIds<'_>,
    ) {
        let plugins = &self.config.plugins;
        if !plugins.has_observers() {
            return;
        }
        let (session_id, model) = (&self.config.session_id, &self.config.endpoint.model);
        let platform = &self.config.platform;
        if !result.final_response.is_empty() && !result.interrupted {
            let post = json!({
                "session_id": session_id, "task_id": turn.task_id, "turn_id": turn.turn_id,
                "user_message": user.content, "assistant_response": result.final_response,
                "conversation_history": hook_fields::conversation(messages, turn_start, user),
                "model": model, "platform": platform,
            });
            plugins.notify(Notice::PostLlmCall, &post).await;
        }
        // As Hermes: a turn that died on a provider error ends no session.
        if result.failed && !result.interrupted {
            return;
        }
        let end = json!({
            "session_id": session_id, "task_id": turn.task_id, "turn_id": turn.turn_id,
            "completed": result.completed, "interrupted": result.interrupted,
            "model": model, "platform": platform,
        });
        plugins.notify(Notice::SessionEnd, &end).await;
    }

    /// The answer as `transform_llm_output` observers rewrite it (the first non-empty
    /// rewrite wins), or `None` when none does.
    async fn transformed(&self, response: &str) -> Option<String> {
        let payload = json!({"response_text": response, "session_id": self.config.session_id,
                             "model": self.config.endpoint.model, "platform": self.config.platform});
        self.config
            .plugins
            .answers(Ask::TransformLlmOutput, &payload)
            .await
            .into_iter()
            .find(|t| !t.is_empty())
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
        ids: &Ids,
        guard: &mut crate::guardrails::LoopGuard,
        events: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Vec<ChatMessage> {
        // herald's own tools: a client's names are never metric labels.
        let available: Vec<&str> = self
            .config
            .tools
            .iter()
            .filter(|t| !t.client_side())
            .map(|t| t.name())
            .collect();
        let mut planned: Vec<Planned> = Vec::new();
        let cap = self.config.max_tool_calls_per_answer.max(1);
        let mut fields = Map::new();
        fields.insert("task_id".into(), json!(ids.task_id));
        fields.insert("session_id".into(), json!(self.config.session_id));
        fields.insert("turn_id".into(), json!(ids.turn_id));
        fields.insert("api_request_id".into(), json!(ids.api_request_id));
        fields.insert("platform".into(), json!(self.config.platform));
        let side = Turnside {
            tools: &self.config.tools,
            plugins: &self.config.plugins,
            approvals: &self.config.approvals,
            interrupted: &self.handle.interrupted,
            fields,
        };
        for (i, call) in calls.iter().enumerate() {
            if i >= cap {
                planned.push(Err(json!({"error": format!(
                    "Not run: this answer asked for {} tool calls and at most {cap} run per answer (agent.max_tool_calls_per_answer). Ask for the rest in your next step.",
                    calls.len()
                )})
                .to_string()));
                continue;
            }
            planned.push(tool_call::prepare(&side, call, guard, events).await);
        }
        // herald's own calls first; then the client's, all waited for together.
        let theirs = |i: &usize| planned[*i].as_ref().is_ok_and(|p| p.tool.client_side());
        let (client, own): (Vec<usize>, Vec<usize>) = (0..calls.len()).partition(theirs);
        let own_parallel = own.iter().all(|&i| {
            planned[i]
                .as_ref()
                .map(|p| p.tool.parallel_safe())
                .unwrap_or(true)
        });
        let mut results: Vec<Option<ChatMessage>> = vec![None; calls.len()];
        let outputs = self
            .run_group(&own, calls, &planned, own_parallel, ids, events)
            .await;
        for (&i, (out, is_error)) in own.iter().zip(outputs) {
            let done = finished_call(&calls[i], &planned[i], out, is_error, &available, guard);
            results[i] = Some(self.report_done(done, &calls[i], events));
        }
        // A turn stopped while herald's calls ran asks the client for nothing (its
        // calls are skipped as cancelled).
        if !client.is_empty() && !self.handle.is_interrupted() {
            let asked = client
                .iter()
                .filter_map(|&i| {
                    let p = planned[i].as_ref().ok()?;
                    Some(crate::ClientCall {
                        call_id: calls[i].id.clone(),
                        name: calls[i].function.name.clone(),
                        arguments: p.args.clone(),
                    })
                })
                .collect();
            events(AgentEvent::Progress(TurnProgress::ClientCalls(asked)));
        }
        let outputs = self
            .run_group(&client, calls, &planned, true, ids, events)
            .await;
        for (&i, (out, is_error)) in client.iter().zip(outputs) {
            let done = finished_call(&calls[i], &planned[i], out, is_error, &available, guard);
            results[i] = Some(self.report_done(done, &calls[i], events));
        }
        results.into_iter().flatten().collect()
    }

    /// A finished call's result as the model reads it, announced to the door.
    fn report_done(
        &self,
        (out, is_error): (String, bool),
        call: &ToolCall,
        events: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> ChatMessage {
        events(AgentEvent::Progress(TurnProgress::ToolCompleted {
            call_id: call.id.clone(),
            name: call.function.name.clone(),
            result: out.clone(),
            is_error,
        }));
        ChatMessage::tool_result(call.id.clone(), call.function.name.clone(), out)
    }

    /// Runs the calls at `which` (concurrently when `parallel`), passing the approval
    /// and clarify requests their tools raise on to the door as they come; their
    /// results in the same order.
    async fn run_group(
        &self,
        which: &[usize],
        calls: &[ToolCall],
        planned: &[Planned],
        parallel: bool,
        ids: &Ids,
        events: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Vec<(String, bool)> {
        if which.is_empty() {
            return Vec::new();
        }
        let (notify_tx, mut notify_rx) = tokio::sync::mpsc::unbounded_channel::<AgentEvent>();
        let run_one = |call: &ToolCall, plan: &Planned| {
            let ctx = ToolContext {
                cwd: self.config.cwd.clone(),
                session_id: self.config.session_id.clone(),
                approvals: self.config.approvals.clone(),
                interrupted: self.handle.interrupted.clone(),
                call_id: call.id.clone(),
                turn_id: ids.turn_id.clone(),
                notify: Some(notify_tx.clone()),
                clarifier: self.config.clarifier.clone(),
                prompter: self.config.prompter.clone(),
                budget: self.config.budget.clone(),
            };
            let plan = plan.clone();
            let plugins = self.config.plugins.clone();
            async move {
                match plan {
                    Err(e) => (e, true),
                    Ok(prepared) => {
                        if ctx.is_interrupted() {
                            return ("cancelled: skipped due to interrupt".to_owned(), true);
                        }
                        let span = herald_trace::span!("tool.call", tool = %prepared.tool.name());
                        tool_call::execute(prepared, ctx, plugins)
                            .instrument(span)
                            .await
                    }
                }
            }
        };
        let batch = async {
            if parallel && which.len() > 1 {
                futures_util::future::join_all(
                    which.iter().map(|&i| run_one(&calls[i], &planned[i])),
                )
                .await
            } else {
                let mut v = Vec::new();
                for &i in which {
                    v.push(run_one(&calls[i], &planned[i]).await);
                }
                v
            }
        };
        // Approval and clarify requests raised by tools reach the front door while the
        // batch runs.
        tokio::pin!(batch);
        let outputs: Vec<(String, bool)> = loop {
            tokio::select! {
                biased;
                Some(e) = notify_rx.recv() => events(e),
                out = &mut batch => break out,
            }
        };
        while let Ok(e) = notify_rx.try_recv() {
            events(e);
        }
        outputs
    }
}

/// A call's output after the loop guard's look at it (a warning appended), counted.
fn finished_call(
    call: &ToolCall,
    plan: &Planned,
    mut out: String,
    is_error: bool,
    available: &[&str],
    guard: &mut crate::guardrails::LoopGuard,
) -> (String, bool) {
    let args_key = match plan {
        Ok(prepared) => prepared.args.to_string(),
        Err(_) => call.function.arguments.clone(),
    };
    if let Some(warning) = guard.after_call(&call.function.name, &args_key, &out, is_error) {
        out.push_str("\n\n");
        out.push_str(&warning);
    }
    // A name the model made up, or a client defined, is never a label.
    let label = match plan {
        Ok(p) if p.tool.client_side() => "client",
        _ if available.contains(&call.function.name.as_str()) => &call.function.name,
        _ => "unknown",
    };
    herald_metrics::get()
        .agent
        .tool_call(label, if is_error { "error" } else { "ok" });
    (out, is_error)
}

/// A turn's opening: the API messages, where the turn's own messages start, and the
/// user message as written.
struct Opened {
    messages: Vec<ChatMessage>,
    turn_start: usize,
    user: ChatMessage,
}

/// What the turn loop keeps between API calls.
#[derive(Default)]
struct LoopState {
    empty_strikes: u32,
    json_strikes: u32,
    unknown_strikes: u32,
    /// The last non-empty text the model wrote beside tool calls.
    last_text: String,
    guard: crate::guardrails::LoopGuard,
}

/// An assistant message that calls tools.
struct ToolStep {
    message: ChatMessage,
    /// `finish_reason` was `length`.
    truncated: bool,
    text: String,
}

/// Whether the turn loop goes on.
enum Flow {
    Continue,
    Stop,
}

/// A provider call that ran, or the text that had arrived when it was interrupted.
enum Called {
    Done(Result<ChatCompletion, LlmError>),
    Interrupted(String),
}

/// The ids of one API call within a turn.
#[derive(Debug, Clone)]
struct Ids {
    turn_id: String,
    api_request_id: String,
    api_call_count: u32,
    task_id: String,
    /// Where the user message is in the call's messages, and the user's own words.
    turn_start: usize,
    user: ChatMessage,
}

/// One attempt of a provider call, as the plugin path needs it.
struct Call<'a> {
    messages: &'a [ChatMessage],
    tools: &'a [herald_protocol::ToolSpec],
    ids: &'a Ids,
    /// When the call began (before its first attempt), in epoch seconds.
    started_at: f64,
    attempt: u32,
}

/// A turn's task and turn ids, for the turn's hooks.
struct TurnIds<'a> {
    task_id: &'a str,
    turn_id: &'a str,
}

impl Agent {
    /// One provider call through the middleware pipeline (middleware.md A10.1), with
    /// retries: every attempt re-runs `llm_request`, `pre_api_request` and the whole
    /// `llm_execution` chain, keeping the same `api_request_id`.
    async fn call_llm(
        &self,
        messages: &[ChatMessage],
        tools: &[herald_protocol::ToolSpec],
        ids: &Ids,
        events: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<ChatCompletion, LlmError> {
        let plugins = &self.config.plugins;
        let endpoint = &*self.endpoint_for(tools, ids.api_call_count);
        let mut fields = Map::new();
        fields.insert("task_id".into(), json!(ids.task_id));
        fields.insert("turn_id".into(), json!(ids.turn_id));
        fields.insert("api_request_id".into(), json!(ids.api_request_id));
        fields.insert("session_id".into(), json!(self.config.session_id));
        fields.insert("platform".into(), json!(self.config.platform));
        fields.insert("model".into(), json!(endpoint.model));
        fields.insert("provider".into(), json!(self.config.provider));
        fields.insert("base_url".into(), json!(endpoint.shown_base_url()));
        fields.insert("api_mode".into(), json!("chat_completions"));
        fields.insert("api_call_count".into(), json!(ids.api_call_count));
        let max_attempts = self.config.retry.max_attempts.max(1);
        let started_at = hook_fields::epoch_now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let attempt_started = std::time::Instant::now();
            let span = herald_trace::span!(
                "llm.call",
                provider = %self.config.provider,
                model = %endpoint.model,
                attempt,
                error = tracing::field::Empty,
            );
            let observed = plugins.api_requests_seen();
            // The request as sent, for api_request_error (null when nothing saw it).
            let (outcome, request) = if plugins.llm_request.is_empty()
                && plugins.llm_execution.is_empty()
                && !observed
            {
                // Nothing sees or changes the request: it is written straight from the
                // messages and tools, without a JSON tree in between.
                let mut on_delta = |d: DeltaEvent| forward_delta(d, events);
                let called = self
                    .client
                    .stream_once(endpoint, messages, tools, &mut on_delta)
                    .instrument(span.clone())
                    .await;
                (called, Value::Null)
            } else {
                let call = Call {
                    messages,
                    tools,
                    ids,
                    started_at,
                    attempt,
                };
                self.call_through_plugins(&call, &fields, events)
                    .instrument(span.clone())
                    .await
            };
            if let Err(e) = &outcome {
                span.record("error", e.class.as_str());
            }
            count_call(&self.config.provider, attempt_started.elapsed(), &outcome);
            match outcome {
                Ok(c) if !c.choices.is_empty() => {
                    if observed {
                        let mut payload = fields.clone();
                        hook_fields::timing(&mut payload, started_at);
                        hook_fields::response_fields(&mut payload, &c, messages.len());
                        let payload = Value::Object(payload);
                        plugins.notify(Notice::PostApiRequest, &payload).await;
                    }
                    return Ok(c);
                }
                other => {
                    let e = other.err().unwrap_or_else(|| {
                        LlmError::new(ErrorClass::InvalidResponse, None, "no choices")
                    });
                    let retryable = e.retryable() && attempt < max_attempts;
                    if plugins.has_observers() {
                        let mut payload = fields.clone();
                        hook_fields::timing(&mut payload, started_at);
                        hook_fields::error_fields(&mut payload, &e);
                        payload.insert("retry_count".into(), json!(attempt - 1));
                        payload.insert("max_retries".into(), json!(max_attempts));
                        payload.insert("retryable".into(), json!(e.retryable()));
                        payload.insert("request".into(), request);
                        let payload = Value::Object(payload);
                        plugins.notify(Notice::ApiRequestError, &payload).await;
                    }
                    if !retryable {
                        return Err(e);
                    }
                    let wait = self.config.retry.backoff(attempt);
                    tracing::warn!(attempt, wait_ms = wait.as_millis() as u64, error = %e, "provider call failed; retrying");
                    if !self.sleep_unless_interrupted(wait).await {
                        return Err(LlmError::new(ErrorClass::Blocked, None, "interrupted"));
                    }
                }
            }
        }
    }

    /// The endpoint of one provider call: the run's, with the request's tool policy's
    /// fields in its `extra_body` when there are any.
    fn endpoint_for(
        &self,
        tools: &[herald_protocol::ToolSpec],
        api_call: u32,
    ) -> std::borrow::Cow<'_, Endpoint> {
        let fields = self
            .config
            .tool_policy
            .fields(!tools.is_empty(), api_call == 1);
        if fields.is_empty() {
            return std::borrow::Cow::Borrowed(&self.config.endpoint);
        }
        let mut endpoint = self.config.endpoint.clone();
        for (k, v) in fields {
            endpoint.extra_body.insert(k.to_owned(), v);
        }
        std::borrow::Cow::Owned(endpoint)
    }

    /// One attempt through `llm_request`, `pre_api_request` and `llm_execution`; the
    /// outcome and the request as sent (`{method, body}`).
    async fn call_through_plugins(
        &self,
        call: &Call<'_>,
        fields: &Map<String, Value>,
        events: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> (Result<ChatCompletion, LlmError>, Value) {
        let plugins = &self.config.plugins;
        let endpoint = &*self.endpoint_for(call.tools, call.ids.api_call_count);
        let body = LlmClient::request_body(endpoint, call.messages, call.tools);
        let pass = run_request_chain(
            Kind::LlmRequest,
            &plugins.llm_request,
            body,
            fields,
            &plugins.reporter,
        )
        .await;
        let trace = Value::Array(pass.trace.clone());
        // Payloads are built only for observers that exist (the request is large).
        let request = json!({"method": "POST", "body": pass.effective});
        if plugins.api_requests_seen() {
            let payload = self.pre_api_fields(call, fields, &request, &trace);
            plugins.notify(Notice::PreApiRequest, &payload).await;
        }
        let outcome = if plugins.llm_execution.is_empty() {
            let mut on_delta = |d: DeltaEvent| forward_delta(d, events);
            self.client
                .stream_body(endpoint, &pass.effective, &mut on_delta)
                .await
        } else {
            self.execute_through_middleware(pass.effective.clone(), fields, &trace, events)
                .await
        };
        (outcome, request)
    }

    /// `pre_api_request`'s arguments, as Hermes gives them.
    fn pre_api_fields(
        &self,
        call: &Call<'_>,
        fields: &Map<String, Value>,
        request: &Value,
        trace: &Value,
    ) -> Value {
        let messages = call.messages;
        let approx = hook_fields::approx_tokens(messages);
        let mut payload = fields.clone();
        let (user_at, user) = (call.ids.turn_start, &call.ids.user);
        let conversation = hook_fields::conversation(messages, user_at, user);
        let more = [
            ("user_message", json!(user.content)),
            ("conversation_history", conversation),
            ("request_messages", request["body"]["messages"].clone()),
            ("message_count", json!(messages.len())),
            ("tool_count", json!(self.config.tools.len())),
            ("approx_input_tokens", json!(approx)),
            ("request_char_count", json!(approx.saturating_mul(4))),
            ("max_tokens", json!(self.config.endpoint.max_tokens)),
            ("started_at", json!(call.started_at)),
            ("middleware_trace", trace.clone()),
            ("request", request.clone()),
            ("attempt", json!(call.attempt)),
        ];
        payload.extend(more.into_iter().map(|(k, v)| (k.to_owned(), v)));
        Value::Object(payload)
    }

    /// The provider call through the `llm_execution` chain (middleware.md A10.1): deltas
    /// stream to `events` while the chain runs; a block or failure becomes an `LlmError`.
    async fn execute_through_middleware(
        &self,
        request: Value,
        fields: &Map<String, Value>,
        trace: &Value,
        events: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<ChatCompletion, LlmError> {
        let plugins = &self.config.plugins;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<DeltaEvent>();
        let client = self.client.clone();
        let ep = self.config.endpoint.clone();
        let terminal: Terminal<LlmError> = Arc::new(move |payload: Value| {
            let (client, ep, tx) = (client.clone(), ep.clone(), tx.clone());
            Box::pin(async move {
                let mut on_delta = |d: DeltaEvent| {
                    let _ = tx.send(d);
                };
                let done = client.stream_body(&ep, &payload, &mut on_delta).await?;
                serde_json::to_value(done)
                    .map_err(|e| LlmError::new(ErrorClass::InvalidResponse, None, e.to_string()))
            })
        });
        let mut exec_fields = fields.clone();
        exec_fields.insert("middleware_trace".into(), trace.clone());
        let chain = run_execution_chain(
            Kind::LlmExecution,
            Arc::new(plugins.llm_execution.clone()),
            0,
            request,
            Arc::new(exec_fields),
            terminal,
            plugins.reporter.clone(),
        );
        tokio::pin!(chain);
        let result = loop {
            tokio::select! {
                biased;
                Some(d) = rx.recv() => forward_delta(d, events),
                r = &mut chain => break r,
            }
        };
        while let Ok(d) = rx.try_recv() {
            forward_delta(d, events);
        }
        let value = result.map_err(llm_error_of)?;
        serde_json::from_value::<ChatCompletion>(value).map_err(|e| {
            LlmError::new(
                ErrorClass::InvalidResponse,
                None,
                format!("middleware returned a response of the wrong shape: {e}"),
            )
        })
    }

    /// Sleeps for `wait` in short slices; `false` when the turn was interrupted meanwhile.
    async fn sleep_unless_interrupted(&self, wait: std::time::Duration) -> bool {
        let until = tokio::time::Instant::now() + wait;
        while tokio::time::Instant::now() < until {
            if self.handle.is_interrupted() {
                return false;
            }
            let slice = tokio::time::Instant::now() + std::time::Duration::from_millis(100);
            tokio::time::sleep_until(until.min(slice)).await;
        }
        !self.handle.is_interrupted()
    }
}

/// What a failed `llm_execution` chain means for the call.
/// One provider call in the metrics: how long it took, its error class or its tokens.
fn count_call(
    provider: &str,
    took: std::time::Duration,
    outcome: &Result<ChatCompletion, LlmError>,
) {
    let agent = &herald_metrics::get().agent;
    match outcome {
        Ok(c) => {
            agent.provider_call(provider, took, None);
            agent.tokens(provider, c.usage.prompt_tokens, c.usage.completion_tokens);
        }
        Err(e) => agent.provider_call(provider, took, Some(e.class.as_str())),
    }
}

fn llm_error_of(e: MiddlewareError<LlmError>) -> LlmError {
    match e {
        MiddlewareError::Downstream(e) => e,
        MiddlewareError::Block { reason, checked_by } => LlmError::new(
            ErrorClass::Blocked,
            None,
            format!(
                "blocked by {}: {reason}",
                checked_by.unwrap_or_else(|| "middleware".into())
            ),
        ),
        MiddlewareError::Failed(f) => LlmError::new(ErrorClass::Format, None, f),
        MiddlewareError::NextAlreadyUsed => LlmError::new(
            ErrorClass::Format,
            None,
            "next_call may be used only once per frame",
        ),
    }
}

fn forward_delta(d: DeltaEvent, events: &mut (dyn FnMut(AgentEvent) + Send)) {
    match d {
        DeltaEvent::Text(t) => events(AgentEvent::Progress(TurnProgress::MessageDelta(t))),
        DeltaEvent::Reasoning(r) => events(AgentEvent::Progress(TurnProgress::ReasoningDelta(r))),
        DeltaEvent::ToolCallStarted { .. } => {}
    }
}

/// Removes lone surrogates and NULs (invalid in JSON strings for many servers).
fn strip_invalid(text: &str) -> String {
    text.chars().filter(|c| *c != '\u{0}').collect()
}
