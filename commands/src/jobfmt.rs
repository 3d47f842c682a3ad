//! Job fields as Slurm's commands print them, shared by `squeue`, `scontrol show job` and
//! `scancel`: array ids (`64_[0-5%2]`), reasons, dependencies, memory, state names.

use flotilla_core::time::{squeue_secs, squeue_time_limit, TimeLimit};
use flotilla_proto::{JobView, JobStateWire, TimeLimitWire};

/// Every job state name Slurm 22.05 accepts for `squeue -t` / `sacct -s`, in the order its
/// error message lists them.
pub const STATE_NAMES: &[(&str, &str)] = &[
    ("PENDING", "PD"),
    ("RUNNING", "R"),
    ("SUSPENDED", "S"),
    ("COMPLETED", "CD"),
    ("CANCELLED", "CA"),
    ("FAILED", "F"),
    ("TIMEOUT", "TO"),
    ("NODE_FAIL", "NF"),
    ("PREEMPTED", "PR"),
    ("BOOT_FAIL", "BF"),
    ("DEADLINE", "DL"),
    ("OUT_OF_MEMORY", "OOM"),
    ("COMPLETING", "CG"),
    ("CONFIGURING", "CF"),
    ("RESIZING", "RS"),
    ("RESV_DEL_HOLD", "RD"),
    ("REQUEUED", "RQ"),
    ("REQUEUE_FED", "RF"),
    ("REQUEUE_HOLD", "RH"),
    ("REVOKED", "RV"),
    ("SIGNALING", "SI"),
    ("SPECIAL_EXIT", "SE"),
    ("STAGE_OUT", "SO"),
    ("STOPPED", "ST"),
];

/// A state name Slurm does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadState;

/// A wire state from a long or compact name (any case). `Ok(None)`: a state Slurm knows that
/// Flotilla never reports (matches nothing).
pub fn parse_state(s: &str) -> Result<Option<JobStateWire>, BadState> {
    let up = s.to_ascii_uppercase();
    let long = STATE_NAMES
        .iter()
        .find(|(l, c)| *l == up || *c == up)
        .map(|(l, _)| *l)
        .ok_or(BadState)?;
    Ok(ALL_STATES.iter().copied().find(|w| w.as_str() == long))
}

/// Every state the wire carries.
pub const ALL_STATES: &[JobStateWire] = &[
    JobStateWire::Pending,
    JobStateWire::Running,
    JobStateWire::Suspended,
    JobStateWire::Completing,
    JobStateWire::Completed,
    JobStateWire::Failed,
    JobStateWire::Cancelled,
    JobStateWire::Timeout,
    JobStateWire::Preempted,
    JobStateWire::Requeued,
    JobStateWire::NodeFail,
    JobStateWire::OutOfMemory,
    JobStateWire::BootFail,
    JobStateWire::Deadline,
    JobStateWire::SpecialExit,
];

/// The state of a job (pending when the controller did not say).
pub fn state(j: &JobView<'_>) -> JobStateWire {
    j.state.unwrap_or(JobStateWire::Pending)
}

/// `%i`: `53`, `64_3`, `64_[0-5%2]`.
pub fn job_id_str(j: &JobView<'_>) -> String {
    match (j.array_job_id, j.array_task_id, &j.array_task_str) {
        (Some(a), Some(t), _) => format!("{a}_{t}"),
        (Some(a), None, Some(s)) => format!("{a}_[{s}]"),
        (Some(a), None, None) => format!("{a}_[]"),
        _ => j.job_id.to_string(),
    }
}

/// The core time limit of a job.
pub fn limit(j: &JobView<'_>) -> Option<TimeLimit> {
    j.time_limit.map(|t| match t {
        TimeLimitWire::Unlimited => TimeLimit::Unlimited,
        TimeLimitWire::Minutes(m) => TimeLimit::Minutes(m),
    })
}

/// `%l`.
pub fn time_limit_str(j: &JobView<'_>) -> String {
    squeue_time_limit(limit(j))
}

/// A job's required or excluded nodes (`lists`: node names, or hostlists as `scontrol
/// update` kept them) as Slurm 22.05 shows its node bitmaps (`squeue %n`/`%x`) and writes a
/// submission's lists (`_copy_nodelist_no_dup`): each node once, ranged (`gpu[01-02]`).
pub fn node_list_normalized<'s>(lists: impl IntoIterator<Item = &'s str>) -> String {
    let mut names: Vec<String> = lists
        .into_iter()
        .flat_map(|l| flotilla_core::hostlist::expand(l).unwrap_or_else(|_| vec![l.to_string()]))
        .collect();
    names.sort();
    names.dedup();
    flotilla_core::hostlist::compress_sorted(&names)
}

/// `ReqNodeList=`/`ExcNodeList=` of `scontrol show job`: a list `scontrol update` set is
/// shown as written (Slurm keeps the string), a submission's normalised
/// ([`node_list_normalized`]); `(null)` for none.
pub fn node_list_shown(list: &[String]) -> String {
    match list {
        [] => "(null)".into(),
        [one] => one.clone(),
        many => node_list_normalized(many.iter().map(String::as_str)),
    }
}

/// Seconds a job has run at `now`.
pub fn run_secs(j: &JobView<'_>, now: i64) -> i64 {
    match (state(j), j.start_time) {
        (JobStateWire::Pending | JobStateWire::SpecialExit, _) | (_, None) => 0,
        (JobStateWire::Running | JobStateWire::Completing | JobStateWire::Suspended, Some(s)) => (now - s).max(0),
        (_, Some(s)) => (j.end_time.unwrap_or(now) - s).max(0),
    }
}

/// `%M`.
pub fn time_used_str(j: &JobView<'_>, now: i64) -> String {
    squeue_secs(run_secs(j, now))
}

/// [`time_used_str`] written into `out` (which it clears first), for squeue's per-row
/// rendering: no String per row. Byte-identical to [`squeue_secs`] (`_print_secs`).
pub fn time_used_into(j: &JobView<'_>, now: i64, out: &mut String) {
    squeue_secs_into(run_secs(j, now), out);
}

/// [`squeue_secs`] (squeue's `_print_secs`) written into `out`, which it clears first:
/// `INVALID` when negative or over 365 days, else `M:SS`, `H:MM:SS` or `D-HH:MM:SS`.
pub fn squeue_secs_into(secs: i64, out: &mut String) {
    use std::fmt::Write as _;
    out.clear();
    if !(0..=365 * 24 * 3600).contains(&secs) {
        out.push_str("INVALID");
        return;
    }
    let (d, h, m, s) = (secs / 86_400, (secs / 3_600) % 24, (secs / 60) % 60, secs % 60);
    let _ = if d != 0 {
        write!(out, "{d}-{h:02}:{m:02}:{s:02}")
    } else if h != 0 {
        write!(out, "{h}:{m:02}:{s:02}")
    } else {
        write!(out, "{m}:{s:02}")
    };
}

/// `%L`.
pub fn time_left_str(j: &JobView<'_>, now: i64) -> String {
    match limit(j) {
        None => "NOT_SET".into(),
        Some(TimeLimit::Unlimited) => "UNLIMITED".into(),
        Some(TimeLimit::Minutes(m)) => squeue_secs(i64::from(m) * 60 - run_secs(j, now)),
    }
}

/// Slurm's memory size printing (`1G`, `500M`, `1.50G`): MiB as Slurm 22.05's
/// `convert_num_unit` from `UNIT_MEGA` with `CONVERT_NUM_UNIT_EXACT` writes it (TRES strings,
/// `MinMemoryNode=`, `MinTmpDiskNode=`, squeue `%d`): divided by 1024 while the value is at
/// least 1024 and a multiple of 512, two decimals when that leaves a fraction. That is
/// [`crate::usage_fmt::bytes`] of the same size in bytes (a MiB count divides exactly to MiB).
pub fn mem_str(mib: u64) -> String {
    crate::usage_fmt::bytes(mib.saturating_mul(1 << 20), crate::usage_fmt::Units::default())
}

/// `MinCPUsNode=` and squeue `%c`: Slurm's `pn_min_cpus` (the controller's
/// [`flotilla_proto::NodeShape::min_cpus`]; a controller that does not send it: `-c`,
/// `cpus_per_task`).
pub fn min_cpus(shape: &flotilla_proto::NodeShape, cpus_per_task: u32) -> u32 {
    if shape.min_cpus > 0 {
        shape.min_cpus
    } else {
        cpus_per_task.max(1)
    }
}

/// `OverSubscribe=` and squeue `%h` (job_info.c, print.c `_print_job_over_subscribe`): how
/// the job asked to share its nodes ([`flotilla_proto::Oversubscribe`]); when it did not
/// say, `NO` for a job exclusive another way (a partition's `OverSubscribe=EXCLUSIVE`), else
/// `OK`.
pub fn oversubscribe(j: &JobView<'_>) -> &'static str {
    use flotilla_proto::Oversubscribe as O;
    match j.node_shape.oversubscribe {
        O::No => "NO",
        O::Yes => "YES",
        O::User => "USER",
        O::Mcs => "MCS",
        O::Unset if j.exclusive => "NO",
        O::Unset => "OK",
    }
}

/// `%b` (`gres:gpu:4`, `gres:gpu:h100:3`) or `N/A`: the job's `TresPerNode` as submitted
/// (`gres:gpu` for `--gres=gpu`, Slurm keeps the text), else written from its GRES.
pub fn tres_per_node(j: &JobView<'_>) -> String {
    if let Some(t) = j.tres_per_node.as_deref() {
        return t.to_string();
    }
    if j.gres.is_empty() {
        return "N/A".into();
    }
    j.gres
        .iter()
        .map(|g| match &g.gpu_type {
            Some(t) => format!("gres:{}:{t}:{}", g.name, g.count),
            None => format!("gres:{}:{}", g.name, g.count),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// `%E`: `afterok:53(unfulfilled),afterany:54(unfulfilled)`, `(null)` when none; the
/// controller keeps Slurm's form (`_depend_list2str`), joined by `?` when any item was.
pub fn dependency_str(j: &JobView<'_>) -> String {
    let Some(d) = j.dependency.as_deref().filter(|d| !d.is_empty()) else {
        return "(null)".into();
    };
    let failed = j.reason == "DependencyNeverSatisfied";
    let status = if failed { "(failed)" } else { "(unfulfilled)" };
    let mut out = Vec::new();
    for item in d.split([',', '?']) {
        if item == "singleton" {
            out.push(format!("singleton{status}"));
            continue;
        }
        let mut parts = item.split(':');
        let kind = parts.next().unwrap_or("");
        for id in parts {
            out.push(format!("{kind}:{id}{status}"));
        }
    }
    out.join(if d.contains('?') { "?" } else { "," })
}

/// `TRES=` / `tres-alloc`: `cpu=1,mem=1G,node=1,billing=1` (plus `gres/gpu=N` when GPUs).
pub fn tres_str(j: &JobView<'_>) -> String {
    let nodes = j.num_nodes.max(1);
    let mem = pending_mem(j);
    let mut s = format!("cpu={},mem={},node={},billing={}", j.num_cpus, mem_str(mem), nodes, j.num_cpus);
    if j.gpus > 0 {
        s.push_str(&format!(",gres/gpu={}", j.gpus));
    }
    s
}

/// Memory of `TRES=` (MiB): per node times nodes; while pending with memory per CPU, per
/// CPU times the CPUs asked for (Slurm's request, goldens-extra 0407: 2 nodes, 1 CPU, 1G).
pub fn pending_mem(j: &JobView<'_>) -> u64 {
    match (state(j), j.mem_per_cpu_mib) {
        (JobStateWire::Pending | JobStateWire::SpecialExit, Some(m)) if !j.exclusive => m * u64::from(j.num_cpus.max(1)),
        _ => j.mem_per_node_mib * u64::from(j.num_nodes.max(1)),
    }
}

/// Task ids (ascending) as Slurm's `bit_fmt` writes a task bitmap: runs as `a-b`, others
/// alone, comma-separated (`[3, 4, 5, 9]` → `3-5,9`).
pub fn task_ranges(ids: &[u32]) -> String {
    crate::common::ranges(ids)
}

/// Pending array tasks of a meta record expanded (`0-5%2` → 0..=5), for `squeue -r`.
pub fn expand_task_str(s: &str) -> Vec<u32> {
    let list = s.split('%').next().unwrap_or("");
    let mut out = Vec::new();
    for item in list.split(',') {
        let (r, step) = match item.split_once(':') {
            Some((r, st)) => (r, st.parse().unwrap_or(1)),
            None => (item, 1),
        };
        match r.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    let mut i = a;
                    while i <= b {
                        out.push(i);
                        i += step.max(1);
                    }
                }
            }
            None => {
                if let Ok(v) = r.parse() {
                    out.push(v);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The in-place `%M` writer prints exactly what core's `squeue_secs` does: every second
    /// of the first two days, a stride over the year, and both sides of each cut-off.
    #[test]
    fn secs_written_in_place_match_squeue_secs() {
        let year = 365 * 24 * 3600;
        let edges = [-86_401, -1, 0, 59, 60, 3_599, 3_600, 86_399, 86_400, year - 1, year, year + 1, i64::MAX, i64::MIN];
        let mut out = String::from("stale");
        for secs in (0..2 * 86_400).chain((0..=year + 7_919).step_by(7_919)).chain(edges) {
            squeue_secs_into(secs, &mut out);
            assert_eq!(out, squeue_secs(secs), "{secs}");
        }
        let j = JobView { state: Some(JobStateWire::Running), start_time: Some(100), ..JobView::default() };
        time_used_into(&j, 100 + 3_725, &mut out);
        assert_eq!((out.as_str(), time_used_str(&j, 100 + 3_725).as_str()), ("1:02:05", "1:02:05"));
    }

    #[test]
    fn ids_memory_dependencies() {
        let mut j = JobView {
            job_id: 64,
            array_job_id: Some(64),
            array_task_str: Some("0-5%2".into()),
            ..JobView::default()
        };
        assert_eq!(job_id_str(&j), "64_[0-5%2]");
        assert_eq!(expand_task_str("0-5%2"), vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(expand_task_str("1,3"), vec![1, 3]);
        j.array_task_id = Some(3);
        assert_eq!(job_id_str(&j), "64_3");
        assert_eq!(mem_str(1024), "1G");
        assert_eq!(mem_str(500), "500M");
        // Reference: --mem=1536 and --tmp=1536 print 1.50G; 512000 (a node) 500G.
        assert_eq!(mem_str(1536), "1.50G");
        assert_eq!(mem_str(512_000), "500G");
        assert_eq!(mem_str(1000), "1000M");
        assert_eq!(mem_str(1024 * 1024), "1T");
        assert_eq!(mem_str(1536 * 1024), "1.50T");
        j.dependency = Some("afterany:53:54,afterok:56".into());
        assert_eq!(
            dependency_str(&j),
            "afterany:53(unfulfilled),afterany:54(unfulfilled),afterok:56(unfulfilled)"
        );
        assert_eq!(parse_state("pd"), Ok(Some(JobStateWire::Pending)));
        assert_eq!(parse_state("STOPPED"), Ok(None));
        assert_eq!(parse_state("XX"), Err(BadState));
    }
}
