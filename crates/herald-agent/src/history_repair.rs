//! A stored history as the provider may be sent it. An interrupt or a crash mid-tool
//! can leave an assistant message whose tool calls have no results, and OpenAI and
//! vLLM refuse such a conversation with 400. Before a turn, each unanswered call gets a
//! stub result right after its assistant message, results that answer no call are
//! dropped, and a call answered twice keeps its first answer. Only what is sent is
//! repaired: the stored rows stay as they are (agent.md: synthetic placeholders are
//! never stored). This is what Hermes's pre-call sanitizer does.

use herald_protocol::{ChatMessage, Role};
use std::collections::HashSet;

/// The result a call that never returned is given.
pub const UNANSWERED: &str = "[Result unavailable: the call was cut off before it returned]";

/// `history` with every tool call answered once.
pub fn repaired(history: &[ChatMessage]) -> Vec<ChatMessage> {
    let calls: HashSet<&str> = history
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .flat_map(|m| m.tool_calls.iter().map(|c| c.id.as_str()))
        .collect();
    let answered: HashSet<&str> = history
        .iter()
        .filter(|m| m.role == Role::Tool)
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect();
    if calls.iter().all(|c| answered.contains(c)) && answered.iter().all(|a| calls.contains(a)) {
        return history.to_vec();
    }
    let mut out = Vec::with_capacity(history.len());
    let mut seen: HashSet<&str> = HashSet::new();
    for m in history {
        if m.role == Role::Tool {
            let id = m.tool_call_id.as_deref().unwrap_or_default();
            if calls.contains(id) && seen.insert(id) {
                out.push(m.clone());
            }
            continue;
        }
        out.push(m.clone());
        for call in m
            .tool_calls
            .iter()
            .filter(|c| !answered.contains(c.id.as_str()))
        {
            seen.insert(call.id.as_str());
            out.push(ChatMessage::tool_result(
                &call.id,
                &call.function.name,
                UNANSWERED,
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_protocol::{FunctionCall, ToolCall};

    fn calling(ids: &[&str]) -> ChatMessage {
        let mut m = ChatMessage::text(Role::Assistant, "");
        m.content = None;
        m.tool_calls = ids
            .iter()
            .map(|id| ToolCall {
                id: (*id).into(),
                kind: "function".into(),
                function: FunctionCall {
                    name: "terminal".into(),
                    arguments: "{}".into(),
                },
            })
            .collect();
        m
    }

    fn shape(messages: &[ChatMessage]) -> Vec<String> {
        messages
            .iter()
            .map(|m| match (&m.role, &m.tool_call_id) {
                (Role::Tool, Some(id)) => {
                    format!("tool:{id}:{}", m.content.as_deref() == Some(UNANSWERED))
                }
                (role, _) => role.as_str().to_owned(),
            })
            .collect()
    }

    #[test]
    fn every_call_is_answered_once_and_nothing_else_is_touched() {
        let whole = vec![
            ChatMessage::user("go"),
            calling(&["a"]),
            ChatMessage::tool_result("a", "terminal", "ok"),
        ];
        assert_eq!(repaired(&whole), whole, "a whole history is sent as stored");
        let cut = vec![
            ChatMessage::user("go"),
            calling(&["a", "b"]),
            ChatMessage::tool_result("a", "terminal", "ok"),
            ChatMessage::tool_result("a", "terminal", "again"),
            ChatMessage::tool_result("zz", "terminal", "answers nothing"),
            ChatMessage::user("go on"),
        ];
        assert_eq!(
            shape(&repaired(&cut)),
            ["user", "assistant", "tool:b:true", "tool:a:false", "user"]
        );
    }
}
