//! Reading a SQLite store's tables page by page, as plain cells: how
//! `herald store migrate --from-sqlite` copies a home into another backend without
//! knowing SQLite's types.
//!
//! The source is never written to. A file on its own (a stopped gateway's) is read in
//! place as immutable: no lock, no `-wal` or `-shm` created, nothing changed. A file
//! with a log beside it (`-wal`, `-shm` or `-journal`: a gateway still running, or one
//! that stopped uncleanly), or of an older schema than this build's, is copied into a
//! temporary folder and the copy is brought up to date and read. A file SQLite cannot
//! read, that fails `PRAGMA quick_check`, or that is not a herald store is refused.

use crate::{StoreError, open_connection, open_for_writing};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};

/// One stored value.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Bytes(Vec<u8>),
}

impl Cell {
    fn of(v: ValueRef<'_>) -> Cell {
        match v {
            ValueRef::Null => Cell::Null,
            ValueRef::Integer(i) => Cell::Int(i),
            ValueRef::Real(r) => Cell::Real(r),
            ValueRef::Text(t) => Cell::Text(String::from_utf8_lossy(t).into_owned()),
            ValueRef::Blob(b) => Cell::Bytes(b.to_vec()),
        }
    }
}

/// Which of herald's stores a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `herald.db`: the inbox, its attempts, deliveries and dedup keys.
    Inbox,
    /// `state.db`: sessions, messages, runs and stored responses.
    Sessions,
}

impl Source {
    fn migrations(self) -> &'static [&'static str] {
        match self {
            Source::Inbox => crate::schema::MIGRATIONS,
            Source::Sessions => crate::sessions::MIGRATIONS,
        }
    }

    /// The table every store of this kind has.
    fn table(self) -> &'static str {
        match self {
            Source::Inbox => "inbox",
            Source::Sessions => "sessions",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Source::Inbox => "a herald inbox",
            Source::Sessions => "a herald session store",
        }
    }
}

/// A SQLite store opened for copying, never written to.
pub struct Export {
    conn: Connection,
    /// The copy read instead of the source, removed when the export is dropped.
    _copy: Option<tempfile::TempDir>,
    note: Option<String>,
}

impl Export {
    /// Opens the store of kind `source` at `path` for copying (see the module's
    /// documentation for when a copy is read instead).
    pub fn open(path: &Path, source: Source) -> Result<Export, StoreError> {
        let logged = ["-wal", "-shm", "-journal"]
            .iter()
            .any(|suffix| companion(path, suffix).exists());
        if logged {
            let (dir, copy) = copy_of(path, true)?;
            let mut conn = open_for_writing(&copy).map_err(|e| refused(path, &e.to_string()))?;
            let version = inspect(&conn, path, source)?;
            let mut note = format!(
                "{} has a write-ahead log beside it (a gateway still running, or one that stopped uncleanly): a copy of it is read",
                path.display()
            );
            if version < latest(source) {
                migrate_copy(&mut conn, source, path)?;
                note.push_str(&format!(
                    ", brought from schema version {version} to {}",
                    latest(source)
                ));
            }
            return Ok(Export {
                conn,
                _copy: Some(dir),
                note: Some(note),
            });
        }
        let conn = open_immutable(path)?;
        let version = inspect(&conn, path, source)?;
        if version == latest(source) {
            return Ok(Export {
                conn,
                _copy: None,
                note: None,
            });
        }
        drop(conn);
        let (dir, copy) = copy_of(path, false)?;
        let mut conn = open_for_writing(&copy)?;
        migrate_copy(&mut conn, source, path)?;
        let note = format!(
            "{} has schema version {version}, older than this herald's {}: a copy of it in {} is brought up to date and read",
            path.display(),
            latest(source),
            dir.path().display()
        );
        Ok(Export {
            conn,
            _copy: Some(dir),
            note: Some(note),
        })
    }

    /// How the source is read when not in place (a copy, and why), for the user.
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// Whether the database has `table`.
    pub fn has(&self, table: &str) -> Result<bool, StoreError> {
        has_table(&self.conn, table)
    }

    /// How many rows `table` has.
    pub fn count(&self, table: &str) -> Result<i64, StoreError> {
        Ok(self
            .conn
            .query_row(&format!("SELECT COUNT(*) FROM \"{table}\""), [], |r| {
                r.get(0)
            })?)
    }

    /// Up to `limit` rows and about `max_bytes` of values of `select` (a query whose
    /// first column is the row's cursor, taking the cursor to start after as `?1` and
    /// the limit as `?2`), each as its cursor and the other columns' cells. A row is
    /// measured before it is read out: the page ends before the row that would take it
    /// past `max_bytes`, and a row larger than that on its own is a page alone.
    pub fn page(
        &self,
        select: &str,
        after: i64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<Vec<(i64, Vec<Cell>)>, StoreError> {
        let mut stmt = self.conn.prepare_cached(select)?;
        let width = stmt.column_count();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut rows = stmt.query(rusqlite::params![after, limit])?;
        let (mut out, mut bytes) = (Vec::new(), 0usize);
        while let Some(row) = rows.next()? {
            let size = (1..width)
                .map(|i| row.get_ref(i).map(size_of))
                .sum::<rusqlite::Result<usize>>()?;
            if !out.is_empty() && bytes.saturating_add(size) > max_bytes {
                break;
            }
            bytes = bytes.saturating_add(size);
            let cursor: i64 = row.get(0)?;
            let cells = (1..width)
                .map(|i| row.get_ref(i).map(Cell::of))
                .collect::<rusqlite::Result<Vec<_>>>()?;
            out.push((cursor, cells));
        }
        Ok(out)
    }
}

/// What a value weighs in a page: its bytes, or a machine word.
fn size_of(v: ValueRef<'_>) -> usize {
    match v {
        ValueRef::Text(b) | ValueRef::Blob(b) => b.len(),
        _ => 8,
    }
}

fn latest(source: Source) -> i64 {
    source.migrations().len() as i64
}

/// `path` with `suffix` added (`herald.db-wal`).
fn companion(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// `path` opened read-only as immutable: SQLite takes no lock and creates no file.
/// Only for a file with no log beside it (its committed state is all in the file).
fn open_immutable(path: &Path) -> Result<Connection, StoreError> {
    let uri = format!("file:{}?immutable=1", uri_path(path));
    open_connection(
        Path::new(&uri),
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
    )
    .map_err(|e| refused(path, &e.to_string()))
}

/// A path as a `file:` URI writes it: every byte but unreserved ones and `/`
/// percent-encoded.
fn uri_path(path: &Path) -> String {
    #[cfg(unix)]
    let bytes = {
        use std::os::unix::ffi::OsStrExt;
        path.as_os_str().as_bytes().to_vec()
    };
    #[cfg(not(unix))]
    let bytes = path.to_string_lossy().replace('\\', "/").into_bytes();
    bytes
        .iter()
        .map(|&b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The source's schema version, once it has proved readable and herald's: SQLite
/// reads it, `quick_check` finds nothing wrong, it has its kind's table (or is of an
/// older version), and it is not newer than this build.
fn inspect(conn: &Connection, path: &Path, source: Source) -> Result<i64, StoreError> {
    let check: Vec<String> = conn
        .prepare("PRAGMA quick_check(5)")
        .and_then(|mut s| {
            s.query_map([], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<_>>()
        })
        .map_err(|e| refused(path, &e.to_string()))?;
    if check != ["ok"] {
        return Err(refused(path, &check.join("; ")));
    }
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| refused(path, &e.to_string()))?;
    if version > latest(source) {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found: version,
            supported: latest(source),
        });
    }
    let has = has_table(conn, source.table()).map_err(|e| refused(path, &e.to_string()))?;
    if !has {
        return Err(StoreError::Open {
            path: path.to_path_buf(),
            reason: format!(
                "not {} (schema version {version}, no `{}` table): nothing was copied and the file is left as it was; check the path",
                source.what(),
                source.table()
            ),
        });
    }
    Ok(version)
}

/// A source SQLite cannot read or finds damaged.
fn refused(path: &Path, why: &str) -> StoreError {
    StoreError::Open {
        path: path.to_path_buf(),
        reason: format!(
            "damaged ({why}): nothing was copied and the file is left as it was; repair it (sqlite3 {} '.recover') or restore a backup",
            path.display()
        ),
    }
}

fn has_table(conn: &Connection, table: &str) -> Result<bool, StoreError> {
    let n: i64 = conn.query_row(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [table],
        |r| r.get(0),
    )?;
    Ok(n > 0)
}

/// A copy of `path` (and its `-wal` when `with_log`, which opening the copy folds
/// in) in a new temporary folder (`TMPDIR`), readable by this user only.
fn copy_of(path: &Path, with_log: bool) -> Result<(tempfile::TempDir, PathBuf), StoreError> {
    let failed = |e: std::io::Error| StoreError::Open {
        path: path.to_path_buf(),
        reason: format!("cannot copy it into the temporary folder (TMPDIR): {e}"),
    };
    let dir = tempfile::Builder::new()
        .prefix("herald-migrate-")
        .tempdir()
        .map_err(failed)?;
    let name = path.file_name().unwrap_or(std::ffi::OsStr::new("store.db"));
    let copy = dir.path().join(name);
    let wal = companion(path, "-wal");
    // A gateway still running may checkpoint between the two copies, which would pair
    // a newer file with an older log: the pair is taken again until the file did not
    // change while it was copied (a checkpoint always writes it).
    for _ in 0..COPY_TRIES {
        let before = stamp(path).map_err(failed)?;
        std::fs::copy(path, &copy).map_err(failed)?;
        let _ = std::fs::remove_file(companion(&copy, "-wal"));
        if with_log && wal.exists() {
            std::fs::copy(&wal, companion(&copy, "-wal")).map_err(failed)?;
        }
        if stamp(path).map_err(failed)? == before {
            return Ok((dir, copy));
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    Err(StoreError::Open {
        path: path.to_path_buf(),
        reason: "it kept changing while it was copied (a gateway writes it): stop the gateway and run this again".into(),
    })
}

/// How often a copy of a changing file is tried.
const COPY_TRIES: usize = 5;

/// A file's length and modification time: what a write to it changes.
fn stamp(path: &Path) -> std::io::Result<(u64, Option<std::time::SystemTime>)> {
    let m = std::fs::metadata(path)?;
    Ok((m.len(), m.modified().ok()))
}

/// Brings a copy to this build's schema.
fn migrate_copy(conn: &mut Connection, source: Source, path: &Path) -> Result<(), StoreError> {
    crate::schema::apply(conn, source.migrations()).map_err(|e| StoreError::Open {
        path: path.to_path_buf(),
        reason: format!("its copy could not be brought to this build's schema: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::InboxBackend;

    fn files(dir: &Path) -> Vec<(String, Vec<u8>, std::time::SystemTime)> {
        let mut out: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| {
                let m = e.metadata().unwrap();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).unwrap(),
                    m.modified().unwrap(),
                )
            })
            .collect();
        out.sort();
        out
    }

    fn item(n: usize, payload: String) -> crate::NewInboxItem {
        crate::NewInboxItem {
            route: "r".into(),
            event_type: "push".into(),
            delivery_id: format!("d{n}"),
            received_at_ms: crate::now_ms(),
            profile: None,
            headers: "{}".into(),
            payload,
            prompt: "p".into(),
            deliver: "log".into(),
            deliver_extra: "{}".into(),
            skills: "[]".into(),
            toolsets: None,
        }
    }

    #[tokio::test]
    async fn pages_end_before_the_row_that_would_pass_the_byte_budget_and_a_large_row_goes_alone() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("herald.db");
        let inbox = crate::SqliteInbox::open(&db).unwrap();
        // Distinct characters, so the payloads are kept as they are (not compressed).
        let big: String = (0..5000u32)
            .map(|i| char::from_u32(0x4e00 + (i * 7919) % 20000).unwrap_or('x'))
            .collect();
        for (n, p) in [
            "a".repeat(300),
            "b".repeat(300),
            big,
            "c".repeat(300),
            "d".repeat(300),
        ]
        .into_iter()
        .enumerate()
        {
            inbox.enqueue(item(n, p)).await.unwrap();
        }
        drop(inbox);
        let export = Export::open(&db, Source::Inbox).unwrap();
        let select = "SELECT id, payload FROM inbox WHERE id > ?1 ORDER BY id LIMIT ?2";
        let mut sizes = Vec::new();
        let mut after = 0;
        loop {
            let page = export.page(select, after, 3, 1000).unwrap();
            let Some((last, _)) = page.last() else { break };
            after = *last;
            sizes.push(page.len());
        }
        assert_eq!(sizes, [2, 1, 2]);
        let all = export.page(select, 0, 3, usize::MAX).unwrap();
        assert_eq!(all.len(), 3, "the row limit holds too");
    }

    #[tokio::test]
    async fn a_store_left_with_its_log_is_read_through_a_copy_with_what_the_log_holds() {
        let live = tempfile::tempdir().unwrap();
        let db = live.path().join("herald.db");
        let inbox = crate::SqliteInbox::open(&db).unwrap();
        inbox.enqueue(item(1, "{}".into())).await.unwrap();
        // The files as a gateway that died now leaves them: the entry only in the log.
        assert!(std::fs::metadata(companion(&db, "-wal")).unwrap().len() > 0);
        let crashed = tempfile::tempdir().unwrap();
        for suffix in ["", "-wal", "-shm"] {
            std::fs::copy(
                companion(&db, suffix),
                companion(&crashed.path().join("herald.db"), suffix),
            )
            .unwrap();
        }
        drop(inbox);
        let source = crashed.path().join("herald.db");
        let before = files(crashed.path());
        let export = Export::open(&source, Source::Inbox).unwrap();
        assert_eq!(export.count("inbox").unwrap(), 1);
        assert!(export.note().unwrap().contains("write-ahead log"));
        drop(export);
        assert_eq!(files(crashed.path()), before);
    }

    #[test]
    fn paths_are_percent_encoded_for_the_uri() {
        assert_eq!(
            uri_path(Path::new("/home/a b/h?#%.db")),
            "/home/a%20b/h%3F%23%25.db"
        );
    }
}
