//! Job steps in the controller (Slurm's `step_mgr`): creating a step inside a running job
//! (`srun`), its task layout, the CPUs and GPUs running steps hold, the step's end, the
//! `job_steps` rows, `squeue -s`, and giving back an interactive allocation (`salloc`).
//!
//! The controller is the single writer: a step is recorded (a `RUNNING` row in `job_steps`)
//! in the same commit that answers `srun` and sends each node daemon its `LaunchStep`. The
//! layout ([`layout`]) is a pure function of the request and what the job holds.
//!
//! Rules (Slurm 22.05 `srun(1)`): tasks are laid out in blocks (consecutive task ids per
//! node), as evenly as possible over the step's nodes; a step's CPUs and, with
//! `--gpus-per-task`, its GPUs are its own while it runs unless it or the other step was
//! created with `--overlap`. Its CPUs on a node are all of the job's there (Slurm 22.05's
//! `--whole` default: it takes no node where another step holds CPUs), or with `--exact`
//! (which `-c` implies) its tasks × CPUs per task. A step that could fit once others end
//! waits (`ESLURM_NODES_BUSY`, srun retries); one that can never fit in the job fails with
//! `More processors requested than permitted`.

use super::{Controller, Ident};
use crate::job::JobState;
use crate::store::StepRow;
use flotilla_core::hostlist::compress_sorted;
use flotilla_proto::errno::*;
use flotilla_proto::step::{LaunchStep, ReleaseAllocation, StepComplete, StepInfo, StepLayout, StepRequest};
use flotilla_proto::{CtlToNode, JobQuery, Response, SlurmError};
use std::collections::BTreeMap;
use tracing::info;

/// The signal that cancels a step (Linux's SIGKILL).
const SIGKILL: i32 = 9;

/// The steps of running jobs, as the controller holds them.
#[derive(Debug, Default)]
pub struct StepTable {
    jobs: BTreeMap<u64, JobSteps>,
    /// Steps their job's end recorded before their `srun` reported, by (job, step): the
    /// report, when it comes in time, replaces that record ([`EndedStep`]).
    ended: BTreeMap<(u64, u32), EndedStep>,
}

/// A step recorded `CANCELLED` (SIGKILL) when its job ended for good while it still ran.
/// Slurm 22.05 keeps a job's step records until its completing phase ends
/// (`job_scheduler.c` `cleanup_completing` → `step_mgr.c` `delete_step_records`), and the
/// step's own completion report, which comes before that, is what the database gets: a step
/// killed with its cancelled job ends `CANCELLED 0:15` and counts in the job's derived exit
/// code as `scontrol` shows it (goldens-extra `a03_derived_exit_code`). Here the node daemon's
/// report of the job's end can come before `srun`'s report of the step, so the step's record
/// is written at once (a crash loses nothing) and kept here until `until` (`KillWait` + 2 s
/// after the job's end) for the step's own report to correct it: `srun`'s, or its nodes' (as
/// Slurm's slurmstepd reports it, the node daemon outlives an `srun` killed with its job).
#[derive(Debug)]
struct EndedStep {
    start_time: i64,
    end_time: i64,
    nodes: String,
    /// The step's CPUs and memory ([`RunningStep`]'s `alloc`).
    alloc: (u32, u64),
    cancelled_by: Option<u32>,
    /// The step's nodes.
    node_names: Vec<String>,
    /// Those that reported its end there, as in [`RunningStep`].
    node_ends: BTreeMap<String, (i32, i32)>,
    /// Until when a report is taken (Unix seconds).
    until: i64,
}

#[derive(Debug, Default)]
struct JobSteps {
    next: u32,
    running: BTreeMap<u32, RunningStep>,
}

#[derive(Debug, Clone)]
struct RunningStep {
    name: String,
    /// Indices into the job's nodes.
    nodes: Vec<usize>,
    /// CPUs held on each of those nodes (0 when overlapping; the job's there unless `exact`).
    cpus: Vec<u32>,
    /// `--exact` (or `-c`): it holds its tasks' CPUs, not all of the job's on its nodes.
    exact: bool,
    /// The step's CPUs over its nodes, held or not, and its memory in MiB (its TRES `cpu=`
    /// and `mem=` in `sacct`: [`step_mem_mib`]).
    alloc: (u32, u64),
    /// GPUs held on each of those nodes (0 when overlapping or no `--gpus-per-task`).
    gpus: Vec<u64>,
    overlap: bool,
    ntasks: u32,
    start_time: i64,
    /// The uid whose `scancel JOB.STEP` sent it SIGKILL (the last one; Slurm 22.05
    /// `step_mgr.c` `_step_signal` keeps it as the step's `requid`): it ends `CANCELLED`
    /// however its srun saw it end, and `sacct` shows `CANCELLED by <uid>`.
    cancelled_by: Option<u32>,
    /// `srun`'s host and process id (`scontrol show step` `SrunHost:Pid=`).
    srun: (String, u32),
    /// An elastic job's step: its launch as sent to its first node (layout of every node it
    /// ever ran on), to start it on the nodes that join ([`Controller::extend_steps`]).
    launch: Option<Box<LaunchStep>>,
    /// The nodes that reported the step's end there, with their worst task end
    /// ([`Controller::node_step_end`]).
    node_ends: BTreeMap<String, (i32, i32)>,
}

/// A step's end state from its report: a signal ended it `CANCELLED`, a non-zero exit
/// `FAILED`, else `COMPLETED` (Slurm 22.05 `as_mysql_job.c` `as_mysql_step_complete`;
/// goldens-extra `a03_derived_exit_code`); a step cancelled (its own `scancel J.S`, or its
/// job's scancel) that did not exit 0 is `CANCELLED` however its srun saw it end (golden 0219
/// of the accounting recordings: srun's report of the signal comes before the job's end).
fn step_end_state(exit_code: i32, signal: i32, cancelled: bool) -> &'static str {
    if signal != 0 || (cancelled && exit_code != 0) {
        "CANCELLED"
    } else if exit_code != 0 {
        "FAILED"
    } else {
        "COMPLETED"
    }
}

/// Takes node `node`'s report `exit` of a step on nodes `on` into `ends` (the reports so far;
/// a node not in `on` is passed over); the worst of them once every node in `on` reported.
fn all_nodes_ended(ends: &mut BTreeMap<String, (i32, i32)>, on: &[String], node: String, exit: (i32, i32)) -> Option<(i32, i32)> {
    if !on.contains(&node) {
        return None;
    }
    ends.insert(node, exit);
    if !on.iter().all(|n| ends.contains_key(n)) {
        return None;
    }
    flotilla_proto::step::worst_end(ends.values().copied())
}

/// A step's memory in MiB as Slurm 22.05 counts it in its TRES (`step_mgr.c`
/// `_step_alloc_lps`, checked on the reference): the job's memory per CPU times the step's
/// `cpus`, else the job's per node times its `nodes` (a 1-CPU `--exact` step of a `--mem=8G`
/// job has `mem=8G`).
fn step_mem_mib(mem_per_cpu: Option<u64>, mem_per_node: u64, cpus: u32, nodes: usize) -> u64 {
    match mem_per_cpu {
        Some(m) => m.saturating_mul(u64::from(cpus)),
        None => mem_per_node.saturating_mul(nodes as u64),
    }
}

/// What one node of the job offers a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeOffer {
    /// Node name.
    pub name: String,
    /// CPUs of the job there.
    pub cpus: u32,
    /// GPUs of the job there.
    pub gpus: u64,
    /// CPUs other running steps hold there.
    pub held_cpus: u32,
    /// GPUs other running steps hold there.
    pub held_gpus: u64,
}

/// The job's defaults a step falls back on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobDefaults {
    /// `--ntasks` of the job (one per node when it gave none).
    pub ntasks: u32,
    /// `-c` of the job.
    pub cpus_per_task: u32,
}

/// A laid-out step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// Indices into the offers, in order.
    pub nodes: Vec<usize>,
    /// Tasks on each of those nodes.
    pub counts: Vec<u32>,
    /// CPUs per task.
    pub cpus_per_task: u32,
    /// GPUs of each task, per node (the node's job GPUs when no `--gpus-per-task`).
    pub task_gpus: Vec<Vec<u64>>,
    /// GPUs the step holds per node (`--gpus-per-task`).
    pub held_gpus: Vec<u64>,
    /// The step's CPUs per node: the job's there, or with `--exact` its tasks × CPUs per
    /// task (held from other steps unless `--overlap`).
    pub cpus: Vec<u32>,
}

/// Lays a step out over the job's nodes (`offers`, in allocation order).
///
/// Which nodes (Slurm 22.05 `step_mgr.c` `_pick_step_nodes`): all of `-w`, else the first
/// ones in the job's order among those the step may take now (a `--whole` step a node where
/// no other step holds CPUs, an `--exact` one a node with CPUs free for a task), then the
/// others; the chosen ones in the job's order. What a step holds (`_step_alloc_lps`): the
/// job's CPUs on each node unless `--exact`.
///
/// Errors (Slurm's codes): `ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE` for a `-w` node that is
/// not the job's or a node count the job or `-w` cannot give; `ESLURM_TOO_MANY_REQUESTED_CPUS`
/// when the tasks need more CPUs than the job has on a node; `ESLURM_INVALID_GRES` for more
/// GPUs per node than the job has; `ESLURM_NODES_BUSY` when it fits the job but other running
/// steps hold what it needs.
pub fn layout(req: &StepRequest, offers: &[NodeOffer], job: JobDefaults) -> Result<Placed, SlurmError> {
    let err = SlurmError::new;
    let cpt = req.cpus_per_task.unwrap_or(job.cpus_per_task).max(1);
    let whole = !req.exact && !req.overlap;
    // Whether a node can take a task of the step now.
    let usable = |o: &NodeOffer| req.overlap || if whole { o.held_cpus == 0 } else { o.cpus.saturating_sub(o.held_cpus) >= cpt };
    let candidates: Vec<usize> = if req.nodelist.is_empty() {
        let (mut free, busy): (Vec<usize>, Vec<usize>) = (0..offers.len()).partition(|&i| usable(&offers[i]));
        free.extend(busy);
        free
    } else {
        let mut v = Vec::new();
        for (i, o) in offers.iter().enumerate() {
            if req.nodelist.contains(&o.name) {
                v.push(i);
            }
        }
        if v.len() != req.nodelist.len() {
            return Err(err(ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE));
        }
        v
    };
    if candidates.is_empty() {
        return Err(err(ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE));
    }
    let tpn = req.ntasks_per_node.filter(|&t| t > 0);
    let nodes_req = req.nodes.filter(|&n| n > 0);
    if nodes_req.is_some_and(|n| n as usize > candidates.len()) {
        return Err(err(ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE));
    }
    let ntasks = match (req.ntasks.filter(|&n| n > 0), tpn, nodes_req) {
        (Some(n), _, _) => n,
        (None, Some(t), Some(n)) => t.saturating_mul(n),
        (None, Some(t), None) => t.saturating_mul(candidates.len() as u32),
        (None, None, Some(n)) => n,
        (None, None, None) if req.nodelist.is_empty() => job.ntasks.max(1),
        (None, None, None) => candidates.len() as u32,
    };
    let mut nnodes = match (nodes_req, tpn) {
        (Some(n), _) => n as usize,
        (None, Some(t)) => (ntasks.div_ceil(t) as usize).min(candidates.len()),
        (None, None) => (ntasks as usize).min(candidates.len()),
    };
    // Fewer tasks than nodes: one task per node on the first ones (srun warns and shrinks).
    nnodes = nnodes.min(ntasks as usize).max(1);
    let mut chosen: Vec<usize> = candidates[..nnodes].to_vec();
    chosen.sort_unstable();
    let counts: Vec<u32> = match tpn {
        Some(t) => {
            if ntasks > t.saturating_mul(nnodes as u32) {
                return Err(err(ESLURM_TOO_MANY_REQUESTED_CPUS));
            }
            let mut left = ntasks;
            (0..nnodes)
                .map(|i| {
                    // Block: as even as possible, never over t per node.
                    let rest = (nnodes - i) as u32;
                    let c = left.div_ceil(rest).min(t);
                    left -= c;
                    c
                })
                .collect()
        }
        None => {
            let base = ntasks / nnodes as u32;
            let extra = (ntasks % nnodes as u32) as usize;
            (0..nnodes).map(|i| base + u32::from(i < extra)).collect()
        }
    };
    let mut busy = false;
    let mut task_gpus = Vec::with_capacity(nnodes);
    let mut held_gpus = Vec::with_capacity(nnodes);
    let mut cpus = Vec::with_capacity(nnodes);
    for (&i, &c) in chosen.iter().zip(&counts) {
        let o = &offers[i];
        let need = c.saturating_mul(cpt);
        if need > o.cpus {
            return Err(err(ESLURM_TOO_MANY_REQUESTED_CPUS));
        }
        if !req.overlap && (if whole { o.held_cpus > 0 } else { need > o.cpus.saturating_sub(o.held_cpus) }) {
            busy = true;
        }
        cpus.push(if req.exact { need } else { o.cpus });
        match req.gpus_per_task.filter(|&g| g > 0) {
            Some(g) => {
                let want = c.saturating_mul(g) as usize;
                if want > o.gpus.count_ones() as usize {
                    return Err(err(ESLURM_INVALID_GRES));
                }
                let free = if req.overlap { o.gpus } else { o.gpus & !o.held_gpus };
                if want > free.count_ones() as usize {
                    busy = true;
                    task_gpus.push(Vec::new());
                    held_gpus.push(0);
                    continue;
                }
                let bits: Vec<u32> = (0..64).filter(|b| free & (1u64 << b) != 0).collect();
                let per: Vec<u64> = (0..c as usize)
                    .map(|t| bits[t * g as usize..(t + 1) * g as usize].iter().fold(0u64, |m, b| m | 1u64 << b))
                    .collect();
                held_gpus.push(if req.overlap { 0 } else { per.iter().fold(0, |m, g| m | g) });
                task_gpus.push(per);
            }
            None => {
                task_gpus.push(vec![o.gpus; c as usize]);
                held_gpus.push(0);
            }
        }
    }
    if busy {
        return Err(err(ESLURM_NODES_BUSY));
    }
    Ok(Placed {
        nodes: chosen,
        counts,
        cpus_per_task: cpt,
        task_gpus,
        held_gpus,
        cpus,
    })
}

impl StepTable {
    /// Nodes left job `job_id` (an elastic shrink, a lost member): `keep[i]` says whether the
    /// job's node `i` stays. The running steps' node indices follow the job's shorter node
    /// list; a step's part on a leaving node is dropped (its tasks there are killed with the
    /// job's processes on that node, and its srun reports them).
    pub fn nodes_left(&mut self, job_id: u64, keep: &[bool]) {
        let Some(t) = self.jobs.get_mut(&job_id) else { return };
        // New index of each kept node.
        let mut new_index = Vec::with_capacity(keep.len());
        let mut next = 0usize;
        for &k in keep {
            new_index.push(k.then_some(next));
            next += usize::from(k);
        }
        for s in t.running.values_mut() {
            let mut nodes = Vec::new();
            let mut cpus = Vec::new();
            let mut gpus = Vec::new();
            for ((&n, &c), &g) in s.nodes.iter().zip(&s.cpus).zip(&s.gpus) {
                if let Some(Some(i)) = new_index.get(n) {
                    nodes.push(*i);
                    cpus.push(c);
                    gpus.push(g);
                }
            }
            (s.nodes, s.cpus, s.gpus) = (nodes, cpus, gpus);
        }
    }
}

impl Controller {
    /// `REQUEST_JOB_STEP_CREATE`: lays the step out, records it, and sends each node its
    /// `LaunchStep` (after the commit, with the reply).
    pub(super) fn create_step(&mut self, ident: Ident, req: StepRequest, now: i64) -> Response {
        let Some(rec) = self.jobs.get(&req.job_id) else {
            return Response::Error(SlurmError::new(ESLURM_INVALID_JOB_ID));
        };
        if !ident.admin && rec.uid != ident.uid {
            return Response::Error(SlurmError::new(ESLURM_ACCESS_DENIED));
        }
        match rec.state {
            JobState::Running if rec.stopping.is_none() => {}
            JobState::Pending => return Response::Error(SlurmError::new(ESLURM_JOB_PENDING)),
            _ => return Response::Error(SlurmError::new(ESLURM_ALREADY_DONE)),
        }
        if !self.steps.jobs.contains_key(&req.job_id) {
            // A new run: what is left of an earlier one's steps is not its.
            self.steps.ended.retain(|k, _| k.0 != req.job_id);
        }
        let table = self.steps.jobs.entry(req.job_id).or_default();
        if table.next == 0 && table.running.is_empty() {
            // After a controller restart, continue after the steps already recorded.
            table.next = self.store.next_step_id(req.job_id).unwrap_or(0);
        }
        // The job's CPUs on each node as Slurm counts them: its tasks laid out over its nodes,
        // the first ones taking one more when they do not divide evenly (select/cons_tres:
        // `-N2 -n3` has 2 and 1, `SLURM_JOB_CPUS_PER_NODE=2,1`; goldens-extra
        // `a03_scontrol_show_step`), where Flotilla's allocation holds the larger count on
        // each node.
        let n = rec.allocs.len() as u32;
        let uneven = rec.ntasks_given && !rec.exclusive && n > 1 && rec.ntasks % n != 0;
        let slurm_cpus = |i: usize| match uneven {
            true => (rec.ntasks / n + u32::from((i as u32) < rec.ntasks % n)).saturating_mul(rec.cpus_per_task.max(1)),
            false => u32::MAX,
        };
        let mut offers: Vec<NodeOffer> = rec
            .nodes
            .iter()
            .zip(&rec.allocs)
            .enumerate()
            .map(|(i, (n, a))| NodeOffer {
                name: n.clone(),
                cpus: ((a.part.cpu_milli / 1000) as u32).min(slurm_cpus(i)),
                gpus: a.part.gpus.0,
                held_cpus: 0,
                held_gpus: 0,
            })
            .collect();
        for s in table.running.values().filter(|s| !s.overlap) {
            for ((&n, &c), &g) in s.nodes.iter().zip(&s.cpus).zip(&s.gpus) {
                offers[n].held_cpus = offers[n].held_cpus.saturating_add(c);
                offers[n].held_gpus |= g;
            }
        }
        let defaults = JobDefaults {
            ntasks: rec.ntasks.max(1),
            cpus_per_task: rec.cpus_per_task.max(1),
        };
        let placed = match layout(&req, &offers, defaults) {
            Ok(p) => p,
            Err(e) => return Response::Error(e),
        };
        let step_id = table.next;
        table.next += 1;
        let mut tasks = Vec::with_capacity(placed.nodes.len());
        let mut first = 0u32;
        for &c in &placed.counts {
            tasks.push((first..first + c).collect::<Vec<u32>>());
            first += c;
        }
        let layout = StepLayout {
            job_id: req.job_id,
            step_id,
            nodes: placed.nodes.iter().map(|&i| offers[i].name.clone()).collect(),
            tasks,
            cpus_per_task: placed.cpus_per_task,
        };
        let ntasks = layout.ntasks();
        let step_cpus: u32 = placed.cpus.iter().sum();
        let alloc = (step_cpus, step_mem_mib(rec.mem_per_cpu_mib, rec.mem_per_node_mib, step_cpus, placed.nodes.len()));
        let running = RunningStep {
            name: req.name.clone(),
            nodes: placed.nodes.clone(),
            cpus: placed.cpus.iter().map(|&c| if req.overlap { 0 } else { c }).collect(),
            exact: req.exact,
            alloc,
            gpus: placed.held_gpus.clone(),
            overlap: req.overlap,
            ntasks,
            start_time: now,
            cancelled_by: None,
            srun: (req.srun_host.clone(), req.srun_pid),
            launch: None,
            node_ends: BTreeMap::new(),
        };
        table.running.insert(step_id, running);
        let nodes_str = compress_sorted(&layout.nodes);
        info!(job = req.job_id, step = step_id, nodes = %nodes_str, tasks = ntasks, "step created");
        self.batch.step_rows.push(StepRow {
            job_id: req.job_id,
            step: step_id.to_string(),
            state: "RUNNING".into(),
            exit_code: 0,
            signal: 0,
            start_time: Some(now),
            end_time: None,
            nodes: nodes_str,
            requid: None,
            reason_prev: None,
            alloc: Some(alloc),
        });
        let elastic = rec.spec.elastic.is_some();
        let launch_base = LaunchStep {
            layout: layout.clone(),
            node_index: 0,
            task_gpus: Vec::new(),
            job_name: rec.name.clone(),
            job_nodes: compress_sorted(&rec.nodes),
            job_cpus_per_node: offers.iter().map(|o| o.cpus).collect(),
            partition: rec.partition.clone(),
            array: rec.array_job_id.zip(rec.array_task_id),
            uid: rec.uid,
            gid: rec.gid,
            user: rec.user.clone(),
            argv: req.argv,
            environment: req.environment,
            work_dir: req.work_dir,
            stdout: req.stdout,
            stderr: req.stderr,
            srun_addr: req.srun_addr,
            io_key: req.io_key,
        };
        for (k, name) in layout.nodes.iter().enumerate() {
            let mut m = launch_base.clone();
            m.node_index = k as u32;
            m.task_gpus = placed.task_gpus[k].clone();
            self.send(name, CtlToNode::LaunchStep(Box::new(m)));
        }
        if elastic {
            if let Some(s) = self.steps.jobs.get_mut(&req.job_id).and_then(|t| t.running.get_mut(&step_id)) {
                let mut base = launch_base;
                base.task_gpus = placed.task_gpus.first().cloned().unwrap_or_default();
                s.launch = Some(Box::new(base));
            }
        }
        Response::StepCreated(layout)
    }

    /// An elastic job grew from `old_len` nodes: each of its steps that ran on every member
    /// (the job's launch command, `srun torchrun ...`) is started on the nodes that joined,
    /// with the same arguments, as workers of the same step: as many tasks on each new node
    /// as on the step's first node, task ids after the step's last, each with the job's GPUs
    /// on that node. The step's `srun` takes their connections as they come.
    pub(super) fn extend_steps(&mut self, job_id: u64, old_len: usize) {
        let Some(rec) = self.jobs.get(&job_id) else { return };
        let names = rec.nodes.clone();
        let cpus_per_node: Vec<u32> = rec.allocs.iter().map(|a| (a.part.cpu_milli / 1000) as u32).collect();
        let gpus_per_node: Vec<u64> = rec.allocs.iter().map(|a| a.part.gpus.0).collect();
        let (mem_per_cpu, mem_per_node) = (rec.mem_per_cpu_mib, rec.mem_per_node_mib);
        let Some(t) = self.steps.jobs.get_mut(&job_id) else { return };
        let mut out = Vec::new();
        for s in t.running.values_mut() {
            let Some(base) = s.launch.as_mut() else { continue };
            if s.nodes.len() != old_len {
                continue;
            }
            let per_node = base.layout.tasks.first().map_or(1, |t| t.len() as u32);
            let cpt = base.layout.cpus_per_task.max(1);
            base.job_nodes = compress_sorted(&names);
            base.job_cpus_per_node = cpus_per_node.clone();
            for i in old_len..names.len() {
                let first = base.layout.ntasks();
                base.layout.nodes.push(names[i].clone());
                base.layout.tasks.push((first..first + per_node).collect());
                s.nodes.push(i);
                let cpus = if s.exact { per_node * cpt } else { cpus_per_node[i] };
                s.cpus.push(if s.overlap { 0 } else { cpus });
                s.alloc.0 += cpus;
                s.alloc.1 = step_mem_mib(mem_per_cpu, mem_per_node, s.alloc.0, s.nodes.len());
                s.gpus.push(0);
                s.ntasks += per_node;
                let mut m = (**base).clone();
                m.node_index = (base.layout.nodes.len() - 1) as u32;
                m.task_gpus = vec![gpus_per_node[i]; per_node as usize];
                info!(job = job_id, step = m.layout.step_id, node = %names[i], tasks = per_node, "elastic step extended to a new member");
                out.push((names[i].clone(), m));
            }
        }
        for (n, m) in out {
            self.send(&n, CtlToNode::LaunchStep(Box::new(m)));
        }
    }

    /// `scancel JOB.STEP` ([`flotilla_proto::SignalStep`]; Slurm 22.05 `step_mgr.c`
    /// `job_step_signal`): the signal (SIGKILL when none is given) to the tasks of one running
    /// step, on its nodes; a cancelled step ends `CANCELLED`. Errors, in Slurm's order: the job
    /// not known `ESLURM_INVALID_JOB_ID`; another user's `ESLURM_USER_ID_MISSING`; ended or
    /// ending `ESLURM_ALREADY_DONE`; not running `ESLURM_TRANSITION_STATE_NO_UPDATE`; no such
    /// running step `ESLURM_INVALID_JOB_ID`. A job scancel's filters leave out is passed over:
    /// no result, nothing signalled (scancel.c `_filter_job_records`).
    pub(super) fn signal_step(&mut self, ident: Ident, s: flotilla_proto::SignalStep, now: i64) -> Response {
        let job_id = match self.resolve(&s.job).as_slice() {
            [super::Target::Job(id)] => *id,
            [super::Target::Tasks(..)] => return Self::step_result(s.job, Some(ESLURM_TRANSITION_STATE_NO_UPDATE)),
            _ => return Self::step_result(s.job, Some(ESLURM_INVALID_JOB_ID)),
        };
        let rec = &self.jobs[&job_id];
        if !self.cancel_filter_admits(rec, &s.filter) {
            return Response::JobResults(Vec::new());
        }
        if !ident.admin && rec.uid != ident.uid {
            return Self::step_result(s.job, Some(ESLURM_USER_ID_MISSING));
        }
        if rec.run_ending() {
            return Self::step_result(s.job, Some(ESLURM_ALREADY_DONE));
        }
        if rec.state != JobState::Running {
            return Self::step_result(s.job, Some(ESLURM_TRANSITION_STATE_NO_UPDATE));
        }
        let signal = s.signal.unwrap_or(SIGKILL);
        let Some(step) = self.steps.jobs.get_mut(&job_id).and_then(|t| t.running.get_mut(&s.step_id)) else {
            return Self::step_result(s.job, Some(ESLURM_INVALID_JOB_ID));
        };
        if signal == SIGKILL {
            step.cancelled_by = Some(ident.uid);
        }
        info!(job = job_id, step = s.step_id, signal, uid = ident.uid, "signal to a step");
        let nodes: Vec<String> = step.nodes.iter().filter_map(|&i| rec.nodes.get(i).cloned()).collect();
        let cancelled_at = (signal == SIGKILL).then_some(now);
        let wait_s = u32::try_from(self.opts.kill_wait_s.saturating_add(2)).unwrap_or(u32::MAX);
        for n in nodes {
            self.send(&n, CtlToNode::SignalStep { job_id, step_id: s.step_id, signal, cancelled_at, wait_s });
        }
        Self::step_result(s.job, None)
    }

    fn step_result(job: flotilla_proto::JobRef, error: Option<i32>) -> Response {
        Response::JobResults(vec![flotilla_proto::JobResult { job, error: error.map(SlurmError::new) }])
    }

    /// `REQUEST_STEP_COMPLETE`: the step's row gets its end; its CPUs and GPUs are free; its
    /// exit code goes into the job's derived exit code when it is the highest so far.
    pub(super) fn step_complete(&mut self, ident: Ident, c: StepComplete, now: i64) -> Response {
        let Some(rec) = self.jobs.get(&c.job_id) else {
            return Response::Error(SlurmError::new(ESLURM_INVALID_JOB_ID));
        };
        if !ident.admin && rec.uid != ident.uid {
            return Response::Error(SlurmError::new(ESLURM_ACCESS_DENIED));
        }
        let Some(s) = self.steps.jobs.get_mut(&c.job_id).and_then(|t| t.running.remove(&c.step_id)) else {
            // Ended with its job: srun's report replaces that record while it is kept
            // ([`EndedStep`]); late, or for a step never known, nothing changes.
            if let Some(e) = self.steps.ended.remove(&(c.job_id, c.step_id)) {
                // (Its end time stays the job's end.)
                self.record_step_end(&c, e.cancelled_by, (e.start_time, e.end_time), (e.nodes, e.alloc));
            }
            return Response::JobResults(Vec::new());
        };
        let nodes: Vec<String> = s.nodes.iter().filter_map(|&i| rec.nodes.get(i).cloned()).collect();
        self.record_step_end(&c, s.cancelled_by, (s.start_time, now), (compress_sorted(&nodes), s.alloc));
        Response::JobResults(Vec::new())
    }

    /// A step's end as its report `c` gives it: its row (`start`, `end`, `nodes`, its `alloc`; the
    /// canceller kept when it ends `CANCELLED`), and its wait status into the job's derived
    /// exit code (Slurm 22.05 `step_mgr.c` `_internal_step_complete`: the highest of its srun
    /// steps) — the accounting record's too only while the job's run has not ended (its
    /// database row was written at its end; a step its job's cancel killed moves only
    /// `scontrol`'s value).
    fn record_step_end(&mut self, c: &StepComplete, cancelled_by: Option<u32>, (start, end): (i64, i64), (nodes, alloc): (String, (u32, u64))) {
        let rec = self.jobs.get_mut(&c.job_id).expect("job exists");
        let state = step_end_state(c.exit_code, c.signal, cancelled_by.is_some() || rec.cancelled_by_scancel());
        info!(job = c.job_id, step = c.step_id, exit_code = c.exit_code, signal = c.signal, state, "step ended");
        let status = crate::acct::wait_status(c.exit_code, c.signal);
        if status > rec.acct.derived_ec {
            rec.acct.derived_ec = status;
            if !rec.run_ending() {
                rec.acct.acct_derived_ec = status;
                self.batch.acct.insert(c.job_id);
            }
            self.dirty(c.job_id);
        }
        self.batch.step_rows.push(StepRow {
            job_id: c.job_id,
            step: c.step_id.to_string(),
            state: state.into(),
            exit_code: c.exit_code,
            signal: c.signal,
            start_time: Some(start),
            end_time: Some(end),
            nodes,
            requid: cancelled_by.filter(|_| state == "CANCELLED"),
            reason_prev: None,
            alloc: Some(alloc),
        });
    }

    /// The job ended (or is ending): its running steps end with it, `CANCELLED` by SIGKILL
    /// (Slurm records a step killed with its job so). When the job ended for good (not a run
    /// that a requeue ends, whose steps move to `job_run_steps`), each is kept a while for
    /// its `srun`'s report ([`EndedStep`]).
    pub(super) fn end_steps(&mut self, job_id: u64, now: i64) {
        let Some(t) = self.steps.jobs.remove(&job_id) else { return };
        let rec = self.jobs.get(&job_id);
        let names: Vec<String> = rec.map(|r| r.nodes.clone()).unwrap_or_default();
        let requeued = rec
            .and_then(|r| r.stopping)
            .is_some_and(|s| matches!(s.why, crate::job::StopWhy::Preempt | crate::job::StopWhy::Requeue { .. }));
        let until = now.saturating_add(self.opts.kill_wait_s).saturating_add(2);
        for (id, s) in t.running {
            let node_names: Vec<String> = s.nodes.iter().filter_map(|&i| names.get(i).cloned()).collect();
            let nodes = compress_sorted(&node_names);
            if !requeued {
                let e = EndedStep {
                    start_time: s.start_time,
                    end_time: now,
                    nodes: nodes.clone(),
                    alloc: s.alloc,
                    cancelled_by: s.cancelled_by,
                    node_names,
                    node_ends: s.node_ends,
                    until,
                };
                self.steps.ended.insert((job_id, id), e);
            }
            self.batch.step_rows.push(StepRow {
                job_id,
                step: id.to_string(),
                state: "CANCELLED".into(),
                exit_code: 0,
                signal: SIGKILL,
                start_time: Some(s.start_time),
                end_time: Some(now),
                nodes,
                requid: s.cancelled_by,
                reason_prev: None,
                alloc: Some(s.alloc),
            });
        }
    }

    /// A node's report of step `step_id`'s end there (`exit`, its worst task end; Slurm 22.05
    /// `step_mgr.c` `step_partial_comp`, each node's slurmstepd reporting): once every node of
    /// the step has reported, the step ends with the worst of them (`_internal_step_complete`)
    /// — its CPUs and GPUs free, its row written — and `srun`'s report, which follows, finds
    /// it ended. A step its job's end recorded ([`EndedStep`]) takes them as `srun`'s report.
    /// A report from a node the step does not run on changes nothing.
    pub(super) fn node_step_end(&mut self, job_id: u64, step_id: u32, node: String, exit: (i32, i32), now: i64) {
        let Some(rec) = self.jobs.get(&job_id) else { return };
        if let Some(s) = self.steps.jobs.get_mut(&job_id).and_then(|t| t.running.get_mut(&step_id)) {
            let on: Vec<String> = s.nodes.iter().filter_map(|&i| rec.nodes.get(i).cloned()).collect();
            let Some((exit_code, signal)) = all_nodes_ended(&mut s.node_ends, &on, node, exit) else { return };
            let (cancelled_by, start, alloc) = (s.cancelled_by, s.start_time, s.alloc);
            self.steps.jobs.get_mut(&job_id).expect("present").running.remove(&step_id);
            let c = StepComplete { job_id, step_id, exit_code, signal };
            self.record_step_end(&c, cancelled_by, (start, now), (compress_sorted(&on), alloc));
            return;
        }
        let Some(e) = self.steps.ended.get_mut(&(job_id, step_id)) else { return };
        let Some((exit_code, signal)) = all_nodes_ended(&mut e.node_ends, &e.node_names, node, exit) else { return };
        let e = self.steps.ended.remove(&(job_id, step_id)).expect("present");
        let c = StepComplete { job_id, step_id, exit_code, signal };
        // (Its end time stays the job's end.)
        self.record_step_end(&c, e.cancelled_by, (e.start_time, e.end_time), (e.nodes, e.alloc));
    }

    /// Forgets the [`EndedStep`]s whose time for a report has passed at `now`.
    pub(super) fn expire_ended_steps(&mut self, now: i64) {
        self.steps.ended.retain(|_, e| e.until > now);
    }

    /// `squeue -s`: the running steps of the jobs `q` names (all when it names none).
    pub(super) fn query_steps(&self, ident: Ident, q: &JobQuery) -> Vec<StepInfo> {
        let wanted: Vec<u64> = q.jobs.iter().map(|r| r.job_id).collect();
        let mut out = Vec::new();
        for (&job_id, t) in &self.steps.jobs {
            let Some(rec) = self.jobs.get(&job_id) else { continue };
            // PrivateData=jobs hides other users' steps too.
            if !self.opts.access.sees_jobs_of(ident, rec.uid) {
                continue;
            }
            if !wanted.is_empty() && !wanted.contains(&job_id) && !rec.array_job_id.is_some_and(|a| wanted.contains(&a)) {
                continue;
            }
            if !q.filter.users.is_empty() && !q.filter.users.contains(&rec.user) {
                continue;
            }
            for (&step_id, s) in &t.running {
                let nodes: Vec<String> = s.nodes.iter().filter_map(|&i| rec.nodes.get(i).cloned()).collect();
                let cpus: u32 = s.cpus.iter().sum();
                // The step's memory as Slurm counts it in its TRES: per CPU of the job times
                // its CPUs, else the job's per node times its nodes (none when it overlaps).
                let mem_mib = match rec.mem_per_cpu_mib {
                    _ if s.overlap => 0,
                    Some(m) => m.saturating_mul(u64::from(cpus)),
                    None => rec.mem_per_node_mib.saturating_mul(s.nodes.len() as u64),
                };
                out.push(StepInfo {
                    job_id,
                    step_id,
                    array: rec.array_job_id.zip(rec.array_task_id),
                    name: s.name.clone(),
                    state: Some(flotilla_proto::JobStateWire::Running),
                    partition: rec.partition.clone(),
                    user: rec.user.clone(),
                    start_time: s.start_time,
                    nodes: compress_sorted(&nodes),
                    ntasks: s.ntasks,
                    uid: rec.uid,
                    cpus,
                    mem_mib,
                    gpus: s.gpus.iter().map(|g| g.count_ones()).sum(),
                    srun_host: s.srun.0.clone(),
                    srun_pid: s.srun.1,
                });
            }
        }
        out
    }

    /// `REQUEST_COMPLETE_JOB_ALLOCATION`: an interactive allocation is given back; the job
    /// ends with the command's status (`COMPLETED`, or `FAILED` for a non-zero one) once
    /// every node has released it.
    pub(super) fn release_allocation(&mut self, ident: Ident, r: ReleaseAllocation, now: i64) -> Response {
        let Some(rec) = self.jobs.get_mut(&r.job_id) else {
            return Response::Error(SlurmError::new(ESLURM_INVALID_JOB_ID));
        };
        if !ident.admin && rec.uid != ident.uid {
            return Response::Error(SlurmError::new(ESLURM_ACCESS_DENIED));
        }
        if !rec.interactive {
            return Response::Error(SlurmError::new(ESLURM_NOT_SUPPORTED));
        }
        match rec.state {
            JobState::Running => {}
            JobState::Pending => {
                // Given back before it started (salloc interrupted): cancel it.
                let c = flotilla_proto::CancelJob {
                    jobs: vec![flotilla_proto::JobRef::id(r.job_id)],
                    ..Default::default()
                };
                return self.cancel(ident, c, now);
            }
            _ => return Response::JobResults(Vec::new()),
        }
        rec.exit_code = r.exit_code;
        rec.exit_signal = r.signal;
        rec.end_time = Some(now);
        rec.end_state = Some(match rec.stopping.map(|s| s.why) {
            Some(crate::job::StopWhy::Cancel) => JobState::Cancelled,
            Some(crate::job::StopWhy::Timeout) => JobState::Timeout,
            _ if r.signal != 0 || r.exit_code != 0 => JobState::Failed,
            _ => JobState::Completed,
        });
        rec.completing_nodes = rec.nodes.clone();
        rec.state = JobState::Completing;
        let nodes = rec.nodes.clone();
        info!(job = r.job_id, exit_code = r.exit_code, "allocation given back");
        self.dirty(r.job_id);
        self.end_steps(r.job_id, now);
        for n in nodes {
            self.send(&n, CtlToNode::Kill { job_id: r.job_id });
        }
        Response::JobResults(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step over a job's nodes 0, 1 and 3 after node 1 left: its part there is dropped and
    /// node 3 is now the job's node 2.
    #[test]
    fn steps_follow_nodes_leaving_the_job() {
        let mut t = StepTable::default();
        let step = RunningStep {
            name: "s".into(),
            nodes: vec![0, 1, 3],
            cpus: vec![1, 2, 3],
            exact: true,
            alloc: (6, 6144),
            gpus: vec![1, 2, 4],
            overlap: false,
            ntasks: 3,
            start_time: 0,
            cancelled_by: None,
            srun: (String::new(), 0),
            launch: None,
            node_ends: BTreeMap::new(),
        };
        t.jobs.entry(7).or_default().running.insert(0, step);
        t.nodes_left(7, &[true, false, true, true]);
        let s = &t.jobs[&7].running[&0];
        assert_eq!((s.nodes.clone(), s.cpus.clone(), s.gpus.clone()), (vec![0, 2], vec![1, 3], vec![1, 4]));
        t.nodes_left(8, &[false]);
    }

    fn offers(n: usize, cpus: u32, gpus: u64) -> Vec<NodeOffer> {
        (0..n)
            .map(|i| NodeOffer {
                name: format!("gpu0{}", i + 1),
                cpus,
                gpus,
                held_cpus: 0,
                held_gpus: 0,
            })
            .collect()
    }

    const JOB: JobDefaults = JobDefaults {
        ntasks: 16,
        cpus_per_task: 1,
    };

    #[test]
    fn sixteen_ranks_over_two_nodes_with_a_gpu_each() {
        let req = StepRequest {
            gpus_per_task: Some(1),
            ..StepRequest::default()
        };
        let p = layout(&req, &offers(2, 8, 0xff), JOB).unwrap();
        assert_eq!(p.nodes, [0, 1]);
        assert_eq!(p.counts, [8, 8]);
        assert_eq!(p.task_gpus[0], (0..8).map(|b| 1u64 << b).collect::<Vec<_>>());
        assert_eq!(p.held_gpus, [0xff, 0xff]);
    }

    #[test]
    fn block_counts_and_node_choice() {
        let o = offers(2, 8, 0);
        let p = layout(&StepRequest { ntasks: Some(3), ..Default::default() }, &o, JOB).unwrap();
        assert_eq!(p.counts, [2, 1]);
        let p = layout(&StepRequest { ntasks: Some(1), ..Default::default() }, &o, JOB).unwrap();
        assert_eq!((p.nodes.clone(), p.counts.clone()), (vec![0], vec![1]));
        let p = layout(&StepRequest { nodes: Some(1), ..Default::default() }, &o, JOB).unwrap();
        assert_eq!((p.nodes.clone(), p.counts.clone()), (vec![0], vec![1]));
        let p = layout(
            &StepRequest {
                nodelist: vec!["gpu02".into()],
                ..Default::default()
            },
            &o,
            JOB,
        )
        .unwrap();
        assert_eq!((p.nodes.clone(), p.counts.clone()), (vec![1], vec![1]));
        let p = layout(&StepRequest { ntasks_per_node: Some(2), ..Default::default() }, &o, JOB).unwrap();
        assert_eq!(p.counts, [2, 2]);
    }

    proptest::proptest! {
        /// Whatever is asked, a step that is laid out has the tasks asked for (or the job's
        /// default), consecutive ids per node in node order, never more CPUs than the job has
        /// free on a node, and with `--gpus-per-task` disjoint GPUs of the job's, free ones.
        #[test]
        fn layouts_respect_the_job(
            nodes in 1usize..5,
            cpus in 1u32..16,
            gpus in 0u32..9,
            held_cpus in proptest::collection::vec(0u32..16, 4),
            held_gpu_bits in proptest::collection::vec(0u64..256, 4),
            ntasks in proptest::option::of(1u32..40),
            nnodes in proptest::option::of(1u32..6),
            tpn in proptest::option::of(1u32..10),
            cpt in proptest::option::of(1u32..4),
            gpt in proptest::option::of(1u32..4),
            overlap in proptest::bool::ANY,
            exact in proptest::bool::ANY,
            job_ntasks in 1u32..20,
        ) {
            let mask = if gpus == 0 { 0 } else { (1u64 << gpus) - 1 };
            let offers: Vec<NodeOffer> = (0..nodes)
                .map(|i| NodeOffer {
                    name: format!("n{i}"),
                    cpus,
                    gpus: mask,
                    held_cpus: held_cpus[i % 4].min(cpus),
                    held_gpus: held_gpu_bits[i % 4] & mask,
                })
                .collect();
            let req = StepRequest {
                ntasks,
                nodes: nnodes,
                ntasks_per_node: tpn,
                cpus_per_task: cpt,
                gpus_per_task: gpt,
                overlap,
                exact,
                ..StepRequest::default()
            };
            let job = JobDefaults { ntasks: job_ntasks, cpus_per_task: 1 };
            if let Ok(p) = layout(&req, &offers, job) {
                let total: u32 = p.counts.iter().sum();
                let want = ntasks.unwrap_or(match (tpn, nnodes) {
                    (Some(t), Some(n)) => t * n,
                    (Some(t), None) => t * nodes as u32,
                    (None, Some(n)) => n,
                    (None, None) => job_ntasks,
                });
                proptest::prop_assert_eq!(total, want);
                proptest::prop_assert!(p.nodes.windows(2).all(|w| w[0] < w[1]));
                proptest::prop_assert!(p.counts.iter().all(|&c| c > 0));
                if let Some(t) = tpn {
                    proptest::prop_assert!(p.counts.iter().all(|&c| c <= t));
                }
                for (k, &i) in p.nodes.iter().enumerate() {
                    let o = &offers[i];
                    let need = p.counts[k] * p.cpus_per_task;
                    proptest::prop_assert!(need <= o.cpus);
                    if !overlap {
                        proptest::prop_assert!(need <= o.cpus - o.held_cpus);
                    }
                    // A whole step takes only nodes no other step holds CPUs on (unless it
                    // overlaps), and all the job's CPUs there; an exact one its tasks'.
                    if !exact && !overlap {
                        proptest::prop_assert_eq!(o.held_cpus, 0);
                    }
                    proptest::prop_assert_eq!(p.cpus[k], if exact { need } else { o.cpus });
                    if let Some(g) = gpt {
                        let mut seen = 0u64;
                        for &m in &p.task_gpus[k] {
                            proptest::prop_assert_eq!(m.count_ones(), g);
                            proptest::prop_assert_eq!(m & seen, 0);
                            proptest::prop_assert_eq!(m & !o.gpus, 0);
                            if !overlap {
                                proptest::prop_assert_eq!(m & o.held_gpus, 0);
                            }
                            seen |= m;
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn absurd_requests_are_refused_not_overflowed() {
        let o = offers(2, 8, 0xff);
        for r in [
            StepRequest { ntasks_per_node: Some(u32::MAX), nodes: Some(2), ..Default::default() },
            StepRequest { ntasks: Some(u32::MAX), cpus_per_task: Some(u32::MAX), ..Default::default() },
            StepRequest { ntasks: Some(2), gpus_per_task: Some(u32::MAX), ..Default::default() },
            StepRequest { ntasks_per_node: Some(u32::MAX), ..Default::default() },
        ] {
            assert!(layout(&r, &o, JOB).is_err(), "{r:?}");
        }
    }

    #[test]
    fn refusals() {
        let o = offers(2, 2, 0b11);
        let code = |r: StepRequest| layout(&r, &o, JOB).unwrap_err().code;
        assert_eq!(code(StepRequest { ntasks: Some(5), ..Default::default() }), ESLURM_TOO_MANY_REQUESTED_CPUS);
        assert_eq!(code(StepRequest { nodes: Some(3), ..Default::default() }), ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE);
        assert_eq!(
            code(StepRequest {
                nodelist: vec!["gpu09".into()],
                ..Default::default()
            }),
            ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE
        );
        assert_eq!(
            code(StepRequest {
                ntasks: Some(2),
                gpus_per_task: Some(2),
                nodes: Some(1),
                ..Default::default()
            }),
            ESLURM_INVALID_GRES
        );
        // Held by another step: busy, unless overlapping.
        let mut held = o.clone();
        held[0].held_cpus = 2;
        held[1].held_cpus = 2;
        let one = StepRequest { ntasks: Some(1), ..Default::default() };
        assert_eq!(layout(&one, &held, JOB).unwrap_err().code, ESLURM_NODES_BUSY);
        assert!(layout(&StepRequest { overlap: true, ..one.clone() }, &held, JOB).is_ok());
        // One node held: a one-task step goes to the other; one on that node (-w) waits.
        held[1].held_cpus = 0;
        assert_eq!(layout(&one, &held, JOB).unwrap().nodes, [1]);
        let on_first = StepRequest {
            nodelist: vec!["gpu01".into()],
            ..one.clone()
        };
        assert_eq!(layout(&on_first, &held, JOB).unwrap_err().code, ESLURM_NODES_BUSY);
    }

    /// Slurm 22.05's `--whole` default: a step holds all of the job's CPUs on its nodes and
    /// waits while another holds any there; `--exact` steps share a node's CPUs (goldens-extra
    /// `a03_step_whole_cpus`, `a03_step_exact_cpus`).
    #[test]
    fn whole_and_exact_steps() {
        let mut o = offers(1, 4, 0);
        let one = StepRequest { ntasks: Some(1), ..Default::default() };
        let exact = StepRequest { exact: true, ..one.clone() };
        assert_eq!(layout(&one, &o, JOB).unwrap().cpus, [4]);
        assert_eq!(layout(&exact, &o, JOB).unwrap().cpus, [1]);
        o[0].held_cpus = 1;
        assert_eq!(layout(&one, &o, JOB).unwrap_err().code, ESLURM_NODES_BUSY);
        let two = StepRequest { ntasks: Some(2), ..exact.clone() };
        assert_eq!(layout(&two, &o, JOB).unwrap().cpus, [2]);
        let c2 = StepRequest { cpus_per_task: Some(2), ..exact.clone() };
        assert_eq!(layout(&c2, &o, JOB).unwrap().cpus, [2]);
        o[0].held_cpus = 3;
        assert_eq!(layout(&c2, &o, JOB).unwrap_err().code, ESLURM_NODES_BUSY);
        assert_eq!(layout(&exact, &o, JOB).unwrap().cpus, [1]);
    }
}
