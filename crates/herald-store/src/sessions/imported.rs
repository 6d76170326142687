//! Sessions brought from another store (a Hermes home's `state.db`): kept with their own
//! ids, times, titles and parent links, each in one write, and never twice.

use super::{NewMessage, NewSession, free_title, insert_message, insert_session};
use rusqlite::{Connection, OptionalExtension, params};

/// A session to import, with its messages in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImportedSession {
    pub session: NewSession,
    pub title: Option<String>,
    /// Seconds since the epoch, as Hermes keeps them.
    pub started_at: f64,
    pub ended_at: Option<f64>,
    pub end_reason: Option<String>,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub messages: Vec<ImportedMessage>,
}

/// A message to import, with the time it was written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImportedMessage {
    pub message: NewMessage,
    pub timestamp: f64,
}

/// What importing one session did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Imported {
    /// Written, with its messages.
    Added,
    /// A session with its id is already in the store: nothing written.
    AlreadyThere,
}

/// Imports `s` on the writer's connection (inside the writer's savepoint).
pub(super) fn import_in(c: &Connection, s: &ImportedSession) -> rusqlite::Result<Imported> {
    let there = c
        .query_row(
            "SELECT 1 FROM sessions WHERE id = ?1",
            [&s.session.id],
            |_| Ok(()),
        )
        .optional()?;
    if there.is_some() {
        return Ok(Imported::AlreadyThere);
    }
    // Titles are unique: a taken one becomes `title #2` (as a branch's does).
    let title = match &s.title {
        Some(t) => Some(free_title(c, t)?),
        None => None,
    };
    insert_session(c, &s.session, false)?;
    c.execute(
        "UPDATE sessions SET started_at = ?2, ended_at = ?3, end_reason = ?4, title = ?5,
                input_tokens = ?6, output_tokens = ?7 WHERE id = ?1",
        params![
            s.session.id,
            s.started_at,
            s.ended_at,
            s.end_reason,
            title,
            s.input_tokens,
            s.output_tokens
        ],
    )?;
    for m in &s.messages {
        let id = insert_message(c, &s.session.id, &m.message)?;
        c.prepare_cached("UPDATE messages SET timestamp = ?2 WHERE id = ?1")?
            .execute(params![id, m.timestamp])?;
    }
    Ok(Imported::Added)
}
