//! Fair-share usage in the store (`sql/0008_usage.sql`): the whole [`Usage`] replaced in a
//! turn's transaction, read back at recovery.

use flotilla_core::assoc::AssocId;
use flotilla_core::fairshare::Usage;
use rusqlite::{params, Connection, OptionalExtension, Transaction};

/// Replaces the stored usage with `u`. Errors: SQLite's.
pub(super) fn write(tx: &Transaction<'_>, u: &Usage) -> rusqlite::Result<()> {
    tx.execute("DELETE FROM assoc_usage", [])?;
    let mut ins = tx.prepare_cached("INSERT INTO assoc_usage (id_assoc, usage_raw) VALUES (?1, ?2)")?;
    for (id, v) in &u.raw {
        ins.execute(params![id.0, v])?;
    }
    let t = |x: Option<u64>| x.map(|v| i64::try_from(v).unwrap_or(i64::MAX));
    tx.execute(
        "INSERT INTO usage_meta (id, last_update, last_reset) VALUES (1, ?1, ?2) \
         ON CONFLICT(id) DO UPDATE SET last_update = excluded.last_update, last_reset = excluded.last_reset",
        params![t(u.last_update), t(u.last_reset)],
    )?;
    Ok(())
}

/// The stored usage (empty when none was saved). Errors: SQLite's.
pub(super) fn load(conn: &Connection) -> rusqlite::Result<Usage> {
    let raw = conn
        .prepare("SELECT id_assoc, usage_raw FROM assoc_usage ORDER BY id_assoc")?
        .query_map([], |r| Ok((AssocId(r.get(0)?), r.get::<_, f64>(1)?)))?
        .collect::<Result<_, _>>()?;
    let meta: Option<(Option<i64>, Option<i64>)> = conn
        .query_row("SELECT last_update, last_reset FROM usage_meta WHERE id = 1", [], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let (last_update, last_reset) = meta.unwrap_or((None, None));
    let t = |x: Option<i64>| x.and_then(|v| u64::try_from(v).ok());
    Ok(Usage { raw, last_update: t(last_update), last_reset: t(last_reset) })
}
