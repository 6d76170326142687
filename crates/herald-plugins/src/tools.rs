//! Tools a Python plugin registered with `ctx.register_tool` (middleware.md B2.4):
//! offered while the host runs and their check function says yes, run through
//! `tool.invoke`; a handler that raises gives the model an error result.

use crate::host::{CallError, Link};
use herald_agent::tool::{Tool, ToolContext, ToolFuture};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The longest tool name a provider takes (OpenAI's limit).
pub const MAX_NAME: usize = 64;

/// Why a plugin tool's name is refused, if it is: providers take only
/// `^[A-Za-z0-9_-]{1,64}$` (one bad name fails every request), and `mcp__` names are
/// the MCP servers' tools.
pub fn name_refused(name: &str) -> Option<&'static str> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if name.is_empty() || name.len() > MAX_NAME || !name.chars().all(allowed) {
        return Some("a tool name must match ^[A-Za-z0-9_-]{1,64}$");
    }
    if name.starts_with("mcp__") {
        return Some("names starting with mcp__ are the MCP servers' tools");
    }
    None
}

/// One registered tool.
pub struct PluginTool {
    pub(crate) link: Arc<Link>,
    pub(crate) callback: String,
    pub(crate) check: Option<String>,
    pub name: String,
    pub toolset: String,
    pub description: String,
    pub parameters: Value,
    pub requires_env: Vec<String>,
    /// It may replace a built-in tool of its name (the operator allowed it).
    pub replaces: bool,
    /// What its check function said last (true when it has none).
    passed: AtomicBool,
}

impl PluginTool {
    /// The tool of a `tool` registration, if it is well formed.
    pub(crate) fn from_registration(link: &Arc<Link>, r: &Value) -> Option<PluginTool> {
        let name = r["name"].as_str().filter(|n| !n.is_empty())?.to_owned();
        let schema = &r["schema"];
        let description = r["description"]
            .as_str()
            .filter(|d| !d.is_empty())
            .or_else(|| schema["description"].as_str())
            .unwrap_or_default()
            .to_owned();
        let parameters = match &schema["parameters"] {
            Value::Object(p) => Value::Object(p.clone()),
            _ => json!({"type": "object", "properties": {}}),
        };
        Some(PluginTool {
            link: link.clone(),
            callback: r["callback_id"].as_str()?.to_owned(),
            check: r["check_callback_id"].as_str().map(str::to_owned),
            toolset: r["toolset"].as_str().unwrap_or("plugins").to_owned(),
            requires_env: r["requires_env"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
            replaces: r["override"].as_bool().unwrap_or(false),
            name,
            description,
            parameters,
            passed: AtomicBool::new(true),
        })
    }

    /// Runs its check function again (a failing check counts as no).
    pub async fn recheck(&self) {
        let Some(check) = &self.check else {
            return;
        };
        let params = json!({"callback_id": check});
        let ok = match self.link.call("tool.check", params, check, None).await {
            Ok(answer) => answer["value"].as_bool().unwrap_or(false),
            Err(_) => false,
        };
        self.passed.store(ok, Ordering::SeqCst);
    }
}

impl Tool for PluginTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn parameters(&self) -> Value {
        self.parameters.clone()
    }
    fn toolset(&self) -> Option<String> {
        Some(self.toolset.clone())
    }
    /// The host runs, its check passed, and the variables it needs are set.
    fn available(&self) -> bool {
        self.link.is_up()
            && self.passed.load(Ordering::SeqCst)
            && self
                .requires_env
                .iter()
                .all(|v| herald_config::process_env(v).is_some_and(|v| !v.is_empty()))
    }
    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let params = json!({
                "callback_id": self.callback, "name": self.name, "args": args,
                "context": {"task_id": ctx.session_id, "session_id": ctx.session_id,
                            "tool_call_id": ctx.call_id, "turn_id": ""},
            });
            match self
                .link
                .call("tool.invoke", params, &self.callback, None)
                .await
            {
                Ok(answer) => match answer.get("value") {
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                    None => String::new(),
                },
                Err(CallError::Raised { kind, message, .. }) => {
                    json!({"error": format!("{kind}: {message}")}).to_string()
                }
                Err(e) => json!({"error": format!("the plugin tool failed: {e}")}).to_string(),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::name_refused;

    #[test]
    fn only_names_providers_take_and_not_mcp_names_are_kept() {
        for good in ["count_words", "a-b_C9", &"n".repeat(64)] {
            assert_eq!(name_refused(good), None, "{good}");
        }
        for bad in ["", &"n".repeat(65), "a b/../c;rm", "<img>", "é", "a.b"] {
            assert!(name_refused(bad).is_some(), "{bad}");
        }
        assert!(name_refused("mcp__srv__echo").is_some());
        assert_eq!(name_refused("mcp_x"), None);
    }
}
