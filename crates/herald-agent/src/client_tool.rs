//! Tools a client defines and runs itself (an agent framework's own functions on the
//! OpenAI-compatible API): offered to the model beside herald's, their calls handed to
//! the front door ([`crate::TurnProgress::ClientCalls`]) and their results waited for
//! at a [`ClientDesk`], for at most its timeout. The turn loop runs herald's own calls
//! of an answer first, then waits for the client's together.

use crate::tool::{Tool, ToolContext, ToolFuture};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;

/// A call's place at the desk: its waiter, or a result that came before it waited.
enum Slot {
    Waiting(oneshot::Sender<String>),
    Answered(String),
}

/// Where one run's client-tool calls wait for the results the client sends back.
pub struct ClientDesk {
    slots: Mutex<HashMap<String, Slot>>,
    timeout: Duration,
}

impl ClientDesk {
    /// A desk whose calls wait at most `timeout` (then the run ends as cancelled).
    pub fn new(timeout: Duration) -> Arc<ClientDesk> {
        Arc::new(ClientDesk {
            slots: Mutex::new(HashMap::new()),
            timeout,
        })
    }

    /// Hands the result of `call_id` to its waiting call (or keeps it for the call
    /// about to wait).
    pub fn answer(&self, call_id: &str, output: String) {
        let Ok(mut slots) = self.slots.lock() else {
            return;
        };
        match slots.remove(call_id) {
            Some(Slot::Waiting(tx)) => {
                let _ = tx.send(output);
            }
            _ => {
                slots.insert(call_id.to_owned(), Slot::Answered(output));
            }
        }
    }

    /// The result of `call_id`, once the client sends it; a cancellation text when the
    /// wait runs out (the turn is interrupted then: the run ends as cancelled) or the
    /// turn is stopped.
    async fn wait(&self, ctx: &ToolContext) -> String {
        let rx = {
            let Ok(mut slots) = self.slots.lock() else {
                return "cancelled: the client's result could not be waited for".into();
            };
            if let Some(Slot::Answered(out)) = slots.remove(&ctx.call_id) {
                return out;
            }
            let (tx, rx) = oneshot::channel();
            slots.insert(ctx.call_id.clone(), Slot::Waiting(tx));
            rx
        };
        let out = tokio::select! {
            out = rx => out.ok(),
            () = tokio::time::sleep(self.timeout) => {
                tracing::info!(call = %ctx.call_id, timeout_s = self.timeout.as_secs(), "no client tool result in time: the run is cancelled");
                ctx.interrupted.store(true, Ordering::SeqCst);
                None
            }
            () = ctx.until_interrupted() => None,
        };
        if let Ok(mut slots) = self.slots.lock() {
            slots.remove(&ctx.call_id);
        }
        out.unwrap_or_else(|| "cancelled: the client sent no result".into())
    }
}

/// A function the client defined: its OpenAI spec, and the desk its calls wait at.
pub struct ClientTool {
    name: String,
    description: String,
    parameters: Value,
    desk: Arc<ClientDesk>,
}

impl ClientTool {
    pub fn new(
        name: String,
        description: String,
        parameters: Value,
        desk: Arc<ClientDesk>,
    ) -> Self {
        ClientTool {
            name,
            description,
            parameters,
            desk,
        }
    }
}

impl Tool for ClientTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn parameters(&self) -> Value {
        self.parameters.clone()
    }
    fn client_side(&self) -> bool {
        true
    }
    fn toolset(&self) -> Option<String> {
        Some("client".into())
    }
    fn run<'a>(&'a self, _args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(self.desk.wait(ctx))
    }
}

/// How a request asks the model to use tools (OpenAI's `tool_choice` and
/// `parallel_tool_calls`), as chat-completion request fields.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolPolicy {
    /// `"none"`, `"auto"`, `"required"` or `{"type": "function", "function": {"name"}}`.
    pub choice: Option<Value>,
    pub parallel: Option<bool>,
}

impl ToolPolicy {
    /// The fields of one provider call: `parallel_tool_calls` on every call that offers
    /// tools; `tool_choice` `none` on every call, and any other choice on the run's
    /// first call only (as the OpenAI Agents SDK resets it after a tool call), so a
    /// required tool cannot loop the run until its iteration cap.
    pub fn fields(&self, offers_tools: bool, first_call: bool) -> Vec<(&'static str, Value)> {
        if !offers_tools {
            return Vec::new();
        }
        let mut out = Vec::new();
        if let Some(p) = self.parallel {
            out.push(("parallel_tool_calls", Value::Bool(p)));
        }
        match &self.choice {
            Some(c) if c == "none" => out.push(("tool_choice", c.clone())),
            Some(c) if first_call && c != "auto" => out.push(("tool_choice", c.clone())),
            _ => {}
        }
        out
    }
}

/// One call the client is asked to run: the provider's id, the tool and its
/// arguments as herald's tool pipeline passed them on.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientCall {
    pub call_id: String,
    pub name: String,
    pub arguments: Value,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    fn ctx(call_id: &str, interrupted: Arc<AtomicBool>) -> ToolContext {
        ToolContext {
            cwd: std::env::temp_dir(),
            session_id: String::new(),
            approvals: Arc::new(crate::Approvals::new(false, Vec::new(), None)),
            interrupted,
            call_id: call_id.into(),
            turn_id: String::new(),
            notify: None,
            clarifier: None,
            prompter: None,
            budget: Arc::new(crate::TreeBudget::new(10, 10)),
        }
    }

    #[tokio::test]
    async fn a_result_reaches_its_call_whether_it_comes_before_or_after_the_wait() {
        let desk = ClientDesk::new(Duration::from_secs(5));
        let stop = Arc::new(AtomicBool::new(false));
        desk.answer("early", "e".into());
        assert_eq!(desk.wait(&ctx("early", stop.clone())).await, "e");
        let waiting = {
            let desk = desk.clone();
            let stop = stop.clone();
            tokio::spawn(async move { desk.wait(&ctx("late", stop)).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        desk.answer("late", "l".into());
        assert_eq!(waiting.await.unwrap(), "l");
        assert!(!stop.load(Ordering::SeqCst));
    }

    #[test]
    fn a_forced_choice_holds_for_the_first_call_and_none_for_all() {
        let forced = serde_json::json!({"type": "function", "function": {"name": "f"}});
        let p = ToolPolicy {
            choice: Some(forced.clone()),
            parallel: Some(false),
        };
        assert_eq!(
            p.fields(true, true),
            vec![
                ("parallel_tool_calls", Value::Bool(false)),
                ("tool_choice", forced)
            ]
        );
        assert_eq!(p.fields(true, false).len(), 1);
        assert!(
            p.fields(false, true).is_empty(),
            "no tools: nothing to choose"
        );
        let none = ToolPolicy {
            choice: Some("none".into()),
            parallel: None,
        };
        assert_eq!(
            none.fields(true, false),
            vec![("tool_choice", Value::from("none"))]
        );
    }

    #[tokio::test]
    async fn a_wait_that_runs_out_interrupts_the_turn() {
        let desk = ClientDesk::new(Duration::from_millis(50));
        let stop = Arc::new(AtomicBool::new(false));
        let out = desk.wait(&ctx("c", stop.clone())).await;
        assert!(out.starts_with("cancelled"), "{out}");
        assert!(stop.load(Ordering::SeqCst), "the run ends as cancelled");
        assert!(desk.slots.lock().unwrap().is_empty());
    }
}
