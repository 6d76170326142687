//! The session store (`state.db`): conversations and their messages, with the same
//! table and column names as Hermes so existing history and tools carry over, and the
//! runs started through the session host with their final status. Every write goes
//! through the database's one writer thread (no second write connection); messages get
//! their row ids back as they are appended. Reads use their own read-only connection.

use crate::writer::Durability;

mod admin;
mod backend;
mod imported;
mod search;
use crate::{StoreError, open_for_writing, start_writer, write_detached, write_on};
pub use admin::{MAX_TITLE, SessionSummary, SessionUsage, TitleRefused, preview_of};
pub use backend::{
    ControlHandler, ControlReply, Followed, Follower, Hold, KeptAnswer, KeyClaim, Relayed,
    RelayedEvents, RunControl, SessionBackend,
};
pub use imported::{Imported, ImportedMessage, ImportedSession};
use rusqlite::{Connection, OptionalExtension, params};
pub use search::{SearchHit, SearchQuery};
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};

pub(crate) const MIGRATIONS: &[&str] = &[
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
    // 2: runs of the session host, kept so a client asking after a restart gets an answer.
    "CREATE TABLE IF NOT EXISTS herald_runs (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        status TEXT NOT NULL,
        model TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        last_event TEXT,
        output TEXT,
        error TEXT,
        pending_steer TEXT,
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX IF NOT EXISTS idx_herald_runs_updated ON herald_runs(updated_at);",
    // 3: stored responses of the Responses API (an LRU: `used_at` orders eviction).
    "CREATE TABLE IF NOT EXISTS herald_responses (
        id TEXT PRIMARY KEY,
        conversation TEXT,
        session_id TEXT NOT NULL,
        instructions TEXT,
        history TEXT NOT NULL,
        response TEXT NOT NULL,
        created_at REAL NOT NULL,
        used_at REAL NOT NULL
    );
    CREATE INDEX IF NOT EXISTS idx_herald_responses_used ON herald_responses(used_at);
    CREATE INDEX IF NOT EXISTS idx_herald_responses_conversation ON herald_responses(conversation, created_at);",
    // 4: the process that runs a run (`instance::current`), so recovery leaves the runs
    // of a process that still serves alone.
    "ALTER TABLE herald_runs ADD COLUMN owner TEXT;",
    // 5: a chat platform's conversation is found by its session key, newest first (as
    // Hermes's own index).
    "CREATE INDEX IF NOT EXISTS idx_sessions_session_key ON sessions(session_key, started_at DESC);",
    // 6: the messages' search index (`session_search`), caught up before each search.
    "CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(content, content='messages', content_rowid='id', tokenize='unicode61 remove_diacritics 2');
     CREATE TABLE IF NOT EXISTS messages_fts_state (last_id INTEGER NOT NULL);",
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
    pub cwd: Option<String>,
    pub title: Option<String>,
    pub parent_session_id: Option<String>,
    pub message_count: i64,
    /// Hermes's JSON of the session's runtime (herald keeps a `/model` switch there).
    pub model_config: Option<String>,
}

/// A message to append.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewMessage {
    pub role: String,
    pub content: Option<String>,
    pub tool_call_id: Option<String>,
    /// JSON array text.
    pub tool_calls: Option<String>,
    pub tool_name: Option<String>,
    pub reasoning: Option<String>,
    pub finish_reason: Option<String>,
}

/// A session to create.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewSession {
    pub id: String,
    pub source: String,
    pub model: String,
    pub system_prompt: String,
    pub cwd: String,
    /// The session it was started from (a subagent's parent).
    pub parent_session_id: Option<String>,
    /// A chat platform's session key (Hermes's `sessions.session_key`).
    pub session_key: Option<String>,
}

/// A finished run to keep: its session (created unless it exists) and its messages.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    pub session: NewSession,
    pub messages: Vec<NewMessage>,
}

/// A run of the session host as kept: its last known state.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunRow {
    pub id: String,
    pub session_id: String,
    /// The wire name (`running`, `waiting_for_approval`, `completed` ...).
    pub status: String,
    pub model: String,
    /// Unix seconds.
    pub created_at: f64,
    pub updated_at: f64,
    pub last_event: Option<String>,
    pub output: Option<String>,
    pub error: Option<String>,
    pub pending_steer: Option<String>,
    pub input_tokens: i64,
    pub output_tokens: i64,
}

/// A stored response: the response object, the conversation up to it (JSON arrays and
/// objects as text), its instructions and session.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoredResponse {
    pub id: String,
    pub conversation: Option<String>,
    pub session_id: String,
    pub instructions: Option<String>,
    /// The messages up to and including this response (a JSON array).
    pub history: String,
    /// The response object as answered (JSON).
    pub response: String,
}

/// Where to rewind a session to, its parameters already checked for form.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RewindTarget {
    /// The row id of the user message to cut before.
    pub before_row_id: Option<i64>,
    /// The 0-based index among the live user messages.
    pub before_user_ordinal: Option<u64>,
    /// The caller agrees to a cut that leaves nothing.
    pub confirm_empty: bool,
}

/// Why a rewind was refused; nothing was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RewindRefused {
    #[error("row {0} is not a live user message of this session")]
    StaleRow(i64),
    #[error("row {row} is not user turn {ordinal}")]
    Disagree { row: i64, ordinal: u64 },
    #[error("this session's history is stored: name the turn by truncate_before_row_id")]
    RowIdRequired,
    #[error("user turn {ordinal} does not exist ({turns} user turns)")]
    OrdinalOutOfRange { ordinal: u64, turns: usize },
    #[error("the cut would leave nothing: confirm_empty_truncate is needed")]
    WouldEmpty,
}

use crate::now_secs;

/// Inserts one message and updates its session's counters.
fn insert_message(conn: &Connection, session_id: &str, m: &NewMessage) -> rusqlite::Result<i64> {
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

fn insert_session(conn: &Connection, s: &NewSession, or_ignore: bool) -> rusqlite::Result<()> {
    let verb = if or_ignore {
        "INSERT OR IGNORE"
    } else {
        "INSERT"
    };
    conn.prepare_cached(&format!(
        "{verb} INTO sessions (id, source, model, system_prompt, started_at, cwd, parent_session_id, session_key) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
    ))?
    .execute(params![s.id, s.source, s.model, s.system_prompt, now_secs(), s.cwd, s.parent_session_id, s.session_key])?;
    Ok(())
}

/// The session store every caller holds, whichever backend keeps it; cheap to
/// clone. Runs it saves are owned by its instance ([`crate::instance`]).
#[derive(Clone)]
pub struct SessionStore {
    backend: Arc<dyn SessionBackend>,
    /// The instance id written as the owner of each run saved.
    owner: Arc<str>,
}

impl SessionStore {
    /// Opens (creating if needed) `state.db`, migrates it and starts its writer.
    pub fn open(path: &Path) -> Result<SessionStore, StoreError> {
        Ok(SessionStore::on(Arc::new(SqliteSessions::open(path)?)))
    }

    /// The store kept by `backend`, owning runs as this process.
    pub fn on(backend: Arc<dyn SessionBackend>) -> SessionStore {
        SessionStore {
            backend,
            owner: Arc::from(crate::instance::current()),
        }
    }

    /// This store, saving runs as owned by `owner` instead of this process: how a
    /// test stands for a process that is gone, and how an instance of a shared store
    /// names itself.
    pub fn owned_by(mut self, owner: &str) -> SessionStore {
        self.owner = Arc::from(owner);
        self
    }

    /// Sets a session's title (trimmed; unique among sessions).
    pub async fn set_title(
        &self,
        id: String,
        title: String,
    ) -> Result<Result<String, TitleRefused>, StoreError> {
        let title = match admin::checked_title(&title) {
            Ok(t) => t,
            Err(refused) => return Ok(Err(refused)),
        };
        Ok(self
            .backend
            .set_title(id, title.clone())
            .await?
            .map(|()| title))
    }

    /// Keeps a session's model and its runtime JSON; false without the session.
    pub async fn set_model(
        &self,
        id: String,
        model: String,
        model_config: String,
    ) -> Result<bool, StoreError> {
        self.backend.set_model(id, model, model_config).await
    }

    /// Ends a turn in one write: its API calls and tokens added to its session's
    /// counters and, when given, its run's final state kept.
    pub async fn finish_turn(
        &self,
        session_id: String,
        usage: (i64, i64, i64),
        run: Option<RunRow>,
    ) -> Result<(), StoreError> {
        let owner = self.owner.to_string();
        self.backend
            .finish_turn(session_id, usage, run, owner)
            .await
    }

    /// Keeps a run's state (inserted or replaced) without waiting: committed before
    /// the writes queued after it.
    pub fn save_run_detached(&self, run: RunRow) -> Result<(), StoreError> {
        self.backend.save_run_detached(run, self.owner.to_string())
    }

    /// Keeps a run's state (inserted or replaced).
    pub async fn save_run(&self, run: RunRow) -> Result<(), StoreError> {
        self.backend.save_run(run, self.owner.to_string()).await
    }

    /// Creates a session unless one with its id exists, without waiting: it is
    /// committed before the writes queued after it (a failure is logged).
    pub fn ensure_session(&self, session: NewSession) -> Result<(), StoreError> {
        self.backend.ensure_session_detached(session)
    }
}

impl std::ops::Deref for SessionStore {
    type Target = dyn SessionBackend;
    fn deref(&self) -> &Self::Target {
        &*self.backend
    }
}

/// `state.db` in SQLite: one writer thread, one read connection.
pub struct SqliteSessions {
    tx: mpsc::Sender<crate::writer::Command>,
    path: PathBuf,
    reader: crate::ReadConn,
}

impl SqliteSessions {
    /// Opens (creating if needed) `state.db`, migrates it and starts its writer.
    pub fn open(path: &Path) -> Result<SqliteSessions, StoreError> {
        let mut conn = open_for_writing(path)?;
        crate::schema::apply(&mut conn, MIGRATIONS)?;
        let (tx, _) = start_writer(path, conn, None)?;
        Ok(SqliteSessions {
            tx,
            path: path.to_path_buf(),
            reader: crate::ReadConn::new(path, None),
        })
    }

    async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        write_on(&self.tx, Durability::Process, f).await
    }

    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.reader.run(f).await
    }
}

#[async_trait::async_trait]
impl SessionBackend for SqliteSessions {
    async fn create_session(&self, session: NewSession) -> Result<(), StoreError> {
        self.write(move |c| insert_session(c, &session, false))
            .await
    }

    fn ensure_session_detached(&self, session: NewSession) -> Result<(), StoreError> {
        write_detached(&self.tx, Durability::Process, move |c| {
            insert_session(c, &session, true)
        })
    }

    async fn append(&self, session_id: String, m: NewMessage) -> Result<i64, StoreError> {
        self.write(move |c| insert_message(c, &session_id, &m))
            .await
    }

    fn append_detached(&self, session_id: String, m: NewMessage) -> Result<(), StoreError> {
        write_detached(&self.tx, Durability::Process, move |c| {
            insert_message(c, &session_id, &m).map(|_| ())
        })
    }

    async fn record_run(&self, run: RunRecord) -> Result<Vec<i64>, StoreError> {
        self.write(move |c| {
            insert_session(c, &run.session, true)?;
            run.messages
                .iter()
                .map(|m| insert_message(c, &run.session.id, m))
                .collect()
        })
        .await
    }

    async fn rewind(
        &self,
        session_id: String,
        target: RewindTarget,
    ) -> Result<Result<Vec<i64>, RewindRefused>, StoreError> {
        self.write(move |c| rewind_in(c, &session_id, target)).await
    }

    async fn branch(
        &self,
        parent: String,
        new_id: String,
        name: Option<String>,
    ) -> Result<Option<String>, StoreError> {
        self.write(move |c| branch_in(c, &parent, &new_id, name.as_deref()))
            .await
    }

    async fn finish_turn(
        &self,
        session_id: String,
        usage: (i64, i64, i64),
        run: Option<RunRow>,
        owner: String,
    ) -> Result<(), StoreError> {
        self.write(move |c| {
            c.prepare_cached(
                "UPDATE sessions SET api_call_count = api_call_count + ?2, input_tokens = input_tokens + ?3, output_tokens = output_tokens + ?4 WHERE id = ?1",
            )?
            .execute(params![session_id, usage.0, usage.1, usage.2])?;
            match run {
                Some(run) => upsert_run(c, &run, &owner),
                None => Ok(()),
            }
        })
        .await
    }

    async fn save_response(&self, r: StoredResponse, keep: usize) -> Result<(), StoreError> {
        self.write(move |c| {
            let now = now_secs();
            c.prepare_cached(
                "INSERT OR REPLACE INTO herald_responses (id, conversation, session_id, instructions, history, response, created_at, used_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)",
            )?
            .execute(params![r.id, r.conversation, r.session_id, r.instructions, r.history, r.response, now])?;
            c.execute(
                "DELETE FROM herald_responses WHERE id NOT IN (SELECT id FROM herald_responses ORDER BY used_at DESC, rowid DESC LIMIT ?1)",
                params![keep as i64],
            )?;
            Ok(())
        })
        .await
    }

    async fn touch_response(&self, id: String) -> Result<(), StoreError> {
        self.write(move |c| {
            c.execute(
                "UPDATE herald_responses SET used_at = ?2 WHERE id = ?1",
                params![id, now_secs()],
            )
            .map(|_| ())
        })
        .await
    }

    async fn delete_response(&self, id: String) -> Result<bool, StoreError> {
        self.write(move |c| {
            c.execute("DELETE FROM herald_responses WHERE id = ?1", [id])
                .map(|n| n > 0)
        })
        .await
    }

    async fn save_run(&self, run: RunRow, owner: String) -> Result<(), StoreError> {
        self.write(move |c| upsert_run(c, &run, &owner)).await
    }

    fn save_run_detached(&self, run: RunRow, owner: String) -> Result<(), StoreError> {
        write_detached(&self.tx, Durability::Process, move |c| {
            upsert_run(c, &run, &owner)
        })
    }

    /// Runs whose owner still runs (another herald serving the same home) are left
    /// alone.
    async fn fail_unfinished_runs(&self, why: String) -> Result<usize, StoreError> {
        self.write(move |c| {
            let owners: Vec<Option<String>> = c
                .prepare(
                    "SELECT DISTINCT owner FROM herald_runs
                     WHERE status NOT IN ('completed', 'failed', 'cancelled')",
                )?
                .query_map([], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            let mut failed = 0;
            for owner in owners {
                if owner.as_deref().is_some_and(crate::instance::is_alive) {
                    continue;
                }
                failed += c.execute(
                    "UPDATE herald_runs SET status = 'failed', error = ?1, updated_at = ?2
                     WHERE status NOT IN ('completed', 'failed', 'cancelled') AND owner IS ?3",
                    params![why, now_secs(), owner],
                )?;
            }
            Ok(failed)
        })
        .await
    }

    async fn set_title(
        &self,
        id: String,
        title: String,
    ) -> Result<Result<(), TitleRefused>, StoreError> {
        self.write(move |c| admin::set_title_in(c, &id, &title))
            .await
    }

    async fn end_session(&self, id: String, reason: String) -> Result<bool, StoreError> {
        self.write(move |c| {
            let changed = c.execute(
                "UPDATE sessions SET ended_at = ?2, end_reason = ?3 WHERE id = ?1",
                params![id, now_secs(), reason],
            )?;
            Ok(changed > 0)
        })
        .await
    }

    async fn set_model(
        &self,
        id: String,
        model: String,
        model_config: String,
    ) -> Result<bool, StoreError> {
        self.write(move |c| {
            let changed = c.execute(
                "UPDATE sessions SET model = ?2, model_config = ?3 WHERE id = ?1",
                params![id, model, model_config],
            )?;
            Ok(changed > 0)
        })
        .await
    }

    async fn delete_session(&self, id: String) -> Result<bool, StoreError> {
        self.write(move |c| admin::delete_in(c, &id)).await
    }

    async fn undo(&self, id: String) -> Result<usize, StoreError> {
        self.write(move |c| admin::undo_in(c, &id)).await
    }

    async fn compact(
        &self,
        id: String,
        summary: NewMessage,
        keep: usize,
    ) -> Result<Vec<i64>, StoreError> {
        self.write(move |c| admin::compact_in(c, &id, &summary, keep))
            .await
    }

    async fn session(&self, id: String) -> Result<Option<SessionRow>, StoreError> {
        self.read(move |c| session_in(c, &id)).await
    }

    async fn latest(&self, source: String) -> Result<Option<String>, StoreError> {
        self.read(move |c| {
            c.query_row("SELECT id FROM sessions WHERE source = ?1 AND archived = 0 ORDER BY started_at DESC, rowid DESC LIMIT 1", [source], |r| r.get(0))
                .optional()
        })
        .await
    }

    async fn import_session(&self, session: ImportedSession) -> Result<Imported, StoreError> {
        self.write(move |c| imported::import_in(c, &session)).await
    }

    async fn search(&self, q: SearchQuery) -> Result<Result<Vec<SearchHit>, String>, StoreError> {
        self.write(search::catch_up).await?;
        self.read(move |c| search::search_in(c, &q)).await
    }

    async fn keyed(&self, session_key: String) -> Result<Option<String>, StoreError> {
        self.read(move |c| {
            c.query_row("SELECT id FROM sessions WHERE session_key = ?1 AND archived = 0 ORDER BY started_at DESC, rowid DESC LIMIT 1", [session_key], |r| r.get(0))
                .optional()
        })
        .await
    }

    async fn history(&self, session_id: String) -> Result<Vec<StoredMessage>, StoreError> {
        self.read(move |c| history_in(c, &session_id)).await
    }

    async fn response(&self, id: String) -> Result<Option<StoredResponse>, StoreError> {
        self.read(move |c| response_in(c, &id)).await
    }

    async fn latest_response_of(&self, conversation: String) -> Result<Option<String>, StoreError> {
        self.read(move |c| {
            c.query_row(
                "SELECT id FROM herald_responses WHERE conversation = ?1 ORDER BY created_at DESC, rowid DESC LIMIT 1",
                [conversation],
                |r| r.get(0),
            )
            .optional()
        })
        .await
    }

    async fn run(&self, id: String) -> Result<Option<RunRow>, StoreError> {
        self.read(move |c| run_in(c, &id)).await
    }

    async fn list(&self, limit: usize) -> Result<Vec<SessionSummary>, StoreError> {
        self.read(move |c| admin::list_in(c, limit)).await
    }

    async fn usage(&self, id: String) -> Result<Option<SessionUsage>, StoreError> {
        self.read(move |c| admin::usage_in(c, &id)).await
    }

    fn location(&self) -> String {
        self.path.display().to_string()
    }
}

fn upsert_run(c: &Connection, run: &RunRow, owner: &str) -> rusqlite::Result<()> {
    c.prepare_cached(
        "INSERT OR REPLACE INTO herald_runs (id, session_id, status, model, created_at, updated_at, last_event, output, error, pending_steer, input_tokens, output_tokens, owner)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )?
    .execute(params![run.id, run.session_id, run.status, run.model, run.created_at, run.updated_at, run.last_event, run.output, run.error, run.pending_steer, run.input_tokens, run.output_tokens, owner])
    .map(|_| ())
}

fn live_user_rows(c: &Connection, session_id: &str) -> rusqlite::Result<Vec<i64>> {
    let mut stmt = c.prepare_cached(
        "SELECT id FROM messages WHERE session_id = ?1 AND active = 1 AND role = 'user' ORDER BY id",
    )?;
    let rows = stmt.query_map([session_id], |r| r.get(0))?;
    rows.collect()
}

/// The row to cut before, by the order of checks of the gateway protocol (§3.2):
/// `users` are the live user rows in order; `durable` says the history is stored.
pub fn rewind_row(
    users: &[i64],
    durable: bool,
    target: RewindTarget,
) -> Result<i64, RewindRefused> {
    let by_ordinal = target.before_user_ordinal.map(|o| {
        (
            o,
            usize::try_from(o).ok().and_then(|i| users.get(i)).copied(),
        )
    });
    match (target.before_row_id, by_ordinal) {
        (Some(row), _) if !users.contains(&row) => Err(RewindRefused::StaleRow(row)),
        (Some(row), Some((ordinal, at))) if at != Some(row) => {
            Err(RewindRefused::Disagree { row, ordinal })
        }
        (Some(row), _) => Ok(row),
        (None, Some(_)) if durable => Err(RewindRefused::RowIdRequired),
        (None, Some((_, Some(row)))) => Ok(row),
        (None, Some((_, None))) | (None, None) => Err(RewindRefused::OrdinalOutOfRange {
            ordinal: ordinal_or_zero(target),
            turns: users.len(),
        }),
    }
}

fn ordinal_or_zero(target: RewindTarget) -> u64 {
    target.before_user_ordinal.unwrap_or(0)
}

fn rewind_in(
    c: &Connection,
    session_id: &str,
    target: RewindTarget,
) -> rusqlite::Result<Result<Vec<i64>, RewindRefused>> {
    let users = live_user_rows(c, session_id)?;
    let row = match rewind_row(&users, !users.is_empty(), target) {
        Ok(row) => row,
        Err(refused) => return Ok(Err(refused)),
    };
    let remaining: i64 = c.query_row(
        "SELECT COUNT(*) FROM messages WHERE session_id = ?1 AND active = 1 AND id < ?2",
        params![session_id, row],
        |r| r.get(0),
    )?;
    if remaining == 0 && !target.confirm_empty {
        return Ok(Err(RewindRefused::WouldEmpty));
    }
    c.execute(
        "UPDATE messages SET active = 0, compacted = 0 WHERE session_id = ?1 AND active = 1 AND id >= ?2",
        params![session_id, row],
    )?;
    c.execute(
        "UPDATE sessions SET rewind_count = rewind_count + 1,
             message_count = (SELECT COUNT(*) FROM messages WHERE session_id = ?1 AND active = 1) WHERE id = ?1",
        params![session_id],
    )?;
    Ok(Ok(users.into_iter().filter(|id| *id < row).collect()))
}

/// A parent session's title, source, model, system prompt and cwd.
type ParentFields = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

/// The first of `base`, `base #2`, `base #3` ... no session has as its title.
fn free_title(c: &Connection, base: &str) -> rusqlite::Result<String> {
    let mut candidate = base.to_owned();
    let mut n = 1;
    while c.query_row(
        "SELECT COUNT(*) FROM sessions WHERE title = ?1",
        [&candidate],
        |r| r.get::<_, i64>(0),
    )? > 0
    {
        n += 1;
        candidate = format!("{base} #{n}");
    }
    Ok(candidate)
}

fn branch_in(
    c: &Connection,
    parent: &str,
    new_id: &str,
    name: Option<&str>,
) -> rusqlite::Result<Option<String>> {
    let Some((title, source, model, prompt, cwd)): Option<ParentFields> = c
        .query_row(
            "SELECT title, source, model, system_prompt, cwd FROM sessions WHERE id = ?1",
            [parent],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .optional()?
    else {
        return Ok(None);
    };
    let base = name
        .map(str::to_owned)
        .or(title)
        .unwrap_or_else(|| "branch".to_owned());
    let title = free_title(c, &base)?;
    c.execute(
        "INSERT INTO sessions (id, source, model, model_config, system_prompt, parent_session_id, started_at, cwd, title)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![new_id, source, model, serde_json::json!({"_branched_from": parent}).to_string(), prompt, parent, now_secs(), cwd, title],
    )?;
    let copied = c.execute(
        "INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp, token_count, finish_reason, reasoning, api_content)
         SELECT ?1, role, content, tool_call_id, tool_calls, tool_name, timestamp, token_count, finish_reason, reasoning, api_content
         FROM messages WHERE session_id = ?2 AND active = 1 ORDER BY id",
        params![new_id, parent],
    )?;
    c.execute(
        "UPDATE sessions SET message_count = ?2 WHERE id = ?1",
        params![new_id, copied as i64],
    )?;
    Ok(Some(title))
}

fn session_in(c: &Connection, id: &str) -> rusqlite::Result<Option<SessionRow>> {
    c.query_row(
        "SELECT id, source, model, system_prompt, cwd, title, parent_session_id, message_count, model_config FROM sessions WHERE id = ?1",
        [id],
        |r| {
            Ok(SessionRow {
                id: r.get(0)?,
                source: r.get(1)?,
                model: r.get(2)?,
                system_prompt: r.get(3)?,
                cwd: r.get(4)?,
                title: r.get(5)?,
                parent_session_id: r.get(6)?,
                message_count: r.get(7)?,
                model_config: r.get(8)?,
            })
        },
    )
    .optional()
}

fn history_in(c: &Connection, session_id: &str) -> rusqlite::Result<Vec<StoredMessage>> {
    let mut stmt = c.prepare_cached(
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

fn response_in(c: &Connection, id: &str) -> rusqlite::Result<Option<StoredResponse>> {
    c.query_row(
        "SELECT id, conversation, session_id, instructions, history, response FROM herald_responses WHERE id = ?1",
        [id],
        |r| {
            Ok(StoredResponse {
                id: r.get(0)?,
                conversation: r.get(1)?,
                session_id: r.get(2)?,
                instructions: r.get(3)?,
                history: r.get(4)?,
                response: r.get(5)?,
            })
        },
    )
    .optional()
}

fn run_in(c: &Connection, id: &str) -> rusqlite::Result<Option<RunRow>> {
    c.query_row(
        "SELECT id, session_id, status, model, created_at, updated_at, last_event, output, error, pending_steer, input_tokens, output_tokens FROM herald_runs WHERE id = ?1",
        [id],
        |r| {
            Ok(RunRow {
                id: r.get(0)?,
                session_id: r.get(1)?,
                status: r.get(2)?,
                model: r.get(3)?,
                created_at: r.get(4)?,
                updated_at: r.get(5)?,
                last_event: r.get(6)?,
                output: r.get(7)?,
                error: r.get(8)?,
                pending_steer: r.get(9)?,
                input_tokens: r.get(10)?,
                output_tokens: r.get(11)?,
            })
        },
    )
    .optional()
}
