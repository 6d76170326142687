//! Reading a SQLite store's tables page by page, as plain cells: how
//! `herald store migrate --from-sqlite` copies a home into another backend without
//! knowing SQLite's types.

use crate::{StoreError, open_connection};
use rusqlite::OpenFlags;
use rusqlite::types::ValueRef;
use std::path::Path;

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

/// A SQLite database opened read-only for copying.
pub struct Export {
    conn: rusqlite::Connection,
}

impl Export {
    pub fn open(path: &Path) -> Result<Export, StoreError> {
        Ok(Export {
            conn: open_connection(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?,
        })
    }

    /// Whether the database has `table`.
    pub fn has(&self, table: &str) -> Result<bool, StoreError> {
        let n: i64 = self.conn.query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [table],
            |r| r.get(0),
        )?;
        Ok(n > 0)
    }

    /// How many rows `table` has.
    pub fn count(&self, table: &str) -> Result<i64, StoreError> {
        Ok(self
            .conn
            .query_row(&format!("SELECT COUNT(*) FROM \"{table}\""), [], |r| {
                r.get(0)
            })?)
    }

    /// Up to `limit` rows of `select` (a query whose first column is the row's
    /// cursor, taking the cursor to start after as `?1` and the limit as `?2`), each as
    /// its cursor and the other columns' cells.
    pub fn page(
        &self,
        select: &str,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(i64, Vec<Cell>)>, StoreError> {
        let mut stmt = self.conn.prepare_cached(select)?;
        let width = stmt.column_count();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut rows = stmt.query(rusqlite::params![after, limit])?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            let cursor: i64 = row.get(0)?;
            let cells = (1..width)
                .map(|i| row.get_ref(i).map(Cell::of))
                .collect::<rusqlite::Result<Vec<_>>>()?;
            out.push((cursor, cells));
        }
        Ok(out)
    }
}
