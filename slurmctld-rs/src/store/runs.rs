//! One row type for the two tables of things that ran: `job_steps` (a job's steps: `batch`,
//! `extern`, and the numbered `srun` steps `0`, `1`, ...; `sql/0001_init.sql`) and `job_runs`
//! (one row per ended run of a job, the run being its requeue count; `sql/0004_services.sql`).
//! Both have the same eight columns; only the second one, the key within the job, differs in
//! type (the step's name, TEXT; the run's number, INTEGER).

use rusqlite::types::{FromSql, ToSql};
use rusqlite::{params, Connection};

/// One `job_steps` row (`K` = `String`, the default: the step's name) or one `job_runs` row
/// (`K` = `u32`: the run; [`crate::svcstore::RunRow`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRow<K = String> {
    /// Job id.
    pub job_id: u64,
    /// The step's name (`batch`, `0`, ...) or the run's number.
    pub step: K,
    /// Slurm state name (`RUNNING`, `COMPLETED`, `CANCELLED`, a run's `PREEMPTED` or
    /// `REQUEUED`).
    pub state: String,
    /// Exit status of the batch script or the step.
    pub exit_code: i32,
    /// Signal that ended it (0: none).
    pub signal: i32,
    /// Start (s since epoch).
    pub start_time: Option<i64>,
    /// End (s since epoch); `None` while it runs.
    pub end_time: Option<i64>,
    /// Nodes (hostlist, or the batch host).
    pub nodes: String,
}

/// A table of step rows: its name and the name of its key column.
#[derive(Debug, Clone, Copy)]
pub struct StepTable {
    /// Table.
    pub table: &'static str,
    /// Key column within a job.
    pub key: &'static str,
}

/// `job_steps`, keyed by `step` (TEXT).
pub const JOB_STEPS: StepTable = StepTable {
    table: "job_steps",
    key: "step",
};

/// `job_runs`, keyed by `run` (INTEGER).
pub const JOB_RUNS: StepTable = StepTable {
    table: "job_runs",
    key: "run",
};

fn i(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Inserts or replaces `rows` in table `t`. Errors: SQLite's.
pub fn write<K: ToSql>(conn: &Connection, t: StepTable, rows: &[StepRow<K>]) -> rusqlite::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut st = conn.prepare_cached(&format!(
        "INSERT OR REPLACE INTO {} (job_id, {}, state, exit_code, signal, start_time, end_time, nodes) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        t.table, t.key
    ))?;
    for r in rows {
        st.execute(params![
            i(r.job_id),
            r.step,
            r.state,
            r.exit_code,
            r.signal,
            r.start_time,
            r.end_time,
            r.nodes
        ])?;
    }
    Ok(())
}

/// The rows of table `t` that `filter` (an SQL condition over its columns, with `params`)
/// selects, in `order`. Errors: SQLite's.
pub fn read<K: FromSql>(
    conn: &Connection,
    t: StepTable,
    filter: &str,
    order: &str,
    params: &[&dyn ToSql],
) -> rusqlite::Result<Vec<StepRow<K>>> {
    conn.prepare_cached(&format!(
        "SELECT job_id, {}, state, exit_code, signal, start_time, end_time, nodes FROM {} WHERE {filter} ORDER BY {order}",
        t.key, t.table
    ))?
    .query_map(params, |r| {
        Ok(StepRow {
            job_id: r.get::<_, i64>(0)? as u64,
            step: r.get(1)?,
            state: r.get(2)?,
            exit_code: r.get(3)?,
            signal: r.get(4)?,
            start_time: r.get(5)?,
            end_time: r.get(6)?,
            nodes: r.get(7)?,
        })
    })?
    .collect()
}
