//! The controller's job record: what is stored in SQLite and shown by `squeue`, around the
//! core's [`JobSpec`]. It has no serde of its own: the store writes it through its row type
//! (`crate::store::rows::JobRow`), so that the on-disk format is the store's.

use flotilla_core::job::JobSpec;
use flotilla_core::sched::Allocation;
use flotilla_proto::JobStateWire;

/// Slurm job states (base states; `COMPLETING` is a state of its own here).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobState {
    /// Waiting.
    Pending,
    /// Bound to nodes.
    Running,
    /// Ended; waiting for nodes to confirm its processes are gone.
    Completing,
    /// Exit 0.
    Completed,
    /// Non-zero exit, a signal, or rejected after admission (`BadConstraints`).
    Failed,
    /// `scancel`.
    Cancelled,
    /// Time limit reached.
    Timeout,
    /// Preempted (and not requeued).
    Preempted,
    /// A node it ran on failed (and it was not requeued).
    NodeFail,
    /// Killed by the OOM killer.
    OutOfMemory,
    /// Ended while pending: it could no longer finish by its `--deadline` (Slurm's
    /// `JOB_DEADLINE`, reason `DeadLine`).
    Deadline,
}

impl JobState {
    /// Slurm's name, as stored in the `state` column and shown by squeue.
    pub fn as_str(self) -> &'static str {
        self.to_wire().as_str()
    }

    /// The wire state.
    pub fn to_wire(self) -> JobStateWire {
        match self {
            JobState::Pending => JobStateWire::Pending,
            JobState::Running => JobStateWire::Running,
            JobState::Completing => JobStateWire::Completing,
            JobState::Completed => JobStateWire::Completed,
            JobState::Failed => JobStateWire::Failed,
            JobState::Cancelled => JobStateWire::Cancelled,
            JobState::Timeout => JobStateWire::Timeout,
            JobState::Preempted => JobStateWire::Preempted,
            JobState::NodeFail => JobStateWire::NodeFail,
            JobState::OutOfMemory => JobStateWire::OutOfMemory,
            JobState::Deadline => JobStateWire::Deadline,
        }
    }

    /// True for states a job never leaves.
    pub fn is_finished(self) -> bool {
        !matches!(self, JobState::Pending | JobState::Running | JobState::Completing)
    }
}

/// Why the controller is stopping a running job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopWhy {
    /// `scancel`.
    Cancel,
    /// Time limit.
    Timeout,
    /// Preempted for a reservation; requeued once stopped.
    Preempt,
    /// `scontrol requeue`; pending again once stopped.
    Requeue {
        /// `requeuehold`.
        hold: bool,
    },
}

/// [`JobRecord::priority`] of a job waiting for its number (Slurm's `NO_VAL`).
pub const PRIO_UNSET: u32 = u32::MAX - 1;

/// The notice a stop gives the job's nodes (what `slurmstepd` prints in the job's stderr).
pub fn stop_cause(why: StopWhy) -> flotilla_proto::StopCause {
    use flotilla_proto::StopCause;
    match why {
        StopWhy::Cancel => StopCause::Cancelled,
        StopWhy::Timeout => StopCause::TimeLimit,
        StopWhy::Preempt => StopCause::Preempted,
        StopWhy::Requeue { .. } => StopCause::Requeued,
    }
}

/// A stop in progress: SIGTERM sent at `term_at`, SIGKILL after `KillWait` (or at `kill_at`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopping {
    /// Why.
    pub why: StopWhy,
    /// When SIGTERM went out (s).
    pub term_at: i64,
    /// SIGKILL sent.
    pub kill_sent: bool,
    /// SIGKILL at this time (s) instead of after `KillWait`: a preemption's deadline.
    pub kill_at: Option<i64>,
}

/// One job (or an array's pending remainder) as the controller stores it (the `jobs.record`
/// column is its [`crate::store::rows::JobRow`]).
#[derive(Debug, Clone, PartialEq)]
pub struct JobRecord {
    /// Job id.
    pub id: u64,
    /// Array job id (array tasks and the array's pending record).
    pub array_job_id: Option<u64>,
    /// Task index of a started array task (or of the last task, which reuses the array id).
    pub array_task_id: Option<u32>,
    /// Tasks of the array not started yet (only on the record holding the array's id while
    /// tasks are pending).
    pub array_pending: Vec<u32>,
    /// `%N` throttle of the array.
    pub array_max_running: Option<u32>,
    /// The job's priority as Slurm's `priority/basic` numbers it (`job_ptr->priority`, what
    /// squeue `%Q` and `scontrol show job` print under it): 0 while held, [`PRIO_UNSET`] until
    /// the controller gives it the next number ([`crate::ctld`]'s `set_job_prio`). Stored
    /// with the record and kept across a restart, as Slurm's state file keeps it.
    pub priority: u32,
    /// State.
    pub state: JobState,
    /// A fixed reason (`BadConstraints`, `DependencyNeverSatisfied`, ...), overriding the
    /// core's pending reason.
    pub reason: Option<String>,
    /// Name.
    pub name: String,
    /// User name.
    pub user: String,
    /// Uid.
    pub uid: u32,
    /// Gid.
    pub gid: u32,
    /// Account.
    pub account: String,
    /// QOS.
    pub qos: String,
    /// Partition name.
    pub partition: String,
    /// Working directory.
    pub work_dir: String,
    /// Stdout pattern.
    pub stdout: Option<String>,
    /// Stderr pattern.
    pub stderr: Option<String>,
    /// Script arguments.
    pub argv: Vec<String>,
    /// `--comment`.
    pub comment: Option<String>,
    /// Submit time (s).
    pub submit_time: i64,
    /// Start time of the current run.
    pub start_time: Option<i64>,
    /// End time.
    pub end_time: Option<i64>,
    /// Time limit in minutes; `None` = unlimited.
    pub time_limit_min: Option<u32>,
    /// Tasks.
    pub ntasks: u32,
    /// CPUs per task.
    pub cpus_per_task: u32,
    /// Nodes requested.
    pub num_nodes: u32,
    /// GRES per node as requested: (name, type, count).
    pub gres: Vec<(String, Option<String>, u64)>,
    /// `-d` as given.
    pub dependency: Option<String>,
    /// `--requeue`.
    pub requeue: bool,
    /// Times requeued.
    pub restarts: u32,
    /// The core's view of the job (its `partition` is re-resolved by name when loading).
    pub spec: JobSpec,
    /// Allocations of the current run.
    pub allocs: Vec<Allocation>,
    /// Node names of the current run, in allocation order; the first is the batch host.
    pub nodes: Vec<String>,
    /// Nodes that still have to confirm the job's processes are gone.
    pub completing_nodes: Vec<String>,
    /// The final state decided when the job entered `COMPLETING`.
    pub end_state: Option<JobState>,
    /// Exit code of the batch script.
    pub exit_code: i32,
    /// Signal that ended it.
    pub exit_signal: i32,
    /// A stop in progress.
    pub stopping: Option<Stopping>,
    /// Flotilla topology as requested (or the partition default).
    pub topology: String,
    /// `--exclusive`.
    pub exclusive: bool,
    /// Memory per node (MiB).
    pub mem_per_node_mib: u64,
    /// Total GPUs.
    pub gpus: u32,
    /// `-w`.
    pub required_nodes: Vec<String>,
    /// `-x`.
    pub excluded_nodes: Vec<String>,
    /// Host submitted from.
    pub submit_host: String,
    /// Memory per CPU (MiB) when memory was asked per CPU (`--mem-per-cpu`, `DefMemPerCPU`).
    pub mem_per_cpu_mib: Option<u64>,
    /// Bounds of the whole array (array jobs and their tasks).
    pub array_tasks: Option<flotilla_proto::ArrayTasks>,
    /// `--signal`.
    pub signal: Option<flotilla_proto::SignalSpec>,
    /// The current run's `--signal` warning (without `B:`) went to its steps.
    pub warn_sent: bool,
    /// Requeued with `State=SpecialExit` and not released since (Slurm's `JOB_SPECIAL_EXIT`
    /// flag, set by `_job_requeue_op` and cleared by `_release_job_rec`, job_mgr.c): a
    /// pending record shows `SPECIAL_EXIT` ([`JobRecord::shown_wire_state`]).
    pub special_exit: bool,
    /// An interactive allocation (`salloc`): no batch script; ends when given back.
    pub interactive: bool,
    /// Last checkpoint the job acknowledged (s since epoch).
    pub last_checkpoint_ack: Option<i64>,
    /// The service this record is a replica of (replica ids are from `REPLICA_ID_BASE` up).
    pub service: Option<u32>,
    /// Accounting beyond the scheduling fields (eligibility, who cancelled, the last run's
    /// allocation), for `sacct`.
    pub acct: crate::acct::AcctInfo,
    /// `Command=`: the script's absolute path and arguments (`None`: `--wrap`, stdin).
    pub command: Option<String>,
    /// `TresPerJob=` (`--gpus`), `gres:gpu[:type]:N`.
    pub tres_per_job: Option<String>,
    /// `TresPerTask=` (`--gpus-per-task`), `gres:gpu[:type]:N`.
    pub tres_per_task: Option<String>,
    /// `TresPerNode=` as submitted (`gres:gpu` for `--gres=gpu`); `None`: written from `gres`
    /// (a client that did not send it, or a `Gres=` update).
    pub tres_per_node: Option<String>,
    /// `TresPerSocket=` (`--gpus-per-socket`), `gres:gpu[:type]:N`.
    pub tres_per_socket: Option<String>,
    /// Slurm's `max_nodes`: `-N`'s maximum (its minimum without one), or the node count
    /// `--gpus` over a per-node GPU count implies; 0 when not bounded.
    pub max_nodes: u32,
    /// `--sockets-per-node` (Slurm's `sockets_per_node`, `Socks/Node=`); 0 when not given.
    pub sockets_per_node: u32,
    /// `--mem=0`: all of each node's memory, which `mem_per_node_mib` holds (Slurm keeps
    /// `pn_min_memory` 0 and shows `MinMemoryNode=0`; goldens-extra 1020).
    pub mem_whole_node: bool,
    /// Per-node options shown but not placed by (`--mincpus` as Slurm's `pn_min_cpus`,
    /// `--ntasks-per-node`, `--ntasks-per-core`, `-B`, `--hint`, `--tmp`).
    pub node_shape: flotilla_proto::NodeShape,
    /// `--mail-type` bits (0: none; [`flotilla_proto::mail_type`]).
    pub mail_type: u16,
    /// `MailUser=`: `--mail-user`, else the user's name when a mail type is set.
    pub mail_user: Option<String>,
    /// [`flotilla_proto::job_flags`] bits from the submission.
    pub job_flags: u16,
    /// `--time-min` in minutes (`TimeMin=`); 1 for a job with a deadline and neither a time
    /// limit nor a partition `DefaultTime` (Slurm 22.05 `_job_create`).
    pub time_min: Option<u32>,
    /// `--deadline` (s since epoch): a pending job that can no longer end by then is ended
    /// `DEADLINE`, and one that starts runs at most until then
    /// ([`crate::ctld::Controller`]'s deadline check, Slurm's `deadline_ok`).
    pub deadline: Option<i64>,
    /// The CPUs in all `scontrol update MinCPUsNode=N` asked for (N x the job's nodes then):
    /// Slurm's `min_cpus` that update sets, shown as a pending job's `NumCPUs=` (a
    /// submission's `--mincpus` is not: its `NumCPUs=` stays its tasks' CPUs).
    pub min_cpus_set: Option<u32>,
    /// `--constraint` as kept (`,` read as `&`) and shown (`Features=`, squeue `%f`); `None`
    /// when not given (`(null)`), `Some("")` for an empty one (`Features=`).
    pub features: Option<String>,
    /// Whether the submission set the task count (`-n`, or sbatch's derived count): Slurm's
    /// `num_tasks` set. A job that ended without starting shows `NumTasks=N/A` otherwise.
    pub ntasks_given: bool,
    /// `scontrol update AdminComment=` (an operator's; Slurm's `admin_comment`), shown by
    /// `scontrol show job` after `WorkDir=`; `None` when never set.
    pub admin_comment: Option<String>,
    /// `scontrol update DelayBoot=` (s; `u32::MAX`: INFINITE), shown as `DelayBoot=`; `None`
    /// when never set (00:00:00).
    pub delay_boot_s: Option<u32>,
    /// The cores the current run holds on each of its nodes (node name -> core indices,
    /// increasing), picked at its start by [`flotilla_core::cores::pick_cores`]; what
    /// `scontrol show job -d` prints as `CPU_IDs=`. Empty while not running, and for a run
    /// recovered from an older controller's record.
    pub cores: std::collections::BTreeMap<String, Vec<u32>>,
    /// The controller's side of an elastic job (`sbatch --elastic`); `None` for a rigid one.
    pub elastic: Option<ElasticRecord>,
}

/// An elastic job's signal, grown parts and resize history (the range itself is the spec's
/// [`flotilla_core::job::Elastic`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ElasticRecord {
    /// `--elastic-signal`: the signal number sent to the job's tasks on each membership
    /// change; `None`: none.
    pub signal: Option<i32>,
    /// The running job's grown parts as the core tracks them (restored at recovery).
    pub grown: Vec<flotilla_core::sched::Growth>,
    /// Membership changes of the current run, oldest first (`scontrol show job`'s
    /// `ResizeHistory=`).
    pub resizes: Vec<Resize>,
}

/// One membership change of an elastic (or `scontrol update NumNodes=`-shrunk) job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resize {
    /// When (s since epoch).
    pub time: i64,
    /// What happened.
    pub change: ResizeChange,
    /// The nodes that joined or left.
    pub nodes: Vec<String>,
    /// The job's node count after it.
    pub num_nodes: u32,
}

/// What a [`Resize`] was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResizeChange {
    /// Grown into free capacity.
    Grow,
    /// Grown nodes given back (they left after SIGTERM, or were killed at the deadline).
    Shrink,
    /// Nodes lost without notice: a failed node, or `scontrol update NumNodes=`.
    Lost,
}

impl ResizeChange {
    /// The word `scontrol show job` prints.
    pub fn as_str(self) -> &'static str {
        match self {
            ResizeChange::Grow => "grow",
            ResizeChange::Shrink => "shrink",
            ResizeChange::Lost => "lost",
        }
    }
}

/// `gres:gpu:4`, `gres:gpu:h100:4`: a GPU count as Slurm's `TresPer*` fields show it.
pub fn gpu_tres(g: &flotilla_proto::GpuCount) -> String {
    match &g.gpu_type {
        Some(t) => format!("gres:gpu:{t}:{}", g.count),
        None => format!("gres:gpu:{}", g.count),
    }
}

impl JobRecord {
    /// Whether the job is a node range (`-N MIN-MAX`) for which sbatch set no task count
    /// (no `-n`, no `--ntasks-per-node`): Slurm 22.05's sbatch derives one from the nodes only
    /// for a fixed count (`opt.c` `_opt_verify`), so the job's `min_cpus` stays one task's
    /// CPUs (`-N2-5` pending: `NumCPUs=1`, `TRES=cpu=1,mem=1G,node=2`; sacct's `ReqTRES` the
    /// same after its start; goldens-extra 0172).
    pub fn one_task_request(&self) -> bool {
        !self.ntasks_given && self.node_shape.ntasks_per_node == 0 && self.max_nodes > self.spec.request.nodes.unwrap_or(1)
    }

    /// A node range's start on `n` nodes ([`flotilla_core::job::Request::nodes_max`]): its
    /// node count is what it got, and without `-n` so is its task count (its tasks a node
    /// times `n`: `NumTasks=4` for `-N2-5` on 4 nodes, Slurm's `_eval_nodes` count), and so
    /// are its GPUs when they are per node (`gres/gpu=6` for `-N1-3 --gpus-per-node=2`). A
    /// requeue calls it with the minimum. Other jobs are left as they are.
    pub fn set_range_nodes(&mut self, n: u32) {
        if self.spec.request.nodes_max.is_none() || n == 0 {
            return;
        }
        if !self.ntasks_given {
            let per_node = self.ntasks.div_ceil(self.num_nodes.max(1)).max(1);
            self.ntasks = per_node.saturating_mul(n);
        }
        if let Some(g) = self.spec.request.gpus_per_node {
            self.gpus = g.saturating_mul(n);
        }
        self.num_nodes = n;
    }

    /// A start on `n` nodes: [`JobRecord::set_range_nodes`], then with `--ntasks-per-node`
    /// the task count is that many on each node it got (Slurm 22.05 `build_node_details`,
    /// node_scheduler.c): `-n 10 --ntasks-per-node=4` runs on 3 nodes with `NumTasks=12`,
    /// `-n 3 --ntasks-per-node=4` on one with `NumTasks=4` (the batch script's
    /// `SLURM_NTASKS` keeps the count asked for; goldens-extra 0436).
    pub fn set_start_nodes(&mut self, n: u32) {
        self.set_range_nodes(n);
        let per_node = self.node_shape.ntasks_per_node;
        if per_node > 0 && n > 0 {
            self.ntasks = per_node.saturating_mul(n);
        }
    }

    /// Sets the time limit (minutes; `None`: unlimited) in both places that keep it: the
    /// record's (shown) and the spec's the core schedules with (seconds).
    pub fn set_time_limit(&mut self, minutes: Option<u32>) {
        self.time_limit_min = minutes;
        self.spec.time_limit_s = minutes.map(|m| u64::from(m) * 60);
    }

    /// The CPUs the job asks for (Slurm's `min_cpus`, a pending job's `NumCPUs=`): what an
    /// update set; else its tasks' CPUs, which a node count only GPU options fixed does not
    /// raise (goldens-extra 0407), one task's for a node range without a task count
    /// ([`JobRecord::one_task_request`]), or its nodes' CPUs when it takes whole nodes.
    pub fn requested_cpus(&self) -> u32 {
        let per_nodes = self.requested_node_cpus();
        if let Some(n) = self.min_cpus_set {
            n
        } else if self.one_task_request() {
            self.cpus_per_task.max(1)
        } else if self.exclusive {
            per_nodes
        } else {
            per_nodes.min(self.ntasks.max(1).saturating_mul(self.cpus_per_task.max(1)))
        }
    }

    /// The CPUs its request asks for on all its nodes (CPUs per node x nodes, at least one
    /// node), saturating: a request no node can hold may ask for more than `u32` CPUs.
    pub fn requested_node_cpus(&self) -> u32 {
        u32::try_from(self.spec.request.cpu_milli_per_node / 1000).unwrap_or(u32::MAX).saturating_mul(self.num_nodes.max(1))
    }

    /// The state queries show (`squeue`, `scontrol show job`, the REST API, `squeue -t`'s
    /// filter): a running job that `scancel`, its time limit or `scontrol requeue` is stopping
    /// shows `COMPLETING` (`CG`) from the moment the stop is asked for, as Slurm gives it its
    /// end state with the `JOB_COMPLETING` flag at once and only waits for its nodes
    /// (`_job_signal` for a cancel, `_job_timed_out` for the time limit, `_job_requeue_op`
    /// for a requeue, slurmctld job_mgr.c; `job_state_string` prints the flag first). The
    /// record itself stays [`JobState::Running`] until the nodes report the job's processes
    /// gone, so when the nodes are freed and what the scheduler decides do not change. A
    /// preemption's stop (a grace time) still shows `RUNNING`, as in Slurm.
    pub fn shown_state(&self) -> JobState {
        match (self.state, self.stopping) {
            (JobState::Running, Some(s)) if s.why != StopWhy::Preempt => JobState::Completing,
            (state, _) => state,
        }
    }

    /// [`Self::shown_state`] on the wire: a pending record requeued with `State=SpecialExit`
    /// shows `SPECIAL_EXIT` (`SE`) until released. Slurm keeps the flag on a pending job and
    /// `job_state_string` prints it before the base state, after `COMPLETING` (so a run
    /// still being ended shows `COMPLETING`); squeue's `-t` matches it by the flag only
    /// (`-t SE`, not `-t PD`: squeue print.c `_filter_job`; goldens-extra 0635).
    pub fn shown_wire_state(&self) -> JobStateWire {
        match self.shown_state() {
            JobState::Pending if self.special_exit => JobStateWire::SpecialExit,
            s => s.to_wire(),
        }
    }

    /// The end state a stop for good gives this record while its nodes still end it:
    /// `CANCELLED` for `scancel`, `TIMEOUT` for the time limit; `None` for a record not being
    /// stopped, or stopped for a requeue or a preemption (pending again afterwards). Slurm sets
    /// that state with the `JOB_COMPLETING` flag, `end_time = now`, and writes the end to
    /// accounting at the stop (`_job_signal`, `_job_timed_out`: `job_completion_logger`,
    /// slurmctld job_mgr.c), so `sacct` and `EndTime=` show the stop at once.
    pub fn stopped_for_good(&self) -> Option<JobState> {
        match (self.state, self.stopping.map(|s| s.why)) {
            (JobState::Running | JobState::Completing, Some(StopWhy::Cancel)) => Some(JobState::Cancelled),
            (JobState::Running | JobState::Completing, Some(StopWhy::Timeout)) => Some(JobState::Timeout),
            _ => None,
        }
    }

    /// True once the record's run is over or being ended: finished, completing on its nodes,
    /// or stopped (cancelled, timed out, preempted, requeued) and waiting for its nodes. A step
    /// can no longer be signalled then (Slurm 22.05 `job_step_signal`: `ESLURM_ALREADY_DONE`),
    /// and a step's end no longer changes the job's accounting record (written at the job's
    /// end).
    pub fn run_ending(&self) -> bool {
        self.state.is_finished() || self.state == JobState::Completing || self.stopping.is_some()
    }

    /// True when `scancel` stopped the job: while it is being stopped, while its nodes end it,
    /// and once it ended `CANCELLED`. Its steps that did not exit 0 end `CANCELLED`, however
    /// their srun saw them end ([`crate::ctld`]'s step completion).
    pub fn cancelled_by_scancel(&self) -> bool {
        self.state == JobState::Cancelled
            || self.end_state == Some(JobState::Cancelled)
            || self.stopping.is_some_and(|s| s.why == StopWhy::Cancel)
    }

    /// True while a run that `scontrol requeue` stopped is still being ended by its nodes
    /// (the record Running, or Completing until every node is done). Slurm's `_job_requeue_op`
    /// (job_mgr.c) ends the run at the requeue: `end_time = now` (left as it was for a job
    /// already completing) and `job_completion_logger(job_ptr, true)` writes it to accounting
    /// as `REQUEUED` at once, so `sacct` shows the run `REQUEUED`, ended at the requeue, while
    /// its nodes still end it (goldens-extra 0318, 0319); the job's next record follows once
    /// the nodes are done (`batch_requeue_fini`).
    pub fn requeued_at_stop(&self) -> bool {
        matches!(self.state, JobState::Running | JobState::Completing)
            && matches!(self.stopping.map(|s| s.why), Some(StopWhy::Requeue { .. }))
    }

    /// The state `scancel`'s filters compare (Slurm's scancel.c `_filter_job_records` and
    /// `_verify_job_ids`): the base state, with jobs Slurm counts as finished left out
    /// (`None`): ended records, a job stopped for good (`CANCELLED|COMPLETING`,
    /// `TIMEOUT|COMPLETING`) and a record ending on its other nodes (its end state with the
    /// completing flag). A run being requeued is `PENDING` (`_job_requeue_op` makes it
    /// `PENDING|COMPLETING`), so `scancel -t PD` names it and `-t R` does not; as the base state
    /// is never `COMPLETING`, `scancel -t CG` names no job.
    pub fn scancel_state(&self) -> Option<JobState> {
        if self.requeued_at_stop() {
            return Some(JobState::Pending);
        }
        match self.state {
            JobState::Pending => Some(JobState::Pending),
            JobState::Running if self.stopped_for_good().is_none() => Some(JobState::Running),
            _ => None,
        }
    }

    /// True when this record is an array's pending remainder.
    pub fn is_array_meta(&self) -> bool {
        !self.array_pending.is_empty()
    }

    /// Slurm's array task string of the pending tasks, e.g. `0-5%2`, `[1,3]` style
    /// compressed into ranges (`1,3`, `0-2`).
    pub fn array_task_str(&self) -> Option<String> {
        if self.array_pending.is_empty() {
            return None;
        }
        let mut parts = Vec::new();
        let mut i = 0;
        let v = &self.array_pending;
        while i < v.len() {
            let mut j = i;
            while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
                j += 1;
            }
            if j > i {
                parts.push(format!("{}-{}", v[i], v[j]));
            } else {
                parts.push(v[i].to_string());
            }
            i = j + 1;
        }
        let mut s = parts.join(",");
        if let Some(m) = self.array_max_running {
            s.push_str(&format!("%{m}"));
        }
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    /// The controller shows node lists as Slurm's `bitmap2node_name` does: the hostlist of
    /// the names, sorted (`flotilla_core::hostlist::compress_sorted`), whatever order the
    /// allocation lists them in.
    #[test]
    fn node_lists_are_slurms_sorted_hostlists() {
        use flotilla_core::hostlist::compress_sorted;
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(compress_sorted(&v(&["gpu01"])), "gpu01");
        assert_eq!(compress_sorted(&v(&["gpu01", "gpu02"])), "gpu[01-02]");
        assert_eq!(compress_sorted(&v(&["gpu04", "gpu01", "gpu03"])), "gpu[01,03-04]");
        assert_eq!(compress_sorted(&v(&["gpu-02", "gpu-01"])), "gpu-[01-02]");
        assert_eq!(compress_sorted(&v(&["rack2-n01", "rack1-n02", "rack1-n01"])), "rack1-n[01-02],rack2-n01");
        // Numbers of different widths share brackets, prefixes sort (the compressor this
        // module had kept `n9,n10` apart and put names without a number last).
        assert_eq!(compress_sorted(&v(&["n10", "n9"])), "n[9-10]");
        assert_eq!(compress_sorted(&v(&["n1", "login"])), "login,n1");
        assert_eq!(compress_sorted::<String>(&[]), "");
    }
}
