//! `scancel`, as Slurm 22.05's: ids (`123`, `123_4`, `123_[3-4]`), steps (`123.0`: that
//! step's tasks get the signal, SIGKILL unless `-s`, and the job goes on), filters (`-u -n -t
//! -p -A -w --me`), `-s/--signal` (names with or without `SIG`, numbers), `-b`, `-v`, `-Q`.
//! An unknown or finished job is silent with exit 0 unless signalling or filtering (then
//! `Kill job error on job id N: Invalid job id specified`, exit 1) or `-v`; another user's job is
//! `Access/permission denied`, exit 210 (the error code modulo 256, as Slurm exits).

use crate::common::{self, Ctl, Io};
use crate::getopt::{getopt_long, lo, HasArg, LongOpt};
use crate::squeue::{parse_job_ref_by, scancel_job_id};
use flotilla_proto::errno::{ESLURM_ALREADY_DONE, ESLURM_INVALID_JOB_ID, ESLURM_JOB_FINISHED};
use flotilla_proto::{CancelJob, JobFilter, JobQuery, JobRef, JobStateWire, Request, Response, SignalStep};

const fn c(ch: char) -> u32 {
    ch as u32
}

const O_ME: u32 = 1000;
const O_HELP: u32 = 1001;
const O_IGNORED: u32 = 1002;

/// scancel's getopt string (Slurm 22.05 `opt.c`).
pub const SHORTS: &str = "A:bfHiM:n:p:Qq:R:s:t:u:vVw:x";

/// scancel's long options; ids are the short letter or an `O_*`.
pub const LONGS: &[LongOpt] = &[
    lo("account", HasArg::Required, c('A')),
    lo("batch", HasArg::No, c('b')),
    lo("clusters", HasArg::Required, c('M')),
    lo("cluster", HasArg::Required, c('M')),
    lo("ctld", HasArg::No, O_IGNORED),
    lo("full", HasArg::No, c('f')),
    lo("help", HasArg::No, O_HELP),
    lo("hurry", HasArg::No, c('H')),
    lo("interactive", HasArg::No, c('i')),
    lo("jobname", HasArg::Required, c('n')),
    lo("me", HasArg::No, O_ME),
    lo("name", HasArg::Required, c('n')),
    lo("nodelist", HasArg::Required, c('w')),
    lo("partition", HasArg::Required, c('p')),
    lo("qos", HasArg::Required, c('q')),
    lo("quiet", HasArg::No, c('Q')),
    lo("reservation", HasArg::Required, c('R')),
    lo("signal", HasArg::Required, c('s')),
    lo("state", HasArg::Required, c('t')),
    lo("usage", HasArg::No, O_HELP),
    lo("user", HasArg::Required, c('u')),
    lo("verbose", HasArg::No, c('v')),
    lo("version", HasArg::No, c('V')),
    lo("wckey", HasArg::Required, O_IGNORED),
];

/// Runs `scancel`; returns its exit status.
pub fn run(args: &[String], io: &mut Io<'_>) -> i32 {
    let argv = args.get(1..).unwrap_or(&[]);
    let p = match getopt_long("scancel", argv, SHORTS, LONGS) {
        Ok(p) => p,
        Err(m) => {
            io.err(&format!("{m}\nTry \"scancel --help\" for more information\n"));
            return 1;
        }
    };
    let mut req = CancelJob::default();
    let mut filter = JobFilter::default();
    let (mut verbose, mut quiet, mut any_filter) = (false, false, false);
    for o in &p.opts {
        let a = o.arg.as_deref().unwrap_or("");
        let list = || a.split(',').filter(|s| !s.is_empty()).map(str::to_string).collect::<Vec<_>>();
        match o.id {
            x if x == c('b') => req.batch_only = true,
            x if x == c('f') => req.full = true,
            x if x == c('v') => verbose = true,
            x if x == c('Q') => quiet = true,
            x if x == c('V') => {
                io.out(&format!("{}\n", crate::sbatch::VERSION_LINE));
                return 0;
            }
            O_HELP => {
                io.out("Usage: scancel [OPTIONS] [job_id[_array_id][.step_id]]\n");
                return 0;
            }
            x if x == c('s') => match crate::signals::parse(a) {
                Some(s) => req.signal = Some(s),
                None => {
                    io.err(&format!("scancel: error: Invalid job signal: {a}\n"));
                    return 1;
                }
            },
            x if x == c('u') => {
                filter.users.extend(list());
                any_filter = true;
            }
            O_ME => {
                filter.users.push(common::user_name(common::my_uid()));
                any_filter = true;
            }
            x if x == c('n') => {
                filter.names.extend(list());
                any_filter = true;
            }
            x if x == c('p') => {
                filter.partitions.extend(list());
                any_filter = true;
            }
            x if x == c('A') => {
                filter.accounts.extend(list());
                any_filter = true;
            }
            x if x == c('w') => {
                filter.nodes.extend(flotilla_core::hostlist::expand(a).unwrap_or_else(|_| vec![a.to_string()]));
                any_filter = true;
            }
            x if x == c('t') => {
                for s in a.split(',') {
                    match crate::jobfmt::parse_state(s) {
                        Ok(Some(w)) => filter.states.push(w),
                        Ok(None) => {}
                        Err(_) => {
                            io.err(&format!("scancel: error: Invalid job state specified: {s}\n"));
                            return 1;
                        }
                    }
                }
                any_filter = true;
            }
            _ => {}
        }
    }
    let mut ops: Vec<(JobRef, Option<u32>)> = Vec::new();
    for id in &p.operands {
        match scancel_operand(id) {
            Ok(refs) => ops.extend(refs),
            Err(bad) => {
                io.err(&format!("scancel: error: Invalid job id {bad}\n"));
                return 1;
            }
        }
    }
    if ops.is_empty() && !any_filter {
        io.err("scancel: error: No job identification provided\n");
        return 1;
    }
    // Slurm users see only their own jobs through filters unless root.
    if ops.is_empty() && filter.users.is_empty() && !nix::unistd::getuid().is_root() {
        filter.users.push(common::user_name(common::my_uid()));
    }
    req.filter = filter;
    let ctl = match Ctl::new(io.env) {
        Ok(c) => c,
        Err(e) => {
            io.err(&format!("scancel: error: {}\n", e.slurm().text));
            return 1;
        }
    };
    let signal = req.signal;
    let step_filter = req.filter.clone();
    let mut code = 0;
    let mut steps = Vec::new();
    // Ids named: only they are cancelled (a filter narrows them); none: the filter's jobs.
    let named = !ops.is_empty();
    if ops.iter().any(|(_, s)| s.is_some()) {
        // A step named: every id is checked against the jobs first (Slurm's scancel loads them
        // and runs `_verify_job_ids`), each one not found named, exit status 1 at least.
        let refs: Vec<JobRef> = ops.iter().map(|(r, _)| JobRef::id(r.job_id)).collect();
        let jobs = match ctl.call(Request::QueryJobs(JobQuery { jobs: refs, include_finished: true, ..JobQuery::default() })) {
            Ok(Response::Jobs(j)) => j,
            Ok(_) => Vec::new(),
            Err(e) => {
                io.err(&format!("slurm_load_jobs error: {}\n", e.slurm().text));
                return 1;
            }
        };
        for (r, step) in ops {
            match (verify_operand(&r, &jobs), step) {
                (None, _) => {
                    code = 1;
                    let step = step.map_or(String::new(), |s| format!(".{s}"));
                    let kind = if step.is_empty() { "job id" } else { "job step id" };
                    io.err(&format!("scancel: error: Kill job error on {kind} {}{step}: Invalid job id specified\n", operand_id(&r)));
                }
                (Some(_), None) => req.jobs.push(r),
                // A filter narrows the named steps too: a step of a job it leaves out is passed
                // over without a word (Slurm's scancel filters the jobs it loaded,
                // `_filter_job_records`, before `_cancel_step_id`); the controller applies it.
                (Some(found), Some(s)) => steps.push((r, found, s)),
            }
        }
    } else {
        req.jobs = ops.into_iter().map(|(r, _)| r).collect();
    }
    let results = if req.jobs.is_empty() && (named || !any_filter) {
        Vec::new()
    } else {
        match ctl.call(Request::CancelJob(req)) {
            Ok(Response::JobResults(r)) => r,
            Ok(_) => Vec::new(),
            Err(e) => {
                io.err(&format!("scancel: error: {}\n", e.slurm().text));
                return 1;
            }
        }
    };
    for r in results {
        let id = operand_id(&r.job);
        if verbose {
            match signal {
                Some(s) => io.err(&format!("scancel: Signal {s} to job {id}\n")),
                None => io.err(&format!("scancel: Terminating job {id}\n")),
            }
        }
        let Some(e) = r.error else { continue };
        let quiet_kind = matches!(e.code, ESLURM_ALREADY_DONE | ESLURM_INVALID_JOB_ID | ESLURM_JOB_FINISHED);
        // With a filter, scancel names a job it cannot find or that has ended
        // (`_verify_job_ids`), exit status 1.
        if quiet_kind && signal.is_none() && !verbose && !any_filter {
            continue;
        }
        if !quiet {
            io.err(&format!("scancel: error: Kill job error on job id {id}: {}\n", e.text));
        }
        if !(quiet_kind && signal.is_none()) {
            code = if signal.is_some() && quiet_kind { 1 } else { e.code % 256 };
        } else if any_filter {
            code = 1;
        }
    }
    // The steps, each its own request (Slurm's `_cancel_step_id`); a pending job's steps are
    // passed over. A step already done is an error only when signalled (or with `-v`).
    let mut step_code = 0;
    for (r, (job_id, pending), step) in steps {
        if pending {
            continue;
        }
        let id = operand_id(&r);
        let req = SignalStep { job: JobRef::id(job_id), step_id: step, signal, filter: step_filter.clone() };
        let err = match ctl.call(Request::SignalStep(req)) {
            // No result: the filter left the job out (the controller compares the states
            // scancel's filter does), passed over without a word.
            Ok(Response::JobResults(r)) if r.is_empty() => continue,
            Ok(Response::JobResults(r)) => r.into_iter().find_map(|r| r.error),
            Ok(_) => None,
            Err(e) => Some(e.slurm()),
        };
        if verbose {
            match signal {
                Some(s) => io.err(&format!("scancel: Signal {s} to step {id}.{step}\n")),
                None => io.err(&format!("scancel: Terminating step {id}.{step}\n")),
            }
        }
        let Some(e) = err else { continue };
        let kill = signal.is_none_or(|s| s == 9);
        if verbose || e.code != ESLURM_ALREADY_DONE {
            io.err(&format!("scancel: error: Kill job error on job step id {id}: {}\n", e.text));
        }
        if !(kill && e.code == ESLURM_ALREADY_DONE) {
            step_code = step_code.max(e.code);
        }
    }
    code.max(step_code % 256)
}

/// How scancel names an operand in its messages: `ID`, or `ID_TASK` for one array task.
fn operand_id(r: &JobRef) -> String {
    match r.tasks.as_deref() {
        Some([t]) => format!("{}_{t}", r.job_id),
        _ => r.job_id.to_string(),
    }
}

/// The job an operand names among `jobs` (Slurm's scancel `_verify_job_ids`, on the jobs it
/// loaded): a job not ended (`IS_JOB_FINISHED`: a completing job has ended), by its id, or an
/// array task by its array's id and index (a pending task within its array's record).
/// `Some((record id, pending))`, or `None` when there is none.
fn verify_operand(r: &JobRef, jobs: &[flotilla_proto::JobInfo]) -> Option<(u64, bool)> {
    let live = |j: &&flotilla_proto::JobInfo| j.state.is_some_and(|s| !s.is_finished() && s != JobStateWire::Completing);
    let found = jobs.iter().filter(live).find(|j| match r.tasks.as_deref() {
        None => j.job_id == r.job_id,
        Some(ts) => {
            j.array_job_id == Some(r.job_id)
                && (j.array_task_id.is_some_and(|t| ts.contains(&t))
                    || j.array_task_str.as_deref().is_some_and(|s| {
                        let pending = crate::jobfmt::expand_task_str(s);
                        ts.iter().any(|t| pending.contains(t))
                    }))
        }
    })?;
    Some((found.job_id, found.state.is_some_and(JobStateWire::is_pending)))
}

/// One operand of scancel as Slurm 22.05 reads it (`src/scancel/opt.c`
/// `_xlate_job_step_ids`): a job id read with `strtol` (not positive: invalid); then
/// `_[LIST]` (which must end the operand; no step), `_*` (every task), `_N` (one task) or
/// `+N` (a hetjob component, taken as the whole job); then `.N`, a step (read with `strtol`,
/// not negative); then `,` and another operand, or
/// the end. Anything else: `Err` with the text Slurm names in "Invalid job id TEXT" (the
/// remaining operand, from the id that failed).
pub fn scancel_operand(arg: &str) -> Result<Vec<(JobRef, Option<u32>)>, String> {
    use flotilla_core::cnum::strtol;
    let mut out = Vec::new();
    let mut cur = arg;
    loop {
        let bad = || cur.to_string();
        let (job, mut rest) = strtol(cur);
        if job <= 0 {
            return Err(bad());
        }
        let job_id = u64::from(job as u32);
        if let Some(list) = rest.strip_prefix("_[") {
            match list.find(']') {
                Some(e) if e + 1 == list.len() => {}
                _ => return Err(bad()),
            }
            return match parse_job_ref_by(cur, scancel_job_id) {
                Some(r) => {
                    out.push((r, None));
                    Ok(out)
                }
                None => Err(bad()),
            };
        }
        let mut r = JobRef::id(job_id);
        if let Some(t) = rest.strip_prefix("_*") {
            rest = t;
        } else if let Some(t) = rest.strip_prefix('_') {
            let (task, after) = strtol(t);
            if task < 0 {
                return Err(bad());
            }
            r.tasks = Some(vec![u32::try_from(task).unwrap_or(u32::MAX)]);
            rest = after;
        } else if let Some(t) = rest.strip_prefix('+') {
            let (comp, after) = strtol(t);
            if comp < 0 {
                return Err(bad());
            }
            rest = after;
        }
        let mut step = None;
        if let Some(t) = rest.strip_prefix('.') {
            let (s, after) = strtol(t);
            if s < 0 {
                return Err(bad());
            }
            step = Some(u32::try_from(s).unwrap_or(u32::MAX));
            rest = after;
        }
        out.push((r, step));
        match rest.strip_prefix(',') {
            Some(next) => cur = next,
            None if rest.is_empty() => return Ok(out),
            None => return Err(bad()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_proto::JobInfo;

    fn job(id: u64, state: JobStateWire) -> JobInfo {
        JobInfo { job_id: id, state: Some(state), ..JobInfo::default() }
    }

    /// `_verify_job_ids` on the loaded jobs (goldens-extra 0337): an ended or completing job
    /// is not found; a pending one is found, pending; an array task by its array's id, started
    /// or in its array's pending remainder.
    #[test]
    fn operands_are_checked_against_the_jobs() {
        let mut task = job(12, JobStateWire::Running);
        (task.array_job_id, task.array_task_id) = (Some(10), Some(2));
        let mut meta = job(10, JobStateWire::Pending);
        (meta.array_job_id, meta.array_task_str) = (Some(10), Some("3-5,7%2".into()));
        let jobs = [job(1, JobStateWire::Running), job(2, JobStateWire::Pending), job(3, JobStateWire::Completing), job(4, JobStateWire::Cancelled), task, meta];
        let at = |id: u64, t: Option<u32>| verify_operand(&JobRef { job_id: id, tasks: t.map(|t| vec![t]) }, &jobs);
        assert_eq!(at(1, None), Some((1, false)));
        assert_eq!(at(2, None), Some((2, true)));
        assert_eq!(at(3, None), None, "completing: ended for scancel");
        assert_eq!(at(4, None), None);
        assert_eq!(at(9, None), None);
        assert_eq!(at(10, Some(2)), Some((12, false)), "a started task: its own record");
        assert_eq!(at(10, Some(4)), Some((10, true)), "a pending task: its array's record");
        assert_eq!(at(10, Some(7)), Some((10, true)));
        assert_eq!(at(10, Some(6)), None);
        assert_eq!(operand_id(&JobRef { job_id: 10, tasks: Some(vec![4]) }), "10_4");
        assert_eq!(operand_id(&JobRef::id(10)), "10");
    }
}
