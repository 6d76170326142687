//! Looking after stored sessions: listing them, their token counters, titles, deleting
//! one and undoing its last exchange.

use rusqlite::{Connection, OptionalExtension, params};

/// A session as a list shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    pub id: String,
    pub title: Option<String>,
    /// The start of its first user message.
    pub preview: String,
    /// Unix seconds.
    pub started_at: f64,
    pub message_count: i64,
    pub source: Option<String>,
    /// The folder the session worked in.
    pub cwd: Option<String>,
    /// Unix seconds of its last message (its start when it has none).
    pub updated_at: f64,
}

/// A session's counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionUsage {
    pub model: Option<String>,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub api_calls: i64,
}

/// Why a title was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TitleRefused {
    #[error("the title is empty")]
    Empty,
    #[error("a title has at most {MAX_TITLE} characters and no control characters")]
    Invalid,
    #[error("another session has the title {0:?}")]
    Taken(String),
    #[error("no session with id {0}")]
    NoSession(String),
}

/// The longest title kept.
pub const MAX_TITLE: usize = 100;
const PREVIEW: usize = 60;

/// The most recently started sessions, newest first (subagents' left out: they are
/// found through their parent).
pub(super) fn list_in(c: &Connection, limit: usize) -> rusqlite::Result<Vec<SessionSummary>> {
    let mut stmt = c.prepare_cached(
            "SELECT s.id, s.title, s.started_at, s.message_count, s.source,
                    (SELECT content FROM messages m WHERE m.session_id = s.id AND m.active = 1 AND m.role = 'user' ORDER BY m.id LIMIT 1),
                    s.cwd,
                    COALESCE((SELECT MAX(timestamp) FROM messages m WHERE m.session_id = s.id), s.started_at)
             FROM sessions s WHERE s.archived = 0 AND s.source != 'subagent'
             ORDER BY s.started_at DESC, s.rowid DESC LIMIT ?1",
        )?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = stmt.query_map([limit], |r| {
        let first: Option<String> = r.get(5)?;
        Ok(SessionSummary {
            id: r.get(0)?,
            title: r.get(1)?,
            started_at: r.get(2)?,
            message_count: r.get(3)?,
            source: r.get(4)?,
            cwd: r.get(6)?,
            updated_at: r.get(7)?,
            preview: preview_of(first.as_deref()),
        })
    })?;
    rows.collect()
}

/// A session's model and counters.
pub(super) fn usage_in(c: &Connection, id: &str) -> rusqlite::Result<Option<SessionUsage>> {
    c.query_row(
        "SELECT model, input_tokens, output_tokens, api_call_count FROM sessions WHERE id = ?1",
        [id],
        |r| {
            Ok(SessionUsage {
                model: r.get(0)?,
                input_tokens: r.get(1)?,
                output_tokens: r.get(2)?,
                api_calls: r.get(3)?,
            })
        },
    )
    .optional()
}

/// A session's first user message as its list preview: whitespace folded, cut short.
pub fn preview_of(first: Option<&str>) -> String {
    first
        .unwrap_or_default()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(PREVIEW)
        .collect()
}

pub(super) fn checked_title(title: &str) -> Result<String, TitleRefused> {
    let title = title.trim();
    if title.is_empty() {
        return Err(TitleRefused::Empty);
    }
    if title.chars().count() > MAX_TITLE || title.chars().any(char::is_control) {
        return Err(TitleRefused::Invalid);
    }
    Ok(title.to_owned())
}

pub(super) fn set_title_in(
    c: &Connection,
    id: &str,
    title: &str,
) -> rusqlite::Result<Result<(), TitleRefused>> {
    let taken: i64 = c.query_row(
        "SELECT COUNT(*) FROM sessions WHERE title = ?1 AND id != ?2",
        params![title, id],
        |r| r.get(0),
    )?;
    if taken > 0 {
        return Ok(Err(TitleRefused::Taken(title.to_owned())));
    }
    let changed = c.execute(
        "UPDATE sessions SET title = ?2 WHERE id = ?1",
        params![id, title],
    )?;
    Ok(if changed == 0 {
        Err(TitleRefused::NoSession(id.to_owned()))
    } else {
        Ok(())
    })
}

pub(super) fn undo_in(c: &Connection, id: &str) -> rusqlite::Result<usize> {
    let last: Option<i64> = c
        .query_row(
            "SELECT MAX(id) FROM messages WHERE session_id = ?1 AND active = 1 AND role = 'user'",
            [id],
            |r| r.get(0),
        )
        .optional()?
        .flatten();
    let Some(last) = last else {
        return Ok(0);
    };
    let removed = c.execute(
        "UPDATE messages SET active = 0 WHERE session_id = ?1 AND active = 1 AND id >= ?2",
        params![id, last],
    )?;
    c.execute(
        "UPDATE sessions SET message_count = (SELECT COUNT(*) FROM messages WHERE session_id = ?1 AND active = 1) WHERE id = ?1",
        [id],
    )?;
    Ok(removed)
}

pub(super) fn delete_in(c: &Connection, id: &str) -> rusqlite::Result<bool> {
    c.execute("DELETE FROM messages WHERE session_id = ?1", [id])?;
    c.execute("DELETE FROM herald_runs WHERE session_id = ?1", [id])?;
    c.execute(
        "UPDATE sessions SET parent_session_id = NULL WHERE parent_session_id = ?1",
        [id],
    )?;
    Ok(c.execute("DELETE FROM sessions WHERE id = ?1", [id])? > 0)
}

pub(super) fn compact_in(
    c: &Connection,
    id: &str,
    summary: &super::NewMessage,
    keep: usize,
) -> rusqlite::Result<Vec<i64>> {
    let keep = i64::try_from(keep).unwrap_or(i64::MAX);
    let kept: Vec<super::NewMessage> = {
        let mut stmt = c.prepare_cached(
            "SELECT role, content, tool_call_id, tool_calls, tool_name, reasoning, finish_reason FROM
               (SELECT * FROM messages WHERE session_id = ?1 AND active = 1 ORDER BY id DESC LIMIT ?2) ORDER BY id",
        )?;
        let rows = stmt.query_map(params![id, keep], |r| {
            Ok(super::NewMessage {
                role: r.get(0)?,
                content: r.get(1)?,
                tool_call_id: r.get(2)?,
                tool_calls: r.get(3)?,
                tool_name: r.get(4)?,
                reasoning: r.get(5)?,
                finish_reason: r.get(6)?,
            })
        })?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    c.execute(
        "UPDATE messages SET active = 0, compacted = 1 WHERE session_id = ?1 AND active = 1",
        [id],
    )?;
    c.execute("UPDATE sessions SET message_count = 0 WHERE id = ?1", [id])?;
    std::iter::once(summary)
        .chain(kept.iter())
        .map(|m| super::insert_message(c, id, m))
        .collect()
}
