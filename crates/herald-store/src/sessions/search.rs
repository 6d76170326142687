//! Searching the messages of every session (the `session_search` tool): SQLite's FTS5
//! over message text (`messages_fts`), brought up to date lazily before each search from
//! the newest message it has seen, so appending a message costs nothing more. Queries
//! are FTS5's syntax (all words by default, `OR`, `NOT`, quoted phrases, `prefix*`); a
//! query FTS5 cannot read is searched again with each word quoted.

use rusqlite::{Connection, OptionalExtension, params};

/// A message that matched, with the words that matched marked.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    pub session_id: String,
    pub message_id: i64,
    pub role: String,
    /// Text around the match, matched words between `>>>` and `<<<`.
    pub snippet: String,
}

/// What a search looks for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SearchQuery {
    pub text: String,
    /// Sessions at most (their best match each).
    pub limit: usize,
    /// Only messages of these roles (`user`, `assistant`, ...); empty: every role.
    pub roles: Vec<String>,
    /// A session left out (the one searching).
    pub exclude: Option<String>,
}

/// Rows indexed per catch-up batch.
const BATCH: i64 = 5_000;

/// Indexes the messages written since the last catch-up.
pub(super) fn catch_up(c: &Connection) -> rusqlite::Result<()> {
    let mut last: i64 = c
        .query_row("SELECT last_id FROM messages_fts_state", [], |r| r.get(0))
        .optional()?
        .unwrap_or(0);
    loop {
        let newest: Option<i64> = c.query_row(
            "SELECT max(id) FROM (SELECT id FROM messages WHERE id > ?1 ORDER BY id LIMIT ?2)",
            params![last, BATCH],
            |r| r.get(0),
        )?;
        let Some(newest) = newest else {
            break;
        };
        c.execute(
            "INSERT INTO messages_fts (rowid, content)
             SELECT id, coalesce(content, '') FROM messages WHERE id > ?1 AND id <= ?2",
            params![last, newest],
        )?;
        last = newest;
    }
    c.execute("DELETE FROM messages_fts_state", [])?;
    c.execute(
        "INSERT INTO messages_fts_state (last_id) VALUES (?1)",
        [last],
    )?;
    Ok(())
}

/// The best match of each session, best first; `Err` with FTS5's words when the query
/// cannot be read even with its words quoted.
pub(super) fn search_in(
    c: &Connection,
    q: &SearchQuery,
) -> rusqlite::Result<Result<Vec<SearchHit>, String>> {
    match run(c, q, &q.text) {
        Ok(hits) => Ok(Ok(hits)),
        Err(first) => {
            let quoted = quote_words(&q.text);
            match run(c, q, &quoted) {
                Ok(hits) => Ok(Ok(hits)),
                Err(_) => Ok(Err(first.to_string())),
            }
        }
    }
}

/// Each word of `text` as a literal FTS5 string.
fn quote_words(text: &str) -> String {
    text.split_whitespace()
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(" ")
}

fn run(c: &Connection, q: &SearchQuery, text: &str) -> rusqlite::Result<Vec<SearchHit>> {
    let roles = serde_json::to_string(&q.roles).unwrap_or_else(|_| "[]".into());
    let mut stmt = c.prepare_cached(
        "SELECT m.session_id, m.id, m.role,
                snippet(messages_fts, 0, '>>>', '<<<', '...', 40) AS snip
         FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid
         WHERE messages_fts MATCH ?1 AND m.active = 1
           AND (?2 = '[]' OR m.role IN (SELECT value FROM json_each(?2)))
           AND (?3 IS NULL OR m.session_id <> ?3)
         ORDER BY bm25(messages_fts)
         LIMIT 500",
    )?;
    let rows = stmt.query_map(params![text, roles, q.exclude], |r| {
        Ok(SearchHit {
            session_id: r.get(0)?,
            message_id: r.get(1)?,
            role: r.get(2)?,
            snippet: r.get(3)?,
        })
    })?;
    let mut best: Vec<SearchHit> = Vec::new();
    for hit in rows {
        let hit = hit?;
        if !best.iter().any(|b| b.session_id == hit.session_id) {
            best.push(hit);
            if best.len() >= q.limit.max(1) {
                break;
            }
        }
    }
    Ok(best)
}
