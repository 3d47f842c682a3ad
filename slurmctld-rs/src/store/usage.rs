//! Fair-share usage in the store (`sql/0008_usage.sql`): the whole [`Usage`] replaced in a
//! turn's transaction, read back at recovery.

use super::backend::{params, Backend, DbError, Param};
use flotilla_core::assoc::AssocId;
use flotilla_core::fairshare::Usage;

/// Replaces the stored usage with `u`. Errors: the database's.
pub(super) fn write(tx: &dyn Backend, u: &Usage) -> Result<(), DbError> {
    tx.exec("DELETE FROM assoc_usage", &[])?;
    let rows: Vec<Vec<Param<'_>>> = u.raw.iter().map(|(id, v)| params![id.0, *v].to_vec()).collect();
    tx.exec_many("INSERT INTO assoc_usage (id_assoc, usage_raw) VALUES (?1, ?2)", &rows)?;
    let t = |x: Option<u64>| x.map(|v| i64::try_from(v).unwrap_or(i64::MAX));
    tx.exec(
        "INSERT INTO usage_meta (id, last_update, last_reset) VALUES (1, ?1, ?2) \
         ON CONFLICT(id) DO UPDATE SET last_update = excluded.last_update, last_reset = excluded.last_reset",
        &params![t(u.last_update), t(u.last_reset)],
    )?;
    Ok(())
}

/// The stored usage (empty when none was saved). Errors: the database's.
pub(super) fn load(db: &dyn Backend) -> Result<Usage, DbError> {
    let raw = db
        .query("SELECT id_assoc, usage_raw FROM assoc_usage ORDER BY id_assoc", &[])?
        .into_iter()
        .map(|r| Ok((AssocId(r.get(0)?), r.get::<f64>(1)?)))
        .collect::<Result<_, DbError>>()?;
    let meta = db.query_opt("SELECT last_update, last_reset FROM usage_meta WHERE id = 1", &[])?;
    let (last_update, last_reset): (Option<i64>, Option<i64>) = match meta {
        Some(r) => (r.get(0)?, r.get(1)?),
        None => (None, None),
    };
    let t = |x: Option<i64>| x.and_then(|v| u64::try_from(v).ok());
    Ok(Usage { raw, last_update: t(last_update), last_reset: t(last_reset) })
}
