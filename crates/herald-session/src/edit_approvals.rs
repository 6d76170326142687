//! File edits a front door approves (ACP's edit gate): a session opened with an
//! [`EditRule`] asks before each `write_file` or `patch` the rule does not let through.
//! The question goes through the same pending table as command approvals (a run event
//! with a request id, answered by [`crate::RunHandle::approve`], the run waiting for
//! approval meanwhile) and waits `approvals.timeout`. A denied or unanswered edit never
//! reaches the tool. `pre/post_approval_request` hooks stay for commands alone.

use crate::answers::Pending;
use crate::runs::RunEventKind;
use herald_agent::{Decision, Observer, ToolDirective};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// Which edits a session lets through without asking (a front door's mode).
pub trait EditRule: Send + Sync {
    /// Whether the edit call `tool` with `args` runs unasked.
    fn approves(&self, tool: &str, args: &Value) -> bool;
}

/// Whether `tool` edits files (and so passes the edit gate).
pub fn is_edit(tool: &str) -> bool {
    matches!(tool, "write_file" | "patch")
}

/// The observer that puts edits to the front door.
pub(crate) struct EditApprover {
    pub pending: Arc<Pending>,
    pub rule: Arc<dyn EditRule>,
    pub within: Duration,
}

#[async_trait::async_trait]
impl Observer for EditApprover {
    fn name(&self) -> &str {
        "edit-approval"
    }

    /// It gates edits only.
    fn sees_api_requests(&self) -> bool {
        false
    }

    async fn pre_tool_call(&self, payload: &Value) -> Option<ToolDirective> {
        let tool = payload.get("tool_name").and_then(Value::as_str)?;
        let args = payload.get("args").cloned().unwrap_or(Value::Null);
        if !is_edit(tool) || self.rule.approves(tool, &args) {
            return None;
        }
        let path = args.get("path").and_then(Value::as_str).unwrap_or_default();
        let denied = format!("The user denied the edit of {path}; the file was not changed.");
        let call_id = payload.get("tool_call_id").and_then(Value::as_str);
        let ask = |request_id| RunEventKind::EditApprovalRequested {
            request_id,
            call_id: call_id.unwrap_or_default().to_owned(),
            tool: tool.to_owned(),
            arguments: args.clone(),
        };
        let pending = &self.pending;
        let answer = pending.wait(&pending.approvals, "", ask);
        let blocked = match tokio::time::timeout(self.within, answer).await {
            Ok(Some(Decision::Once | Decision::Session | Decision::Always)) => return None,
            Ok(_) => denied,
            Err(_) => format!("{denied} (no answer within {}s)", self.within.as_secs()),
        };
        Some(ToolDirective::Block(blocked))
    }
}
