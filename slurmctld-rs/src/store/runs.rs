//! One row type for the two tables of things that ran: `job_steps` (a job's steps: `batch`,
//! `extern`, and the numbered `srun` steps `0`, `1`, ...; `sql/0001_init.sql`) and `job_runs`
//! (one row per ended run of a job, the run being its requeue count; `sql/0004_services.sql`).
//! Both have the same eight columns; only the second one, the key within the job, differs in
//! type (the step's name, TEXT; the run's number, INTEGER).
//!
//! The steps of a job's earlier runs (`job_run_steps`, `sql/0011_run_steps.sql`): a run that
//! ends in a requeue takes its steps there ([`archive_run`]), so that the next run's steps,
//! which reuse the names, never overwrite them.
//!
//! And the steps' usage (`step_usage`, `sql/0009_usage.sql`): one row per (job, step, node),
//! the node daemon's latest report.

use super::backend::{params, Backend, DbError, FromValue, Param};

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
    /// Who killed the step with `scancel JOB.STEP` (Slurm's step `requid`: `sacct` shows
    /// `CANCELLED by <uid>`); `None`: nobody, and always for a run (`job_runs` has no such
    /// column: a run's canceller is its job's).
    pub requid: Option<u32>,
    /// A run's pending reason before it started (`sacct -D -o Reason` of an earlier run:
    /// [`crate::acct::AcctInfo::reason_prev`] as it was); `None` for none, and always for a
    /// step (only `job_runs` has the column).
    pub reason_prev: Option<String>,
    /// An `srun` step's CPUs over its nodes and its memory in MiB (`alloc_cpus`,
    /// `alloc_mem_mib`, `sql/0015_step_cpus.sql`: its TRES `cpu=`, `mem=`); `None`: not
    /// recorded (the batch step, a row from before version 15), and always for a run.
    pub alloc: Option<(u32, u64)>,
}

/// A table of step rows: its name and the name of its key column.
#[derive(Debug, Clone, Copy)]
pub struct StepTable {
    /// Table.
    pub table: &'static str,
    /// Key column within a job.
    pub key: &'static str,
    /// Whether it has the `requid` column (`sql/0013_exit_details.sql`: the step tables).
    pub requid: bool,
    /// Whether it has the `state_reason_prev` column (`sql/0014_reason_prev.sql`: `job_runs`).
    pub reason: bool,
    /// Whether it has the `alloc_cpus` and `alloc_mem_mib` columns (`sql/0015_step_cpus.sql`:
    /// the step tables).
    pub alloc: bool,
}

/// `job_steps`, keyed by `step` (TEXT).
pub const JOB_STEPS: StepTable = StepTable {
    table: "job_steps",
    key: "step",
    requid: true,
    reason: false,
    alloc: true,
};

/// `job_run_steps` (the steps of earlier runs), keyed within a run by `step`; its `run`
/// column is filtered on ([`run_steps`]) and written by [`archive_run`].
pub const JOB_RUN_STEPS: StepTable = StepTable {
    table: "job_run_steps",
    key: "step",
    requid: true,
    reason: false,
    alloc: true,
};

/// `job_runs`, keyed by `run` (INTEGER).
pub const JOB_RUNS: StepTable = StepTable {
    table: "job_runs",
    key: "run",
    requid: false,
    reason: true,
    alloc: false,
};

fn i(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The key of a step table's row within its job: a step's name or a run's number.
pub trait StepKey: FromValue {
    /// As a statement parameter.
    fn param(&self) -> Param<'_>;
}

impl StepKey for String {
    fn param(&self) -> Param<'_> {
        Param::Text(self)
    }
}

impl StepKey for u32 {
    fn param(&self) -> Param<'_> {
        Param::from(*self)
    }
}

/// Inserts or replaces `rows` in table `t`. Errors: the database's.
pub fn write<K: StepKey>(db: &dyn Backend, t: StepTable, rows: &[StepRow<K>]) -> Result<(), DbError> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut cols = vec!["job_id", t.key, "state", "exit_code", "signal", "start_time", "end_time", "nodes"];
    if t.requid {
        cols.push("requid");
    }
    if t.reason {
        cols.push("state_reason_prev");
    }
    if t.alloc {
        cols.extend(["alloc_cpus", "alloc_mem_mib"]);
    }
    let sql = db.dialect().replace(t.table, &cols, &["job_id", t.key]);
    let sets: Vec<Vec<Param<'_>>> = rows.iter().map(|r| step_params(r, t)).collect();
    db.exec_many(&sql, &sets)
}

/// A row's statement parameters in the tables' column order: job id, key, state, exit code,
/// signal, start, end, nodes, then the canceller where `t` has the column, then the pending
/// reason where it has that one, then the CPUs and memory where it has them.
fn step_params<K: StepKey>(r: &StepRow<K>, t: StepTable) -> Vec<Param<'_>> {
    let mut p = vec![
        Param::from(i(r.job_id)),
        r.step.param(),
        Param::from(&r.state),
        Param::from(r.exit_code),
        Param::from(r.signal),
        Param::from(r.start_time),
        Param::from(r.end_time),
        Param::from(&r.nodes),
    ];
    if t.requid {
        p.push(Param::from(r.requid.map(i64::from)));
    }
    if t.reason {
        p.push(Param::from(r.reason_prev.as_deref().unwrap_or("")));
    }
    if t.alloc {
        p.push(Param::from(r.alloc.map(|a| i64::from(a.0))));
        p.push(Param::from(r.alloc.map(|a| i(a.1))));
    }
    p
}

/// The rows of table `t` that `filter` (an SQL condition over its columns, with `params`)
/// selects, in `order`. Errors: the database's.
pub fn read<K: StepKey>(
    db: &dyn Backend,
    t: StepTable,
    filter: &str,
    order: &str,
    params: &[Param<'_>],
) -> Result<Vec<StepRow<K>>, DbError> {
    let mut out = Vec::new();
    db.query_each(
        &format!(
            "SELECT job_id, {}, state, exit_code, signal, start_time, end_time, nodes, {}, {}, {} FROM {} WHERE {filter} ORDER BY {order}",
            t.key,
            if t.requid { "requid" } else { "NULL" },
            if t.reason { "state_reason_prev" } else { "''" },
            if t.alloc { "alloc_cpus, alloc_mem_mib" } else { "NULL, NULL" },
            t.table
        ),
        params,
        &mut |r| {
            out.push(StepRow {
                job_id: r.get::<i64>(0)? as u64,
                step: r.get(1)?,
                state: r.get(2)?,
                exit_code: r.get(3)?,
                signal: r.get(4)?,
                start_time: r.get(5)?,
                end_time: r.get(6)?,
                nodes: r.get(7)?,
                requid: r.get(8)?,
                reason_prev: Some(r.get::<String>(9)?).filter(|s| !s.is_empty()),
                alloc: match (r.get::<Option<i64>>(10)?, r.get::<Option<i64>>(11)?) {
                    (Some(c), Some(m)) => Some((u32::try_from(c).unwrap_or(u32::MAX), u64::try_from(m).unwrap_or(0))),
                    _ => None,
                },
            });
            Ok(())
        },
    )?;
    Ok(out)
}

/// The steps of one run that ended in a requeue: the run's number (the job's requeue count
/// while it ran: `job_runs.run`) and the rows taken at its end that were not written yet (its
/// batch step, `srun` steps that ended with it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSteps {
    /// Job id.
    pub job_id: u64,
    /// The run's number.
    pub run: u32,
    /// Rows of this run not yet in `job_steps`.
    pub rows: Vec<StepRow>,
}

/// Moves a finished run's steps into `job_run_steps`: the job's `job_steps` rows (every one
/// belongs to that run: the previous run's went at its own end, and the next run's are
/// written after this in the same commit), then `r.rows`, which replace a row of the same
/// name. Errors: the database's.
pub fn archive_run(db: &dyn Backend, r: &RunSteps) -> Result<(), DbError> {
    let (job, run) = (i(r.job_id), i64::from(r.run));
    db.exec("DELETE FROM job_run_steps WHERE job_id = ?1 AND run = ?2", &params![job, run])?;
    db.exec(
        "INSERT INTO job_run_steps (job_id, run, step, state, exit_code, signal, start_time, end_time, nodes, requid, alloc_cpus, alloc_mem_mib) \
         SELECT job_id, CAST(?2 AS BIGINT), step, state, exit_code, signal, start_time, end_time, nodes, requid, alloc_cpus, alloc_mem_mib \
         FROM job_steps WHERE job_id = ?1",
        &params![job, run],
    )?;
    db.exec("DELETE FROM job_steps WHERE job_id = ?1", &params![job])?;
    if r.rows.is_empty() {
        return Ok(());
    }
    let cols = ["job_id", "run", "step", "state", "exit_code", "signal", "start_time", "end_time", "nodes", "requid", "alloc_cpus", "alloc_mem_mib"];
    let sql = db.dialect().replace(JOB_RUN_STEPS.table, &cols, &["job_id", "run", "step"]);
    let sets: Vec<Vec<Param<'_>>> = r
        .rows
        .iter()
        .map(|s| {
            let mut p = step_params(s, JOB_RUN_STEPS);
            p.insert(1, Param::from(run));
            p
        })
        .collect();
    db.exec_many(&sql, &sets)
}

/// The steps of run `run` of `job_id` kept in `job_run_steps` (empty for a run that ended
/// before version 11 of the schema, or the current run). Errors: the database's.
pub fn run_steps(db: &dyn Backend, job_id: u64, run: u32) -> Result<Vec<StepRow>, DbError> {
    read(db, JOB_RUN_STEPS, "job_id = ?1 AND run = ?2", "step", &params![i(job_id), i64::from(run)])
}

/// Inserts or replaces the usage reports `rows` (`step_usage`, one row per job, step and
/// node: a newer report replaces the older one), except that a poll taken no later than the
/// step's end report (`done`) never replaces it: a node daemon may read a poll just before the
/// step ends and send it just after the end. Errors: the database's.
pub fn write_usage(db: &dyn Backend, rows: &[flotilla_proto::StepUsage]) -> Result<(), DbError> {
    if rows.is_empty() {
        return Ok(());
    }
    let sets: Vec<Vec<Param<'_>>> = rows
        .iter()
        .map(|r| {
            let u = &r.usage;
            params![
                i(r.job_id),
                &r.step,
                &r.node,
                i(u.user_usec),
                i(u.system_usec),
                i(u.total_usec),
                i(u.max_rss),
                i(u.max_vmsize),
                u.ntasks,
                u.max_rss_task,
                i(u.min_cpu_usec),
                u.min_cpu_task,
                i(u.energy_j),
                r.done,
                r.at
            ]
            .to_vec()
        })
        .collect();
    db.exec_many(
        "INSERT INTO step_usage (job_id, step, node, user_usec, system_usec, total_usec, max_rss, \
         max_vmsize, ntasks, max_rss_task, min_cpu_usec, min_cpu_task, energy_j, done, at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15) \
         ON CONFLICT (job_id, step, node) DO UPDATE SET user_usec = excluded.user_usec, \
         system_usec = excluded.system_usec, total_usec = excluded.total_usec, max_rss = excluded.max_rss, \
         max_vmsize = excluded.max_vmsize, ntasks = excluded.ntasks, max_rss_task = excluded.max_rss_task, \
         min_cpu_usec = excluded.min_cpu_usec, min_cpu_task = excluded.min_cpu_task, energy_j = excluded.energy_j, \
         done = excluded.done, at = excluded.at \
         WHERE NOT (step_usage.done = 1 AND excluded.done = 0 AND excluded.at <= step_usage.at)",
        &sets,
    )
}

/// The usage of every step of job `job_id`, combined over its nodes
/// ([`flotilla_proto::StepStats::combine`]), by step name. Errors: the database's.
pub fn read_usage(db: &dyn Backend, job_id: u64) -> Result<std::collections::BTreeMap<String, flotilla_proto::StepStats>, DbError> {
    Ok(read_usage_where(db, "job_id = ?1", &params![i(job_id)])?.remove(&job_id).unwrap_or_default())
}

/// The usage of every step of the jobs `filter` (an SQL condition over `step_usage`'s
/// columns, with `params`) selects, combined over its nodes as [`read_usage`] does, by job
/// id then step name: one statement for any number of jobs (`sacct` over 150,000 jobs reads
/// it once, not once per job). Errors: the database's.
pub fn read_usage_where(
    db: &dyn Backend,
    filter: &str,
    params: &[Param<'_>],
) -> Result<std::collections::HashMap<u64, std::collections::BTreeMap<String, flotilla_proto::StepStats>>, DbError> {
    let rows = db
        .query(
            &format!(
                "SELECT job_id, step, node, user_usec, system_usec, total_usec, max_rss, max_vmsize, ntasks, \
                 max_rss_task, min_cpu_usec, min_cpu_task, energy_j, done FROM step_usage WHERE {filter} \
                 ORDER BY job_id, step, node"
            ),
            params,
        )?
        .into_iter()
        .map(|r| {
            let u = |k: usize| r.get::<i64>(k).map(|v| v.max(0) as u64);
            Ok((
                r.get::<i64>(0)? as u64,
                r.get::<String>(1)?,
                r.get::<String>(2)?,
                flotilla_proto::Usage {
                    user_usec: u(3)?,
                    system_usec: u(4)?,
                    total_usec: u(5)?,
                    max_rss: u(6)?,
                    max_vmsize: u(7)?,
                    ntasks: r.get(8)?,
                    max_rss_task: r.get(9)?,
                    min_cpu_usec: u(10)?,
                    min_cpu_task: r.get(11)?,
                    energy_j: u(12)?,
                },
                r.get::<bool>(13)?,
            ))
        })
        .collect::<Result<Vec<_>, DbError>>()?;
    type ByStep = std::collections::BTreeMap<String, Vec<(String, flotilla_proto::Usage, bool)>>;
    let mut by_job: std::collections::HashMap<u64, ByStep> = Default::default();
    for (job, step, node, u, done) in rows {
        by_job.entry(job).or_default().entry(step).or_default().push((node, u, done));
    }
    Ok(by_job
        .into_iter()
        .map(|(job, by_step)| {
            let stats = by_step
                .into_iter()
                .filter_map(|(step, v)| {
                    flotilla_proto::StepStats::combine(v.iter().map(|(n, u, d)| (n.as_str(), u, *d))).map(|s| (step, s))
                })
                .collect();
            (job, stats)
        })
        .collect())
}
