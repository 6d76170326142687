//! The dashboard's search index (`inbox_fts`), built beside the inbox's writer, never
//! on it: a thread of its own with a connection of its own, indexing in small
//! transactions that last at most [`SLICE`] and start only after the writer has rested
//! for [`QUIET`]. A slice ends as soon as the writer takes a write (see `gate`), so an
//! accepted webhook waits at most for one entry to be indexed and the slice's commit,
//! as PostgreSQL's `CREATE INDEX CONCURRENTLY` and autovacuum's cost limits keep
//! maintenance off the foreground. While the writer never rests (ingest saturating
//! it), the index waits: searches scan what it has not seen (see `events`).
//!
//! The index holds every trigram of an entry's delivery id, event type and prompt's
//! first [`INDEXED_PROMPT`] characters, without positions (`detail=none`: about the
//! size of the text, not six times it); a search reads the entries holding all of its
//! trigrams and checks each with `LIKE`.

use crate::gate::WriterGate;
use crate::{StoreError, open_connection};
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use std::path::Path;
use std::sync::Weak;
use std::time::{Duration, Instant};

/// Characters of a prompt the index reads.
pub(crate) const INDEXED_PROMPT: usize = 4000;
/// Longest one indexing transaction lasts.
const SLICE: Duration = Duration::from_millis(20);
/// How long the writer must have rested before a slice starts.
const QUIET: Duration = Duration::from_millis(2);
/// Entries read from the inbox at a time within a slice.
const READ_AHEAD: usize = 64;
/// How long the builder sleeps once it has caught up.
const IDLE: Duration = Duration::from_secs(1);

/// Starts the builder thread for the inbox at `path`; it ends once the inbox and its
/// writer are gone (`gate` no longer held).
pub(crate) fn start(path: &Path, gate: Weak<WriterGate>) -> Result<(), StoreError> {
    let conn = open_connection(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
    crate::bound_wal(&conn)?;
    std::thread::Builder::new()
        .name("herald-search-index".into())
        .spawn(move || run(conn, gate))
        .map_err(|e| StoreError::Commit(format!("cannot start the search index thread: {e}")))?;
    Ok(())
}

fn run(mut conn: Connection, gate: Weak<WriterGate>) {
    let mut failing = false;
    loop {
        let Some(writer) = gate.upgrade() else {
            return;
        };
        if !writer.quiet_for(QUIET) {
            drop(writer);
            std::thread::sleep(QUIET);
            continue;
        }
        let outcome = slice(&mut conn, &writer);
        drop(writer);
        match outcome {
            Ok(more) => {
                if failing {
                    tracing::info!("the search index is being updated again");
                    failing = false;
                }
                if !more {
                    std::thread::sleep(IDLE);
                }
            }
            Err(e) => {
                // Once per run of failures, not once per retry.
                if !failing {
                    tracing::warn!(error = %e, "the search index could not be updated; retrying");
                    failing = true;
                }
                std::thread::sleep(IDLE * 10);
            }
        }
    }
}

/// One transaction of indexing: entries in id order until the inbox is caught up,
/// [`SLICE`] has passed or the writer has work. Whether entries remain.
fn slice(conn: &mut Connection, writer: &WriterGate) -> rusqlite::Result<bool> {
    if !behind(conn)? {
        return Ok(false);
    }
    let started = Instant::now();
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let first = indexed_up_to(&tx)?;
    let mut last = first;
    let more = 'slice: loop {
        let entries = unindexed(&tx, last)?;
        if entries.is_empty() {
            break false;
        }
        for entry in entries {
            if writer.is_busy() || started.elapsed() >= SLICE {
                break 'slice true;
            }
            tx.prepare_cached(
                "INSERT INTO inbox_fts (rowid, delivery_id, event_type, prompt)
                 VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![
                entry.id,
                entry.delivery_id,
                entry.event_type,
                entry.prompt
            ])?;
            last = entry.id;
        }
    };
    if last > first {
        tx.execute("UPDATE inbox_fts_state SET last_id = ?1", [last])?;
    }
    tx.commit()?;
    Ok(more)
}

/// An inbox entry's indexed text.
struct Unindexed {
    id: i64,
    delivery_id: String,
    event_type: String,
    prompt: String,
}

fn unindexed(conn: &Connection, after: i64) -> rusqlite::Result<Vec<Unindexed>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT id, delivery_id, event_type, substr(prompt, 1, {INDEXED_PROMPT})
         FROM inbox WHERE id > ?1 ORDER BY id LIMIT {READ_AHEAD}"
    ))?;
    let rows = stmt.query_map([after], |r| {
        Ok(Unindexed {
            id: r.get(0)?,
            delivery_id: r.get(1)?,
            event_type: r.get(2)?,
            prompt: r.get(3)?,
        })
    })?;
    rows.collect()
}

/// Whether the inbox has entries the search index has not seen.
pub(crate) fn behind(conn: &Connection) -> rusqlite::Result<bool> {
    let newest: i64 = conn.query_row("SELECT coalesce(max(id), 0) FROM inbox", [], |r| r.get(0))?;
    Ok(newest > indexed_up_to(conn)?)
}

/// The newest entry the index has seen (0 for none).
pub(crate) fn indexed_up_to(conn: &Connection) -> rusqlite::Result<i64> {
    Ok(conn
        .query_row("SELECT last_id FROM inbox_fts_state", [], |r| r.get(0))
        .optional()?
        .unwrap_or(0))
}

/// An FTS5 query for the entries holding every trigram of `text` (three characters or
/// more), each taken literally; at most [`MAX_TRIGRAMS`] of them, spread over `text`
/// (the `LIKE` check that follows decides).
pub(crate) fn trigram_query(text: &str) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    let count = chars.len().checked_sub(2).filter(|n| *n > 0)?;
    let step = count.div_ceil(MAX_TRIGRAMS).max(1);
    let mut starts: Vec<usize> = (0..count).step_by(step).collect();
    if starts.last() != Some(&(count - 1)) {
        starts.push(count - 1);
    }
    let terms: Vec<String> = starts
        .into_iter()
        .map(|i| {
            let gram: String = chars[i..i + 3].iter().collect();
            format!("\"{}\"", gram.replace('"', "\"\""))
        })
        .collect();
    Some(terms.join(" AND "))
}

/// Most trigrams one search asks the index for.
const MAX_TRIGRAMS: usize = 12;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_asks_for_its_trigrams_literally() {
        assert_eq!(trigram_query("ab"), None);
        assert_eq!(trigram_query("abc").as_deref(), Some("\"abc\""));
        assert_eq!(
            trigram_query("say\"hi").as_deref(),
            Some("\"say\" AND \"ay\"\"\" AND \"y\"\"h\" AND \"\"\"hi\"")
        );
        let long = "x".repeat(200);
        let query = trigram_query(&long).unwrap_or_default();
        assert!(query.matches("AND").count() <= MAX_TRIGRAMS, "{query}");
    }
}
