//! Wire types of resource usage (Slurm's `jobacct_gather`): what a node daemon measured of a
//! step on its node, reported to the controller at the step's end and on the poll interval
//! (`JobAcctGatherFrequency`), and what the accounting query answers per step
//! ([`crate::AcctStep::usage`]) for `sacct`, `sstat` and `seff`.
//!
//! Units are raw: CPU time in microseconds, memory in bytes. Formatting is the commands'
//! business.

use serde::{Deserialize, Serialize};

/// What one node measured of one step (all its tasks there).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// User CPU time (µs).
    pub user_usec: u64,
    /// System CPU time (µs).
    pub system_usec: u64,
    /// Total CPU time (µs): cgroup v1 `cpuacct.usage`, v2 `usage_usec`, else user + system.
    pub total_usec: u64,
    /// Peak resident memory (bytes): v1 `memory.max_usage_in_bytes`, v2 `memory.peak`, or the
    /// largest task's `ru_maxrss` unconfined.
    pub max_rss: u64,
    /// Peak virtual size (bytes), where known (0: unknown).
    pub max_vmsize: u64,
    /// Tasks measured (the step's tasks on this node; 1 for the batch step).
    pub ntasks: u32,
    /// Index (within the step) of the task with the peak RSS.
    pub max_rss_task: u32,
    /// Lowest CPU time of one task (µs) and its task index.
    pub min_cpu_usec: u64,
    /// Task with the lowest CPU time.
    pub min_cpu_task: u32,
    /// Energy (J); 0: not measured (no `AcctGatherEnergyType`), as Slurm prints.
    pub energy_j: u64,
}

/// A node daemon's report of a step's usage ([`crate::NodeToCtl::StepUsage`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepUsage {
    /// Job.
    pub job_id: u64,
    /// Run of the job (its requeue count).
    pub run: u32,
    /// Step name as sacct shows it: `batch`, `extern`, `0`, `1`, ...
    pub step: String,
    /// Node that measured it.
    pub node: String,
    /// The values.
    pub usage: Usage,
    /// True at the step's end (the last report); false for a poll while it runs.
    pub done: bool,
    /// When measured (s since the epoch).
    pub at: i64,
    /// An `srun` step's end on that node (the `done` report): its worst task end there as
    /// `(exit code, signal)` ([`crate::step::worst_end`]; a task that could not start counts
    /// as exit code 2) — the node's part of Slurm's `REQUEST_STEP_COMPLETE`
    /// (`slurmstepd` `mgr.c` `_get_exit_code`); `None` for polls, the batch and extern steps
    /// (appended).
    #[serde(default)]
    pub exit: Option<(i32, i32)>,
}

/// A step's usage over all its nodes, as sacct prints it (Slurm's `slurmdb_stats_t`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepStats {
    /// User CPU (µs), summed over nodes.
    pub user_usec: u64,
    /// System CPU (µs), summed.
    pub system_usec: u64,
    /// Total CPU (µs), summed.
    pub total_usec: u64,
    /// Largest peak RSS of one node (bytes).
    pub max_rss: u64,
    /// Node with that peak.
    pub max_rss_node: String,
    /// Task index with that peak.
    pub max_rss_task: u32,
    /// Average RSS per task (bytes): each node's peak spread over its tasks.
    pub ave_rss: u64,
    /// Largest peak virtual size (bytes).
    pub max_vmsize: u64,
    /// Node with that.
    pub max_vmsize_node: String,
    /// Average virtual size per task (bytes).
    pub ave_vmsize: u64,
    /// Lowest CPU time of one task (µs).
    pub min_cpu_usec: u64,
    /// Node of that task.
    pub min_cpu_node: String,
    /// That task's index.
    pub min_cpu_task: u32,
    /// Average CPU time per task (µs).
    pub ave_cpu_usec: u64,
    /// Tasks measured.
    pub ntasks: u32,
    /// Energy (J).
    pub energy_j: u64,
    /// True once every reporting node sent its end-of-step values.
    pub done: bool,
}

impl StepStats {
    /// Combines the per-node reports of one step (`(node, usage, done)`): sums CPU times,
    /// takes the largest peaks with their node, averages over the tasks. `None` when empty.
    pub fn combine<'a>(nodes: impl IntoIterator<Item = (&'a str, &'a Usage, bool)>) -> Option<StepStats> {
        let mut s = StepStats {
            done: true,
            ..StepStats::default()
        };
        let (mut rss_sum, mut vm_sum, mut any) = (0u128, 0u128, false);
        for (node, u, done) in nodes {
            let first = !any;
            any = true;
            s.done &= done;
            s.user_usec += u.user_usec;
            s.system_usec += u.system_usec;
            s.total_usec += u.total_usec;
            s.energy_j += u.energy_j;
            let tasks = u.ntasks.max(1);
            s.ntasks += tasks;
            rss_sum += u128::from(u.max_rss);
            vm_sum += u128::from(u.max_vmsize);
            if first || u.max_rss > s.max_rss {
                s.max_rss = u.max_rss;
                s.max_rss_node = node.to_string();
                s.max_rss_task = u.max_rss_task;
            }
            if first || u.max_vmsize > s.max_vmsize {
                s.max_vmsize = u.max_vmsize;
                s.max_vmsize_node = node.to_string();
            }
            // One task: its CPU time is the node's; several: the reporter's lowest.
            let min = if tasks == 1 { u.total_usec } else { u.min_cpu_usec };
            if first || min < s.min_cpu_usec {
                s.min_cpu_usec = min;
                s.min_cpu_node = node.to_string();
                s.min_cpu_task = u.min_cpu_task;
            }
        }
        if !any {
            return None;
        }
        let n = u128::from(s.ntasks.max(1));
        s.ave_rss = (rss_sum / n) as u64;
        s.ave_vmsize = (vm_sum / n) as u64;
        s.ave_cpu_usec = s.total_usec / u64::from(s.ntasks.max(1));
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combine_sums_cpu_and_takes_the_largest_peak_with_its_node() {
        let a = Usage {
            user_usec: 3_000_000,
            system_usec: 1_000_000,
            total_usec: 4_000_000,
            max_rss: 100 << 20,
            ntasks: 1,
            ..Usage::default()
        };
        let b = Usage {
            user_usec: 5_000_000,
            system_usec: 0,
            total_usec: 5_000_000,
            max_rss: 300 << 20,
            max_vmsize: 1 << 30,
            ntasks: 1,
            ..Usage::default()
        };
        let s = StepStats::combine([("n1", &a, true), ("n2", &b, false)]).unwrap();
        assert_eq!((s.user_usec, s.system_usec, s.total_usec), (8_000_000, 1_000_000, 9_000_000));
        assert_eq!((s.max_rss, s.max_rss_node.as_str()), (300 << 20, "n2"));
        assert_eq!(s.ave_rss, 200 << 20);
        assert_eq!((s.min_cpu_usec, s.min_cpu_node.as_str()), (4_000_000, "n1"));
        assert_eq!(s.ave_cpu_usec, 4_500_000);
        assert_eq!(s.ntasks, 2);
        assert!(!s.done, "n2 has not ended");
        assert_eq!(StepStats::combine(std::iter::empty()), None);
    }
}
