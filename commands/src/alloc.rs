//! Interactive allocations, shared by `salloc` and `srun` outside a job: submit a job without
//! a batch script, wait until it runs, give it the allocation's environment, give it back.
//!
//! Messages are Slurm's (salloc(1), srun(1)): `<prog>: Pending job allocation N`, `<prog>: job
//! N queued and waiting for resources`, `<prog>: job N has been allocated resources`,
//! `salloc: Granted job allocation N`, `salloc: Relinquishing job allocation N`.

use crate::common::{self, Ctl, CtlError, Io};
use flotilla_proto::step::ReleaseAllocation;
use flotilla_proto::{JobInfo, JobQuery, JobRef, JobStateWire, Request, Response, SubmitJob};
use std::time::{Duration, Instant};

/// Why an allocation was not granted: lines for stderr and the exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocError {
    /// Lines, with their `prog: ` prefix.
    pub lines: Vec<String>,
    /// Exit status.
    pub code: i32,
}

/// The job's record as the controller shows it now (`None` when it is gone).
pub fn job_info(ctl: &Ctl, id: u64) -> Option<JobInfo> {
    let q = JobQuery {
        jobs: vec![JobRef::id(id)],
        include_finished: true,
        ..JobQuery::default()
    };
    match ctl.call(Request::QueryJobs(q)) {
        Ok(Response::Jobs(j)) => j.into_iter().find(|j| j.job_id == id),
        _ => None,
    }
}

/// Submits `job` as an interactive allocation and waits until it runs. `prog` names the
/// command in messages (`salloc`, `srun`). Prints the pending/queued/allocated lines as Slurm
/// does when the allocation is not granted within a second.
///
/// Errors: the submission's (`<prog>: error: <failed>: <text>`, exit 1, where `<failed>` is
/// [`failed_prefix`]),
/// or the job ending before it ran (`revoked`, exit 1).
pub fn allocate(ctl: &Ctl, mut job: SubmitJob, prog: &str, io: &mut Io<'_>) -> Result<JobInfo, AllocError> {
    job.interactive = true;
    let id = match ctl.call(Request::SubmitJob(Box::new(job))) {
        Ok(Response::Submitted(s)) => s.job_id,
        Ok(_) => {
            return Err(AllocError {
                lines: vec![format!("{prog}: error: {}: Unexpected message received", failed_prefix(prog))],
                code: 1,
            })
        }
        Err(e) => return Err(submit_error(prog, &e)),
    };
    let t0 = Instant::now();
    let mut queued = false;
    let mut delay = Duration::from_millis(50);
    loop {
        if let Some(j) = job_info(ctl, id) {
            match j.state {
                Some(JobStateWire::Running) => {
                    if queued {
                        io.err(&format!("{prog}: job {id} has been allocated resources\n"));
                    }
                    return Ok(j);
                }
                Some(s) if s.is_finished() || s == JobStateWire::Completing => {
                    return Err(AllocError {
                        lines: vec![format!("{prog}: error: Job allocation {id} has been revoked.")],
                        code: 1,
                    })
                }
                _ => {}
            }
        }
        if !queued && t0.elapsed() >= Duration::from_secs(1) {
            queued = true;
            io.err(&format!("{prog}: Pending job allocation {id}\n{prog}: job {id} queued and waiting for resources\n"));
        }
        std::thread::sleep(delay);
        delay = (delay * 2).min(Duration::from_millis(500));
    }
}

fn submit_error(prog: &str, e: &CtlError) -> AllocError {
    let se = e.slurm();
    let mut lines: Vec<String> = se.messages.iter().map(|m| format!("{prog}: error: {m}")).collect();
    lines.push(format!("{prog}: error: {}: {}", failed_prefix(prog), se.text));
    AllocError { lines, code: 1 }
}

/// How each command words a refused allocation: srun `Unable to allocate resources`
/// (libsrun allocate.c), salloc `Job submit/allocate failed` (salloc.c); golden 0129 of the
/// accounting recordings.
pub fn failed_prefix(prog: &str) -> &'static str {
    if prog == "srun" {
        "Unable to allocate resources"
    } else {
        "Job submit/allocate failed"
    }
}

/// Gives the allocation back with the command's status (`status` as `waitpid` reports it:
/// exit code, or the signal that ended the command).
pub fn release(ctl: &Ctl, job_id: u64, exit_code: i32, signal: i32) -> Result<(), CtlError> {
    ctl.call(Request::ReleaseAllocation(ReleaseAllocation {
        job_id,
        exit_code,
        signal,
    }))
    .map(|_| ())
}

/// The environment `salloc` gives its command (salloc(1) "OUTPUT ENVIRONMENT VARIABLES"):
/// `SLURM_JOB_ID`, `SLURM_JOBID`, `SLURM_JOB_NAME`, `SLURM_JOB_NODELIST`, `SLURM_NODELIST`,
/// `SLURM_JOB_NUM_NODES`, `SLURM_NNODES`, `SLURM_JOB_PARTITION`, `SLURM_JOB_ACCOUNT`,
/// `SLURM_JOB_CPUS_PER_NODE`, `SLURM_TASKS_PER_NODE`, `SLURM_NTASKS`/`SLURM_NPROCS` when
/// tasks were asked for, `SLURM_CLUSTER_NAME`, `SLURM_SUBMIT_DIR`, `SLURM_SUBMIT_HOST`, and
/// `SLURM_CONF` and `FLOTILLA_CONF` (so that commands inside find the controller even when
/// a client deletes every `SLURM_*` variable).
pub fn alloc_env(j: &JobInfo, cluster: &str, conf_path: &str, ntasks_given: bool) -> Vec<(String, String)> {
    let nnodes = j.num_nodes.max(1);
    let cpn = j.num_cpus / nnodes;
    let tpn = (j.num_tasks.max(1)).div_ceil(nnodes);
    let per_node = |v: u32| if nnodes > 1 { format!("{v}(x{nnodes})") } else { v.to_string() };
    let mut env = vec![
        ("SLURM_JOB_ID".to_string(), j.job_id.to_string()),
        ("SLURM_JOBID".into(), j.job_id.to_string()),
        ("SLURM_JOB_NAME".into(), j.name.clone()),
        ("SLURM_JOB_NODELIST".into(), j.nodes.clone()),
        ("SLURM_NODELIST".into(), j.nodes.clone()),
        ("SLURM_JOB_NUM_NODES".into(), nnodes.to_string()),
        ("SLURM_NNODES".into(), nnodes.to_string()),
        ("SLURM_JOB_PARTITION".into(), j.partition.clone()),
        ("SLURM_JOB_ACCOUNT".into(), j.account.clone()),
        ("SLURM_JOB_CPUS_PER_NODE".into(), per_node(cpn)),
        ("SLURM_TASKS_PER_NODE".into(), per_node(tpn)),
        ("SLURM_CLUSTER_NAME".into(), cluster.to_string()),
        ("SLURM_SUBMIT_DIR".into(), j.work_dir.clone()),
        ("SLURM_SUBMIT_HOST".into(), common::hostname()),
        ("SLURM_CONF".into(), conf_path.to_string()),
        ("FLOTILLA_CONF".into(), conf_path.to_string()),
    ];
    if ntasks_given {
        env.push(("SLURM_NTASKS".into(), j.num_tasks.to_string()));
        env.push(("SLURM_NPROCS".into(), j.num_tasks.to_string()));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_environment() {
        let j = JobInfo {
            job_id: 12,
            name: "bash".into(),
            nodes: "gpu[01-02]".into(),
            num_nodes: 2,
            num_cpus: 16,
            num_tasks: 16,
            partition: "batch".into(),
            ..JobInfo::default()
        };
        let env = alloc_env(&j, "c", "/etc/slurm/slurm.conf", true);
        let get = |k: &str| env.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        assert_eq!(get("SLURM_JOB_ID"), Some("12"));
        assert_eq!(get("SLURM_JOB_NODELIST"), Some("gpu[01-02]"));
        assert_eq!(get("SLURM_JOB_NUM_NODES"), Some("2"));
        assert_eq!(get("SLURM_TASKS_PER_NODE"), Some("8(x2)"));
        assert_eq!(get("SLURM_JOB_CPUS_PER_NODE"), Some("8(x2)"));
        assert_eq!(get("SLURM_NTASKS"), Some("16"));
        assert_eq!(get("FLOTILLA_CONF"), Some("/etc/slurm/slurm.conf"));
        assert_eq!(alloc_env(&j, "c", "/x", false).iter().filter(|(k, _)| k == "SLURM_NTASKS").count(), 0);
    }
}
