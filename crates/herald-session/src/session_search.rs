//! `session_search`, as Hermes 0.19.0 has it (`tools/session_search_tool.py`): the
//! stored sessions searched by their words (the store's index), in Hermes's four shapes:
//! `query` finds the best match of each session with the messages around it and the
//! session's first and last exchanges; `session_id` with `around_message_id` scrolls a
//! window; `session_id` alone reads a session (its first 20 and last 10 messages when
//! large); no argument browses the recent sessions. The session searching is left out.
//! Every answer is the stored messages themselves, no model call.

use herald_agent::tool::{Tool, ToolContext, ToolFuture};
use herald_store::SessionStore;
use herald_store::sessions::{SearchQuery, StoredMessage};
use serde_json::{Value, json};

/// A message's text at most, in answers (a tool's output can be large).
const MAX_CONTENT: usize = 4_000;

/// The tool over a host's session store.
pub struct SessionSearch {
    pub store: SessionStore,
}

fn failure(error: impl std::fmt::Display) -> Value {
    json!({"success": false, "error": error.to_string()})
}

fn shaped(m: &StoredMessage, anchor: Option<i64>) -> Value {
    let content = m.content.as_ref().map(|c| {
        if c.chars().count() > MAX_CONTENT {
            format!(
                "{}… [truncated]",
                c.chars().take(MAX_CONTENT).collect::<String>()
            )
        } else {
            c.clone()
        }
    });
    let mut v = json!({"id": m.id, "role": m.role, "content": content});
    for (key, value) in [
        ("tool_name", &m.tool_name),
        ("tool_calls", &m.tool_calls),
        ("tool_call_id", &m.tool_call_id),
    ] {
        if let Some(x) = value {
            v[key] = json!(x);
        }
    }
    if anchor == Some(m.id) {
        v["anchor"] = json!(true);
    }
    v
}

/// The first and last `n` user and assistant messages.
fn bookends(all: &[StoredMessage], n: usize) -> (Vec<Value>, Vec<Value>) {
    let talk: Vec<&StoredMessage> = all
        .iter()
        .filter(|m| matches!(m.role.as_str(), "user" | "assistant"))
        .collect();
    let start = talk.iter().take(n).map(|m| shaped(m, None)).collect();
    let end = talk[talk.len().saturating_sub(n)..]
        .iter()
        .map(|m| shaped(m, None))
        .collect();
    (start, end)
}

/// `window` messages each side of `anchor`: the messages, and how many lie before and
/// after them.
fn around(all: &[StoredMessage], anchor: i64, window: usize) -> Option<(Vec<Value>, usize, usize)> {
    let at = all.iter().position(|m| m.id == anchor)?;
    let from = at.saturating_sub(window);
    let to = (at + window + 1).min(all.len());
    let shown = all[from..to]
        .iter()
        .map(|m| shaped(m, Some(anchor)))
        .collect();
    Some((shown, from, all.len() - to))
}

impl SessionSearch {
    async fn meta(&self, id: &str) -> Option<Value> {
        let row = self.store.session(id.to_owned()).await.ok()??;
        Some(json!({"source": row.source, "model": row.model, "title": row.title}))
    }

    async fn discover(&self, args: &Value, current: &str) -> Value {
        let query = args["query"].as_str().unwrap_or_default().trim().to_owned();
        let limit = args["limit"].as_u64().unwrap_or(3).clamp(1, 10) as usize;
        let roles: Vec<String> = args["role_filter"]
            .as_str()
            .map(|r| {
                r.split(',')
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        let q = SearchQuery {
            text: query.clone(),
            limit,
            roles,
            exclude: Some(current.to_owned()),
        };
        let hits = match self.store.search(q).await {
            Ok(Ok(hits)) => hits,
            Ok(Err(why)) => return failure(format!("the query cannot be read: {why}")),
            Err(e) => return failure(format!("the session store cannot be searched: {e}")),
        };
        let mut results = Vec::new();
        for hit in &hits {
            let Ok(all) = self.store.history(hit.session_id.clone()).await else {
                continue;
            };
            let Some((messages, before, after)) = around(&all, hit.message_id, 5) else {
                continue;
            };
            let (start, end) = bookends(&all, 3);
            let meta = self.meta(&hit.session_id).await.unwrap_or(json!({}));
            results.push(json!({
                "session_id": hit.session_id, "source": meta["source"], "model": meta["model"],
                "title": meta["title"], "matched_role": hit.role, "match_message_id": hit.message_id,
                "snippet": hit.snippet, "bookend_start": start, "messages": messages,
                "bookend_end": end, "messages_before": before, "messages_after": after,
            }));
        }
        json!({"success": true, "mode": "discover", "query": query, "count": results.len(),
               "results": results, "sessions_searched": hits.len()})
    }

    async fn scroll(&self, id: &str, anchor: i64, window: usize) -> Value {
        let Ok(all) = self.store.history(id.to_owned()).await else {
            return failure(format!("session_id not found: {id}"));
        };
        let Some((messages, before, after)) = around(&all, anchor, window) else {
            return failure(format!("around_message_id {anchor} not in session_id {id}"));
        };
        json!({"success": true, "mode": "scroll", "session_id": id, "around_message_id": anchor,
               "session_meta": self.meta(id).await, "window": window, "messages": messages,
               "messages_before": before, "messages_after": after})
    }

    async fn read(&self, id: &str) -> Value {
        let Some(meta) = self.meta(id).await else {
            return failure(format!("session_id not found: {id}"));
        };
        let all = self.store.history(id.to_owned()).await.unwrap_or_default();
        let (head, tail) = (20, 10);
        let truncated = all.len() > head + tail;
        let shown: Vec<Value> = match truncated {
            true => all[..head]
                .iter()
                .chain(&all[all.len() - tail..])
                .map(|m| shaped(m, None))
                .collect(),
            false => all.iter().map(|m| shaped(m, None)).collect(),
        };
        let mut v = json!({"success": true, "mode": "read", "session_id": id, "session_meta": meta,
                           "message_count": all.len(), "truncated": truncated, "messages": shown});
        if truncated {
            v["message"] = json!(format!(
                "Session has {} messages; showing first {head} + last {tail}. Pass around_message_id (any id above) to scroll the middle.",
                all.len()
            ));
        }
        v
    }

    async fn browse(&self, limit: usize, current: &str) -> Value {
        let listed = match self.store.list(limit + 5).await {
            Ok(l) => l,
            Err(e) => return failure(format!("Failed to list recent sessions: {e}")),
        };
        let results: Vec<Value> = listed
            .iter()
            .filter(|s| s.id != current)
            .take(limit)
            .map(|s| {
                json!({"session_id": s.id, "title": s.title, "source": s.source,
                            "started_at": s.started_at, "last_active": s.updated_at,
                            "message_count": s.message_count, "preview": s.preview})
            })
            .collect();
        json!({"success": true, "mode": "browse", "count": results.len(), "results": results,
               "message": format!("Showing {} most recent sessions. Pass a query= to search, or session_id+around_message_id to scroll.", results.len())})
    }

    async fn call(&self, args: &Value, current: &str) -> Value {
        let session_id = args["session_id"]
            .as_str()
            .map(str::trim)
            .filter(|s| !s.is_empty());
        let has_query = args["query"].as_str().is_some_and(|q| !q.trim().is_empty());
        match (session_id, args["around_message_id"].as_i64()) {
            (Some(id), Some(anchor)) => {
                let window = args["window"].as_u64().unwrap_or(5).clamp(1, 50) as usize;
                self.scroll(id, anchor, window).await
            }
            (Some(id), None) => self.read(id).await,
            (None, _) if has_query => self.discover(args, current).await,
            (None, _) => {
                let limit = args["limit"].as_u64().unwrap_or(10).clamp(1, 50) as usize;
                self.browse(limit, current).await
            }
        }
    }
}

impl Tool for SessionSearch {
    fn name(&self) -> &str {
        "session_search"
    }
    fn description(&self) -> &str {
        "Search past sessions stored in the session store, or scroll inside one. Full-text retrieval; no model calls: every shape returns the stored messages.\n\nFOUR CALLING SHAPES\n1) DISCOVERY: pass `query` (e.g. session_search(query=\"auth refactor\", limit=3)). Returns the best match of each of the top sessions: session_id, title, source, snippet (matched words between >>> and <<<), bookend_start (the first 3 user+assistant messages), messages (±5 around the match, the anchor flagged), bookend_end (the last 3), match_message_id, messages_before, messages_after.\n2) SCROLL: pass `session_id` + `around_message_id` (+ `window`, default 5): the messages around that one. To scroll forward pass messages[-1].id, backward messages[0].id.\n3) READ: pass `session_id` only: the whole session (first 20 + last 10 messages when large).\n4) BROWSE: no arguments: the recent sessions with titles and previews.\n\nQUERY SYNTAX: every word must match by default; `OR` for either, quoted phrases for exact text, `NOT` to exclude, `deploy*` for a prefix.\n\nThis searches conversation history only: it is no evidence of what an outside source contains now."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "query": {"type": "string", "description": "Words to search for (DISCOVERY)."},
            "role_filter": {"type": "string", "description": "Only messages of these roles, comma-separated (user, assistant, tool)."},
            "limit": {"type": "integer", "description": "Sessions to return (DISCOVERY: default 3, at most 10; BROWSE: default 10)."},
            "session_id": {"type": "string", "description": "A session to read or scroll."},
            "around_message_id": {"type": "integer", "description": "With session_id: the message to centre a window on (SCROLL)."},
            "window": {"type": "integer", "description": "SCROLL: messages each side (default 5)."}},
            "required": []})
    }
    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move { self.call(&args, &ctx.session_id).await.to_string() })
    }
}
