//! MCP tools as herald agent tools: each call goes through the server's connection and
//! comes back in Hermes's result shapes, wrapped as untrusted output. A failed call is
//! an `{"error": …}` result the model reads; the turn goes on.

use crate::naming::tool_name;
use crate::server::{ListedTool, Server};
use herald_agent::tool::{Tool, ToolContext, ToolFuture};
use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams};
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// One of a server's own tools.
pub struct McpTool {
    pub(crate) server: Arc<Server>,
    pub(crate) listed: ListedTool,
    pub(crate) name: String,
    pub(crate) description: String,
}

impl McpTool {
    pub(crate) fn new(server: Arc<Server>, listed: ListedTool) -> McpTool {
        let name = tool_name(server.name(), &listed.name);
        let description = match listed.description.trim().is_empty() {
            true => format!("MCP tool {} from {}", listed.name, server.name()),
            false => listed.description.clone(),
        };
        McpTool {
            server,
            listed,
            name,
            description,
        }
    }
}

fn error(message: impl Into<String>) -> String {
    json!({ "error": message.into() }).to_string()
}

fn arguments(args: Value) -> Map<String, Value> {
    match args {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn parameters(&self) -> Value {
        self.listed.schema.clone()
    }
    fn untrusted_output(&self) -> bool {
        true
    }
    fn parallel_safe(&self) -> bool {
        self.server.settings.parallel
    }
    fn toolset(&self) -> Option<String> {
        Some(crate::naming::toolset_name(self.server.name()))
    }
    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            match self
                .server
                .call(&self.listed.name, arguments(args), &ctx.interrupted)
                .await
            {
                Ok(result) => crate::render::result_text(self.server.name(), &result),
                Err(why) => error(why),
            }
        })
    }
}

/// The resource and prompt tools Hermes offers per server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Utility {
    ListResources,
    ReadResource,
    ListPrompts,
    GetPrompt,
}

impl Utility {
    fn raw(self) -> &'static str {
        match self {
            Utility::ListResources => "list_resources",
            Utility::ReadResource => "read_resource",
            Utility::ListPrompts => "list_prompts",
            Utility::GetPrompt => "get_prompt",
        }
    }
}

/// A utility tool bound to its server.
pub struct UtilityTool {
    pub(crate) server: Arc<Server>,
    pub(crate) kind: Utility,
    name: String,
    description: String,
}

impl UtilityTool {
    pub(crate) fn new(server: Arc<Server>, kind: Utility) -> UtilityTool {
        let s = server.name().to_owned();
        let description = match kind {
            Utility::ListResources => format!("List available resources from MCP server '{s}'"),
            Utility::ReadResource => format!("Read a resource by URI from MCP server '{s}'"),
            Utility::ListPrompts => format!("List available prompts from MCP server '{s}'"),
            Utility::GetPrompt => format!("Get a prompt by name from MCP server '{s}'"),
        };
        UtilityTool {
            name: tool_name(&s, kind.raw()),
            server,
            kind,
            description,
        }
    }

    async fn answer(&self, args: Value) -> Result<Value, String> {
        let _busy = self.server.busy();
        let conn = self.server.connection().await?;
        let svc = &conn.service;
        let limit = self.server.settings.timeout;
        let fail = |e: rmcp::ServiceError| {
            herald_llm::redact::shapes_redacted(&format!("MCP call failed: {e}"))
        };
        let timed = |what: &str| format!("MCP {what} timed out after {} s", limit.as_secs_f64());
        match self.kind {
            Utility::ListResources => {
                let r = tokio::time::timeout(limit, svc.list_all_resources())
                    .await
                    .map_err(|_| timed("resources/list"))?
                    .map_err(fail)?;
                Ok(json!({ "resources": serde_json::to_value(r).unwrap_or_default() }))
            }
            Utility::ReadResource => {
                let uri = args["uri"]
                    .as_str()
                    .ok_or("Missing required parameter 'uri'")?;
                let r = tokio::time::timeout(
                    limit,
                    svc.read_resource(ReadResourceRequestParams::new(uri)),
                )
                .await
                .map_err(|_| timed("resources/read"))?
                .map_err(fail)?;
                Ok(json!({ "result": resource_text(&serde_json::to_value(r).unwrap_or_default()) }))
            }
            Utility::ListPrompts => {
                let r = tokio::time::timeout(limit, svc.list_all_prompts())
                    .await
                    .map_err(|_| timed("prompts/list"))?
                    .map_err(fail)?;
                Ok(json!({ "prompts": serde_json::to_value(r).unwrap_or_default() }))
            }
            Utility::GetPrompt => {
                let name = args["name"]
                    .as_str()
                    .ok_or("Missing required parameter 'name'")?;
                let mut params = GetPromptRequestParams::new(name);
                if let Value::Object(a) = &args["arguments"] {
                    params.arguments = Some(a.clone());
                }
                let r = tokio::time::timeout(limit, svc.get_prompt(params))
                    .await
                    .map_err(|_| timed("prompts/get"))?
                    .map_err(fail)?;
                Ok(serde_json::to_value(r).unwrap_or_default())
            }
        }
    }
}

/// A `resources/read` answer's text parts, joined; binary parts by size.
fn resource_text(read: &Value) -> String {
    let Some(contents) = read["contents"].as_array() else {
        return String::new();
    };
    contents
        .iter()
        .map(|c| match c["text"].as_str() {
            Some(t) => t.to_owned(),
            None => format!(
                "[binary data, {} bytes]",
                c["blob"].as_str().map_or(0, |b| b.len() / 4 * 3)
            ),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl Tool for UtilityTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn parameters(&self) -> Value {
        match self.kind {
            Utility::ListResources | Utility::ListPrompts => {
                json!({"type": "object", "properties": {}})
            }
            Utility::ReadResource => json!({
                "type": "object",
                "properties": {"uri": {"type": "string", "description": "URI of the resource to read"}},
                "required": ["uri"]
            }),
            Utility::GetPrompt => json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "Name of the prompt to get"},
                    "arguments": {"type": "object", "properties": {}, "additionalProperties": true}
                },
                "required": ["name"]
            }),
        }
    }
    fn untrusted_output(&self) -> bool {
        true
    }
    fn toolset(&self) -> Option<String> {
        Some(crate::naming::toolset_name(self.server.name()))
    }
    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let answer = tokio::select! {
                a = self.answer(args) => a,
                _ = crate::server::until(&ctx.interrupted) => {
                    Err("MCP call interrupted: the user stopped the turn".into())
                }
            };
            match answer {
                Ok(v) => v.to_string(),
                Err(why) => error(why),
            }
        })
    }
}
