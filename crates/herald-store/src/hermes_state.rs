//! Reading a Hermes home's `state.db`: its sessions with their messages, and its
//! `gateway_routing` table (which session a chat platform's session key is in now).
//! Columns a Hermes version lacks read as empty, so older homes import too. The file is
//! read from a copy (with its write-ahead log), so the Hermes home is never written.

use crate::StoreError;
use crate::sessions::{ImportedMessage, ImportedSession, NewMessage, NewSession};
use rusqlite::{Connection, OpenFlags, Row};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// A Hermes `state.db`, copied into a folder of its own and opened there.
pub struct HermesState {
    conn: Connection,
    session_columns: HashSet<String>,
    message_columns: HashSet<String>,
    copy: PathBuf,
}

/// The session columns read, in order (a missing one reads as NULL).
const SESSION_COLUMNS: &[&str] = &[
    "id",
    "source",
    "model",
    "system_prompt",
    "cwd",
    "parent_session_id",
    "session_key",
    "title",
    "started_at",
    "ended_at",
    "end_reason",
    "input_tokens",
    "output_tokens",
];

const MESSAGE_COLUMNS: &[&str] = &[
    "role",
    "content",
    "tool_call_id",
    "tool_calls",
    "tool_name",
    "reasoning",
    "finish_reason",
    "timestamp",
];

impl HermesState {
    /// Copies `db` (and its `-wal`, when there is one) into `scratch` (created, and
    /// removed when this is dropped) and opens the copy.
    pub fn open(db: &Path, scratch: &Path) -> Result<HermesState, StoreError> {
        let open_error = |e: &dyn std::fmt::Display| StoreError::Open {
            path: db.to_path_buf(),
            reason: e.to_string(),
        };
        std::fs::create_dir_all(scratch).map_err(|e| open_error(&e))?;
        let copy = scratch.join("state.db");
        std::fs::copy(db, &copy).map_err(|e| open_error(&e))?;
        let wal = PathBuf::from(format!("{}-wal", db.display()));
        if wal.is_file() {
            std::fs::copy(&wal, scratch.join("state.db-wal")).map_err(|e| open_error(&e))?;
        }
        let conn = Connection::open_with_flags(
            &copy,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| open_error(&e))?;
        let session_columns = columns(&conn, "sessions").map_err(|e| open_error(&e))?;
        if !session_columns.contains("id") {
            return Err(open_error(&"it has no sessions table"));
        }
        let message_columns = columns(&conn, "messages").map_err(|e| open_error(&e))?;
        Ok(HermesState {
            conn,
            session_columns,
            message_columns,
            copy: scratch.to_path_buf(),
        })
    }

    /// Every session's header (no messages yet), parents before their children.
    pub fn sessions(&self) -> Result<Vec<ImportedSession>, StoreError> {
        let select = select_list(SESSION_COLUMNS, &self.session_columns);
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {select} FROM sessions ORDER BY started_at, rowid"
        ))?;
        let rows = stmt.query_map([], session_of)?;
        let mut all = rows.collect::<Result<Vec<_>, _>>()?;
        // A session without an id cannot be continued; the first of a repeated id wins.
        let mut seen = HashSet::new();
        all.retain(|s| !s.session.id.is_empty() && seen.insert(s.session.id.clone()));
        Ok(parents_first(all))
    }

    /// The live messages of session `id`, in order.
    pub fn messages(&self, id: &str) -> Result<Vec<ImportedMessage>, StoreError> {
        let select = select_list(MESSAGE_COLUMNS, &self.message_columns);
        let live = if self.message_columns.contains("active") {
            "AND active = 1"
        } else {
            ""
        };
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {select} FROM messages WHERE session_id = ?1 {live} ORDER BY id"
        ))?;
        let rows = stmt.query_map([id], |r| {
            Ok(ImportedMessage {
                message: NewMessage {
                    role: clean(r.get(0)?).unwrap_or_default(),
                    content: clean(r.get(1)?),
                    tool_call_id: clean(r.get(2)?),
                    tool_calls: clean(r.get(3)?),
                    tool_name: clean(r.get(4)?),
                    reasoning: clean(r.get(5)?),
                    finish_reason: clean(r.get(6)?),
                },
                timestamp: r.get::<_, Option<f64>>(7)?.unwrap_or_default(),
            })
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// The `gateway_routing` rows of the home's own gateway: (session key, session
    /// id). Hermes scopes each row by its gateway's sessions folder; rows of a
    /// profile's gateway (`.../profiles/NAME/sessions`) are counted in the second value.
    /// An entry whose JSON names no session is left out.
    pub fn routing(&self) -> Result<(Vec<(String, String)>, usize), StoreError> {
        if columns(&self.conn, "gateway_routing")?.is_empty() {
            return Ok((Vec::new(), 0));
        }
        let mut stmt = self.conn.prepare(
            "SELECT scope, session_key, entry_json FROM gateway_routing ORDER BY session_key",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, Option<String>>(0)?.unwrap_or_default(),
                r.get::<_, String>(1)?,
                r.get::<_, Option<String>>(2)?.unwrap_or_default(),
            ))
        })?;
        let mut routes = Vec::new();
        let mut other_scopes = 0;
        for row in rows {
            let (scope, key, entry) = row?;
            if is_profile_scope(&scope) {
                other_scopes += 1;
                continue;
            }
            let session = serde_json::from_str::<serde_json::Value>(&entry)
                .ok()
                .and_then(|v| v.get("session_id")?.as_str().map(str::to_owned));
            if let Some(session) = session.filter(|s| !s.is_empty()) {
                routes.push((key, session));
            }
        }
        Ok((routes, other_scopes))
    }
}

impl Drop for HermesState {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.copy);
    }
}

/// Whether a routing scope (a gateway's sessions folder) is a Hermes profile's.
fn is_profile_scope(scope: &str) -> bool {
    let folder = Path::new(scope);
    folder
        .parent()
        .and_then(Path::parent)
        .and_then(Path::file_name)
        .is_some_and(|n| n == "profiles")
}

fn columns(conn: &Connection, table: &str) -> rusqlite::Result<HashSet<String>> {
    let mut stmt = conn.prepare("SELECT name FROM pragma_table_info(?1)")?;
    let names = stmt.query_map([table], |r| r.get::<_, String>(0))?;
    names.collect()
}

fn select_list(wanted: &[&str], present: &HashSet<String>) -> String {
    wanted
        .iter()
        .map(|c| {
            if present.contains(*c) {
                format!("\"{c}\"")
            } else {
                "NULL".to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Text as another store can keep it: no NUL characters (PostgreSQL refuses them).
fn clean(text: Option<String>) -> Option<String> {
    text.map(|t| {
        if t.contains('\0') {
            t.replace('\0', "")
        } else {
            t
        }
    })
}

fn session_of(r: &Row<'_>) -> rusqlite::Result<ImportedSession> {
    let opt = |i: usize| -> rusqlite::Result<Option<String>> { Ok(clean(r.get(i)?)) };
    let text = |i: usize| -> rusqlite::Result<String> { Ok(opt(i)?.unwrap_or_default()) };
    Ok(ImportedSession {
        session: NewSession {
            id: text(0)?,
            source: text(1)?,
            model: text(2)?,
            system_prompt: text(3)?,
            cwd: text(4)?,
            parent_session_id: opt(5)?,
            session_key: opt(6)?,
        },
        title: opt(7)?,
        started_at: r.get::<_, Option<f64>>(8)?.unwrap_or_default(),
        ended_at: r.get(9)?,
        end_reason: opt(10)?,
        input_tokens: r.get::<_, Option<i64>>(11)?.unwrap_or_default(),
        output_tokens: r.get::<_, Option<i64>>(12)?.unwrap_or_default(),
        messages: Vec::new(),
    })
}

/// Orders sessions so that a parent comes before its children; a parent link to a
/// session that is not there (or a cycle) is dropped.
fn parents_first(all: Vec<ImportedSession>) -> Vec<ImportedSession> {
    let ids: HashSet<String> = all.iter().map(|s| s.session.id.clone()).collect();
    let mut placed: HashSet<String> = HashSet::new();
    let mut out = Vec::with_capacity(all.len());
    let mut waiting = all;
    loop {
        let before = waiting.len();
        let (ready, rest): (Vec<_>, Vec<_>) = waiting.into_iter().partition(|s| {
            s.session
                .parent_session_id
                .as_ref()
                .is_none_or(|p| placed.contains(p) || !ids.contains(p))
        });
        for mut s in ready {
            if let Some(p) = &s.session.parent_session_id
                && !ids.contains(p)
            {
                s.session.parent_session_id = None;
            }
            placed.insert(s.session.id.clone());
            out.push(s);
        }
        waiting = rest;
        if waiting.is_empty() {
            return out;
        }
        if waiting.len() == before {
            for mut s in waiting {
                s.session.parent_session_id = None;
                out.push(s);
            }
            return out;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: &str, parent: Option<&str>) -> ImportedSession {
        ImportedSession {
            session: NewSession {
                id: id.into(),
                parent_session_id: parent.map(str::to_owned),
                ..NewSession::default()
            },
            ..ImportedSession::default()
        }
    }

    #[test]
    fn a_profile_gateway_scope_is_told_from_the_home_one() {
        assert!(!is_profile_scope(""));
        assert!(!is_profile_scope("/home/u/.hermes/sessions"));
        assert!(is_profile_scope("/home/u/.hermes/profiles/work/sessions"));
    }

    #[test]
    fn parents_come_first_and_dangling_or_circular_links_are_dropped() {
        let order = parents_first(vec![
            session("child", Some("parent")),
            session("orphan", Some("gone")),
            session("parent", None),
            session("a", Some("b")),
            session("b", Some("a")),
        ]);
        let ids: Vec<_> = order.iter().map(|s| s.session.id.as_str()).collect();
        assert_eq!(ids, ["orphan", "parent", "child", "a", "b"]);
        assert_eq!(order[0].session.parent_session_id, None);
        assert_eq!(
            order[2].session.parent_session_id.as_deref(),
            Some("parent")
        );
        assert!(
            order[3..]
                .iter()
                .all(|s| s.session.parent_session_id.is_none())
        );
    }
}
