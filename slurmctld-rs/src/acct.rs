//! Job accounting for `sacct`: what the controller writes into `acct_jobs` and `job_steps`
//! (the state database, `sql/0001_init.sql` + `sql/0002_acct.sql`) and how an accounting query reads
//! them back.
//!
//! One `acct_jobs` row per job id is the job's *latest record*, as Slurm's `sacct` shows it
//! without `--duplicates`:
//! - written at submission (a job is in sacct from the moment `sbatch` returns; clients poll
//!   it right away, CONTRACT.md §A-7), when it becomes eligible, starts, ends or is cancelled;
//! - a requeue writes the run's record as `REQUEUED` (kept in `job_runs`, `sacct -D`) and the
//!   job's new record at once (`PENDING`); a query with a time window (`sacct` without `-j`)
//!   shows a job's newest record *in the window*, so a requeued job that was not eligible
//!   again shows its `REQUEUED` run there (goldens 0282, goldens-extra 1015/1016);
//! - the job's `ExitCode` is the batch script's `status:signal`, except `0:0` for jobs
//!   cancelled, timed out, requeued or preempted (their batch step carries the signal), and
//!   `1:0` for a job that failed at submission (Slurm's `BadConstraints`).
//!
//! Steps are read generically from `job_steps` (`batch`, `extern`, and the numbered steps
//! `srun` writes). The controller writes the batch step when the script starts (`RUNNING`)
//! and when it ends: `COMPLETED 0:0`, `FAILED N:0`, or `CANCELLED 0:S` when a signal ended it
//! (goldens 0284, 0298).
//!
//! Nothing here reads a clock: `now` is passed in.

use crate::job::{JobRecord, JobState};
use flotilla_core::hostlist::compress_sorted;
use flotilla_proto::{AcctJob, AcctQuery, AcctStep};
use crate::store::backend::{params, Backend, DbError, Param, Row};
use std::collections::{BTreeMap, HashMap};

/// What accounting keeps about a job beyond its record's scheduling fields. Stored inside the
/// job record ([`crate::store::rows::AcctInfoRow`]; records written before it existed load with
/// none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AcctInfo {
    /// When the job (this run) became eligible (s); `None`: not yet.
    pub eligible_time: Option<i64>,
    /// Uid that cancelled it.
    pub cancelled_by: Option<u32>,
    /// Nodes of the last run.
    pub alloc_nodes: u32,
    /// CPUs of the last run.
    pub alloc_cpus: u32,
    /// Whole GPUs of the last run.
    pub alloc_gpus: u32,
    /// Memory of the last run (MiB).
    pub alloc_mem_mib: u64,
    /// CPUs on the batch host.
    pub batch_cpus: u32,
    /// Whole GPUs on the batch host.
    pub batch_gpus: u32,
    /// Memory on the batch host (MiB).
    pub batch_mem_mib: u64,
    /// The job's derived exit code as the controller has it (`scontrol show job -d`
    /// `DerivedExitCode=`): the highest wait status ([`wait_status`]) of its srun steps so
    /// far, batch and extern steps left out (Slurm 22.05 `step_mgr.c`
    /// `_internal_step_complete`); 0 for none. Kept over a requeue, as Slurm's `derived_ec`.
    pub derived_ec: i32,
    /// The derived exit code the accounting record holds: [`Self::derived_ec`] as it was when
    /// the job ended (Slurm writes the job's database row at its end, `job_completion_logger`;
    /// a step that ends later, such as one its job's `scancel` killed, changes only the
    /// controller's value: seen on the reference, `scontrol` `0:15` and `sacct` `0:0`; not in
    /// goldens-extra 0341, as here the node's report of the job's end can come before srun's
    /// report of that step).
    pub acct_derived_ec: i32,
    /// The last pending reason other than `None`, `Priority` and `Resources` the scheduler
    /// gave the job before its current run started (Slurm 22.05's `state_reason_prev_db`, set
    /// by `build_job_queue` on each pass and sent to the database with the job's start; cleared
    /// at a requeue): `sacct -o Reason`. `None` for none, and for a job that has not started.
    pub reason_prev: Option<flotilla_core::sched::Reason>,
}

pub use flotilla_proto::acct::{exit_pair, wait_status};

/// One `acct_jobs` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcctRow {
    /// The record as the wire carries it (steps empty).
    pub job: AcctJob,
    /// The batch host's share: CPUs, GPUs, MiB.
    pub batch: (u32, u32, u64),
}

/// One `job_steps` row: the batch step the controller writes, or an `srun` step (the same
/// row type as a `job_runs` row, [`crate::store::runs`]).
pub use crate::store::StepRow;

/// Slurm: a job is eligible once it is not held, its dependencies are met and its begin time
/// has come. Pending jobs only.
fn eligible(rec: &JobRecord, now: i64) -> bool {
    rec.state == JobState::Pending
        && rec.spec.held.is_none()
        && !rec.spec.dependency_pending
        && rec.reason.as_deref() != Some("DependencyNeverSatisfied")
        && rec.spec.begin_time.is_none_or(|b| b as i64 <= now)
}

/// Records the moment a pending job becomes eligible (its begin time when that is what it
/// waited for). Returns true when the accounting row must be rewritten.
pub fn refresh_eligible(rec: &mut JobRecord, now: i64) -> bool {
    if rec.acct.eligible_time.is_some() || !eligible(rec, now) {
        return false;
    }
    let t = rec.spec.begin_time.map_or(now, |b| (b as i64).min(now)).max(rec.submit_time);
    rec.acct.eligible_time = Some(t);
    true
}

/// A job failed at submission (after getting an id): Slurm accounts it as eligible at once.
pub fn failed_at_submit(rec: &mut JobRecord, now: i64) {
    rec.acct.eligible_time = Some(now);
}

/// The run starts: keeps its allocation (the record's allocations are released at the end,
/// the accounting keeps them).
///
/// Memory is what the job was given on each node, as Slurm's select/cons_tres sets
/// `memory_allocated` (22.05 `cons_common/job_test.c` `_job_test`, after the node choice):
/// per CPU times the node's CPUs it got, per node as asked, the node's memory for `--mem=0`.
/// An `--exclusive` job holds the whole node in the core (no one else may use its memory),
/// but was given only that ([`JobRecord::mem_per_node_mib`], set at its start: 64 CPUs x
/// `DefMemPerCPU=1024` is `mem=64G` in `AllocTRES`, golden 0285), never more than the node's.
pub fn on_start(rec: &mut JobRecord, now: i64) {
    let exclusive = rec.exclusive.then_some(rec.mem_per_node_mib);
    let mem = |x: &flotilla_core::sched::Allocation| match exclusive {
        Some(m) => x.part.mem_mib.min(m),
        None => x.part.mem_mib,
    };
    let a = &mut rec.acct;
    a.eligible_time.get_or_insert(now);
    a.alloc_nodes = rec.allocs.len() as u32;
    a.alloc_cpus = rec.allocs.iter().fold(0u32, |n, x| n.saturating_add(cpus(x.part.cpu_milli)));
    a.alloc_gpus = rec.allocs.iter().fold(0u32, |n, x| n.saturating_add(x.part.gpus.count()));
    a.alloc_mem_mib = rec.allocs.iter().fold(0u64, |n, x| n.saturating_add(mem(x)));
    let first = rec.allocs.first();
    a.batch_cpus = first.map_or(0, |x| cpus(x.part.cpu_milli));
    a.batch_gpus = first.map_or(0, |x| x.part.gpus.count());
    a.batch_mem_mib = first.map_or(0, mem);
}

/// Whole CPUs of milli-CPUs, saturating (a request may ask for absurd amounts; accounting
/// never panics on it).
fn cpus(milli: u64) -> u32 {
    u32::try_from(milli / 1000).unwrap_or(u32::MAX)
}

/// The job is requeued: the finished run's record (`run_state`: `REQUEUED`, or `PREEMPTED`
/// when inference preempted it) and its batch step, taken before the record is reset.
/// `step_state`: how the batch step ended (`CANCELLED` when the controller stopped it,
/// `NODE_FAIL` when its node was lost).
pub fn requeued_rows(rec: &JobRecord, now: i64, step_state: Option<&str>, run_state: &str) -> (AcctRow, Option<StepRow>) {
    let mut row = job_row(rec);
    row.job.state = run_state.into();
    row.job.exit_code = 0;
    row.job.signal = 0;
    // A run `scontrol requeue` stopped ended at the requeue (`_job_requeue_op`), not when its
    // nodes were done; its batch step ends when it did.
    row.job.end_time = Some(if rec.requeued_at_stop() { rec.end_time.unwrap_or(now) } else { now });
    row.job.cancelled_by = None;
    let step = rec.start_time.map(|st| StepRow {
        job_id: rec.id,
        step: "batch".into(),
        state: step_state.map_or_else(|| step_state_of(rec.exit_code, rec.exit_signal).to_string(), str::to_string),
        exit_code: rec.exit_code,
        signal: rec.exit_signal,
        start_time: Some(st),
        end_time: Some(now),
        nodes: rec.nodes.first().cloned().unwrap_or_default(),
        requid: None,
        reason_prev: None,
        alloc: None,
    });
    (row, step)
}

/// The row a job's current record gives. A requeued job's record is `PENDING` at once, held
/// or not (Slurm 22.05 writes the next run's record at the requeue: goldens-extra 1014,
/// 1016 `sacct -j`); the `REQUEUED` run is an earlier record, which `sacct`'s time window
/// shows in its place while the new record was never eligible ([`query`]).
pub fn current_row(rec: &JobRecord) -> Option<AcctRow> {
    Some(job_row(rec))
}

fn step_state_of(exit_code: i32, signal: i32) -> &'static str {
    if signal != 0 {
        "CANCELLED"
    } else if exit_code != 0 {
        "FAILED"
    } else {
        "COMPLETED"
    }
}

/// The batch step of the current run: `RUNNING` while the script runs, its end state once
/// the job has finished; `None` when the job never ran.
pub fn batch_step_row(rec: &JobRecord) -> Option<StepRow> {
    let start = rec.start_time?;
    let (state, end) = match rec.state {
        JobState::Pending | JobState::Deadline => return None,
        JobState::Running => ("RUNNING", None),
        JobState::Completing | JobState::Completed | JobState::Failed | JobState::Cancelled | JobState::Timeout => {
            (step_state_of(rec.exit_code, rec.exit_signal), rec.end_time)
        }
        JobState::OutOfMemory => ("OUT_OF_MEMORY", rec.end_time),
        JobState::NodeFail => ("NODE_FAIL", rec.end_time),
        JobState::Preempted => ("CANCELLED", rec.end_time),
    };
    Some(StepRow {
        job_id: rec.id,
        step: "batch".into(),
        state: state.into(),
        exit_code: rec.exit_code,
        signal: rec.exit_signal,
        start_time: Some(start),
        end_time: end,
        nodes: rec.nodes.first().cloned().unwrap_or_default(),
        requid: None,
        reason_prev: None,
        alloc: None,
    })
}

fn job_row(rec: &JobRecord) -> AcctRow {
    let state = match (rec.stopped_for_good(), rec.state) {
        // A job stopped by `scancel` or its time limit is written as it ends at the stop
        // (`JobRecord::stopped_for_good`), its nodes still ending it.
        (Some(end), _) => end,
        // Slurm's accounting sees COMPLETING as still running.
        (None, JobState::Completing) => JobState::Running,
        (None, s) => s,
    };
    // A run `scontrol requeue` stopped is written `REQUEUED` at the requeue, ended then
    // (`JobRecord::requeued_at_stop`), `0:0` as every requeued run.
    let requeued = rec.requeued_at_stop();
    let (exit_code, signal) = match state {
        _ if requeued => (0, 0),
        JobState::Cancelled | JobState::Timeout | JobState::Preempted | JobState::NodeFail => (0, 0),
        // Slurm's accounting stores an exit code of 1 that it set itself (a job failed before
        // it ran, a missed deadline) as exit status 1, not as signal 1 (`as_mysql_job.c`).
        JobState::Failed | JobState::Deadline if rec.start_time.is_none() => (1, 0),
        _ => (rec.exit_code, rec.exit_signal),
    };
    // A node range asked for its minimum, whatever it got (`ReqTRES` `node=2` for `-N2-5`).
    let req_nodes = if rec.spec.request.nodes_max.is_some() { rec.spec.request.nodes.unwrap_or(1) } else { rec.num_nodes }.max(1);
    let one_task = rec.one_task_request();
    // `ReqTRES` is the request as submitted: an `--exclusive` job's record holds what it was
    // given at its start (every GPU and CPU of the node, `whole_node_tres`), its request
    // does not (goldens-extra 1017: `billing=1,cpu=1,mem=1G,node=1`).
    let req_mem = if rec.exclusive { rec.spec.request.mem_mib_per_node } else { rec.mem_per_node_mib };
    let a = &rec.acct;
    let ran = rec.start_time.is_some() || rec.restarts > 0;
    AcctRow {
        job: AcctJob {
            job_id: rec.id,
            array_job_id: rec.array_job_id,
            array_task_id: if rec.is_array_meta() { None } else { rec.array_task_id },
            array_task_str: rec.array_task_str(),
            name: rec.name.clone(),
            user: rec.user.clone(),
            uid: rec.uid,
            gid: rec.gid,
            account: rec.account.clone(),
            qos: rec.qos.clone(),
            partition: rec.partition.clone(),
            state: if requeued { "REQUEUED".to_string() } else { state.as_str().to_string() },
            cancelled_by: if state == JobState::Cancelled { a.cancelled_by } else { None },
            exit_code,
            signal,
            submit_time: rec.submit_time,
            eligible_time: a.eligible_time,
            start_time: rec.start_time,
            end_time: rec.end_time,
            time_limit_min: rec.time_limit_min,
            nodes: compress_sorted(&rec.nodes),
            // A requeued job's record keeps its last run's allocation, which that run's
            // record shows (`query`; a record that did not start shows none).
            alloc_nodes: if ran { a.alloc_nodes } else { 0 },
            alloc_cpus: if ran { a.alloc_cpus } else { 0 },
            alloc_gpus: if ran { a.alloc_gpus } else { 0 },
            alloc_mem_mib: if ran { a.alloc_mem_mib } else { 0 },
            req_nodes,
            req_cpus: if one_task { rec.cpus_per_task.max(1) } else { cpus(rec.spec.request.cpu_milli_per_node).saturating_mul(req_nodes) },
            req_gpus: if rec.exclusive || rec.spec.request.nodes_max.is_some() { rec.spec.request.gpus } else { rec.gpus },
            // One task's memory per CPU when only its CPUs were asked for (`mem=1G`).
            req_mem_mib: match rec.mem_per_cpu_mib {
                Some(m) if one_task && !rec.exclusive => m.saturating_mul(u64::from(rec.cpus_per_task.max(1))),
                _ => req_mem.saturating_mul(u64::from(req_nodes)),
            },
            restarts: rec.restarts,
            work_dir: rec.work_dir.clone(),
            comment: rec.comment.clone().unwrap_or_default(),
            steps: Vec::new(),
            show_job: true,
            constraints: rec.features.clone().unwrap_or_default(),
            derived_exit: exit_pair(a.acct_derived_ec),
            reason_prev: a.reason_prev.map(|r| r.as_str().to_string()),
        },
        batch: (a.batch_cpus, a.batch_gpus, a.batch_mem_mib),
    }
}

fn i(v: u64) -> i64 {
    v as i64
}

/// The columns of `acct_jobs`, in the order [`write`] binds and [`read_row`] reads them.
const ACCT_COLS: &[&str] = &[
    "job_id", "array_job_id", "array_task_id", "name", "\"user\"", "uid", "account", "partition", "state", "exit_code",
    "signal", "submit_time", "start_time", "end_time", "time_limit_min", "nodes", "alloc_cpus", "alloc_gpus",
    "alloc_mem_mib", "restarts", "eligible_time", "cancelled_by", "gid", "qos", "alloc_nodes", "req_nodes", "req_cpus",
    "req_gpus", "req_mem_mib", "batch_cpus", "batch_gpus", "batch_mem_mib", "work_dir", "comment", "array_task_str",
    "constraints", "derived_ec", "state_reason_prev",
];

/// Writes accounting rows inside the commit's transaction: `rows` (snapshots taken at the
/// event, e.g. a requeue) first, then `current` (rows of current records, which win when both
/// name a job), then step rows.
pub fn write(db: &dyn Backend, rows: &[AcctRow], current: &[AcctRow], steps: &[StepRow]) -> Result<(), DbError> {
    let sql = db.dialect().replace("acct_jobs", ACCT_COLS, &["job_id"]);
    let sets: Vec<Vec<Param<'_>>> = rows
        .iter()
        .chain(current)
        .map(|r| {
            let j = &r.job;
            params![
                i(j.job_id),
                j.array_job_id.map(i),
                j.array_task_id,
                &j.name,
                &j.user,
                j.uid,
                &j.account,
                &j.partition,
                &j.state,
                j.exit_code,
                j.signal,
                j.submit_time,
                j.start_time,
                j.end_time,
                j.time_limit_min,
                &j.nodes,
                j.alloc_cpus,
                j.alloc_gpus,
                i(j.alloc_mem_mib),
                j.restarts,
                j.eligible_time,
                j.cancelled_by,
                j.gid,
                &j.qos,
                j.alloc_nodes,
                j.req_nodes,
                j.req_cpus,
                j.req_gpus,
                i(j.req_mem_mib),
                r.batch.0,
                r.batch.1,
                i(r.batch.2),
                &j.work_dir,
                &j.comment,
                &j.array_task_str,
                &j.constraints,
                wait_status(j.derived_exit.0, j.derived_exit.1),
                j.reason_prev.as_deref().unwrap_or(""),
            ]
            .to_vec()
        })
        .collect();
    db.exec_many(&sql, &sets)?;
    crate::store::runs::write(db, crate::store::runs::JOB_STEPS, steps)
}

fn read_row(r: &Row) -> Result<AcctRow, DbError> {
    Ok(AcctRow {
        job: AcctJob {
            job_id: r.get::<i64>(0)? as u64,
            array_job_id: r.get::<Option<i64>>(1)?.map(|v| v as u64),
            array_task_id: r.get(2)?,
            name: r.get(3)?,
            user: r.get(4)?,
            uid: r.get(5)?,
            account: r.get(6)?,
            partition: r.get(7)?,
            state: r.get(8)?,
            exit_code: r.get(9)?,
            signal: r.get(10)?,
            submit_time: r.get(11)?,
            start_time: r.get(12)?,
            end_time: r.get(13)?,
            time_limit_min: r.get(14)?,
            nodes: r.get(15)?,
            alloc_cpus: r.get(16)?,
            alloc_gpus: r.get(17)?,
            alloc_mem_mib: r.get::<i64>(18)? as u64,
            restarts: r.get(19)?,
            eligible_time: r.get(20)?,
            cancelled_by: r.get(21)?,
            gid: r.get(22)?,
            qos: r.get(23)?,
            alloc_nodes: r.get(24)?,
            req_nodes: r.get(25)?,
            req_cpus: r.get(26)?,
            req_gpus: r.get(27)?,
            req_mem_mib: r.get::<i64>(28)? as u64,
            work_dir: r.get(32)?,
            comment: r.get(33)?,
            array_task_str: r.get(34)?,
            steps: Vec::new(),
            show_job: true,
            constraints: r.get(35)?,
            derived_exit: exit_pair(r.get(36)?),
            reason_prev: Some(r.get::<String>(37)?).filter(|s| !s.is_empty()),
        },
        batch: (r.get(29)?, r.get(30)?, r.get::<i64>(31)? as u64),
    })
}

/// Whether a job's record falls in the query's time window and states (Slurm 22.05's
/// `setup_job_cond_limits` / `_state_time_string`, see [`AcctQuery`]).
pub fn in_window(j: &AcctJob, q: &AcctQuery) -> bool {
    let (start, end) = (q.start, q.end);
    if q.states.is_empty() {
        if start.is_none() && end.is_none() {
            return true;
        }
        let Some(el) = j.eligible_time else { return false };
        return end.is_none_or(|e| el < e) && start.is_none_or(|s| j.end_time.is_none_or(|t| t >= s));
    }
    q.states.iter().any(|s| match s.as_str() {
        "PENDING" => {
            let Some(el) = j.eligible_time else { return false };
            let left = j.start_time.or(j.end_time);
            end.is_none_or(|e| el <= e) && start.is_none_or(|s| left.is_none_or(|t| t >= s))
        }
        "RUNNING" | "SUSPENDED" => {
            let Some(st) = j.start_time else { return false };
            end.is_none_or(|e| st <= e) && start.is_none_or(|s| j.end_time.is_none_or(|t| t >= s))
        }
        other => {
            j.state == other
                && (start.is_none() && end.is_none()
                    || j.end_time.is_some_and(|t| start.is_none_or(|s| t >= s) && end.is_none_or(|e| t <= e)))
        }
    })
}

fn selected(j: &AcctJob, q: &AcctQuery) -> Option<Option<Vec<String>>> {
    // Some(None): the job and all its steps; Some(Some(steps)): only these steps.
    if !q.jobs.is_empty() {
        let mut whole = false;
        let mut steps = Vec::new();
        let mut any = false;
        for r in &q.jobs {
            let hit = match r.task {
                None => j.job_id == r.job_id || j.array_job_id == Some(r.job_id),
                Some(t) => j.array_job_id == Some(r.job_id) && j.array_task_id == Some(t),
            };
            if hit {
                any = true;
                match &r.step {
                    None => whole = true,
                    Some(s) => steps.push(s.clone()),
                }
            }
        }
        if !any {
            return None;
        }
        if !whole {
            return Some(Some(steps));
        }
    }
    Some(None)
}

fn hostnames(list: &str) -> Vec<String> {
    flotilla_core::hostlist::expand(list).unwrap_or_else(|_| vec![list.to_string()])
}

/// Answers an accounting query from the database: matching jobs (latest record per job id)
/// with their steps, ordered by job id (array tasks by array id, then task).
pub fn query(db: &dyn Backend, q: &AcctQuery) -> Result<Vec<AcctJob>, DbError> {
    let mut sql = format!("SELECT {} FROM acct_jobs", ACCT_COLS.join(", "));
    let mut conds = Vec::new();
    if !q.uids.is_empty() {
        conds.push(format!("uid IN ({})", q.uids.iter().map(u32::to_string).collect::<Vec<_>>().join(",")));
    }
    if !q.jobs.is_empty() {
        let ids: Vec<String> = q.jobs.iter().map(|r| r.job_id.to_string()).collect();
        let ids = ids.join(",");
        conds.push(format!("(job_id IN ({ids}) OR array_job_id IN ({ids}))"));
    }
    if q.states.is_empty() {
        // The window's bound on the end, in SQL so that old records are not read at all
        // (`acct_jobs_end`); `in_window` applies the whole rule.
        if let Some(s) = q.start {
            conds.push(format!("(end_time IS NULL OR end_time >= {s} OR restarts > 0)"));
        }
        if q.start.is_some() || q.end.is_some() {
            // A requeued job's earlier runs may be in the window when its record is not.
            conds.push("(eligible_time IS NOT NULL OR restarts > 0)".into());
        }
    }
    let conds = conds.join(" AND ");
    if !conds.is_empty() {
        sql.push_str(" WHERE ");
        sql.push_str(&conds);
    }
    let mut rows = Vec::new();
    db.query_each(&sql, &[], &mut |r| {
        rows.push(read_row(&r)?);
        Ok(())
    })?;
    // The selected jobs' steps and usage, each in one statement (two per job took most of a
    // `sacct` over 150,000 jobs).
    let of_selected =
        if conds.is_empty() { "1 = 1".to_string() } else { format!("job_id IN (SELECT job_id FROM acct_jobs WHERE {conds})") };
    let mut steps_of: HashMap<u64, Vec<StepRow>> = HashMap::new();
    for r in crate::store::runs::read(db, crate::store::runs::JOB_STEPS, &of_selected, "job_id, step", &[])? {
        steps_of.entry(r.job_id).or_default().push(r);
    }
    let mut usage_of = crate::store::runs::read_usage_where(db, &of_selected, &[])?;
    let want_nodes: Vec<String> = q.nodes.iter().flat_map(|n| hostnames(n)).collect();
    // Keyed (array or job id, task, job id, run): Slurm's order, a job's runs oldest first.
    let mut out: BTreeMap<(u64, u32, u64, u32), AcctJob> = BTreeMap::new();
    for row in rows {
        let mut j = row.job;
        let Some(only_steps) = selected(&j, q) else { continue };
        // The record's own place in the window; a requeued job's earlier runs are checked
        // one by one below.
        let current_in = in_window(&j, q);
        if !current_in && j.restarts == 0
            || !q.names.is_empty() && !q.names.contains(&j.name)
            || !q.partitions.is_empty() && !q.partitions.contains(&j.partition)
            || !q.accounts.is_empty() && !q.accounts.contains(&j.account)
            || !q.qos.is_empty() && !q.qos.contains(&j.qos)
            || !want_nodes.is_empty() && !hostnames(&j.nodes).iter().any(|n| want_nodes.contains(n))
        {
            continue;
        }
        let mut steps: Vec<AcctStep> = steps_of.remove(&j.job_id).unwrap_or_default().into_iter().map(acct_step).collect();
        let mut usage = usage_of.remove(&j.job_id).unwrap_or_default();
        for s in &mut steps {
            s.usage = usage.remove(&s.step);
        }
        let all_steps = steps.clone();
        // Only a record that is itself a run ended in a requeue (a held `REQUEUED` job) has its
        // steps kept apart: the others need no second query.
        let kept = if matches!(j.state.as_str(), "REQUEUED" | "PREEMPTED") {
            crate::store::runs::run_steps(db, j.job_id, j.restarts)?
        } else {
            Vec::new()
        };
        if !kept.is_empty() {
            steps = kept.into_iter().map(acct_step).collect();
        } else if let Some(st) = j.start_time {
            // Steps of runs that ended before schema version 11 stayed in `job_steps`: one
            // started before the job's latest run belongs to an earlier run.
            steps.retain(|s| s.start_time.is_none_or(|t| t >= st));
        }
        fill_step_tres(&mut steps, &j, row.batch);
        if let Some(names) = only_steps {
            steps.retain(|s| names.contains(&s.step));
            if steps.is_empty() {
                continue;
            }
            // Only the steps asked for: the job line is left out (sacct's show_full).
            j.show_job = false;
        }
        let key = match (j.array_job_id, j.array_task_id) {
            (Some(a), Some(t)) => (a, t, j.job_id),
            (Some(a), None) => (a, u32::MAX, j.job_id),
            _ => (j.job_id, 0, j.job_id),
        };
        // Earlier runs are records of their own: `-D` shows each one in the window; without
        // it, Slurm's `sacct` keeps the newest record the window selected (as_mysql's
        // `_cluster_get_jobs`: records in the window, newest first, one per job id), which is
        // an earlier run when the current record is outside it (a requeued job cancelled
        // before it was eligible again has no eligible time: golden 0282, jobs 54 and 57).
        let earlier = j.restarts > 0 && j.show_job && (q.duplicates || !current_in);
        if earlier {
            // Earlier runs (`job_runs`, one row per ended run): the job's record with that
            // run's state, times, nodes and exit, and the steps that ran in it; newest first
            // without `-D`, where only the first in the window is shown.
            let mut runs = crate::svcstore::runs(db, j.job_id, j.restarts)?;
            if !q.duplicates {
                runs.reverse();
            }
            for r in runs {
                let (start, end) = (r.start_time, r.end_time);
                let mut e = j.clone();
                // A run that ended in a requeue is accounted `0:0`, its batch step carries
                // the signal (as `requeued_rows` writes it; golden 0282, jobs 54 and 57).
                (e.exit_code, e.signal) =
                    if matches!(r.state.as_str(), "REQUEUED" | "PREEMPTED") { (0, 0) } else { (r.exit_code, r.signal) };
                e.state = r.state;
                e.cancelled_by = None;
                (e.start_time, e.end_time) = (start, end);
                e.nodes = r.nodes;
                e.restarts = r.step;
                e.reason_prev = r.reason_prev;
                // A run that started was eligible by then (runs keep no eligible time).
                e.eligible_time = e.eligible_time.filter(|&el| start.is_none_or(|st| el <= st)).or(start);
                if !in_window(&e, q) {
                    continue;
                }
                let kept = crate::store::runs::run_steps(db, j.job_id, r.step)?;
                e.steps = if kept.is_empty() {
                    // A run that ended before schema version 11: its steps by their times.
                    all_steps
                        .iter()
                        .filter(|s| s.start_time.is_some_and(|t| start.is_some_and(|st| t >= st) && end.is_none_or(|en| t <= en)))
                        .cloned()
                        .collect()
                } else {
                    kept.into_iter().map(acct_step).collect()
                };
                fill_step_tres(&mut e.steps, &j, row.batch);
                out.insert((key.0, key.1, key.2, r.step), e);
                if !q.duplicates {
                    break;
                }
            }
        }
        if current_in {
            if j.start_time.is_none() {
                (j.alloc_nodes, j.alloc_cpus, j.alloc_gpus, j.alloc_mem_mib) = (0, 0, 0, 0);
            }
            // A step not ended yet in a record that has ended takes the record's end and
            // state (Slurm's as_mysql `_cluster_get_jobs`: `!step->end && job_ended`): the
            // batch step of a run stopped by a requeue or a cancel reads `REQUEUED` /
            // `CANCELLED` until its node reports it (goldens-extra 0318, 0319).
            if let Some(end) = j.end_time {
                for s in steps.iter_mut().filter(|s| s.end_time.is_none()) {
                    s.end_time = Some(end);
                    s.state.clone_from(&j.state);
                }
            }
            j.steps = steps;
            out.insert((key.0, key.1, key.2, j.restarts), j);
        }
    }
    Ok(out.into_values().collect())
}

/// A stored step row as `sacct` gets it, before [`fill_step_tres`] (no usage: the reports of
/// an earlier run's steps are not kept apart from the next run's).
fn acct_step(r: StepRow) -> AcctStep {
    AcctStep {
        step: r.step,
        state: r.state,
        exit_code: r.exit_code,
        signal: r.signal,
        start_time: r.start_time,
        end_time: r.end_time,
        nodes: r.nodes,
        // (0 CPUs: not recorded; [`fill_step_tres`] counts the job's.)
        cpus: r.alloc.map_or(0, |a| a.0),
        gpus: 0,
        mem_mib: r.alloc.map_or(0, |a| a.1),
        nnodes: 0,
        usage: None,
        cancelled_by: r.requid,
    }
}

/// Each step's node count and TRES, then Slurm's order ([`step_rank`]). The batch step gets
/// the batch host's share (`batch`: CPUs, GPUs, MiB); a numbered step its recorded CPUs and
/// memory (all of the job's CPUs on its nodes, or its tasks' with `--exact`: Slurm 22.05
/// `step_mgr.c` `_step_alloc_lps`); GPUs, and the CPUs and memory of a row that has none
/// recorded, are the job's per-node share times the step's node count.
fn fill_step_tres(steps: &mut [AcctStep], j: &AcctJob, batch: (u32, u32, u64)) {
    for s in steps.iter_mut() {
        s.nnodes = hostnames(&s.nodes).len() as u32;
        if s.step == "batch" {
            (s.cpus, s.gpus, s.mem_mib) = batch;
        } else {
            let n = j.alloc_nodes.max(1);
            s.gpus = (j.alloc_gpus / n).saturating_mul(s.nnodes);
            if s.cpus == 0 {
                s.cpus = (j.alloc_cpus / n).saturating_mul(s.nnodes);
                s.mem_mib = (j.alloc_mem_mib / u64::from(n)).saturating_mul(u64::from(s.nnodes));
            }
        }
    }
    steps.sort_by_key(|s| step_rank(&s.step));
}

/// Slurm lists a job's steps `batch`, `extern`, then numbered steps in order.
fn step_rank(s: &str) -> (u8, u64, String) {
    match s {
        "batch" => (0, 0, String::new()),
        "extern" => (1, 0, String::new()),
        _ => match s.parse::<u64>() {
            Ok(n) => (2, n, String::new()),
            Err(_) => (3, 0, s.to_string()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(state: &str) -> AcctJob {
        AcctJob {
            job_id: 7,
            array_job_id: None,
            array_task_id: None,
            array_task_str: None,
            name: "x".into(),
            user: "alice".into(),
            uid: 2001,
            gid: 2001,
            account: String::new(),
            qos: String::new(),
            partition: "batch".into(),
            state: state.into(),
            cancelled_by: None,
            exit_code: 0,
            signal: 0,
            submit_time: 100,
            eligible_time: Some(100),
            start_time: Some(110),
            end_time: Some(200),
            time_limit_min: None,
            nodes: "gpu01".into(),
            alloc_nodes: 1,
            alloc_cpus: 1,
            alloc_gpus: 0,
            alloc_mem_mib: 1024,
            req_nodes: 1,
            req_cpus: 1,
            req_gpus: 0,
            req_mem_mib: 1024,
            restarts: 0,
            work_dir: String::new(),
            comment: String::new(),
            steps: Vec::new(),
            show_job: true,
            constraints: String::new(),
            derived_exit: (0, 0),
            reason_prev: None,
        }
    }

    /// The derived exit code takes the highest wait status: any non-zero exit status ranks
    /// above any signal (goldens-extra 0341: steps `7:0`, `1:0`, `0:11` derive `7:0`; steps
    /// `0:11`, `0:10` derive `0:11`), and prints back as it came.
    #[test]
    fn wait_status_ranks_exit_statuses_above_signals() {
        assert!(wait_status(1, 0) > wait_status(0, 11));
        assert!(wait_status(7, 0) > wait_status(1, 0));
        assert!(wait_status(0, 11) > wait_status(0, 10));
        assert!(wait_status(0, 0) < wait_status(0, 1));
        for pair in [(0, 0), (7, 0), (255, 0), (0, 9), (0, 15)] {
            assert_eq!(exit_pair(wait_status(pair.0, pair.1)), pair);
        }
    }

    #[test]
    fn window_without_states_selects_on_eligibility() {
        let q = |s: Option<i64>, e: Option<i64>| AcctQuery {
            start: s,
            end: e,
            ..AcctQuery::default()
        };
        let j = job("COMPLETED");
        assert!(in_window(&j, &q(None, None)));
        assert!(in_window(&j, &q(Some(150), Some(300))));
        assert!(in_window(&j, &q(Some(200), Some(300))), "ended at the window's start");
        assert!(!in_window(&j, &q(Some(201), Some(300))), "ended before the window");
        assert!(!in_window(&j, &q(Some(0), Some(100))), "eligible at the window's end");
        let mut never = job("CANCELLED");
        never.eligible_time = None;
        assert!(!in_window(&never, &q(Some(0), Some(300))), "never eligible: held, dependency");
        assert!(in_window(&never, &q(None, None)), "-j without -S: every record");
    }

    #[test]
    fn window_with_states_selects_on_end_time() {
        let q = |s: i64, e: i64| AcctQuery {
            start: Some(s),
            end: Some(e),
            states: vec!["FAILED".into()],
            ..AcctQuery::default()
        };
        let j = job("FAILED");
        assert!(in_window(&j, &q(0, 300)));
        // Slurm 22.05: `-s F -S today` without -E is the window [today, today] (golden 0295).
        assert!(!in_window(&j, &q(0, 0)));
        assert!(!in_window(&job("COMPLETED"), &q(0, 300)));
        let r = AcctQuery {
            start: Some(150),
            end: Some(150),
            states: vec!["RUNNING".into()],
            ..AcctQuery::default()
        };
        assert!(in_window(&j, &r), "it ran at 150");
    }

    #[test]
    fn steps_order() {
        let mut v = vec!["1", "extern", "0", "batch", "10", "2"];
        v.sort_by_key(|s| step_rank(s));
        assert_eq!(v, vec!["batch", "extern", "0", "1", "2", "10"]);
    }
}
