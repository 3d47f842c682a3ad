//! Rust steps of migrations: run after a migration's SQL, inside its transaction.
//!
//! Migration 5 (`sql/0005_row_format.sql`): every `jobs.record`, `services.record` and
//! `nodes.avail` still in format 0 is read through the legacy decoder and written back through
//! the row type in format 1 ([`super::rows`]). Format 0 is the serde JSON the controller's and
//! the core's own types produced up to schema version 4; its legacy decoder is the row types'
//! deserializer, whose pinned names are format 0's names (the fixture
//! `slurmctld-rs/tests/fixtures/store_v4.sql` checks it on a database written by the version 4
//! store). Decoding into a row type and encoding it again never passes through a core type.

use super::backend::{params, Backend, DbError, Value};
use super::rows::{self, JobRow, NodeAvailRow, ServiceRow};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// What a rewrite did to one table.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Rewritten {
    /// Rows rewritten to format [`rows::FORMAT`].
    pub rewritten: usize,
    /// Rows left in format 0 because the legacy decoder could not read them (logged).
    pub unreadable: usize,
}

/// Rewrites the format 0 rows of `table`: `key` names the primary key column (TEXT or
/// INTEGER), `column` the JSON column, `R` the row type. Errors: the database's.
fn rewrite<R: DeserializeOwned + Serialize>(
    tx: &dyn Backend,
    table: &str,
    key: &str,
    column: &str,
) -> Result<Rewritten, DbError> {
    let legacy: Vec<(Value, String)> = tx
        .query(
            &format!("SELECT {key}, {column} FROM {table} WHERE format = ?1 ORDER BY {key}"),
            &params![rows::FORMAT_LEGACY],
        )?
        .into_iter()
        .map(|r| Ok((r.get(0)?, r.get(1)?)))
        .collect::<Result<_, DbError>>()?;
    let up = format!("UPDATE {table} SET {column} = ?1, format = ?2 WHERE {key} = ?3");
    let mut out = Rewritten::default();
    for (id, text) in legacy {
        match serde_json::from_str::<R>(&text) {
            Ok(row) => {
                let json = serde_json::to_string(&row).expect("a store row serializes");
                tx.exec(&up, &params![&json, rows::FORMAT, id.as_param()])?;
                out.rewritten += 1;
            }
            Err(e) => {
                tracing::warn!(table, key = ?id, error = %e, "record left in format 0: the legacy decoder cannot read it");
                out.unreadable += 1;
            }
        }
    }
    Ok(out)
}

/// Migration 5's step: jobs, services and nodes to format 1. Errors: the database's.
pub(super) fn rows_to_format_1(tx: &dyn Backend) -> Result<(), DbError> {
    let jobs = rewrite::<JobRow>(tx, "jobs", "id", "record")?;
    let services = rewrite::<ServiceRow>(tx, "services", "id", "record")?;
    let nodes = rewrite::<NodeAvailRow>(tx, "nodes", "name", "avail")?;
    tracing::info!(
        ?jobs,
        ?services,
        ?nodes,
        "state rows rewritten in the store's row format"
    );
    Ok(())
}
