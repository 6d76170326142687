//! The one rule for showing a tool call in a line (every door's tool progress: RPC's
//! `tool.start` context, `herald chat`, ACP, the API's `hermes.tool.progress` label, a
//! subagent's steps): the call's telling argument, as Hermes's `build_tool_preview`
//! picks it, on one line and cut to a length.

use serde_json::Value;

/// The argument that tells what a call of `tool` does (Hermes's primary arguments).
fn primary(tool: &str) -> Option<&'static str> {
    Some(match tool {
        "terminal" => "command",
        "execute_code" => "code",
        "web_search" => "query",
        "web_extract" => "urls",
        "read_file" | "write_file" | "patch" => "path",
        "search_files" => "pattern",
        "browser_navigate" => "url",
        "browser_click" => "ref",
        "browser_type" | "text_to_speech" => "text",
        "image_generate" => "prompt",
        "vision_analyze" | "clarify" => "question",
        "skill_view" | "skill_manage" => "name",
        "skills_list" => "category",
        "cronjob" => "action",
        "delegate_task" => "goal",
        _ => return None,
    })
}

/// Tried in order when the tool has no primary argument.
const FALLBACK: [&str; 8] = [
    "query", "text", "command", "path", "name", "prompt", "code", "goal",
];

/// A one-line view of a call of `tool` with `args`, at most `max` characters (`...`
/// ends a cut one); `None` when no argument tells anything.
pub fn tool_preview(tool: &str, args: &Value, max: usize) -> Option<String> {
    let map = args.as_object().filter(|m| !m.is_empty())?;
    let text = match tool {
        "delegate_task" => delegation(map)?,
        "read_file" => {
            let path = text_of(map.get("path")?);
            path.rsplit('/').next().unwrap_or(&path).to_owned()
        }
        "process" => process(map)?,
        _ => {
            let key = primary(tool)
                .filter(|k| map.contains_key(*k))
                .or_else(|| FALLBACK.into_iter().find(|k| map.contains_key(*k)))?;
            text_of(map.get(key)?)
        }
    };
    let text = one_line(&text, max);
    (!text.is_empty()).then_some(text)
}

/// `text` with its whitespace (newlines too) collapsed, cut to `max` characters with
/// `...` (`0`: not cut).
pub fn one_line(text: &str, max: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if max == 0 || line.chars().count() <= max {
        return line;
    }
    let kept: String = line.chars().take(max.saturating_sub(3)).collect();
    format!("{kept}...")
}

/// A value as shown: a string as it is, a list of strings joined, anything else as JSON.
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) if items.iter().all(Value::is_string) => items
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}

/// `delegate_task`: its goal, or for a batch the count and each goal's start.
fn delegation(map: &serde_json::Map<String, Value>) -> Option<String> {
    match map.get("tasks").and_then(Value::as_array) {
        Some(tasks) if !tasks.is_empty() => {
            let goals: Vec<String> = tasks
                .iter()
                .filter_map(|t| t.get("goal").and_then(Value::as_str))
                .map(|g| one_line(g, 40))
                .collect();
            Some(match goals.is_empty() {
                true => format!("{} parallel tasks", tasks.len()),
                false => format!("{} tasks: {}", tasks.len(), goals.join(" | ")),
            })
        }
        _ => map.get("goal").map(text_of),
    }
}

/// `process`: its action, the job and what it sends.
fn process(map: &serde_json::Map<String, Value>) -> Option<String> {
    let field = |k: &str| map.get(k).map(text_of).unwrap_or_default();
    let action = field("action");
    let mut parts = vec![action.clone()];
    parts.push(field("session_id").chars().take(16).collect());
    let data = field("data");
    if !data.is_empty() {
        parts.push(format!(
            "\"{}\"",
            one_line(&data.chars().take(20).collect::<String>(), 0)
        ));
    }
    if action == "wait"
        && let Some(t) = map.get("timeout").filter(|t| !t.is_null())
    {
        parts.push(format!("{}s", text_of(t)));
    }
    let shown: Vec<String> = parts.into_iter().filter(|p| !p.is_empty()).collect();
    (!shown.is_empty()).then(|| shown.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_telling_argument_on_one_line() {
        let p = |tool, args: Value| tool_preview(tool, &args, 30);
        assert_eq!(
            p(
                "terminal",
                json!({"command": "ls -la\n  /tmp", "timeout": 5})
            ),
            Some("ls -la /tmp".into())
        );
        assert_eq!(
            p("read_file", json!({"path": "/srv/app/main.rs"})),
            Some("main.rs".into())
        );
        assert_eq!(
            p(
                "web_extract",
                json!({"urls": ["https://a.example", "https://b.example"]})
            ),
            Some("https://a.example, https://...".into())
        );
        assert_eq!(
            p("my_plugin_tool", json!({"name": "x", "other": 1})),
            Some("x".into())
        );
        assert_eq!(p("my_plugin_tool", json!({"other": 1})), None);
        assert_eq!(p("terminal", json!({})), None);
        let batch = json!({"tasks": [{"goal": "read it"}, {"goal": "test it"}]});
        assert_eq!(
            tool_preview("delegate_task", &batch, 0),
            Some("2 tasks: read it | test it".into())
        );
        assert_eq!(
            p(
                "process",
                json!({"action": "wait", "session_id": "job-1", "timeout": 30})
            ),
            Some("wait job-1 30s".into())
        );
        assert_eq!(one_line("ab", 0), "ab");
    }
}
