//! How tool calls render in an IDE (acp.md §4): kinds, titles, locations, content.

use agent_client_protocol::v1::schema::{
    ContentBlock, TextContent, ToolCallContent, ToolCallLocation, ToolKind,
};
use serde_json::Value;

/// The kind of a tool, by name.
pub fn kind(tool: &str) -> ToolKind {
    match tool {
        "read_file" | "skill_view" | "skills_list" | "browser_snapshot" | "browser_vision"
        | "browser_get_images" | "vision_analyze" => ToolKind::Read,
        "write_file" | "patch" | "skill_manage" => ToolKind::Edit,
        "terminal" | "process" | "execute_code" | "delegate_task" | "image_generate"
        | "text_to_speech" | "browser_click" | "browser_type" | "browser_scroll"
        | "browser_press" | "browser_back" => ToolKind::Execute,
        "search_files" => ToolKind::Search,
        "web_search" | "web_extract" | "browser_navigate" => ToolKind::Fetch,
        "_thinking" => ToolKind::Think,
        _ => ToolKind::Other,
    }
}

fn arg<'a>(args: &'a Value, key: &str) -> &'a str {
    args.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// A one-line human summary of a call.
pub fn title(tool: &str, args: &Value) -> String {
    let line = |s: &str| {
        s.lines()
            .next()
            .unwrap_or_default()
            .chars()
            .take(120)
            .collect::<String>()
    };
    match tool {
        "terminal" => format!("$ {}", line(arg(args, "command"))),
        "read_file" => format!("Read {}", arg(args, "path")),
        "write_file" => format!("Write {}", arg(args, "path")),
        "patch" => format!("Edit {}", arg(args, "path")),
        "search_files" => format!("Search {}", line(arg(args, "pattern"))),
        "web_search" => format!("Search the web: {}", line(arg(args, "query"))),
        "web_extract" => "Read web pages".to_owned(),
        "delegate_task" => match args.get("tasks").and_then(Value::as_array) {
            Some(tasks) if !tasks.is_empty() => format!("delegate batch ({} tasks)", tasks.len()),
            _ => format!("delegate: {}", line(arg(args, "goal"))),
        },
        other => other.to_owned(),
    }
}

/// Where a call looks: its `path`, at `offset` / `line` when given.
pub fn locations(args: &Value) -> Vec<ToolCallLocation> {
    let path = arg(args, "path");
    if path.is_empty() {
        return Vec::new();
    }
    let line = ["offset", "line"]
        .iter()
        .find_map(|k| args.get(*k).and_then(Value::as_u64))
        .and_then(|n| u32::try_from(n).ok());
    vec![ToolCallLocation::new(path).line(line)]
}

pub fn text(t: impl Into<String>) -> ToolCallContent {
    ToolCallContent::from(ContentBlock::Text(TextContent::new(t)))
}

/// What a starting call other than an edit shows: the command, or its arguments.
pub fn start_content(tool: &str, args: &Value) -> Vec<ToolCallContent> {
    match tool {
        "terminal" => vec![text(format!("$ {}", arg(args, "command")))],
        "read_file" => Vec::new(),
        _ => vec![text(args.to_string())],
    }
}

/// Whether a result reads as a failure: an error, or a non-zero exit.
pub fn failed(result: &str, is_error: bool) -> bool {
    let parsed: Option<Value> = serde_json::from_str(result).ok();
    is_error
        || parsed.as_ref().is_some_and(|v| {
            v.get("error").is_some_and(|e| !e.is_null())
                || v.get("exit_code")
                    .and_then(Value::as_i64)
                    .is_some_and(|c| c != 0)
        })
}

/// What a finished call shows: its output as text (cut to a readable size).
pub fn end_content(result: &str) -> Vec<ToolCallContent> {
    let shown: String = result.chars().take(8000).collect();
    vec![text(shown)]
}
