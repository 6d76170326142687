//! One page of `store migrate` on its way into PostgreSQL: streamed with
//! `COPY herald_import FROM STDIN (FORMAT binary)` into a temporary staging table (the
//! page's cursor as `ord`, its columns as `c0`, `c1`, ...), then moved into place by one
//! statement that selects from it in the source's order, in one transaction (the
//! staging table empties at its commit). COPY has no `ON CONFLICT`; the moving
//! statement has, so copying again stays harmless.

use crate::rows::text;
use herald_store::export::Cell;
use std::pin::pin;
use tokio_postgres::Client;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{ToSql, Type};

/// A column's type in PostgreSQL.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    Text,
    Int,
    Real,
    Bytes,
    Bool,
}

impl Kind {
    fn sql(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::Int => "bigint",
            Kind::Real => "double precision",
            Kind::Bytes => "bytea",
            Kind::Bool => "boolean",
        }
    }

    fn pg(self) -> Type {
        match self {
            Kind::Text => Type::TEXT,
            Kind::Int => Type::INT8,
            Kind::Real => Type::FLOAT8,
            Kind::Bytes => Type::BYTEA,
            Kind::Bool => Type::BOOL,
        }
    }
}

/// (Re)creates the staging table for columns of `kinds`.
pub(crate) async fn prepare(client: &Client, kinds: &[Kind]) -> Result<(), tokio_postgres::Error> {
    let columns: Vec<String> = kinds
        .iter()
        .enumerate()
        .map(|(i, k)| format!(", c{i} {}", k.sql()))
        .collect();
    client
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS herald_import;
             CREATE TEMP TABLE herald_import (ord bigint{}) ON COMMIT DELETE ROWS",
            columns.concat()
        ))
        .await
}

/// The statement moving the staged rows into place: `head`, the staged columns in the
/// source's order, `tail`.
pub(crate) fn mover(head: &str, kinds: &[Kind], tail: &str) -> String {
    let columns: Vec<String> = (0..kinds.len()).map(|i| format!("c{i}")).collect();
    format!(
        "{head} SELECT {} FROM herald_import ORDER BY ord {tail}",
        columns.join(", ")
    )
}

/// Streams `page` (each row its cursor and cells) into the staging table and runs
/// `mover`, in one transaction. Each cell is converted as it is sent, consuming the
/// page, so nothing is held twice.
pub(crate) async fn write(
    client: &mut Client,
    kinds: &[Kind],
    mover: &str,
    page: Vec<(i64, Vec<Cell>)>,
) -> Result<(), tokio_postgres::Error> {
    let tx = client.transaction().await?;
    let sink = tx
        .copy_in("COPY herald_import FROM STDIN (FORMAT binary)")
        .await?;
    let types: Vec<Type> = std::iter::once(Type::INT8)
        .chain(kinds.iter().map(|k| k.pg()))
        .collect();
    let mut writer = pin!(BinaryCopyInWriter::new(sink, &types));
    for (cursor, cells) in page {
        let mut values: Vec<Box<dyn ToSql + Sync + Send>> = Vec::with_capacity(kinds.len() + 1);
        values.push(Box::new(cursor));
        values.extend(kinds.iter().zip(cells).map(|(k, c)| value(*k, c)));
        let refs: Vec<&(dyn ToSql + Sync)> = values.iter().map(|v| &**v as _).collect();
        writer.as_mut().write(&refs).await?;
    }
    writer.as_mut().finish().await?;
    tx.execute(mover, &[]).await?;
    tx.commit().await
}

/// A cell as the column's type wants it (SQLite's typing is loose).
fn value(kind: Kind, cell: Cell) -> Box<dyn ToSql + Sync + Send> {
    match kind {
        Kind::Text => Box::new(match cell {
            Cell::Null => None,
            Cell::Text(t) => Some(match text(&t) {
                std::borrow::Cow::Borrowed(_) => t,
                std::borrow::Cow::Owned(clean) => clean,
            }),
            Cell::Int(i) => Some(i.to_string()),
            Cell::Real(r) => Some(r.to_string()),
            Cell::Bytes(b) => Some(text(&String::from_utf8_lossy(&b)).into_owned()),
        }),
        Kind::Int => Box::new(match cell {
            Cell::Int(i) => Some(i),
            Cell::Real(r) => Some(r as i64),
            Cell::Text(t) => t.trim().parse::<i64>().ok(),
            _ => None,
        }),
        Kind::Real => Box::new(match cell {
            Cell::Real(r) => Some(r),
            Cell::Int(i) => Some(i as f64),
            Cell::Text(t) => t.trim().parse::<f64>().ok(),
            _ => None,
        }),
        Kind::Bytes => Box::new(match cell {
            Cell::Bytes(b) => Some(b),
            Cell::Text(t) => Some(t.into_bytes()),
            Cell::Null => None,
            other => Some(format!("{other:?}").into_bytes()),
        }),
        Kind::Bool => Box::new(match cell {
            Cell::Int(i) => Some(i != 0),
            Cell::Null => None,
            _ => Some(false),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mover_selects_the_staged_columns_in_the_source_s_order() {
        assert_eq!(
            mover(
                "INSERT INTO t (a, b)",
                &[Kind::Int, Kind::Text],
                "ON CONFLICT DO NOTHING"
            ),
            "INSERT INTO t (a, b) SELECT c0, c1 FROM herald_import ORDER BY ord ON CONFLICT DO NOTHING"
        );
    }
}
