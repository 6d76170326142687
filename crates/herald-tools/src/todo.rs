//! `todo`, as Hermes 0.19.0 has it (`tools/todo_tool.py`): the session's task list.
//! Given `todos` it writes (the whole list, or with `merge` item by item by id), without
//! it it reads; every call answers the full list and a summary. Items are `{id, content,
//! status}`, list order is priority, a status outside Hermes's four is `pending`, a
//! content is cut at 4,000 characters, a list at 256 items. Each session has its own list,
//! kept in memory for the process's life (the most recent 1,024 sessions' lists).

use herald_agent::tool::{Tool, ToolContext, ToolFuture};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::Mutex;

const STATUSES: &[&str] = &["pending", "in_progress", "completed", "cancelled"];
const MAX_CONTENT: usize = 4_000;
const MAX_ITEMS: usize = 256;
const TRUNCATED: &str = "… [truncated]";
/// Sessions whose lists are kept.
const MAX_SESSIONS: usize = 1_024;

/// One item.
#[derive(Debug, Clone, PartialEq)]
struct Item {
    id: String,
    content: String,
    status: String,
}

impl Item {
    fn json(&self) -> Value {
        json!({"id": self.id, "content": self.content, "status": self.status})
    }
}

/// The tool, with every session's list.
#[derive(Default)]
pub struct Todo {
    lists: Mutex<VecDeque<(String, Vec<Item>)>>,
}

fn text(v: &Value, key: &str) -> String {
    match v.get(key) {
        Some(Value::String(s)) => s.trim().to_owned(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn capped(content: &str) -> String {
    if content.chars().count() <= MAX_CONTENT {
        return content.to_owned();
    }
    let keep = MAX_CONTENT - TRUNCATED.chars().count();
    format!(
        "{}{TRUNCATED}",
        content.chars().take(keep).collect::<String>()
    )
}

fn status_of(v: &Value) -> Option<String> {
    let s = text(v, "status").to_lowercase();
    STATUSES.contains(&s.as_str()).then_some(s)
}

/// An item as given, made whole (Hermes's `_validate`).
fn validated(v: &Value) -> Item {
    if !v.is_object() {
        return Item {
            id: "?".into(),
            content: "(invalid item)".into(),
            status: "pending".into(),
        };
    }
    let id = Some(text(v, "id"))
        .filter(|i| !i.is_empty())
        .unwrap_or_else(|| "?".into());
    let content = Some(text(v, "content"))
        .filter(|c| !c.is_empty())
        .map_or_else(|| "(no description)".into(), |c| capped(&c));
    Item {
        id,
        content,
        status: status_of(v).unwrap_or_else(|| "pending".into()),
    }
}

/// The items of a write with a repeated id collapsed to its last one, in its place.
fn last_of_each(todos: &[Value]) -> Vec<&Value> {
    let key = |i: usize, v: &Value| match v.is_object() {
        true => Some(text(v, "id"))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "?".into()),
        false => format!("\0{i}"),
    };
    let keys: Vec<String> = todos.iter().enumerate().map(|(i, v)| key(i, v)).collect();
    (0..todos.len())
        .filter(|&i| !keys[i + 1..].contains(&keys[i]))
        .map(|i| &todos[i])
        .collect()
}

/// Items of one write read at most (a list keeps [`MAX_ITEMS`]).
const MAX_GIVEN: usize = 1_024;

fn write(list: &mut Vec<Item>, todos: &[Value], merge: bool) {
    let given = last_of_each(&todos[..todos.len().min(MAX_GIVEN)]);
    if !merge {
        *list = given.into_iter().map(validated).collect();
    } else {
        for v in given {
            let id = text(v, "id");
            if id.is_empty() {
                continue;
            }
            match list.iter_mut().find(|i| i.id == id) {
                Some(item) => {
                    let content = text(v, "content");
                    if !content.is_empty() {
                        item.content = capped(&content);
                    }
                    if let Some(s) = status_of(v) {
                        item.status = s;
                    }
                }
                None => list.push(validated(v)),
            }
        }
    }
    list.truncate(MAX_ITEMS);
}

fn answer(list: &[Item]) -> Value {
    let count = |s: &str| list.iter().filter(|i| i.status == s).count();
    json!({"todos": list.iter().map(Item::json).collect::<Vec<_>>(),
           "summary": {"total": list.len(), "pending": count("pending"),
                       "in_progress": count("in_progress"), "completed": count("completed"),
                       "cancelled": count("cancelled")}})
}

impl Todo {
    /// Reads or writes `session`'s list.
    pub fn call(&self, session: &str, args: &Value) -> Value {
        let todos = match args.get("todos") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
                Ok(Value::Array(a)) => Some(a),
                _ => {
                    return json!({"error": "todos must be a list of objects, got unparseable string"});
                }
            },
            Some(Value::Array(a)) => Some(a.clone()),
            Some(other) => {
                return json!({"error": format!("todos must be a list, got {}", kind(other))});
            }
        };
        let merge = args.get("merge").and_then(Value::as_bool).unwrap_or(false);
        let Ok(mut lists) = self.lists.lock() else {
            return json!({"error": "the task list is unavailable"});
        };
        let at = match lists.iter().position(|(s, _)| s == session) {
            Some(i) => i,
            None => {
                if lists.len() >= MAX_SESSIONS {
                    lists.pop_front();
                }
                lists.push_back((session.to_owned(), Vec::new()));
                lists.len() - 1
            }
        };
        let list = &mut lists[at].1;
        if let Some(todos) = todos {
            write(list, &todos, merge);
        }
        answer(list)
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::Object(_) => "dict",
        _ => "value",
    }
}

impl Tool for Todo {
    fn name(&self) -> &str {
        "todo"
    }
    fn description(&self) -> &str {
        "Manage your task list for the current session. Use for complex tasks with 3+ steps or when the user provides multiple tasks. Call with no parameters to read the current list.\n\nWriting:\n- Provide 'todos' array to create/update items\n- merge=false (default): replace the entire list with a fresh plan\n- merge=true: update existing items by id, add any new ones\n\nEach item: {id: string, content: string, status: pending|in_progress|completed|cancelled}\nList order is priority. Only ONE item in_progress at a time.\nMark items completed immediately when done. If something fails, cancel it and add a revised item.\n\nAlways returns the full current list."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "todos": {"type": "array", "description": "Task items to write. Omit to read current list.",
                      "items": {"type": "object", "properties": {
                          "id": {"type": "string", "description": "Unique item identifier"},
                          "content": {"type": "string", "description": "Task description"},
                          "status": {"type": "string", "enum": STATUSES, "description": "Current status"}},
                          "required": ["id", "content", "status"]}},
            "merge": {"type": "boolean", "default": false,
                      "description": "true: update existing items by id, add new ones. false (default): replace the entire list."}},
            "required": []})
    }
    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move { self.call(&ctx.session_id, &args).to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_writes_merges_and_reads_its_own_list() {
        let t = Todo::default();
        let plan = json!({"todos": [
            {"id": "1", "content": "Read the diff", "status": "in_progress"},
            {"id": "2", "content": "Write the review", "status": "maybe"},
            {"id": "1", "content": "Read the whole diff", "status": "in_progress"},
            {"id": "", "content": ""}]});
        let r = t.call("s1", &plan);
        assert_eq!(
            r["todos"],
            json!([
            {"id": "2", "content": "Write the review", "status": "pending"},
            {"id": "1", "content": "Read the whole diff", "status": "in_progress"},
            {"id": "?", "content": "(no description)", "status": "pending"}])
        );
        let r = t.call("s1", &json!({"merge": true, "todos": [
            {"id": "1", "status": "completed"}, {"id": "3", "content": "Post it", "status": "pending"}]}));
        assert_eq!(
            r["summary"],
            json!({"total": 4, "pending": 3, "in_progress": 0, "completed": 1, "cancelled": 0})
        );
        assert_eq!(r["todos"][1]["content"], "Read the whole diff");
        assert_eq!(t.call("s1", &json!({}))["summary"]["total"], 4);
        assert_eq!(
            t.call("s2", &json!({}))["todos"],
            json!([]),
            "another session's list"
        );
        let long = "x".repeat(5_000);
        let r = t.call(
            "s3",
            &json!({"todos": [{"id": "a", "content": long, "status": "pending"}]}),
        );
        let content = r["todos"][0]["content"].as_str().unwrap();
        assert!(content.ends_with("… [truncated]") && content.chars().count() == 4_000);
        assert_eq!(
            t.call("s1", &json!({"todos": 5}))["error"],
            "todos must be a list, got number"
        );
        assert_eq!(
            t.call(
                "s1",
                &json!({"todos": "[{\"id\":\"z\",\"content\":\"c\",\"status\":\"pending\"}]"})
            )["summary"]["total"],
            1
        );
    }
}
