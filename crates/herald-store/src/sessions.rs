//! The session store (`state.db`): conversations and their messages, with the same
//! table and column names as Hermes so existing history and tools carry over. Messages
//! are appended one by one as they happen and read back in row-id order.

use rusqlite::{Connection, OptionalExtension, params};
use std::path::Path;

const MIGRATIONS: &[&str] = &[
    // 1: sessions and messages (a subset of Hermes's columns, same names).
    "CREATE TABLE IF NOT EXISTS sessions (
        id TEXT PRIMARY KEY,
        source TEXT,
        user_id TEXT,
        session_key TEXT,
        chat_id TEXT,
        display_name TEXT,
        model TEXT,
        model_config TEXT,
        system_prompt TEXT,
        parent_session_id TEXT REFERENCES sessions(id),
        started_at REAL NOT NULL,
        ended_at REAL,
        end_reason TEXT,
        message_count INTEGER NOT NULL DEFAULT 0,
        tool_call_count INTEGER NOT NULL DEFAULT 0,
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        cwd TEXT,
        title TEXT,
        api_call_count INTEGER NOT NULL DEFAULT 0,
        profile_name TEXT,
        rewind_count INTEGER NOT NULL DEFAULT 0,
        archived INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE IF NOT EXISTS messages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        role TEXT NOT NULL,
        content TEXT,
        tool_call_id TEXT,
        tool_calls TEXT,
        tool_name TEXT,
        timestamp REAL NOT NULL,
        token_count INTEGER,
        finish_reason TEXT,
        reasoning TEXT,
        active INTEGER NOT NULL DEFAULT 1,
        compacted INTEGER NOT NULL DEFAULT 0,
        api_content TEXT
    );
    CREATE INDEX IF NOT EXISTS idx_sessions_source ON sessions(source);
    CREATE INDEX IF NOT EXISTS idx_sessions_started ON sessions(started_at);
    CREATE INDEX IF NOT EXISTS idx_messages_session ON messages(session_id, active, id);",
];

/// A message row as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    pub id: i64,
    pub role: String,
    pub content: Option<String>,
    pub tool_call_id: Option<String>,
    /// JSON array text.
    pub tool_calls: Option<String>,
    pub tool_name: Option<String>,
    pub reasoning: Option<String>,
}

/// A session's header.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    pub id: String,
    pub source: Option<String>,
    pub model: Option<String>,
    pub system_prompt: Option<String>,
    pub message_count: i64,
}

/// A message to append.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewMessage<'a> {
    pub role: &'a str,
    pub content: Option<&'a str>,
    pub tool_call_id: Option<&'a str>,
    pub tool_calls: Option<String>,
    pub tool_name: Option<&'a str>,
    pub reasoning: Option<&'a str>,
    pub finish_reason: Option<&'a str>,
}

/// A session to create.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NewSession<'a> {
    pub id: &'a str,
    pub source: &'a str,
    pub model: &'a str,
    pub system_prompt: &'a str,
    pub cwd: &'a str,
}

/// A finished run to keep: its session and the messages it added.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord<'a> {
    pub session: NewSession<'a>,
    pub messages: Vec<NewMessage<'a>>,
}

/// Inserts one message and updates its session's counters.
fn insert_message(
    conn: &Connection,
    session_id: &str,
    m: &NewMessage<'_>,
) -> rusqlite::Result<i64> {
    conn.prepare_cached(
        "INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp, reasoning, finish_reason)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![session_id, m.role, m.content, m.tool_call_id, m.tool_calls, m.tool_name, now_secs(), m.reasoning, m.finish_reason])?;
    let id = conn.last_insert_rowid();
    let calls = m
        .tool_calls
        .as_deref()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok())
        .and_then(|v| v.as_array().map(Vec::len))
        .unwrap_or(0) as i64;
    conn.prepare_cached(
        "UPDATE sessions SET message_count = message_count + 1, tool_call_count = tool_call_count + ?2 WHERE id = ?1",
    )?
    .execute(params![session_id, calls])?;
    Ok(id)
}

/// The session database.
pub struct SessionDb {
    conn: Connection,
}

fn now_secs() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl SessionDb {
    /// Opens (creating if needed) `state.db`, WAL mode.
    pub fn open(path: &Path) -> rusqlite::Result<SessionDb> {
        crate::schema::restrict_to_owner(path);
        let mut conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        crate::schema::apply(&mut conn, MIGRATIONS)?;
        Ok(SessionDb { conn })
    }

    /// Creates a session with its (byte-stable) system prompt.
    pub fn create_session(
        &self,
        id: &str,
        source: &str,
        model: &str,
        system_prompt: &str,
        cwd: &str,
    ) -> rusqlite::Result<()> {
        self.conn.execute(
            "INSERT INTO sessions (id, source, model, system_prompt, started_at, cwd) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![id, source, model, system_prompt, now_secs(), cwd],
        )?;
        Ok(())
    }

    pub fn session(&self, id: &str) -> rusqlite::Result<Option<SessionRow>> {
        self.conn
            .query_row("SELECT id, source, model, system_prompt, message_count FROM sessions WHERE id = ?1", [id], |r| {
                Ok(SessionRow { id: r.get(0)?, source: r.get(1)?, model: r.get(2)?, system_prompt: r.get(3)?, message_count: r.get(4)? })
            })
            .optional()
    }

    /// The most recently started session of a source.
    pub fn latest(&self, source: &str) -> rusqlite::Result<Option<String>> {
        self.conn
            .query_row("SELECT id FROM sessions WHERE source = ?1 AND archived = 0 ORDER BY started_at DESC, rowid DESC LIMIT 1", [source], |r| r.get(0))
            .optional()
    }

    /// Appends one message and updates the counters, in one transaction; returns its row id.
    pub fn append(&mut self, session_id: &str, m: &NewMessage<'_>) -> rusqlite::Result<i64> {
        let tx = self.conn.transaction()?;
        let id = insert_message(&tx, session_id, m)?;
        tx.commit()?;
        Ok(id)
    }

    /// Finished unattended runs (e.g. webhook events), all in one transaction: each
    /// session is created unless it exists, then its messages are appended.
    pub fn record_runs(&mut self, runs: &[RunRecord<'_>]) -> rusqlite::Result<()> {
        let tx = self.conn.transaction()?;
        for run in runs {
            let s = &run.session;
            tx.prepare_cached(
                "INSERT OR IGNORE INTO sessions (id, source, model, system_prompt, started_at, cwd) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![s.id, s.source, s.model, s.system_prompt, now_secs(), s.cwd])?;
            for m in &run.messages {
                insert_message(&tx, s.id, m)?;
            }
        }
        tx.commit()
    }

    /// The live messages of a session in row-id order.
    pub fn history(&self, session_id: &str) -> rusqlite::Result<Vec<StoredMessage>> {
        let mut stmt = self.conn.prepare(
            "SELECT id, role, content, tool_call_id, tool_calls, tool_name, reasoning FROM messages WHERE session_id = ?1 AND active = 1 ORDER BY id",
        )?;
        let rows = stmt.query_map([session_id], |r| {
            Ok(StoredMessage {
                id: r.get(0)?,
                role: r.get(1)?,
                content: r.get(2)?,
                tool_call_id: r.get(3)?,
                tool_calls: r.get(4)?,
                tool_name: r.get(5)?,
                reasoning: r.get(6)?,
            })
        })?;
        rows.collect()
    }

    /// Records the end of a session's use (counters of API calls and tokens added).
    pub fn add_usage(
        &self,
        session_id: &str,
        api_calls: i64,
        input_tokens: i64,
        output_tokens: i64,
    ) -> rusqlite::Result<()> {
        self.conn.execute(
            "UPDATE sessions SET api_call_count = api_call_count + ?2, input_tokens = input_tokens + ?3, output_tokens = output_tokens + ?4 WHERE id = ?1",
            params![session_id, api_calls, input_tokens, output_tokens],
        )?;
        Ok(())
    }
}

/// A parent session's title, source, model, system prompt and cwd.
type ParentFields = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

/// Why a rewind was refused (the codes of the gateway protocol); nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RewindError {
    #[error(
        "4004: truncate_before_user_ordinal must be an integer, and confirm_truncate needs a target"
    )]
    BadParams,
    #[error(
        "4029: truncation needs confirm_truncate (and confirm_empty_truncate when nothing would remain)"
    )]
    NotConfirmed,
    #[error("4030: truncate_before_user_ordinal and truncate_before_row_id name different turns")]
    Disagree,
    #[error("4018: row {0} is not a live user message of this session")]
    StaleRow(i64),
    #[error("store: {0}")]
    Store(String),
}

impl RewindError {
    pub fn code(&self) -> u32 {
        match self {
            RewindError::BadParams => 4004,
            RewindError::NotConfirmed => 4029,
            RewindError::Disagree => 4030,
            RewindError::StaleRow(_) => 4018,
            RewindError::Store(_) => 5000,
        }
    }
}

/// What to rewind to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rewind {
    pub truncate_before_row_id: Option<i64>,
    /// As received (a JSON boolean is rejected).
    pub truncate_before_user_ordinal: Option<serde_json::Value>,
    pub confirm_truncate: bool,
    pub confirm_empty_truncate: bool,
}

impl SessionDb {
    /// The live user rows of a session, in order.
    fn user_rows(&self, session_id: &str) -> rusqlite::Result<Vec<i64>> {
        let mut stmt = self.conn.prepare("SELECT id FROM messages WHERE session_id = ?1 AND active = 1 AND role = 'user' ORDER BY id")?;
        let rows = stmt.query_map([session_id], |r| r.get(0))?;
        rows.collect()
    }

    /// Rewinds before a user turn: soft-deletes that turn and everything after it
    /// (surviving rows keep their ids) and returns the surviving user row ids.
    pub fn rewind(&mut self, session_id: &str, r: &Rewind) -> Result<Vec<i64>, RewindError> {
        let store = |e: rusqlite::Error| RewindError::Store(e.to_string());
        let ordinal = match &r.truncate_before_user_ordinal {
            None => None,
            Some(serde_json::Value::Number(n)) => {
                Some(n.as_u64().ok_or(RewindError::BadParams)? as usize)
            }
            Some(_) => return Err(RewindError::BadParams),
        };
        if ordinal.is_none() && r.truncate_before_row_id.is_none() {
            return Err(if r.confirm_truncate {
                RewindError::BadParams
            } else {
                RewindError::NotConfirmed
            });
        }
        if !r.confirm_truncate {
            return Err(RewindError::NotConfirmed);
        }
        let users = self.user_rows(session_id).map_err(store)?;
        let by_ordinal = match ordinal {
            Some(o) => Some(*users.get(o).ok_or(RewindError::BadParams)?),
            None => None,
        };
        let target = match (r.truncate_before_row_id, by_ordinal) {
            (Some(row), Some(o)) if row != o => return Err(RewindError::Disagree),
            (Some(row), _) => {
                if !users.contains(&row) {
                    return Err(RewindError::StaleRow(row));
                }
                row
            }
            (None, Some(o)) => o,
            (None, None) => return Err(RewindError::BadParams),
        };
        let survivors: Vec<i64> = users.into_iter().filter(|id| *id < target).collect();
        let remaining: i64 = self
            .conn
            .query_row(
                "SELECT COUNT(*) FROM messages WHERE session_id = ?1 AND active = 1 AND id < ?2",
                params![session_id, target],
                |row| row.get(0),
            )
            .map_err(store)?;
        if remaining == 0 && !r.confirm_empty_truncate {
            return Err(RewindError::NotConfirmed);
        }
        let tx = self.conn.transaction().map_err(store)?;
        tx.execute("UPDATE messages SET active = 0, compacted = 0 WHERE session_id = ?1 AND active = 1 AND id >= ?2", params![session_id, target])
            .map_err(store)?;
        tx.execute(
            "UPDATE sessions SET rewind_count = rewind_count + 1,
                 message_count = (SELECT COUNT(*) FROM messages WHERE session_id = ?1 AND active = 1) WHERE id = ?1",
            params![session_id],
        )
        .map_err(store)?;
        tx.commit().map_err(store)?;
        Ok(survivors)
    }

    /// Branches a session: a new session pointing back at its parent, with a copy of the
    /// parent's live rows (full rows: tool calls, ids, reasoning). Returns the new id.
    pub fn branch(
        &mut self,
        parent: &str,
        new_id: &str,
        name: Option<&str>,
    ) -> rusqlite::Result<String> {
        let tx = self.conn.transaction()?;
        let (title, source, model, prompt, cwd): ParentFields = tx.query_row(
            "SELECT title, source, model, system_prompt, cwd FROM sessions WHERE id = ?1",
            [parent],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )?;
        let base = name
            .map(str::to_owned)
            .or(title)
            .unwrap_or_else(|| "branch".to_owned());
        let mut candidate = base.clone();
        let mut n = 1;
        while tx.query_row(
            "SELECT COUNT(*) FROM sessions WHERE title = ?1",
            [&candidate],
            |r| r.get::<_, i64>(0),
        )? > 0
        {
            n += 1;
            candidate = format!("{base} #{n}");
        }
        tx.execute(
            "INSERT INTO sessions (id, source, model, model_config, system_prompt, parent_session_id, started_at, cwd, title)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![new_id, source, model, serde_json::json!({"_branched_from": parent}).to_string(), prompt, parent, now_secs(), cwd, candidate],
        )?;
        let copied = tx.execute(
            "INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp, token_count, finish_reason, reasoning, api_content)
             SELECT ?1, role, content, tool_call_id, tool_calls, tool_name, timestamp, token_count, finish_reason, reasoning, api_content
             FROM messages WHERE session_id = ?2 AND active = 1 ORDER BY id",
            params![new_id, parent],
        )?;
        tx.execute(
            "UPDATE sessions SET message_count = ?2 WHERE id = ?1",
            params![new_id, copied as i64],
        )?;
        tx.commit()?;
        Ok(candidate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_and_read_back_in_row_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = SessionDb::open(&dir.path().join("state.db")).unwrap();
        db.create_session("20260101_000000_abcdef", "cli", "m", "SYS", "/")
            .unwrap();
        let a = db
            .append(
                "20260101_000000_abcdef",
                &NewMessage {
                    role: "user",
                    content: Some("hi"),
                    ..Default::default()
                },
            )
            .unwrap();
        let b = db
            .append(
                "20260101_000000_abcdef",
                &NewMessage { role: "assistant", tool_calls: Some(r#"[{"id":"c","type":"function","function":{"name":"t","arguments":"{}"}}]"#.into()), ..Default::default() },
            )
            .unwrap();
        assert!(b > a);
        let h = db.history("20260101_000000_abcdef").unwrap();
        assert_eq!(
            h.iter().map(|m| m.role.as_str()).collect::<Vec<_>>(),
            vec!["user", "assistant"]
        );
        let s = db.session("20260101_000000_abcdef").unwrap().unwrap();
        assert_eq!(
            (s.system_prompt.as_deref(), s.message_count),
            (Some("SYS"), 2)
        );
        assert_eq!(
            db.latest("cli").unwrap().as_deref(),
            Some("20260101_000000_abcdef")
        );
        assert!(db.session("nope").unwrap().is_none());
    }
}

#[cfg(test)]
mod rewind_tests {
    use super::*;
    use serde_json::json;

    fn db_with_turns() -> (tempfile::TempDir, SessionDb, Vec<i64>) {
        let dir = tempfile::tempdir().unwrap();
        let mut db = SessionDb::open(&dir.path().join("state.db")).unwrap();
        db.create_session("s", "cli", "m", "SYS", "/").unwrap();
        let mut users = Vec::new();
        for i in 0..3 {
            users.push(
                db.append(
                    "s",
                    &NewMessage {
                        role: "user",
                        content: Some(&format!("q{i}")),
                        ..Default::default()
                    },
                )
                .unwrap(),
            );
            db.append(
                "s",
                &NewMessage {
                    role: "assistant",
                    content: Some("a"),
                    ..Default::default()
                },
            )
            .unwrap();
        }
        (dir, db, users)
    }

    #[test]
    fn rewind_rules_and_soft_delete() {
        let (_d, mut db, users) = db_with_turns();
        let ask = |row: Option<i64>, ord: Option<serde_json::Value>, confirm: bool| Rewind {
            truncate_before_row_id: row,
            truncate_before_user_ordinal: ord,
            confirm_truncate: confirm,
            confirm_empty_truncate: false,
        };
        assert_eq!(
            db.rewind("s", &ask(None, Some(json!(true)), true))
                .unwrap_err()
                .code(),
            4004
        );
        assert_eq!(
            db.rewind("s", &ask(None, None, true)).unwrap_err().code(),
            4004
        );
        assert_eq!(
            db.rewind("s", &ask(Some(users[1]), None, false))
                .unwrap_err()
                .code(),
            4029
        );
        assert_eq!(
            db.rewind("s", &ask(Some(users[1]), Some(json!(2)), true))
                .unwrap_err()
                .code(),
            4030
        );
        assert_eq!(
            db.rewind("s", &ask(Some(9999), None, true))
                .unwrap_err()
                .code(),
            4018
        );
        assert_eq!(
            db.rewind("s", &ask(Some(users[0]), None, true))
                .unwrap_err()
                .code(),
            4029,
            "empty result needs its own confirmation"
        );
        assert_eq!(
            db.history("s").unwrap().len(),
            6,
            "nothing written on errors"
        );
        let survivors = db
            .rewind("s", &ask(Some(users[1]), Some(json!(1)), true))
            .unwrap();
        assert_eq!(survivors, vec![users[0]]);
        let live = db.history("s").unwrap();
        assert_eq!(live.len(), 2);
        assert_eq!(live[0].id, users[0], "surviving rows keep their ids");
        assert_eq!(db.session("s").unwrap().unwrap().message_count, 2);
        // The rewound row is stale now.
        assert_eq!(
            db.rewind("s", &ask(Some(users[2]), None, true))
                .unwrap_err()
                .code(),
            4018
        );
    }

    #[test]
    fn branch_copies_full_rows_and_titles() {
        let (_d, mut db, _) = db_with_turns();
        db.append(
            "s",
            &NewMessage {
                role: "tool",
                content: Some("out"),
                tool_call_id: Some("c1"),
                tool_name: Some("terminal"),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(db.branch("s", "b1", None).unwrap(), "branch");
        assert_eq!(db.branch("s", "b2", None).unwrap(), "branch #2");
        let h = db.history("b1").unwrap();
        assert_eq!(h.len(), 7);
        assert_eq!(
            (h[6].tool_call_id.as_deref(), h[6].tool_name.as_deref()),
            (Some("c1"), Some("terminal"))
        );
        assert_eq!(
            db.session("b1").unwrap().unwrap().system_prompt.as_deref(),
            Some("SYS")
        );
    }
}
